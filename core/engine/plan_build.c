/* plan_build.c — the forward pass of llama/qwen2/qwen3 as typed nodes, and
 * the negotiation that assigns each node a backend and each edge a dtype.
 *
 * Placement: a node goes to the preferred backend if it accepts the node
 * exactly (op pointer non-NULL and supports() yes), else to the fallback
 * backend, else the build fails naming the op, node, dtypes and backends.
 * A node is offered complete — rank, shapes, dtypes, params, phase — and a
 * last pass re-offers every node as finally built (verify_placement).
 *
 * KV-cache store (the reason this project exists): for each layer the k/v
 * producers (k: rope, v: the v projection or its bias add) and
 * reshape_and_cache must agree on one dtype before the first forward:
 *   1. reshape_and_cache is offered k/v in a dtype that keeps the cache's
 *      precision (the cache dtype, then f32; for a Q8_0 cache f32 alone,
 *      quantized by the store) on the preferred backend, then on
 *      the fallback; only if neither works, k/v in a narrower dtype (a store
 *      widens/narrows to the cache), which the plan then reports;
 *   2. for the k/v dtype it accepts, each producer emits that dtype if the
 *      backend it was placed on can, else a convert node is inserted;
 *   3. if nothing works the build fails, saying what was tried and how to fix it. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"
#include "quant.h"

typedef struct builder {
    const vt_plan_config *cfg;
    vt_plan *p;
    vt_error *err;
} builder;

/* ---------------------------------------------------------------- values */

