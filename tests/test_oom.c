/* test_oom.c — out of memory is an error, never a crash, a leak or a broken
 * engine.
 *
 * Failure injection (vt_host_fail_alloc_after) makes the n-th allocation
 * through the host allocator fail — the KV cache, the plans' activation
 * arenas, backend states and backend workspaces all come from it — for n = 1,
 * 2, ... until a run no longer reaches the n-th allocation:
 *  - building an engine fails with VT_ERR_NOMEM and a message, or succeeds
 *    only because the failed allocation belonged to a backend the engine does
 *    not use (that backend is then refused, its init having returned
 *    VT_ERR_NOMEM);
 *  - a forward pass fails with VT_ERR_NOMEM and a message, leaves the
 *    sequence as it was, and the same engine then runs correctly (the logits
 *    equal those of an undisturbed run).
 * Leaks on any of these paths are caught by LSan in the sanitizer build.
 * Also: a KV cache for an absurd context (-c) is an out-of-memory error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "host.h"
#include "hostile_models.h"
#include "kv_cache.h"
#include "model.h"
#include "util.h"

/* Under ASan a request larger than the machine is fatal unless the allocator
 * may return NULL, as malloc does in a normal build; the absurd-context test
 * needs the normal behaviour. (Ignored by builds without ASan.) */
__attribute__((used)) const char *__asan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void) {
    /* and the runners' own default (tests/runner/asan_defaults.c) */
    return "allocator_may_return_null=1:intercept_tls_get_addr=0";
}

/* More allocations than one engine build or forward makes; the loops stop long before. */
#define MAX_INJECTIONS 400

static char tiny_path[512], wide_path[512];
static vt_model *tiny;
/* The host table (one static table: engines only change its thread pool). */
static const vt_host *host;

