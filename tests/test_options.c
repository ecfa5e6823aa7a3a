/* test_options.c — options: precedence, sources, validation, ini parsing.
 *
 * Every test starts and ends with the VT_* variables options reads cleared
 * (the originals are restored when the suite ends), so tests cannot leak
 * environment into each other. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "usable_cpus.h"
#include "serve_options.h"
#include "util.h"

/* ---- environment hygiene ------------------------------------------------ */

static const char *const option_env_vars[] = {
    "VT_CONFIG", "VT_BACKEND", "VT_THREADS", "VT_CTX_SIZE", "VT_KV_CACHE_DTYPE", "VT_KV_CACHE_F32",
};
#define ENV_VAR_COUNT (sizeof option_env_vars / sizeof option_env_vars[0])
static char *saved_env[ENV_VAR_COUNT];

static void clear_env(void) {
    for (size_t i = 0; i < ENV_VAR_COUNT; i++) unsetenv(option_env_vars[i]);
}

static int save_env(void) {
    for (size_t i = 0; i < ENV_VAR_COUNT; i++) {
        const char *v = getenv(option_env_vars[i]);
        saved_env[i] = v ? strdup(v) : NULL;
    }
    clear_env();
    return 0;
}

static int restore_env(void) {
    for (size_t i = 0; i < ENV_VAR_COUNT; i++) {
        if (saved_env[i]) setenv(option_env_vars[i], saved_env[i], 1);
        else unsetenv(option_env_vars[i]);
        free(saved_env[i]);
        saved_env[i] = NULL;
    }
    return 0;
}

/* ---- helpers ------------------------------------------------------------ */

