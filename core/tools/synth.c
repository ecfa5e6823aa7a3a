/* synth.c — random-weight llama / qwen2 / qwen3 / qwen3moe models (see synth.h).
 *
 * Weights: each group of rows of a tensor has its own PRNG stream (seed mixed
 * with the tensor's name and the group's index), so a tensor's values do not
 * depend on the other tensors, the weight type or the thread count.
 * Matrices ~ N(0, 0.02); norm weights 1 + N(0, 0.02); qwen2 q/k/v biases
 * ~ N(0, 0.5) (large enough to matter in the outputs). Rows are made in f32 a
 * slab at a time and converted with vt_from_f32 on a thread pool, so memory
 * stays at about two slabs (SYNTH_SLAB_FLOATS floats each) whatever the model size.
 *
 * Weight types per tensor, following llama-quantize (llama_tensor_get_type):
 *   f32, f16, bf16   every matrix that type (llama-quantize does not remix
 *                    float targets); norms and biases stay f32 in every mix.
 *   q8_0, q6_k       every matrix that type (output included: the output rule
 *                    keeps Q8_0 and Q6_K as they are).
 *   q4_0             layer matrices and an untied token_embd Q4_0; the output
 *                    matrix (output.weight, or token_embd when tied) Q6_K.
 *   q4_k_m, q5_k_m   Q4_K / Q5_K by default; the output matrix Q6_K; attn_v and
 *                    ffn_down (ffn_down_exps for qwen3moe: llama-quantize's
 *                    "ffn_down" name match covers the expert stack, one per layer)
 *                    Q6_K in the layers where use_more_bits(i, n) holds:
 *                    i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
 *   qwen3moe's router ffn_gate_inp stays F32 in every mix (llama-quantize never
 *   quantizes it).
 *   For the output matrix of a quantized mix, a row length that is not a
 *   multiple of 256 gives Q8_0 (as llama.cpp). Any other row that does not fit
 *   the chosen type's blocks falls back to Q8_0 when it is a multiple of 32,
 *   else F16 (llama.cpp would pick Q5_0/Q5_1, which vt does not support).
 *   Not modelled: llama.cpp's 70B-only attn_v bump and its bumps for models of
 *   exactly 8 experts (attn_k/attn_v Q8_0, attn_output Q5_K). */
#include "synth.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "quant.h"
#include "synth_vocab.h"
#include "threadpool.h"
#include "usable_cpus.h"
#include "vt/vt_quant.h"

#define SYNTH_SLAB_FLOATS (4u << 20) /* 16 MB of f32 rows per conversion slab */
#define SYNTH_MATRIX_STD 0.02f
#define SYNTH_NORM_STD 0.02f
#define SYNTH_BIAS_STD 0.5f

/* ---- PRNG: splitmix64 seeding a xoshiro256** stream, normals by Box-Muller ---- */

typedef struct rng {
    uint64_t s[4];
    float spare; /* second Box-Muller value */
    bool has_spare;
} rng;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in (0, 1] with 24 bits: never 0, so logf() below is finite. */
static float rng_uniform(rng *r) { return (float)((rng_next(r) >> 40) + 1) * (1.0f / 16777216.0f); }

/* Box-Muller in float (twice as fast as double; the tails reach 5.7 sigma,
 * plenty for random weights). */
static float rng_normal(rng *r) {
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    float u1 = rng_uniform(r), u2 = rng_uniform(r);
    float radius = sqrtf(-2.0f * logf(u1)), angle = 6.28318531f * u2;
    r->spare = radius * sinf(angle);
    r->has_spare = true;
    return radius * cosf(angle);
}

static void rng_seed(rng *r, uint64_t seed, const char *name) {
    uint64_t x = seed;
    for (const char *p = name; *p; p++) x = (x ^ (uint8_t)*p) * 0x100000001b3ull; /* FNV-style mix of the name */
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    r->spare = 0.0f;
    r->has_spare = false;
}

/* ---- the model's tensors ---- */

typedef enum tensor_role {
    ROLE_NORM,   /* 1 + noise, f32 */
    ROLE_BIAS,   /* N(0, 0.5), f32 */
    ROLE_MATRIX, /* N(0, 0.02), the mix's type */
    ROLE_ROUTER, /* N(0, 0.02), always f32 */
} tensor_role;

