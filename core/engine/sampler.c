/* sampler.c — greedy / top-k / top-p / min-p / temperature sampling with a
 * fixed-seed xorshift64* stream. See sampler.h for the contract. */
#include "sampler.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct candidate {
    float logit;
    int32_t id;
} candidate;

struct vt_sampler {
    vt_sampler_params params;
    uint64_t rng_state; /* xorshift64* state, never 0 */
    candidate *cands;   /* [cap] scratch: the surviving candidates */
    candidate *spare;   /* [cap] scratch: the other buffer of the radix sort */
    double *weights;    /* [cap] scratch: their tempered, unnormalized weights */
    int32_t cap;
    float presence, frequency; /* penalties; both 0 = off */
    float *penalized;          /* [n_vocab] scratch: the logits after the penalties */
    int32_t *counts;           /* [n_vocab] scratch, all 0 between calls */
    int32_t n_vocab;
};

/* ---- random stream ---------------------------------------------------- */

/* splitmix64 spreads any seed (0 included) into a well-mixed non-zero state. */
static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t rng_next(vt_sampler *s) {
    uint64_t x = s->rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(vt_sampler *s) { return (double)(rng_next(s) >> 11) * 0x1.0p-53; }

void vt_sampler_reseed(vt_sampler *s, uint64_t seed) {
    uint64_t state = splitmix64(seed);
    s->rng_state = state ? state : 0x9E3779B97F4A7C15ull;
}

/* ---- construction ----------------------------------------------------- */

vt_sampler_params vt_sampler_default_params(void) {
    vt_sampler_params p = {.temp = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 0};
    return p;
}

vt_status vt_sampler_create(const vt_sampler_params *params, vt_sampler **out, vt_error *err) {
    if (!params || !out) return vt_fail(err, VT_ERR_INVALID, "sampler: NULL argument");
    if (isnan(params->temp) || isnan(params->top_p) || isnan(params->min_p))
        return vt_fail(err, VT_ERR_INVALID, "sampler: temp/top_p/min_p must not be NaN");
    if (params->min_p > 1.0f)
        return vt_fail(err, VT_ERR_INVALID, "sampler: min_p %g is above 1 (it is a fraction of p_max)",
                       (double)params->min_p);
    vt_sampler *s = calloc(1, sizeof *s);
    if (!s) return vt_fail(err, VT_ERR_NOMEM, "sampler: out of memory");
    s->params = *params;
    vt_sampler_reseed(s, params->seed);
    *out = s;
    return VT_OK;
}

void vt_sampler_free(vt_sampler *s) {
    if (!s) return;
    free(s->cands);
    free(s->spare);
    free(s->weights);
    free(s->penalized);
    free(s->counts);
    free(s);
}

static bool reserve(vt_sampler *s, int32_t n) {
    if (n <= s->cap) return true;
    candidate *c = realloc(s->cands, (size_t)n * sizeof *c);
    if (!c) return false;
    s->cands = c;
    candidate *spare = realloc(s->spare, (size_t)n * sizeof *spare);
    if (!spare) return false;
    s->spare = spare;
    double *w = realloc(s->weights, (size_t)n * sizeof *w);
    if (!w) return false;
    s->weights = w;
    s->cap = n;
    return true;
}

/* ---- filters ---------------------------------------------------------- */

/* a ranks before b: higher logit, or the same logit and a lower id. */
static bool ranks_before(candidate a, candidate b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); }

static int compare_rank(const void *pa, const void *pb) {
    candidate a = *(const candidate *)pa, b = *(const candidate *)pb;
    if (ranks_before(a, b)) return -1;
    if (ranks_before(b, a)) return 1;
    return 0;
}

/* Greedy decoding runs this once per sequence and token, between two steps,
 * over the whole vocabulary (151,936 logits on qwen), so it avoids
 * one long compare-and-branch chain: first the largest non-NaN value in
 * eight independent lanes (x > m is false for NaN, so NaN never wins), then
 * the first id holding it (== treats -0 and +0 as one value, so ties of
 * either go to the lowest id). */
