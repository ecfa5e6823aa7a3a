/* test_session_api.c — the public embedder API (include/vt/vt.h) on the
 * real engine path: settings validated like the CLI's, the same logits as
 * the engine the CLI uses, errors as messages, explain output. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine_fixture.h"
#include "explain_parse.h"
#include "synth.h"
#include "util.h"
#include "vt/vt.h"

static char model_path[1024];

static int write_model(void) {
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    vt_error err = {0};
    if (vt_synth_shape(&p, "tiny", &err) != VT_OK) return 1;
    p.type = "q8_0";
    p.seed = 11;
    vt_test_tmpfile(model_path, sizeof model_path, "session.gguf");
    return vt_synth_write(&p, model_path, &err) == VT_OK ? 0 : 1;
}

static void test_logits_equal_the_engine_path(void) {
    const char *settings[] = {"runtime.backend=reference", "kv_cache.dtype=f32", "runtime.threads=2", NULL};
    vt_session_options o = {sizeof o, NULL, settings, true};
    vt_session *s = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_OK);
    int32_t *ids = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(vt_session_tokenize(s, "Once upon a time", 16, true, &ids, &n, err, sizeof err), VT_OK);
    CU_ASSERT_FATAL(n >= 3);
    CU_ASSERT_EQUAL_FATAL(vt_session_eval(s, ids, n, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_session_n_past(s), (int64_t)n);
    vt_fixture f;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&f, model_path, "reference", VT_F32, true), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, ids, (int64_t)n, false, &f.err), VT_OK);
    const int32_t V = vt_session_n_vocab(s);
    for (size_t t = 0; t < n; t++) { /* same path, same arithmetic: bit-identical */
        const float *a = vt_session_logits(s, (int64_t)t), *b = vt_engine_logits(f.engine, (int64_t)t);
        CU_ASSERT_FATAL(a && b);
        CU_ASSERT_EQUAL(memcmp(a, b, (size_t)V * sizeof *a), 0);
    }
    CU_ASSERT_PTR_NULL(vt_session_logits(s, (int64_t)n));
    /* one more token goes through decode */
    int32_t next = 5;
    CU_ASSERT_EQUAL(vt_session_eval(s, &next, 1, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_session_n_past(s), (int64_t)n + 1);
    char piece[32];
    CU_ASSERT(vt_session_token_bytes(s, ids[1], piece, sizeof piece) > 0);
    CU_ASSERT_EQUAL(vt_session_token_bytes(s, V + 7, piece, sizeof piece), -1);
    vt_session_reset(s);
    CU_ASSERT_EQUAL(vt_session_n_past(s), 0);
    free(ids);
    vt_fixture_close(&f);
    vt_session_close(s);
}

