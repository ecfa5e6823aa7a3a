/* moe_matmul.c — Y[t][u] = W[ids[t][u]] x X[t](u): each token's rows
 * through the experts it was routed to.
 *
 * As matmul.c, each weight row is dequantized once and dotted in double
 * with every activation row that uses it; the rows of the call are grouped
 * by expert first (a counting sort of the ids), and work is split over the
 * weight rows of all experts. A token's result depends only on its own row
 * and its experts' weights. */
#include <stdatomic.h>

#include "reference.h"

typedef struct moe_matmul_job {
    const ref_ctx *c;
    const vt_tensor *w, *x, *y;
    int64_t K, N, NE, U, T;
    bool x_per_expert;   /* X is {K, U, T} rather than {K, T} */
    const int64_t *first; /* [NE + 1]: expert e's pairs are order[first[e] .. first[e+1]) */
    const int64_t *order; /* [T * U]: t * U + u, grouped by expert */
    ref_scratch scratch;
    atomic_int failed;
} moe_matmul_job;

static void expert_rows(void *arg, int64_t r_begin, int64_t r_end, int thread) {
    moe_matmul_job *job = arg;
    const vt_host *h = job->c->host;
    const int64_t K = job->K, N = job->N;
    const size_t w_row_bytes = ref_row_bytes(job->c, job->w);
    float *w_row = ref_scratch_slice(&job->scratch, thread);
    const float *x = job->x->data;
    float *y = job->y->data; /* [T][U][N] */
    for (int64_t r = r_begin; r < r_end; r++) { /* r = e * N + n */
        const int64_t e = r / N, n = r % N;
        if (job->first[e] == job->first[e + 1]) continue; /* no token chose expert e */
        if (h->to_f32(job->w->dtype, (const unsigned char *)job->w->data + (size_t)r * w_row_bytes, w_row, K) != VT_OK) {
            atomic_store(&job->failed, 1);
            return;
        }
        for (int64_t i = job->first[e]; i < job->first[e + 1]; i++) {
            const int64_t tu = job->order[i], t = tu / job->U;
            const float *x_row = x + (size_t)(job->x_per_expert ? tu : t) * (size_t)K;
            y[(size_t)tu * (size_t)N + (size_t)n] = (float)ref_dot_f64(w_row, x_row, K);
        }
    }
}

vt_status ref_moe_matmul(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "moe_matmul")) return VT_ERR_INVALID;
    moe_matmul_job job = {
        .c = c, .w = &node->src[0], .x = &node->src[1], .y = &node->dst,
        .K = node->src[0].ne[0], .N = vt_tensor_dim(&node->src[0], 1), .NE = vt_tensor_dim(&node->src[0], 2),
        .U = node->src[2].ne[0], .T = vt_tensor_dim(&node->src[2], 1),
    };
    job.x_per_expert = vt_tensor_dim(job.x, 1) == job.U && vt_tensor_dim(job.x, 2) == job.T && job.x->ndim == 3;
    const int32_t *ids = node->src[2].data;
    const int64_t pairs = job.T * job.U;
    int64_t *first = c->host->alloc((size_t)(job.NE + 2) * sizeof *first, 64);
    int64_t *order = c->host->alloc((size_t)(pairs ? pairs : 1) * sizeof *order, 64);
    if (!first || !order) {
        c->host->free(first);
        c->host->free(order);
        return VT_ERR_NOMEM;
    }
    /* counting sort of the (token, slot) pairs by expert */
    for (int64_t e = 0; e <= job.NE + 1; e++) first[e] = 0;
    for (int64_t i = 0; i < pairs; i++) {
        if (ids[i] < 0 || ids[i] >= job.NE) {
            c->host->log(VT_LOG_ERROR, REF_NAME, "moe_matmul: expert id %d outside 0..%lld", (int)ids[i],
                         (long long)job.NE - 1);
            c->host->free(first);
            c->host->free(order);
            return VT_ERR_INVALID;
        }
        first[ids[i] + 2]++;
    }
    for (int64_t e = 2; e <= job.NE + 1; e++) first[e] += first[e - 1];
    for (int64_t i = 0; i < pairs; i++) order[first[ids[i] + 1]++] = i; /* first[e+1] runs to expert e's end */
    job.first = first, job.order = order;
    atomic_init(&job.failed, 0);
    vt_status st = VT_OK;
    if (!ref_scratch_alloc(c, (size_t)job.K * sizeof(float), &job.scratch)) st = VT_ERR_NOMEM;
    if (st == VT_OK) {
        ref_parallel(c, job.N * job.NE, 1, expert_rows, &job);
        ref_scratch_free(c, &job.scratch);
        if (atomic_load(&job.failed)) {
            c->host->log(VT_LOG_ERROR, REF_NAME, "moe_matmul: cannot dequantize %s weights",
                         c->host->dtype_name(job.w->dtype));
            st = VT_ERR_INTERNAL;
        }
    }
    c->host->free(first);
    c->host->free(order);
    return st;
}
