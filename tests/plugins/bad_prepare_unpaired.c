/* bad_prepare_unpaired.c — a 1.2 plugin with prepare_weight but no
 * release_weight: the runtime could never give its copies back, so it is
 * refused at load. */
#include "plugin_stubs.h"

static vt_status unpaired_prepare(void *ctx, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                                  size_t err_size) {
    (void)ctx, (void)offer, (void)out, (void)err, (void)err_size;
    return VT_OK;
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = "bad_prepare_unpaired",
    .description = "test plugin",
    .init = stub_init,
    .shutdown = stub_shutdown,
    .supports = stub_supports,
    .rms_norm = stub_rms_norm,
    .prepare_weight = unpaired_prepare,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
