/* simd.h — the simd backend's private interface: its context, the op entry
 * points and the matmul kernel contract. Included by baseline (probe.c,
 * backend.c) and AVX2 translation units alike, so it declares no intrinsics;
 * vector helpers live in simd_vec.h, which only kernel files include. */
#ifndef VT_SIMD_H
#define VT_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vt/vt_backend.h"
#include "vt/vt_quant.h"

#define SIMD_BACKEND_NAME "simd"

/* Alignment of every scratch buffer: a cache line, so AVX loads never split. */
#define SIMD_ALIGN 64

/* The instruction-set tiers of simd's kernels. AVX2 (with FMA and F16C)
 * is the floor every kernel has; a higher tier replaces the kernels it has
 * its own of and leaves the others on AVX2. */
typedef enum simd_isa {
    SIMD_ISA_AVX2 = 0,
    SIMD_ISA_AVX512_VNNI = 1, /* AVX-512 F/BW/VL with VNNI: the prepared Q4_K, Q5_K, Q6_K, Q8_0, Q4_0 matmuls, Q4_K's
                                 and Q6_K's decode on the file's layout, attention */
} simd_isa;

/* The angles rope last rotated by, as cos/sin tables per token: every
 * layer's q and k rope of one step use the same positions and frequencies,
 * so the step computes them once (rope.c). */
typedef struct simd_rope_tables {
    bool valid;
    int64_t n_tokens, n_rot;
    int32_t mode;
    float freq_base, freq_scale;
    bool has_factors;
    int32_t *pos;    /* [n_tokens] */
    float *factors;  /* [n_rot / 2] when has_factors */
    float *cos_sin;  /* [n_tokens][2 * n_rot]: rope_tokens' cos_t then sin_t */
    int64_t cap_tokens, cap_rot;
} simd_rope_tables;

typedef struct simd_ctx {
    const vt_host *host;
    int n_threads;
    simd_isa isa; /* chosen at init: the best the CPU and OS run, or the isa option */
    bool bf16_dot; /* the avx512 tier on a CPU with AVX-512 BF16: BF16 weights and caches multiplied in bf16 */
    /* One growable scratch buffer reused by every op (ops never run
     * concurrently on one ctx): quantized activations, per-thread tiles. */
    void *scratch;
    size_t scratch_size;
    simd_rope_tables rope;
} simd_ctx;

/* Free what ctx->rope holds. */
void simd_rope_tables_free(simd_ctx *ctx);

/* A scratch area of at least `size` bytes (SIMD_ALIGN-aligned), or NULL when
 * the host cannot allocate it. Invalidates earlier results of this call. */
void *simd_scratch(simd_ctx *ctx, size_t size);

/* Run fn over [0, n) on the host's threads in chunks of `chunk` items
 * (the last may be shorter), each thread claiming the next chunk when done
 * with its previous one: balances unequal chunks and preempted threads
 * (see work_queue.c). fn's `thread` is the pool thread running the chunk. */
void simd_dynamic_for(simd_ctx *ctx, int64_t n, int64_t chunk, vt_range_fn fn, void *arg);

/* Round n up to a multiple of SIMD_ALIGN. */
static inline size_t simd_align_up(size_t n) { return (n + SIMD_ALIGN - 1) & ~(size_t)(SIMD_ALIGN - 1); }

/* Op entry points (one file each, as in backends/reference). */
vt_status simd_matmul(void *ctx, const vt_node *node);
vt_status simd_attention(void *ctx, const vt_node *node);
/* Its tiers' builds of attention_impl.h (simd_attention picks by ctx->isa). */
vt_status simd_attention_avx2(void *ctx, const vt_node *node);
vt_status simd_attention_avx512(void *ctx, const vt_node *node);
vt_status simd_attention_avx512_bf16(void *ctx, const vt_node *node); /* BF16 caches, ctx->bf16_dot */
vt_status simd_reshape_and_cache(void *ctx, const vt_node *node);
vt_status simd_rms_norm(void *ctx, const vt_node *node);
vt_status simd_rope(void *ctx, const vt_node *node);
vt_status simd_swiglu(void *ctx, const vt_node *node);
vt_status simd_add(void *ctx, const vt_node *node);
vt_status simd_get_rows(void *ctx, const vt_node *node);
vt_status simd_convert(void *ctx, const vt_node *node);
vt_status simd_moe_route(void *ctx, const vt_node *node);
vt_status simd_moe_matmul(void *ctx, const vt_node *node);
vt_status simd_moe_combine(void *ctx, const vt_node *node);

/* ------------------------------------------------------------------------ */
/* Matmul kernels.
 *
 * Activations X {K, M} f32 are prepared once per matmul in the form the
 * weight dtype's kernel wants:
 *   - Q8_0 / Q4_0 weights: 8-bit blocks of 32 (qs, one scale d per block);
 *   - K-quant weights: 8-bit blocks of 256 (qs, d per block) plus the sums
 *     of each sub-block's quantized values, which let the kernels apply the
 *     weights' per-sub-block offsets (Q6_K: bsums, int16 sums of 16) or
 *     minimums (Q4_K, Q5_K: msums, d times the sum of 32, as f32 so one FMA
 *     per block and row applies all 8 minimums);
 *   - F32 / F16 / BF16 weights: the f32 rows as given. */
