/* quant_dequant_avx2.c — weight rows to f32 with AVX2 and F16C, for every
 * caller of vt_to_f32 (and so of host->to_f32).
 *
 * Backends convert whole weight tiles through host->to_f32 (onednn before
 * each prefill matmul), where the portable loops cost a noticeable share of
 * the matmul; these are the vectorised forms of quant_dequant.c and of the
 * F16/BF16 rows of quant.c. Results are bit-identical to those: the scale
 * products are the same scalar f32 expressions, then one multiply and, where
 * the format has a min, one subtract per value, never fused (the target
 * enables no FMA, so the compiler cannot contract either).
 *
 * The functions carry target attributes instead of the file being compiled
 * with -mavx2: libvt must load and run on a CPU without AVX2, and quant.c
 * calls in here only after vt_dequant_avx2_usable(). Sources may sit at any
 * byte address, so every load is unaligned (loadu, or memcpy for scalars). */
#include <stddef.h>

#include "quant_blocks.h"
#include "vt/vt_cpu.h"
#include "vt/vt_dtype.h"

bool vt_dequant_avx2_usable(void) {
    const vt_cpu_features f = vt_cpu_detect();
    return f.avx2 && f.f16c;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))

AVX2 static inline __m128i load16(const unsigned char *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }

/* y[0..8) = d * (float)bytes[0..8) - m, the bytes unsigned in the low 8 of v. */
AVX2 static inline void store8_u8(float *y, __m128i v, __m256 d, __m256 m) {
    const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, f), m));
}

/* y[0..16) = d * (float)bytes - m for 16 unsigned bytes. */
AVX2 static inline void store16_u8(float *y, __m128i v, __m256 d, __m256 m) {
    store8_u8(y, v, d, m);
    store8_u8(y + 8, _mm_srli_si128(v, 8), d, m);
}

/* y[0..16) = (float)bytes * d for 16 signed bytes. */
AVX2 static inline void store16_s8(float *y, __m128i v, __m256 d) {
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
    _mm256_storeu_ps(y, _mm256_mul_ps(lo, d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(hi, d));
}

AVX2 static void q8_0(const unsigned char *src, float *y, int64_t nb) {
    const size_t qs = offsetof(vt_block_q8_0, qs);
    for (int64_t i = 0; i < nb; i++, src += sizeof(vt_block_q8_0), y += VT_QK8_0) {
        const __m256 d = _mm256_set1_ps(vt_fp16_at(src + offsetof(vt_block_q8_0, d)));
        store16_s8(y, load16(src + qs), d);
        store16_s8(y + 16, load16(src + qs + 16), d);
    }
}

AVX2 static void q4_0(const unsigned char *src, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < nb; i++, src += sizeof(vt_block_q4_0), y += VT_QK4_0) {
        const __m256 d = _mm256_set1_ps(vt_fp16_at(src + offsetof(vt_block_q4_0, d)));
        const __m128i q = load16(src + offsetof(vt_block_q4_0, qs));
        store16_s8(y, _mm_sub_epi8(_mm_and_si128(q, low4), eight), d);
        store16_s8(y + 16, _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), low4), eight), d);
    }
}

/* The scale products of sub-blocks 2 pair and 2 pair + 1 of a Q4_K/Q5_K block. */
typedef struct k4_pair {
    __m256 d_lo, m_lo, d_hi, m_hi;
} k4_pair;

AVX2 static inline k4_pair k4_scales(const uint8_t *scales, int pair, float d, float dmin) {
    uint8_t sc, m;
    k4_pair p;
    vt_get_scale_min_k4(2 * pair, scales, &sc, &m);
    p.d_lo = _mm256_set1_ps(d * sc);
    p.m_lo = _mm256_set1_ps(dmin * m);
    vt_get_scale_min_k4(2 * pair + 1, scales, &sc, &m);
    p.d_hi = _mm256_set1_ps(d * sc);
    p.m_hi = _mm256_set1_ps(dmin * m);
    return p;
}

AVX2 static void q4_k(const unsigned char *src, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++, src += sizeof(vt_block_q4_k)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q4_k, d));
        const float dmin = vt_fp16_at(src + offsetof(vt_block_q4_k, dmin));
        const uint8_t *scales = src + offsetof(vt_block_q4_k, scales);
        const unsigned char *q = src + offsetof(vt_block_q4_k, qs);
        for (int pair = 0; pair < VT_QK_K / 64; pair++, y += 64, q += 32) {
            const k4_pair s = k4_scales(scales, pair, d, dmin);
            for (int h = 0; h < 32; h += 16) {
                const __m128i v = load16(q + h);
                store16_u8(y + h, _mm_and_si128(v, low4), s.d_lo, s.m_lo);
                store16_u8(y + 32 + h, _mm_and_si128(_mm_srli_epi16(v, 4), low4), s.d_hi, s.m_hi);
            }
        }
    }
}

