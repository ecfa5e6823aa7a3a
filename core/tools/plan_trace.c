/* plan_trace.c — running a backend's plan nodes in the shadow of the
 * reference's run, each on the reference's inputs (see plan_trace.h). */
#include "plan_trace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The tracer runs both engines node by node and reads (and, to catch a
 * missed write, poisons) their KV caches: it works on the engine's insides. */
#include "engine_internal.h"
#include "plan_exec.h"
#include "quant.h"
#include "sampler.h"

struct vt_trace {
    vt_engine *ref, *be;
    vt_trace_node *nodes;     /* backend prefill nodes, then decode nodes */
    int n_nodes;
    int32_t *traced_by[2];    /* per phase, per reference node: its entry in nodes, or -1 */
    float *got, *want;        /* conversion scratch */
    int64_t scratch;          /* floats in each */
    bool failed;              /* the first failure inside the hook, reported by vt_trace_run */
    vt_error error;
};

static const vt_plan *ref_plan(const vt_trace *t, int ph) { return ph ? t->ref->decode : t->ref->prefill; }
static const vt_plan *be_plan(const vt_trace *t, int ph) { return ph ? t->be->decode : t->be->prefill; }

/* The dtype on the op's axis (op_conformance's, so thresholds mean the same
 * thing in `vt backends --test` and here) and what the node writes. */
static void node_dtypes(const vt_node *n, int32_t *axis, int32_t *out) {
    switch (n->op) {
    case VT_OP_MATMUL:
    case VT_OP_MOE_MATMUL:
    case VT_OP_GET_ROWS: *axis = n->src[0].dtype, *out = n->dst.dtype; return;
    case VT_OP_ATTENTION: *axis = n->src[1].dtype, *out = n->dst.dtype; return;
    case VT_OP_RESHAPE_AND_CACHE: *axis = *out = n->src[2].dtype; return;
    default: *axis = *out = n->dst.dtype; return;
    }
}

static void describe_dtypes(const vt_node *n, char *buf, size_t size) {
    switch (n->op) {
    case VT_OP_MATMUL:
    case VT_OP_MOE_MATMUL:
    case VT_OP_GET_ROWS:
    case VT_OP_CONVERT:
        snprintf(buf, size, "%s->%s", vt_dtype_name(n->src[0].dtype), vt_dtype_name(n->dst.dtype));
        return;
    case VT_OP_RESHAPE_AND_CACHE:
        snprintf(buf, size, "%s->%s", vt_dtype_name(n->src[0].dtype), vt_dtype_name(n->src[2].dtype));
        return;
    case VT_OP_ATTENTION: snprintf(buf, size, "%s", vt_dtype_name(n->src[1].dtype)); return;
    default: snprintf(buf, size, "%s", vt_dtype_name(n->dst.dtype)); return;
    }
}

/* ---- setting up ---------------------------------------------------------- */

