/* bug_rope_decode_crash.c — test backend whose rope crashes (SIGSEGV) on
 * every decode node and is right everywhere else: every op runs on the
 * reference (kv_forward.h), with the reference's supports().
 *
 * A crash cannot be caught in the process that crashed; `vt backends --test`
 * runs each op family in a child process, so it must report each decode rope
 * case as a FAIL naming the signal, and still run and pass every other case
 * (tests/test_backends_test.c). */
#include <signal.h>

#define PLUGIN_NAME "bug_rope_decode_crash"
#include "kv_forward.h"

static int plugin_supports(void *ctx, const vt_node *node) { return fwd_reference_supports(ctx, node); }

static vt_status crashing_rope(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, "rope");
    if (st != VT_OK) return st;
    if (node->phase == VT_PHASE_DECODE) raise(SIGSEGV); /* what a wild pointer would do */
    return c->ref->rope(c->ref_ctx, node);
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = PLUGIN_NAME,
    .description = "test plugin: reference ops, but rope crashes with SIGSEGV in decode",
    .init = fwd_init,
    .shutdown = fwd_shutdown,
    .supports = plugin_supports,
    .matmul = fwd_matmul,
    .attention = fwd_attention,
    .reshape_and_cache = fwd_reshape_and_cache,
    .rms_norm = fwd_rms_norm,
    .rope = crashing_rope,
    .swiglu = fwd_swiglu,
    .add = fwd_add,
    .get_rows = fwd_get_rows,
    .convert = fwd_convert,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
