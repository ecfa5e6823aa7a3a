/* plan_trace.h — where a backend first departs from the reference, node by
 * node (`vt compare --trace`).
 *
 * Two engines on one model with the same options: the reference's and the
 * backend's. Only the reference's runs; after each of its nodes (the
 * executor's node hook) the backend's plan node of the same label and op is
 * run on its own backend with the reference's inputs — converted to the
 * dtypes the backend's plan negotiated, the KV blocks of the call copied
 * from the reference's cache — and its output is compared with the
 * reference's by NMSE (op_conformance.h) against that op's threshold. So
 * each node's error is its own, never what earlier nodes accumulated, and
 * the executor is not duplicated: the backend's nodes are the very nodes its
 * plan would run, built by vt_plan_node_at.
 *
 * Matching: a backend node is matched to the reference node with the same
 * label and op (labels are unique per plan: "blk.3.attn_q"). Operands match
 * by position (one operand convention per op), and must have the same
 * shape. A backend node without a counterpart — a convert negotiation
 * inserted ("blk.0.rope_k.to_f16") — is not run: the node reading its output
 * gets the reference's value rounded to that dtype, which is what the
 * convert computes. A store's output is the cache rows it writes (poisoned
 * first, so a store that writes nothing is caught). */
#ifndef VT_CORE_PLAN_TRACE_H
#define VT_CORE_PLAN_TRACE_H

#include <stdbool.h>

#include "engine.h"
#include "op_conformance.h"

/* One node of the backend's plans (prefill nodes first, then decode). */
typedef struct vt_trace_node {
    vt_phase phase;
    int32_t index;      /* in its plan */
    char label[40];
    int op;
    char dtypes[32];    /* "q6_k->f32" (matmul, get_rows, convert), "f32->f16" (store: k/v->cache), "f16" */
    char backend[64];   /* what runs it in the backend's plan */
    bool matched;       /* has a reference counterpart */
    int64_t calls;      /* calls compared */
    vt_nmse_acc acc;    /* over every call */
    double threshold;   /* the op's (op_conformance.h); a quantized matmul's grows with its inputs' tails */
    int32_t compare_at; /* the reference emits this narrower dtype: the backend's f32 output is rounded to
                         * it before the comparison (-1: compared as is) */
    double act_diff2, act_ref2; /* quantized matmul: its inputs' 8-bit rounding, over every call */
    char note[96];      /* why a node was not compared, or how it failed */
} vt_trace_node;

typedef struct vt_trace vt_trace;

/* Pair the reference engine with a backend engine (both borrowed, built from
 * the same model and options, all logits, one sequence). Fails when their
 * KV caches differ in shape or dtype. */
vt_status vt_trace_create(vt_engine *reference, vt_engine *backend, vt_trace **out, vt_error *err);
void vt_trace_free(vt_trace *t);

/* The prompt through the reference's prefill, then n_decode decode steps on
 * its greedy tokens, every backend node traced on the way. The reference
 * engine is reset first. */
vt_status vt_trace_run(vt_trace *t, const int32_t *prompt, int64_t n_prompt, int64_t n_decode, vt_error *err);

int vt_trace_count(const vt_trace *t);
const vt_trace_node *vt_trace_at(const vt_trace *t, int i);
/* NMSE of node i over its calls (NAN if never compared). */
double vt_trace_error(const vt_trace_node *n);
/* Whether node i was compared and stayed within its threshold. */
bool vt_trace_within(const vt_trace_node *n);
/* The first node, in execution order, above its threshold (or whose op
 * failed); -1 if none. */
int vt_trace_first_divergence(const vt_trace *t);

#endif
