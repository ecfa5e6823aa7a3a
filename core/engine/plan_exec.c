/* plan_exec.c — arena layout, per-call execution, and --explain output.
 *
 * The executor runs each node on the backend negotiation chose, with the
 * dtypes negotiation fixed: it never converts. Debug builds assert that every
 * operand handed to a backend has exactly the dtype the plan negotiated; with
 * the plan check on (p->check_pending), the first run re-offers each node as
 * it is about to run to its backend's supports(). */
#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "plan_exec.h"
#include "quant.h"

static int64_t scaled_dim(const vt_plan *p, const vt_value *v, int64_t n_tokens, int64_t n_outputs) {
    int64_t full = v->ne[v->scale_dim];
    if (v->scale == VT_SCALE_TOKENS && n_tokens >= 0) return full / p->max_tokens * n_tokens;
    if (v->scale == VT_SCALE_OUTPUTS && n_outputs >= 0) return full / p->max_outputs * n_outputs;
    return full;
}

static void *value_data(const vt_plan *p, int32_t v) {
    const vt_value *val = &p->values[v];
    while (val->kind == VT_VAL_VIEW) val = &p->values[val->base];
    if (val->kind == VT_VAL_ACT) return p->arena ? (char *)p->arena + val->offset : NULL;
    return val->data;
}

static int32_t value_dtype(const vt_plan *p, int32_t v) {
    const vt_value *val = &p->values[v];
    while (val->kind == VT_VAL_VIEW) val = &p->values[val->base];
    return val->dtype;
}

int32_t vt_plan_producer(const vt_plan *p, int32_t v, int32_t before) {
    while (v >= 0 && p->values[v].kind == VT_VAL_VIEW) v = p->values[v].base;
    for (int32_t i = before - 1; i >= 0; i--)
        if (p->nodes[i].dst == v) return i;
    return -1;
}

vt_tensor vt_tensor_retyped(vt_tensor t, int32_t dtype) {
    t.dtype = dtype;
    t.nb[0] = vt_dtype_block_bytes(dtype);
    t.nb[1] = vt_row_size(dtype, t.ne[0]);
    for (int i = 2; i < VT_MAX_DIMS; i++) t.nb[i] = t.nb[i - 1] * (size_t)t.ne[i - 1];
    return t;
}

vt_tensor vt_plan_value_tensor(const vt_plan *p, int32_t v, int64_t n_tokens, int64_t n_outputs, bool with_data) {
    const vt_value *val = &p->values[v];
    vt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = value_dtype(p, v);
    t.ndim = val->ndim;
    for (int i = 0; i < VT_MAX_DIMS; i++) t.ne[i] = val->ne[i];
    if (val->scale != VT_SCALE_NONE) t.ne[val->scale_dim] = scaled_dim(p, val, n_tokens, n_outputs);
    t.nb[0] = vt_dtype_block_bytes(t.dtype);
    t.nb[1] = vt_row_size(t.dtype, t.ne[0]);
    for (int i = 2; i < VT_MAX_DIMS; i++) t.nb[i] = t.nb[i - 1] * (size_t)t.ne[i - 1];
    if (with_data) t.data = value_data(p, v);
    return t;
}

