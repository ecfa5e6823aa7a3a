/* threadpool.c — the runtime's worker threads and parallel_for.
 *
 * One job runs at a time. A job is published through a single 64-bit atomic
 * word, `state` = generation (32 bits) | chunk count (16) | next chunk (16).
 * Every thread (the caller included) claims chunks with a compare-and-swap on
 * that word, so a claim succeeds only while the word still names the job the
 * thread woke up for: a worker that lags behind can never take a chunk of a
 * later job with the parameters of an earlier one. The job's plain fields (fn,
 * arg, n) are written before the word is published (release) and are not
 * rewritten until every chunk has reported done, so readers never race.
 *
 * Decode issues hundreds of tiny parallel_for calls per token, so idle workers
 * spin on the word for a short while (SPIN_NS) before sleeping on a condition
 * variable; the caller pays a mutex + broadcast only when someone sleeps. */
#include "threadpool.h"

#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long an idle worker polls for the next job before it sleeps. Long enough
 * to bridge the gap between two ops of one decode step, short enough not to
 * burn a core between requests. */
#define SPIN_NS 100000L

/* Chunk counts live in 16 bits of the state word. */
#define MAX_THREADS 1024

#define STATE_GEN(s) ((uint32_t)((s) >> 32))
#define STATE_COUNT(s) ((uint32_t)(((s) >> 16) & 0xffffu))
#define STATE_NEXT(s) ((uint32_t)((s)&0xffffu))
#define STATE_MAKE(gen, count) (((uint64_t)(gen) << 32) | ((uint64_t)(count) << 16))

typedef struct worker {
    struct vt_threadpool *pool;
    int index; /* 1..n_threads-1; the caller is thread 0 */
    pthread_t thread;
} worker;

struct vt_threadpool {
    int n_threads;
    worker *workers; /* n_threads - 1 */
    int n_started;   /* workers successfully created */

    _Atomic uint64_t state;   /* see the file comment */
    atomic_uint chunks_done;  /* chunks of the current job finished */
    atomic_int n_sleeping;    /* workers blocked (or about to block) on wake */
    atomic_bool stopping;
    atomic_bool in_use;       /* a parallel_for is running (not reentrant) */

    /* The current job; written only by the caller between jobs. */
    vt_range_fn fn;
    void *arg;
    int64_t n;

    pthread_mutex_t lock;
    pthread_cond_t wake;
};

/* The pool thread index of the running thread (0 outside workers), so a
 * nested call can run inline under the right index. */
static _Thread_local int current_thread_index;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Bounds of chunk i of `count` near-equal contiguous chunks of [0, n). */
static void chunk_bounds(int64_t n, uint32_t count, uint32_t i, int64_t *begin, int64_t *end) {
    int64_t base = n / count, extra = n % count;
    *begin = (int64_t)i * base + ((int64_t)i < extra ? (int64_t)i : extra);
    *end = *begin + base + ((int64_t)i < extra ? 1 : 0);
}

