/* op_cases.c — the shapes of the conformance battery and the seeded buffers
 * behind them. Each op has a short table of shapes per phase; why each shape
 * is there is said next to it. Kept small on purpose: the whole default
 * battery runs against the reference (double accumulation) in seconds. */
#include "op_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"
#include "vt/vt_check.h"

static const int32_t weight_axis[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};
static const int32_t float_axis[] = {VT_F32, VT_F16, VT_BF16};
/* attention and the store: the cache's dtype, Q8_0 since ABI 1.1 */
static const int32_t kv_cache_axis[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};

int vt_op_from_name(const char *name) {
    for (int op = 0; op < VT_OP_COUNT; op++)
        if (strcmp(name, vt_op_name(op)) == 0) return op;
    return -1;
}

int vt_op_case_axis(int op, int32_t *dtypes, int max) {
    const int32_t *axis = float_axis;
    int n = 3;
    if (op == VT_OP_MATMUL || op == VT_OP_GET_ROWS || op == VT_OP_MOE_MATMUL) axis = weight_axis, n = 8;
    else if (op == VT_OP_MOE_ROUTE || op == VT_OP_MOE_COMBINE) axis = float_axis, n = 1; /* f32 only */
    else if (op == VT_OP_ATTENTION || op == VT_OP_RESHAPE_AND_CACHE) axis = kv_cache_axis, n = 4;
    else if (op < 0 || op >= VT_OP_COUNT) n = 0;
    if (n > max) n = max;
    memcpy(dtypes, axis, (size_t)n * sizeof *dtypes);
    return n;
}

static bool on_axis(int op, int32_t dtype) {
    int32_t axis[8];
    int n = vt_op_case_axis(op, axis, 8);
    for (int i = 0; i < n; i++)
        if (axis[i] == dtype) return true;
    return false;
}

/* ---- the shape tables ---------------------------------------------------- */

/* matmul: K is given in "sizes" so it fits the weight's blocks: small = one
 * to three blocks (floats: an odd 37), large = several blocks (floats: 300, not
 * a multiple of 8 or 16, so vector kernels take a tail). N odd and not a
 * multiple of 8 (kernels work 8 or 16 rows at a time, decode pairs rows). */
typedef struct matmul_shape {
    int large_k;
    int64_t N, M;
    int32_t y; /* output dtype: the KV negotiation may ask matmul for f16/bf16 */
} matmul_shape;
static const matmul_shape matmul_prefill[] = {
    {0, 37, 5, VT_F32},   /* M below one 8-row activation tile */
    {1, 67, 17, VT_F32},  /* two tiles and a remainder of one row */
    {1, 19, 6, VT_F16},   /* narrow outputs */
    {1, 19, 6, VT_BF16},
};
static const matmul_shape matmul_decode[] = {
    {0, 37, 1, VT_F32},   /* one sequence */
    {1, 131, 1, VT_F32},  /* more rows than one chunk of rows per thread */
    {0, 37, 3, VT_F32},   /* batched decode: three sequences, one token each */
    {1, 19, 1, VT_F16},
    {1, 19, 1, VT_BF16},
};

static int64_t matmul_k(int32_t w, int large) {
    const int64_t block = vt_dtype_block_length(w);
    if (block == 1) return large ? 300 : 37;
    if (block == 32) return large ? 288 : 96; /* 9 and 3 blocks: an odd count */
    return large ? 768 : 256;                 /* super-blocks of 256: 3 and 1 */
}

/* attention: D head dim, H query heads, KVH kv heads (H / KVH = the GQA
 * ratio), sequences with their token counts and the position of their first
 * token in this call. Block size 16 throughout, tables scattered. */
typedef struct attn_shape {
    int64_t D, H, KVH;
    int n_seqs;
    int64_t len[3];   /* tokens of each sequence in this call */
    int32_t first[3]; /* position of each sequence's first token */
} attn_shape;
static const attn_shape attn_prefill[] = {
    /* a fresh prompt of 37 tokens crossing two block boundaries, GQA 1/2/4/8 */
    {64, 8, 8, 1, {37}, {0}},
    {64, 8, 4, 1, {37}, {0}},
    {64, 8, 2, 1, {37}, {0}},
    {64, 8, 1, 1, {37}, {0}},
    /* two sequences in one call: a chunk continuing at 10, a fresh 13 */
    {128, 8, 2, 2, {20, 13}, {10, 0}},
};
static const attn_shape attn_decode[] = {
    /* three sequences of different lengths, one token each, GQA 1/2/4/8 */
    {64, 8, 8, 3, {1, 1, 1}, {100, 3, 47}},
    {64, 8, 4, 3, {1, 1, 1}, {100, 3, 47}},
    {64, 8, 2, 3, {1, 1, 1}, {100, 3, 47}},
    {64, 8, 1, 3, {1, 1, 1}, {100, 3, 47}},
    /* one sequence, its token first in a new block */
    {128, 4, 4, 1, {1}, {16}},
};
#define ATTN_BS 16
#define ATTN_BLOCKS 17 /* physical blocks; coprime with the table's stride 5 */
#define ATTN_MAX_BLOCKS 8

