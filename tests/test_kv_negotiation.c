/* test_kv_negotiation.c — KV-store dtype negotiation seen from the outside:
 * the `vt` CLI run as a subprocess with two test-only backends
 * (tests/plugins/kv_bf16_only.c, kv_no_convert.c) whose supports() force the
 * plan builder down its other paths:
 *   - kv_bf16_only stores k/v only in bf16 and its rope/matmul emit f32 only:
 *     the plan gets convert nodes (f32 -> bf16) before every store, whatever
 *     the cache dtype, and a forward completes;
 *   - kv_no_convert converts nothing and stores only k/v of the cache dtype:
 *     with an f16/bf16 cache and --fallback none the build is refused (exit
 *     code, op, backend and dtypes in the message); with an f32 cache no
 *     conversion is needed; with the reference as fallback the convert runs
 *     there.
 * Everything is asserted on --explain / --dry-run output, exit codes and the
 * generated tokens, never on log lines. Both plugins compute every op on the
 * reference backend, so their numbers can be compared with it exactly.
 * A third, kv_widen_store (no convert, a store that widens/narrows), shows the
 * last resort: reshape_and_cache moving to the fallback backend. A fourth,
 * kv_rank3_store, takes k/v at its store only as rank-3 tensors: the store
 * node that runs, in prefill and in single-token decode, must be the one it
 * accepted. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain_parse.h"
#include "json_mini.h"
#include "synth.h"
#include "util.h"

#define N_LAYER 2
static char qwen3_path[1024], qwen2_path[1024];

/* Tiny random models: what matters here is the plan, not the numbers. */
static int synth_models(void) {
    vt_synth_params p = {0};
    p.n_embd = 128;
    p.n_layer = N_LAYER;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 32;
    p.n_ff = 256;
    p.n_vocab = 300;
    p.n_ctx = 256;
    p.type = "f32";
    p.seed = 7;
    vt_error err = {0};
    p.arch = "qwen3";
    vt_test_tmpfile(qwen3_path, sizeof qwen3_path, "neg-qwen3.gguf");
    if (vt_synth_write(&p, qwen3_path, &err) != VT_OK) {
        fprintf(stderr, "synth qwen3: %s\n", err.msg);
        return 1;
    }
    p.arch = "qwen2"; /* v's producer is the bias add, not the projection */
    vt_test_tmpfile(qwen2_path, sizeof qwen2_path, "neg-qwen2.gguf");
    if (vt_synth_write(&p, qwen2_path, &err) != VT_OK) {
        fprintf(stderr, "synth qwen2: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Run `vt ARGS` with the test plugins on the search path, the plan check on
 * (every forward re-offers its nodes as executed, in Release too) and no
 * other environment lever that could change the plan. */
static int run_vt(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run_vt(char **out, char **err, const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd,
             "env -u VT_KV_CACHE_DTYPE -u VT_KV_CACHE_F32 -u VT_CONFIG -u VT_BACKEND -u VT_CTX_SIZE "
             "VT_CHECK_PLAN=1 VT_BACKEND_PATH='%s' '%s' %s",
             VT_TEST_PLUGIN_DIR, VT_CLI_PATH, args);
    return vt_test_run_cmd(cmd, out, err);
}

static const char *const prompt = "1,17,42,99,5,250,3,77,128,64,8,200";

/* Generated ids printed by `vt run --ids`: count them. */
static int count_ids(const char *out) {
    if (!out) return 0;
    int n = 0;
    for (const char *p = out; *p;) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v < 0 || v >= 300) return -1;
        n++;
        p = *end == ',' ? end + 1 : end;
        if (*end != ',') break;
    }
    return n;
}

/* The per-layer shape of a plan where k and v reach a store on `backend`
 * through convert nodes to `kv` placed on `convert_on`. */
static void assert_converted_store(const vt_explain *x, const char *phase, const char *backend,
                                   const char *convert_on, const char *kv, const char *cache, bool v_converted) {
    char label[64], want_in[64];
    for (int il = 0; il < N_LAYER; il++) {
        snprintf(label, sizeof label, "blk.%d.store_kv", il);
        const vt_explain_node *store = vt_explain_find(x, phase, label);
        CU_ASSERT_PTR_NOT_NULL_FATAL(store);
        CU_ASSERT_STRING_EQUAL(store->op, "reshape_and_cache");
        CU_ASSERT_STRING_EQUAL(store->backend, backend);
        snprintf(want_in, sizeof want_in, "%s,%s,%s,%s,i64", kv, kv, cache, cache);
        CU_ASSERT_STRING_EQUAL(store->in, want_in);

        snprintf(label, sizeof label, "blk.%d.rope_k", il);
        const vt_explain_node *rope = vt_explain_find(x, phase, label);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rope);
        CU_ASSERT_STRING_EQUAL(rope->out, "f32"); /* the plugin's rope cannot emit anything else */

        snprintf(label, sizeof label, "blk.%d.rope_k.to_%s", il, kv);
        const vt_explain_node *ck = vt_explain_find(x, phase, label);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ck);
        CU_ASSERT_STRING_EQUAL(ck->op, "convert");
        CU_ASSERT_STRING_EQUAL(ck->backend, convert_on);
        CU_ASSERT_STRING_EQUAL(ck->in, "f32");
        CU_ASSERT_STRING_EQUAL(ck->out, kv);
        CU_ASSERT(rope->index < ck->index && ck->index < store->index);

        snprintf(label, sizeof label, "blk.%d.attn_v.to_%s", il, kv);
        const vt_explain_node *cv = vt_explain_find(x, phase, label);
        if (v_converted) {
            CU_ASSERT_PTR_NOT_NULL_FATAL(cv);
            CU_ASSERT_STRING_EQUAL(cv->op, "convert");
            CU_ASSERT_STRING_EQUAL(cv->backend, convert_on);
            CU_ASSERT_STRING_EQUAL(cv->in, "f32");
            CU_ASSERT_STRING_EQUAL(cv->out, kv);
            CU_ASSERT(cv->index < store->index);
        } else {
            CU_ASSERT_PTR_NULL(cv);
        }
    }
}

