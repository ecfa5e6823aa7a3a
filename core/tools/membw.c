/* membw.c — read bandwidth by a threaded dot product (see membw.h). */
#include "membw.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"

/* Four lanes of float; with four independent accumulators one iteration
 * reads 16 floats of each buffer. Plain SSE2 (the x86-64 baseline) already
 * loads far faster than DRAM delivers, so no special ISA is needed. */
typedef float v4f __attribute__((vector_size(16)));
#define FLOATS_PER_STEP 16

typedef struct dot_job {
    const v4f *a, *b;       /* [n_steps * 4] vectors each */
    double partial[1024];   /* per thread; threads <= 1024 (options.h) */
} dot_job;

/* Steps [begin, end) of a . b. */
static void dot_range(void *arg, int64_t begin, int64_t end, int thread) {
    dot_job *job = arg;
    v4f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (int64_t i = begin; i < end; i++) {
        const v4f *a = job->a + 4 * i, *b = job->b + 4 * i;
        s0 += a[0] * b[0];
        s1 += a[1] * b[1];
        s2 += a[2] * b[2];
        s3 += a[3] * b[3];
    }
    v4f s = (s0 + s1) + (s2 + s3);
    job->partial[thread] += (double)s[0] + (double)s[1] + (double)s[2] + (double)s[3];
}

typedef struct fill_job {
    float *a, *b;
} fill_job;

/* Pages are first touched by the threads that will read them. */
static void fill_range(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    fill_job *job = arg;
    for (int64_t i = begin * FLOATS_PER_STEP; i < end * FLOATS_PER_STEP; i++) {
        job->a[i] = (float)(i & 7) * 0.125f;
        job->b[i] = 1.0f;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Keeps the dot products observable so they are not optimised away. */
static volatile double membw_sink;

vt_status vt_membw_measure(vt_threadpool *pool, size_t bytes_each, int reps, double *gb_s, vt_error *err) {
    *gb_s = 0.0;
    if (bytes_each < ((size_t)64 << 10) || reps < 1 || reps > 1000)
        return vt_fail(err, VT_ERR_INVALID, "membw: need >= 64 KiB per buffer and 1..1000 repetitions");
    size_t step_bytes = FLOATS_PER_STEP * sizeof(float);
    int64_t n_steps = (int64_t)(bytes_each / step_bytes);
    size_t bytes = (size_t)n_steps * step_bytes;
    float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    double *times = calloc((size_t)reps, sizeof *times);
    dot_job *job = calloc(1, sizeof *job);
    if (!a || !b || !times || !job) {
        free(a);
        free(b);
        free(times);
        free(job);
        return vt_fail(err, VT_ERR_NOMEM, "membw: out of memory for 2 x %zu MiB", bytes >> 20);
    }
    int64_t grain = 1 << 12; /* 256 KiB of each buffer per chunk at least */
    fill_job fill = {a, b};
    vt_threadpool_parallel_for(pool, n_steps, grain, fill_range, &fill);
    job->a = (const v4f *)a;
    job->b = (const v4f *)b;
    vt_threadpool_parallel_for(pool, n_steps, grain, dot_range, job); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        vt_threadpool_parallel_for(pool, n_steps, grain, dot_range, job);
        times[r] = now_s() - t0;
    }
    double sum = 0.0;
    for (int t = 0; t < 1024; t++) sum += job->partial[t];
    membw_sink = sum;
    double median = vt_median(times, (size_t)reps);
    *gb_s = median > 0.0 ? 2.0 * (double)bytes / median * 1e-9 : 0.0;
    free(a);
    free(b);
    free(times);
    free(job);
    return VT_OK;
}
