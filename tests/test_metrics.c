/* test_metrics.c — the comparison and perplexity metrics of core/tools/metrics.c on
 * inputs whose answers are known in closed form.
 *
 * Tolerances: every quantity is computed in double from float logits that are
 * exact in float (small integers, or logs whose rounding we account for), so
 * results agree with the closed forms to ~1e-12 unless a float log enters;
 * there we allow 1e-6 (float's relative precision is 6e-8 and the logs here
 * are O(1)). */
#include <math.h>
#include <stdlib.h>

#include "metrics.h"
#include "util.h"

static void test_kl_identical_is_zero(void) {
    float row[7] = {0.5f, -3.0f, 2.25f, 7.0f, 7.0f, -20.0f, 1.0f};
    CU_ASSERT_EQUAL(vt_kl_divergence(row, row, 7), 0.0);
    /* softmax is shift-invariant, so a row moved by a constant is the same distribution */
    float shifted[7];
    for (int i = 0; i < 7; i++) shifted[i] = row[i] + 4.0f;
    VT_ASSERT_NEAR(vt_kl_divergence(row, shifted, 7), 0.0, 1e-12);
}

static void test_kl_two_tokens_closed_form(void) {
    /* P = (1/2, 1/2), Q = (1/4, 3/4): KL(P||Q) = 1/2 ln 2 + 1/2 ln(2/3) */
    float p[2] = {0.0f, 0.0f};
    float q[2] = {0.0f, (float)log(3.0)};
    double want = 0.5 * log(2.0) + 0.5 * log(2.0 / 3.0);
    VT_ASSERT_NEAR(vt_kl_divergence(p, q, 2), want, 1e-6);
    /* and the other direction differs (KL is not symmetric):
     * KL(Q||P) = 1/4 ln(1/2) + 3/4 ln(3/2) */
    double back = 0.25 * log(0.5) + 0.75 * log(1.5);
    VT_ASSERT_NEAR(vt_kl_divergence(q, p, 2), back, 1e-6);
    CU_ASSERT(fabs(want - back) > 1e-3);
}

static void test_kl_ignores_impossible_reference_tokens(void) {
    /* P puts no mass on token 2 (-inf logit): Q's mass there does not count
     * beyond renormalisation. P = (1/2, 1/2, 0), Q = (1/3, 1/3, 1/3):
     * KL = 2 * 1/2 ln((1/2)/(1/3)) = ln 1.5 */
    float p[3] = {1.0f, 1.0f, -INFINITY};
    float q[3] = {5.0f, 5.0f, 5.0f};
    VT_ASSERT_NEAR(vt_kl_divergence(p, q, 3), log(1.5), 1e-12);
}

static void test_log_sum_exp_is_stable(void) {
    float big[2] = {1000.0f, 1000.0f}; /* exp(1000) overflows a double */
    VT_ASSERT_NEAR(vt_log_sum_exp(big, 2), 1000.0 + log(2.0), 1e-9);
    float small[3] = {-1000.0f, -1000.0f, -1000.0f};
    VT_ASSERT_NEAR(vt_log_sum_exp(small, 3), -1000.0 + log(3.0), 1e-9);
}

static void test_nll_closed_form(void) {
    float row[2] = {0.0f, (float)log(3.0)}; /* P = (1/4, 3/4) */
    VT_ASSERT_NEAR(vt_nll(row, 2, 1), -log(0.75), 1e-6);
    VT_ASSERT_NEAR(vt_nll(row, 2, 0), -log(0.25), 1e-6);
}

/* A chunk of n_ctx rows over V tokens where every row is uniform: each scored
 * token has probability 1/V, so the perplexity is exactly V. */
static void test_ppl_of_uniform_model_is_vocab_size(void) {
    const int64_t V = 50, n_ctx = 16;
    float *logits = calloc((size_t)(V * n_ctx), sizeof *logits);
    CU_ASSERT_FATAL(logits != NULL);
    int32_t tokens[16];
    for (int i = 0; i < 16; i++) tokens[i] = (i * 7) % (int)V;
    vt_ppl p;
    vt_ppl_init(&p);
    vt_ppl_add_chunk(&p, logits, V, tokens, n_ctx);
    vt_ppl_add_chunk(&p, logits, V, tokens, n_ctx);
    VT_ASSERT_NEAR(vt_ppl_value(&p), (double)V, 1e-9);
    CU_ASSERT_EQUAL(p.n_scored, 2 * (n_ctx - 1 - n_ctx / 2));
    free(logits);
}

/* Only the second half of a chunk is scored: rows before n_ctx/2 that would
 * give a terrible score must not count. Rows from n_ctx/2 on give the next
 * token probability 1/2 (logit ln(V-1) against V-1 zeros), so ppl = 2. */
static void test_ppl_scores_second_half_only(void) {
    const int64_t V = 9, n_ctx = 10;
    float logits[9 * 10];
    int32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1};
    for (int64_t j = 0; j < n_ctx; j++) {
        for (int64_t v = 0; v < V; v++) logits[j * V + v] = 0.0f;
        if (j < vt_ppl_first_scored(n_ctx)) {
            logits[j * V + (tokens[j + 1] + 1) % V] = 50.0f; /* almost all mass on a wrong token */
        } else if (j + 1 < n_ctx) {
            logits[j * V + tokens[j + 1]] = (float)log((double)(V - 1));
        }
    }
    vt_ppl p;
    vt_ppl_init(&p);
    vt_ppl_add_chunk(&p, logits, V, tokens, n_ctx);
    CU_ASSERT_EQUAL(vt_ppl_first_scored(n_ctx), 5);
    CU_ASSERT_EQUAL(p.n_scored, 4); /* rows 5, 6, 7, 8 */
    VT_ASSERT_NEAR(vt_ppl_value(&p), 2.0, 1e-6);
}

