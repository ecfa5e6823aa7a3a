/* kv_q8_0.c — the Q8_0 KV cache (ABI 1.1) on simd: quantize k/v rows on
 * store, and attention's two kernels over cached blocks.
 *
 * Reading is the hot half: at long contexts attention reads every cached row
 * once per decode step, and a Q8_0 row is 34 bytes per 32 values against an
 * f16 row's 64. Widening the rows to f32 before f32 dot products (as f16 is)
 * costs more instructions per value than the f16 path, enough to make q8_0
 * decode slower than f16 despite reading half the bytes. So neither kernel
 * materializes an f32 row:
 *   - scores: the query is quantized once per (token, head) to 16-bit
 *     blocks of 32, and each block's product with a cached block is summed
 *     in integers (the int8 keys widened to int16, vpmaddwd), then scaled
 *     once: one FMA per 32 values. 16 bits, not 8: an 8-bit query moved
 *     logits of the test models by up to 7e-3, more than storing the cache
 *     in another dtype does (test_kv_matrix tells those apart at 2e-3); 16
 *     bits cost the same instructions (vpmovsxbw + vpmaddwd for vpsignb +
 *     vpmaddubsw + vpmaddwd) and add 256x less error;
 *   - values: a block's 32 int8 are widened to f32 in registers and added
 *     into the output with one FMA each, weighted by the softmax weight
 *     times the block's scale; two queries sharing a kv head share each
 *     widened block.
 * Quantizing the query is the only rounding added against the exact
 * dequantized values (see the attention tests for its bound).
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

/* q . k over one block of 32 as 8 f32 partial sums: k widened to int16,
 * vpmaddwd; |q| <= 32767 and |k| <= 128 keep each lane's sum of 4 products
 * exact in int32 and in f32 (4 * 32767 * 128 < 2^24). */
SIMD_INLINE __m256 block_dot(const int16_t *q, const int8_t *k) {
    const __m128i k8 = _mm_loadu_si128((const __m128i *)(const void *)k);
    const __m128i k8hi = _mm_loadu_si128((const __m128i *)(const void *)(k + 16));
    const __m256i lo = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)q), _mm256_cvtepi8_epi16(k8));
    const __m256i hi =
        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(q + 16)), _mm256_cvtepi8_epi16(k8hi));
    return _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi));
}

/* Sum of the 8 lanes in the order of reduce4 below for each of its rows:
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). */
SIMD_INLINE float reduce1(__m256 s) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s, s), _mm256_hadd_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

SIMD_INLINE void reduce4(__m256 s0, __m256 s1, __m256 s2, __m256 s3, float *out) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

void simd_q8_0_scores(const int16_t *qs, const float *qd, const vt_block_q8_0 *const *k, const float *kd,
                      int64_t nb, int64_t n, float *out) {
    int64_t i = 0;
    /* 4 rows per pass: each query block is loaded once for the 4 */
    for (; i + 4 <= n; i += 4) {
        __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; b++) {
            const int16_t *q = qs + b * VT_QK8_0;
            SIMD_UNROLL
            for (int r = 0; r < 4; r++)
                s[r] = _mm256_fmadd_ps(block_dot(q, k[i + r][b].qs), _mm256_set1_ps(qd[b] * kd[(i + r) * nb + b]),
                                       s[r]);
        }
        reduce4(s[0], s[1], s[2], s[3], out + i);
    }
    for (; i < n; i++) {
        __m256 s = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            s = _mm256_fmadd_ps(block_dot(qs + b * VT_QK8_0, k[i][b].qs), _mm256_set1_ps(qd[b] * kd[i * nb + b]), s);
        }
        out[i] = reduce1(s);
    }
}

/* Values 8u .. 8u + 7 of a block as f32. */
SIMD_INLINE __m256 widen8(const int8_t *q, int u) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(q + 8 * u))));
}

/* One block (32 values) of y (and y2 when two) over rows 0..n-1. */
SIMD_INLINE void accumulate_block(float *y, const float *p, float *y2, const float *p2,
                                  const vt_block_q8_0 *const *v, const float *vd, int64_t nb, int64_t n,
                                  int64_t b, int two) {
    __m256 a[4], c[4];
    SIMD_UNROLL
    for (int u = 0; u < 4; u++) a[u] = _mm256_loadu_ps(y + 8 * u);
    if (two)
        SIMD_UNROLL
        for (int u = 0; u < 4; u++) c[u] = _mm256_loadu_ps(y2 + 8 * u);
    for (int64_t i = 0; i < n; i++) {
        const int8_t *q = v[i][b].qs;
        const float d = vd[i * nb + b];
        const __m256 w = _mm256_set1_ps(p[i] * d);
        __m256 x[4];
        SIMD_UNROLL
        for (int u = 0; u < 4; u++) x[u] = widen8(q, u);
        SIMD_UNROLL
        for (int u = 0; u < 4; u++) a[u] = _mm256_fmadd_ps(w, x[u], a[u]);
        if (two) {
            const __m256 w2 = _mm256_set1_ps(p2[i] * d);
            SIMD_UNROLL
            for (int u = 0; u < 4; u++) c[u] = _mm256_fmadd_ps(w2, x[u], c[u]);
        }
    }
    SIMD_UNROLL
    for (int u = 0; u < 4; u++) _mm256_storeu_ps(y + 8 * u, a[u]);
    if (two)
        SIMD_UNROLL
        for (int u = 0; u < 4; u++) _mm256_storeu_ps(y2 + 8 * u, c[u]);
}

void simd_q8_0_accumulate(float *y, const float *p, float *y2, const float *p2, const vt_block_q8_0 *const *v,
                          const float *vd, int64_t nb, int64_t n) {
    for (int64_t b = 0; b < nb; b++) {
        if (y2)
            accumulate_block(y + b * VT_QK8_0, p, y2 + b * VT_QK8_0, p2, v, vd, nb, n, b, 1);
        else
            accumulate_block(y + b * VT_QK8_0, p, NULL, NULL, v, vd, nb, n, b, 0);
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
