/* matmul_q5_k.c — dot kernel for Q5_K weights against 8-bit activation
 * blocks of 256 with bsums. As Q4_K (see matmul_q4_k.c) with a fifth bit per
 * value: bit j of qh[l] is the top bit of value l of sub-block j, so each
 * weight byte is 0..31 and vpmaddubsw pair sums stay below 2 * 31 * 127. */
#include <string.h>

#include "simd.h"
#include "simd_vec.h"

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

SIMD_INLINE __m256i scale_mask(int j) {
    return _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8)));
}

SIMD_INLINE void dot_rows(const vt_block_q5_k *w, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i bit0 = _mm256_set1_epi8(0x01), bit1 = _mm256_set1_epi8(0x02);
    __m256 acc[SIMD_MAX_ROWS];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const vt_block_q5_k *wb = &w[b];
        const float d = _cvtsh_ss(wb->d), dmin = _cvtsh_ss(wb->dmin);
        __m128i scales16, mins16;
        unpack_scales_mins(wb->scales, &scales16, &mins16);
        const __m256i scales = _mm256_broadcastsi128_si256(scales16);
        /* shifted right by 2 per pair of sub-blocks: bits 0 and 1 of each
         * byte are then the top bits of sub-blocks 2i and 2i+1 (16-bit shifts
         * pull bits across bytes only into bits 6-7, never looked at) */
        __m256i hbits = _mm256_loadu_si256((const __m256i *)wb->qh);

        __m256i sumi[SIMD_MAX_ROWS];
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * i));
            const __m256i top_lo = _mm256_slli_epi16(_mm256_and_si256(hbits, bit0), 4);
            const __m256i top_hi = _mm256_slli_epi16(_mm256_and_si256(hbits, bit1), 3);
            hbits = _mm256_srli_epi16(hbits, 2);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), top_lo);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), top_hi);
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
            const __m128i sub = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs),
                                               _mm_loadu_si128((const __m128i *)(bs + 8)));
            const __m128i msum = _mm_madd_epi16(mins16, sub);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin * dx), _mm256_cvtepi32_ps(_mm256_zextsi128_si256(msum)),
                                      acc[r]);
        }
    }
    for (int r = 0; r < R; r++) out[r] = simd_hsum_ps(acc[r]);
}

void simd_dot_q5_k(const void *w, const simd_act *x, int64_t m0, int R, float *out) {
    switch (R) {
    case 1: dot_rows(w, x, m0, 1, out); break;
    case 2: dot_rows(w, x, m0, 2, out); break;
    case 3: dot_rows(w, x, m0, 3, out); break;
    default: dot_rows(w, x, m0, 4, out); break;
    }
}