static int32_t new_value(builder *b, vt_value_kind kind, const char *name, int32_t dtype, int ndim, const int64_t *ne,
                         vt_scale scale, int scale_dim) {
    vt_plan *p = b->p;
    if (p->n_values == p->cap_values) {
        int32_t cap = p->cap_values ? p->cap_values * 2 : 256;
        vt_value *v = realloc(p->values, (size_t)cap * sizeof *v);
        if (!v) return -1;
        p->values = v;
        p->cap_values = cap;
    }
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

/* An activation of rank ndim ({ne0, ne1} or {ne0, ne1, ne2}); its last
 * dimension scales with the call. The rank is explicit, never inferred from
 * sizes: at one token a {D, H, T} value is still rank 3, as the operand
 * conventions (vt_backend.h) and the backends' supports() expect. */
static int32_t act(builder *b, const char *name, int32_t dtype, int ndim, int64_t ne0, int64_t ne1, int64_t ne2,
                   vt_scale scale) {
    int64_t ne[3] = {ne0, ne1, ne2};
    return new_value(b, VT_VAL_ACT, name, dtype, ndim, ne, scale, ndim - 1);
}

/* A view of `base` with another shape and rank; the last dimension scales like the base's. */
static int32_t view(builder *b, int32_t base, const char *name, int ndim, int64_t ne0, int64_t ne1, int64_t ne2) {
    if (base < 0) return -1;
    const vt_value bv = b->p->values[base];
    int64_t ne[3] = {ne0, ne1, ne2};
    int32_t id = new_value(b, VT_VAL_VIEW, name, bv.dtype, ndim, ne, bv.scale, ndim - 1);
    if (id >= 0) b->p->values[id].base = base;
    return id;
}

static int32_t weight(builder *b, const vt_gguf_tensor *t) {
    for (int32_t i = 0; i < b->p->n_values; i++) /* tied output reuses the embedding's value */
        if (b->p->values[i].kind == VT_VAL_WEIGHT && b->p->values[i].data == t->data) return i;
    int32_t id = new_value(b, VT_VAL_WEIGHT, t->name, t->dtype, t->ndim, t->ne, VT_SCALE_NONE, 0);
    if (id >= 0) b->p->values[id].data = (void *)t->data;
    return id;
}

/* ----------------------------------------------------------------- nodes */

static vt_status fail_build(builder *b, vt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vt_failv(b->err, code, fmt, ap);
    va_end(ap);
    return code;
}

static const vt_backend_entry *entry_at(builder *b, int32_t idx) {
    return idx >= 0 ? vt_registry_at(b->cfg->registry, idx) : NULL;
}

/* Fill proto's tensors from the node's values (data NULL, maximum shapes). */
static void refresh_proto(builder *b, vt_plan_node *n) {
    for (int i = 0; i < n->n_src; i++) n->proto.src[i] = vt_plan_value_tensor(b->p, n->src[i], -1, -1, false);
    if (n->dst >= 0) n->proto.dst = vt_plan_value_tensor(b->p, n->dst, -1, -1, false);
}

static bool accepts(builder *b, int32_t backend, vt_plan_node *n) {
    const vt_backend_entry *e = entry_at(b, backend);
    if (!e) return false;
    refresh_proto(b, n);
    return vt_backend_accepts(e, &n->proto);
}

/* Append a node (not yet placed). Returns its index or -1. */
static int32_t new_node(builder *b, int32_t op, const char *label, const int32_t *src, int n_src, int32_t dst) {
    vt_plan *p = b->p;
    for (int i = 0; i < n_src; i++)
        if (src[i] < 0) return -1;
    if (p->n_nodes == p->cap_nodes) {
        int32_t cap = p->cap_nodes ? p->cap_nodes * 2 : 256;
        vt_plan_node *nn = realloc(p->nodes, (size_t)cap * sizeof *nn);
        if (!nn) return -1;
        p->nodes = nn;
        p->cap_nodes = cap;
    }
    vt_plan_node *n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_src = n_src;
    for (int i = 0; i < n_src; i++) n->src[i] = src[i];
    n->dst = dst;
    n->backend = -1;
    n->cost_class = -1;
    snprintf(n->label, sizeof n->label, "%s", label);
    n->proto.struct_size = sizeof(vt_node);
    n->proto.op = op;
    n->proto.phase = p->phase;
    n->proto.n_src = n_src;
    return p->n_nodes++;
}

/* The shape class of node n as it stands (its proto refreshed), registered
 * in the costs; -1 without costs. */
static int node_class(builder *b, vt_plan_node *n) {
    if (!b->cfg->costs) return -1;
    refresh_proto(b, n);
    char key[VT_AUTO_KEY_SIZE];
    vt_shape_class_key(&n->proto, key, sizeof key);
    return vt_auto_costs_class(b->cfg->costs, key);
}

/* Seconds of class k on backend i as placement weighs them: the preferred
 * backend's divided by VT_AUTO_MARGIN (another backend must beat it by more
 * than that), or a large number when not measured (so the order among
 * unmeasured backends decides). */
static double cost_or_unknown(builder *b, int k, int32_t i) {
    const double s = vt_auto_costs_weighed(b->cfg->costs, k, i, b->cfg->preferred);
    return s >= 0 ? s : 1e30;
}

/* Backends to offer a node of class k, in order. Without costs: preferred,
 * fallback. With costs (auto): the candidates by their measured time of the
 * class, cheapest first, the preferred backend ahead unless another beats it
 * by more than VT_AUTO_MARGIN; ties and unmeasured ones keep the plain order
 * (preferred, fallback, the others by registry index); a backend that failed
 * calibration never. Returns how many. */
static int backend_order(builder *b, int k, int32_t *order, int max) {
    const vt_plan_config *cfg = b->cfg;
    int n = 0;
    if (!cfg->costs) {
        order[n++] = cfg->preferred;
        if (cfg->fallback >= 0 && cfg->fallback != cfg->preferred) order[n++] = cfg->fallback;
        return n;
    }
    const vt_auto_costs *c = cfg->costs;
    const int count = vt_registry_count(cfg->registry);
    int32_t plain[VT_AUTO_MAX_BACKENDS];
    int n_plain = 0;
    plain[n_plain++] = cfg->preferred;
    if (cfg->fallback >= 0 && cfg->fallback != cfg->preferred) plain[n_plain++] = cfg->fallback;
    for (int32_t i = 0; i < count && i < VT_AUTO_MAX_BACKENDS; i++)
        if (i != cfg->preferred && i != cfg->fallback) plain[n_plain++] = i;
    for (int j = 0; j < n_plain && n < max; j++) {
        const int32_t i = plain[j];
        const vt_backend_entry *e = entry_at(b, i);
        if (!e || e->state != VT_BACKEND_LOADED || c->failed[i]) continue;
        order[n++] = i;
    }
    /* stable insertion sort by cost: equal costs keep the plain order */
    for (int j = 1; j < n; j++) {
        const int32_t x = order[j];
        const double cx = cost_or_unknown(b, k, x);
        int m = j;
        while (m > 0 && cost_or_unknown(b, k, order[m - 1]) > cx) {
            order[m] = order[m - 1];
            m--;
        }
        order[m] = x;
    }
    return n;
}

/* Place node i on the first backend of backend_order that accepts it; or fail. */
static vt_status place(builder *b, int32_t i) {
    if (i < 0) return fail_build(b, VT_ERR_NOMEM, "out of memory building the plan");
    vt_plan_node *n = &b->p->nodes[i];
    n->cost_class = node_class(b, n);
    int32_t order[VT_AUTO_MAX_BACKENDS];
    const int n_order = backend_order(b, n->cost_class, order, VT_AUTO_MAX_BACKENDS);
    for (int j = 0; j < n_order; j++)
        if (accepts(b, order[j], n)) {
            n->backend = order[j];
            return VT_OK;
        }
    char desc[256];
    vt_plan_describe_node(&n->proto, desc, sizeof desc);
    const vt_backend_entry *pe = entry_at(b, b->cfg->preferred), *fe = entry_at(b, b->cfg->fallback);
    return fail_build(b, VT_ERR_UNSUPPORTED,
                      "plan build refused (%s): node %s %s is declined by backend '%s'%s%s%s. Fix: choose another "
                      "--backend, or allow a fallback backend (--fallback reference)",
                      b->p->phase == VT_PHASE_DECODE ? "decode" : "prefill", n->label, desc, pe ? pe->name : "?",
                      fe ? " and by fallback '" : " and there is no fallback", fe ? fe->name : "", fe ? "'" : "");
}

/* A placed node with an activation output of rank ndim in `dtype`. `params`
 * (NULL = none) supplies the op's parameters: they are set before placement
 * because supports() judges them too. */
static int32_t op_out(builder *b, int32_t op, const char *label, int32_t dtype, const int32_t *src, int n_src,
                      int ndim, int64_t ne0, int64_t ne1, int64_t ne2, vt_scale scale, const vt_node *params,
                      vt_status *st) {
    if (*st != VT_OK) return -1;
    int32_t dst = act(b, label, dtype, ndim, ne0, ne1, ne2, scale);
    int32_t i = dst >= 0 ? new_node(b, op, label, src, n_src, dst) : -1;
    if (i >= 0 && params) b->p->nodes[i].proto.params = params->params;
    *st = place(b, i);
    return *st == VT_OK ? dst : -1;
}

/* The same with an f32 output, what almost every node produces. */
static int32_t op_f32(builder *b, int32_t op, const char *label, const int32_t *src, int n_src, int ndim, int64_t ne0,
                      int64_t ne1, int64_t ne2, vt_scale scale, const vt_node *params, vt_status *st) {
    return op_out(b, op, label, VT_F32, src, n_src, ndim, ne0, ne1, ne2, scale, params, st);
}

/* -------------------------------------------------------- KV negotiation */

typedef struct kv_delivery {
    bool direct;         /* the producer emits the dtype itself */
    int32_t convert_on;  /* else: backend of the convert node */
    int convert_class;   /* auto: the convert's shape class, else -1 */
    double convert_cost; /* auto: its measured seconds on convert_on, < 0 unknown */
} kv_delivery;

/* Can producer node `prod` deliver its output in dtype d? Appends to `why`. */
static bool can_deliver(builder *b, int32_t prod, int32_t d, kv_delivery *how, char *why, size_t why_size) {
    /* Copies, not pointers: adding the trial node below may move the arrays. */
    const vt_plan_node node = b->p->nodes[prod];
    const vt_value out = b->p->values[node.dst];
    how->direct = false;
    how->convert_on = -1;
    how->convert_class = -1;
    how->convert_cost = 0;
    if (d == out.dtype) {
        how->direct = true;
        return true;
    }
    b->p->values[node.dst].dtype = d;
    bool ok = accepts(b, node.backend, &b->p->nodes[prod]);
    b->p->values[node.dst].dtype = out.dtype;
    refresh_proto(b, &b->p->nodes[prod]);
    if (ok) {
        how->direct = true;
        return true;
    }
    /* A trial convert node, removed again: its shape is the producer's output. */
    int32_t tmp_dst = new_value(b, VT_VAL_ACT, "trial", d, out.ndim, out.ne, out.scale, out.scale_dim);
    int32_t src[1] = {node.dst};
    int32_t ci = tmp_dst >= 0 ? new_node(b, VT_OP_CONVERT, "trial", src, 1, tmp_dst) : -1;
    bool placed = false;
    if (ci >= 0) {
        how->convert_class = node_class(b, &b->p->nodes[ci]);
        int32_t order[VT_AUTO_MAX_BACKENDS];
        const int n_order = backend_order(b, how->convert_class, order, VT_AUTO_MAX_BACKENDS);
        for (int k = 0; k < n_order && !placed; k++)
            if (accepts(b, order[k], &b->p->nodes[ci])) {
                how->convert_on = order[k];
                how->convert_cost = vt_auto_costs_get(b->cfg->costs, how->convert_class, order[k]);
                placed = true;
            }
        b->p->n_nodes--;
    }
    if (tmp_dst >= 0) b->p->n_values--;
    if (!placed) {
        const vt_backend_entry *pe = entry_at(b, node.backend);
        size_t len = strlen(why);
        snprintf(why + len, why_size - len, "%s%s on '%s' emits no %s and convert %s->%s is declined%s", len ? "; " : "",
                 node.label, pe ? pe->name : "?", vt_dtype_name(d), vt_dtype_name(out.dtype), vt_dtype_name(d),
                 b->cfg->fallback >= 0 ? " by every allowed backend" : " (no fallback allowed)");
    }
    return placed;
}

/* Apply a delivery: change the producer's dtype or append a convert node.
 * Returns the value holding k (or v) in dtype d. */
static int32_t deliver(builder *b, int32_t prod, int32_t d, const kv_delivery *how, vt_status *st) {
    const vt_plan_node node = b->p->nodes[prod];
    int32_t out = node.dst;
    if (how->direct) {
        b->p->values[out].dtype = d;
        refresh_proto(b, &b->p->nodes[prod]);
        return out;
    }
    const vt_value ov = b->p->values[out];
    char label[40];
    snprintf(label, sizeof label, "%.30s.to_%s", node.label, vt_dtype_name(d));
    int32_t cv = new_value(b, VT_VAL_ACT, label, d, ov.ndim, ov.ne, ov.scale, ov.scale_dim);
    int32_t src[1] = {out};
    int32_t ci = cv >= 0 ? new_node(b, VT_OP_CONVERT, label, src, 1, cv) : -1;
    if (ci < 0) {
        *st = fail_build(b, VT_ERR_NOMEM, "out of memory building the plan");
        return -1;
    }
    b->p->nodes[ci].backend = how->convert_on;
    b->p->nodes[ci].cost_class = how->convert_class;
    refresh_proto(b, &b->p->nodes[ci]);
    return cv;
}

/* The store of one layer: k and v as rank-3 {D, KVH, T} tensors, whatever
 * T (one token included), then the two caches and the slot mapping. The
 * trial nodes and the final one are made here alike, so what a store backend
 * accepted is what runs. */
static int32_t store_node(builder *b, const char *label, int32_t k3, int32_t v3, int32_t kc, int32_t vc,
                          int32_t slots) {
    int32_t src[5] = {k3, v3, kc, vc, slots};
    return new_node(b, VT_OP_RESHAPE_AND_CACHE, label, src, 5, -1);
}

/* Try to store one layer's k/v on backend `store` with k/v in dtype d:
 * the store must accept exactly that node and both producers must deliver d.
 * On success with apply the plan gets the deliveries and the placed store
 * node; without, nothing changes and *cost gets what the option costs by the
 * measured times (auto): the store plus any convert it forces, an unmeasured
 * convert charged like the store (it moves the same k/v). */
static bool try_kv_store(builder *b, const char *label, int32_t store, int32_t d, int32_t k_prod, int32_t v_prod,
                         int32_t kc, int32_t vc, int32_t slots, bool apply, double *cost, char *why, size_t why_size,
                         vt_status *st) {
    const vt_hparams *hp = &b->cfg->model->hp;
    const int64_t ne[3] = {hp->head_dim, hp->n_head_kv, b->p->max_tokens};
    /* k/v in dtype d, shaped as the views made below will be. */
    int32_t kd = new_value(b, VT_VAL_ACT, "k", d, 3, ne, VT_SCALE_TOKENS, 2);
    int32_t vd = new_value(b, VT_VAL_ACT, "v", d, 3, ne, VT_SCALE_TOKENS, 2);
    int32_t ri = kd >= 0 && vd >= 0 ? store_node(b, label, kd, vd, kc, vc, slots) : -1;
    if (ri < 0) {
        *st = fail_build(b, VT_ERR_NOMEM, "out of memory building the plan");
        return false;
    }
    bool store_ok = accepts(b, store, &b->p->nodes[ri]);
    const int store_class = node_class(b, &b->p->nodes[ri]);
    b->p->n_nodes--;
    b->p->n_values -= 2;
    if (!store_ok) {
        const vt_backend_entry *se = entry_at(b, store);
        size_t len = strlen(why);
        snprintf(why + len, why_size - len, "%sreshape_and_cache(k %s, v %s -> %s cache) declined by '%s'",
                 len ? "; " : "", vt_dtype_name(d), vt_dtype_name(d), vt_dtype_name(b->cfg->kv->dtype),
                 se ? se->name : "?");
        return false;
    }
    kv_delivery kh, vh;
    if (!can_deliver(b, k_prod, d, &kh, why, why_size) || !can_deliver(b, v_prod, d, &vh, why, why_size)) return false;
    if (!apply) {
        const double s = cost_or_unknown(b, store_class, store);
        *cost = s + (kh.direct ? 0 : kh.convert_cost >= 0 ? kh.convert_cost : s) +
                (vh.direct ? 0 : vh.convert_cost >= 0 ? vh.convert_cost : s);
        return true;
    }
    int32_t kval = deliver(b, k_prod, d, &kh, st);
    int32_t vval = *st == VT_OK ? deliver(b, v_prod, d, &vh, st) : -1;
    if (*st != VT_OK) return false;
    int32_t k3 = view(b, kval, "k3", 3, ne[0], ne[1], ne[2]);
    int32_t v3 = view(b, vval, "v3", 3, ne[0], ne[1], ne[2]);
    ri = k3 >= 0 && v3 >= 0 ? store_node(b, label, k3, v3, kc, vc, slots) : -1;
    if (ri < 0) {
        *st = fail_build(b, VT_ERR_NOMEM, "out of memory building the plan");
        return false;
    }
    b->p->nodes[ri].backend = store;
    b->p->nodes[ri].cost_class = store_class;
    refresh_proto(b, &b->p->nodes[ri]);
    return true;
}

/* k/v dtypes are tried in two rounds, each over the preferred then the
 * fallback store backend: first the dtypes that reach the cache at the
 * precision asked for (the cache dtype, or f32 which the store rounds once),
 * then the others. So an exact path on the fallback wins over rounding k/v to
 * a narrower dtype on the preferred backend; a plan that must round says so
 * (vt_plan_inexact_stores, --explain, the engine's warning). */
static vt_status negotiate_kv_store(builder *b, int layer, int32_t k_prod, int32_t v_prod, int32_t kc, int32_t vc,
                                    int32_t slots) {
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
    const int n_stores = backend_order(b, -1, stores, VT_AUTO_MAX_BACKENDS);
    char why[1024] = "";
    char label[40];
    snprintf(label, sizeof label, "blk.%d.store_kv", layer);
    for (int round = 0; round < 2; round++) {
        /* auto: the cheapest option of the round by measured time, converts
         * charged; without costs the first option that works */
        int32_t best_store = -1, best_dtype = -1;
        double best_cost = 0;
        for (int s = 0; s < n_stores; s++) {
            for (int j = round ? n_exact : 0; j < (round ? n_order : n_exact); j++) {
                vt_status st = VT_OK;
                double cost = 0;
                const bool ok = try_kv_store(b, label, stores[s], order[j], k_prod, v_prod, kc, vc, slots,
                                             !b->cfg->costs, &cost, why, sizeof why, &st);
                if (st != VT_OK) return st;
                if (ok && !b->cfg->costs) return VT_OK;
                if (ok && (best_store < 0 || cost < best_cost)) {
                    best_store = stores[s], best_dtype = order[j], best_cost = cost;
                }
            }
        }
        if (best_store >= 0) {
            vt_status st = VT_OK;
            double ignored;
            if (try_kv_store(b, label, best_store, best_dtype, k_prod, v_prod, kc, vc, slots, true, &ignored, why,
                             sizeof why, &st))
                return VT_OK;
            return st != VT_OK ? st : fail_build(b, VT_ERR_INTERNAL, "plan build: layer %d's chosen k/v store no longer applies", layer);
        }
    }
    return fail_build(b, VT_ERR_UNSUPPORTED,
                      "plan build refused (%s): cannot store k/v of layer %d in the %s KV cache: %s. Fix: choose another "
                      "--kv-cache-dtype, another --backend, or allow a fallback backend (--fallback reference)",
                      b->p->phase == VT_PHASE_DECODE ? "decode" : "prefill", layer, vt_dtype_name(C), why);
}

bool vt_plan_kv_exact(int32_t kv, int32_t cache) { return kv == cache || kv == VT_F32; }

/* ------------------------------------------------------------ the model */

/* What every block of the forward pass shares: the model's sizes at the
 * plan's token count and the params of the parameterised ops. */
typedef struct forward_ctx {
    builder *b;
    const vt_model *m;
    int64_t T, E, H, KVH, D, F, V;
    vt_node norm, rope, attn, moe; /* params only */
    char label[40];
} forward_ctx;

static const char *layer_label(forward_ctx *f, int il, const char *what) {
    snprintf(f->label, sizeof f->label, "blk.%d.%s", il, what);
    return f->label;
}

/* The per-call inputs the executor fills: tokens, positions, sequence
 * index, KV slots, block tables, and the rows whose logits are wanted. */
static vt_status build_inputs(forward_ctx *f) {
    builder *b = f->b;
    vt_plan *p = b->p;
    const vt_kv_cache *kv = b->cfg->kv;
    int64_t ne1[1] = {f->T};
    p->v_tokens = new_value(b, VT_VAL_INPUT, "tokens", VT_I32, 1, ne1, VT_SCALE_TOKENS, 0);
    p->v_positions = new_value(b, VT_VAL_INPUT, "positions", VT_I32, 1, ne1, VT_SCALE_TOKENS, 0);
    p->v_seq_idx = new_value(b, VT_VAL_INPUT, "seq_idx", VT_I32, 1, ne1, VT_SCALE_TOKENS, 0);
    p->v_slots = new_value(b, VT_VAL_INPUT, "slots", VT_I64, 1, ne1, VT_SCALE_TOKENS, 0);
    p->max_blocks_per_seq = kv->num_blocks;
    int64_t ne_bt[2] = {kv->num_blocks, p->max_seqs};
    p->v_block_tables = new_value(b, VT_VAL_INPUT, "block_tables", VT_I32, 2, ne_bt, VT_SCALE_NONE, 0);
    /* Fewer rows of logits than tokens: the call names the rows it wants. */
    const bool select_rows = p->max_outputs < p->max_tokens;
    int64_t ne_out[1] = {p->max_outputs};
    p->v_out_rows = select_rows ? new_value(b, VT_VAL_INPUT, "out_rows", VT_I32, 1, ne_out, VT_SCALE_OUTPUTS, 0) : -1;
    if (p->v_tokens < 0 || p->v_positions < 0 || p->v_seq_idx < 0 || p->v_slots < 0 || p->v_block_tables < 0 ||
        (select_rows && p->v_out_rows < 0))
        return fail_build(b, VT_ERR_NOMEM, "out of memory building the plan");
    return VT_OK;
}

/* q, k and v of layer il from the normed input h (projections, qwen2's
 * biases); *v_prod is the node that last writes v (negotiation may make it
 * emit the cache dtype). */
static void qkv_projections(forward_ctx *f, int il, int32_t h, int32_t *q, int32_t *k, int32_t *v, int32_t *v_prod,
                            vt_status *st) {
    builder *b = f->b;
    const vt_layer_weights *w = &f->m->layers[il];
    const int64_t T = f->T, HD = f->H * f->D, KD = f->KVH * f->D;
    *q = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "attn_q"), (int32_t[]){weight(b, w->wq), h}, 2, 2, HD, T, 1,
                VT_SCALE_TOKENS, NULL, st);
    *k = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "attn_k"), (int32_t[]){weight(b, w->wk), h}, 2, 2, KD, T, 1,
                VT_SCALE_TOKENS, NULL, st);
    *v = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "attn_v"), (int32_t[]){weight(b, w->wv), h}, 2, 2, KD, T, 1,
                VT_SCALE_TOKENS, NULL, st);
    if (w->bq) {
        int32_t bq = view(b, weight(b, w->bq), "bq", 2, HD, 1, 1);
        int32_t bk = view(b, weight(b, w->bk), "bk", 2, KD, 1, 1);
        int32_t bv = view(b, weight(b, w->bv), "bv", 2, KD, 1, 1);
        *q = op_f32(b, VT_OP_ADD, layer_label(f, il, "attn_q.bias"), (int32_t[]){*q, bq}, 2, 2, HD, T, 1,
                    VT_SCALE_TOKENS, NULL, st);
        *k = op_f32(b, VT_OP_ADD, layer_label(f, il, "attn_k.bias"), (int32_t[]){*k, bk}, 2, 2, KD, T, 1,
                    VT_SCALE_TOKENS, NULL, st);
        *v = op_f32(b, VT_OP_ADD, layer_label(f, il, "attn_v.bias"), (int32_t[]){*v, bv}, 2, 2, KD, T, 1,
                    VT_SCALE_TOKENS, NULL, st);
    }
    *v_prod = b->p->n_nodes - 1;
}

