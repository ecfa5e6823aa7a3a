/* test_auto_place.c — `--backend auto`: nodes placed by measured cost.
 *
 * The placement rule is checked on recorded costs, not on timing: a
 * calibration cache is written with chosen times (through the cache's own
 * API, so the file is valid) and the engine must put every node on the
 * backend those times make cheapest, and a third-party plugin recorded as
 * fastest on one shape class must get exactly that class's nodes. Real
 * timing is checked only for what does not depend on the machine's speed:
 * the plugin is timed like any backend, the plan is valid and runs, the
 * second engine reads the cache and times nothing. Then the cache's
 * invalidation (corrupt file, another key, a changed backend file) and a
 * backend failing during calibration. Last, a backend that prepares its
 * weights (prep_reversed, whose matmul refuses the file's bytes): it is
 * timed through the prepare hook like the engine runs it, and a plan placing
 * its nodes computes the reference's greedy tokens. And a class is timed as
 * it was keyed, even where negotiation changed its first node since; and
 * the indices a timed node reads are real even when their producer's class
 * was timed before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utime.h>

#include "calibrate.h"
#include "calibration_cache.h"
#include "engine.h"
#include "engine_fixture.h"
#include "sampler.h"
#include "synth.h"
#include "util.h"
#include "vt/vt.h"
#include "weight_prep.h"

static char model_path[1024];
static char root[1024];      /* this runner's folder */
static char fast_dir[1100];  /* holds a copy of auto_fast */
static char fail_dir[1100];  /* holds a copy of auto_failing */
static char prep_dir[1100];  /* holds a copy of prep_reversed */
static char f32_dir[1100];   /* holds a copy of kv_no_convert (matmuls that write f32 only) */
static char log_text[16384]; /* warnings seen since the last clear */

static void on_log(void *user, int level, const char *who, const char *message) {
    (void)user, (void)level, (void)who;
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof log_text - n, "%s\n", message);
}

static int copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *data = vt_test_read_file(from, &n);
    FILE *f = data ? fopen(to, "wb") : NULL;
    int ok = f && fwrite(data, 1, n, f) == n;
    if (f) ok = fclose(f) == 0 && ok;
    free(data);
    return ok ? 0 : -1;
}

static int suite_init(void) {
    snprintf(model_path, sizeof model_path, "%s/models/qwen3-tiny-q4_k_m.gguf", vt_test_data_dir("models"));
    snprintf(root, sizeof root, "%s/auto_place", vt_test_tmpdir());
    snprintf(fast_dir, sizeof fast_dir, "%s/fast", root);
    snprintf(fail_dir, sizeof fail_dir, "%s/failing", root);
    snprintf(prep_dir, sizeof prep_dir, "%s/prep", root);
    snprintf(f32_dir, sizeof f32_dir, "%s/f32out", root);
    mkdir(root, 0755);
    mkdir(fast_dir, 0755);
    mkdir(fail_dir, 0755);
    mkdir(prep_dir, 0755);
    mkdir(f32_dir, 0755);
    char from[1200], to[1200];
    snprintf(from, sizeof from, "%s/libvt-backend-auto_fast.so", VT_TEST_PLUGIN_DIR);
    snprintf(to, sizeof to, "%s/libvt-backend-auto_fast.so", fast_dir);
    if (copy_file(from, to) != 0) return -1;
    snprintf(from, sizeof from, "%s/libvt-backend-auto_failing.so", VT_TEST_PLUGIN_DIR);
    snprintf(to, sizeof to, "%s/libvt-backend-auto_failing.so", fail_dir);
    if (copy_file(from, to) != 0) return -1;
    snprintf(from, sizeof from, "%s/libvt-backend-kv_no_convert.so", VT_TEST_PLUGIN_DIR);
    snprintf(to, sizeof to, "%s/libvt-backend-kv_no_convert.so", f32_dir);
    if (copy_file(from, to) != 0) return -1;
    snprintf(from, sizeof from, "%s/libvt-backend-prep_reversed.so", VT_TEST_PLUGIN_DIR);
    snprintf(to, sizeof to, "%s/libvt-backend-prep_reversed.so", prep_dir);
    if (copy_file(from, to) != 0) return -1;
    /* the copies find the reference they forward to here, not next to themselves */
    char ref[1200];
    snprintf(ref, sizeof ref, "%s/libvt-backend-reference.so", VT_BACKEND_DIR);
    setenv("VT_TEST_REFERENCE_SO", ref, 1);
    char cache[1200];
    snprintf(cache, sizeof cache, "%s/cache", root);
    setenv("XDG_CACHE_HOME", cache, 1);
    vt_set_log_callback(on_log, NULL);
    return 0;
}

static vt_model *model;

/* An auto engine over the backends in plugin_dir and the build's, with
 * backend options ("NAME.key=value\n" lines). */
