/* test_kv_negotiation.c — KV-store dtype negotiation seen from the outside:
 * the `vt` CLI run as a subprocess with two test-only backends
 * (tests/plugins/kv_bf16_only.c, kv_no_convert.c) whose supports() force the
 * plan builder down its other paths:
 *   - kv_bf16_only stores k/v only in bf16 and its rope/matmul emit f32 only.
 *     The cache dtype asked for is kept exactly whenever an allowed backend
 *     can: with the reference as fallback an f32 or f16 cache gets its store
 *     on the reference (f32 k/v as produced, or converted to f16), a bf16
 *     cache its converts to bf16 and the store on the plugin. With
 *     --fallback none an f32 or f16 request can only be met by rounding k/v
 *     to bf16: the plan does it, marks every such store in --explain and says
 *     so in one warning line naming the node, the backend and both dtypes;
 *   - kv_no_convert converts nothing and stores only k/v of the cache dtype:
 *     with an f16/bf16 cache and --fallback none the build is refused (exit
 *     code, op, backend and dtypes in the message); with an f32 cache no
 *     conversion is needed; with the reference as fallback the convert runs
 *     there.
 * Plans are asserted on --explain / --dry-run output, exit codes and the
 * generated tokens; the narrowing warning, which is the point of one test,
 * on its stderr line. The plugins compute every op on the reference backend,
 * so their numbers can be compared with it exactly.
 * A third, kv_widen_store (no convert, a store that widens/narrows), shows the
 * last resort: reshape_and_cache moving to the fallback backend. A fourth,
 * kv_rank3_store, takes k/v at its store only as rank-3 tensors: the store
 * node that runs, in prefill and in single-token decode, must be the one it
 * accepted. Two more meet the Q8_0 cache (ABI 1.1): kv_no_q8_0 declines it,
 * kv_abi_1_0 is built at ABI 1.0 and must never be offered it. */
#include <math.h>
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

/* Occurrences of needle in haystack. */
static int count_of(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = haystack; p && (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* vt run on kv_bf16_only with a cache dtype and the reference as fallback
 * (named: the ranking would pick simd where it loads), or no fallback when
 * asked: the forward must complete (4 tokens) and --explain parse into x. */
static void run_bf16_only(const char *cache, bool no_fallback, char **out, char **err, vt_explain *x) {
    int rc = vt_test_run_vt_checked(out, err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_bf16_only %s"
                    "--kv-cache-dtype %s --explain", qwen3_path, prompt, no_fallback ? "--fallback none " : "--fallback reference ", cache);
    if (rc != 0)
        printf("\nkv_bf16_only%s, %s cache: exit %d\n%s", no_fallback ? ", no fallback" : "", cache, rc,
               *err ? *err : "");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_ids(*out), 4); /* the forward completed: 4 tokens generated */
    CU_ASSERT_FATAL(vt_explain_parse(*err, x));
}

/* With the reference as fallback every cache dtype is met exactly, and no
 * store is marked or warned about. */
static void test_bf16_only_with_fallback_keeps_every_cache_dtype(void) {
    static const char *const caches[] = {"f32", "f16", "bf16"};
    for (int c = 0; c < 3; c++) {
        char *out = NULL, *err = NULL;
        vt_explain x;
        run_bf16_only(caches[c], false, &out, &err, &x);
        CU_ASSERT_STRING_EQUAL(x.kv_dtype, caches[c]);
        CU_ASSERT_STRING_EQUAL(x.kv_source, "cli");
        CU_ASSERT_STRING_EQUAL(x.backend, "kv_bf16_only");
        CU_ASSERT_STRING_EQUAL(x.fallback, "reference");
        for (int ph = 0; ph < 2; ph++) {
            const char *phase = ph ? "decode" : "prefill";
            const int all = vt_explain_count(&x, phase, NULL, NULL, NULL, NULL);
            if (c == 0) { /* f32: the reference stores the f32 k/v as produced */
                CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "reshape_and_cache", "reference", "f32,f32,f32,f32,i64",
                                                 NULL), N_LAYER);
                CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "convert", NULL, NULL, NULL), 0);
                CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "kv_bf16_only", NULL, NULL), all - N_LAYER);
            } else if (c == 1) { /* f16: converted to f16 on the plugin, stored on the reference */
                assert_converted_store(&x, phase, "reference", "kv_bf16_only", "f16", "f16", true);
                CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "convert", NULL, NULL, NULL), 2 * N_LAYER);
                CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "kv_bf16_only", NULL, NULL), all - N_LAYER);
            } else { /* bf16: the plugin's own store, after converts to bf16 */
                assert_converted_store(&x, phase, "kv_bf16_only", "kv_bf16_only", "bf16", "bf16", true);
                CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "convert", NULL, NULL, NULL), 2 * N_LAYER);
                CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "kv_bf16_only", NULL, NULL), all);
            }
        }
        CU_ASSERT_EQUAL(count_of(err, "[inexact"), 0);
        CU_ASSERT_EQUAL(count_of(err, "warning"), 0);
        vt_explain_free(&x);
        free(out);
        free(err);
    }
}

