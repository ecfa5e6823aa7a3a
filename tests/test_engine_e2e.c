/* test_engine_e2e.c — the core issue's end-to-end check on a model the
 * project writes itself: a random qwen3 Q4_K_M file goes through the real
 * engine (GGUF reader -> model -> negotiated plans -> reference backend), once
 * as one prefill and once token by token through the decode plan. The two
 * paths run the same arithmetic in a different grouping (one call of T tokens
 * vs T calls of one), so their logits must agree to float rounding: 1e-4
 * relative to max(1, max|logit|) is three orders above what we measure
 * (~1e-7) and far below any real bug (a wrong position or slot shows as O(1)).
 * Argmax must be identical at every position. Also: prefill in several chunks
 * (batch smaller than the prompt) equals one prefill, and a prompt larger
 * than the KV cache is refused before anything runs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "sampler.h"
#include "synth.h"
#include "util.h"

static char model_path[1024];

static int write_model(void) {
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    vt_error err = {0};
    if (vt_synth_shape(&p, "tiny", &err) != VT_OK) return 1;
    p.arch = "qwen3";
    p.type = "q4_k_m";
    p.n_layer = 3; /* 3 layers: use_more_bits puts Q6_K in some layers and Q4_K in others */
    p.seed = 7;
    vt_test_tmpfile(model_path, sizeof model_path, "qwen3-q4_k_m.gguf");
    if (vt_synth_write(&p, model_path, &err) != VT_OK) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return 1;
    }
    return 0;
}

#define N_PROMPT 37 /* crosses two 16-token KV blocks */

static void prompt(int32_t *ids, int32_t n_vocab) {
    uint32_t x = 12345;
    for (int i = 0; i < N_PROMPT; i++) {
        x = x * 1664525u + 1013904223u;
        ids[i] = (int32_t)(x % (uint32_t)n_vocab);
    }
}

static double max_abs(const float *a, int32_t n) {
    double m = 0;
    for (int32_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

static void test_prefill_equals_decode(void) {
    vt_fixture pre, dec;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&pre, model_path, "reference", VT_F32, true), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&dec, model_path, "reference", VT_F32, true), VT_OK);
    const int32_t V = pre.model->hp.n_vocab;
    int32_t ids[N_PROMPT];
    prompt(ids, V);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(pre.engine, ids, N_PROMPT, false, &pre.err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(dec.engine, ids, N_PROMPT, true, &dec.err), VT_OK);
    double worst = 0;
    for (int t = 0; t < N_PROMPT; t++) {
        const float *a = vt_engine_logits(pre.engine, t), *b = vt_engine_logits(dec.engine, t);
        double scale = fmax(1.0, max_abs(a, V));
        for (int32_t i = 0; i < V; i++) worst = fmax(worst, fabs(a[i] - b[i]) / scale);
        CU_ASSERT_EQUAL(vt_argmax(a, V), vt_argmax(b, V));
    }
    printf("\nprefill vs decode over %d positions: max relative |dlogit| %.3g\n", N_PROMPT, worst);
    CU_ASSERT(worst <= 1e-4);
    vt_fixture_close(&pre);
    vt_fixture_close(&dec);
}

/* Generation continues the prompt: greedy tokens from a prefilled prompt equal
 * those of a prompt fed token by token. */
static void test_greedy_generation_paths_agree(void) {
    vt_fixture a, b;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&a, model_path, "reference", VT_F32, false), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&b, model_path, "reference", VT_F32, false), VT_OK);
    const int32_t V = a.model->hp.n_vocab;
    int32_t ids[N_PROMPT];
    prompt(ids, V);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(a.engine, ids, N_PROMPT, false, &a.err), VT_OK);
    for (int i = 0; i < N_PROMPT; i++) CU_ASSERT_EQUAL_FATAL(vt_engine_eval(b.engine, &ids[i], 1, true, &b.err), VT_OK);
    for (int k = 0; k < 12; k++) {
        int32_t ta = vt_argmax(vt_engine_logits(a.engine, 0), V), tb = vt_argmax(vt_engine_logits(b.engine, 0), V);
        CU_ASSERT_EQUAL_FATAL(ta, tb);
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(a.engine, &ta, 1, true, &a.err), VT_OK);
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(b.engine, &tb, 1, true, &b.err), VT_OK);
    }
    CU_ASSERT_EQUAL(vt_engine_n_past(a.engine), N_PROMPT + 12);
    vt_fixture_close(&a);
    vt_fixture_close(&b);
}

