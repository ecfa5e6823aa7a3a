/* test_registry.c — every way a backend file can be wrong is refused with its
 * own one-line reason, and the good backends next to it still load and run.
 *
 * The bad plugins are tests/plugins/bad_*.c (one defect each), built into
 * VT_TEST_PLUGIN_DIR; files that are not shared objects at all are written
 * here into a temporary folder. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host.h"
#include "explain_parse.h"
#include "registry.h"
#include "util.h"
#include "vt/vt_cpu.h"

static vt_threadpool *pool;
static const vt_host *host;

/* A folder holding text files named like backends, and a real plugin cut
 * short (a copy that did not finish: dlopen would map it and the process
 * die of SIGBUS touching a page past its end). */
static const char *junk_dir(void) {
    static char dir[512];
    if (dir[0]) return dir;
    vt_test_tmpfile(dir, sizeof dir, "junk");
    mkdir(dir, 0755);
    char path[600], good[600];
    snprintf(good, sizeof good, "%s/libvt-backend-good_minimal.so", VT_TEST_PLUGIN_DIR);
    size_t good_size = 0;
    free(vt_test_read_file(good, &good_size));
    snprintf(path, sizeof path, "junk/libvt-backend-cut_short.so");
    char cut[700];
    vt_test_write_cut_file(cut, sizeof cut, path, good, good_size / 2);
    snprintf(path, sizeof path, "%s/libvt-backend-garbage.so", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("this is not an ELF file\n", f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/libvt-backend-Bad.Name.so", dir);
    f = fopen(path, "w");
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/not-a-backend.so", dir); /* ignored: wrong prefix */
    f = fopen(path, "w");
    if (f) fclose(f);
    return dir;
}

static int suite_init(void) {
    vt_error err;
    if (vt_threadpool_create(2, &pool, &err) != VT_OK) return 1;
    host = vt_host_get(pool);
    return 0;
}

static int suite_cleanup(void) {
    vt_threadpool_destroy(pool);
    return 0;
}

/* The entry for a backend name, whatever its state (first one found). */
static const vt_backend_entry *entry_named(const vt_registry *r, const char *name) {
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *e = vt_registry_at(r, i);
        if (strcmp(e->name, name) == 0) return e;
    }
    return NULL;
}

static int entries_named(const vt_registry *r, const char *name) {
    int n = 0;
    for (int i = 0; i < vt_registry_count(r); i++) n += strcmp(vt_registry_at(r, i)->name, name) == 0;
    return n;
}

/* A registry over the test plugins and the junk folder (plus the default folder). */
static vt_registry *plugin_registry(void) {
    char path[2048];
    snprintf(path, sizeof path, "%s:%s", VT_TEST_PLUGIN_DIR, junk_dir());
    setenv("VT_BACKEND_PATH", path, 1);
    vt_registry *r = NULL;
    vt_error err;
    vt_status st = vt_registry_create(host, NULL, NULL, &r, &err);
    unsetenv("VT_BACKEND_PATH");
    CU_ASSERT_EQUAL(st, VT_OK);
    if (st != VT_OK) printf("\nregistry: %s\n", err.msg);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Refusals                                                                   */

typedef struct refusal_case {
    const char *name;   /* backend name from the file name */
    const char *reason; /* must appear in entry.reason */
} refusal_case;

/* The runtime's ABI minor as text, for the messages that name it. */
#define MINOR_TEXT_(m) #m
#define MINOR_TEXT(m) MINOR_TEXT_(m)

static const refusal_case refusals[] = {
    {"garbage", "not a loadable shared object: "},
    {"cut_short", "not a loadable shared object: the file is cut short: "},
    {"bad_noentry", "no vt_backend_entry symbol"},
    {"bad_probe_zero", "probe says this machine cannot run it: needs the imaginary XYZ-512 instructions"},
    {"bad_null_table", "vt_backend_entry returned NULL"},
    {"bad_abi_major", "ABI major 2, runtime speaks 1"},
    {"bad_future_minor", "ABI minor 99 is newer than the runtime's " MINOR_TEXT(VT_ABI_MINOR)},
    /* built at the runtime's own minor, so measured against that minor's table */
    {"bad_small_struct", "struct_size 40 is smaller than the 1." MINOR_TEXT(VT_ABI_MINOR) " table ("},
    {"bad_no_name", "table has no name"},
    {"bad_no_init", "table has no init"},
    {"bad_no_supports", "table has no supports"},
    {"bad_no_shutdown", "table has no shutdown"},
    {"bad_name_mismatch", "name 'impostor' does not match file name 'bad_name_mismatch'"},
    {"bad_init_fails", "init failed: no device found"},
    {"bad_prepare_unpaired", "table has prepare_weight but no release_weight"},
    {"bad_unknown_convention", "conventions has bits ABI 1." MINOR_TEXT(VT_ABI_MINOR) " does not define: 0x200"},
    {"bad_nonsense_caps", "capability nonsense: supports() accepts op 17, which does not exist"},
    {"Bad.Name", "does not give a backend name of [a-z0-9_-]"},
};

static void test_each_bad_plugin_is_refused_with_its_reason(void) {
    vt_registry *r = plugin_registry();
    if (!r) return;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const refusal_case *c = &refusals[i];
        const vt_backend_entry *e = entry_named(r, c->name);
        if (!e) {
            printf("\n  %s: no entry at all\n", c->name);
            CU_FAIL("a bad plugin is missing from the registry");
            continue;
        }
        bool ok = e->state == VT_BACKEND_REFUSED && strstr(e->reason, c->reason) && !e->table && !e->ctx &&
                  !strchr(e->reason, '\n') && vt_registry_find(r, c->name) == NULL;
        if (!ok) printf("\n  %s: state %d, reason \"%s\"; wanted \"%s\"\n", c->name, e->state, e->reason, c->reason);
        CU_ASSERT(ok);
        CU_ASSERT_EQUAL(entries_named(r, c->name), 1);
    }
    /* Files without the libvt-backend- prefix are not backends at all. */
    CU_ASSERT_PTR_NULL(entry_named(r, "not-a-backend"));
    vt_registry_destroy(r);
}

/* The version fields are recorded even when the table is refused. */
static void test_refused_entries_record_abi(void) {
    vt_registry *r = plugin_registry();
    if (!r) return;
    const vt_backend_entry *e = entry_named(r, "bad_abi_major");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->abi_major, 2);
    e = entry_named(r, "bad_future_minor");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->abi_minor, 99);
    vt_registry_destroy(r);
}

