/* attention.c — paged causal attention with grouped KV heads.
 *
 * For token t and query head h: kv head g = h / (H / KVH); scores
 * s_p = scale * q . k_p over positions p = 0..positions[t] of the token's
 * sequence, each k_p read through the block table (slot = table[p / BS] * BS
 * + p % BS) and converted from the cache dtype; softmax with the maximum
 * subtracted, in double; out = sum_p softmax_p * v_p. Work is split over
 * (token, head) pairs. */
#include <math.h>
#include <stdatomic.h>

#include "reference.h"

typedef struct attention_job {
    const ref_ctx *c;
    const vt_node *node;
    int64_t D, H, T, KVH, BS;
    int64_t max_len;           /* longest context of any token in this call */
    size_t k_row_bytes, v_row_bytes; /* one head's D elements in each cache */
    ref_scratch scratch;       /* per thread: scores[max_len] + acc[D] doubles, row[D] floats */
    atomic_int failed;
} attention_job;

static void attention_heads(void *arg, int64_t begin, int64_t end, int thread) {
    attention_job *job = arg;
    const vt_node *node = job->node;
    const vt_host *h = job->c->host;
    const int64_t D = job->D, H = job->H, KVH = job->KVH, BS = job->BS;
    const int64_t group = H / KVH;
    const int32_t max_blocks = node->params.attention.max_blocks_per_seq;
    const double scale = node->params.attention.scale;
    const vt_tensor *kc = &node->src[1], *vc = &node->src[2];
    const int32_t *tables = node->src[3].data;    /* [n_seqs][max_blocks] */
    const int32_t *positions = node->src[4].data; /* [T] */
    const int32_t *seqs = node->src[5].data;      /* [T] */
    const float *q_all = node->src[0].data;       /* [T][H][D] */
    float *o_all = node->dst.data;                /* [T][H][D] */

    double *scores = ref_scratch_slice(&job->scratch, thread); /* [max_len] */
    double *acc = scores + job->max_len;                         /* [D] */
    float *row = (float *)(acc + D);                             /* [D] */

    for (int64_t item = begin; item < end; item++) {
        const int64_t t = item / H, head = item % H, kv_head = head / group;
        const int64_t len = (int64_t)positions[t] + 1;
        const int32_t *table = tables + (size_t)seqs[t] * (size_t)max_blocks;
        const float *q = q_all + ((size_t)t * (size_t)H + (size_t)head) * (size_t)D;

        /* scores and their maximum */
        double max_score = -INFINITY;
        for (int64_t p = 0; p < len; p++) {
            int64_t slot = (int64_t)table[p / BS] * BS + p % BS;
            const unsigned char *k = (const unsigned char *)kc->data + ((size_t)slot * (size_t)KVH + (size_t)kv_head) * job->k_row_bytes;
            if (h->to_f32(kc->dtype, k, row, D) != VT_OK) goto fail;
            double dot = 0.0;
            for (int64_t d = 0; d < D; d++) dot += (double)q[d] * (double)row[d];
            scores[p] = scale * dot;
            if (scores[p] > max_score) max_score = scores[p];
        }
        /* softmax weights and the weighted sum of V */
        double total = 0.0;
        for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
        for (int64_t p = 0; p < len; p++) {
            double weight = exp(scores[p] - max_score);
            total += weight;
            int64_t slot = (int64_t)table[p / BS] * BS + p % BS;
            const unsigned char *v = (const unsigned char *)vc->data + ((size_t)slot * (size_t)KVH + (size_t)kv_head) * job->v_row_bytes;
            if (h->to_f32(vc->dtype, v, row, D) != VT_OK) goto fail;
            for (int64_t d = 0; d < D; d++) acc[d] += weight * (double)row[d];
        }
        float *o = o_all + ((size_t)t * (size_t)H + (size_t)head) * (size_t)D;
        for (int64_t d = 0; d < D; d++) o[d] = (float)(acc[d] / total);
    }
    return;
fail:
    atomic_store(&job->failed, 1);
}

/* Every index the kernel will follow must be in range: bad data in a table
 * is an error, never an out-of-bounds read. Returns the longest context. */
static bool check_indices(const ref_ctx *c, const vt_node *node, int64_t T, int64_t BS, int64_t B, int64_t *max_len) {
    const vt_attention_params *p = &node->params.attention;
    const int32_t *tables = node->src[3].data, *positions = node->src[4].data, *seqs = node->src[5].data;
    *max_len = 0;
    for (int64_t t = 0; t < T; t++) {
        int32_t seq = seqs[t], pos = positions[t];
        if (seq < 0 || seq >= p->n_seqs) {
            c->host->log(VT_LOG_ERROR, REF_NAME, "attention: token %lld has sequence %d, table has %d rows", (long long)t, seq, p->n_seqs);
            return false;
        }
        if (pos < 0 || (int64_t)pos >= (int64_t)p->max_blocks_per_seq * BS) {
            c->host->log(VT_LOG_ERROR, REF_NAME, "attention: token %lld at position %d outside the %lld positions of a table row",
                         (long long)t, pos, (long long)p->max_blocks_per_seq * BS);
            return false;
        }
        for (int64_t b = 0; b <= pos / BS; b++) {
            int32_t block = tables[(size_t)seq * (size_t)p->max_blocks_per_seq + (size_t)b];
            if (block < 0 || block >= B) {
                c->host->log(VT_LOG_ERROR, REF_NAME, "attention: sequence %d maps logical block %lld to %d, cache has %lld blocks",
                             seq, (long long)b, block, (long long)B);
                return false;
            }
        }
        if (pos + 1 > *max_len) *max_len = pos + 1;
    }
    return true;
}

vt_status ref_attention(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "attention")) return VT_ERR_INVALID;
    const vt_tensor *q = &node->src[0], *kc = &node->src[1];
    attention_job job = {
        .c = c, .node = node,
        .D = q->ne[0], .H = vt_tensor_dim(q, 1), .T = vt_tensor_dim(q, 2),
        .KVH = vt_tensor_dim(kc, 1), .BS = vt_tensor_dim(kc, 2),
        .k_row_bytes = ref_row_bytes(c, kc), .v_row_bytes = ref_row_bytes(c, &node->src[2]),
    };
    atomic_init(&job.failed, 0);
    if (!check_indices(c, node, job.T, job.BS, vt_tensor_dim(kc, 3), &job.max_len)) return VT_ERR_INVALID;
    size_t per_thread = ((size_t)job.max_len + (size_t)job.D) * sizeof(double) + (size_t)job.D * sizeof(float);
    if (!ref_scratch_alloc(c, per_thread, &job.scratch)) return VT_ERR_NOMEM;
    ref_parallel(c, job.T * job.H, 1, attention_heads, &job);
    ref_scratch_free(c, &job.scratch);
    if (atomic_load(&job.failed)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "attention: cannot read the %s cache", c->host->dtype_name(kc->dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
