/* options_probe.c — a backend that shows which options reached its init: it
 * refuses to start when its options contain "refuse=1", and says what it got.
 * The vt serve tests use it to prove --backend-option travels from serve's
 * command line to the engine (no shipped backend rejects an option by name
 * except onednn, which is optional). It runs nothing: every node falls back. */
#include <stdio.h>
#include <string.h>

#include "vt/vt_backend.h"

static int probe_ctx;

static vt_status probe_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                            size_t err_size) {
    (void)host;
    const char *options = config && config->options ? config->options : "";
    if (strstr(options, "refuse=1")) {
        snprintf(err, err_size, "options_probe: refusing as asked by its options '%s'", options);
        return VT_ERR_INVALID;
    }
    *ctx = &probe_ctx;
    return VT_OK;
}

static void probe_shutdown(void *ctx) { (void)ctx; }

static int probe_supports(void *ctx, const vt_node *node) {
    (void)ctx;
    (void)node;
    return 0;
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = "options_probe",
    .description = "test plugin: refuses to start when its options say refuse=1",
    .init = probe_init,
    .shutdown = probe_shutdown,
    .supports = probe_supports,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