/* What llama-quantize's rules look at. */
typedef enum matrix_kind { KIND_OTHER, KIND_OUTPUT, KIND_TOKEN_EMBD, KIND_ATTN_V, KIND_FFN_DOWN } matrix_kind;

typedef struct synth_tensor {
    char name[64];
    tensor_role role;
    matrix_kind kind;
    int layer;
    int ndim;
    int64_t ne[3]; /* ne[2]: experts of a stack (1 otherwise) */
    int32_t dtype;
} synth_tensor;

typedef struct mix {
    const char *name;
    int32_t base;      /* default matrix type */
    int32_t file_type; /* llama_ftype */
    bool quantized;    /* llama-quantize's per-tensor rules apply */
    bool k_m;          /* the _K_M bumps of attn_v / ffn_down */
} mix;

static const mix mixes[] = {
    {"f32", VT_F32, 0, false, false},      {"f16", VT_F16, 1, false, false},
    {"bf16", VT_BF16, 32, false, false},   {"q8_0", VT_Q8_0, 7, true, false},
    {"q4_0", VT_Q4_0, 2, true, false},     {"q4_k_m", VT_Q4_K, 15, true, true},
    {"q5_k_m", VT_Q5_K, 17, true, true},   {"q6_k", VT_Q6_K, 18, true, false},
};

static const mix *find_mix(const char *name) {
    for (size_t i = 0; name && i < sizeof mixes / sizeof mixes[0]; i++)
        if (strcasecmp(mixes[i].name, name) == 0) return &mixes[i];
    return NULL;
}

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool fits_blocks(int32_t dtype, int64_t ne0) { return ne0 % vt_dtype_block_length(dtype) == 0; }

static int32_t matrix_type(const mix *m, const synth_tensor *t, bool tied, int n_layer) {
    if (!m->quantized) return m->base;
    int32_t type = m->base;
    bool is_output = t->kind == KIND_OUTPUT || (tied && t->kind == KIND_TOKEN_EMBD);
    if (is_output) {
        if (!fits_blocks(VT_Q6_K, t->ne[0])) type = VT_Q8_0;
        else if (type != VT_Q8_0) type = VT_Q6_K;
    } else if (m->k_m && (t->kind == KIND_ATTN_V || t->kind == KIND_FFN_DOWN) && use_more_bits(t->layer, n_layer)) {
        type = VT_Q6_K;
    }
    if (!fits_blocks(type, t->ne[0])) type = fits_blocks(VT_Q8_0, t->ne[0]) ? VT_Q8_0 : VT_F16;
    return type;
}

typedef struct tensor_list {
    synth_tensor *t;
    int n, cap;
} tensor_list;

static synth_tensor *add3(tensor_list *l, tensor_role role, matrix_kind kind, int layer, int64_t ne0, int64_t ne1,
                          int64_t ne2, const char *fmt) {
    if (l->n == l->cap) return NULL; /* sized exactly by the caller */
    synth_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    if (layer >= 0) snprintf(t->name, sizeof t->name, "blk.%d.%s", layer, fmt);
    else snprintf(t->name, sizeof t->name, "%s", fmt);
    t->role = role;
    t->kind = kind;
    t->layer = layer;
    t->ndim = ne2 > 0 ? 3 : ne1 > 0 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1 > 0 ? ne1 : 1;
    t->ne[2] = ne2 > 0 ? ne2 : 1;
    return t;
}

static synth_tensor *add(tensor_list *l, tensor_role role, matrix_kind kind, int layer, int64_t ne0, int64_t ne1,
                         const char *fmt) {
    return add3(l, role, kind, layer, ne0, ne1, 0, fmt);
}

/* Rows of a tensor, over all its experts. */
static int64_t n_rows(const synth_tensor *t) { return t->ne[1] * t->ne[2]; }

