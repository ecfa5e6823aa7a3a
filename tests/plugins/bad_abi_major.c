/* bad_abi_major.c — built against an incompatible ABI major (2). */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(2, STUB_MINOR, STUB_SIZE, "bad_abi_major", stub_init, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
