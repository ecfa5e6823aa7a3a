/* moe_combine.c — out[t] = sum over u of w[t][u] * Y[t][u], the chosen
 * experts' outputs weighed by their routing probabilities, in double.
 *
 * p = softmax(router logits); w[t][u] = p[ids[t][u]], renormalized over the
 * chosen experts when params.moe.norm_top_k is set. Both are computed from
 * exp(l - l_max), so the result is the same whichever experts were chosen
 * and needs no division by the full softmax sum when renormalizing. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "reference.h"

typedef struct combine_job {
    const vt_node *node;
    int64_t N, U, NE;
    atomic_int bad_id, out_of_memory;
} combine_job;

static void combine_tokens(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    combine_job *job = arg;
    const float *y = job->node->src[0].data;      /* [T][U][N] */
    const int32_t *ids = job->node->src[1].data;  /* [T][U] */
    const float *logits = job->node->src[2].data; /* [T][NE] */
    float *out = job->node->dst.data;             /* [T][N] */
    const int64_t N = job->N, U = job->U, NE = job->NE;
    /* the chosen experts' weights: U comes from the model, so not on the stack */
    double *w = malloc((size_t)U * sizeof *w);
    if (!w) {
        atomic_store(&job->out_of_memory, 1);
        return;
    }
    for (int64_t t = begin; t < end; t++) {
        const float *l = logits + (size_t)t * (size_t)NE;
        const int32_t *id = ids + (size_t)t * (size_t)U;
        double l_max = l[0];
        for (int64_t e = 1; e < NE; e++)
            if (l[e] > l_max) l_max = l[e];
        double all = 0.0, chosen = 0.0;
        for (int64_t e = 0; e < NE; e++) all += exp((double)l[e] - l_max);
        for (int64_t u = 0; u < U; u++) {
            if (id[u] < 0 || id[u] >= NE) {
                atomic_store(&job->bad_id, 1);
                free(w);
                return;
            }
            w[u] = exp((double)l[id[u]] - l_max);
            chosen += w[u];
        }
        const double denominator = job->node->params.moe.norm_top_k ? chosen : all;
        for (int64_t n = 0; n < N; n++) {
            double s = 0.0;
            for (int64_t u = 0; u < U; u++) s += w[u] / denominator * (double)y[((size_t)t * (size_t)U + (size_t)u) * (size_t)N + (size_t)n];
            out[(size_t)t * (size_t)N + (size_t)n] = (float)s;
        }
    }
    free(w);
}

vt_status ref_moe_combine(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "moe_combine")) return VT_ERR_INVALID;
    combine_job job = {.node = node, .N = node->src[0].ne[0], .U = node->src[1].ne[0], .NE = node->src[2].ne[0]};
    atomic_init(&job.bad_id, 0);
    atomic_init(&job.out_of_memory, 0);
    ref_parallel(c, vt_tensor_dim(&node->src[1], 1), 4, combine_tokens, &job);
    if (atomic_load(&job.out_of_memory)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "moe_combine: out of memory for %lld expert weights", (long long)job.U);
        return VT_ERR_NOMEM;
    }
    if (atomic_load(&job.bad_id)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "moe_combine: an expert id is outside 0..%lld", (long long)job.NE - 1);
        return VT_ERR_INVALID;
    }
    return VT_OK;
}