/* Write `text` to a fresh file named `name` in the test tmpdir; path in buf. */
static const char *write_ini(char *buf, size_t size, const char *name, const char *text) {
    vt_test_tmpfile(buf, size, name);
    FILE *f = fopen(buf, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
    return buf;
}

/* Fresh defaults + load of `ini_text` (NULL = no file); returns the status. */
static vt_status load_text(vt_options *o, const char *ini_text, vt_error *err) {
    char path[512];
    vt_options_defaults(o);
    vt_error_clear(err);
    if (!ini_text) return vt_options_load(o, NULL, err);
    return vt_options_load(o, write_ini(path, sizeof path, "config.ini", ini_text), err);
}

static bool same_serve_options(const vt_serve_options *a, const vt_serve_options *b) {
    return strcmp(a->host, b->host) == 0 && a->port == b->port && strcmp(a->chat_template, b->chat_template) == 0 &&
           strcmp(a->chat_template_file, b->chat_template_file) == 0 && strcmp(a->model_alias, b->model_alias) == 0 &&
           a->body_limit == b->body_limit && a->timeout == b->timeout && a->shutdown_grace == b->shutdown_grace;
}

/* Field-by-field equality (memcmp would also compare padding bytes). */
static bool same_options(const vt_options *a, const vt_options *b) {
    bool same = strcmp(a->backend, b->backend) == 0 && strcmp(a->fallback, b->fallback) == 0 &&
                a->threads == b->threads && a->batch_size == b->batch_size &&
                a->max_seqs == b->max_seqs && a->token_budget == b->token_budget &&
                a->max_waiting == b->max_waiting &&
                a->kv_cache_dtype == b->kv_cache_dtype &&
                strcmp(a->kv_cache_dtype_source, b->kv_cache_dtype_source) == 0 && a->ctx_size == b->ctx_size &&
                a->block_size == b->block_size && strcmp(a->backend_path, b->backend_path) == 0 &&
                a->temp == b->temp && a->top_k == b->top_k && a->top_p == b->top_p && a->min_p == b->min_p &&
                a->seed == b->seed && strcmp(a->config_path, b->config_path) == 0 &&
                same_serve_options(vt_serve_options_of(a), vt_serve_options_of(b));
    for (int i = 0; i < vt_options_key_count(); i++) same = same && strcmp(a->source[i], b->source[i]) == 0;
    return same;
}

static bool contains(const char *haystack, const char *needle) {
    bool found = strstr(haystack, needle) != NULL;
    if (!found) printf("\n  message \"%s\"\n  lacks   \"%s\"\n", haystack, needle);
    return found;
}

/* ---- defaults ----------------------------------------------------------- */

static void test_defaults_have_documented_values_and_source_default(void) {
    vt_options o;
    vt_options_defaults(&o);
    CU_ASSERT_STRING_EQUAL(o.backend, "");
    CU_ASSERT_STRING_EQUAL(o.fallback, ""); /* automatic: the next backend in the probe-score ranking */
    CU_ASSERT(o.threads >= 1 && o.threads <= 1024);
    CU_ASSERT_EQUAL(o.batch_size, 512);
    CU_ASSERT_EQUAL(o.max_seqs, 1);
    CU_ASSERT_EQUAL(o.token_budget, 0);
    CU_ASSERT_EQUAL(o.max_waiting, 256);
    CU_ASSERT_EQUAL(o.kv_cache_dtype, VT_F16);
    CU_ASSERT_EQUAL(o.ctx_size, 0);
    CU_ASSERT_EQUAL(o.block_size, 16);
    CU_ASSERT_STRING_EQUAL(o.backend_path, "");
    CU_ASSERT_EQUAL(o.temp, 0.8f);
    CU_ASSERT_EQUAL(o.top_k, 40);
    CU_ASSERT_EQUAL(o.top_p, 0.95f);
    CU_ASSERT_EQUAL(o.min_p, 0.05f);
    CU_ASSERT(o.seed_random); /* a fresh seed per run unless one is given */
    CU_ASSERT_STRING_EQUAL(o.kv_cache_dtype_source, "default");
    int n = 0;
    for (const char *key; (key = vt_options_key(n)) != NULL; n++)
        CU_ASSERT_STRING_EQUAL(vt_options_source(&o, key), "default");
    CU_ASSERT_EQUAL(n, vt_options_key_count());
    CU_ASSERT_PTR_NULL(vt_options_source(&o, "runtime.nope"));
}

/* With no file and no environment, loading changes nothing. */
static void test_load_without_file_or_env_keeps_defaults(void) {
    clear_env();
    vt_options o, before;
    vt_error err;
    vt_options_defaults(&before);
    CU_ASSERT_EQUAL(load_text(&o, NULL, &err), VT_OK);
    CU_ASSERT(same_options(&o, &before));
}

/* ---- the KV-cache dtype precedence matrix ------------------------------- */

typedef struct dtype_levels {
    const char *ini, *env_dtype, *cli; /* values for this rotation */
    int32_t ini_v, env_dtype_v, cli_v;
} dtype_levels;

/* Rotations so that in one of them every level's value differs from the
 * level just below it (VT_KV_CACHE_F32=1 always means f32, default f16);
 * the third puts q8_0 on the ini and env levels. */
static const dtype_levels rotations[] = {
    {"bf16", "f16", "bf16", VT_BF16, VT_F16, VT_BF16},
    {"f32", "bf16", "f16", VT_F32, VT_BF16, VT_F16},
    {"q8_0", "q8_0", "bf16", VT_Q8_0, VT_Q8_0, VT_BF16},
};

static void test_kv_cache_dtype_precedence_matrix(void) {
    static const char *const f32_states[] = {NULL, "0", "1"};
    int cases = 0;
    for (size_t r = 0; r < sizeof rotations / sizeof rotations[0]; r++) {
        const dtype_levels *lv = &rotations[r];
        for (int use_cli = 0; use_cli < 2; use_cli++)
            for (int use_env_dtype = 0; use_env_dtype < 2; use_env_dtype++)
                for (int f32 = 0; f32 < 3; f32++)
                    for (int use_ini = 0; use_ini < 2; use_ini++) {
                        clear_env();
                        if (use_env_dtype) setenv("VT_KV_CACHE_DTYPE", lv->env_dtype, 1);
                        if (f32_states[f32]) setenv("VT_KV_CACHE_F32", f32_states[f32], 1);
                        char ini[128];
                        /* the dtype on line 3, after a comment */
                        snprintf(ini, sizeof ini, "; kv\n[kv_cache]\ndtype = %s\n", lv->ini);
                        vt_options o;
                        vt_error err;
                        vt_status s = load_text(&o, use_ini ? ini : NULL, &err);
                        CU_ASSERT_EQUAL_FATAL(s, VT_OK);
                        if (use_cli) CU_ASSERT_EQUAL(vt_options_set(&o, "kv_cache.dtype", lv->cli, "cli", &err), VT_OK);

                        const char *want_source;
                        int32_t want;
                        if (use_cli) want_source = "cli", want = lv->cli_v;
                        else if (use_env_dtype) want_source = "env VT_KV_CACHE_DTYPE", want = lv->env_dtype_v;
                        else if (f32 == 2) want_source = "env VT_KV_CACHE_F32", want = VT_F32;
                        else if (use_ini) want_source = "ini 3", want = lv->ini_v;
                        else want_source = "default", want = VT_F16;

                        const char *got = vt_options_source(&o, "kv_cache.dtype");
                        if (strcmp(got, want_source) != 0 || o.kv_cache_dtype != want)
                            printf("\n  rotation %zu cli=%d env_dtype=%d f32=%s ini=%d: got %s/%d, want %s/%d\n", r,
                                   use_cli, use_env_dtype, f32_states[f32] ? f32_states[f32] : "unset", use_ini, got,
                                   o.kv_cache_dtype, want_source, want);
                        CU_ASSERT_STRING_EQUAL(got, want_source);
                        CU_ASSERT_STRING_EQUAL(o.kv_cache_dtype_source, want_source);
                        CU_ASSERT_EQUAL(o.kv_cache_dtype, want);
                        cases++;
                    }
    }
    CU_ASSERT_EQUAL(cases, 3 * 2 * 2 * 3 * 2);
    clear_env();
}

/* ---- other precedence --------------------------------------------------- */

static void test_env_overrides_ini_and_cli_overrides_env(void) {
    clear_env();
    setenv("VT_THREADS", "3", 1);
    setenv("VT_BACKEND", "reference", 1);
    setenv("VT_CTX_SIZE", "2048", 1);
    vt_options o;
    vt_error err;
    CU_ASSERT_EQUAL_FATAL(load_text(&o,
                                    "[runtime]\nbackend = simd\nthreads = 2\nbatch_size = 64\n"
                                    "[kv_cache]\nctx_size = 1024\n",
                                    &err),
                          VT_OK);
    CU_ASSERT_EQUAL(o.threads, 3);
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.threads"), "env VT_THREADS");
    CU_ASSERT_STRING_EQUAL(o.backend, "reference");
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.backend"), "env VT_BACKEND");
    CU_ASSERT_EQUAL(o.ctx_size, 2048);
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "kv_cache.ctx_size"), "env VT_CTX_SIZE");
    CU_ASSERT_EQUAL(o.batch_size, 64); /* no env lever: the ini value stands */
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.batch_size"), "ini 4");
    CU_ASSERT_EQUAL(vt_options_set(&o, "runtime.threads", "1", "cli", &err), VT_OK);
    CU_ASSERT_EQUAL(o.threads, 1);
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.threads"), "cli");
    clear_env();
}

/* The source of an ini value is the line it is on: a reader that counted
 * calls instead of lines, or inih reading ahead, would show here. */
static void test_ini_sources_name_the_line(void) {
    clear_env();
    vt_options o;
    vt_error err;
    CU_ASSERT_EQUAL_FATAL(load_text(&o,
                                    "; line 1\n"
                                    "[runtime]\n"
                                    "threads = 5\n" /* line 3 */
                                    "\n"
                                    "# line 5\n"
                                    "[sampling]\n"
                                    "top_k = 7\n" /* line 7 */
                                    "   ; indented comment, line 8\n"
                                    "seed=9\n", /* line 9 */
                                    &err),
                          VT_OK);
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.threads"), "ini 3");
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "sampling.top_k"), "ini 7");
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "sampling.seed"), "ini 9");
    CU_ASSERT_EQUAL(o.threads, 5);
    CU_ASSERT_EQUAL(o.top_k, 7);
    CU_ASSERT_EQUAL(o.seed, 9u);
    CU_ASSERT(!o.seed_random);
    CU_ASSERT_EQUAL(vt_options_run_seed(&o), 9u); /* a given seed is the run's seed */
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.batch_size"), "default");
    CU_ASSERT(contains(o.config_path, "config.ini"));
}