typedef struct simd_act {
    int64_t K;            /* values per row */
    const int8_t *qs;     /* [M][K] quantized values */
    const float *d;       /* [M][K / block] per-block scales */
    const int16_t *bsums; /* [M][K / 16] (Q6_K weights only) */
    const float *msums;   /* [M][K / 32] (Q4_K, Q5_K weights only) */
    const int16_t *isums; /* [M][K / 32] sums of each 32 quantized values (prepared Q4_K, Q5_K, Q4_0) */
    const int16_t *hsums; /* [M][K / 8] per run of 16 values, -32 times the sum of those at 4i and 4i + 1, then at
                             4i + 2 and 4i + 3 (prepared Q6_K: the int16 halves of its vpmaddubsw lanes) */
    const float *f;       /* [M][K] f32 rows (float weights only) */
    const vt_bf16_t *h;   /* [M][K] the f32 rows rounded to bf16 (BF16 weights where the CPU multiplies bf16) */
} simd_act;

/* Activation forms (simd_act): f32 as given; 8-bit blocks of 32; 8-bit
 * blocks of 256 with int16 sums of 16 (Q6_K's sub-blocks), with f32 sums
 * of 32 (Q4_K's and Q5_K's), or with int16 sums of 32 (prepared Q4_K). */
enum {
    SIMD_ACT_F32 = 0,
    SIMD_ACT_Q8_0 = 1,
    SIMD_ACT_Q8_K16 = 2,
    SIMD_ACT_Q8_K32 = 3,
    SIMD_ACT_Q8_K32I = 4,
    SIMD_ACT_Q8_0I = 5, /* blocks of 32 with int16 sums of each block (prepared Q4_0) */
    SIMD_ACT_Q8_K16H = 6, /* blocks of 256 with hsums (prepared Q6_K) */
    SIMD_ACT_BF16 = 7     /* bf16 rows (simd_dot_bf16_dp) */
};

/* Prepare the M rows of X {K, M} f32 in form `kind` into ctx's scratch
 * (parallel over rows): once per matmul. VT_ERR_NOMEM when scratch cannot grow. */
vt_status simd_quantize_activations(simd_ctx *ctx, const vt_tensor *X, int kind, simd_act *act);

/* The most activation rows one kernel call handles: every weight block the
 * kernel decodes is reused for this many rows (prefill). */
#define SIMD_MAX_ROWS 8
/* Up to this many activation rows (sequences decoding together), quantized
 * weights are streamed as in decode, in pairs of rows each read once, every
 * pair against all the rows; more rows take L2 tiles of weight rows, each
 * reused for every group of SIMD_MAX_ROWS activation rows (measured on
 * qwen3-0.6B Q4_K_M at 8 rows: the tiles cost less CPU time than pairs
 * streamed against 8 rows, either as two 4-row pair tiles or as prefill
 * tiles; at 2..4 rows the pair tiles cost 10-20% less). */
#define SIMD_SMALL_M 4
/* The avx512 tier's Q4_K and Q6_K pairs on the file's layout hold 2 x 8
 * accumulators in AVX-512's 32 registers and take up to this many rows,
 * streamed as decode is, while the rows stay in L1 (K <= SIMD_PAIR_ZMM_MAX_K,
 * 8 x K bytes); measured at K = 1024: 1.7x the L2 tiles at 8 rows, 2.5x
 * at 5 (bench/RESULTS.md). */
#define SIMD_PAIR_ZMM_ROWS 8
#define SIMD_PAIR_ZMM_MAX_K 4096
/* The most weight rows one kernel call handles: decode (one activation row)
 * takes weight rows in pairs, so each activation load feeds two rows and the
 * two rows' dependency chains overlap. */
#define SIMD_MAX_WROWS 2
/* The float kernels (F32, F16, BF16 weights) also take NW = 3, with R <= 4
 * per native tile: their prefill tile (see matmul_float.c). */
#define SIMD_FLOAT_WROWS 3

/* out[j * R + r] = dot(weight row j, activation row m0 + r), for j < NW and
 * r < R, for 1 <= NW <= SIMD_MAX_WROWS and 1 <= R <= SIMD_MAX_ROWS. The
 * fast tiles are NW = 1 with any R (prefill), NW = 2 with R = 1 (decode) and,
 * for Q4_K and Q6_K, NW = 2 with R = 2..4 (a few sequences); others are computed as
 * several of those. Every tile gives each (j, r) the same float operations in
 * the same order, so a row's result does not depend on NW, R or m0.
 *   w:        NW weight rows, K values each in the weight dtype, w_stride bytes apart
 *   x:        prepared activations, rows m0 .. m0+R-1 are read
 *   out:      [NW][R] */
typedef void (*simd_dot_fn)(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R,
                            float *out);

