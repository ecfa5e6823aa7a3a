/* fuzz_vocabs.c — the fuzz targets' vocabularies (see fuzz_vocabs.h). */
#include "fuzz_vocabs.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_model_writer.h"
#include "synth_vocab.h"

/* Synthetic tokens kept from the built-in SPM vocabulary: the 259 fixed ones,
 * "▁", printable ASCII and the first word prefixes. Small keeps the vocab
 * seed of fuzz_vocab small. */
#define SPM_BASE_TOKENS 380

static vt_status write_spm(const char *path, vt_error *err) {
    vt_synth_vocab v;
    vt_status st = vt_synth_vocab_build(SPM_BASE_TOKENS, &v, err);
    if (st != VT_OK) return st;
    int32_t n = SPM_BASE_TOKENS + 2;
    const char **tokens = malloc((size_t)n * sizeof *tokens);
    float *scores = malloc((size_t)n * sizeof *scores);
    int32_t *types = malloc((size_t)n * sizeof *types);
    vt_gguf_writer *w = NULL;
    if (!tokens || !scores || !types) {
        st = vt_fail(err, VT_ERR_NOMEM, "fuzz vocab: out of memory");
    } else {
        memcpy(tokens, v.tokens, SPM_BASE_TOKENS * sizeof *tokens);
        memcpy(scores, v.scores, SPM_BASE_TOKENS * sizeof *scores);
        memcpy(types, v.types, SPM_BASE_TOKENS * sizeof *types);
        tokens[n - 2] = FUZZ_USER_TOKEN, scores[n - 2] = 0, types[n - 2] = 4;
        tokens[n - 1] = FUZZ_CONTROL_TOKEN, scores[n - 1] = 0, types[n - 1] = VT_TOKEN_CONTROL;
        st = vt_gguf_writer_create(path, &w, err);
    }
    if (st == VT_OK) {
        vt_gguf_writer_set_str(w, "general.architecture", "llama");
        gmw_vocab vocab = {.model = "llama", .tokens = tokens, .scores = scores, .types = types, .n_tokens = (size_t)n};
        gmw_set_vocab(w, &vocab);
        vt_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
        vt_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
        vt_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
        vt_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
        st = gmw_finish(w, err);
    }
    free(tokens);
    free(scores);
    free(types);
    vt_synth_vocab_free(&v);
    return st;
}

#define G GMW_BYTE_LEVEL_SPACE

/* Merges in rank order; each result is a token. "Ã ©" is the two bytes of
 * UTF-8 'é' (C3 A9) in the byte-level alphabet. */
static const char *const bpe_merges[][2] = {
    {"t", "h"}, {"h", "e"}, {"th", "e"}, {G, "t"}, {G "t", "he"}, {"i", "n"}, {"in", "g"}, {"a", "b"},
    {"1", "2"}, {G, G},     {"\xc3\x83", "\xc2\xa9"}, {"'", "s"}, {G, "a"},
};
#define N_MERGES (sizeof bpe_merges / sizeof bpe_merges[0])
static const char *const bpe_specials[] = {"<|endoftext|>", FUZZ_CONTROL_TOKEN, FUZZ_USER_TOKEN};
static const int32_t bpe_special_types[] = {VT_TOKEN_CONTROL, VT_TOKEN_CONTROL, 4};
#define N_SPECIALS (sizeof bpe_specials / sizeof bpe_specials[0])

static vt_status write_bpe(const char *pre, const char *path, vt_error *err) {
    enum { N_EXTRA = N_MERGES + N_SPECIALS };
    char merged[N_MERGES][16], merge_text[N_MERGES][16];
    const char *extra[N_EXTRA], *merges[N_MERGES];
    int32_t types[N_EXTRA];
    for (size_t i = 0; i < N_MERGES; i++) {
        snprintf(merged[i], sizeof merged[i], "%s%s", bpe_merges[i][0], bpe_merges[i][1]);
        snprintf(merge_text[i], sizeof merge_text[i], "%s %s", bpe_merges[i][0], bpe_merges[i][1]);
        extra[i] = merged[i];
        types[i] = VT_TOKEN_NORMAL;
        merges[i] = merge_text[i];
    }
    for (size_t i = 0; i < N_SPECIALS; i++) {
        extra[N_MERGES + i] = bpe_specials[i];
        types[N_MERGES + i] = bpe_special_types[i];
    }
    vt_gguf_writer *w = NULL;
    vt_status st = vt_gguf_writer_create(path, &w, err);
    if (st != VT_OK) return st;
    uint32_t endoftext = 256 + N_MERGES;
    vt_gguf_writer_set_str(w, "general.architecture", "qwen2");
    gmw_bpe_vocab vocab = {
        .pre = pre, .extra_tokens = extra, .extra_types = types, .n_extra = N_EXTRA, .merges = merges, .n_merges = N_MERGES};
    gmw_set_byte_level_bpe(w, &vocab);
    vt_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", endoftext);
    vt_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", endoftext);
    return gmw_finish(w, err);
}

vt_status fuzz_vocab_write(fuzz_vocab_kind kind, const char *path, vt_error *err) {
    switch (kind) {
    case FUZZ_VOCAB_SPM: return write_spm(path, err);
    case FUZZ_VOCAB_BPE_QWEN2: return write_bpe("qwen2", path, err);
    case FUZZ_VOCAB_BPE_LLAMA3: return write_bpe("llama-bpe", path, err);
    case FUZZ_VOCAB_KINDS: break;
    }
    return vt_fail(err, VT_ERR_INVALID, "fuzz vocab: unknown kind %d", (int)kind);
}
