/* calibrate.c — measuring the shape classes `--backend auto` places by
 * (see calibrate.h for what is timed and how). */
#include "calibrate.h"

#include "clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host.h"
#include "plan_exec.h"
#include "weight_prep.h"

/* Decode is timed with this many tokens already in the cache. */
#define DECODE_POSITION 255
/* Repetitions after the warm-up: at least MIN_RUNS, more (up to MAX_RUNS)
 * while they add up to less than MIN_SECONDS, so µs-long ops get a stable
 * median too; a node whose first timed run takes VT_AUTO_LONG_RUN or more
 * gets LONG_RUNS (the faster kept): at that length one run varies little, and
 * the output matrix of a large vocabulary would otherwise take most of the
 * budget. */
#define MIN_RUNS 3
#define LONG_RUNS 2
#define MAX_RUNS 15
#define MIN_SECONDS 0.004
/* A first timed run this many times the best time of the class so far
 * ends that backend's timing: it cannot win, and a slow backend must not
 * make calibration slow. */
#define HOPELESS 4.0

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 0x3C00 in every 16-bit half: 1.0 as f16, 0.0078 as bf16, 0.0078 as f32
 * (0x3C003C00), a unit scale for q8_0 blocks: finite and normal whichever
 * dtype reads it, so no backend is timed on NaNs or denormals. */
static void fill_pattern(void *data, size_t bytes) {
    uint16_t *h = data;
    for (size_t i = 0; i < bytes / 2; i++) h[i] = 0x3C00;
}

/* The calibration call of plan p, loaded into it. */
typedef struct calib_call {
    int32_t *tokens, *positions, *seq_idx, *table, *table_len, *out_rows;
    int64_t *slots;
    const int32_t **tables;
} calib_call;

static void free_call(calib_call *k) {
    free(k->tokens), free(k->positions), free(k->seq_idx), free(k->table), free(k->table_len), free(k->out_rows);
    free(k->slots), free(k->tables);
}

static vt_status load_call(vt_plan *p, vt_kv_cache *kv, int32_t V, calib_call *k, vt_error *err) {
    const bool decode = p->phase == VT_PHASE_DECODE;
    const int64_t cap = vt_kv_cache_capacity(kv);
    int64_t T = decode ? p->max_tokens : (p->max_tokens < VT_AUTO_CALIBRATION_TOKENS ? p->max_tokens
                                                                                    : VT_AUTO_CALIBRATION_TOKENS);
    if (T > cap) T = cap;
    const int32_t n_seqs = decode ? (int32_t)T : 1;
    const int64_t pos0 = decode ? (DECODE_POSITION < cap ? DECODE_POSITION : cap - 1) : 0;
    const int64_t last = decode ? pos0 : T - 1; /* the highest position any token has */
    const int32_t n_blocks = (int32_t)(last / kv->block_size + 1);
    memset(k, 0, sizeof *k);
    k->tokens = malloc((size_t)T * sizeof *k->tokens);
    k->positions = malloc((size_t)T * sizeof *k->positions);
    k->seq_idx = malloc((size_t)T * sizeof *k->seq_idx);
    k->out_rows = malloc((size_t)T * sizeof *k->out_rows);
    k->slots = malloc((size_t)T * sizeof *k->slots);
    k->table = malloc((size_t)n_blocks * sizeof *k->table);
    k->table_len = malloc((size_t)n_seqs * sizeof *k->table_len);
    k->tables = malloc((size_t)n_seqs * sizeof *k->tables);
    if (!k->tokens || !k->positions || !k->seq_idx || !k->out_rows || !k->slots || !k->table || !k->table_len ||
        !k->tables)
        return vt_fail(err, VT_ERR_NOMEM, "out of memory for calibration");
    /* Every sequence reads the same blocks 0..n_blocks-1: nothing is stored
     * for real yet, and the blocks are overwritten when sequences use them. */
    for (int32_t b = 0; b < n_blocks; b++) k->table[b] = b;
    for (int32_t s = 0; s < n_seqs; s++) k->tables[s] = k->table, k->table_len[s] = n_blocks;
    for (int64_t i = 0; i < T; i++) {
        k->tokens[i] = (int32_t)((i * 7919 + 1) % V);
        k->positions[i] = (int32_t)(decode ? pos0 : i);
        k->seq_idx[i] = decode ? (int32_t)i : 0;
        /* each token its own cache slot: the decode tokens share a position,
         * and two writes of one slot from two threads would race (what
         * attention reads there is timed, not used) */
        k->slots[i] = decode ? (pos0 + i) % cap : k->positions[i];
    }
    int64_t n_out = T;
    if (p->v_out_rows >= 0) {
        n_out = p->max_outputs < T ? p->max_outputs : T;
        for (int64_t r = 0; r < n_out; r++) k->out_rows[r] = (int32_t)(T - n_out + r);
    }
    for (int l = 0; l < kv->n_layer; l++) {
        fill_pattern(kv->k[l], (size_t)n_blocks * kv->block_bytes);
        fill_pattern(kv->v[l], (size_t)n_blocks * kv->block_bytes);
    }
    fill_pattern(p->arena, p->arena_bytes);
    const vt_plan_call call = {k->tokens, T, k->positions, k->seq_idx, k->slots, k->tables, k->table_len, n_seqs,
                               p->v_out_rows >= 0 ? k->out_rows : NULL, n_out, NULL};
    return vt_plan_load_call(p, &call, err);
}

