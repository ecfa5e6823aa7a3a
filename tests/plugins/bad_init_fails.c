/* bad_init_fails.c — init fails (as a GPU backend on a machine without the
 * device would). The runtime must not call shutdown after a failed init. */
#include <stdio.h>
#include <stdlib.h>

#include "plugin_stubs.h"

static vt_status failing_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                              size_t err_size) {
    (void)host, (void)config;
    *ctx = NULL;
    snprintf(err, err_size, "no device found");
    return VT_ERR_BACKEND;
}

/* Reached only if the runtime shuts down a backend whose init failed. */
static void must_not_run_shutdown(void *ctx) {
    (void)ctx;
    abort();
}

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "bad_init_fails", failing_init, must_not_run_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
