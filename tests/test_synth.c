/* test_synth.c — synthetic models: each arch in several weight types is read
 * back and checked against the requested shape, metadata, vocabulary and the
 * llama-quantize type mix; values have the promised distributions; the same
 * seed gives the same file; bad parameters are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "model.h"
#include "quant.h"
#include "synth.h"
#include "util.h"

/* A small model: 256 wide so K-quants fit, 8 layers so the use_more_bits
 * pattern has every case. */
static vt_synth_params small_params(const char *arch, const char *type) {
    vt_synth_params p = {0};
    p.arch = arch;
    p.n_embd = 256;
    p.n_layer = 8;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ff = 512;
    p.n_vocab = 300;
    p.n_ctx = 128;
    p.tied_output = strcmp(arch, "llama") != 0; /* llama untied, qwens tied */
    p.type = type;
    p.seed = 42;
    return p;
}

static vt_gguf *write_and_open(const vt_synth_params *p, const char *file) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, file);
    vt_error err = {0};
    vt_status st = vt_synth_write(p, path, &err);
    if (st) fprintf(stderr, "\nsynth %s: %s\n", file, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    vt_gguf *g = NULL;
    st = vt_gguf_open(path, &g, &err);
    if (st) fprintf(stderr, "\nopen %s: %s\n", file, err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    return g;
}

static uint32_t get_u32(const vt_gguf *g, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v = 0xFFFFFFFFu;
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, key, &v, NULL), VT_OK);
    return v;
}

static float get_f32(const vt_gguf *g, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v = -1;
    CU_ASSERT_EQUAL(vt_gguf_get_f32(g, key, &v, NULL), VT_OK);
    return v;
}

/* The layers where llama.cpp's use_more_bits(i, n) holds (i < n/8, i >= 7n/8,
 * (i - n/8) % 3 == 2), written out for the layer counts used here:
 * n = 8: 0, 3, 6, 7; n = 4: 2, 3; n = 2: 1. */
static bool more_bits_layer(int i, int n_layer) {
    switch (n_layer) {
    case 8: return i == 0 || i == 3 || i == 6 || i == 7;
    case 4: return i == 2 || i == 3;
    case 2: return i == 1;
    default: CU_FAIL("no use_more_bits table for this layer count"); return false;
    }
}

/* Expected dtype of a tensor under the mix, written out per mix from the
 * rules in synth.c's header comment (all row lengths here are multiples of 256). */
static int32_t expected_dtype(const char *type, const char *name, bool tied, int n_layer) {
    bool is_1d = strstr(name, "norm") || strstr(name, ".bias");
    if (is_1d) return VT_F32;
    bool output = !strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"));
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    bool bumped = (strstr(name, "attn_v.weight") || strstr(name, "ffn_down.weight")) && more_bits_layer(layer, n_layer);
    if (!strcmp(type, "f32")) return VT_F32;
    if (!strcmp(type, "f16")) return VT_F16;
    if (!strcmp(type, "bf16")) return VT_BF16;
    if (!strcmp(type, "q8_0")) return VT_Q8_0;
    if (!strcmp(type, "q6_k")) return VT_Q6_K;
    if (!strcmp(type, "q4_0")) return output ? VT_Q6_K : VT_Q4_0;
    if (!strcmp(type, "q4_k_m")) return output || bumped ? VT_Q6_K : VT_Q4_K;
    if (!strcmp(type, "q5_k_m")) return output || bumped ? VT_Q6_K : VT_Q5_K;
    return -1;
}

