/* test_kv_lever_installed.c — the KV-cache levers on the INSTALLED vt.
 *
 * The bug this guards against hid behind green unit tests: under
 * VT_KV_CACHE_F32=1 the cache became f32 while the attention path still
 * produced another dtype, and only the real binary died. So this test
 * installs the current build tree (`cmake --install VT_BUILD_DIR --prefix
 * TMP`) and runs TMP/bin/vt as a subprocess with an empty environment apart
 * from the lever under test (no VT_BACKEND_PATH, no LD_LIBRARY_PATH: the
 * binary finds libvt and its backends as an installed copy would), on a
 * synthesized qwen3 Q4_K_M model:
 *   - VT_KV_CACHE_F32=1 and VT_KV_CACHE_DTYPE=q8_0 on every installed
 *     backend: a forward completes, the plan shows the cache dtype and its
 *     source, every store writes it, and the cache's ops a backend declines
 *     (onednn: all of them) run on the fallback;
 *   - the precedence chain: --kv-cache-dtype > VT_KV_CACHE_DTYPE >
 *     VT_KV_CACHE_F32=1 > [kv_cache] dtype (--config or VT_CONFIG, "ini N")
 *     > default f16, and VT_KV_CACHE_F32=0 has no effect;
 *   - invalid values exit non-zero naming the variable / ini line and the
 *     accepted values;
 *   - every documented lever that shapes the plan changes the --explain
 *     output (threads and the sampling knobs do not shape it). */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain_parse.h"
#include "synth.h"
#include "util.h"

#define N_LAYER 2
#define MAX_BACKENDS 16

static char prefix[1024], model[1024];
static char installed[MAX_BACKENDS][64];
static int n_installed;
static char default_backend[64]; /* what the installed vt picks with no lever */

/* Backend names from the libvt-backend-NAME.so files of a folder, sorted. */
static int backend_names(const char *dir, char names[][64], int max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        const char *s = de->d_name;
        size_t len = strlen(s);
        if (strncmp(s, "libvt-backend-", 14) != 0 || len < 18 || strcmp(s + len - 3, ".so") != 0) continue;
        snprintf(names[n++], 64, "%.*s", (int)(len - 17), s + 14);
    }
    closedir(d);
    for (int i = 0; i < n; i++) /* insertion sort: a handful of names */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[64];
            memcpy(t, names[j], 64);
            memcpy(names[j], names[j - 1], 64);
            memcpy(names[j - 1], t, 64);
        }
    return n;
}

/* Run the installed vt with only PATH, the sanitizer options (if this test
 * runs under them) and `env` (e.g. "VT_KV_CACHE_F32=1") in its environment. */
static int run_installed(char **out, char **err, const char *env, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int run_installed(char **out, char **err, const char *env, const char *fmt, ...) {
    char args[2048], san[1024] = "", cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    static const char *const san_vars[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(san_vars[i]);
        size_t len = strlen(san);
        if (v) snprintf(san + len, sizeof san - len, "%s='%s' ", san_vars[i], v);
    }
    snprintf(cmd, sizeof cmd, "env -i PATH=/usr/bin:/bin %s%s '%s/bin/vt' %s", san, env ? env : "", prefix, args);
    return vt_test_run_cmd(cmd, out, err);
}

static int suite_init(void) {
    char built[MAX_BACKENDS][64], log[1024], cmd[4096];
    int n_built = backend_names(VT_BUILD_DIR "/lib/vt", built, MAX_BACKENDS);
    if (n_built == 0) {
        fprintf(stderr, "no backends built in %s/lib/vt\n", VT_BUILD_DIR);
        return 1;
    }
    vt_test_tmpfile(prefix, sizeof prefix, "prefix");
    vt_test_tmpfile(log, sizeof log, "install.log");
    snprintf(cmd, sizeof cmd, "cmake --install '%s' --prefix '%s' >'%s' 2>&1", VT_BUILD_DIR, prefix, log);
    if (system(cmd) != 0) {
        char *text = vt_test_read_file(log, NULL);
        fprintf(stderr, "cmake --install failed:\n%s\n", text ? text : "");
        free(text);
        return 1;
    }
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/lib/vt", prefix);
    n_installed = backend_names(dir, installed, MAX_BACKENDS);
    /* The install carries every built backend (none silently dropped). */
    if (n_installed != n_built) {
        fprintf(stderr, "%d backends built, %d installed in %s\n", n_built, n_installed, dir);
        return 1;
    }
    for (int i = 0; i < n_built; i++)
        if (strcmp(built[i], installed[i]) != 0) return 1;

    vt_synth_params p = {0};
    p.arch = "qwen3";
    p.n_embd = 256; /* Q4_K blocks are 256 wide: every matrix really is Q4_K/Q6_K */
    p.n_layer = N_LAYER;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 64;
    p.n_ff = 512;
    p.n_vocab = 400;
    p.n_ctx = 512;
    p.type = "q4_k_m";
    p.seed = 27;
    vt_error err = {0};
    vt_test_tmpfile(model, sizeof model, "lever-qwen3-q4_k_m.gguf");
    if (vt_synth_write(&p, model, &err) != VT_OK) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* ----------------------------------------------------------- the lever */

static int count_ids(const char *out) {
    int n = 0;
    for (const char *p = out ? out : ""; *p;) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= 400) break;
        n++;
        if (*end != ',') break;
        p = end + 1;
    }
    return n;
}