/* The tensors llama.cpp loads for the arch, in a fixed order. */
static vt_status list_tensors(const vt_synth_params *p, int32_t head_dim, const mix *m, tensor_list *l,
                              vt_error *err) {
    bool qwen2 = !strcmp(p->arch, "qwen2"), moe = !strcmp(p->arch, "qwen3moe");
    bool qwen3 = moe || !strcmp(p->arch, "qwen3");
    int per_layer = 9 + (qwen2 ? 3 : 0) + (qwen3 ? 2 : 0) + (moe ? 1 : 0);
    l->cap = 3 + per_layer * p->n_layer;
    l->t = calloc((size_t)l->cap, sizeof *l->t);
    if (!l->t) return vt_fail(err, VT_ERR_NOMEM, "synth: out of memory");
    int64_t d = p->n_embd, q = (int64_t)p->n_head * head_dim, kv = (int64_t)p->n_head_kv * head_dim;
    add(l, ROLE_MATRIX, KIND_TOKEN_EMBD, -1, d, p->n_vocab, "token_embd.weight");
    add(l, ROLE_NORM, KIND_OTHER, -1, d, 0, "output_norm.weight");
    if (!p->tied_output) add(l, ROLE_MATRIX, KIND_OUTPUT, -1, d, p->n_vocab, "output.weight");
    for (int i = 0; i < p->n_layer; i++) {
        add(l, ROLE_NORM, KIND_OTHER, i, d, 0, "attn_norm.weight");
        add(l, ROLE_MATRIX, KIND_OTHER, i, d, q, "attn_q.weight");
        add(l, ROLE_MATRIX, KIND_OTHER, i, d, kv, "attn_k.weight");
        add(l, ROLE_MATRIX, KIND_ATTN_V, i, d, kv, "attn_v.weight");
        if (qwen2) {
            add(l, ROLE_BIAS, KIND_OTHER, i, q, 0, "attn_q.bias");
            add(l, ROLE_BIAS, KIND_OTHER, i, kv, 0, "attn_k.bias");
            add(l, ROLE_BIAS, KIND_OTHER, i, kv, 0, "attn_v.bias");
        }
        add(l, ROLE_MATRIX, KIND_OTHER, i, q, d, "attn_output.weight");
        if (qwen3) {
            add(l, ROLE_NORM, KIND_OTHER, i, head_dim, 0, "attn_q_norm.weight");
            add(l, ROLE_NORM, KIND_OTHER, i, head_dim, 0, "attn_k_norm.weight");
        }
        add(l, ROLE_NORM, KIND_OTHER, i, d, 0, "ffn_norm.weight");
        if (moe) {
            int64_t ne = p->n_expert, fe = p->n_ff_exp;
            add(l, ROLE_ROUTER, KIND_OTHER, i, d, ne, "ffn_gate_inp.weight");
            add3(l, ROLE_MATRIX, KIND_OTHER, i, d, fe, ne, "ffn_gate_exps.weight");
            add3(l, ROLE_MATRIX, KIND_OTHER, i, d, fe, ne, "ffn_up_exps.weight");
            add3(l, ROLE_MATRIX, KIND_FFN_DOWN, i, fe, d, ne, "ffn_down_exps.weight");
            continue;
        }
        add(l, ROLE_MATRIX, KIND_OTHER, i, d, p->n_ff, "ffn_gate.weight");
        add(l, ROLE_MATRIX, KIND_OTHER, i, d, p->n_ff, "ffn_up.weight");
        add(l, ROLE_MATRIX, KIND_FFN_DOWN, i, p->n_ff, d, "ffn_down.weight");
    }
    for (int i = 0; i < l->n; i++)
        l->t[i].dtype = l->t[i].role == ROLE_MATRIX ? matrix_type(m, &l->t[i], p->tied_output, p->n_layer) : VT_F32;
    return VT_OK;
}

/* ---- metadata ---- */

static vt_status write_tokenizer_builtin(vt_gguf_writer *w, int32_t n_vocab, vt_error *err) {
    vt_synth_vocab v;
    vt_status st = vt_synth_vocab_build(n_vocab, &v, err);
    if (st) return st;
    vt_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    vt_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)v.n);
    vt_gguf_writer_set_arr(w, "tokenizer.ggml.scores", VT_GGUF_FLOAT32, v.scores, (uint64_t)v.n);
    vt_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", VT_GGUF_INT32, v.types, (uint64_t)v.n);
    vt_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    vt_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    vt_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    vt_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    vt_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
    vt_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", true);
    vt_synth_vocab_free(&v);
    return VT_OK;
}