/* No fallback: an f32 or f16 request can only be met by rounding k/v to
 * bf16 on the plugin. The forward runs, --explain marks each of the 2 x
 * N_LAYER stores, and one warning line names the first store, the backend
 * and both dtypes. A bf16 request is met exactly: no mark, no warning. */
static void test_bf16_only_without_fallback_narrows_visibly(void) {
    static const char *const caches[] = {"f32", "f16", "bf16"};
    for (int c = 0; c < 3; c++) {
        char *out = NULL, *err = NULL;
        vt_explain x;
        run_bf16_only(caches[c], true, &out, &err, &x);
        CU_ASSERT_STRING_EQUAL(x.fallback, "none");
        for (int ph = 0; ph < 2; ph++) {
            const char *phase = ph ? "decode" : "prefill";
            assert_converted_store(&x, phase, "kv_bf16_only", "kv_bf16_only", "bf16", caches[c], true);
            CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, "kv_bf16_only", NULL, NULL),
                            vt_explain_count(&x, phase, NULL, NULL, NULL, NULL));
        }
        vt_explain_free(&x);
        char mark[96], warning[256];
        snprintf(mark, sizeof mark, "in=bf16,bf16,%s,%s,i64 out=-  [inexact: k/v rounded to bf16 before the %s cache]",
                 caches[c], caches[c], caches[c]);
        snprintf(warning, sizeof warning, "vt[core] warning: %s KV cache requested, but node blk.0.store_kv on "
                 "backend 'kv_bf16_only' stores k/v already rounded to bf16 (and %d more stores like it", caches[c],
                 2 * N_LAYER - 1);
        if (c < 2) {
            CU_ASSERT_EQUAL(count_of(err, mark), 2 * N_LAYER);
            CU_ASSERT_EQUAL(count_of(err, warning), 1);
            CU_ASSERT_EQUAL(count_of(err, "warning"), 1); /* one line, not one per store */
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "Fix: allow a fallback backend (runtime.fallback = reference)"));
        } else {
            CU_ASSERT_EQUAL(count_of(err, "[inexact"), 0);
            CU_ASSERT_EQUAL(count_of(err, "warning"), 0);
        }
        free(out);
        free(err);
    }
}

/* Last-position logits of `vt eval ... --full-last` (malloc'ed), or NULL. */
static double *eval_logits(const char *args, int *n) {
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "eval -m '%s' --tokens %s --full-last %s", qwen3_path, prompt, args);
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

/* The f32 lever does what it says: kv_bf16_only with an f32 cache and the
 * reference as fallback equals the reference with an f32 cache exactly. With
 * --fallback none it must round k/v to bf16 (round to nearest even, the same
 * rounding the reference's rope uses when it emits bf16 itself) and widen
 * them exactly on store; attention then reads exactly what the reference
 * reads from a bf16 cache, so those logits equal the reference's at bf16,
 * and differ from f32's. */
