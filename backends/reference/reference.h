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
vt_status ref_matmul(void *ctx, const vt_node *node);
vt_status ref_attention(void *ctx, const vt_node *node);
vt_status ref_reshape_and_cache(void *ctx, const vt_node *node);
vt_status ref_rms_norm(void *ctx, const vt_node *node);
vt_status ref_rope(void *ctx, const vt_node *node);
vt_status ref_swiglu(void *ctx, const vt_node *node);
vt_status ref_add(void *ctx, const vt_node *node);
vt_status ref_get_rows(void *ctx, const vt_node *node);
vt_status ref_convert(void *ctx, const vt_node *node);

/* ---- convention checks: true when the node follows the convention of its
 * op exactly; otherwise false with a one-line reason in why. Side-effect free
 * (supports() calls them). */
bool ref_check_matmul(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_attention(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_reshape_and_cache(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_rms_norm(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_rope(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_swiglu(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_add(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_get_rows(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);
bool ref_check_convert(const ref_ctx *c, const vt_node *node, char *why, size_t why_size);

/* ---- shared helpers (check.c) ---- */

/* Size of dimension i: ne[i] within ndim, 1 beyond it. */
int64_t ref_dim(const vt_tensor *t, int i);
/* Elements of dimensions 1..3: the number of rows of ne[0] elements. */
int64_t ref_rows(const vt_tensor *t);
/* True when a and b have the same size in every dimension (ndim may differ
 * only by trailing 1s). */
bool ref_same_shape(const vt_tensor *a, const vt_tensor *b);

/* Whether t is a well-formed operand: ndim 1..max_ndim, every dimension >= 1,
 * the dtype is one of `dtype_ok`, rows are whole blocks, no size overflow,
 * and strides (when the builder set them, nb[1] != 0) are contiguous — the
 * ops compute offsets from ne[] alone. `what` names the operand in why. */
bool ref_check_tensor(const ref_ctx *c, const vt_tensor *t, const char *what, int max_ndim,
                      bool (*dtype_ok)(int32_t dtype), char *why, size_t why_size);
/* The same for a fixed dtype (I32, I64, F32). */
bool ref_check_tensor_of(const ref_ctx *c, const vt_tensor *t, const char *what, int max_ndim, int32_t dtype,
                         char *why, size_t why_size);
/* The node's n_src is n. */
bool ref_check_n_src(const vt_node *node, int n, char *why, size_t why_size);
/* Format a reason into why; always returns false (for `return ref_reject(...)`). */
bool ref_reject(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Bytes of one row of t (ne[0] elements of its dtype). */
size_t ref_row_bytes(const ref_ctx *c, const vt_tensor *t);

/* Run an op's check before running it: logs the reason as an error of `op`
 * and returns false when the node breaks the convention. */
bool ref_validate(const ref_ctx *c, const vt_node *node, const char *op,
                  bool (*check)(const ref_ctx *, const vt_node *, char *, size_t));

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