/* The output buffer node i's keyed form needs when its dtype is not the
 * plan's (vt_plan_node_keyed_at): *out (NULL when the plan's own serves),
 * from the host's allocator and touched once, so no timed run pays its
 * first page faults. What calibration computes there is never read. */
static vt_status keyed_output(const vt_plan *p, int32_t i, void **out, vt_error *err) {
    *out = NULL;
    vt_node node;
    if (!vt_plan_node_keyed_at(p, i, p->run_tokens, p->run_outputs, &node)) return VT_OK;
    size_t bytes = node.dst.nb[1];
    for (int d = 1; d < VT_MAX_DIMS; d++) bytes *= (size_t)(node.dst.ne[d] > 0 ? node.dst.ne[d] : 1);
    *out = p->host->alloc(bytes, 64);
    if (!*out)
        return vt_fail(err, VT_ERR_NOMEM, "out of memory for calibration's output of %s (%zu bytes)", p->nodes[i].label,
                       bytes);
    memset(*out, 0, bytes);
    return VT_OK;
}

/* Calibration runs only the nodes it times, so an input of one may come
 * from a node it skipped (its class timed on an earlier node, or read from
 * the cache): float activations left as the fill pattern time like any
 * others, but indices do not. The only indices a plan computes are a
 * mixture of experts' routed expert ids [T][U] (moe_route's output; the
 * call's own inputs, tokens and positions, load_call writes). Before node i
 * is timed they are written here, whatever moe_route left: token t's U
 * experts are t U .. t U + U - 1 modulo the expert count, distinct within a
 * token, and T tokens together reach min(T U, NE) experts as real routing
 * spreads them (routing the fill pattern's logits would give every token
 * the same U experts, and timing a moe_matmul reading unwritten ids fails).
 * The arena keeps a value until its last reader, and no node's output
 * aliases its inputs, so the ids stay while node i is timed on every
 * candidate. Returns false for an integer input of another producer, which
 * no plan has yet: node i is then not timed. */