static vt_status pair_phase(vt_trace *t, int ph, vt_error *err) {
    const vt_plan *r = ref_plan(t, ph), *b = be_plan(t, ph);
    t->traced_by[ph] = malloc((size_t)(r->n_nodes ? r->n_nodes : 1) * sizeof(int32_t));
    if (!t->traced_by[ph]) return vt_fail(err, VT_ERR_NOMEM, "trace: out of memory");
    for (int32_t i = 0; i < r->n_nodes; i++) t->traced_by[ph][i] = -1;
    for (int32_t j = 0; j < b->n_nodes; j++) {
        const vt_plan_node *bn = &b->nodes[j];
        vt_trace_node *tn = &t->nodes[t->n_nodes++];
        memset(tn, 0, sizeof *tn);
        tn->phase = ph ? VT_PHASE_DECODE : VT_PHASE_PREFILL;
        tn->index = j;
        tn->op = bn->op;
        snprintf(tn->label, sizeof tn->label, "%s", bn->label);
        const vt_backend_entry *e = vt_registry_at(b->registry, bn->backend);
        snprintf(tn->backend, sizeof tn->backend, "%s", e ? e->name : "?");
        vt_node q = bn->proto;
        for (int s = 0; s < bn->n_src; s++) q.src[s] = vt_plan_value_tensor(b, bn->src[s], -1, -1, false);
        if (bn->dst >= 0) q.dst = vt_plan_value_tensor(b, bn->dst, -1, -1, false);
        describe_dtypes(&q, tn->dtypes, sizeof tn->dtypes);
        int32_t axis, out;
        node_dtypes(&q, &axis, &out);
        tn->threshold = vt_op_threshold_for(bn->op, axis, out);
        tn->compare_at = -1;
        for (int32_t i = 0; i < r->n_nodes && !tn->matched; i++) {
            if (r->nodes[i].op != bn->op || strcmp(r->nodes[i].label, bn->label) != 0) continue;
            if (t->traced_by[ph][i] >= 0) continue;
            t->traced_by[ph][i] = t->n_nodes - 1;
            tn->matched = true;
            /* Outputs of different dtypes (negotiation let one producer emit
             * the cache's dtype): the reference's own rounding to a narrower
             * dtype is no error of the backend's. An f32 output is rounded
             * as the reference's was and judged at that dtype; two different
             * narrow ones are each allowed their rounding. */
            const int32_t rd = r->nodes[i].dst >= 0 ? vt_plan_value_tensor(r, r->nodes[i].dst, -1, -1, false).dtype : -1;
            if (bn->dst < 0 || rd == out || rd == VT_F32) continue;
            if (out == VT_F32) {
                tn->compare_at = rd;
                tn->threshold = vt_op_threshold_for(bn->op, axis, rd);
            } else {
                tn->threshold += vt_op_threshold_for(bn->op, axis, rd);
            }
        }
        if (!tn->matched)
            snprintf(tn->note, sizeof tn->note, "%s",
                     bn->op == VT_OP_CONVERT ? "convert from negotiation: its reader gets the reference's value"
                                             : "no node of this label and op in the reference's plan");
    }
    return VT_OK;
}

vt_status vt_trace_create(vt_engine *reference, vt_engine *backend, vt_trace **out, vt_error *err) {
    *out = NULL;
    const vt_kv_cache *rk = reference->kv, *bk = backend->kv;
    if (rk->dtype != bk->dtype || rk->n_layer != bk->n_layer || rk->num_blocks != bk->num_blocks ||
        rk->block_bytes != bk->block_bytes)
        return vt_fail(err, VT_ERR_INVALID,
                       "trace: the backend's KV cache (%s, %d blocks) is not the reference's (%s, %d blocks)",
                       vt_dtype_name(bk->dtype), bk->num_blocks, vt_dtype_name(rk->dtype), rk->num_blocks);
    vt_trace *t = calloc(1, sizeof *t);
    if (!t) return vt_fail(err, VT_ERR_NOMEM, "trace: out of memory");
    t->ref = reference;
    t->be = backend;
    t->nodes = calloc((size_t)(backend->prefill->n_nodes + backend->decode->n_nodes), sizeof *t->nodes);
    vt_status st = t->nodes ? VT_OK : vt_fail(err, VT_ERR_NOMEM, "trace: out of memory");
    for (int ph = 0; ph < 2 && st == VT_OK; ph++) st = pair_phase(t, ph, err);
    if (st != VT_OK) {
        vt_trace_free(t);
        return st;
    }
    *out = t;
    return VT_OK;
}

void vt_trace_free(vt_trace *t) {
    if (!t) return;
    free(t->nodes);
    free(t->traced_by[0]);
    free(t->traced_by[1]);
    free(t->got);
    free(t->want);
    free(t);
}

/* ---- one node ------------------------------------------------------------ */

static int64_t elements(const vt_tensor *x) { return x->ne[0] * x->ne[1] * x->ne[2] * x->ne[3]; }
static size_t tensor_bytes(const vt_tensor *x) { return vt_row_size(x->dtype, x->ne[0]) * (size_t)(x->ne[1] * x->ne[2] * x->ne[3]); }

