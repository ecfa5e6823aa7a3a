/* convert.c — dst = src cast between F32, F16 and BF16 (same shape): widen
 * to f32 (exact), then narrow with round to nearest even. Same dtype is a
 * copy. Work is split over rows. */
#include <stdatomic.h>
#include <string.h>

#include "reference.h"

typedef struct convert_job {
    const ref_ctx *c;
    const vt_node *node;
    int64_t n; /* elements per row */
    ref_scratch scratch; /* per thread: one row as f32, n floats */
    atomic_int failed;
} convert_job;

static void convert_rows(void *arg, int64_t begin, int64_t end, int thread) {
    convert_job *job = arg;
    const vt_host *h = job->c->host;
    const vt_tensor *x = &job->node->src[0], *y = &job->node->dst;
    const size_t x_row = h->row_size(x->dtype, job->n), y_row = h->row_size(y->dtype, job->n);
    float *row = ref_scratch_slice(&job->scratch, thread);
    for (int64_t r = begin; r < end; r++) {
        const unsigned char *from = (const unsigned char *)x->data + (size_t)r * x_row;
        unsigned char *to = (unsigned char *)y->data + (size_t)r * y_row;
        if (x->dtype == y->dtype) {
            memcpy(to, from, x_row);
        } else if (h->to_f32(x->dtype, from, row, job->n) != VT_OK || h->from_f32(y->dtype, row, to, job->n) != VT_OK) {
            atomic_store(&job->failed, 1);
        }
    }
}

vt_status ref_convert(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "convert")) return VT_ERR_INVALID;
    convert_job job = {.c = c, .node = node, .n = node->src[0].ne[0]};
    atomic_init(&job.failed, 0);
    if (!ref_scratch_alloc(c, (size_t)job.n * sizeof(float), &job.scratch)) return VT_ERR_NOMEM;
    ref_parallel(c, vt_tensor_rows(&node->src[0]), 1, convert_rows, &job);
    ref_scratch_free(c, &job.scratch);
    if (atomic_load(&job.failed)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "convert: cannot convert %s to %s", c->host->dtype_name(node->src[0].dtype),
                     c->host->dtype_name(node->dst.dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
