/* test_plugin_sdk.c — a stranger's path to a backend, end to end: install vt
 * into a temporary prefix, build plugins/example-backend out of tree from
 * that prefix alone (CMake package and pkg-config), check and load it with the
 * installed `vt`, and run a synthesized model with it against reference.
 *
 * Everything runs the INSTALLED files (TMP/bin/vt, TMP/lib/libvt.so,
 * TMP/lib/vt/), never the build tree's, and the plugin is built from a copy of
 * its folder so no path into the source tree can be used by accident. */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host.h"
#include "json_mini.h"
#include "synth.h"
#include "util.h"
#include "vt/vt_backend.h"

/* ------------------------------------------------------------------------ */
/* The installed SDK and the plugin built from it (once per process)          */

typedef struct sdk {
    bool tried, installed, built;
    char prefix[512];        /* TMP/prefix */
    char libdir[600];        /* TMP/prefix/lib (whatever the install's libdir is) */
    char vt[600];            /* TMP/prefix/bin/vt */
    char plugin_src[512];    /* copy of plugins/example-backend */
    char plugin_build[512];  /* its CMake build folder */
    char plugin[700];        /* .../libvt-backend-example.so */
    char model[512];         /* a synthesized qwen3 */
} sdk;

static sdk s;

/* snprintf that fails the test on truncation (every path here is built from
 * tmpdir and build-tree paths of unknown length). */
static void fmt(char *buf, size_t size, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t size, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(buf, size, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) {
        printf("\npath or command too long for a %zu-byte buffer: %.80s...\n", size, buf);
        CU_FAIL("buffer too small");
    }
}