int32_t vt_argmax(const float *logits, int32_t n) {
    if (!logits || n <= 0) return -1;
    enum { LANES = 8 };
    float lane_max[LANES];
    for (int j = 0; j < LANES; j++) lane_max[j] = -INFINITY;
    int32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) lane_max[j] = logits[i + j] > lane_max[j] ? logits[i + j] : lane_max[j];
    float best = lane_max[0];
    for (int j = 1; j < LANES; j++) best = lane_max[j] > best ? lane_max[j] : best;
    for (; i < n; i++) best = logits[i] > best ? logits[i] : best;
    for (i = 0; i < n; i++)
        if (logits[i] == best) return i;
    return 0; /* every logit NaN */
}

/* Min-heap on rank (the root is the worst kept candidate): keeps the k best of c[0..m). */
static void sift_down(candidate *h, int32_t k, int32_t i) {
    for (;;) {
        int32_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < k && ranks_before(h[worst], h[l])) worst = l;
        if (r < k && ranks_before(h[worst], h[r])) worst = r;
        if (worst == i) return;
        candidate t = h[i];
        h[i] = h[worst];
        h[worst] = t;
        i = worst;
    }
}

/* Candidates from this many on are sorted by radix rather than by qsort. */
#define RADIX_SORT_MIN 4096

/* A key whose ascending unsigned order is the descending order of the logit
 * (NaN excluded; -0 counts as +0, as == compares them). */
