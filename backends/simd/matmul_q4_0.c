/* matmul_q4_0.c — dot kernel for Q4_0 weights (blocks of 32 4-bit values,
 * w = d (q - 8)) against activations quantized to 8-bit blocks of 32.
 *
 * The nibbles are unpacked to bytes q - 8 in [-8, 7] and multiplied like
 * Q8_0 (signs moved onto the activations for vpmaddubsw; 2 * 8 * 127 fits
 * int16), with one FMA per block for d_w * d_x. */
#include "simd.h"
#include "simd_vec.h"

/* 32 values of one block as signed bytes q - 8, in order. */
SIMD_INLINE __m256i unpack_q4_0(const vt_block_q4_0 *b) {
    const __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    const __m128i low4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(q, low4);                    /* values 0..15 */
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), low4); /* values 16..31 */
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

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
            const vt_block_q4_0 *wb = (const vt_block_q4_0 *)((const uint8_t *)w + (size_t)j * w_stride) + b;
            _mm_prefetch((const char *)wb + SIMD_PREFETCH_BYTES, _MM_HINT_T0);
            const __m256i wq = unpack_q4_0(wb);
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

SIMD_DEFINE_DOT(simd_dot_q4_0, dot_tile, 8)
