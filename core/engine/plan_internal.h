/* plan_internal.h — helpers shared by plan_build.c and plan_exec.c. */
#ifndef VT_CORE_PLAN_INTERNAL_H
#define VT_CORE_PLAN_INTERNAL_H

#include "plan.h"

/* Tensor descriptor of value v. n_tokens / n_outputs < 0 mean "at the plan's
 * maximum". with_data: set data (else NULL, as supports() queries get). */
vt_tensor vt_plan_value_tensor(const vt_plan *p, int32_t v, int64_t n_tokens, int64_t n_outputs, bool with_data);

/* "matmul(q4_k[256,768], f32[256,512] -> f32[768,512])" */
void vt_plan_describe_node(const vt_node *n, char *buf, size_t size);

/* Node i exactly as the executor hands it to its backend in a call of T
 * tokens and n_out output rows: the negotiated proto with every operand at
 * that size and its data set. */
void vt_plan_node_at(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, vt_node *node);

/* Would backend b run node i as the executor hands it over in such a call
 * (data pointers cleared and prepared == 0, as supports() always sees it)? */
bool vt_plan_node_accepted(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, const vt_backend_entry *b);

/* Lay out the activations in one arena, reusing memory of dead values. */
vt_status vt_plan_allocate(vt_plan *p, vt_error *err);


#endif
