/* kv_no_convert.c — test backend that refuses every dtype conversion.
 *
 * supports() differs from the reference's in three ways:
 *   - rope, matmul and add: f32 output only (no producer emits f16/bf16);
 *   - convert: declined for every dtype pair;
 *   - reshape_and_cache: only when k/v already have the cache's dtype (no
 *     widening or narrowing on store).
 * So with an f16 or bf16 KV cache and no fallback backend, nothing can bring
 * k/v to the cache dtype and the plan build must refuse, naming
 * reshape_and_cache, this backend and the dtypes. With an f32 cache, or with
 * a fallback that converts, it works. Every op runs on the reference
 * (forward_to_reference.h). */
#define PLUGIN_NAME "kv_no_convert"
#include "forward_to_reference.h"

static int plugin_supports(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    switch (node->op) {
    case VT_OP_CONVERT:
        return 0;
    case VT_OP_RESHAPE_AND_CACHE:
        if (node->n_src < 4 || node->src[0].dtype != node->src[2].dtype || node->src[1].dtype != node->src[3].dtype)
            return 0;
        break;
    case VT_OP_ROPE:
    case VT_OP_MATMUL:
    case VT_OP_ADD:
        if (node->dst.dtype != VT_F32) return 0;
        break;
    default:
        break;
    }
    return fwd_reference_supports(c, node);
}

FWD_BACKEND("test plugin: reference ops; no convert, store only k/v of the cache dtype, f32 producers")