static bool write_index_inputs(const vt_plan *p, int32_t i) {
    const vt_plan_node *n = &p->nodes[i];
    for (int s = 0; s < n->n_src; s++) {
        const vt_tensor t = vt_plan_value_tensor(p, n->src[s], p->run_tokens, p->run_outputs, true);
        if (t.dtype != VT_I32 && t.dtype != VT_I64) continue;
        const int32_t j = vt_plan_producer(p, n->src[s], i);
        if (j < 0) continue; /* the call's own inputs */
        if (p->nodes[j].op != VT_OP_MOE_ROUTE || t.dtype != VT_I32) return false;
        const int64_t NE = vt_plan_value_tensor(p, p->nodes[j].src[0], p->run_tokens, p->run_outputs, false).ne[0];
        const int64_t U = t.ne[0], T = t.ne[1];
        int32_t *ids = t.data;
        for (int64_t k = 0; k < U * T; k++) ids[k] = (int32_t)(k % NE);
    }
    return true;
}

/* Time node i of p in its keyed form (vt_plan_node_keyed_at; a retyped
 * output into out, keyed_output) on backend b: *seconds, or the op's failure. The node
 * is handed over as the engine will run it: its weights first offered to
 * b's prepare hook (the engine's own code, weight_prep.h; the copies are
 * kept for the whole calibration). The warm-up is never judged (a first
 * call may build kernels); the first timed run is, against the best time of
 * the class. `again` (a close call's re-timing of a node b ran moments ago,
 * `earlier` its time then): a node of VT_AUTO_LONG_RUN or more gets no
 * warm-up and one run -- its kernels are built, its weights prepared and
 * touched, and at that length a run is its own warm-up; the faster of all
 * its timings is kept anyway. A failed preparation is b's failure: why says which, else
 * names the op's status. */
static vt_status time_node(vt_timing_copies *kept, vt_plan *const *plans, int n_plans, const vt_plan *p, int32_t i,
                           void *out, int32_t b, double best, bool again, double earlier, double *seconds,
                           vt_error *why) {
    const vt_backend_entry *e = vt_registry_at(p->registry, b);
    vt_node node;
    if (vt_plan_node_keyed_at(p, i, p->run_tokens, p->run_outputs, &node)) node.dst.data = out;
    vt_status st = vt_weight_prep_for_timing(kept, plans, n_plans, p, i, b, &node, why);
    if (st != VT_OK) return st;
    const bool long_again = again && earlier >= VT_AUTO_LONG_RUN;
    if (!long_again) st = vt_backend_run(e, &node);
    double runs[MAX_RUNS], total = 0;
    int n = 0, min_runs = long_again ? 1 : MIN_RUNS;
    while (st == VT_OK && (n < min_runs || (n < MAX_RUNS && total < MIN_SECONDS))) {
        const double t0 = vt_now_seconds();
        st = vt_backend_run(e, &node);
        runs[n] = vt_now_seconds() - t0;
        if (st != VT_OK) break;
        total += runs[n++];
        if (n == 1 && best >= 0 && runs[0] > HOPELESS * best) break;
        if (n == 1 && runs[0] >= VT_AUTO_LONG_RUN && !long_again) min_runs = LONG_RUNS;
    }
    if (st != VT_OK) {
        snprintf(why->msg, sizeof why->msg, "%s", vt_status_name(st));
        return st;
    }
    qsort(runs, (size_t)n, sizeof *runs, by_value);
    *seconds = n == 2 ? runs[0] : runs[n / 2];
    return VT_OK;
}

vt_status vt_auto_settle_close(double seconds[2], vt_auto_timer time_again, void *user, int *retimed, int *failed) {
    *retimed = 0;
    *failed = -1;
    const double lo = seconds[0] < seconds[1] ? seconds[0] : seconds[1];
    const double hi = seconds[0] < seconds[1] ? seconds[1] : seconds[0];
    if (!(lo >= 0) || hi > VT_AUTO_CLOSE * lo) return VT_OK;
    for (int r = 0; r < VT_AUTO_RETIME_ROUNDS; r++)
        for (int k = 0; k < 2; k++) {
            const int which = (r + k) % 2;
            double s = 0;
            vt_status st = time_again(user, which, &s);
            if (st != VT_OK) {
                *failed = which;
                return st;
            }
            ++*retimed;
            if (s < seconds[which]) seconds[which] = s;
        }
    return VT_OK;
}

