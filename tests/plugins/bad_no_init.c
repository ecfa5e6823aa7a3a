/* bad_no_init.c — the table has no init. */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "bad_no_init", NULL, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
