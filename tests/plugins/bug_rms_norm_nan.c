/* bug_rms_norm_nan.c — test backend whose rms_norm writes NaN wherever the
 * reference's is negative (a sign handled as a square root's argument, say):
 * every other op runs on the reference (forward_to_reference.h).
 *
 * A generation on it must fail saying a backend wrote a non-finite logit,
 * not print whatever a sampler makes of NaN (tests/test_backends_test.c). */
#include <math.h>

#define PLUGIN_NAME "bug_rms_norm_nan"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_RMS_NORM nan_rms_norm
#include "forward_to_reference.h"

static vt_status nan_rms_norm(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, "rms_norm");
    if (st == VT_OK) st = c->ref->rms_norm(c->ref_ctx, node);
    if (st != VT_OK || node->dst.dtype != VT_F32) return st;
    float *y = node->dst.data;
    const int64_t n = node->dst.ne[0] * node->dst.ne[1] * node->dst.ne[2] * node->dst.ne[3];
    for (int64_t i = 0; i < n; i++)
        if (y[i] < 0) y[i] = NAN;
    return VT_OK;
}

FWD_BACKEND("test plugin: reference ops, but rms_norm writes NaN where the result is negative")
