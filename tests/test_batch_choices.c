/* test_batch_choices.c — two per-request options of include/vt/vt.h's batch
 * API, through the public header only:
 *  - logprobs: each generated token's log-probability and its top
 *    alternatives equal the log-softmax of the logits vt_session computes
 *    for the same tokens (reference backend), however the token was sampled;
 *  - n choices (vt_batch_add_n): choice i generates what a separate request
 *    with seed + i generates, on reference and simd; greedy choices are all
 *    the same; the prompt is computed once (the prefix cache is asked about
 *    it once, the other choices fork); with too few sequences the other
 *    choices still equal their separate requests; cancelling every choice
 *    frees every block. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "vt/vt.h"

#define MAX_GEN 48
#define MAX_N 4

static char model_path[1024];

static int suite_init(void) {
    const char *dir = vt_test_data_dir("batch choices model");
    if (!dir) return 1;
    /* a trained model: its distributions have a clear top and a long tail,
     * so the top alternatives are well separated and sampling varies */
    snprintf(model_path, sizeof model_path, "%s/models/aidreams260k-f32.gguf", dir);
    return 0;
}

static vt_batch *open_batch(const char *backend, int max_seqs) {
    char be[64], seqs[64];
    snprintf(be, sizeof be, "runtime.backend=%s", backend);
    snprintf(seqs, sizeof seqs, "runtime.max_seqs=%d", max_seqs);
    const char *const settings[] = {be, "runtime.threads=2", seqs, "kv_cache.ctx_size=256", NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    if (vt_batch_open(model_path, &o, &b, err, sizeof err) != VT_OK) printf("\n  vt_batch_open: %s\n", err);
    return b;
}

/* What one request generated, and its log-probabilities when asked. */
typedef struct generated {
    int32_t tokens[MAX_GEN];
    int64_t n;
    vt_finish finish;
    vt_token_logprob sampled[MAX_GEN];
    vt_token_logprob top[MAX_GEN][VT_BATCH_MAX_TOP_LOGPROBS];
    int32_t n_top;
} generated;

/* Step until nothing runs, reading ids[0..n) (and their logprobs) after each step. */
static void run_to_end(vt_batch *b, const uint64_t *ids, int n, bool logprobs, generated *out) {
    char err[512] = "";
    for (int guard = 0; guard < 10000; guard++) {
        int32_t n_seqs = -1;
        CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
        for (int i = 0; i < n; i++) {
            vt_batch_output o;
            CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, ids[i], &o, err, sizeof err), VT_OK);
            generated *g = &out[i];
            CU_ASSERT_FATAL(g->n + (int64_t)o.n_tokens <= MAX_GEN);
            if (logprobs) {
                vt_batch_logprobs lp = {.struct_size = sizeof lp};
                CU_ASSERT_EQUAL_FATAL(vt_batch_read_logprobs(b, ids[i], &lp, err, sizeof err), VT_OK);
                CU_ASSERT_EQUAL_FATAL(lp.n_tokens, o.n_tokens);
                g->n_top = lp.n_top;
                for (size_t t = 0; t < lp.n_tokens; t++) {
                    g->sampled[g->n + (int64_t)t] = lp.sampled[t];
                    CU_ASSERT_EQUAL(lp.sampled[t].id, o.tokens[t]);
                    for (int32_t k = 0; k < lp.n_top; k++) g->top[g->n + (int64_t)t][k] = lp.top[t * (size_t)lp.n_top + k];
                }
            }
            memcpy(g->tokens + g->n, o.tokens, o.n_tokens * sizeof *o.tokens);
            g->n += (int64_t)o.n_tokens;
            g->finish = o.finish;
        }
        if (n_seqs == 0) return;
    }
    CU_FAIL("the batch never ran out of work");
}

static void sampled_request(vt_batch_request *r, const char *text, uint64_t seed, int64_t max_new) {
    vt_batch_request_init(r);
    r->text = text;
    r->max_new_tokens = max_new;
    r->temperature = 1.0f;
    r->seed = seed;
}

