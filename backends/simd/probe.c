/* probe.c — can this machine run the simd backend? Built WITHOUT AVX flags:
 * the runtime calls vt_backend_probe before any other code of the library
 * runs, and it must not fault on a CPU (or a VM) lacking what the kernels use.
 *
 * Needs: AVX2 and FMA and F16C in cpuid, and the OS saving the YMM registers
 * on context switch (OSXSAVE set and XCR0 bits 1 (SSE) and 2 (AVX) enabled);
 * a hypervisor can expose AVX2 in cpuid while its OS leaves YMM state off. */
#include <cpuid.h>
#include <stdio.h>

#include "simd.h"

/* XCR0, read with xgetbv; only valid once OSXSAVE is known to be set. */
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static int refuse(char *reason, size_t reason_size, const char *why) {
    if (reason && reason_size) snprintf(reason, reason_size, "%s", why);
    return 0;
}

VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return refuse(reason, reason_size, "cpuid leaf 1 unavailable");
    const int has_fma = (ecx >> 12) & 1;
    const int has_osxsave = (ecx >> 27) & 1;
    const int has_avx = (ecx >> 28) & 1;
    const int has_f16c = (ecx >> 29) & 1;
    if (!has_avx) return refuse(reason, reason_size, "CPU lacks AVX");
    if (!has_fma) return refuse(reason, reason_size, "CPU lacks FMA");
    if (!has_f16c) return refuse(reason, reason_size, "CPU lacks F16C");
    if (!has_osxsave) return refuse(reason, reason_size, "OS has not enabled XSAVE (OSXSAVE clear)");
    if ((read_xcr0() & 0x6) != 0x6)
        return refuse(reason, reason_size, "OS does not save YMM state (XCR0 bits 1,2 clear)");
    if (__get_cpuid_max(0, NULL) < 7) return refuse(reason, reason_size, "cpuid leaf 7 unavailable");
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    if (!((ebx >> 5) & 1)) return refuse(reason, reason_size, "CPU lacks AVX2");
    if (reason && reason_size) snprintf(reason, reason_size, "AVX2+FMA+F16C available");
    /* Above the reference backend's score: this backend is the fast path. */
    return 100;
}
