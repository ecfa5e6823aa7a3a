/* add.c — y = a + b, with b either the same shape as a or one row broadcast
 * over a's rows; output F32, F16 or BF16. */
#include "simd.h"
#include "simd_vec.h"

typedef struct add_task {
    const float *a; /* [M][N] */
    const float *b; /* [M][N] or [N] */
    void *y;        /* [M][N] of y_dtype */
    int32_t y_dtype;
    int64_t N;
    int broadcast;
} add_task;

static void add_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const add_task *t = arg;
    const int64_t N = t->N;
    const size_t ys = simd_float_size(t->y_dtype);
    for (int64_t m = begin; m < end; m++) {
        const float *a = t->a + m * N, *b = t->broadcast ? t->b : t->b + m * N;
        void *y = (uint8_t *)t->y + (size_t)(m * N) * ys;
        int64_t i = 0;
        for (; i + 8 <= N; i += 8)
            simd_store8(t->y_dtype, y, i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        for (; i < N; i++) simd_store1(t->y_dtype, y, i, a[i] + b[i]);
    }
}

vt_status simd_add(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_tensor *a = &node->src[0], *b = &node->src[1];
    const int64_t N = a->ne[0];
    int64_t M = 1, Mb = 1;
    for (int i = 1; i < a->ndim; i++) M *= a->ne[i];
    for (int i = 1; i < b->ndim; i++) Mb *= b->ne[i];
    if (b->ne[0] != N || (Mb != M && Mb != 1)) return VT_ERR_INVALID;
    add_task t = {a->data, b->data, node->dst.data, node->dst.dtype, N, Mb == 1 && M != 1};
    if (M <= 0 || N <= 0) return VT_OK;
    if (M * N < 32768)
        add_rows(&t, 0, M, 0);
    else
        vt_host_parallel_for(ctx->host, M, 1, add_rows, &t);
    return VT_OK;
}
