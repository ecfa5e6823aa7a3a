/* test_compare_trace.c — `vt compare --trace`: each backend's plan nodes run
 * on the reference's inputs, and the first node above its threshold named.
 *
 * In process, the reference traced against itself must agree bit for bit on
 * every node over several prefill chunks and decode steps (so the inputs,
 * the KV blocks of earlier chunks included, reach the traced node exactly);
 * through the CLI, simd has no divergence on a committed model, and the test
 * plugin whose matmul drops a Q6_K block diverges first at a matmul q6_k
 * node with every other node within its threshold, and the one whose store
 * rounds wrongly is blamed at its store, not at the attention reading it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "json_mini.h"
#include "plan_trace.h"
#include "quant.h"
#include "util.h"

#define BUG_PLUGIN "bug_matmul_q6_k"

static char model_q4_k_m[1024], model_q6_k[1024];

static int suite_init(void) {
    const char *data = vt_test_data_dir("models");
    if (!data) return 1;
    snprintf(model_q4_k_m, sizeof model_q4_k_m, "%s/models/qwen3-tiny-q4_k_m.gguf", data);
    snprintf(model_q6_k, sizeof model_q6_k, "%s/models/qwen3-tiny-q6_k.gguf", data);
    return 0;
}

static int run(const char *args, char **out, char **err) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", VT_CLI_PATH, args);
    return vt_test_run_cmd(cmd, out, err);
}

/* --json output of a trace run (exit status into *rc). */
static bool run_json(const char *args, int *rc, json_value *doc) {
    char *out = NULL, *err = NULL, msg[256] = "";
    *rc = run(args, &out, &err);
    bool ok = out && json_parse(out, strlen(out), doc, msg, sizeof msg);
    if (!ok) fprintf(stderr, "vt %s: exit %d, bad JSON (%s)\nstdout: %s\nstderr: %s\n", args, *rc, msg,
                     out ? out : "", err ? err : "");
    free(out);
    free(err);
    return ok;
}

static const char *str(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_STRING ? v->str : "";
}

static double num(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    return v && v->type == JSON_NUMBER ? v->number : NAN;
}

/* A --json trace of one backend (`vt ARGS`, parsed into doc, which the
 * caller frees) that must exit expected_rc: that backend's entry. */
static const json_value *trace_one_backend(const char *args, int expected_rc, json_value *doc) {
    int rc = -1;
    CU_ASSERT_FATAL(run_json(args, &rc, doc));
    CU_ASSERT_EQUAL(rc, expected_rc);
    const json_value *backends = json_get(doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY && backends->n == 1);
    return &backends->items[0];
}

/* The first divergence of a backend that must have one. */
static const json_value *first_divergence(const json_value *backend) {
    const json_value *first = json_get(backend, "first_divergence");
    CU_ASSERT_FATAL(first && first->type == JSON_OBJECT);
    return first;
}

/* The reference traced against a second reference engine: 20 prompt tokens
 * in chunks of 8 (three prefill calls, the later ones attending to KV blocks
 * earlier calls wrote), then 3 decode steps. Every node's error is exactly 0:
 * the traced node saw exactly the reference's inputs and cache. */
static void test_reference_against_itself_is_exact(void) {
    vt_error err = {0};
    vt_model *m = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_q4_k_m, &m, &err), VT_OK);
    vt_options opt;
    vt_options_defaults(&opt);
    opt.threads = 2;
    opt.ctx_size = 64;
    opt.batch_size = 8;
    opt.block_size = 16;
    opt.kv_cache_dtype = VT_BF16;
    snprintf(opt.backend, sizeof opt.backend, "reference");
    vt_engine *ref = NULL, *other = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&opt, m, true, &ref, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&opt, m, true, &other, &err), VT_OK);
    vt_trace *t = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_trace_create(ref, other, &t, &err), VT_OK);
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = 1 + (i * 37) % 500;
    CU_ASSERT_EQUAL_FATAL(vt_trace_run(t, prompt, 20, 3, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_trace_count(t), ref->prefill->n_nodes + ref->decode->n_nodes);
    int stores = 0, attentions = 0;
    for (int i = 0; i < vt_trace_count(t); i++) {
        const vt_trace_node *n = vt_trace_at(t, i);
        CU_ASSERT(n->matched);
        CU_ASSERT_EQUAL(n->calls, 3); /* three prefill chunks, or three decode steps */
        CU_ASSERT_EQUAL(vt_trace_error(n), 0.0);
        CU_ASSERT_EQUAL(n->acc.max_abs, 0.0);
        CU_ASSERT(vt_trace_within(n));
        stores += n->op == VT_OP_RESHAPE_AND_CACHE;
        attentions += n->op == VT_OP_ATTENTION;
        if (n->op == VT_OP_RESHAPE_AND_CACHE) CU_ASSERT_STRING_EQUAL(n->dtypes, "bf16->bf16");
        if (n->op == VT_OP_ATTENTION) CU_ASSERT_STRING_EQUAL(n->dtypes, "bf16");
    }
    CU_ASSERT_EQUAL(stores, 2 * m->hp.n_layer);
    CU_ASSERT_EQUAL(attentions, 2 * m->hp.n_layer);
    CU_ASSERT_EQUAL(vt_trace_first_divergence(t), -1);
    vt_trace_free(t);
    vt_engine_free(other);
    vt_engine_free(ref);
    vt_model_free(m);
}

