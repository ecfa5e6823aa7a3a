/* kv_widen_store.c — test backend that stores k/v of any float dtype into a
 * cache of any float dtype (widening or narrowing on store, as the reference
 * does) but converts nothing else: convert is declined for every dtype pair.
 *
 * As the fallback of kv_no_convert with an f16 cache it exercises the
 * builder's last resort before refusing: the producers cannot emit f16, no
 * allowed backend converts, kv_no_convert cannot store f32 k/v into an f16
 * cache, so reshape_and_cache must move to this backend, which takes the f32
 * k/v as they are. Every op runs on the reference (forward_to_reference.h). */
#define PLUGIN_NAME "kv_widen_store"
#include "forward_to_reference.h"

static int plugin_supports(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    if (node->op == VT_OP_CONVERT) return 0;
    return fwd_reference_supports(c, node);
}

FWD_BACKEND("test plugin: reference ops; no convert, the store widens/narrows any float k/v")
