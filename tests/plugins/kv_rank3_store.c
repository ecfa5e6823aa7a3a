/* kv_rank3_store.c — test backend whose cache store takes k and v only as
 * rank-3 tensors {D, KVH, T}, as the operand convention writes them, at every
 * T including the single token of a decode step.
 *
 * Everything else is the reference's answer. With --fallback none a plan can
 * only run if every store node it executes is rank 3 in prefill and decode,
 * and since the plugin enforces its supports() on every call (forward_to_reference.h),
 * a store that was offered at one rank and run at another fails the forward
 * instead of being run by the more tolerant reference. Every op runs on the
 * reference (forward_to_reference.h). */
#define PLUGIN_NAME "kv_rank3_store"
#include "forward_to_reference.h"

static int plugin_supports(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    if (node->op == VT_OP_RESHAPE_AND_CACHE && (node->n_src < 2 || node->src[0].ndim != 3 || node->src[1].ndim != 3))
        return 0;
    return fwd_reference_supports(c, node);
}

FWD_BACKEND("test plugin: reference ops; the cache store takes rank-3 k/v only")