static void test_bf16_only_gets_converts_and_completes(void) {
    static const char *const caches[] = {"f32", "f16", "bf16"};
    for (int c = 0; c < 3; c++) {
        char *out = NULL, *err = NULL;
        int rc = run_vt(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_bf16_only "
                        "--kv-cache-dtype %s --explain", qwen3_path, prompt, caches[c]);
        if (rc != 0) printf("\nkv_bf16_only, %s cache: exit %d\n%s", caches[c], rc, err ? err : "");
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_EQUAL(count_ids(out), 4); /* the forward completed: 4 tokens generated */
        vt_explain x;
        CU_ASSERT_FATAL(vt_explain_parse(err, &x));
        CU_ASSERT_STRING_EQUAL(x.kv_dtype, caches[c]);
        CU_ASSERT_STRING_EQUAL(x.kv_source, "cli");
        CU_ASSERT_STRING_EQUAL(x.backend, "kv_bf16_only");
        for (int ph = 0; ph < 2; ph++) {
            const char *phase = ph ? "decode" : "prefill";
            assert_converted_store(&x, phase, "kv_bf16_only", "kv_bf16_only", "bf16", caches[c], true);
            /* Exactly the two converts per layer, nothing else converted. */
            CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "convert", NULL, NULL, NULL), 2 * N_LAYER);
            /* The plugin declines nothing else: every node runs on it. */
            CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "kv_bf16_only", NULL, NULL),
                            vt_explain_count(&x, phase, NULL, NULL, NULL, NULL));
        }
        vt_explain_free(&x);
        free(out);
        free(err);
    }
}

/* Last-position logits of `vt eval ... --full-last` (malloc'ed), or NULL. */
static double *eval_logits(const char *args, int *n) {
    char *out = NULL, *err = NULL;
    int rc = run_vt(&out, &err, "eval -m '%s' --tokens %s --full-last %s", qwen3_path, prompt, args);
    double *logits = NULL;
    json_value j;
    char msg[128];
    if (rc == 0 && out && json_parse(out, strlen(out), &j, msg, sizeof msg)) {
        const json_value *last = json_get(&j, "last_logits");
        if (last && last->n > 0) {
            logits = malloc(last->n * sizeof *logits);
            for (size_t i = 0; i < last->n; i++) logits[i] = last->items[i].number;
            *n = (int)last->n;
        }
        json_free(&j);
    } else {
        printf("\nvt eval %s: exit %d\n%s", args, rc, err ? err : "");
    }
    free(out);
    free(err);
    return logits;
}

