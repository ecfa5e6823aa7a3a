/* test_sampler.c — greedy, top-k, top-p, min-p, temperature and the seeded
 * random stream of core/engine/sampler.c. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "util.h"

/* Statistical checks draw N times and compare each token's frequency with the
 * renormalized probability p it should have. The count is binomial, so the
 * frequency has standard deviation sqrt(p(1-p)/N); we allow 5 of them. With the
 * fixed seeds used here the outcome is deterministic, and for an honest sampler
 * a 5-sigma miss on any of our ~20 checked frequencies has probability < 1e-5. */
#define N_DRAWS 40000
#define SIGMAS 5.0

static vt_sampler *make(float temp, int32_t top_k, float top_p, float min_p, uint64_t seed) {
    vt_sampler_params p = {.temp = temp, .top_k = top_k, .top_p = top_p, .min_p = min_p, .seed = seed};
    vt_sampler *s = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_sampler_create(&p, &s, &err), VT_OK);
    return s;
}

/* logits[i] = log(probs[i]) so the untempered softmax is exactly probs. */
static void logits_from_probs(const double *probs, float *logits, int n) {
    for (int i = 0; i < n; i++) logits[i] = (float)log(probs[i]);
}

/* Draw N_DRAWS times and check every id's frequency against expected[] (which
 * must sum to 1); ids with expected 0 must never be drawn. */
static void check_frequencies(vt_sampler *s, const float *logits, int n, const double *expected) {
    int counts[64] = {0};
    CU_ASSERT_FATAL(n <= 64);
    for (int d = 0; d < N_DRAWS; d++) {
        int32_t id = vt_sampler_sample(s, logits, n);
        CU_ASSERT_FATAL(id >= 0 && id < n);
        counts[id]++;
    }
    for (int i = 0; i < n; i++) {
        double f = (double)counts[i] / N_DRAWS, p = expected[i];
        if (p == 0.0) {
            CU_ASSERT_EQUAL(counts[i], 0);
            continue;
        }
        double tol = SIGMAS * sqrt(p * (1.0 - p) / N_DRAWS);
        if (fabs(f - p) > tol) printf("\n  id %d: frequency %.4f, expected %.4f +- %.4f\n", i, f, p, tol);
        CU_ASSERT(fabs(f - p) <= tol);
    }
}

/* The distribution reported by vt_sampler_probs must equal expected[] (float
 * rounding of a renormalization: 1e-6 absolute is ample). */
static void check_probs(vt_sampler *s, const float *logits, int n, const double *expected) {
    float probs[64];
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_sampler_probs(s, logits, n, probs, &err), VT_OK);
    for (int i = 0; i < n; i++) VT_ASSERT_NEAR(probs[i], expected[i], 1e-6);
}

static uint64_t test_rng = 88172645463325252ull;
static float test_random_logit(void) {
    test_rng ^= test_rng << 13;
    test_rng ^= test_rng >> 7;
    test_rng ^= test_rng << 17;
    /* coarse values in [-4, 4) so ties happen often */
    return (float)((int)(test_rng % 16) - 8) * 0.5f;
}

static void test_greedy_picks_argmax_lowest_id_on_ties(void) {
    vt_sampler *s = make(0.0f, 0, 1.0f, 0.0f, 1);
    float logits[] = {1.0f, 3.0f, -2.0f, 3.0f, 2.5f};
    CU_ASSERT_EQUAL(vt_sampler_sample(s, logits, 5), 1);
    float all_equal[] = {0.5f, 0.5f, 0.5f};
    CU_ASSERT_EQUAL(vt_sampler_sample(s, all_equal, 3), 0);
    float last[] = {-1.0f, -1.0f, 7.0f};
    CU_ASSERT_EQUAL(vt_sampler_sample(s, last, 3), 2);
    /* NaN is never the argmax */
    float with_nan[] = {NAN, 1.0f, 2.0f, NAN};
    CU_ASSERT_EQUAL(vt_sampler_sample(s, with_nan, 4), 2);
    CU_ASSERT_EQUAL(vt_argmax(logits, 5), 1);
    CU_ASSERT_EQUAL(vt_sampler_sample(s, logits, 0), -1);
    vt_sampler_free(s);
}

/* vt_argmax over more ids than its lanes: the first id of the largest
 * non-NaN value, as one plain pass finds it, with NaN, ties, -0 / +0 and
 * infinities placed around the lane boundaries. */
static int32_t plain_argmax(const float *x, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    return best < 0 ? 0 : best;
}

