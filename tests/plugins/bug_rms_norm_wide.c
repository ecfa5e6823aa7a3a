/* bug_rms_norm_wide.c — test backend whose rms_norm accepts every output
 * dtype the reference does but always writes f32: into an f16 or bf16 dst it
 * writes twice the bytes the tensor holds (a kernel that skipped the dst
 * dtype). Every other op runs on the reference (forward_to_reference.h).
 *
 * `vt backends --test` must fail those cases saying the op wrote past the
 * end of dst, not crash somewhere later or pass (tests/test_backends_test.c). */
#define PLUGIN_NAME "bug_rms_norm_wide"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_RMS_NORM wide_rms_norm
#include "forward_to_reference.h"

static vt_status wide_rms_norm(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, "rms_norm");
    if (st != VT_OK) return st;
    vt_node wide = *node;
    wide.dst.dtype = VT_F32;
    wide.dst.nb[0] = sizeof(float);
    wide.dst.nb[1] = sizeof(float) * (size_t)wide.dst.ne[0];
    for (int i = 2; i < VT_MAX_DIMS; i++) wide.dst.nb[i] = wide.dst.nb[i - 1] * (size_t)wide.dst.ne[i - 1];
    return c->ref->rms_norm(c->ref_ctx, &wide);
}

FWD_BACKEND("test plugin: reference ops, but rms_norm writes f32 whatever its dst's dtype")