/* kv_bf16_only with an f32 cache rounds k/v to bf16 (round to nearest even,
 * the same rounding the reference's rope uses when it emits bf16 itself) and
 * widens them exactly on store; so attention reads exactly the values the
 * reference reads from a bf16 cache, and with every op on the reference the
 * logits must be equal, not merely close. */
static void test_bf16_only_equals_reference_with_bf16_cache(void) {
    for (int decode = 0; decode < 2; decode++) {
        char a[256], b[256];
        snprintf(a, sizeof a, "--backend kv_bf16_only --kv-cache-dtype f32%s", decode ? " --decode" : "");
        snprintf(b, sizeof b, "--backend reference --kv-cache-dtype bf16%s", decode ? " --decode" : "");
        int na = 0, nb = 0;
        double *la = eval_logits(a, &na), *lb = eval_logits(b, &nb);
        CU_ASSERT_PTR_NOT_NULL_FATAL(la);
        CU_ASSERT_PTR_NOT_NULL_FATAL(lb);
        CU_ASSERT_EQUAL_FATAL(na, nb);
        int differ = 0;
        for (int i = 0; i < na; i++) differ += la[i] != lb[i];
        if (differ) printf("\n%s: %d of %d logits differ from %s\n", a, differ, na, b);
        CU_ASSERT_EQUAL(differ, 0);
        /* and the rounding is real: an f32 cache on the reference gives other logits */
        int nf = 0;
        double *lf = eval_logits(decode ? "--backend reference --kv-cache-dtype f32 --decode"
                                        : "--backend reference --kv-cache-dtype f32",
                                 &nf);
        CU_ASSERT_PTR_NOT_NULL_FATAL(lf);
        int differ_f32 = 0;
        for (int i = 0; i < na && i < nf; i++) differ_f32 += la[i] != lf[i];
        CU_ASSERT(differ_f32 > 0);
        free(la);
        free(lb);
        free(lf);
    }
}

/* qwen2: v comes from the bias add, which kv_bf16_only lets emit bf16
 * itself, so only k needs a convert node. */
static void test_bf16_only_qwen2_bias_add_emits_bf16(void) {
    char *out = NULL, *err = NULL;
    int rc = run_vt(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_bf16_only "
                    "--kv-cache-dtype f32 --explain", qwen2_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_ids(out), 4);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    for (int ph = 0; ph < 2; ph++) {
        const char *phase = ph ? "decode" : "prefill";
        assert_converted_store(&x, phase, "kv_bf16_only", "kv_bf16_only", "bf16", "f32", false);
        for (int il = 0; il < N_LAYER; il++) {
            char label[64];
            snprintf(label, sizeof label, "blk.%d.attn_v.bias", il);
            const vt_explain_node *bias = vt_explain_find(&x, phase, label);
            CU_ASSERT_PTR_NOT_NULL_FATAL(bias);
            CU_ASSERT_STRING_EQUAL(bias->op, "add");
            CU_ASSERT_STRING_EQUAL(bias->out, "bf16");
            snprintf(label, sizeof label, "blk.%d.attn_v", il);
            const vt_explain_node *proj = vt_explain_find(&x, phase, label);
            CU_ASSERT_PTR_NOT_NULL_FATAL(proj);
            CU_ASSERT_STRING_EQUAL(proj->out, "f32");
        }
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "convert", NULL, NULL, NULL), N_LAYER);
    }
    vt_explain_free(&x);
    free(out);
    free(err);
}