static void test_argmax_long_rows(void) {
    enum { N = 1003 };
    static float x[N];
    for (int trial = 0; trial < 400; trial++) {
        for (int i = 0; i < N; i++) x[i] = test_random_logit();
        switch (trial % 6) {
        case 0: x[trial % N] = NAN; x[(trial * 7) % N] = 9.0f; break;
        case 1: for (int i = 0; i < N; i++) x[i] = i % 3 ? NAN : -INFINITY; break;
        case 2: for (int i = 0; i < N; i++) x[i] = NAN; break;
        case 3: for (int i = 0; i < N; i++) x[i] = i % 2 ? 0.0f : -0.0f; x[N - 1] = NAN; break;
        case 4: x[N - 1] = INFINITY; x[N - 2] = INFINITY; break;
        default: x[(trial * 13) % N] = 5.0f; x[(trial * 5) % N] = 5.0f; break; /* a tie at the top */
        }
        CU_ASSERT_EQUAL(vt_argmax(x, N), plain_argmax(x, N));
        CU_ASSERT_EQUAL(vt_argmax(x, 8 + trial % 17), plain_argmax(x, 8 + trial % 17));
    }
}

static void test_top_k_1_equals_greedy(void) {
    vt_sampler *s = make(1.0f, 1, 1.0f, 0.0f, 42);
    vt_sampler *g = make(0.0f, 0, 1.0f, 0.0f, 42);
    float logits[50];
    for (int trial = 0; trial < 200; trial++) {
        for (int i = 0; i < 50; i++) logits[i] = test_random_logit();
        int32_t want = vt_sampler_sample(g, logits, 50);
        CU_ASSERT_EQUAL(vt_sampler_sample(s, logits, 50), want);
    }
    vt_sampler_free(s);
    vt_sampler_free(g);
}

static void test_fixed_seed_is_reproducible(void) {
    float logits[32];
    for (int i = 0; i < 32; i++) logits[i] = (float)(i % 7) * 0.3f;
    vt_sampler *a = make(1.0f, 0, 1.0f, 0.0f, 1234);
    vt_sampler *b = make(1.0f, 0, 1.0f, 0.0f, 1234);
    vt_sampler *c = make(1.0f, 0, 1.0f, 0.0f, 1235);
    int32_t first[500];
    int same_ab = 0, same_ac = 0;
    for (int d = 0; d < 500; d++) {
        first[d] = vt_sampler_sample(a, logits, 32);
        same_ab += first[d] == vt_sampler_sample(b, logits, 32);
        same_ac += first[d] == vt_sampler_sample(c, logits, 32);
    }
    CU_ASSERT_EQUAL(same_ab, 500);
    /* another seed is another stream: with ~10 likely ids agreement is ~10%, far from 500 */
    CU_ASSERT(same_ac < 250);
    /* reseeding restarts the stream */
    vt_sampler_reseed(a, 1234);
    int same_again = 0;
    for (int d = 0; d < 500; d++) same_again += first[d] == vt_sampler_sample(a, logits, 32);
    CU_ASSERT_EQUAL(same_again, 500);
    vt_sampler_free(a);
    vt_sampler_free(b);
    vt_sampler_free(c);
}

static void test_temperature_to_zero_tends_to_greedy(void) {
    /* Gap between the best and second logit is 0.5; at temp 1e-3 the runner-up
     * has relative weight exp(-500): it can never be drawn. */
    float logits[] = {0.0f, 1.5f, 2.0f, 1.0f, -3.0f};
    vt_sampler *s = make(1e-3f, 0, 1.0f, 0.0f, 7);
    for (int d = 0; d < 2000; d++) CU_ASSERT_EQUAL(vt_sampler_sample(s, logits, 5), 2);
    double expected[] = {0, 0, 1, 0, 0};
    check_probs(s, logits, 5, expected);
    vt_sampler_free(s);

    /* And temperature does what it says at moderate values: p ~ exp(l / T). */
    vt_sampler *t = make(2.0f, 0, 1.0f, 0.0f, 8);
    double w[5], z = 0.0, probs[5];
    for (int i = 0; i < 5; i++) z += w[i] = exp(logits[i] / 2.0);
    for (int i = 0; i < 5; i++) probs[i] = w[i] / z;
    check_probs(t, logits, 5, probs);
    check_frequencies(t, logits, 5, probs);
    vt_sampler_free(t);
}

