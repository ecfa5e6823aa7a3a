/* clock.h — seconds on the monotonic clock, for timing steps, progress lines
 * and time limits (never the wall clock, which can jump). */
#ifndef VT_CORE_CLOCK_H
#define VT_CORE_CLOCK_H

#include <time.h>

static inline double vt_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
