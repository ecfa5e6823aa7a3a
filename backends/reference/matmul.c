/* matmul.c — Y[m][n] = sum_k X[m][k] * W[n][k], weights of any dtype.
 *
 * Each weight row is dequantized once (host->to_f32 into the thread's
 * scratch) and dotted with every activation row in double; the sum is rounded
 * once to f32 and then to Y's dtype. Work is split over weight rows (N). */
#include <stdatomic.h>

#include "reference.h"

typedef struct matmul_job {
    const ref_ctx *c;
    const vt_tensor *w; /* {K, N} */
    const vt_tensor *x; /* {K, M} f32 */
    const vt_tensor *y; /* {N, M} */
    int64_t K, N, M;
    ref_scratch scratch; /* per thread: one dequantized weight row, K floats */
    atomic_int failed;
} matmul_job;

static void matmul_rows(void *arg, int64_t n_begin, int64_t n_end, int thread) {
    matmul_job *job = arg;
    const vt_host *h = job->c->host;
    const int64_t K = job->K, N = job->N, M = job->M;
    const size_t w_row_bytes = ref_row_bytes(job->c, job->w);
    const size_t y_elem_bytes = h->row_size(job->y->dtype, 1);
    float *w_row = ref_scratch_slice(&job->scratch, thread); /* [K] */
    const float *x = job->x->data;                           /* [M][K] */
    unsigned char *y = job->y->data;                         /* [M][N] */

    for (int64_t n = n_begin; n < n_end; n++) {
        if (h->to_f32(job->w->dtype, (const unsigned char *)job->w->data + (size_t)n * w_row_bytes, w_row, K) != VT_OK) {
            atomic_store(&job->failed, 1);
            return;
        }
        for (int64_t m = 0; m < M; m++) {
            const float *x_row = x + (size_t)m * (size_t)K;
            float value = (float)ref_dot_f64(w_row, x_row, K);
            h->from_f32(job->y->dtype, &value, y + ((size_t)m * (size_t)N + (size_t)n) * y_elem_bytes, 1);
        }
    }
}

vt_status ref_matmul(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "matmul")) return VT_ERR_INVALID;
    matmul_job job = {
        .c = c, .w = &node->src[0], .x = &node->src[1], .y = &node->dst,
        .K = node->src[0].ne[0], .N = vt_tensor_dim(&node->src[0], 1), .M = vt_tensor_dim(&node->src[1], 1),
    };
    atomic_init(&job.failed, 0);
    if (!ref_scratch_alloc(c, (size_t)job.K * sizeof(float), &job.scratch)) return VT_ERR_NOMEM;
    ref_parallel(c, job.N, 1, matmul_rows, &job);
    ref_scratch_free(c, &job.scratch);
    if (atomic_load(&job.failed)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "matmul: cannot dequantize %s weights", c->host->dtype_name(job.w->dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
