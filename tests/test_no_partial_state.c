/* test_no_partial_state.c — a refused input leaves nothing behind.
 *
 * In one process: a baseline forward pass of a tiny model; then bad plugins
 * (every tests/plugins/bad_*.so plus a text file named like a backend) asked
 * for by name, bad ini files (the bad line last, after good ones, so a
 * partial apply would show), bad environment levers and CLI values, a
 * truncated model and a failed engine next to a live one. After each, the
 * options are byte for byte what they were, and a good configuration loaded
 * afterwards builds an engine whose forward pass gives the baseline's logits
 * exactly (same backend, threads and cache: the computation is
 * deterministic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine.h"
#include "gguf_model_writer.h"
#include "hostile_models.h"
#include "model.h"
#include "options.h"
#include "util.h"

static const char *const levers[] = {"VT_CONFIG",         "VT_BACKEND",      "VT_THREADS",      "VT_CTX_SIZE",
                                     "VT_KV_CACHE_DTYPE", "VT_KV_CACHE_F32", "VT_BACKEND_PATH", "VT_FAIL_ALLOC_AT",
                                     "VT_CHECK_PLAN"};
static char model_path[512], truncated_path[512], junk_dir[512], plugin_path[1024];
static vt_model *model;
static float *baseline; /* [n_vocab] logits of the last token of `prompt` */
static const int32_t prompt[] = {5, 17, 42, 99, 123, 7};
#define N_PROMPT ((int64_t)(sizeof prompt / sizeof prompt[0]))

static void clear_levers(void) {
    for (size_t i = 0; i < sizeof levers / sizeof levers[0]; i++) unsetenv(levers[i]);
}

/* The good configuration: reference backend, 2 threads, 64-token f32 cache. */
static const char good_ini[] = "[runtime]\nbackend = reference\nthreads = 2\n[kv_cache]\ndtype = f32\nctx_size = 64\n";

static void good_options(vt_options *o) {
    vt_options_defaults(o);
    snprintf(o->backend, sizeof o->backend, "reference");
    o->threads = 2;
    o->kv_cache_dtype = VT_F32;
    o->ctx_size = 64;
}

/* Build an engine with o and run the prompt; logits into out. */
static vt_status run_forward(const vt_options *o, float *out, vt_error *err) {
    vt_engine *e = NULL;
    vt_status st = vt_engine_create(o, model, false, &e, err);
    if (st == VT_OK) st = vt_engine_eval(e, prompt, N_PROMPT, false, err);
    if (st == VT_OK) memcpy(out, vt_engine_logits(e, 0), (size_t)model->hp.n_vocab * sizeof *out);
    vt_engine_free(e);
    return st;
}

/* A good configuration runs and reproduces the baseline. */
static void expect_good_run(const vt_options *o) {
    float *got = malloc((size_t)model->hp.n_vocab * sizeof *got);
    CU_ASSERT_FATAL(got != NULL);
    vt_error err = {0};
    vt_status st = run_forward(o, got, &err);
    if (st != VT_OK) printf("\n  good configuration failed: %s\n", err.msg);
    CU_ASSERT_EQUAL(st, VT_OK);
    if (st == VT_OK) CU_ASSERT(memcmp(got, baseline, (size_t)model->hp.n_vocab * sizeof *got) == 0);
    free(got);
}

