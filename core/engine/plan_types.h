/* plan_types.h — what a plan is made of: its values, its nodes, the plan
 * itself and one call's inputs. The types alone, below both the builder
 * (plan_build.c, plan.h) and the executor (plan_exec.c, plan_exec.h), so
 * neither reaches into the other's header for them. */
#ifndef VT_CORE_PLAN_TYPES_H
#define VT_CORE_PLAN_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "auto_costs.h"
#include "registry.h"
#include "vt/vt_backend.h"

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
    int32_t cost_dst_dtype;   /* the output dtype that class was keyed with (negotiation may change
                               * the node's since), or -1: the node's own */
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

/* Do k/v of dtype kv reach a cache of dtype cache at the cache's own
 * precision? True when kv is the cache dtype or f32 (the store then rounds
 * once, exactly as a producer emitting the cache dtype would); false when
 * they were rounded to another 16-bit dtype first. */
static inline bool vt_plan_kv_exact(int32_t kv, int32_t cache) { return kv == cache || kv == VT_F32; }

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

#endif
