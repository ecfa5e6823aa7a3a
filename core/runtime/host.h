/* host.h — the vt_host table handed to backends: logging, allocation (with
 * test-time failure injection), the thread pool, dtype conversion. */
#ifndef VT_CORE_HOST_H
#define VT_CORE_HOST_H

#include "threadpool.h"
#include "vt/vt_backend.h"

/* The host table for a pool. One process-wide pool is current at a time
 * (backends call parallel_for through a plain function pointer). */
const vt_host *vt_host_get(vt_threadpool *pool);
/* Before destroying `pool`: if it is the current pool, none is current any
 * more (parallel_for then runs on the caller), so the table never points at
 * a freed pool. */
void vt_host_release_pool(vt_threadpool *pool);

/* Failure injection for tests: the n-th host alloc from now (1 = next) returns
 * NULL; 0 disables. Also VT_FAIL_ALLOC_AT=n in the environment. */
void vt_host_fail_alloc_after(long n);

/* Log level threshold for host->log and the core (default WARN; VT_LOG=debug|info|warn|error). */
void vt_log_set_level(int level);
int vt_log_get_level(void);
void vt_log(int level, const char *who, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
