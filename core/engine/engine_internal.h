/* engine_internal.h — the fields of vt_engine, for the engine's own files
 * and for tests that inspect an engine's insides; every other client goes
 * through the functions of engine.h. */
#ifndef VT_CORE_ENGINE_INTERNAL_H
#define VT_CORE_ENGINE_INTERNAL_H

#include "engine.h"

struct vt_engine {
    vt_options opt;
    vt_model *model;          /* borrowed */
    vt_threadpool *pool;
    vt_host host_table;       /* this engine's host services, on its pool */
    const vt_host *host;      /* &host_table */
    vt_registry *registry;
    int32_t preferred;        /* registry indices */
    int32_t fallback;         /* -1 = none */
    vt_kv_cache *kv;          /* one pool of blocks shared by every sequence */
    vt_kv_seq *seqs;          /* [max_seqs]; sequence 0 is the one vt_engine_eval runs */
    int32_t max_seqs;
    vt_plan *prefill;
    vt_plan *decode;
    /* Both plans compute every node they share alike (plans_agree): else a
     * step runs a prompt's tokens and generated ones through their own plans. */
    bool plans_agree;
    vt_auto_costs *costs;     /* --backend auto: the measured times the plans were placed by; else NULL */
    vt_weight_prep *prepared; /* the backends' prepared weight copies (ABI 1.2), read by both plans */
    double create_seconds;    /* wall time of vt_engine_create, preparation included */
    bool all_logits;
    float *logits;            /* [n rows][n_vocab] of the last eval or step */
    int64_t logits_rows;
    int64_t logits_cap;       /* rows allocated */
    int32_t *step_rows;       /* [max_seqs]: row of logits of each entry of the last step, -1 = none */
    int64_t ctx_size;
};

#endif