/* reshape_and_cache: D, KVH, T tokens; the slot map is scattered over a cache
 * of STORE_BLOCKS blocks, with one negative (skipped) slot in prefill. */
typedef struct store_shape {
    int64_t D, KVH, T;
} store_shape;
static const store_shape store_prefill[] = {{64, 2, 37}};
static const store_shape store_decode[] = {{128, 4, 3}};
#define STORE_BS 16
#define STORE_BLOCKS 6

/* rms_norm: {D, R} rows, and Qwen3's per-head view {head_dim, heads, T}. */
typedef struct rows_shape {
    int64_t ne[3];
    int ndim;
} rows_shape;
static const rows_shape norm_prefill[] = {{{896, 7, 1}, 2}, {{64, 8, 5}, 3}};
static const rows_shape norm_decode[] = {{{896, 1, 1}, 2}, {{128, 4, 1}, 3}};

/* rope: {D, heads, T}, rotating n_rot of D, positions up to 4095 (angles
 * where f32 argument reduction starts to matter); factors: with Llama 3.1's
 * per-pair frequency factors (1.8's third operand). */
typedef struct rope_shape {
    int64_t D, heads, T;
    int32_t n_rot, mode;
    float base, scale;
    int32_t pos0, step;
    bool factors;
} rope_shape;
static const rope_shape rope_prefill[] = {
    {64, 8, 7, 64, VT_ROPE_NEOX, 10000.0f, 1.0f, 0, 1, false},
    {128, 2, 5, 64, VT_ROPE_NORM, 1000000.0f, 0.5f, 1000, 613, false}, /* partial rotation, scaled */
    {64, 4, 9, 64, VT_ROPE_NORM, 500000.0f, 1.0f, 3, 401, true},       /* Llama 3.1 */
    {128, 2, 5, 64, VT_ROPE_NEOX, 500000.0f, 0.5f, 7, 913, true},      /* factors, neox, partial, scaled */
};
static const rope_shape rope_decode[] = {
    {128, 4, 1, 128, VT_ROPE_NEOX, 1000000.0f, 1.0f, 4095, 0, false},
    {64, 2, 3, 64, VT_ROPE_NORM, 10000.0f, 1.0f, 17, 40, false}, /* batched decode: three sequences */
    {128, 2, 2, 128, VT_ROPE_NORM, 500000.0f, 1.0f, 2999, 7, true}, /* Llama 3.1 */
};

/* Mixture of experts: NE experts, U used per token, T tokens; N odd (the
 * expert's rows) so kernels take a tail; expert 0 is chosen by every token,
 * others by few or none. */
typedef struct moe_shape {
    int64_t NE, U, T, N;
} moe_shape;
static const moe_shape moe_prefill[] = {{8, 2, 7, 37}, {5, 3, 17, 67}};
static const moe_shape moe_decode[] = {{8, 2, 1, 37}, {6, 4, 3, 19}};

/* swiglu, add, convert: {N, M} with an N that is odd and not a multiple of
 * any vector width; add also with a broadcast row. */
static const int64_t elementwise_n = 1001;
static const int64_t elementwise_m_prefill = 5;

/* Sources of convert (every float dtype into each output dtype) and of the
 * store (f32 k/v, or k/v already in the cache's dtype; into a quantized
 * cache f32 or f16 k/v, which the store quantizes). */
static int store_sources(int32_t cache, int32_t *src) {
    src[0] = VT_F32;
    if (cache == VT_F32) return 1;
    src[1] = vt_dtype_is_float(cache) ? cache : VT_F16;
    return 2;
}

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

