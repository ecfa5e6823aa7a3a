/* kv_q8_0.c — the Q8_0 KV cache (ABI 1.1) on simd: quantize k/v rows on
 * store, and each query once for attention's integer scores.
 *
 * Reading is the hot half, and attention does it (kv_q8_0_chunk.h): a
 * chunk's k blocks are widened to int16 and transposed once for all the
 * queries of a work item, and each query's scores are integer multiply-adds
 * of 16-bit pairs with the positions in vector lanes, scaled once per
 * block; the v blocks are widened to f32 once a chunk and weighted per
 * block. The query is quantized here, once per (token, head), to 16-bit
 * blocks of 32, not 8-bit: an 8-bit query moved logits of the test models
 * by up to 7e-3, more than storing the cache in another dtype does
 * (test_kv_matrix tells those apart at 2e-3); 16 bits cost the same
 * instructions and add 256x less error. Quantizing the query, and rounding
 * each block's exact integer sum to f32 once, are the only roundings added
 * against the exact dequantized values (see the attention tests for their
 * bound).
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

void simd_q8_0_quantize_query(const float *x, int16_t *qs, float *qd, int64_t D) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < D / VT_QK8_0; b++) {
        const float *xb = x + b * VT_QK8_0;
        __m256 v[4], m = _mm256_setzero_ps();
        for (int u = 0; u < 4; u++) v[u] = _mm256_loadu_ps(xb + 8 * u), m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[u]));
        const float amax = simd_hmax_ps(m);
        qd[b] = amax / 32767.0f;
        const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 32767.0f / amax : 0.0f);
        __m256i i[4];
        for (int u = 0; u < 4; u++) i[u] = _mm256_cvtps_epi32(_mm256_mul_ps(v[u], inv)); /* |i| <= 32767 */
        /* packs works within 128-bit lanes: [0-3 8-11 | 4-7 12-15]; the
         * permute puts the 64-bit groups back in order */
        const __m256i lo = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[0], i[1]), 0xD8);
        const __m256i hi = _mm256_permute4x64_epi64(_mm256_packs_epi32(i[2], i[3]), 0xD8);
        _mm256_storeu_si256((__m256i *)(void *)(qs + b * VT_QK8_0), lo);
        _mm256_storeu_si256((__m256i *)(void *)(qs + b * VT_QK8_0 + 16), hi);
    }
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
