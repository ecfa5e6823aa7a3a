/* matmul_q8_0.c — dot kernel for Q8_0 weights (blocks of 32 int8, one f16
 * scale) against activations quantized to 8-bit blocks of 32.
 *
 * Per block: sum_i w_i x_i in integers, then one FMA with d_w * d_x.
 * vpmaddubsw multiplies unsigned by signed bytes, so the weights' signs move
 * onto the activations (|w| * sign(w) x); |w| <= 128 and |x| <= 127 keep each
 * pair sum within int16 (2 * 128 * 127 = 32512). */
#include "simd.h"
#include "simd_vec.h"

/* x: activations; w: K/32 weight blocks; out[r] for rows m0..m0+R-1. */
SIMD_INLINE void dot_rows(const vt_block_q8_0 *w, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t nb = x->K / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[SIMD_MAX_ROWS];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i wq = _mm256_loadu_si256((const __m256i *)w[b].qs);
        const __m256i wabs = _mm256_sign_epi8(wq, wq);
        const float dw = _cvtsh_ss(w[b].d);
        for (int r = 0; r < R; r++) {
            const int64_t row = m0 + r;
            const __m256i xq = _mm256_loadu_si256((const __m256i *)(x->qs + row * x->K + b * 32));
            const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq, wq)), ones);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x->d[row * nb + b]), _mm256_cvtepi32_ps(prod), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = simd_hsum_ps(acc[r]);
}

void simd_dot_q8_0(const void *w, const simd_act *x, int64_t m0, int R, float *out) {
    switch (R) {
    case 1: dot_rows(w, x, m0, 1, out); break;
    case 2: dot_rows(w, x, m0, 2, out); break;
    case 3: dot_rows(w, x, m0, 3, out); break;
    default: dot_rows(w, x, m0, 4, out); break;
    }
}
