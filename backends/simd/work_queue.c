/* work_queue.c — simd_dynamic_for: items handed out in chunks from a shared
 * counter instead of one fixed range per thread.
 *
 * host->parallel_for gives each thread one contiguous share up front. When
 * the shares' costs differ (causal attention: later tokens see more
 * positions) or a thread is slowed down (the machine is shared; a worker
 * preempted mid-op), the others wait at the end of the op. Here every
 * thread claims the next chunk when it is done with its last, so the work
 * ends within about one chunk on every thread. Chunks are claimed in
 * order, so each thread still walks memory forwards. */
#include <stdatomic.h>

#include "simd.h"

typedef struct work_queue {
    _Atomic int64_t next; /* first item not yet claimed */
    int64_t n, chunk;
    vt_range_fn fn;
    void *arg;
} work_queue;

static void drain(void *opaque, int64_t begin, int64_t end, int thread) {
    (void)begin, (void)end;
    work_queue *q = opaque;
    for (;;) {
        const int64_t b = atomic_fetch_add_explicit(&q->next, q->chunk, memory_order_relaxed);
        if (b >= q->n) return;
        q->fn(q->arg, b, b + q->chunk < q->n ? b + q->chunk : q->n, thread);
    }
}

void simd_dynamic_for(simd_ctx *ctx, int64_t n, int64_t chunk, vt_range_fn fn, void *arg) {
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
    if (ctx->n_threads <= 1 || n <= chunk) {
        fn(arg, 0, n, 0);
        return;
    }
    work_queue q = {.n = n, .chunk = chunk, .fn = fn, .arg = arg};
    atomic_init(&q.next, 0);
    vt_host_parallel_for(ctx->host, ctx->n_threads, 1, drain, &q);
}