static void check_rms_norm_runs(const vt_backend_entry *b);

/* check_file gives the same verdicts, one file at a time. */
static void test_check_file_matches_registry(void) {
    char path[1024];
    vt_backend_entry e;
    vt_error err;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        const refusal_case *c = &refusals[i];
        bool junk = strcmp(c->name, "garbage") == 0 || strcmp(c->name, "Bad.Name") == 0 || strcmp(c->name, "cut_short") == 0;
        snprintf(path, sizeof path, "%s/libvt-backend-%s.so", junk ? junk_dir() : VT_TEST_PLUGIN_DIR, c->name);
        vt_error_clear(&err);
        CU_ASSERT_EQUAL(vt_registry_check_file(host, path, NULL, &e, &err), VT_ERR_BACKEND);
        CU_ASSERT_EQUAL(e.state, VT_BACKEND_REFUSED);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.reason, c->reason));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, c->reason));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path)); /* the message names the file */
    }
    snprintf(path, sizeof path, "%s/libvt-backend-good_minimal.so", VT_TEST_PLUGIN_DIR);
    CU_ASSERT_EQUAL(vt_registry_check_file(host, path, NULL, &e, &err), VT_OK);
    CU_ASSERT_EQUAL(e.state, VT_BACKEND_LOADED);
    CU_ASSERT_STRING_EQUAL(e.name, "good_minimal");
    CU_ASSERT_PTR_NOT_NULL_FATAL(e.table);
    CU_ASSERT_PTR_NOT_NULL(e.ctx); /* live until released (LeakSanitizer checks that the release frees it) */
    check_rms_norm_runs(&e);
    vt_registry_release_checked(&e);
    CU_ASSERT_PTR_NULL(e.ctx);
    CU_ASSERT_NOT_EQUAL(e.state, VT_BACKEND_LOADED);
    vt_registry_release_checked(&e); /* a second release is a no-op */

    /* a file that is not there is said to be missing, before its name is judged */
    CU_ASSERT_EQUAL(vt_registry_check_file(host, "/nonexistent/libvt-backend-x.so", NULL, &e, &err), VT_ERR_BACKEND);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.reason, "No such file or directory"));
    CU_ASSERT_EQUAL(vt_registry_check_file(host, "/nonexistent/whatever.so", NULL, &e, &err), VT_ERR_BACKEND);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.reason, "No such file or directory"));
    char misnamed[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(misnamed, sizeof misnamed, "whatever.so", ""));
    CU_ASSERT_EQUAL(vt_registry_check_file(host, misnamed, NULL, &e, &err), VT_ERR_BACKEND);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is not libvt-backend-NAME.so"));
    char garbage[1024]; /* named right, not a shared object */
    CU_ASSERT_PTR_NOT_NULL_FATAL(
        vt_test_write_tmpfile(garbage, sizeof garbage, "libvt-backend-garbage.so", "not an ELF file"));
    CU_ASSERT_EQUAL(vt_registry_check_file(host, garbage, NULL, &e, &err), VT_ERR_BACKEND);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.reason, "not a loadable shared object"));
}

