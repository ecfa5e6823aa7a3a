/* matmul.c — Y[m][n] = sum_k X[m][k] W[n][k]: activation preparation, work
 * split and tiling. The per-dtype dot kernels are in matmul_<dtype>.c.
 *
 * Decode (M = 1) is bound by memory bandwidth: every weight byte is read once,
 * so the N output rows are split into a few contiguous chunks per thread and
 * each thread streams a chunk's rows start to end (one sequential stream the
 * hardware prefetcher follows), then claims the next.
 * Prefill (M > 1) is bound by compute: the kernels decode a weight block once
 * and use it for up to SIMD_MAX_ROWS activation rows. Each thread walks its
 * output rows in tiles that stay in L2 and, for each tile, every activation
 * row group in turn: the group is read once per weight row, so it is the
 * part that must stay in L1.
 * A few rows (2 <= M <= SIMD_SMALL_M, or SIMD_PAIR_ZMM_ROWS for the avx512
 * tier's Q4_K and Q6_K pairs: sequences decoding together) are split and streamed as decode
 * is, each weight pair against all M rows. */
#include <stdbool.h>
#include <string.h>

#include "simd.h"
#include "vt/vt_bf16_row.h" /* its function carries its own AVX-512 target: called on the bf16 tier only */
#include "vt/vt_quant.h"

typedef struct weight_format {
    simd_dot_fn dot;
    int64_t block_length; /* values per block */
    size_t block_bytes;   /* bytes per block */
    int act_kind;         /* ACT_F32, ACT_Q8_0, ACT_Q8_K16 or ACT_Q8_K32 */
    int prefill_wrows;    /* weight rows per kernel call in prefill */
    int prefill_rows;     /* activation rows per kernel call in prefill */
    int small_m;          /* up to this many activation rows are streamed in weight pairs (see matmul_rows) */
} weight_format;

enum { ACT_F32 = SIMD_ACT_F32, ACT_Q8_0 = SIMD_ACT_Q8_0, ACT_Q8_K16 = SIMD_ACT_Q8_K16, ACT_Q8_K32 = SIMD_ACT_Q8_K32 };

static int weight_format_of(int32_t dtype, simd_isa isa, bool bf16_dot, int64_t K, weight_format *f) {
    /* The avx512 tier's Q4_K and Q6_K pairs take up to SIMD_PAIR_ZMM_ROWS
     * activation rows in registers (matmul_q4_k_vnni.c) while the rows stay
     * in L1, where the AVX2 pair tiles stop at SIMD_SMALL_M. */
    const bool vnni = isa == SIMD_ISA_AVX512_VNNI;
    const int pair_rows = vnni && K <= SIMD_PAIR_ZMM_MAX_K ? SIMD_PAIR_ZMM_ROWS : SIMD_SMALL_M;
    switch (dtype) {
    case VT_F32: *f = (weight_format){simd_dot_f32, 1, 4, ACT_F32, SIMD_FLOAT_WROWS, 4, 0}; return 1;
    case VT_F16: *f = (weight_format){simd_dot_f16, 1, 2, ACT_F32, SIMD_FLOAT_WROWS, 4, 0}; return 1;
    case VT_BF16:
        *f = bf16_dot ? (weight_format){simd_dot_bf16_dp, 1, 2, SIMD_ACT_BF16, SIMD_FLOAT_WROWS, SIMD_MAX_ROWS, 0}
                      : (weight_format){simd_dot_bf16, 1, 2, ACT_F32, SIMD_FLOAT_WROWS, 4, 0};
        return 1;
    case VT_Q8_0:
        *f = (weight_format){simd_dot_q8_0, 32, sizeof(vt_block_q8_0), ACT_Q8_0, 1, SIMD_MAX_ROWS, SIMD_SMALL_M};
        return 1;
    case VT_Q4_0:
        *f = (weight_format){simd_dot_q4_0, 32, sizeof(vt_block_q4_0), ACT_Q8_0, 1, SIMD_MAX_ROWS, SIMD_SMALL_M};
        return 1;
    case VT_Q4_K:
        *f = (weight_format){vnni ? simd_dot_q4_k_vnni : simd_dot_q4_k, 256, sizeof(vt_block_q4_k), ACT_Q8_K32, 1,
                             SIMD_MAX_ROWS, pair_rows};
        return 1;
    case VT_Q5_K:
        *f = (weight_format){simd_dot_q5_k, 256, sizeof(vt_block_q5_k), ACT_Q8_K32, 1, SIMD_MAX_ROWS, SIMD_SMALL_M};
        return 1;
    case VT_Q6_K:
        *f = (weight_format){vnni ? simd_dot_q6_k_vnni : simd_dot_q6_k, 256, sizeof(vt_block_q6_k), ACT_Q8_K16, 1,
                             SIMD_MAX_ROWS, pair_rows};
        return 1;
    default: return 0;
    }
}

