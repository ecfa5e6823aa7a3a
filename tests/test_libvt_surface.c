/* test_libvt_surface.c — libvt.so is a library with a surface: it exports
 * exactly what include/vt/ declares, and a program that knows only vt.h
 * builds against it, opens a session, evaluates, reads its version and
 * receives the log through its own callback. */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"
#include "util.h"
#include "vt/vt.h"

#define LIBVT_PATH VT_BUILD_DIR "/lib/libvt.so"

/* Every public header concatenated. */
static char *public_headers(void) {
    const char *dir_path = VT_SOURCE_DIR "/include/vt";
    DIR *dir = opendir(dir_path);
    if (!dir) return NULL;
    char *all = calloc(1, 1);
    size_t len = 0;
    struct dirent *e;
    while (all && (e = readdir(dir))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".h") != 0) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir_path, e->d_name);
        size_t size = 0;
        char *text = vt_test_read_file(path, &size);
        if (!text) continue;
        char *grown = realloc(all, len + size + 1);
        if (grown) {
            memcpy(grown + len, text, size + 1);
            len += size;
        }
        all = grown;
        free(text);
    }
    closedir(dir);
    return all;
}

/* Is `name(` declared in text as a whole identifier? */
static bool declares(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        const bool starts = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        const char *q = p + n;
        while (*q == ' ') q++;
        if (starts && *q == '(') return true;
    }
    return false;
}

static void test_exports_only_the_public_api(void) {
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd("nm -D --defined-only '" LIBVT_PATH "'", &out, NULL), 0);
    char *headers = public_headers();
    CU_ASSERT_PTR_NOT_NULL_FATAL(headers);
    int exported = 0, undeclared = 0;
    bool has_open = false, has_version = false;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char addr[64], type[8], name[256];
        if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3) continue;
        exported++;
        has_open |= strcmp(name, "vt_session_open") == 0;
        has_version |= strcmp(name, "vt_version") == 0;
        if (!declares(headers, name)) {
            printf("\n  exported but not declared in include/vt/: %s (%s)", name, type);
            undeclared++;
        }
    }
    printf("\n  %d symbols exported by libvt.so", exported);
    CU_ASSERT(exported > 0);
    CU_ASSERT_EQUAL(undeclared, 0);
    CU_ASSERT(has_open && has_version);
    free(headers);
    free(out);
}

/* vt_batch_stats has no struct_size: a field added to it would be written
 * past the struct of a program built before, so its layout is fixed (new
 * counters go to a struct with struct_size). */
static void test_stats_layout_is_frozen(void) {
    CU_ASSERT_EQUAL(sizeof(vt_batch_stats), 40);
    CU_ASSERT_EQUAL(offsetof(vt_batch_stats, n_waiting), 0);
    CU_ASSERT_EQUAL(offsetof(vt_batch_stats, n_running), 4);
    CU_ASSERT_EQUAL(offsetof(vt_batch_stats, free_kv_blocks), 8);
    CU_ASSERT_EQUAL(offsetof(vt_batch_stats, n_steps), 16);
    CU_ASSERT_EQUAL(offsetof(vt_batch_stats, n_preemptions), 24);
    CU_ASSERT_EQUAL(offsetof(vt_batch_stats, total_kv_blocks), 32);
}

static void count_ctx_warnings(void *user, int level, const char *who, const char *msg) {
    (void)level;
    (void)who;
    if (msg && strstr(msg, "larger than the model's trained context")) ++*(int *)user;
}

/* A context past the trained one is said once per model and context, not
 * once per process: a program's second model gets its own warning, a second
 * session of the same one none. */