/* ------------------------------------------------------------------------ */
/* Good plugins                                                               */

/* x {d, rows} f32, w {d}, y {d, rows}: an rms_norm node with data set. */
static vt_node rms_norm_node(float *x, float *w, float *y, int64_t d, int64_t rows, int32_t dst_dtype) {
    vt_node node;
    memset(&node, 0, sizeof node);
    node.struct_size = sizeof node;
    node.op = VT_OP_RMS_NORM;
    node.phase = VT_PHASE_PREFILL;
    node.n_src = 2;
    vt_tensor *ts[3] = {&node.src[0], &node.src[1], &node.dst};
    float *data[3] = {x, w, y};
    for (int i = 0; i < 3; i++) {
        vt_tensor *t = ts[i];
        t->data = data[i];
        t->dtype = i == 2 ? dst_dtype : VT_F32;
        t->ndim = i == 1 ? 1 : 2;
        t->ne[0] = d;
        t->ne[1] = i == 1 ? 1 : rows;
        t->ne[2] = t->ne[3] = 1;
        t->nb[0] = sizeof(float);
        t->nb[1] = (size_t)d * sizeof(float);
        t->nb[2] = t->nb[3] = t->nb[1] * (size_t)t->ne[1];
    }
    node.params.rms_norm.eps = 1e-6f;
    return node;
}

/* Runs rms_norm on b and compares with a double-precision evaluation. */
static void check_rms_norm_runs(const vt_backend_entry *b) {
    enum { D = 96, ROWS = 7 };
    float x[D * ROWS], w[D], y[D * ROWS];
    for (int i = 0; i < D * ROWS; i++) x[i] = sinf((float)i * 0.37f) * 3.0f;
    for (int i = 0; i < D; i++) w[i] = 0.5f + (float)i / D;
    memset(y, 0, sizeof y);
    vt_node node = rms_norm_node(x, w, y, D, ROWS, VT_F32);
    CU_ASSERT_FATAL(vt_backend_accepts(b, &node));
    CU_ASSERT_EQUAL_FATAL(vt_backend_run(b, &node), VT_OK);
    double worst = 0;
    for (int r = 0; r < ROWS; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[r * D + i] * x[r * D + i];
        double scale = 1.0 / sqrt(ss / D + 1e-6);
        for (int i = 0; i < D; i++) {
            double want = x[r * D + i] * scale * w[i];
            double diff = fabs(y[r * D + i] - want) / (fabs(want) + 1e-3);
            if (diff > worst) worst = diff;
        }
    }
    /* f32 accumulation over 96 items of magnitude <= 9: relative error well
     * under 1e-5; 1e-4 leaves room for a different summation order. */
    CU_ASSERT(worst < 1e-4);
}