/* Every store node of both plans writes a `cache` cache. */
static void assert_stores(const vt_explain *x, const char *cache) {
    char want[32];
    snprintf(want, sizeof want, "%s,%s,i64", cache, cache);
    int stores = 0, matching = 0;
    for (int i = 0; i < x->n; i++) {
        const vt_explain_node *n = &x->nodes[i];
        if (strcmp(n->op, "reshape_and_cache") != 0) continue;
        stores++;
        const char *tail = strchr(strchr(n->in, ',') + 1, ','); /* skip k, v: ",kc,vc,i64" */
        if (tail && strcmp(tail + 1, want) == 0) matching++;
    }
    CU_ASSERT_EQUAL(stores, 2 * N_LAYER);
    CU_ASSERT_EQUAL(matching, stores);
}

/* Under `env` (one lever) a forward completes on every installed backend,
 * the plan's cache is `dtype` from `source`, and every store writes it. The
 * chosen backend runs part of the plan; the cache's ops it declines (onednn
 * takes no attention or store; nothing of a 1.0 plugin meets a q8_0 cache)
 * run on the fallback, and that is visible in the plan. */
static void lever_on_every_installed_backend(const char *env, const char *dtype, const char *source) {
    CU_ASSERT_FATAL(n_installed > 0);
    for (int b = 0; b < n_installed; b++) {
        char *out = NULL, *err = NULL;
        int rc = run_installed(&out, &err, env,
                               "run -m '%s' -p 'Once upon a time' -n 4 --ids --ignore-eos --temp 0 --backend %s --explain",
                               model, installed[b]);
        if (rc != 0) printf("\n%s: exit %d\n%s", installed[b], rc, err ? err : "");
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_EQUAL(count_ids(out), 4); /* the forward completed and generated */
        CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "generated 4 tokens"));
        vt_explain x;
        CU_ASSERT_FATAL(vt_explain_parse(err, &x));
        CU_ASSERT_STRING_EQUAL(x.kv_dtype, dtype);
        CU_ASSERT_STRING_EQUAL(x.kv_source, source);
        CU_ASSERT_STRING_EQUAL(x.backend, installed[b]);
        assert_stores(&x, dtype);
        /* The chosen backend runs part of the plan itself. */
        CU_ASSERT(vt_explain_count(&x, NULL, NULL, installed[b], NULL, NULL) > 0);
        const int attn_on = vt_explain_count(&x, NULL, "attention", installed[b], NULL, NULL);
        const int store_on = vt_explain_count(&x, NULL, "reshape_and_cache", installed[b], NULL, NULL);
        printf("\n  %-10s %d of %d nodes on it (attention %d, store %d of %d), stores %s", installed[b],
               vt_explain_count(&x, NULL, NULL, installed[b], NULL, NULL), x.n, attn_on, store_on, 2 * N_LAYER, dtype);
        /* simd and the reference run the cache's ops themselves at every dtype; onednn none. */
        if (strcmp(installed[b], "simd") == 0 || strcmp(installed[b], "reference") == 0) {
            CU_ASSERT_EQUAL(attn_on, 2 * N_LAYER);
            CU_ASSERT_EQUAL(store_on, 2 * N_LAYER);
        }
        if (strcmp(installed[b], "onednn") == 0) CU_ASSERT_EQUAL(attn_on + store_on, 0);
        vt_explain_free(&x);
        free(out);
        free(err);
    }
}

