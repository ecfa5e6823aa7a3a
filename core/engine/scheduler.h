/* scheduler.h — continuous batching over one engine's sequences and KV pool.
 *
 * Requests (a prompt, a number of new tokens, a sampler, stop ids) wait in a
 * FIFO queue; each vt_sched_step() runs one vt_engine_step whose entries are
 * the decode tokens of the running requests first, then chunks of prompts in
 * arrival order (chunked prefill), within a token budget per step and the
 * engine's sequences per step. A request starts only when the KV blocks of
 * its first chunk are free. When a running request needs a block and none is
 * free, the most recently admitted running request is preempted: its blocks
 * are freed at once and it goes back to the front of the queue, to be
 * recomputed later from its prompt plus the tokens it had generated. It then
 * continues where it left off (its sampler too), so its tokens are the same
 * as if it had never been preempted.
 *
 * Each request's generated text is built once, as its tokens are sampled
 * (a recomputation after preemption samples nothing again, so it adds no
 * text twice), and stop strings are matched on it.
 *
 * Each request samples with its own sampler from its own row of logits: for
 * a given seed its tokens do not depend on what else is in the batch.
 *
 * Choices of one prompt (vt_sched_add_n) are requests too: the first
 * computes the prompt, the others sample their first token from its last
 * row of logits and continue on a fork of its KV blocks, so the prompt is
 * computed once. A request that asks for logprobs gets them from the raw
 * row it samples from (logprobs.h), before the sampler touches it.
 *
 * The scheduler owns every sequence of the engine it is given; nothing else
 * may run the engine meanwhile. Calls are not thread-safe: serialize them. */
#ifndef VT_CORE_SCHEDULER_H
#define VT_CORE_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"
#include "sampler.h"
#include "vt/vt.h"

typedef struct vt_sched vt_sched;

typedef struct vt_sched_options {
    int32_t max_waiting;  /* requests waiting to start before vt_sched_add refuses, >= 1 */
    int64_t token_budget; /* tokens per step, >= 1; 0 = as many as the engine's prefill plan takes */
    /* Prompt tokens (new prompts, the rest of one, recomputations) a step
     * takes when it also decodes, so the running requests' next tokens do
     * not wait behind a long prefill. 0 = automatic: about as many as take
     * one decode step's time (VT_SCHED_PROMPT_PER_DECODE: measured on the
     * steps already run, never fewer than a KV block's worth; a block's
     * worth once decodes have run and before a prompt token was timed; no
     * cap before any decode). N >= 1: at most N (the budget: no cap). */
    int64_t prefill_chunk;
} vt_sched_options;

/* max_waiting 256, token_budget 0, prefill_chunk 0. */
/* A token budget within what one forward of step_max tokens takes (0: that
 * many); else refused naming runtime.token_budget and the limit. */
vt_status vt_sched_check_token_budget(int64_t budget, int64_t step_max, vt_error *err);
/* The runtime.max_waiting, token_budget and prefill_chunk settings. */
vt_sched_options vt_sched_options_of(const vt_options *opt);
vt_sched_options vt_sched_default_options(void);

/* A request as the caller gives it; vt_sched_add copies everything. */
typedef struct vt_sched_request {
    const int32_t *prompt;
    int64_t n_prompt;          /* >= 1, at most the engine's context (ctx_size) */
    int64_t max_new_tokens;    /* >= 1 */
    vt_sampler_params sampler; /* temp >= 0, top_k >= -1 (<= 0 off), top_p in [0, 1], min_p in [0, 1], as options.h */
    /* Token ids that end the request (e.g. the model's end-of-generation ids,
     * vt_tokenizer_is_eog). The stop token itself is reported as the last token. */
    const int32_t *stop_ids;
    int32_t n_stop_ids;
    /* OpenAI's penalties over the tokens the request generated (sampler.h);
     * finite, 0 = off. */
    float presence_penalty;
    float frequency_penalty;
    /* Strings that end the request when its text contains one
     * (text_stream.h: at most 16, 1..256 bytes). They need the model's
     * tokenizer, as the text does. */
    const char *const *stop_strings;
    int32_t n_stop_strings;
    /* Log-probabilities of each generated token and of its top_logprobs
     * (0..VT_BATCH_MAX_TOP_LOGPROBS) most likely alternatives, from the raw
     * logits (logprobs.h); vt_sched_read_logprobs reads them. */
    bool logprobs;
    int32_t top_logprobs;
    /* GBNF text the generated text must follow (grammar_sampling.h), or
     * NULL. Needs the model's tokenizer. A request whose grammar is complete
     * and admits nothing more finishes as STOP; one for which no token can
     * continue the grammar finishes as LENGTH. */
    const char *grammar;
} vt_sched_request;

