/* bad_no_name.c — the table's name is empty. */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "", stub_init, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
