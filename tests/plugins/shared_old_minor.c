/* shared_old_minor.c — a plugin that says it was built at ABI 1.6 while its
 * table is long enough to cover 1.7's prepare_flags, and that field asks
 * for shared offers: the runtime must not read a field newer than the
 * plugin's minor, so the table it keeps has no flags, and the plugin is
 * offered only the weights its own nodes alone read, as a 1.6 one
 * (tests/test_registry.c). */
#include "plugin_stubs.h"

static vt_status prepare_nothing(void *ctx, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                                 size_t err_size) {
    (void)ctx, (void)offer, (void)out, (void)err, (void)err_size;
    return VT_OK;
}

static void release_nothing(void *ctx, void *data) { (void)ctx, (void)data; }

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = 6,
    .struct_size = sizeof(vt_backend),
    .name = "shared_old_minor",
    .description = "test plugin: ABI 1.6 with bytes where 1.7's prepare_flags lies",
    .init = stub_init,
    .shutdown = stub_shutdown,
    .supports = stub_supports,
    .rms_norm = stub_rms_norm,
    .prepare_weight = prepare_nothing,
    .release_weight = release_nothing,
    .prepare_flags = VT_PREPARE_SHARED,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
