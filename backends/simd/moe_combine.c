/* moe_combine.c — out[t] = sum over u of w[t][u] * Y[t][u] (vt_backend.h).
 *
 * The U weights of a token come from its router logits in double (a few
 * exp per token, nothing next to the rows they weigh), rounded once to f32;
 * the rows are summed in f32 in u order, with FMA. */
#include <math.h>

#include "simd.h"

typedef struct combine_task {
    const vt_node *node;
    int64_t N, U, NE;
    int bad_id; /* set by any thread that meets an id out of range */
} combine_task;

static void combine_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    combine_task *t = arg;
    const float *y = t->node->src[0].data;
    const int32_t *ids = t->node->src[1].data;
    const float *logits = t->node->src[2].data;
    float *out = t->node->dst.data;
    const int64_t N = t->N, U = t->U, NE = t->NE;
    for (int64_t row = begin; row < end; row++) {
        const float *l = logits + row * NE;
        const int32_t *id = ids + row * U;
        double l_max = l[0], chosen = 0.0, all = 0.0;
        for (int64_t e = 1; e < NE; e++) l_max = l[e] > l_max ? l[e] : l_max;
        if (!t->node->params.moe.norm_top_k)
            for (int64_t e = 0; e < NE; e++) all += exp((double)l[e] - l_max);
        for (int64_t u = 0; u < U; u++) {
            if (id[u] < 0 || id[u] >= NE) {
                __atomic_store_n(&t->bad_id, 1, __ATOMIC_RELAXED);
                return;
            }
            chosen += exp((double)l[id[u]] - l_max);
        }
        const double denominator = t->node->params.moe.norm_top_k ? chosen : all;
        float *o = out + row * N;
        for (int64_t n = 0; n < N; n++) o[n] = 0.0f;
        for (int64_t u = 0; u < U; u++) {
            const float w = (float)(exp((double)l[id[u]] - l_max) / denominator);
            const float *yr = y + (row * U + u) * N;
            for (int64_t n = 0; n < N; n++) o[n] = fmaf(w, yr[n], o[n]);
        }
    }
}

vt_status simd_moe_combine(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    combine_task t = {node, node->src[0].ne[0], node->src[1].ne[0], node->src[2].ne[0], 0};
    const int64_t T = node->src[1].ndim > 1 ? node->src[1].ne[1] : 1;
    if (T > 0) vt_host_parallel_for(ctx->host, T, 4, combine_rows, &t);
    if (t.bad_id) {
        ctx->host->log(VT_LOG_ERROR, SIMD_BACKEND_NAME, "moe_combine: an expert id is outside 0..%lld",
                       (long long)t.NE - 1);
        return VT_ERR_INVALID;
    }
    return VT_OK;
}