/* ---- activation quantization (parallel over rows) ---- */

typedef struct quantize_task {
    const float *x; /* [M][K] */
    int8_t *qs;     /* [M][K] */
    float *d;       /* [M][K / block] */
    int16_t *bsums; /* [M][K / 16] or NULL; hsums [M][K / 8] for SIMD_ACT_Q8_K16H */
    float *msums;   /* [M][K / 32] or NULL */
    int16_t *isums; /* [M][K / 32] or NULL */
    int64_t K;
    int kind;
    vt_bf16_t *h; /* [M][K]: SIMD_ACT_BF16's rows, instead of all the above */
} quantize_task;

static void quantize_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const quantize_task *t = arg;
    const int64_t K = t->K;
    for (int64_t m = begin; m < end; m++) {
        if (t->kind == SIMD_ACT_BF16)
            vt_f32_to_bf16_row_avx512(t->x + m * K, t->h + m * K, K);
        else if (t->kind == ACT_Q8_0)
            simd_quantize_row_q8_0(t->x + m * K, t->qs + m * K, t->d + m * (K / 32), K);
        else if (t->kind == SIMD_ACT_Q8_0I)
            simd_quantize_row_q8_0_isums(t->x + m * K, t->qs + m * K, t->d + m * (K / 32), t->isums + m * (K / 32), K);
        else if (t->kind == SIMD_ACT_Q8_K16H)
            simd_quantize_row_q8_k_hsums(t->x + m * K, t->qs + m * K, t->d + m * (K / 256), t->bsums + m * (K / 8), K);
        else if (t->kind == SIMD_ACT_Q8_K32I)
            simd_quantize_row_q8_k_isums(t->x + m * K, t->qs + m * K, t->d + m * (K / 256), t->isums + m * (K / 32), K);
        else {
            simd_quantize_row_q8_k(t->x + m * K, t->qs + m * K, t->d + m * (K / 256),
                                   t->bsums ? t->bsums + m * (K / 16) : NULL, t->msums ? t->msums + m * (K / 32) : NULL,
                                   K);
        }
    }
}

/* ---- the tiled product ---- */

typedef struct matmul_task {
    const uint8_t *w; /* N rows of row_bytes */
    size_t row_bytes;
    simd_dot_fn dot;
    simd_act act;
    int64_t N, M;
    int64_t tile_rows; /* weight rows per L2 tile */
    int wrows, rows;   /* prefill kernel tile: weight rows x activation rows */
    int small_m;       /* 2 <= M <= the format's small_m (quantized weights): streamed in pairs */
    void *y;           /* [M][N] of y_dtype */
    int32_t y_dtype;
} matmul_task;

static inline void store_value(int32_t dtype, void *y, int64_t i, float v) {
    if (dtype == VT_F32)
        ((float *)y)[i] = v;
    else if (dtype == VT_F16)
        ((vt_fp16_t *)y)[i] = vt_f32_to_fp16(v);
    else
        ((vt_bf16_t *)y)[i] = vt_f32_to_bf16(v);
}

