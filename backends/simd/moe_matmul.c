/* moe_matmul.c — Y[t][u] = W[ids[t][u]] x X[t](u) (vt_backend.h).
 *
 * The call's (token, slot) pairs are grouped by expert (a counting sort of
 * the ids); each expert that has any runs as one MATMUL of its rows over
 * the gathered activation rows, so its weights are read once per call
 * however many tokens chose it. Each row goes through simd_matmul exactly
 * as a MATMUL row would, and that kernel's rows never depend on M: a
 * token's result is the same whatever else shares the step. Weights
 * prepared by prepare.c hold each expert's copy back to back (slices of
 * simd_expert_slice_bytes), so an expert's view is as prepared as a plain
 * matrix. */
#include <stdbool.h>
#include <string.h>

#include "prepared_groups.h"
#include "simd.h"

size_t simd_expert_slice_bytes(const simd_prepared_format *f, int64_t K, int64_t N) {
    return simd_align_up(f->size(K, N));
}

/* A plain contiguous f32 {ne0, ne1} tensor over data. */
static vt_tensor f32_matrix(void *data, int64_t ne0, int64_t ne1) {
    vt_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = VT_F32;
    t.ndim = 2;
    t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = t.ne[3] = 1;
    t.nb[0] = sizeof(float), t.nb[1] = (size_t)ne0 * sizeof(float);
    t.nb[2] = t.nb[3] = t.nb[1] * (size_t)ne1;
    return t;
}

/* A weight in a layout of the shared 8-row group walk: every expert's rows
 * gathered in expert order, quantized once, and all experts walked in one
 * pass over the threads (prepared_groups.h) instead of one pass per expert:
 * a decode step's experts are small, and a pass each costs more than their
 * weights take to read. */
static vt_status all_experts_at_once(simd_ctx *ctx, const vt_node *node, const simd_group_layout *L,
                                     const int64_t *first, const int64_t *order, size_t expert_bytes) {
    const vt_host *h = ctx->host;
    const vt_tensor *W = &node->src[0], *X = &node->src[1], *Y = &node->dst;
    const int64_t K = W->ne[0], N = W->ne[1], NE = W->ndim > 2 ? W->ne[2] : 1;
    const int64_t U = node->src[2].ne[0], pairs = U * (node->src[2].ndim > 1 ? node->src[2].ne[1] : 1);
    const bool x_per_expert = X->ndim == 3 && X->ne[1] == U;
    float *xg = h->alloc((size_t)(pairs * K) * sizeof(float), SIMD_ALIGN);
    float *yg = h->alloc((size_t)(pairs * N) * sizeof(float), SIMD_ALIGN);
    simd_group_part *parts = h->alloc((size_t)NE * sizeof *parts, SIMD_ALIGN);
    vt_status st = xg && yg && parts ? VT_OK : VT_ERR_NOMEM;
    int n_parts = 0;
    for (int64_t i = 0; st == VT_OK && i < pairs; i++) { /* order is grouped by expert already */
        const int64_t row = x_per_expert ? order[i] : order[i] / U;
        memcpy(xg + i * K, (const float *)X->data + row * K, (size_t)K * sizeof(float));
    }
    for (int64_t e = 0; st == VT_OK && e < NE; e++)
        if (first[e + 1] > first[e])
            parts[n_parts++] = (simd_group_part){(const char *)W->data + (size_t)e * expert_bytes, first[e],
                                                 first[e + 1] - first[e]};
    if (st == VT_OK) {
        const vt_tensor xt = f32_matrix(xg, K, pairs);
        st = simd_group_matmul_parts(ctx, &xt, yg, N, parts, n_parts, L);
    }
    for (int64_t i = 0; st == VT_OK && i < pairs; i++)
        memcpy((float *)Y->data + order[i] * N, yg + i * N, (size_t)N * sizeof(float));
    h->free(xg);
    h->free(yg);
    h->free(parts);
    return st;
}