static void test_ctx_warning_per_model(void) {
    const char *dir = vt_test_data_dir("test models");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    int warnings = 0;
    vt_set_log_callback(count_ctx_warnings, &warnings);
    vt_set_log_level(1);
    const char *settings[] = {"runtime.backend=reference", "runtime.threads=1", "kv_cache.ctx_size=8192", NULL};
    vt_session_options o;
    vt_session_options_init(&o);
    o.settings = settings;
    static const char *const models[] = {"qwen3-tiny-q4_k_m.gguf", "qwen3-tiny-q4_k_m.gguf", "aidreams260k-q8_0.gguf"};
    static const int after[] = {1, 1, 2}; /* trained 4096 and 128 tokens: both past at 8192 */
    for (int i = 0; i < 3; i++) {
        char path[1024], err[512] = "";
        snprintf(path, sizeof path, "%s/models/%s", dir, models[i]);
        vt_session *s = NULL;
        CU_ASSERT_EQUAL(vt_session_open(path, &o, &s, err, sizeof err), VT_OK);
        if (!s) printf("\n  %s: %s\n", models[i], err);
        vt_session_close(s);
        CU_ASSERT_EQUAL(warnings, after[i]);
    }
    vt_set_log_callback(NULL, NULL);
}

/* Build examples/embed_batch.c as exe, strict C11 as the docs say, against
 * vt.h and the libvt.so in lib_dir (run from there); false on failure,
 * with the compiler's output printed. */
static bool build_example(const char *exe, const char *lib_dir) {
    char cmd[4096], *out = NULL, *errs = NULL;
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -Wall -Wextra -Werror -pedantic %s -I'" VT_SOURCE_DIR "/include' '" VT_SOURCE_DIR
             "/examples/embed_batch.c' -o '%s' -L'%s' -lvt -Wl,-rpath,'%s'",
             VT_TEST_SANITIZE_FLAGS, exe, lib_dir, lib_dir);
    const int rc = vt_test_run_cmd(cmd, &out, &errs);
    if (rc) printf("\n%s\n%s%s", cmd, out ? out : "", errs ? errs : "");
    free(out);
    free(errs);
    return rc == 0;
}

/* The embedding example (examples/embed_batch.c) builds as the docs say,
 * strict C11, against vt.h and libvt.so alone, and runs: both requests
 * answered with text, every KV block free at the end. */
static void test_the_embedding_example_builds_and_runs(void) {
    const char *dir = vt_test_data_dir("test models");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char exe[1024], cmd[4096], *out = NULL, *errs = NULL;
    vt_test_tmpfile(exe, sizeof exe, "embed_batch");
    CU_ASSERT_FATAL(build_example(exe, VT_BUILD_DIR "/lib"));
    snprintf(cmd, sizeof cmd, "'%s' '%s/models/qwen3-tiny-q4_k_m.gguf'", exe, dir);
    int rc = vt_test_run_cmd(cmd, &out, &errs);
    if (rc) printf("\n%s\n%s%s", cmd, out ? out : "", errs ? errs : "");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(out && strstr(out, "[0] ") && strstr(out, "[1] "));
    int steps = 0, free_blocks = -1, total = -2;
    const char *last = out ? strstr(out, " steps; ") : NULL;
    while (last && last > out && last[-1] >= '0' && last[-1] <= '9') last--;
    CU_ASSERT(last && sscanf(last, "%d steps; %d of %d KV blocks free", &steps, &free_blocks, &total) == 3);
    CU_ASSERT(steps > 0);
    CU_ASSERT_EQUAL(free_blocks, total);
    free(out);
    free(errs);
}

/* libvt.so copied alone (without its vt/ folder of backends): opening says
 * where it looked for backends and how to point it elsewhere. */
static void test_libvt_without_backends_says_where_it_looked(void) {
    const char *dir = vt_test_data_dir("test models");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char lone[512], exe[1024], cmd[4096], *out = NULL, *errs = NULL;
    vt_test_tmpfile(lone, sizeof lone, "lone-libvt");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp -P '" VT_BUILD_DIR "'/lib/libvt.so* '%s'/", lone,
             lone, lone);
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd(cmd, NULL, NULL), 0);
    snprintf(exe, sizeof exe, "%s/embed", lone);
    CU_ASSERT_FATAL(build_example(exe, lone));
    snprintf(cmd, sizeof cmd, "env -u VT_BACKEND_PATH '%s' '%s/models/qwen3-tiny-q4_k_m.gguf'", exe, dir);
    int rc = vt_test_run_cmd(cmd, &out, &errs);
    CU_ASSERT_EQUAL(rc, 1);
    char want[1200];
    snprintf(want, sizeof want, "no libvt-backend-*.so in %s/vt", lone);
    CU_ASSERT(errs && strstr(errs, want) && strstr(errs, "VT_BACKEND_PATH"));
    if (!errs || !strstr(errs, want)) printf("\n  %s\n", errs ? errs : "");
    free(out);
    free(errs);
}