static bool grow_scratch(vt_trace *t, int64_t n) {
    if (n <= t->scratch) return true;
    float *g = realloc(t->got, (size_t)n * sizeof *g);
    if (g) t->got = g;
    float *w = realloc(t->want, (size_t)n * sizeof *w);
    if (w) t->want = w;
    if (!g || !w) return false;
    t->scratch = n;
    return true;
}

/* The reference's operand r into the backend's operand b (its own memory in
 * the backend's plan), converted to b's dtype as a convert node would. */
static vt_status copy_operand(vt_trace *t, const vt_tensor *r, const vt_tensor *b, vt_error *err) {
    if (r->dtype == b->dtype) {
        memcpy(b->data, r->data, tensor_bytes(b));
        return VT_OK;
    }
    if (!vt_dtype_is_float(r->dtype) || !vt_dtype_is_float(b->dtype))
        return vt_fail(err, VT_ERR_UNSUPPORTED, "trace: an operand is %s in the reference's plan and %s in the backend's",
                       vt_dtype_name(r->dtype), vt_dtype_name(b->dtype));
    const int64_t n = elements(b);
    if (!grow_scratch(t, n)) return vt_fail(err, VT_ERR_NOMEM, "trace: out of memory");
    vt_status st = vt_to_f32(r->dtype, r->data, t->want, n);
    if (st == VT_OK) st = vt_from_f32(b->dtype, t->want, b->data, n);
    return st == VT_OK ? VT_OK : vt_fail(err, st, "trace: converting an operand %s->%s", vt_dtype_name(r->dtype),
                                         vt_dtype_name(b->dtype));
}

/* Which layer's K (or V) store a cache operand is; -1 if none. */
static int cache_layer(const vt_kv_cache *kv, const void *data, int *is_v) {
    for (int l = 0; l < kv->n_layer; l++) {
        if (kv->k[l] == data) return *is_v = 0, l;
        if (kv->v[l] == data) return *is_v = 1, l;
    }
    return -1;
}

/* The blocks of this call's block tables, from the reference's store of a
 * layer into the backend's: the backend's attention reads, and its store
 * writes into, exactly the reference's cache contents. */
static void copy_blocks(const vt_trace *t, const vt_plan *r, int layer, int is_v) {
    const vt_kv_cache *rk = t->ref->kv, *bk = t->be->kv;
    const int32_t *tables = r->values[r->v_block_tables].data;
    const char *from = is_v ? rk->v[layer] : rk->k[layer];
    char *to = is_v ? bk->v[layer] : bk->k[layer];
    for (int64_t i = 0; i < (int64_t)r->max_seqs * r->max_blocks_per_seq; i++) {
        const int32_t blk = tables[i];
        if (blk < 0 || blk >= rk->num_blocks) continue;
        memcpy(to + (size_t)blk * rk->block_bytes, from + (size_t)blk * rk->block_bytes, rk->block_bytes);
    }
}

static size_t cache_row_bytes(const vt_kv_cache *kv) {
    return vt_row_size(kv->dtype, (int64_t)kv->n_kv_heads * kv->head_dim);
}

/* got against want, both converted to f32, into the node's sums. */
static vt_status compare(vt_trace *t, vt_trace_node *tn, int32_t got_dtype, const void *got, int32_t want_dtype,
                         const void *want, int64_t n, vt_error *err) {
    if (!grow_scratch(t, n)) return vt_fail(err, VT_ERR_NOMEM, "trace: out of memory");
    vt_status st = vt_to_f32(got_dtype, got, t->got, n);
    if (st == VT_OK && tn->compare_at >= 0) { /* rounded there and back, through t->want's bytes */
        st = vt_from_f32(tn->compare_at, t->got, t->want, n);
        if (st == VT_OK) st = vt_to_f32(tn->compare_at, t->want, t->got, n);
    }
    if (st == VT_OK) st = vt_to_f32(want_dtype, want, t->want, n);
    if (st != VT_OK) return vt_fail(err, st, "trace: reading node %s's output", tn->label);
    vt_nmse_add(&tn->acc, t->got, t->want, n);
    return VT_OK;
}

