/* bad_unknown_convention.c — a plugin of the current minor whose
 * vt_backend.conventions sets a bit no ABI minor defines: the table is not
 * what its author meant (a stray value, a constant of another project), so
 * it is refused at load rather than offered nodes on a guess. */
#include "plugin_stubs.h"

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = "bad_unknown_convention",
    .description = "test plugin",
    .init = stub_init,
    .shutdown = stub_shutdown,
    .supports = stub_supports,
    .rms_norm = stub_rms_norm,
    .conventions = VT_CONVENTION_KV_Q8_0 | (1ull << 9),
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