/* Every key of every section is accepted from the ini, with its value. */
static void test_ini_sets_every_key(void) {
    clear_env();
    vt_options o;
    vt_error err;
    vt_status s = load_text(&o,
                            "[runtime]\nbackend = simd\nfallback = none\nthreads = 2\nbatch_size = 128\n"
                            "max_seqs = 8\ntoken_budget = 64\nprefill_chunk = 32\nmax_waiting = 9\n"
                            "[kv_cache]\ndtype = bf16\nctx_size = 8192\nblock_size = 32\nprefix_cache = 0\nprefix_cache_blocks = 12\n"
                            "[backends]\npath = /opt/a:/opt/b ; inline comment\n"
                            "[sampling]\ntemp = 0\ntop_k = 0\ntop_p = 0.5\nmin_p = 1\nseed = 9223372036854775807\n"
                            "[server]\nhost = ::1\nport = 0\nchat_template = llama3\nchat_template_file = /t.jinja\nmodel_alias = my model\n"
                            "body_limit = 1024\ntimeout = 0.5\nshutdown_grace = 0\ncors_origin = http://[::1]:3000\n",
                            &err);
    if (s != VT_OK) printf("\n  %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(s, VT_OK);
    CU_ASSERT_STRING_EQUAL(o.backend, "simd");
    CU_ASSERT_STRING_EQUAL(o.fallback, "none");
    CU_ASSERT_EQUAL(o.threads, 2);
    CU_ASSERT_EQUAL(o.batch_size, 128);
    CU_ASSERT_EQUAL(o.max_seqs, 8);
    CU_ASSERT_EQUAL(o.token_budget, 64);
    CU_ASSERT_EQUAL(o.prefill_chunk, 32);
    CU_ASSERT_EQUAL(o.max_waiting, 9);
    CU_ASSERT_EQUAL(o.kv_cache_dtype, VT_BF16);
    CU_ASSERT_EQUAL(o.ctx_size, 8192);
    CU_ASSERT_EQUAL(o.block_size, 32);
    CU_ASSERT_FALSE(o.prefix_cache);
    CU_ASSERT_EQUAL(o.prefix_cache_blocks, 12);
    CU_ASSERT_STRING_EQUAL(o.backend_path, "/opt/a:/opt/b");
    CU_ASSERT_EQUAL(o.temp, 0.0f);
    CU_ASSERT_EQUAL(o.top_k, 0);
    CU_ASSERT_EQUAL(o.top_p, 0.5f);
    CU_ASSERT_EQUAL(o.min_p, 1.0f);
    CU_ASSERT_EQUAL(o.seed, (uint64_t)INT64_MAX);
    CU_ASSERT_STRING_EQUAL(vt_serve_options_of(&o)->host, "::1");
    CU_ASSERT_EQUAL(vt_serve_options_of(&o)->port, 0);
    CU_ASSERT_STRING_EQUAL(vt_serve_options_of(&o)->chat_template, "llama3");
    CU_ASSERT_STRING_EQUAL(vt_serve_options_of(&o)->chat_template_file, "/t.jinja");
    CU_ASSERT_STRING_EQUAL(vt_serve_options_of(&o)->model_alias, "my model");
    CU_ASSERT_EQUAL(vt_serve_options_of(&o)->body_limit, 1024);
    CU_ASSERT_EQUAL(vt_serve_options_of(&o)->timeout, 0.5);
    CU_ASSERT_EQUAL(vt_serve_options_of(&o)->shutdown_grace, 0);
    CU_ASSERT_STRING_EQUAL(vt_serve_options_of(&o)->cors_origin, "http://[::1]:3000");
    for (int i = 0; i < vt_options_key_count(); i++)
        CU_ASSERT_NSTRING_EQUAL(vt_options_source(&o, vt_options_key(i)), "ini ", 4);
}

static void test_vt_config_names_the_file_and_an_explicit_path_wins(void) {
    clear_env();
    char from_env[512], explicit_path[512];
    write_ini(from_env, sizeof from_env, "from_env.ini", "[runtime]\nthreads = 6\n");
    write_ini(explicit_path, sizeof explicit_path, "explicit.ini", "[runtime]\n\nthreads = 7\n");
    setenv("VT_CONFIG", from_env, 1);
    vt_options o;
    vt_error err;
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_load(&o, NULL, &err), VT_OK);
    CU_ASSERT_EQUAL(o.threads, 6);
    CU_ASSERT_STRING_EQUAL(o.config_path, from_env);
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_load(&o, explicit_path, &err), VT_OK);
    CU_ASSERT_EQUAL(o.threads, 7);
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.threads"), "ini 3");
    CU_ASSERT_STRING_EQUAL(o.config_path, explicit_path);
    /* an empty VT_CONFIG means no file */
    setenv("VT_CONFIG", "", 1);
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_load(&o, NULL, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(o.config_path, "");
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "runtime.threads"), "default");
    clear_env();
}