typedef enum vt_sched_state {
    VT_SCHED_WAITING,  /* queued: not started, or preempted and waiting to be recomputed */
    VT_SCHED_RUNNING,  /* holds an engine sequence */
    VT_SCHED_FINISHED, /* see vt_sched_finish */
} vt_sched_state;

typedef enum vt_sched_finish {
    VT_SCHED_FINISH_NONE,      /* not finished */
    VT_SCHED_FINISH_LENGTH,    /* max_new_tokens generated, or the context is full */
    VT_SCHED_FINISH_STOP,      /* a stop token was generated */
    VT_SCHED_FINISH_CANCELLED, /* vt_sched_cancel */
    VT_SCHED_FINISH_STOP_STRING, /* the text reached a stop string */
} vt_sched_finish;

/* What vt_sched_read reports. */
typedef struct vt_sched_output {
    const int32_t *tokens; /* generated since the last read; valid until the request is removed */
    int64_t n_tokens;
    int64_t n_generated;   /* in all, read or not */
    int32_t n_preemptions; /* times this request was preempted and recomputed */
    int64_t n_cached;      /* prompt tokens taken from the prefix cache instead of computed */
    vt_sched_state state;
    vt_sched_finish finish;
    /* The text that became final since the last read (text_stream.h): the
     * generated tokens' bytes (none for a stop id), whole characters only,
     * nothing that may still become a stop string; once finished, the rest,
     * ending before a matched stop string. Empty without a tokenizer. Valid
     * until the next read or the removal of the request. */
    const char *text;
    size_t n_text;
} vt_sched_output;

/* What one step did. */
typedef struct vt_sched_step_info {
    int32_t n_entries;        /* sequences in the forward; 0: nothing was run */
    int64_t n_decode_tokens;  /* one per running request that had a token to decode */
    int64_t n_prefill_tokens; /* chunks of prompts (recomputations included) */
    int32_t n_admitted;       /* requests started (or restarted after preemption) */
    int32_t n_preempted;
    int32_t n_finished;
} vt_sched_step_info;

/* Totals since creation. */
typedef struct vt_sched_stats {
    int64_t n_steps;           /* steps that ran a forward */
    int64_t prefill_chunk;     /* the prompt tokens a step that decodes takes now (0: no cap yet) */
    int64_t n_preemptions;
    int64_t n_recomputed;      /* tokens dropped by preemption, to be computed again */
    int64_t n_forks;           /* choices that continued on a fork of their leader's prompt */
    /* Prompt tokens of requests starting for the first time: looked up in
     * the prefix cache, and of those taken from it. A recomputation after
     * preemption (its own blocks found again) and a request's other choices
     * (forked, or queued and finding the first's prompt) are not counted:
     * these are the cache's hits on prompts, each prompt once. */
    int64_t n_prompt_looked_up;
    int64_t n_prompt_hit;
} vt_sched_stats;

/* engine: borrowed, must outlive the scheduler; every sequence of it must be
 * empty. opt NULL: vt_sched_default_options(). */
vt_status vt_sched_create(vt_engine *engine, const vt_sched_options *opt, vt_sched **out, vt_error *err);
/* Releases every sequence the scheduler holds. */
void vt_sched_free(vt_sched *s);

