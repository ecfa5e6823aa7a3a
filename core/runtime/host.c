/* host.c — the vt_host table backends receive at init: logging with a level
 * threshold, aligned allocation with test-time failure injection, the current
 * thread pool's parallel_for, and row conversion through core/quant.h. */
#include "host.h"
#include "vt/vt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "quant.h"

/* ------------------------------------------------------------------------ */
/* Logging                                                                    */

static atomic_int log_level = VT_LOG_WARN;
static pthread_once_t log_env_once = PTHREAD_ONCE_INIT;
static atomic_bool log_level_set_explicitly;

/* "debug", "info", "warn"/"warning", "error", or 0..3; -1 if unrecognised. */
static int parse_level(const char *s) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0) return i;
    if (strcasecmp(s, "warning") == 0) return VT_LOG_WARN;
    if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0') return s[0] - '0';
    return -1;
}

bool vt_log_level_name_ok(const char *s) { return s && parse_level(s) >= 0; }

/* Where messages go: stderr, or the embedder's callback (vt_set_log_callback).
 * A message is delivered under the read lock and a change of sink takes the
 * write lock, so vt_set_log_callback returns only once no thread is still
 * inside the previous callback: the embedder may free its `user` then. The
 * lock prefers writers, so threads logging without pause cannot hold a
 * change off for ever. */
static pthread_rwlock_t log_sink_lock;
static pthread_once_t log_lock_once = PTHREAD_ONCE_INIT;
static vt_log_fn log_sink;
static void *log_sink_user;
/* Set while this thread is inside the callback, holding the read lock: a
 * message it logs goes to the sink without locking again (a second read
 * lock would wait behind a waiting writer), and a change of sink from there
 * would wait for itself. */
static _Thread_local bool in_log_callback;

static void init_log_lock(void) {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
#ifdef __GLIBC__
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    pthread_rwlock_init(&log_sink_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
}

static void read_log_env(void) {
    const char *env = getenv("VT_LOG");
    if (!env || !*env || atomic_load(&log_level_set_explicitly)) return;
    int level = parse_level(env);
    if (level >= 0) atomic_store(&log_level, level);
    else fprintf(stderr, "vt: warning: VT_LOG=%s is not one of debug, info, warn, error; using warn\n", env);
}

static atomic_bool progress_lines;

void vt_progress_lines_enable(bool on) { atomic_store(&progress_lines, on); }

bool vt_progress_lines_on(void) { return atomic_load(&progress_lines) && isatty(2); }

void vt_log_set_level(int level) {
    pthread_once(&log_env_once, read_log_env);
    if (level < VT_LOG_ERROR) level = VT_LOG_ERROR;
    if (level > VT_LOG_DEBUG) level = VT_LOG_DEBUG;
    atomic_store(&log_level_set_explicitly, true);
    atomic_store(&log_level, level);
}

int vt_log_get_level(void) {
    pthread_once(&log_env_once, read_log_env);
    return atomic_load(&log_level);
}

void vt_log(int level, const char *who, const char *fmt, ...) {
    if (level > vt_log_get_level()) return;
    static const char *const tags[] = {"error", "warning", "info", "debug"};
    const char *tag = level <= VT_LOG_ERROR ? tags[0] : level >= VT_LOG_DEBUG ? tags[3] : tags[level];
    /* Format the whole line first so concurrent messages do not interleave. */
    char line[1024];
    int head = snprintf(line, sizeof line, "vt[%s] %s: ", who && *who ? who : "core", tag);
    if (head < 0 || (size_t)head >= sizeof line) head = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + head, sizeof line - (size_t)head, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (in_log_callback) { /* logged by the callback: the read lock is held */
        log_sink(log_sink_user, level, who && *who ? who : "core", line + head);
        return;
    }
    pthread_once(&log_lock_once, init_log_lock);
    pthread_rwlock_rdlock(&log_sink_lock);
    if (log_sink) {
        in_log_callback = true;
        log_sink(log_sink_user, level, who && *who ? who : "core", line + head);
        in_log_callback = false;
    } else {
        fprintf(stderr, "%s\n", line);
    }
    pthread_rwlock_unlock(&log_sink_lock);
}

void vt_set_log_callback(vt_log_fn fn, void *user) {
    if (in_log_callback) {
        fprintf(stderr, "vt: warning: vt_set_log_callback called from inside the log callback: the sink is not "
                        "changed (change it outside the callback)\n");
        return;
    }
    pthread_once(&log_lock_once, init_log_lock);
    pthread_rwlock_wrlock(&log_sink_lock);
    log_sink = fn;
    log_sink_user = user;
    pthread_rwlock_unlock(&log_sink_lock);
}

void vt_set_log_level(int level) { vt_log_set_level(level); }

/* ------------------------------------------------------------------------ */
/* Allocation with failure injection                                          */

/* Host allocs left before the injected failure; 0 = no failure armed. */
static atomic_long fail_countdown;
static pthread_once_t fail_env_once = PTHREAD_ONCE_INIT;

static void read_fail_env(void) {
    const char *env = getenv("VT_FAIL_ALLOC_AT");
    if (!env || !*env) return;
    char *end;
    long n = strtol(env, &end, 10);
    if (*end == '\0' && n > 0) atomic_store(&fail_countdown, n);
}

void vt_host_fail_alloc_after(long n) {
    pthread_once(&fail_env_once, read_fail_env); /* so the env cannot override this later */
    atomic_store(&fail_countdown, n > 0 ? n : 0);
}

/* True when this alloc is the injected failure. */
static bool injected_failure(void) {
    pthread_once(&fail_env_once, read_fail_env);
    long left = atomic_load(&fail_countdown);
    while (left > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &left, left - 1)) return left == 1;
    }
    return false;
}