static void test_good_plugins_load_beside_bad_ones(void) {
    vt_registry *r = plugin_registry();
    if (!r) return;
    const vt_backend_entry *good = vt_registry_find(r, "good_minimal");
    CU_ASSERT_PTR_NOT_NULL_FATAL(good);
    CU_ASSERT_EQUAL(good->state, VT_BACKEND_LOADED);
    CU_ASSERT_STRING_EQUAL(good->table->name, "good_minimal");
    CU_ASSERT_PTR_NOT_NULL(good->ctx);
    CU_ASSERT_EQUAL(good->abi_major, VT_ABI_MAJOR);
    CU_ASSERT_PTR_NOT_NULL(strstr(good->path, VT_TEST_PLUGIN_DIR));
    check_rms_norm_runs(good);

    /* It declines what it does not implement or support. */
    enum { D = 8 };
    float x[D], w[D], y[D];
    vt_node node = rms_norm_node(x, w, y, D, 1, VT_F16);
    CU_ASSERT_FALSE(vt_backend_accepts(good, &node)); /* f16 output: not supported */
    node = rms_norm_node(x, w, y, D, 1, VT_F32);
    node.op = VT_OP_MATMUL;
    CU_ASSERT_FALSE(vt_backend_accepts(good, &node)); /* no matmul pointer */
    node.op = VT_OP_COUNT;
    CU_ASSERT_FALSE(vt_backend_accepts(good, &node)); /* no such op */
    CU_ASSERT_FALSE(vt_backend_accepts(NULL, &node));

    /* The real reference backend (always built, the tests depend on it)
     * loads next to all of them. */
    const vt_backend_entry *ref = vt_registry_find(r, "reference");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    check_rms_norm_runs(ref);
    vt_registry_destroy(r);
}

/* The probe score is the ranking of loaded backends: in-tree scores as
 * documented, 1 without a probe, and the highest-scoring backend is the
 * default one (vt run without --backend), whoever built it. */
static void test_probe_scores_rank_the_default_backend(void) {
    vt_registry *r = plugin_registry();
    if (!r) return;
    const vt_backend_entry *ref = vt_registry_find(r, "reference"), *minimal = vt_registry_find(r, "good_minimal");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    CU_ASSERT_PTR_NOT_NULL_FATAL(minimal);
    CU_ASSERT_EQUAL(ref->score, 10);
    CU_ASSERT_EQUAL(minimal->score, 1); /* no probe */
    const vt_backend_entry *simd = vt_registry_find(r, "simd"), *onednn = vt_registry_find(r, "onednn");
    if (simd) CU_ASSERT_EQUAL(simd->score, 100);
    if (onednn) CU_ASSERT_EQUAL(onednn->score, 50);
    vt_registry_destroy(r);

    /* vt backends prints each loaded backend's score. */
    char list_cmd[1024], *listing = NULL;
    snprintf(list_cmd, sizeof list_cmd, "'%s' backends --brief", VT_CLI_PATH);
    CU_ASSERT_EQUAL(vt_test_run_cmd(list_cmd, &listing, NULL), 0);
    const char *ref_line = listing ? strstr(listing, "\nreference ") : NULL;
    if (!ref_line && listing && strncmp(listing, "reference ", 10) == 0) ref_line = listing;
    CU_ASSERT_PTR_NOT_NULL(ref_line);
    if (ref_line) {
        const char *eol = strchr(ref_line + 1, '\n');
        const char *score = strstr(ref_line, "score 10");
        CU_ASSERT(score && (!eol || score < eol));
    }
    free(listing);

    /* The default backend follows the score: good_scored below and above simd. */
    char model[512], cmd[2048], *out = NULL;
    vt_test_tmpfile(model, sizeof model, "rank.gguf");
    snprintf(cmd, sizeof cmd, "'%s' synth --shape tiny --type q8_0 -o '%s'", VT_CLI_PATH, model);
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd(cmd, NULL, NULL), 0);
    const char *expect_low = simd ? "simd" : onednn ? "onednn" : "reference";
    static const struct {
        const char *score;
        bool wins;
    } cases[] = {{"5", false}, {"1000", true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "VT_TEST_PROBE_SCORE=%s VT_BACKEND_PATH='%s' '%s' run -m '%s' -p hi -n 1 --dry-run --explain",
                 cases[i].score, VT_TEST_PLUGIN_DIR, VT_CLI_PATH, model);
        char *explain = NULL; /* --explain prints to stderr */
        CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, &explain), 0);
        const char *want = cases[i].wins ? "good_scored" : expect_low;
        vt_explain x;
        const bool found = vt_explain_parse(explain, &x) && strcmp(x.backend, want) == 0;
        if (!found) printf("\n  score %s: expected backend %s in:\n%s", cases[i].score, want, explain ? explain : "");
        CU_ASSERT(found);
        vt_explain_free(&x);
        free(out);
        free(explain);
        out = NULL;
    }
}

/* The ranking also picks the fallback: without --fallback it is the
 * highest-scoring loaded backend other than the preferred one, so onednn
 * (which declines everything but prefill matmul) hands the rest to simd when
 * simd is loaded and to reference when it is not; --fallback still names one.
 * --explain says which it is and where it came from. */