static uint32_t descending_key(float logit) {
    if (logit == 0.0f) logit = 0.0f;
    uint32_t u;
    memcpy(&u, &logit, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending order of the float */
    return ~u;
}

/* Sort c[0..m), given in ascending id order, by rank: an LSD radix sort on
 * the logit's key (four passes of 8 bits) is stable, so equal logits keep
 * their ascending ids, the order compare_rank defines. A temperature-only
 * draw sorts the whole vocabulary once per token: qsort took ~25 ms on
 * 151,936 ids, longer than the decode step it follows. */
static void radix_sort_by_rank(candidate *c, candidate *spare, int32_t m) {
    enum { BITS = 8, BUCKETS = 1 << BITS, PASSES = 4 };
    static_assert(BITS * PASSES >= 32, "the passes cover the key");
    uint32_t count[PASSES][BUCKETS];
    memset(count, 0, sizeof count);
    for (int32_t i = 0; i < m; i++) {
        const uint32_t k = descending_key(c[i].logit);
        for (int p = 0; p < PASSES; p++) count[p][(k >> (p * BITS)) & (BUCKETS - 1)]++;
    }
    candidate *src = c, *dst = spare;
    for (int p = 0; p < PASSES; p++) {
        uint32_t *offset = count[p];
        bool one_bucket = false; /* every key has the same digit: this pass would not move anything */
        uint32_t sum = 0;
        for (int b = 0; b < BUCKETS; b++) {
            one_bucket |= offset[b] == (uint32_t)m;
            const uint32_t n = offset[b];
            offset[b] = sum;
            sum += n;
        }
        if (one_bucket) continue;
        for (int32_t i = 0; i < m; i++) {
            const uint32_t k = descending_key(src[i].logit);
            dst[offset[(k >> (p * BITS)) & (BUCKETS - 1)]++] = src[i];
        }
        candidate *t = src;
        src = dst;
        dst = t;
    }
    if (src != c) memcpy(c, src, (size_t)m * sizeof *c);
}

/* The top-k cut as a heap built over the logits themselves, without first
 * copying every candidate: the first k non-NaN ids make the heap (worst at
 * the root) and the later ones pass through it in id order. False, with c's
 * contents undefined, when the whole-list path must run instead: k or fewer
 * non-NaN logits (nothing to cut) or an infinite maximum (the uniform draw
 * over the tied maxima). Else *max is the largest logit (the heap's best:
 * the maximum always survives the cut). */
static bool top_k_from_logits(candidate *c, const float *logits, int32_t n, int32_t k, float *max) {
    int32_t m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (!isnan(logits[i])) c[m++] = (candidate){logits[i], i};
    if (m < k) return false;
    for (int32_t j = k / 2 - 1; j >= 0; j--) sift_down(c, k, j);
    bool cut = false;
    for (; i < n; i++) {
        if (isnan(logits[i])) continue;
        cut = true;
        const candidate next = {logits[i], i};
        if (ranks_before(next, c[0])) {
            c[0] = next;
            sift_down(c, k, 0);
        }
    }
    if (!cut) return false;
    candidate best = c[0];
    for (int32_t j = 1; j < k; j++)
        if (ranks_before(c[j], best)) best = c[j];
    *max = best.logit;
    return !isinf(best.logit);
}

/* Fill s->cands[0..m) (best first) and s->weights[0..m) for a non-greedy draw;
 * returns m (0 when out of memory) and the weights' sum in *total. */
static int32_t filter(vt_sampler *s, const float *logits, int32_t n, double *total) {
    if (!reserve(s, n)) return 0;
    candidate *c = s->cands;
    const vt_sampler_params *p = &s->params;
    int32_t m = 0;
    float max = -INFINITY;
    /* c is in ascending id order until top-k reorders it as a heap. A top-k
     * cut of a large vocabulary (the server's default 40) builds the heap
     * straight from the logits. */
    bool top_k_cut = p->top_k > 0 && p->top_k < n && top_k_from_logits(c, logits, n, p->top_k, &max);
    if (top_k_cut) {
        m = p->top_k;
    } else {
        for (int32_t i = 0; i < n; i++) {
            if (isnan(logits[i])) continue;
            c[m++] = (candidate){logits[i], i};
            if (logits[i] > max) max = logits[i];
        }
        if (m == 0) return 0;

        /* All -inf, or some +inf: only the tokens at the maximum can be drawn, uniformly. */
        if (isinf(max)) {
            int32_t kept = 0;
            for (int32_t i = 0; i < m; i++)
                if (c[i].logit == max) c[kept++] = c[i];
            for (int32_t i = 0; i < kept; i++) s->weights[i] = 1.0;
            *total = kept;
            return kept;
        }

        /* No cut left to make here: top_k_from_logits declined only when at
         * most k logits are not NaN (nothing to cut) or the maximum is
         * infinite (handled above). */
    }

    /* top-p normalizes over what top-k kept (as llama.cpp's chain does);
     * nothing else needs the sum. */
    double z = 0.0;
    if (p->top_p < 1.0f)
        for (int32_t i = 0; i < m; i++) z += exp((double)c[i].logit - max);

    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= max + log(min_p) */
        float threshold = max + logf(p->min_p);
        int32_t kept = 0;
        for (int32_t i = 0; i < m; i++)
            if (c[i].logit >= threshold) c[kept++] = c[i];
        m = kept; /* the maximum always passes, so m >= 1 */
    }

    /* top-p keeps a prefix of the sorted candidates. With a large vocab, find a
     * logit threshold whose candidates already hold more than top_p of the mass
     * and sort only those: the prefix lies inside them, so the result is the
     * same as sorting all (the 1e-6 margin covers summation-order rounding). */
    if (p->top_p < 1.0f && m > 1024) {
        static const float deltas[] = {8.0f, 16.0f, 32.0f};
        for (size_t d = 0; d < sizeof deltas / sizeof deltas[0]; d++) {
            float floor_logit = max - deltas[d];
            double mass = 0.0;
            for (int32_t i = 0; i < m; i++)
                if (c[i].logit >= floor_logit) mass += exp((double)c[i].logit - max);
            if (mass / z < (double)p->top_p + 1e-6) continue;
            int32_t kept = 0;
            for (int32_t i = 0; i < m; i++)
                if (c[i].logit >= floor_logit) c[kept++] = c[i];
            m = kept;
            break;
        }
    }

    if (!top_k_cut && m >= RADIX_SORT_MIN) radix_sort_by_rank(c, s->spare, m);
    else qsort(c, (size_t)m, sizeof *c, compare_rank);

    /* min-p and top-p both keep a prefix of this order, so applying min-p first
     * gives the same set as llama.cpp's top-p-then-min-p. */
    if (p->top_p < 1.0f) {
        double cum = 0.0;
        for (int32_t i = 0; i < m; i++) {
            cum += exp((double)c[i].logit - max) / z;
            if (cum >= p->top_p) {
                m = i + 1;
                break;
            }
        }
    }

    double sum = 0.0;
    for (int32_t i = 0; i < m; i++) {
        s->weights[i] = exp(((double)c[i].logit - max) / p->temp);
        sum += s->weights[i];
    }
    *total = sum;
    return m;
}

