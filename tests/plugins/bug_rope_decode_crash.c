/* bug_rope_decode_crash.c — test backend whose rope crashes (SIGSEGV) on
 * every decode node and is right everywhere else: every op runs on the
 * reference (forward_to_reference.h), with the reference's supports().
 *
 * A crash cannot be caught in the process that crashed; `vt backends --test`
 * runs each op family in a child process, so it must report each decode rope
 * case as a FAIL naming the signal, and still run and pass every other case
 * (tests/test_backends_test.c). */
#include <signal.h>

#define PLUGIN_NAME "bug_rope_decode_crash"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_ROPE crashing_rope
#include "forward_to_reference.h"

static vt_status crashing_rope(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, "rope");
    if (st != VT_OK) return st;
    if (node->phase == VT_PHASE_DECODE) raise(SIGSEGV); /* what a wild pointer would do */
    return c->ref->rope(c->ref_ctx, node);
}

FWD_BACKEND("test plugin: reference ops, but rope crashes with SIGSEGV in decode")