static void check_model(const vt_gguf *g, const vt_synth_params *p) {
    const char *arch = p->arch;
    int head_dim = p->n_embd / p->n_head;
    vt_gguf_str s = {0};
    CU_ASSERT_EQUAL(vt_gguf_get_str(g, "general.architecture", &s, NULL), VT_OK);
    CU_ASSERT(vt_gguf_str_eq(s, arch));
    CU_ASSERT_EQUAL(get_u32(g, arch, "context_length"), (uint32_t)p->n_ctx);
    CU_ASSERT_EQUAL(get_u32(g, arch, "embedding_length"), (uint32_t)p->n_embd);
    CU_ASSERT_EQUAL(get_u32(g, arch, "block_count"), (uint32_t)p->n_layer);
    CU_ASSERT_EQUAL(get_u32(g, arch, "feed_forward_length"), (uint32_t)p->n_ff);
    CU_ASSERT_EQUAL(get_u32(g, arch, "attention.head_count"), (uint32_t)p->n_head);
    CU_ASSERT_EQUAL(get_u32(g, arch, "attention.head_count_kv"), (uint32_t)p->n_head_kv);
    bool llama = !strcmp(arch, "llama");
    CU_ASSERT_EQUAL(get_f32(g, arch, "attention.layer_norm_rms_epsilon"), llama ? 1e-5f : 1e-6f);
    CU_ASSERT_EQUAL(get_f32(g, arch, "rope.freq_base"), llama ? 10000.0f : 1000000.0f);
    if (llama) CU_ASSERT_EQUAL(get_u32(g, arch, "rope.dimension_count"), (uint32_t)head_dim);
    if (!strcmp(arch, "qwen3")) CU_ASSERT_EQUAL(get_u32(g, arch, "attention.key_length"), (uint32_t)head_dim);
    if (!strcmp(arch, "qwen2")) CU_ASSERT_PTR_NULL(vt_gguf_find(g, "qwen2.attention.key_length"));
    uint32_t file_type = 99;
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "general.file_type", &file_type, NULL), VT_OK);
    static const struct {
        const char *type;
        uint32_t ftype;
    } ftypes[] = {{"f32", 0},  {"f16", 1},     {"bf16", 32},    {"q8_0", 7},
                  {"q4_0", 2}, {"q4_k_m", 15}, {"q5_k_m", 17}, {"q6_k", 18}};
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (!strcmp(ftypes[i].type, p->type)) CU_ASSERT_EQUAL(file_type, ftypes[i].ftype);

    /* the built-in vocabulary */
    const vt_gguf_array *tokens = NULL, *types = NULL, *scores = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_gguf_get_arr(g, "tokenizer.ggml.tokens", VT_GGUF_STRING, &tokens, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_get_arr(g, "tokenizer.ggml.token_type", VT_GGUF_INT32, &types, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_get_arr(g, "tokenizer.ggml.scores", VT_GGUF_FLOAT32, &scores, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(tokens->n, (uint64_t)p->n_vocab);
    CU_ASSERT_EQUAL(types->n, (uint64_t)p->n_vocab);
    CU_ASSERT_EQUAL(scores->n, (uint64_t)p->n_vocab);
    CU_ASSERT(vt_gguf_str_eq(tokens->items[0].v.str, "<unk>"));
    CU_ASSERT(vt_gguf_str_eq(tokens->items[1].v.str, "<s>"));
    CU_ASSERT(vt_gguf_str_eq(tokens->items[2].v.str, "</s>"));
    CU_ASSERT(vt_gguf_str_eq(tokens->items[3].v.str, "<0x00>"));
    CU_ASSERT(vt_gguf_str_eq(tokens->items[258].v.str, "<0xFF>"));
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(types, 0), 2);   /* UNKNOWN */
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(types, 1), 3);   /* CONTROL */
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(types, 100), 6); /* BYTE */
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(types, 259), 1); /* NORMAL: the first text piece */
    uint32_t bos = 0, eos = 0;
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos, NULL), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos, NULL), VT_OK);
    CU_ASSERT_EQUAL(bos, 1);
    CU_ASSERT_EQUAL(eos, 2);
    CU_ASSERT_PTR_NOT_NULL(vt_gguf_find(g, "tokenizer.ggml.model"));
    /* token strings are unique */
    int dups = 0;
    for (uint64_t i = 0; i < tokens->n; i++)
        for (uint64_t j = i + 1; j < tokens->n; j++) {
            vt_gguf_str a = tokens->items[i].v.str, b = tokens->items[j].v.str;
            dups += a.len == b.len && memcmp(a.data, b.data, (size_t)a.len) == 0;
        }
    CU_ASSERT_EQUAL(dups, 0);

    /* tensors: names, shapes, the type mix */
    bool qwen2 = !strcmp(arch, "qwen2"), qwen3 = !strcmp(arch, "qwen3");
    int64_t expect_n = 2 + (p->tied_output ? 0 : 1) + p->n_layer * (9 + (qwen2 ? 3 : 0) + (qwen3 ? 2 : 0));
    CU_ASSERT_EQUAL(vt_gguf_n_tensors(g), expect_n);
    int64_t d = p->n_embd, q = (int64_t)p->n_head * head_dim, kv = (int64_t)p->n_head_kv * head_dim;
    const vt_gguf_tensor *emb = vt_gguf_find_tensor(g, "token_embd.weight");
    CU_ASSERT_PTR_NOT_NULL_FATAL(emb);
    CU_ASSERT(emb->ne[0] == d && emb->ne[1] == p->n_vocab);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "output.weight") == NULL, p->tied_output);
    for (int l = 0; l < p->n_layer; l++) {
        char name[64];
        struct {
            const char *suffix;
            int64_t ne0, ne1;
        } expect[] = {{"attn_q.weight", d, q},        {"attn_k.weight", d, kv},    {"attn_v.weight", d, kv},
                      {"attn_output.weight", q, d},   {"ffn_gate.weight", d, p->n_ff}, {"ffn_up.weight", d, p->n_ff},
                      {"ffn_down.weight", p->n_ff, d}, {"attn_norm.weight", d, 1}, {"ffn_norm.weight", d, 1}};
        for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
            snprintf(name, sizeof name, "blk.%d.%s", l, expect[k].suffix);
            const vt_gguf_tensor *t = vt_gguf_find_tensor(g, name);
            CU_ASSERT_PTR_NOT_NULL_FATAL(t);
            CU_ASSERT(t->ne[0] == expect[k].ne0 && t->ne[1] == expect[k].ne1);
        }
        snprintf(name, sizeof name, "blk.%d.attn_q.bias", l);
        CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, name) != NULL, qwen2);
        snprintf(name, sizeof name, "blk.%d.attn_k_norm.weight", l);
        const vt_gguf_tensor *kn = vt_gguf_find_tensor(g, name);
        CU_ASSERT_EQUAL(kn != NULL, qwen3);
        if (kn) CU_ASSERT_EQUAL(kn->ne[0], head_dim);
    }
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        int32_t want = expected_dtype(p->type, t->name, p->tied_output, p->n_layer);
        if (t->dtype != want)
            fprintf(stderr, "\n%s %s: %s is %s, expected %s\n", arch, p->type, t->name, vt_dtype_name(t->dtype),
                    vt_dtype_name(want));
        CU_ASSERT_EQUAL(t->dtype, want);
    }
}

