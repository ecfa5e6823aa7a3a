/* bad_name_mismatch.c — the table calls itself "impostor", the file says
 * bad_name_mismatch: `--backend impostor` could never find it. */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "impostor", stub_init, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