static void describe_tensor(const vt_tensor *t, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s[", vt_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? "," : "", (long long)t->ne[i]);
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

void vt_plan_describe_node(const vt_node *node, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s(", vt_op_name(node->op));
    for (int i = 0; i < node->n_src && n > 0 && (size_t)n < size; i++) {
        char t[96];
        describe_tensor(&node->src[i], t, sizeof t);
        n += snprintf(buf + n, size - (size_t)n, "%s%s", i ? ", " : "", t);
    }
    if (n > 0 && (size_t)n < size) {
        if (node->dst.ndim > 0) {
            char t[96];
            describe_tensor(&node->dst, t, sizeof t);
            snprintf(buf + n, size - (size_t)n, " -> %s)", t);
        } else {
            snprintf(buf + n, size - (size_t)n, ")");
        }
    }
}

/* ------------------------------------------------------------ the arena */

typedef struct region {
    size_t offset, size;
    bool free;
} region;

vt_status vt_plan_allocate(vt_plan *p, vt_error *err) {
    /* Last use of every value (a view's use keeps its base alive). */
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        for (int s = 0; s < n->n_src; s++) {
            int32_t v = n->src[s];
            while (v >= 0) {
                p->values[v].last_use = i;
                v = p->values[v].kind == VT_VAL_VIEW ? p->values[v].base : -1;
            }
        }
    }
    if (p->v_logits >= 0) p->values[p->v_logits].last_use = p->n_nodes; /* read after the run */
    region *regions = NULL;
    int n_regions = 0;
    size_t top = 0;
    vt_status st = VT_OK;
    for (int32_t i = 0; i < p->n_nodes && st == VT_OK; i++) {
        int32_t d = p->nodes[i].dst;
        if (d >= 0 && p->values[d].kind == VT_VAL_ACT) {
            vt_tensor t = vt_plan_value_tensor(p, d, -1, -1, false);
            size_t bytes = (t.nb[VT_MAX_DIMS - 1] * (size_t)t.ne[VT_MAX_DIMS - 1] + 63) & ~(size_t)63;
            p->values[d].bytes = bytes;
            int best = -1;
            for (int r = 0; r < n_regions; r++)
                if (regions[r].free && regions[r].size >= bytes && (best < 0 || regions[r].size < regions[best].size))
                    best = r;
            if (best >= 0) {
                regions[best].free = false;
                p->values[d].offset = regions[best].offset;
            } else {
                region *nr = realloc(regions, (size_t)(n_regions + 1) * sizeof *nr);
                if (!nr) {
                    st = vt_fail(err, VT_ERR_NOMEM, "out of memory laying out activations");
                    break;
                }
                regions = nr;
                regions[n_regions++] = (region){top, bytes, false};
                p->values[d].offset = top;
                top += bytes;
            }
        }
        /* Free what this node read for the last time (after it ran: dst never aliases a src). */
        for (int32_t v = 0; v < p->n_values; v++) {
            if (p->values[v].kind != VT_VAL_ACT || p->values[v].last_use != i) continue;
            for (int r = 0; r < n_regions; r++)
                if (!regions[r].free && regions[r].offset == p->values[v].offset) regions[r].free = true;
        }
    }
    free(regions);
    if (st != VT_OK) return st;
    p->arena_bytes = top;
    p->arena = p->host->alloc(top ? top : 64, 64);
    if (!p->arena)
        return vt_fail(err, VT_ERR_NOMEM, "out of memory allocating %.1f MiB of activations for %lld tokens per call",
                       (double)top / (1024.0 * 1024.0), (long long)p->max_tokens);
    /* Per-call inputs get their own buffers at maximum size. */
    for (int32_t v = 0; v < p->n_values; v++) {
        if (p->values[v].kind != VT_VAL_INPUT) continue;
        vt_tensor t = vt_plan_value_tensor(p, v, -1, -1, false);
        /* The same allocator as the arena, so failure injection covers both. */
        const size_t bytes = t.nb[VT_MAX_DIMS - 1] * (size_t)t.ne[VT_MAX_DIMS - 1];
        p->values[v].data = p->host->alloc(bytes ? bytes : 64, 64);
        if (p->values[v].data) memset(p->values[v].data, 0, bytes);
        if (!p->values[v].data) return vt_fail(err, VT_ERR_NOMEM, "out of memory for plan inputs");
    }
    return VT_OK;
}

/* ------------------------------------------------------------- running */

void vt_plan_set_hook(vt_plan *p, vt_node_hook hook, void *user) {
    p->hook = hook;
    p->hook_user = user;
}

/* Node n as the executor hands it to its backend for a call of T tokens
 * (n_out output rows): the negotiated proto with every operand at this
 * call's size and data. The run and the plan check both build it here. */
void vt_plan_node_at(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, vt_node *node) {
    const vt_plan_node *n = &p->nodes[i];
    *node = n->proto;
    node->prepared = 0;
    for (int s = 0; s < n->n_src; s++) {
        node->src[s] = vt_plan_value_tensor(p, n->src[s], T, n_out, true);
        /* The executor never converts: what a backend gets is what negotiation fixed. */
        assert(node->src[s].dtype == n->proto.src[s].dtype);
        if (n->prepared[s]) { /* the same tensor, in the layout its backend prepared */
            node->src[s].data = n->prepared[s];
            node->prepared |= 1u << s;
        }
    }
    if (n->dst >= 0) {
        node->dst = vt_plan_value_tensor(p, n->dst, T, n_out, true);
        assert(node->dst.dtype == n->proto.dst.dtype);
    }
}

/* Would b run q, handed over as supports() always sees nodes? */
static bool accepts_bare(const vt_backend_entry *b, vt_node q) {
    for (int s = 0; s < q.n_src; s++) q.src[s].data = NULL;
    q.dst.data = NULL;
    q.prepared = 0;
    return vt_backend_accepts(b, &q);
}

bool vt_plan_node_accepted(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, const vt_backend_entry *b) {
    vt_node q;
    vt_plan_node_at(p, i, T, n_out, &q);
    return accepts_bare(b, q);
}

bool vt_plan_node_keyed_at(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, vt_node *node) {
    vt_plan_node_at(p, i, T, n_out, node);
    const int32_t keyed = p->nodes[i].cost_dst_dtype;
    if (keyed < 0 || keyed == node->dst.dtype) return false;
    node->dst = vt_tensor_retyped(node->dst, keyed);
    node->dst.data = NULL; /* the plan's buffer holds the other dtype */
    return true;
}

bool vt_plan_node_keyed_accepted(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, const vt_backend_entry *b) {
    vt_node q;
    vt_plan_node_keyed_at(p, i, T, n_out, &q);
    return accepts_bare(b, q);
}

/* The plan check: every node exactly as it is about to run, its data
 * pointers cleared as supports() always gets them, offered to its backend.
 * Rank, shapes at this call's token count, dtypes, params and phase are the
 * executor's own, so a node changed after negotiation, or built one way and
 * run another, is caught by name. All nodes are checked before the first one
 * runs, so a refused plan has written nothing (no KV-cache row either). */
static vt_status check_plan(const vt_plan *p, int64_t T, int64_t n_out, vt_error *err) {
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        vt_node q;
        vt_plan_node_at(p, i, T, n_out, &q);
        for (int s = 0; s < q.n_src; s++) q.src[s].data = NULL;
        q.dst.data = NULL;
        q.prepared = 0; /* as supports() always sees nodes */
        const vt_backend_entry *e = vt_registry_at(p->registry, n->backend);
        if (vt_backend_accepts(e, &q)) continue;
        char desc[256];
        vt_plan_describe_node(&q, desc, sizeof desc);
        return vt_fail(err, VT_ERR_INTERNAL,
                       "plan check (%s, %lld tokens): backend '%s' declines node %s %s as the executor runs it; the "
                       "plan must run every node as its backend accepted it",
                       p->phase == VT_PHASE_DECODE ? "decode" : "prefill", (long long)T, e ? e->name : "?", n->label,
                       desc);
    }
    return VT_OK;
}

vt_status vt_plan_load_call(vt_plan *p, const vt_plan_call *c, vt_error *err) {
    const int64_t T = c->n_tokens;
    if (T < 1 || T > p->max_tokens)
        return vt_fail(err, VT_ERR_INVALID, "plan run: %lld tokens, plan takes 1..%lld", (long long)T,
                       (long long)p->max_tokens);
    if (c->n_seqs < 1 || c->n_seqs > p->max_seqs)
        return vt_fail(err, VT_ERR_INVALID, "plan run: %d sequences, plan takes 1..%d", c->n_seqs, p->max_seqs);
    for (int32_t s = 0; s < c->n_seqs; s++)
        if (c->table_len[s] < 0 || c->table_len[s] > p->max_blocks_per_seq)
            return vt_fail(err, VT_ERR_INVALID, "plan run: block table of %d blocks exceeds %d", c->table_len[s],
                           p->max_blocks_per_seq);
    for (int64_t i = 0; i < T; i++)
        if (c->seq_idx[i] < 0 || c->seq_idx[i] >= c->n_seqs)
            return vt_fail(err, VT_ERR_INVALID, "plan run: token %lld names sequence %d of %d", (long long)i,
                           c->seq_idx[i], c->n_seqs);
    /* Rows of logits: a plan with a row selection computes the rows asked
     * for; one without computes every row, and the call must take them all. */
    const int64_t n_out = p->v_out_rows >= 0 ? c->n_out : T;
    if (p->v_out_rows >= 0 ? (n_out < 1 || n_out > p->max_outputs || !c->out_rows)
                           : (c->out_rows != NULL || c->n_out != T))
        return vt_fail(err, VT_ERR_INVALID, "plan run: %lld rows of logits asked of a call of %lld tokens (plan: %s)",
                       (long long)c->n_out, (long long)T,
                       p->v_out_rows >= 0 ? "selected rows" : "every row, out_rows = NULL");
    if (p->v_out_rows >= 0)
        for (int64_t r = 0; r < n_out; r++)
            if (c->out_rows[r] < 0 || c->out_rows[r] >= T)
                return vt_fail(err, VT_ERR_INVALID, "plan run: output row %d of a call of %lld tokens",
                               c->out_rows[r], (long long)T);
    p->run_tokens = T;
    p->run_outputs = n_out;
    if (p->check_pending) {
        vt_status st = check_plan(p, T, n_out, err);
        if (st != VT_OK) return st;
    }
    int32_t *tokens = p->values[p->v_tokens].data, *pos = p->values[p->v_positions].data,
            *seq = p->values[p->v_seq_idx].data, *bt = p->values[p->v_block_tables].data;
    int64_t *slots = p->values[p->v_slots].data;
    for (int64_t i = 0; i < T; i++) {
        tokens[i] = c->tokens[i];
        pos[i] = c->positions[i];
        seq[i] = c->seq_idx[i];
        slots[i] = c->slots[i];
    }
    /* Table rows beyond a sequence's blocks, and rows of sequences this call
     * does not have, read as "no block". */
    const int32_t row = p->max_blocks_per_seq;
    for (int32_t s = 0; s < p->max_seqs; s++)
        for (int32_t i = 0; i < row; i++)
            bt[(size_t)s * (size_t)row + (size_t)i] = s < c->n_seqs && i < c->table_len[s] ? c->tables[s][i] : -1;
    if (p->v_out_rows >= 0)
        memcpy(p->values[p->v_out_rows].data, c->out_rows, (size_t)n_out * sizeof *c->out_rows);
    return VT_OK;
}

/* What vt_plan_running_node reports: set before a node is handed to its
 * backend, cleared when it returns. Relaxed atomics: engines on several
 * threads may set them at once, and a signal handler reads them (lock-free
 * atomics are safe there). */
static _Atomic(const vt_plan_node *) running_node;
static _Atomic(const char *) running_backend;

bool vt_plan_running_node(const char **backend, const char **label, const char **op) {
    const vt_plan_node *n = atomic_load_explicit(&running_node, memory_order_relaxed);
    const char *b = atomic_load_explicit(&running_backend, memory_order_relaxed);
    if (!n || !b) return false;
    *backend = b;
    *label = n->label;
    *op = vt_op_name(n->proto.op);
    return true;
}

vt_status vt_plan_run(vt_plan *p, const vt_plan_call *c, vt_error *err) {
    vt_status st = vt_plan_load_call(p, c, err);
    if (st != VT_OK) return st;
    const int64_t T = p->run_tokens, n_out = p->run_outputs;
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        vt_node node;
        vt_plan_node_at(p, i, T, n_out, &node);
        const vt_backend_entry *e = vt_registry_at(p->registry, n->backend);
        if (p->hook) p->hook(p->hook_user, p, i, 0);
        atomic_store_explicit(&running_backend, e->name, memory_order_relaxed);
        atomic_store_explicit(&running_node, n, memory_order_relaxed);
        vt_status st = vt_backend_run(e, &node);
        atomic_store_explicit(&running_node, NULL, memory_order_relaxed);
        if (p->hook) p->hook(p->hook_user, p, i, 1);
        if (st != VT_OK) {
            char desc[256];
            vt_plan_describe_node(&node, desc, sizeof desc);
            return vt_fail(err, st, "backend '%s' failed on node %s %s: %s", e->name, n->label, desc,
                           vt_status_name(st));
        }
    }
    p->check_pending = false;
    const vt_value *lv = &p->values[p->v_logits];
    memcpy(c->logits, (char *)p->arena + lv->offset,
           (size_t)n_out * (size_t)lv->ne[0] * sizeof(float));
    return VT_OK;
}