/* The _k_m mixes depend on the layer: 8 layers give every case of
 * use_more_bits, 4 another pattern. The other types are the same in every
 * layer, so 2 layers check them (and the per-layer names and shapes) at a
 * fraction of the quantization time, which is most of this suite's. */
static void test_archs_and_types(void) {
    static const struct {
        const char *arch, *type;
        int n_layer;
    } cases[] = {
        {"llama", "q4_k_m", 8}, {"llama", "q4_0", 2}, {"llama", "f16", 2},  {"qwen2", "q4_k_m", 4},
        {"qwen2", "f32", 2},    {"qwen3", "q5_k_m", 8}, {"qwen3", "q6_k", 2}, {"qwen3", "bf16", 2},
        {"qwen3", "q8_0", 2},   {"qwen3", "q4_0", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vt_synth_params p = small_params(cases[i].arch, cases[i].type);
        p.n_layer = cases[i].n_layer;
        char file[64];
        snprintf(file, sizeof file, "%s-%s.gguf", cases[i].arch, cases[i].type);
        vt_gguf *g = write_and_open(&p, file);
        check_model(g, &p);
        vt_gguf_close(g);
    }
}

/* Mean and standard deviation of a tensor's values (dequantized). */
static void tensor_stats(const vt_gguf_tensor *t, double *mean, double *std) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->ne[d];
    float *f = malloc((size_t)n * sizeof *f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(t->dtype, t->data, f, n), VT_OK);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += f[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (f[i] - *mean) * (f[i] - *mean);
    *std = sqrt(s2 / (double)n);
    free(f);
}

static void test_value_distributions(void) {
    vt_synth_params p = small_params("qwen2", "f32");
    p.n_layer = 1;
    vt_gguf *g = write_and_open(&p, "dist.gguf");
    double mean, std;
    /* 256x512 = 131072 samples: the sample std of N(0, s) is within 1% of s
     * (its relative error is ~1/sqrt(2n) = 0.2%), and the mean within 5 s/sqrt(n) */
    tensor_stats(vt_gguf_find_tensor(g, "blk.0.ffn_up.weight"), &mean, &std);
    CU_ASSERT(fabs(std - 0.02) < 0.02 * 0.01);
    CU_ASSERT(fabs(mean) < 5 * 0.02 / sqrt(131072.0));
    /* norms: 1 + N(0, 0.02) over 256 values (std within 25%: 256 samples give ~4.4% relative error) */
    tensor_stats(vt_gguf_find_tensor(g, "blk.0.attn_norm.weight"), &mean, &std);
    CU_ASSERT(fabs(mean - 1.0) < 5 * 0.02 / 16);
    CU_ASSERT(fabs(std - 0.02) < 0.02 * 0.25);
    /* q bias: N(0, 0.5) over 256 values */
    tensor_stats(vt_gguf_find_tensor(g, "blk.0.attn_q.bias"), &mean, &std);
    CU_ASSERT(fabs(mean) < 5 * 0.5 / 16);
    CU_ASSERT(fabs(std - 0.5) < 0.5 * 0.25);
    vt_gguf_close(g);
}

/* A tensor's values depend on seed and name only: the q8_0 file holds the
 * f32 file's values up to Q8_0 rounding. */
static void test_types_share_values(void) {
    vt_synth_params p = small_params("llama", "f32");
    p.n_layer = 1;
    vt_gguf *gf = write_and_open(&p, "same-f32.gguf");
    p.type = "q8_0";
    vt_gguf *gq = write_and_open(&p, "same-q8.gguf");
    const vt_gguf_tensor *tf = vt_gguf_find_tensor(gf, "blk.0.attn_q.weight");
    const vt_gguf_tensor *tq = vt_gguf_find_tensor(gq, "blk.0.attn_q.weight");
    int64_t n = tf->ne[0] * tf->ne[1];
    float *deq = malloc((size_t)n * sizeof *deq);
    CU_ASSERT_PTR_NOT_NULL_FATAL(deq);
    CU_ASSERT_EQUAL_FATAL(tq->dtype, VT_Q8_0);
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_Q8_0, tq->data, deq, n), VT_OK);
    const float *ref = tf->data;
    /* Q8_0 rounds to half a step of amax/127 per block; amax of 32 N(0, 0.02)
     * values stays below 6 sigma = 0.12, so the error is below 0.12/254 < 5e-4
     * (plus the fp16 rounding of the scale, 0.05% of amax) */
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)deq[i] - ref[i]));
    CU_ASSERT(worst < 5e-4);
    CU_ASSERT(worst > 0); /* and they really were quantized */
    free(deq);
    vt_gguf_close(gf);
    vt_gguf_close(gq);
}