static void test_bf16_only_f32_cache_exact_or_visibly_bf16(void) {
    for (int decode = 0; decode < 2; decode++) {
        const char *dec = decode ? " --decode" : "";
        char args[4][160];
        snprintf(args[0], sizeof args[0], "--backend kv_bf16_only --kv-cache-dtype f32%s", dec);
        snprintf(args[1], sizeof args[1], "--backend reference --kv-cache-dtype f32%s", dec);
        snprintf(args[2], sizeof args[2], "--backend kv_bf16_only --fallback none --kv-cache-dtype f32%s", dec);
        snprintf(args[3], sizeof args[3], "--backend reference --kv-cache-dtype bf16%s", dec);
        double *l[4];
        int n[4];
        for (int i = 0; i < 4; i++) {
            l[i] = eval_logits(args[i], &n[i]);
            CU_ASSERT_PTR_NOT_NULL_FATAL(l[i]);
        }
        for (int pair = 0; pair < 2; pair++) {
            const int a = 2 * pair, b = a + 1;
            CU_ASSERT_EQUAL_FATAL(n[a], n[b]);
            int differ = 0;
            for (int i = 0; i < n[a]; i++) differ += l[a][i] != l[b][i];
            if (differ) printf("\n%s: %d of %d logits differ from %s\n", args[a], differ, n[a], args[b]);
            CU_ASSERT_EQUAL(differ, 0);
        }
        /* and the rounding is real: the two references differ */
        int differ_f32 = 0;
        for (int i = 0; i < n[1] && i < n[3]; i++) differ_f32 += l[1][i] != l[3][i];
        CU_ASSERT(differ_f32 > 0);
        for (int i = 0; i < 4; i++) free(l[i]);
    }
}

/* qwen2: v comes from the bias add, which kv_bf16_only lets emit bf16
 * itself, so with a bf16 cache only k needs a convert node. */
static void test_bf16_only_qwen2_bias_add_emits_bf16(void) {
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_bf16_only "
                    "--kv-cache-dtype bf16 --explain", qwen2_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_ids(out), 4);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    for (int ph = 0; ph < 2; ph++) {
        const char *phase = ph ? "decode" : "prefill";
        assert_converted_store(&x, phase, "kv_bf16_only", "kv_bf16_only", "bf16", "bf16", false);
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
            int rc = vt_test_run_vt_checked(&out, &err, "%s -m '%s' --backend kv_no_convert --fallback none --kv-cache-dtype %s",
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
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend kv_no_convert --fallback none "
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
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(&ref_out, NULL, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend reference "
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
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_no_convert "
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
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_no_convert "
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
        int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend kv_rank3_store "
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
        CU_ASSERT_EQUAL(vt_test_run_vt_checked(&ref_out, NULL, "run -m '%s' --tokens %s -n 8 --temp 0 --ids --backend reference",
                               models[m], prompt), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(out);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ref_out);
        CU_ASSERT_STRING_EQUAL(out, ref_out);
        free(out);
        free(err);
        free(ref_out);
    }
}

/* q8_0 cache on `backend` (a test plugin), the reference as fallback: the forward
 * completes, the store and attention run on the reference in both phases
 * (the store taking the f32 k/v as produced: no convert node), everything
 * else on the plugin, and the tokens are the reference's at q8_0. */
static void assert_q8_0_cache_ops_on_fallback(const char *backend) {
    char *out = NULL, *err = NULL, *ref_out = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 6 --temp 0 --ids --backend %s --fallback reference "
                    "--kv-cache-dtype q8_0 --explain", qwen3_path, prompt, backend);
    if (rc != 0) printf("\n%s, q8_0 cache: exit %d\n%s", backend, rc, err ? err : "");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_ids(out), 6);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.kv_dtype, "q8_0");
    for (int ph = 0; ph < 2; ph++) {
        const char *phase = ph ? "decode" : "prefill";
        const int all = vt_explain_count(&x, phase, NULL, NULL, NULL, NULL);
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "reshape_and_cache", "reference", "f32,f32,q8_0,q8_0,i64", NULL),
                        N_LAYER);
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "attention", "reference", NULL, NULL), N_LAYER);
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, "convert", NULL, NULL, NULL), 0);
        CU_ASSERT_EQUAL(vt_explain_count(&x, phase, NULL, backend, NULL, NULL), all - 2 * N_LAYER);
    }
    CU_ASSERT_PTR_NULL(strstr(err, "handed a q8_0 cache"));
    vt_explain_free(&x);
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(&ref_out, NULL, "run -m '%s' --tokens %s -n 6 --temp 0 --ids --backend reference "
                           "--kv-cache-dtype q8_0", qwen3_path, prompt), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref_out);
    CU_ASSERT_STRING_EQUAL(out, ref_out);
    free(out);
    free(err);
    free(ref_out);
}

