/* hostile_models.c — see hostile_models.h. */
#include "hostile_models.h"

#include "gguf_model_writer.h"
#include "synth.h"

vt_status hm_write_tiny(const char *path, const char *vocab_from, int32_t head_dim, vt_error *err) {
    vt_synth_params p = {
        .arch = "qwen3",
        .n_embd = HM_N_EMBD,
        .n_layer = 1,
        .n_head = HM_N_HEAD,
        .n_head_kv = 1,
        .head_dim = head_dim > 0 ? head_dim : HM_HEAD_DIM,
        .n_ff = 128,
        .n_vocab = HM_N_VOCAB,
        .n_ctx = 256,
        .tied_output = true,
        .type = "f32",
        .seed = 7,
        .vocab_from = vocab_from,
    };
    return vt_synth_write(&p, path, err);
}

vt_status hm_write_bpe_vocab(const char *path, vt_error *err) {
    static const char *const ab[] = {"ab"}, *const a_b[] = {"a b"};
    vt_gguf_writer *w = NULL;
    vt_status st = vt_gguf_writer_create(path, &w, err);
    if (st != VT_OK) return st;
    gmw_bpe_vocab v = {.pre = "qwen2", .extra_tokens = ab, .n_extra = 1, .merges = a_b, .n_merges = 1};
    gmw_set_byte_level_bpe(w, &v);
    vt_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    return gmw_finish(w, err);
}

int hm_count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++)
        if (*s == '\n' || s[1] == '\0') n++;
    return n;
}