/* ------------------------------------------------------------- explain */

/* --backend auto: every candidate's measured time of the node's shape class,
 * the chosen backend's marked with '*'. */
static void explain_costs(const vt_plan *p, const vt_plan_node *n, FILE *f) {
    const vt_auto_costs *c = p->costs;
    fprintf(f, "  cost:");
    for (int b = 0; b < vt_registry_count(p->registry) && b < VT_AUTO_MAX_BACKENDS; b++) {
        if (!c->candidate[b] && b != n->backend) continue;
        const double s = vt_auto_costs_get(c, n->cost_class, b);
        const char *name = vt_registry_at(p->registry, b)->name, *mark = b == n->backend ? "*" : "";
        if (c->failed[b]) fprintf(f, " %s%s=failed", name, mark);
        else if (s >= 0) fprintf(f, " %s%s=%.3fms", name, mark, s * 1e3);
        else fprintf(f, " %s%s=%s", name, mark, s == VT_COST_DECLINED ? "declined" : "-");
    }
    /* the class's times are of the node as keyed (vt_plan_node_keyed_at) */
    if (n->cost_dst_dtype >= 0 && n->dst >= 0 && n->cost_dst_dtype != vt_plan_value_tensor(p, n->dst, -1, -1, false).dtype)
        fprintf(f, " (timed writing %s)", vt_dtype_name(n->cost_dst_dtype));
}

