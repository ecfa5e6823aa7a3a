/* membw.h — the machine's memory read bandwidth, measured in the same run as
 * a benchmark, so "tokens/s as a fraction of the bandwidth limit" compares
 * numbers taken under the same conditions (threads, load, frequency).
 *
 * Method: a dot product of two buffers of bytes_each bytes (256 MiB each by
 * default, far beyond any cache), spread over the pool's threads in
 * contiguous chunks, written with independent vector accumulators so it is
 * limited by memory, not by FP latency. One untimed pass faults the pages
 * in; the result is the median of `reps` timed passes. */
#ifndef VT_CORE_MEMBW_H
#define VT_CORE_MEMBW_H

#include <stddef.h>

#include "error.h"
#include "threadpool.h"

#define VT_MEMBW_DEFAULT_BYTES ((size_t)256 << 20)
#define VT_MEMBW_DEFAULT_REPS 5

/* *gb_s = 2 * bytes_each / median pass time, in 1e9 bytes per second.
 * bytes_each >= 64 KiB, reps >= 1. */
vt_status vt_membw_measure(vt_threadpool *pool, size_t bytes_each, int reps, double *gb_s, vt_error *err);

#endif