static void test_seed_determinism(void) {
    char a[512], b[512], c[512];
    vt_synth_params p = small_params("qwen3", "q4_k_m");
    p.n_layer = 1; /* 13 tensors, many row groups: enough to spread over 3 threads */
    vt_test_tmpfile(a, sizeof a, "seed-a.gguf");
    vt_test_tmpfile(b, sizeof b, "seed-b.gguf");
    vt_test_tmpfile(c, sizeof c, "seed-c.gguf");
    p.n_threads = 1;
    CU_ASSERT_EQUAL_FATAL(vt_synth_write(&p, a, NULL), VT_OK);
    p.n_threads = 3; /* the thread count does not change the values */
    CU_ASSERT_EQUAL_FATAL(vt_synth_write(&p, b, NULL), VT_OK);
    p.seed = 43;
    CU_ASSERT_EQUAL_FATAL(vt_synth_write(&p, c, NULL), VT_OK);
    size_t na = 0, nb = 0, nc = 0;
    char *fa = vt_test_read_file(a, &na), *fb = vt_test_read_file(b, &nb), *fc = vt_test_read_file(c, &nc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fa);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fb);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fc);
    CU_ASSERT(na == nb && memcmp(fa, fb, na) == 0);
    CU_ASSERT(na == nc && memcmp(fa, fc, na) != 0); /* same layout, other values */
    free(fa);
    free(fb);
    free(fc);
}

/* Rows that do not fit a type's blocks fall back as documented in synth.c. */
static void test_block_fallbacks(void) {
    vt_synth_params p = small_params("llama", "q4_k_m");
    p.n_embd = 96; /* a multiple of 32, not of 256 */
    p.n_head = 2;
    p.n_head_kv = 2;
    p.n_ff = 200; /* not even a multiple of 32 */
    p.n_layer = 1;
    vt_gguf *g = write_and_open(&p, "fallback.gguf");
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "output.weight")->dtype, VT_Q8_0);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "token_embd.weight")->dtype, VT_Q8_0);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.0.attn_q.weight")->dtype, VT_Q8_0);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.0.ffn_down.weight")->dtype, VT_F16); /* rows of 200 */
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.0.ffn_up.weight")->dtype, VT_Q8_0);
    vt_gguf_close(g);
}

