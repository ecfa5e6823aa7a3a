/* swiglu.c — y = silu(gate) * up, silu(g) = g / (1 + e^-g), in double. */
#include <math.h>

#include "reference.h"

typedef struct swiglu_job {
    const vt_node *node;
    int64_t F;
} swiglu_job;

static void swiglu_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const swiglu_job *job = arg;
    const float *gate = job->node->src[0].data, *up = job->node->src[1].data; /* [M][F] */
    float *y = job->node->dst.data;                                          /* [M][F] */
    for (size_t i = (size_t)(begin * job->F); i < (size_t)(end * job->F); i++) {
        const double g = gate[i];
        y[i] = (float)(g / (1.0 + exp(-g)) * (double)up[i]);
    }
}

vt_status ref_swiglu(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "swiglu")) return VT_ERR_INVALID;
    swiglu_job job = {.node = node, .F = node->src[0].ne[0]};
    ref_parallel(c, vt_tensor_rows(&node->src[0]), 1, swiglu_rows, &job);
    return VT_OK;
}
