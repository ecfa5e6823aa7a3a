/* test_plan_check.c — a plan node runs exactly as its backend accepted it.
 *
 *   - The plan check (VT_CHECK_PLAN; on in the fixtures): the first run of a
 *     plan re-offers every node, as the executor is about to run it, to its
 *     backend, and a node changed after negotiation fails that run with an
 *     error naming the node and the backend, before any node runs. Shown with
 *     a param the reference declines (a negative rms_norm eps) and with a
 *     decode store whose k loses its rank on a backend that takes rank-3 k/v
 *     only (tests/plugins/kv_rank3_store.c).
 *   - The check runs on a plan's first successful run only, and not at all
 *     when off.
 *   - Without the check, the test plugins still refuse such a node themselves
 *     (forward_to_reference.h), so it cannot run on the reference they forward to.
 *   - The switch: VT_CHECK_PLAN=1|0 overrides the build's default (on with
 *     assertions, off in Release), anything else is an error naming it, and
 *     `vt config` shows the value and its source.
 *   - What the plans hold in every phase: params set (eps), rank-3 k/v at the
 *     stores at one token too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_fixture.h"
#include "plan_exec.h"
#include "synth.h"
#include "util.h"

static char model_path[1024];
static const int32_t prompt[] = {3, 14, 15, 92, 65, 35};
#define N_PROMPT ((int64_t)(sizeof prompt / sizeof prompt[0]))

static int suite_init(void) {
    vt_synth_params p = {0};
    p.arch = "qwen3";
    p.n_embd = 128;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 32;
    p.n_ff = 256;
    p.n_vocab = 300;
    p.n_ctx = 128;
    p.type = "f32";
    p.seed = 11;
    vt_error err = {0};
    vt_test_tmpfile(model_path, sizeof model_path, "plan-check.gguf");
    if (vt_synth_write(&p, model_path, &err) != VT_OK) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return 1;
    }
    unsetenv("VT_CHECK_PLAN");
    return 0;
}

/* An engine on `backend` (the test plugins on the search path), no fallback. */
static vt_status open_engine(vt_fixture *f, const char *backend, bool check, vt_error *err) {
    memset(f, 0, sizeof *f);
    vt_options o;
    vt_fixture_options(&o, backend, VT_F16);
    snprintf(o.fallback, sizeof o.fallback, "none");
    snprintf(o.backend_path, sizeof o.backend_path, "%s", VT_TEST_PLUGIN_DIR);
    o.check_plan = check;
    vt_status st = vt_model_load(model_path, &f->model, err);
    if (st == VT_OK) st = vt_engine_create(&o, f->model, false, &f->engine, err);
    if (st != VT_OK) printf("\nengine on %s: %s\n", backend, err->msg);
    return st;
}

static bool contains(const char *haystack, const char *needle) {
    bool found = haystack && strstr(haystack, needle) != NULL;
    if (!found) printf("\n  message \"%s\"\n  lacks   \"%s\"\n", haystack ? haystack : "(null)", needle);
    return found;
}

static int32_t find_node(const vt_plan *p, const char *label) {
    for (int32_t i = 0; i < p->n_nodes; i++)
        if (strcmp(p->nodes[i].label, label) == 0) return i;
    return -1;
}

/* A param changed after negotiation: the check names the node and the
 * backend, fails before anything is stored, and the sequence is unchanged. */
static void test_check_names_a_node_changed_after_negotiation(void) {
    vt_fixture f;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(open_engine(&f, "reference", true, &err), VT_OK);
    int32_t i = find_node(f.engine->prefill, "blk.1.ffn_norm");
    CU_ASSERT_FATAL(i >= 0);
    f.engine->prefill->nodes[i].proto.params.rms_norm.eps = -1.0f; /* the reference declines eps < 0 */
    vt_status st = vt_engine_eval(f.engine, prompt, N_PROMPT, false, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_INTERNAL);
    CU_ASSERT(contains(err.msg, "plan check (prefill, 6 tokens): backend 'reference' declines node blk.1.ffn_norm "
                                "rms_norm("));
    CU_ASSERT_EQUAL(vt_engine_n_past(f.engine), 0);
    CU_ASSERT(f.engine->prefill->check_pending); /* a failed run leaves the check armed */
    vt_fixture_close(&f);

    /* Check off: the node reaches the reference, whose own operand check refuses it. */
    CU_ASSERT_EQUAL_FATAL(open_engine(&f, "reference", false, &err), VT_OK);
    CU_ASSERT_FALSE(f.engine->prefill->check_pending);
    i = find_node(f.engine->prefill, "blk.1.ffn_norm");
    CU_ASSERT_FATAL(i >= 0);
    f.engine->prefill->nodes[i].proto.params.rms_norm.eps = -1.0f;
    st = vt_engine_eval(f.engine, prompt, N_PROMPT, false, &err);
    CU_ASSERT_EQUAL(st, VT_ERR_INVALID);
    CU_ASSERT(contains(err.msg, "backend 'reference' failed on node blk.1.ffn_norm"));
    CU_ASSERT_PTR_NULL(strstr(err.msg, "plan check"));
    vt_fixture_close(&f);
}

