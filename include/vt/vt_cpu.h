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
#include <string.h>

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
    /* Each also requires the OS to save the ZMM and opmask state (XCR0 bits
     * 5-7) beside the YMM state. */
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512_vnni, avx512_bf16, avx512_fp16;
    bool avx_vnni; /* the VEX form: YMM state suffices */
    /* Each also requires XCR0's tile bits (17, 18); Linux further asks a
     * process to request the tile data state (arch_prctl) before its first
     * tile instruction, which this side-effect-free check does not do. */
    bool amx_tile, amx_int8, amx_bf16;
    bool os_saves_zmm, os_saves_tiles;
} vt_cpu_features;

static inline vt_cpu_features vt_cpu_detect(void) {
    vt_cpu_features f;
    memset(&f, 0, sizeof f);
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
        f.os_saves_zmm = f.os_saves_ymm && (lo & 0xe0u) == 0xe0u;
        f.os_saves_tiles = (lo & 0x60000u) == 0x60000u;
    }
    bool avx2 = false;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        const unsigned max_subleaf = a; /* leaf 7's subleaves beyond it are undefined, not zero */
        avx2 = (b >> 5) & 1;
        f.avx512f = ((b >> 16) & 1) && f.os_saves_zmm;
        f.avx512dq = ((b >> 17) & 1) && f.os_saves_zmm;
        f.avx512bw = ((b >> 30) & 1) && f.os_saves_zmm;
        f.avx512vl = ((b >> 31) & 1) && f.os_saves_zmm;
        f.avx512_vnni = ((c >> 11) & 1) && f.os_saves_zmm;
        f.avx512_fp16 = ((d >> 23) & 1) && f.os_saves_zmm;
        f.amx_bf16 = ((d >> 22) & 1) && f.os_saves_tiles;
        f.amx_tile = ((d >> 24) & 1) && f.os_saves_tiles;
        f.amx_int8 = ((d >> 25) & 1) && f.os_saves_tiles;
        if (max_subleaf >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            f.avx_vnni = ((a >> 4) & 1) && f.os_saves_ymm;
            f.avx512_bf16 = ((a >> 5) & 1) && f.os_saves_zmm;
        }
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

/* The vector extensions usable here, by their /proc/cpuinfo names, in
 * order of arrival ("avx2 avx512f ... amx_int8"), into buf. */
static inline const char *vt_cpu_isa_list(const vt_cpu_features *f, char *buf, size_t size) {
    const struct {
        bool on;
        const char *name;
    } isa[] = {{f->avx2 && f->fma && f->f16c, "avx2"}, {f->avx_vnni, "avx_vnni"}, {f->avx512f, "avx512f"},
               {f->avx512dq, "avx512dq"}, {f->avx512bw, "avx512bw"}, {f->avx512vl, "avx512vl"},
               {f->avx512_vnni, "avx512_vnni"}, {f->avx512_bf16, "avx512_bf16"}, {f->avx512_fp16, "avx512_fp16"},
               {f->amx_tile, "amx_tile"}, {f->amx_int8, "amx_int8"}, {f->amx_bf16, "amx_bf16"}};
    size_t used = 0;
    if (size) buf[0] = '\0';
    for (size_t i = 0; i < sizeof isa / sizeof *isa; i++) {
        if (!isa[i].on || used >= size) continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? " " : "", isa[i].name);
        if (n > 0) used += (size_t)n;
    }
    if (size && !buf[0]) snprintf(buf, size, "none of avx2..amx");
    return buf;
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
