/* vt_check.h — the operand conventions of vt_backend.h as checks a
 * backend's supports() can share, header-only (backends see only
 * include/vt/). vt_check_convention(node) is true exactly when the node
 * follows the convention of its op: the right number of sources, each tensor
 * well-formed (a dtype the convention allows, its dimensions, every size
 * positive and small enough for byte offsets to stay far from overflow, whole
 * blocks per row, contiguous strides when strides are given) and the shapes
 * agreeing. The reference backend accepts exactly that; other backends check
 * it and then their own limits.
 *
 * Each check returns true, or false with a one-line reason in why (why may be
 * NULL), so supports() can log what it declines and why. */
#ifndef VT_CHECK_H
#define VT_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vt_backend.h"
#include "vt_dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tensors larger than this many elements are refused: every byte offset
 * computed from ne[] then stays far from overflowing size_t. */
#define VT_CHECK_MAX_ELEMENTS ((int64_t)1 << 48)

/* Writes the reason and returns false, so a check can `return vt_check_reject(...)`. */
#if defined(__GNUC__)
static inline bool vt_check_reject(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
static inline bool vt_check_reject(char *why, size_t why_size, const char *fmt, ...) {
    if (why && why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* Size of dimension i: ne[i] within ndim, 1 beyond it. */
static inline int64_t vt_tensor_dim(const vt_tensor *t, int i) { return i < t->ndim ? t->ne[i] : 1; }
/* Rows of ne[0] elements: the product of dimensions 1..3. */
static inline int64_t vt_tensor_rows(const vt_tensor *t) {
    return vt_tensor_dim(t, 1) * vt_tensor_dim(t, 2) * vt_tensor_dim(t, 3);
}
static inline int64_t vt_tensor_elements(const vt_tensor *t) { return vt_tensor_dim(t, 0) * vt_tensor_rows(t); }
/* Same size in every dimension (ndim may differ by trailing 1s). */
static inline bool vt_tensor_same_shape(const vt_tensor *a, const vt_tensor *b) {
    for (int i = 0; i < VT_MAX_DIMS; i++)
        if (vt_tensor_dim(a, i) != vt_tensor_dim(b, i)) return false;
    return true;
}

static inline bool vt_check_n_src(const vt_node *node, int n, char *why, size_t why_size) {
    if (node->n_src != n) return vt_check_reject(why, why_size, "has %d sources, want %d", node->n_src, n);
    return true;
}

/* One well-formed tensor of at most max_ndim dimensions whose dtype passes
 * dtype_ok (vt_dtype_is_float, vt_dtype_is_weight, vt_dtype_is_valid, ...). */
static inline bool vt_check_tensor(const vt_tensor *t, const char *what, int max_ndim, bool (*dtype_ok)(int32_t dtype),
                                   char *why, size_t why_size) {
    if (!dtype_ok(t->dtype))
        return vt_check_reject(why, why_size, "%s has dtype %s (id %d), outside the convention", what,
                               vt_dtype_name(t->dtype), (int)t->dtype);
    if (t->ndim < 1 || t->ndim > max_ndim || t->ndim > VT_MAX_DIMS)
        return vt_check_reject(why, why_size, "%s has ndim %d, want 1..%d", what, (int)t->ndim, max_ndim);
    int64_t elements = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->ne[i] < 1) return vt_check_reject(why, why_size, "%s has ne[%d] = %lld", what, i, (long long)t->ne[i]);
        if (t->ne[i] > VT_CHECK_MAX_ELEMENTS / elements) return vt_check_reject(why, why_size, "%s is too large", what);
        elements *= t->ne[i];
    }
    const size_t row = vt_row_size(t->dtype, t->ne[0]);
    if (row == 0)
        return vt_check_reject(why, why_size, "%s: ne[0] = %lld is not a whole number of %s blocks", what,
                               (long long)t->ne[0], vt_dtype_name(t->dtype));
    /* Strides are optional in a query; when given they must be the contiguous
     * ones. A dimension of size 1 is never stepped over, so its stride is free. */
    if (t->ndim > 1 && t->nb[1] != 0) {
        size_t expect = row;
        for (int i = 1; i < t->ndim; i++) {
            if (t->ne[i] > 1 && t->nb[i] != expect)
                return vt_check_reject(why, why_size, "%s is not contiguous: nb[%d] = %zu, want %zu", what, i, t->nb[i],
                                       expect);
            expect *= (size_t)t->ne[i];
        }
    }
    return true;
}

/* The same with one exact dtype. */
static inline bool vt_check_tensor_of(const vt_tensor *t, const char *what, int max_ndim, int32_t dtype, char *why,
                                      size_t why_size) {
    if (t->dtype != dtype)
        return vt_check_reject(why, why_size, "%s has dtype %s, want %s", what, vt_dtype_name(t->dtype),
                               vt_dtype_name(dtype));
    return vt_check_tensor(t, what, max_ndim, vt_dtype_is_valid, why, why_size);
}

/* ---- The operand conventions of vt_backend.h, op by op ---------------- */
/* What a node must be for the reference backend to run it; a backend that
 * accepts a subset checks these first and then its own limits. */

static inline bool vt_check_matmul(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *w = &node->src[0], *x = &node->src[1], *y = &node->dst;
    if (!vt_check_n_src(node, 2, why, why_size)) return false;
    if (!vt_check_tensor(w, "src0 (W)", 2, vt_dtype_is_weight, why, why_size)) return false;
    if (!vt_check_tensor_of(x, "src1 (X)", 2, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor(y, "dst (Y)", 2, vt_dtype_is_float, why, why_size)) return false;
    int64_t K = w->ne[0], N = vt_tensor_dim(w, 1), M = vt_tensor_dim(x, 1);
    if (x->ne[0] != K)
        return vt_check_reject(why, why_size, "X has %lld columns, W has K = %lld", (long long)x->ne[0], (long long)K);
    if (y->ne[0] != N || vt_tensor_dim(y, 1) != M)
        return vt_check_reject(why, why_size, "Y is {%lld, %lld}, want {N=%lld, M=%lld}", (long long)y->ne[0],
                          (long long)vt_tensor_dim(y, 1), (long long)N, (long long)M);
    return true;
}

static inline bool vt_check_attention(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *q = &node->src[0], *kc = &node->src[1], *vc = &node->src[2];
    const vt_tensor *tables = &node->src[3], *positions = &node->src[4], *seqs = &node->src[5], *o = &node->dst;
    const vt_attention_params *p = &node->params.attention;
    if (!vt_check_n_src(node, 6, why, why_size)) return false;
    if (!vt_check_tensor_of(q, "src0 (Q)", 3, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor(kc, "src1 (K cache)", 4, vt_dtype_is_kv_cache, why, why_size)) return false;
    if (!vt_check_tensor(vc, "src2 (V cache)", 4, vt_dtype_is_kv_cache, why, why_size)) return false;
    if (!vt_check_tensor_of(tables, "src3 (block tables)", 2, VT_I32, why, why_size)) return false;
    if (!vt_check_tensor_of(positions, "src4 (positions)", 1, VT_I32, why, why_size)) return false;
    if (!vt_check_tensor_of(seqs, "src5 (sequence index)", 1, VT_I32, why, why_size)) return false;
    if (!vt_check_tensor_of(o, "dst (O)", 3, VT_F32, why, why_size)) return false;

    int64_t D = q->ne[0], H = vt_tensor_dim(q, 1), T = vt_tensor_dim(q, 2);
    int64_t KVH = vt_tensor_dim(kc, 1), BS = vt_tensor_dim(kc, 2);
    if (kc->ne[0] != D) return vt_check_reject(why, why_size, "K cache head dim %lld != Q head dim %lld", (long long)kc->ne[0], (long long)D);
    if (!vt_tensor_same_shape(kc, vc)) return vt_check_reject(why, why_size, "K and V caches differ in shape");
    if (H % KVH != 0) return vt_check_reject(why, why_size, "%lld query heads are not a multiple of %lld kv heads", (long long)H, (long long)KVH);
    if (!vt_tensor_same_shape(o, q)) return vt_check_reject(why, why_size, "O is not shaped like Q {D, H, T}");
    if (positions->ne[0] != T || seqs->ne[0] != T)
        return vt_check_reject(why, why_size, "positions/sequence index have %lld/%lld entries for %lld tokens",
                          (long long)positions->ne[0], (long long)seqs->ne[0], (long long)T);
    if (p->block_size != BS)
        return vt_check_reject(why, why_size, "params.block_size %d != cache block size %lld", (int)p->block_size, (long long)BS);
    if (p->n_seqs < 1 || p->max_blocks_per_seq < 1 || tables->ne[0] != p->max_blocks_per_seq ||
        vt_tensor_dim(tables, 1) != p->n_seqs)
        return vt_check_reject(why, why_size, "block tables {%lld, %lld} do not match params {max_blocks_per_seq=%d, n_seqs=%d}",
                          (long long)tables->ne[0], (long long)vt_tensor_dim(tables, 1), (int)p->max_blocks_per_seq, (int)p->n_seqs);
    if (!isfinite(p->scale)) return vt_check_reject(why, why_size, "scale is not finite");
    return true;
}

static inline bool vt_check_reshape_and_cache(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *k = &node->src[0], *v = &node->src[1], *kc = &node->src[2], *vc = &node->src[3];
    const vt_tensor *slots = &node->src[4];
    if (!vt_check_n_src(node, 5, why, why_size)) return false;
    if (!vt_check_tensor(k, "src0 (K)", 3, vt_dtype_is_float, why, why_size)) return false;
    if (!vt_check_tensor(v, "src1 (V)", 3, vt_dtype_is_float, why, why_size)) return false;
    if (!vt_check_tensor(kc, "src2 (K cache)", 4, vt_dtype_is_kv_cache, why, why_size)) return false;
    if (!vt_check_tensor(vc, "src3 (V cache)", 4, vt_dtype_is_kv_cache, why, why_size)) return false;
    if (!vt_check_tensor_of(slots, "src4 (slot mapping)", 1, VT_I64, why, why_size)) return false;
    if (node->dst.ndim != 0) return vt_check_reject(why, why_size, "dst is unused and must have ndim 0, has %d", (int)node->dst.ndim);
    if (!vt_tensor_same_shape(k, v)) return vt_check_reject(why, why_size, "K and V differ in shape");
    if (!vt_tensor_same_shape(kc, vc)) return vt_check_reject(why, why_size, "K and V caches differ in shape");
    if (kc->ne[0] != k->ne[0] || vt_tensor_dim(kc, 1) != vt_tensor_dim(k, 1))
        return vt_check_reject(why, why_size, "K rows are {%lld, %lld}, cache rows {%lld, %lld}", (long long)k->ne[0],
                          (long long)vt_tensor_dim(k, 1), (long long)kc->ne[0], (long long)vt_tensor_dim(kc, 1));
    if (slots->ne[0] != vt_tensor_dim(k, 2))
        return vt_check_reject(why, why_size, "slot mapping has %lld entries for %lld tokens", (long long)slots->ne[0],
                          (long long)vt_tensor_dim(k, 2));
    return true;
}

static inline bool vt_check_rms_norm(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *x = &node->src[0], *w = &node->src[1], *y = &node->dst;
    if (!vt_check_n_src(node, 2, why, why_size)) return false;
    /* X {D, R}; R may be split over more dimensions (Qwen3's per-head
     * QK-norm runs on a {head_dim, heads, T} view). */
    if (!vt_check_tensor_of(x, "src0 (X)", 4, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(w, "src1 (weight)", 1, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor(y, "dst", 4, vt_dtype_is_float, why, why_size)) return false;
    if (w->ne[0] != x->ne[0])
        return vt_check_reject(why, why_size, "weight has %lld values for rows of %lld", (long long)w->ne[0], (long long)x->ne[0]);
    if (!vt_tensor_same_shape(x, y)) return vt_check_reject(why, why_size, "dst is not shaped like X");
    float eps = node->params.rms_norm.eps;
    if (!(eps >= 0.0f) || !isfinite(eps)) return vt_check_reject(why, why_size, "eps %g is not a finite value >= 0", (double)eps);
    return true;
}

static inline bool vt_check_rope(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *x = &node->src[0], *pos = &node->src[1], *y = &node->dst;
    const vt_rope_params *p = &node->params.rope;
    if (node->n_src != 2 && node->n_src != 3)
        return vt_check_reject(why, why_size, "has %d sources, want 2 (or 3 with frequency factors)", node->n_src);
    if (!vt_check_tensor_of(x, "src0 (X)", 3, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(pos, "src1 (positions)", 1, VT_I32, why, why_size)) return false;
    if (!vt_check_tensor(y, "dst", 3, vt_dtype_is_float, why, why_size)) return false;
    if (!vt_tensor_same_shape(x, y)) return vt_check_reject(why, why_size, "dst is not shaped like X {D, heads, T}");
    if (pos->ne[0] != vt_tensor_dim(x, 2))
        return vt_check_reject(why, why_size, "%lld positions for %lld tokens", (long long)pos->ne[0], (long long)vt_tensor_dim(x, 2));
    if (p->n_rot < 2 || p->n_rot % 2 != 0 || p->n_rot > x->ne[0])
        return vt_check_reject(why, why_size, "n_rot %d must be even, >= 2 and <= head dim %lld", (int)p->n_rot, (long long)x->ne[0]);
    if (p->mode != VT_ROPE_NORM && p->mode != VT_ROPE_NEOX) return vt_check_reject(why, why_size, "unknown rope mode %d", (int)p->mode);
    if (!(p->freq_base > 0.0f) || !isfinite(p->freq_base) || !isfinite(p->freq_scale))
        return vt_check_reject(why, why_size, "freq_base %g / freq_scale %g out of range", (double)p->freq_base, (double)p->freq_scale);
    if (node->n_src == 3) {
        if (!vt_check_tensor_of(&node->src[2], "src2 (frequency factors)", 1, VT_F32, why, why_size)) return false;
        if (node->src[2].ne[0] != p->n_rot / 2)
            return vt_check_reject(why, why_size, "%lld frequency factors for n_rot %d (want n_rot / 2)",
                                   (long long)node->src[2].ne[0], (int)p->n_rot);
    }
    return true;
}

static inline bool vt_check_swiglu(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *gate = &node->src[0], *up = &node->src[1], *y = &node->dst;
    if (!vt_check_n_src(node, 2, why, why_size)) return false;
    if (!vt_check_tensor_of(gate, "src0 (gate)", 2, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(up, "src1 (up)", 2, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(y, "dst", 2, VT_F32, why, why_size)) return false;
    if (!vt_tensor_same_shape(gate, up) || !vt_tensor_same_shape(gate, y))
        return vt_check_reject(why, why_size, "gate, up and dst must all be {F, M}");
    return true;
}

static inline bool vt_check_add(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *a = &node->src[0], *b = &node->src[1], *y = &node->dst;
    if (!vt_check_n_src(node, 2, why, why_size)) return false;
    if (!vt_check_tensor_of(a, "src0 (A)", 2, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(b, "src1 (B)", 2, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor(y, "dst", 2, vt_dtype_is_float, why, why_size)) return false;
    if (b->ne[0] != a->ne[0] || (vt_tensor_rows(b) != 1 && vt_tensor_rows(b) != vt_tensor_rows(a)))
        return vt_check_reject(why, why_size, "B {%lld, %lld} is neither {N, M} nor {N, 1} for A {%lld, %lld}", (long long)b->ne[0],
                          (long long)vt_tensor_rows(b), (long long)a->ne[0], (long long)vt_tensor_rows(a));
    if (!vt_tensor_same_shape(a, y)) return vt_check_reject(why, why_size, "dst is not shaped like A");
    return true;
}

static inline bool vt_check_get_rows(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *table = &node->src[0], *ids = &node->src[1], *y = &node->dst;
    if (!vt_check_n_src(node, 2, why, why_size)) return false;
    if (!vt_check_tensor(table, "src0 (table)", 2, vt_dtype_is_weight, why, why_size)) return false;
    if (!vt_check_tensor_of(ids, "src1 (ids)", 1, VT_I32, why, why_size)) return false;
    if (!vt_check_tensor_of(y, "dst", 2, VT_F32, why, why_size)) return false;
    if (y->ne[0] != table->ne[0] || vt_tensor_dim(y, 1) != ids->ne[0])
        return vt_check_reject(why, why_size, "dst is {%lld, %lld}, want {D=%lld, M=%lld}", (long long)y->ne[0],
                          (long long)vt_tensor_dim(y, 1), (long long)table->ne[0], (long long)ids->ne[0]);
    return true;
}

static inline bool vt_check_convert(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *x = &node->src[0], *y = &node->dst;
    if (!vt_check_n_src(node, 1, why, why_size)) return false;
    if (!vt_check_tensor(x, "src0", 4, vt_dtype_is_float, why, why_size)) return false;
    if (!vt_check_tensor(y, "dst", 4, vt_dtype_is_float, why, why_size)) return false;
    if (!vt_tensor_same_shape(x, y)) return vt_check_reject(why, why_size, "dst is not shaped like src0");
    return true;
}

/* 1.4: the mixture-of-experts ops. */

static inline bool vt_check_moe_route(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *logits = &node->src[0], *ids = &node->dst;
    if (!vt_check_n_src(node, 1, why, why_size)) return false;
    if (!vt_check_tensor_of(logits, "src0 (router logits)", 2, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(ids, "dst (expert ids)", 2, VT_I32, why, why_size)) return false;
    const int64_t NE = logits->ne[0], U = ids->ne[0];
    if (node->params.moe.n_used != U || U > NE)
        return vt_check_reject(why, why_size, "dst picks %lld of %lld experts, params.moe.n_used is %d", (long long)U,
                               (long long)NE, (int)node->params.moe.n_used);
    if (vt_tensor_dim(ids, 1) != vt_tensor_dim(logits, 1))
        return vt_check_reject(why, why_size, "dst has %lld tokens, the logits %lld", (long long)vt_tensor_dim(ids, 1),
                               (long long)vt_tensor_dim(logits, 1));
    return true;
}

static inline bool vt_check_moe_matmul(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *w = &node->src[0], *x = &node->src[1], *ids = &node->src[2], *y = &node->dst;
    if (!vt_check_n_src(node, 3, why, why_size)) return false;
    if (!vt_check_tensor(w, "src0 (W)", 3, vt_dtype_is_weight, why, why_size)) return false;
    if (!vt_check_tensor_of(x, "src1 (X)", 3, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(ids, "src2 (expert ids)", 2, VT_I32, why, why_size)) return false;
    if (!vt_check_tensor_of(y, "dst (Y)", 3, VT_F32, why, why_size)) return false;
    const int64_t K = w->ne[0], N = vt_tensor_dim(w, 1), U = ids->ne[0], T = vt_tensor_dim(ids, 1);
    if (x->ne[0] != K)
        return vt_check_reject(why, why_size, "X has %lld columns, W has K = %lld", (long long)x->ne[0], (long long)K);
    const bool shared = x->ndim <= 2 && vt_tensor_dim(x, 1) == T;
    /* 3-D only: a 2-D {K, U} with T = 1 would read as either form, and the
     * kernels take a 2-D X as shared */
    const bool per_expert = x->ndim == 3 && vt_tensor_dim(x, 1) == U && vt_tensor_dim(x, 2) == T;
    if (!shared && !per_expert)
        return vt_check_reject(why, why_size, "X is {%lld, %lld, %lld}, want {K, T=%lld} or {K, U=%lld, T}",
                               (long long)x->ne[0], (long long)vt_tensor_dim(x, 1), (long long)vt_tensor_dim(x, 2),
                               (long long)T, (long long)U);
    if (y->ne[0] != N || vt_tensor_dim(y, 1) != U || vt_tensor_dim(y, 2) != T)
        return vt_check_reject(why, why_size, "Y is {%lld, %lld, %lld}, want {N=%lld, U=%lld, T=%lld}",
                               (long long)y->ne[0], (long long)vt_tensor_dim(y, 1), (long long)vt_tensor_dim(y, 2),
                               (long long)N, (long long)U, (long long)T);
    if (U > vt_tensor_dim(w, 2))
        return vt_check_reject(why, why_size, "%lld experts used of %lld", (long long)U, (long long)vt_tensor_dim(w, 2));
    return true;
}

static inline bool vt_check_moe_combine(const vt_node *node, char *why, size_t why_size) {
    const vt_tensor *y = &node->src[0], *ids = &node->src[1], *logits = &node->src[2], *out = &node->dst;
    if (!vt_check_n_src(node, 3, why, why_size)) return false;
    if (!vt_check_tensor_of(y, "src0 (Y)", 3, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(ids, "src1 (expert ids)", 2, VT_I32, why, why_size)) return false;
    if (!vt_check_tensor_of(logits, "src2 (router logits)", 2, VT_F32, why, why_size)) return false;
    if (!vt_check_tensor_of(out, "dst", 2, VT_F32, why, why_size)) return false;
    const int64_t N = y->ne[0], U = ids->ne[0], T = vt_tensor_dim(ids, 1);
    if (vt_tensor_dim(y, 1) != U || vt_tensor_dim(y, 2) != T)
        return vt_check_reject(why, why_size, "Y is {%lld, %lld, %lld}, want {N, U=%lld, T=%lld}", (long long)N,
                               (long long)vt_tensor_dim(y, 1), (long long)vt_tensor_dim(y, 2), (long long)U,
                               (long long)T);
    if (vt_tensor_dim(logits, 1) != T || U > logits->ne[0])
        return vt_check_reject(why, why_size, "router logits {%lld, %lld} do not fit %lld experts of %lld tokens",
                               (long long)logits->ne[0], (long long)vt_tensor_dim(logits, 1), (long long)U, (long long)T);
    if (out->ne[0] != N || vt_tensor_dim(out, 1) != T)
        return vt_check_reject(why, why_size, "dst is {%lld, %lld}, want {N=%lld, T=%lld}", (long long)out->ne[0],
                               (long long)vt_tensor_dim(out, 1), (long long)N, (long long)T);
    if (node->params.moe.n_used != U || (node->params.moe.norm_top_k != 0 && node->params.moe.norm_top_k != 1))
        return vt_check_reject(why, why_size, "params.moe {n_used %d, norm_top_k %d} do not match %lld experts used",
                               (int)node->params.moe.n_used, (int)node->params.moe.norm_top_k, (long long)U);
    return true;
}

/* The node follows vt_backend.h's operand conventions for its op. It must
 * also be at least as long as the vt_node this header declares (a shorter
 * one, from an older runtime, lacks fields these checks read) and name a
 * phase. */
static inline bool vt_check_convention(const vt_node *node, char *why, size_t why_size) {
    if (!node) return vt_check_reject(why, why_size, "no node");
    if (node->struct_size < sizeof(vt_node))
        return vt_check_reject(why, why_size, "node of %u bytes, want at least %zu", (unsigned)node->struct_size,
                               sizeof(vt_node));
    if (node->phase != VT_PHASE_PREFILL && node->phase != VT_PHASE_DECODE)
        return vt_check_reject(why, why_size, "unknown phase %d", (int)node->phase);
    if (node->n_src < 0 || node->n_src > VT_MAX_SRC)
        return vt_check_reject(why, why_size, "n_src %d outside 0..%d", (int)node->n_src, VT_MAX_SRC);
    switch (node->op) {
#define VT_CHECK_OP_(ID, name, n_src, weight_src, since_minor, params)                                                \
    case VT_OP_##ID: return vt_check_##name(node, why, why_size);
        VT_OP_LIST(VT_CHECK_OP_)
#undef VT_CHECK_OP_
    default: return vt_check_reject(why, why_size, "op %d is not an op of this ABI", (int)node->op);
    }
}

#ifdef __cplusplus
}
#endif
#endif /* VT_CHECK_H */