/* The refusal: nothing can bring k/v to f16/bf16 and no fallback is allowed. */
static void test_no_convert_refused_at_build(void) {
    static const char *const caches[] = {"f16", "bf16"};
    static const char *const modes[] = {"run --tokens 1,2,3 -n 4 --explain", "run --dry-run", "eval --dry-run"};
    for (int c = 0; c < 2; c++) {
        for (int m = 0; m < 3; m++) {
            char *out = NULL, *err = NULL;
            int rc = run_vt(&out, &err, "%s -m '%s' --backend kv_no_convert --fallback none --kv-cache-dtype %s",
                            modes[m], qwen3_path, caches[c]);
            /* 4 is the CLI's exit code for VT_ERR_UNSUPPORTED (core/cli/cli.c):
             * refused by negotiation, not crashed (>= 128) or a usage error (2). */
            CU_ASSERT_EQUAL(rc, 4);
            CU_ASSERT_PTR_NOT_NULL_FATAL(err);
            char cache_phrase[32], store_phrase[96];
            snprintf(cache_phrase, sizeof cache_phrase, "in the %s KV cache", caches[c]);
            snprintf(store_phrase, sizeof store_phrase, "reshape_and_cache(k f32, v f32 -> %s cache) declined by "
                     "'kv_no_convert'", caches[c]);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "plan build refused"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err, cache_phrase));
            CU_ASSERT_PTR_NOT_NULL(strstr(err, store_phrase));
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "convert f32->"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "Fix:"));
            /* Refused before anything ran: no plan printed, no tokens generated. */
            vt_explain x;
            CU_ASSERT_FALSE(vt_explain_parse(err, &x));
            vt_explain_free(&x);
            CU_ASSERT(!out || out[0] == '\0');
            if (rc != 4) printf("\n%s / %s: exit %d\n%s", modes[m], caches[c], rc, err);
            free(out);
            free(err);
        }
    }
}

/* With an f32 cache kv_no_convert needs no conversion at all, and its
 * forward equals the reference's bit for bit (same ops, same dtypes). */
static void test_no_convert_f32_cache_needs_nothing(void) {
    char *out = NULL, *err = NULL, *ref_out = NULL;
    int rc = run_vt(&out, &err, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend kv_no_convert --fallback none "
                    "--kv-cache-dtype f32 --explain", qwen3_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_ids(out), 8);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.fallback, "none");
    CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, "convert", NULL, NULL, NULL), 0);
    CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, "reshape_and_cache", "kv_no_convert", "f32,f32,f32,f32,i64", NULL),
                    2 * N_LAYER);
    CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, NULL, "kv_no_convert", NULL, NULL), x.n);
    vt_explain_free(&x);
    CU_ASSERT_EQUAL(run_vt(&ref_out, NULL, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend reference "
                           "--kv-cache-dtype f32", qwen3_path, prompt), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref_out);
    CU_ASSERT_STRING_EQUAL(out, ref_out);
    free(out);
    free(err);
    free(ref_out);
}

/* With the reference allowed as fallback, the convert kv_no_convert declines
 * runs there and the store stays on kv_no_convert, now with f16 k/v. */
static void test_no_convert_with_fallback_converts_on_reference(void) {
    char *out = NULL, *err = NULL;
    int rc = run_vt(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_no_convert "
                    "--fallback reference --kv-cache-dtype f16 --explain", qwen3_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_ids(out), 4);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.fallback, "reference");
    for (int ph = 0; ph < 2; ph++) {
        const char *phase = ph ? "decode" : "prefill";
        assert_converted_store(&x, phase, "kv_no_convert", "reference", "f16", "f16", true);
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "convert", "reference", "f32", "f16"), 2 * N_LAYER);
        /* Only the converts left the preferred backend. */
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "reference", NULL, NULL), 2 * N_LAYER);
    }
    vt_explain_free(&x);
    free(out);
    free(err);
}

/* The last resort before refusing: no producer emits f16 and no allowed
 * backend converts, so reshape_and_cache moves to the fallback
 * kv_widen_store, which narrows the f32 k/v to the f16 cache on store. */