/* simd on a Q4_K_M model: every node of both plans compared (stores and
 * attention at the f16 cache among them), each within its threshold. */
static void test_simd_has_no_divergence(void) {
    if (!vt_test_simd_expected()) return;
    char args[2048], *out = NULL;
    snprintf(args, sizeof args, "compare --trace -m '%s' --backends simd -n 4 -t 2", model_q4_k_m);
    CU_ASSERT_EQUAL(run(args, &out, NULL), 0);
    CU_ASSERT(out && strstr(out, "\nno divergence: simd (") != NULL);
    CU_ASSERT(out && strstr(out, "first divergence") == NULL);
    free(out);

    snprintf(args, sizeof args, "compare --trace --json -m '%s' --backends simd -n 4 -t 2", model_q4_k_m);
    json_value doc;
    const json_value *b = trace_one_backend(args, 0, &doc);
    CU_ASSERT_STRING_EQUAL(str(&doc, "kv_cache_dtype"), "f16");
    CU_ASSERT_EQUAL(num(&doc, "decode_steps"), 3);
    CU_ASSERT_STRING_EQUAL(str(b, "name"), "simd");
    const json_value *first = json_get(b, "first_divergence");
    CU_ASSERT(first && first->type == JSON_NULL);
    const json_value *nodes = json_get(b, "nodes");
    CU_ASSERT_FATAL(nodes && nodes->type == JSON_ARRAY && nodes->n > 0);
    int compared[2] = {0, 0}, stores = 0, attentions = 0;
    for (size_t i = 0; i < nodes->n; i++) {
        const json_value *n = &nodes->items[i];
        const json_value *ok = json_get(n, "ok");
        if (!ok || ok->type != JSON_BOOL) continue; /* not compared: a convert from negotiation */
        CU_ASSERT(ok->boolean);
        CU_ASSERT(num(n, "error") <= num(n, "threshold"));
        const bool decode = strcmp(str(n, "phase"), "decode") == 0;
        compared[decode]++;
        CU_ASSERT_EQUAL(num(n, "calls"), decode ? 3 : 1);
        stores += strcmp(str(n, "op"), "reshape_and_cache") == 0;
        if (strcmp(str(n, "op"), "attention") == 0) {
            attentions++;
            CU_ASSERT_STRING_EQUAL(str(n, "dtypes"), "f16");
        }
    }
    CU_ASSERT(compared[0] > 30 && compared[1] > 30);
    CU_ASSERT_EQUAL(stores, 4); /* 2 layers x 2 phases */
    CU_ASSERT_EQUAL(attentions, 4);
    json_free(&doc);
}

/* The plugin right everywhere but matmul Q6_K (it drops each row's last
 * block): the first divergence is a matmul q6_k node, with an error far above
 * the threshold, and every node of another op or dtype stays within its own. */