/* A backend whose supports() declines a q8_0 cache: its store and attention
 * go to the fallback at build; without a fallback the build is refused
 * (exit 4) naming the op, the backend and the dtypes, and the cache dtype as
 * a way out, before any forward. */
static void test_no_q8_0_backend_sends_cache_ops_to_fallback(void) {
    assert_q8_0_cache_ops_on_fallback("kv_no_q8_0");
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_no_q8_0 --fallback none "
                    "--kv-cache-dtype q8_0", qwen3_path, prompt);
    CU_ASSERT_EQUAL(rc, 4);
    CU_ASSERT_EQUAL(count_ids(out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "plan build refused"));
    /* placement meets the first layer's attention over the q8_0 cache first */
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "blk.0.attention attention("));
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", ", q8_0["));
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "declined by backend 'kv_no_q8_0' and there is no fallback"));
    /* the library names the options by their keys; the CLI puts the flags beside them */
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "Fix: choose another kv_cache.dtype, another runtime.backend"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "[flags: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "kv_cache.dtype is --kv-cache-dtype"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "runtime.fallback is --fallback"));
    free(out);
    free(err);
    /* a fallback naming the backend itself is no fallback, and both the
     * refusal and --explain say that is why */
    out = err = NULL;
    rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_no_q8_0 "
                                "--fallback kv_no_q8_0 --kv-cache-dtype q8_0", qwen3_path, prompt);
    CU_ASSERT_EQUAL(rc, 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "and there is no fallback (runtime.fallback names this backend itself)"));
    free(out);
    free(err);
    out = err = NULL;
    rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 4 --backend kv_no_q8_0 --fallback kv_no_q8_0 "
                                "--dry-run", qwen3_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    /* --dry-run's plan goes to stderr */
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "(fallback: none: runtime.fallback names the backend itself)"));
    free(out);
    free(err);
}

/* A plugin built at ABI 1.0 accepts any cache its supports() sees, but the
 * runtime never offers it a q8_0 cache (a convention added at 1.1): those
 * nodes run on the fallback, and at an f16 cache the plugin runs all. */
static void test_abi_1_0_plugin_is_never_offered_a_q8_0_cache(void) {
    assert_q8_0_cache_ops_on_fallback("kv_abi_1_0");
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_abi_1_0 --fallback none "
                    "--kv-cache-dtype f16 --explain", qwen3_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, NULL, "kv_abi_1_0", NULL, NULL), x.n);
    vt_explain_free(&x);
    free(out);
    free(err);
}

/* Widened conventions are opt-in from ABI 1.5: a plugin rebuilt at the
 * current minor that leaves vt_backend.conventions 0 is never offered a
 * q8_0 cache, however its supports() would answer; one built at 1.4 is, by
 * its minor, and runs every node itself, the tokens the reference's. */
static void test_widened_conventions_are_opt_in(void) {
    assert_q8_0_cache_ops_on_fallback("kv_q8_0_not_opted");
    char *out = NULL, *err = NULL, *ref_out = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 6 --temp 0 --ids --backend kv_q8_0_abi_1_4 "
                    "--fallback none --kv-cache-dtype q8_0 --explain", qwen3_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    vt_explain x;
    CU_ASSERT_FATAL(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.kv_dtype, "q8_0");
    CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, NULL, "kv_q8_0_abi_1_4", NULL, NULL), x.n);
    CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, "attention", "kv_q8_0_abi_1_4", NULL, NULL), 2 * N_LAYER);
    vt_explain_free(&x);
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(&ref_out, NULL, "run -m '%s' --tokens %s -n 6 --temp 0 --ids --backend reference "
                           "--kv-cache-dtype q8_0", qwen3_path, prompt), 0);
    CU_ASSERT_FATAL(out && ref_out);
    CU_ASSERT_STRING_EQUAL(out, ref_out);
    free(out);
    free(err);
    free(ref_out);
}

