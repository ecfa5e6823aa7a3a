/* kv_q8_0.c — the Q8_0 KV cache (ABI 1.1) on simd: quantize k/v rows on
 * store, widen cached rows to f32 for attention.
 *
 * Reading is the hot half: at long contexts attention reads every cached row
 * once per decode step, and a Q8_0 row is 34 bytes per 32 values against an
 * f16 row's 64. attention.c widens each row once per chunk and shares it
 * over every query head of the kv head (and every query token of the tile),
 * so the widening here (8 int8 -> 8 f32, times the block's scale) is paid
 * once per row read, as the f16 conversion is. The dot products then run in
 * f32 as for every other cache dtype: the scores are the exact dequantized
 * values' up to f32 summation, with no second rounding of q.
 *
 * Storing is the cold half (a few rows per token per layer) and goes through
 * host->from_f32, the quantizer every backend's store must match byte for
 * byte (vt_backend.h): the simd and reference caches then hold identical
 * bytes, which keeps batched = alone and simd = reference on the cache
 * itself. Measured: at prefill 2048 on the qwen3-0.6B shape the store is
 * well under 1% of the forward (bench/RESULTS.md). */
#include <immintrin.h>
#include <string.h>

#include "simd.h"
#include "simd_vec.h"
#include "vt/vt_dtype.h"

const float *simd_q8_0_cache_row(const void *cache, int64_t row, int64_t D, float *dst) {
    const vt_block_q8_0 *b = (const vt_block_q8_0 *)cache + row * (D / VT_QK8_0);
    for (int64_t i = 0; i < D / VT_QK8_0; i++) {
        const __m256 d = _mm256_set1_ps(vt_fp16_to_f32(b[i].d));
        const int8_t *q = b[i].qs;
        float *y = dst + i * VT_QK8_0;
        for (int j = 0; j < VT_QK8_0; j += 8) {
            const __m256i w = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(q + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(w)));
        }
    }
    return dst;
}

vt_status simd_store_rows_q8_0(const vt_host *host, const vt_tensor *src, const vt_tensor *cache,
                               const int64_t *slots, int64_t T, float *buf) {
    const int64_t width = src->ne[0] * src->ne[1];
    const int64_t n_slots = cache->ne[2] * cache->ne[3];
    const size_t ss = simd_float_size(src->dtype), row = vt_row_size(VT_Q8_0, width);
    if (ss == 0 || row == 0) return VT_ERR_INVALID;
    for (int64_t t = 0; t < T; t++) {
        const int64_t slot = slots[t];
        if (slot < 0) continue;
        if (slot >= n_slots) return VT_ERR_INVALID;
        const uint8_t *s = (const uint8_t *)src->data + (size_t)(t * width) * ss;
        const float *x = (const float *)(const void *)s;
        if (src->dtype != VT_F32) {
            simd_load_row(src->dtype, s, buf, width);
            x = buf;
        }
        vt_status st = host->from_f32(VT_Q8_0, x, (uint8_t *)cache->data + (size_t)slot * row, width);
        if (st != VT_OK) return st;
    }
    return VT_OK;
}