vt_status simd_moe_matmul(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_host *h = ctx->host;
    const vt_tensor *W = &node->src[0], *X = &node->src[1], *ids_t = &node->src[2], *Y = &node->dst;
    const int64_t K = W->ne[0], N = W->ne[1], NE = W->ndim > 2 ? W->ne[2] : 1;
    const int64_t U = ids_t->ne[0], T = ids_t->ndim > 1 ? ids_t->ne[1] : 1, pairs = U * T;
    const bool x_per_expert = X->ndim == 3 && X->ne[1] == U;
    const bool prepared = node->prepared & 1u;
    const simd_prepared_format *pf = prepared ? simd_prepared_format_of(W->dtype) : NULL;
    if (prepared && !pf) return VT_ERR_INVALID;
    if (pairs <= 0 || N <= 0) return VT_OK;
    const size_t expert_bytes = prepared ? simd_expert_slice_bytes(pf, K, N) : h->row_size(W->dtype, K) * (size_t)N;
    const int32_t *ids = ids_t->data;

    /* counting sort of the pairs by expert: expert e's are order[first[e] .. first[e+1]) */
    int64_t *first = h->alloc((size_t)(NE + 2) * sizeof *first, SIMD_ALIGN);
    int64_t *order = h->alloc((size_t)pairs * sizeof *order, SIMD_ALIGN);
    vt_status st = first && order ? VT_OK : VT_ERR_NOMEM;
    int64_t most = 0;
    if (st == VT_OK) {
        memset(first, 0, (size_t)(NE + 2) * sizeof *first);
        for (int64_t i = 0; i < pairs && st == VT_OK; i++) {
            if (ids[i] < 0 || ids[i] >= NE) st = VT_ERR_INVALID;
            else first[ids[i] + 2]++;
        }
    }
    if (st == VT_OK) {
        for (int64_t e = 2; e <= NE + 1; e++) {
            most = first[e] > most ? first[e] : most;
            first[e] += first[e - 1];
        }
        for (int64_t i = 0; i < pairs; i++) order[first[ids[i] + 1]++] = i;
    }
    const simd_group_layout *L = prepared && pf->group_layout ? pf->group_layout(ctx) : NULL;
    if (L && st == VT_OK) {
        st = all_experts_at_once(ctx, node, L, first, order, expert_bytes);
        goto done;
    }
    float *xg = st == VT_OK ? h->alloc((size_t)(most * K) * sizeof(float), SIMD_ALIGN) : NULL;
    float *yg = st == VT_OK ? h->alloc((size_t)(most * N) * sizeof(float), SIMD_ALIGN) : NULL;
    if (st == VT_OK && (!xg || !yg)) st = VT_ERR_NOMEM;

    for (int64_t e = 0; e < NE && st == VT_OK; e++) {
        const int64_t m = first[e + 1] - first[e];
        if (m == 0) continue;
        const int64_t *pair = order + first[e];
        for (int64_t i = 0; i < m; i++) {
            const int64_t row = x_per_expert ? pair[i] : pair[i] / U;
            memcpy(xg + i * K, (const float *)X->data + row * K, (size_t)K * sizeof(float));
        }
        vt_node mm;
        memset(&mm, 0, sizeof mm);
        mm.struct_size = sizeof mm;
        mm.op = VT_OP_MATMUL;
        mm.phase = node->phase;
        mm.n_src = 2;
        mm.src[0] = *W; /* expert e's {K, N} */
        mm.src[0].ndim = 2;
        mm.src[0].ne[2] = 1;
        mm.src[0].nb[2] = mm.src[0].nb[3] = mm.src[0].nb[1] * (size_t)N;
        mm.src[0].data = (char *)W->data + (size_t)e * expert_bytes;
        mm.src[1] = f32_matrix(xg, K, m);
        mm.dst = f32_matrix(yg, N, m);
        mm.prepared = prepared ? 1u : 0u;
        st = simd_matmul(ctx, &mm);
        for (int64_t i = 0; i < m && st == VT_OK; i++)
            memcpy((float *)Y->data + pair[i] * N, yg + i * N, (size_t)N * sizeof(float));
    }
    h->free(xg);
    h->free(yg);
done:
    if (st == VT_ERR_INVALID) h->log(VT_LOG_ERROR, SIMD_BACKEND_NAME, "moe_matmul: an expert id is outside 0..%lld", (long long)NE - 1);
    h->free(first);
    h->free(order);
    return st;
}
