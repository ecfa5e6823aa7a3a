/* logprobs.c — see logprobs.h.
 *
 * Both passes run over the whole vocabulary for every token of a request
 * that asks (151,936 logits on qwen), between two decode steps: about
 * 0.65 ms of CPU for the log-sum-exp there and 0.06 ms more for a top 20
 * (gcc 12 -O3, a shared 2-vCPU EPYC), against a decode step of tens of ms. */
#include "logprobs.h"

#include <math.h>
#include <stdbool.h>

/* The largest non-NaN logit, -inf when there is none (x > m is false for NaN). */
static float max_logit(const float *logits, int32_t n) {
    enum { LANES = 8 };
    float lane[LANES];
    for (int j = 0; j < LANES; j++) lane[j] = -INFINITY;
    int32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
    float m = -INFINITY;
    for (int j = 0; j < LANES; j++) m = lane[j] > m ? lane[j] : m;
    for (; i < n; i++) m = logits[i] > m ? logits[i] : m;
    return m;
}

double vt_logits_lse(const float *logits, int32_t n) {
    const float max = max_logit(logits, n);
    if (isinf(max)) return max; /* none finite above -inf, or a +inf */
    /* Terms in double: in float, 151,936 of them would lose ~1e-3 of the
     * total's relative precision. glibc's expf is table-driven (a few ns a
     * call); a polynomial the compiler could vectorize saved little here,
     * since the clamp it needs for -inf and NaN keeps gcc from vectorizing. */
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(logits[i])) sum += (double)expf(logits[i] - max);
    return (double)max + log(sum);
}

/* a is more likely than b: a higher logit, or the same and a lower id. */
static bool before(float la, int32_t ia, float lb, int32_t ib) { return la > lb || (la == lb && ia < ib); }

/* Min-heap on likelihood over h[0..k): the root is the least likely kept. */
static void sift_down(vt_token_logprob *h, const float *logits, int32_t k, int32_t i) {
    for (;;) {
        int32_t worst = i, l = 2 * i + 1, r = l + 1;
        if (l < k && before(logits[h[worst].id], h[worst].id, logits[h[l].id], h[l].id)) worst = l;
        if (r < k && before(logits[h[worst].id], h[worst].id, logits[h[r].id], h[r].id)) worst = r;
        if (worst == i) return;
        const vt_token_logprob t = h[i];
        h[i] = h[worst];
        h[worst] = t;
        i = worst;
    }
}

int32_t vt_top_logprobs(const float *logits, int32_t n, int32_t k, double lse, vt_token_logprob *top) {
    if (k <= 0) return 0;
    if (k > VT_BATCH_MAX_TOP_LOGPROBS) k = VT_BATCH_MAX_TOP_LOGPROBS;
    /* The first k non-NaN ids fill the heap. */
    int32_t m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (!isnan(logits[i])) top[m++] = (vt_token_logprob){i, 0.0f};
    for (int32_t j = m / 2 - 1; j >= 0; j--) sift_down(top, logits, m, j);
    /* Each later id replaces the root when it beats it: ids come in
     * ascending order, so a tie never does, and NaN never compares greater.
     * Almost every logit loses, so blocks are first checked as a whole
     * against the root's logit, a comparison the compiler vectorizes. */
    enum { BLOCK = 64 };
    float worst = m > 0 ? logits[top[0].id] : INFINITY;
    while (i < n) {
        const int32_t end = n - i >= BLOCK ? i + BLOCK : n;
        bool any = false;
        for (int32_t j = i; j < end; j++) any |= logits[j] > worst;
        if (any)
            for (int32_t j = i; j < end; j++)
                if (logits[j] > worst) {
                    top[0].id = j;
                    sift_down(top, logits, m, 0);
                    worst = logits[top[0].id];
                }
        i = end;
    }
    /* Heap order to best first: take the root (the worst) to the end, m times. */
    for (int32_t end = m - 1; end > 0; end--) {
        const vt_token_logprob t = top[0];
        top[0] = top[end];
        top[end] = t;
        sift_down(top, logits, end, 0);
    }
    for (int32_t j = 0; j < m; j++) top[j].logprob = (float)((double)logits[top[j].id] - lse);
    return m;
}