void simd_dot_f32(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_f16(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_bf16(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
/* BF16 weights against bf16 activations (x->h) with vdpbf16ps; AVX-512 BF16
 * only (matmul_bf16_dp.c). */
void simd_dot_bf16_dp(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_q8_0(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_q4_0(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_q4_k(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
/* The AVX-512 VNNI tier's: its own pair of weight rows against 1 to 4 activation rows, the other tiles
 * simd_dot_q4_k's (same bits); likewise for Q6_K. */
void simd_dot_q4_k_vnni(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_q5_k(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_q6_k(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);
void simd_dot_q6_k_vnni(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out);

/* Quantize one f32 row of K values (K a multiple of 32, resp. 256).
 *   x: [K]; qs: [K]; d: [K/32] resp. [K/256];
 *   bsums: [K/16] or NULL; msums: [K/32] or NULL (see simd_act) */
void simd_quantize_row_q8_0(const float *x, int8_t *qs, float *d, int64_t K);
void simd_quantize_row_q8_k(const float *x, int8_t *qs, float *d, int16_t *bsums, float *msums, int64_t K);
/* As simd_quantize_row_q8_k, recording int16 sums of each 32 values: isums [K/32]. */
void simd_quantize_row_q8_k_isums(const float *x, int8_t *qs, float *d, int16_t *isums, int64_t K);
/* As simd_quantize_row_q8_k, recording hsums [K/8] (see simd_act). */
void simd_quantize_row_q8_k_hsums(const float *x, int8_t *qs, float *d, int16_t *hsums, int64_t K);
/* As simd_quantize_row_q8_0, recording the int16 sum of each block: isums [K/32]. */
void simd_quantize_row_q8_0_isums(const float *x, int8_t *qs, float *d, int16_t *isums, int64_t K);

/* ------------------------------------------------------------------------ */
/* Prepared weights (ABI 1.2, prepare.c). A dtype with an entry in
 * prepare.c's table is copied at engine creation into a layout of its own
 * kernels; matmul.c hands a node whose src[0] carries the prepared bit to
 * that entry's driver. Dtypes without an entry are declined and run on the
 * file's bytes. */
typedef struct simd_prepared_format {
    int32_t dtype;
    /* bytes of the prepared copy of a {K, N} weight (K whole blocks) */
    size_t (*size)(int64_t K, int64_t N);
    /* the preparation's units of work (row groups), split over threads */
    int64_t (*units)(int64_t N);
    /* write units [u0, u1) of the copy of the {K, N} weight src into dst */
    void (*prepare)(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1);
    /* MATMUL with src[0] in this layout */
    vt_status (*matmul)(simd_ctx *ctx, const vt_node *node);
    /* Row n of the copy as K f32, equal bit for bit to the host's
     * dequantization of the file's row: GET_ROWS on a prepared table (a tied
     * embedding). NULL: weights read by GET_ROWS are declined. */
    void (*row_to_f32)(const void *w, int64_t K, int64_t N, int64_t n, float *dst);
    /* The layout's tile for the shared 8-row group walk (prepared_groups.h)
     * at ctx's tier, or NULL for a layout with a walk of its own: a mixture
     * of experts then runs all its experts in one pass (moe_matmul.c). */
    const struct simd_group_layout *(*group_layout)(const simd_ctx *ctx);
} simd_prepared_format;

/* Bytes of one expert's copy in a prepared stack of experts {K, N, NE}:
 * expert e's copy starts e slices in (each SIMD_ALIGN-aligned). */
size_t simd_expert_slice_bytes(const simd_prepared_format *f, int64_t K, int64_t N);

/* The entry for a weight dtype, or NULL (not prepared). */
const simd_prepared_format *simd_prepared_format_of(int32_t dtype);
vt_status simd_prepare_weight(void *ctx, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                              size_t err_size);
void simd_release_weight(void *ctx, void *data);

/* Store n f32 values into a row of dtype F32, F16 or BF16 (round to nearest even). */
void simd_store_row(int32_t dtype, const float *src, void *dst, int64_t n);
/* Load n values of dtype F32, F16 or BF16 as f32. */
void simd_load_row(int32_t dtype, const void *src, float *dst, int64_t n);

/* The Q8_0 KV cache (kv_q8_0.c; attention's kernels over it in
 * kv_q8_0_chunk.h). A query of D values (D a multiple of 32) as 16-bit
 * blocks of 32: qs [D], qd [D / 32], x = qd[b] * qs[i] to 1 part in 65534 of
 * its block's max. */
void simd_q8_0_quantize_query(const float *x, int16_t *qs, float *qd, int64_t D);
/* Quantize T rows of src (F32/F16/BF16 {D, KVH, T}) into their slots of a
 * Q8_0 cache; buf holds one row of f32. Negative slots are skipped. */
vt_status simd_store_rows_q8_0(const vt_host *host, const vt_tensor *src, const vt_tensor *cache,
                               const int64_t *slots, int64_t T, float *buf);

/* Bytes of one element of F32/F16/BF16 (0 for any other dtype). */
static inline size_t simd_float_size(int32_t dtype) {
    return dtype == VT_F32 ? 4 : (dtype == VT_F16 || dtype == VT_BF16) ? 2 : 0;
}

#endif
