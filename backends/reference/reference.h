/* reference.h — private to the reference backend: its state, one entry point
 * and one convention check per op (each op's file holds both), and the small
 * helpers the op files share (check.c, scratch in backend.c).
 *
 * The reference is the oracle every other backend is tested against, so it is
 * written to be obviously correct rather than fast: sums and dot products are
 * accumulated in double, results are rounded once to f32 and then to the
 * destination dtype through the host's converters (round to nearest even).
 * Work is spread over output rows / heads with host->parallel_for so it stays
 * usable on real models under sanitizers. */
#ifndef VT_REFERENCE_H
#define VT_REFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vt/vt_backend.h"
#include "vt/vt_check.h"
#include "vt/vt_dtype.h"

#define REF_NAME "reference"

/* The backend's state: what init was handed. */
typedef struct ref_ctx {
    const vt_host *host;
    int n_threads; /* host->n_threads: thread indices of parallel_for tasks are below it */
} ref_ctx;

/* ---- ops (one file each). Each checks its node against the operand
 * convention of vt_backend.h first and fails with VT_ERR_INVALID (logged)
 * when it does not follow it, so a misbuilt node can never read out of bounds. */
#define REF_OP_DECLARE_(ID, name, n_src, weight_src, since_minor, params) vt_status ref_##name(void *ctx, const vt_node *node);
VT_OP_LIST(REF_OP_DECLARE_)
#undef REF_OP_DECLARE_

/* ---- shared helpers (check.c) ----
 * The convention checks themselves (what supports() accepts, exactly) and the
 * dimension helpers are vt/vt_check.h's, shared with every backend. */

/* Bytes of one row of t (ne[0] elements of its dtype). */
size_t ref_row_bytes(const ref_ctx *c, const vt_tensor *t);

/* sum_k a[k] * b[k] in double (every op that dots rows uses this one). */
double ref_dot_f64(const float *a, const float *b, int64_t n);

/* Check the node against the conventions before running it: logs the reason
 * as an error of `op` and returns false when the node breaks them. */
bool ref_validate(const ref_ctx *c, const vt_node *node, const char *op);

/* ---- per-thread scratch (backend.c) ----
 * One allocation of n_threads slices of `bytes_per_thread` (rounded up to 64
 * bytes) from host->alloc; slice `thread` belongs to the task running on that
 * thread. NULL on allocation failure (the op then returns VT_ERR_NOMEM). */
typedef struct ref_scratch {
    unsigned char *base;
    size_t stride;
} ref_scratch;
bool ref_scratch_alloc(const ref_ctx *c, size_t bytes_per_thread, ref_scratch *s);
void *ref_scratch_slice(const ref_scratch *s, int thread);
void ref_scratch_free(const ref_ctx *c, ref_scratch *s);

/* Spread [0, n) over the host's threads (nothing to do for n <= 0). */
void ref_parallel(const ref_ctx *c, int64_t n, int64_t grain, vt_range_fn fn, void *arg);

#endif
