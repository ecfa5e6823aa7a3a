/* good_scored.c — a backend with no ops whose probe score comes from the
 * environment (VT_TEST_PROBE_SCORE, default 1), so a test can rank it above
 * or below the in-tree backends and watch the default backend follow the
 * score. Every node it is preferred for runs on the fallback. */
#include <stdio.h>
#include <stdlib.h>

#include "vt/vt_backend.h"

static vt_status scored_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                             size_t err_size) {
    (void)host, (void)config, (void)err, (void)err_size;
    *ctx = NULL;
    return VT_OK;
}

static void scored_shutdown(void *ctx) { (void)ctx; }

static int scored_supports(void *ctx, const vt_node *node) {
    (void)ctx, (void)node;
    return 0;
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = "good_scored",
    .description = "test plugin: no ops; probe score from VT_TEST_PROBE_SCORE",
    .init = scored_init,
    .shutdown = scored_shutdown,
    .supports = scored_supports,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }

VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    const char *s = getenv("VT_TEST_PROBE_SCORE");
    if (reason && reason_size) snprintf(reason, reason_size, "score from VT_TEST_PROBE_SCORE");
    return s && *s ? atoi(s) : 1;
}