/* What vt_options_value prints, vt_options_set takes back unchanged. */
static void test_value_round_trips_through_set(void) {
    clear_env();
    vt_options o, copy;
    vt_error err;
    CU_ASSERT_EQUAL_FATAL(load_text(&o, "[sampling]\ntemp = 0.7\ntop_p = 0.9\nmin_p = 0.1\n[runtime]\nbackend = x-1\n",
                                    &err),
                          VT_OK);
    copy = o;
    for (int i = 0; i < vt_options_key_count(); i++) {
        char value[1100];
        const char *key = vt_options_key(i);
        CU_ASSERT_EQUAL(vt_options_value(&o, key, value, sizeof value, &err), VT_OK);
        CU_ASSERT_EQUAL(vt_options_set(&copy, key, value, "cli", &err), VT_OK);
    }
    char dtype[8];
    CU_ASSERT_EQUAL(vt_options_value(&o, "kv_cache.dtype", dtype, sizeof dtype, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(dtype, "f16");
    /* values identical, only the sources now say "cli" */
    memcpy(copy.source, o.source, sizeof o.source);
    memcpy(copy.kv_cache_dtype_source, o.kv_cache_dtype_source, sizeof o.kv_cache_dtype_source);
    CU_ASSERT(same_options(&o, &copy));
    CU_ASSERT_EQUAL(vt_options_value(&o, "no.such", dtype, sizeof dtype, &err), VT_ERR_INVALID);
}

/* ---- invalid values ----------------------------------------------------- */

typedef struct bad_value {
    const char *key, *value, *accepted;
} bad_value;

static const bad_value bad_values[] = {
    {"runtime.backend", "Simd", "backend names of 1 to 63"},
    {"runtime.backend", "a b", "backend names of 1 to 63"},
    {"runtime.backend", "a123456789b123456789c123456789d123456789e123456789f123456789g123", "backend names of 1 to 63"},
    {"runtime.fallback", "Reference", "none, or empty for automatic"},
    {"runtime.fallback", "x/y", "none, or empty for automatic"},
    {"runtime.threads", "0", "integers 1..1024"},
    {"runtime.threads", "1025", "integers 1..1024"},
    {"runtime.threads", "4x", "integers 1..1024"},
    {"runtime.threads", " 4", "integers 1..1024"},
    {"runtime.threads", "+4", "integers 1..1024"},
    {"runtime.threads", "0x10", "integers 1..1024"},
    {"runtime.threads", "1.5", "integers 1..1024"},
    {"runtime.threads", "", "integers 1..1024"},
    {"runtime.threads", "99999999999999999999999", "integers 1..1024"},
    {"runtime.batch_size", "0", "integers 1..65536"},
    {"runtime.batch_size", "65537", "integers 1..65536"},
    {"runtime.max_seqs", "0", "integers 1..256"},
    {"runtime.max_seqs", "257", "integers 1..256"},
    {"runtime.token_budget", "-1", "0 (the batch size) or integers 1..65536"},
    {"runtime.token_budget", "65537", "0 (the batch size) or integers 1..65536"},
    {"runtime.max_waiting", "0", "integers 1..1048576"},
    {"runtime.max_waiting", "1048577", "integers 1..1048576"},
    {"server.host", "", "addresses or host names"},
    {"server.host", "a b", "addresses or host names"},
    {"server.port", "65536", "integers 0..65535"},
    {"server.chat_template", "jinja", "chatml, llama2, llama3, mistral"},
    {"server.model_alias", "tab\there", "printable characters"},
    {"server.body_limit", "1023", "integers 1024..1073741824"},
    {"server.timeout", "-1", "seconds 0..10000000"},
    {"server.shutdown_grace", "nan", "seconds 0..10000000"},
    {"kv_cache.dtype", "fp7", "f32, f16, bf16, q8_0"},
    {"kv_cache.dtype", "F16", "f32, f16, bf16, q8_0"},
    {"kv_cache.dtype", "q4_0", "f32, f16, bf16, q8_0"},
    {"kv_cache.ctx_size", "-1", "integers 1..16777216"},
    {"kv_cache.ctx_size", "16777217", "integers 1..16777216"},
    {"kv_cache.block_size", "0", "powers of two 1..256"},
    {"kv_cache.block_size", "3", "powers of two 1..256"},
    {"kv_cache.block_size", "24", "powers of two 1..256"},
    {"kv_cache.block_size", "512", "powers of two 1..256"},
    {"kv_cache.block_size", "-16", "powers of two 1..256"},
    {"sampling.temp", "-0.1", "finite numbers in [0, 1e+06]"},
    {"sampling.temp", "nan", "finite numbers in [0, 1e+06]"},
    {"sampling.temp", "inf", "finite numbers in [0, 1e+06]"},
    {"sampling.temp", "1e999", "finite numbers in [0, 1e+06]"},
    {"sampling.temp", "warm", "finite numbers in [0, 1e+06]"},
    {"sampling.top_k", "-2", "integers -1..2147483647"},
    {"sampling.top_k", "2147483648", "integers -1..2147483647"},
    {"sampling.top_p", "-0.5", "[0, 1]"},
    {"sampling.top_p", "1.01", "[0, 1]"},
    {"sampling.top_p", "-1e-30", "[0, 1]"},
    {"sampling.min_p", "-0.01", "[0, 1]"},
    {"sampling.min_p", "1.5", "[0, 1]"},
    {"sampling.seed", "-2", "-1 (a fresh random seed for each run and request) or integers 0..9223372036854775807"},
    {"sampling.seed", "9223372036854775808", "integers 0..9223372036854775807"}, /* past a JSON seed's int64 */
    {"sampling.seed", "18446744073709551616", "integers 0..9223372036854775807"},
    {"sampling.seed", "12a", "integers 0..9223372036854775807"},
};

/* Each bad value is refused from the CLI with the key, the value and the
 * accepted values in the message, and leaves the options as they were. */
static void test_invalid_values_are_refused_with_accepted_values(void) {
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        const bad_value *b = &bad_values[i];
        vt_options o, before;
        vt_error err;
        vt_options_defaults(&o);
        before = o;
        vt_error_clear(&err);
        CU_ASSERT_EQUAL(vt_options_set(&o, b->key, b->value, "cli", &err), VT_ERR_INVALID);
        char want[256];
        snprintf(want, sizeof want, "%s = %s: accepted values are ", b->key, b->value);
        CU_ASSERT(contains(err.msg, want));
        CU_ASSERT(contains(err.msg, b->accepted));
        CU_ASSERT(same_options(&o, &before));
    }
}

/* The same values through the ini name the file, the line, section and key. */
static void test_invalid_ini_values_name_file_and_line(void) {
    clear_env();
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        const bad_value *b = &bad_values[i];
        if (b->value[0] == ' ' || b->value[0] == '\0') continue; /* inih strips spaces: not the same value */
        const char *dot = strchr(b->key, '.');
        char ini[256], want[256];
        snprintf(ini, sizeof ini, "; comment\n\n[%.*s]\n%s = %s\n", (int)(dot - b->key), b->key, dot + 1, b->value);
        vt_options o;
        vt_error err;
        CU_ASSERT_EQUAL(load_text(&o, ini, &err), VT_ERR_INVALID);
        snprintf(want, sizeof want, "config.ini:4: [%.*s] %s = %s: accepted values are ", (int)(dot - b->key),
                 b->key, dot + 1, b->value);
        CU_ASSERT(contains(err.msg, want));
        CU_ASSERT(contains(err.msg, b->accepted));
    }
}

