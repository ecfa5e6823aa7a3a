/* make_corpus.c — writes the fuzz seed corpus with vt's own GGUF writer.
 *
 * Usage: make_corpus DIR. The seeds are tiny valid files that between them
 * hold every metadata type, nested arrays, arrays of strings, every dtype and
 * the llama/qwen key layouts, so mutations start from deep in the format. The
 * output is committed in tests/fuzz/corpus/ (rerun this after format changes). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf_model_writer.h"
#include "quant.h"

static int fill_tensor(vt_gguf_writer *w, int32_t dtype, int ndim, const int64_t *ne, unsigned seed) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= ne[d];
    float src[4096];
    unsigned char dst[4096 * 8];
    if (n > 4096) return 1;
    for (int64_t i = 0; i < n; i++) src[i] = (float)((int)((i * 37 + seed * 11) % 19) - 9) / 16.0f;
    if (vt_from_f32(dtype, src, dst, n) != VT_OK) return 1;
    size_t bytes = vt_row_size(dtype, ne[0]) * (size_t)(n / ne[0]);
    return vt_gguf_writer_write_data(w, dst, bytes) != VT_OK;
}

/* A model-shaped file: arch keys, a 6-token vocabulary, one layer of small tensors. */
static int write_model(const char *dir, const char *arch, int32_t wtype, int version) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-%s%s.gguf", dir, arch, vt_dtype_name(wtype), version == 2 ? "-v2" : "");
    vt_gguf_writer *w = NULL;
    vt_error err = {0};
    if (vt_gguf_writer_create(path, &w, &err)) return 1;
    char key[128];
    vt_gguf_writer_set_str(w, "general.architecture", arch);
    vt_gguf_writer_set_u32(w, "general.alignment", 32);
#define ARCH_KEY(k) (snprintf(key, sizeof key, "%s." k, arch), key)
    vt_gguf_writer_set_u32(w, ARCH_KEY("context_length"), 64);
    vt_gguf_writer_set_u32(w, ARCH_KEY("embedding_length"), 32);
    vt_gguf_writer_set_u32(w, ARCH_KEY("block_count"), 1);
    vt_gguf_writer_set_u32(w, ARCH_KEY("feed_forward_length"), 64);
    vt_gguf_writer_set_u32(w, ARCH_KEY("attention.head_count"), 2);
    vt_gguf_writer_set_u32(w, ARCH_KEY("attention.head_count_kv"), 1);
    vt_gguf_writer_set_f32(w, ARCH_KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    vt_gguf_writer_set_f32(w, ARCH_KEY("rope.freq_base"), 10000.0f);
    const char *tokens[6] = {"<unk>", "<s>", "</s>", "<0x41>", "\xe2\x96\x81the", "a"};
    const float scores[6] = {0, 0, 0, 0, -1.5f, -2.5f};
    const int32_t types[6] = {2, 3, 3, 6, 1, 1};
    gmw_vocab vocab = {.model = "llama", .tokens = tokens, .scores = scores, .types = types, .n_tokens = 6};
    gmw_set_vocab(w, &vocab);
    vt_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    vt_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    static const struct {
        const char *name;
        int ndim;
        int64_t ne[2];
        bool weight;
    } tensors[] = {
        {"token_embd.weight", 2, {32, 6}, true},   {"output_norm.weight", 1, {32, 1}, false},
        {"blk.0.attn_norm.weight", 1, {32, 1}, false}, {"blk.0.attn_q.weight", 2, {32, 32}, true},
        {"blk.0.attn_k.weight", 2, {32, 16}, true}, {"blk.0.ffn_down.weight", 2, {64, 32}, true},
    };
    int n = sizeof tensors / sizeof tensors[0];
    for (int i = 0; i < n; i++)
        vt_gguf_writer_add_tensor(w, tensors[i].name, tensors[i].weight ? wtype : VT_F32, tensors[i].ndim,
                                  tensors[i].ne);
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad |= fill_tensor(w, tensors[i].weight ? wtype : VT_F32, tensors[i].ndim, tensors[i].ne, (unsigned)i);
    if (bad || vt_gguf_writer_finish(w, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    if (version == 2) { /* v2 differs from v3 only in the version field */
        FILE *f = fopen(path, "r+b");
        if (!f) return 1;
        fseek(f, 4, SEEK_SET);
        fputc(2, f);
        fclose(f);
    }
    return 0;
}

/* Every metadata type, nested arrays, and one small tensor of each k-quant. */
static int write_types(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/all-types.gguf", dir);
    vt_gguf_writer *w = NULL;
    vt_error err = {0};
    if (vt_gguf_writer_create(path, &w, &err)) return 1;
    vt_gguf_value v = {.type = VT_GGUF_INT8, .v.i64 = -3};
    vt_gguf_writer_set_value(w, "t.i8", &v);
    v = (vt_gguf_value){.type = VT_GGUF_UINT16, .v.u64 = 999};
    vt_gguf_writer_set_value(w, "t.u16", &v);
    v = (vt_gguf_value){.type = VT_GGUF_FLOAT64, .v.f64 = 0.25};
    vt_gguf_writer_set_value(w, "t.f64", &v);
    v = (vt_gguf_value){.type = VT_GGUF_INT64, .v.i64 = -5};
    vt_gguf_writer_set_value(w, "t.i64", &v);
    vt_gguf_writer_set_u64(w, "t.u64", 12345);
    vt_gguf_writer_set_i32(w, "t.i32", -7);
    const uint8_t bools[2] = {0, 1};
    vt_gguf_writer_set_arr(w, "t.bools", VT_GGUF_BOOL, bools, 2);
    const int32_t a[2] = {1, 2};
    vt_gguf_value rows[2] = {{.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_INT32, .n = 2, .data = a}},
                             {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_INT32, .n = 1, .data = a}}};
    v = (vt_gguf_value){.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_ARRAY, .n = 2, .items = rows}};
    vt_gguf_writer_set_value(w, "t.nested", &v);
    vt_gguf_value strs[1] = {{.type = VT_GGUF_STRING, .v.str = {2, "ab"}}};
    vt_gguf_value srow = {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_STRING, .n = 1, .items = strs}};
    v = (vt_gguf_value){.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_ARRAY, .n = 1, .items = &srow}};
    vt_gguf_writer_set_value(w, "t.nested_str", &v);
    const int32_t kq[] = {VT_Q4_K, VT_Q5_K, VT_Q6_K, VT_Q4_0, VT_BF16, VT_F16, VT_I32};
    const int64_t ne[2] = {256, 1};
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "t.%s", vt_dtype_name(kq[i]));
        vt_gguf_writer_add_tensor(w, name, kq[i], 1, ne);
    }
    int bad = 0;
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) {
        if (kq[i] == VT_I32) {
            int32_t ints[256] = {0};
            bad |= vt_gguf_writer_write_data(w, ints, sizeof ints) != VT_OK;
        } else {
            bad |= fill_tensor(w, kq[i], 1, ne, (unsigned)i);
        }
    }
    if (bad || vt_gguf_writer_finish(w, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    if (mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: cannot create: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int bad = write_types(argv[1]);
    bad |= write_model(argv[1], "llama", VT_Q8_0, 3);
    bad |= write_model(argv[1], "qwen3", VT_F32, 3);
    bad |= write_model(argv[1], "qwen2", VT_Q4_0, 2);
    return bad;
}
