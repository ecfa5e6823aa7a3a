/* int8_rows.c — the row conversions around onednn's integer matmul
 * (matmul_int8.c, int8_weight.c): a row quantized to int8 with its scale
 * (as signed bytes for the weights, as unsigned q + 128 for the
 * activations), and a row of integer products scaled back to f32.
 *
 * Each has an AVX2 body (picked at run time where the CPU has AVX2; the
 * backend itself is built for any x86-64) and a portable one that gives the
 * same bits: a max is exact whatever its order, the quantization is one
 * IEEE multiply then a conversion rounding to nearest (ties to even) as
 * lrintf does under the default rounding mode, and the scaling is two IEEE
 * multiplies in the same order. A row's numbers therefore never depend on
 * the machine's vector width, only on the row. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "onednn.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define INT8_ROWS_AVX2 1
#else
#define INT8_ROWS_AVX2 0
#endif

/* max |x[i]|, or NaN if some x[i] is one (the row then has no scale, see
 * onednn_quantize_row_s8). */
static float abs_max_portable(const float *x, int64_t k) {
    float m = 0.0f;
    bool nan = false;
    for (int64_t i = 0; i < k; i++) {
        const float a = fabsf(x[i]);
        nan |= a != a;
        m = a > m ? a : m;
    }
    return nan ? NAN : m;
}

/* q = round(x . inv) as a byte, plus bias (0: signed, 128: unsigned). */
static void quantize_portable(const float *x, uint8_t *q, int64_t k, float inv, int bias) {
    for (int64_t i = 0; i < k; i++) q[i] = (uint8_t)(lrintf(x[i] * inv) + bias);
}

static void scale_portable(const int32_t *s, const int32_t *offset, const float *w_scale, float x_scale, float *y,
                           int64_t n) {
    for (int64_t j = 0; j < n; j++) y[j] = (float)(s[j] - offset[j]) * w_scale[j] * x_scale;
}

#if INT8_ROWS_AVX2
__attribute__((target("avx2"))) static float abs_max_avx2(const float *x, int64_t k) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
        m = _mm256_max_ps(a, m); /* a NaN in a gives m: skipped here, caught by nan */
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    float r = abs_max_portable(x + i, k - i);
    if (_mm256_movemask_ps(nan)) return NAN;
    for (int l = 0; l < 8; l++) r = lanes[l] > r ? lanes[l] : r;
    return r;
}

__attribute__((target("avx2"))) static void quantize_avx2(const float *x, uint8_t *q, int64_t k, float inv,
                                                          int bias) {
    const __m256 v = _mm256_set1_ps(inv);
    const __m256i flip = _mm256_set1_epi8((char)bias); /* 0x80 adds 128 to a signed byte, mod 256 */
    /* packs interleave 128-bit halves: this permute puts the 32 bytes back in order */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        __m256i r[4];
        for (int u = 0; u < 4; u++) r[u] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * u), v));
        const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_xor_si256(_mm256_permutevar8x32_epi32(w, order), flip));
    }
    quantize_portable(x + i, q + i, k - i, inv, bias);
}

__attribute__((target("avx2"))) static void scale_avx2(const int32_t *s, const int32_t *offset, const float *w_scale,
                                                       float x_scale, float *y, int64_t n) {
    const __m256 xs = _mm256_set1_ps(x_scale);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256i d = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(s + j)),
                                           _mm256_loadu_si256((const __m256i *)(offset + j)));
        const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(d), _mm256_loadu_ps(w_scale + j));
        _mm256_storeu_ps(y + j, _mm256_mul_ps(p, xs));
    }
    scale_portable(s + j, offset + j, w_scale + j, x_scale, y + j, n - j);
}

static bool has_avx2(void) { return __builtin_cpu_supports("avx2"); }
#endif

/* The row's scale and its bytes (bias as in quantize_portable). */
static float quantize_row(const float *x, uint8_t *q, int64_t k, int bias) {
#if INT8_ROWS_AVX2
    const bool avx2 = has_avx2();
    const float amax = avx2 ? abs_max_avx2(x, k) : abs_max_portable(x, k);
#else
    const float amax = abs_max_portable(x, k);
#endif
    /* A zero row multiplies to zeros; a row with an infinity or a NaN has
     * no finite scale: its results are NaN (as f32 products would be NaN or
     * infinite) rather than finite numbers that hide it. */
    if (!isfinite(amax)) {
        for (int64_t i = 0; i < k; i++) q[i] = (uint8_t)bias;
        return NAN;
    }
    const float inv = 127.0f / amax; /* |x . inv| <= 127 (rounded): no saturation */
    if (amax == 0.0f || !isfinite(inv)) { /* zero, or below 127 / FLT_MAX (~4e-37): zeros */
        for (int64_t i = 0; i < k; i++) q[i] = (uint8_t)bias;
        return 0.0f;
    }
#if INT8_ROWS_AVX2
    if (avx2) {
        quantize_avx2(x, q, k, inv, bias);
        return amax / 127.0f;
    }
#endif
    quantize_portable(x, q, k, inv, bias);
    return amax / 127.0f;
}

float onednn_quantize_row_u8(const float *x, uint8_t *u8, int64_t k) { return quantize_row(x, u8, k, 128); }

float onednn_quantize_row_s8(const float *x, int8_t *q, int64_t k) {
    /* int8 and uint8 share their representation: the bytes of q + 0 */
    return quantize_row(x, (uint8_t *)q, k, 0);
}

void onednn_scale_row(const int32_t *s, const int32_t *offset, const float *w_scale, float x_scale, float *y,
                      int64_t n) {
#if INT8_ROWS_AVX2
    if (has_avx2()) {
        scale_avx2(s, offset, w_scale, x_scale, y, n);
        return;
    }
#endif
    scale_portable(s, offset, w_scale, x_scale, y, n);
}