static void test_ini_error_message_exact(void) {
    clear_env();
    vt_options o;
    vt_error err;
    char path[512];
    vt_test_tmpfile(path, sizeof path, "config.ini");
    CU_ASSERT_EQUAL(load_text(&o, "[runtime]\nthreads = 2\n[kv_cache]\ndtype = f8\n", &err), VT_ERR_INVALID);
    char want[700];
    snprintf(want, sizeof want, "%s:4: [kv_cache] dtype = f8: accepted values are f32, f16, bf16, q8_0", path);
    CU_ASSERT_STRING_EQUAL(err.msg, want);
}

static void test_invalid_env_values_name_the_variable(void) {
    static const struct {
        const char *var, *value, *want;
    } cases[] = {
        {"VT_KV_CACHE_DTYPE", "fp7", "VT_KV_CACHE_DTYPE=fp7: accepted values are f32, f16, bf16, q8_0"},
        {"VT_KV_CACHE_DTYPE", "", "VT_KV_CACHE_DTYPE=: accepted values are f32, f16, bf16, q8_0"},
        {"VT_KV_CACHE_F32", "yes", "VT_KV_CACHE_F32=yes: accepted values are 1 or 0"},
        {"VT_KV_CACHE_F32", "true", "VT_KV_CACHE_F32=true: accepted values are 1 or 0"},
        {"VT_KV_CACHE_F32", "2", "VT_KV_CACHE_F32=2: accepted values are 1 or 0"},
        {"VT_KV_CACHE_F32", "", "VT_KV_CACHE_F32=: accepted values are 1 or 0"},
        {"VT_THREADS", "0", "VT_THREADS=0: accepted values are integers 1..1024"},
        {"VT_THREADS", "many", "VT_THREADS=many: accepted values are integers 1..1024"},
        {"VT_THREADS", "", "VT_THREADS=: accepted values are integers 1..1024"},
        {"VT_CTX_SIZE", "16777217", "VT_CTX_SIZE=16777217: accepted values are 0 (automatic"},
        {"VT_BACKEND", "../evil", "VT_BACKEND=../evil: accepted values are backend names"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        setenv(cases[i].var, cases[i].value, 1);
        vt_options o, before;
        vt_error err;
        vt_options_defaults(&before);
        CU_ASSERT_EQUAL(load_text(&o, NULL, &err), VT_ERR_INVALID);
        CU_ASSERT(contains(err.msg, cases[i].want));
        CU_ASSERT(same_options(&o, &before));
    }
    /* an invalid alias is an error even when VT_KV_CACHE_DTYPE would win */
    clear_env();
    setenv("VT_KV_CACHE_DTYPE", "bf16", 1);
    setenv("VT_KV_CACHE_F32", "on", 1);
    vt_options o;
    vt_error err;
    CU_ASSERT_EQUAL(load_text(&o, NULL, &err), VT_ERR_INVALID);
    CU_ASSERT(contains(err.msg, "VT_KV_CACHE_F32=on"));
    clear_env();
}

static void test_boundary_values_are_accepted(void) {
    static const struct {
        const char *key, *value;
    } ok[] = {
        {"runtime.threads", "1"},       {"runtime.threads", "1024"},      {"runtime.batch_size", "1"},
        {"runtime.batch_size", "65536"}, {"kv_cache.ctx_size", "0"},      {"kv_cache.ctx_size", "16777216"},
        {"runtime.max_seqs", "1"},       {"runtime.max_seqs", "256"},      {"runtime.token_budget", "0"},
        {"runtime.token_budget", "65536"}, {"runtime.max_waiting", "1"},   {"runtime.max_waiting", "1048576"},
        {"kv_cache.block_size", "1"},    {"kv_cache.block_size", "256"},  {"kv_cache.block_size", "128"},
        {"sampling.temp", "0"},          {"sampling.temp", "2.5"},        {"sampling.top_k", "2147483647"},
        {"sampling.top_p", "1"},         {"sampling.top_p", "0"},         {"sampling.min_p", "0"},
        {"sampling.min_p", "1"},         {"sampling.seed", "0"},          {"sampling.seed", "-1"},          {"runtime.backend", ""},
        {"runtime.fallback", "none"},    {"runtime.backend", "onednn"},   {"backends.path", ""},
        {"runtime.backend", "a123456789b123456789c123456789d123456789e123456789f123456789g12"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        vt_options o;
        vt_error err;
        vt_options_defaults(&o);
        vt_status s = vt_options_set(&o, ok[i].key, ok[i].value, "cli", &err);
        if (s != VT_OK) printf("\n  %s = %s: %s\n", ok[i].key, ok[i].value, err.msg);
        CU_ASSERT_EQUAL(s, VT_OK);
        CU_ASSERT_STRING_EQUAL(vt_options_source(&o, ok[i].key), "cli");
        char back[128];
        CU_ASSERT_EQUAL(vt_options_value(&o, ok[i].key, back, sizeof back, &err), VT_OK);
        if (strcmp(ok[i].key, "sampling.top_p") != 0) CU_ASSERT_STRING_EQUAL(back, ok[i].value);
    }
}

static void test_backend_path_length_limit(void) {
    vt_options o;
    vt_error err;
    char path[1100];
    vt_options_defaults(&o);
    memset(path, 'a', 1023);
    path[1023] = '\0';
    CU_ASSERT_EQUAL(vt_options_set(&o, "backends.path", path, "cli", &err), VT_OK);
    CU_ASSERT_EQUAL(strlen(o.backend_path), 1023u);
    path[1023] = 'a';
    path[1024] = '\0';
    CU_ASSERT_EQUAL(vt_options_set(&o, "backends.path", path, "cli", &err), VT_ERR_INVALID);
    CU_ASSERT(contains(err.msg, "at most 1023 characters"));
    CU_ASSERT_EQUAL(strlen(o.backend_path), 1023u);
}

static void test_unknown_option_name_is_refused(void) {
    vt_options o;
    vt_error err;
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_set(&o, "runtime.thread", "2", "cli", &err), VT_ERR_INVALID);
    CU_ASSERT(contains(err.msg, "unknown option 'runtime.thread'"));
    CU_ASSERT(contains(err.msg, "runtime.threads"));
}

/* ---- ini structure errors ----------------------------------------------- */

static void expect_ini_error(const char *text, vt_status code, const char *want1, const char *want2) {
    clear_env();
    vt_options o, before;
    vt_error err;
    vt_options_defaults(&before);
    CU_ASSERT_EQUAL(load_text(&o, text, &err), code);
    CU_ASSERT(contains(err.msg, want1));
    if (want2) CU_ASSERT(contains(err.msg, want2));
    CU_ASSERT(same_options(&o, &before));
}

static void test_unknown_section_names_the_line(void) {
    expect_ini_error("[runtime]\nthreads = 2\n[runtim]\nthreads = 3\n", VT_ERR_FORMAT,
                     "config.ini:3: unknown section [runtim]", "known sections are [runtime], [kv_cache]");
    /* an unknown section with no keys at all is still caught */
    expect_ini_error("[runtime]\n\n\n[extra]\n", VT_ERR_FORMAT, "config.ini:4: unknown section [extra]", NULL);
}

static void test_unknown_key_names_the_line(void) {
    expect_ini_error("[runtime]\nthreads = 2\n\n[kv_cache]\ndtype = f32\nblocksize = 8\n", VT_ERR_FORMAT,
                     "config.ini:6: unknown key 'blocksize' in [kv_cache]", "known keys are dtype, ctx_size, block_size");
}

static void test_key_outside_section_duplicate_and_continuation(void) {
    expect_ini_error("threads = 2\n", VT_ERR_FORMAT, "config.ini:1: 'threads' is outside any section", NULL);
    expect_ini_error("[runtime]\nthreads = 2\nthreads = 3\n", VT_ERR_FORMAT,
                     "config.ini:3: [runtime] threads is set again (first on line 2)", NULL);
    /* inih would append an indented line to the previous value */
    expect_ini_error("[runtime]\nbackend = simd\n  reference\n", VT_ERR_FORMAT, "config.ini:3: indented line",
                     "'backend'");
    expect_ini_error("[runtime]\nbackend = simd\n  threads = 4\n", VT_ERR_FORMAT, "config.ini:3: indented line", NULL);
    /* an indented key right after a header is an ordinary key */
    clear_env();
    vt_options o;
    vt_error err;
    CU_ASSERT_EQUAL(load_text(&o, "[runtime]\n  threads = 4\n", &err), VT_OK);
    CU_ASSERT_EQUAL(o.threads, 4);
}

static void test_syntax_error_names_the_line(void) {
    expect_ini_error("[runtime]\nthreads = 2\nthis is not ini\n", VT_ERR_FORMAT, "config.ini:3: expected", NULL);
    expect_ini_error("[runtime\nthreads = 2\n", VT_ERR_FORMAT, "config.ini:1: expected", NULL);
}

/* Windows line ends and a UTF-8 byte-order mark read like plain lines. */
static void test_crlf_and_bom_are_accepted(void) {
    clear_env();
    vt_options o;
    vt_error err;
    vt_status s = load_text(&o, "\xEF\xBB\xBF[runtime]\r\nthreads = 3\r\n[kv_cache]\r\ndtype = bf16\r\n", &err);
    if (s != VT_OK) printf("\n  %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(s, VT_OK);
    CU_ASSERT_EQUAL(o.threads, 3);
    CU_ASSERT_EQUAL(o.kv_cache_dtype, VT_BF16);
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "kv_cache.dtype"), "ini 4");
    expect_ini_error("\xEF\xBB\xBF[runtme]\r\n", VT_ERR_FORMAT, "config.ini:1: unknown section [runtme]", NULL);
}