/* A close call's candidate timed again, through time_node like the first time. */
typedef struct retime_ctx {
    vt_timing_copies *kept;
    vt_plan *const *plans;
    int n_plans;
    const vt_plan *p;
    int32_t node;
    void *out; /* keyed_output's */
    int backend[2];
    double earlier[2]; /* each one's time before the re-timings */
    vt_error why;
} retime_ctx;

static vt_status retime(void *user, int which, double *seconds) {
    retime_ctx *x = user;
    return time_node(x->kept, x->plans, x->n_plans, x->p, x->node, x->out, x->backend[which], -1, true,
                     x->earlier[which], seconds, &x->why);
}

/* Candidates by probe score, highest first: the likely winner is timed
 * first, so the others can be cut short against its time. */
static int timing_order(const vt_registry *r, const vt_auto_costs *c, int *order) {
    int n = 0;
    for (int i = 0; i < vt_registry_count(r) && i < VT_AUTO_MAX_BACKENDS; i++)
        if (c->candidate[i]) order[n++] = i;
    for (int j = 1; j < n; j++)
        for (int m = j; m > 0 && vt_registry_at(r, order[m - 1])->score < vt_registry_at(r, order[m])->score; m--) {
            const int t = order[m];
            order[m] = order[m - 1];
            order[m - 1] = t;
        }
    return n;
}

static bool needs_timing(const vt_auto_costs *c, int k, const int *order, int n_order) {
    for (int j = 0; j < n_order; j++)
        if (!c->failed[order[j]] && c->classes[k].seconds[order[j]] == VT_COST_UNMEASURED) return true;
    return false;
}

