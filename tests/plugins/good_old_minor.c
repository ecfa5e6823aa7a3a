/* good_old_minor.c — a plugin built against ABI 1.0 whose table ends exactly
 * where the 1.0 table ends (struct_size = VT_BACKEND_SIZE_1_0): it must keep
 * loading when later minors append fields. It has a probe that says yes. */
#include <stdio.h>

#include "plugin_stubs.h"

VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    snprintf(reason, reason_size, "runs anywhere");
    return 1;
}

static const vt_backend table = STUB_TABLE(STUB_MAJOR, 0, (uint32_t)VT_BACKEND_SIZE_1_0, "good_old_minor", stub_init, stub_shutdown, stub_supports);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
