/* bad_small_struct.c — claims ABI 1.0 but a struct_size of 40 bytes, less
 * than the 1.0 table: the runtime must not read its op pointers. */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, 40, "bad_small_struct", stub_init, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