/* The attention block of layer il: x + wo(attention(rope(q), cache)), with
 * k and v stored in the paged cache at the dtype negotiation agrees on. */
static int32_t attention_block(forward_ctx *f, int il, int32_t x, vt_status *st) {
    builder *b = f->b;
    vt_plan *p = b->p;
    const vt_layer_weights *w = &f->m->layers[il];
    const int64_t T = f->T, E = f->E, H = f->H, KVH = f->KVH, D = f->D;
    int32_t h = op_f32(b, VT_OP_RMS_NORM, layer_label(f, il, "attn_norm"), (int32_t[]){x, weight(b, w->attn_norm)}, 2,
                       2, E, T, 1, VT_SCALE_TOKENS, &f->norm, st);
    int32_t q, k, v, v_prod;
    qkv_projections(f, il, h, &q, &k, &v, &v_prod, st);
    int32_t q3, k3;
    if (w->q_norm) { /* qwen3: RMS norm of every head's q and k */
        int32_t qh = view(b, q, "q_heads", 2, D, H * T, 1);
        int32_t kh = view(b, k, "k_heads", 2, D, KVH * T, 1);
        int32_t qn = op_f32(b, VT_OP_RMS_NORM, layer_label(f, il, "attn_q_norm"), (int32_t[]){qh, weight(b, w->q_norm)},
                            2, 2, D, H * T, 1, VT_SCALE_TOKENS, &f->norm, st);
        int32_t kn = op_f32(b, VT_OP_RMS_NORM, layer_label(f, il, "attn_k_norm"), (int32_t[]){kh, weight(b, w->k_norm)},
                            2, 2, D, KVH * T, 1, VT_SCALE_TOKENS, &f->norm, st);
        q3 = view(b, qn, "q3", 3, D, H, T);
        k3 = view(b, kn, "k3", 3, D, KVH, T);
    } else {
        q3 = view(b, q, "q3", 3, D, H, T);
        k3 = view(b, k, "k3", 3, D, KVH, T);
    }
    int32_t qr = op_f32(b, VT_OP_ROPE, layer_label(f, il, "rope_q"), (int32_t[]){q3, p->v_positions}, 2, 3, D, H, T,
                        VT_SCALE_TOKENS, &f->rope, st);
    op_f32(b, VT_OP_ROPE, layer_label(f, il, "rope_k"), (int32_t[]){k3, p->v_positions}, 2, 3, D, KVH, T,
           VT_SCALE_TOKENS, &f->rope, st);
    const int32_t k_prod = p->n_nodes - 1;
    int32_t kc = -1, vc = -1;
    if (*st == VT_OK) {
        const vt_kv_cache *kv = b->cfg->kv;
        vt_tensor kt = vt_kv_cache_tensor(kv, il, 0), vt = vt_kv_cache_tensor(kv, il, 1);
        kc = new_value(b, VT_VAL_CACHE, layer_label(f, il, "k_cache"), kt.dtype, 4, kt.ne, VT_SCALE_NONE, 0);
        vc = new_value(b, VT_VAL_CACHE, layer_label(f, il, "v_cache"), vt.dtype, 4, vt.ne, VT_SCALE_NONE, 0);
        if (kc < 0 || vc < 0) {
            *st = fail_build(b, VT_ERR_NOMEM, "out of memory building the plan");
            return -1;
        }
        p->values[kc].data = kt.data;
        p->values[vc].data = vt.data;
        *st = negotiate_kv_store(b, il, k_prod, v_prod, kc, vc, p->v_slots);
    }
    int32_t o = op_f32(b, VT_OP_ATTENTION, layer_label(f, il, "attention"),
                       (int32_t[]){qr, kc, vc, p->v_block_tables, p->v_positions, p->v_seq_idx}, 6, 3, D, H, T,
                       VT_SCALE_TOKENS, &f->attn, st);
    int32_t o2 = view(b, o, "attn_out", 2, H * D, T, 1);
    int32_t a = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "attn_output"), (int32_t[]){weight(b, w->wo), o2}, 2, 2, E,
                       T, 1, VT_SCALE_TOKENS, NULL, st);
    return op_f32(b, VT_OP_ADD, layer_label(f, il, "attn_residual"), (int32_t[]){x, a}, 2, 2, E, T, 1,
                  VT_SCALE_TOKENS, NULL, st);
}

