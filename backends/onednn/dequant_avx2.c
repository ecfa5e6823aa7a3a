/* dequant_avx2.c — weight rows to f32 with AVX2, for the matmul tiles.
 *
 * At M=128 the dequantization of a tile was ~1/3 of a matmul's time through
 * host->to_f32 (bench/onednn_matmul_bench.c), so the formats of real models
 * get a vectorised path here. Results are bit-identical to the core's
 * dequantizers (vt_quant.h layouts, same operation order: scale products in
 * scalar f32, then one multiply and one subtract per value, never fused), so
 * either path gives the same matmul. Anything not handled here falls back to
 * host->to_f32.
 *
 * The functions carry target attributes instead of the whole file being
 * compiled with -mavx2, so nothing here runs unless onednn_dequant_avx2_usable()
 * said the CPU has AVX2 and F16C. */
#include <immintrin.h>

#include "onednn.h"
#include "vt/vt_cpu.h"
#include "vt/vt_quant.h"

#define AVX2 __attribute__((target("avx2,f16c")))

/* AVX2 and F16C usable (vt_cpu.h also checks that the OS saves YMM state). */
bool onednn_dequant_avx2_usable(void) {
    const vt_cpu_features f = vt_cpu_detect();
    return f.avx2 && f.f16c;
}

/* y[0..8) = d * (float)bytes[0..8) - m, bytes unsigned in the low 8 of v. */
AVX2 static inline void store8_u8(float *y, __m128i v, __m256 d, __m256 m) {
    __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, f), m));
}

/* y[0..16) = d * (float)bytes - m for 16 unsigned bytes. */
AVX2 static inline void store16_u8(float *y, __m128i v, __m256 d, __m256 m) {
    store8_u8(y, v, d, m);
    store8_u8(y + 8, _mm_srli_si128(v, 8), d, m);
}

/* y[0..16) = d * (float)bytes for 16 signed bytes. */
AVX2 static inline void store16_s8(float *y, __m128i v, __m256 d) {
    _mm256_storeu_ps(y, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))));
}

AVX2 static void q8_0(const vt_block_q8_0 *b, float *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, y += VT_QK8_0) {
        __m256 d = _mm256_set1_ps(vt_fp16_to_f32(b[i].d));
        store16_s8(y, _mm_loadu_si128((const __m128i *)b[i].qs), d);
        store16_s8(y + 16, _mm_loadu_si128((const __m128i *)(b[i].qs + 16)), d);
    }
}

AVX2 static void q4_0(const vt_block_q4_0 *b, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < nb; i++, y += VT_QK4_0) {
        __m256 d = _mm256_set1_ps(vt_fp16_to_f32(b[i].d));
        __m128i q = _mm_loadu_si128((const __m128i *)b[i].qs);
        store16_s8(y, _mm_sub_epi8(_mm_and_si128(q, low4), eight), d);
        store16_s8(y + 16, _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), low4), eight), d);
    }
}

AVX2 static void q4_k(const vt_block_q4_k *b, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        const float d = vt_fp16_to_f32(b[i].d), dmin = vt_fp16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int pair = 0; pair < VT_QK_K / 64; pair++, y += 64, q += 32) {
            uint8_t sc, m;
            vt_get_scale_min_k4(2 * pair, b[i].scales, &sc, &m);
            const __m256 d_lo = _mm256_set1_ps(d * sc), m_lo = _mm256_set1_ps(dmin * m);
            vt_get_scale_min_k4(2 * pair + 1, b[i].scales, &sc, &m);
            const __m256 d_hi = _mm256_set1_ps(d * sc), m_hi = _mm256_set1_ps(dmin * m);
            for (int h = 0; h < 32; h += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(q + h));
                store16_u8(y + h, _mm_and_si128(v, low4), d_lo, m_lo);
                store16_u8(y + 32 + h, _mm_and_si128(_mm_srli_epi16(v, 4), low4), d_hi, m_hi);
            }
        }
    }
}

