/* check.c — the operand checks every op of the reference shares: dimension
 * helpers, well-formedness of one tensor (dtype classes: vt/vt_dtype.h). */
#include <stdarg.h>
#include <stdio.h>

#include "reference.h"

int64_t ref_dim(const vt_tensor *t, int i) { return i < t->ndim ? t->ne[i] : 1; }

int64_t ref_rows(const vt_tensor *t) { return ref_dim(t, 1) * ref_dim(t, 2) * ref_dim(t, 3); }

bool ref_same_shape(const vt_tensor *a, const vt_tensor *b) {
    for (int i = 0; i < VT_MAX_DIMS; i++)
        if (ref_dim(a, i) != ref_dim(b, i)) return false;
    return true;
}

bool ref_reject(char *why, size_t why_size, const char *fmt, ...) {
    if (why && why_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_size, fmt, ap);
        va_end(ap);
    }
    return false;
}

bool ref_check_n_src(const vt_node *node, int n, char *why, size_t why_size) {
    if (node->n_src != n) return ref_reject(why, why_size, "has %d sources, want %d", node->n_src, n);
    return true;
}

size_t ref_row_bytes(const ref_ctx *c, const vt_tensor *t) { return c->host->row_size(t->dtype, t->ne[0]); }

/* Tensors larger than this many elements are refused: keeps every byte
 * offset computed from ne[] far from overflowing size_t. */
#define REF_MAX_ELEMENTS ((int64_t)1 << 48)

bool ref_check_tensor(const ref_ctx *c, const vt_tensor *t, const char *what, int max_ndim,
                      bool (*dtype_ok)(int32_t dtype), char *why, size_t why_size) {
    const vt_host *h = c->host;
    if (!dtype_ok(t->dtype)) return ref_reject(why, why_size, "%s has dtype %s (id %d), outside the convention",
                                               what, h->dtype_name(t->dtype), (int)t->dtype);
    if (t->ndim < 1 || t->ndim > max_ndim)
        return ref_reject(why, why_size, "%s has ndim %d, want 1..%d", what, (int)t->ndim, max_ndim);
    int64_t elements = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->ne[i] < 1) return ref_reject(why, why_size, "%s has ne[%d] = %lld", what, i, (long long)t->ne[i]);
        if (t->ne[i] > REF_MAX_ELEMENTS / elements) return ref_reject(why, why_size, "%s is too large", what);
        elements *= t->ne[i];
    }
    size_t row = h->row_size(t->dtype, t->ne[0]);
    if (row == 0)
        return ref_reject(why, why_size, "%s: ne[0] = %lld is not a whole number of %s blocks", what,
                          (long long)t->ne[0], h->dtype_name(t->dtype));
    /* Strides are optional in a query; when given they must be the contiguous
     * ones. A dimension of size 1 is never stepped over, so its stride is free. */
    if (t->ndim > 1 && t->nb[1] != 0) {
        size_t expect = row;
        for (int i = 1; i < t->ndim; i++) {
            if (t->ne[i] > 1 && t->nb[i] != expect)
                return ref_reject(why, why_size, "%s is not contiguous: nb[%d] = %zu, want %zu", what, i, t->nb[i],
                                  expect);
            expect *= (size_t)t->ne[i];
        }
    }
    return true;
}

/* Every dtype vt knows; ref_check_tensor_of has already pinned the exact one. */

bool ref_check_tensor_of(const ref_ctx *c, const vt_tensor *t, const char *what, int max_ndim, int32_t dtype,
                         char *why, size_t why_size) {
    if (t->dtype != dtype)
        return ref_reject(why, why_size, "%s has dtype %s, want %s", what, c->host->dtype_name(t->dtype),
                          c->host->dtype_name(dtype));
    return ref_check_tensor(c, t, what, max_ndim, vt_dtype_is_valid, why, why_size);
}

bool ref_validate(const ref_ctx *c, const vt_node *node, const char *op,
                  bool (*check)(const ref_ctx *, const vt_node *, char *, size_t)) {
    char why[256];
    if (!check(c, node, why, sizeof why)) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "%s: node breaks the operand convention: %s", op, why);
        return false;
    }
    /* supports() saw no data; a run must have it for every operand used */
    for (int i = 0; i < node->n_src; i++) {
        if (!node->src[i].data) {
            c->host->log(VT_LOG_ERROR, REF_NAME, "%s: src%d has no data", op, i);
            return false;
        }
    }
    if (node->dst.ndim > 0 && !node->dst.data) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "%s: dst has no data", op);
        return false;
    }
    return true;
}