/* The tokens of text as vt_batch_add tokenizes it (BOS as the vocabulary says). */
static size_t tokenize(vt_batch *b, const char *text, int32_t **ids) {
    size_t n = 0;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(vt_batch_tokenize(b, text, strlen(text), true, false, ids, &n, err, sizeof err), VT_OK);
    return n;
}

/* ---- logprobs ------------------------------------------------------------ */

/* The expected numbers from vt_session on the same backend: for each
 * generated token, the log-softmax of the logits that preceded it, computed
 * here in double. The engine's own pass runs exp in float over the same
 * float logits and sums in double: on 512 logits it differs from this by a
 * few float ulps of the result (|logprob| < 30 here, ulp ~2e-6), so 1e-4 is
 * a margin of ~50 ulps that a wrong formula (a temperature, a penalty, a
 * missing normalization) exceeds by orders of magnitude. */
#define LOGPROB_TOL 1e-4

static void check_against_session(const int32_t *prompt, size_t n_prompt, const generated *g) {
    const char *const settings[] = {"runtime.backend=reference", "runtime.threads=2", "kv_cache.ctx_size=256", NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_session *s = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_OK);
    const int32_t V = vt_session_n_vocab(s);
    double *lp = malloc((size_t)V * sizeof *lp);
    CU_ASSERT_FATAL(lp != NULL);
    CU_ASSERT_EQUAL_FATAL(vt_session_eval(s, prompt, n_prompt, err, sizeof err), VT_OK);
    for (int64_t t = 0; t < g->n; t++) {
        const float *logits = vt_session_logits(s, 0);
        double max = -INFINITY, sum = 0.0;
        for (int32_t i = 0; i < V; i++) max = fmax(max, logits[i]);
        for (int32_t i = 0; i < V; i++) sum += exp((double)logits[i] - max);
        for (int32_t i = 0; i < V; i++) lp[i] = (double)logits[i] - max - log(sum);
        const int32_t tok = g->tokens[t];
        CU_ASSERT(fabs(g->sampled[t].logprob - lp[tok]) < LOGPROB_TOL);
        /* the top: most likely first, each the expected value, and nothing
         * left out more likely than the last one kept */
        for (int32_t k = 0; k < g->n_top; k++) {
            const vt_token_logprob e = g->top[t][k];
            CU_ASSERT_FATAL(e.id >= 0 && e.id < V);
            CU_ASSERT(fabs(e.logprob - lp[e.id]) < LOGPROB_TOL);
            if (k > 0) CU_ASSERT(e.logprob <= g->top[t][k - 1].logprob);
        }
        if (g->n_top > 0) {
            int32_t more_likely = 0;
            for (int32_t i = 0; i < V; i++) more_likely += lp[i] > lp[g->top[t][g->n_top - 1].id] + LOGPROB_TOL;
            CU_ASSERT(more_likely <= g->n_top - 1);
            /* the sampled token, when among the top, has the same number there */
            for (int32_t k = 0; k < g->n_top; k++) {
                if (g->top[t][k].id == tok) CU_ASSERT_EQUAL(g->top[t][k].logprob, g->sampled[t].logprob);
            }
        }
        if (t + 1 < g->n) CU_ASSERT_EQUAL_FATAL(vt_session_eval(s, &tok, 1, err, sizeof err), VT_OK);
    }
    free(lp);
    vt_session_close(s);
}

static void test_logprobs_are_the_log_softmax_of_the_logits(void) {
    vt_batch *b = open_batch("reference", 4);
    CU_ASSERT_FATAL(b != NULL);
    static const char *const texts[] = {"Once upon a time", "The little dog"};
    static const int32_t tops[] = {5, 20};
    uint64_t ids[2];
    char err[512] = "";
    for (int i = 0; i < 2; i++) {
        vt_batch_request r;
        sampled_request(&r, texts[i], 11 + (uint64_t)i, 24);
        /* penalties and a top-k cut change what is drawn, never the reported
         * probabilities: those are the model's own */
        r.top_k = 8;
        r.presence_penalty = 1.5f;
        r.logprobs = true;
        r.top_logprobs = tops[i];
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[i], err, sizeof err), VT_OK);
    }
    static generated g[2];
    memset(g, 0, sizeof g);
    run_to_end(b, ids, 2, true, g);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT(g[i].n >= 1);
        CU_ASSERT_EQUAL(g[i].n_top, tops[i]);
        int32_t *prompt = NULL;
        size_t n_prompt = tokenize(b, texts[i], &prompt);
        check_against_session(prompt, n_prompt, &g[i]);
        free(prompt);
    }
    vt_batch_close(b);
}

