/* matmul_float.c — dot kernels for F32, F16 and BF16 weights against f32
 * activations: weights widened to f32 in registers (F16C for f16, a shift for
 * bf16, both exact) and accumulated with FMA in f32.
 *
 * Batch invariance: every output element is summed in one order whatever
 * the tile it falls in (decode's pair of weight rows, a prefill tile, a
 * leftover row): one 8-lane accumulator over K in steps of 8, the same
 * horizontal sum, then the scalar tail. So a row's product is bit-identical
 * whether it is computed alone (M = 1) or among other rows, and a sequence's
 * logits do not depend on what shares its step. Decode does not need a
 * second accumulator set to hide FMA latency: it streams every weight byte
 * from DRAM once and stays bandwidth-bound with one chain per weight row
 * (only with the weights already in cache is it compute-bound, and then
 * up to ~40% slower). The other orders that keep two chains in decode cost more
 * where compute binds: two sets for every tile do not fit a prefill tile's
 * accumulators in the 16 registers (2 x 3 tiles: 8-24% slower in prefill
 * and batched decode), and even blocks then odd blocks from cache doubles
 * the L2 traffic at K = 3072 (20-50% slower). bench/RESULTS.md has the runs. */
#include "simd.h"
#include "simd_vec.h"

enum { W_F32, W_F16, W_BF16 };

SIMD_INLINE __m256 load8(int kind, const void *w, int64_t k) {
    if (kind == W_F32) return _mm256_loadu_ps((const float *)w + k);
    if (kind == W_F16) return simd_load8_f16((const vt_fp16_t *)w + k);
    return simd_load8_bf16((const vt_bf16_t *)w + k);
}

SIMD_INLINE float load1(int kind, const void *w, int64_t k) {
    if (kind == W_F32) return ((const float *)w)[k];
    if (kind == W_F16) return vt_fp16_to_f32(((const vt_fp16_t *)w)[k]);
    return vt_bf16_to_f32(((const vt_bf16_t *)w)[k]);
}

/* out[j * R + r] = w_j . x_r for NW weight rows and R activation rows; NW
 * and R are constants after inlining, so the NW x R accumulators live in
 * registers. Prefill's 3 x 4 tile fills the 16 ymm registers: 12
 * accumulators, the 3 widened weight vectors and the one activation vector
 * in use; per 8 values, 3 weight and 4 activation loads feed 12 FMAs, and 12
 * independent chains cover the FMA latency of both pipes. One accumulator per
 * output element, the same for every tile shape: what keeps the summation
 * order independent of M (see the file header).
 *   w: NW rows of [K] of kind, w_stride bytes apart; x: R rows of [K] f32;
 *   out: [NW] rows of R, out_stride floats apart */
SIMD_INLINE void dot_tile_kind(int kind, const void *w, size_t w_stride, int NW, const float *x, int64_t K, int R,
                               float *out, int out_stride) {
    __m256 acc[SIMD_FLOAT_WROWS][4];
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[j][r] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 wv[SIMD_FLOAT_WROWS];
        SIMD_UNROLL
        for (int j = 0; j < NW; j++) wv[j] = load8(kind, (const uint8_t *)w + (size_t)j * w_stride, k);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const __m256 xv = _mm256_loadu_ps(x + r * K + k);
            SIMD_UNROLL
            for (int j = 0; j < NW; j++) acc[j][r] = _mm256_fmadd_ps(wv[j], xv, acc[j][r]);
        }
    }
    SIMD_UNROLL
    for (int j = 0; j < NW; j++) {
        const void *wj = (const uint8_t *)w + (size_t)j * w_stride;
        float sum[4];
        if (R == 4) {
            _mm_storeu_ps(sum, simd_hsum4_ps(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
        } else {
            SIMD_UNROLL
            for (int r = 0; r < R; r++) sum[r] = simd_hsum_ps(acc[j][r]);
        }
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            for (int64_t i = k; i < K; i++) sum[r] += load1(kind, wj, i) * x[r * K + i];
            out[j * out_stride + r] = sum[r];
        }
    }
}

/* Prefill's 3 x 4 tile as a function of its own: inlined into dot_float's
 * switch among the other tiles, GCC folds each activation load into the
 * three FMAs that use it (memory operands: 15 loads per 12 FMAs instead of
 * 7) and the tile ran ~30% slower (simd_matmul_bench, F16 K=1024 M=128). */
#define FLOAT_TILE_3X4(name, KIND)                                                                          \
    static __attribute__((noinline)) void name(const void *w, size_t w_stride, const float *x, int64_t K, float *out, \
                                               int out_stride) {                                                    \
        dot_tile_kind(KIND, w, w_stride, 3, x, K, 4, out, out_stride);                                              \
    }
FLOAT_TILE_3X4(tile_f32_3x4, W_F32)
FLOAT_TILE_3X4(tile_f16_3x4, W_F16)
FLOAT_TILE_3X4(tile_bf16_3x4, W_BF16)

/* simd_dot_fn for float weights: every tile of NW <= SIMD_FLOAT_WROWS,
 * R <= 4 is native; taller requests are split in groups of 4 rows. */
SIMD_INLINE void dot_float(int kind, const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R,
                           float *out) {
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int rn = R - r0 < 4 ? R - r0 : 4;
        const float *xr = x->f + (m0 + r0) * x->K;
        switch (NW * 8 + rn) {
        case 8 + 1: dot_tile_kind(kind, w, w_stride, 1, xr, x->K, 1, out + r0, R); break;
        case 8 + 2: dot_tile_kind(kind, w, w_stride, 1, xr, x->K, 2, out + r0, R); break;
        case 8 + 3: dot_tile_kind(kind, w, w_stride, 1, xr, x->K, 3, out + r0, R); break;
        case 8 + 4: dot_tile_kind(kind, w, w_stride, 1, xr, x->K, 4, out + r0, R); break;
        case 16 + 1: dot_tile_kind(kind, w, w_stride, 2, xr, x->K, 1, out + r0, R); break;
        case 16 + 2: dot_tile_kind(kind, w, w_stride, 2, xr, x->K, 2, out + r0, R); break;
        case 16 + 3: dot_tile_kind(kind, w, w_stride, 2, xr, x->K, 3, out + r0, R); break;
        case 16 + 4: dot_tile_kind(kind, w, w_stride, 2, xr, x->K, 4, out + r0, R); break;
        case 24 + 1: dot_tile_kind(kind, w, w_stride, 3, xr, x->K, 1, out + r0, R); break;
        case 24 + 2: dot_tile_kind(kind, w, w_stride, 3, xr, x->K, 2, out + r0, R); break;
        case 24 + 3: dot_tile_kind(kind, w, w_stride, 3, xr, x->K, 3, out + r0, R); break;
        default:
            if (kind == W_F32) tile_f32_3x4(w, w_stride, xr, x->K, out + r0, R);
            else if (kind == W_F16) tile_f16_3x4(w, w_stride, xr, x->K, out + r0, R);
            else tile_bf16_3x4(w, w_stride, xr, x->K, out + r0, R);
            break;
        }
    }
}

void simd_dot_f32(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    dot_float(W_F32, w, w_stride, NW, x, m0, R, out);
}

void simd_dot_f16(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    dot_float(W_F16, w, w_stride, NW, x, m0, R, out);
}

void simd_dot_bf16(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    dot_float(W_BF16, w, w_stride, NW, x, m0, R, out);
}