typedef struct progress_log {
    int calls;
    int64_t last_done, total;
    bool monotonic;
} progress_log;

static void on_progress(void *user, int64_t done, int64_t total) {
    progress_log *log = user;
    if (done <= log->last_done || (log->calls && total != log->total)) log->monotonic = false;
    log->calls++;
    log->last_done = done;
    log->total = total;
}

static void test_progress_and_named_shape(void) {
    vt_synth_params p = {0};
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_synth_shape(&p, "tiny", &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(p.arch, "qwen3");
    CU_ASSERT_STRING_EQUAL(p.type, "f32");
    progress_log log = {.monotonic = true};
    p.type = "q4_k_m";
    p.progress = on_progress;
    p.progress_user = &log;
    vt_gguf *g = write_and_open(&p, "tiny.gguf");
    /* the golden fixture's shape: n_embd 256, 2 layers, 4 heads of 64, 2 kv, ffn 768, vocab 512, tied */
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "embedding_length"), 256);
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "block_count"), 2);
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "attention.head_count"), 4);
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "attention.head_count_kv"), 2);
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "attention.key_length"), 64);
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "feed_forward_length"), 768);
    CU_ASSERT_PTR_NULL(vt_gguf_find_tensor(g, "output.weight"));
    /* the documented Q4_K_M mix of the qwen3-tiny fixture */
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "token_embd.weight")->dtype, VT_Q6_K);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.1.attn_v.weight")->dtype, VT_Q6_K);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.1.ffn_down.weight")->dtype, VT_Q6_K);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.0.attn_v.weight")->dtype, VT_Q4_K);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.0.ffn_down.weight")->dtype, VT_Q4_K);
    int64_t bytes = 0;
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) bytes += (int64_t)vt_gguf_tensor_at(g, i)->nbytes;
    CU_ASSERT_EQUAL(log.calls, vt_gguf_n_tensors(g));
    CU_ASSERT(log.monotonic);
    CU_ASSERT_EQUAL(log.last_done, bytes);
    CU_ASSERT_EQUAL(log.total, bytes);
    vt_gguf_close(g);

    static const struct {
        const char *name, *arch;
        int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
        bool tied;
    } shapes[] = {
        {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, true},
        {"qwen3-27b", "qwen3", 5120, 54, 64, 8, 128, 25600, 151936, false},
        {"llama-7b", "llama", 4096, 32, 32, 32, 128, 11008, 32000, false},
        {"qwen3-1.7b", "qwen3", 2048, 28, 16, 8, 128, 6144, 151936, true},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        vt_synth_params s = {.type = "q8_0", .seed = 5};
        CU_ASSERT_EQUAL_FATAL(vt_synth_shape(&s, shapes[i].name, &err), VT_OK);
        CU_ASSERT_STRING_EQUAL(s.arch, shapes[i].arch);
        CU_ASSERT_STRING_EQUAL(s.type, "q8_0"); /* kept */
        CU_ASSERT_EQUAL(s.seed, 5);
        CU_ASSERT(s.n_embd == shapes[i].n_embd && s.n_layer == shapes[i].n_layer && s.n_head == shapes[i].n_head);
        CU_ASSERT(s.n_head_kv == shapes[i].n_head_kv && s.n_ff == shapes[i].n_ff && s.n_vocab == shapes[i].n_vocab);
        CU_ASSERT(s.tied_output == shapes[i].tied);
        CU_ASSERT_EQUAL(s.head_dim ? s.head_dim : s.n_embd / s.n_head, shapes[i].head_dim);
    }
    CU_ASSERT_EQUAL(vt_synth_shape(&p, "gpt-5", &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "gpt-5"));
}