static int setup(void) {
    static const char *const levers[] = {"VT_CONFIG",         "VT_BACKEND",      "VT_THREADS",      "VT_CTX_SIZE",
                                         "VT_KV_CACHE_DTYPE", "VT_KV_CACHE_F32", "VT_FAIL_ALLOC_AT"};
    for (size_t i = 0; i < sizeof levers / sizeof levers[0]; i++) unsetenv(levers[i]);
    host = vt_host_get(NULL);
    vt_error err = {0};
    vt_test_tmpfile(tiny_path, sizeof tiny_path, "tiny.gguf");
    vt_test_tmpfile(wide_path, sizeof wide_path, "wide-kv.gguf");
    if (hm_write_tiny(tiny_path, NULL, 0, &err) || hm_write_tiny(wide_path, NULL, 8192, &err) ||
        vt_model_load(tiny_path, &tiny, &err)) {
        fprintf(stderr, "test_oom: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int teardown(void) {
    vt_model_free(tiny);
    return 0;
}

/* Did the armed failure happen? If not, it is still counting down, and one
 * of the next n host allocations returns NULL: probe for it (this also
 * disarms it). */
static bool injected_failure_fired(long n) {
    bool pending = false;
    for (long i = 0; i < n && !pending; i++) {
        void *p = host->alloc(16, 16);
        pending = p == NULL;
        host->free(p);
    }
    vt_host_fail_alloc_after(0);
    return !pending;
}

static void options_for(vt_options *o, const char *backend) {
    vt_options_defaults(o);
    o->threads = 2;
    o->ctx_size = 64;
    o->batch_size = 8;
    snprintf(o->backend, sizeof o->backend, "%s", backend);
}

static bool refused_for_memory(const vt_registry *r) {
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (b->state == VT_BACKEND_REFUSED && b->refused_by_init && b->init_status == VT_ERR_NOMEM) return true;
    }
    return false;
}

/* Engine builds with the n-th host allocation failing, n = 1, 2, ... */
static void build_with_failures(const char *backend) {
    vt_options o;
    options_for(&o, backend);
    int failures = 0;
    long n;
    for (n = 1; n <= MAX_INJECTIONS; n++) {
        vt_engine *e = NULL;
        vt_error err = {0};
        vt_host_fail_alloc_after(n);
        vt_status st = vt_engine_create(&o, tiny, false, &e, &err);
        bool fired = injected_failure_fired(n);
        if (st != VT_OK) {
            bool ok = st == VT_ERR_NOMEM && err.msg[0] && e == NULL;
            /* the chosen backend's own init ran out: it is refused, with that reason */
            ok = ok || (st == VT_ERR_BACKEND && strstr(err.msg, "out of memory") && e == NULL);
            if (!ok) printf("\n  %s, allocation %ld failing: %s: %s\n", backend, n, vt_status_name(st), err.msg);
            CU_ASSERT(ok);
            CU_ASSERT(fired);
            failures++;
            continue;
        }
        if (fired) {
            /* swallowed: only acceptable in a backend this engine does not use */
            bool ok = refused_for_memory(e->registry) &&
                      vt_registry_at(e->registry, e->preferred)->init_status != VT_ERR_NOMEM;
            if (!ok) printf("\n  %s: allocation %ld failed but the engine was built anyway\n", backend, n);
            CU_ASSERT(ok);
            vt_engine_free(e);
            continue;
        }
        vt_engine_free(e);
        break;
    }
    CU_ASSERT(n <= MAX_INJECTIONS);
    CU_ASSERT(failures >= 3); /* at least KV K, KV V and an activation arena failed */
}

static void test_engine_build_reference(void) { build_with_failures("reference"); }
static void test_engine_build_default(void) { build_with_failures(""); }

static const int32_t prompt[] = {5, 17, 42, 99, 123, 7, 250, 31, 64, 8, 200}; /* two prefill chunks of 8 */
#define N_PROMPT ((int64_t)(sizeof prompt / sizeof prompt[0]))

/* Prefill of the prompt then one decode step; logits of the decode step into out. */
static vt_status forward(vt_engine *e, float *out, vt_error *err) {
    vt_status st = vt_engine_eval(e, prompt, N_PROMPT, false, err);
    int32_t next = 3;
    if (st == VT_OK) st = vt_engine_eval(e, &next, 1, true, err);
    if (st == VT_OK) memcpy(out, vt_engine_logits(e, 0), (size_t)tiny->hp.n_vocab * sizeof *out);
    return st;
}

/* Forward passes with the n-th host allocation failing: the ops' workspaces.
 * A fresh engine each time, since backends keep (and reuse) their scratch. */
static void forward_with_failures(const char *backend) {
    vt_options o;
    options_for(&o, backend);
    vt_engine *e = NULL;
    vt_error err = {0};
    if (strcmp(backend, "onednn") == 0 && !vt_test_onednn_expected()) return;
    if (vt_engine_create(&o, tiny, false, &e, &err) != VT_OK) {
        printf("\n  %s: no engine: %s\n", backend[0] ? backend : "default backend", err.msg);
        CU_FAIL("the engine for a built backend could not be created");
        return;
    }
    char used[64];
    snprintf(used, sizeof used, "%s", vt_registry_at(e->registry, e->preferred)->name);
    size_t V = (size_t)tiny->hp.n_vocab;
    float *want = malloc(V * sizeof *want), *got = malloc(V * sizeof *got);
    CU_ASSERT_FATAL(want && got);
    CU_ASSERT_EQUAL_FATAL(forward(e, want, &err), VT_OK);
    vt_engine_free(e);
    int failures = 0;
    long n;
    for (n = 1; n <= MAX_INJECTIONS; n++) {
        CU_ASSERT_EQUAL_FATAL(vt_engine_create(&o, tiny, false, &e, &err), VT_OK);
        vt_host_fail_alloc_after(n);
        vt_status st = forward(e, got, &err);
        bool fired = injected_failure_fired(n);
        if (st == VT_OK) {
            CU_ASSERT(!fired); /* an op may not swallow its workspace failure */
            CU_ASSERT(memcmp(got, want, V * sizeof *got) == 0);
            vt_engine_free(e);
            break;
        }
        failures++;
        bool ok = st == VT_ERR_NOMEM && err.msg[0] && fired;
        if (!ok) printf("\n  %s forward, allocation %ld failing: %s: %s\n", used, n, vt_status_name(st), err.msg);
        CU_ASSERT(ok);
        /* the failed eval left the sequence where it was (empty after a
         * failed prefill, the prompt after a failed decode step) ... */
        CU_ASSERT(vt_engine_n_past(e) == 0 || vt_engine_n_past(e) == N_PROMPT);
        /* ... and the same engine still works: an undisturbed run gives the same logits */
        vt_engine_reset(e);
        CU_ASSERT_EQUAL(forward(e, got, &err), VT_OK);
        CU_ASSERT(memcmp(got, want, V * sizeof *got) == 0);
        vt_engine_free(e);
    }
    CU_ASSERT(n <= MAX_INJECTIONS);
    CU_ASSERT(failures >= 1);
    printf(" [%s: %d failing allocations in a forward]", used, failures);
    free(want);
    free(got);
}

static void test_forward_reference(void) { forward_with_failures("reference"); }
static void test_forward_default(void) { forward_with_failures(""); }
static void test_forward_onednn(void) { forward_with_failures("onednn"); }

static void test_kv_cache_absurd_sizes(void) {
    vt_kv_cache *c = NULL;
    vt_error err = {0};
    /* bytes that overflow size_t */
    vt_status st = vt_kv_cache_create(host, VT_F32, 1 << 20, 1 << 20, 1 << 20, 256, INT64_C(1) << 24, &c, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "KV cache"));
    /* more blocks than the block table can index */
    st = vt_kv_cache_create(host, VT_F16, 1, 1, 1, 1, INT64_MAX - 1, &c, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(c);
    /* representable, but 512 GiB per store: the allocation itself fails */
    st = vt_kv_cache_create(host, VT_F32, 4, 1, 8192, 16, INT64_C(1) << 24, &c, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "lower kv_cache.ctx_size"));
    /* nonsense geometry is refused before any arithmetic */
    st = vt_kv_cache_create(host, VT_F16, 1, 1, 64, 16, 0, &c, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_INVALID);
    /* a q8_0 cache needs whole blocks of 32 along the head dimension */
    st = vt_kv_cache_create(host, VT_Q8_0, 1, 1, 48, 16, 64, &c, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "head_dim is 48"));
    vt_kv_cache_free(c);
}

