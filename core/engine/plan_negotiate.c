/* plan_negotiate.c — the KV-cache store of every layer (the reason this
 * project exists): the k/v producers (k: rope, v: the v projection or its
 * bias add) and reshape_and_cache must agree on one dtype before the first
 * forward.
 *   1. reshape_and_cache is offered k/v in a dtype that keeps the cache's
 *      precision (the cache dtype, then f32; for a Q8_0 cache f32 alone,
 *      quantized by the store) on the preferred backend, then on the
 *      fallback; only if neither works, k/v in a narrower dtype (a store
 *      widens/narrows to the cache), which the plan then reports;
 *   2. for the k/v dtype it accepts, each producer emits that dtype if the
 *      backend it was placed on can, else a convert node is inserted just
 *      before the store;
 *   3. if nothing works the build fails, saying what was tried and how to
 *      fix it.
 * Every option is judged on the nodes as they would be (what-if vt_nodes):
 * nothing in the plan changes until the chosen one is applied. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan_builder.h"
#include "quant.h"


typedef struct kv_delivery {
    bool direct;         /* the producer emits the dtype itself */
    int32_t convert_on;  /* else: backend of the convert node */
    int convert_class;   /* auto: the convert's shape class, else -1 */
    double convert_cost; /* auto: its measured seconds on convert_on, < 0 unknown */
} kv_delivery;