typedef struct placed {
    char fallback[64];
    int matmul_on_onednn, others_on_fallback, others_elsewhere;
    bool automatic; /* the explain line says the ranking chose it */
} placed;

static bool explain_onednn(const char *env, const char *flags, const char *model, placed *p) {
    char cmd[2048], *explain = NULL;
    snprintf(cmd, sizeof cmd, "%s '%s' run -m '%s' -p hi -n 1 --dry-run --explain --backend onednn %s", env,
             VT_CLI_PATH, model, flags);
    const int rc = vt_test_run_cmd(cmd, NULL, &explain);
    vt_explain x;
    const bool parsed = rc == 0 && explain && vt_explain_parse(explain, &x);
    if (!parsed) {
        printf("\n  %s: exit %d\n%s", cmd, rc, explain ? explain : "");
        free(explain);
        return false;
    }
    memset(p, 0, sizeof *p);
    snprintf(p->fallback, sizeof p->fallback, "%s", x.fallback);
    for (int i = 0; i < x.n; i++) {
        const vt_explain_node *n = &x.nodes[i];
        if (strcmp(n->op, "matmul") == 0 && strcmp(n->phase, "prefill") == 0)
            p->matmul_on_onednn += strcmp(n->backend, "onednn") == 0;
        else if (strcmp(n->backend, x.fallback) == 0)
            p->others_on_fallback++;
        else
            p->others_elsewhere++;
    }
    p->automatic = strcmp(x.fallback_source, "the highest probe score after the preferred backend") == 0;
    vt_explain_free(&x);
    free(explain);
    return true;
}

static void test_probe_scores_rank_the_fallback(void) {
    if (!vt_test_onednn_expected()) return;
    const bool simd = vt_test_simd_expected();
    char model[512], cmd[2048];
    vt_test_tmpfile(model, sizeof model, "rank-fallback.gguf");
    snprintf(cmd, sizeof cmd, "'%s' synth --shape tiny --type q8_0 -o '%s'", VT_CLI_PATH, model);
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd(cmd, NULL, NULL), 0);

    /* Everything built is loaded: simd if this CPU runs it, else reference. */
    placed p;
    CU_ASSERT_FATAL(explain_onednn("env -u VT_BACKEND_PATH -u VT_CONFIG", "", model, &p));
    CU_ASSERT_STRING_EQUAL(p.fallback, simd ? "simd" : "reference");
    CU_ASSERT(p.automatic);
    CU_ASSERT(p.matmul_on_onednn > 0);
    CU_ASSERT(p.others_on_fallback > 0);
    CU_ASSERT_EQUAL(p.others_elsewhere, 0);

    /* Only reference and onednn loaded: a file named for simd in a folder
     * searched first, which is refused, shadows the built simd. */
    char dir[512], fake[600];
    vt_test_tmpfile(dir, sizeof dir, "no-simd");
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
    snprintf(fake, sizeof fake, "%s/libvt-backend-simd.so", dir);
    FILE *f = fopen(fake, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("not a shared object\n", f);
    fclose(f);
    char env[700];
    snprintf(env, sizeof env, "env -u VT_CONFIG VT_BACKEND_PATH='%s'", dir);
    CU_ASSERT_FATAL(explain_onednn(env, "", model, &p));
    CU_ASSERT_STRING_EQUAL(p.fallback, "reference");
    CU_ASSERT(p.automatic);
    CU_ASSERT(p.others_on_fallback > 0);
    CU_ASSERT_EQUAL(p.others_elsewhere, 0);

    /* --fallback names it whatever the ranking says, and --explain says so. */
    CU_ASSERT_FATAL(explain_onednn("env -u VT_BACKEND_PATH -u VT_CONFIG", "--fallback reference", model, &p));
    CU_ASSERT_STRING_EQUAL(p.fallback, "reference");
    CU_ASSERT_FALSE(p.automatic);
    CU_ASSERT(p.others_on_fallback > 0);
    CU_ASSERT_EQUAL(p.others_elsewhere, 0);
}