/* Claim and run chunks of generation `gen` until none is left. */
static void run_chunks(vt_threadpool *p, uint32_t gen, int thread) {
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    for (;;) {
        if (STATE_GEN(s) != gen || STATE_NEXT(s) >= STATE_COUNT(s)) return;
        if (!atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* s was reloaded */
        int64_t begin, end;
        chunk_bounds(p->n, STATE_COUNT(s), STATE_NEXT(s), &begin, &end);
        p->fn(p->arg, begin, end, thread);
        atomic_fetch_add_explicit(&p->chunks_done, 1, memory_order_release);
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
}

/* Block until the generation differs from `seen`; returns the new state. */
static uint64_t wait_for_job(vt_threadpool *p, uint32_t seen) {
    uint64_t s;
    int64_t deadline = 0;
    for (unsigned spin = 0;; spin++) {
        s = atomic_load_explicit(&p->state, memory_order_acquire);
        if (STATE_GEN(s) != seen) return s;
        CPU_RELAX();
        if ((spin & 63) != 0) continue;
        int64_t t = now_ns();
        if (deadline == 0) deadline = t + SPIN_NS;
        else if (t >= deadline) break;
    }
    pthread_mutex_lock(&p->lock);
    /* seq_cst pairs with the caller's publish-then-check in parallel_for:
     * either the caller sees us sleeping and broadcasts, or we see its job. */
    atomic_fetch_add_explicit(&p->n_sleeping, 1, memory_order_seq_cst);
    while (STATE_GEN(s = atomic_load_explicit(&p->state, memory_order_seq_cst)) == seen)
        pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub_explicit(&p->n_sleeping, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&p->lock);
    return s;
}

static void *worker_main(void *opaque) {
    worker *w = opaque;
    vt_threadpool *p = w->pool;
    current_thread_index = w->index;
    uint32_t seen = 0;
    for (;;) {
        uint64_t s = wait_for_job(p, seen);
        if (atomic_load_explicit(&p->stopping, memory_order_acquire)) break;
        seen = STATE_GEN(s);
        run_chunks(p, seen, w->index);
    }
    return NULL;
}

/* Publish a new state word and wake sleepers (if any). */
static void publish(vt_threadpool *p, uint64_t s) {
    atomic_store_explicit(&p->state, s, memory_order_seq_cst);
    if (atomic_load_explicit(&p->n_sleeping, memory_order_seq_cst) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
}

vt_status vt_threadpool_create(int n_threads, vt_threadpool **out, vt_error *err) {
    *out = NULL;
    if (n_threads < 1 || n_threads > MAX_THREADS)
        return vt_fail(err, VT_ERR_INVALID, "thread pool: n_threads %d is outside 1..%d", n_threads, MAX_THREADS);
    vt_threadpool *p = calloc(1, sizeof *p);
    if (!p) return vt_fail(err, VT_ERR_NOMEM, "thread pool: out of memory");
    p->n_threads = n_threads;
    atomic_init(&p->state, 0);
    atomic_init(&p->chunks_done, 0);
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->stopping, false);
    atomic_init(&p->in_use, false);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            vt_threadpool_destroy(p);
            return vt_fail(err, VT_ERR_NOMEM, "thread pool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            p->workers[i].pool = p;
            p->workers[i].index = i + 1;
            int rc = pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
            if (rc != 0) {
                vt_threadpool_destroy(p);
                return vt_fail(err, VT_ERR_NOMEM, "thread pool: cannot start worker %d of %d (error %d)", i + 1,
                               n_threads - 1, rc);
            }
            p->n_started++;
        }
    }
    *out = p;
    return VT_OK;
}

void vt_threadpool_destroy(vt_threadpool *p) {
    if (!p) return;
    if (p->n_started > 0) {
        atomic_store_explicit(&p->stopping, true, memory_order_seq_cst);
        uint64_t s = atomic_load_explicit(&p->state, memory_order_relaxed);
        publish(p, STATE_MAKE(STATE_GEN(s) + 1, 0));
        for (int i = 0; i < p->n_started; i++) pthread_join(p->workers[i].thread, NULL);
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    free(p->workers);
    free(p);
}

int vt_threadpool_n_threads(const vt_threadpool *p) { return p ? p->n_threads : 1; }

void vt_threadpool_parallel_for(vt_threadpool *p, int64_t n, int64_t grain, vt_range_fn fn, void *arg) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    /* Small ranges (and a one-thread pool) are not worth a hand-off. */
    if (!p || p->n_threads == 1 || n < 2 * grain) {
        fn(arg, 0, n, 0);
        return;
    }
    int64_t max_chunks = n / grain; /* every chunk keeps at least `grain` items */
    uint32_t count = (uint32_t)(max_chunks < p->n_threads ? max_chunks : p->n_threads);

    bool was_in_use = atomic_exchange_explicit(&p->in_use, true, memory_order_acquire);
    if (was_in_use) {
        /* A call from inside a task (or from a second thread) breaks the
         * one-job-at-a-time contract: a bug, loud in debug builds; release
         * builds run it inline, leaving the job in flight alone. Inline on a
         * second thread it runs under that thread's index (0 outside the
         * pool), which the caller in flight may be using too: per-thread
         * scratch indexed by it is then shared. */
        assert(!"vt_threadpool_parallel_for is not reentrant");
        fn(arg, 0, n, current_thread_index);
        return;
    }

    p->fn = fn;
    p->arg = arg;
    p->n = n;
    atomic_store_explicit(&p->chunks_done, 0, memory_order_relaxed);
    uint32_t gen = STATE_GEN(atomic_load_explicit(&p->state, memory_order_relaxed)) + 1;
    publish(p, STATE_MAKE(gen, count));

    run_chunks(p, gen, 0);
    /* Chunks claimed by workers may still be running. */
    for (unsigned spin = 0; atomic_load_explicit(&p->chunks_done, memory_order_acquire) < count; spin++) {
        CPU_RELAX();
        if ((spin & 1023) == 1023) sched_yield(); /* a worker may have been preempted */
    }
    atomic_store_explicit(&p->in_use, false, memory_order_release);
}