static void test_logprobs_refusals(void) {
    vt_batch *b = open_batch("reference", 2);
    CU_ASSERT_FATAL(b != NULL);
    char err[512] = "";
    vt_batch_request r;
    sampled_request(&r, "Hi", 1, 4);
    r.logprobs = true;
    r.top_logprobs = VT_BATCH_MAX_TOP_LOGPROBS + 1;
    uint64_t id = 0, ids[VT_BATCH_MAX_CHOICES + 1];
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(strstr(err, "request.top_logprobs") != NULL);
    CU_ASSERT_EQUAL(vt_batch_add_n(b, &r, 0, ids, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_add_n(b, &r, VT_BATCH_MAX_CHOICES + 1, ids, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(strstr(err, "n:") != NULL);
    /* a request without logprobs has none to read */
    r.logprobs = false;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    vt_batch_logprobs lp = {.struct_size = sizeof lp};
    CU_ASSERT_EQUAL(vt_batch_read_logprobs(b, id, &lp, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(strstr(err, "logprobs") != NULL);
    /* a caller built before logprobs existed: its struct_size ends before
     * them, so they are off whatever the bytes past it hold */
    r.struct_size = (uint32_t)offsetof(vt_batch_request, logprobs);
    r.logprobs = true;
    r.top_logprobs = 1000;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_read_logprobs(b, id, &lp, err, sizeof err), VT_ERR_INVALID);
    /* a caller built before text offsets: nothing is written past its struct_size */
    vt_batch_request_init(&r);
    r.text = "Once upon a time";
    r.max_new_tokens = 2;
    r.logprobs = true;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    int32_t n_seqs;
    CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
    vt_batch_output o;
    CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, id, &o, err, sizeof err), VT_OK);
    const int64_t canary = 0x5eed;
    vt_batch_logprobs old = {.struct_size = (uint32_t)offsetof(vt_batch_logprobs, text_offset),
                             .text_offset = (const int64_t *)&canary};
    CU_ASSERT_EQUAL(vt_batch_read_logprobs(b, id, &old, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(old.n_tokens, o.n_tokens);
    CU_ASSERT_PTR_EQUAL(old.text_offset, &canary);
    vt_batch_close(b);
}

/* ---- n choices ----------------------------------------------------------- */

/* n choices of text with seed, and n separate requests with seed + i, on
 * fresh batches of max_seqs sequences: the same tokens, choice by choice. */
static void check_choices_equal_separate(const char *backend, int max_seqs, int n, float temperature) {
    static const char text[] = "Once upon a time there was a little girl";
    char err[512] = "";
    static generated together[MAX_N], separate[MAX_N];
    memset(together, 0, sizeof together);
    memset(separate, 0, sizeof separate);
    uint64_t ids[MAX_N];

    vt_batch *b = open_batch(backend, max_seqs);
    CU_ASSERT_FATAL(b != NULL);
    vt_batch_request r;
    sampled_request(&r, text, 1000, 20);
    r.temperature = temperature;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add_n(b, &r, (size_t)n, ids, err, sizeof err), VT_OK);
    for (int i = 1; i < n; i++) CU_ASSERT(ids[i] != ids[i - 1]);
    run_to_end(b, ids, n, false, together);
    vt_batch_cache_stats cs = {.struct_size = sizeof cs};
    vt_batch_get_cache_stats(b, &cs);
    int32_t *prompt = NULL;
    const int64_t n_prompt = (int64_t)tokenize(b, text, &prompt);
    free(prompt);
    /* the prompt is counted once, with the first choice, whether the others
     * forked or (without a free sequence) queued and found it in the cache,
     * as usage's cached_tokens counts it */
    CU_ASSERT(cs.enabled);
    CU_ASSERT_EQUAL(cs.query_tokens, n_prompt);
    CU_ASSERT_EQUAL(cs.hit_tokens, 0);
    vt_batch_stats st;
    vt_batch_get_stats(b, &st);
    CU_ASSERT_EQUAL(st.free_kv_blocks, st.total_kv_blocks);
    vt_batch_close(b);

    for (int i = 0; i < n; i++) {
        b = open_batch(backend, max_seqs);
        CU_ASSERT_FATAL(b != NULL);
        sampled_request(&r, text, 1000 + (uint64_t)i, 20);
        r.temperature = temperature;
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[i], err, sizeof err), VT_OK);
        run_to_end(b, &ids[i], 1, false, &separate[i]);
        vt_batch_close(b);
        CU_ASSERT_EQUAL(together[i].n, separate[i].n);
        CU_ASSERT_EQUAL(together[i].finish, separate[i].finish);
        CU_ASSERT(memcmp(together[i].tokens, separate[i].tokens, (size_t)separate[i].n * sizeof(int32_t)) == 0);
    }
    if (temperature == 0.0f) {
        for (int i = 1; i < n; i++)
            CU_ASSERT(together[i].n == together[0].n &&
                      memcmp(together[i].tokens, together[0].tokens, (size_t)together[0].n * sizeof(int32_t)) == 0);
    } else { /* seeds that differ draw differently somewhere in 20 tokens at temperature 1 */
        CU_ASSERT(together[1].n != together[0].n ||
                  memcmp(together[1].tokens, together[0].tokens, (size_t)together[0].n * sizeof(int32_t)) != 0);
    }
}

static void test_choices_equal_separate_requests_reference(void) {
    check_choices_equal_separate("reference", 4, 4, 1.0f);
}

static void test_choices_equal_separate_requests_simd(void) {
    if (!vt_test_simd_expected()) return; /* it said why */
    check_choices_equal_separate("simd", 4, 3, 1.0f);
}

static void test_greedy_choices_are_identical(void) { check_choices_equal_separate("reference", 4, 3, 0.0f); }

static void test_choices_without_enough_sequences(void) {
    /* two sequences for four choices: one forks, two wait and start from
     * the prefix cache as the first ones finish */
    check_choices_equal_separate("reference", 2, 4, 1.0f);
}

/* Seeds are 0..VT_SEED_MAX (what a JSON seed holds): choice 1 of a request
 * seeded VT_SEED_MAX draws as a request seeded 0, and a seed past the
 * largest is refused naming the field. */
static void test_seeds_wrap_and_past_the_largest_are_refused(void) {
    vt_batch *b = open_batch("reference", 2);
    CU_ASSERT_FATAL(b != NULL);
    char err[512] = "";
    vt_batch_request r;
    uint64_t ids[2], id;
    sampled_request(&r, "Once upon a time", (uint64_t)VT_SEED_MAX, 16);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add_n(b, &r, 2, ids, err, sizeof err), VT_OK);
    static generated together[2], alone;
    memset(together, 0, sizeof together);
    memset(&alone, 0, sizeof alone);
    run_to_end(b, ids, 2, false, together);
    sampled_request(&r, "Once upon a time", 0, 16);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    run_to_end(b, &id, 1, false, &alone);
    CU_ASSERT(together[1].n == alone.n && memcmp(together[1].tokens, alone.tokens, (size_t)alone.n * sizeof(int32_t)) == 0);
    sampled_request(&r, "Once upon a time", (uint64_t)VT_SEED_MAX + 1, 16);
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(strstr(err, "request.seed") != NULL);
    vt_batch_close(b);
}