/* The tokenizer.* keys of another file, and its vocabulary size. */
static vt_status vocab_size_from(const char *path, int32_t *n_vocab, vt_error *err) {
    vt_gguf *g = NULL;
    vt_status st = vt_gguf_open(path, &g, err);
    if (st) return vt_error_prefix(err, "synth: vocab_from: ");
    const vt_gguf_array *tokens = NULL;
    st = vt_gguf_get_arr(g, "tokenizer.ggml.tokens", VT_GGUF_STRING, &tokens, err);
    if (st == VT_OK && (tokens->n == 0 || tokens->n > INT32_MAX))
        st = vt_fail(err, VT_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries", path,
                     (unsigned long long)tokens->n);
    if (st == VT_OK) *n_vocab = (int32_t)tokens->n;
    else vt_error_prefix(err, "synth: vocab_from %s: ", path);
    vt_gguf_close(g);
    return st;
}

static vt_status copy_tokenizer(vt_gguf_writer *w, const char *path, vt_error *err) {
    vt_gguf *g = NULL;
    vt_status st = vt_gguf_open(path, &g, err);
    if (st) return vt_error_prefix(err, "synth: vocab_from: ");
    for (int64_t i = 0; i < vt_gguf_n_kv(g); i++) {
        const vt_gguf_kv *kv = vt_gguf_kv_at(g, i);
        if (kv->key.len < 10 || memcmp(kv->key.data, "tokenizer.", 10) != 0) continue;
        char key[256];
        if (kv->key.len >= sizeof key) continue; /* no real tokenizer key is this long */
        memcpy(key, kv->key.data, (size_t)kv->key.len);
        key[kv->key.len] = '\0';
        vt_gguf_writer_set_value(w, key, &kv->value);
    }
    vt_gguf_close(g);
    return VT_OK;
}

/* How every file synth writes begins its general.name (vt_synth_wrote). */
#define SYNTH_NAME_PREFIX "vt-synth "

bool vt_synth_wrote(const char *path) {
    vt_gguf *g = NULL;
    vt_error ignored = {0};
    if (vt_gguf_open(path, &g, &ignored) != VT_OK) return false;
    const vt_gguf_kv *name = vt_gguf_find(g, "general.name");
    const size_t n = sizeof SYNTH_NAME_PREFIX - 1;
    const bool ours = name && name->value.type == VT_GGUF_STRING && name->value.v.str.len >= n &&
                      memcmp(name->value.v.str.data, SYNTH_NAME_PREFIX, n) == 0;
    vt_gguf_close(g);
    return ours;
}

static void write_hparams(vt_gguf_writer *w, const vt_synth_params *p, int32_t head_dim, int32_t n_vocab,
                          const mix *m, float rope_base, float eps) {
    char key[128], name[128];
#define K(suffix) (snprintf(key, sizeof key, "%s." suffix, p->arch), key)
    vt_gguf_writer_set_str(w, "general.architecture", p->arch);
    snprintf(name, sizeof name, SYNTH_NAME_PREFIX "%s %dx%d %s", p->arch, p->n_layer, p->n_embd, m->name);
    vt_gguf_writer_set_str(w, "general.name", name);
    vt_gguf_writer_set_u32(w, "general.file_type", (uint32_t)m->file_type);
    if (m->quantized) vt_gguf_writer_set_u32(w, "general.quantization_version", 2);
    vt_gguf_writer_set_u32(w, K("context_length"), (uint32_t)(p->n_ctx > 0 ? p->n_ctx : 4096));
    vt_gguf_writer_set_u32(w, K("embedding_length"), (uint32_t)p->n_embd);
    vt_gguf_writer_set_u32(w, K("block_count"), (uint32_t)p->n_layer);
    /* a mixture of experts has no dense FFN: without n_ff, the width a token's
     * chosen experts add up to (6144 = 8 x 768 for Qwen3-30B-A3B, as its file says) */
    int64_t n_ff = p->n_ff > 0 ? p->n_ff : (int64_t)p->n_ff_exp * p->n_expert_used;
    vt_gguf_writer_set_u32(w, K("feed_forward_length"), (uint32_t)n_ff);
    vt_gguf_writer_set_u32(w, K("attention.head_count"), (uint32_t)p->n_head);
    vt_gguf_writer_set_u32(w, K("attention.head_count_kv"), (uint32_t)p->n_head_kv);
    vt_gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"), eps);
    vt_gguf_writer_set_f32(w, K("rope.freq_base"), rope_base);
    /* qwen3 always states its head size; other archs only when it is not n_embd / n_head
     * (llama.cpp reads key_length for every arch and defaults it to n_embd / n_head) */
    if (!strncmp(p->arch, "qwen3", 5) || head_dim * p->n_head != p->n_embd) {
        vt_gguf_writer_set_u32(w, K("attention.key_length"), (uint32_t)head_dim);
        vt_gguf_writer_set_u32(w, K("attention.value_length"), (uint32_t)head_dim);
    }
    if (!strcmp(p->arch, "qwen3moe")) {
        vt_gguf_writer_set_u32(w, K("expert_count"), (uint32_t)p->n_expert);
        vt_gguf_writer_set_u32(w, K("expert_used_count"), (uint32_t)p->n_expert_used);
        vt_gguf_writer_set_u32(w, K("expert_feed_forward_length"), (uint32_t)p->n_ff_exp);
    }
    if (!strcmp(p->arch, "llama")) {
        vt_gguf_writer_set_u32(w, K("rope.dimension_count"), (uint32_t)head_dim);
        vt_gguf_writer_set_u32(w, K("vocab_size"), (uint32_t)n_vocab);
    }
#undef K
}