static void test_kv_cache_f32_on_every_installed_backend(void) {
    lever_on_every_installed_backend("VT_KV_CACHE_F32=1", "f32", "env VT_KV_CACHE_F32");
    /* And the installed binary uses the installed backends, not the build tree's. */
    char *out = NULL;
    CU_ASSERT_EQUAL(run_installed(&out, NULL, NULL, "backends"), 0);
    char want[1200];
    snprintf(want, sizeof want, "%s/lib/vt/libvt-backend-reference.so", prefix);
    CU_ASSERT_PTR_NOT_NULL(strstr(out ? out : "", want));
    CU_ASSERT_PTR_NULL(strstr(out ? out : "", VT_BUILD_DIR));
    free(out);
}

/* Found through PATH, as an installed program is run, from a working
 * directory that has nothing to do with the install: the bare name in
 * argv[0] must not send the backend search to the working directory. */
static void test_installed_vt_through_path_finds_its_backends(void) {
    char *out = NULL, *err = NULL, san[1024] = "", cmd[4200];
    static const char *const san_vars[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(san_vars[i]);
        const size_t len = strlen(san);
        if (v) snprintf(san + len, sizeof san - len, "%s='%s' ", san_vars[i], v);
    }
    snprintf(cmd, sizeof cmd, "cd / && env -i PATH='%s/bin:/usr/bin:/bin' %s vt backends --brief", prefix, san);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, &err), 0);
    for (int i = 0; i < n_installed; i++) {
        char want[2200];
        snprintf(want, sizeof want, "%s/lib/vt/libvt-backend-%s.so", prefix, installed[i]);
        if (!strstr(out ? out : "", want)) printf("\nvt found through PATH does not list %s:\n%s%s", want, out, err);
        CU_ASSERT_PTR_NOT_NULL(strstr(out ? out : "", want));
    }
    free(out);
    free(err);
}

/* The installed systemd unit starts the installed vt with the installed
 * ini: under this prefix, not /usr's paths (which do not exist here). */
static void test_installed_unit_names_the_installed_files(void) {
    char unit[1200], want[3300];
    snprintf(unit, sizeof unit, "%s/lib/systemd/system/vt-serve.service", prefix);
    char *text = vt_test_read_file(unit, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    snprintf(want, sizeof want, "ExecStart=\"%s/bin/vt\" serve --config \"%s/etc/vt/vt-serve.ini\" ", prefix, prefix);
    if (!strstr(text, want)) printf("\n%s lacks '%s'", unit, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, want));
    free(text);
}

static void test_kv_cache_q8_0_on_every_installed_backend(void) {
    lever_on_every_installed_backend("VT_KV_CACHE_DTYPE=q8_0", "q8_0", "env VT_KV_CACHE_DTYPE");
}

/* ------------------------------------------------------- precedence */

/* --dry-run plan of the installed vt: explain text (malloc'ed) and rc. */
static char *dry_run(int *rc, const char *env, const char *extra) {
    char *err = NULL;
    *rc = run_installed(NULL, &err, env, "run -m '%s' --dry-run %s", model, extra ? extra : "");
    return err;
}

