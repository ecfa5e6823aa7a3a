/* plan_exec.h — running a built plan (plan_exec.c): the executor, and the
 * helpers the builder and the tools use to see a node as the executor hands
 * it to its backend. Needs only the plan's types (plan_types.h): building a
 * plan is above this, in plan.h. */
#ifndef VT_CORE_PLAN_EXEC_H
#define VT_CORE_PLAN_EXEC_H

#include <stdio.h>

#include "error.h"
#include "plan_types.h"

/* Tensor descriptor of value v. n_tokens / n_outputs < 0 mean "at the plan's
 * maximum". with_data: set data (else NULL, as supports() queries get). */
vt_tensor vt_plan_value_tensor(const vt_plan *p, int32_t v, int64_t n_tokens, int64_t n_outputs, bool with_data);

/* The node of p before node `before` that writes value v (a view's base),
 * or -1 (an input, a weight). */
int32_t vt_plan_producer(const vt_plan *p, int32_t v, int32_t before);

/* t as a contiguous tensor of another dtype (same shape, same data pointer). */
vt_tensor vt_tensor_retyped(vt_tensor t, int32_t dtype);

/* "matmul(q4_k[256,768], f32[256,512] -> f32[768,512])" */
void vt_plan_describe_node(const vt_node *n, char *buf, size_t size);

/* Node i exactly as the executor hands it to its backend in a call of T
 * tokens and n_out output rows: the negotiated proto with every operand at
 * that size and its data set. */
void vt_plan_node_at(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, vt_node *node);

/* Would backend b run node i as the executor hands it over in such a call
 * (data pointers cleared and prepared == 0, as supports() always sees it)? */
bool vt_plan_node_accepted(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, const vt_backend_entry *b);

/* Node i as its --backend auto shape class was keyed: as vt_plan_node_at,
 * but with the output in the dtype the class names (cost_dst_dtype), which
 * negotiation may have changed since (a producer writing k or v in the
 * cache's dtype for the store), while placement chose the node's backend by
 * that class. Calibration times and offers weights for this form, so a
 * class's times stay true to its key: a backend that writes only the keyed
 * dtype is measured, not recorded as declining a class it would run.
 * Returns true if the output was retyped: its data is then NULL, the
 * caller's to give (the plan's buffer holds the other dtype). */
bool vt_plan_node_keyed_at(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, vt_node *node);

/* vt_plan_node_accepted for node i's keyed form. */
bool vt_plan_node_keyed_accepted(const vt_plan *p, int32_t i, int64_t T, int64_t n_out, const vt_backend_entry *b);

/* Lay out the activations in one arena, reusing memory of dead values. */
vt_status vt_plan_allocate(vt_plan *p, vt_error *err);

/* One line per node: op, backend, input and output dtypes; a store whose
 * k/v are less precise than the cache dtype says so on its line. */
void vt_plan_explain(const vt_plan *p, FILE *f);

/* Stores (reshape_and_cache nodes) whose k/v are not exact (vt_plan_kv_exact);
 * *first gets the index of the first of them (-1 if none). */
int vt_plan_inexact_stores(const vt_plan *p, int32_t *first);
/* Count of nodes per backend (indexed by registry index, n entries). */
void vt_plan_count_backends(const vt_plan *p, int32_t *counts, int n);

/* With check_pending, every node is first re-offered to its backend as it
 * is about to run (data pointers NULL, as supports() always sees them; the
 * token dimension at this call's size); a declined node fails the run with
 * VT_ERR_INTERNAL naming it, before any node runs. */
vt_status vt_plan_run(vt_plan *p, const vt_plan_call *call, vt_error *err);

/* The node a plan run has handed its backend and not had back yet (the last
 * one started, when several engines run at once): its backend's name, its
 * label and op name, for a report of a crash inside a backend. False when
 * no node is running. Only reads two pointers: safe in a signal handler. */
bool vt_plan_running_node(const char **backend, const char **label, const char **op);

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