static void test_cancel_every_choice(void) {
    vt_batch *b = open_batch("reference", 4);
    CU_ASSERT_FATAL(b != NULL);
    char err[512] = "";
    uint64_t ids[3];
    vt_batch_request r;
    sampled_request(&r, "Once upon a time", 5, 40);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add_n(b, &r, 3, ids, err, sizeof err), VT_OK);
    int32_t n_seqs = 0;
    CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK); /* the prompt, then the forks */
    CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(n_seqs, 3);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(vt_batch_cancel(b, ids[i], err, sizeof err), VT_OK);
    vt_batch_stats st;
    vt_batch_get_stats(b, &st);
    CU_ASSERT_EQUAL(st.n_running, 0);
    CU_ASSERT_EQUAL(st.free_kv_blocks, st.total_kv_blocks);
    for (int i = 0; i < 3; i++) {
        vt_batch_output o;
        CU_ASSERT_EQUAL(vt_batch_read(b, ids[i], &o, err, sizeof err), VT_OK);
        CU_ASSERT_EQUAL(o.finish, VT_FINISH_CANCELLED);
    }
    /* the first choice cancelled before its prompt ran: the others start on their own */
    CU_ASSERT_EQUAL_FATAL(vt_batch_add_n(b, &r, 3, ids, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_cancel(b, ids[0], err, sizeof err), VT_OK);
    static generated g[3];
    memset(g, 0, sizeof g);
    run_to_end(b, ids + 1, 2, false, g + 1);
    CU_ASSERT(g[1].n >= 1 && g[2].n >= 1);
    CU_ASSERT(g[1].finish != VT_FINISH_CANCELLED && g[2].finish != VT_FINISH_CANCELLED);
    vt_batch_close(b);
}

