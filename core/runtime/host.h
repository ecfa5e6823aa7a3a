/* host.h — the vt_host table handed to backends: logging, allocation (with
 * test-time failure injection), the thread pool, dtype conversion. */
#ifndef VT_CORE_HOST_H
#define VT_CORE_HOST_H

#include <stdbool.h>

#include "threadpool.h"
#include "vt/vt_backend.h"

/* Every engine runs its backends' ops on its own pool, whichever thread
 * drives it: its host table carries the pool (runtime_ctx), and backends of
 * ABI 1.4 pass the table back to parallel_for_on. Plugins built
 * before 1.4 call the context-free parallel_for, which runs on the calling
 * thread's current pool: each engine makes its pool current on every eval
 * and step (vt_host_use), so they too run on the engine's own pool as long
 * as they call it from the thread the runtime called them on. */

/* Fill `table` (owned by the caller, e.g. an engine, for as long as its
 * backends live) for `pool`: n_threads and parallel_for_on are the pool's.
 * Makes pool current. */
void vt_host_init(vt_host *table, vt_threadpool *pool);
/* Make pool the calling thread's current pool (NULL: run on the caller). */
void vt_host_use(vt_threadpool *pool);
/* A process-wide table for callers that use one pool from one thread
 * (tools, tests); makes pool current on the calling thread. */
const vt_host *vt_host_get(vt_threadpool *pool);
/* Before destroying `pool`: if it is this thread's current pool, none is
 * current any more (parallel_for then runs on the caller). */
void vt_host_release_pool(vt_threadpool *pool);

/* Failure injection for tests: the n-th host alloc from now (1 = next) returns
 * NULL; 0 disables. Also VT_FAIL_ALLOC_AT=n in the environment. */
void vt_host_fail_alloc_after(long n);

/* Log level threshold for host->log and the core (default WARN; VT_LOG=debug|info|warn|error). */
void vt_log_set_level(int level);
/* Whether s names a level as VT_LOG takes it (debug, info, warn/warning,
 * error, any case, or 0..3). The library warns of another value and keeps
 * WARN; the vt command refuses it. */
bool vt_log_level_name_ok(const char *s);
int vt_log_get_level(void);
void vt_log(int level, const char *who, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Whether the long steps of opening a model (preparing weights, auto's
 * calibration) draw a progress line on stderr: when a program turned it on
 * (the vt command does) and stderr is a terminal. A program embedding libvt
 * gets no writes to its terminal but through the log. */
void vt_progress_lines_enable(bool on);
bool vt_progress_lines_on(void);

#endif
