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
