/* test_moe.c — a mixture of experts (qwen3moe-tiny-q4_k_m: 8 experts, 2 used
 * per token) end to end through the real engine path:
 *   - batch invariance: a sequence's logits and greedy tokens are bit for bit
 *     the same alone and in a step beside three other sequences (prefill and
 *     decode), on the reference and on simd — a token's experts and result do
 *     not depend on the other tokens of the step; and through the public
 *     batching API (vt_batch), four requests batched generate the tokens each
 *     generates alone through vt_session;
 *   - every KV-cache dtype (f32, f16, bf16, q8_0) completes a prefill and a
 *     greedy decode on the reference and on simd, the cache in that dtype;
 *   - --explain places moe_route / moe_matmul / moe_combine on simd with
 *     --backend simd, and on the reference fallback with --backend onednn
 *     (which does not implement them);
 *   - a plugin of ABI 1.3 (before the MoE ops) is never offered them: with it
 *     preferred the model runs, its MoE nodes on the fallback, the rest on
 *     the plugin, with the reference's tokens;
 *   - vt serve answers a /v1/completions request on the model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "explain_parse.h"
#include "json_mini.h"
#include "model.h"
#include "quant.h"
#include "sampler.h"
#include "util.h"
#include "vt/vt.h"

#if VT_TEST_MOE_SERVE
#include "serve_client.h"
#endif

#define N_SEQS 4
#define N_DECODE 6

static const int32_t prompt_a[] = {1, 7, 21, 5, 9};
static const int32_t prompt_b[] = {1, 30, 2, 40, 8, 77, 13, 99, 4, 18, 6};
static const int32_t prompt_c[] = {1, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41};
static const int32_t prompt_d[] = {1, 200, 150, 42};
static const int32_t *const prompts[N_SEQS] = {prompt_a, prompt_b, prompt_c, prompt_d};
static const int64_t prompt_len[N_SEQS] = {5, 11, 13, 4};
#define PROMPT_IDS "1,7,21,5,9"

static char model_path[1024];
static vt_model *model;
static int32_t V;

static int suite_init(void) {
    const char *dir = vt_test_data_dir("moe model");
    if (!dir) return 1;
    snprintf(model_path, sizeof model_path, "%s/models/qwen3moe-tiny-q4_k_m.gguf", dir);
    vt_error err = {0};
    if (vt_model_load(model_path, &model, &err) != VT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    V = model->hp.n_vocab;
    return model->hp.n_expert == 8 && model->hp.n_expert_used == 2 ? 0 : 1;
}

static int suite_cleanup(void) {
    vt_model_free(model);
    return 0;
}

static vt_engine *open_engine(const char *backend, int32_t kv_dtype, int32_t max_seqs) {
    vt_options o;
    vt_fixture_options(&o, backend, kv_dtype);
    o.ctx_size = 256;
    const vt_engine_shape shape = {false, max_seqs, false};
    vt_engine *e = NULL;
    vt_error err = {0};
    if (vt_engine_create_shaped(&o, model, &shape, &e, &err) != VT_OK) printf("\n  engine: %s\n", err.msg);
    return e;
}

/* ---- batch invariance ---- */

/* Each sequence alone: prompt, then N_DECODE greedy steps; every step's
 * logits in want[seq][step]. */
static float *alone(const char *backend) {
    float *want = malloc((size_t)N_SEQS * (N_DECODE + 1) * (size_t)V * sizeof *want);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    for (int s = 0; s < N_SEQS; s++) {
        vt_engine *e = open_engine(backend, VT_F16, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        vt_error err = {0};
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, prompts[s], prompt_len[s], false, &err), VT_OK);
        for (int k = 0; k <= N_DECODE; k++) {
            float *row = want + ((size_t)s * (N_DECODE + 1) + (size_t)k) * (size_t)V;
            memcpy(row, vt_engine_logits(e, 0), (size_t)V * sizeof *row);
            if (k == N_DECODE) break;
            const int32_t next = vt_argmax(row, V);
            CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, &next, 1, true, &err), VT_OK);
        }
        vt_engine_free(e);
    }
    return want;
}

/* The four together in one engine: all four prompts in one prefill step,
 * then decode steps of all four; every entry's logits must equal its row
 * alone bit for bit, so the greedy tokens are the same too. */