static void *host_alloc(size_t size, size_t alignment) {
    if (injected_failure()) return NULL;
    if (alignment < sizeof(void *)) alignment = sizeof(void *);
    if ((alignment & (alignment - 1)) != 0) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, alignment, size ? size : 1) != 0) return NULL;
    return p;
}

static void host_free(void *ptr) { free(ptr); }

/* ------------------------------------------------------------------------ */
/* Thread pool                                                                */

/* The pool behind host->parallel_for on this thread: the pool of the engine
 * this thread is driving (set on every eval and step), so engines driven from
 * different threads each run their ops on their own pool. NULL runs
 * everything on the caller. */
static _Thread_local vt_threadpool *current_pool;

static void run_on(vt_threadpool *pool, int64_t n, int64_t grain, vt_range_fn fn, void *arg) {
    if (pool) {
        vt_threadpool_parallel_for(pool, n, grain, fn, arg);
    } else if (n > 0) {
        fn(arg, 0, n, 0);
    }
}

static void host_parallel_for(int64_t n, int64_t grain, vt_range_fn fn, void *arg) {
    run_on(current_pool, n, grain, fn, arg);
}

static void host_parallel_for_on(const vt_host *self, int64_t n, int64_t grain, vt_range_fn fn, void *arg) {
    run_on(self ? self->runtime_ctx : NULL, n, grain, fn, arg);
}

/* ------------------------------------------------------------------------ */
/* Dtype services: thin forwards so backends never link libvt.               */

static vt_status host_to_f32(int32_t dtype, const void *src, float *dst, int64_t n) {
    return vt_to_f32(dtype, src, dst, n);
}

static vt_status host_from_f32(int32_t dtype, const float *src, void *dst, int64_t n) {
    return vt_from_f32(dtype, src, dst, n);
}

static size_t host_row_size(int32_t dtype, int64_t n) { return vt_row_size(dtype, n); }
static int64_t host_block_length(int32_t dtype) { return vt_dtype_block_length(dtype); }
static const char *host_dtype_name(int32_t dtype) { return vt_dtype_name(dtype); }

static vt_host host_table = {
    .struct_size = sizeof(vt_host),
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .n_threads = 1,
    .log = vt_log,
    .alloc = host_alloc,
    .free = host_free,
    .parallel_for = host_parallel_for,
    .to_f32 = host_to_f32,
    .from_f32 = host_from_f32,
    .row_size = host_row_size,
    .block_length = host_block_length,
    .dtype_name = host_dtype_name,
    .parallel_for_on = host_parallel_for_on,
};

/* vt_host_get's table, for tools and tests driving one pool from one thread. */
static vt_host process_table;

void vt_host_release_pool(vt_threadpool *pool) {
    if (current_pool == pool) current_pool = NULL;
    if (process_table.runtime_ctx == pool) process_table.runtime_ctx = NULL;
}

void vt_host_use(vt_threadpool *pool) { current_pool = pool; }

void vt_host_init(vt_host *table, vt_threadpool *pool) {
    *table = host_table;
    table->n_threads = vt_threadpool_n_threads(pool);
    table->runtime_ctx = pool;
    vt_host_use(pool);
}

const vt_host *vt_host_get(vt_threadpool *pool) {
    vt_host_init(&process_table, pool);
    return &process_table;
}