static vt_engine *auto_engine_with(const char *plugin_dir, const char *backend_options) {
    vt_options o;
    vt_fixture_options(&o, "auto", VT_F16);
    snprintf(o.backend_path, sizeof o.backend_path, "%.1023s", plugin_dir);
    snprintf(o.backend_options, sizeof o.backend_options, "%.1023s", backend_options);
    vt_error err = {0};
    if (!model && vt_model_load(model_path, &model, &err) != VT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    vt_engine *e = NULL;
    if (vt_engine_create(&o, model, false, &e, &err) != VT_OK) fprintf(stderr, "auto engine: %s\n", err.msg);
    return e;
}

static vt_engine *auto_engine(const char *plugin_dir) { return auto_engine_with(plugin_dir, ""); }

static int backend_index(const vt_engine *e, const char *name) {
    for (int i = 0; i < vt_registry_count(e->registry); i++)
        if (strcmp(vt_registry_at(e->registry, i)->name, name) == 0 &&
            vt_registry_at(e->registry, i)->state == VT_BACKEND_LOADED)
            return i;
    return -1;
}

static int run_tokens(vt_engine *e) {
    const int32_t tokens[5] = {1, 2, 3, 4, 5};
    vt_error err = {0};
    vt_engine_reset(e);
    if (vt_engine_eval(e, tokens, 5, false, &err) != VT_OK) return -1;
    return vt_engine_eval(e, tokens, 1, true, &err) == VT_OK ? 0 : -1;
}

/* Real timing: the plugin is a candidate and gets measured; the plan is
 * valid and runs; a second engine reads every time from the cache. */
static void test_plugin_is_timed_and_cache_reused(void) {
    vt_engine *e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_FATAL(e->costs != NULL);
    const int fast = backend_index(e, "auto_fast");
    CU_ASSERT_FATAL(fast >= 0);
    CU_ASSERT(e->costs->candidate[fast]);
    CU_ASSERT(e->costs->measured > 0);
    CU_ASSERT(!e->costs->cache_hit);
    int timed = 0;
    for (int k = 0; k < e->costs->n; k++) timed += e->costs->classes[k].seconds[fast] >= 0;
    CU_ASSERT(timed > 0);
    CU_ASSERT(run_tokens(e) == 0);
    struct stat st;
    CU_ASSERT(stat(e->costs->cache_path, &st) == 0);
    int32_t *first = malloc((size_t)(e->prefill->n_nodes + e->decode->n_nodes) * sizeof *first);
    int n = 0;
    for (int32_t i = 0; i < e->prefill->n_nodes; i++) first[n++] = e->prefill->nodes[i].backend;
    for (int32_t i = 0; i < e->decode->n_nodes; i++) first[n++] = e->decode->nodes[i].backend;
    vt_engine_free(e);

    e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(e->costs->measured, 0);
    CU_ASSERT(e->costs->cache_hit);
    CU_ASSERT_EQUAL(e->prefill->n_nodes + e->decode->n_nodes, n);
    int same = 1;
    n = 0;
    for (int32_t i = 0; i < e->prefill->n_nodes; i++) same &= first[n++] == e->prefill->nodes[i].backend;
    for (int32_t i = 0; i < e->decode->n_nodes; i++) same &= first[n++] == e->decode->nodes[i].backend;
    CU_ASSERT(same);
    free(first);
    vt_engine_free(e);
}

/* Every node of p that is placed by its own class (not a store or convert,
 * which negotiation places with the k/v path) is on the backend the recorded
 * times choose: the lowest, the preferred backend's divided by
 * VT_AUTO_MARGIN (recomputed here from the times, not asked of the plan
 * builder). */
static void check_cheapest(const vt_plan *p, const vt_auto_costs *c, int preferred, int fast, int target, int near,
                           int *on_fast) {
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        if (n->op == VT_OP_RESHAPE_AND_CACHE || n->op == VT_OP_CONVERT) continue;
        CU_ASSERT_FATAL(n->cost_class >= 0);
        int best = -1;
        double best_s = 0;
        for (int b = 0; b < VT_AUTO_MAX_BACKENDS; b++) {
            double s = vt_auto_costs_get(c, n->cost_class, b);
            if (!c->candidate[b] || s < 0) continue;
            if (b == preferred) s /= VT_AUTO_MARGIN;
            if (best < 0 || s < best_s) best = b, best_s = s;
        }
        if (n->backend != best)
            fprintf(stderr, "node %s: on %d, cheapest %d (%s)\n", n->label, n->backend, best,
                    c->classes[n->cost_class].key);
        CU_ASSERT(n->backend == best);
        CU_ASSERT((n->backend == fast) == (n->cost_class == target));
        if (n->cost_class == near) CU_ASSERT(n->backend == preferred);
        *on_fast += n->backend == fast;
    }
}

/* Recorded costs decide: every class costs 1 ms + 0.1 ms x registry index
 * on each backend that ran it, the plugin 5 ms, except on two classes: the
 * decode ffn_down matmul, where the plugin is recorded at 0.01 ms (it takes
 * those nodes), and the decode ffn_gate matmul, where the preferred backend
 * is recorded at 1 ms, the plugin 3% faster and the others at 2 ms (a near
 * tie: the class stays on the preferred backend). */