int vt_op_case_count(int op, int32_t dtype, vt_phase phase) {
    if (!on_axis(op, dtype)) return 0;
    const bool pre = phase == VT_PHASE_PREFILL;
    int32_t srcs[2];
    switch (op) {
    case VT_OP_MATMUL: return pre ? COUNT(matmul_prefill) : COUNT(matmul_decode);
    case VT_OP_GET_ROWS: return 1;
    case VT_OP_ATTENTION: return pre ? COUNT(attn_prefill) : COUNT(attn_decode);
    case VT_OP_RESHAPE_AND_CACHE:
        return store_sources(dtype, srcs) * (pre ? COUNT(store_prefill) : COUNT(store_decode));
    case VT_OP_RMS_NORM: return pre ? COUNT(norm_prefill) : COUNT(norm_decode);
    case VT_OP_ROPE: return pre ? COUNT(rope_prefill) : COUNT(rope_decode);
    case VT_OP_SWIGLU: return 1;
    case VT_OP_ADD: return pre ? 2 : 1;
    case VT_OP_CONVERT: return 3;
    case VT_OP_MOE_ROUTE: return pre ? COUNT(moe_prefill) : COUNT(moe_decode);
    case VT_OP_MOE_MATMUL: return pre ? 2 * COUNT(moe_prefill) : 2 * COUNT(moe_decode); /* X shared, X per expert */
    case VT_OP_MOE_COMBINE: return pre ? 2 * COUNT(moe_prefill) : 2 * COUNT(moe_decode); /* renormalized or not */
    default: return 0;
    }
}

/* ---- buffers ------------------------------------------------------------- */

/* splitmix64: a reproducible stream from the case's seed. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float next_f32(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(next_u64(s) >> 11) * 0x1.0p-53);
}

#define GUARD_BYTE 0xA5

/* The guard after a buffer of `bytes`: as long as the buffer, at least 256. */
static size_t guard_bytes(size_t bytes) { return bytes > 256 ? bytes : 256; }

static void *case_alloc(vt_op_case *c, size_t bytes) {
    if (c->n_buffers == VT_OP_CASE_MAX_BUFFERS) return NULL;
    /* 64-byte aligned like the runtime's activation and weight memory */
    const size_t total = bytes + guard_bytes(bytes);
    void *p = aligned_alloc(64, (total + 63) / 64 * 64);
    if (!p) return NULL;
    memset(p, 0, bytes);
    memset((char *)p + bytes, GUARD_BYTE, guard_bytes(bytes));
    c->buffers[c->n_buffers++] = p;
    return p;
}

static vt_tensor describe(int32_t dtype, int ndim, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    vt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim;
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    for (int i = 0; i < 4; i++) t.ne[i] = ne[i];
    t.nb[0] = vt_dtype_block_bytes(dtype) / (size_t)vt_dtype_block_length(dtype);
    t.nb[1] = vt_row_size(dtype, ne0);
    for (int i = 2; i < 4; i++) t.nb[i] = t.nb[i - 1] * (size_t)t.ne[i - 1];
    return t;
}

static size_t tensor_bytes(const vt_tensor *t) { return t->nb[3] * (size_t)t->ne[3]; }

/* A tensor of zeros. */
static bool zeros(vt_op_case *c, vt_tensor *t) {
    t->data = case_alloc(c, tensor_bytes(t));
    return t->data != NULL;
}

/* A tensor of values uniform in [lo, hi), stored in its dtype (rounded to
 * nearest even, or through the GGML reference quantizers). */
static bool random_fill(vt_op_case *c, vt_tensor *t, uint64_t *s, float lo, float hi) {
    const int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    float *f = malloc((size_t)n * sizeof *f);
    t->data = case_alloc(c, tensor_bytes(t));
    if (!f || !t->data) {
        free(f);
        return false;
    }
    for (int64_t i = 0; i < n; i++) f[i] = next_f32(s, lo, hi);
    vt_status st = vt_from_f32(t->dtype, f, t->data, n);
    free(f);
    return st == VT_OK;
}

static bool index_fill(vt_op_case *c, vt_tensor *t, const void *values) {
    t->data = case_alloc(c, tensor_bytes(t));
    if (t->data) memcpy(t->data, values, tensor_bytes(t));
    return t->data != NULL;
}

/* ---- one case per op ----------------------------------------------------- */

/* Each token's U distinct experts, drawn at random, the first always
 * expert 0 (so one expert serves every token). */