static void test_directory_as_config_is_an_error(void) {
    clear_env();
    vt_options o;
    vt_error err;
    vt_options_defaults(&o);
    vt_status s = vt_options_load(&o, vt_test_tmpdir(), &err);
    CU_ASSERT(s == VT_ERR_IO);
    CU_ASSERT(contains(err.msg, vt_test_tmpdir()));
}

static void test_nul_byte_is_refused(void) {
    clear_env();
    char path[512];
    vt_test_tmpfile(path, sizeof path, "nul.ini");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite("[runtime]\nthreads = 2\0 junk\n", 1, 28, f);
    fclose(f);
    vt_options o;
    vt_error err;
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_load(&o, path, &err), VT_ERR_FORMAT);
    CU_ASSERT(contains(err.msg, "nul.ini:2: line contains a NUL byte"));
}

/* inih's buffer is 200 bytes (ini_max_line): longer lines must be refused,
 * never cut. The longest line that fits works. */
static void test_long_lines_are_an_error_not_truncated(void) {
    clear_env();
    char text[1200];
    char value[1000];
    /* 7 ("path = ") + 190 = 197 characters: the longest accepted line */
    memset(value, 'p', 190);
    value[190] = '\0';
    snprintf(text, sizeof text, "[backends]\npath = %s\n", value);
    vt_options o;
    vt_error err;
    vt_status s = load_text(&o, text, &err);
    if (s != VT_OK) printf("\n  %s\n", err.msg);
    CU_ASSERT_EQUAL(s, VT_OK);
    CU_ASSERT_STRING_EQUAL(o.backend_path, value);
    /* one more character, and a much longer one: errors naming the line */
    memset(value, 'p', 191);
    value[191] = '\0';
    snprintf(text, sizeof text, "[backends]\npath = %s\n", value);
    expect_ini_error(text, VT_ERR_FORMAT, "config.ini:2: line is 198 characters long",
                     "longer than 197 characters, the most a line may have");
    memset(value, 'p', 900);
    value[900] = '\0';
    /* a line that inih would cut at 199 so that "threads = 64" looked like a line of its own */
    snprintf(text, sizeof text, "[runtime]\n; %.*s threads = 64\nbackend = simd\n", 300, value);
    expect_ini_error(text, VT_ERR_FORMAT, "config.ini:2: line is longer than 197 characters", "the most a line may have");
    /* exactly 200 characters: said to be over the limit, not "more than 200" */
    snprintf(text, sizeof text, "[runtime]\n; %.*s\n", 198, value);
    expect_ini_error(text, VT_ERR_FORMAT, "config.ini:2: line is longer than 197 characters", "the most a line may have");
}