/* ---- plans that compute apart --------------------------------------------- */

/* On onednn, prefill matmuls run on oneDNN and decode on the fallback: the
 * engine's two plans compute differently (which is why the prefix cache is
 * off there). A token's numbers must still not depend on what shares its
 * step: a prompt's tokens always go through the prefill plan and generated
 * ones through the decode plan. */
static vt_batch *open_onednn(int max_seqs, int ctx) {
    char seqs[64], ctx_size[64], path[1024];
    snprintf(seqs, sizeof seqs, "runtime.max_seqs=%d", max_seqs);
    snprintf(ctx_size, sizeof ctx_size, "kv_cache.ctx_size=%d", ctx);
    /* quantized weights: oneDNN's prefill and the fallback's decode differ in their last bits */
    snprintf(path, sizeof path, "%s/models/llama-gqa-tiny-q4_k_m.gguf", vt_test_data_dir("onednn model"));
    const char *const settings[] = {"runtime.backend=onednn", "runtime.threads=2", seqs, ctx_size, NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    if (vt_batch_open(path, &o, &b, err, sizeof err) != VT_OK) printf("\n  vt_batch_open: %s\n", err);
    if (b) { /* the case this is about: the plans disagree, so the prefix cache is off */
        vt_batch_cache_stats cs = {.struct_size = sizeof cs};
        vt_batch_get_cache_stats(b, &cs);
        CU_ASSERT_FALSE(cs.enabled);
    }
    return b;
}

/* Request: ids[0..n), max_new tokens, sampled with seed at temperature 1, logprobs. */
static void id_request(vt_batch_request *r, const int32_t *ids, size_t n, int64_t max_new, uint64_t seed) {
    vt_batch_request_init(r);
    r->ids = ids;
    r->n_ids = n;
    r->max_new_tokens = max_new;
    r->ignore_eos = true;
    r->temperature = 1.0f;
    r->seed = seed;
    r->logprobs = true;
}

static bool same_generation(const generated *a, const generated *b) {
    return a->n == b->n && memcmp(a->tokens, b->tokens, (size_t)a->n * sizeof *a->tokens) == 0 &&
           memcmp(a->sampled, b->sampled, (size_t)a->n * sizeof *a->sampled) == 0; /* logprobs bit for bit */
}

static void test_onednn_steps_shared_do_not_change_a_sequence(void) {
    if (!vt_test_onednn_expected()) return; /* it said why */
    int32_t pa[8], pb[100];
    for (int i = 0; i < 8; i++) pa[i] = 5 + i;
    for (int i = 0; i < 100; i++) pb[i] = 20 + i;
    char err[512] = "";
    /* A alone */
    vt_batch *b = open_onednn(2, 256);
    CU_ASSERT_FATAL(b != NULL);
    vt_batch_request r;
    uint64_t ia, ib;
    id_request(&r, pa, 8, 24, 3);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ia, err, sizeof err), VT_OK);
    static generated alone, mixed[2];
    memset(&alone, 0, sizeof alone);
    run_to_end(b, &ia, 1, true, &alone);
    vt_batch_close(b);
    CU_ASSERT_EQUAL(alone.n, 24);
    /* A again, with B's 100-token prompt arriving after A's fourth step:
     * B's prompt chunks share steps with A's decodes */
    b = open_onednn(2, 256);
    CU_ASSERT_FATAL(b != NULL);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ia, err, sizeof err), VT_OK);
    memset(mixed, 0, sizeof mixed);
    uint64_t both[2] = {ia, 0};
    for (int k = 0; k < 4; k++) {
        int32_t n_seqs;
        CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
        vt_batch_output o;
        CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, ia, &o, err, sizeof err), VT_OK);
        vt_batch_logprobs lp = {.struct_size = sizeof lp};
        CU_ASSERT_EQUAL_FATAL(vt_batch_read_logprobs(b, ia, &lp, err, sizeof err), VT_OK);
        for (size_t t = 0; t < o.n_tokens; t++, mixed[0].n++)
            mixed[0].tokens[mixed[0].n] = o.tokens[t], mixed[0].sampled[mixed[0].n] = lp.sampled[t];
    }
    vt_batch_request rb;
    id_request(&rb, pb, 100, 4, 4);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &rb, &ib, err, sizeof err), VT_OK);
    both[1] = ib;
    run_to_end(b, both, 2, true, mixed);
    vt_batch_close(b);
    CU_ASSERT(same_generation(&alone, &mixed[0]));
    /* and B, its prompt computed in chunks beside A's decodes, as B alone */
    static generated b_alone;
    memset(&b_alone, 0, sizeof b_alone);
    b = open_onednn(2, 256);
    CU_ASSERT_FATAL(b != NULL);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &rb, &ib, err, sizeof err), VT_OK);
    run_to_end(b, &ib, 1, true, &b_alone);
    vt_batch_close(b);
    CU_ASSERT(same_generation(&b_alone, &mixed[1]));
}

