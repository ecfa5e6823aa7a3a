/* quantize_act.c — f32 activation rows to 8-bit blocks for the integer
 * matmul kernels: symmetric, d = max|x| / 127, q = round(x / d) in [-127, 127],
 * so the relative error of each value is at most 1/254 of its block's max. */
#include <string.h>

#include "simd.h"
#include "simd_vec.h"

/* Quantize 32 values with the multiplier inv_d; stores 32 int8. */
SIMD_INLINE void quantize32(const float *x, __m256 inv_d, int8_t *qs) {
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 0), inv_d));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), inv_d));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), inv_d));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), inv_d));
    /* packs work within 128-bit lanes: the bytes come out as
     * [0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31] in 4-byte groups;
     * the final permute puts the groups back in order. */
    __m256i p01 = _mm256_packs_epi32(i0, i1);
    __m256i p23 = _mm256_packs_epi32(i2, i3);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)qs, p);
}

SIMD_INLINE __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

/* max|x| over 32 values */
SIMD_INLINE __m256 amax32(const float *x) {
    __m256 a = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x)), abs_ps(_mm256_loadu_ps(x + 8)));
    __m256 b = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + 16)), abs_ps(_mm256_loadu_ps(x + 24)));
    return _mm256_max_ps(a, b);
}

SIMD_INLINE void quantize_row_q8_0(const float *x, int8_t *qs, float *d, int16_t *isums, int64_t K) {
    for (int64_t b = 0; b < K / 32; b++) {
        const float *xb = x + b * 32;
        const float amax = simd_hmax_ps(amax32(xb));
        const float scale = amax / 127.0f;
        /* The block scale is kept at f16 precision, as a Q8_0 block stores it
         * (and as llama.cpp's activation blocks do): the values are rounded
         * against the f32 scale, the dot products use the f16 one. */
        d[b] = _cvtsh_ss(_cvtss_sh(scale, _MM_FROUND_TO_NEAREST_INT));
        quantize32(xb, _mm256_set1_ps(scale > 0.0f ? 127.0f / amax : 0.0f), qs + b * 32);
        if (isums) { /* |sum of 32| <= 32 * 127 fits int16 */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + b * 32));
            const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
            isums[b] = (int16_t)_mm_cvtsi128_si32(h);
        }
    }
}

void simd_quantize_row_q8_0(const float *x, int8_t *qs, float *d, int64_t K) { quantize_row_q8_0(x, qs, d, NULL, K); }

void simd_quantize_row_q8_0_isums(const float *x, int8_t *qs, float *d, int16_t *isums, int64_t K) {
    quantize_row_q8_0(x, qs, d, isums, K);
}

/* hsums of the two runs of 16 in 32 quantized values: 4 int16 (see simd_act). */
SIMD_INLINE void half_sums32(const int8_t *q32, int16_t *hs) {
    /* pairwise sums: int32 lane i of each 128-bit half holds (q[4i] + q[4i+1], q[4i+2] + q[4i+3]) of its run */
    __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)q32));
    p = _mm256_add_epi16(p, _mm256_srli_si256(p, 8));
    p = _mm256_add_epi16(p, _mm256_srli_si256(p, 4));
    /* |sum of 8| <= 8 * 127, times 32 fits int16 */
    p = _mm256_mullo_epi16(p, _mm256_set1_epi16(-32));
    const int32_t a = _mm256_extract_epi32(p, 0), c = _mm256_extract_epi32(p, 4);
    memcpy(hs, &a, sizeof a);
    memcpy(hs + 2, &c, sizeof c);
}

SIMD_INLINE void quantize_row_q8_k(const float *x, int8_t *qs, float *d, int16_t *bsums, float *msums, int16_t *isums,
                                   int16_t *hsums, int64_t K) {
    for (int64_t b = 0; b < K / 256; b++) {
        const float *xb = x + b * 256;
        __m256 m = amax32(xb);
        for (int j = 32; j < 256; j += 32) m = _mm256_max_ps(m, amax32(xb + j));
        const float amax = simd_hmax_ps(m);
        const float scale = amax / 127.0f;
        d[b] = scale;
        const __m256 inv_d = _mm256_set1_ps(scale > 0.0f ? 127.0f / amax : 0.0f);
        int8_t *qb = qs + b * 256;
        for (int j = 0; j < 256; j += 32) quantize32(xb + j, inv_d, qb + j);
        if (hsums)
            for (int j = 0; j < 256; j += 32) half_sums32(qb + j, hsums + b * 32 + j / 8);
        if (!bsums && !msums && !isums) continue;
        /* sums of each run of 16 quantized values: pairwise byte sums, then
         * sums of 4 pairs give 8 int32 = two runs of 16 per 32 bytes */
        const __m256i ones8 = _mm256_set1_epi8(1);
        const __m256i ones16 = _mm256_set1_epi16(1);
        for (int j = 0; j < 256; j += 64) {
            __m256i a = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_loadu_si256((const __m256i *)(qb + j))), ones16);
            __m256i c = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_loadu_si256((const __m256i *)(qb + j + 32))), ones16);
            /* a: [r0 r0 r0 r0 | r1 r1 r1 r1], c: [r2 .. | r3 ..] (4 partial sums per run);
             * hadd twice: [a0+a1, a2+a3, c0+c1, c2+c3 | ...] then [r0, r2, r0, r2 | r1, r3, r1, r3] */
            __m256i h = _mm256_hadd_epi32(a, c);
            h = _mm256_hadd_epi32(h, h);
            const int r0 = _mm256_extract_epi32(h, 0), r1 = _mm256_extract_epi32(h, 4);
            const int r2 = _mm256_extract_epi32(h, 1), r3 = _mm256_extract_epi32(h, 5);
            if (bsums) { /* |sum of 16| <= 16 * 127 fits int16 */
                int16_t *bs = bsums + b * 16 + j / 16;
                bs[0] = (int16_t)r0, bs[1] = (int16_t)r1, bs[2] = (int16_t)r2, bs[3] = (int16_t)r3;
            }
            if (msums) { /* exact integers times d: one rounding */
                float *ms = msums + b * 8 + j / 32;
                ms[0] = scale * (float)(r0 + r1), ms[1] = scale * (float)(r2 + r3);
            }
            if (isums) { /* |sum of 32| <= 32 * 127 fits int16 */
                int16_t *is = isums + b * 8 + j / 32;
                is[0] = (int16_t)(r0 + r1), is[1] = (int16_t)(r2 + r3);
            }
        }
    }
}

void simd_quantize_row_q8_k(const float *x, int8_t *qs, float *d, int16_t *bsums, float *msums, int64_t K) {
    quantize_row_q8_k(x, qs, d, bsums, msums, NULL, NULL, K);
}

void simd_quantize_row_q8_k_isums(const float *x, int8_t *qs, float *d, int16_t *isums, int64_t K) {
    quantize_row_q8_k(x, qs, d, NULL, NULL, isums, NULL, K);
}

void simd_quantize_row_q8_k_hsums(const float *x, int8_t *qs, float *d, int16_t *hsums, int64_t K) {
    quantize_row_q8_k(x, qs, d, NULL, NULL, NULL, hsums, K);
}