static void test_old_minor_loads(void) {
    vt_registry *r = plugin_registry();
    if (!r) return;
    const vt_backend_entry *old = vt_registry_find(r, "good_old_minor");
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    CU_ASSERT_EQUAL(old->abi_minor, 0);
    CU_ASSERT_EQUAL(old->table->struct_size, (uint32_t)VT_BACKEND_SIZE_1_0);
    /* Op pointers it has are visible; the ones its table is too short for read as NULL. */
    CU_ASSERT_PTR_NOT_NULL(vt_backend_op(old->table, VT_OP_RMS_NORM));
    CU_ASSERT_PTR_NULL(vt_backend_op(old->table, VT_OP_MATMUL));
    vt_registry_destroy(r);
}

/* ABI 1.3's isa: read from a 1.3 table (as one printable line), never from
 * an older one whatever its struct_size covers; the in-tree backends say. */
static void test_isa_by_minor(void) {
    vt_registry *r = plugin_registry();
    if (!r) return;
    char isa[VT_BACKEND_ISA_MAX];
    const vt_backend_entry *reports = vt_registry_find(r, "isa_reports"), *old = vt_registry_find(r, "isa_old_minor");
    CU_ASSERT_PTR_NOT_NULL_FATAL(reports);
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    CU_ASSERT_STRING_EQUAL(vt_backend_isa(reports, isa, sizeof isa), "test-isa second line");
    CU_ASSERT_EQUAL(old->abi_minor, 2);
    CU_ASSERT_STRING_EQUAL(vt_backend_isa(old, isa, sizeof isa), "not reported");
    CU_ASSERT_STRING_EQUAL(vt_backend_isa(vt_registry_find(r, "good_old_minor"), isa, sizeof isa), "not reported");
    CU_ASSERT_STRING_EQUAL(vt_backend_isa(vt_registry_find(r, "reference"), isa, sizeof isa), "scalar");
    /* 1.6's tiers: the valid entries in order; none from a table that
     * predates the field or leaves it NULL */
    const char *tiers[8];
    CU_ASSERT_EQUAL_FATAL(vt_backend_tiers(reports, tiers, 8), 2);
    CU_ASSERT_STRING_EQUAL(tiers[0], "isa=fast");
    CU_ASSERT_STRING_EQUAL(tiers[1], "isa=slow");
    CU_ASSERT_EQUAL(vt_backend_tiers(reports, tiers, 1), 1);
    CU_ASSERT_EQUAL(vt_backend_tiers(old, tiers, 8), 0);
    /* 1.7's prepare_flags: never from an older table, whatever bytes lie there */
    const vt_backend_entry *shared_old = vt_registry_find(r, "shared_old_minor");
    CU_ASSERT_PTR_NOT_NULL_FATAL(shared_old); /* a 1.6 plugin loads */
    CU_ASSERT_EQUAL(shared_old->abi_minor, 6);
    CU_ASSERT_EQUAL(shared_old->table->prepare_flags, 0);
    CU_ASSERT_PTR_NOT_NULL(shared_old->table->prepare_weight);
    const vt_backend_entry *onednn_17 = vt_registry_find(r, "onednn");
    if (onednn_17) CU_ASSERT_EQUAL(onednn_17->table->prepare_flags, VT_PREPARE_SHARED); /* a 1.7 table: kept */
    const vt_backend_entry *tiers_old = vt_registry_find(r, "tiers_old_minor");
    CU_ASSERT_PTR_NOT_NULL_FATAL(tiers_old); /* a 1.5 plugin loads */
    CU_ASSERT_EQUAL(tiers_old->abi_minor, 5);
    CU_ASSERT_EQUAL(vt_backend_tiers(tiers_old, tiers, 8), 0);
    CU_ASSERT_PTR_NOT_NULL(vt_backend_op(tiers_old->table, VT_OP_RMS_NORM));
    CU_ASSERT_EQUAL(vt_backend_tiers(vt_registry_find(r, "good_old_minor"), tiers, 8), 0);
    CU_ASSERT_EQUAL(vt_backend_tiers(vt_registry_find(r, "reference"), tiers, 8), 0);
    const vt_backend_entry *simd = vt_registry_find(r, "simd");
    const vt_cpu_features f = vt_cpu_detect();
    const bool vnni = f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni;
    if (simd) {
        CU_ASSERT_STRING_EQUAL(vt_backend_isa(simd, isa, sizeof isa),
                               vnni ? vt_test_simd_avx512_isa() : "avx2");
        /* simd lists every tier this CPU runs, best first */
        CU_ASSERT_EQUAL_FATAL(vt_backend_tiers(simd, tiers, 8), vnni ? 2 : 1);
        CU_ASSERT_STRING_EQUAL(tiers[0], vnni ? "isa=avx512" : "isa=avx2");
        if (vnni) CU_ASSERT_STRING_EQUAL(tiers[1], "isa=avx2");
    }
    const vt_backend_entry *onednn = vt_registry_find(r, "onednn");
    if (onednn) { /* f32 matmul, and bf16 where oneDNN runs it in hardware */
        vt_backend_isa(onednn, isa, sizeof isa);
        CU_ASSERT(strstr(isa, "(f32 matmul ") != NULL || strstr(isa, "(bf16 matmul ") != NULL);
    }
    vt_registry_destroy(r);
}