static void together(const char *backend) {
    float *want = alone(backend);
    vt_engine *e = open_engine(backend, VT_F16, N_SEQS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const int32_t free_at_start = vt_engine_free_blocks(e);
    vt_error err = {0};
    int32_t next[N_SEQS];
    int differ = 0, greedy_same = 0, total = 0;
    for (int k = 0; k <= N_DECODE; k++) {
        vt_step_entry step[N_SEQS];
        for (int s = 0; s < N_SEQS; s++)
            step[s] = k == 0 ? (vt_step_entry){s, prompts[s], prompt_len[s], true, false}
                           : (vt_step_entry){s, &next[s], 1, true, true};
        CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, step, N_SEQS, &err), VT_OK);
        for (int s = 0; s < N_SEQS; s++) {
            const float *got = vt_engine_step_logits(e, s);
            CU_ASSERT_PTR_NOT_NULL_FATAL(got);
            const float *w = want + ((size_t)s * (N_DECODE + 1) + (size_t)k) * (size_t)V;
            differ += memcmp(got, w, (size_t)V * sizeof *got) != 0;
            next[s] = vt_argmax(got, V);
            greedy_same += next[s] == vt_argmax(w, V);
            total++;
        }
    }
    printf("\n  %s: %d of %d rows differ from alone, greedy equal %d/%d", backend, differ, total, greedy_same, total);
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT_EQUAL(greedy_same, total);
    for (int s = 0; s < N_SEQS; s++) {
        CU_ASSERT_EQUAL(vt_engine_seq_len(e, s), prompt_len[s] + N_DECODE);
        vt_engine_seq_release(e, s);
    }
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), free_at_start);
    vt_engine_free(e);
    free(want);
}

static void test_reference_batch_invariance(void) { together("reference"); }

static void test_simd_batch_invariance(void) {
    if (vt_test_simd_expected()) together("simd");
}

/* Through include/vt/vt.h: four requests in one vt_batch, stepped to the end,
 * against each alone through a vt_session with the same settings. */
#define MAX_GEN 16
static void public_batch(const char *backend) {
    char be[64];
    snprintf(be, sizeof be, "runtime.backend=%s", backend);
    const char *const settings[] = {be, "runtime.threads=2", "runtime.max_seqs=4", "kv_cache.ctx_size=256", NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    char err[512] = "";
    vt_batch *b = NULL;
    if (vt_batch_open(model_path, &o, &b, err, sizeof err) != VT_OK) printf("\n  vt_batch_open: %s\n", err);
    CU_ASSERT_FATAL(b != NULL);
    int32_t stop[16];
    const size_t n_stop = vt_batch_default_stop_ids(b, stop, 16);
    uint64_t ids[N_SEQS];
    for (int i = 0; i < N_SEQS; i++) {
        vt_batch_request r;
        vt_batch_request_init(&r);
        r.ids = prompts[i];
        r.n_ids = (size_t)prompt_len[i];
        r.max_new_tokens = MAX_GEN;
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[i], err, sizeof err), VT_OK);
    }
    int32_t got[N_SEQS][MAX_GEN];
    int64_t n_got[N_SEQS] = {0};
    int max_running = 0;
    for (int guard = 0; guard < 1000; guard++) {
        int32_t n_seqs = -1;
        CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
        if (n_seqs > max_running) max_running = n_seqs;
        for (int i = 0; i < N_SEQS; i++) {
            vt_batch_output out;
            CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, ids[i], &out, err, sizeof err), VT_OK);
            CU_ASSERT_FATAL(n_got[i] + (int64_t)out.n_tokens <= MAX_GEN);
            memcpy(got[i] + n_got[i], out.tokens, out.n_tokens * sizeof *out.tokens);
            n_got[i] += (int64_t)out.n_tokens;
        }
        if (n_seqs == 0) break;
    }
    CU_ASSERT_EQUAL(max_running, N_SEQS); /* all four ran in the same steps */
    vt_batch_close(b);
    int same = 0;
    for (int i = 0; i < N_SEQS; i++) {
        vt_session *s = NULL;
        CU_ASSERT_EQUAL_FATAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_OK);
        int32_t want[MAX_GEN];
        int64_t n = 0;
        vt_status st = vt_session_eval(s, prompts[i], (size_t)prompt_len[i], err, sizeof err);
        while (st == VT_OK && n < MAX_GEN) {
            const int32_t t = vt_argmax(vt_session_logits(s, 0), V);
            want[n++] = t;
            bool stops = false;
            for (size_t k = 0; k < n_stop; k++) stops |= stop[k] == t;
            if (stops || n == MAX_GEN) break;
            st = vt_session_eval(s, &t, 1, err, sizeof err);
        }
        CU_ASSERT_EQUAL(st, VT_OK);
        vt_session_close(s);
        same += n_got[i] == n && memcmp(got[i], want, (size_t)n * sizeof *want) == 0;
    }
    printf("\n  %s: vt_batch of %d requests, %d generate the tokens they generate alone", backend, N_SEQS, same);
    CU_ASSERT_EQUAL(same, N_SEQS);
}