void vt_plan_explain(const vt_plan *p, FILE *f) {
    const char *phase = p->phase == VT_PHASE_DECODE ? "decode" : "prefill";
    fprintf(f, "plan %s: %d nodes, up to %lld tokens per call, %.1f MiB of activations\n", phase, p->n_nodes,
            (long long)p->max_tokens, (double)p->arena_bytes / (1024.0 * 1024.0));
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        vt_node node = n->proto;
        for (int s = 0; s < n->n_src; s++) node.src[s] = vt_plan_value_tensor(p, n->src[s], -1, -1, false);
        if (n->dst >= 0) node.dst = vt_plan_value_tensor(p, n->dst, -1, -1, false);
        char in[160] = "", out[32] = "-";
        int len = 0;
        for (int s = 0; s < n->n_src && len >= 0 && (size_t)len < sizeof in; s++)
            len += snprintf(in + len, sizeof in - (size_t)len, "%s%s", s ? "," : "", vt_dtype_name(node.src[s].dtype));
        if (n->dst >= 0) snprintf(out, sizeof out, "%s", vt_dtype_name(node.dst.dtype));
        const vt_backend_entry *e = vt_registry_at(p->registry, n->backend);
        fprintf(f, "  %s %4d %-24s op=%-17s backend=%-10s in=%s out=%s", phase, i, n->label, vt_op_name(n->op),
                e ? e->name : "?", in, out);
        if (n->op == VT_OP_RESHAPE_AND_CACHE && !vt_plan_kv_exact(node.src[0].dtype, p->kv_dtype))
            fprintf(f, "  [inexact: k/v rounded to %s before the %s cache]", vt_dtype_name(node.src[0].dtype),
                    vt_dtype_name(p->kv_dtype));
        if (p->costs && n->cost_class >= 0) explain_costs(p, n, f);
        fputc('\n', f);
    }
}

int vt_plan_inexact_stores(const vt_plan *p, int32_t *first) {
    int count = 0;
    *first = -1;
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        if (n->op != VT_OP_RESHAPE_AND_CACHE) continue;
        vt_tensor k = vt_plan_value_tensor(p, n->src[0], -1, -1, false);
        vt_tensor v = vt_plan_value_tensor(p, n->src[1], -1, -1, false);
        if (vt_plan_kv_exact(k.dtype, p->kv_dtype) && vt_plan_kv_exact(v.dtype, p->kv_dtype)) continue;
        if (count++ == 0) *first = i;
    }
    return count;
}

void vt_plan_count_backends(const vt_plan *p, int32_t *counts, int n) {
    for (int i = 0; i < n; i++) counts[i] = 0;
    for (int32_t i = 0; i < p->n_nodes; i++)
        if (p->nodes[i].backend >= 0 && p->nodes[i].backend < n) counts[p->nodes[i].backend]++;
}