/* Rows [begin, end) of W, all M activation rows. */
static void matmul_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const matmul_task *t = arg;
    float out[SIMD_FLOAT_WROWS * SIMD_MAX_ROWS]; /* the widest tile any kernel takes */
    if (t->M == 1) {
        /* decode: weight rows in pairs, one activation row. The pair is row n
         * of the first half of the range and row n + half of the second, so
         * the thread reads two sequential streams at once: one stream per
         * core left DRAM bandwidth unused (the hardware prefetchers keep
         * more lines in flight for two), as the bandwidth probe's two
         * buffers do not. */
        const int64_t half = (end - begin) / 2;
        const size_t stride = (size_t)half * t->row_bytes;
        for (int64_t n = begin; n < begin + half; n++) {
            t->dot(t->w + (size_t)n * t->row_bytes, stride, 2, &t->act, 0, 1, out);
            store_value(t->y_dtype, t->y, n, out[0]);
            store_value(t->y_dtype, t->y, n + half, out[1]);
        }
        if ((end - begin) % 2) { /* the odd row out */
            t->dot(t->w + (size_t)(end - 1) * t->row_bytes, t->row_bytes, 1, &t->act, 0, 1, out);
            store_value(t->y_dtype, t->y, end - 1, out[0]);
        }
        return;
    }
    if (t->small_m) {
        /* a few sequences decoding together: streamed as decode streams
         * (weight rows in pairs from the two halves of the range, each
         * pair read from memory once), every pair against all M activation
         * rows. The kernels' per-row arithmetic is the same in every tile,
         * so a row's result does not depend on M. */
        const int64_t half = (end - begin) / 2;
        const size_t stride = (size_t)half * t->row_bytes;
        for (int64_t n = begin; n < begin + half; n++) {
            for (int64_t m0 = 0; m0 < t->M; m0 += SIMD_MAX_ROWS) {
                const int R = (int)(t->M - m0 < SIMD_MAX_ROWS ? t->M - m0 : SIMD_MAX_ROWS);
                t->dot(t->w + (size_t)n * t->row_bytes, stride, 2, &t->act, m0, R, out);
                for (int r = 0; r < R; r++) {
                    store_value(t->y_dtype, t->y, (m0 + r) * t->N + n, out[r]);
                    store_value(t->y_dtype, t->y, (m0 + r) * t->N + n + half, out[R + r]);
                }
            }
        }
        if ((end - begin) % 2) { /* the odd row out */
            for (int64_t m0 = 0; m0 < t->M; m0 += SIMD_MAX_ROWS) {
                const int R = (int)(t->M - m0 < SIMD_MAX_ROWS ? t->M - m0 : SIMD_MAX_ROWS);
                t->dot(t->w + (size_t)(end - 1) * t->row_bytes, t->row_bytes, 1, &t->act, m0, R, out);
                for (int r = 0; r < R; r++) store_value(t->y_dtype, t->y, (m0 + r) * t->N + end - 1, out[r]);
            }
        }
        return;
    }
    for (int64_t n0 = begin; n0 < end; n0 += t->tile_rows) {
        const int64_t n1 = n0 + t->tile_rows < end ? n0 + t->tile_rows : end;
        for (int64_t m0 = 0; m0 < t->M; m0 += t->rows) {
            const int R = (int)(t->M - m0 < t->rows ? t->M - m0 : t->rows);
            for (int64_t n = n0; n < n1; n += t->wrows) {
                const int NW = n1 - n < t->wrows ? (int)(n1 - n) : t->wrows;
                t->dot(t->w + (size_t)n * t->row_bytes, t->row_bytes, NW, &t->act, m0, R, out);
                for (int j = 0; j < NW; j++)
                    for (int r = 0; r < R; r++) store_value(t->y_dtype, t->y, (m0 + r) * t->N + n + j, out[j * R + r]);
            }
        }
    }
}

