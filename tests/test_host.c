/* test_host.c — the vt_host table: versions, the pool behind parallel_for,
 * aligned allocation and its failure injection (API and VT_FAIL_ALLOC_AT),
 * the log threshold (API and VT_LOG), and the dtype forwards.
 *
 * The environment variables are read once per process, so those cases re-run
 * this binary as a child with a mode argument and the variable set. */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "host.h"
#include "vt/vt.h"
#include "quant.h"
#include "util.h"

static char self_path[4096];

static void test_table_fields(void) {
    const vt_host *h = vt_host_get(NULL);
    CU_ASSERT_EQUAL(h->struct_size, sizeof(vt_host));
    CU_ASSERT_EQUAL(h->abi_major, VT_ABI_MAJOR);
    CU_ASSERT_EQUAL(h->abi_minor, VT_ABI_MINOR);
    CU_ASSERT_EQUAL(h->n_threads, 1);
    CU_ASSERT_PTR_NOT_NULL(h->log);
    CU_ASSERT_PTR_NOT_NULL(h->alloc);
    CU_ASSERT_PTR_NOT_NULL(h->free);
    CU_ASSERT_PTR_NOT_NULL(h->parallel_for);
    CU_ASSERT_PTR_NOT_NULL(h->to_f32);
    CU_ASSERT_PTR_NOT_NULL(h->from_f32);
    CU_ASSERT_PTR_NOT_NULL(h->row_size);
    CU_ASSERT_PTR_NOT_NULL(h->block_length);
    CU_ASSERT_PTR_NOT_NULL(h->dtype_name);
}

/* ------------------------------------------------------------------------ */
/* parallel_for goes to the current pool                                      */

typedef struct thread_record {
    atomic_int mask;  /* bit per thread id that ran a chunk */
    atomic_long items;
} thread_record;

static void record(void *arg, int64_t begin, int64_t end, int thread) {
    thread_record *r = arg;
    /* Some real work per item (~1 ms per call in all), so that workers get a
     * chance to claim chunks before the caller has done them all. */
    volatile double sink = 0;
    for (int64_t i = begin; i < end; i++)
        for (int k = 0; k < 300; k++) sink = sink + (double)k * 0.5;
    atomic_fetch_or(&r->mask, 1 << thread);
    atomic_fetch_add(&r->items, (long)(end - begin));
}

static void test_parallel_for_uses_the_pool(void) {
    vt_threadpool *pool;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(3, &pool, NULL), VT_OK);
    const vt_host *h = vt_host_get(pool);
    CU_ASSERT_EQUAL(h->n_threads, 3);
    /* Enough calls that a chunk lands on a worker at least once. */
    int all_masks = 0;
    for (int i = 0; i < 200; i++) {
        thread_record r = {0};
        h->parallel_for(3000, 1, record, &r);
        CU_ASSERT_EQUAL(atomic_load(&r.items), 3000);
        CU_ASSERT_EQUAL(atomic_load(&r.mask) & ~7, 0); /* ids 0..2 only */
        all_masks |= atomic_load(&r.mask);
    }
    CU_ASSERT(all_masks & ~1); /* workers took part */

    /* Without a pool everything runs on the caller. */
    h = vt_host_get(NULL);
    CU_ASSERT_EQUAL(h->n_threads, 1);
    thread_record r = {0};
    h->parallel_for(3000, 1, record, &r);
    CU_ASSERT_EQUAL(atomic_load(&r.items), 3000);
    CU_ASSERT_EQUAL(atomic_load(&r.mask), 1);
    h->parallel_for(0, 1, record, &r); /* nothing: no call */
    CU_ASSERT_EQUAL(atomic_load(&r.items), 3000);
    vt_threadpool_destroy(pool);
}

/* parallel_for_on (1.4) runs on the pool of the table it is handed,
 * whatever pool is current on the calling thread; the 1.0 entry runs on the
 * current one. Two engines' tables, one thread. */