/* head_dim that is not n_embd / n_head (as real Qwen3 has) shapes q/o and is written out. */
static void test_explicit_head_dim(void) {
    vt_synth_params p = small_params("qwen3", "f16");
    p.n_layer = 1;
    p.head_dim = 128; /* 4 heads of 128 = 512 != 256 */
    vt_gguf *g = write_and_open(&p, "headdim.gguf");
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "attention.key_length"), 128);
    CU_ASSERT_EQUAL(get_u32(g, "qwen3", "attention.value_length"), 128);
    const vt_gguf_tensor *q = vt_gguf_find_tensor(g, "blk.0.attn_q.weight");
    const vt_gguf_tensor *o = vt_gguf_find_tensor(g, "blk.0.attn_output.weight");
    const vt_gguf_tensor *k = vt_gguf_find_tensor(g, "blk.0.attn_k.weight");
    CU_ASSERT(q->ne[0] == 256 && q->ne[1] == 512);
    CU_ASSERT(o->ne[0] == 512 && o->ne[1] == 256);
    CU_ASSERT(k->ne[0] == 256 && k->ne[1] == 256);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "blk.0.attn_q_norm.weight")->ne[0], 128);
    vt_gguf_close(g);
}

static void test_vocab_from(void) {
    const char *data = vt_test_data_dir("synth vocab_from");
    if (!data) return;
    char vocab[1024];
    snprintf(vocab, sizeof vocab, "%s/models/vocab/ggml-vocab-llama-spm.gguf", data);
    vt_synth_params p = small_params("llama", "q8_0");
    p.n_embd = 64;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.n_ff = 128;
    p.n_layer = 1;
    p.n_vocab = 0; /* follows the file */
    p.vocab_from = vocab;
    vt_gguf *g = write_and_open(&p, "vocab-from.gguf");
    vt_gguf *src = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(vocab, &src, NULL), VT_OK);
    const vt_gguf_array *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_gguf_get_arr(g, "tokenizer.ggml.tokens", VT_GGUF_STRING, &a, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_get_arr(src, "tokenizer.ggml.tokens", VT_GGUF_STRING, &b, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, b->n);
    int differ = 0;
    for (uint64_t i = 0; i < a->n; i++)
        differ += a->items[i].v.str.len != b->items[i].v.str.len ||
                  memcmp(a->items[i].v.str.data, b->items[i].v.str.data, (size_t)a->items[i].v.str.len) != 0;
    CU_ASSERT_EQUAL(differ, 0);
    /* every tokenizer.* key is copied */
    for (int64_t i = 0; i < vt_gguf_n_kv(src); i++) {
        const vt_gguf_kv *kv = vt_gguf_kv_at(src, i);
        if (kv->key.len < 10 || memcmp(kv->key.data, "tokenizer.", 10) != 0) continue;
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)kv->key.len, kv->key.data);
        const vt_gguf_kv *copy = vt_gguf_find(g, key);
        CU_ASSERT_PTR_NOT_NULL(copy);
        if (copy) CU_ASSERT_EQUAL(copy->value.type, kv->value.type);
    }
    CU_ASSERT_EQUAL((uint64_t)vt_gguf_find_tensor(g, "token_embd.weight")->ne[1], b->n);
    CU_ASSERT_EQUAL((uint64_t)vt_gguf_find_tensor(g, "output.weight")->ne[1], b->n);
    vt_gguf_close(src);
    vt_gguf_close(g);
}

/* An output that is the vocabulary file itself (or a link to it) is refused
 * before anything is written: opening the output empties it, and the
 * vocabulary it copies from was lost. */