static void test_plan_is_cheapest_by_recorded_costs(void) {
    vt_engine *e = auto_engine(fast_dir); /* from the cache the test above wrote, or measured now */
    CU_ASSERT_FATAL(e != NULL);
    const int fast = backend_index(e, "auto_fast");
    CU_ASSERT_FATAL(fast >= 0);
    char key[8192], path[1024];
    vt_calibration_key(e->registry, e->costs, e->host->n_threads, key, sizeof key);
    snprintf(path, sizeof path, "%s", e->costs->cache_path);
    vt_auto_costs c = *e->costs;
    c.classes = NULL, c.n = c.cap = 0;
    char why[256];
    CU_ASSERT_FATAL(vt_calibration_load(path, key, e->registry, &c, why, sizeof why) == VT_CALIBRATION_READ);
    int target_node = -1, near_node = -1;
    for (int32_t i = 0; i < e->decode->n_nodes; i++) {
        if (strcmp(e->decode->nodes[i].label, "blk.0.ffn_down") == 0) target_node = i;
        if (strcmp(e->decode->nodes[i].label, "blk.0.ffn_gate") == 0) near_node = i;
    }
    CU_ASSERT_FATAL(target_node >= 0 && near_node >= 0);
    const int target = vt_auto_costs_find(&c, e->costs->classes[e->decode->nodes[target_node].cost_class].key);
    const int near = vt_auto_costs_find(&c, e->costs->classes[e->decode->nodes[near_node].cost_class].key);
    CU_ASSERT_FATAL(target >= 0 && near >= 0 && near != target);
    const int preferred = e->preferred;
    CU_ASSERT_FATAL(preferred != fast && c.classes[near].seconds[preferred] >= 0 && c.classes[near].seconds[fast] >= 0);
    for (int k = 0; k < c.n; k++)
        for (int b = 0; b < VT_AUTO_MAX_BACKENDS; b++) {
            if (c.classes[k].seconds[b] < 0) continue;
            if (k == near)
                c.classes[k].seconds[b] = b == preferred ? 1e-3 : b == fast ? 0.97e-3 : 2e-3;
            else
                c.classes[k].seconds[b] = b == fast ? (k == target ? 1e-5 : 5e-3) : 1e-3 + 1e-4 * b;
        }
    vt_error err = {0};
    CU_ASSERT_FATAL(vt_calibration_save(path, key, e->registry, &c, &err) == VT_OK);
    vt_engine_free(e);

    e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(e->costs->measured, 0); /* nothing timed: the recorded costs alone decide */
    const int engine_target = vt_auto_costs_find(e->costs, c.classes[target].key);
    const int engine_near = vt_auto_costs_find(e->costs, c.classes[near].key);
    int on_fast = 0;
    check_cheapest(e->prefill, e->costs, e->preferred, fast, engine_target, engine_near, &on_fast);
    check_cheapest(e->decode, e->costs, e->preferred, fast, engine_target, engine_near, &on_fast);
    CU_ASSERT(e->decode->nodes[near_node].backend == e->preferred);
    /* ffn_down of every layer whose weight has the class's dtype: one at least */
    CU_ASSERT(on_fast >= 1);
    CU_ASSERT(e->decode->nodes[target_node].backend == fast);
    CU_ASSERT(run_tokens(e) == 0);
    vt_auto_costs_free(&c);
    vt_engine_free(e);
}

/* Two engines that calibrated at once (processes sharing a cache folder)
 * each save what they timed under one key: the second save keeps the
 * first's classes it did not time, and its own times win where both timed
 * a class. Before saves merged, the later writer dropped the earlier's
 * classes and a third engine measured them again. */
static void test_saves_of_one_key_merge(void) {
    vt_engine *e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_FATAL(e->costs->n >= 3);
    char key[8192], path[1100];
    vt_calibration_key(e->registry, e->costs, e->host->n_threads, key, sizeof key);
    snprintf(path, sizeof path, "%s.merge", e->costs->cache_path);
    remove(path);
    const int b = e->preferred, n = e->costs->n;
    /* first: classes [0, n/2] at 1 ms; second: [n/2, n) at 2 ms, class n/2 in both */
    vt_auto_costs first = *e->costs, second = *e->costs;
    first.classes = malloc((size_t)n * sizeof *first.classes);
    second.classes = malloc((size_t)n * sizeof *second.classes);
    CU_ASSERT_FATAL(first.classes && second.classes);
    first.cap = second.cap = n;
    for (int k = 0; k < n; k++) {
        first.classes[k] = second.classes[k] = e->costs->classes[k];
        for (int j = 0; j < VT_AUTO_MAX_BACKENDS; j++)
            first.classes[k].seconds[j] = second.classes[k].seconds[j] = VT_COST_UNMEASURED;
        if (k <= n / 2) first.classes[k].seconds[b] = 1e-3;
        if (k >= n / 2) second.classes[k].seconds[b] = 2e-3;
    }
    vt_error err = {0};
    CU_ASSERT_FATAL(vt_calibration_save(path, key, e->registry, &first, &err) == VT_OK);
    CU_ASSERT_FATAL(vt_calibration_save(path, key, e->registry, &second, &err) == VT_OK);
    vt_auto_costs read = *e->costs;
    read.classes = NULL, read.n = read.cap = 0;
    char why[256];
    CU_ASSERT_FATAL(vt_calibration_load(path, key, e->registry, &read, why, sizeof why) == VT_CALIBRATION_READ);
    CU_ASSERT_EQUAL(read.n, n);
    for (int k = 0; k < n; k++) {
        const int j = vt_auto_costs_find(&read, e->costs->classes[k].key);
        CU_ASSERT_FATAL(j >= 0);
        CU_ASSERT_EQUAL(read.classes[j].seconds[b], k < n / 2 ? 1e-3 : 2e-3);
    }
    /* an engine whose calibration saw the backend fail keeps none of its
     * times, the file's included: the next engine times it again */
    int second_b = -1; /* a second candidate, timed, so the classes stay in the file */
    for (int j = 0; j < VT_AUTO_MAX_BACKENDS && second_b < 0; j++)
        if (j != b && e->costs->candidate[j]) second_b = j;
    CU_ASSERT_FATAL(second_b >= 0);
    vt_auto_costs failing = first;
    failing.classes = malloc((size_t)n * sizeof *failing.classes);
    CU_ASSERT_FATAL(failing.classes != NULL);
    for (int k = 0; k < n; k++) {
        failing.classes[k] = first.classes[k];
        failing.classes[k].seconds[b] = VT_COST_UNMEASURED;
        failing.classes[k].seconds[second_b] = 3e-3;
    }
    failing.failed[b] = true;
    CU_ASSERT_FATAL(vt_calibration_save(path, key, e->registry, &failing, &err) == VT_OK);
    vt_auto_costs_free(&failing);
    vt_auto_costs_free(&read);
    read.n = read.cap = 0;
    CU_ASSERT_FATAL(vt_calibration_load(path, key, e->registry, &read, why, sizeof why) == VT_CALIBRATION_READ);
    CU_ASSERT_EQUAL(read.n, n);
    for (int k = 0; k < read.n; k++) {
        CU_ASSERT_EQUAL(read.classes[k].seconds[b], VT_COST_UNMEASURED);
        CU_ASSERT_EQUAL(read.classes[k].seconds[second_b], 3e-3);
    }
    CU_ASSERT_FATAL(vt_calibration_save(path, key, e->registry, &first, &err) == VT_OK);
    CU_ASSERT_FATAL(vt_calibration_save(path, key, e->registry, &second, &err) == VT_OK);
    /* under another key the file is replaced, nothing of it kept */
    char other[8192];
    vt_calibration_key(e->registry, e->costs, e->host->n_threads + 1, other, sizeof other);
    CU_ASSERT_FATAL(vt_calibration_save(path, other, e->registry, &second, &err) == VT_OK);
    vt_auto_costs_free(&read);
    read.n = read.cap = 0;
    CU_ASSERT_FATAL(vt_calibration_load(path, other, e->registry, &read, why, sizeof why) == VT_CALIBRATION_READ);
    CU_ASSERT_EQUAL(read.n, n - n / 2);
    vt_auto_costs_free(&read);
    vt_auto_costs_free(&first);
    vt_auto_costs_free(&second);
    char lock[1200];
    snprintf(lock, sizeof lock, "%s.lock", path);
    remove(path);
    remove(lock);
    vt_engine_free(e);
}

