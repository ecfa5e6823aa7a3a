/* tiers_old_minor.c — a plugin that says it was built at ABI 1.5 while its
 * table is long enough to cover 1.6's tiers field, and that field is set:
 * the runtime must not read a field newer than the plugin's minor, so it
 * lists no tiers, and the plugin loads and runs as a 1.5 one
 * (tests/test_registry.c). */
#include "plugin_stubs.h"

static const char *const *tiers_never_read(void *ctx) {
    (void)ctx;
    static const char *const tiers[] = {"isa=never", "isa=read", NULL};
    return tiers;
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = 5,
    .struct_size = sizeof(vt_backend),
    .name = "tiers_old_minor",
    .description = "test plugin: ABI 1.5 with bytes where 1.6's tiers lies",
    .init = stub_init,
    .shutdown = stub_shutdown,
    .supports = stub_supports,
    .rms_norm = stub_rms_norm,
    .tiers = tiers_never_read,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
