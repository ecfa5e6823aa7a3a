/* kv_q8_0_not_opted.c — test backend built at the current ABI minor whose
 * supports() says yes to whatever the reference runs, Q8_0 caches included
 * (as a plugin checking shapes only would), but whose table leaves
 * vt_backend.conventions 0: it never opted into the Q8_0 KV cache. A
 * rebuild must not change what it is offered, so the runtime never hands it
 * a node over a Q8_0 cache (its guarded attention and store would fail):
 * with --kv-cache-dtype q8_0 those nodes run on the fallback. */
#define PLUGIN_NAME "kv_q8_0_not_opted"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_CONVENTIONS 0
#define FWD_ATTENTION guard_attention
#define FWD_RESHAPE_AND_CACHE guard_store
#include "forward_to_reference.h"
#include "q8_0_cache_guard.h"

FWD_BACKEND("test plugin: current minor, accepts any cache the reference does, opted into no widened convention")
