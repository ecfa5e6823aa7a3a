/* graph.c — the pure graph: values, unplaced nodes, and the typed helpers
 * that derive each node's output from its operands (graph.h). */
#include "graph.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

vt_status graph_fail(vt_graph *g, vt_status code, const char *fmt, ...) {
    if (g->status != VT_OK) return g->status; /* the first failure is the one to report */
    va_list ap;
    va_start(ap, fmt);
    vt_failv(g->err, code, fmt, ap);
    va_end(ap);
    g->status = code;
    return code;
}

static int32_t out_of_memory(vt_graph *g) {
    graph_fail(g, VT_ERR_NOMEM, "out of memory building the plan");
    return -1;
}

/* An array of n elements with room for one more (doubling its capacity). */
static bool room_for_one(vt_graph *g, void **array, int32_t n, int32_t *cap, size_t elem) {
    if (n < *cap) return true;
    const int32_t grown = *cap ? *cap * 2 : 256;
    void *a = realloc(*array, (size_t)grown * elem);
    if (!a) return out_of_memory(g) >= 0;
    *array = a;
    *cap = grown;
    return true;
}

/* ---------------------------------------------------------------- values */

int32_t graph_value(vt_graph *g, vt_value_kind kind, const char *name, int32_t dtype, int ndim, const int64_t *ne,
                    vt_scale scale, int scale_dim) {
    if (g->status != VT_OK) return -1;
    vt_plan *p = g->p;
    if (!room_for_one(g, (void **)&p->values, p->n_values, &p->cap_values, sizeof *p->values)) return -1;
    vt_value *v = &p->values[p->n_values];
    memset(v, 0, sizeof *v);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->kind = kind;
    v->dtype = dtype;
    v->ndim = ndim;
    for (int i = 0; i < VT_MAX_DIMS; i++) v->ne[i] = i < ndim ? ne[i] : 1;
    v->scale = scale;
    v->scale_dim = scale_dim;
    v->base = -1;
    v->last_use = -1;
    return p->n_values++;
}

/* An activation of rank ndim whose last dimension scales as `scale`. */
static int32_t activation(vt_graph *g, const char *name, int32_t dtype, int ndim, int64_t ne0, int64_t ne1, int64_t ne2,
                          vt_scale scale) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return graph_value(g, VT_VAL_ACT, name, dtype, ndim, ne, scale, ndim - 1);
}

int32_t graph_view(vt_graph *g, int32_t base, const char *name, int ndim, int64_t ne0, int64_t ne1, int64_t ne2) {
    if (base < 0 || g->status != VT_OK) return -1;
    const vt_value bv = g->p->values[base];
    const int64_t ne[3] = {ne0, ne1, ne2};
    const int32_t id = graph_value(g, VT_VAL_VIEW, name, bv.dtype, ndim, ne, bv.scale, ndim - 1);
    if (id >= 0) g->p->values[id].base = base;
    return id;
}

/* Whether weight value v is tensor t: the same bytes read as the same dtype
 * and shape (a tied output is the embedding itself; two tensors a file
 * places at one offset are not one value: each keeps the dtype and shape
 * the model checked for it). */
static bool value_is_tensor(const vt_value *v, const vt_gguf_tensor *t) {
    if (v->kind != VT_VAL_WEIGHT || v->data != t->data || v->dtype != t->dtype || v->ndim != t->ndim) return false;
    for (int d = 0; d < t->ndim; d++)
        if (v->ne[d] != t->ne[d]) return false;
    return true;
}

int32_t graph_weight(vt_graph *g, const vt_gguf_tensor *t) {
    if (!t || g->status != VT_OK) return -1;
    for (int32_t i = 0; i < g->p->n_values; i++) /* a tied output reuses the embedding's value */
        if (value_is_tensor(&g->p->values[i], t)) return i;
    const int32_t id = graph_value(g, VT_VAL_WEIGHT, t->name, t->dtype, t->ndim, t->ne, VT_SCALE_NONE, 0);
    if (id >= 0) g->p->values[id].data = (void *)t->data;
    return id;
}

int32_t graph_kv_cache(vt_graph *g, int il, int which) {
    if (g->status != VT_OK) return -1;
    const vt_tensor t = vt_kv_cache_tensor(g->kv, il, which);
    char name[40];
    snprintf(name, sizeof name, "blk.%d.%s", il, which ? "v_cache" : "k_cache");
    const int32_t id = graph_value(g, VT_VAL_CACHE, name, t.dtype, 4, t.ne, VT_SCALE_NONE, 0);
    if (id >= 0) g->p->values[id].data = t.data;
    return id;
}

/* ----------------------------------------------------------------- nodes */

int32_t graph_node(vt_graph *g, int32_t op, const char *label, const int32_t *src, int n_src, int32_t dst) {
    if (g->status != VT_OK) return -1;
    for (int i = 0; i < n_src; i++)
        if (src[i] < 0) {
            graph_fail(g, VT_ERR_INTERNAL, "plan build: node %s lacks operand %d", label, i);
            return -1;
        }
    vt_plan *p = g->p;
    if (!room_for_one(g, (void **)&p->nodes, p->n_nodes, &p->cap_nodes, sizeof *p->nodes)) return -1;
    vt_plan_node *n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_src = n_src;
    for (int i = 0; i < n_src; i++) n->src[i] = src[i];
    n->dst = dst;
    n->backend = -1;
    n->cost_class = -1;
    n->cost_dst_dtype = -1;
    snprintf(n->label, sizeof n->label, "%s", label);
    n->proto.struct_size = sizeof(vt_node);
    n->proto.op = op;
    n->proto.phase = p->phase;
    n->proto.n_src = n_src;
    return p->n_nodes++;
}

