/* matmul_q4_k.c — dot kernel for Q4_K weights against activations quantized
 * to 8-bit blocks of 256 with per-16 sums (bsums).
 *
 * A Q4_K super-block of 256 values is 8 sub-blocks of 32, w = d sc_j q - dmin m_j
 * with 4-bit q and 6-bit sc_j, m_j. So
 *   w . x = d dx sum_j sc_j (q_j . xq_j) - dmin dx sum_j m_j sum(xq_j)
 * The first sum runs in integers (vpmaddubsw: unsigned 4-bit q times signed
 * 8-bit x, pair sums <= 2 * 15 * 127, then vpmaddwd with the scales); the
 * second needs only the activation block sums, which quantization recorded. */
#include <string.h>

#include "simd.h"
#include "simd_vec.h"

/* The 8 six-bit scales and mins of a block, as bytes in sub-block order.
 * Layout (vt_get_scale_min_k4): bytes 0-3 hold sc0-3 in their low 6 bits,
 * bytes 4-7 m0-3; sc4-7 / m4-7 take their low 4 bits from bytes 8-11 (low /
 * high nibble) and their top 2 bits from the top bits of bytes 0-3 / 4-7. */
SIMD_INLINE void unpack_scales_mins(const uint8_t *s, __m128i *scales16, __m128i *mins16) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4);
    memcpy(&u1, s + 4, 4);
    memcpy(&u2, s + 8, 4);
    const uint32_t sc_lo = u0 & 0x3F3F3F3Fu;
    const uint32_t m_lo = u1 & 0x3F3F3F3Fu;
    const uint32_t sc_hi = (u2 & 0x0F0F0F0Fu) | (((u0 >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u2 >> 4) & 0x0F0F0F0Fu) | (((u1 >> 6) & 0x03030303u) << 4);
    *scales16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo));
    *mins16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)m_hi, (int)m_lo));
}

/* Shuffle masks broadcasting int16 lane j of a 128-bit half to all 8 lanes. */
SIMD_INLINE __m256i scale_mask(int j) {
    return _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8)));
}

SIMD_INLINE void dot_rows(const vt_block_q4_k *w, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[SIMD_MAX_ROWS];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const vt_block_q4_k *wb = &w[b];
        const float d = _cvtsh_ss(wb->d), dmin = _cvtsh_ss(wb->dmin);
        __m128i scales16, mins16;
        unpack_scales_mins(wb->scales, &scales16, &mins16);
        const __m256i scales = _mm256_broadcastsi128_si256(scales16);

        __m256i sumi[SIMD_MAX_ROWS];
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) { /* sub-blocks 2i (low nibbles) and 2i+1 (high) */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * i));
            const __m256i lo = _mm256_and_si256(q, low4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            const __m256i sc_lo = _mm256_shuffle_epi8(scales, scale_mask(2 * i));
            const __m256i sc_hi = _mm256_shuffle_epi8(scales, scale_mask(2 * i + 1));
            for (int r = 0; r < R; r++) {
                const int8_t *xq = x->qs + (m0 + r) * K + b * 256 + 64 * i;
                const __m256i xl = _mm256_loadu_si256((const __m256i *)xq);
                const __m256i xh = _mm256_loadu_si256((const __m256i *)(xq + 32));
                const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), sc_lo);
                const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), sc_hi);
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(pl, ph));
            }
        }
        for (int r = 0; r < R; r++) {
            const int64_t row = m0 + r;
            const float dx = x->d[row * nb + b];
            const int16_t *bs = x->bsums + row * (K / 16) + b * 16;
            /* sums of the 8 sub-blocks of 32 from the 16 sums of 16 */
            const __m128i sub = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                               _mm_loadu_si128((const __m128i *)(bs + 8)));
            const __m128i msum = _mm_madd_epi16(mins16, sub); /* 4 int32 */
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dx), _mm256_cvtepi32_ps(_mm256_zextsi128_si256(msum)),
                                      acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = simd_hsum_ps(acc[r]);
}

void simd_dot_q4_k(const void *w, const simd_act *x, int64_t m0, int R, float *out) {
    switch (R) {
    case 1: dot_rows(w, x, m0, 1, out); break;
    case 2: dot_rows(w, x, m0, 2, out); break;
    case 3: dot_rows(w, x, m0, 3, out); break;
    default: dot_rows(w, x, m0, 4, out); break;
    }
}