static void test_top_p_keeps_smallest_prefix(void) {
    const double p[] = {0.5, 0.25, 0.15, 0.1};
    float logits[4];
    logits_from_probs(p, logits, 4);
    /* cumulative 0.5, 0.75: the prefix {0, 1} is the first to reach 0.7 */
    vt_sampler *s = make(1.0f, 0, 0.7f, 0.0f, 99);
    const double expected[] = {0.5 / 0.75, 0.25 / 0.75, 0, 0};
    check_probs(s, logits, 4, expected);
    check_frequencies(s, logits, 4, expected);
    vt_sampler_free(s);

    /* top_p = 0.5 is reached by the first token alone */
    vt_sampler *one = make(1.0f, 0, 0.5f, 0.0f, 99);
    const double only_first[] = {1, 0, 0, 0};
    check_probs(one, logits, 4, only_first);
    vt_sampler_free(one);

    /* top_p = 0 (OpenAI's range is [0, 1]) keeps the most likely token only,
     * at any temperature: the first token of the order reaches any mass >= 0 */
    vt_sampler *zero = make(5.0f, 0, 0.0f, 0.0f, 99);
    check_probs(zero, logits, 4, only_first);
    check_frequencies(zero, logits, 4, only_first);
    vt_sampler_free(zero);
}

static void test_min_p_drops_tokens_below_fraction_of_max(void) {
    const double p[] = {0.06, 0.4, 0.3, 0.2, 0.04};
    float logits[5];
    logits_from_probs(p, logits, 5);
    /* min_p 0.2 -> threshold 0.08: ids 0 and 4 go */
    vt_sampler *s = make(1.0f, 0, 1.0f, 0.2f, 5);
    const double expected[] = {0, 0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0};
    check_probs(s, logits, 5, expected);
    check_frequencies(s, logits, 5, expected);
    vt_sampler_free(s);
}

static void test_top_k_then_top_p_normalizes_over_top_k(void) {
    const double p[] = {0.4, 0.3, 0.2, 0.1};
    float logits[4];
    logits_from_probs(p, logits, 4);
    /* top-k 2 renormalizes to {4/7, 3/7}; 4/7 >= 0.5 so top-p keeps only id 0.
     * (Over the full distribution 0.4 < 0.5 would have kept two.) */
    vt_sampler *s = make(1.0f, 2, 0.5f, 0.0f, 3);
    const double expected[] = {1, 0, 0, 0};
    check_probs(s, logits, 4, expected);
    vt_sampler_free(s);

    vt_sampler *k2 = make(1.0f, 2, 1.0f, 0.0f, 3);
    const double top2[] = {4.0 / 7.0, 3.0 / 7.0, 0, 0};
    check_probs(k2, logits, 4, top2);
    check_frequencies(k2, logits, 4, top2);
    vt_sampler_free(k2);
}

static void test_top_k_breaks_ties_by_lowest_id(void) {
    float logits[] = {1.0f, 2.0f, 2.0f, 2.0f, 0.0f};
    vt_sampler *s = make(1.0f, 2, 1.0f, 0.0f, 11);
    const double expected[] = {0, 0.5, 0.5, 0, 0};
    check_probs(s, logits, 5, expected);
    check_frequencies(s, logits, 5, expected);
    vt_sampler_free(s);
}