/* A store's output: the cache rows at this call's slots, K and V. */
static vt_status compare_store(vt_trace *t, vt_trace_node *tn, const vt_node *rn, int layer, vt_error *err) {
    const vt_kv_cache *rk = t->ref->kv, *bk = t->be->kv;
    const int64_t *slots = rn->src[4].data;
    const size_t row = cache_row_bytes(rk);
    const int64_t per_row = (int64_t)rk->n_kv_heads * rk->head_dim;
    for (int64_t i = 0; i < rn->src[4].ne[0]; i++) {
        if (slots[i] < 0) continue;
        const size_t at = (size_t)slots[i] * row;
        vt_status st = compare(t, tn, bk->dtype, (char *)bk->k[layer] + at, rk->dtype, (char *)rk->k[layer] + at,
                               per_row, err);
        if (st == VT_OK)
            st = compare(t, tn, bk->dtype, (char *)bk->v[layer] + at, rk->dtype, (char *)rk->v[layer] + at, per_row,
                         err);
        if (st != VT_OK) return st;
    }
    return VT_OK;
}

static bool same_shape(const vt_tensor *a, const vt_tensor *b) {
    for (int d = 0; d < VT_MAX_DIMS; d++)
        if (a->ne[d] != b->ne[d]) return false;
    return true;
}

/* The backend's node for reference node i (which just ran) of phase ph. */
static vt_status trace_node(vt_trace *t, int ph, int32_t i, vt_trace_node *tn, vt_error *err) {
    const vt_plan *r = ref_plan(t, ph), *b = be_plan(t, ph);
    const int64_t T = r->run_tokens, n_out = r->run_outputs;
    if (T > b->max_tokens || n_out > b->max_outputs) {
        snprintf(tn->note, sizeof tn->note, "a call of %lld tokens is beyond the backend's plan", (long long)T);
        return VT_OK;
    }
    vt_node rn, bn;
    vt_plan_node_at(r, i, T, n_out, &rn);
    vt_plan_node_at(b, tn->index, T, n_out, &bn);
    const vt_plan_node *bp = &b->nodes[tn->index];
    int layer = -1, is_v = 0;
    bool shapes = rn.n_src == bn.n_src && same_shape(&rn.dst, &bn.dst);
    for (int s = 0; s < bn.n_src && shapes; s++) shapes = same_shape(&rn.src[s], &bn.src[s]);
    if (!shapes) {
        snprintf(tn->note, sizeof tn->note, "operands differ in shape from the reference's node");
        return VT_OK;
    }
    for (int s = 0; s < bn.n_src; s++) {
        const vt_value *v = &b->values[bp->src[s]];
        while (v->kind == VT_VAL_VIEW) v = &b->values[v->base];
        if (v->kind == VT_VAL_WEIGHT) continue; /* the same file's tensor */
        if (v->kind == VT_VAL_CACHE) {
            int rv = 0;
            const int l = cache_layer(t->be->kv, bn.src[s].data, &is_v);
            if (l < 0 || cache_layer(t->ref->kv, rn.src[s].data, &rv) != l || rv != is_v)
                return vt_fail(err, VT_ERR_INTERNAL, "trace: node %s reads a cache store of no layer", tn->label);
            layer = l;
            copy_blocks(t, r, l, is_v);
            continue;
        }
        vt_status st = copy_operand(t, &rn.src[s], &bn.src[s], err);
        if (st != VT_OK) return st;
    }
    const bool store = bn.op == VT_OP_RESHAPE_AND_CACHE;
    if (store) {
        if (layer < 0) return vt_fail(err, VT_ERR_INTERNAL, "trace: store %s has no cache operand", tn->label);
        /* NaN in every row the store must write: one it skips is then a
         * non-finite output, not the reference's value left in place. */
        const int64_t *slots = rn.src[4].data;
        const size_t row = cache_row_bytes(t->be->kv);
        for (int64_t k = 0; k < rn.src[4].ne[0]; k++) {
            if (slots[k] < 0) continue;
            memset((char *)t->be->kv->k[layer] + (size_t)slots[k] * row, 0xff, row);
            memset((char *)t->be->kv->v[layer] + (size_t)slots[k] * row, 0xff, row);
        }
    }
    if (bn.op == VT_OP_MATMUL && !vt_dtype_is_float(bn.src[0].dtype)) {
        /* how much a correct 8-bit kernel rounds these very activations */
        vt_activation_rounding(rn.src[1].data, elements(&rn.src[1]), vt_dtype_block_length(bn.src[0].dtype),
                               &tn->act_diff2, &tn->act_ref2);
        tn->threshold = vt_matmul_threshold_for_input(tn->compare_at >= 0 ? tn->compare_at : bn.dst.dtype,
                                                      tn->act_ref2 > 0 ? tn->act_diff2 / tn->act_ref2 : 0.0);
    }
    const vt_backend_entry *e = vt_registry_at(b->registry, bp->backend);
    vt_status st = vt_backend_run(e, &bn);
    tn->calls++;
    if (st != VT_OK) {
        tn->acc.nonfinite = true;
        snprintf(tn->note, sizeof tn->note, "the op returned %s", vt_status_name(st));
        return VT_OK;
    }
    if (store) return compare_store(t, tn, &rn, layer, err);
    return compare(t, tn, bn.dst.dtype, bn.dst.data, rn.dst.dtype, rn.dst.data, elements(&bn.dst), err);
}