static void test_parallel_for_on_uses_the_tables_pool(void) {
    vt_threadpool *one, *three;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(1, &one, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(3, &three, NULL), VT_OK);
    vt_host a, b;
    vt_host_init(&a, one);
    vt_host_init(&b, three); /* three is now the thread's current pool */
    CU_ASSERT_PTR_NOT_NULL_FATAL(a.parallel_for_on);
    int all_masks = 0;
    for (int i = 0; i < 200; i++) {
        thread_record r = {0};
        vt_host_parallel_for(&a, 3000, 1, record, &r);
        CU_ASSERT_EQUAL(atomic_load(&r.items), 3000);
        CU_ASSERT_EQUAL(atomic_load(&r.mask), 1); /* a's pool: thread 0 alone */
        thread_record c = {0};
        a.parallel_for(3000, 1, record, &c); /* the 1.0 entry: the current pool, three */
        all_masks |= atomic_load(&c.mask);
    }
    CU_ASSERT(all_masks & ~1);
    /* an old plugin's view of the table (struct_size of 1.3): the 1.0 entry */
    vt_host old = a;
    old.struct_size = (uint32_t)offsetof(vt_host, parallel_for_on);
    thread_record r = {0};
    vt_host_parallel_for(&old, 3000, 1, record, &r);
    CU_ASSERT_EQUAL(atomic_load(&r.items), 3000);
    vt_host_release_pool(three);
    vt_host_release_pool(one);
    vt_threadpool_destroy(three);
    vt_threadpool_destroy(one);
}

/* ------------------------------------------------------------------------ */
/* Allocation                                                                 */

static void test_alloc_alignment(void) {
    const vt_host *h = vt_host_get(NULL);
    size_t alignments[] = {1, 2, 8, 16, 64, 4096};
    for (size_t i = 0; i < sizeof alignments / sizeof alignments[0]; i++) {
        size_t a = alignments[i] < sizeof(void *) ? sizeof(void *) : alignments[i];
        unsigned char *p = h->alloc(1000, alignments[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL((uintptr_t)p % a, 0);
        memset(p, 0xab, 1000); /* the whole size is usable (ASan checks) */
        h->free(p);
    }
    void *p = h->alloc(0, 64); /* zero bytes: still a pointer free accepts */
    CU_ASSERT_PTR_NOT_NULL(p);
    h->free(p);
    CU_ASSERT_PTR_NULL(h->alloc(64, 48)); /* not a power of two */
    h->free(NULL);
}

static void test_alloc_failure_injection(void) {
    const vt_host *h = vt_host_get(NULL);
    vt_host_fail_alloc_after(3);
    void *a = h->alloc(32, 16), *b = h->alloc(32, 16), *c = h->alloc(32, 16), *d = h->alloc(32, 16);
    CU_ASSERT_PTR_NOT_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(b);
    CU_ASSERT_PTR_NULL(c); /* the third from the call */
    CU_ASSERT_PTR_NOT_NULL(d); /* one failure only */
    h->free(a), h->free(b), h->free(d);

    vt_host_fail_alloc_after(1);
    vt_host_fail_alloc_after(0); /* disarmed before it fired */
    a = h->alloc(32, 16);
    CU_ASSERT_PTR_NOT_NULL(a);
    h->free(a);
}

/* Child mode "alloc": report which of 5 host allocs failed, as the exit code
 * (0 = none). */
static int child_alloc(void) {
    const vt_host *h = vt_host_get(NULL);
    int failed = 0;
    for (int i = 1; i <= 5; i++) {
        void *p = h->alloc(16, 16);
        if (!p && !failed) failed = i;
        h->free(p);
    }
    return failed;
}

static void test_fail_alloc_env(void) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "VT_FAIL_ALLOC_AT=4 '%s' alloc", self_path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, NULL), 4);
    snprintf(cmd, sizeof cmd, "VT_FAIL_ALLOC_AT=1 '%s' alloc", self_path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, NULL), 1);
    snprintf(cmd, sizeof cmd, "VT_FAIL_ALLOC_AT= '%s' alloc", self_path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd, "VT_FAIL_ALLOC_AT=junk '%s' alloc", self_path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, NULL), 0);
}

/* ------------------------------------------------------------------------ */
/* Logging                                                                    */