static void test_onednn_choices_and_preemption_equal_separate_requests(void) {
    if (!vt_test_onednn_expected()) return; /* it said why */
    int32_t p[20];
    for (int i = 0; i < 20; i++) p[i] = 40 + 3 * i;
    char err[512] = "";
    static generated separate[3], together[3];
    memset(separate, 0, sizeof separate);
    memset(together, 0, sizeof together);
    vt_batch_request r;
    for (int i = 0; i < 3; i++) {
        vt_batch *b = open_onednn(1, 256);
        CU_ASSERT_FATAL(b != NULL);
        uint64_t id;
        id_request(&r, p, 20, 30, 70 + (uint64_t)i);
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
        run_to_end(b, &id, 1, true, &separate[i]);
        vt_batch_close(b);
    }
    /* three choices on one sequence: choice 0 computes the prompt, the
     * others wait and compute it again with the first token each drew from
     * its logits */
    vt_batch *b = open_onednn(1, 256);
    CU_ASSERT_FATAL(b != NULL);
    uint64_t ids[3];
    id_request(&r, p, 20, 30, 70);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add_n(b, &r, 3, ids, err, sizeof err), VT_OK);
    run_to_end(b, ids, 3, true, together);
    vt_batch_close(b);
    for (int i = 0; i < 3; i++) CU_ASSERT(same_generation(&separate[i], &together[i]));
    /* two requests in a pool of 4 blocks of 16 that each grow to 3: the
     * younger is preempted and later computes its prompt and its generated
     * tokens again */
    b = open_onednn(2, 64);
    CU_ASSERT_FATAL(b != NULL);
    id_request(&r, p, 20, 30, 70);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[0], err, sizeof err), VT_OK);
    id_request(&r, p, 20, 30, 71);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[1], err, sizeof err), VT_OK);
    memset(together, 0, sizeof together);
    run_to_end(b, ids, 2, true, together);
    vt_batch_stats st;
    vt_batch_get_stats(b, &st);
    CU_ASSERT(st.n_preemptions > 0);
    vt_batch_close(b);
    for (int i = 0; i < 2; i++) CU_ASSERT(same_generation(&separate[i], &together[i]));
}

/* Whether s[0..n) is well-formed UTF-8 on its own (an independent check,
 * not the library's). */