/* The feed-forward block of layer il: x + down(silu(gate(h)) * up(h)). */
static int32_t ffn_block(forward_ctx *f, int il, int32_t x, vt_status *st) {
    builder *b = f->b;
    const vt_layer_weights *w = &f->m->layers[il];
    const int64_t T = f->T, E = f->E, F = f->F;
    int32_t h = op_f32(b, VT_OP_RMS_NORM, layer_label(f, il, "ffn_norm"), (int32_t[]){x, weight(b, w->ffn_norm)}, 2,
                       2, E, T, 1, VT_SCALE_TOKENS, &f->norm, st);
    int32_t g = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "ffn_gate"), (int32_t[]){weight(b, w->ffn_gate), h}, 2, 2,
                       F, T, 1, VT_SCALE_TOKENS, NULL, st);
    int32_t u = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "ffn_up"), (int32_t[]){weight(b, w->ffn_up), h}, 2, 2, F,
                       T, 1, VT_SCALE_TOKENS, NULL, st);
    int32_t s = op_f32(b, VT_OP_SWIGLU, layer_label(f, il, "ffn_swiglu"), (int32_t[]){g, u}, 2, 2, F, T, 1,
                       VT_SCALE_TOKENS, NULL, st);
    int32_t d = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "ffn_down"), (int32_t[]){weight(b, w->ffn_down), s}, 2, 2,
                       E, T, 1, VT_SCALE_TOKENS, NULL, st);
    return op_f32(b, VT_OP_ADD, layer_label(f, il, "ffn_residual"), (int32_t[]){x, d}, 2, 2, E, T, 1,
                  VT_SCALE_TOKENS, NULL, st);
}