static void test_reference_public_batch(void) { public_batch("reference"); }

static void test_simd_public_batch(void) {
    if (vt_test_simd_expected()) public_batch("simd");
}

/* ---- KV-cache levers ---- */

static void kv_levers(const char *backend) {
    static const int32_t dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};
    int32_t tokens[4][N_DECODE];
    for (size_t d = 0; d < 4; d++) {
        vt_fixture f;
        vt_status st = vt_fixture_open(&f, model_path, backend, dtypes[d], false);
        if (st) fprintf(stderr, "\n%s %s: %s\n", backend, vt_dtype_name(dtypes[d]), f.err.msg);
        CU_ASSERT_EQUAL_FATAL(st, VT_OK);
        CU_ASSERT_EQUAL(f.engine->kv->dtype, dtypes[d]);
        vt_error err = {0};
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, prompt_b, 11, false, &err), VT_OK);
        int finite = 1;
        for (int k = 0; k < N_DECODE; k++) {
            const float *l = vt_engine_logits(f.engine, 0);
            for (int32_t i = 0; i < V; i++) finite &= isfinite(l[i]) != 0;
            tokens[d][k] = vt_argmax(l, V);
            CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, &tokens[d][k], 1, true, &err), VT_OK);
        }
        CU_ASSERT(finite);
        CU_ASSERT_EQUAL(vt_engine_seq_len(f.engine, 0), 11 + N_DECODE);
        vt_fixture_close(&f);
        printf("\n  %s, %s cache: greedy %d %d %d %d %d %d", backend, vt_dtype_name(dtypes[d]), tokens[d][0],
               tokens[d][1], tokens[d][2], tokens[d][3], tokens[d][4], tokens[d][5]);
    }
    /* the first greedy token is the same whatever the cache (the prompt's
     * last row reads a cache written by the same step) */
    for (size_t d = 1; d < 4; d++) CU_ASSERT_EQUAL(tokens[d][0], tokens[0][0]);
}

static void test_kv_levers_reference(void) { kv_levers("reference"); }

static void test_kv_levers_simd(void) {
    if (vt_test_simd_expected()) kv_levers("simd");
}

/* ---- placement in --explain ---- */

static const char *const moe_ops[] = {"moe_route", "moe_matmul", "moe_combine"};

/* `vt run --explain` on the model with these backend arguments: the parsed
 * plan, and the greedy ids printed (into ids). */
static bool explain(const char *backend_args, vt_explain *x, char *ids, size_t ids_size) {
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens " PROMPT_IDS " -n 4 --temp 0 --ids --ignore-eos %s "
                                                "--explain",
                                    model_path, backend_args);
    if (rc != 0) fprintf(stderr, "\nvt run %s: rc %d\n%s\n", backend_args, rc, err ? err : "");
    CU_ASSERT_EQUAL(rc, 0);
    bool ok = rc == 0 && vt_explain_parse(err ? err : "", x);
    if (ids) snprintf(ids, ids_size, "%s", out ? out : "");
    free(out);
    free(err);
    return ok;
}

/* Nodes of op (both plans) and how many of them backend runs. */
static void count_op(const vt_explain *x, const char *op, const char *backend, int *all, int *on) {
    *all = vt_explain_count(x, NULL, op, NULL, NULL, NULL);
    *on = vt_explain_count(x, NULL, op, backend, NULL, NULL);
}

static void test_explain_simd_runs_the_moe_ops(void) {
    if (!vt_test_simd_expected()) return;
    vt_explain x;
    CU_ASSERT_FATAL(explain("--backend simd", &x, NULL, 0));
    for (int i = 0; i < 3; i++) {
        int all, on;
        count_op(&x, moe_ops[i], "simd", &all, &on);
        printf("\n  --backend simd: %s %d/%d nodes on simd", moe_ops[i], on, all);
        /* 2 layers, both plans; moe_matmul thrice a layer (gate, up, down) */
        CU_ASSERT_EQUAL(all, 2 * 2 * (i == 1 ? 3 : 1));
        CU_ASSERT_EQUAL(on, all);
    }
    vt_explain_free(&x);
}

