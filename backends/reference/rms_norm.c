/* rms_norm.c — y = x / sqrt(mean(x^2) + eps) * w over each row of D.
 *
 * The mean of squares is summed in double; each product is rounded once to
 * f32 and then to dst's dtype. Work is split over rows. */
#include <math.h>
#include <stdatomic.h>

#include "reference.h"

typedef struct rms_norm_job {
    const ref_ctx *c;
    const vt_node *node;
    int64_t D;
    ref_scratch scratch; /* per thread: one output row, D floats */
    atomic_int failed;
} rms_norm_job;

static void rms_norm_rows(void *arg, int64_t begin, int64_t end, int thread) {
    rms_norm_job *job = arg;
    const vt_host *h = job->c->host;
    const int64_t D = job->D;
    const double eps = job->node->params.rms_norm.eps;
    const float *x_all = job->node->src[0].data; /* [R][D] */
    const float *w = job->node->src[1].data;     /* [D] */
    const vt_tensor *y = &job->node->dst;        /* [R][D] */
    const size_t y_row_bytes = h->row_size(y->dtype, D);
    float *out = ref_scratch_slice(&job->scratch, thread);

    for (int64_t r = begin; r < end; r++) {
        const float *x = x_all + (size_t)r * (size_t)D;
        double sum_sq = 0.0;
        for (int64_t i = 0; i < D; i++) sum_sq += (double)x[i] * (double)x[i];
        const double inv_rms = 1.0 / sqrt(sum_sq / (double)D + eps);
        for (int64_t i = 0; i < D; i++) out[i] = (float)((double)x[i] * inv_rms * (double)w[i]);
        if (h->from_f32(y->dtype, out, (unsigned char *)y->data + (size_t)r * y_row_bytes, D) != VT_OK)
            atomic_store(&job->failed, 1);
    }
}

vt_status ref_rms_norm(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "rms_norm")) return VT_ERR_INVALID;
    rms_norm_job job = {.c = c, .node = node, .D = node->src[0].ne[0]};
    atomic_init(&job.failed, 0);
    if (!ref_scratch_alloc(c, (size_t)job.D * sizeof(float), &job.scratch)) return VT_ERR_NOMEM;
    ref_parallel(c, vt_tensor_rows(&node->src[0]), 1, rms_norm_rows, &job);
    ref_scratch_free(c, &job.scratch);
    if (atomic_load(&job.failed)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "rms_norm: cannot store %s", c->host->dtype_name(node->dst.dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
