/* logprobs.c — see logprobs.h. */
#include "logprobs.h"

#include <math.h>
#include <stdbool.h>

double vt_logits_lse(const float *logits, int32_t n) {
    /* The maximum first, so that no exp overflows and the largest term is 1. */
    float max = -INFINITY;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] > max) max = logits[i]; /* NaN never compares greater */
    if (isinf(max)) return max;              /* none finite above -inf, or a +inf */
    /* Terms in double: 151,936 of them summed in float would lose ~1e-3 of
     * the total's relative precision; expf per term keeps the pass cheap. */
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
    /* One pass: the first k non-NaN ids fill the heap, each later id that
     * beats its root replaces it. */
    int32_t m = 0, i = 0;
    for (; i < n && m < k; i++)
        if (!isnan(logits[i])) top[m++] = (vt_token_logprob){i, 0.0f};
    for (int32_t j = m / 2 - 1; j >= 0; j--) sift_down(top, logits, m, j);
    for (; i < n; i++) {
        if (isnan(logits[i]) || !before(logits[i], i, logits[top[0].id], top[0].id)) continue;
        top[0].id = i;
        sift_down(top, logits, m, 0);
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
