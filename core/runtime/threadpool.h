/* threadpool.h — the runtime's one pool of worker threads.
 *
 * parallel_for splits [0, n) into contiguous chunks (at least `grain` items,
 * about one per thread) and runs them on the pool, the caller taking part;
 * it returns when all chunks are done. Workers spin briefly then sleep, so a
 * decode step's many small ops do not pay a futex wake each. */
#ifndef VT_CORE_THREADPOOL_H
#define VT_CORE_THREADPOOL_H

#include <stdint.h>

#include "error.h"
#include "vt/vt_backend.h"

typedef struct vt_threadpool vt_threadpool;

/* n_threads >= 1 (1 = no worker threads; the caller does everything). */
vt_status vt_threadpool_create(int n_threads, vt_threadpool **out, vt_error *err);
void vt_threadpool_destroy(vt_threadpool *p);
int vt_threadpool_n_threads(const vt_threadpool *p);
void vt_threadpool_parallel_for(vt_threadpool *p, int64_t n, int64_t grain, vt_range_fn fn, void *arg);

#endif