/* Runs cmd, printing its output when it fails (the test then says why). */
static int run_logged(const char *what, const char *cmd, char **out, char **err) {
    char *o = NULL, *e = NULL;
    char **out_to = out ? out : &o, **err_to = err ? err : &e;
    int rc = vt_test_run_cmd(cmd, out_to, err_to);
    if (rc != 0)
        printf("\n%s failed (exit %d): %s\n--- stdout\n%s\n--- stderr\n%s\n", what, rc, cmd,
               *out_to ? *out_to : "", *err_to ? *err_to : "");
    free(o);
    free(e);
    return rc;
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

/* The installed libdir: GNUInstallDirs says lib, lib64 or lib/<multiarch>. */
static bool find_libdir(void) {
    static const char *const candidates[] = {"lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        char probe[800];
        fmt(s.libdir, sizeof s.libdir, "%s/%s", s.prefix, candidates[i]);
        fmt(probe, sizeof probe, "%s/cmake/vt/vtConfig.cmake", s.libdir);
        if (file_exists(probe)) return true;
    }
    return false;
}

/* A small qwen3 (QK-norm: rms_norm also on a {head_dim, heads, T} view) with
 * f32 weights, so the only difference between the backends is rms_norm. */
static bool write_model(void) {
    vt_synth_params p = {
        .arch = "qwen3", .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 128,
        .n_vocab = 320, .n_ctx = 256, .type = "f32", .seed = 7,
    };
    vt_error err;
    vt_test_tmpfile(s.model, sizeof s.model, "sdk-qwen3.gguf");
    if (vt_synth_write(&p, s.model, &err) != VT_OK) {
        printf("\nsynth: %s\n", err.msg);
        return false;
    }
    return true;
}

static bool sdk_ready(void) {
    if (s.tried) return s.built;
    s.tried = true;
    char cmd[4096];
    vt_test_tmpfile(s.prefix, sizeof s.prefix, "prefix");
    fmt(cmd, sizeof cmd, "cmake --install '%s' --prefix '%s'", VT_BUILD_DIR, s.prefix);
    if (run_logged("install", cmd, NULL, NULL) != 0 || !find_libdir()) return false;
    fmt(s.vt, sizeof s.vt, "%s/bin/vt", s.prefix);
    s.installed = file_exists(s.vt);

    /* A copy of the plugin folder: built there, no relative path can reach
     * back into vt's tree. The configure gets the prefix and nothing else. */
    vt_test_tmpfile(s.plugin_src, sizeof s.plugin_src, "example-backend");
    vt_test_tmpfile(s.plugin_build, sizeof s.plugin_build, "example-build");
    fmt(cmd, sizeof cmd, "cp -R '%s/plugins/example-backend' '%s'", VT_SOURCE_DIR, s.plugin_src);
    if (run_logged("copy", cmd, NULL, NULL) != 0) return false;
    fmt(cmd, sizeof cmd,
             "cmake -S '%s' -B '%s' -DCMAKE_PREFIX_PATH='%s' -DCMAKE_BUILD_TYPE=Release "
             "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF && "
             "cmake --build '%s' -j2",
             s.plugin_src, s.plugin_build, s.prefix, s.plugin_build);
    if (run_logged("plugin build", cmd, NULL, NULL) != 0) return false;
    fmt(s.plugin, sizeof s.plugin, "%s/libvt-backend-example.so", s.plugin_build);
    s.built = s.installed && file_exists(s.plugin) && write_model();
    return s.built;
}

/* `TMP/bin/vt ARGS` with the plugin's folder on VT_BACKEND_PATH and no other
 * vt variable (a developer's VT_CONFIG or VT_BACKEND must not leak in). */
static int run_vt(const char *args, char **out, char **err) {
    char cmd[4096];
    fmt(cmd, sizeof cmd,
             "env -u VT_CONFIG -u VT_BACKEND -u VT_KV_CACHE_DTYPE -u VT_KV_CACHE_F32 -u VT_THREADS -u VT_CTX_SIZE "
             "-u LD_LIBRARY_PATH VT_BACKEND_PATH='%s' '%s' %s",
             s.plugin_build, s.vt, args);
    return run_logged("vt", cmd, out, err);
}

/* `TMP/bin/vt ARGS` with no environment at all (env -i): no VT_* variable,
 * no LD_LIBRARY_PATH. The sanitizer options are passed on so an ASan build
 * reads its suppressions; they do not affect discovery. */
static int run_vt_without_environment(const char *args, char **out) {
    char cmd[4096];
    fmt(cmd, sizeof cmd,
        "env -i ${ASAN_OPTIONS:+ASAN_OPTIONS=\"$ASAN_OPTIONS\"} ${LSAN_OPTIONS:+LSAN_OPTIONS=\"$LSAN_OPTIONS\"} "
        "${UBSAN_OPTIONS:+UBSAN_OPTIONS=\"$UBSAN_OPTIONS\"} '%s' %s",
        s.vt, args);
    return run_logged("vt (no environment)", cmd, out, NULL);
}

/* ------------------------------------------------------------------------ */
/* Install and build                                                          */

static void test_install_exports_the_sdk(void) {
    CU_ASSERT_FATAL(sdk_ready() || s.installed);
    static const char *const installed[] = {
        "include/vt/vt_backend.h", "include/vt/vt_types.h", "include/vt/vt_quant.h", "bin/vt",
    };
    char path[1024];
    for (size_t i = 0; i < sizeof installed / sizeof *installed; i++) {
        fmt(path, sizeof path, "%s/%s", s.prefix, installed[i]);
        if (!file_exists(path)) printf("\nmissing: %s\n", path);
        CU_ASSERT(file_exists(path));
    }
    static const char *const in_libdir[] = {
        "libvt.so", "vt/libvt-backend-reference.so", "cmake/vt/vtConfig.cmake", "cmake/vt/vtConfigVersion.cmake",
        "cmake/vt/vtTargets.cmake", "pkgconfig/vt.pc",
    };
    for (size_t i = 0; i < sizeof in_libdir / sizeof *in_libdir; i++) {
        fmt(path, sizeof path, "%s/%s", s.libdir, in_libdir[i]);
        if (!file_exists(path)) printf("\nmissing: %s\n", path);
        CU_ASSERT(file_exists(path));
    }
}

/* Every installed header compiles alone, as C11 under -Wall -Wextra -Werror
 * -pedantic and as C++11 and C++17 (a plugin or an embedder may be written
 * in C++; g++ has no _Static_assert, C++ no compound literals). */
static void test_headers_compile_alone_in_c_and_cpp(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char dir[1024], cmd[4096];
    fmt(dir, sizeof dir, "%s/include/vt", s.prefix);
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int headers = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 2, ".h") != 0) continue;
        headers++;
        /* -pedantic: nothing of GNU C or of C alone (C++ has no compound
         * literals), as an embedder's strict build sees them */
        static const char *const compilers[] = {"cc -x c -std=c11 -pedantic", "g++ -x c++ -std=c++11 -pedantic",
                                                "g++ -x c++ -std=c++17 -pedantic"};
        for (int k = 0; k < 3; k++) {
            fmt(cmd, sizeof cmd, "printf '#include <vt/%s>\\nint vt_header_probe;\\n' | %s -Wall -Wextra -Werror -I'%s/include' "
                "-c -o /dev/null -", e->d_name, compilers[k], s.prefix);
            char what[128];
            fmt(what, sizeof what, "%s alone (%s)", e->d_name, compilers[k]);
            CU_ASSERT_EQUAL(run_logged(what, cmd, NULL, NULL), 0);
        }
    }
    closedir(d);
    CU_ASSERT(headers >= 5);
}

/* The plugin's compile lines name the prefix's include folder and nothing of
 * vt's source or build tree. */
