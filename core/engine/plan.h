/* plan.h — a negotiated execution plan: the forward pass of one model as a
 * list of typed nodes, each assigned to a backend that accepted it exactly.
 *
 * One plan per shape class (prefill: up to max_tokens tokens per call;
 * decode: one token). Built before the first forward; every edge carries one
 * dtype that its producer emits and its consumers accept, so the executor
 * never converts. Building fails with the op, backend and dtypes named when
 * no backend accepts a node. */
#ifndef VT_CORE_PLAN_H
#define VT_CORE_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "error.h"
#include "kv_cache.h"
#include "model.h"
#include "auto_costs.h"
#include "registry.h"
#include "plan_exec.h"
#include "plan_types.h"

typedef struct vt_plan_config {
    const vt_model *model;
    const vt_kv_cache *kv;
    const vt_registry *registry;
    const vt_host *host;
    int32_t preferred;        /* registry index of the preferred backend */
    int32_t fallback;         /* registry index, or -1 = none */
    bool fallback_is_self;    /* none because runtime.fallback names the preferred backend itself */
    bool check_plan;          /* the first run re-offers every node as executed (vt_plan_run) */
    /* --backend auto: place each node on the candidate with the lowest
     * measured time of its shape class (classes not yet known are added,
     * and placed as without costs); NULL = preferred, then fallback. */
    vt_auto_costs *costs;
} vt_plan_config;

/* The batch shapes a plan is built for. Decode: one token per sequence, so
 * max_tokens = max_seqs and every token gets logits. Prefill: up to
 * max_tokens tokens of up to max_seqs sequences, logits for every token with
 * all_logits, else for up to max_seqs selected rows (the last token of each
 * sequence's chunk, typically). */
typedef struct vt_plan_shape {
    vt_phase phase;
    int64_t max_tokens; /* prefill; decode takes max_seqs */
    int32_t max_seqs;
    bool all_logits;
} vt_plan_shape;

vt_status vt_plan_build(const vt_plan_config *cfg, const vt_plan_shape *shape, vt_plan **out, vt_error *err);
void vt_plan_free(vt_plan *p);

#endif
