/* isa_old_minor.c — a plugin that says it was built at ABI 1.2 while its
 * table is long enough to cover 1.3's isa field, and that field is set: a
 * runtime must not read a field newer than the plugin's minor (whatever
 * bytes a 1.2 table holds there are not an isa function), so it reports
 * nothing (tests/test_registry.c). */
#include "plugin_stubs.h"

static const char *isa_never_read(void *ctx) {
    (void)ctx;
    return "must not be read";
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = 2,
    .struct_size = sizeof(vt_backend),
    .name = "isa_old_minor",
    .description = "test plugin: ABI 1.2 with bytes where 1.3's isa lies",
    .init = stub_init,
    .shutdown = stub_shutdown,
    .supports = stub_supports,
    .rms_norm = stub_rms_norm,
    .isa = isa_never_read,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