static void test_plugin_builds_from_the_prefix_alone(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char path[1024];
    fmt(path, sizeof path, "%s/compile_commands.json", s.plugin_build);
    char *commands = vt_test_read_file(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(commands);
    char include[700];
    fmt(include, sizeof include, "%s/include", s.prefix);
    CU_ASSERT_PTR_NOT_NULL(strstr(commands, include));
    CU_ASSERT_PTR_NULL(strstr(commands, VT_SOURCE_DIR));
    CU_ASSERT_PTR_NULL(strstr(commands, VT_BUILD_DIR));
    CU_ASSERT_PTR_NOT_NULL(strstr(commands, "example_backend.c"));
    free(commands);
    /* CMake found the package in the prefix, not in some other install. */
    fmt(path, sizeof path, "%s/CMakeCache.txt", s.plugin_build);
    char *cache = vt_test_read_file(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cache);
    char want[800];
    fmt(want, sizeof want, "vt_DIR:PATH=%s/cmake/vt", s.libdir);
    CU_ASSERT_PTR_NOT_NULL(strstr(cache, want));
    free(cache);

    /* The plugin's own ctest runs the installed vt (vt::cli) on it. */
    char cmd[2048];
    fmt(cmd, sizeof cmd, "ctest --test-dir '%s' --output-on-failure --no-tests=error", s.plugin_build);
    CU_ASSERT_EQUAL(run_logged("plugin ctest", cmd, NULL, NULL), 0);
}

/* The same plugin through pkg-config: one compiler line, flags from vt.pc. */
static void test_plugin_builds_with_pkg_config(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char cmd[4096], *out = NULL;
    fmt(cmd, sizeof cmd, "PKG_CONFIG_PATH='%s/pkgconfig' pkg-config --cflags vt", s.libdir);
    CU_ASSERT_EQUAL_FATAL(run_logged("pkg-config", cmd, &out, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, s.prefix)); /* relocated: ${pcfiledir}-relative */
    free(out);
    fmt(cmd, sizeof cmd, "PKG_CONFIG_PATH='%s/pkgconfig' pkg-config --variable=abi_major vt", s.libdir);
    CU_ASSERT_EQUAL_FATAL(run_logged("pkg-config", cmd, &out, NULL), 0);
    CU_ASSERT_EQUAL(atoi(out), VT_ABI_MAJOR);
    free(out);

    char dir[512];
    vt_test_tmpfile(dir, sizeof dir, "pc-build");
    mkdir(dir, 0755);
    fmt(cmd, sizeof cmd,
             "cc -std=c11 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden "
             "$(PKG_CONFIG_PATH='%s/pkgconfig' pkg-config --cflags vt) '%s/example_backend.c' "
             "-o '%s/libvt-backend-example.so' -lm",
             s.libdir, s.plugin_src, dir);
    CU_ASSERT_EQUAL_FATAL(run_logged("cc with pkg-config", cmd, NULL, NULL), 0);
    fmt(cmd, sizeof cmd, "backends --check '%s/libvt-backend-example.so' --brief", dir);
    CU_ASSERT_EQUAL(run_vt(cmd, &out, NULL), 0);
    CU_ASSERT(out && strstr(out, ": ok"));
    free(out);
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                    */

/* A line of `vt backends` output that starts with name and state. */
static const char *entry_line(const char *out, const char *name, const char *state) {
    size_t n = strlen(name);
    for (const char *line = out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, name, n) != 0 || line[n] != ' ') continue;
        const char *rest = line + n;
        while (*rest == ' ') rest++;
        if (strncmp(rest, state, strlen(state)) == 0) return line;
    }
    return NULL;
}

/* The matrix row of op after `from`: "    rms_norm   PD  -  ..." -> cells. */
static int matrix_row(const char *from, const char *op, char cells[][8], int max) {
    char key[64];
    fmt(key, sizeof key, "\n    %s ", op);
    const char *row = strstr(from, key);
    if (!row) return -1;
    row += strlen(key);
    int n = 0;
    while (n < max) {
        while (*row == ' ') row++;
        if (*row == '\n' || !*row || *row == '(') break;
        int len = 0;
        while (row[len] && row[len] != ' ' && row[len] != '\n' && len < 7) len++;
        memcpy(cells[n], row, (size_t)len);
        cells[n][len] = '\0';
        row += len;
        n++;
    }
    return n;
}

static void test_check_validates_the_plugin(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char args[1024], *out = NULL;
    fmt(args, sizeof args, "backends --check '%s'", s.plugin);
    CU_ASSERT_EQUAL_FATAL(run_vt(args, &out, NULL), 0);
    char ok[800], abi[32];
    fmt(ok, sizeof ok, "%s: ok\n", s.plugin);
    fmt(abi, sizeof abi, "(ABI %d.%d)", VT_ABI_MAJOR, VT_ABI_MINOR);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ok));
    const char *line = entry_line(strstr(out, ok) ? strstr(out, ok) + strlen(ok) : out, "example", "loaded");
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, s.plugin));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, abi));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "rms_norm f32 -> f32")); /* its description */
    /* Matrix: rms_norm accepted in both phases with f32 output and nothing
     * else; every other op row all '-' (NULL pointers are never asked). */
    char cells[16][8];
    int n = matrix_row(line, "rms_norm", cells, 16);
    CU_ASSERT_FATAL(n >= 3);
    CU_ASSERT_STRING_EQUAL(cells[0], "PD"); /* f32 */
    for (int i = 1; i < n; i++) CU_ASSERT_STRING_EQUAL(cells[i], "-");
    n = matrix_row(line, "matmul", cells, 16);
    CU_ASSERT_FATAL(n >= 3);
    for (int i = 0; i < n; i++) CU_ASSERT_STRING_EQUAL(cells[i], "-");
    free(out);

    /* A file that is not a plugin: a one-line refusal and exit 1. */
    char junk[600];
    vt_test_tmpfile(junk, sizeof junk, "libvt-backend-junk.so");
    FILE *f = fopen(junk, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("not ELF\n", f);
    fclose(f);
    fmt(args, sizeof args, "backends --check '%s'", junk);
    char *o = NULL, *cmd_err = NULL;
    char cmd[4096];
    fmt(cmd, sizeof cmd, "env -u VT_BACKEND_PATH '%s' %s", s.vt, args);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &o, &cmd_err), 1);
    CU_ASSERT(o && strstr(o, "refused: ") && strstr(o, "not a loadable shared object"));
    free(o);
    free(cmd_err);
}