static void test_nan_and_bad_params(void) {
    float logits[] = {NAN, 0.0f, NAN};
    vt_sampler *s = make(1.0f, 0, 1.0f, 0.0f, 1);
    for (int d = 0; d < 100; d++) CU_ASSERT_EQUAL(vt_sampler_sample(s, logits, 3), 1);
    vt_sampler_free(s);

    vt_sampler_params bad = vt_sampler_default_params();
    bad.min_p = 1.5f;
    vt_sampler *none = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL(vt_sampler_create(&bad, &none, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(none);
    CU_ASSERT(strstr(err.msg, "min_p") != NULL);
}

/* An obviously correct reference for the whole chain on a large vocab: sort
 * everything, cut top-k, top-p (normalized over the top-k set), min-p, then
 * softmax at temperature T. The sampler's shortcuts must agree with it. */
typedef struct ref_cand {
    float logit;
    int32_t id;
} ref_cand;

static int ref_compare(const void *pa, const void *pb) {
    const ref_cand *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static void reference_probs(const float *logits, int n, float temp, int top_k, float top_p, float min_p,
                            double *probs) {
    ref_cand *c = malloc((size_t)n * sizeof *c);
    for (int i = 0; i < n; i++) c[i] = (ref_cand){logits[i], i};
    qsort(c, (size_t)n, sizeof *c, ref_compare);
    int m = top_k > 0 && top_k < n ? top_k : n;
    double max = c[0].logit, z = 0.0;
    for (int i = 0; i < m; i++) z += exp(c[i].logit - max);
    if (top_p < 1.0f) {
        double cum = 0.0;
        for (int i = 0; i < m; i++) {
            cum += exp(c[i].logit - max) / z;
            if (cum >= top_p) {
                m = i + 1;
                break;
            }
        }
    }
    if (min_p > 0.0f) {
        int kept = 0;
        while (kept < m && c[kept].logit >= (float)max + logf(min_p)) kept++;
        m = kept;
    }
    double total = 0.0;
    for (int i = 0; i < n; i++) probs[i] = 0.0;
    for (int i = 0; i < m; i++) total += probs[c[i].id] = exp((c[i].logit - max) / temp);
    for (int i = 0; i < m; i++) probs[c[i].id] /= total;
    free(c);
}

static void test_large_vocab_matches_reference_chain(void) {
    enum { N = 20000 };
    static float logits[N], probs[N];
    static double want[N];
    static const struct {
        float temp;
        int top_k;
        float top_p, min_p;
    } cases[] = {{0.8f, 0, 0.95f, 0.0f}, {1.0f, 0, 0.5f, 0.0f}, {1.3f, 40, 0.9f, 0.05f}, {0.7f, 0, 1.0f, 0.1f},
                 {1.0f, 0, 0.99f, 0.0f}};
    uint64_t x = 12345;
    for (int shape = 0; shape < 2; shape++) {
        /* shape 0: peaked like an LM (a few high logits over a long tail); shape 1: flat */
        for (int i = 0; i < N; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            double u = (double)(x >> 11) * 0x1.0p-53;
            logits[i] = shape == 0 ? (float)(-4.0 * log(1.0 / (u + 1e-12))) : (float)(u * 4.0 - 2.0);
        }
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            vt_sampler *s = make(cases[k].temp, cases[k].top_k, cases[k].top_p, cases[k].min_p, 1);
            vt_error err = {0};
            CU_ASSERT_EQUAL_FATAL(vt_sampler_probs(s, logits, N, probs, &err), VT_OK);
            reference_probs(logits, N, cases[k].temp, cases[k].top_k, cases[k].top_p, cases[k].min_p, want);
            int support_diff = 0;
            double max_err = 0.0;
            for (int i = 0; i < N; i++) {
                support_diff += (probs[i] > 0.0f) != (want[i] > 0.0);
                if (fabs(probs[i] - want[i]) > max_err) max_err = fabs(probs[i] - want[i]);
            }
            CU_ASSERT_EQUAL(support_diff, 0);
            /* float output of a double renormalization over <= 20000 terms: 1e-6 is ample */
            CU_ASSERT(max_err < 1e-6);
            vt_sampler_free(s);
        }
    }
}

/* OpenAI's penalties: logit -= presence * (count > 0) + frequency * count
 * over the history, greedy included; the caller's logits stay as they were;
 * sampling sees the penalized logits (checked through a top-k 1 draw). */
static void test_penalties_lower_repeated_tokens(void) {
    const float logits[4] = {1.0f, 0.9f, 0.5f, 0.45f};
    const int32_t history[] = {0, 0, 2, 0};
    vt_error err = {0};
    vt_sampler *s = make(0.0f, 0, 1.0f, 0.0f, 0);
    CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, history, 4), 0); /* no penalties set: off */
    /* frequency 0.04: id 0 at 1 - 3*0.04 = 0.88 < 0.9. */
    CU_ASSERT_EQUAL_FATAL(vt_sampler_set_penalties(s, 0.0f, 0.04f, 4, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, history, 4), 1);
    CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, history, 1), 0); /* one 0: 0.96 */
    CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, NULL, 0), 0);
    CU_ASSERT_EQUAL(logits[0], 1.0f);
    /* presence 0.15 counts each token once: id 0 at 0.85 < 0.9. */
    CU_ASSERT_EQUAL_FATAL(vt_sampler_set_penalties(s, 0.15f, 0.0f, 4, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, history, 4), 1);
    CU_ASSERT_EQUAL_FATAL(vt_sampler_set_penalties(s, 0.05f, 0.0f, 4, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, history, 4), 0); /* 0.95 */
    /* A negative value favours repeats: id 2 seen twice is at 0.5 + 1.0. */
    CU_ASSERT_EQUAL_FATAL(vt_sampler_set_penalties(s, 0.0f, -0.5f, 4, &err), VT_OK);
    const int32_t twice[] = {2, 2};
    CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, twice, 2), 2);
    vt_sampler_free(s);
    /* A filtered draw sees the penalized logits too. */
    s = make(1.0f, 1, 1.0f, 0.0f, 7);
    CU_ASSERT_EQUAL_FATAL(vt_sampler_set_penalties(s, 0.0f, 0.04f, 4, &err), VT_OK);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(vt_sampler_sample_after(s, logits, 4, history, 4), 1);
    CU_ASSERT_EQUAL(vt_sampler_set_penalties(s, NAN, 0.0f, 4, &err), VT_ERR_INVALID);
    vt_sampler_free(s);
}