int32_t vt_sampler_sample(vt_sampler *s, const float *logits, int32_t n) {
    if (!s || !logits || n <= 0) return -1;
    if (s->params.temp <= 0.0f) return vt_argmax(logits, n);
    double total = 0.0;
    int32_t m = filter(s, logits, n, &total);
    if (m == 0) return vt_argmax(logits, n); /* all NaN, or out of memory: stay deterministic */
    double u = rng_uniform(s) * total;
    double cum = 0.0;
    for (int32_t i = 0; i < m; i++) {
        cum += s->weights[i];
        if (u < cum) return s->cands[i].id;
    }
    return s->cands[m - 1].id; /* u within rounding of total */
}

vt_status vt_sampler_probs(vt_sampler *s, const float *logits, int32_t n, float *probs, vt_error *err) {
    if (!s || !logits || !probs || n <= 0) return vt_fail(err, VT_ERR_INVALID, "sampler_probs: bad argument");
    memset(probs, 0, (size_t)n * sizeof *probs);
    if (s->params.temp <= 0.0f) {
        probs[vt_argmax(logits, n)] = 1.0f;
        return VT_OK;
    }
    double total = 0.0;
    int32_t m = filter(s, logits, n, &total);
    if (m == 0) {
        if (s->cap < n) return vt_fail(err, VT_ERR_NOMEM, "sampler_probs: out of memory for %d candidates", n);
        probs[0] = 1.0f; /* every logit NaN */
        return VT_OK;
    }
    for (int32_t i = 0; i < m; i++) probs[s->cands[i].id] = (float)(s->weights[i] / total);
    return VT_OK;
}

/* ---- penalties -------------------------------------------------------- */

vt_status vt_sampler_set_penalties(vt_sampler *s, float presence, float frequency, int32_t n_vocab, vt_error *err) {
    if (!isfinite(presence) || !isfinite(frequency))
        return vt_fail(err, VT_ERR_INVALID, "sampler: penalties must be finite (presence %g, frequency %g)",
                       (double)presence, (double)frequency);
    if (n_vocab < 1) return vt_fail(err, VT_ERR_INVALID, "sampler: n_vocab %d", n_vocab);
    if (presence != 0.0f || frequency != 0.0f) {
        float *p = realloc(s->penalized, (size_t)n_vocab * sizeof *p);
        if (p) s->penalized = p;
        int32_t *c = p ? realloc(s->counts, (size_t)n_vocab * sizeof *c) : NULL;
        if (!p || !c) return vt_fail(err, VT_ERR_NOMEM, "sampler: out of memory for penalties over %d ids", n_vocab);
        s->counts = c;
        memset(s->counts, 0, (size_t)n_vocab * sizeof *s->counts);
        s->n_vocab = n_vocab;
    }
    s->presence = presence;
    s->frequency = frequency;
    return VT_OK;
}

int32_t vt_sampler_sample_after(vt_sampler *s, const float *logits, int32_t n, const int32_t *history,
                                int64_t n_history) {
    if (!s || !logits || n <= 0) return -1;
    if ((s->presence == 0.0f && s->frequency == 0.0f) || n_history <= 0 || !history || n > s->n_vocab)
        return vt_sampler_sample(s, logits, n);
    memcpy(s->penalized, logits, (size_t)n * sizeof *logits);
    for (int64_t i = 0; i < n_history; i++)
        if (history[i] >= 0 && history[i] < n) s->counts[history[i]]++;
    /* Each distinct token once; its count goes back to 0 for the next call. */
    for (int64_t i = 0; i < n_history; i++) {
        const int32_t id = history[i];
        if (id < 0 || id >= n || s->counts[id] == 0) continue;
        s->penalized[id] -= s->presence + s->frequency * (float)s->counts[id];
        s->counts[id] = 0;
    }
    return vt_sampler_sample(s, s->penalized, n);
}
