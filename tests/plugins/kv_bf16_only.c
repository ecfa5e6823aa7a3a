/* kv_bf16_only.c — test backend whose cache store takes k/v only in bf16.
 *
 * supports() differs from the reference's in three ways:
 *   - reshape_and_cache: k and v must be bf16 (the cache may be any float
 *     dtype: it widens or narrows on store, as the reference does);
 *   - rope and matmul: f32 output only, so neither k producer (rope) nor
 *     v producer (the v projection) can emit bf16 itself;
 *   - convert: accepted (as the reference).
 * With an f32 KV cache, negotiation must therefore insert convert nodes
 * (f32 -> bf16) between the producers and every store, and a forward through
 * this backend completes. Every op runs on the reference (forward_to_reference.h). */
#define PLUGIN_NAME "kv_bf16_only"
#include "forward_to_reference.h"

static int plugin_supports(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    switch (node->op) {
    case VT_OP_RESHAPE_AND_CACHE:
        if (node->n_src < 2 || node->src[0].dtype != VT_BF16 || node->src[1].dtype != VT_BF16) return 0;
        break;
    case VT_OP_ROPE:
    case VT_OP_MATMUL:
        if (node->dst.dtype != VT_F32) return 0;
        break;
    default:
        break;
    }
    return fwd_reference_supports(c, node);
}

FWD_BACKEND("test plugin: reference ops; cache store takes bf16 k/v only, rope/matmul emit f32 only")
