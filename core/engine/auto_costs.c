/* auto_costs.c — shape-class keys and the table of measured times that
 * `--backend auto` places by (see auto_costs.h). */
#include "auto_costs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vt/vt_dtype.h"

void vt_auto_costs_init(vt_auto_costs *c) { memset(c, 0, sizeof *c); }

void vt_auto_costs_free(vt_auto_costs *c) {
    free(c->classes);
    c->classes = NULL;
    c->n = c->cap = 0;
}

/* Token counts are bucketed: a class timed at 128 tokens stands for every
 * larger prefill chunk, smaller ones round up to a power of two. */
static long long m_bucket(int64_t m) {
    if (m > VT_AUTO_CALIBRATION_TOKENS) m = VT_AUTO_CALIBRATION_TOKENS;
    long long b = 1;
    while (b < m) b *= 2;
    return b;
}

bool vt_shape_class_key(const vt_node *n, char *key, size_t size) {
    const char *phase = n->phase == VT_PHASE_DECODE ? "decode" : "prefill";
    const char *op = vt_op_name(n->op);
    switch (n->op) {
    case VT_OP_MATMUL:
        snprintf(key, size, "matmul %s w=%s N=%lld K=%lld y=%s M=%lld", phase, vt_dtype_name(n->src[0].dtype),
                 (long long)n->src[0].ne[1], (long long)n->src[0].ne[0], vt_dtype_name(n->dst.dtype),
                 m_bucket(n->src[1].ne[1]));
        return true;
    case VT_OP_MOE_MATMUL: /* as matmul, per expert: the rows of the call spread over U experts each; a
                            * shared X (gate, up) is read once per token, a per-expert one (down) U times */
        snprintf(key, size, "moe_matmul %s w=%s N=%lld K=%lld NE=%lld U=%lld M=%lld x=%s", phase,
                 vt_dtype_name(n->src[0].dtype), (long long)n->src[0].ne[1], (long long)n->src[0].ne[0],
                 (long long)n->src[0].ne[2], (long long)n->src[2].ne[0], m_bucket(n->src[2].ne[1]),
                 n->src[1].ndim == 3 ? "per-expert" : "shared");
        return false;
    case VT_OP_ATTENTION:
        snprintf(key, size, "attention %s kv=%s D=%lld H=%lld KVH=%lld", phase, vt_dtype_name(n->src[1].dtype),
                 (long long)n->src[0].ne[0], (long long)n->src[0].ne[1], (long long)n->src[1].ne[1]);
        return false;
    case VT_OP_RESHAPE_AND_CACHE:
        /* by the cache's dtype, not k/v's: negotiation picks k/v's dtype after
         * the store's backend, and every option must find a time here */
        snprintf(key, size, "reshape_and_cache %s cache=%s D=%lld KVH=%lld", phase, vt_dtype_name(n->src[2].dtype),
                 (long long)n->src[0].ne[0], (long long)n->src[0].ne[1]);
        return false;
    case VT_OP_GET_ROWS:
        snprintf(key, size, "get_rows %s table=%s D=%lld", phase, vt_dtype_name(n->src[0].dtype),
                 (long long)n->src[0].ne[0]);
        return false;
    case VT_OP_ADD: /* a bias (one row for all) and a residual (a row each) are different work */
        snprintf(key, size, "add %s %s->%s n0=%lld b=%s", phase, vt_dtype_name(n->src[0].dtype),
                 vt_dtype_name(n->dst.dtype), (long long)n->src[0].ne[0],
                 (n->src[1].ndim < 2 || n->src[1].ne[1] == 1) ? "row" : "rows");
        return true;
    default:
        snprintf(key, size, "%s %s %s->%s n0=%lld", op, phase, vt_dtype_name(n->src[0].dtype),
                 vt_dtype_name(n->dst.dtype), (long long)n->src[0].ne[0]);
        return true;
    }
}

bool vt_shape_class_names_dst(const vt_node *n) {
    char key[VT_AUTO_KEY_SIZE];
    return vt_shape_class_key(n, key, sizeof key);
}

int vt_auto_costs_find(const vt_auto_costs *c, const char *key) {
    for (int k = 0; k < c->n; k++)
        if (strcmp(c->classes[k].key, key) == 0) return k;
    return -1;
}

int vt_auto_costs_class(vt_auto_costs *c, const char *key) {
    int k = vt_auto_costs_find(c, key);
    if (k >= 0) return k;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 32;
        vt_cost_class *grown = realloc(c->classes, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        c->classes = grown;
        c->cap = cap;
    }
    vt_cost_class *cl = &c->classes[c->n];
    snprintf(cl->key, sizeof cl->key, "%s", key);
    for (int b = 0; b < VT_AUTO_MAX_BACKENDS; b++) cl->seconds[b] = VT_COST_UNMEASURED;
    return c->n++;
}

double vt_auto_costs_get(const vt_auto_costs *c, int k, int b) {
    if (!c || k < 0 || k >= c->n || b < 0 || b >= VT_AUTO_MAX_BACKENDS) return VT_COST_UNMEASURED;
    return c->classes[k].seconds[b];
}

double vt_auto_costs_weighed(const vt_auto_costs *c, int k, int b, int preferred) {
    const double s = vt_auto_costs_get(c, k, b);
    return s >= 0 && b == preferred ? s / VT_AUTO_MARGIN : s;
}

int vt_auto_costs_best(const vt_auto_costs *c, int k, int preferred) {
    int best = -1;
    double best_s = 0;
    for (int j = -1; j < VT_AUTO_MAX_BACKENDS; j++) { /* the preferred backend first: it keeps ties */
        const int b = j < 0 ? preferred : j;
        if (b < 0 || (j >= 0 && b == preferred) || !c->candidate[b] || c->failed[b]) continue;
        const double s = vt_auto_costs_weighed(c, k, b, preferred);
        if (s >= 0 && (best < 0 || s < best_s)) best = b, best_s = s;
    }
    return best;
}
