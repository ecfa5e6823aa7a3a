/* kv_no_q8_0.c — test backend (built at the current ABI) that runs every op
 * of the reference except the two that touch a Q8_0 KV cache: its supports()
 * declines attention and reshape_and_cache when either cache is Q8_0.
 *
 * With --kv-cache-dtype q8_0 those nodes must go to the fallback at build
 * (never fail mid-forward) and everything else stay on the plugin; with
 * --fallback none the build is refused, naming the op, the backend and the
 * dtypes. Every op runs on the reference (forward_to_reference.h), which also refuses
 * to run any node this supports() declines. */
#define PLUGIN_NAME "kv_no_q8_0"
#include "forward_to_reference.h"

static int plugin_supports(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    const int first_cache = node->op == VT_OP_ATTENTION ? 1 : node->op == VT_OP_RESHAPE_AND_CACHE ? 2 : -1;
    if (first_cache > 0 && node->n_src >= first_cache + 2 &&
        (node->src[first_cache].dtype == VT_Q8_0 || node->src[first_cache + 1].dtype == VT_Q8_0))
        return 0;
    return fwd_reference_supports(c, node);
}

FWD_BACKEND("test plugin: reference ops; declines a q8_0 KV cache in attention and the store")