static void test_store_moves_to_a_widening_backend(void) {
    char *out = NULL, *err = NULL;
    int rc = run_vt(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_no_convert "
                    "--fallback kv_widen_store --kv-cache-dtype f16 --explain", qwen3_path, prompt);
    if (rc != 0) printf("\nexit %d\n%s", rc, err ? err : "");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_ids(out), 4);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.fallback, "kv_widen_store");
    CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, "convert", NULL, NULL, NULL), 0);
    for (int ph = 0; ph < 2; ph++) {
        const char *phase = ph ? "decode" : "prefill";
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "reshape_and_cache", "kv_widen_store", "f32,f32,f16,f16,i64", NULL),
                        N_LAYER);
        /* Only the stores moved; attention still reads the f16 cache on the preferred backend. */
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "kv_widen_store", NULL, NULL), N_LAYER);
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "attention", "kv_no_convert", "f32,f16,f16,i32,i32,i32", NULL),
                        N_LAYER);
    }
    vt_explain_free(&x);
    /* Same cache contents as the reference with an f16 cache, up to where
     * f16 rounding happens (rope's output vs the store): at most one f16 ulp
     * on a few k/v elements, far below the 3.7e-4 an f16 cache itself moves
     * these logits (test_kv_matrix), hence 1e-4 (measured: 0). */
    int na = 0, nb = 0;
    double *la = eval_logits("--backend kv_no_convert --fallback kv_widen_store --kv-cache-dtype f16", &na);
    double *lb = eval_logits("--backend reference --kv-cache-dtype f16", &nb);
    CU_ASSERT_PTR_NOT_NULL_FATAL(la);
    CU_ASSERT_PTR_NOT_NULL_FATAL(lb);
    CU_ASSERT_EQUAL_FATAL(na, nb);
    double worst = 0;
    for (int i = 0; i < na; i++) worst = fmax(worst, fabs(la[i] - lb[i]));
    printf("\nmoved store vs reference, f16 cache: max |dlogit| %.3g", worst);
    CU_ASSERT(worst <= 1e-4);
    free(la);
    free(lb);
    free(out);
    free(err);
}

/* The store as offered is the store as run: kv_rank3_store accepts rank-3
 * k/v only, there is no fallback, and the plugin refuses any node its
 * supports() declines, so prefill and every decode step complete only if
 * each executed store is rank 3 (at T = 1 too). Same tokens as the reference. */
static void test_rank3_store_runs_prefill_and_decode(void) {
    static const char *const models[] = {qwen3_path, qwen2_path};
    for (int m = 0; m < 2; m++) {
        char *out = NULL, *err = NULL, *ref_out = NULL;
        int rc = run_vt(&out, &err, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend kv_rank3_store "
                        "--fallback none --explain", models[m], prompt);
        if (rc != 0) printf("\n%s: exit %d\n%s", models[m], rc, err ? err : "");
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_EQUAL(count_ids(out), 8);
        vt_explain x;
        CU_ASSERT_FATAL(vt_explain_parse(err, &x));
        for (int ph = 0; ph < 2; ph++) {
            const char *phase = ph ? "decode" : "prefill";
            CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "reshape_and_cache", "kv_rank3_store", NULL, NULL), N_LAYER);
            CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "kv_rank3_store", NULL, NULL),
                            vt_explain_count(&x, phase, NULL, NULL, NULL, NULL));
        }
        vt_explain_free(&x);
        CU_ASSERT_EQUAL(run_vt(&ref_out, NULL, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend reference",
                               models[m], prompt), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ref_out);
        CU_ASSERT_STRING_EQUAL(out, ref_out);
        free(out);
        free(err);
        free(ref_out);
    }
}

int main(void) {
    if (synth_models() != 0) return 1;
    CU_TestInfo tests[] = {
        {"kv_bf16_only: convert f32->bf16 before every store (f32/f16/bf16 cache), forward completes",
         test_bf16_only_gets_converts_and_completes},
        {"kv_bf16_only with f32 cache equals reference with bf16 cache exactly", test_bf16_only_equals_reference_with_bf16_cache},
        {"kv_bf16_only on qwen2: the v bias add emits bf16 itself, only k is converted",
         test_bf16_only_qwen2_bias_add_emits_bf16},
        {"kv_no_convert, no fallback, f16/bf16 cache: refused at build naming op, backend, dtypes",
         test_no_convert_refused_at_build},
        {"kv_no_convert, f32 cache: no convert node, equals reference", test_no_convert_f32_cache_needs_nothing},
        {"kv_no_convert with fallback: converts run on the reference", test_no_convert_with_fallback_converts_on_reference},
        {"no producer and no convert: the store moves to a widening fallback", test_store_moves_to_a_widening_backend},
        {"kv_rank3_store, no fallback: rank-3 stores run through prefill and decode, tokens as the reference",
         test_rank3_store_runs_prefill_and_decode},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("kv_negotiation", NULL, NULL, tests);
    return vt_test_run();
}