static bool expert_ids_fill(vt_op_case *c, vt_tensor *ids, int64_t NE, uint64_t *rng) {
    ids->data = case_alloc(c, tensor_bytes(ids));
    if (!ids->data) return false;
    int32_t *id = ids->data;
    const int64_t U = ids->ne[0], T = vt_tensor_dim(ids, 1);
    for (int64_t t = 0; t < T; t++) {
        id[t * U] = 0;
        for (int64_t u = 1; u < U; u++) {
            int32_t e;
            bool taken;
            do {
                e = (int32_t)(next_u64(rng) % (uint64_t)NE);
                taken = false;
                for (int64_t j = 0; j < u; j++) taken = taken || id[t * U + j] == e;
            } while (taken);
            id[t * U + u] = e;
        }
    }
    return true;
}

/* Router logits with ties: every fourth value repeats its neighbour, so the
 * lower-index rule of MOE_ROUTE decides. */
static bool router_logits_fill(vt_op_case *c, vt_tensor *logits, uint64_t *rng) {
    if (!random_fill(c, logits, rng, -4.0f, 4.0f)) return false;
    float *l = logits->data;
    const int64_t n = vt_tensor_elements(logits);
    for (int64_t i = 3; i < n; i += 4) l[i] = l[i - 1];
    return true;
}

static bool build_moe_route(vt_op_case *c, const moe_shape *s, uint64_t *rng) {
    vt_node *n = &c->node;
    n->n_src = 1;
    n->src[0] = describe(VT_F32, 2, s->NE, s->T, 1, 1);
    n->dst = describe(VT_I32, 2, s->U, s->T, 1, 1);
    n->params.moe.n_used = (int32_t)s->U;
    c->out_dtype = VT_I32;
    snprintf(c->dtypes, sizeof c->dtypes, "f32->i32");
    snprintf(c->shape, sizeof c->shape, "NE=%lld U=%lld T=%lld", (long long)s->NE, (long long)s->U, (long long)s->T);
    c->bytes = 4.0 * (double)(s->NE * s->T + s->U * s->T);
    return router_logits_fill(c, &n->src[0], rng);
}

static bool build_moe_matmul(vt_op_case *c, int32_t w, const moe_shape *s, bool x_per_expert, uint64_t *rng) {
    const int64_t K = matmul_k(w, 1), N = s->N, NE = s->NE, U = s->U, T = s->T;
    vt_node *n = &c->node;
    n->n_src = 3;
    n->src[0] = describe(w, 3, K, N, NE, 1);
    n->src[1] = x_per_expert ? describe(VT_F32, 3, K, U, T, 1) : describe(VT_F32, 2, K, T, 1, 1);
    n->src[2] = describe(VT_I32, 2, U, T, 1, 1);
    n->dst = describe(VT_F32, 3, N, U, T, 1);
    c->in_dtype = VT_F32;
    c->out_dtype = VT_F32;
    snprintf(c->dtypes, sizeof c->dtypes, "%s->f32", vt_dtype_name(w));
    snprintf(c->shape, sizeof c->shape, "K=%lld N=%lld NE=%lld U=%lld T=%lld X %s", (long long)K, (long long)N,
             (long long)NE, (long long)U, (long long)T, x_per_expert ? "per expert" : "shared");
    c->flops = 2.0 * (double)K * (double)N * (double)(U * T);
    c->bytes = (double)vt_row_size(w, K) * (double)(N * NE) + 4.0 * (double)(K * U * T) + 4.0 * (double)(N * U * T);
    return random_fill(c, &n->src[0], rng, -1.0f, 1.0f) && random_fill(c, &n->src[1], rng, -1.0f, 1.0f) &&
           expert_ids_fill(c, &n->src[2], NE, rng);
}

static bool build_moe_combine(vt_op_case *c, const moe_shape *s, bool norm_top_k, uint64_t *rng) {
    const int64_t N = s->N, NE = s->NE, U = s->U, T = s->T;
    vt_node *n = &c->node;
    n->n_src = 3;
    n->src[0] = describe(VT_F32, 3, N, U, T, 1);
    n->src[1] = describe(VT_I32, 2, U, T, 1, 1);
    n->src[2] = describe(VT_F32, 2, NE, T, 1, 1);
    n->dst = describe(VT_F32, 2, N, T, 1, 1);
    n->params.moe.n_used = (int32_t)U;
    n->params.moe.norm_top_k = norm_top_k ? 1 : 0;
    c->out_dtype = VT_F32;
    snprintf(c->dtypes, sizeof c->dtypes, "f32");
    snprintf(c->shape, sizeof c->shape, "N=%lld NE=%lld U=%lld T=%lld %s", (long long)N, (long long)NE, (long long)U,
             (long long)T, norm_top_k ? "renormalized" : "softmax");
    c->bytes = 4.0 * (double)(N * U * T + NE * T + N * T) + 4.0 * (double)(U * T);
    return random_fill(c, &n->src[0], rng, -1.0f, 1.0f) && expert_ids_fill(c, &n->src[1], NE, rng) &&
           router_logits_fill(c, &n->src[2], rng);
}