/* The vt program copied alone (no lib/vt beside it): `vt backends` fails
 * (exit 5, a backend error) naming the folder an install keeps its
 * backends in, and a run says the same. */
static void test_vt_without_backends_says_where_it_looked(void) {
    const char *dir = vt_test_data_dir("test models");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    char lone[512], cmd[4096], want[1200], *out = NULL, *errs = NULL;
    vt_test_tmpfile(lone, sizeof lone, "lone-vt");
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/bin' && cp '" VT_BUILD_DIR "/bin/vt' '%s/bin/'", lone, lone,
             lone);
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd(cmd, NULL, NULL), 0);
    snprintf(want, sizeof want, "%s/bin/../lib/vt, where an installed vt keeps its backends, does not exist", lone);
    char run_args[1200];
    snprintf(run_args, sizeof run_args, "run -m '%s/models/qwen3-tiny-q4_k_m.gguf' -p hi -n 1", dir);
    const struct {
        const char *args, *says;
    } cases[] = {{"backends", "no backends found"}, {run_args, "no backend loaded"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "env -u VT_BACKEND_PATH '%s/bin/vt' %s", lone, cases[i].args);
        CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, &errs), 5);
        CU_ASSERT(errs && strstr(errs, cases[i].says) && strstr(errs, want));
        if (!errs || !strstr(errs, want)) printf("\n  %s\n", errs ? errs : "");
        free(out);
        free(errs);
        out = errs = NULL;
    }
}

static void test_version(void) {
    CU_ASSERT_STRING_EQUAL(vt_version(), VT_TEST_PROJECT_VERSION);
    unsigned major = 0, minor = 0, patch = 0;
    CU_ASSERT_EQUAL(sscanf(vt_version(), "%u.%u.%u", &major, &minor, &patch), 3);
    CU_ASSERT_EQUAL(vt_version_number(), major * 10000 + minor * 100 + patch);
    /* the header's version is the library's (one release) */
    CU_ASSERT_EQUAL(VT_VERSION_NUMBER, vt_version_number());
    CU_ASSERT(VT_VERSION_MAJOR == major && VT_VERSION_MINOR == minor && VT_VERSION_PATCH == patch);
}

/* A stranger's program: vt.h and libvt.so only. */
static const char embedder_source[] =
    "#include <stdio.h>\n"
    "#include <string.h>\n"
    "#include \"vt/vt.h\"\n"
    "static int messages;\n"
    "static void on_log(void *user, int level, const char *who, const char *msg) {\n"
    "    (void)level; (void)who;\n"
    "    if (msg && *msg) ++*(int *)user;\n"
    "}\n"
    "int main(int argc, char **argv) {\n"
    "    if (argc != 2) return 2;\n"
    "    vt_set_log_callback(on_log, &messages);\n"
    "    vt_set_log_level(3);\n"
    "    const char *settings[] = {\"runtime.backend=reference\", \"runtime.threads=1\", NULL};\n"
    "    vt_session_options o;\n"
    "    vt_session_options_init(&o);\n"
    "    if (o.struct_size != sizeof o || o.config_path || o.settings || o.all_logits) return 3;\n"
    "    o.settings = settings;\n"
    "    vt_session *s = NULL;\n"
    "    char err[512];\n"
    "    if (vt_session_open(argv[1], &o, &s, err, sizeof err) != VT_OK) { printf(\"open: %s\\n\", err); return 1; }\n"
    "    const int ids[3] = {1, 7, 9};\n"
    "    if (vt_session_eval(s, ids, 3, err, sizeof err) != VT_OK) { printf(\"eval: %s\\n\", err); return 1; }\n"
    "    const float *l = vt_session_logits(s, 0);\n"
    "    int best = 0;\n"
    "    for (int i = 1; i < vt_session_n_vocab(s); i++) if (l[i] > l[best]) best = i;\n"
    "    printf(\"version %s n_vocab %d argmax %d messages %d status %s\\n\", vt_version(), vt_session_n_vocab(s),\n"
    "           best, messages, vt_status_name(VT_ERR_NOMEM));\n"
    "    vt_session_close(s);\n"
    "    return 0;\n"
    "}\n";