/* ---- parameters ---- */

static vt_status check_params(const vt_synth_params *p, int32_t *head_dim, vt_error *err) {
    if (!p->arch || (strcmp(p->arch, "llama") && strcmp(p->arch, "qwen2") && strcmp(p->arch, "qwen3") &&
                     strcmp(p->arch, "qwen3moe")))
        return vt_fail(err, VT_ERR_INVALID, "synth: unknown arch '%s' (llama, qwen2, qwen3, qwen3moe)",
                       p->arch ? p->arch : "");
    if (!find_mix(p->type))
        return vt_fail(err, VT_ERR_INVALID,
                       "synth: unknown type '%s' (f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k)",
                       p->type ? p->type : "");
    const bool moe = p->arch && !strcmp(p->arch, "qwen3moe");
    if (p->n_embd <= 0 || p->n_layer <= 0 || p->n_head <= 0 || p->n_head_kv <= 0 || p->n_ff < (moe ? 0 : 1) ||
        p->head_dim < 0 || p->n_ctx < 0 || p->n_layer > 100000)
        return vt_fail(err, VT_ERR_INVALID,
                       "synth: bad shape (n_embd %d, n_layer %d, n_head %d, n_head_kv %d, head_dim %d, n_ff %d, n_ctx "
                       "%d)",
                       p->n_embd, p->n_layer, p->n_head, p->n_head_kv, p->head_dim, p->n_ff, p->n_ctx);
    if (p->n_head % p->n_head_kv != 0)
        return vt_fail(err, VT_ERR_INVALID, "synth: n_head %d is not a multiple of n_head_kv %d", p->n_head,
                       p->n_head_kv);
    if (p->head_dim == 0 && p->n_embd % p->n_head != 0)
        return vt_fail(err, VT_ERR_INVALID, "synth: n_embd %d is not a multiple of n_head %d (set head_dim)",
                       p->n_embd, p->n_head);
    if (moe) {
        if (p->n_expert <= 0 || p->n_ff_exp <= 0 || p->n_expert > 1 << 16)
            return vt_fail(err, VT_ERR_INVALID, "synth: qwen3moe needs n_expert (%d) and n_ff_exp (%d) > 0",
                           p->n_expert, p->n_ff_exp);
        if (p->n_expert_used < 1 || p->n_expert_used > p->n_expert)
            return vt_fail(err, VT_ERR_INVALID, "synth: n_expert_used %d must be in 1..n_expert (%d)",
                           p->n_expert_used, p->n_expert);
    }
    *head_dim = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    if (*head_dim % 2 != 0) return vt_fail(err, VT_ERR_INVALID, "synth: head_dim %d is odd (RoPE pairs)", *head_dim);
    if (!p->vocab_from && p->n_vocab < VT_SYNTH_VOCAB_MIN)
        return vt_fail(err, VT_ERR_INVALID, "synth: n_vocab %d is below %d for the built-in vocabulary", p->n_vocab,
                       VT_SYNTH_VOCAB_MIN);
    return VT_OK;
}