static char *write_ini(const char *name, const char *text) {
    static char path[8][1024];
    static int next;
    char *p = path[next++ % 8];
    vt_test_tmpfile(p, sizeof path[0], name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

/* The node lines only (what the plan is), for comparing two explain outputs. */
static char *plan_signature(const char *text) {
    vt_explain x;
    vt_explain_parse(text, &x);
    size_t cap = (size_t)x.n * 320 + 1, len = 0;
    char *sig = calloc(1, cap);
    for (int i = 0; i < x.n && sig; i++) {
        const vt_explain_node *n = &x.nodes[i];
        len += (size_t)snprintf(sig + len, cap - len, "%s %s %s %s %s %s\n", n->phase, n->label, n->op, n->backend,
                                n->in, n->out);
    }
    vt_explain_free(&x);
    return sig;
}

typedef struct kv_case {
    const char *what;
    const char *env;    /* environment of the run */
    const char *args;   /* extra arguments ("%s" = the ini path) */
    const char *dtype;  /* expected cache dtype */
    const char *source; /* expected source */
} kv_case;

static void test_precedence_chain(void) {
    const char *ini = write_ini("kv.ini", "; kv cache from a config file\n[kv_cache]\ndtype = bf16\n");
    const char *ini_f32 = write_ini("kv32.ini", "[kv_cache]\n\n\ndtype = f32\n");
    const char *ini_q8 = write_ini("kvq8.ini", "[kv_cache]\ndtype = q8_0\n");
    char arg_config_q8[1200];
    snprintf(arg_config_q8, sizeof arg_config_q8, "--config '%s'", ini_q8);
    char env_config[1200], arg_config[1200], arg_config_f32[1200], cli_and_config[1300];
    snprintf(env_config, sizeof env_config, "VT_CONFIG='%s'", ini);
    snprintf(arg_config, sizeof arg_config, "--config '%s'", ini);
    snprintf(arg_config_f32, sizeof arg_config_f32, "--config '%s'", ini_f32);
    snprintf(cli_and_config, sizeof cli_and_config, "--kv-cache-dtype f32 %s", arg_config);
    const kv_case cases[] = {
        {"nothing set", NULL, NULL, "f16", "default"},
        {"VT_KV_CACHE_F32=1", "VT_KV_CACHE_F32=1", NULL, "f32", "env VT_KV_CACHE_F32"},
        {"VT_KV_CACHE_F32=0 has no effect", "VT_KV_CACHE_F32=0", NULL, "f16", "default"},
        {"VT_KV_CACHE_DTYPE beats VT_KV_CACHE_F32", "VT_KV_CACHE_DTYPE=bf16 VT_KV_CACHE_F32=1", NULL, "bf16",
         "env VT_KV_CACHE_DTYPE"},
        {"--kv-cache-dtype beats both", "VT_KV_CACHE_DTYPE=bf16 VT_KV_CACHE_F32=1", "--kv-cache-dtype f16", "f16",
         "cli"},
        {"ini via --config", NULL, arg_config, "bf16", "ini 3"},
        {"ini via VT_CONFIG", env_config, NULL, "bf16", "ini 3"},
        {"VT_KV_CACHE_F32=1 beats the ini", "VT_KV_CACHE_F32=1", arg_config, "f32", "env VT_KV_CACHE_F32"},
        {"VT_KV_CACHE_F32=0 leaves the ini", "VT_KV_CACHE_F32=0", arg_config, "bf16", "ini 3"},
        {"--kv-cache-dtype beats the ini", NULL, cli_and_config, "f32", "cli"},
        {"ini line numbers count blank lines", NULL, arg_config_f32, "f32", "ini 4"},
        {"VT_KV_CACHE_DTYPE=q8_0", "VT_KV_CACHE_DTYPE=q8_0", NULL, "q8_0", "env VT_KV_CACHE_DTYPE"},
        {"ini dtype = q8_0", NULL, arg_config_q8, "q8_0", "ini 2"},
        {"--kv-cache-dtype q8_0 beats the env", "VT_KV_CACHE_DTYPE=bf16", "--kv-cache-dtype q8_0", "q8_0", "cli"},
    };
    int rc = 0;
    char *baseline = dry_run(&rc, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char *base_sig = plan_signature(baseline);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const kv_case *c = &cases[i];
        char *text = dry_run(&rc, c->env, c->args);
        vt_explain x;
        bool parsed = vt_explain_parse(text, &x);
        if (rc != 0 || !parsed || strcmp(x.kv_dtype, c->dtype) != 0 || strcmp(x.kv_source, c->source) != 0)
            printf("\n%s: exit %d, kv-cache %s from '%s' (want %s from '%s')\n%s", c->what, rc, x.kv_dtype,
                   x.kv_source, c->dtype, c->source, rc ? text : "");
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT(parsed);
        CU_ASSERT_STRING_EQUAL(x.kv_dtype, c->dtype);
        CU_ASSERT_STRING_EQUAL(x.kv_source, c->source);
        assert_stores(&x, c->dtype);
        /* The lever changed the plan itself (the stores' cache dtype and the
         * producers feeding them), not only the summary line, exactly when
         * it changed the dtype away from the default. */
        char *sig = plan_signature(text);
        CU_ASSERT_EQUAL(strcmp(sig, base_sig) != 0, strcmp(c->dtype, "f16") != 0);
        free(sig);
        vt_explain_free(&x);
        free(text);
    }
    free(base_sig);
    free(baseline);
}

typedef struct bad_case {
    const char *what;
    const char *env;
    const char *args;
    const char *names[3]; /* must appear in the error */
} bad_case;

static void test_invalid_values_are_errors(void) {
    const char *ini = write_ini("bad.ini", "[kv_cache]\n; the next line is wrong\ndtype = f8\n");
    char arg_config[1200];
    snprintf(arg_config, sizeof arg_config, "--config '%s'", ini);
    const bad_case cases[] = {
        {"VT_KV_CACHE_DTYPE=fp7", "VT_KV_CACHE_DTYPE=fp7", "", {"VT_KV_CACHE_DTYPE", "fp7", "f32, f16, bf16, q8_0"}},
        {"VT_KV_CACHE_F32=yes", "VT_KV_CACHE_F32=yes", "", {"VT_KV_CACHE_F32", "yes", "1 or 0"}},
        {"VT_KV_CACHE_F32=yes even with VT_KV_CACHE_DTYPE set", "VT_KV_CACHE_F32=yes VT_KV_CACHE_DTYPE=f16", "",
         {"VT_KV_CACHE_F32", "yes", "1 or 0"}},
        {"ini dtype = f8", NULL, arg_config, {"bad.ini:3", "f8", "f32, f16, bf16, q8_0"}},
        {"--kv-cache-dtype fp8", NULL, "--kv-cache-dtype fp8", {"--kv-cache-dtype", "fp8", "f32, f16, bf16, q8_0"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const bad_case *c = &cases[i];
        char *out = NULL, *err = NULL;
        int rc = run_installed(&out, &err, c->env, "run -m '%s' -p hi -n 2 %s", model, c->args);
        /* 2 is the CLI's exit code for invalid input (core/cli/cli.c): an
         * error, not a crash (>= 128) and not a silent default (0). */
        CU_ASSERT_EQUAL(rc, 2);
        CU_ASSERT(!out || out[0] == '\0'); /* nothing generated */
        for (int k = 0; k < 3; k++) {
            bool found = err && strstr(err, c->names[k]);
            if (!found) printf("\n%s: error does not name '%s': %s", c->what, c->names[k], err ? err : "(none)");
            CU_ASSERT(found);
        }
        free(out);
        free(err);
    }
}

/* ------------------------------------------------- every plan lever */

typedef struct lever_case {
    const char *what;
    const char *env;
    const char *args;
    const char *ini;  /* ini text, passed with --config (NULL = none) */
    const char *want; /* substring of the explain output that shows the change */
} lever_case;

/* Each documented lever that shapes the plan, through each of its sources,
 * changes the --explain output, and in the way it says. (threads and the
 * sampling knobs do not shape the plan; they are not levers of it.) */
static void test_every_plan_lever_changes_the_plan(void) {
    int rc = 0;
    char *baseline = dry_run(&rc, NULL, NULL);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    vt_explain bx;
    CU_ASSERT_FATAL(vt_explain_parse(baseline, &bx));
    snprintf(default_backend, sizeof default_backend, "%s", bx.backend);
    vt_explain_free(&bx);
    /* Another installed backend than the default one, for the backend lever. */
    const char *other = NULL;
    bool has_onednn = false;
    for (int i = 0; i < n_installed; i++) {
        if (!other && strcmp(installed[i], default_backend) != 0) other = installed[i];
        has_onednn |= strcmp(installed[i], "onednn") == 0;
    }
    char backend_arg[128], backend_env[128], backend_ini[160], backend_want[128];
    snprintf(backend_arg, sizeof backend_arg, "--backend %.63s", other ? other : "");
    snprintf(backend_env, sizeof backend_env, "VT_BACKEND=%.63s", other ? other : "");
    snprintf(backend_ini, sizeof backend_ini, "[runtime]\nbackend = %.63s\n", other ? other : "");
    snprintf(backend_want, sizeof backend_want, "backend: %.63s (", other ? other : "");
    char path_env[1200];
    snprintf(path_env, sizeof path_env, "VT_BACKEND_PATH='%s'", VT_TEST_PLUGIN_DIR);
    char path_ini[1300];
    snprintf(path_ini, sizeof path_ini, "[backends]\npath = %s\n", VT_TEST_PLUGIN_DIR);
    char path_arg[1200];
    snprintf(path_arg, sizeof path_arg, "--backend-path '%s' --backend kv_bf16_only", VT_TEST_PLUGIN_DIR);
    const lever_case cases[] = {
        {"--kv-cache-dtype", NULL, "--kv-cache-dtype bf16", NULL, "in=bf16,bf16,bf16,bf16,i64"},
        {"VT_KV_CACHE_DTYPE", "VT_KV_CACHE_DTYPE=f32", NULL, NULL, "in=f32,f32,f32,f32,i64"},
        {"VT_KV_CACHE_F32", "VT_KV_CACHE_F32=1", NULL, NULL, "in=f32,f32,f32,f32,i64"},
        {"[kv_cache] dtype", NULL, NULL, "[kv_cache]\ndtype = bf16\n", "in=bf16,bf16,bf16,bf16,i64"},
        {"--backend", NULL, other ? backend_arg : NULL, NULL, backend_want},
        {"VT_BACKEND", other ? backend_env : NULL, NULL, NULL, backend_want},
        {"[runtime] backend", NULL, NULL, other ? backend_ini : NULL, backend_want},
        {"-b", NULL, "-b 7", NULL, "up to 7 tokens per call"},
        {"[runtime] batch_size", NULL, NULL, "[runtime]\nbatch_size = 9\n", "up to 9 tokens per call"},
        {"-c", NULL, "-c 64", NULL, "64 tokens in 4 blocks of 16"},
        /* not a whole number of blocks: the pool rounds up, a sequence keeps the 100 asked for */
        {"-c (rounded)", NULL, "-c 100", NULL, "a sequence holds up to 100 (-c/--ctx-size)"},
        {"VT_CTX_SIZE", "VT_CTX_SIZE=96", NULL, NULL, "96 tokens in 6 blocks of 16"},
        {"[kv_cache] ctx_size", NULL, NULL, "[kv_cache]\nctx_size = 128\n", "128 tokens in 8 blocks of 16"},
        {"--block-size", NULL, "--block-size 32", NULL, "in 16 blocks of 32"},
        {"[kv_cache] block_size", NULL, NULL, "[kv_cache]\nblock_size = 64\n", "in 8 blocks of 64"},
        {"--backend-path", NULL, path_arg, NULL, "op=convert"},
        {"VT_BACKEND_PATH", path_env, "--backend kv_bf16_only", NULL, "op=convert"},
        {"[backends] path", NULL, "--backend kv_bf16_only", path_ini, "op=convert"},
        {"--fallback none", NULL, has_onednn ? "--backend onednn --fallback none" : NULL, NULL,
         "declined by backend 'onednn' and there is no fallback"},
        {"[runtime] fallback", NULL, has_onednn ? "--backend onednn" : NULL, has_onednn ? "[runtime]\nfallback = none\n" : NULL,
         "declined by backend 'onednn' and there is no fallback"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const lever_case *c = &cases[i];
        if (!c->env && !c->args && !c->ini) {
            /* Only a build with neither simd nor onednn (or without onednn
             * for the fallback levers) lacks the backend these cases need. */
            char why[160];
            snprintf(why, sizeof why, "lever %s needs %s, which this build lacks", c->what,
                     strstr(c->what, "fallback") ? "the onednn backend" : "a second installed backend");
            vt_test_skip(why);
            continue;
        }
        char args[2048] = "";
        if (c->ini) snprintf(args, sizeof args, "--config '%s' ", write_ini("lever.ini", c->ini));
        if (c->args) snprintf(args + strlen(args), sizeof args - strlen(args), "%s", c->args);
        char *text = dry_run(&rc, c->env, args);
        /* The fallback lever's change is a refused build: the same plan with
         * the fallback gone cannot exist for a backend without attention. */
        bool refusal = strstr(c->want, "no fallback") != NULL;
        CU_ASSERT_EQUAL(rc, refusal ? 4 : 0);
        bool shows = text && strstr(text, c->want);
        if (!shows) printf("\nlever %s: output lacks '%s':\n%s", c->what, c->want, text ? text : "");
        CU_ASSERT(shows);
        CU_ASSERT_PTR_NULL(strstr(baseline, c->want)); /* ...which the default plan does not show */
        free(text);
    }
    free(baseline);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"installed vt, VT_KV_CACHE_F32=1, every backend: forward completes, plan stores f32",
         test_kv_cache_f32_on_every_installed_backend},
        {"installed vt, VT_KV_CACHE_DTYPE=q8_0, every backend: forward completes, plan stores q8_0, what a backend "
         "declines runs on the fallback",
         test_kv_cache_q8_0_on_every_installed_backend},
        {"the installed systemd unit names the installed vt and ini", test_installed_unit_names_the_installed_files},
        {"installed vt found through PATH from another folder finds its backends",
         test_installed_vt_through_path_finds_its_backends},
        {"installed vt: cli > VT_KV_CACHE_DTYPE > VT_KV_CACHE_F32 > ini > default", test_precedence_chain},
        {"installed vt: invalid lever values exit 2 naming the variable/line and the accepted values",
         test_invalid_values_are_errors},
        {"installed vt: every documented plan lever changes --explain", test_every_plan_lever_changes_the_plan},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("kv_lever_installed", suite_init, NULL, tests);
    return vt_test_run();
}
