/* auto_failing.c — a backend that accepts every node the reference does and
 * then fails every matmul with VT_ERR_INTERNAL: --backend auto must leave it
 * out with a warning naming it, and the engine still start. */
#define PLUGIN_NAME "auto_failing"
#include "kv_forward.h"

static int plugin_supports(void *ctx, const vt_node *node) { return fwd_reference_supports(ctx, node); }

static vt_status failing_matmul(void *ctx, const vt_node *node) {
    if (!node) return fwd_matmul(ctx, node); /* never: keeps the shared forwarder used */
    return VT_ERR_INTERNAL;
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = PLUGIN_NAME,
    .description = "test plugin: accepts what the reference does, fails every matmul",
    .init = fwd_init,
    .shutdown = fwd_shutdown,
    .supports = plugin_supports,
    .matmul = failing_matmul,
    .attention = fwd_attention,
    .reshape_and_cache = fwd_reshape_and_cache,
    .rms_norm = fwd_rms_norm,
    .rope = fwd_rope,
    .swiglu = fwd_swiglu,
    .add = fwd_add,
    .get_rows = fwd_get_rows,
    .convert = fwd_convert,
};
VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