typedef struct named_shape {
    const char *name, *arch;
    int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx;
    bool tied;
    int32_t n_expert, n_expert_used, n_ff_exp;
} named_shape;

static const named_shape shapes[] = {
    {"tiny", "qwen3", 256, 2, 4, 2, 64, 768, 512, 4096, true, 0, 0, 0},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 151936, 40960, true, 0, 0, 0},
    {"qwen3-1.7b", "qwen3", 2048, 28, 16, 8, 128, 6144, 151936, 40960, true, 0, 0, 0},
    {"llama-7b", "llama", 4096, 32, 32, 32, 128, 11008, 32000, 4096, false, 0, 0, 0},
    {"qwen3-27b", "qwen3", 5120, 54, 64, 8, 128, 25600, 151936, 40960, false, 0, 0, 0},
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 128, 6144, 151936, 40960, false, 128, 8, 768},
    /* a few GB at q4_k_m with the 30B-A3B's proportions: 1/8 of the experts active */
    {"qwen3moe-bench", "qwen3moe", 1024, 24, 16, 4, 128, 3072, 32000, 40960, false, 64, 8, 768},
};

/* Sets the shape fields (arch, sizes, tied_output, rope_base/rms_eps to the
 * arch defaults); type, seed, vocab_from and progress are left as they are,
 * except that a NULL type becomes "f32". */
vt_status vt_synth_shape(vt_synth_params *p, const char *shape, vt_error *err) {
    for (size_t i = 0; shape && i < sizeof shapes / sizeof shapes[0]; i++) {
        const named_shape *s = &shapes[i];
        if (strcasecmp(s->name, shape) != 0) continue;
        p->arch = s->arch;
        p->n_embd = s->n_embd;
        p->n_layer = s->n_layer;
        p->n_head = s->n_head;
        p->n_head_kv = s->n_head_kv;
        p->head_dim = s->head_dim;
        p->n_ff = s->n_ff;
        p->n_vocab = s->n_vocab;
        p->n_ctx = s->n_ctx;
        p->tied_output = s->tied;
        p->n_expert = s->n_expert;
        p->n_expert_used = s->n_expert_used;
        p->n_ff_exp = s->n_ff_exp;
        p->rope_base = 0;
        p->rms_eps = 0;
        if (!p->type) p->type = "f32";
        return VT_OK;
    }
    return vt_fail(err, VT_ERR_INVALID, "synth: unknown shape '%s' (tiny, qwen3-0.6b, qwen3-1.7b, llama-7b, qwen3-27b, "
                   "qwen3-30b-a3b, qwen3moe-bench)",
                   shape ? shape : "");
}

/* ---- writing ---- */

/* Rows are generated in groups of about SYNTH_GROUP_FLOATS values, each group
 * from its own PRNG stream (seed, tensor name, group index): the values do not
 * depend on the number of threads, and groups run in parallel. */
#define SYNTH_GROUP_FLOATS 65536u

typedef struct slab_job {
    const synth_tensor *t;
    uint64_t seed;
    int64_t first_group;    /* global index of the slab's first group */
    int64_t rows_per_group;
    int64_t rows;           /* rows in this slab */
    size_t row_bytes;
    float *f32;             /* [rows][ne0] */
    uint8_t *conv;          /* [rows][row_bytes] when dtype != F32 */
    bool random_blocks;     /* synth.h: quantized matrices as random blocks */
    volatile int failed;
} slab_job;

/* Random quantized blocks (synth.h: random_blocks): the code bytes uniform,
 * every block scale fixed so that |value| stays within about 0.06 and the
 * mean is near 0 (a block's minimum offsets its codes for Q4_K/Q5_K). */