/* The progress line, on a terminal only. */
static void progress(bool on, int done, int total) {
    if (!on) return;
    if (done < total)
        fprintf(stderr, "\rcalibrating auto placement (runtime.backend = auto): %d/%d shape classes", done, total);
    else
        fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* Backend b failed on node i of p: warned, its times dropped, left out. */
static void left_out(vt_auto_costs *c, const vt_plan *p, int32_t i, int b, const char *why) {
    char desc[256];
    vt_node q;
    vt_plan_node_keyed_at(p, i, p->run_tokens, p->run_outputs, &q); /* the form it was timed in */
    vt_plan_describe_node(&q, desc, sizeof desc);
    vt_log(VT_LOG_WARN, "core",
           "runtime.backend = auto: backend '%s' failed during calibration on %s %s (%s): it is left out of auto placement",
           vt_registry_at(p->registry, b)->name, p->nodes[i].label, desc, why);
    c->failed[b] = true;
    for (int m = 0; m < c->n; m++) c->classes[m].seconds[b] = VT_COST_UNMEASURED;
}

vt_status vt_auto_calibrate(vt_plan *const *plans, int n_plans, vt_kv_cache *kv, vt_auto_costs *c, vt_error *err) {
    const double t_start = vt_now_seconds();
    c->measured = 0;
    c->retimed = 0;
    if (n_plans < 1) return VT_OK;
    const vt_registry *r = plans[0]->registry;
    int order[VT_AUTO_MAX_BACKENDS];
    const int n_order = timing_order(r, c, order);
    /* what needs timing (a class is timed on its first node) */
    int total = 0;
    for (int k = 0; k < c->n; k++) total += needs_timing(c, k, order, n_order);
    const bool show = total > 0 && vt_progress_lines_on();
    int done = 0;
    vt_timing_copies *kept = NULL;
    vt_status st = total > 0 ? vt_timing_copies_create(&kept, err) : VT_OK;
    for (int pi = 0; pi < n_plans && st == VT_OK; pi++) {
        vt_plan *p = plans[pi];
        bool loaded = false;
        calib_call call;
        memset(&call, 0, sizeof call);
        for (int32_t i = 0; i < p->n_nodes && st == VT_OK; i++) {
            const int k = p->nodes[i].cost_class;
            bool first = k >= 0;
            for (int32_t j = 0; j < i && first; j++) first = p->nodes[j].cost_class != k;
            if (!first || !needs_timing(c, k, order, n_order)) continue;
            if (!loaded) {
                /* the model's vocabulary bounds the token ids: the embedding
                 * table's second dimension */
                const vt_value *emb = &p->values[p->nodes[0].src[0]];
                st = load_call(p, kv, (int32_t)emb->ne[1], &call, err);
                if (st != VT_OK) break;
                loaded = true;
            }
            double best = -1;
            for (int j = 0; j < n_order; j++) {
                const int b = order[j];
                const double have = c->classes[k].seconds[b];
                if (have >= 0 && (best < 0 || have < best)) best = have;
            }
            if (!write_index_inputs(p, i)) {
                vt_log(VT_LOG_WARN, "core", "runtime.backend = auto: %s reads indices calibration cannot make: not timed",
                       p->nodes[i].label);
                progress(show, ++done, total);
                continue;
            }
            void *out = NULL;
            st = keyed_output(p, i, &out, err);
            if (st != VT_OK) break;
            bool timed_now[VT_AUTO_MAX_BACKENDS] = {false};
            for (int j = 0; j < n_order; j++) {
                const int b = order[j];
                if (c->failed[b] || c->classes[k].seconds[b] != VT_COST_UNMEASURED) continue;
                const vt_backend_entry *e = vt_registry_at(r, b);
                if (!vt_plan_node_keyed_accepted(p, i, p->run_tokens, p->run_outputs, e)) {
                    c->classes[k].seconds[b] = VT_COST_DECLINED;
                    continue;
                }
                double s = 0;
                vt_error why = {0};
                vt_status run = time_node(kept, plans, n_plans, p, i, out, b, best, false, -1, &s, &why);
                if (run != VT_OK) {
                    if (show) progress(true, total, total);
                    left_out(c, p, i, b, why.msg);
                    continue;
                }
                c->classes[k].seconds[b] = s;
                c->measured++;
                if (best < 0 || s < best) best = s;
                timed_now[b] = true;
            }
            /* the two fastest of those timed now: a close call is timed again */
            retime_ctx x = {kept, plans, n_plans, p, i, out, {-1, -1}, {-1, -1}, {0}};
            for (int j = 0; j < n_order; j++) {
                const int b = order[j];
                const double s = c->classes[k].seconds[b];
                if (!timed_now[b] || c->failed[b] || s < 0) continue;
                if (x.backend[0] < 0 || s < c->classes[k].seconds[x.backend[0]]) {
                    x.backend[1] = x.backend[0];
                    x.backend[0] = b;
                } else if (x.backend[1] < 0 || s < c->classes[k].seconds[x.backend[1]]) {
                    x.backend[1] = b;
                }
            }
            if (x.backend[1] >= 0) {
                double t[2] = {c->classes[k].seconds[x.backend[0]], c->classes[k].seconds[x.backend[1]]};
                x.earlier[0] = t[0], x.earlier[1] = t[1];
                int retimed = 0, failed = -1;
                if (vt_auto_settle_close(t, retime, &x, &retimed, &failed) == VT_OK) {
                    c->classes[k].seconds[x.backend[0]] = t[0];
                    c->classes[k].seconds[x.backend[1]] = t[1];
                } else {
                    if (show) progress(true, total, total);
                    left_out(c, p, i, x.backend[failed], x.why.msg);
                }
                c->retimed += retimed;
            }
            if (out) p->host->free(out);
            progress(show, ++done, total);
        }
        free_call(&call);
    }
    if (show) progress(true, total, total);
    vt_timing_copies_free(kept, r);
    c->calibration_seconds = vt_now_seconds() - t_start;
    return st;
}
