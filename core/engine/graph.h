/* graph.h — building a model's forward pass as a pure graph: values and
 * nodes, no backend yet.
 *
 * An architecture (arch_*.c) describes its layers with the typed helpers
 * below; each derives its output's shape and dtype from its operands (a
 * matmul's rows from its weight, a norm's shape from its input), so an
 * architecture never spells a shape except where it reshapes (graph_view).
 * The graph lives in the plan's value and node arrays; placement and
 * negotiation (plan_build.c, plan_negotiate.c) run over it afterwards.
 *
 * Errors are sticky: a helper called after a failure (or given an operand
 * id < 0) does nothing and returns -1, so an architecture builds straight
 * through and checks graph->status once at the end. */
#ifndef VT_CORE_GRAPH_H
#define VT_CORE_GRAPH_H

#include "plan.h"

typedef struct vt_graph {
    vt_plan *p;
    const vt_model *model;
    vt_status status; /* the first failure; VT_OK while building goes well */
    vt_error *err;
    /* the parameterised ops' params, from the model's hyperparameters */
    vt_rms_norm_params norm;
    vt_rope_params rope;
    vt_attention_params attention;
    vt_moe_params moe;
    /* the KV cache whose per-layer stores graph_kv_cache names */
    const vt_kv_cache *kv;
} vt_graph;

/* ---- values ---- */

/* A new value of any kind (the primitive the helpers use). -1 on failure. */
int32_t graph_value(vt_graph *g, vt_value_kind kind, const char *name, int32_t dtype, int ndim, const int64_t *ne,
                    vt_scale scale, int scale_dim);
/* The file's tensor t as a weight value (one value per tensor, however often read). */
int32_t graph_weight(vt_graph *g, const vt_gguf_tensor *t);
/* `base` seen with another shape of the same elements; its last dimension
 * scales with the call as the base's does. */
int32_t graph_view(vt_graph *g, int32_t base, const char *name, int ndim, int64_t ne0, int64_t ne1, int64_t ne2);
/* Layer il's K (which = 0) or V (1) cache store as a value. */
int32_t graph_kv_cache(vt_graph *g, int il, int which);

/* ---- nodes: each returns its output value (-1 on failure) ---- */

/* W x for every column of x: x {K, M...} -> {N, M...}, N = W's rows. */
int32_t graph_matmul(vt_graph *g, const char *label, int32_t w, int32_t x);
/* x / rms(x) * w over rows of x (the graph's norm params). */
int32_t graph_rms_norm(vt_graph *g, const char *label, int32_t x, int32_t w);
/* Rotary embedding of x {D, heads, T} at the call's positions; factors: the
 * model's per-pair frequency factors (a weight value), or -1 for none. */
int32_t graph_rope(vt_graph *g, const char *label, int32_t x, int32_t factors);
/* a + b (b may be a single row). */
int32_t graph_add(vt_graph *g, const char *label, int32_t a, int32_t b);
/* silu(gate) * up. */
int32_t graph_swiglu(vt_graph *g, const char *label, int32_t gate, int32_t up);
/* Rows `ids` of table: {D, V} and ids {M} -> {D, M}, scaling like ids. */
int32_t graph_get_rows(vt_graph *g, const char *label, int32_t table, int32_t ids);
/* Paged attention of q {D, H, T} over the caches, at the call's positions. */
int32_t graph_attention(vt_graph *g, const char *label, int32_t q, int32_t k_cache, int32_t v_cache);
/* Store k and v {D, KVH, T} into the caches at the call's slots. Returns the
 * node's index (it has no output); placement leaves it to negotiation. */
int32_t graph_store_kv(vt_graph *g, const char *label, int32_t k, int32_t v, int32_t k_cache, int32_t v_cache);
/* Each token's n_used experts: logits {NE, T} -> ids {U, T} (i32). */
int32_t graph_moe_route(vt_graph *g, const char *label, int32_t logits);
/* Each token's rows through its experts: w {K, N, NE}, x {K, T} or
 * {K, U, T}, ids {U, T} -> {N, U, T}. */
int32_t graph_moe_matmul(vt_graph *g, const char *label, int32_t w, int32_t x, int32_t ids);
/* The routing-weighted sum of y {N, U, T} -> {N, T}. */
int32_t graph_moe_combine(vt_graph *g, const char *label, int32_t y, int32_t ids, int32_t logits);

/* A node of op over src writing dst (-1 = none), unplaced: the primitive the
 * helpers use and negotiation's converts. Returns its index or -1. */
int32_t graph_node(vt_graph *g, int32_t op, const char *label, const int32_t *src, int n_src, int32_t dst);

/* Fail the build (sticky) with a message; returns the status. */
vt_status graph_fail(vt_graph *g, vt_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