static void test_settings_are_validated_like_the_cli(void) {
    vt_session *s = NULL;
    char err[512] = "";
    const char *bad_dtype[] = {"kv_cache.dtype=f8", NULL};
    vt_session_options o = {sizeof o, NULL, bad_dtype, false};
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "f32, f16, bf16"));
    const char *unknown[] = {"kv_cache.colour=red", NULL};
    o.settings = unknown;
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "colour")); /* names the key it does not know */
    /* and lists the keys it takes: not [sampling]'s, which libvt refuses */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "kv_cache.dtype"));
    CU_ASSERT_PTR_NULL(strstr(err, "sampling."));
    const char *twice[] = {"runtime.threads=2", "kv_cache.dtype=f32", "runtime.threads=3", NULL};
    o.settings = twice;
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "'runtime.threads=2' and 'runtime.threads=3': the key is given twice"));
    const char *no_eq[] = {"kv_cache.dtype", NULL};
    o.settings = no_eq;
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_ERR_INVALID);
    /* sampling is a request's (vt_batch_request), never a setting libvt would take and ignore */
    const char *sampling[] = {"sampling.temp=1.5", NULL};
    o.settings = sampling;
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "sampling.temp") && strstr(err, "per request") ? err : NULL);
    vt_batch *b = NULL;
    CU_ASSERT_EQUAL(vt_batch_open(model_path, &o, &b, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(b);
    /* NULL out-pointers are refused with a message, not written through */
    o.settings = NULL;
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, NULL, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_open(model_path, &o, NULL, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_session_open("/nonexistent/model.gguf", NULL, &s, err, sizeof err), VT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent/model.gguf"));
    /* options whose struct_size was never set (or ends before settings) are
     * refused, not read as no settings at all */
    for (uint32_t size = 0; size <= 8; size += 4) {
        vt_session_options unset = {size, NULL, bad_dtype, false};
        CU_ASSERT_EQUAL(vt_session_open(model_path, &unset, &s, err, sizeof err), VT_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "options.struct_size"));
        CU_ASSERT_PTR_NULL(s);
    }
}

/* A NULL session or batch is refused by every call, never followed
 * (vt.h's rule): statuses are VT_ERR_INVALID with a message, getters their
 * empty answers, void calls nothing. The log levels are named by vt.h. */
static void test_null_handles(void) {
    char err[256] = "";
    int32_t *ids = NULL, n_seqs = 7;
    size_t n_ids = 0;
    uint64_t id = 0;
    vt_batch_request r;
    vt_batch_request_init(&r);
    CU_ASSERT_EQUAL(vt_session_n_vocab(NULL), 0);
    CU_ASSERT_EQUAL(vt_session_n_past(NULL), 0);
    vt_session_reset(NULL);
    CU_ASSERT_EQUAL(vt_session_tokenize(NULL, "hi", 2, true, &ids, &n_ids, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "NULL"));
    CU_ASSERT_EQUAL(vt_session_token_bytes(NULL, 1, err, sizeof err), -1);
    CU_ASSERT_PTR_NULL(vt_session_logits(NULL, 0));
    vt_session_explain(NULL, stderr);
    CU_ASSERT_EQUAL(vt_batch_n_vocab(NULL), 0);
    CU_ASSERT_EQUAL(vt_batch_add(NULL, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_add_n(NULL, &r, 1, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_step(NULL, &n_seqs, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_cancel(NULL, 1, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_remove(NULL, 1, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_tokenize(NULL, "hi", 2, true, false, &ids, &n_ids, err, sizeof err), VT_ERR_INVALID);
    vt_batch_stats st = {.n_steps = 9};
    vt_batch_get_stats(NULL, &st);
    CU_ASSERT_EQUAL(st.n_steps, 0);
    vt_batch_cache_stats cs = {.struct_size = sizeof cs};
    vt_batch_get_cache_stats(NULL, &cs);
    CU_ASSERT_EQUAL(vt_batch_cached_tokens(NULL, 1), -1);
    CU_ASSERT_EQUAL(vt_batch_n_admit_next(NULL), 0);
    CU_ASSERT_PTR_NULL(vt_batch_meta_string(NULL, "general.name"));
    CU_ASSERT_EQUAL(vt_batch_n_ctx(NULL), 0);
    CU_ASSERT_EQUAL(vt_batch_kv_cache_bytes(NULL), 0);
    CU_ASSERT_EQUAL(vt_batch_token_bytes(NULL, 1, err, sizeof err), -1);
    CU_ASSERT_EQUAL(vt_batch_token_text(NULL, 1, err, sizeof err), -1);
    CU_ASSERT_EQUAL(vt_batch_default_stop_ids(NULL, NULL, 0), 0);
    vt_batch_explain(NULL, stderr);
    vt_session_close(NULL);
    vt_batch_close(NULL);
    /* vt.h alone names the levels */
    vt_set_log_level(VT_LOG_INFO);
    vt_set_log_level(VT_LOG_WARN);
}

/* What a log callback was handed, for test_shared_config_file. */
static char logged[2048];
static void keep_message(void *user, int level, const char *who, const char *message) {
    (void)user, (void)level, (void)who;
    const size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", message);
}

/* A config file shared with vt run and vt serve may hold [sampling]: libvt
 * takes the rest and says it leaves that to them (sampling is a request's);
 * config_path "" reads no file at all, not even the one VT_CONFIG names. */
static void test_shared_config_file(void) {
    char ini[1024], bad[1024], err[512] = "";
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(ini, sizeof ini, "shared.ini",
                                                       "[runtime]\nthreads = 2\n[sampling]\ntemp = 0.5\n"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(bad, sizeof bad, "bad.ini", "[runtime]\nthreads = many\n"));
    logged[0] = '\0';
    vt_set_log_callback(keep_message, NULL);
    vt_session_options o;
    vt_session_options_init(&o);
    o.config_path = ini;
    vt_session *s = NULL;
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_OK);
    vt_session_close(s);
    vt_set_log_callback(NULL, NULL);
    CU_ASSERT(strstr(logged, "sampling.temp (from ") && strstr(logged, "shared.ini:4) is left to vt run"));
    setenv("VT_CONFIG", bad, 1);
    s = NULL;
    CU_ASSERT_EQUAL(vt_session_open(model_path, NULL, &s, err, sizeof err), VT_ERR_INVALID); /* NULL: VT_CONFIG's */
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "threads"));
    o.config_path = "";
    CU_ASSERT_EQUAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_OK); /* "": none */
    vt_session_close(s);
    unsetenv("VT_CONFIG");
}

/* token_bytes returns the token's whole length whatever cap is (snprintf's
 * rule) and writes at most cap bytes; logits of an evaluation are gone once
 * the session is reset. */
static void test_token_bytes_and_reset(void) {
    vt_session *s = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_session_open(model_path, NULL, &s, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_session_eval(s, NULL, 1, err, sizeof err), VT_ERR_INVALID); /* no ids to read */
    int checked = 0;
    for (int32_t id = 0; id < vt_session_n_vocab(s); id++) {
        char whole[256], part[256];
        const int32_t n = vt_session_token_bytes(s, id, whole, sizeof whole);
        if (n < 2 || n > 64) continue;
        for (size_t cap = 0; cap <= (size_t)n; cap++) {
            memset(part, 0x55, sizeof part);
            CU_ASSERT_EQUAL(vt_session_token_bytes(s, id, part, cap), n);
            CU_ASSERT(memcmp(part, whole, cap) == 0);
            CU_ASSERT((unsigned char)part[cap] == 0x55); /* nothing past cap */
        }
        checked++;
    }
    CU_ASSERT(checked > 10);
    const int32_t ids[] = {1, 2, 3};
    CU_ASSERT_EQUAL_FATAL(vt_session_eval(s, ids, 3, err, sizeof err), VT_OK);
    CU_ASSERT_PTR_NOT_NULL(vt_session_logits(s, 0));
    vt_session_reset(s);
    CU_ASSERT_PTR_NULL(vt_session_logits(s, 0));
    vt_session_close(s);
}

static void test_explain_names_the_api_as_source(void) {
    const char *settings[] = {"kv_cache.dtype=bf16", "runtime.backend=reference", NULL};
    vt_session_options o = {sizeof o, NULL, settings, false};
    vt_session *s = NULL;
    char err[512] = "", path[1024];
    CU_ASSERT_EQUAL_FATAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_OK);
    FILE *f = fopen(vt_test_tmpfile(path, sizeof path, "explain.txt"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    vt_session_explain(s, f);
    fclose(f);
    char *text = vt_test_read_file(path, NULL);
    vt_explain x;
    CU_ASSERT(vt_explain_parse(text, &x));
    CU_ASSERT_STRING_EQUAL(x.kv_dtype, "bf16");
    CU_ASSERT_STRING_EQUAL(x.kv_source, "api");
    CU_ASSERT_STRING_EQUAL(x.backend, "reference");
    CU_ASSERT_STRING_EQUAL(x.backend_source, "api");
    CU_ASSERT(vt_explain_count(&x, NULL, "reshape_and_cache", NULL, NULL, NULL) > 0);
    vt_explain_free(&x);
    free(text);
    vt_session_close(s);
}

/* Sessions are independent and may be used from different threads at once
 * (vt.h): simd and reference sessions on the trained model, each on its
 * thread, opened, run and closed twice, give the logits (bit for bit) and
 * greedy tokens they give alone; meanwhile two auto sessions on two other
 * models calibrate into one empty cache folder and the log level and
 * callback keep changing. Auto's plan is timed, so which backend computes a
 * node may differ from run to run: its sessions are held to running, and
 * the cache to holding both models' classes (saved one over the other
 * without merging, the later file lost the earlier's). */
enum { CONCURRENT_TOKENS = 6, CONCURRENT_ROUNDS = 2, MAX_VOCAB = 4096 };

typedef struct session_job {
    const char *backend, *model;
    int32_t tokens[CONCURRENT_ROUNDS + 1][CONCURRENT_TOKENS]; /* [0]: alone */
    float logits[CONCURRENT_ROUNDS + 1][MAX_VOCAB];           /* after the last token */
    int32_t n_vocab;
    int failures;
    char err[512];
} session_job;

/* Greedy tokens after a fixed prompt and the logits after the last; false
 * (err set) on any failure. */
static bool greedy_run(session_job *j, int run) {
    char be[64];
    snprintf(be, sizeof be, "runtime.backend=%s", j->backend);
    const char *settings[] = {be, "runtime.threads=1", "kv_cache.ctx_size=64", NULL};
    vt_session_options o;
    vt_session_options_init(&o);
    o.settings = settings;
    vt_session *s = NULL;
    if (vt_session_open(j->model, &o, &s, j->err, sizeof j->err) != VT_OK) return false;
    int32_t *ids = NULL;
    size_t n = 0;
    bool ok = vt_session_tokenize(s, "Once upon a time there was", 26, true, &ids, &n, j->err, sizeof j->err) == VT_OK &&
              vt_session_eval(s, ids, n, j->err, sizeof j->err) == VT_OK;
    j->n_vocab = vt_session_n_vocab(s);
    if (j->n_vocab > MAX_VOCAB) ok = false, snprintf(j->err, sizeof j->err, "vocabulary over %d", MAX_VOCAB);
    for (int k = 0; ok && k < CONCURRENT_TOKENS; k++) {
        const float *l = vt_session_logits(s, 0);
        int32_t best = 0;
        for (int32_t i = 1; l && i < j->n_vocab; i++)
            if (l[i] > l[best]) best = i;
        j->tokens[run][k] = best;
        ok = l && vt_session_eval(s, &best, 1, j->err, sizeof j->err) == VT_OK;
    }
    const float *last = ok ? vt_session_logits(s, 0) : NULL;
    if (last) memcpy(j->logits[run], last, (size_t)j->n_vocab * sizeof *last);
    free(ids);
    vt_session_close(s);
    return last != NULL;
}

static void *session_rounds(void *arg) {
    session_job *j = arg;
    for (int r = 1; r <= CONCURRENT_ROUNDS; r++)
        if (!greedy_run(j, r)) j->failures++;
    return NULL;
}

static void ignore_message(void *user, int level, const char *who, const char *message) {
    (void)user, (void)level, (void)who, (void)message;
}

static atomic_bool flipping;
static void *flip_logging(void *arg) {
    (void)arg;
    for (int i = 0; atomic_load(&flipping); i++) {
        /* debug messages only ever to the callback: stderr stays the test's */
        if (i % 2) {
            vt_set_log_callback(ignore_message, NULL);
            vt_set_log_level(VT_LOG_DEBUG);
        } else {
            vt_set_log_level(VT_LOG_WARN);
            vt_set_log_callback(i % 4 ? ignore_message : NULL, NULL);
        }
        struct timespec pause = {0, 500000};
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* The lines of the one calibration file under cache/vt holding needle. */
static int calibration_lines(const char *cache, const char *needle) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cat '%s'/vt/calibration-*.txt | grep -c -- '%s'", cache, needle);
    char *out = NULL;
    vt_test_run_cmd(cmd, &out, NULL);
    const int n = out ? atoi(out) : -1;
    free(out);
    return n;
}

static void test_sessions_on_threads_at_once(void) {
    char cache[1024], trained[1024], f16_model[1024];
    vt_test_tmpfile(cache, sizeof cache, "session-cache");
    CU_ASSERT_FATAL(mkdir(cache, 0700) == 0 || errno == EEXIST);
    const char *dir = vt_test_data_dir("the trained and f16 models");
    snprintf(trained, sizeof trained, "%s/models/aidreams260k-q8_0.gguf", dir);
    snprintf(f16_model, sizeof f16_model, "%s/models/qwen3-tiny-f16.gguf", dir);
    const char *was = getenv("XDG_CACHE_HOME");
    char *saved = was ? strdup(was) : NULL;
    setenv("XDG_CACHE_HOME", cache, 1);
    static session_job jobs[4];
    memset(jobs, 0, sizeof jobs);
    jobs[0] = (session_job){.backend = "simd", .model = trained};
    jobs[1] = (session_job){.backend = "reference", .model = trained};
    jobs[2] = (session_job){.backend = "auto", .model = model_path}; /* the synthetic q8_0 one */
    jobs[3] = (session_job){.backend = "auto", .model = f16_model};
    enum { N = sizeof jobs / sizeof *jobs };
    for (int i = 0; i < 2; i++)
        if (!greedy_run(&jobs[i], 0)) {
            fprintf(stderr, "\n  %s alone: %s\n", jobs[i].backend, jobs[i].err);
            CU_FAIL("a backend alone failed");
        }
    atomic_store(&flipping, true);
    pthread_t logger, threads[N];
    CU_ASSERT_FATAL(pthread_create(&logger, NULL, flip_logging, NULL) == 0);
    for (int i = 0; i < N; i++) CU_ASSERT_FATAL(pthread_create(&threads[i], NULL, session_rounds, &jobs[i]) == 0);
    for (int i = 0; i < N; i++) pthread_join(threads[i], NULL);
    atomic_store(&flipping, false);
    pthread_join(logger, NULL);
    vt_set_log_callback(NULL, NULL);
    vt_set_log_level(VT_LOG_WARN);
    for (int i = 0; i < N; i++) {
        CU_ASSERT_EQUAL(jobs[i].failures, 0);
        if (jobs[i].failures) fprintf(stderr, "\n  %s on a thread: %s\n", jobs[i].backend, jobs[i].err);
    }
    for (int i = 0; i < 2; i++)
        for (int r = 1; r <= CONCURRENT_ROUNDS; r++) {
            CU_ASSERT(memcmp(jobs[i].tokens[r], jobs[i].tokens[0], sizeof jobs[i].tokens[0]) == 0);
            CU_ASSERT(memcmp(jobs[i].logits[r], jobs[i].logits[0], (size_t)jobs[i].n_vocab * sizeof(float)) == 0);
        }
    /* both auto engines' matmul classes, whichever saved last */
    CU_ASSERT(calibration_lines(cache, "w=q8_0") > 0);
    CU_ASSERT(calibration_lines(cache, "w=f16") > 0);
    if (saved) setenv("XDG_CACHE_HOME", saved, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(saved);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"token bytes: snprintf's rule; no logits after reset", test_token_bytes_and_reset},
        {"a session's logits equal the engine path's, prefill and decode", test_logits_equal_the_engine_path},
        {"settings are validated like the command line's", test_settings_are_validated_like_the_cli},
        {"a config file shared with vt: [sampling] left to it; \"\" reads none", test_shared_config_file},
        {"a NULL session or batch is refused by every call", test_null_handles},
        {"explain shows the plans and 'from api'", test_explain_names_the_api_as_source},
        {"sessions on threads at once: simd's and reference's logits as alone; two auto engines save both models' "
         "classes",
         test_sessions_on_threads_at_once},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("session api", write_model, NULL, tests);
    return vt_test_run();
}
