/* test_threadpool.c — parallel_for covers every item exactly once, in chunks
 * that respect the grain, with the caller taking part, across many tiny calls
 * and after workers fell asleep. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "threadpool.h"
#include "util.h"

/* ------------------------------------------------------------------------ */
/* Coverage: every item visited once, thread ids in range.                    */

typedef struct cover_job {
    int n_threads;
    unsigned char *visits; /* [n] */
    atomic_int bad_thread;
    atomic_int threads_seen; /* bit per thread id (< 32) */
} cover_job;

static void cover(void *arg, int64_t begin, int64_t end, int thread) {
    cover_job *job = arg;
    if (thread < 0 || thread >= job->n_threads) atomic_store(&job->bad_thread, 1);
    else if (thread < 32) atomic_fetch_or(&job->threads_seen, 1 << thread);
    for (int64_t i = begin; i < end; i++) job->visits[i]++; /* chunks are disjoint: no race */
}

static void check_coverage_on(vt_threadpool *pool, int64_t n, int64_t grain) {
    int n_threads = vt_threadpool_n_threads(pool);
    cover_job job = {.n_threads = n_threads, .visits = calloc((size_t)n + 1, 1)};
    vt_threadpool_parallel_for(pool, n, grain, cover, &job);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++) wrong += job.visits[i] != 1;
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(job.visits[n], 0); /* nothing past the end */
    CU_ASSERT_EQUAL(atomic_load(&job.bad_thread), 0);
    /* Which threads ran chunks is up to timing: spinning workers may claim
     * every chunk before the caller gets to one. */
    CU_ASSERT(atomic_load(&job.threads_seen) != 0);
    free(job.visits);
}

static void check_coverage(int n_threads, int64_t n, int64_t grain) {
    vt_threadpool *pool;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(n_threads, &pool, NULL), VT_OK);
    check_coverage_on(pool, n, grain);
    vt_threadpool_destroy(pool);
}

static void test_every_item_once(void) {
    check_coverage(4, 1000003, 1000);
    check_coverage(3, 10, 1);
    check_coverage(2, 7, 3);
    check_coverage(4, 1, 1);
}

/* ------------------------------------------------------------------------ */
/* Chunk shapes                                                               */

#define MAX_CHUNKS 64

typedef struct chunk_log {
    pthread_mutex_t lock;
    int count;
    int64_t begin[MAX_CHUNKS], end[MAX_CHUNKS];
    int thread[MAX_CHUNKS];
} chunk_log;

static void log_chunk(void *arg, int64_t begin, int64_t end, int thread) {
    chunk_log *log = arg;
    pthread_mutex_lock(&log->lock);
    if (log->count < MAX_CHUNKS) {
        log->begin[log->count] = begin;
        log->end[log->count] = end;
        log->thread[log->count] = thread;
    }
    log->count++;
    pthread_mutex_unlock(&log->lock);
}

