/* op_cases.h — the battery of generated op cases `vt backends --test` runs
 * (and the tests reuse): for each op, each dtype of the op's dtype axis and
 * each phase, a fixed list of shapes chosen to reach the edges of a kernel —
 * odd K and N, M = 1 and M > 1, tokens crossing cache blocks, GQA ratios
 * 1/2/4/8, several sequences of different lengths, every KV dtype for store
 * and attention — filled with seeded random values.
 *
 * The dtype axis is the one `vt backends` prints: the weight's for matmul and
 * get_rows, the KV cache's for attention and reshape_and_cache, the output's
 * for the rest. A case may also vary a second dtype (matmul's output, the
 * store's k/v, convert's input); its `dtypes` text names both.
 *
 * A case is built whole: inputs shared by two nodes, `node` for the backend
 * under test and `ref_node` for the reference, each with its own outputs, so
 * the two runs can be compared. Generation is deterministic in (seed, op,
 * dtype, phase, index): a case reproduces on its own, whatever ran before. */
#ifndef VT_CORE_OP_CASES_H
#define VT_CORE_OP_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "vt/vt_backend.h"

#define VT_OP_CASE_MAX_BUFFERS 16

typedef struct vt_op_case {
    int op;
    vt_phase phase;
    int32_t axis_dtype; /* the dtype on the op's axis (weight, cache or output) */
    int32_t in_dtype;   /* the other dtype the case varies (matmul X is always f32: VT_F32) */
    int32_t out_dtype;  /* dtype of what the op writes (the cache's for reshape_and_cache) */
    char dtypes[32];    /* "q6_k->f32", "f32->f16" (store: k/v -> cache), "f16" (attention cache) */
    char shape[96];     /* "K=256 N=37 M=5", "D=64 H=8 KVH=2 T=37 seqs=1" */
    vt_node node;       /* the backend's run: data set, outputs its own */
    vt_node ref_node;   /* the reference's run: the same inputs, its own outputs */
    double flops;       /* floating-point operations of one run (0: count bytes instead) */
    double bytes;       /* bytes one run reads and writes */
    void *buffers[VT_OP_CASE_MAX_BUFFERS];
    int n_buffers;
} vt_op_case;

/* The dtypes of op's axis, in `vt backends` order; returns how many. */
int vt_op_case_axis(int op, int32_t *dtypes, int max);

/* Cases of (op, dtype, phase): 0 when the dtype is not on the op's axis. */
int vt_op_case_count(int op, int32_t dtype, vt_phase phase);

/* Build case `index` (0 <= index < count) of (op, dtype, phase) from seed.
 * VT_ERR_NOMEM when a buffer cannot be had; the case is then empty. */
vt_status vt_op_case_build(int op, int32_t dtype, vt_phase phase, int index, uint64_t seed, vt_op_case *c,
                           vt_error *err);

/* Free every buffer of a built (or failed) case. */
void vt_op_case_free(vt_op_case *c);

/* The tensors a node writes: dst, or both caches for reshape_and_cache.
 * Returns how many (1 or 2). */
int vt_op_case_outputs(vt_node *node, vt_tensor **outs);

/* Did a run write past the end of output t? Every case buffer is followed
 * by a guard as long as itself (at least 256 bytes), filled with a pattern
 * when built: a kernel writing the output in a wider dtype than it accepted
 * (f32 into an f16 dst) changes it. */
bool vt_op_case_overran(const vt_tensor *t);

/* "matmul" -> VT_OP_MATMUL, or -1. */
int vt_op_from_name(const char *name);

#endif