static const char *write_text(const char *name, const char *text) {
    static char paths[8][512];
    static int next;
    char *path = paths[next++ % 8];
    vt_test_tmpfile(path, 512, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

static int setup(void) {
    clear_levers();
    vt_error err = {0};
    vt_test_tmpfile(model_path, sizeof model_path, "tiny.gguf");
    vt_test_tmpfile(truncated_path, sizeof truncated_path, "truncated.gguf");
    if (hm_write_tiny(model_path, NULL, 0, &err) || gmw_copy_truncated(model_path, truncated_path, 5000, &err) ||
        vt_model_load(model_path, &model, &err)) {
        fprintf(stderr, "test_no_partial_state: %s\n", err.msg);
        return 1;
    }
    /* a text file named like a backend, next to the bad test plugins */
    vt_test_tmpfile(junk_dir, sizeof junk_dir, "junk");
    mkdir(junk_dir, 0755);
    char junk[600];
    snprintf(junk, sizeof junk, "%s/libvt-backend-garbage.so", junk_dir);
    FILE *f = fopen(junk, "w");
    if (!f) return 1;
    fputs("not a shared object\n", f);
    fclose(f);
    snprintf(plugin_path, sizeof plugin_path, "%s:%s", VT_TEST_PLUGIN_DIR, junk_dir);

    baseline = malloc((size_t)model->hp.n_vocab * sizeof *baseline);
    vt_options o;
    good_options(&o);
    if (!baseline || run_forward(&o, baseline, &err) != VT_OK) {
        fprintf(stderr, "test_no_partial_state: baseline: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int teardown(void) {
    clear_levers();
    free(baseline);
    vt_model_free(model);
    return 0;
}

static void test_bad_plugins(void) {
    static const char *const bad[] = {"bad_abi_major", "bad_future_minor", "bad_init_fails", "bad_name_mismatch",
                                      "bad_no_init",   "bad_no_name",      "bad_no_shutdown", "bad_no_supports",
                                      "bad_noentry",   "bad_nonsense_caps", "bad_null_table", "bad_probe_zero",
                                      "bad_small_struct", "garbage"};
    vt_options o;
    good_options(&o);
    snprintf(o.backend_path, sizeof o.backend_path, "%s", plugin_path);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vt_options asked = o;
        snprintf(asked.backend, sizeof asked.backend, "%s", bad[i]);
        vt_engine *e = NULL;
        vt_error err = {0};
        vt_status st = vt_engine_create(&asked, model, false, &e, &err);
        CU_ASSERT_EQUAL(st, VT_ERR_BACKEND);
        CU_ASSERT_PTR_NULL(e);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i]));
        /* as the fallback too */
        snprintf(asked.backend, sizeof asked.backend, "reference");
        snprintf(asked.fallback, sizeof asked.fallback, "%s", bad[i]);
        CU_ASSERT_EQUAL(vt_engine_create(&asked, model, false, &e, &err), VT_ERR_BACKEND);
        CU_ASSERT_PTR_NULL(e);
    }
    /* with the bad plugins still on the path (refused), and without them */
    expect_good_run(&o);
    setenv("VT_BACKEND_PATH", plugin_path, 1);
    vt_options plain;
    good_options(&plain);
    expect_good_run(&plain);
    unsetenv("VT_BACKEND_PATH");
    expect_good_run(&plain);
}

static void test_bad_ini_lines(void) {
    /* good lines first, the bad one last: nothing of them may stick. A bad
     * value is VT_ERR_INVALID; a file that is not well-formed ini for vt
     * (unknown section, a key twice, a continuation, not a line) VT_ERR_FORMAT. */
    static const struct {
        const char *text;
        vt_status status;
    } bad[] = {
        {"[runtime]\nthreads = 7\nbatch_size = 3\n[kv_cache]\ndtype = bf16\nctx_size = 32\nblock_size = 3\n",
         VT_ERR_INVALID},
        {"[runtime]\nthreads = 7\n[sampling]\ntemp = 0.1\ntop_p = 2\n", VT_ERR_INVALID},
        {"[runtime]\nthreads = 7\n[kv_cache]\ndtype = f16\n[gpu]\nlayers = 3\n", VT_ERR_FORMAT},
        {"[runtime]\nthreads = 7\nthreads = 8\n", VT_ERR_FORMAT},
        {"[runtime]\nthreads = 7\n[backends]\npath = /a\n  /b\n", VT_ERR_FORMAT},
        {"[runtime]\nthreads = 7\nthis is not an ini line\n", VT_ERR_FORMAT},
        {"[runtime]\nbackend = Bad.Name\n", VT_ERR_INVALID},
    };
    vt_options o;
    vt_options_defaults(&o);
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_options_load(&o, write_text("good.ini", good_ini), &err), VT_OK);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vt_options before = o;
        const char *path = write_text("bad.ini", bad[i].text);
        vt_error_clear(&err);
        CU_ASSERT_EQUAL(vt_options_load(&o, path, &err), bad[i].status);
        VT_ASSERT_ERROR(err, bad[i].status);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path)); /* names the file (and line) */
        CU_ASSERT(memcmp(&before, &o, sizeof o) == 0);
        /* through VT_CONFIG the same */
        setenv("VT_CONFIG", path, 1);
        CU_ASSERT_EQUAL(vt_options_load(&o, NULL, &err), bad[i].status);
        unsetenv("VT_CONFIG");
        CU_ASSERT(memcmp(&before, &o, sizeof o) == 0);
    }
    /* the options that survived are the good file's: they run as the baseline */
    expect_good_run(&o);
    /* and a fresh good load after all that does too */
    vt_options fresh;
    vt_options_defaults(&fresh);
    CU_ASSERT_EQUAL(vt_options_load(&fresh, write_text("good2.ini", good_ini), &err), VT_OK);
    expect_good_run(&fresh);
}

