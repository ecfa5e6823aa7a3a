/* bad_null_table.c — vt_backend_entry returns NULL. */
#include "plugin_stubs.h"

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return NULL; }