/* A flipped byte: reported as corrupt, measured again, the file rewritten valid. */
static void test_corrupt_cache_is_redone(void) {
    vt_engine *e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s", e->costs->cache_path);
    vt_engine_free(e);
    size_t n = 0;
    char *data = vt_test_read_file(path, &n);
    CU_ASSERT_FATAL(data && n > 200);
    data[n / 2] ^= 0x01;
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(data, 1, n, f);
    fclose(f);
    free(data);
    log_text[0] = '\0';
    e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(e->costs->cache_read, VT_CALIBRATION_CORRUPT);
    CU_ASSERT(strstr(log_text, "is corrupt (checksum mismatch): measuring again") != NULL); /* and says so */
    CU_ASSERT(e->costs->measured > 0);
    CU_ASSERT(run_tokens(e) == 0);
    vt_engine_free(e);
    e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT(e->costs->cache_hit);
    CU_ASSERT_EQUAL(e->costs->cache_read, VT_CALIBRATION_READ); /* the rewritten file is valid */
    vt_engine_free(e);
}

/* A file under the right name but recorded with another key (here another
 * thread count, checksum valid): stale, measured again. */
static void test_other_key_is_stale(void) {
    vt_engine *e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    char key[8192], other[8192];
    vt_calibration_key(e->registry, e->costs, e->host->n_threads, key, sizeof key);
    vt_calibration_key(e->registry, e->costs, e->host->n_threads + 1, other, sizeof other);
    vt_error err = {0};
    CU_ASSERT_FATAL(vt_calibration_save(e->costs->cache_path, other, e->registry, e->costs, &err) == VT_OK);
    vt_engine_free(e);
    log_text[0] = '\0';
    e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(e->costs->cache_read, VT_CALIBRATION_STALE);
    /* and says so, naming the first line of the key that differs */
    CU_ASSERT(strstr(log_text, "is stale (recorded for another machine or setup ('threads") != NULL);
    CU_ASSERT(e->costs->measured > 0);
    vt_engine_free(e);
}

/* Backend options are part of the key: times taken under one
 * configuration of a backend (onednn's precision, simd's tier) are not
 * used under another, whose file is another; the same options find theirs. */