/* The mixture-of-experts feed-forward block of layer il: x + the
 * routing-weighted sum, over each token's chosen experts, of
 * down_e(silu(gate_e(h)) * up_e(h)). */
static int32_t moe_ffn_block(forward_ctx *f, int il, int32_t x, vt_status *st) {
    builder *b = f->b;
    const vt_layer_weights *w = &f->m->layers[il];
    const vt_hparams *hp = &f->m->hp;
    const int64_t T = f->T, E = f->E, NE = hp->n_expert, U = hp->n_expert_used, FE = hp->n_ff_exp;
    int32_t h = op_f32(b, VT_OP_RMS_NORM, layer_label(f, il, "ffn_norm"), (int32_t[]){x, weight(b, w->ffn_norm)}, 2,
                       2, E, T, 1, VT_SCALE_TOKENS, &f->norm, st);
    int32_t logits = op_f32(b, VT_OP_MATMUL, layer_label(f, il, "ffn_gate_inp"),
                            (int32_t[]){weight(b, w->ffn_gate_inp), h}, 2, 2, NE, T, 1, VT_SCALE_TOKENS, NULL, st);
    int32_t ids = op_out(b, VT_OP_MOE_ROUTE, layer_label(f, il, "ffn_moe_route"), VT_I32, (int32_t[]){logits}, 1, 2,
                         U, T, 1, VT_SCALE_TOKENS, &f->moe, st);
    int32_t g = op_f32(b, VT_OP_MOE_MATMUL, layer_label(f, il, "ffn_gate_exps"),
                       (int32_t[]){weight(b, w->ffn_gate_exps), h, ids}, 3, 3, FE, U, T, VT_SCALE_TOKENS, NULL, st);
    int32_t u = op_f32(b, VT_OP_MOE_MATMUL, layer_label(f, il, "ffn_up_exps"),
                       (int32_t[]){weight(b, w->ffn_up_exps), h, ids}, 3, 3, FE, U, T, VT_SCALE_TOKENS, NULL, st);
    int32_t s = op_f32(b, VT_OP_SWIGLU, layer_label(f, il, "ffn_moe_swiglu"),
                       (int32_t[]){view(b, g, "gate_rows", 2, FE, U * T, 1), view(b, u, "up_rows", 2, FE, U * T, 1)},
                       2, 2, FE, U * T, 1, VT_SCALE_TOKENS, NULL, st);
    int32_t d = op_f32(b, VT_OP_MOE_MATMUL, layer_label(f, il, "ffn_down_exps"),
                       (int32_t[]){weight(b, w->ffn_down_exps), view(b, s, "act3", 3, FE, U, T), ids}, 3, 3, E, U, T,
                       VT_SCALE_TOKENS, NULL, st);
    int32_t c = op_f32(b, VT_OP_MOE_COMBINE, layer_label(f, il, "ffn_moe_combine"), (int32_t[]){d, ids, logits}, 3,
                       2, E, T, 1, VT_SCALE_TOKENS, &f->moe, st);
    return op_f32(b, VT_OP_ADD, layer_label(f, il, "ffn_residual"), (int32_t[]){x, c}, 2, 2, E, T, 1,
                  VT_SCALE_TOKENS, NULL, st);
}

