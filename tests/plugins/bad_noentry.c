/* bad_noentry.c — a shared object that exports no vt_backend_entry (a typo). */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "bad_noentry", stub_init, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry_v1(void) { return &table; }