static void test_options_are_part_of_the_key(void) {
    vt_engine *plain = auto_engine(fast_dir);
    CU_ASSERT_FATAL(plain != NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s", plain->costs->cache_path);
    vt_engine_free(plain);
    vt_engine *e = auto_engine_with(fast_dir, "simd.isa=avx2\n");
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_STRING_NOT_EQUAL(e->costs->cache_path, path);
    CU_ASSERT(e->costs->measured > 0);
    char with_options[1024];
    snprintf(with_options, sizeof with_options, "%s", e->costs->cache_path);
    vt_engine_free(e);
    e = auto_engine_with(fast_dir, "simd.isa=avx2\n");
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_STRING_EQUAL(e->costs->cache_path, with_options);
    CU_ASSERT(e->costs->cache_hit);
    vt_engine_free(e);
}

/* A backend file that changed (its mtime here): another key, so another
 * file; nothing recorded for the old one is used. */
static void test_changed_backend_file_is_measured_again(void) {
    vt_engine *e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    char before[1024];
    snprintf(before, sizeof before, "%s", e->costs->cache_path);
    CU_ASSERT(e->costs->cache_hit);
    vt_engine_free(e);
    char so[1200];
    snprintf(so, sizeof so, "%s/libvt-backend-auto_fast.so", fast_dir);
    struct utimbuf t = {1000000000, 1000000000};
    CU_ASSERT_FATAL(utime(so, &t) == 0);
    e = auto_engine(fast_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT(strcmp(before, e->costs->cache_path) != 0);
    CU_ASSERT(e->costs->measured > 0);
    CU_ASSERT(!e->costs->cache_hit);
    vt_engine_free(e);
}

/* A backend whose matmul fails: left out with a warning naming it; the
 * engine starts, no node runs on it, and the plan runs. */
static void test_failing_backend_is_left_out(void) {
    log_text[0] = '\0';
    vt_engine *e = auto_engine(fail_dir);
    CU_ASSERT_FATAL(e != NULL);
    const int bad = backend_index(e, "auto_failing");
    CU_ASSERT_FATAL(bad >= 0);
    CU_ASSERT(strstr(log_text, "backend 'auto_failing' failed during calibration") != NULL);
    CU_ASSERT(e->costs->failed[bad]);
    int on_bad = 0;
    for (int32_t i = 0; i < e->prefill->n_nodes; i++) on_bad += e->prefill->nodes[i].backend == bad;
    for (int32_t i = 0; i < e->decode->n_nodes; i++) on_bad += e->decode->nodes[i].backend == bad;
    CU_ASSERT_EQUAL(on_bad, 0);
    CU_ASSERT(run_tokens(e) == 0);
    vt_engine_free(e);
}

/* Greedy tokens of e after a fixed prompt (prefill, then decode). */
static int greedy(vt_engine *e, int32_t *out, int n) {
    const int32_t prompt[6] = {1, 7, 42, 3, 99, 5};
    const int32_t V = e->model->hp.n_vocab;
    vt_error err = {0};
    vt_engine_reset(e);
    if (vt_engine_eval(e, prompt, 6, false, &err) != VT_OK) return -1;
    for (int i = 0; i < n; i++) {
        out[i] = vt_argmax(vt_engine_logits(e, 0), V);
        if (vt_engine_eval(e, &out[i], 1, true, &err) != VT_OK) return -1;
    }
    return 0;
}

/* prep_reversed's matmul fails on weights it did not prepare, so it takes
 * part in auto only if calibration hands it nodes through the prepare hook
 * as the engine does: timed (matmul classes included), never left out. Then
 * with recorded costs making it the cheapest everywhere, the plan places its
 * nodes, the engine prepares their weights, and the greedy tokens equal the
 * reference's (prep_reversed computes with the reference's kernels). */
static void test_preparing_backend_is_timed_through_the_hook(void) {
    log_text[0] = '\0';
    vt_engine *e = auto_engine(prep_dir);
    CU_ASSERT_FATAL(e != NULL);
    const int prep = backend_index(e, "prep_reversed");
    CU_ASSERT_FATAL(prep >= 0);
    CU_ASSERT(strstr(log_text, "left out") == NULL);
    if (strstr(log_text, "left out")) fprintf(stderr, "%s", log_text);
    CU_ASSERT(e->costs->candidate[prep]);
    CU_ASSERT(!e->costs->failed[prep]);
    CU_ASSERT(e->costs->measured > 0);
    int matmuls_timed = 0;
    for (int32_t i = 0; i < e->decode->n_nodes; i++) {
        const vt_plan_node *n = &e->decode->nodes[i];
        if (n->op == VT_OP_MATMUL && n->cost_class >= 0)
            matmuls_timed += vt_auto_costs_get(e->costs, n->cost_class, prep) >= 0;
    }
    CU_ASSERT(matmuls_timed > 0);

    /* every class prep_reversed ran recorded as cheapest on it */
    char key[8192], path[1024];
    vt_calibration_key(e->registry, e->costs, e->host->n_threads, key, sizeof key);
    /* the key says which backend's times were taken on prepared weights */
    const char *line = strstr(key, "backend prep_reversed ");
    CU_ASSERT_FATAL(line != NULL);
    char tail[64];
    snprintf(tail, sizeof tail, " abi %d.%d prepares yes", VT_ABI_MAJOR, VT_ABI_MINOR);
    CU_ASSERT(strstr(line, tail) == strchr(line, '\n') - strlen(tail));
    snprintf(path, sizeof path, "%s", e->costs->cache_path);
    vt_auto_costs c = *e->costs;
    c.classes = NULL, c.n = c.cap = 0;
    char why[256];
    CU_ASSERT_FATAL(vt_calibration_load(path, key, e->registry, &c, why, sizeof why) == VT_CALIBRATION_READ);
    for (int k = 0; k < c.n; k++)
        for (int b = 0; b < VT_AUTO_MAX_BACKENDS; b++)
            if (c.classes[k].seconds[b] >= 0) c.classes[k].seconds[b] = b == prep ? 1e-5 : 1e-3;
    vt_error err = {0};
    CU_ASSERT_FATAL(vt_calibration_save(path, key, e->registry, &c, &err) == VT_OK);
    vt_auto_costs_free(&c);
    vt_engine_free(e);

    e = auto_engine(prep_dir);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(e->costs->measured, 0);
    int matmuls_on_prep = 0;
    for (int32_t i = 0; i < e->prefill->n_nodes; i++)
        matmuls_on_prep += e->prefill->nodes[i].op == VT_OP_MATMUL && e->prefill->nodes[i].backend == prep;
    for (int32_t i = 0; i < e->decode->n_nodes; i++)
        matmuls_on_prep += e->decode->nodes[i].op == VT_OP_MATMUL && e->decode->nodes[i].backend == prep;
    CU_ASSERT(matmuls_on_prep > 0);
    int n_prepared = 0;
    CU_ASSERT(vt_weight_prep_bytes(e->prepared, prep, &n_prepared) > 0);
    CU_ASSERT(n_prepared > 0);

    enum { N_GEN = 8 };
    int32_t got[N_GEN], want[N_GEN];
    CU_ASSERT_FATAL(greedy(e, got, N_GEN) == 0);
    vt_engine_free(e);
    vt_fixture ref;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&ref, model_path, "reference", VT_F16, false), VT_OK);
    CU_ASSERT_FATAL(greedy(ref.engine, want, N_GEN) == 0);
    vt_fixture_close(&ref);
    for (int i = 0; i < N_GEN; i++) CU_ASSERT_EQUAL(got[i], want[i]);
}

/* A prepare hook failing during calibration is that backend's failure: left
 * out with a warning quoting its reason, the engine starts without it. (The
 * backend file's mtime changes first: another key, so nothing recorded
 * above is used and calibration runs.) */