static bool build_matmul(vt_op_case *c, int32_t w, const matmul_shape *s, uint64_t *rng) {
    const int64_t K = matmul_k(w, s->large_k), N = s->N, M = s->M;
    vt_node *n = &c->node;
    n->n_src = 2;
    n->src[0] = describe(w, 2, K, N, 1, 1);
    n->src[1] = describe(VT_F32, 2, K, M, 1, 1);
    n->dst = describe(s->y, 2, N, M, 1, 1);
    c->in_dtype = VT_F32;
    c->out_dtype = s->y;
    snprintf(c->dtypes, sizeof c->dtypes, "%s->%s", vt_dtype_name(w), vt_dtype_name(s->y));
    snprintf(c->shape, sizeof c->shape, "K=%lld N=%lld M=%lld", (long long)K, (long long)N, (long long)M);
    c->flops = 2.0 * (double)K * (double)N * (double)M;
    c->bytes = (double)vt_row_size(w, K) * (double)N + 4.0 * (double)(K * M) + 4.0 * (double)(N * M);
    if (!random_fill(c, &n->src[0], rng, -1.0f, 1.0f) || !random_fill(c, &n->src[1], rng, -1.0f, 1.0f)) return false;
    if (M > 2) /* a row whose first block is all zero: an activation scale of 0 must give exact zeros */
        memset((float *)n->src[1].data + 2 * K, 0, (size_t)(K < 32 ? K : 32) * sizeof(float));
    return true;
}

static bool build_get_rows(vt_op_case *c, int32_t w, vt_phase phase, uint64_t *rng) {
    static const int32_t ids_prefill[] = {0, 49, 3, 3, 17, 25, 1}, ids_decode[] = {42};
    const int64_t D = matmul_k(w, 1), V = 50, M = phase == VT_PHASE_PREFILL ? 7 : 1;
    vt_node *n = &c->node;
    n->n_src = 2;
    n->src[0] = describe(w, 2, D, V, 1, 1);
    n->src[1] = describe(VT_I32, 1, M, 1, 1, 1);
    n->dst = describe(VT_F32, 2, D, M, 1, 1);
    c->out_dtype = VT_F32;
    snprintf(c->dtypes, sizeof c->dtypes, "%s->f32", vt_dtype_name(w));
    snprintf(c->shape, sizeof c->shape, "D=%lld V=%lld M=%lld", (long long)D, (long long)V, (long long)M);
    c->bytes = (double)M * ((double)vt_row_size(w, D) + 4.0 * (double)D);
    return random_fill(c, &n->src[0], rng, -1.0f, 1.0f) &&
           index_fill(c, &n->src[1], phase == VT_PHASE_PREFILL ? ids_prefill : ids_decode);
}

