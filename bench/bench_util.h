/* bench_util.h — the clocks, the median's comparator and the fixed-seed data
 * the kernel benchmarks (simd_matmul_bench, simd_attention_bench,
 * onednn_matmul_bench) share, so their figures are taken the same way. */
#ifndef VT_BENCH_UTIL_H
#define VT_BENCH_UTIL_H

#include <stdint.h>
#include <time.h>

#include "clock.h"

static inline double now_s(void) { return vt_now_seconds(); }

/* CPU seconds of the whole process, every thread: on a machine shared with
 * other jobs it shows what the kernels cost when they do run (wall time
 * includes waiting for a core; spin-waiting threads count too). */
static inline double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Uniform in [-1, 1) from a fixed-seed LCG: same data every run. */
static inline float next_uniform(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

#endif