/* Final norm and the output matrix; when the plan selects rows (a prefill
 * without all_logits) only those (out_rows) go through them. */
static vt_status output_head(forward_ctx *f, int32_t x) {
    builder *b = f->b;
    vt_plan *p = b->p;
    vt_status st = VT_OK;
    vt_scale out_scale = VT_SCALE_TOKENS;
    int64_t n_out = f->T;
    if (p->v_out_rows >= 0) {
        x = op_f32(b, VT_OP_GET_ROWS, "output_rows", (int32_t[]){x, p->v_out_rows}, 2, 2, f->E, p->max_outputs, 1,
                   VT_SCALE_OUTPUTS, NULL, &st);
        out_scale = VT_SCALE_OUTPUTS;
        n_out = p->max_outputs;
    }
    int32_t xn = op_f32(b, VT_OP_RMS_NORM, "output_norm", (int32_t[]){x, weight(b, f->m->output_norm)}, 2, 2, f->E,
                        n_out, 1, out_scale, &f->norm, &st);
    p->v_logits = op_f32(b, VT_OP_MATMUL, "output", (int32_t[]){weight(b, f->m->output), xn}, 2, 2, f->V, n_out, 1,
                         out_scale, NULL, &st);
    return st;
}

static vt_status build_forward(builder *b) {
    const vt_hparams *hp = &b->cfg->model->hp;
    const vt_kv_cache *kv = b->cfg->kv;
    forward_ctx f = {.b = b, .m = b->cfg->model, .T = b->p->max_tokens, .E = hp->n_embd, .H = hp->n_head,
                     .KVH = hp->n_head_kv, .D = hp->head_dim, .F = hp->n_ff, .V = hp->n_vocab};
    f.norm.params.rms_norm.eps = hp->rms_eps;
    f.rope.params.rope = (vt_rope_params){hp->n_rot, hp->rope_mode, hp->rope_base, hp->rope_freq_scale};
    f.moe.params.moe = (vt_moe_params){hp->n_expert_used, hp->norm_top_k ? 1 : 0};
    f.attn.params.attention =
        (vt_attention_params){1.0f / sqrtf((float)f.D), kv->block_size, b->p->max_seqs, kv->num_blocks};

    vt_status st = build_inputs(&f);
    if (st != VT_OK) return st;
    int32_t x = op_f32(b, VT_OP_GET_ROWS, "token_embd", (int32_t[]){weight(b, f.m->tok_embd), b->p->v_tokens}, 2, 2,
                       f.E, f.T, 1, VT_SCALE_TOKENS, NULL, &st);
    for (int il = 0; il < hp->n_layer && st == VT_OK; il++) {
        x = attention_block(&f, il, x, &st);
        x = hp->n_expert > 0 ? moe_ffn_block(&f, il, x, &st) : ffn_block(&f, il, x, &st);
    }
    if (st != VT_OK) return st;
    return output_head(&f, x);
}