/* With no environment at all, the installed vt finds libvt through its RPATH
 * and the backends in <prefix>/lib/vt through libvt's own location. */
static void test_installed_vt_needs_no_environment(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(run_vt_without_environment("backends --brief", &out), 0);
    const char *ref = entry_line(out, "reference", "loaded");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    char want[800], resolved[4096];
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(s.libdir, resolved));
    fmt(want, sizeof want, "%s/vt/libvt-backend-reference.so", resolved);
    CU_ASSERT_PTR_NOT_NULL(strstr(ref, want));
    CU_ASSERT_PTR_NULL(strstr(out, VT_BUILD_DIR)); /* nothing from the build tree */
    CU_ASSERT_PTR_NULL(entry_line(out, "example", "loaded")); /* not installed, not on a path */
    free(out);
}

/* On VT_BACKEND_PATH the plugin loads beside the installed backends; a later
 * same-named file is shadowed and a broken one refused, each with a reason. */
static void test_backend_path_listing(void) {
    CU_ASSERT_FATAL(sdk_ready());
    /* A second folder after the plugin's, holding a copy of the plugin
     * (shadowed by the first), a copy of the installed reference (searched
     * before the install's lib/vt, so it shadows the installed one) and a
     * junk file (refused). */
    char extra[512], cmd[4096];
    vt_test_tmpfile(extra, sizeof extra, "second-folder");
    mkdir(extra, 0755);
    fmt(cmd, sizeof cmd,
             "cp '%s' '%s/' && cp '%s/vt/libvt-backend-reference.so' '%s/' && echo junk > '%s/libvt-backend-broken.so'",
             s.plugin, extra, s.libdir, extra, extra);
    CU_ASSERT_EQUAL_FATAL(run_logged("setup", cmd, NULL, NULL), 0);
    char *out = NULL;
    fmt(cmd, sizeof cmd, "env -u VT_CONFIG VT_BACKEND_PATH='%s:%s' '%s' backends", s.plugin_build, extra, s.vt);
    CU_ASSERT_EQUAL_FATAL(run_logged("vt backends", cmd, &out, NULL), 0);

    const char *ex = entry_line(out, "example", "loaded");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ex);
    CU_ASSERT_PTR_NOT_NULL(strstr(ex, s.plugin));
    char abi[32];
    fmt(abi, sizeof abi, "(ABI %d.%d)", VT_ABI_MAJOR, VT_ABI_MINOR);
    CU_ASSERT_PTR_NOT_NULL(strstr(ex, abi));
    char cells[16][8];
    CU_ASSERT(matrix_row(ex, "rms_norm", cells, 16) >= 1 && strcmp(cells[0], "PD") == 0);

    char want[1200];
    const char *sh = entry_line(out, "example", "shadowed");
    CU_ASSERT_PTR_NOT_NULL_FATAL(sh);
    fmt(want, sizeof want, "    reason: shadowed by %s\n", s.plugin);
    CU_ASSERT_PTR_NOT_NULL(strstr(sh, want));

    /* The reference copy in `extra` comes before the install's lib/vt. */
    const char *ref = entry_line(out, "reference", "loaded");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    fmt(want, sizeof want, "%s/libvt-backend-reference.so", extra);
    CU_ASSERT_PTR_NOT_NULL(strstr(ref, want));
    const char *ref_sh = entry_line(out, "reference", "shadowed");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref_sh);
    CU_ASSERT_PTR_NOT_NULL(strstr(ref_sh, "/vt/libvt-backend-reference.so"));
    fmt(want, sizeof want, "reason: shadowed by %s/libvt-backend-reference.so", extra);
    CU_ASSERT_PTR_NOT_NULL(strstr(ref_sh, want));

    const char *broken = entry_line(out, "broken", "refused");
    CU_ASSERT_PTR_NOT_NULL_FATAL(broken);
    CU_ASSERT_PTR_NOT_NULL(strstr(broken, "reason: not a loadable shared object"));
    free(out);
}