/* Child mode "log": one message at each level through host->log. */
static int child_log(void) {
    const vt_host *h = vt_host_get(NULL);
    h->log(VT_LOG_ERROR, "tester", "e-%d", 1);
    h->log(VT_LOG_WARN, "tester", "w-%d", 2);
    h->log(VT_LOG_INFO, "tester", "i-%d", 3);
    h->log(VT_LOG_DEBUG, "tester", "d-%d", 4);
    return 0;
}

/* Runs the log child with VT_LOG=env (NULL: unset); its stderr, malloc'ed. */
static char *log_child_output(const char *env) {
    char cmd[8192];
    if (env) snprintf(cmd, sizeof cmd, "VT_LOG=%s '%s' log", env, self_path);
    else snprintf(cmd, sizeof cmd, "unset VT_LOG; '%s' log", self_path);
    char *err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 0);
    return err ? err : calloc(1, 1);
}

static void test_log_threshold_from_env(void) {
    char *out = log_child_output(NULL); /* default: warn */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "vt[tester] error: e-1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "vt[tester] warning: w-2\n"));
    CU_ASSERT_PTR_NULL(strstr(out, "i-3"));
    free(out);

    out = log_child_output("debug");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "vt[tester] info: i-3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "vt[tester] debug: d-4\n"));
    free(out);

    out = log_child_output("ERROR"); /* case does not matter */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "e-1"));
    CU_ASSERT_PTR_NULL(strstr(out, "w-2"));
    free(out);

    out = log_child_output("loud"); /* unknown: says so, keeps warn */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "VT_LOG=loud"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "w-2"));
    CU_ASSERT_PTR_NULL(strstr(out, "i-3"));
    free(out);
}

static void test_log_level_api(void) {
    int before = vt_log_get_level();
    vt_log_set_level(VT_LOG_DEBUG);
    CU_ASSERT_EQUAL(vt_log_get_level(), VT_LOG_DEBUG);
    vt_log_set_level(99); /* clamped */
    CU_ASSERT_EQUAL(vt_log_get_level(), VT_LOG_DEBUG);
    vt_log_set_level(-4);
    CU_ASSERT_EQUAL(vt_log_get_level(), VT_LOG_ERROR);
    vt_log_set_level(before);
}

/* ------------------------------------------------------------------------ */
/* Dtype services are core/quant/quant.h's                                          */

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A callback that takes its time, counting who is inside it. */
static atomic_int inside_callback, callback_calls;
static void slow_callback(void *user, int level, const char *who, const char *message) {
    (void)level, (void)who, (void)message;
    atomic_fetch_add(&inside_callback, 1);
    atomic_fetch_add(&callback_calls, 1);
    CU_ASSERT_EQUAL(*(int *)user, 42); /* still the embedder's live value */
    usleep(2000);
    atomic_fetch_sub(&inside_callback, 1);
}

static void reentrant_callback(void *user, int level, const char *who, const char *message) {
    (void)level, (void)who, (void)message;
    atomic_fetch_add(&callback_calls, 1);
    vt_set_log_callback(NULL, NULL); /* refused from in here (it would wait for itself) */
    if (*(int *)user == 0) {
        *(int *)user = 1;
        vt_log(VT_LOG_ERROR, "test", "logged from inside the callback");
    }
}

static void quiet_callback(void *user, int level, const char *who, const char *message) {
    (void)user, (void)level, (void)who, (void)message;
}

static atomic_bool logging;
static void *log_loop(void *arg) {
    (void)arg;
    /* without a pause: a change of sink must still get its turn */
    while (atomic_load(&logging)) vt_log(VT_LOG_ERROR, "test", "a message from another thread");
    return NULL;
}

/* Once vt_set_log_callback returns, no thread is inside the previous
 * callback, so an embedder may free what it passed as user. Without the
 * wait, another thread that had read the old sink called it afterwards. */