static int compare_begin(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Runs one parallel_for and returns the chunks sorted by begin. */
static int chunks_of(vt_threadpool *pool, int64_t n, int64_t grain, int64_t (*out)[2]) {
    chunk_log log = {.count = 0};
    pthread_mutex_init(&log.lock, NULL);
    vt_threadpool_parallel_for(pool, n, grain, log_chunk, &log);
    pthread_mutex_destroy(&log.lock);
    for (int i = 0; i < log.count && i < MAX_CHUNKS; i++) {
        out[i][0] = log.begin[i];
        out[i][1] = log.end[i];
    }
    qsort(out, (size_t)log.count, sizeof out[0], compare_begin);
    return log.count;
}

static void test_chunks_respect_grain(void) {
    vt_threadpool *pool;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(4, &pool, NULL), VT_OK);
    int64_t c[MAX_CHUNKS][2];

    /* Plenty of work: one chunk per thread, contiguous, sizes within one. */
    int n = chunks_of(pool, 1003, 10, c);
    CU_ASSERT_EQUAL(n, 4);
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(c[i][0], i == 0 ? 0 : c[i - 1][1]);
        int64_t size = c[i][1] - c[i][0];
        CU_ASSERT(size == 1003 / 4 || size == 1003 / 4 + 1);
    }
    CU_ASSERT_EQUAL(c[n - 1][1], 1003);

    /* Only room for 2 chunks of at least 30 items. */
    n = chunks_of(pool, 70, 30, c);
    CU_ASSERT_EQUAL(n, 2);
    for (int i = 0; i < n; i++) CU_ASSERT(c[i][1] - c[i][0] >= 30);

    /* n < 2 * grain: one inline call covering everything. */
    n = chunks_of(pool, 50, 30, c);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(c[0][0], 0);
    CU_ASSERT_EQUAL(c[0][1], 50);

    /* A grain of 0 or less means 1. */
    n = chunks_of(pool, 8, 0, c);
    CU_ASSERT_EQUAL(n, 4);

    /* Nothing to do: no call at all. */
    CU_ASSERT_EQUAL(chunks_of(pool, 0, 1, c), 0);
    CU_ASSERT_EQUAL(chunks_of(pool, -5, 1, c), 0);
    vt_threadpool_destroy(pool);
}

static void test_small_range_runs_on_caller(void) {
    vt_threadpool *pool;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(4, &pool, NULL), VT_OK);
    chunk_log log = {.count = 0};
    pthread_mutex_init(&log.lock, NULL);
    vt_threadpool_parallel_for(pool, 5, 100, log_chunk, &log);
    CU_ASSERT_EQUAL(log.count, 1);
    CU_ASSERT_EQUAL(log.thread[0], 0);
    CU_ASSERT_EQUAL(log.begin[0], 0);
    CU_ASSERT_EQUAL(log.end[0], 5);
    pthread_mutex_destroy(&log.lock);
    vt_threadpool_destroy(pool);
}

static void test_one_thread_pool(void) {
    vt_threadpool *pool;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(1, &pool, NULL), VT_OK);
    CU_ASSERT_EQUAL(vt_threadpool_n_threads(pool), 1);
    chunk_log log = {.count = 0};
    pthread_mutex_init(&log.lock, NULL);
    vt_threadpool_parallel_for(pool, 100000, 1, log_chunk, &log);
    CU_ASSERT_EQUAL(log.count, 1);
    CU_ASSERT_EQUAL(log.thread[0], 0);
    CU_ASSERT_EQUAL(log.end[0], 100000);
    pthread_mutex_destroy(&log.lock);
    vt_threadpool_destroy(pool);
}

static void test_bad_thread_counts(void) {
    vt_threadpool *pool = (vt_threadpool *)&pool; /* must be cleared on failure */
    vt_error err;
    CU_ASSERT_EQUAL(vt_threadpool_create(0, &pool, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(pool);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "n_threads 0"));
    CU_ASSERT_EQUAL(vt_threadpool_create(-3, &pool, &err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_threadpool_create(1 << 20, &pool, &err), VT_ERR_INVALID);
}

/* ------------------------------------------------------------------------ */
/* Many tiny calls, as a decode step makes.                                   */

typedef struct sum_job {
    const int32_t *values;
    int64_t partial[8]; /* per thread: each thread writes only its own slot */
} sum_job;

static void sum_range(void *arg, int64_t begin, int64_t end, int thread) {
    sum_job *job = arg;
    int64_t s = 0;
    for (int64_t i = begin; i < end; i++) s += job->values[i];
    job->partial[thread] += s;
}

static void test_many_tiny_calls(void) {
    enum { N = 64, CALLS = 20000 };
    vt_threadpool *pool;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(3, &pool, NULL), VT_OK);
    int32_t values[N];
    for (int i = 0; i < N; i++) values[i] = i * 7 - 100;
    int failures = 0;
    for (int call = 0; call < CALLS; call++) {
        sum_job job = {.values = values};
        /* n varies so chunk counts and bounds change from call to call */
        int64_t n = N - (call % 17);
        int64_t want = 0;
        for (int64_t i = 0; i < n; i++) want += values[i];
        vt_threadpool_parallel_for(pool, n, 4, sum_range, &job);
        int64_t got = 0;
        for (int t = 0; t < 8; t++) got += job.partial[t];
        failures += got != want;
    }
    CU_ASSERT_EQUAL(failures, 0);
    vt_threadpool_destroy(pool);
}

