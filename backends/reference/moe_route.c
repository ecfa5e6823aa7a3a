/* moe_route.c — each token's experts: the n_used largest router logits,
 * largest first, ties to the lower expert index. Softmax is monotonic, so
 * these are the most probable experts; comparing logits keeps the choice
 * exact (no rounding of probabilities can reorder two experts). */
#include "reference.h"

typedef struct route_job {
    const vt_node *node;
    int64_t NE, U;
} route_job;

/* Does expert a (logit la) rank before expert b (logit lb)? */
static bool ranks_before(float la, int32_t a, float lb, int32_t b) { return la > lb || (la == lb && a < b); }

static void route_tokens(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const route_job *job = arg;
    const float *logits = job->node->src[0].data; /* [T][NE] */
    int32_t *ids = job->node->dst.data;           /* [T][U] */
    for (int64_t t = begin; t < end; t++) {
        const float *l = logits + (size_t)t * (size_t)job->NE;
        int32_t *chosen = ids + (size_t)t * (size_t)job->U;
        int64_t n = 0; /* insertion into the sorted list of the best n so far */
        for (int32_t e = 0; e < (int32_t)job->NE; e++) {
            if (n == job->U && !ranks_before(l[e], e, l[chosen[n - 1]], chosen[n - 1])) continue;
            int64_t i = n < job->U ? n++ : n - 1;
            while (i > 0 && ranks_before(l[e], e, l[chosen[i - 1]], chosen[i - 1])) {
                chosen[i] = chosen[i - 1];
                i--;
            }
            chosen[i] = e;
        }
    }
}

vt_status ref_moe_route(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "moe_route")) return VT_ERR_INVALID;
    route_job job = {.node = node, .NE = node->src[0].ne[0], .U = node->dst.ne[0]};
    ref_parallel(c, vt_tensor_dim(&node->src[0], 1), 16, route_tokens, &job);
    return VT_OK;
}
