/* kv_abi_1_0.c — test backend built as ABI 1.0 (abi_minor 0, the 1.0 table
 * size), before the Q8_0 KV cache existed, whose supports() checks no cache
 * dtype: it says yes to whatever the reference runs, as a 1.0 plugin that
 * only checked shapes would. Its attention and store fail, logging why, if
 * they are ever handed a Q8_0 cache (what such a plugin would misread).
 *
 * The runtime must never offer it a node with a Q8_0 cache: with
 * --kv-cache-dtype q8_0 its attention and store nodes go to the fallback and
 * the forward completes; at any float cache it runs everything itself. */
#define PLUGIN_NAME "kv_abi_1_0"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_ABI_MINOR 0
#define FWD_STRUCT_SIZE VT_BACKEND_SIZE_1_0
#define FWD_ATTENTION abi10_attention
#define FWD_RESHAPE_AND_CACHE abi10_store
#include "forward_to_reference.h"

/* The op, unless it was handed a cache dtype a 1.0 plugin never agreed to. */
static vt_status cache_op(void *ctx, const vt_node *node, int first_cache, vt_op_fn run, const char *op) {
    const fwd_ctx *c = ctx;
    if (node->src[first_cache].dtype == VT_Q8_0 || node->src[first_cache + 1].dtype == VT_Q8_0) {
        c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "%s: handed a q8_0 cache, which ABI 1.0 does not have", op);
        return VT_ERR_INVALID;
    }
    return run(ctx, node);
}
static vt_status abi10_attention(void *ctx, const vt_node *node) {
    return cache_op(ctx, node, 1, fwd_attention, "attention");
}
static vt_status abi10_store(void *ctx, const vt_node *node) {
    return cache_op(ctx, node, 2, fwd_reshape_and_cache, "reshape_and_cache");
}

FWD_BACKEND("test plugin: built as ABI 1.0, accepts any cache dtype the reference does")