/* Every node as finally built offered once more to the backend it was
 * placed on. Negotiation changes nodes after their placement (a producer
 * emitting the KV dtype, a consumer reading it): none of that may leave a
 * node its backend declines. A decline here is a builder bug. */
static vt_status verify_placement(builder *b) {
    for (int32_t i = 0; i < b->p->n_nodes; i++) {
        vt_plan_node *n = &b->p->nodes[i];
        if (accepts(b, n->backend, n)) continue;
        char desc[256];
        vt_plan_describe_node(&n->proto, desc, sizeof desc);
        const vt_backend_entry *e = entry_at(b, n->backend);
        return fail_build(b, VT_ERR_INTERNAL,
                          "plan build (%s): node %s %s was placed on backend '%s', which declines it as finally built",
                          b->p->phase == VT_PHASE_DECODE ? "decode" : "prefill", n->label, desc, e ? e->name : "?");
    }
    return VT_OK;
}

vt_status vt_plan_build(const vt_plan_config *cfg, const vt_plan_shape *shape, vt_plan **out, vt_error *err) {
    *out = NULL;
    const vt_phase phase = shape->phase;
    if (shape->max_seqs < 1) return vt_fail(err, VT_ERR_INVALID, "plan: max_seqs must be >= 1");
    if (phase != VT_PHASE_DECODE && shape->max_tokens < 1)
        return vt_fail(err, VT_ERR_INVALID, "plan: max_tokens must be >= 1");
    if (cfg->preferred < 0 || !vt_registry_at(cfg->registry, cfg->preferred))
        return vt_fail(err, VT_ERR_INVALID, "plan: no preferred backend");
    vt_plan *p = calloc(1, sizeof *p);
    if (!p) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    p->phase = phase;
    p->max_seqs = shape->max_seqs;
    p->max_tokens = phase == VT_PHASE_DECODE ? shape->max_seqs : shape->max_tokens;
    p->max_outputs = shape->all_logits || phase == VT_PHASE_DECODE ? p->max_tokens
                     : shape->max_seqs < p->max_tokens    ? shape->max_seqs
                                                          : p->max_tokens;
    p->kv_dtype = cfg->kv->dtype;
    p->host = cfg->host;
    p->registry = cfg->registry;
    p->v_logits = -1;
    p->check_pending = cfg->check_plan;
    p->costs = cfg->costs;
    builder b = {cfg, p, err};
    vt_status st = build_forward(&b);
    if (st == VT_OK) st = verify_placement(&b);
    if (st == VT_OK) st = vt_plan_allocate(p, err);
    if (st != VT_OK) {
        vt_plan_free(p);
        return st;
    }
    *out = p;
    return VT_OK;
}

void vt_plan_free(vt_plan *p) {
    if (!p) return;
    if (p->arena && p->host) p->host->free(p->arena);
    for (int32_t i = 0; i < p->n_values; i++)
        if (p->values[i].kind == VT_VAL_INPUT && p->host) p->host->free(p->values[i].data);
    free(p->values);
    free(p->nodes);
    free(p);
}
