/* add.c — y = a + b, b either shaped like a or one row broadcast to every
 * row of a. The sum is rounded once to f32, then to dst's dtype. */
#include <stdatomic.h>

#include "reference.h"

typedef struct add_job {
    const ref_ctx *c;
    const vt_node *node;
    int64_t N;
    ref_scratch scratch; /* per thread: one output row, N floats */
    atomic_int failed;
} add_job;

static void add_rows(void *arg, int64_t begin, int64_t end, int thread) {
    add_job *job = arg;
    const vt_host *h = job->c->host;
    const int64_t N = job->N;
    const bool broadcast = vt_tensor_rows(&job->node->src[1]) == 1;
    const float *a_all = job->node->src[0].data; /* [M][N] */
    const float *b_all = job->node->src[1].data; /* [M][N] or [1][N] */
    const vt_tensor *y = &job->node->dst;
    const size_t y_row_bytes = h->row_size(y->dtype, N);
    float *out = ref_scratch_slice(&job->scratch, thread);
    for (int64_t m = begin; m < end; m++) {
        const float *a = a_all + (size_t)m * (size_t)N;
        const float *b = b_all + (broadcast ? 0 : (size_t)m * (size_t)N);
        for (int64_t i = 0; i < N; i++) out[i] = (float)((double)a[i] + (double)b[i]);
        if (h->from_f32(y->dtype, out, (unsigned char *)y->data + (size_t)m * y_row_bytes, N) != VT_OK)
            atomic_store(&job->failed, 1);
    }
}

vt_status ref_add(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "add")) return VT_ERR_INVALID;
    add_job job = {.c = c, .node = node, .N = node->src[0].ne[0]};
    atomic_init(&job.failed, 0);
    if (!ref_scratch_alloc(c, (size_t)job.N * sizeof(float), &job.scratch)) return VT_ERR_NOMEM;
    ref_parallel(c, vt_tensor_rows(&node->src[0]), 1, add_rows, &job);
    ref_scratch_free(c, &job.scratch);
    if (atomic_load(&job.failed)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "add: cannot store %s", c->host->dtype_name(node->dst.dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