static bool whole_characters(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        const size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (len == 0 || i + len > n) return false;
        for (size_t k = 1; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return false;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) || (c == 0xF0 && s[i + 1] < 0x90) ||
            (c == 0xF4 && s[i + 1] > 0x8F))
            return false;
        i += len;
    }
    return true;
}

/* text_offset indexes the text vt_batch_read returns: at a hot
 * temperature the trained model's 512-token vocabulary (half of it single
 * bytes) yields bytes that are no character, which the text holds as U+FFFD
 * (3 bytes). Wherever a token's bytes are whole characters the text at its
 * offset is those bytes, including after a U+FFFD (where offsets counted
 * from the tokens' own bytes went wrong); every offset is within the text
 * and none goes back. */
static void test_text_offsets_index_the_text(void) {
    vt_batch *b = open_batch("reference", 4);
    CU_ASSERT_FATAL(b != NULL);
    char err[512] = "";
    int checked_after_replacement = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        vt_batch_request r;
        sampled_request(&r, "Once upon a time", seed, 40);
        r.temperature = 3.0f;
        r.logprobs = true;
        uint64_t id;
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
        char text[4096];
        size_t n_text = 0, n_tok = 0;
        int32_t tokens[64];
        int64_t offsets[64];
        for (bool done = false; !done;) {
            int32_t n_seqs = -1;
            CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
            vt_batch_output o;
            CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, id, &o, err, sizeof err), VT_OK);
            vt_batch_logprobs lp = {.struct_size = sizeof lp};
            CU_ASSERT_EQUAL_FATAL(vt_batch_read_logprobs(b, id, &lp, err, sizeof err), VT_OK);
            CU_ASSERT_PTR_NOT_NULL_FATAL(lp.text_offset);
            CU_ASSERT_FATAL(n_text + o.n_text <= sizeof text && n_tok + o.n_tokens <= 64);
            memcpy(text + n_text, o.text, o.n_text);
            n_text += o.n_text;
            for (size_t t = 0; t < o.n_tokens; t++, n_tok++) tokens[n_tok] = o.tokens[t], offsets[n_tok] = lp.text_offset[t];
            done = o.finish != VT_FINISH_NONE;
        }
        for (size_t t = 0; t < n_tok; t++) {
            CU_ASSERT(offsets[t] >= (t ? offsets[t - 1] : 0) && offsets[t] <= (int64_t)n_text);
            char bytes[64];
            const int32_t n = vt_batch_token_bytes(b, tokens[t], bytes, sizeof bytes);
            if (n <= 0 || !whole_characters((const unsigned char *)bytes, (size_t)n)) continue;
            CU_ASSERT_FATAL(offsets[t] + n <= (int64_t)n_text);
            CU_ASSERT_EQUAL(memcmp(text + offsets[t], bytes, (size_t)n), 0);
            if (memmem(text, (size_t)offsets[t], "\xEF\xBF\xBD", 3)) checked_after_replacement++;
        }
        CU_ASSERT_EQUAL_FATAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
    }
    CU_ASSERT(checked_after_replacement > 0); /* the case offsets from raw bytes got wrong was met */
    vt_batch_close(b);
}

/* A request of 3 choices whose first is cancelled before it starts (another
 * request holds the one sequence): the others start on their own, and the
 * prefix cache's counts still hold its prompt once. */
static void test_prompt_counted_once_when_its_first_choice_never_starts(void) {
    const char *const settings[] = {"runtime.backend=reference", "runtime.threads=1", "runtime.max_seqs=1",
                                    "kv_cache.ctx_size=256", NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_batch_open(model_path, &o, &b, err, sizeof err), VT_OK);
    static const char first[] = "The little dog", second[] = "Once upon a time there was";
    vt_batch_request r;
    sampled_request(&r, first, 3, 6);
    uint64_t busy, ids[3];
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &busy, err, sizeof err), VT_OK);
    int32_t n_seqs = 0;
    CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK); /* busy holds the sequence */
    sampled_request(&r, second, 5, 4);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add_n(b, &r, 3, ids, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_batch_cancel(b, ids[0], err, sizeof err), VT_OK); /* before it ever started */
    generated got[3];
    memset(got, 0, sizeof got);
    const uint64_t rest[3] = {busy, ids[1], ids[2]};
    run_to_end(b, rest, 3, false, got);
    CU_ASSERT(got[1].n > 0 && got[2].n > 0);
    int32_t *tokens = NULL;
    const size_t n_first = tokenize(b, first, &tokens);
    free(tokens);
    const size_t n_second = tokenize(b, second, &tokens);
    free(tokens);
    vt_batch_cache_stats cs = {.struct_size = sizeof cs};
    vt_batch_get_cache_stats(b, &cs);
    CU_ASSERT_EQUAL(cs.query_tokens, (int64_t)(n_first + n_second));
    vt_batch_close(b);
}

