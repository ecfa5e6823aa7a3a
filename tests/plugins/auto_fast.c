/* auto_fast.c — a third-party backend for the --backend auto tests: it
 * accepts and runs everything the reference does (through kv_forward.h), so
 * calibration times it like any backend, and a test that records it as the
 * fastest on one shape class can check it gets exactly those nodes. */
#define PLUGIN_NAME "auto_fast"
#include "kv_forward.h"

static int plugin_supports(void *ctx, const vt_node *node) { return fwd_reference_supports(ctx, node); }

FWD_BACKEND("test plugin: the reference's ops under another name (--backend auto tests)", fwd_reshape_and_cache)
