/* bad_no_shutdown.c — the table has no shutdown. */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "bad_no_shutdown", stub_init, NULL, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