static void hook(void *user, const vt_plan *p, int node, int is_end) {
    vt_trace *t = user;
    if (!is_end || t->failed) return;
    const int ph = p == t->ref->prefill ? 0 : p == t->ref->decode ? 1 : -1;
    if (ph < 0 || t->traced_by[ph][node] < 0) return;
    if (trace_node(t, ph, node, &t->nodes[t->traced_by[ph][node]], &t->error) != VT_OK) t->failed = true;
}

vt_status vt_trace_run(vt_trace *t, const int32_t *prompt, int64_t n_prompt, int64_t n_decode, vt_error *err) {
    const int32_t V = t->ref->model->hp.n_vocab;
    vt_engine_reset(t->ref);
    t->failed = false;
    vt_plan_set_hook(t->ref->prefill, hook, t);
    vt_plan_set_hook(t->ref->decode, hook, t);
    vt_status st = vt_engine_eval(t->ref, prompt, n_prompt, false, err);
    int32_t token = st == VT_OK ? vt_argmax(vt_engine_logits(t->ref, n_prompt - 1), V) : 0;
    for (int64_t k = 0; k < n_decode && st == VT_OK && !t->failed; k++) {
        st = vt_engine_eval(t->ref, &token, 1, true, err);
        if (st == VT_OK) token = vt_argmax(vt_engine_logits(t->ref, 0), V);
    }
    vt_plan_set_hook(t->ref->prefill, NULL, NULL);
    vt_plan_set_hook(t->ref->decode, NULL, NULL);
    if (st == VT_OK && t->failed) {
        *err = t->error;
        st = err->code;
    }
    return st;
}

/* ---- results ------------------------------------------------------------- */

int vt_trace_count(const vt_trace *t) { return t->n_nodes; }
const vt_trace_node *vt_trace_at(const vt_trace *t, int i) { return &t->nodes[i]; }

double vt_trace_error(const vt_trace_node *n) { return n->calls ? vt_nmse_value(&n->acc) : NAN; }

bool vt_trace_within(const vt_trace_node *n) { return n->calls > 0 && vt_trace_error(n) <= n->threshold; }

int vt_trace_first_divergence(const vt_trace *t) {
    for (int i = 0; i < t->n_nodes; i++)
        if (t->nodes[i].calls > 0 && !vt_trace_within(&t->nodes[i])) return i;
    return -1;
}
