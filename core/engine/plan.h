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

typedef enum vt_value_kind {
    VT_VAL_ACT = 0, /* activation: lives in the plan's arena */
    VT_VAL_VIEW,    /* another value's memory with a different shape */
    VT_VAL_WEIGHT,  /* mmapped GGUF tensor */
    VT_VAL_INPUT,   /* per-call input the executor fills (tokens, positions, slots...) */
    VT_VAL_CACHE    /* a KV-cache store */
} vt_value_kind;

/* Which dimension grows with the call's size. */
typedef enum vt_scale { VT_SCALE_NONE = 0, VT_SCALE_TOKENS, VT_SCALE_OUTPUTS } vt_scale;

typedef struct vt_value {
    char name[48];
    vt_value_kind kind;
    int32_t dtype;
    int32_t ndim;
    int64_t ne[VT_MAX_DIMS]; /* at the plan's maximum size */
    vt_scale scale;
    int32_t scale_dim;       /* the dimension that scales */
    int32_t base;            /* VIEW: the viewed value */
    void *data;              /* WEIGHT, INPUT, CACHE: fixed memory */
    size_t offset;           /* ACT: byte offset in the arena */
    size_t bytes;            /* ACT: bytes at maximum size */
    int32_t last_use;        /* index of the last node reading it (or its views) */
} vt_value;

typedef struct vt_plan_node {
    int32_t op;               /* vt_op */
    int32_t n_src;
    int32_t src[VT_MAX_SRC];  /* value ids */
    int32_t dst;              /* value id, -1 for none (reshape_and_cache) */
    int32_t backend;          /* registry index of the backend that runs it */
    char label[40];           /* "blk.3.attn_q", "output", ... */
    void *prepared[VT_MAX_SRC]; /* the backend's prepared copy of weight operand s, or NULL (weight_prep.c) */
    vt_node proto;            /* params and phase; tensors filled per call */
    int32_t cost_class;       /* --backend auto: its shape class in the plan's costs, else -1 */
} vt_plan_node;

typedef struct vt_plan vt_plan;
typedef void (*vt_node_hook)(void *user, const vt_plan *p, int node, int is_end);

struct vt_plan {
    vt_phase phase;
    int64_t max_tokens;       /* tokens per call, over all sequences */
    int32_t max_seqs;         /* sequences per call (rows of the block tables) */
    int64_t max_outputs;      /* rows of logits per call: every token's (decode, all_logits) or selected ones */
    int32_t kv_dtype;
    vt_value *values;
    int32_t n_values, cap_values;
    vt_plan_node *nodes;
    int32_t n_nodes, cap_nodes;
    /* inputs */
    int32_t v_tokens, v_positions, v_seq_idx, v_slots, v_block_tables, v_out_rows, v_logits;
    int32_t max_blocks_per_seq;
    void *arena;
    size_t arena_bytes;
    const vt_host *host;
    const vt_registry *registry;
    /* Re-offer every node, exactly as the executor hands it to its backend,
     * to that backend's supports() on the next run (VT_CHECK_PLAN); cleared
     * once a run has passed. */
    bool check_pending;
    /* The size of the call being run (or last run): what a node hook needs
     * to see the node's operands as the executor hands them out. */
    int64_t run_tokens, run_outputs;
    /* --backend auto: the measured times it was placed by (NULL otherwise);
     * owned by the engine. */
    const vt_auto_costs *costs;
    /* vt_plan_set_hook's hook and its argument (NULL = none) */
    vt_node_hook hook;
    void *hook_user;
};

typedef struct vt_plan_config {
    const vt_model *model;
    const vt_kv_cache *kv;
    const vt_registry *registry;
    const vt_host *host;
    int32_t preferred;        /* registry index of the preferred backend */
    int32_t fallback;         /* registry index, or -1 = none */
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

/* One line per node: op, backend, input and output dtypes; a store whose
 * k/v are less precise than the cache dtype says so on its line. */
void vt_plan_explain(const vt_plan *p, FILE *f);

/* Do k/v of dtype kv reach a cache of dtype cache at the cache's own
 * precision? True when kv is the cache dtype or f32 (the store then rounds
 * once, exactly as a producer emitting the cache dtype would); false when
 * they were rounded to another 16-bit dtype first. */
bool vt_plan_kv_exact(int32_t kv, int32_t cache);
/* Stores (reshape_and_cache nodes) whose k/v are not exact in that sense;
 * *first gets the index of the first of them (-1 if none). */
int vt_plan_inexact_stores(const vt_plan *p, int32_t *first);
/* Count of nodes per backend (indexed by registry index, n entries). */
void vt_plan_count_backends(const vt_plan *p, int32_t *counts, int n);

/* One call: n_tokens tokens of n_seqs sequences. Token i is at position
 * positions[i] of sequence seq_idx[i] (0..n_seqs-1), whose block table is
 * tables[seq_idx[i]] (table_len[..] physical blocks), and is stored in KV
 * slot slots[i]. Logits go to `logits` ([n_out][n_vocab]) for the rows
 * out_rows[0..n_out) of the call; a plan that computes every row (decode,
 * all_logits) takes out_rows = NULL and n_out = n_tokens. */
typedef struct vt_plan_call {
    const int32_t *tokens;        /* [n_tokens] */
    int64_t n_tokens;
    const int32_t *positions;     /* [n_tokens] */
    const int32_t *seq_idx;       /* [n_tokens] */
    const int64_t *slots;         /* [n_tokens] */
    const int32_t *const *tables; /* [n_seqs] block tables */
    const int32_t *table_len;     /* [n_seqs] */
    int32_t n_seqs;
    const int32_t *out_rows;      /* [n_out], or NULL for every row */
    int64_t n_out;
    float *logits;                /* [n_out][n_vocab] */
} vt_plan_call;

/* With check_pending, every node is first re-offered to its backend as it
 * is about to run (data pointers NULL, as supports() always sees them; the
 * token dimension at this call's size); a declined node fails the run with
 * VT_ERR_INTERNAL naming it, before any node runs. */
vt_status vt_plan_run(vt_plan *p, const vt_plan_call *call, vt_error *err);

/* vt_plan_run's first half: check the call and load its inputs (tokens,
 * positions, slots, tables, rows) into the plan, running nothing; then
 * p->run_tokens and p->run_outputs give its size. Calibration times single
 * nodes on inputs loaded this way. */
vt_status vt_plan_load_call(vt_plan *p, const vt_plan_call *c, vt_error *err);

/* Node hook of plan p: called around every node of its runs when set (NULL
 * = off); is_end after the node ran, when its inputs and its output are all
 * still in place (the tracer compares nodes with it). A field of the plan,
 * so engines on other threads are never touched. */
void vt_plan_set_hook(vt_plan *p, vt_node_hook hook, void *user);

#endif