AVX2 static void q5_k(const unsigned char *src, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F), sixteen = _mm_set1_epi8(16);
    for (int64_t i = 0; i < nb; i++, src += sizeof(vt_block_q5_k)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q5_k, d));
        const float dmin = vt_fp16_at(src + offsetof(vt_block_q5_k, dmin));
        const uint8_t *scales = src + offsetof(vt_block_q5_k, scales);
        const unsigned char *qh = src + offsetof(vt_block_q5_k, qh);
        const unsigned char *ql = src + offsetof(vt_block_q5_k, qs);
        for (int pair = 0; pair < VT_QK_K / 64; pair++, y += 64, ql += 32) {
            const k4_pair s = k4_scales(scales, pair, d, dmin);
            const __m128i bit_lo = _mm_set1_epi8((char)(1u << (2 * pair)));
            const __m128i bit_hi = _mm_set1_epi8((char)(1u << (2 * pair + 1)));
            for (int h = 0; h < 32; h += 16) {
                const __m128i v = load16(ql + h);
                const __m128i high = load16(qh + h);
                /* 16 where the sub-block's bit of qh[l] is set, else 0 */
                const __m128i add_lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(high, bit_lo), bit_lo), sixteen);
                const __m128i add_hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(high, bit_hi), bit_hi), sixteen);
                store16_u8(y + h, _mm_add_epi8(_mm_and_si128(v, low4), add_lo), s.d_lo, s.m_lo);
                store16_u8(y + 32 + h, _mm_add_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), low4), add_hi), s.d_hi,
                           s.m_hi);
            }
        }
    }
}

/* One run of 16 Q6_K values: 4-bit nibbles, 2 high bits in bits 0..1 of
 * qh_bits, minus 32, times ds (= d * scale, as the portable loop rounds it). */
AVX2 static inline void q6_run(float *y, __m128i nibbles, __m128i qh_bits, float ds) {
    const __m128i three = _mm_set1_epi8(3), thirty_two = _mm_set1_epi8(32);
    const __m128i hi2 = _mm_slli_epi16(_mm_and_si128(qh_bits, three), 4); /* <= 0x30: no carry into the next byte */
    const __m128i q = _mm_sub_epi8(_mm_or_si128(nibbles, hi2), thirty_two);
    store16_s8(y, q, _mm256_set1_ps(ds));
}

AVX2 static void q6_k(const unsigned char *src, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++, src += sizeof(vt_block_q6_k)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q6_k, d));
        const unsigned char *ql = src + offsetof(vt_block_q6_k, ql);
        const unsigned char *qh = src + offsetof(vt_block_q6_k, qh);
        const int8_t *sc = (const int8_t *)(src + offsetof(vt_block_q6_k, scales));
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l += 16) {
                const int s = l / 16;
                const __m128i a = load16(ql + l);
                const __m128i c = load16(ql + l + 32);
                const __m128i h = load16(qh + l);
                q6_run(y + l, _mm_and_si128(a, low4), h, d * (float)sc[s + 0]);
                q6_run(y + l + 32, _mm_and_si128(c, low4), _mm_srli_epi16(h, 2), d * (float)sc[s + 2]);
                q6_run(y + l + 64, _mm_and_si128(_mm_srli_epi16(a, 4), low4), _mm_srli_epi16(h, 4),
                       d * (float)sc[s + 4]);
                q6_run(y + l + 96, _mm_and_si128(_mm_srli_epi16(c, 4), low4), _mm_srli_epi16(h, 6),
                       d * (float)sc[s + 6]);
            }
        }
    }
}

/* F16C converts exactly, except that it quiets a signalling NaN, which
 * vt_fp16_to_f32 keeps signalling. A run of 8 holding a value whose exponent
 * is all ones and quiet bit clear (an infinity or a signalling NaN; rare in
 * weights) is converted by the scalar function instead. */
AVX2 static void f16(const unsigned char *src, float *y, int64_t n) {
    const __m128i exp_quiet = _mm_set1_epi16(0x7E00), inf = _mm_set1_epi16(0x7C00);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = load16(src + 2 * i);
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, exp_quiet), inf))) {
            for (int64_t j = i; j < i + 8; j++) y[j] = vt_fp16_at(src + 2 * j);
            continue;
        }
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) y[i] = vt_fp16_at(src + 2 * i);
}

/* bf16 is the top half of an f32: widen and shift, exact for every pattern. */
AVX2 static void bf16(const unsigned char *src, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(load16(src + 2 * i));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) {
        vt_bf16_t h;
        memcpy(&h, src + 2 * i, sizeof h);
        y[i] = vt_bf16_to_f32(h);
    }
}

bool vt_dequant_avx2(int32_t dtype, const void *src, float *dst, int64_t n) {
    const unsigned char *bytes = src;
    switch (dtype) {
    case VT_Q8_0: q8_0(bytes, dst, n / VT_QK8_0); return true;
    case VT_Q4_0: q4_0(bytes, dst, n / VT_QK4_0); return true;
    case VT_Q4_K: q4_k(bytes, dst, n / VT_QK_K); return true;
    case VT_Q5_K: q5_k(bytes, dst, n / VT_QK_K); return true;
    case VT_Q6_K: q6_k(bytes, dst, n / VT_QK_K); return true;
    case VT_F16: f16(bytes, dst, n); return true;
    case VT_BF16: bf16(bytes, dst, n); return true;
    default: return false;
    }
}

#else /* not x86: vt_dequant_avx2_usable() is false, so this is never reached */

bool vt_dequant_avx2(int32_t dtype, const void *src, float *dst, int64_t n) {
    (void)dtype;
    (void)src;
    (void)dst;
    (void)n;
    return false;
}

#endif
