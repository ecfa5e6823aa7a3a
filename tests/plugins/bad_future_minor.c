/* bad_future_minor.c — built against a newer ABI minor (99, past any this
 * runtime will reach) than the runtime speaks: its table may have fields
 * the runtime would ignore, so it is refused. */
#include "plugin_stubs.h"

static const vt_backend table = STUB_TABLE(STUB_MAJOR, 99, STUB_SIZE, "bad_future_minor", stub_init, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