vt_status simd_quantize_activations(simd_ctx *ctx, const vt_tensor *X, int kind, simd_act *act) {
    const int64_t K = X->ne[0], M = X->ne[1];
    act->K = K;
    if (kind == ACT_F32) {
        act->f = X->data;
        return VT_OK;
    }
    const int64_t block = kind == ACT_Q8_0 || kind == SIMD_ACT_Q8_0I ? 32 : 256;
    if (kind == SIMD_ACT_BF16) {
        vt_bf16_t *h = simd_scratch(ctx, simd_align_up((size_t)(M * K) * sizeof(vt_bf16_t)));
        if (!h) return VT_ERR_NOMEM;
        quantize_task q = {.x = X->data, .h = h, .K = K, .kind = kind};
        if (M == 1)
            quantize_rows(&q, 0, 1, 0);
        else
            vt_host_parallel_for(ctx->host, M, 1, quantize_rows, &q);
        act->h = h;
        return VT_OK;
    }
    const size_t qs_bytes = simd_align_up((size_t)(M * K));
    const size_t d_bytes = simd_align_up((size_t)(M * (K / block)) * sizeof(float));
    const size_t bsum_bytes = kind == ACT_Q8_K16    ? simd_align_up((size_t)(M * (K / 16)) * sizeof(int16_t))
                              : kind == SIMD_ACT_Q8_K16H ? simd_align_up((size_t)(M * (K / 8)) * sizeof(int16_t))
                                                         : 0;
    const size_t msum_bytes = kind == ACT_Q8_K32 ? simd_align_up((size_t)(M * (K / 32)) * sizeof(float)) : 0;
    const size_t isum_bytes = kind == SIMD_ACT_Q8_K32I || kind == SIMD_ACT_Q8_0I ? simd_align_up((size_t)(M * (K / 32)) * sizeof(int16_t)) : 0;
    uint8_t *buf = simd_scratch(ctx, qs_bytes + d_bytes + bsum_bytes + msum_bytes + isum_bytes);
    if (!buf) return VT_ERR_NOMEM;
    quantize_task q = {.x = X->data,
                       .qs = (int8_t *)buf,
                       .d = (float *)(buf + qs_bytes),
                       .bsums = bsum_bytes ? (int16_t *)(buf + qs_bytes + d_bytes) : NULL,
                       .msums = msum_bytes ? (float *)(buf + qs_bytes + d_bytes + bsum_bytes) : NULL,
                       .isums = isum_bytes ? (int16_t *)(buf + qs_bytes + d_bytes + bsum_bytes + msum_bytes) : NULL,
                       .K = K,
                       .kind = kind};
    if (M == 1)
        quantize_rows(&q, 0, 1, 0); /* cheaper than waking the pool */
    else
        vt_host_parallel_for(ctx->host, M, 1, quantize_rows, &q);
    act->qs = q.qs;
    act->d = q.d;
    act->bsums = kind == SIMD_ACT_Q8_K16H ? NULL : q.bsums;
    act->hsums = kind == SIMD_ACT_Q8_K16H ? q.bsums : NULL;
    act->msums = q.msums;
    act->isums = q.isums;
    return VT_OK;
}

vt_status simd_matmul(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_tensor *W = &node->src[0], *X = &node->src[1], *Y = &node->dst;
    const int64_t K = W->ne[0], N = W->ne[1], M = X->ne[1];
    if (node->prepared & 1u) { /* src[0] is the copy prepare.c made: its layout's own driver */
        const simd_prepared_format *pf = simd_prepared_format_of(W->dtype);
        if (!pf) return VT_ERR_INVALID;
        if (M <= 0 || N <= 0) return VT_OK;
        return pf->matmul(ctx, node);
    }
    weight_format f;
    if (!weight_format_of(W->dtype, ctx->isa, ctx->bf16_dot, K, &f) || K % f.block_length != 0) return VT_ERR_INVALID;
    if (M <= 0 || N <= 0) return VT_OK;

    matmul_task t;
    memset(&t, 0, sizeof t);
    t.w = W->data;
    t.row_bytes = (size_t)(K / f.block_length) * f.block_bytes;
    t.dot = f.dot;
    t.wrows = f.prefill_wrows;
    t.rows = f.prefill_rows;
    t.act.K = K;
    t.N = N;
    t.M = M;
    t.y = Y->data;
    t.y_dtype = Y->dtype;

    vt_status st = simd_quantize_activations(ctx, X, f.act_kind, &t.act);
    if (st != VT_OK) return st;

    /* ~64 KiB of weight rows per tile, kept in L2 while every group of
     * SIMD_MAX_ROWS activation rows passes over them; each group (8 x K
     * bytes, 24 KiB at K = 3072) is what stays in L1, as it is read once per
     * weight row. */
    int64_t tile = (int64_t)(65536 / t.row_bytes);
    t.tile_rows = tile < 1 ? 1 : tile > 256 ? 256 : tile;
    /* whole kernel tiles, so only the op's last rows take a narrower one */
    if (t.tile_rows > t.wrows) t.tile_rows -= t.tile_rows % t.wrows;
    /* Rows are handed out in chunks (simd_dynamic_for): one L2 tile each in
     * prefill; in decode about 4 per thread, whole pairs, so a thread that
     * falls behind (or a costlier range) does not leave the other waiting
     * for up to half the op. */
    int64_t chunk = t.tile_rows;
    t.small_m = M > 1 && M <= f.small_m;
    if (M == 1 || t.small_m) {
        chunk = N / (4 * (int64_t)ctx->n_threads);
        chunk = chunk < 32 ? 32 : (chunk + 1) & ~(int64_t)1;
    }
    simd_dynamic_for(ctx, N, chunk, matmul_rows, &t);
    return VT_OK;
}
