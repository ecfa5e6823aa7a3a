/* vt_cpu.h — what the x86-64 CPU and OS offer to vector kernels, header-only
 * so backends (which see only include/vt/) and the runtime ask one way.
 *
 * A feature counts only when the OS also saves its register state: a
 * hypervisor can report AVX2 in cpuid while its guest OS leaves the YMM state
 * off (OSXSAVE clear, or XCR0 bits 1 and 2 not both set), and AVX code then
 * faults. cpuid rather than __builtin_cpu_supports, which lacks "f16c" in
 * clang 14. Safe to call from code built without any -m flags. */
#ifndef VT_CPU_H
#define VT_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vt_cpu_features {
    bool avx, fma, f16c, avx2; /* each also requires the OS to save YMM state */
    bool os_saves_ymm;
    const char *missing; /* first reason the AVX2 set is unusable, or NULL */
} vt_cpu_features;

static inline vt_cpu_features vt_cpu_detect(void) {
    vt_cpu_features f = {false, false, false, false, false, NULL};
#if defined(__x86_64__) || defined(__i386__)
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) {
        f.missing = "cpuid leaf 1 unavailable";
        return f;
    }
    const bool avx = (c >> 28) & 1, fma = (c >> 12) & 1, f16c = (c >> 29) & 1, osxsave = (c >> 27) & 1;
    if (osxsave) {
        unsigned int lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0)); /* XCR0; valid once OSXSAVE is set */
        (void)hi;
        f.os_saves_ymm = (lo & 6u) == 6u;
    }
    bool avx2 = false;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        avx2 = (b >> 5) & 1;
    }
    f.avx = avx && f.os_saves_ymm;
    f.fma = fma && f.os_saves_ymm;
    f.f16c = f16c && f.os_saves_ymm;
    f.avx2 = avx2 && f.os_saves_ymm;
    if (!avx) f.missing = "CPU lacks AVX";
    else if (!fma) f.missing = "CPU lacks FMA";
    else if (!f16c) f.missing = "CPU lacks F16C";
    else if (!osxsave) f.missing = "OS has not enabled XSAVE (OSXSAVE clear)";
    else if (!f.os_saves_ymm) f.missing = "OS does not save YMM state (XCR0 bits 1,2 clear)";
    else if (!avx2) f.missing = "CPU lacks AVX2";
#else
    f.missing = "not an x86 CPU";
#endif
    return f;
}

/* AVX2, FMA and F16C all usable: what vt's simd kernels need. */
static inline bool vt_cpu_has_avx2_fma_f16c(void) {
    vt_cpu_features f = vt_cpu_detect();
    return f.avx2 && f.fma && f.f16c;
}

#ifdef __cplusplus
}
#endif
#endif /* VT_CPU_H */