/* A node of op writing a new f32-or-`dtype` activation shaped {ne0, ne1,
 * ne2} of rank ndim, scaling like value `like`; params copied from `params`
 * (NULL = none). Returns the activation. */
static int32_t op_node(vt_graph *g, int32_t op, const char *label, const int32_t *src, int n_src, int32_t dtype,
                       int ndim, int64_t ne0, int64_t ne1, int64_t ne2, int32_t like, const vt_node *params) {
    for (int i = 0; i < n_src; i++)
        if (src[i] < 0) return -1;
    if (g->status != VT_OK) return -1;
    const int32_t dst = activation(g, label, dtype, ndim, ne0, ne1, ne2, g->p->values[like].scale);
    const int32_t i = dst >= 0 ? graph_node(g, op, label, src, n_src, dst) : -1;
    if (i < 0) return -1;
    if (params) g->p->nodes[i].proto.params = params->params;
    return dst;
}

static const vt_value *value(const vt_graph *g, int32_t v) { return &g->p->values[v]; }

/* An f32 output shaped like value x. */
static int32_t same_shape(vt_graph *g, int32_t op, const char *label, const int32_t *src, int n_src, int32_t x,
                          const vt_node *params) {
    if (x < 0 || g->status != VT_OK) return -1;
    const vt_value *v = value(g, x);
    return op_node(g, op, label, src, n_src, VT_F32, v->ndim, v->ne[0], v->ne[1], v->ne[2], x, params);
}

int32_t graph_matmul(vt_graph *g, const char *label, int32_t w, int32_t x) {
    if (w < 0 || x < 0 || g->status != VT_OK) return -1;
    const int64_t N = value(g, w)->ne[1], M = value(g, x)->ne[1];
    return op_node(g, VT_OP_MATMUL, label, (int32_t[]){w, x}, 2, VT_F32, 2, N, M, 1, x, NULL);
}

int32_t graph_rms_norm(vt_graph *g, const char *label, int32_t x, int32_t w) {
    vt_node params = {.params.rms_norm = g->norm};
    return same_shape(g, VT_OP_RMS_NORM, label, (int32_t[]){x, w}, 2, x, &params);
}

int32_t graph_rope(vt_graph *g, const char *label, int32_t x, int32_t factors) {
    vt_node params = {.params.rope = g->rope};
    return same_shape(g, VT_OP_ROPE, label, (int32_t[]){x, g->p->v_positions, factors}, factors >= 0 ? 3 : 2, x,
                      &params);
}

int32_t graph_add(vt_graph *g, const char *label, int32_t a, int32_t b) {
    return same_shape(g, VT_OP_ADD, label, (int32_t[]){a, b}, 2, a, NULL);
}

int32_t graph_swiglu(vt_graph *g, const char *label, int32_t gate, int32_t up) {
    return same_shape(g, VT_OP_SWIGLU, label, (int32_t[]){gate, up}, 2, gate, NULL);
}

int32_t graph_get_rows(vt_graph *g, const char *label, int32_t table, int32_t ids) {
    if (table < 0 || ids < 0 || g->status != VT_OK) return -1;
    const int64_t D = value(g, table)->ne[0], M = value(g, ids)->ne[0];
    return op_node(g, VT_OP_GET_ROWS, label, (int32_t[]){table, ids}, 2, VT_F32, 2, D, M, 1, ids, NULL);
}

int32_t graph_attention(vt_graph *g, const char *label, int32_t q, int32_t k_cache, int32_t v_cache) {
    const vt_plan *p = g->p;
    vt_node params = {.params.attention = g->attention};
    return same_shape(g, VT_OP_ATTENTION, label,
                      (int32_t[]){q, k_cache, v_cache, p->v_block_tables, p->v_positions, p->v_seq_idx}, 6, q,
                      &params);
}

int32_t graph_store_kv(vt_graph *g, const char *label, int32_t k, int32_t v, int32_t k_cache, int32_t v_cache) {
    return graph_node(g, VT_OP_RESHAPE_AND_CACHE, label, (int32_t[]){k, v, k_cache, v_cache, g->p->v_slots}, 5, -1);
}

int32_t graph_moe_route(vt_graph *g, const char *label, int32_t logits) {
    if (logits < 0 || g->status != VT_OK) return -1;
    vt_node params = {.params.moe = g->moe};
    const int64_t T = value(g, logits)->ne[1];
    return op_node(g, VT_OP_MOE_ROUTE, label, (int32_t[]){logits}, 1, VT_I32, 2, g->moe.n_used, T, 1, logits,
                   &params);
}

int32_t graph_moe_matmul(vt_graph *g, const char *label, int32_t w, int32_t x, int32_t ids) {
    if (w < 0 || x < 0 || ids < 0 || g->status != VT_OK) return -1;
    const int64_t N = value(g, w)->ne[1], U = value(g, ids)->ne[0], T = value(g, ids)->ne[1];
    return op_node(g, VT_OP_MOE_MATMUL, label, (int32_t[]){w, x, ids}, 3, VT_F32, 3, N, U, T, ids, NULL);
}

int32_t graph_moe_combine(vt_graph *g, const char *label, int32_t y, int32_t ids, int32_t logits) {
    if (y < 0 || ids < 0 || logits < 0 || g->status != VT_OK) return -1;
    vt_node params = {.params.moe = g->moe};
    const int64_t N = value(g, y)->ne[0], T = value(g, ids)->ne[1];
    return op_node(g, VT_OP_MOE_COMBINE, label, (int32_t[]){y, ids, logits}, 3, VT_F32, 2, N, T, 1, ids, &params);
}
