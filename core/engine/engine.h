/* engine.h — model + backends + KV cache + negotiated plans: the real engine
 * path every command uses (run, eval, compare, bench).
 *
 * Creation resolves the backends, allocates the KV cache in the resolved
 * dtype and builds both plans (prefill and decode) before any forward, so a
 * dtype disagreement is a build error, never a mid-forward failure. */
#ifndef VT_CORE_ENGINE_H
#define VT_CORE_ENGINE_H

#include <stdbool.h>
#include <stdio.h>

#include "error.h"
#include "host.h"
#include "kv_cache.h"
#include "model.h"
#include "options.h"
#include "plan.h"
#include "registry.h"
#include "threadpool.h"

typedef struct vt_engine {
    vt_options opt;
    vt_model *model;          /* borrowed */
    vt_threadpool *pool;
    const vt_host *host;
    vt_registry *registry;
    int32_t preferred;        /* registry indices */
    int32_t fallback;         /* -1 = none */
    vt_kv_cache *kv;
    vt_kv_seq seq;
    vt_plan *prefill;
    vt_plan *decode;
    bool all_logits;
    float *logits;            /* [n rows][n_vocab] of the last eval */
    int64_t logits_rows;
    int64_t logits_cap;       /* rows allocated */
    int64_t ctx_size;
} vt_engine;

/* Resolve backends and build plans for `model` (borrowed: it must outlive
 * the engine). all_logits: every evaluated token gets a row of logits (vt
 * eval, compare), else only the last token of each eval. */
vt_status vt_engine_create(const vt_options *opt, vt_model *model, bool all_logits, vt_engine **out, vt_error *err);
void vt_engine_free(vt_engine *e);

/* Append tokens to the sequence and run them: through the prefill plan in
 * chunks of batch_size (decode plan when use_decode, one token per call).
 * Logits: of the last token, or of every token when all_logits (in order).
 * Returns VT_ERR_CONTEXT_FULL (sequence unchanged) if they do not fit. */
vt_status vt_engine_eval(vt_engine *e, const int32_t *tokens, int64_t n, bool use_decode, vt_error *err);
/* Logits row i of the last eval ([n_vocab] floats). */
const float *vt_engine_logits(const vt_engine *e, int64_t row);
int64_t vt_engine_n_past(const vt_engine *e);
void vt_engine_reset(vt_engine *e);

/* Both plans, then the KV-cache dtype and where it came from. */
void vt_engine_explain(const vt_engine *e, FILE *f);

#endif
