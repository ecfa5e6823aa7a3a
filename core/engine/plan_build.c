/* plan_build.c — a plan in passes over one graph: the architecture builds
 * the forward pass as a pure graph (arch_*.c through graph.h), placement
 * gives each node a backend, negotiation agrees the KV-cache stores
 * (plan_negotiate.c), and a last pass re-offers every node as finally built.
 *
 * Placement: a node goes to the preferred backend if it accepts the node
 * exactly (op pointer non-NULL and supports() yes), else to the fallback
 * backend, else the build fails naming the op, node, dtypes and backends
 * (--backend auto: the candidates in order of their measured time of the
 * node's shape class). A node is offered complete: rank, shapes, dtypes,
 * params, phase. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "plan.h"
#include "plan_builder.h"

const char *builder_phase_name(const vt_builder *b) { return b->g->p->phase == VT_PHASE_DECODE ? "decode" : "prefill"; }

const vt_backend_entry *builder_entry(const vt_builder *b, int32_t idx) {
    return idx >= 0 ? vt_registry_at(b->cfg->registry, idx) : NULL;
}

void builder_refresh_proto(vt_builder *b, vt_plan_node *n) {
    const vt_plan *p = b->g->p;
    for (int i = 0; i < n->n_src; i++) n->proto.src[i] = vt_plan_value_tensor(p, n->src[i], -1, -1, false);
    if (n->dst >= 0) n->proto.dst = vt_plan_value_tensor(p, n->dst, -1, -1, false);
}

bool builder_accepts_node(const vt_builder *b, int32_t backend, const vt_node *node) {
    const vt_backend_entry *e = builder_entry(b, backend);
    return e && vt_backend_accepts(e, node);
}

bool builder_accepts(vt_builder *b, int32_t backend, vt_plan_node *n) {
    builder_refresh_proto(b, n);
    return builder_accepts_node(b, backend, &n->proto);
}

int builder_node_class(vt_builder *b, const vt_node *node) {
    if (!b->cfg->costs) return -1;
    char key[VT_AUTO_KEY_SIZE];
    vt_shape_class_key(node, key, sizeof key);
    return vt_auto_costs_class(b->cfg->costs, key);
}

/* Seconds of class k on backend i as placement weighs them: the preferred
 * backend's divided by VT_AUTO_MARGIN (another backend must beat it by more
 * than that), or a large number when not measured (so the order among
 * unmeasured backends decides). */
double builder_cost(const vt_builder *b, int k, int32_t i) {
    const double s = vt_auto_costs_weighed(b->cfg->costs, k, i, b->cfg->preferred);
    return s >= 0 ? s : 1e30;
}

/* Backends to offer a node of class k, in order. Without costs: preferred,
 * fallback. With costs (auto): the candidates by their measured time of the
 * class, cheapest first, the preferred backend ahead unless another beats it
 * by more than VT_AUTO_MARGIN; ties and unmeasured ones keep the plain order
 * (preferred, fallback, the others by registry index); a backend that failed
 * calibration never. Returns how many. */
int builder_backend_order(const vt_builder *b, int k, int32_t *order, int max) {
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
        const vt_backend_entry *e = builder_entry(b, i);
        if (!e || e->state != VT_BACKEND_LOADED || c->failed[i]) continue;
        order[n++] = i;
    }
    /* stable insertion sort by cost: equal costs keep the plain order */
    for (int j = 1; j < n; j++) {
        const int32_t x = order[j];
        const double cx = builder_cost(b, k, x);
        int m = j;
        while (m > 0 && builder_cost(b, k, order[m - 1]) > cx) {
            order[m] = order[m - 1];
            m--;
        }
        order[m] = x;
    }
    return n;
}

/* Place node i on the first backend of backend_order that accepts it; or fail. */
/* Place node i on the first backend of builder_backend_order that accepts it; or fail. */
static vt_status place(vt_builder *b, int32_t i) {
    vt_plan_node *n = &b->g->p->nodes[i];
    builder_refresh_proto(b, n);
    n->cost_class = builder_node_class(b, &n->proto);
    n->cost_dst_dtype = n->dst >= 0 && vt_shape_class_names_dst(&n->proto) ? n->proto.dst.dtype : -1;
    int32_t order[VT_AUTO_MAX_BACKENDS];
    const int n_order = builder_backend_order(b, n->cost_class, order, VT_AUTO_MAX_BACKENDS);
    for (int j = 0; j < n_order; j++)
        if (builder_accepts_node(b, order[j], &n->proto)) {
            n->backend = order[j];
            return VT_OK;
        }
    char desc[256];
    vt_plan_describe_node(&n->proto, desc, sizeof desc);
    const vt_backend_entry *pe = builder_entry(b, b->cfg->preferred), *fe = builder_entry(b, b->cfg->fallback);
    const bool reads_cache = n->op == VT_OP_ATTENTION;
    const char *no_fallback = b->cfg->fallback_is_self
                                  ? " and there is no fallback (runtime.fallback names this backend itself)"
                                  : " and there is no fallback";
    return graph_fail(b->g, VT_ERR_UNSUPPORTED,
                      "plan build refused (%s): node %s %s is declined by backend '%s'%s%s%s. Fix: choose another "
                      "%sruntime.backend, or allow a fallback backend (runtime.fallback = reference)",
                      builder_phase_name(b), n->label, desc, pe ? pe->name : "?",
                      fe ? " and by fallback '" : no_fallback, fe ? fe->name : "", fe ? "'" : "",
                      reads_cache ? "kv_cache.dtype, another " : "");
}