/* Queue a request; *id gets its id (>= 1). Refused, with the field named and
 * nothing queued: an empty prompt, a token or stop id outside the vocabulary,
 * sampler settings out of range, max_new_tokens < 1 (VT_ERR_INVALID); a
 * prompt longer than the context (VT_ERR_CONTEXT_FULL); a full queue
 * (VT_ERR_UNSUPPORTED: the request is valid, there is no room for it now). */
vt_status vt_sched_add(vt_sched *s, const vt_sched_request *req, uint64_t *id, vt_error *err);

/* n requests of one prompt (n choices, 1..VT_BATCH_MAX_CHOICES): ids[i]
 * samples with seed q->sampler.seed + i. The first (the leader) queues as
 * vt_sched_add does; the others wait for its prompt's logits, sample their
 * first token from that row and continue on a fork of its sequence (or,
 * without a free sequence or block, queue and compute their own). */
vt_status vt_sched_add_n(vt_sched *s, const vt_sched_request *req, int32_t n, uint64_t *ids, vt_error *err);

/* Schedule and run one forward, sample one token for every request whose
 * computed tokens reached its end, and finish requests. info may be NULL.
 * On an engine failure no request advances (preemptions and admissions
 * decided before the forward stand) and the step may be retried. */
vt_status vt_sched_step(vt_sched *s, vt_sched_step_info *info, vt_error *err);

/* The tokens (and text) of request id generated since the last read, and its state.
 * Unknown id (never added, or removed): VT_ERR_INVALID. */
vt_status vt_sched_read(vt_sched *s, uint64_t id, vt_sched_output *out, vt_error *err);

/* The log-probabilities of the tokens the last vt_sched_read returned
 * (vt_batch_logprobs' layout). VT_ERR_INVALID for an unknown id or a
 * request without logprobs. */
typedef struct vt_sched_logprobs {
    int64_t n_tokens;
    const vt_token_logprob *sampled; /* [n_tokens] */
    const vt_token_logprob *top;     /* [n_tokens * n_top] */
    int32_t n_top;
    const int64_t *text_offset;      /* [n_tokens] (vt_batch_logprobs); NULL without text */
} vt_sched_logprobs;
vt_status vt_sched_read_logprobs(vt_sched *s, uint64_t id, vt_sched_logprobs *out, vt_error *err);

/* Finish request id as cancelled, its blocks freed at once; a finished
 * request keeps its finish reason. Unread tokens stay readable. */
vt_status vt_sched_cancel(vt_sched *s, uint64_t id, vt_error *err);

/* Forget request id (cancelling it if unfinished); its id becomes unknown
 * and the tokens of its last read are freed. Finished requests stay until
 * removed. */
vt_status vt_sched_remove(vt_sched *s, uint64_t id, vt_error *err);

/* Requests waiting and running: when both are 0 a step has nothing to do.
 * Each choice of vt_sched_add_n counts here once it is queued or running on
 * its own (choices waiting for their first's prompt are in neither). */
int32_t vt_sched_n_waiting(const vt_sched *s);
/* Prompt tokens request id took from the prefix cache; -1 for an unknown id. */
int64_t vt_sched_cached_tokens(const vt_sched *s, uint64_t id);
int32_t vt_sched_n_running(const vt_sched *s);
/* The same counted as a client's requests, its n choices once: those with a
 * choice running, and those with none running and one waiting. */
int32_t vt_sched_n_running_requests(vt_sched *s);
int32_t vt_sched_n_waiting_requests(vt_sched *s);
vt_sched_stats vt_sched_get_stats(const vt_sched *s);
/* How many of the waiting requests the next step would start, decided by
 * the same test the step applies (a token budget, a free sequence, the
 * blocks of the first chunk, no preemption). Changes no request. */
int32_t vt_sched_n_admit_next(vt_sched *s);
/* Of those, how many are requests that start running (their n choices once;
 * none of whose choices is running now: a preempted request counts again). */
int32_t vt_sched_n_admit_next_requests(vt_sched *s);

#endif