static void test_chunked_prefill_equals_one_prefill(void) {
    vt_fixture one, chunked;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&one, model_path, "reference", VT_F16, true), VT_OK);
    vt_options o;
    vt_fixture_options(&o, "reference", VT_F16);
    o.batch_size = 8; /* 37 tokens in calls of 8, 8, 8, 8, 5 */
    memset(&chunked, 0, sizeof chunked);
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &chunked.model, &chunked.err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&o, chunked.model, true, &chunked.engine, &chunked.err), VT_OK);
    CU_ASSERT_EQUAL(chunked.engine->prefill->max_tokens, 8);
    const int32_t V = one.model->hp.n_vocab;
    int32_t ids[N_PROMPT];
    prompt(ids, V);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(one.engine, ids, N_PROMPT, false, &one.err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(chunked.engine, ids, N_PROMPT, false, &chunked.err), VT_OK);
    double worst = 0;
    for (int t = 0; t < N_PROMPT; t++) {
        const float *a = vt_engine_logits(one.engine, t), *b = vt_engine_logits(chunked.engine, t);
        for (int32_t i = 0; i < V; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    }
    CU_ASSERT(worst <= 1e-4);
    vt_fixture_close(&one);
    vt_fixture_close(&chunked);
}

static void test_context_full_is_an_error_not_a_crash(void) {
    vt_fixture f;
    memset(&f, 0, sizeof f);
    vt_options o;
    vt_fixture_options(&o, "reference", VT_F32);
    o.ctx_size = 16;
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &f.model, &f.err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&o, f.model, false, &f.engine, &f.err), VT_OK);
    int32_t ids[N_PROMPT];
    prompt(ids, f.model->hp.n_vocab);
    CU_ASSERT_EQUAL(vt_engine_eval(f.engine, ids, N_PROMPT, false, &f.err), VT_ERR_CONTEXT_FULL);
    VT_ASSERT_ERROR(f.err, VT_ERR_CONTEXT_FULL);
    CU_ASSERT_EQUAL(vt_engine_n_past(f.engine), 0);
    /* The engine stays usable: 16 tokens fit. */
    CU_ASSERT_EQUAL(vt_engine_eval(f.engine, ids, 16, false, &f.err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_eval(f.engine, ids, 1, true, &f.err), VT_ERR_CONTEXT_FULL);
    vt_fixture_close(&f);
}

/* A sequence cut back to its first n tokens (vt_engine_seq_truncate, what
 * vt bench -d does between runs) continues exactly as a sequence that only
 * ever held those n: the tokens after them, evaluated again, get the same
 * logits bit for bit as after a fresh prefill of the n (the reference
 * backend's numbers do not depend on the call a token was in). Cut inside
 * a KV block (20: its later positions are written again) and at a block's
 * end (32), from a longer prompt and after decode steps. */
static void test_truncated_sequence_continues_as_fresh(void) {
    static const int64_t cuts[2] = {20, 32};
    enum { TAIL = 5 };
    for (int k = 0; k < 2; k++) {
        const int64_t n = cuts[k];
        vt_fixture cut, fresh;
        CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&cut, model_path, "reference", VT_F16, true), VT_OK);
        CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&fresh, model_path, "reference", VT_F16, true), VT_OK);
        const int32_t V = cut.model->hp.n_vocab;
        int32_t ids[N_PROMPT], tail[TAIL];
        prompt(ids, V);
        for (int i = 0; i < TAIL; i++) tail[i] = (ids[i] + 11 * (i + 1)) % V;
        /* the longer history: the whole prompt, then two decode steps */
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(cut.engine, ids, N_PROMPT, false, &cut.err), VT_OK);
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(cut.engine, tail, 2, true, &cut.err), VT_OK);
        CU_ASSERT_FATAL(vt_engine_seq_truncate(cut.engine, 0, n));
        CU_ASSERT_EQUAL(vt_engine_n_past(cut.engine), n);
        CU_ASSERT_PTR_NULL(vt_engine_logits(cut.engine, 0)); /* the rows were of tokens now gone */
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(cut.engine, tail, TAIL, false, &cut.err), VT_OK);
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(fresh.engine, ids, n, false, &fresh.err), VT_OK);
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(fresh.engine, tail, TAIL, false, &fresh.err), VT_OK);
        for (int t = 0; t < TAIL; t++)
            CU_ASSERT(memcmp(vt_engine_logits(cut.engine, t), vt_engine_logits(fresh.engine, t), (size_t)V * sizeof(float)) == 0);
        /* cutting to the length it has changes nothing; past it is refused */
        CU_ASSERT(vt_engine_seq_truncate(cut.engine, 0, n + TAIL));
        CU_ASSERT_FALSE(vt_engine_seq_truncate(cut.engine, 0, n + TAIL + 1));
        CU_ASSERT_EQUAL(vt_engine_n_past(cut.engine), n + TAIL);
        vt_fixture_close(&cut);
        vt_fixture_close(&fresh);
    }
}

int main(void) {
    CU_TestInfo tests[] = {
        {"qwen3 q4_k_m: prefill and step-by-step decode agree (logits 1e-4 rel, argmax equal)",
         test_prefill_equals_decode},
        {"greedy generation after prefill equals after token-by-token", test_greedy_generation_paths_agree},
        {"prefill in chunks of 8 equals one prefill (f16 cache)", test_chunked_prefill_equals_one_prefill},
        {"a prompt larger than the KV cache is refused, engine stays usable", test_context_full_is_an_error_not_a_crash},
        {"a sequence cut back to n tokens continues bit for bit as one that held only those n",
         test_truncated_sequence_continues_as_fresh},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("engine end to end", write_model, NULL, tests);
    return vt_test_run();
}