/* ------------------------------------------------------------------------ */
/* Running a model                                                            */

/* Per plan line of --explain ("  prefill   12 blk.0.attn_norm  op=rms_norm
 * backend=example ..."): counts of rms_norm nodes on example, and of nodes
 * that break the expectation (rms_norm elsewhere, anything else not on
 * reference). */
typedef struct placement {
    int plans, nodes, rms_on_example, misplaced;
} placement;

static placement read_explain(const char *text) {
    placement p = {0};
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "plan ", 5) == 0) p.plans++;
        char phase[16], label[64], op[32], backend[64];
        int index;
        if (sscanf(line, " %15s %d %63s op=%31s backend=%63s", phase, &index, label, op, backend) != 5) continue;
        p.nodes++;
        bool rms = strcmp(op, "rms_norm") == 0;
        if (rms && strcmp(backend, "example") == 0) p.rms_on_example++;
        else if (rms || strcmp(backend, "reference") != 0) {
            p.misplaced++;
            printf("\n  misplaced: %.*s", (int)strcspn(line, "\n"), line);
        }
    }
    return p;
}

#define PROMPT_TOKENS "1,17,42,99,123,7,250,31,64,5,300,12"
#define N_LAYER 2
/* Per plan: attn_norm and ffn_norm per layer, Qwen3's q_norm and k_norm per
 * layer, and the output norm. */
#define RMS_NORMS_PER_PLAN (4 * N_LAYER + 1)

static void test_explain_shows_rms_norm_on_example(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char args[2048], *out = NULL, *err = NULL;
    fmt(args, sizeof args, "run -m '%s' --tokens %s -n 4 --temp 0 --backend example --fallback reference --explain -t 2",
             s.model, PROMPT_TOKENS);
    CU_ASSERT_EQUAL_FATAL(run_vt(args, &out, &err), 0);
    placement p = read_explain(err);
    CU_ASSERT_EQUAL(p.plans, 2); /* prefill and decode */
    CU_ASSERT_EQUAL(p.rms_on_example, p.plans * RMS_NORMS_PER_PLAN);
    CU_ASSERT(p.nodes > p.rms_on_example); /* the rest exists, and ... */
    CU_ASSERT_EQUAL(p.misplaced, 0);       /* ... ran on reference */
    /* and says which files the two names resolved to */
    CU_ASSERT(err && strstr(err, "backend files: example /") && strstr(err, "libvt-backend-example.so, reference /"));
    free(out);
    free(err);
}

/* Last-position logits of `vt eval` on backend, prefill or decode path. */
static bool eval_logits(const char *backend, bool decode, json_value *doc, const json_value **logits) {
    char args[2048], *out = NULL;
    fmt(args, sizeof args, "eval -m '%s' --tokens %s --backend %s --fallback reference --kv-cache-dtype f32 -t 2 --full-last --json%s",
             s.model, PROMPT_TOKENS, backend, decode ? " --decode" : "");
    if (run_vt(args, &out, NULL) != 0) return false;
    char why[200];
    bool ok = json_parse(out, strlen(out), doc, why, sizeof why);
    if (!ok) printf("\neval output is not JSON (%s): %.200s\n", why, out);
    free(out);
    if (!ok) return false;
    *logits = json_get(doc, "last_logits");
    const json_value *b = json_get(doc, "backend");
    return *logits && (*logits)->type == JSON_ARRAY && b && b->type == JSON_STRING && strcmp(b->str, backend) == 0;
}

/* Tolerance. The two rms_norms differ only in summation: the example sums
 * x^2 in float, reference in double. Float summation of D = 64 terms is off
 * by at most ~D float roundings, (D + 2) * 2^-24 ~ 4e-6 relative, on each
 * normalized activation; nothing else differs (f32 weights, f32 KV cache, the
 * same reference kernels for every other node). Two layers and the output
 * matmul carry such perturbations at about that relative size into the
 * logits, so 2e-5 of the largest |logit| is 5x the bound (the measured
 * difference is ~100x below it). An output rounded to f16 (2^-11 ~ 5e-4
 * relative), a missing eps or a wrong row is 25x or more above it. */
#define LOGIT_RTOL 2e-5

/* The largest |logit| at the last prompt position on reference: the scale of
 * the tolerance above. */
static double reference_logit_scale(void) {
    static double scale = -1;
    if (scale >= 0) return scale;
    json_value doc;
    const json_value *logits = NULL;
    scale = 0;
    if (eval_logits("reference", false, &doc, &logits)) {
        for (size_t i = 0; i < logits->n; i++) scale = fmax(scale, fabs(logits->items[i].number));
        json_free(&doc);
    }
    return scale;
}