static void test_vocab_from_itself_is_refused(void) {
    const char *data = vt_test_data_dir("synth vocab_from");
    if (!data) return;
    char src[1024], copy[1024], link[1024];
    snprintf(src, sizeof src, "%s/models/vocab/ggml-vocab-llama-spm.gguf", data);
    size_t n = 0;
    char *bytes = vt_test_read_file(src, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    vt_test_tmpfile(copy, sizeof copy, "own-vocab.gguf");
    FILE *f = fopen(copy, "wb");
    CU_ASSERT_FATAL(f && fwrite(bytes, 1, n, f) == n && fclose(f) == 0);
    vt_test_tmpfile(link, sizeof link, "own-vocab-link.gguf");
    unlink(link);
    CU_ASSERT_FATAL(symlink(copy, link) == 0);
    vt_synth_params p = small_params("llama", "q8_0");
    p.n_vocab = 0;
    p.vocab_from = copy;
    const char *outs[2] = {copy, link};
    for (int i = 0; i < 2; i++) {
        vt_error err = {0};
        CU_ASSERT_EQUAL(vt_synth_write(&p, outs[i], &err), VT_ERR_INVALID);
        CU_ASSERT(strstr(err.msg, "the file the vocabulary is copied from") != NULL);
        size_t m = 0;
        char *after = vt_test_read_file(copy, &m);
        CU_ASSERT(after && m == n && memcmp(after, bytes, n) == 0);
        free(after);
    }
    free(bytes);
}

/* qwen3moe: the expert keys, the router and the 3-D expert stacks (no dense
 * FFN), the q4_k_m mix on them, and the file loads through the model loader
 * with the hparams asked for. Random blocks fill the stacks too. */
static void test_qwen3moe(void) {
    for (int random = 0; random < 2; random++) {
        vt_synth_params p = small_params("qwen3moe", "q4_k_m");
        p.head_dim = 64;
        p.n_expert = 8;
        p.n_expert_used = 2;
        p.n_ff_exp = 256;
        p.random_blocks = random;
        if (random) p.n_ff = 0; /* metadata only: defaults to n_ff_exp x n_expert_used */
        vt_gguf *g = write_and_open(&p, random ? "moe-rb.gguf" : "moe.gguf");
        CU_ASSERT_EQUAL(get_u32(g, "qwen3moe", "feed_forward_length"), 512); /* given, or 256 x 2 */
        CU_ASSERT_EQUAL(get_u32(g, "qwen3moe", "expert_count"), 8);
        CU_ASSERT_EQUAL(get_u32(g, "qwen3moe", "expert_used_count"), 2);
        CU_ASSERT_EQUAL(get_u32(g, "qwen3moe", "expert_feed_forward_length"), 256);
        CU_ASSERT_EQUAL(get_u32(g, "qwen3moe", "attention.key_length"), 64);
        for (int i = 0; i < p.n_layer; i++) {
            char n[96];
            snprintf(n, sizeof n, "blk.%d.ffn_gate.weight", i);
            CU_ASSERT_PTR_NULL(vt_gguf_find_tensor(g, n));
            snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", i);
            const vt_gguf_tensor *r = vt_gguf_find_tensor(g, n);
            CU_ASSERT_FATAL(r != NULL);
            CU_ASSERT(r->ndim == 2 && r->ne[0] == 256 && r->ne[1] == 8 && r->dtype == VT_F32);
            static const char *const stacks[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
            for (int k = 0; k < 3; k++) {
                snprintf(n, sizeof n, "blk.%d.%s.weight", i, stacks[k]);
                const vt_gguf_tensor *t = vt_gguf_find_tensor(g, n);
                CU_ASSERT_FATAL(t != NULL);
                CU_ASSERT(t->ndim == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 8);
                /* ffn_down_exps takes the ffn_down bump of use_more_bits layers (0, 3, 6, 7 of 8) */
                bool more = i == 0 || i == 3 || i == 6 || i == 7;
                CU_ASSERT_EQUAL(t->dtype, k == 2 && more ? VT_Q6_K : VT_Q4_K);
                CU_ASSERT_EQUAL(t->nbytes, vt_row_size(t->dtype, 256) * 256 * 8);
                /* the last expert's bytes are written (not left zero) */
                const uint8_t *last = (const uint8_t *)t->data + t->nbytes - 256;
                int nonzero = 0;
                for (int b = 0; b < 256; b++) nonzero += last[b] != 0;
                CU_ASSERT(nonzero > 100);
            }
        }
        vt_gguf_close(g);

        char path[512];
        vt_test_tmpfile(path, sizeof path, random ? "moe-rb.gguf" : "moe.gguf");
        vt_model *m = NULL;
        vt_error err = {0};
        CU_ASSERT_EQUAL_FATAL(vt_model_load(path, &m, &err), VT_OK);
        CU_ASSERT_STRING_EQUAL(m->hp.arch_name, "qwen3moe");
        CU_ASSERT(m->hp.n_expert == 8 && m->hp.n_expert_used == 2 && m->hp.n_ff_exp == 256 && m->hp.norm_top_k);
        CU_ASSERT(m->hp.n_embd == 256 && m->hp.n_layer == 8 && m->hp.head_dim == 64 && m->hp.n_vocab == 300);
        CU_ASSERT_PTR_NULL(m->layers[0].ffn_gate);
        CU_ASSERT_PTR_NOT_NULL(m->layers[7].ffn_down_exps);
        CU_ASSERT_EQUAL(m->layers[7].ffn_down_exps->ne[2], 8);
        vt_model_free(m);
    }

    /* the named MoE shapes */
    vt_synth_params s = {0};
    CU_ASSERT_EQUAL_FATAL(vt_synth_shape(&s, "qwen3-30b-a3b", NULL), VT_OK);
    CU_ASSERT_STRING_EQUAL(s.arch, "qwen3moe");
    CU_ASSERT(s.n_embd == 2048 && s.n_layer == 48 && s.n_head == 32 && s.n_head_kv == 4 && s.head_dim == 128);
    CU_ASSERT(s.n_expert == 128 && s.n_expert_used == 8 && s.n_ff_exp == 768 && s.n_vocab == 151936);
    CU_ASSERT_EQUAL_FATAL(vt_synth_shape(&s, "qwen3moe-bench", NULL), VT_OK);
    CU_ASSERT(!strcmp(s.arch, "qwen3moe") && s.n_expert == 64 && s.n_expert_used == 8);
    /* a dense shape clears the expert fields */
    CU_ASSERT_EQUAL_FATAL(vt_synth_shape(&s, "tiny", NULL), VT_OK);
    CU_ASSERT(s.n_expert == 0 && s.n_expert_used == 0 && s.n_ff_exp == 0);

    /* experts used out of 1..n_expert, or no experts, are refused */
    char path[512];
    vt_test_tmpfile(path, sizeof path, "moe-bad.gguf");
    for (int c = 0; c < 3; c++) {
        vt_synth_params p = small_params("qwen3moe", "f32");
        p.n_expert = 8;
        p.n_expert_used = c == 0 ? 9 : c == 1 ? 0 : 2;
        p.n_ff_exp = c == 2 ? 0 : 256;
        vt_error err = {0};
        CU_ASSERT_EQUAL(vt_synth_write(&p, path, &err), VT_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, c == 2 ? "n_ff_exp" : "n_expert_used"));
        CU_ASSERT_PTR_NULL(fopen(path, "rb"));
    }
}

static void test_bad_params(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "bad.gguf");
    vt_error err = {0};
    struct {
        const char *what;
        void (*mutate)(vt_synth_params *);
        const char *words;
    } cases[] = {
        {"arch", NULL, "unknown arch 'gpt2'"},
        {"type", NULL, "unknown type 'q3_k'"},
        {"kv heads", NULL, "not a multiple of n_head_kv"},
        {"vocab", NULL, "below 259"},
        {"zero layers", NULL, "bad shape"},
        {"head split", NULL, "not a multiple of n_head"},
        {"vocab_from", NULL, "vocab_from"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vt_synth_params p = small_params("qwen3", "q8_0");
        switch (i) {
        case 0: p.arch = "gpt2"; break;
        case 1: p.type = "q3_k"; break;
        case 2: p.n_head_kv = 3; break;
        case 3: p.n_vocab = 100; break;
        case 4: p.n_layer = 0; break;
        case 5: p.n_head = 3, p.n_head_kv = 1; break;
        case 6: p.vocab_from = "/nonexistent/vocab.gguf"; break;
        }
        vt_status st = vt_synth_write(&p, path, &err);
        CU_ASSERT_EQUAL(st, i == 6 ? VT_ERR_IO : VT_ERR_INVALID); /* a vocab file that cannot be opened is I/O */
        if (!strstr(err.msg, cases[i].words)) fprintf(stderr, "\n%s: %s\n", cases[i].what, err.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].words));
        CU_ASSERT_PTR_NULL(fopen(path, "rb")); /* nothing written */
    }
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"each arch in several types matches shape, metadata and mix", test_archs_and_types},
        {"values have the promised distributions", test_value_distributions},
        {"weight types share the same underlying values", test_types_share_values},
        {"same seed same file (any thread count), other seed other values", test_seed_determinism},
        {"rows that do not fit blocks fall back", test_block_fallbacks},
        {"named shapes and progress", test_progress_and_named_shape},
        {"explicit head_dim", test_explicit_head_dim},
        {"qwen3moe: expert stacks, mix, loader round trip, shapes, bad counts", test_qwen3moe},
        {"tokenizer copied from vocab_from", test_vocab_from},
        {"an output that is the vocabulary file itself is refused, the file intact", test_vocab_from_itself_is_refused},
        {"bad parameters are refused", test_bad_params},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("synth", NULL, NULL, tests);
    return vt_test_run();
}