static void test_failing_prepare_hook_is_left_out(void) {
    char so[1200];
    snprintf(so, sizeof so, "%s/libvt-backend-prep_reversed.so", prep_dir);
    struct utimbuf t = {1000000000, 1000000000};
    CU_ASSERT_FATAL(utime(so, &t) == 0);
    setenv("VT_TEST_PREP_FAIL", "*", 1);
    log_text[0] = '\0';
    vt_engine *e = auto_engine(prep_dir);
    unsetenv("VT_TEST_PREP_FAIL");
    CU_ASSERT_FATAL(e != NULL);
    const int prep = backend_index(e, "prep_reversed");
    CU_ASSERT_FATAL(prep >= 0);
    CU_ASSERT(e->costs->failed[prep]);
    CU_ASSERT(strstr(log_text, "backend 'prep_reversed' failed during calibration") != NULL);
    CU_ASSERT(strstr(log_text, "injected failure for ") != NULL);
    int on_prep = 0;
    for (int32_t i = 0; i < e->prefill->n_nodes; i++) on_prep += e->prefill->nodes[i].backend == prep;
    for (int32_t i = 0; i < e->decode->n_nodes; i++) on_prep += e->decode->nodes[i].backend == prep;
    CU_ASSERT_EQUAL(on_prep, 0);
    CU_ASSERT(run_tokens(e) == 0);
    vt_engine_free(e);
}

static int suite_clean(void) {
    vt_model_free(model);
    model = NULL;
    vt_set_log_callback(NULL, NULL);
    return 0;
}

/* Node `label` of e's prefill plan, or NULL. */
static const vt_plan_node *prefill_node(const vt_engine *e, const char *label) {
    for (int32_t i = 0; i < e->prefill->n_nodes; i++)
        if (strcmp(e->prefill->nodes[i].label, label) == 0) return &e->prefill->nodes[i];
    return NULL;
}

/* A class is timed as it was keyed. In a q4_k_m mix the last layer's attn_v
 * is Q6_K (Q4_K in the other layer of the tiny shape), a class of its own in
 * prefill, keyed before negotiation with an f32 output; it writes v for the
 * KV store, so on the preferred backend, simd, which calibration's plans
 * place every node on before anything is timed, negotiation makes its
 * output the cache's f16. kv_no_convert's matmuls write f32 only: the class
 * as keyed is one it runs, so it must be measured there, not recorded as
 * declining it (which kept --backend auto from ever placing such a node on
 * a backend like onednn, whatever its speed). */
static void test_class_is_timed_as_keyed(void) {
    if (!vt_test_simd_expected()) return; /* the situation needs simd's f16-writing matmul */
    vt_synth_params sp = {0};
    vt_error err = {0};
    CU_ASSERT_FATAL(vt_synth_shape(&sp, "tiny", &err) == VT_OK);
    sp.type = "q4_k_m";
    sp.n_threads = 1;
    char path[1200];
    snprintf(path, sizeof path, "%s/keyed-q4_k_m.gguf", root);
    CU_ASSERT_FATAL(vt_synth_write(&sp, path, &err) == VT_OK);
    vt_model *m = NULL;
    CU_ASSERT_FATAL(vt_model_load(path, &m, &err) == VT_OK);

    /* the situation: on simd, the node writes f16 */
    vt_options o;
    vt_fixture_options(&o, "simd", VT_F16);
    vt_engine *e = NULL;
    CU_ASSERT_FATAL(vt_engine_create(&o, m, false, &e, &err) == VT_OK);
    const vt_plan_node *v = prefill_node(e, "blk.1.attn_v");
    CU_ASSERT_FATAL(v != NULL);
    CU_ASSERT_EQUAL(e->prefill->values[v->dst].dtype, VT_F16);
    vt_engine_free(e);

    vt_fixture_options(&o, "auto", VT_F16);
    snprintf(o.backend_path, sizeof o.backend_path, "%.1023s", f32_dir);
    e = NULL;
    if (vt_engine_create(&o, m, false, &e, &err) != VT_OK) fprintf(stderr, "auto engine: %s\n", err.msg);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT(e->costs->measured > 0);
    /* so calibration's plans had the f16 node */
    CU_ASSERT_STRING_EQUAL(vt_registry_at(e->registry, e->preferred)->name, "simd");
    const int f32_only = backend_index(e, "kv_no_convert");
    CU_ASSERT_FATAL(f32_only >= 0);
    CU_ASSERT_FATAL(e->costs->candidate[f32_only]);
    v = prefill_node(e, "blk.1.attn_v");
    CU_ASSERT_FATAL(v != NULL && v->cost_class >= 0);
    const vt_cost_class *k = &e->costs->classes[v->cost_class];
    CU_ASSERT(strstr(k->key, "w=q6_k") != NULL && strstr(k->key, "y=f32") != NULL);
    CU_ASSERT_EQUAL(v->cost_dst_dtype, VT_F32);
    CU_ASSERT(k->seconds[f32_only] >= 0);
    CU_ASSERT(run_tokens(e) == 0);
    vt_engine_free(e);

    /* a backend that prepares its weights and writes f32 only is offered
     * the weight too (calibration's offer, as keyed): prep_reversed then
     * refuses any weight that arrives unprepared */
    setenv("VT_TEST_PREP_F32_ONLY", "1", 1);
    log_text[0] = '\0';
    snprintf(o.backend_path, sizeof o.backend_path, "%.1023s", prep_dir);
    e = NULL;
    if (vt_engine_create(&o, m, false, &e, &err) != VT_OK) fprintf(stderr, "auto engine: %s\n", err.msg);
    unsetenv("VT_TEST_PREP_F32_ONLY");
    CU_ASSERT_FATAL(e != NULL);
    const int prep = backend_index(e, "prep_reversed");
    CU_ASSERT_FATAL(prep >= 0);
    CU_ASSERT(!e->costs->failed[prep]);
    CU_ASSERT(strstr(log_text, "failed during calibration") == NULL);
    v = prefill_node(e, "blk.1.attn_v");
    CU_ASSERT_FATAL(v != NULL && v->cost_class >= 0);
    CU_ASSERT(e->costs->classes[v->cost_class].seconds[prep] >= 0);
    vt_engine_free(e);
    vt_model_free(m);
}