/* Workers that slept (idle longer than their spin window) wake for new work. */
static void test_wakes_after_sleep(void) {
    vt_threadpool *pool;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(2, &pool, NULL), VT_OK);
    int32_t values[1000];
    int64_t want = 0;
    for (int i = 0; i < 1000; i++) want += values[i] = i;
    for (int round = 0; round < 5; round++) {
        struct timespec pause = {0, 3 * 1000 * 1000}; /* 3 ms: far past the ~100 us spin */
        nanosleep(&pause, NULL);
        chunk_log log = {.count = 0};
        pthread_mutex_init(&log.lock, NULL);
        vt_threadpool_parallel_for(pool, 1000, 1, log_chunk, &log);
        CU_ASSERT_EQUAL(log.count, 2);
        pthread_mutex_destroy(&log.lock);
        sum_job job = {.values = values};
        vt_threadpool_parallel_for(pool, 1000, 1, sum_range, &job);
        CU_ASSERT_EQUAL(job.partial[0] + job.partial[1], want);
    }
    vt_threadpool_destroy(pool);
}

/* Create and destroy repeatedly, with and without work: no hang, no leak. */
static void test_create_destroy_cycles(void) {
    for (int i = 0; i < 50; i++) {
        vt_threadpool *pool;
        CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(1 + i % 4, &pool, NULL), VT_OK);
        if (i % 2) check_coverage_on(pool, 100, 1);
        vt_threadpool_destroy(pool);
    }
    vt_threadpool_destroy(NULL);
}

/* ------------------------------------------------------------------------ */
/* Misuse: a parallel_for from inside a task.                                 */

typedef struct nested_job {
    vt_threadpool *pool;
    atomic_long inner_items;
} nested_job;

static void count_items(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    atomic_fetch_add(&((nested_job *)arg)->inner_items, (long)(end - begin));
}

static void nested_outer(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    nested_job *job = arg;
    for (int64_t i = begin; i < end; i++) vt_threadpool_parallel_for(job->pool, 100, 1, count_items, job);
}

/* Debug builds abort on the bug; release builds run the inner call inline, so
 * the work is still done exactly once. Run in a child so an abort is data. */
static void test_nested_call(void) {
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(5); /* the expected assertion message is noise */
        vt_threadpool *pool;
        if (vt_threadpool_create(2, &pool, NULL) != VT_OK) _exit(3);
        nested_job job = {.pool = pool};
        vt_threadpool_parallel_for(pool, 4, 1, nested_outer, &job);
        _exit(atomic_load(&job.inner_items) == 4 * 100 ? 0 : 4);
    }
    int status;
    CU_ASSERT_EQUAL_FATAL(waitpid(pid, &status, 0), pid);
#ifdef NDEBUG
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#else
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#endif
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"every item is visited exactly once", test_every_item_once},
        {"chunks are contiguous and respect the grain", test_chunks_respect_grain},
        {"a range under two grains runs inline on the caller", test_small_range_runs_on_caller},
        {"a one-thread pool runs everything on the caller", test_one_thread_pool},
        {"bad thread counts are refused", test_bad_thread_counts},
        {"20000 tiny calls all sum correctly", test_many_tiny_calls},
        {"sleeping workers wake for new work", test_wakes_after_sleep},
        {"create/destroy cycles", test_create_destroy_cycles},
        {"a nested call aborts in debug, runs inline in release", test_nested_call},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("threadpool", NULL, NULL, tests);
    return vt_test_run();
}
