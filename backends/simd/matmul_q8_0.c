/* matmul_q8_0.c — dot kernel for Q8_0 weights (blocks of 32 int8, one f16
 * scale) against activations quantized to 8-bit blocks of 32.
 *
 * Per block: sum_i w_i x_i in integers, then one FMA with d_w * d_x.
 * vpmaddubsw multiplies unsigned by signed bytes, so the weights' signs move
 * onto the activations (|w| * sign(w) x); |w| <= 128 and |x| <= 127 keep each
 * pair sum within int16 (2 * 128 * 127 = 32512). */
#include "simd.h"
#include "simd_vec.h"

/* out[j * R + r] = weight row j . activation row m0 + r (see simd_dot_fn). */
SIMD_INLINE void dot_tile(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R,
                          float *out) {
    const int64_t nb = x->K / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[SIMD_MAX_WROWS][SIMD_MAX_ROWS];
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[j][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xq[SIMD_MAX_ROWS];
        SIMD_UNROLL
        for (int r = 0; r < R; r++) xq[r] = _mm256_loadu_si256((const __m256i *)(x->qs + (m0 + r) * x->K + b * 32));
        SIMD_UNROLL
        for (int j = 0; j < NW; j++) {
            const vt_block_q8_0 *wb = (const vt_block_q8_0 *)((const uint8_t *)w + (size_t)j * w_stride) + b;
            _mm_prefetch((const char *)wb + SIMD_PREFETCH_BYTES, _MM_HINT_T0);
            const __m256i wq = _mm256_loadu_si256((const __m256i *)wb->qs);
            const __m256i wabs = _mm256_sign_epi8(wq, wq);
            const float dw = _cvtsh_ss(wb->d);
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const __m256i prod = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xq[r], wq)), ones);
                acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x->d[(m0 + r) * nb + b]), _mm256_cvtepi32_ps(prod),
                                            acc[j][r]);
                SIMD_KEEP(acc[j][r]);
            }
        }
    }
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) out[j * R + r] = simd_hsum_ps(acc[j][r]);
}

SIMD_DEFINE_DOT(simd_dot_q8_0, dot_tile, 8)
