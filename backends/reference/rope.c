/* rope.c — rotary position embedding of the first n_rot values of each head.
 *
 * Pair i (0 <= i < n_rot/2) is rotated by theta_i = pos * freq_scale *
 * freq_base^(-2i/n_rot) (divided by the frequency factor f[i] when the node
 * has them, src2), computed in double:
 *   (a, b) -> (a cos theta - b sin theta, a sin theta + b cos theta).
 * NORM pairs the adjacent values (2i, 2i+1), NEOX the halves (i, i + n_rot/2).
 * Values from n_rot to D are copied. Work is split over (token, head) rows. */
#include <math.h>
#include <stdatomic.h>

#include "reference.h"

typedef struct rope_job {
    const ref_ctx *c;
    const vt_node *node;
    int64_t D, heads;
    ref_scratch scratch; /* per thread: one output row, D floats */
    atomic_int failed;
} rope_job;

static void rope_rows(void *arg, int64_t begin, int64_t end, int thread) {
    rope_job *job = arg;
    const vt_host *h = job->c->host;
    const vt_rope_params *p = &job->node->params.rope;
    const int64_t D = job->D, half = p->n_rot / 2;
    const float *x_all = job->node->src[0].data;       /* [T][heads][D] */
    const int32_t *positions = job->node->src[1].data; /* [T] */
    const float *factors = job->node->n_src > 2 ? job->node->src[2].data : NULL; /* [n_rot / 2] */
    const vt_tensor *y = &job->node->dst;
    const size_t y_row_bytes = h->row_size(y->dtype, D);
    float *out = ref_scratch_slice(&job->scratch, thread); /* [D] */

    for (int64_t r = begin; r < end; r++) {
        const float *x = x_all + (size_t)r * (size_t)D;
        const double pos = positions[r / job->heads];
        for (int64_t i = 0; i < half; i++) {
            /* NORM: (2i, 2i+1); NEOX: (i, i + n_rot/2) */
            const int64_t ia = p->mode == VT_ROPE_NEOX ? i : 2 * i;
            const int64_t ib = p->mode == VT_ROPE_NEOX ? i + half : 2 * i + 1;
            double theta = pos * (double)p->freq_scale * pow((double)p->freq_base, -2.0 * (double)i / (double)p->n_rot);
            if (factors) theta /= (double)factors[i];
            const double cos_t = cos(theta), sin_t = sin(theta), a = x[ia], b = x[ib];
            out[ia] = (float)(a * cos_t - b * sin_t);
            out[ib] = (float)(a * sin_t + b * cos_t);
        }
        for (int64_t i = p->n_rot; i < D; i++) out[i] = x[i];
        if (h->from_f32(y->dtype, out, (unsigned char *)y->data + (size_t)r * y_row_bytes, D) != VT_OK)
            atomic_store(&job->failed, 1);
    }
}

vt_status ref_rope(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "rope")) return VT_ERR_INVALID;
    rope_job job = {.c = c, .node = node, .D = node->src[0].ne[0], .heads = vt_tensor_dim(&node->src[0], 1)};
    atomic_init(&job.failed, 0);
    if (!ref_scratch_alloc(c, (size_t)job.D * sizeof(float), &job.scratch)) return VT_ERR_NOMEM;
    ref_parallel(c, vt_tensor_rows(&node->src[0]), 1, rope_rows, &job);
    ref_scratch_free(c, &job.scratch);
    if (atomic_load(&job.failed)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "rope: cannot store %s", c->host->dtype_name(node->dst.dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