static bool build_attention(vt_op_case *c, int32_t kv, const attn_shape *s, uint64_t *rng) {
    int64_t T = 0;
    for (int q = 0; q < s->n_seqs; q++) T += s->len[q];
    int32_t tables[3 * ATTN_MAX_BLOCKS], pos[64], seq[64];
    /* sequence q, logical block b -> physical (7 + 5 (q max_blocks + b)) mod 17:
     * a scattered bijection, so no sequence's blocks are contiguous */
    for (int q = 0; q < s->n_seqs; q++)
        for (int b = 0; b < ATTN_MAX_BLOCKS; b++)
            tables[q * ATTN_MAX_BLOCKS + b] = (7 + 5 * (q * ATTN_MAX_BLOCKS + b)) % ATTN_BLOCKS;
    int64_t t = 0, ctx = 0;
    for (int q = 0; q < s->n_seqs; q++)
        for (int64_t i = 0; i < s->len[q]; i++, t++) {
            pos[t] = s->first[q] + (int32_t)i;
            seq[t] = q;
            ctx += pos[t] + 1;
        }
    vt_node *n = &c->node;
    n->n_src = 6;
    n->src[0] = describe(VT_F32, 3, s->D, s->H, T, 1);
    n->src[1] = describe(kv, 4, s->D, s->KVH, ATTN_BS, ATTN_BLOCKS);
    n->src[2] = n->src[1];
    n->src[3] = describe(VT_I32, 2, ATTN_MAX_BLOCKS, s->n_seqs, 1, 1);
    n->src[4] = describe(VT_I32, 1, T, 1, 1, 1);
    n->src[5] = describe(VT_I32, 1, T, 1, 1, 1);
    n->dst = describe(VT_F32, 3, s->D, s->H, T, 1);
    n->params.attention.scale = 1.0f / sqrtf((float)s->D);
    n->params.attention.block_size = ATTN_BS;
    n->params.attention.n_seqs = s->n_seqs;
    n->params.attention.max_blocks_per_seq = ATTN_MAX_BLOCKS;
    c->out_dtype = VT_F32;
    snprintf(c->dtypes, sizeof c->dtypes, "%s", vt_dtype_name(kv));
    snprintf(c->shape, sizeof c->shape, "D=%lld H=%lld KVH=%lld T=%lld seqs=%d", (long long)s->D, (long long)s->H,
             (long long)s->KVH, (long long)T, s->n_seqs);
    /* q.k and p.v over every visible position of every query head */
    c->flops = 4.0 * (double)s->D * (double)s->H * (double)ctx;
    c->bytes = 2.0 * (double)ctx * (double)s->KVH * (double)vt_row_size(kv, s->D) + 8.0 * (double)(s->D * s->H * T);
    /* the caches are random everywhere, so a read of an unwritten or wrong
     * slot is never silently zero */
    return random_fill(c, &n->src[0], rng, -1.0f, 1.0f) && random_fill(c, &n->src[1], rng, -1.0f, 1.0f) &&
           random_fill(c, &n->src[2], rng, -1.0f, 1.0f) && index_fill(c, &n->src[3], tables) &&
           index_fill(c, &n->src[4], pos) && index_fill(c, &n->src[5], seq);
}

static bool build_store(vt_op_case *c, int32_t cache, int32_t kv, const store_shape *s, uint64_t *rng) {
    int64_t slots[64];
    const int64_t n_slots = STORE_BS * STORE_BLOCKS;
    /* 29 is coprime with 96 slots: distinct, scattered over the blocks */
    for (int64_t t = 0; t < s->T; t++) slots[t] = (3 + 29 * t) % n_slots;
    if (s->T > 4) slots[4] = -1; /* padding token: must be skipped */
    vt_node *n = &c->node;
    n->n_src = 5;
    n->src[0] = describe(kv, 3, s->D, s->KVH, s->T, 1);
    n->src[1] = n->src[0];
    n->src[2] = describe(cache, 4, s->D, s->KVH, STORE_BS, STORE_BLOCKS);
    n->src[3] = n->src[2];
    n->src[4] = describe(VT_I64, 1, s->T, 1, 1, 1);
    c->in_dtype = kv;
    c->out_dtype = cache;
    snprintf(c->dtypes, sizeof c->dtypes, "%s->%s", vt_dtype_name(kv), vt_dtype_name(cache));
    snprintf(c->shape, sizeof c->shape, "D=%lld KVH=%lld T=%lld", (long long)s->D, (long long)s->KVH,
             (long long)s->T);
    c->bytes = 2.0 * (double)(s->KVH * s->T) * ((double)vt_row_size(kv, s->D) + (double)vt_row_size(cache, s->D));
    /* the caches start at zero: the error then measures only what was (or
     * should have been) written, and a stray write shows */
    return random_fill(c, &n->src[0], rng, -1.0f, 1.0f) && random_fill(c, &n->src[1], rng, -1.0f, 1.0f) &&
           zeros(c, &n->src[2]) && zeros(c, &n->src[3]) && index_fill(c, &n->src[4], slots);
}

static bool build_rms_norm(vt_op_case *c, int32_t y, const rows_shape *s, uint64_t *rng) {
    vt_node *n = &c->node;
    n->n_src = 2;
    n->src[0] = describe(VT_F32, s->ndim, s->ne[0], s->ne[1], s->ne[2], 1);
    n->src[1] = describe(VT_F32, 1, s->ne[0], 1, 1, 1);
    n->dst = describe(y, s->ndim, s->ne[0], s->ne[1], s->ne[2], 1);
    n->params.rms_norm.eps = 1e-6f;
    c->out_dtype = y;
    snprintf(c->dtypes, sizeof c->dtypes, "f32->%s", vt_dtype_name(y));
    snprintf(c->shape, sizeof c->shape, "D=%lld rows=%lld%s", (long long)s->ne[0], (long long)(s->ne[1] * s->ne[2]),
             s->ndim == 3 ? " (per head)" : "");
    c->bytes = (4.0 + (double)vt_dtype_block_bytes(y)) * (double)(s->ne[0] * s->ne[1] * s->ne[2]);
    return random_fill(c, &n->src[0], rng, -1.0f, 1.0f) && random_fill(c, &n->src[1], rng, 0.5f, 1.5f) &&
           zeros(c, &n->dst);
}