/* ABI 1.8 widened ROPE to Llama 3.1's frequency factors (a third operand).
 * A plugin of an earlier minor, or one of this minor that does not set
 * VT_CONVENTION_ROPE_FACTORS, is never offered such a rope: on a model with
 * rope_freqs.weight its rope nodes run on the fallback, every other node on
 * the plugin, and the tokens are the reference's (which reads the factors). */
static void test_rope_factors_only_to_backends_that_read_them(void) {
    const char *model = VT_TEST_DATA_DIR "/models/llama-gqa-tiny-ropefreqs-bias-f32.gguf";
    static const char *const plugins[] = {"kv_q8_0_abi_1_4", "kv_q8_0_not_opted"};
    char *ref_out = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_test_run_vt_checked(&ref_out, NULL, "run -m '%s' --tokens 1,20,30,40 -n 8 --temp 0 --ids "
                                                 "--backend reference", model), 0);
    for (size_t i = 0; i < sizeof plugins / sizeof *plugins; i++) {
        char *out = NULL, *err = NULL;
        int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens 1,20,30,40 -n 8 --temp 0 --ids --backend %s "
                                        "--fallback reference --explain", model, plugins[i]);
        CU_ASSERT_EQUAL(rc, 0);
        vt_explain x;
        CU_ASSERT_FATAL(vt_explain_parse(err, &x));
        const int ropes = vt_explain_count(&x, NULL, "rope", NULL, NULL, NULL);
        CU_ASSERT(ropes > 0);
        CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, "rope", "reference", NULL, NULL), ropes);
        CU_ASSERT_EQUAL(vt_explain_count(&x, NULL, "rope", plugins[i], NULL, NULL), 0);
        CU_ASSERT(vt_explain_count(&x, NULL, "matmul", plugins[i], NULL, NULL) > 0);
        vt_explain_free(&x);
        CU_ASSERT(out && strcmp(out, ref_out) == 0);
        free(out);
        free(err);
    }
    free(ref_out);
}

int main(void) {
    if (synth_models() != 0) return 1;
    CU_TestInfo tests[] = {
        {"rope frequency factors (ABI 1.8) are offered only to backends that read them",
         test_rope_factors_only_to_backends_that_read_them},
        {"kv_bf16_only, reference fallback: f32/f16/bf16 caches each met exactly, forward completes",
         test_bf16_only_with_fallback_keeps_every_cache_dtype},
        {"kv_bf16_only, no fallback: f32/f16 requests narrowed to bf16, marked in --explain, one warning line",
         test_bf16_only_without_fallback_narrows_visibly},
        {"kv_bf16_only, f32 cache: equals reference f32 with a fallback, reference bf16 without",
         test_bf16_only_f32_cache_exact_or_visibly_bf16},
        {"kv_bf16_only on qwen2, bf16 cache: the v bias add emits bf16 itself, only k is converted",
         test_bf16_only_qwen2_bias_add_emits_bf16},
        {"kv_no_convert, no fallback, f16/bf16 cache: refused at build naming op, backend, dtypes",
         test_no_convert_refused_at_build},
        {"kv_no_convert, f32 cache: no convert node, equals reference", test_no_convert_f32_cache_needs_nothing},
        {"kv_no_convert with fallback: converts run on the reference", test_no_convert_with_fallback_converts_on_reference},
        {"no producer and no convert: the store moves to a widening fallback", test_store_moves_to_a_widening_backend},
        {"kv_rank3_store, no fallback: rank-3 stores run through prefill and decode, tokens as the reference",
         test_rank3_store_runs_prefill_and_decode},
        {"kv_no_q8_0, q8_0 cache: store and attention on the fallback, tokens as the reference; refused without one",
         test_no_q8_0_backend_sends_cache_ops_to_fallback},
        {"widened conventions are opt-in: a rebuilt plugin that did not opt in is never offered a q8_0 cache, "
         "a 1.4 plugin is",
         test_widened_conventions_are_opt_in},
        {"kv_abi_1_0 (an ABI 1.0 plugin): never offered a q8_0 cache, its nodes run on the fallback",
         test_abi_1_0_plugin_is_never_offered_a_q8_0_cache},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("kv_negotiation", NULL, NULL, tests);
    return vt_test_run();
}