static void test_bad_levers(void) {
    static const struct {
        const char *var, *value;
    } bad[] = {
        {"VT_THREADS", "0"},         {"VT_THREADS", "10000"},      {"VT_THREADS", ""},
        {"VT_CTX_SIZE", "-5"},       {"VT_CTX_SIZE", "1e9"},       {"VT_KV_CACHE_DTYPE", "q4_0"},
        {"VT_KV_CACHE_F32", "yes"},  {"VT_BACKEND", "../../evil"}, {"VT_BACKEND", "x y"},
        {"VT_CHECK_PLAN", "yes"},
    };
    vt_options o;
    vt_options_defaults(&o);
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_options_load(&o, write_text("good.ini", good_ini), &err), VT_OK);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* valid levers set alongside, applied before the bad one in the work copy */
        setenv("VT_CTX_SIZE", "128", 1);
        setenv("VT_KV_CACHE_F32", "1", 1);
        setenv(bad[i].var, bad[i].value, 1);
        vt_options before = o;
        vt_error_clear(&err);
        CU_ASSERT_EQUAL(vt_options_load(&o, NULL, &err), VT_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i].var));
        CU_ASSERT(memcmp(&before, &o, sizeof o) == 0);
        clear_levers();
    }
    /* bad CLI values: each refused, nothing changed */
    static const char *const cli[][2] = {
        {"runtime.threads", "0"},        {"runtime.threads", "10000"}, {"kv_cache.ctx_size", "1000000000000"},
        {"kv_cache.block_size", "3"},    {"kv_cache.dtype", "F32"},    {"runtime.batch_size", "0x10"},
        {"sampling.temp", "nan"},        {"sampling.top_p", "-1"},     {"sampling.seed", "-2"}, /* -1 is "random" */
        {"no.such_key", "1"},
    };
    for (size_t i = 0; i < sizeof cli / sizeof cli[0]; i++) {
        vt_options before = o;
        vt_error_clear(&err);
        CU_ASSERT_EQUAL(vt_options_set(&o, cli[i][0], cli[i][1], "cli", &err), VT_ERR_INVALID);
        CU_ASSERT(err.msg[0] != '\0');
        CU_ASSERT(memcmp(&before, &o, sizeof o) == 0);
    }
    expect_good_run(&o);
    /* a good environment afterwards is applied and runs */
    setenv("VT_THREADS", "2", 1);
    setenv("VT_KV_CACHE_DTYPE", "f32", 1);
    vt_options env;
    vt_options_defaults(&env);
    snprintf(env.backend, sizeof env.backend, "reference");
    env.ctx_size = 64;
    CU_ASSERT_EQUAL(vt_options_load(&env, NULL, &err), VT_OK);
    clear_levers();
    CU_ASSERT_EQUAL(env.threads, 2);
    expect_good_run(&env);
}

static void test_bad_model_then_good(void) {
    vt_model *m = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL(vt_model_load(truncated_path, &m, &err), VT_ERR_FORMAT);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(vt_model_load("/nonexistent/model.gguf", &m, &err), VT_ERR_IO);
    vt_options o;
    good_options(&o);
    expect_good_run(&o);
}

/* A failed engine next to a live one must not take the live one's threads
 * (the host's current thread pool) down with it. */
static void test_failed_engine_beside_live_one(void) {
    vt_options o;
    good_options(&o);
    vt_engine *live = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&o, model, false, &live, &err), VT_OK);
    vt_options bad = o;
    snprintf(bad.backend, sizeof bad.backend, "no_such_backend");
    vt_engine *dead = NULL;
    CU_ASSERT_EQUAL(vt_engine_create(&bad, model, false, &dead, &err), VT_ERR_INVALID); /* no such name */
    /* and one that is built and freed again */
    vt_engine *brief = NULL;
    CU_ASSERT_EQUAL(vt_engine_create(&o, model, false, &brief, &err), VT_OK);
    vt_engine_free(brief);
    CU_ASSERT_EQUAL(vt_engine_eval(live, prompt, N_PROMPT, false, &err), VT_OK);
    CU_ASSERT(memcmp(vt_engine_logits(live, 0), baseline, (size_t)model->hp.n_vocab * sizeof(float)) == 0);
    vt_engine_free(live);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"bad plugins by name, then a good configuration runs", test_bad_plugins},
        {"bad ini lines (after good ones) change nothing", test_bad_ini_lines},
        {"bad environment levers and CLI values change nothing", test_bad_levers},
        {"a bad model file, then a good one runs", test_bad_model_then_good},
        {"a failed engine beside a live one", test_failed_engine_beside_live_one},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("no partial state", setup, teardown, tests);
    return vt_test_run();
}