/* An allocation failure inside a backend's init is a refusal, not a crash. */
static void test_init_out_of_memory_is_a_refusal(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/libvt-backend-good_minimal.so", VT_TEST_PLUGIN_DIR);
    vt_backend_entry e;
    vt_error err;
    vt_host_fail_alloc_after(1);
    CU_ASSERT_EQUAL(vt_registry_check_file(host, path, NULL, &e, &err), VT_ERR_BACKEND);
    vt_host_fail_alloc_after(0);
    CU_ASSERT(e.refused_by_init);
    CU_ASSERT_EQUAL(e.init_status, VT_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.reason, "out of memory")); /* the reason vt backends shows says so */
    CU_ASSERT_EQUAL_FATAL(vt_registry_check_file(host, path, NULL, &e, &err), VT_OK);
    vt_registry_release_checked(&e);
}

/* ------------------------------------------------------------------------ */
/* Discovery order and shadowing                                              */

static void copy_file(const char *from, const char *to) {
    size_t size;
    char *data = vt_test_read_file(from, &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    FILE *f = fopen(to, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, size, f), size);
    fclose(f);
    free(data);
}

/* Two new folders, each with its own copy of good_minimal. New every call:
 * libraries stay mapped for the whole process, so a loaded .so file must
 * never be rewritten in place. */
static void make_twin_folders(char *a, char *b, size_t size) {
    static int round;
    char name[32];
    snprintf(name, sizeof name, "first%d", round);
    vt_test_tmpfile(a, size, name);
    snprintf(name, sizeof name, "second%d", round++);
    vt_test_tmpfile(b, size, name);
    mkdir(a, 0755);
    mkdir(b, 0755);
    char from[1024], to[1024];
    snprintf(from, sizeof from, "%s/libvt-backend-good_minimal.so", VT_TEST_PLUGIN_DIR);
    snprintf(to, sizeof to, "%s/libvt-backend-good_minimal.so", a);
    copy_file(from, to);
    snprintf(to, sizeof to, "%s/libvt-backend-good_minimal.so", b);
    copy_file(from, to);
}

static void expect_first_wins(const vt_registry *r, const char *first, const char *second) {
    CU_ASSERT_EQUAL(entries_named(r, "good_minimal"), 2);
    const vt_backend_entry *loaded = vt_registry_find(r, "good_minimal");
    CU_ASSERT_PTR_NOT_NULL_FATAL(loaded);
    CU_ASSERT_PTR_NOT_NULL(strstr(loaded->path, first));
    int shadowed = 0;
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *e = vt_registry_at(r, i);
        if (strcmp(e->name, "good_minimal") != 0 || e->state != VT_BACKEND_SHADOWED) continue;
        shadowed++;
        CU_ASSERT_PTR_NOT_NULL(strstr(e->path, second));
        char want[2048];
        snprintf(want, sizeof want, "shadowed by %s", loaded->path);
        CU_ASSERT_STRING_EQUAL(e->reason, want);
        CU_ASSERT_PTR_NULL(e->table);
    }
    CU_ASSERT_EQUAL(shadowed, 1);
}

static void test_later_folder_is_shadowed(void) {
    char a[512], b[512], list[1100];
    make_twin_folders(a, b, sizeof a);
    vt_registry *r;
    snprintf(list, sizeof list, "%s:%s", a, b);
    setenv("VT_BACKEND_PATH", list, 1);
    CU_ASSERT_EQUAL_FATAL(vt_registry_create(host, NULL, NULL, &r, NULL), VT_OK);
    expect_first_wins(r, a, b);
    vt_registry_destroy(r);

    /* Reversed, the other copy wins. */
    snprintf(list, sizeof list, "%s:%s", b, a);
    setenv("VT_BACKEND_PATH", list, 1);
    CU_ASSERT_EQUAL_FATAL(vt_registry_create(host, NULL, NULL, &r, NULL), VT_OK);
    expect_first_wins(r, b, a);
    vt_registry_destroy(r);
    unsetenv("VT_BACKEND_PATH");
}