static void test_log_callback_replaced_only_when_idle(void) {
    int *user = malloc(sizeof *user);
    CU_ASSERT_FATAL(user != NULL);
    *user = 42;
    atomic_store(&logging, true);
    pthread_t t;
    CU_ASSERT_FATAL(pthread_create(&t, NULL, log_loop, NULL) == 0);
    for (int round = 0; round < 20; round++) {
        atomic_store(&callback_calls, 0);
        vt_set_log_callback(slow_callback, user);
        const double until = seconds_now() + 60; /* a bound for a broken sink, not a speed */
        while (atomic_load(&callback_calls) == 0 && seconds_now() < until) usleep(100);
        CU_ASSERT_FATAL(atomic_load(&callback_calls) > 0);
        vt_set_log_callback(quiet_callback, NULL);
        CU_ASSERT_EQUAL(atomic_load(&inside_callback), 0);
        const int calls = atomic_load(&callback_calls);
        usleep(5000);
        CU_ASSERT_EQUAL(atomic_load(&callback_calls), calls); /* the old sink is never called again */
    }
    atomic_store(&logging, false);
    pthread_join(t, NULL);
    *user = 0;
    free(user);
    /* from inside a callback: no change of sink (nor a deadlock), and the
     * callback may log itself */
    int once = 0;
    atomic_store(&callback_calls, 0);
    vt_set_log_callback(reentrant_callback, &once);
    vt_log(VT_LOG_ERROR, "test", "to the re-entrant callback");
    CU_ASSERT_EQUAL(once, 1);
    CU_ASSERT_EQUAL(atomic_load(&callback_calls), 2); /* its own message reached it: the sink stayed */
    vt_set_log_callback(NULL, NULL);
}

static void test_dtype_forwards(void) {
    const vt_host *h = vt_host_get(NULL);
    CU_ASSERT_EQUAL(h->row_size(VT_F32, 10), 40);
    CU_ASSERT_EQUAL(h->row_size(VT_Q4_K, 512), 2 * 144); /* 2 blocks of d, dmin, 12 scale bytes, 128 nibble bytes */
    CU_ASSERT_EQUAL(h->row_size(VT_Q4_K, 100), 0); /* not whole blocks */
    CU_ASSERT_EQUAL(h->block_length(VT_Q8_0), 32);
    CU_ASSERT_EQUAL(h->block_length(VT_F16), 1);
    CU_ASSERT_STRING_EQUAL(h->dtype_name(VT_Q6_K), "q6_k");

    /* 1.0 and -2.0 are exact in f16 (0x3c00, 0xc000) and bf16 (0x3f80, 0xc000). */
    uint16_t f16[2] = {0x3c00, 0xc000};
    float f[2] = {0, 0};
    CU_ASSERT_EQUAL(h->to_f32(VT_F16, f16, f, 2), VT_OK);
    CU_ASSERT_EQUAL(f[0], 1.0f);
    CU_ASSERT_EQUAL(f[1], -2.0f);
    uint16_t bf16[2] = {0, 0};
    CU_ASSERT_EQUAL(h->from_f32(VT_BF16, f, bf16, 2), VT_OK);
    CU_ASSERT_EQUAL(bf16[0], 0x3f80);
    CU_ASSERT_EQUAL(bf16[1], 0xc000);
    CU_ASSERT_EQUAL(h->to_f32(99, f16, f, 2), VT_ERR_INVALID);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "alloc") == 0) return child_alloc();
    if (argc == 2 && strcmp(argv[1], "log") == 0) return child_log();
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) return 2;
    self_path[n] = '\0';

    static CU_TestInfo tests[] = {
        {"the table has every field and the runtime's ABI", test_table_fields},
        {"parallel_for runs on the current pool", test_parallel_for_uses_the_pool},
        {"parallel_for_on runs on its table's pool, whatever is current", test_parallel_for_on_uses_the_tables_pool},
        {"alloc honours the alignment", test_alloc_alignment},
        {"the n-th alloc fails when asked to, once", test_alloc_failure_injection},
        {"VT_FAIL_ALLOC_AT fails the n-th alloc of a process", test_fail_alloc_env},
        {"VT_LOG sets the log threshold", test_log_threshold_from_env},
        {"vt_log_set_level clamps and sticks", test_log_level_api},
        {"vt_set_log_callback returns once the old callback is idle; refused from inside it",
         test_log_callback_replaced_only_when_idle},
        {"dtype services forward to core/quant/quant.h", test_dtype_forwards},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("host", NULL, NULL, tests);
    return vt_test_run();
}
