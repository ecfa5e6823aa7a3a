/* bad_no_supports.c — the table has no supports. */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "bad_no_supports", stub_init, stub_shutdown, NULL);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