/* Bytes of every layer's k and v cache, concatenated (malloc'ed). */
static unsigned char *cache_snapshot(const vt_engine *e, size_t *size) {
    const int L = e->model->hp.n_layer;
    vt_tensor t = vt_kv_cache_tensor(e->kv, 0, 0);
    const size_t per = t.nb[3] * (size_t)t.ne[3];
    unsigned char *buf = malloc(per * 2 * (size_t)L);
    if (!buf) return NULL;
    for (int il = 0; il < L; il++)
        for (int v = 0; v < 2; v++) memcpy(buf + per * (size_t)(2 * il + v), vt_kv_cache_tensor(e->kv, il, v).data, per);
    *size = per * 2 * (size_t)L;
    return buf;
}

/* The decode store of kv_rank3_store takes rank-3 k only. A k view that
 * loses its rank after negotiation is caught by the check before any node
 * runs (layer 0's store included: the cache is untouched); with the check
 * off, by the plugin itself: it never reaches the reference. */
static void test_rank_change_caught_by_check_and_by_plugin(void) {
    for (int check = 1; check >= 0; check--) {
        vt_fixture f;
        vt_error err = {0};
        CU_ASSERT_EQUAL_FATAL(open_engine(&f, "kv_rank3_store", check, &err), VT_OK);
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, prompt, N_PROMPT, false, &err), VT_OK);
        vt_plan *d = f.engine->decode;
        int32_t i = find_node(d, "blk.1.store_kv");
        CU_ASSERT_FATAL(i >= 0);
        CU_ASSERT_STRING_EQUAL(vt_registry_at(f.engine->registry, d->nodes[i].backend)->name, "kv_rank3_store");
        vt_value *k = &d->values[d->nodes[i].src[0]];
        CU_ASSERT_EQUAL_FATAL(k->ndim, 3);
        k->ndim = 2; /* {D, KVH, 1} -> {D, KVH}: the same bytes, another rank */
        k->scale_dim = 1;
        size_t before_size = 0, after_size = 0;
        unsigned char *before = cache_snapshot(f.engine, &before_size);
        CU_ASSERT_PTR_NOT_NULL_FATAL(before);
        int32_t t = 7;
        vt_status st = vt_engine_eval(f.engine, &t, 1, true, &err);
        unsigned char *after = cache_snapshot(f.engine, &after_size);
        CU_ASSERT_PTR_NOT_NULL_FATAL(after);
        if (check) {
            CU_ASSERT_EQUAL(st, VT_ERR_INTERNAL);
            CU_ASSERT(contains(err.msg, "plan check (decode, 1 tokens): backend 'kv_rank3_store' declines node "
                                        "blk.1.store_kv reshape_and_cache(f16[32,2], f16[32,2,1]"));
            CU_ASSERT(before_size == after_size && memcmp(before, after, before_size) == 0);
        } else {
            CU_ASSERT_EQUAL(st, VT_ERR_INVALID);
            CU_ASSERT(contains(err.msg, "backend 'kv_rank3_store' failed on node blk.1.store_kv "
                                        "reshape_and_cache(f16[32,2], f16[32,2,1]"));
        }
        CU_ASSERT_EQUAL(vt_engine_n_past(f.engine), N_PROMPT);
        free(before);
        free(after);
        vt_fixture_close(&f);
    }
}