/* A mixture of experts calibrated at one sequence per step, then at four:
 * the second engine finds moe_route's class (keyed without the token
 * count) in the cache but moe_matmul's at four tokens not, so calibration
 * times moe_matmul without running moe_route. The expert ids it reads must
 * still be valid: with the arena's fill pattern simd refused them, was left
 * out of auto placement, and the whole model ran on the reference. */
static void test_index_inputs_are_real_when_their_producer_is_cached(void) {
    if (!vt_test_simd_expected()) return; /* the placement checked is simd's */
    char path[1200], cache[1200];
    snprintf(path, sizeof path, "%s/models/qwen3moe-tiny-q8_0.gguf", vt_test_data_dir("models"));
    snprintf(cache, sizeof cache, "%s/moe-cache", root);
    mkdir(cache, 0755);
    const char *was = getenv("XDG_CACHE_HOME");
    char saved[1200];
    snprintf(saved, sizeof saved, "%s", was ? was : "");
    const bool had = was != NULL;
    setenv("XDG_CACHE_HOME", cache, 1);
    vt_error err = {0};
    vt_model *m = NULL;
    CU_ASSERT_FATAL(vt_model_load(path, &m, &err) == VT_OK);
    for (int32_t seqs = 1; seqs <= 4; seqs += 3) {
        vt_options o;
        vt_fixture_options(&o, "auto", VT_F16);
        const vt_engine_shape shape = {.all_logits = false, .max_seqs = seqs};
        log_text[0] = '\0';
        vt_engine *e = NULL;
        if (vt_engine_create_shaped(&o, m, &shape, &e, &err) != VT_OK) fprintf(stderr, "auto engine: %s\n", err.msg);
        CU_ASSERT(e != NULL);
        if (!e) break;
        CU_ASSERT(e->costs->measured > 0); /* the second engine too: its 4-token classes are new */
        for (int b = 0; b < VT_AUTO_MAX_BACKENDS; b++) CU_ASSERT(!e->costs->failed[b]);
        CU_ASSERT(strstr(log_text, "failed during calibration") == NULL);
        int on_simd = 0, moe_timed = 0;
        for (int32_t i = 0; i < e->decode->n_nodes; i++) {
            const vt_plan_node *n = &e->decode->nodes[i];
            const int b = n->backend;
            on_simd += strcmp(vt_registry_at(e->registry, b)->name, "simd") == 0;
            /* the class at this width was timed on simd (or declined), not left out */
            if (n->op == VT_OP_MOE_MATMUL && strcmp(vt_registry_at(e->registry, b)->name, "simd") == 0)
                moe_timed += vt_auto_costs_get(e->costs, n->cost_class, b) >= 0;
        }
        CU_ASSERT(on_simd > 0);
        CU_ASSERT(moe_timed > 0);
        vt_engine_free(e);
    }
    vt_model_free(m);
    /* a dense model on the same cache: the engine counts its own classes,
     * not the mixture's the cache holds too */
    if (!model) CU_ASSERT_FATAL(vt_model_load(model_path, &model, &err) == VT_OK);
    vt_options o;
    vt_fixture_options(&o, "auto", VT_F16);
    vt_engine *e = NULL;
    CU_ASSERT_FATAL(vt_engine_create(&o, model, false, &e, &err) == VT_OK);
    int distinct = 0;
    for (int k = 0; k < e->costs->n; k++) {
        bool used = false;
        for (int32_t i = 0; i < e->prefill->n_nodes; i++) used |= e->prefill->nodes[i].cost_class == k;
        for (int32_t i = 0; i < e->decode->n_nodes; i++) used |= e->decode->nodes[i].cost_class == k;
        distinct += used;
    }
    CU_ASSERT_EQUAL(vt_engine_n_classes(e), distinct);
    CU_ASSERT(distinct < e->costs->n); /* the cache holds the mixture's classes too */
    vt_engine_free(e);
    if (had) setenv("XDG_CACHE_HOME", saved, 1);
    else unsetenv("XDG_CACHE_HOME");
}

/* A scripted timer: the times each candidate returns in turn, and the
 * order in which the candidates were asked. */
typedef struct scripted_timer {
    double times[2][8];
    int next[2];
    int order[16];
    int n_calls;
    int fail_on_call; /* -1: never */
} scripted_timer;

static vt_status scripted(void *user, int which, double *seconds) {
    scripted_timer *t = user;
    if (t->n_calls == t->fail_on_call) return VT_ERR_BACKEND;
    t->order[t->n_calls++] = which;
    *seconds = t->times[which][t->next[which]++];
    return VT_OK;
}

/* Close calls are timed again alternately and keep each candidate's fastest
 * timing; a clear winner is not timed again; a failing timing names its
 * candidate. */