/* Every node but the KV stores (negotiation places those with their
 * producers' dtype), in graph order. */
static vt_status place_nodes(vt_builder *b) {
    for (int32_t i = 0; i < b->g->p->n_nodes; i++) {
        if (b->g->p->nodes[i].op == VT_OP_RESHAPE_AND_CACHE) continue;
        vt_status st = place(b, i);
        if (st != VT_OK) return st;
    }
    return VT_OK;
}

/* Every node as finally built offered once more to the backend it was
 * placed on. Negotiation changes nodes after their placement (a producer
 * emitting the KV dtype, a consumer reading it): none of that may leave a
 * node its backend declines. A decline here is a builder bug. */
static vt_status verify_placement(vt_builder *b) {
    for (int32_t i = 0; i < b->g->p->n_nodes; i++) {
        vt_plan_node *n = &b->g->p->nodes[i];
        if (builder_accepts(b, n->backend, n)) continue;
        char desc[256];
        vt_plan_describe_node(&n->proto, desc, sizeof desc);
        const vt_backend_entry *e = builder_entry(b, n->backend);
        return graph_fail(b->g, VT_ERR_INTERNAL,
                          "plan build (%s): node %s %s was placed on backend '%s', which declines it as finally built",
                          builder_phase_name(b), n->label, desc, e ? e->name : "?");
    }
    return VT_OK;
}

/* The per-call inputs the executor fills: tokens, positions, sequence
 * index, KV slots, block tables, and the rows whose logits are wanted. */
static void build_inputs(vt_graph *g) {
    vt_plan *p = g->p;
    const int64_t ne1[1] = {p->max_tokens};
    p->v_tokens = graph_value(g, VT_VAL_INPUT, "tokens", VT_I32, 1, ne1, VT_SCALE_TOKENS, 0);
    p->v_positions = graph_value(g, VT_VAL_INPUT, "positions", VT_I32, 1, ne1, VT_SCALE_TOKENS, 0);
    p->v_seq_idx = graph_value(g, VT_VAL_INPUT, "seq_idx", VT_I32, 1, ne1, VT_SCALE_TOKENS, 0);
    p->v_slots = graph_value(g, VT_VAL_INPUT, "slots", VT_I64, 1, ne1, VT_SCALE_TOKENS, 0);
    p->max_blocks_per_seq = g->kv->num_blocks;
    const int64_t ne_bt[2] = {g->kv->num_blocks, p->max_seqs};
    p->v_block_tables = graph_value(g, VT_VAL_INPUT, "block_tables", VT_I32, 2, ne_bt, VT_SCALE_NONE, 0);
    /* Fewer rows of logits than tokens: the call names the rows it wants. */
    const int64_t ne_out[1] = {p->max_outputs};
    p->v_out_rows = p->max_outputs < p->max_tokens
                        ? graph_value(g, VT_VAL_INPUT, "out_rows", VT_I32, 1, ne_out, VT_SCALE_OUTPUTS, 0)
                        : -1;
}

/* The graph of the model's forward pass at the plan's sizes. */
static vt_status build_graph(vt_graph *g) {
    const vt_hparams *hp = &g->model->hp;
    const vt_arch_build_fn build = vt_arch_builder(hp->arch);
    if (!build) return graph_fail(g, VT_ERR_UNSUPPORTED, "plan: architecture '%s' has no graph builder", hp->arch_name);
    g->norm = (vt_rms_norm_params){hp->rms_eps};
    g->rope = (vt_rope_params){hp->n_rot, hp->rope_mode, hp->rope_base, hp->rope_freq_scale};
    g->attention = (vt_attention_params){1.0f / sqrtf((float)hp->head_dim), g->kv->block_size, g->p->max_seqs,
                                         g->kv->num_blocks};
    g->moe = (vt_moe_params){hp->n_expert_used, hp->norm_top_k ? 1 : 0};
    build_inputs(g);
    build(g);
    if (g->status == VT_OK && g->p->v_logits < 0)
        return graph_fail(g, VT_ERR_INTERNAL, "plan: the '%s' graph has no logits", hp->arch_name);
    return g->status;
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
    vt_graph g = {.p = p, .model = cfg->model, .status = VT_OK, .err = err, .kv = cfg->kv};
    vt_builder b = {cfg, &g};
    vt_status st = build_graph(&g);
    if (st == VT_OK) st = place_nodes(&b);
    if (st == VT_OK) st = vt_plan_negotiate_kv(&b);
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
