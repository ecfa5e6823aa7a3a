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
#include "auto_costs.h"
#include "plan.h"
#include "registry.h"
#include "threadpool.h"
#include "weight_prep.h"

/* Opaque outside core/engine: a client reads what it needs through the
 * functions below (engine_internal.h holds the fields). */
typedef struct vt_engine vt_engine;

/* What an engine is built for: every token gets logits (vt eval, compare) or
 * only the rows a call asks for; and how many sequences one step may carry
 * (the plans are negotiated for that many at creation). */
typedef struct vt_engine_shape {
    bool all_logits;
    int32_t max_seqs; /* >= 1 */
    /* --backend auto: time every shape class again, whatever the
     * calibration cache holds (vt backends --calibrate) */
    bool recalibrate;
} vt_engine_shape;

/* Resolve backends and build plans for `model` (borrowed: it must outlive
 * the engine). all_logits: every evaluated token gets a row of logits (vt
 * eval, compare), else only the last token of each eval. */
vt_status vt_engine_create(const vt_options *opt, vt_model *model, bool all_logits, vt_engine **out, vt_error *err);
/* The same with every shape parameter (vt_engine_create: one sequence). */
/* The backend a plain run prefers when none is named: the loaded one with
 * the highest probe score (ties: discovery order), or -1 if none loaded. */
int32_t vt_engine_default_backend(const vt_registry *r);
/* The fallback a run takes when none is named: the highest-scoring loaded
 * backend other than `preferred`, or -1. */
int32_t vt_engine_default_fallback(const vt_registry *r, int32_t preferred);

/* What an engine checks of its backends before it builds plans, on a
 * registry made with opt's backend path and options: every backend option
 * names a backend that was found and whose init accepted it, and
 * runtime.backend / runtime.fallback name loaded backends (errors name
 * where the setting came from). *preferred and *fallback get the chosen
 * indices (-1: no fallback; --backend auto: the default ranking's).
 * none_loaded_ok: an automatic choice with nothing loaded is not an error
 * (*preferred -1), for a caller that only reports. */
vt_status vt_engine_resolve_backends(const vt_options *opt, const vt_registry *r, bool none_loaded_ok,
                                     int32_t *preferred, int32_t *fallback, vt_error *err);

vt_status vt_engine_create_shaped(const vt_options *opt, vt_model *model, const vt_engine_shape *shape,
                                  vt_engine **out, vt_error *err);
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

/* ---- Many sequences in one forward ----
 * Sequences 0..max_seqs-1 share the KV pool; each grows block by block as its
 * tokens are stored and gives its blocks back when released. A step runs
 * entries of distinct sequences: each entry appends its tokens to its
 * sequence (a decode token, or a chunk of a prompt). Where the two plans
 * compute alike (vt_engine_plans_agree), a step is one forward: all entries
 * of one token go through the decode plan when they fit it, otherwise the
 * prefill plan (at most its max_tokens tokens in all). Where they do not, a
 * token's numbers must not depend on what shares its step: prompt entries
 * go through the prefill plan and generated ones through the decode plan,
 * whatever their size (the generated ones at most max_seqs tokens in all),
 * a step holding both running two forwards. Either every entry's tokens are
 * stored or, on failure, none: VT_ERR_CONTEXT_FULL when the pool lacks
 * blocks, the sequences unchanged. */
typedef struct vt_step_entry {
    int32_t seq;           /* 0..max_seqs-1, each at most once per step */
    const int32_t *tokens;
    int64_t n_tokens;      /* >= 1 */
    bool logits;           /* logits of its last token wanted */
    bool generated;        /* tokens the model generated (decodes, or recomputing them), not a prompt's */
} vt_step_entry;

/* Whether both plans compute every node they share on the same backend with
 * the same dtypes: a token's K/V and logits are then the same whichever plan
 * computed them. */
bool vt_engine_plans_agree(const vt_engine *e);

vt_status vt_engine_step(vt_engine *e, const vt_step_entry *entries, int32_t n_entries, vt_error *err);
/* Logits of entry i of the last step ([n_vocab]), or NULL if it asked for none. */
const float *vt_engine_step_logits(const vt_engine *e, int32_t entry);
/* Tokens stored for sequence seq. */
int64_t vt_engine_seq_len(const vt_engine *e, int32_t seq);
/* Forget sequence seq: its blocks return to the pool at once. */
void vt_engine_seq_release(vt_engine *e, int32_t seq);
/* Sequence seq keeps its first n tokens (0 <= n <= its length): the ones
 * after them are forgotten, blocks past them go back to the pool, the next
 * tokens follow them (kv_cache.h), and the last eval's and step's logits
 * are no longer read. False with nothing changed for a sequence or n out of
 * range; false with the sequence emptied when a block it shares must be
 * copied and the pool has none for the copy. */