static void test_bug_plugin_diverges_at_matmul_q6_k(void) {
    char args[2048], *out = NULL;
    snprintf(args, sizeof args,
             "compare --trace -m '%s' --backend-path '%s' --backends " BUG_PLUGIN " -n 3 -t 2", model_q6_k,
             VT_TEST_PLUGIN_DIR);
    CU_ASSERT_EQUAL(run(args, &out, NULL), 1);
    const char *line = out ? strstr(out, "\nfirst divergence: " BUG_PLUGIN " at blk.") : NULL;
    CU_ASSERT(line != NULL);
    CU_ASSERT(line && strstr(line, " (matmul q6_k->f") != NULL && strstr(line, ", prefill): error ") != NULL);
    free(out);

    snprintf(args, sizeof args,
             "compare --trace --json -m '%s' --backend-path '%s' --backends " BUG_PLUGIN " -n 3 -t 2", model_q6_k,
             VT_TEST_PLUGIN_DIR);
    json_value doc;
    const json_value *b = trace_one_backend(args, 1, &doc);
    const json_value *first = first_divergence(b);
    CU_ASSERT_STRING_EQUAL(str(first, "op"), "matmul");
    CU_ASSERT_EQUAL(strncmp(str(first, "dtypes"), "q6_k->", 6), 0);
    CU_ASSERT_STRING_EQUAL(str(first, "phase"), "prefill");
    CU_ASSERT(num(first, "error") > 100 * num(first, "threshold"));
    const json_value *nodes = json_get(b, "nodes");
    CU_ASSERT_FATAL(nodes && nodes->type == JSON_ARRAY);
    int wrong = 0;
    for (size_t i = 0; i < nodes->n; i++) {
        const json_value *n = &nodes->items[i];
        const json_value *ok = json_get(n, "ok");
        if (!ok || ok->type != JSON_BOOL) continue;
        const bool q6k_matmul = strcmp(str(n, "op"), "matmul") == 0 && strncmp(str(n, "dtypes"), "q6_k->", 6) == 0;
        if (q6k_matmul) wrong += !ok->boolean;
        else CU_ASSERT(ok->boolean);
    }
    CU_ASSERT(wrong > 0);
    json_free(&doc);
}

/* The plugin whose store rounds k/v through bf16 into an f16 cache: the
 * first divergence is the first store, and every attention node stays exact,
 * since it reads the reference's cache rows, not what the wrong store wrote. */
static void test_wrong_store_is_blamed_not_attention(void) {
    char args[2048];
    snprintf(args, sizeof args,
             "compare --trace --json -m '%s' --backend-path '%s' --backends kv_wrong_store --kv-cache-dtype f16 -n 3 "
             "-t 2",
             model_q4_k_m, VT_TEST_PLUGIN_DIR);
    json_value doc;
    const json_value *b = trace_one_backend(args, 1, &doc);
    const json_value *first = first_divergence(b);
    CU_ASSERT_STRING_EQUAL(str(first, "label"), "blk.0.store_kv");
    CU_ASSERT_STRING_EQUAL(str(first, "op"), "reshape_and_cache");
    CU_ASSERT_STRING_EQUAL(str(first, "phase"), "prefill");
    const json_value *nodes = json_get(b, "nodes");
    CU_ASSERT_FATAL(nodes && nodes->type == JSON_ARRAY);
    int attentions = 0;
    for (size_t i = 0; i < nodes->n; i++) {
        const json_value *n = &nodes->items[i];
        if (strcmp(str(n, "op"), "attention") != 0) continue;
        attentions++;
        CU_ASSERT_EQUAL(num(n, "error"), 0.0);
    }
    CU_ASSERT_EQUAL(attentions, 4);
    json_free(&doc);
}

static void test_bad_combinations_are_refused(void) {
    char args[2048], *err = NULL;
    snprintf(args, sizeof args, "compare --trace -m '%s' --kv-cache-dtype f32,f16", model_q4_k_m);
    CU_ASSERT_EQUAL(run(args, NULL, &err), 2);
    CU_ASSERT(err && strstr(err, "compare --trace: a --kv-cache-dtype list is a separate run") != NULL);
    free(err);
    snprintf(args, sizeof args, "compare --trace-all -m '%s' --profile", model_q4_k_m);
    CU_ASSERT_EQUAL(run(args, NULL, &err), 2);
    CU_ASSERT(err && strstr(err, "--profile") != NULL);
    free(err);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"trace: reference against itself is exact on every node, over prefill chunks and decode steps",
         test_reference_against_itself_is_exact},
        {"compare --trace: simd has no divergence, stores and attention compared", test_simd_has_no_divergence},
        {"compare --trace: a plugin wrong for matmul q6_k diverges first there, and only there",
         test_bug_plugin_diverges_at_matmul_q6_k},
        {"compare --trace: a wrong store is blamed, attention after it reads the reference's cache",
         test_wrong_store_is_blamed_not_attention},
        {"compare --trace refuses a kv dtype list, --ppl and --profile", test_bad_combinations_are_refused},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("compare_trace", suite_init, NULL, tests);
    return vt_test_run();
}
