/* q8_0_cache_guard.h — attention and store ops for a forward_to_reference
 * plugin that must never be handed a Q8_0 KV cache: each fails, logging
 * why, if it is (what a plugin that never agreed to read one would
 * misread), and forwards to the reference otherwise. Include after
 * forward_to_reference.h, with FWD_ATTENTION guard_attention and
 * FWD_RESHAPE_AND_CACHE guard_store defined before it. */
#ifndef VT_TEST_Q8_0_CACHE_GUARD_H
#define VT_TEST_Q8_0_CACHE_GUARD_H

static vt_status guard_cache_op(void *ctx, const vt_node *node, int first_cache, vt_op_fn run, const char *op) {
    const fwd_ctx *c = ctx;
    if (node->src[first_cache].dtype == VT_Q8_0 || node->src[first_cache + 1].dtype == VT_Q8_0) {
        c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "%s: handed a q8_0 cache, which it never agreed to read", op);
        return VT_ERR_INVALID;
    }
    return run(ctx, node);
}
static vt_status guard_attention(void *ctx, const vt_node *node) {
    return guard_cache_op(ctx, node, 1, fwd_attention, "attention");
}
static vt_status guard_store(void *ctx, const vt_node *node) {
    return guard_cache_op(ctx, node, 2, fwd_reshape_and_cache, "reshape_and_cache");
}

#endif
