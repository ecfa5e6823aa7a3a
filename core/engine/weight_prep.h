/* weight_prep.h — the prepare hook of ABI 1.2 run over an engine's plans:
 * each backend is offered the weights its nodes read, the copies it returns
 * are wired into those nodes, counted, and released when the engine goes.
 *
 * Separate from plan building because it runs once over both plans (one
 * copy per tensor and backend, whichever phases read it) and owns memory
 * that outlives neither the plans nor the backends. */
#ifndef VT_CORE_WEIGHT_PREP_H
#define VT_CORE_WEIGHT_PREP_H

#include <stdio.h>

#include "error.h"
#include "plan.h"
#include "registry.h"

typedef struct vt_weight_prep vt_weight_prep;

/* Offer every weight operand of the plans' nodes to the backend the node
 * runs on (backends without the hook are skipped), then point each node's
 * operand at the copy its backend prepared. On failure nothing stays
 * prepared and err names the backend, the tensor and the backend's reason.
 * *out is NULL on failure; free with vt_weight_prep_free before the
 * registry is destroyed.
 *
 * The memory rule, one resident copy of each weight: as soon as a tensor's
 * offers are answered, if every reader of it (every node of plans, both
 * phases, every backend, views included) reads a prepared copy, its pages
 * of g's file mapping are released (vt_gguf_release_pages: they leave the
 * resident set and fault back in from the file if read). Tensor by tensor,
 * so the file is never resident whole beside the copies. A tensor any node
 * reads unprepared keeps them. g NULL: nothing released.
 *
 * Which layout, one per weight: a tensor is offered only when its readers
 * are all nodes of one backend reading it directly. A tensor nodes of
 * several backends read (--backend onednn: its prefill matmuls and the
 * fallback's decode matmuls), or one read through a view, is offered to
 * none and every reader reads the file's bytes: a copy would serve only the
 * backend that made it, and the file's pages would stay resident beside it
 * for the others. */
vt_status vt_weight_prep_run(const vt_registry *r, vt_plan *const *plans, int n_plans, const vt_gguf *g,
                             vt_weight_prep **out, vt_error *err);
void vt_weight_prep_free(vt_weight_prep *w);

/* Bytes of the file's mapping released by the memory rule, and of how many tensors. */
size_t vt_weight_prep_released(const vt_weight_prep *w, int *n_tensors);
/* Bytes of the tensors nodes of more than one backend read (kept in the
 * file's layout by the rule above), and how many. */
size_t vt_weight_prep_shared(const vt_weight_prep *w, int *n_tensors);

/* --backend auto's calibration times node i of p (one of plans) on backend
 * (a registry index) through this same hook, so a backend that prepares is
 * timed on the layout it will run on: each weight operand of node (built
 * by vt_plan_node_keyed_at, unprepared) is offered to backend with the ops
 * and phases of every reader of that tensor in plans (what
 * vt_weight_prep_run offers when auto places all of them there) -- unless
 * backend does not accept one of them in its keyed form or one reads it through a view, in which case the
 * tensor will be shared whatever auto decides, is never prepared, and the
 * node is timed on the file's bytes --, and node
 * is pointed at the copies (bits set in node->prepared). The copies are
 * kept in `kept` and reused for every later timing of the same tensor on
 * the same backend (the offer is the same, so the layout is): a node timed
 * again, or a tensor two classes read (tied embeddings: get_rows and the
 * output matmul), is prepared once per calibration, not once per timing --
 * the output matrix of a large vocabulary takes longer to prepare than to
 * run. On failure err reads as vt_weight_prep_run's. Backends without the
 * hook: node unchanged. */
typedef struct vt_timing_copies vt_timing_copies;
vt_status vt_timing_copies_create(vt_timing_copies **out, vt_error *err);
/* Every kept copy back to its backend (before the backends' shutdown); NULL is a no-op. */
void vt_timing_copies_free(vt_timing_copies *kept, const vt_registry *r);
vt_status vt_weight_prep_for_timing(vt_timing_copies *kept, vt_plan *const *plans, int n_plans, const vt_plan *p,
                                    int32_t i, int32_t backend, vt_node *node, vt_error *err);

/* Bytes and count of the copies backend (a registry index) keeps. */
size_t vt_weight_prep_bytes(const vt_weight_prep *w, int32_t backend, int *n_tensors);
/* Bytes of every copy, all backends. */
size_t vt_weight_prep_total(const vt_weight_prep *w);
/* "NAME X MiB (N tensors)[, ...]" per backend with the hook that was
 * offered weights, or "none". */
void vt_weight_prep_describe(const vt_weight_prep *w, char *buf, size_t size);
/* "prepared weights: " and the above, one line; then, if any, a line
 * "originals released: X MiB of the file's mapping (N tensors)"; then, if
 * any, "shared weights: X MiB (N tensors) read by nodes of A, B: kept in the
 * file's layout, ..." (the layout rule's choice and why). */
void vt_weight_prep_print(const vt_weight_prep *w, FILE *f);

#endif