static void random_blocks(rng *r, int32_t dtype, uint8_t *dst, int64_t n) {
    size_t bytes = vt_row_size(dtype, n);
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t x = rng_next(r);
        memcpy(dst + i, &x, bytes - i < 8 ? bytes - i : 8);
    }
    size_t block = vt_dtype_block_bytes(dtype);
    for (uint8_t *b = dst; b < dst + bytes; b += block) {
        vt_fp16_t d, dmin;
        switch (dtype) {
        case VT_Q8_0: d = vt_f32_to_fp16(0.06f / 127); memcpy(b, &d, 2); break;
        case VT_Q4_0: d = vt_f32_to_fp16(0.06f / 8); memcpy(b, &d, 2); break;
        case VT_Q4_K:
        case VT_Q5_K: /* d*sc*q - dmin*m, sc, m < 64, q < 16 (32 for Q5_K) */
            d = vt_f32_to_fp16(0.06f / (63.0f * (dtype == VT_Q4_K ? 15.0f : 31.0f)));
            dmin = vt_f32_to_fp16(0.03f / 63.0f); /* mean of d*sc*q: centres the values */
            memcpy(b, &d, 2);
            memcpy(b + 2, &dmin, 2);
            break;
        case VT_Q6_K: /* d * int8 scale * (q - 32) */
            d = vt_f32_to_fp16(0.06f / (128.0f * 32.0f));
            memcpy(b + offsetof(vt_block_q6_k, d), &d, 2);
            break;
        default: break;
        }
    }
}

static void run_groups(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    slab_job *job = arg;
    const synth_tensor *t = job->t;
    for (int64_t g = begin; g < end; g++) {
        int64_t row0 = g * job->rows_per_group;
        int64_t rows = job->rows - row0 < job->rows_per_group ? job->rows - row0 : job->rows_per_group;
        int64_t n = rows * t->ne[0];
        float *f = job->f32 + row0 * t->ne[0];
        char stream[96];
        snprintf(stream, sizeof stream, "%s#%lld", t->name, (long long)(job->first_group + g));
        rng r;
        rng_seed(&r, job->seed, stream);
        if (job->random_blocks && t->role != ROLE_NORM && t->role != ROLE_BIAS && vt_dtype_block_length(t->dtype) > 1) {
            random_blocks(&r, t->dtype, job->conv + (size_t)row0 * job->row_bytes, n);
            continue;
        }
        for (int64_t i = 0; i < n; i++) {
            float z = rng_normal(&r);
            f[i] = t->role == ROLE_NORM   ? 1.0f + SYNTH_NORM_STD * z
                   : t->role == ROLE_BIAS ? SYNTH_BIAS_STD * z
                                          : SYNTH_MATRIX_STD * z;
        }
        if (t->dtype != VT_F32 && vt_from_f32(t->dtype, f, job->conv + (size_t)row0 * job->row_bytes, n) != VT_OK)
            job->failed = 1;
    }
}

/* Generate t's values a slab of rows at a time, convert, and stream them out. */
static vt_status write_tensor(vt_gguf_writer *w, vt_threadpool *pool, const synth_tensor *t, uint64_t seed,
                              bool random, float *f32, void *conv) {
    int64_t rows_per_group = (int64_t)(SYNTH_GROUP_FLOATS / (uint64_t)t->ne[0]);
    if (rows_per_group < 1) rows_per_group = 1;
    int64_t groups_per_slab = (int64_t)(SYNTH_SLAB_FLOATS / (uint64_t)(rows_per_group * t->ne[0]));
    if (groups_per_slab < 1) groups_per_slab = 1;
    int64_t rows_per_slab = groups_per_slab * rows_per_group;
    slab_job job = {.t = t, .seed = seed, .rows_per_group = rows_per_group, .f32 = f32, .conv = conv,
                    .random_blocks = random};
    job.row_bytes = vt_row_size(t->dtype, t->ne[0]);
    for (int64_t row = 0; row < n_rows(t); row += rows_per_slab) {
        job.rows = n_rows(t) - row < rows_per_slab ? n_rows(t) - row : rows_per_slab;
        job.first_group = row / rows_per_group;
        int64_t groups = (job.rows + rows_per_group - 1) / rows_per_group;
        vt_threadpool_parallel_for(pool, groups, 1, run_groups, &job);
        if (job.failed) return VT_ERR_INVALID;
        const void *out = t->dtype == VT_F32 ? (const void *)f32 : conv;
        vt_status st = vt_gguf_writer_write_data(w, out, job.row_bytes * (size_t)job.rows);
        if (st) return st;
    }
    return VT_OK;
}