static void test_ppl_chunk_count_drops_the_tail(void) {
    CU_ASSERT_EQUAL(vt_ppl_n_chunks(1000, 256), 3);
    CU_ASSERT_EQUAL(vt_ppl_n_chunks(255, 256), 0);
    CU_ASSERT_EQUAL(vt_ppl_n_chunks(512, 256), 2);
    CU_ASSERT_EQUAL(vt_ppl_n_chunks(100, 1), 0);
    vt_ppl p;
    vt_ppl_init(&p);
    CU_ASSERT(isnan(vt_ppl_value(&p)));
}

static void test_logit_stats_by_hand(void) {
    vt_logit_stats s;
    vt_logit_stats_init(&s);
    float ref[3] = {1.0f, 2.0f, 3.0f};
    float got[3] = {1.0f, 2.5f, 2.0f}; /* |d| = 0, 0.5, 1; argmax 2 vs 1 */
    vt_logit_stats_add(&s, ref, got, 3);
    CU_ASSERT_EQUAL(s.max_abs_dlogit, 1.0);
    VT_ASSERT_NEAR(vt_logit_stats_mean_abs(&s), 0.5, 1e-12);
    CU_ASSERT_EQUAL(vt_logit_stats_top1(&s), 0.0);
    double kl1 = vt_kl_divergence(ref, got, 3);
    CU_ASSERT(kl1 > 0.0);
    vt_logit_stats_add(&s, ref, ref, 3); /* an identical row: agrees, KL 0 */
    CU_ASSERT_EQUAL(s.n_rows, 2);
    CU_ASSERT_EQUAL(s.max_abs_dlogit, 1.0);
    VT_ASSERT_NEAR(vt_logit_stats_mean_abs(&s), 1.5 / 6.0, 1e-12);
    VT_ASSERT_NEAR(vt_logit_stats_top1(&s), 0.5, 1e-12);
    VT_ASSERT_NEAR(s.kl_max, kl1, 1e-15);
    VT_ASSERT_NEAR(vt_logit_stats_kl_mean(&s), kl1 / 2.0, 1e-15);
}

static void test_logit_stats_report_nan(void) {
    /* a backend that produced NaN must not look perfect */
    vt_logit_stats s;
    vt_logit_stats_init(&s);
    float ref[2] = {0.0f, 1.0f};
    float got[2] = {NAN, 1.0f};
    vt_logit_stats_add(&s, ref, got, 2);
    CU_ASSERT(isnan(s.max_abs_dlogit));
    CU_ASSERT(isnan(s.kl_max));
}

static void test_common_prefix(void) {
    int32_t a[5] = {4, 8, 15, 16, 23}, b[5] = {4, 8, 15, 99, 23};
    CU_ASSERT_EQUAL(vt_common_prefix(a, b, 5), 3);
    CU_ASSERT_EQUAL(vt_common_prefix(a, a, 5), 5);
    CU_ASSERT_EQUAL(vt_common_prefix(a, b, 0), 0);
}

static void test_median_and_stdev(void) {
    double odd[3] = {3.0, 1.0, 2.0};
    CU_ASSERT_EQUAL(vt_median(odd, 3), 2.0);
    CU_ASSERT_EQUAL(odd[0], 3.0); /* the input is not reordered */
    double even[4] = {4.0, 1.0, 3.0, 2.0};
    CU_ASSERT_EQUAL(vt_median(even, 4), 2.5);
    CU_ASSERT(isnan(vt_median(even, 0)));
    /* sum of squared deviations from the mean 5 is 32: sample variance 32/7 */
    double x[8] = {2, 4, 4, 4, 5, 5, 7, 9};
    VT_ASSERT_NEAR(vt_stdev(x, 8), sqrt(32.0 / 7.0), 1e-12);
    CU_ASSERT_EQUAL(vt_stdev(x, 1), 0.0);
    double many[101];
    for (int i = 0; i < 101; i++) many[i] = (double)((i * 37) % 101); /* a permutation of 0..100 */
    CU_ASSERT_EQUAL(vt_median(many, 101), 50.0);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"KL of identical (and shifted) rows is 0", test_kl_identical_is_zero},
        {"KL of two-token distributions matches the closed form", test_kl_two_tokens_closed_form},
        {"KL skips tokens the reference rules out", test_kl_ignores_impossible_reference_tokens},
        {"log-sum-exp of huge and tiny logits", test_log_sum_exp_is_stable},
        {"NLL matches -log p", test_nll_closed_form},
        {"perplexity of a uniform model equals the vocab size", test_ppl_of_uniform_model_is_vocab_size},
        {"perplexity scores only the second half of each chunk", test_ppl_scores_second_half_only},
        {"perplexity chunk count drops the tail", test_ppl_chunk_count_drops_the_tail},
        {"logit stats: max/mean |dlogit|, top-1, KL by hand", test_logit_stats_by_hand},
        {"logit stats carry NaN through", test_logit_stats_report_nan},
        {"greedy agreement is the common prefix", test_common_prefix},
        {"median and sample stdev", test_median_and_stdev},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("metrics", NULL, NULL, tests);
    return vt_test_run();
}