static bool build_rope(vt_op_case *c, int32_t y, const rope_shape *s, uint64_t *rng) {
    int32_t pos[16];
    for (int64_t t = 0; t < s->T; t++) pos[t] = s->pos0 + (int32_t)t * s->step;
    vt_node *n = &c->node;
    n->n_src = s->factors ? 3 : 2;
    n->src[0] = describe(VT_F32, 3, s->D, s->heads, s->T, 1);
    n->src[1] = describe(VT_I32, 1, s->T, 1, 1, 1);
    if (s->factors) n->src[2] = describe(VT_F32, 1, s->n_rot / 2, 1, 1, 1);
    n->dst = describe(y, 3, s->D, s->heads, s->T, 1);
    n->params.rope = (vt_rope_params){s->n_rot, s->mode, s->base, s->scale};
    c->out_dtype = y;
    snprintf(c->dtypes, sizeof c->dtypes, "f32%s->%s", s->factors ? "+factors" : "", vt_dtype_name(y));
    snprintf(c->shape, sizeof c->shape, "D=%lld heads=%lld T=%lld n_rot=%d %s%s", (long long)s->D,
             (long long)s->heads, (long long)s->T, (int)s->n_rot, s->mode == VT_ROPE_NEOX ? "neox" : "norm",
             s->factors ? " factors" : "");
    c->bytes = (4.0 + (double)vt_dtype_block_bytes(y)) * (double)(s->D * s->heads * s->T);
    return random_fill(c, &n->src[0], rng, -1.0f, 1.0f) && index_fill(c, &n->src[1], pos) &&
           (!s->factors || random_fill(c, &n->src[2], rng, 1.0f, 8.0f)) && zeros(c, &n->dst);
}

static bool build_elementwise(vt_op_case *c, int op, int32_t y, int32_t x, int64_t M, bool broadcast, uint64_t *rng) {
    const int64_t N = elementwise_n;
    vt_node *n = &c->node;
    n->n_src = op == VT_OP_CONVERT ? 1 : 2;
    n->src[0] = describe(op == VT_OP_CONVERT ? x : VT_F32, 2, N, M, 1, 1);
    if (op != VT_OP_CONVERT) n->src[1] = describe(VT_F32, 2, N, broadcast ? 1 : M, 1, 1);
    n->dst = describe(y, 2, N, M, 1, 1);
    c->in_dtype = n->src[0].dtype;
    c->out_dtype = y;
    if (op == VT_OP_CONVERT) snprintf(c->dtypes, sizeof c->dtypes, "%s->%s", vt_dtype_name(x), vt_dtype_name(y));
    else snprintf(c->dtypes, sizeof c->dtypes, "f32->%s", vt_dtype_name(y));
    snprintf(c->shape, sizeof c->shape, "N=%lld M=%lld%s", (long long)N, (long long)M,
             broadcast ? " (broadcast row)" : "");
    c->bytes = (double)(N * M) * ((double)vt_dtype_block_bytes(n->src[0].dtype) + (double)vt_dtype_block_bytes(y)) +
               (op == VT_OP_CONVERT ? 0.0 : 4.0 * (double)(N * (broadcast ? 1 : M)));
    bool ok = random_fill(c, &n->src[0], rng, -1.0f, 1.0f) && zeros(c, &n->dst);
    if (ok && op != VT_OP_CONVERT) ok = random_fill(c, &n->src[1], rng, -1.0f, 1.0f);
    return ok;
}

/* The reference's node: the same inputs, outputs of its own (for the store,
 * its own copies of the zeroed caches). */
static bool split_outputs(vt_op_case *c) {
    c->ref_node = c->node;
    vt_tensor *outs[2], *ref_outs[2];
    int n = vt_op_case_outputs(&c->node, outs);
    vt_op_case_outputs(&c->ref_node, ref_outs);
    for (int i = 0; i < n; i++) {
        void *copy = case_alloc(c, tensor_bytes(outs[i]));
        if (!copy) return false;
        memcpy(copy, outs[i]->data, tensor_bytes(outs[i]));
        ref_outs[i]->data = copy;
    }
    return true;
}