static void test_close_calls_are_timed_again(void) {
    /* 32 ms vs 31.9 ms: close. Two rounds, the first starting with
     * candidate 0, the second with 1; their fastest: 20 ms and 30 ms, so
     * the decision flips to the candidate that was truly faster. */
    scripted_timer t = {{{21e-3, 20e-3}, {33e-3, 30e-3}}, {0, 0}, {0}, 0, -1};
    double s[2] = {32e-3, 31.9e-3};
    int retimed = -1, failed = 7;
    CU_ASSERT_EQUAL(vt_auto_settle_close(s, scripted, &t, &retimed, &failed), VT_OK);
    CU_ASSERT_EQUAL(retimed, 2 * VT_AUTO_RETIME_ROUNDS);
    CU_ASSERT_EQUAL(failed, -1);
    CU_ASSERT_EQUAL(t.n_calls, 4);
    static const int want_order[4] = {0, 1, 1, 0};
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(t.order[k], want_order[k]);
    CU_ASSERT_DOUBLE_EQUAL(s[0], 20e-3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(s[1], 30e-3, 1e-12);

    /* a first timing faster than every retiming is kept */
    scripted_timer keep = {{{50e-3, 50e-3}, {50e-3, 50e-3}}, {0, 0}, {0}, 0, -1};
    double k2[2] = {10e-3, 11e-3};
    CU_ASSERT_EQUAL(vt_auto_settle_close(k2, scripted, &keep, &retimed, &failed), VT_OK);
    CU_ASSERT_DOUBLE_EQUAL(k2[0], 10e-3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(k2[1], 11e-3, 1e-12);

    /* just past the margin either way: not close, nothing timed */
    scripted_timer none = {{{0}}, {0, 0}, {0}, 0, -1};
    double far[2] = {10e-3, 10e-3 * VT_AUTO_CLOSE * 1.001};
    CU_ASSERT_EQUAL(vt_auto_settle_close(far, scripted, &none, &retimed, &failed), VT_OK);
    double far_rev[2] = {far[1], far[0]};
    CU_ASSERT_EQUAL(vt_auto_settle_close(far_rev, scripted, &none, &retimed, &failed), VT_OK);
    CU_ASSERT_EQUAL(none.n_calls, 0);
    CU_ASSERT_EQUAL(retimed, 0);
    CU_ASSERT_DOUBLE_EQUAL(far[1], 10e-3 * VT_AUTO_CLOSE * 1.001, 1e-12);

    /* a failure on the third timing (round 1's first: candidate 1) */
    scripted_timer bad = {{{20e-3, 20e-3}, {20e-3, 20e-3}}, {0, 0}, {0}, 0, 2};
    double b2[2] = {20e-3, 21e-3};
    CU_ASSERT_EQUAL(vt_auto_settle_close(b2, scripted, &bad, &retimed, &failed), VT_ERR_BACKEND);
    CU_ASSERT_EQUAL(failed, 1);
    CU_ASSERT_EQUAL(retimed, 2);
}

/* `vt backends --calibrate -m MODEL` (the command the docs give for timing
 * again) times the model's classes on every candidate, names each winner,
 * and leaves the cache a run with --backend auto then reads every time from
 * (the build's backends only: the test plugins are more than auto takes). */
static void test_calibrate_command_writes_the_cache(void) {
    char cmd[3000], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "env -u VT_BACKEND_PATH -u VT_CONFIG '%s' backends --calibrate -m '%s' -t 1", VT_CLI_PATH,
             model_path);
    int rc = vt_test_run_cmd(cmd, &out, &err);
    if (rc != 0) printf("\n  rc %d: %s", rc, err ? err : "");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    unsigned classes = 0;
    const char *line = strstr(out, "calibrated ");
    CU_ASSERT(line && sscanf(line, "calibrated %u shape classes", &classes) == 1 && classes > 0);
    const char *at = line ? strstr(line, "cache: ") : NULL;
    char cache[1200] = "";
    if (at) sscanf(at, "cache: %1199s", cache);
    struct stat st;
    CU_ASSERT(cache[0] && stat(cache, &st) == 0 && st.st_size > 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "simd*=") ? out : strstr(out, "reference*=")); /* each class's winner */
    free(out);
    free(err);
    out = err = NULL;
    snprintf(cmd, sizeof cmd, "env -u VT_BACKEND_PATH -u VT_CONFIG '%s' run -m '%s' --backend auto -p hi -n 1 -t 1 --explain",
             VT_CLI_PATH, model_path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, &err), 0);
    CU_ASSERT(err && strstr(err, "0 times measured now") && strstr(err, cache));
    if (err && !strstr(err, "0 times measured now")) printf("\n  %s", err);
    free(out);
    free(err);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"a third-party plugin is timed like any backend; the second engine reads the cache",
         test_plugin_is_timed_and_cache_reused},
        {"vt backends --calibrate -m MODEL writes the cache --backend auto then reads", test_calibrate_command_writes_the_cache},
        {"the plan is the cheapest by the recorded costs; the plugin fastest on one class gets exactly its nodes",
         test_plan_is_cheapest_by_recorded_costs},
        {"saves of one key keep each other's classes; another key replaces the file", test_saves_of_one_key_merge},
        {"a corrupt calibration cache is reported and measured again", test_corrupt_cache_is_redone},
        {"a cache recorded under another key is stale and measured again", test_other_key_is_stale},
        {"a changed backend file means another key: measured again", test_changed_backend_file_is_measured_again},
        {"backend options are part of the key", test_options_are_part_of_the_key},
        {"a backend failing during calibration is left out with a warning; the engine starts",
         test_failing_backend_is_left_out},
        {"a backend that prepares its weights is timed through the prepare hook; a plan on it gives the reference's "
         "tokens",
         test_preparing_backend_is_timed_through_the_hook},
        {"a prepare hook failing during calibration leaves its backend out with its reason",
         test_failing_prepare_hook_is_left_out},
        {"a class is timed as it was keyed: a backend writing only f32 is measured on a node negotiation made "
         "write f16",
         test_class_is_timed_as_keyed},
        {"a node's index inputs are real when their producer's class is already timed (mixture of experts, "
         "1 then 4 sequences)",
         test_index_inputs_are_real_when_their_producer_is_cached},
        {"close calls are timed again alternately, each candidate keeping its fastest", test_close_calls_are_timed_again},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("auto_place", suite_init, suite_clean, tests);
    return vt_test_run();
}