static void test_env_path_comes_before_extra_path(void) {
    char a[512], b[512];
    make_twin_folders(a, b, sizeof a);
    vt_registry *r;
    setenv("VT_BACKEND_PATH", b, 1);
    CU_ASSERT_EQUAL_FATAL(vt_registry_create(host, a, NULL, &r, NULL), VT_OK);
    unsetenv("VT_BACKEND_PATH");
    expect_first_wins(r, b, a);
    vt_registry_destroy(r);

    /* extra_path alone is a colon-separated list too (empty items skipped). */
    char list[1100];
    snprintf(list, sizeof list, "::%s::%s:", a, b);
    CU_ASSERT_EQUAL_FATAL(vt_registry_create(host, list, NULL, &r, NULL), VT_OK);
    expect_first_wins(r, a, b);
    vt_registry_destroy(r);
}

/* A folder named twice is scanned once: a backend does not shadow itself. */
static void test_same_folder_twice_is_scanned_once(void) {
    char a[512], b[512], list[1100];
    make_twin_folders(a, b, sizeof a);
    snprintf(list, sizeof list, "%s:%s/", a, a);
    setenv("VT_BACKEND_PATH", list, 1);
    vt_registry *r;
    CU_ASSERT_EQUAL_FATAL(vt_registry_create(host, a, NULL, &r, NULL), VT_OK);
    unsetenv("VT_BACKEND_PATH");
    CU_ASSERT_EQUAL(entries_named(r, "good_minimal"), 1);
    CU_ASSERT_PTR_NOT_NULL(vt_registry_find(r, "good_minimal"));
    vt_registry_destroy(r);
}

/* Missing folders are skipped quietly; without any path the default folder
 * (<dir of libvt.so>/vt) is still searched. */
static void test_default_folder(void) {
    setenv("VT_BACKEND_PATH", "/nonexistent/a:/nonexistent/b", 1);
    vt_registry *r;
    CU_ASSERT_EQUAL_FATAL(vt_registry_create(host, "/nonexistent/c", NULL, &r, NULL), VT_OK);
    unsetenv("VT_BACKEND_PATH");
    CU_ASSERT_PTR_NULL(vt_registry_find(r, "good_minimal"));
    const vt_backend_entry *ref = vt_registry_find(r, "reference");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    char resolved[4096];
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(VT_BACKEND_DIR, resolved));
    CU_ASSERT_PTR_NOT_NULL(strstr(ref->path, resolved));
    /* Every entry comes from the default folder. */
    for (int i = 0; i < vt_registry_count(r); i++)
        CU_ASSERT_PTR_NOT_NULL(strstr(vt_registry_at(r, i)->path, "/vt/"));
    CU_ASSERT_PTR_NULL(vt_registry_at(r, -1));
    CU_ASSERT_PTR_NULL(vt_registry_at(r, vt_registry_count(r)));
    vt_registry_destroy(r);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"each bad plugin is refused with its own reason", test_each_bad_plugin_is_refused_with_its_reason},
        {"refused entries record their ABI version", test_refused_entries_record_abi},
        {"check_file gives the same verdicts", test_check_file_matches_registry},
        {"good plugins load and run beside bad ones", test_good_plugins_load_beside_bad_ones},
        {"probe scores rank the default backend", test_probe_scores_rank_the_default_backend},
        {"the same ranking picks the default fallback; --fallback overrides it", test_probe_scores_rank_the_fallback},
        {"a plugin built against ABI 1.0 loads", test_old_minor_loads},
        {"isa: read from a 1.3 table only, one printable line", test_isa_by_minor},
        {"out of memory in init is a refusal", test_init_out_of_memory_is_a_refusal},
        {"a later folder's same-named backend is shadowed", test_later_folder_is_shadowed},
        {"VT_BACKEND_PATH comes before extra_path", test_env_path_comes_before_extra_path},
        {"the same folder twice is scanned once", test_same_folder_twice_is_scanned_once},
        {"missing folders are skipped, the default folder searched", test_default_folder},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("registry", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
