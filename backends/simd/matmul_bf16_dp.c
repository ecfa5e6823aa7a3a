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
#include "vt/vt_bf16_row.h"

void simd_round_row_bf16(const float *x, vt_bf16_t *y, int64_t K) { vt_f32_to_bf16_row_avx512(x, y, K); }

SIMD_INLINE __m512 dp(__m512 acc, __m512i w, __m512i x) { return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x); }

/* out[j * out_stride + r] = w_j . x_r for NW weight rows and R activation
 * rows (constants after inlining: NW x R accumulators in registers; the
 * 3 x 4 tile takes 12 of the 32 zmm registers, 12 independent chains over
 * the instruction's latency).
 *   w: NW rows of [K] bf16, w_stride bytes apart; x: R rows of [K] bf16 */
SIMD_INLINE void dot_tile(const void *w, size_t w_stride, int NW, const vt_bf16_t *x, int64_t K, int R, float *out,
                          int out_stride) {
    __m512 acc[SIMD_FLOAT_WROWS][4];
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

/* Prefill's 3 x 4 tile as a function of its own, as matmul_float.c keeps
 * its own (a switch of inlined tiles around it spills). */
static __attribute__((noinline)) void tile_3x4(const void *w, size_t w_stride, const vt_bf16_t *x, int64_t K,
                                               float *out, int out_stride) {
    dot_tile(w, w_stride, 3, x, K, 4, out, out_stride);
}

/* simd_dot_fn: every tile of NW <= SIMD_FLOAT_WROWS, R <= 4 is native;
 * taller requests are split in groups of 4 rows. */
void simd_dot_bf16_dp(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    for (int r0 = 0; r0 < R; r0 += 4) {
        const int rn = R - r0 < 4 ? R - r0 : 4;
        const vt_bf16_t *xr = x->h + (m0 + r0) * x->K;
        switch (NW * 8 + rn) {
        case 8 + 1: dot_tile(w, w_stride, 1, xr, x->K, 1, out + r0, R); break;
        case 8 + 2: dot_tile(w, w_stride, 1, xr, x->K, 2, out + r0, R); break;
        case 8 + 3: dot_tile(w, w_stride, 1, xr, x->K, 3, out + r0, R); break;
        case 8 + 4: dot_tile(w, w_stride, 1, xr, x->K, 4, out + r0, R); break;
        case 16 + 1: dot_tile(w, w_stride, 2, xr, x->K, 1, out + r0, R); break;
        case 16 + 2: dot_tile(w, w_stride, 2, xr, x->K, 2, out + r0, R); break;
        case 16 + 3: dot_tile(w, w_stride, 2, xr, x->K, 3, out + r0, R); break;
        case 16 + 4: dot_tile(w, w_stride, 2, xr, x->K, 4, out + r0, R); break;
        case 24 + 1: dot_tile(w, w_stride, 3, xr, x->K, 1, out + r0, R); break;
        case 24 + 2: dot_tile(w, w_stride, 3, xr, x->K, 2, out + r0, R); break;
        case 24 + 3: dot_tile(w, w_stride, 3, xr, x->K, 3, out + r0, R); break;
        default: tile_3x4(w, w_stride, xr, x->K, out + r0, R); break;
        }
    }
}
