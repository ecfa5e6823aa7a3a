/* isa_reports.c — a current-minor plugin that says what it runs at (ABI
 * 1.3's isa), over two lines: the registry must hand it on as one
 * printable line; and lists its tiers (1.6) with entries that are not one
 * key=value word among them, which the registry drops
 * (tests/test_registry.c). */
#include "plugin_stubs.h"

static const char *isa_two_lines(void *ctx) {
    (void)ctx;
    return "test-isa\nsecond line";
}

static const char *const *tiers_some_bad(void *ctx) {
    (void)ctx;
    static const char *const tiers[] = {"isa=fast", "two words=x", "", "noequals", "isa=slow", NULL};
    return tiers;
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = "isa_reports",
    .description = "test plugin: reports its instruction set",
    .init = stub_init,
    .shutdown = stub_shutdown,
    .supports = stub_supports,
    .rms_norm = stub_rms_norm,
    .isa = isa_two_lines,
    .tiers = tiers_some_bad,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