static void test_explain_onednn_leaves_them_to_the_fallback(void) {
    if (!vt_test_onednn_expected()) return;
    vt_explain x;
    CU_ASSERT_FATAL(explain("--backend onednn --fallback reference", &x, NULL, 0));
    for (int i = 0; i < 3; i++) {
        int all, on;
        count_op(&x, moe_ops[i], "reference", &all, &on);
        printf("\n  --backend onednn: %s %d/%d nodes on the reference fallback", moe_ops[i], on, all);
        CU_ASSERT(all > 0);
        CU_ASSERT_EQUAL(on, all);
    }
    CU_ASSERT(vt_explain_count(&x, NULL, "matmul", "onednn", NULL, NULL) > 0);
    vt_explain_free(&x);
}

/* ---- a plugin older than the MoE ops ---- */

static void test_abi_1_3_plugin_never_offered_moe_ops(void) {
    vt_explain x, ref;
    char ids[256], ref_ids[256];
    CU_ASSERT_FATAL(explain("--backend moe_abi_1_3 --fallback reference", &x, ids, sizeof ids));
    CU_ASSERT_FATAL(explain("--backend reference", &ref, ref_ids, sizeof ref_ids));
    int moe_nodes = 0;
    for (int i = 0; i < 3; i++) {
        int all, on;
        count_op(&x, moe_ops[i], "reference", &all, &on);
        CU_ASSERT(all > 0);
        CU_ASSERT_EQUAL(on, all);
        moe_nodes += all;
    }
    /* everything else stays on the plugin */
    int on_plugin = vt_explain_count(&x, NULL, NULL, "moe_abi_1_3", NULL, NULL);
    printf("\n  moe_abi_1_3: %d MoE nodes on the fallback, %d of the other %d on the plugin; ids %s", moe_nodes,
           on_plugin, x.n - moe_nodes, ids);
    CU_ASSERT_EQUAL(on_plugin, x.n - moe_nodes);
    CU_ASSERT(on_plugin > 0);
    CU_ASSERT_STRING_EQUAL(ids, ref_ids);
    CU_ASSERT(strlen(ids) > 0);
    vt_explain_free(&x);
    vt_explain_free(&ref);
}

/* ---- vt serve ---- */

static void test_serve_completion(void) {
#if VT_TEST_MOE_SERVE
    curl_global_init(CURL_GLOBAL_DEFAULT);
    serve_server s;
    static const char *const args[] = {"-c", "512", NULL};
    CU_ASSERT_FATAL(serve_start(&s, "qwen3moe-tiny-q4_k_m.gguf", "moe-serve.log", args));
    serve_reply r = serve_http(&s, "POST", "/v1/completions",
                               "{\"model\":\"x\",\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"temperature\":0}",
                               NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    const char *body = r.body.s ? r.body.s : "";
    printf("\n  vt serve: %ld %.200s", r.status, body);
    json_value v;
    char why[128];
    CU_ASSERT_FATAL(json_parse(body, strlen(body), &v, why, sizeof why));
    const json_value *object = json_get(&v, "object"), *usage = json_get(&v, "usage");
    const json_value *tokens = usage ? json_get(usage, "completion_tokens") : NULL;
    CU_ASSERT(object && object->type == JSON_STRING && strcmp(object->str, "text_completion") == 0);
    CU_ASSERT(tokens && tokens->type == JSON_NUMBER && tokens->number == 8);
    json_free(&v);
    serve_reply_free(&r);
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
    curl_global_cleanup();
#else
    vt_test_skip("vt serve or libcurl was not built");
#endif
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"reference: a sequence alone = beside 3 others, bit for bit", test_reference_batch_invariance},
        {"simd: a sequence alone = beside 3 others, bit for bit", test_simd_batch_invariance},
        {"reference: vt_batch of 4 requests = each alone through vt_session", test_reference_public_batch},
        {"simd: vt_batch of 4 requests = each alone through vt_session", test_simd_public_batch},
        {"reference: every KV-cache dtype completes prefill and greedy decode", test_kv_levers_reference},
        {"simd: every KV-cache dtype completes prefill and greedy decode", test_kv_levers_simd},
        {"--backend simd: the MoE nodes run on simd", test_explain_simd_runs_the_moe_ops},
        {"--backend onednn: the MoE nodes run on the reference fallback", test_explain_onednn_leaves_them_to_the_fallback},
        {"an ABI 1.3 plugin is never offered the MoE ops; the model runs with the reference's tokens",
         test_abi_1_3_plugin_never_offered_moe_ops},
        {"vt serve answers /v1/completions on the MoE model", test_serve_completion},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("moe", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