/* A passing first run disarms the check; every later run goes unchecked. */
static void test_check_runs_on_the_first_run_only(void) {
    vt_fixture f;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(open_engine(&f, "reference", true, &err), VT_OK);
    CU_ASSERT(f.engine->prefill->check_pending);
    CU_ASSERT(f.engine->decode->check_pending);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, prompt, N_PROMPT, false, &err), VT_OK);
    CU_ASSERT_FALSE(f.engine->prefill->check_pending);
    CU_ASSERT(f.engine->decode->check_pending);
    int32_t t = 9;
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, &t, 1, true, &err), VT_OK);
    CU_ASSERT_FALSE(f.engine->decode->check_pending);
    /* Disarmed: a later change is no longer re-offered (the reference's own check remains). */
    int32_t i = find_node(f.engine->decode, "blk.0.attn_norm");
    CU_ASSERT_FATAL(i >= 0);
    f.engine->decode->nodes[i].proto.params.rms_norm.eps = -1.0f;
    CU_ASSERT_EQUAL(vt_engine_eval(f.engine, &t, 1, true, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(strstr(err.msg, "plan check"));
    vt_fixture_close(&f);
}

/* The node as built carries what supports() must judge, in both phases:
 * eps on every rms_norm, rank-3 k/v at every store (one token included). */
static void test_plans_hold_params_and_ranks(void) {
    vt_fixture f;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(open_engine(&f, "reference", true, &err), VT_OK);
    const vt_plan *plans[2] = {f.engine->prefill, f.engine->decode};
    for (int ph = 0; ph < 2; ph++) {
        const vt_plan *p = plans[ph];
        int norms = 0, stores = 0;
        for (int32_t i = 0; i < p->n_nodes; i++) {
            const vt_plan_node *n = &p->nodes[i];
            if (n->op == VT_OP_RMS_NORM) {
                norms++;
                CU_ASSERT_EQUAL(n->proto.params.rms_norm.eps, f.model->hp.rms_eps);
            } else if (n->op == VT_OP_RESHAPE_AND_CACHE) {
                stores++;
                CU_ASSERT_EQUAL(n->proto.src[0].ndim, 3);
                CU_ASSERT_EQUAL(n->proto.src[1].ndim, 3);
                CU_ASSERT_EQUAL(n->proto.src[0].ne[2], p->max_tokens);
            }
        }
        CU_ASSERT(f.model->hp.rms_eps > 0);
        CU_ASSERT_EQUAL(norms, 4 * 2 + 1); /* attn, q, k, ffn per layer + output */
        CU_ASSERT_EQUAL(stores, 2);
    }
    CU_ASSERT_EQUAL(f.engine->decode->max_tokens, 1);
    vt_fixture_close(&f);
}

static void test_switch_from_the_environment(void) {
    vt_options o;
    vt_error err = {0};
    unsetenv("VT_CHECK_PLAN");
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL_FATAL(vt_options_load(&o, NULL, &err), VT_OK);
#ifdef NDEBUG
    CU_ASSERT_FALSE(o.check_plan);
#else
    CU_ASSERT_TRUE(o.check_plan);
#endif
    CU_ASSERT_STRING_EQUAL(o.check_plan_source, "default");
    static const char *const values[] = {"1", "0"};
    for (int v = 0; v < 2; v++) {
        setenv("VT_CHECK_PLAN", values[v], 1);
        vt_options_defaults(&o);
        CU_ASSERT_EQUAL(vt_options_load(&o, NULL, &err), VT_OK);
        CU_ASSERT_EQUAL(o.check_plan, v == 0);
        CU_ASSERT_STRING_EQUAL(o.check_plan_source, "env VT_CHECK_PLAN");
    }
    static const char *const bad[] = {"yes", "", "2", "1 "};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        setenv("VT_CHECK_PLAN", bad[b], 1);
        vt_options_defaults(&o);
        vt_options before = o;
        CU_ASSERT_EQUAL(vt_options_load(&o, NULL, &err), VT_ERR_INVALID);
        char want[64];
        snprintf(want, sizeof want, "VT_CHECK_PLAN=%s: accepted values are 1 or 0", bad[b]);
        CU_ASSERT(contains(err.msg, want));
        CU_ASSERT_EQUAL(o.check_plan, before.check_plan); /* nothing applied */
    }
    unsetenv("VT_CHECK_PLAN");

    char *out = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd("env -u VT_CONFIG VT_CHECK_PLAN=1 '" VT_CLI_PATH "' config", &out, NULL), 0);
    CU_ASSERT(contains(out, "VT_CHECK_PLAN                = 1            (env VT_CHECK_PLAN)\n"));
    free(out);
    out = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd("env -u VT_CONFIG -u VT_CHECK_PLAN '" VT_CLI_PATH "' config", &out, NULL), 0);
#ifdef NDEBUG
    CU_ASSERT(contains(out, "VT_CHECK_PLAN                = 0            (default)\n"));
#else
    CU_ASSERT(contains(out, "VT_CHECK_PLAN                = 1            (default)\n"));
#endif
    free(out);
    char *err_text = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd("env -u VT_CONFIG VT_CHECK_PLAN=on '" VT_CLI_PATH "' config", NULL, &err_text), 2);
    CU_ASSERT(contains(err_text, "VT_CHECK_PLAN=on: accepted values are 1 or 0"));
    free(err_text);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"a node changed after negotiation fails its first run, named, before anything runs",
         test_check_names_a_node_changed_after_negotiation},
        {"a store that loses its rank: caught by the check, and by the plugin with the check off",
         test_rank_change_caught_by_check_and_by_plugin},
        {"the check runs on a plan's first successful run only", test_check_runs_on_the_first_run_only},
        {"plans hold eps on every rms_norm and rank-3 k/v at every store, decode included",
         test_plans_hold_params_and_ranks},
        {"VT_CHECK_PLAN=1|0 overrides the build default, anything else is an error; vt config shows it",
         test_switch_from_the_environment},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("plan_check", suite_init, NULL, tests);
    return vt_test_run();
}