static void append_why(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append_why(char *why, size_t why_size, const char *fmt, ...) {
    const size_t len = strlen(why);
    if (len + 2 >= why_size) return;
    if (len) snprintf(why + len, why_size - len, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + strlen(why), why_size - strlen(why), fmt, ap);
    va_end(ap);
}

/* Can producer node `prod` deliver its output in dtype d? Appends to `why`. */
static bool can_deliver(vt_builder *b, int32_t prod, int32_t d, kv_delivery *how, char *why, size_t why_size) {
    vt_plan_node *node = &b->g->p->nodes[prod];
    builder_refresh_proto(b, node);
    const vt_tensor out = node->proto.dst;
    *how = (kv_delivery){.direct = false, .convert_on = -1, .convert_class = -1, .convert_cost = 0};
    if (d == out.dtype) {
        how->direct = true;
        return true;
    }
    vt_node emits = node->proto; /* the producer writing d itself */
    emits.dst = vt_tensor_retyped(out, d);
    if (builder_accepts_node(b, node->backend, &emits)) {
        how->direct = true;
        return true;
    }
    vt_node convert; /* else a convert from its output to d */
    memset(&convert, 0, sizeof convert);
    convert.struct_size = sizeof convert;
    convert.op = VT_OP_CONVERT;
    convert.phase = b->g->p->phase;
    convert.n_src = 1;
    convert.src[0] = out;
    convert.dst = vt_tensor_retyped(out, d);
    how->convert_class = builder_node_class(b, &convert);
    int32_t order[VT_AUTO_MAX_BACKENDS];
    const int n_order = builder_backend_order(b, how->convert_class, order, VT_AUTO_MAX_BACKENDS);
    for (int k = 0; k < n_order; k++)
        if (builder_accepts_node(b, order[k], &convert)) {
            how->convert_on = order[k];
            how->convert_cost = vt_auto_costs_get(b->cfg->costs, how->convert_class, order[k]);
            return true;
        }
    const vt_backend_entry *pe = builder_entry(b, node->backend);
    append_why(why, why_size, "%s on '%s' emits no %s and convert %s->%s is declined%s", node->label,
               pe ? pe->name : "?", vt_dtype_name(d), vt_dtype_name(out.dtype), vt_dtype_name(d),
               b->cfg->fallback >= 0 ? " by every allowed backend" : " (no fallback allowed)");
    return false;
}

/* Apply a delivery: change the producer's dtype, or insert a convert node at
 * *at (which then moves on by one). Returns the value holding the output in
 * dtype d. */
static int32_t deliver(vt_builder *b, int32_t prod, int32_t d, const kv_delivery *how, int32_t *at) {
    vt_graph *g = b->g;
    vt_plan *p = g->p;
    const int32_t out = p->nodes[prod].dst;
    if (how->direct) {
        p->values[out].dtype = d;
        builder_refresh_proto(b, &p->nodes[prod]);
        return out;
    }
    const vt_value ov = p->values[out];
    char label[40];
    snprintf(label, sizeof label, "%.30s.to_%s", p->nodes[prod].label, vt_dtype_name(d));
    const int32_t cv = graph_value(g, VT_VAL_ACT, label, d, ov.ndim, ov.ne, ov.scale, ov.scale_dim);
    const int32_t ci = graph_node(g, VT_OP_CONVERT, label, (int32_t[]){out}, 1, cv);
    if (ci < 0) return -1;
    /* appended last; it runs right before the store */
    vt_plan_node node = p->nodes[ci];
    memmove(&p->nodes[*at + 1], &p->nodes[*at], (size_t)(ci - *at) * sizeof node);
    node.backend = how->convert_on;
    node.cost_class = how->convert_class;
    p->nodes[*at] = node;
    builder_refresh_proto(b, &p->nodes[*at]);
    (*at)++;
    return cv;
}

/* Try to store the k/v of store node *si on backend `store` with k/v in
 * dtype d: the store must accept exactly that node and both producers must
 * deliver d. On success with apply the plan gets the deliveries (*si moves
 * past any convert inserted before it) and the placed store; without,
 * nothing changes and *cost gets what the option costs by the measured
 * times (auto): the store plus any convert it forces, an unmeasured convert
 * charged like the store (it moves the same k/v). */
static bool try_kv_store(vt_builder *b, int32_t *si, int32_t store, int32_t d, int32_t k_prod, int32_t v_prod,
                         bool apply, double *cost, char *why, size_t why_size) {
    vt_plan *p = b->g->p;
    builder_refresh_proto(b, &p->nodes[*si]);
    vt_node stores = p->nodes[*si].proto; /* the store reading k/v in d */
    stores.src[0] = vt_tensor_retyped(stores.src[0], d);
    stores.src[1] = vt_tensor_retyped(stores.src[1], d);
    const bool store_ok = builder_accepts_node(b, store, &stores);
    const int store_class = builder_node_class(b, &stores);
    if (!store_ok) {
        const vt_backend_entry *se = builder_entry(b, store);
        append_why(why, why_size, "reshape_and_cache(k %s, v %s -> %s cache) declined by '%s'", vt_dtype_name(d),
                   vt_dtype_name(d), vt_dtype_name(b->cfg->kv->dtype), se ? se->name : "?");
        return false;
    }
    kv_delivery kh, vh;
    if (!can_deliver(b, k_prod, d, &kh, why, why_size) || !can_deliver(b, v_prod, d, &vh, why, why_size)) return false;
    if (!apply) {
        const double s = builder_cost(b, store_class, store);
        *cost = s + (kh.direct ? 0 : kh.convert_cost >= 0 ? kh.convert_cost : s) +
                (vh.direct ? 0 : vh.convert_cost >= 0 ? vh.convert_cost : s);
        return true;
    }
    const int64_t *ne = stores.src[0].ne; /* {D, KVH, T} */
    const int32_t kval = deliver(b, k_prod, d, &kh, si);
    const int32_t vval = kval >= 0 ? deliver(b, v_prod, d, &vh, si) : -1;
    const int32_t k3 = graph_view(b->g, kval, "k3", 3, ne[0], ne[1], ne[2]);
    const int32_t v3 = graph_view(b->g, vval, "v3", 3, ne[0], ne[1], ne[2]);
    if (k3 < 0 || v3 < 0) return false; /* the graph's status says why */
    vt_plan_node *n = &p->nodes[*si];
    n->src[0] = k3;
    n->src[1] = v3;
    n->backend = store;
    n->cost_class = store_class;
    builder_refresh_proto(b, n);
    return true;
}

/* k/v dtypes are tried in two rounds, each over the preferred then the
 * fallback store backend: first the dtypes that reach the cache at the
 * precision asked for (the cache dtype, or f32 which the store rounds once),
 * then the others. So an exact path on the fallback wins over rounding k/v to
 * a narrower dtype on the preferred backend; a plan that must round says so
 * (vt_plan_inexact_stores, --explain, the engine's warning). */
static vt_status negotiate_store(vt_builder *b, int32_t *si) {
    vt_plan *p = b->g->p;
    const vt_plan_node *store_node = &p->nodes[*si];
    const int32_t k_prod = vt_plan_producer(p, store_node->src[0], *si), v_prod = vt_plan_producer(p, store_node->src[1], *si);
    int layer = -1;
    sscanf(store_node->label, "blk.%d.", &layer);
    if (k_prod < 0 || v_prod < 0)
        return graph_fail(b->g, VT_ERR_INTERNAL, "plan build: %s has no k/v producer", store_node->label);
    const int32_t C = b->cfg->kv->dtype;
    const int32_t floats[3] = {VT_F32, VT_F16, VT_BF16};
    int32_t order[3], n_order = 0;
    /* k/v are float activations: a quantized (Q8_0) cache is reached from
     * f32 k/v, which the store quantizes once, or failing that from f16/bf16. */
    if (vt_dtype_is_float(C)) order[n_order++] = C;
    for (int j = 0; j < 3; j++)
        if (floats[j] != C && vt_plan_kv_exact(floats[j], C)) order[n_order++] = floats[j];
    const int n_exact = n_order;
    for (int j = 0; j < 3; j++)
        if (!vt_plan_kv_exact(floats[j], C)) order[n_order++] = floats[j];
    /* the stores' order: preferred, fallback (auto: every candidate) */
    int32_t stores[VT_AUTO_MAX_BACKENDS];
    const int n_stores = builder_backend_order(b, -1, stores, VT_AUTO_MAX_BACKENDS);
    char why[1024] = "";
    for (int round = 0; round < 2; round++) {
        /* auto: the cheapest option of the round by measured time, converts
         * charged; without costs the first option that works */
        int32_t best_store = -1, best_dtype = -1;
        double best_cost = 0;
        for (int s = 0; s < n_stores; s++) {
            for (int j = round ? n_exact : 0; j < (round ? n_order : n_exact); j++) {
                double cost = 0;
                const bool apply = !b->cfg->costs;
                const bool ok = try_kv_store(b, si, stores[s], order[j], k_prod, v_prod, apply, &cost, why, sizeof why);
                if (b->g->status != VT_OK) return b->g->status;
                if (ok && apply) return VT_OK;
                if (ok && (best_store < 0 || cost < best_cost)) {
                    best_store = stores[s], best_dtype = order[j], best_cost = cost;
                }
            }
        }
        if (best_store >= 0) {
            double ignored;
            if (try_kv_store(b, si, best_store, best_dtype, k_prod, v_prod, true, &ignored, why, sizeof why))
                return VT_OK;
            return b->g->status != VT_OK ? b->g->status
                                         : graph_fail(b->g, VT_ERR_INTERNAL,
                                                      "plan build: layer %d's chosen k/v store no longer applies", layer);
        }
    }
    return graph_fail(b->g, VT_ERR_UNSUPPORTED,
                      "plan build refused (%s): cannot store k/v of layer %d in the %s KV cache: %s. Fix: choose another "
                      "kv_cache.dtype, another runtime.backend, or allow a fallback backend (runtime.fallback = reference)",
                      builder_phase_name(b), layer, vt_dtype_name(C), why);
}

vt_status vt_plan_negotiate_kv(vt_builder *b) {
    for (int32_t i = 0; i < b->g->p->n_nodes; i++) {
        if (b->g->p->nodes[i].op != VT_OP_RESHAPE_AND_CACHE) continue;
        vt_status st = negotiate_store(b, &i);
        if (st != VT_OK) return st;
    }
    return VT_OK;
}