static void test_missing_file_is_an_error_naming_it(void) {
    clear_env();
    char path[512];
    vt_test_tmpfile(path, sizeof path, "does-not-exist.ini");
    vt_options o, before;
    vt_error err;
    vt_options_defaults(&o);
    before = o;
    CU_ASSERT_EQUAL(vt_options_load(&o, path, &err), VT_ERR_IO);
    CU_ASSERT(contains(err.msg, path));
    CU_ASSERT(contains(err.msg, "No such file"));
    CU_ASSERT(same_options(&o, &before));
    setenv("VT_CONFIG", path, 1);
    CU_ASSERT_EQUAL(vt_options_load(&o, NULL, &err), VT_ERR_IO);
    CU_ASSERT(contains(err.msg, "VT_CONFIG"));
    CU_ASSERT(contains(err.msg, path));
    clear_env();
}

/* Good values before the bad line, or a good file and a bad environment,
 * leave nothing behind: the caller's options are exactly as before. */
static void test_failed_load_leaves_options_unchanged(void) {
    clear_env();
    char path[512];
    vt_options o, before;
    vt_error err;
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_set(&o, "sampling.seed", "7", "cli", &err), VT_OK);
    before = o;
    write_ini(path, sizeof path, "partial.ini", "[runtime]\nthreads = 3\nbackend = simd\n[kv_cache]\ndtype = f4\n");
    CU_ASSERT_EQUAL(vt_options_load(&o, path, &err), VT_ERR_INVALID);
    CU_ASSERT(same_options(&o, &before));
    CU_ASSERT_STRING_EQUAL(o.config_path, "");

    write_ini(path, sizeof path, "good.ini", "[runtime]\nthreads = 3\n");
    setenv("VT_CTX_SIZE", "lots", 1);
    CU_ASSERT_EQUAL(vt_options_load(&o, path, &err), VT_ERR_INVALID);
    CU_ASSERT(contains(err.msg, "VT_CTX_SIZE=lots"));
    CU_ASSERT(same_options(&o, &before));
    clear_env();
}

/* The installed template sets nothing: every key still reports "default". */
static void test_installed_template_sets_nothing(void) {
    clear_env();
    vt_options o, before;
    vt_error err;
    vt_options_defaults(&o);
    before = o;
    vt_status s = vt_options_load(&o, VT_SOURCE_DIR "/conf/vt.ini", &err);
    if (s != VT_OK) printf("\n  %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(s, VT_OK);
    for (int i = 0; i < vt_options_key_count(); i++)
        CU_ASSERT_STRING_EQUAL(vt_options_source(&o, vt_options_key(i)), "default");
    snprintf(before.config_path, sizeof before.config_path, "%s", VT_SOURCE_DIR "/conf/vt.ini");
    CU_ASSERT(same_options(&o, &before));
}

/* Uncommenting every "; key = value" line of the template gives a valid
 * file with the same values as the defaults (so the documented defaults are
 * the real ones), except threads, whose default depends on the machine. */
static void test_template_documents_the_real_defaults(void) {
    clear_env();
    size_t size;
    char *text = vt_test_read_file(VT_SOURCE_DIR "/conf/vt.ini", &size);
    CU_ASSERT_FATAL(text != NULL);
    char *out = malloc(size + 1);
    CU_ASSERT_FATAL(out != NULL);
    size_t used = 0;
    int keys = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        /* keys are written ";key = value"; prose comments are "; words" */
        bool is_key = line[0] == ';' && line[1] >= 'a' && line[1] <= 'z' && strchr(line, '=') &&
                      strncmp(line + 1, "threads", 7) != 0;
        bool is_header = line[0] == '[';
        if (!is_key && !is_header) continue;
        const char *body = is_key ? line + 1 : line;
        used += (size_t)sprintf(out + used, "%s\n", body);
        keys += is_key;
    }
    out[used] = '\0';
    vt_options o, before;
    vt_error err;
    vt_options_defaults(&before);
    vt_status s = load_text(&o, out, &err);
    if (s != VT_OK) printf("\n  %s\n", err.msg);
    CU_ASSERT_EQUAL(s, VT_OK);
    CU_ASSERT_EQUAL(keys, vt_options_key_count() - 1);
    for (int i = 0; i < vt_options_key_count(); i++) {
        char got[1100], want[1100];
        vt_options_value(&o, vt_options_key(i), got, sizeof got, &err);
        vt_options_value(&before, vt_options_key(i), want, sizeof want, &err);
        CU_ASSERT_STRING_EQUAL(got, want);
    }
    free(out);
    free(text);
}

/* ---- layers: the library knows its own sections; vt serve declares [server] */

/* Without vt serve's layer the library has no [server]: a file holding one is
 * refused, saying whose section it is, and no server key can be set. */
static void test_library_alone_knows_no_server_section(void) {
    CU_ASSERT_EQUAL_FATAL(vt_options_declare_layer(NULL, NULL), VT_OK);
    clear_env();
    vt_options o;
    vt_error err;
    CU_ASSERT_EQUAL(load_text(&o, "[server]\nport = 9000\n", &err), VT_ERR_FORMAT);
    CU_ASSERT(contains(err.msg, "section [server] holds vt serve's settings"));
    CU_ASSERT(contains(err.msg, ":2:")); /* at its first key */
    CU_ASSERT(contains(err.msg, "[runtime], [kv_cache], [backends], [sampling], [backend.NAME]"));
    /* the header alone, as the installed template has it (every key commented out), is no setting */
    CU_ASSERT_EQUAL(load_text(&o, "[runtime]\nthreads = 2\n[server]\n; port = 8080\n", &err), VT_OK);
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_set(&o, "server.port", "9000", "cli", &err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_options_key_count(), VT_OPTIONS_KEY_COUNT);
    CU_ASSERT_PTR_NULL(vt_options_key(VT_OPTIONS_KEY_COUNT));
    CU_ASSERT_EQUAL_FATAL(vt_serve_options_declare(&err), VT_OK);
    /* declared, the same file loads and the keys follow the library's */
    CU_ASSERT_EQUAL(load_text(&o, "[server]\nport = 9000\n", &err), VT_OK);
    CU_ASSERT_EQUAL(vt_serve_options_of(&o)->port, 9000);
    CU_ASSERT_STRING_EQUAL(vt_options_source(&o, "server.port"), "ini 2");
    CU_ASSERT_STRING_EQUAL(vt_options_key(VT_OPTIONS_KEY_COUNT), "server.host");
}

