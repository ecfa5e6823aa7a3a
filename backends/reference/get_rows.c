/* get_rows.c — dst[i] = f32(table[ids[i]]): an embedding lookup from a
 * table of any weight dtype, dequantized by the host's converter. */
#include <stdatomic.h>

#include "reference.h"

typedef struct get_rows_job {
    const ref_ctx *c;
    const vt_node *node;
    atomic_int failed;
} get_rows_job;

static void get_rows_range(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    get_rows_job *job = arg;
    const vt_tensor *table = &job->node->src[0];
    const int32_t *ids = job->node->src[1].data; /* [M] */
    float *y = job->node->dst.data;              /* [M][D] */
    const int64_t D = table->ne[0];
    const size_t row_bytes = ref_row_bytes(job->c, table);
    for (int64_t i = begin; i < end; i++) {
        const unsigned char *row = (const unsigned char *)table->data + (size_t)ids[i] * row_bytes;
        if (job->c->host->to_f32(table->dtype, row, y + (size_t)i * (size_t)D, D) != VT_OK) atomic_store(&job->failed, 1);
    }
}

vt_status ref_get_rows(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "get_rows")) return VT_ERR_INVALID;
    const int64_t M = node->src[1].ne[0], V = vt_tensor_dim(&node->src[0], 1);
    const int32_t *ids = node->src[1].data;
    for (int64_t i = 0; i < M; i++) {
        if (ids[i] < 0 || ids[i] >= V) {
            c->host->log(VT_LOG_ERROR, REF_NAME, "get_rows: id %d at %lld outside the table's %lld rows", ids[i], (long long)i,
                         (long long)V);
            return VT_ERR_INVALID;
        }
    }
    get_rows_job job = {.c = c, .node = node};
    atomic_init(&job.failed, 0);
    ref_parallel(c, M, 1, get_rows_range, &job);
    if (atomic_load(&job.failed)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "get_rows: cannot dequantize %s", c->host->dtype_name(node->src[0].dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
