/* matmul_bf16_dp.c — BF16 weights on the avx512 tier where the CPU has
 * AVX-512 BF16: the activations are rounded to bf16 once per matmul, as
 * vt_f32_to_bf16 rounds (nearest even, a NaN kept a quiet NaN), and
 * vdpbf16ps multiplies 32 weight and activation pairs per instruction into
 * 16 f32 lanes. Each product of two bf16 values is exact in f32; each lane
 * adds its pair's two products to its running sum one after the other,
 * rounded to f32 (subnormal inputs and results flushed to zero, as the
 * instruction does). Twice the multiply-adds of an f32 FMA per instruction,
 * and half the bytes of f32 activations to read: what pays in prefill, where
 * BF16 weights are compute-bound on the FMA kernels (matmul_float.c).
 *
 * What it costs: each activation is rounded to 8 significant bits (relative
 * error at most 2^-8), so a product sum moves by at most 2^-8 sum |w x|: the
 * rounding llama.cpp applies for BF16 weights too, and that onednn's bf16
 * path applies. F16 and F32 weights keep the FMA kernels: rounding their
 * values to bf16 would lose bits the file holds.
 *
 * Batch invariance as in matmul_float.c: one accumulator per output element
 * over K in steps of 32 (the last step's missing values loaded as zeros),
 * the same horizontal sum, for every tile shape, so a row's product is the
 * same bits alone (M = 1) or among other rows. */
#include "simd.h"
#include "simd_vec.h"

SIMD_INLINE __m512 dp(__m512 acc, __m512i w, __m512i x) { return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x); }

/* out[j * out_stride + r] = w_j . x_r for NW weight rows and R activation
 * rows (constants after inlining: NW x R accumulators in registers; the
 * 3 x 8 tile takes 24 of the 32 zmm registers, with the 3 weight vectors and
 * the activation vector in use: per 32 values, 3 weight and 8 activation
 * loads feed 24 vdpbf16ps, 24 independent chains over its latency).
 *   w: NW rows of [K] bf16, w_stride bytes apart; x: R rows of [K] bf16 */
SIMD_INLINE void dot_tile(const void *w, size_t w_stride, int NW, const vt_bf16_t *x, int64_t K, int R, float *out,
                          int out_stride) {
    __m512 acc[SIMD_FLOAT_WROWS][SIMD_MAX_ROWS];
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[j][r] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
        __m512i wv[SIMD_FLOAT_WROWS];
        SIMD_UNROLL
        for (int j = 0; j < NW; j++) wv[j] = _mm512_loadu_si512((const uint8_t *)w + (size_t)j * w_stride + 2 * k);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const __m512i xv = _mm512_loadu_si512(x + r * K + k);
            SIMD_UNROLL
            for (int j = 0; j < NW; j++) acc[j][r] = dp(acc[j][r], wv[j], xv);
        }
    }
    if (k < K) { /* the last K - k < 32 values; the rest of the step loaded as zeros */
        const __mmask32 m = (__mmask32)((1ull << (K - k)) - 1);
        __m512i wv[SIMD_FLOAT_WROWS];
        SIMD_UNROLL
        for (int j = 0; j < NW; j++)
            wv[j] = _mm512_maskz_loadu_epi16(m, (const uint8_t *)w + (size_t)j * w_stride + 2 * k);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const __m512i xv = _mm512_maskz_loadu_epi16(m, x + r * K + k);
            SIMD_UNROLL
            for (int j = 0; j < NW; j++) acc[j][r] = dp(acc[j][r], wv[j], xv);
        }
    }
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) out[j * out_stride + r] = _mm512_reduce_add_ps(acc[j][r]);
}

/* Prefill's 3 x 8 tile as a function of its own, as matmul_float.c keeps
 * its own (a switch of inlined tiles around it spills). */
static __attribute__((noinline)) void tile_3x8(const void *w, size_t w_stride, const vt_bf16_t *x, int64_t K,
                                               float *out, int out_stride) {
    dot_tile(w, w_stride, 3, x, K, 8, out, out_stride);
}

/* One tile of nw <= SIMD_FLOAT_WROWS weight rows and r <= 8 activation rows,
 * each shape with constant bounds. */
#define BF16_TILE(nw, r) \
    case (nw) * 16 + (r): dot_tile(w, w_stride, nw, xr, x->K, r, out + r0, R); break;

/* simd_dot_fn: every tile of NW <= SIMD_FLOAT_WROWS, R <= SIMD_MAX_ROWS is
 * native; taller requests are split in groups of SIMD_MAX_ROWS rows. */
void simd_dot_bf16_dp(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    for (int r0 = 0; r0 < R; r0 += SIMD_MAX_ROWS) {
        const int rn = R - r0 < SIMD_MAX_ROWS ? R - r0 : SIMD_MAX_ROWS;
        const vt_bf16_t *xr = x->h + (m0 + r0) * x->K;
        if (NW == 3 && rn == 8) {
            tile_3x8(w, w_stride, xr, x->K, out + r0, R);
            continue;
        }
        switch (NW * 16 + rn) {
            BF16_TILE(1, 1) BF16_TILE(1, 2) BF16_TILE(1, 3) BF16_TILE(1, 4)
            BF16_TILE(1, 5) BF16_TILE(1, 6) BF16_TILE(1, 7) BF16_TILE(1, 8)
            BF16_TILE(2, 1) BF16_TILE(2, 2) BF16_TILE(2, 3) BF16_TILE(2, 4)
            BF16_TILE(2, 5) BF16_TILE(2, 6) BF16_TILE(2, 7) BF16_TILE(2, 8)
            BF16_TILE(3, 1) BF16_TILE(3, 2) BF16_TILE(3, 3) BF16_TILE(3, 4)
            BF16_TILE(3, 5) BF16_TILE(3, 6) BF16_TILE(3, 7)
        default: break; /* NW and R within their bounds: unreachable */
        }
    }
}
