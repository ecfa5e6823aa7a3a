/* rms_norm.c — y = x / sqrt(mean(x^2) + eps) * w per row, the sum of squares
 * accumulated in f32 over 8 lanes (then the lanes summed), output F32, F16
 * or BF16. */
#include <math.h>

#include "simd.h"
#include "simd_vec.h"

typedef struct rms_task {
    const float *x; /* [R][D] */
    const float *w; /* [D] */
    void *y;        /* [R][D] of y_dtype */
    int32_t y_dtype;
    int64_t D;
    float eps;
} rms_task;

static void rms_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const rms_task *t = arg;
    const int64_t D = t->D;
    const size_t ys = simd_float_size(t->y_dtype);
    for (int64_t r = begin; r < end; r++) {
        const float *x = t->x + r * D;
        void *y = (uint8_t *)t->y + (size_t)(r * D) * ys;
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= D; i += 16) {
            const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
            s0 = _mm256_fmadd_ps(a, a, s0);
            s1 = _mm256_fmadd_ps(b, b, s1);
        }
        for (; i + 8 <= D; i += 8) {
            const __m256 a = _mm256_loadu_ps(x + i);
            s0 = _mm256_fmadd_ps(a, a, s0);
        }
        float ss = simd_hsum_ps(_mm256_add_ps(s0, s1));
        for (; i < D; i++) ss += x[i] * x[i];
        const float inv = 1.0f / sqrtf(ss / (float)D + t->eps);
        const __m256 iv = _mm256_set1_ps(inv);
        for (i = 0; i + 8 <= D; i += 8)
            simd_store8(t->y_dtype, y, i,
                        _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), iv), _mm256_loadu_ps(t->w + i)));
        for (; i < D; i++) simd_store1(t->y_dtype, y, i, x[i] * inv * t->w[i]);
    }
}

vt_status simd_rms_norm(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_tensor *x = &node->src[0];
    const int64_t D = x->ne[0];
    int64_t R = 1;
    for (int i = 1; i < x->ndim; i++) R *= x->ne[i];
    rms_task t = {x->data, node->src[1].data, node->dst.data, node->dst.dtype, D, node->params.rms_norm.eps};
    if (R <= 0 || D <= 0) return VT_OK;
    if (R * D < 16384)
        rms_rows(&t, 0, R, 0); /* a decode step's norm: not worth waking the pool */
    else
        vt_host_parallel_for(ctx->host, R, 1, rms_rows, &t);
    return VT_OK;
}
