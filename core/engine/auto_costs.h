/* auto_costs.h — what `--backend auto` places by: the measured time of one
 * node of each shape class on each candidate backend.
 *
 * A shape class groups the nodes that cost the same: a matmul by weight
 * dtype, N x K, output dtype, phase and M bucket (the token count it was
 * timed at, rounded up to a power of two, capped at the calibration size);
 * attention by phase, KV dtype and head geometry; the store by phase and
 * cache dtype; the small ops by phase, dtypes and row length. Its key is a
 * short text ("matmul decode w=q4_k N=3072 K=1024 y=f32 M=1"), so it can be
 * written to the calibration cache and read back by a later engine.
 *
 * Times are indexed by registry index while an engine uses them and by
 * backend name in the cache file. */
#ifndef VT_CORE_AUTO_COSTS_H
#define VT_CORE_AUTO_COSTS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "vt/vt_backend.h"

#define VT_AUTO_MAX_BACKENDS 32
#define VT_AUTO_KEY_SIZE 112

/* A time entry: seconds >= 0, or one of these. */
#define VT_COST_UNMEASURED (-1.0) /* not timed (yet) */
#define VT_COST_DECLINED (-2.0)   /* the backend's supports() declines the class's node */

/* Prefill classes are timed at this many tokens at most (the M bucket cap). */
#define VT_AUTO_CALIBRATION_TOKENS 128

/* A class leaves the preferred backend (the highest probe score, what a
 * plain run would use) only for a backend measured faster by more than this
 * factor. Two timings of one backend differ by a few percent on a shared
 * machine, and a move has costs no class timing shows (the cache state
 * across backends, their threads taking turns): a near tie decided by noise
 * would make auto's plan differ from the best single backend's for nothing. */
#define VT_AUTO_MARGIN 1.05

typedef struct vt_cost_class {
    char key[VT_AUTO_KEY_SIZE];
    double seconds[VT_AUTO_MAX_BACKENDS]; /* by registry index */
} vt_cost_class;

typedef struct vt_auto_costs {
    vt_cost_class *classes;
    int n, cap;
    /* Backends that may take nodes: loaded, not the reference (the slow
     * oracle, never timed; it still takes what nobody else accepts) and
     * not failed during calibration. */
    bool candidate[VT_AUTO_MAX_BACKENDS];
    bool failed[VT_AUTO_MAX_BACKENDS]; /* failed during calibration: takes no node */
    int n_backends; /* registry entries covered */
    /* What the last calibration did, for --explain and vt bench. */
    double calibration_seconds;
    int measured;    /* (class, backend) pairs timed now */
    int retimed;     /* timings made again for close calls (calibrate.h) */
    int from_cache;  /* pairs read from the cache */
    bool cache_hit;  /* nothing needed timing */
    int cache_read;  /* what reading the cache found: a vt_calibration_read (calibration_cache.h) */
    bool recalibrate; /* time the plans' classes again, whatever the cache holds */
    char cache_path[1024];
} vt_auto_costs;

void vt_auto_costs_init(vt_auto_costs *c);
void vt_auto_costs_free(vt_auto_costs *c);

/* The class key of a node as built (data NULL, maximum shapes); returns
 * whether it names the node's output dtype (matmul and the small ops; not
 * attention, the MoE ops, get_rows or the store). */
bool vt_shape_class_key(const vt_node *node, char *key, size_t size);

/* vt_shape_class_key's answer alone. */
bool vt_shape_class_names_dst(const vt_node *node);

/* Index of the class with this key, added (every time unmeasured) when
 * missing; -1 when memory runs out. */
int vt_auto_costs_class(vt_auto_costs *c, const char *key);
/* Index of the class with this key, or -1. */
int vt_auto_costs_find(const vt_auto_costs *c, const char *key);

/* Seconds of class k on backend b, or a VT_COST_* marker. */
double vt_auto_costs_get(const vt_auto_costs *c, int k, int b);

/* The seconds placement weighs: vt_auto_costs_get, divided by
 * VT_AUTO_MARGIN for the preferred backend. */
double vt_auto_costs_weighed(const vt_auto_costs *c, int k, int b, int preferred);

/* The candidate with the lowest weighed time of class k (ties to the
 * preferred backend, then the lower index), or -1 when none was measured:
 * where the plan builder puts a node that every candidate accepts, as `vt
 * backends --calibrate` marks it (the builder's own order, backend_order in
 * plan_build.c, also breaks ties by the fallback first). */
int vt_auto_costs_best(const vt_auto_costs *c, int k, int preferred);

#endif