/* A layer may not take the library's sections nor break the limits. */
static void test_layer_declaration_is_checked(void) {
    static const char *const names[] = {"x"}, *const accepted[] = {"anything"};
    vt_option_layer bad = *vt_serve_option_layer();
    vt_error err = {0};
    bad.section = "runtime";
    CU_ASSERT_EQUAL(vt_options_declare_layer(&bad, &err), VT_ERR_INVALID);
    bad = *vt_serve_option_layer();
    bad.n_keys = VT_OPTIONS_LAYER_KEYS_MAX + 1;
    CU_ASSERT_EQUAL(vt_options_declare_layer(&bad, &err), VT_ERR_INVALID);
    bad = *vt_serve_option_layer();
    bad.values_size = VT_OPTIONS_LAYER_BYTES + 1;
    CU_ASSERT_EQUAL(vt_options_declare_layer(&bad, &err), VT_ERR_INVALID);
    bad = *vt_serve_option_layer();
    bad.names = names, bad.accepted = accepted, bad.n_keys = 1, bad.section = "Server";
    CU_ASSERT_EQUAL(vt_options_declare_layer(&bad, &err), VT_ERR_INVALID);
    /* the refusals left vt serve's layer in place */
    CU_ASSERT_STRING_EQUAL(vt_options_key(VT_OPTIONS_KEY_COUNT), "server.host");
}

/* The default thread count is the CPUs the process may use: confined to
 * one CPU (as taskset -c N or systemd's CPUAffinity= confine it), 1. */
static void test_default_threads_follow_the_affinity_mask(void) {
    cpu_set_t saved, one;
    CU_ASSERT_FATAL(sched_getaffinity(0, sizeof saved, &saved) == 0);
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &saved)) first++;
    CU_ASSERT_FATAL(first < CPU_SETSIZE);
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CU_ASSERT_FATAL(sched_setaffinity(0, sizeof one, &one) == 0);
    vt_options o;
    vt_options_defaults(&o);
    const int32_t confined = o.threads, usable = vt_usable_cpus();
    CU_ASSERT_FATAL(sched_setaffinity(0, sizeof saved, &saved) == 0);
    CU_ASSERT_EQUAL(confined, 1);
    CU_ASSERT_EQUAL(usable, 1);
    vt_options_defaults(&o);
    CU_ASSERT(o.threads >= 1 && o.threads <= CPU_COUNT(&saved));
}

/* cgroup v2's cpu.max: "QUOTA PERIOD" in microseconds, or "max PERIOD". */
static void test_cpu_max_lines_give_a_cpu_count(void) {
    CU_ASSERT_EQUAL(vt_cpu_max_quota("max 100000\n"), 0);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("100000 100000\n"), 1);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("150000 100000\n"), 2); /* 1.5 CPUs: 2 threads, each busy part of the time */
    CU_ASSERT_EQUAL(vt_cpu_max_quota("50000 100000"), 1);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("400000 100000"), 4);
    CU_ASSERT_EQUAL(vt_cpu_max_quota(""), 0);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("abc"), 0);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("100000"), 0);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("-5 100000"), 0);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("100000 0"), 0);
    CU_ASSERT_EQUAL(vt_cpu_max_quota("100000 100000x"), 0);
}

int main(void) {
    vt_error err = {0};
    if (vt_serve_options_declare(&err) != VT_OK) return 1;
    static CU_TestInfo layers[] = {
        {"the library alone knows no [server]; vt serve's layer adds it", test_library_alone_knows_no_server_section},
        {"a layer's declaration is checked", test_layer_declaration_is_checked},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo precedence[] = {
        {"defaults have documented values and source default", test_defaults_have_documented_values_and_source_default},
        {"load without file or env keeps defaults", test_load_without_file_or_env_keeps_defaults},
        {"kv cache dtype precedence matrix", test_kv_cache_dtype_precedence_matrix},
        {"env overrides ini and cli overrides env", test_env_overrides_ini_and_cli_overrides_env},
        {"ini sources name the line", test_ini_sources_name_the_line},
        {"ini sets every key", test_ini_sets_every_key},
        {"VT_CONFIG names the file and an explicit path wins", test_vt_config_names_the_file_and_an_explicit_path_wins},
        {"value round trips through set", test_value_round_trips_through_set},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo validation[] = {
        {"invalid values are refused with accepted values", test_invalid_values_are_refused_with_accepted_values},
        {"invalid ini values name file and line", test_invalid_ini_values_name_file_and_line},
        {"ini error message exact", test_ini_error_message_exact},
        {"invalid env values name the variable", test_invalid_env_values_name_the_variable},
        {"boundary values are accepted", test_boundary_values_are_accepted},
        {"backend path length limit", test_backend_path_length_limit},
        {"unknown option name is refused", test_unknown_option_name_is_refused},
        {"default threads follow the affinity mask", test_default_threads_follow_the_affinity_mask},
        {"cgroup cpu.max lines give a CPU count", test_cpu_max_lines_give_a_cpu_count},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo ini[] = {
        {"unknown section names the line", test_unknown_section_names_the_line},
        {"unknown key names the line", test_unknown_key_names_the_line},
        {"key outside section, duplicate and continuation", test_key_outside_section_duplicate_and_continuation},
        {"syntax error names the line", test_syntax_error_names_the_line},
        {"NUL byte is refused", test_nul_byte_is_refused},
        {"CRLF and BOM are accepted", test_crlf_and_bom_are_accepted},
        {"directory as config is an error", test_directory_as_config_is_an_error},
        {"long lines are an error, not truncated", test_long_lines_are_an_error_not_truncated},
        {"missing file is an error naming it", test_missing_file_is_an_error_naming_it},
        {"failed load leaves options unchanged", test_failed_load_leaves_options_unchanged},
        {"installed template sets nothing", test_installed_template_sets_nothing},
        {"template documents the real defaults", test_template_documents_the_real_defaults},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("options precedence", save_env, restore_env, precedence);
    vt_test_add_suite("options validation", save_env, restore_env, validation);
    vt_test_add_suite("options ini", save_env, restore_env, ini);
    vt_test_add_suite("options layers", save_env, restore_env, layers);
    return vt_test_run();
}