bool vt_engine_seq_truncate(vt_engine *e, int32_t seq, int64_t n);
/* Sequence dst (empty) continues from where src is: a copy of its KV blocks,
 * so the two then diverge independently (a prompt computed once, sampled
 * several ways). VT_ERR_CONTEXT_FULL, nothing changed, when the pool lacks
 * the blocks. */
vt_status vt_engine_seq_fork(vt_engine *e, int32_t src, int32_t dst, vt_error *err);
/* KV blocks a sequence can take: free ones, and cached ones no sequence holds
 * (prefix caching evicts those, least recently used first). */
int32_t vt_engine_free_blocks(const vt_engine *e);
/* Sequence seq (empty) starts with the cached blocks matching the beginning
 * of tokens[0..n), at least one token left to compute; returns the tokens
 * it then holds (0 with prefix caching off; kv_cache.h). */
int64_t vt_engine_seq_attach_prefix(vt_engine *e, int32_t seq, const int32_t *tokens, int64_t n);

/* The tokens of tokens[0..n) whose KV the prefix cache holds from the start
 * (what vt_engine_seq_attach_prefix would take), and into *taken how many
 * of the free blocks taking them uses up; marked: NULL, or the blocks an
 * earlier match of the same prediction counted (kv_cache.h). */
int64_t vt_engine_match_prefix(const vt_engine *e, const int32_t *tokens, int64_t n, int32_t *taken,
                               uint8_t *marked);
/* Blocks of the engine's KV pool (the size of match_prefix's marks). */
int32_t vt_engine_kv_blocks(const vt_engine *e);

/* What a client of the engine (the scheduler, the commands) reads of it. */
const vt_model *vt_engine_model(const vt_engine *e);
int32_t vt_engine_max_seqs(const vt_engine *e);       /* sequences one step may carry */
int64_t vt_engine_max_step_tokens(const vt_engine *e); /* tokens one step or eval call may carry */
int64_t vt_engine_ctx_size(const vt_engine *e);        /* tokens one sequence may hold */
int32_t vt_engine_block_size(const vt_engine *e);      /* tokens per KV block */
int32_t vt_engine_total_blocks(const vt_engine *e);    /* KV blocks in the pool */
const vt_kv_cache *vt_engine_kv_cache(const vt_engine *e); /* its counters (kv_cache.h) */

/* fn(arg, begin, end, thread) over [0, n) on the engine's threads, chunks of
 * at least grain: work between steps (sampling) runs where the forward ran. */
void vt_engine_parallel_for(vt_engine *e, int64_t n, int64_t grain, vt_range_fn fn, void *arg);

/* How the engine was built: its backends (the registry and the index of the
 * preferred one), its two plans (phase VT_PHASE_PREFILL or VT_PHASE_DECODE),
 * --backend auto's measured costs (NULL otherwise), its host services, the
 * backends' prepared weight copies, the KV cache's dtype, and the seconds
 * creation took (preparation included). */
vt_registry *vt_engine_registry(const vt_engine *e);
int32_t vt_engine_preferred(const vt_engine *e);
vt_plan *vt_engine_plan(const vt_engine *e, int phase);
const vt_auto_costs *vt_engine_costs(const vt_engine *e);
/* --backend auto: whether class k of the costs is one of this engine's
 * plans' (the cache also holds other models' classes). */
bool vt_engine_uses_class(const vt_engine *e, int k);
/* How many of the costs' classes this engine's plans use. */
int vt_engine_n_classes(const vt_engine *e);
const vt_host *vt_engine_host(const vt_engine *e);
const vt_weight_prep *vt_engine_prepared(const vt_engine *e);
int32_t vt_engine_kv_dtype(const vt_engine *e);
double vt_engine_create_seconds(const vt_engine *e);

/* Both plans, then the KV-cache dtype and where it came from, then the
 * prepared weights per backend. */
void vt_engine_explain(const vt_engine *e, FILE *f);

#endif