/* A request of 4 choices on 2 sequences: its first two run, the other two
 * queue. Counted as requests (what vt serve publishes and limits by): one
 * running, none waiting; and another request added with max_waiting 1 is
 * taken, not refused for the first one's queued choices. */
static void test_queued_choices_count_as_their_request(void) {
    char be[] = "runtime.backend=reference";
    const char *const settings[] = {be, "runtime.threads=1", "runtime.max_seqs=2", "runtime.max_waiting=1",
                                    "kv_cache.ctx_size=256", NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_batch_open(model_path, &o, &b, err, sizeof err), VT_OK);
    vt_batch_request r;
    sampled_request(&r, "Once upon a time", 7, 8);
    uint64_t ids[4], other;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add_n(b, &r, 4, ids, err, sizeof err), VT_OK);
    vt_batch_stats st;
    vt_batch_get_stats(b, &st);
    CU_ASSERT_EQUAL(st.n_waiting, 1);
    CU_ASSERT_EQUAL(vt_batch_n_admit_next(b), 1);
    int32_t n_seqs = 0;
    CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK); /* the prompt; two choices fork */
    CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(n_seqs, 2);
    vt_batch_get_stats(b, &st);
    CU_ASSERT_EQUAL(st.n_running, 1);
    CU_ASSERT_EQUAL(st.n_waiting, 0);
    sampled_request(&r, "The dog", 9, 4);
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &other, err, sizeof err), VT_OK);
    if (err[0]) printf("\n  %s\n", err);
    vt_batch_get_stats(b, &st);
    CU_ASSERT_EQUAL(st.n_waiting, 1);
    /* a third is refused: one request waits, max_waiting 1 */
    uint64_t third;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &third, err, sizeof err), VT_ERR_UNSUPPORTED);
    generated got[5];
    memset(got, 0, sizeof got);
    const uint64_t all[5] = {ids[0], ids[1], ids[2], ids[3], other};
    run_to_end(b, all, 5, false, got);
    vt_batch_get_stats(b, &st);
    CU_ASSERT_EQUAL(st.n_running, 0);
    CU_ASSERT_EQUAL(st.n_waiting, 0);
    vt_batch_close(b);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"logprobs are the log-softmax of the logits", test_logprobs_are_the_log_softmax_of_the_logits},
        {"logprobs refusals", test_logprobs_refusals},
        {"choices equal separate requests (reference)", test_choices_equal_separate_requests_reference},
        {"choices equal separate requests (simd)", test_choices_equal_separate_requests_simd},
        {"greedy choices are identical", test_greedy_choices_are_identical},
        {"choices without enough sequences", test_choices_without_enough_sequences},
        {"cancel every choice", test_cancel_every_choice},
        {"seeds wrap; past the largest is refused", test_seeds_wrap_and_past_the_largest_are_refused},
        {"text offsets index the text", test_text_offsets_index_the_text},
        {"queued choices count as their request", test_queued_choices_count_as_their_request},
        {"a prompt is counted once when its first choice never starts",
         test_prompt_counted_once_when_its_first_choice_never_starts},
        {"onednn: steps shared do not change a sequence", test_onednn_steps_shared_do_not_change_a_sequence},
        {"onednn: choices and preemption equal separate requests",
         test_onednn_choices_and_preemption_equal_separate_requests},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("batch choices", suite_init, NULL, tests);
    return vt_test_run();
}