vt_status vt_synth_write(const vt_synth_params *p, const char *path, vt_error *err) {
    if (!p || !path) return vt_fail(err, VT_ERR_INVALID, "synth: NULL argument");
    int32_t head_dim = 0;
    vt_status st = check_params(p, &head_dim, err);
    if (st) return st;
    const mix *m = find_mix(p->type);
    vt_synth_params q = *p;
    if (p->vocab_from && (st = vocab_size_from(p->vocab_from, &q.n_vocab, err))) return st;
    struct stat from, to;
    /* opening the output empties it: the file it copies the tokenizer from must be another */
    if (p->vocab_from && stat(p->vocab_from, &from) == 0 && stat(path, &to) == 0 && from.st_dev == to.st_dev &&
        from.st_ino == to.st_ino)
        return vt_fail(err, VT_ERR_INVALID, "synth: the output %s is the file the vocabulary is copied from (%s)", path,
                       p->vocab_from);
    bool is_llama = !strcmp(p->arch, "llama");
    float rope_base = p->rope_base > 0 ? p->rope_base : (is_llama ? 10000.0f : 1000000.0f);
    float eps = p->rms_eps > 0 ? p->rms_eps : (is_llama ? 1e-5f : 1e-6f);

    tensor_list list = {0};
    if ((st = list_tensors(&q, head_dim, m, &list, err))) return st;
    float *f32 = NULL;
    void *conv = NULL;
    vt_gguf_writer *w = NULL;
    vt_threadpool *pool = NULL;
    int n_threads = p->n_threads > 0 ? p->n_threads : (int)vt_usable_cpus();
    if (n_threads > 256) n_threads = 256;
    if ((st = vt_threadpool_create(n_threads, &pool, err))) goto done;
    if ((st = vt_gguf_writer_create(path, &w, err))) goto done;

    write_hparams(w, &q, head_dim, q.n_vocab, m, rope_base, eps);
    st = q.vocab_from ? copy_tokenizer(w, q.vocab_from, err) : write_tokenizer_builtin(w, q.n_vocab, err);
    if (st) goto abort;
    int64_t total = 0;
    for (int i = 0; i < list.n; i++) {
        const synth_tensor *t = &list.t[i];
        vt_gguf_writer_add_tensor(w, t->name, t->dtype, t->ndim, t->ne);
        total += (int64_t)(vt_row_size(t->dtype, t->ne[0]) * (size_t)n_rows(t));
    }
    if (*vt_gguf_writer_error(w)) {
        st = vt_fail(err, VT_ERR_INVALID, "synth: %s", vt_gguf_writer_error(w));
        goto abort;
    }
    /* one slab of f32 and its converted form (no conversion is larger than f32) */
    f32 = malloc(SYNTH_SLAB_FLOATS * sizeof *f32 + 64 * sizeof(float));
    conv = malloc(SYNTH_SLAB_FLOATS * sizeof(float) + 64 * sizeof(float));
    if (!f32 || !conv) {
        st = vt_fail(err, VT_ERR_NOMEM, "synth: out of memory");
        goto abort;
    }
    int64_t done_bytes = 0;
    for (int i = 0; i < list.n; i++) {
        const synth_tensor *t = &list.t[i];
        /* a row longer than a slab: grow the buffers for it */
        if ((uint64_t)t->ne[0] > SYNTH_SLAB_FLOATS) {
            float *f = realloc(f32, (size_t)t->ne[0] * sizeof *f32);
            if (f) f32 = f;
            void *c = f ? realloc(conv, (size_t)t->ne[0] * sizeof(float)) : NULL;
            if (c) conv = c;
            if (!f || !c) {
                st = vt_fail(err, VT_ERR_NOMEM, "synth: out of memory for a row of %lld", (long long)t->ne[0]);
                goto abort;
            }
        }
        if ((st = write_tensor(w, pool, t, p->seed, p->random_blocks, f32, conv))) {
            if (*vt_gguf_writer_error(w)) vt_fail(err, st, "synth: %s: %s", path, vt_gguf_writer_error(w));
            else vt_fail(err, st, "synth: converting tensor '%s' to %s failed", t->name, vt_dtype_name(t->dtype));
            goto abort;
        }
        done_bytes += (int64_t)(vt_row_size(t->dtype, t->ne[0]) * (size_t)n_rows(t));
        if (p->progress) p->progress(p->progress_user, done_bytes, total);
    }
    st = vt_gguf_writer_finish(w, err);
    w = NULL;
    goto done;
abort:
    vt_gguf_writer_abort(w);
    w = NULL;
done:
    vt_threadpool_destroy(pool);
    free(f32);
    free(conv);
    free(list.t);
    return st;
}
