/* moe_route.c — each token's experts: the n_used largest router logits,
 * largest first, ties to the lower index (vt_backend.h). A few hundred
 * comparisons per token: plain C, split over tokens. */
#include "simd.h"

typedef struct route_task {
    const float *logits; /* [T][NE] */
    int32_t *ids;        /* [T][U] */
    int64_t NE, U;
} route_task;

static int before(const float *l, int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

static void route_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const route_task *t = arg;
    for (int64_t row = begin; row < end; row++) {
        const float *l = t->logits + row * t->NE;
        int32_t *best = t->ids + row * t->U;
        int64_t n = 0;
        for (int32_t e = 0; e < (int32_t)t->NE; e++) {
            if (n == t->U && !before(l, e, best[n - 1])) continue;
            int64_t i = n < t->U ? n++ : n - 1; /* the slot e enters at, then bubbled up */
            for (; i > 0 && before(l, e, best[i - 1]); i--) best[i] = best[i - 1];
            best[i] = e;
        }
    }
}

vt_status simd_moe_route(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    route_task t = {node->src[0].data, node->dst.data, node->src[0].ne[0], node->dst.ne[0]};
    const int64_t T = node->src[0].ndim > 1 ? node->src[0].ne[1] : 1;
    if (T > 0) vt_host_parallel_for(ctx->host, T, 16, route_rows, &t);
    return VT_OK;
}