static void test_an_embedder_builds_and_runs(void) {
    char model[1024], src[1024], exe[1024];
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_synth_shape(&p, "tiny", &err), VT_OK);
    p.type = "q8_0";
    p.seed = 5;
    vt_test_tmpfile(model, sizeof model, "embed.gguf");
    CU_ASSERT_EQUAL_FATAL(vt_synth_write(&p, model, &err), VT_OK);
    vt_test_tmpfile(src, sizeof src, "embedder.c");
    vt_test_tmpfile(exe, sizeof exe, "embedder");
    FILE *f = fopen(src, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(embedder_source, f);
    fclose(f);

    char cmd[4096], *out = NULL, *errs = NULL;
    snprintf(cmd, sizeof cmd,
             "cc -std=c11 -Wall -Wextra -Werror %s -I'" VT_SOURCE_DIR "/include' '%s' -o '%s' -L'" VT_BUILD_DIR
             "/lib' -lvt -Wl,-rpath,'" VT_BUILD_DIR "/lib'",
             VT_TEST_SANITIZE_FLAGS, src, exe);
    int rc = vt_test_run_cmd(cmd, &out, &errs);
    if (rc) printf("\n%s\n%s%s", cmd, out ? out : "", errs ? errs : "");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    free(out);
    free(errs);

    /* Run with a backend folder holding refused plugins: the registry logs
     * why at info level, and those lines must reach the callback, not stderr. */
    snprintf(cmd, sizeof cmd, "VT_BACKEND_PATH='%s' '%s' '%s'", VT_TEST_PLUGIN_DIR, exe, model);
    rc = vt_test_run_cmd(cmd, &out, &errs);
    if (rc) printf("\n%s\n%s%s", cmd, out ? out : "", errs ? errs : "");
    CU_ASSERT_EQUAL(rc, 0);
    int n_vocab = -1, argmax = -1, messages = -1;
    char version[32] = "", status[64] = "";
    CU_ASSERT_EQUAL(out ? sscanf(out, "version %31s n_vocab %d argmax %d messages %d status %63[^\n]", version,
                                 &n_vocab, &argmax, &messages, status)
                        : 0,
                    5);
    CU_ASSERT_STRING_EQUAL(version, vt_version());
    CU_ASSERT_EQUAL(n_vocab, p.n_vocab);
    CU_ASSERT(argmax >= 0 && argmax < n_vocab);
    CU_ASSERT(messages > 0);
    CU_ASSERT_STRING_EQUAL(status, vt_status_name(VT_ERR_NOMEM));
    CU_ASSERT(!errs || !strstr(errs, "vt[")); /* the log went to the callback */
    free(out);
    free(errs);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"libvt.so exports only what include/vt/ declares", test_exports_only_the_public_api},
        {"vt_batch_stats (no struct_size) keeps its layout", test_stats_layout_is_frozen},
        {"a context past the trained one is said per model", test_ctx_warning_per_model},
        {"the embedding example builds and runs", test_the_embedding_example_builds_and_runs},
        {"libvt without its backends says where it looked", test_libvt_without_backends_says_where_it_looked},
        {"vt without its backends says where it looked", test_vt_without_backends_says_where_it_looked},
        {"vt_version and vt_version_number agree with the project", test_version},
        {"a program built on vt.h alone runs a session and gets the log", test_an_embedder_builds_and_runs},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("libvt surface", NULL, NULL, tests);
    return vt_test_run();
}
