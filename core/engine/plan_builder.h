/* plan_builder.h — what the passes over a built graph share (plan_build.c:
 * placement and the final re-offer; plan_negotiate.c: the KV-cache store):
 * asking backends about nodes as they stand or as they would be, and the
 * order in which backends are asked. Private to the plan builder. */
#ifndef VT_CORE_PLAN_BUILDER_H
#define VT_CORE_PLAN_BUILDER_H

#include "graph.h"
#include "plan.h"
#include "plan_exec.h"

typedef struct vt_builder {
    const vt_plan_config *cfg;
    vt_graph *g; /* the graph being placed: its plan, error and sticky status */
} vt_builder;

/* "decode" or "prefill", for messages. */
const char *builder_phase_name(const vt_builder *b);
const vt_backend_entry *builder_entry(const vt_builder *b, int32_t idx);

/* Node n's proto with its operands as they stand (data NULL, maximum shapes). */
void builder_refresh_proto(vt_builder *b, vt_plan_node *n);
/* Does backend `backend` accept node n as it stands? */
bool builder_accepts(vt_builder *b, int32_t backend, vt_plan_node *n);
/* ... or a node as it would be (a what-if: nothing in the plan changes). */
bool builder_accepts_node(const vt_builder *b, int32_t backend, const vt_node *node);
/* Its shape class in the costs (registered if new); -1 without costs. */
int builder_node_class(vt_builder *b, const vt_node *node);
/* Seconds of class k on backend i as placement weighs them (a large number
 * when not measured). */
double builder_cost(const vt_builder *b, int k, int32_t i);
/* Backends to offer a node of class k, in order; returns how many. */
int builder_backend_order(const vt_builder *b, int k, int32_t *order, int max);

/* The KV-cache stores: every reshape_and_cache node placed, and the dtype
 * its k/v producers emit agreed (plan_negotiate.c). */
vt_status vt_plan_negotiate_kv(vt_builder *b);

#endif
