/* probe.c — can this machine run the simd backend? Built WITHOUT AVX flags:
 * the runtime calls vt_backend_probe before any other code of the library
 * runs, and it must not fault on a CPU (or a VM) lacking what the kernels use.
 *
 * Needs: AVX2 and FMA and F16C in cpuid, and the OS saving the YMM registers
 * on context switch (OSXSAVE set and XCR0 bits 1 (SSE) and 2 (AVX) enabled);
 * a hypervisor can expose AVX2 in cpuid while its OS leaves YMM state off. */
#include <stdio.h>

#include "simd.h"
#include "vt/vt_cpu.h"

VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    const vt_cpu_features f = vt_cpu_detect();
    if (f.missing) {
        if (reason && reason_size) snprintf(reason, reason_size, "%s", f.missing);
        return 0;
    }
    if (reason && reason_size) snprintf(reason, reason_size, "AVX2+FMA+F16C available");
    /* The highest in-tree score (onednn 50, reference 10): the default backend. */
    return 100;
}