static void test_engine_absurd_context(void) {
    vt_model *wide = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_model_load(wide_path, &wide, &err), VT_OK);
    vt_options o;
    options_for(&o, "reference");
    o.kv_cache_dtype = VT_F32;
    vt_error set_err = {0};
    CU_ASSERT_EQUAL(vt_options_set(&o, "kv_cache.ctx_size", "16777216", "cli", &set_err), VT_OK);
    vt_engine *e = NULL;
    vt_status st = vt_engine_create(&o, wide, false, &e, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(e);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kv_cache.ctx_size"));
    /* the same model at a sane context works */
    o.ctx_size = 64;
    CU_ASSERT_EQUAL(vt_engine_create(&o, wide, false, &e, &err), VT_OK);
    vt_engine_free(e);
    vt_model_free(wide);
}

/* The last line of s (without its '\n'), into buf. */
static const char *last_line(const char *s, char *buf, size_t size) {
    size_t n = s ? strlen(s) : 0;
    while (n > 0 && s[n - 1] == '\n') n--;
    size_t start = n;
    while (start > 0 && s[start - 1] != '\n') start--;
    snprintf(buf, size, "%.*s", (int)(n - start), s ? s + start : "");
    return buf;
}

/* The whole CLI with VT_FAIL_ALLOC_AT=n: every run ends in success or one
 * clear error with the documented exit code (6 out of memory, 5 when the only
 * usable backend's init ran out), never a signal, sanitizer report or leak
 * (LSan runs at exit of the instrumented vt in the sanitizer build). Stops
 * after 10 successes in a row: n is past the run's last allocation. */
static void test_cli_with_failures(void) {
    int successes_in_a_row = 0, nomem = 0;
    for (long n = 1; n <= 200 && successes_in_a_row < 10; n++) {
        char cmd[2048], line[600];
        snprintf(cmd, sizeof cmd,
                 "VT_FAIL_ALLOC_AT=%ld timeout 120 '%s' run -m '%s' --tokens 5,6,7,8,9 -n 3 --temp 0 -c 32", n,
                 VT_CLI_PATH, tiny_path);
        char *out = NULL, *err = NULL;
        int rc = vt_test_run_cmd(cmd, &out, &err);
        last_line(err, line, sizeof line);
        bool ok;
        if (rc == 0) {
            successes_in_a_row++;
            ok = true;
        } else {
            successes_in_a_row = 0;
            nomem += rc == 6;
            ok = (rc == 6 || (rc == 5 && strstr(line, "out of memory"))) && strncmp(line, "vt: ", 4) == 0;
        }
        if (!ok) printf("\n  VT_FAIL_ALLOC_AT=%ld: exit %d: %s\n", n, rc, err ? err : "");
        CU_ASSERT(ok);
        free(out);
        free(err);
    }
    CU_ASSERT(successes_in_a_row == 10);
    CU_ASSERT(nomem >= 3); /* the KV cache's stores and an activation arena at least */
}

int main(void) {
    CU_TestInfo tests[] = {
        {"engine build, every host allocation failing in turn (reference)", test_engine_build_reference},
        {"engine build, every host allocation failing in turn (default backend)", test_engine_build_default},
        {"forward, every host allocation failing in turn (reference)", test_forward_reference},
        {"forward, every host allocation failing in turn (default backend)", test_forward_default},
        {"forward, every host allocation failing in turn (onednn; skipped when not built)", test_forward_onednn},
        {"KV cache of absurd sizes: out of memory, not a crash", test_kv_cache_absurd_sizes},
        {"engine with an absurd context: out of memory naming kv_cache.ctx_size", test_engine_absurd_context},
        {"vt run with VT_FAIL_ALLOC_AT=1, 2, ...: clean exits only", test_cli_with_failures},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("oom", setup, teardown, tests);
    return vt_test_run();
}
