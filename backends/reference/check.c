/* check.c — what every op of the reference shares around its own operand
 * rules: row bytes and the run-time validation that logs a breach (the
 * per-tensor checks and dimension helpers are vt/vt_check.h's). */
#include <stdarg.h>
#include <stdio.h>

#include "reference.h"

size_t ref_row_bytes(const ref_ctx *c, const vt_tensor *t) { return c->host->row_size(t->dtype, t->ne[0]); }

bool ref_validate(const ref_ctx *c, const vt_node *node, const char *op) {
    char why[256];
    if (!vt_check_convention(node, why, sizeof why)) {
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

/* sum_k a[k] * b[k] in double. Four partial sums over k mod 4 (added
 * pairwise at the end) rather than one: the same double-precision result to
 * within rounding of the last bits, without one long chain of dependent adds
 * that would make the oracle several times slower. */
double ref_dot_f64(const float *a, const float *b, int64_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        s0 += (double)a[k] * (double)b[k];
        s1 += (double)a[k + 1] * (double)b[k + 1];
        s2 += (double)a[k + 2] * (double)b[k + 2];
        s3 += (double)a[k + 3] * (double)b[k + 3];
    }
    for (; k < n; k++) s0 += (double)a[k] * (double)b[k];
    return (s0 + s1) + (s2 + s3);
}