bool vt_op_case_overran(const vt_tensor *t) {
    const size_t bytes = tensor_bytes(t);
    const unsigned char *guard = (const unsigned char *)t->data + bytes;
    for (size_t i = 0; i < guard_bytes(bytes); i++)
        if (guard[i] != GUARD_BYTE) return true;
    return false;
}

int vt_op_case_outputs(vt_node *node, vt_tensor **outs) {
    if (node->op == VT_OP_RESHAPE_AND_CACHE) {
        outs[0] = &node->src[2];
        outs[1] = &node->src[3];
        return 2;
    }
    outs[0] = &node->dst;
    return 1;
}

vt_status vt_op_case_build(int op, int32_t dtype, vt_phase phase, int index, uint64_t seed, vt_op_case *c,
                           vt_error *err) {
    memset(c, 0, sizeof *c);
    const int count = vt_op_case_count(op, dtype, phase);
    if (index < 0 || index >= count)
        return vt_fail(err, VT_ERR_INVALID, "op case %s %s %s #%d does not exist", vt_op_name(op),
                       vt_dtype_name(dtype), phase == VT_PHASE_DECODE ? "decode" : "prefill", index);
    c->op = op;
    c->phase = phase;
    c->axis_dtype = dtype;
    c->in_dtype = VT_F32;
    c->node.struct_size = sizeof c->node;
    c->node.op = op;
    c->node.phase = phase;
    /* every case its own stream, whatever ran before it */
    uint64_t rng = seed ^ (0x100000001b3ull * (uint64_t)(op + 1)) ^ ((uint64_t)dtype << 24) ^
                   ((uint64_t)phase << 40) ^ ((uint64_t)index << 48);
    next_u64(&rng);
    const bool pre = phase == VT_PHASE_PREFILL;
    bool ok = false;
    int32_t srcs[2];
    switch (op) {
    case VT_OP_MATMUL: ok = build_matmul(c, dtype, pre ? &matmul_prefill[index] : &matmul_decode[index], &rng); break;
    case VT_OP_GET_ROWS: ok = build_get_rows(c, dtype, phase, &rng); break;
    case VT_OP_ATTENTION: ok = build_attention(c, dtype, pre ? &attn_prefill[index] : &attn_decode[index], &rng); break;
    case VT_OP_RESHAPE_AND_CACHE: {
        const int n_src = store_sources(dtype, srcs);
        ok = build_store(c, dtype, srcs[index % n_src], pre ? &store_prefill[index / n_src] : &store_decode[index / n_src],
                         &rng);
        break;
    }
    case VT_OP_RMS_NORM: ok = build_rms_norm(c, dtype, pre ? &norm_prefill[index] : &norm_decode[index], &rng); break;
    case VT_OP_ROPE: ok = build_rope(c, dtype, pre ? &rope_prefill[index] : &rope_decode[index], &rng); break;
    case VT_OP_SWIGLU:
        ok = build_elementwise(c, op, dtype, VT_F32, pre ? elementwise_m_prefill : 1, false, &rng);
        break;
    case VT_OP_ADD: ok = build_elementwise(c, op, dtype, VT_F32, pre ? elementwise_m_prefill : 1, index == 1, &rng); break;
    case VT_OP_CONVERT:
        ok = build_elementwise(c, op, dtype, float_axis[index], pre ? elementwise_m_prefill : 1, false, &rng);
        break;
    case VT_OP_MOE_ROUTE: ok = build_moe_route(c, pre ? &moe_prefill[index] : &moe_decode[index], &rng); break;
    case VT_OP_MOE_MATMUL:
        ok = build_moe_matmul(c, dtype, pre ? &moe_prefill[index / 2] : &moe_decode[index / 2], index % 2, &rng);
        break;
    case VT_OP_MOE_COMBINE:
        ok = build_moe_combine(c, pre ? &moe_prefill[index / 2] : &moe_decode[index / 2], index % 2 == 0, &rng);
        break;
    default: break;
    }
    if (ok && op != VT_OP_RESHAPE_AND_CACHE && c->node.dst.data == NULL) ok = zeros(c, &c->node.dst);
    if (ok) ok = split_outputs(c);
    if (!ok) {
        vt_op_case_free(c);
        return vt_fail(err, VT_ERR_NOMEM, "op case %s: out of memory", vt_op_name(op));
    }
    return VT_OK;
}

void vt_op_case_free(vt_op_case *c) {
    for (int i = 0; i < c->n_buffers; i++) free(c->buffers[i]);
    c->n_buffers = 0;
    memset(&c->node, 0, sizeof c->node);
    memset(&c->ref_node, 0, sizeof c->ref_node);
}