AVX2 static void q5_k(const vt_block_q5_k *b, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F), sixteen = _mm_set1_epi8(16);
    for (int64_t i = 0; i < nb; i++) {
        const float d = vt_fp16_to_f32(b[i].d), dmin = vt_fp16_to_f32(b[i].dmin);
        const uint8_t *ql = b[i].qs;
        for (int pair = 0; pair < VT_QK_K / 64; pair++, y += 64, ql += 32) {
            uint8_t sc, m;
            vt_get_scale_min_k4(2 * pair, b[i].scales, &sc, &m);
            const __m256 d_lo = _mm256_set1_ps(d * sc), m_lo = _mm256_set1_ps(dmin * m);
            vt_get_scale_min_k4(2 * pair + 1, b[i].scales, &sc, &m);
            const __m256 d_hi = _mm256_set1_ps(d * sc), m_hi = _mm256_set1_ps(dmin * m);
            const __m128i bit_lo = _mm_set1_epi8((char)(1u << (2 * pair)));
            const __m128i bit_hi = _mm_set1_epi8((char)(1u << (2 * pair + 1)));
            for (int h = 0; h < 32; h += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(ql + h));
                __m128i qh = _mm_loadu_si128((const __m128i *)(b[i].qh + h));
                /* +16 where bit j of qh[l] is set */
                __m128i add_lo = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(qh, bit_lo), bit_lo), sixteen);
                __m128i add_hi = _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(qh, bit_hi), bit_hi), sixteen);
                store16_u8(y + h, _mm_add_epi8(_mm_and_si128(v, low4), add_lo), d_lo, m_lo);
                store16_u8(y + 32 + h, _mm_add_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), low4), add_hi), d_hi, m_hi);
            }
        }
    }
}

/* One 16-value run of Q6_K: low nibbles (k even) or high (k odd) of ql,
 * bits 2k..2k+1 of qh (pre-shifted to bits 0..1), minus 32, times ds. */
AVX2 static inline void q6_run(float *y, __m128i nibbles, __m128i qh_bits, float ds) {
    const __m128i three = _mm_set1_epi8(3), thirty_two = _mm_set1_epi8(32);
    __m128i hi2 = _mm_slli_epi16(_mm_and_si128(qh_bits, three), 4); /* <= 0x30: no carry across bytes */
    __m128i q = _mm_sub_epi8(_mm_or_si128(nibbles, hi2), thirty_two);
    store16_s8(y, q, _mm256_set1_ps(ds));
}

AVX2 static void q6_k(const vt_block_q6_k *b, float *y, int64_t nb) {
    const __m128i low4 = _mm_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        const float d = vt_fp16_to_f32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int half = 0; half < 2; half++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l += 16) {
                const int s = l / 16;
                __m128i a = _mm_loadu_si128((const __m128i *)(ql + l));
                __m128i c = _mm_loadu_si128((const __m128i *)(ql + l + 32));
                __m128i h = _mm_loadu_si128((const __m128i *)(qh + l));
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

AVX2 static void f16(const vt_fp16_t *src, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) y[i] = vt_fp16_to_f32(src[i]);
}

AVX2 static void bf16(const vt_bf16_t *src, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    for (; i < n; i++) y[i] = vt_bf16_to_f32(src[i]);
}

bool onednn_dequant_avx2(int32_t dtype, const void *src, float *dst, int64_t n) {
    switch (dtype) {
    case VT_Q8_0: q8_0(src, dst, n / VT_QK8_0); return true;
    case VT_Q4_0: q4_0(src, dst, n / VT_QK4_0); return true;
    case VT_Q4_K: q4_k(src, dst, n / VT_QK_K); return true;
    case VT_Q5_K: q5_k(src, dst, n / VT_QK_K); return true;
    case VT_Q6_K: q6_k(src, dst, n / VT_QK_K); return true;
    case VT_F16: f16(src, dst, n); return true;
    case VT_BF16: bf16(src, dst, n); return true;
    default: return false;
    }
}