static void test_logits_agree_with_reference(void) {
    CU_ASSERT_FATAL(sdk_ready());
    for (int decode = 0; decode <= 1; decode++) {
        json_value ref_doc, ex_doc;
        const json_value *ref = NULL, *ex = NULL;
        CU_ASSERT_FATAL(eval_logits("reference", decode, &ref_doc, &ref));
        CU_ASSERT_FATAL(eval_logits("example", decode, &ex_doc, &ex));
        CU_ASSERT_EQUAL_FATAL(ref->n, ex->n);
        CU_ASSERT_EQUAL(ref->n, 320);
        double scale = 0, worst = 0;
        size_t ref_top = 0, ex_top = 0;
        for (size_t i = 0; i < ref->n; i++) {
            double a = ref->items[i].number, b = ex->items[i].number;
            scale = fmax(scale, fabs(a));
            worst = fmax(worst, fabs(a - b));
            if (a > ref->items[ref_top].number) ref_top = i;
            if (b > ex->items[ex_top].number) ex_top = i;
        }
        CU_ASSERT_FATAL(scale > 1e-3); /* logits that are all ~0 would make any tolerance meaningless */
        double tol = LOGIT_RTOL * scale;
        printf("\n  %s: max |dlogit| %.3g (tolerance %.3g, largest |logit| %.3g)", decode ? "decode" : "prefill",
               worst, tol, scale);
        CU_ASSERT(worst <= tol);
        CU_ASSERT(worst > 0 || decode); /* the float sum is not the double one: the example really ran */
        CU_ASSERT_EQUAL(ref_top, ex_top);
        json_free(&ref_doc);
        json_free(&ex_doc);
    }
}

/* vt compare with the plugin against reference, on the same model. */
static void test_compare_against_reference(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char args[2048], *out = NULL;
    fmt(args, sizeof args,
             "compare -m '%s' --tokens %s -n 8 --backends reference,example --fallback reference --kv-cache-dtype f32 -t 2 --json", s.model,
             PROMPT_TOKENS);
    CU_ASSERT_EQUAL_FATAL(run_vt(args, &out, NULL), 0);
    json_value doc;
    char why[200];
    bool parsed = json_parse(out, strlen(out), &doc, why, sizeof why);
    if (!parsed) printf("\ncompare output is not JSON (%s): %.300s\n", why, out);
    free(out);
    CU_ASSERT_FATAL(parsed);
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY);
    const json_value *ex = NULL;
    for (size_t i = 0; i < backends->n; i++) {
        const json_value *name = json_get(&backends->items[i], "name");
        if (name && name->type == JSON_STRING && strcmp(name->str, "example") == 0) ex = &backends->items[i];
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(ex);
    const json_value *max_d = json_get(ex, "max_abs_dlogit"), *top1 = json_get(ex, "top1_agreement");
    const json_value *greedy = json_get(ex, "greedy_agree_tokens"), *where = json_get(ex, "nodes_by_backend");
    CU_ASSERT_FATAL(max_d && top1 && greedy && where && where->type == JSON_OBJECT);
    /* The tolerance of test_logits_agree_with_reference, over every prompt
     * position (the last position's scale stands for all: same model, same
     * weights, prompts of a dozen tokens). */
    double scale = reference_logit_scale();
    CU_ASSERT_FATAL(scale > 1e-3);
    printf("\n  compare: max |dlogit| %.3g (tolerance %.3g)", max_d->number, LOGIT_RTOL * scale);
    CU_ASSERT(max_d->number <= LOGIT_RTOL * scale);
    CU_ASSERT_DOUBLE_EQUAL(top1->number, 1.0, 1e-9);
    CU_ASSERT_EQUAL((int)greedy->number, 8);
    /* Where the nodes ran: the rms_norms of both plans on example, the rest on reference. */
    const json_value *on_ex = json_get(where, "example"), *on_ref = json_get(where, "reference");
    CU_ASSERT_FATAL(on_ex && on_ref);
    CU_ASSERT_EQUAL((int)on_ex->number, 2 * RMS_NORMS_PER_PLAN);
    CU_ASSERT(on_ref->number > 0);
    json_free(&doc);
}

/* vt compare --trace with the plugin (PLUGINS.md step 8): every node
 * compared, the example's rms_norms among them, none diverging. */
static void test_trace_against_reference(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char args[2048], *out = NULL;
    fmt(args, sizeof args, "compare -m '%s' --tokens %s -n 4 --backends example --trace --json -t 2", s.model,
        PROMPT_TOKENS);
    CU_ASSERT_EQUAL(run_vt(args, &out, NULL), 0);
    json_value doc;
    char why[200];
    bool parsed = out && json_parse(out, strlen(out), &doc, why, sizeof why);
    if (!parsed) printf("\ntrace output is not JSON: %.300s\n", out ? out : "");
    free(out);
    CU_ASSERT_FATAL(parsed);
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY && backends->n == 1);
    const json_value *first = json_get(&backends->items[0], "first_divergence");
    CU_ASSERT(first && first->type == JSON_NULL);
    const json_value *nodes = json_get(&backends->items[0], "nodes");
    CU_ASSERT_FATAL(nodes && nodes->type == JSON_ARRAY);
    int on_example = 0;
    for (size_t i = 0; i < nodes->n; i++) {
        const json_value *b = json_get(&nodes->items[i], "backend"), *ok = json_get(&nodes->items[i], "ok");
        CU_ASSERT(ok && ok->type == JSON_BOOL && ok->boolean);
        if (b && b->type == JSON_STRING && strcmp(b->str, "example") == 0) on_example++;
    }
    CU_ASSERT_EQUAL(on_example, 2 * RMS_NORMS_PER_PLAN);
    json_free(&doc);
}

