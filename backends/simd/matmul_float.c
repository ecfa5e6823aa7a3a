/* matmul_float.c — dot kernels for F32, F16 and BF16 weights against f32
 * activations: weights widened to f32 in registers (F16C for f16, a shift for
 * bf16, both exact) and accumulated with FMA in f32. */
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

/* out[r] = w . x[r], r < R; R is a constant after inlining, so the
 * accumulators live in registers. Two accumulators per row hide FMA latency.
 *   w: [K] of kind; x: R rows of [K] f32 at stride K; out: [R] */
SIMD_INLINE void dot_rows(int kind, const void *w, const float *x, int64_t K, int R, float *out) {
    __m256 acc0[SIMD_MAX_ROWS], acc1[SIMD_MAX_ROWS];
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const __m256 w0 = load8(kind, w, k), w1 = load8(kind, w, k + 8);
        for (int r = 0; r < R; r++) {
            acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * K + k), acc0[r]);
            acc1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + r * K + k + 8), acc1[r]);
        }
    }
    for (; k + 8 <= K; k += 8) {
        const __m256 w0 = load8(kind, w, k);
        for (int r = 0; r < R; r++) acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + r * K + k), acc0[r]);
    }
    for (int r = 0; r < R; r++) {
        float s = simd_hsum_ps(_mm256_add_ps(acc0[r], acc1[r]));
        for (int64_t j = k; j < K; j++) s += load1(kind, w, j) * x[r * K + j];
        out[r] = s;
    }
}

/* Tiles of the simd_dot_fn contract: NW weight rows of `kind`. */
SIMD_INLINE void dot_tile(int kind, const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R,
                          float *out) {
    for (int j = 0; j < NW; j++)
        dot_rows(kind, (const uint8_t *)w + (size_t)j * w_stride, x->f + m0 * x->K, x->K, R, out + j * R);
}

#define DEFINE_FLOAT_TILE(tile, kind)                                                                        \
    SIMD_INLINE void tile(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R,      \
                          float *out) {                                                                      \
        dot_tile(kind, w, w_stride, NW, x, m0, R, out);                                                      \
    }

DEFINE_FLOAT_TILE(tile_f32, W_F32)
DEFINE_FLOAT_TILE(tile_f16, W_F16)
DEFINE_FLOAT_TILE(tile_bf16, W_BF16)
SIMD_DEFINE_DOT(simd_dot_f32, tile_f32, 4) /* 2 accumulators per row */
SIMD_DEFINE_DOT(simd_dot_f16, tile_f16, 4) /* 2 accumulators per row */
SIMD_DEFINE_DOT(simd_dot_bf16, tile_bf16, 4) /* 2 accumulators per row */