/* The draw over a vocabulary too large for qsort (a radix sort orders it),
 * and a top-k cut of it (a heap fed from the logits): the same ids as the
 * documented procedure, done plainly here — rank by logit, ties to the lower
 * id; keep the first k; weights exp((l - max) / T) summed in that order;
 * u = uniform * total from the seeded xorshift64* stream; the first id
 * whose running sum passes u. Coarse logits give long runs of ties, and
 * -0 / +0 and -inf are in the mix. */
static uint64_t ref_state;
static void ref_seed(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    ref_state = x ? x : 0x9E3779B97F4A7C15ull;
}
static double ref_uniform(void) {
    ref_state ^= ref_state >> 12;
    ref_state ^= ref_state << 25;
    ref_state ^= ref_state >> 27;
    return (double)((ref_state * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-53;
}

static void test_large_vocab_draws_match_plain_procedure(void) {
    enum { N = 151936, DRAWS = 100 };
    static float logits[N];
    static ref_cand sorted[N];
    static double w[N];
    for (int i = 0; i < N; i++) logits[i] = test_random_logit() * 2.0f; /* 16 values: every rank a long tie */
    logits[5] = -0.0f;
    logits[6] = 0.0f;
    logits[7] = -INFINITY;
    logits[N - 1] = 7.5f; /* alone at the top */
    for (int i = 0; i < N; i++) sorted[i] = (ref_cand){logits[i] == 0.0f ? 0.0f : logits[i], i};
    qsort(sorted, N, sizeof *sorted, ref_compare);
    /* top-k 0 sorts every id; 40 and 5000 cut inside a run of ties (the lower ids stay) */
    static const struct {
        float temp;
        int32_t top_k;
    } cases[] = {{1.0f, 0}, {0.6f, 0}, {2.5f, 0}, {1.0f, 40}, {0.8f, 5000}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        vt_sampler *s = make(cases[t].temp, cases[t].top_k, 1.0f, 0.0f, 99 + t);
        ref_seed(99 + t);
        const int kept = cases[t].top_k ? cases[t].top_k : N;
        double total = 0.0;
        for (int i = 0; i < kept; i++)
            total += w[i] = exp(((double)sorted[i].logit - sorted[0].logit) / cases[t].temp);
        int mismatches = 0;
        for (int d = 0; d < DRAWS; d++) {
            double u = ref_uniform() * total, cum = 0.0;
            int32_t want = sorted[kept - 1].id;
            for (int i = 0; i < kept; i++)
                if (u < (cum += w[i])) {
                    want = sorted[i].id;
                    break;
                }
            mismatches += vt_sampler_sample(s, logits, N) != want;
        }
        CU_ASSERT_EQUAL(mismatches, 0);
        vt_sampler_free(s);
    }
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"greedy picks the argmax, lowest id on ties", test_greedy_picks_argmax_lowest_id_on_ties},
        {"argmax over long rows: NaN, ties, signed zeros", test_argmax_long_rows},
        {"top-k 1 equals greedy", test_top_k_1_equals_greedy},
        {"a fixed seed reproduces the stream", test_fixed_seed_is_reproducible},
        {"temperature -> 0 tends to greedy; T scales logits", test_temperature_to_zero_tends_to_greedy},
        {"top-p keeps the smallest prefix reaching p", test_top_p_keeps_smallest_prefix},
        {"min-p drops tokens below min_p * p_max", test_min_p_drops_tokens_below_fraction_of_max},
        {"top-p normalizes over the top-k set", test_top_k_then_top_p_normalizes_over_top_k},
        {"top-k breaks ties by lowest id", test_top_k_breaks_ties_by_lowest_id},
        {"NaN logits and bad parameters", test_nan_and_bad_params},
        {"penalties lower repeated tokens", test_penalties_lower_repeated_tokens},
        {"large vocab: filters agree with a plain reference chain", test_large_vocab_matches_reference_chain},
        {"large vocab: temperature and top-k draws match the plain procedure", test_large_vocab_draws_match_plain_procedure},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("sampler", NULL, NULL, tests);
    return vt_test_run();
}