/* ------------------------------------------------------------------------ */
/* ABI minor compatibility                                                    */

/* The out-of-tree binary records the ABI of the headers it was built with
 * and the size of its table at that minor. A runtime of minor N+1 has a longer
 * vt_backend; it loads this binary because it reads only struct_size bytes of
 * the table (the registry copies them into a zeroed table of its own size) and
 * vt_backend_op() reads op pointers past struct_size as NULL. Simulated here
 * by shrinking struct_size the way an older build's table would be shorter:
 * the ops it covers stay visible, the ones it does not read as NULL, and the
 * runtime's own test (test_registry: good_old_minor) loads a table of exactly
 * the 1.0 size. */
static void test_binary_records_its_abi_and_size(void) {
    CU_ASSERT_FATAL(sdk_ready());
    void *lib = dlopen(s.plugin, RTLD_NOW | RTLD_LOCAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    vt_backend_entry_fn entry = (vt_backend_entry_fn)dlsym(lib, VT_BACKEND_ENTRY_SYMBOL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(entry);
    CU_ASSERT_PTR_NOT_NULL(dlsym(lib, VT_BACKEND_PROBE_SYMBOL));
    CU_ASSERT_PTR_NULL(dlsym(lib, "example_init")); /* hidden: only the two entry points are exported */
    const vt_backend *t = entry();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->abi_major, VT_ABI_MAJOR);
    CU_ASSERT_EQUAL(t->abi_minor, VT_ABI_MINOR);
    CU_ASSERT_EQUAL(t->struct_size, (uint32_t)sizeof(vt_backend));
    CU_ASSERT(t->struct_size >= VT_BACKEND_SIZE_1_0);

    /* A copy whose struct_size ends right after rms_norm: as if the table were
     * built before rope..convert were appended. */
    vt_backend shorter = *t;
    shorter.struct_size = (uint32_t)(offsetof(vt_backend, rms_norm) + sizeof(vt_op_fn));
    shorter.rope = shorter.convert = (vt_op_fn)t->rms_norm; /* garbage a runtime must not read */
    CU_ASSERT_PTR_NOT_NULL(vt_backend_op(&shorter, VT_OP_RMS_NORM));
    for (int op = VT_OP_RMS_NORM + 1; op < VT_OP_COUNT; op++) CU_ASSERT_PTR_NULL(vt_backend_op(&shorter, op));
    for (int op = 0; op < VT_OP_RMS_NORM; op++) CU_ASSERT_PTR_NULL(vt_backend_op(&shorter, op)); /* NULL in the plugin */
    /* Libraries stay loaded for the process (as the runtime does). */
}

/* `cmake --install` of the plugin puts it into the prefix's lib/vt
 * (vt_BACKEND_INSTALL_DIR), where the installed vt finds it with no
 * environment. Runs last: it changes the prefix the other tests use. */
static void test_installed_plugin_needs_no_environment(void) {
    CU_ASSERT_FATAL(sdk_ready());
    char cmd[2048], *out = NULL;
    fmt(cmd, sizeof cmd, "cmake --install '%s'", s.plugin_build);
    CU_ASSERT_EQUAL_FATAL(run_logged("plugin install", cmd, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(run_vt_without_environment("backends --brief", &out), 0);
    const char *ex = entry_line(out, "example", "loaded");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ex);
    char want[800], resolved[4096];
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(s.libdir, resolved));
    fmt(want, sizeof want, "%s/vt/libvt-backend-example.so", resolved);
    CU_ASSERT_PTR_NOT_NULL(strstr(ex, want));
    free(out);
}

/* The other direction of minor compatibility: a runtime of minor N+1 hands
 * the plugin (built at N) LONGER vt_host and vt_node structs, fields appended
 * after what the plugin knows. Simulated by embedding the runtime's tables in
 * bigger structs with struct_size and abi_minor raised: the out-of-tree binary
 * initialises, accepts and computes exactly as before. And a host table too
 * short for the fields it calls is a clear init refusal, not a crash. */
typedef struct later_minor_host {
    vt_host known;            /* what ABI 1.0 defines */
    void (*appended_fn)(void); /* fields a later minor appends */
    int64_t appended[4];
} later_minor_host;

typedef struct later_minor_node {
    vt_node known;
    int64_t appended[8];
} later_minor_node;

static void test_plugin_runs_under_a_later_minor_host(void) {
    CU_ASSERT_FATAL(sdk_ready());
    void *lib = dlopen(s.plugin, RTLD_NOW | RTLD_LOCAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lib);
    vt_backend_entry_fn entry = (vt_backend_entry_fn)dlsym(lib, VT_BACKEND_ENTRY_SYMBOL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(entry);
    const vt_backend *t = entry();
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    vt_threadpool *pool = NULL;
    vt_error error;
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(2, &pool, &error), VT_OK);

    later_minor_host host;
    memset(&host, 0xA5, sizeof host); /* appended fields hold garbage the plugin must not touch */
    host.known = *vt_host_get(pool);
    host.known.struct_size = (uint32_t)sizeof host;
    host.known.abi_minor = VT_ABI_MINOR + 1;
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = host.known.n_threads, .options = ""};
    void *ctx = NULL;
    char why[200] = "";
    CU_ASSERT_EQUAL_FATAL(t->init(&host.known, &config, &ctx, why, sizeof why), VT_OK);

    enum { D = 48, ROWS = 5 };
    float x[D * ROWS], w[D], y[D * ROWS];
    for (int i = 0; i < D * ROWS; i++) x[i] = cosf((float)i * 0.21f) * 2.0f;
    for (int i = 0; i < D; i++) w[i] = 0.25f + (float)i / D;
    later_minor_node node;
    memset(&node, 0x5A, sizeof node);
    memset(&node.known, 0, sizeof node.known);
    node.known.struct_size = (uint32_t)sizeof node;
    node.known.op = VT_OP_RMS_NORM;
    node.known.phase = VT_PHASE_PREFILL;
    node.known.n_src = 2;
    node.known.params.rms_norm.eps = 1e-5f;
    vt_tensor *ts[3] = {&node.known.src[0], &node.known.src[1], &node.known.dst};
    float *data[3] = {x, w, y};
    for (int i = 0; i < 3; i++) {
        ts[i]->data = data[i];
        ts[i]->dtype = VT_F32;
        ts[i]->ndim = i == 1 ? 1 : 2;
        ts[i]->ne[0] = D;
        ts[i]->ne[1] = i == 1 ? 1 : ROWS;
        ts[i]->ne[2] = ts[i]->ne[3] = 1;
        ts[i]->nb[0] = sizeof(float);
        ts[i]->nb[1] = D * sizeof(float);
        ts[i]->nb[2] = ts[i]->nb[3] = ts[i]->nb[1] * (size_t)ts[i]->ne[1];
    }
    CU_ASSERT_EQUAL(t->supports(ctx, &node.known), 1);
    CU_ASSERT_EQUAL_FATAL(t->rms_norm(ctx, &node.known), VT_OK);
    double worst = 0;
    for (int r = 0; r < ROWS; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[r * D + i] * x[r * D + i];
        double inv = 1.0 / sqrt(ss / D + 1e-5);
        for (int i = 0; i < D; i++) worst = fmax(worst, fabs(y[r * D + i] - x[r * D + i] * inv * w[i]));
    }
    /* Float sums of 48 squares vs double: ~1e-6 relative on outputs below 3. */
    CU_ASSERT(worst < 1e-5);
    t->shutdown(ctx);

    /* A host table that ends before parallel_for: refused at init with a reason. */
    vt_host short_host = *vt_host_get(pool);
    short_host.struct_size = (uint32_t)offsetof(vt_host, parallel_for);
    ctx = NULL;
    CU_ASSERT_EQUAL(t->init(&short_host, &config, &ctx, why, sizeof why), VT_ERR_BACKEND);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "host table")); /* the reason names what was missing */
    vt_threadpool_destroy(pool);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"install exports headers, CMake package, vt.pc, libvt, vt and backends", test_install_exports_the_sdk},
        {"every installed header compiles alone as C11 and C++11/17, -pedantic", test_headers_compile_alone_in_c_and_cpp},
        {"the example plugin builds out of tree from the prefix alone", test_plugin_builds_from_the_prefix_alone},
        {"the example plugin builds with pkg-config", test_plugin_builds_with_pkg_config},
        {"vt backends --check validates the plugin and prints its matrix", test_check_validates_the_plugin},
        {"the installed vt finds its backends with no environment", test_installed_vt_needs_no_environment},
        {"VT_BACKEND_PATH: loaded, shadowed and refused with reasons", test_backend_path_listing},
        {"--explain: rms_norm on example, the rest falls back to reference", test_explain_shows_rms_norm_on_example},
        {"logits agree with reference (prefill and decode)", test_logits_agree_with_reference},
        {"vt compare runs the plugin against reference", test_compare_against_reference},
        {"vt compare --trace: every node of the plugin's plans within its threshold", test_trace_against_reference},
        {"the binary records its ABI; a shorter table reads as NULL ops", test_binary_records_its_abi_and_size},
        {"the plugin runs under a later minor's longer host and node", test_plugin_runs_under_a_later_minor_host},
        {"cmake --install of the plugin: found with no environment", test_installed_plugin_needs_no_environment},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("plugin_sdk", NULL, NULL, tests);
    return vt_test_run();
}
