/* vt_bf16_row.h — f32 rows to bf16 for backends that multiply in bf16:
 * rounded as vt_f32_to_bf16 rounds (to nearest, ties to even; a NaN stays a
 * quiet NaN), in integers, 16 values per AVX-512 step, so the values match
 * what every other part of vt calls bf16.
 *
 * x86-64 only. The function carries its own target (AVX-512 F), so any
 * translation unit may include it; call it only where the CPU has AVX-512
 * and the OS saves its state (vt_cpu.h says both). */
#ifndef VT_BF16_ROW_H
#define VT_BF16_ROW_H

#include <immintrin.h>
#include <stdint.h>

#include "vt_quant.h"

__attribute__((target("avx512f"))) static inline void vt_f32_to_bf16_row_avx512(const float *src, vt_bf16_t *dst,
                                                                                int64_t n) {
    const __m512i round = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i x = _mm512_loadu_si512((const void *)(src + i));
        const __m512i even = _mm512_and_si512(_mm512_srli_epi32(x, 16), one);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(round, even)), 16);
        const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, abs_mask), inf);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), quiet);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm512_cvtepi32_epi16(r));
    }
    for (; i < n; i++) dst[i] = vt_f32_to_bf16(src[i]);
}

#endif
