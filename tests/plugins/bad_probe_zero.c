/* bad_probe_zero.c — the probe says this CPU cannot run the backend. Like a
 * backend built for instructions the CPU lacks, nothing else of it may run:
 * its entry aborts, so a runtime that calls it after a zero probe crashes. */
#include <stdio.h>
#include <stdlib.h>

#include "plugin_stubs.h"

VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    snprintf(reason, reason_size, "needs the imaginary XYZ-512 instructions");
    return 0;
}

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { abort(); }
