/* scheduler.c — continuous batching: which tokens of which requests go into
 * each engine step. See scheduler.h for the contract.
 *
 * A request's tokens are its prompt followed by what it generated; it has
 * computed (stored in its engine sequence) a prefix of them. A running
 * request always has at least one token left to compute: the rest of its
 * prompt, or the token it sampled last. Preemption drops the computed prefix,
 * so recomputing after a preemption is the same as prefilling a longer
 * prompt. */
#include "scheduler.h"

#include "clock.h"
#include <math.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host.h"
#include "logprobs.h"
#include "grammar_sampling.h"
#include "sampling_rules.h"
#include "text_stream.h"

typedef struct request {
    uint64_t id;
    uint64_t group;       /* the id of its client request's first choice (its own id for n = 1) */
    bool counts_prompt;   /* its first admission counts its prompt in the prefix cache's stats: the
                           * first choice, or the choice that starts first when it never did */
    vt_sched_state state;
    vt_sched_finish finish;
    int32_t *tokens;      /* [n_prompt + max_generated]: the prompt, then every generated token */
    int64_t n_prompt;
    int64_t n_generated;
    int64_t max_generated; /* max_new_tokens, capped so the request fits the context */
    int64_t n_read;       /* generated tokens already reported */
    int64_t n_computed;   /* tokens stored in its engine sequence */
    int64_t n_cached;     /* prompt tokens its first admission took from the prefix cache */
    int32_t slot;         /* its engine sequence, -1 when it holds none */
    int32_t n_preemptions;
    vt_sampler *sampler;  /* NULL once finished */
    int32_t *stop_ids;
    int32_t n_stop_ids;
    vt_text_stream *text; /* its generated text and stop strings; NULL without a tokenizer */
    /* Log-probabilities (logprobs.h), when asked for: per generated token
     * the sampled one, and its n_top most likely alternatives. */
    bool logprobs;
    int32_t n_top;
    vt_token_logprob *lp_sampled; /* [cap_lp] */
    vt_token_logprob *lp_top;     /* [cap_lp * n_top] */
    int64_t *lp_text_offset;      /* [cap_lp] where each token begins in the text; NULL without text */
    int64_t cap_lp;
    vt_token_logprob lp_step[1 + VT_BATCH_MAX_TOP_LOGPROBS]; /* this step's, written while sampling */
    int64_t last_read_from, last_read_n; /* the generated tokens the last read returned */
    /* Choices of one prompt (vt_sched_add_n): a follower waits for its
     * leader's prompt, then samples from the same logits and forks its KV. */
    struct request *leader;      /* a follower not started yet: the request whose prompt it waits for */
    struct request **followers;  /* a leader: [n_followers] still waiting for its prompt */
    int32_t n_followers;
    bool is_follower;            /* choice 1.. of a group, started or not */
    vt_grammar_sampling *grammar; /* NULL without a grammar */
} request;

struct vt_sched {
    vt_engine *engine;
    const vt_tokenizer *tokenizer; /* the model's, for the text; NULL if it has none */
    char *token_bytes;             /* [cap_token_bytes] scratch for one token's bytes */
    size_t cap_token_bytes;
    int32_t n_vocab;
    int32_t block_size;
    int64_t ctx_size;
    int64_t budget;      /* tokens per step */
    bool plans_agree;    /* vt_engine_plans_agree: else an entry holds tokens of one plan (same_plan_tokens) */
    int32_t max_running; /* sequences per step, never above budget so every running request gets a token */
    int32_t max_waiting;
    uint64_t next_id;
    /* The prompt-token cap of a step that decodes: fixed, or (0) measured. */
    int64_t fixed_prefill_chunk;
    double decode_step_s;  /* moving average of a decode-only step's time, 0 until one ran */
    double prompt_token_s; /* of one prompt token's share of a step, 0 until measured */

    request **all; /* every request not removed, in no particular order */
    int32_t n_all, cap_all;
    /* Waiting requests, oldest first. Adds stop at max_waiting, but a
     * preempted request comes back regardless: waiting + running never
     * exceeds max_waiting + max_running, the capacity. */
    request **waiting;
    int32_t n_waiting;
    int32_t cap_waiting;
    int64_t n_follower_requests; /* followers not removed: they may wait beyond max_waiting */
    request **running; /* in admission order: the last is preempted first */
    int32_t n_running;
    request **slot_owner; /* [max_seqs] */

    /* The step being planned: entry i computes plan_n[i] tokens of plan_req[i]. */
    request **plan_req;
    int64_t *plan_n;
    int32_t n_plan;
    int32_t plan_blocks;  /* new blocks the planned entries will take */
    int64_t plan_budget;  /* tokens still unplanned */
    vt_step_entry *entries;
    int32_t *sampled; /* [max_seqs] entry i's token, or NO_LOGITS */
    int64_t *admit_hit; /* [max_seqs] vt_sched_n_admit_next: the hits of the requests it counts */
    uint8_t *admit_marks; /* [KV blocks] and the evictable blocks their attaches would hold (zero between calls) */
    uint64_t *groups;   /* [cap_groups] distinct_groups' scratch */
    size_t cap_groups;
    vt_token_trie *trie; /* the vocabulary's token texts, built for the first request with a grammar */

    vt_sched_stats stats;
};

vt_sched_options vt_sched_default_options(void) {
    return (vt_sched_options){.max_waiting = 256, .token_budget = 0, .prefill_chunk = 0};
}

vt_status vt_sched_check_token_budget(int64_t budget, int64_t step_max, vt_error *err) {
    if (budget >= 0 && budget <= step_max) return VT_OK;
    return vt_fail(err, VT_ERR_INVALID,
                   "runtime.token_budget = %lld: one forward takes at most %lld tokens (runtime.batch_size, capped by "
                   "kv_cache.ctx_size); accepted values are 0 or 1..%lld",
                   (long long)budget, (long long)step_max, (long long)step_max);
}

vt_sched_options vt_sched_options_of(const vt_options *opt) {
    return (vt_sched_options){.max_waiting = opt->max_waiting, .token_budget = opt->token_budget,
                              .prefill_chunk = opt->prefill_chunk};
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static int64_t total_tokens(const request *r) { return r->n_prompt + r->n_generated; }

static int64_t blocks_for(const vt_sched *s, int64_t tokens) { return (tokens + s->block_size - 1) / s->block_size; }

/* Blocks computing n more tokens of r takes from the pool. */
static int32_t new_blocks(const vt_sched *s, const request *r, int64_t n) {
    return (int32_t)(blocks_for(s, r->n_computed + n) - blocks_for(s, r->n_computed));
}

/* Of n tokens of r from position `from` on, those one step may compute
 * together. Where the engine's plans compute differently
 * (vt_engine_plans_agree), a prompt's tokens go through the prefill plan and
 * generated ones through the decode plan, so no token's numbers depend on
 * the step it shares: an entry then holds prompt tokens only, or one
 * generated token (recomputing generated tokens after a preemption goes as
 * decoding them went, one a step). */
static int64_t same_plan_tokens(const vt_sched *s, const request *r, int64_t from, int64_t n) {
    if (s->plans_agree) return n;
    return from < r->n_prompt ? min64(n, r->n_prompt - from) : min64(n, 1);
}

/* Free blocks the planned entries have not claimed. */
static int32_t available_blocks(const vt_sched *s) { return vt_engine_free_blocks(s->engine) - s->plan_blocks; }

/* Tokens of r that fit: the rest of its last block, then whole free blocks. */
static int64_t tokens_that_fit(const vt_sched *s, const request *r) {
    const int64_t slack = blocks_for(s, r->n_computed) * s->block_size - r->n_computed;
    return slack + (int64_t)available_blocks(s) * s->block_size;
}

/* Fewer prompt tokens than this in a step are too short to say what one costs. */
#define MIN_TIMED_PROMPT 8

/* The prompt tokens a step that decodes may take (see prefill_chunk in
 * scheduler.h): at most what takes as long as the decodes themselves, so such
 * a step lasts about two decode steps however long the prompt waiting. */
static int64_t prefill_chunk(const vt_sched *s) {
    if (s->fixed_prefill_chunk > 0) return s->fixed_prefill_chunk;
    /* Either time not measured yet: a KV block's worth, at least what a step
     * must hold to measure a prompt token (learn_step_time), until both are.
     * Decodes have run but no prompt step long enough to time (the first
     * prompts were short); or prompts were timed but no step has decoded
     * alone (a request started while another's long prompt was computed,
     * which would otherwise take the whole budget beside its decodes). */
    if (s->decode_step_s <= 0 || s->prompt_token_s <= 0) {
        const int64_t first = s->block_size > MIN_TIMED_PROMPT ? s->block_size : MIN_TIMED_PROMPT;
        return first < s->budget ? first : s->budget;
    }
    const double n = s->decode_step_s / s->prompt_token_s;
    return n < s->block_size ? s->block_size : n > (double)s->budget ? s->budget : (int64_t)n;
}

static request *find(const vt_sched *s, uint64_t id, int32_t *index) {
    for (int32_t i = 0; i < s->n_all; i++)
        if (s->all[i]->id == id) {
            if (index) *index = i;
            return s->all[i];
        }
    return NULL;
}

/* Remove r from list[*n], keeping the others' order; false if absent. */
static bool list_remove(request **list, int32_t *n, const request *r) {
    for (int32_t i = 0; i < *n; i++)
        if (list[i] == r) {
            memmove(list + i, list + i + 1, (size_t)(*n - i - 1) * sizeof *list);
            (*n)--;
            return true;
        }
    return false;
}

/* Give r's engine sequence back: its blocks return to the pool at once. */
static void release_slot(vt_sched *s, request *r) {
    if (r->slot < 0) return;
    vt_engine_seq_release(s->engine, r->slot);
    s->slot_owner[r->slot] = NULL;
    r->slot = -1;
    r->n_computed = 0;
}

/* A leader ending before its prompt's logits came out leaves its followers
 * to start on their own (from the prefix cache): they arrived with it, so
 * they wait at the front of the queue, in their order. */
static void release_followers(vt_sched *s, request *r) {
    /* a first choice ending before it was ever admitted leaves the count of
     * its prompt to the choice that starts first in its place */
    const bool never_admitted = r->state == VT_SCHED_WAITING && r->n_preemptions == 0;
    if (r->counts_prompt && never_admitted && r->n_followers > 0) r->followers[0]->counts_prompt = true;
    for (int32_t i = 0; i < r->n_followers; i++) {
        request *f = r->followers[i];
        f->leader = NULL;
        memmove(s->waiting + i + 1, s->waiting + i, (size_t)(s->n_waiting - i) * sizeof *s->waiting);
        s->waiting[i] = f;
        s->n_waiting++;
    }
    r->n_followers = 0;
}

static void finish(vt_sched *s, request *r, vt_sched_finish why) {
    if (r->leader) { /* a follower not started: off its leader's list */
        list_remove(r->leader->followers, &r->leader->n_followers, r);
        r->leader = NULL;
    } else if (r->state == VT_SCHED_RUNNING) {
        list_remove(s->running, &s->n_running, r);
    } else if (r->state == VT_SCHED_WAITING) {
        list_remove(s->waiting, &s->n_waiting, r);
    }
    release_followers(s, r);
    release_slot(s, r);
    r->state = VT_SCHED_FINISHED;
    r->finish = why;
    vt_sampler_free(r->sampler);
    r->sampler = NULL;
    if (r->text) vt_text_stream_finish(r->text);
    /* The text ended before the stop string, which the last tokens spelled:
     * they begin where it ends (tokens read before it matched were told
     * where they would begin had it not). */
    if (why == VT_SCHED_FINISH_STOP_STRING && r->lp_text_offset) {
        const int64_t end = (int64_t)vt_text_stream_offset_of(r->text, NULL, 0);
        for (int64_t k = r->n_read; k < r->n_generated; k++)
            if (r->lp_text_offset[k] > end) r->lp_text_offset[k] = end;
    }
}

static void free_request(request *r) {
    if (!r) return;
    vt_sampler_free(r->sampler);
    free(r->tokens);
    free(r->stop_ids);
    vt_text_stream_free(r->text);
    free(r->lp_sampled);
    free(r->lp_top);
    free(r->lp_text_offset);
    free(r->followers);
    vt_grammar_sampling_free(r->grammar);
    free(r);
}

/* ---- creation ---------------------------------------------------------- */

vt_status vt_sched_create(vt_engine *engine, const vt_sched_options *opt, vt_sched **out, vt_error *err) {
    *out = NULL;
    const vt_sched_options o = opt ? *opt : vt_sched_default_options();
    const int64_t step_max = vt_engine_max_step_tokens(engine);
    if (o.max_waiting < 1 || o.max_waiting > (1 << 20))
        return vt_fail(err, VT_ERR_INVALID, "runtime.max_waiting = %d: accepted values are 1..%d", o.max_waiting,
                       1 << 20);
    if (o.prefill_chunk < 0)
        return vt_fail(err, VT_ERR_INVALID, "runtime.prefill_chunk = %lld: accepted values are 0 (automatic) or >= 1",
                       (long long)o.prefill_chunk);
    vt_status st = vt_sched_check_token_budget(o.token_budget, step_max, err);
    if (st != VT_OK) return st;
    for (int32_t q = 0; q < vt_engine_max_seqs(engine); q++)
        if (vt_engine_seq_len(engine, q) != 0)
            return vt_fail(err, VT_ERR_INVALID, "scheduler: engine sequence %d is in use (%lld tokens); the scheduler "
                           "needs every sequence empty", q, (long long)vt_engine_seq_len(engine, q));
    vt_sched *s = calloc(1, sizeof *s);
    if (!s) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    s->engine = engine;
    const vt_model *model = vt_engine_model(engine);
    s->tokenizer = model->tokenizer;
    s->n_vocab = model->hp.n_vocab;
    s->block_size = vt_engine_block_size(engine);
    s->ctx_size = vt_engine_ctx_size(engine);
    s->budget = o.token_budget ? o.token_budget : step_max;
    s->plans_agree = vt_engine_plans_agree(engine);
    s->max_running = (int32_t)min64(vt_engine_max_seqs(engine), s->budget);
    s->max_waiting = o.max_waiting;
    s->fixed_prefill_chunk = o.prefill_chunk;
    s->next_id = 1;
    const size_t seqs = (size_t)vt_engine_max_seqs(engine);
    s->cap_waiting = o.max_waiting + (int32_t)seqs;
    s->waiting = malloc((size_t)s->cap_waiting * sizeof *s->waiting);
    s->running = malloc(seqs * sizeof *s->running);
    s->slot_owner = calloc(seqs, sizeof *s->slot_owner);
    s->plan_req = malloc(seqs * sizeof *s->plan_req);
    s->plan_n = malloc(seqs * sizeof *s->plan_n);
    s->entries = malloc(seqs * sizeof *s->entries);
    s->sampled = malloc(seqs * sizeof *s->sampled);
    s->admit_hit = malloc(seqs * sizeof *s->admit_hit);
    s->admit_marks = calloc((size_t)vt_engine_kv_blocks(s->engine), 1);
    s->cap_token_bytes = 64; /* grown when a token renders to more */
    s->token_bytes = malloc(s->cap_token_bytes);
    if (!s->token_bytes || !s->waiting || !s->running || !s->slot_owner || !s->plan_req || !s->plan_n || !s->entries ||
        !s->sampled || !s->admit_hit || !s->admit_marks) {
        vt_sched_free(s);
        return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    }
    *out = s;
    return VT_OK;
}

void vt_sched_free(vt_sched *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n_all; i++) {
        release_slot(s, s->all[i]);
        free_request(s->all[i]);
    }
    free(s->all);
    free(s->waiting);
    free(s->running);
    free(s->slot_owner);
    free(s->plan_req);
    free(s->plan_n);
    free(s->entries);
    free(s->sampled);
    free(s->admit_hit);
    free(s->admit_marks);
    free(s->groups);
    free(s->token_bytes);
    vt_token_trie_free(s->trie);
    free(s);
}

/* ---- requests ---------------------------------------------------------- */

/* The sampler's ranges are those of the [sampling] options (options.c). */
static vt_status check_request(const vt_sched *s, const vt_sched_request *q, vt_error *err) {
    if (!q->prompt || q->n_prompt < 1) return vt_fail(err, VT_ERR_INVALID, "request.prompt: empty (zero tokens)");
    for (int64_t i = 0; i < q->n_prompt; i++)
        if (q->prompt[i] < 0 || q->prompt[i] >= s->n_vocab)
            return vt_fail(err, VT_ERR_INVALID, "request.prompt[%lld]: token id %d is outside the vocabulary (0..%d)",
                           (long long)i, q->prompt[i], s->n_vocab - 1);
    if (q->n_prompt > s->ctx_size)
        return vt_fail(err, VT_ERR_CONTEXT_FULL,
                       "request.prompt: %lld tokens, but a sequence's context holds %lld (ctx_size)",
                       (long long)q->n_prompt, (long long)s->ctx_size);
    if (q->max_new_tokens < 1)
        return vt_fail(err, VT_ERR_INVALID, "request.max_new_tokens: %lld (accepted: >= 1)",
                       (long long)q->max_new_tokens);
    const vt_sampler_params *p = &q->sampler;
    vt_status st;
    if ((st = vt_sampling_check(VT_KNOB_TEMPERATURE, p->temp, "request.sampler.temp", err)) != VT_OK ||
        (st = vt_sampling_check(VT_KNOB_TOP_K, p->top_k, "request.sampler.top_k", err)) != VT_OK ||
        (st = vt_sampling_check(VT_KNOB_TOP_P, p->top_p, "request.sampler.top_p", err)) != VT_OK ||
        (st = vt_sampling_check(VT_KNOB_MIN_P, p->min_p, "request.sampler.min_p", err)) != VT_OK ||
        (st = vt_sampling_check(VT_KNOB_PRESENCE_PENALTY, q->presence_penalty, "request.presence_penalty", err)) !=
            VT_OK ||
        (st = vt_sampling_check(VT_KNOB_FREQUENCY_PENALTY, q->frequency_penalty, "request.frequency_penalty", err)) !=
            VT_OK)
        return st;
    if (p->seed > (uint64_t)VT_SEED_MAX)
        return vt_fail(err, VT_ERR_INVALID, "request.seed: %" PRIu64 " (accepted: 0..%" PRId64 ")", p->seed,
                       (int64_t)VT_SEED_MAX);
    if (q->n_stop_ids < 0 || (q->n_stop_ids > 0 && !q->stop_ids))
        return vt_fail(err, VT_ERR_INVALID, "request.stop_ids: %d ids%s", q->n_stop_ids,
                       q->n_stop_ids > 0 ? " but no array" : " (accepted: >= 0)");
    for (int32_t i = 0; i < q->n_stop_ids; i++)
        if (q->stop_ids[i] < 0 || q->stop_ids[i] >= s->n_vocab)
            return vt_fail(err, VT_ERR_INVALID, "request.stop_ids[%d]: token id %d is outside the vocabulary (0..%d)",
                           i, q->stop_ids[i], s->n_vocab - 1);
    if (q->n_stop_strings < 0)
        return vt_fail(err, VT_ERR_INVALID, "request.n_stop_strings: %d (accepted: >= 0)", q->n_stop_strings);
    if (q->logprobs && (q->top_logprobs < 0 || q->top_logprobs > VT_BATCH_MAX_TOP_LOGPROBS))
        return vt_fail(err, VT_ERR_INVALID, "request.top_logprobs: %d (accepted: 0..%d)", q->top_logprobs,
                       VT_BATCH_MAX_TOP_LOGPROBS);
    if (q->n_stop_strings > 0 && !s->tokenizer)
        return vt_fail(err, VT_ERR_UNSUPPORTED,
                       "request.stop_strings: this model's tokenizer cannot be used, so there is no text to match");
    if (q->grammar && !s->tokenizer)
        return vt_fail(err, VT_ERR_UNSUPPORTED,
                       "request.grammar: this model's tokenizer cannot be used, so there are no token texts to match");
    return VT_OK;
}

static int32_t trie_token_bytes(void *user, int32_t id, char *buf, size_t cap) {
    return vt_token_to_bytes(user, id, false, buf, cap);
}

/* The grammar of q for r, and the vocabulary's trie the first time one is
 * needed (the same bytes the text is built from). */
static vt_status add_grammar(vt_sched *s, request *r, const vt_sched_request *q, vt_error *err) {
    if (!q->grammar) return VT_OK;
    vt_status st = vt_grammar_sampling_create(q->grammar, s->n_vocab, &r->grammar, err);
    if (st != VT_OK) return vt_error_prefix(err, "request.");
    if (!s->trie) {
        st = vt_token_trie_build(s->n_vocab, trie_token_bytes, (void *)s->tokenizer, &s->trie, err);
        if (st != VT_OK) return st;
    }
    return VT_OK;
}

/* *out: a new waiting request for q (checked), sampling with seed. */
static vt_status new_request(vt_sched *s, const vt_sched_request *q, uint64_t seed, request **out, vt_error *err) {
    *out = NULL;
    request *r = calloc(1, sizeof *r);
    if (!r) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    /* The last generated token never needs storing: the context holds the
     * prompt and all but one of the generated tokens. */
    r->max_generated = min64(q->max_new_tokens, s->ctx_size - q->n_prompt + 1);
    r->n_prompt = q->n_prompt;
    r->slot = -1;
    r->tokens = malloc((size_t)(r->n_prompt + r->max_generated) * sizeof *r->tokens);
    r->n_stop_ids = q->n_stop_ids;
    r->stop_ids = q->n_stop_ids ? malloc((size_t)q->n_stop_ids * sizeof *r->stop_ids) : NULL;
    if (!r->tokens || (q->n_stop_ids && !r->stop_ids)) {
        free_request(r);
        return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    }
    vt_sampler_params sp = q->sampler;
    sp.seed = seed;
    vt_status st;
    if ((st = vt_sampler_create(&sp, &r->sampler, err)) != VT_OK ||
        (st = vt_sampler_set_penalties(r->sampler, q->presence_penalty, q->frequency_penalty, s->n_vocab, err)) !=
            VT_OK ||
        (s->tokenizer && (st = vt_text_stream_create(q->stop_strings, (size_t)q->n_stop_strings, &r->text, err)) !=
                             VT_OK) ||
        (st = add_grammar(s, r, q, err)) != VT_OK) {
        free_request(r);
        return st;
    }
    r->logprobs = q->logprobs;
    r->n_top = q->logprobs ? q->top_logprobs : 0;
    memcpy(r->tokens, q->prompt, (size_t)q->n_prompt * sizeof *r->tokens);
    if (q->n_stop_ids) memcpy(r->stop_ids, q->stop_ids, (size_t)q->n_stop_ids * sizeof *r->stop_ids);
    r->state = VT_SCHED_WAITING;
    *out = r;
    return VT_OK;
}

vt_status vt_sched_add(vt_sched *s, const vt_sched_request *req, uint64_t *id, vt_error *err) {
    return vt_sched_add_n(s, req, 1, id, err);
}

vt_status vt_sched_add_n(vt_sched *s, const vt_sched_request *q, int32_t n, uint64_t *ids, vt_error *err) {
    for (int32_t i = 0; i < n; i++) ids[i] = 0;
    if (n < 1 || n > VT_BATCH_MAX_CHOICES)
        return vt_fail(err, VT_ERR_INVALID, "request.n: %d choices (accepted: 1..%d)", n, VT_BATCH_MAX_CHOICES);
    vt_status st = check_request(s, q, err);
    if (st != VT_OK) return st;
    /* requests, each one's n choices once: another request's queued
     * choices do not fill the queue (its first admitted them) */
    /* what the next step admits is about to run, not waiting: a burst that
     * arrives at an idle batch is not refused as a full queue (the
     * prediction is reckoned only at the limit; past the first request it
     * cannot admit it stops, so a full queue costs one look at each
     * running request) */
    int32_t waiting = vt_sched_n_waiting_requests(s);
    if (waiting >= s->max_waiting) waiting -= vt_sched_n_admit_next_requests(s);
    if (waiting >= s->max_waiting)
        return vt_fail(err, VT_ERR_UNSUPPORTED,
                       "waiting queue full: %d requests wait for a sequence (max_waiting %d); add again when some "
                       "have started or finished",
                       waiting, s->max_waiting);
    if (s->n_all + n > s->cap_all) {
        int32_t cap = s->cap_all ? s->cap_all : 16;
        while (cap < s->n_all + n) cap *= 2;
        request **grown = realloc(s->all, (size_t)cap * sizeof *grown);
        if (!grown) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
        s->all = grown;
        s->cap_all = cap;
    }
    /* Followers come into the queue without counting against max_waiting
     * (when their leader ends early, or no sequence is free for their fork):
     * room for all of them, so that never needs memory mid-step. */
    const int64_t need = (int64_t)s->max_waiting + vt_engine_max_seqs(s->engine) + s->n_follower_requests + (n - 1);
    if (need > s->cap_waiting) {
        request **grown = realloc(s->waiting, (size_t)need * sizeof *grown);
        if (!grown) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
        s->waiting = grown;
        s->cap_waiting = (int32_t)need;
    }
    request *made[VT_BATCH_MAX_CHOICES] = {0};
    request **followers = n > 1 ? malloc((size_t)(n - 1) * sizeof *followers) : NULL;
    if (n > 1 && !followers) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        st = new_request(s, q, vt_seed_after(q->sampler.seed, (uint64_t)i), &made[i], err);
        if (st != VT_OK) {
            for (int32_t j = 0; j < i; j++) free_request(made[j]);
            free(followers);
            return st;
        }
    }
    request *leader = made[0];
    leader->followers = followers;
    for (int32_t i = 0; i < n; i++) {
        request *r = made[i];
        r->id = s->next_id++;
        r->group = made[0]->id;
        r->counts_prompt = i == 0;
        ids[i] = r->id;
        s->all[s->n_all++] = r;
        if (i > 0) {
            r->is_follower = true;
            r->leader = leader;
            leader->followers[leader->n_followers++] = r;
        }
    }
    s->n_follower_requests += n - 1;
    s->waiting[s->n_waiting++] = leader;
    return VT_OK;
}

vt_status vt_sched_read(vt_sched *s, uint64_t id, vt_sched_output *out, vt_error *err) {
    request *r = find(s, id, NULL);
    if (!r) return vt_fail(err, VT_ERR_INVALID, "request %llu: unknown (never added, or removed)",
                           (unsigned long long)id);
    out->tokens = r->tokens + r->n_prompt + r->n_read;
    out->n_tokens = r->n_generated - r->n_read;
    out->n_generated = r->n_generated;
    out->n_preemptions = r->n_preemptions;
    out->n_cached = r->n_cached;
    out->state = r->state;
    out->finish = r->finish;
    out->text = "";
    out->n_text = 0;
    if (r->text) {
        vt_status st = vt_text_stream_take(r->text, &out->text, &out->n_text, err);
        if (st != VT_OK) return st; /* nothing taken: the tokens stay unread too */
    }
    r->last_read_from = r->n_read;
    r->last_read_n = r->n_generated - r->n_read;
    r->n_read = r->n_generated;
    return VT_OK;
}

vt_status vt_sched_read_logprobs(vt_sched *s, uint64_t id, vt_sched_logprobs *out, vt_error *err) {
    const request *r = find(s, id, NULL);
    if (!r) return vt_fail(err, VT_ERR_INVALID, "request %llu: unknown (never added, or removed)",
                           (unsigned long long)id);
    if (!r->logprobs)
        return vt_fail(err, VT_ERR_INVALID, "request %llu: added without request.logprobs", (unsigned long long)id);
    out->n_tokens = r->last_read_n;
    out->n_top = r->n_top;
    out->sampled = r->lp_sampled ? r->lp_sampled + r->last_read_from : NULL;
    out->top = r->lp_top ? r->lp_top + r->last_read_from * r->n_top : NULL;
    out->text_offset = r->lp_text_offset ? r->lp_text_offset + r->last_read_from : NULL;
    return VT_OK;
}

vt_status vt_sched_cancel(vt_sched *s, uint64_t id, vt_error *err) {
    request *r = find(s, id, NULL);
    if (!r) return vt_fail(err, VT_ERR_INVALID, "request %llu: unknown (never added, or removed)",
                           (unsigned long long)id);
    if (r->state != VT_SCHED_FINISHED) finish(s, r, VT_SCHED_FINISH_CANCELLED);
    return VT_OK;
}

vt_status vt_sched_remove(vt_sched *s, uint64_t id, vt_error *err) {
    int32_t i;
    request *r = find(s, id, &i);
    if (!r) return vt_fail(err, VT_ERR_INVALID, "request %llu: unknown (never added, or removed)",
                           (unsigned long long)id);
    if (r->state != VT_SCHED_FINISHED) finish(s, r, VT_SCHED_FINISH_CANCELLED);
    if (r->is_follower) s->n_follower_requests--;
    s->all[i] = s->all[--s->n_all];
    free_request(r);
    return VT_OK;
}

int64_t vt_sched_cached_tokens(const vt_sched *s, uint64_t id) {
    const request *r = find(s, id, NULL);
    return r ? r->n_cached : -1;
}

int32_t vt_sched_n_waiting(const vt_sched *s) { return s->n_waiting; }

/* Whether list[0, n) holds a choice of group. */
static bool group_listed(request *const *list, int32_t n, uint64_t group) {
    for (int32_t i = 0; i < n; i++)
        if (list[i]->group == group) return true;
    return false;
}

static int by_group(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The requests among list[0, n) as clients sent them, each one's choices
 * once, leaving out those with a choice running when skip_running. Sorted
 * group ids, so a long queue costs n log n, not n^2 (vt serve asks after
 * every step); without any request of several choices, n itself. */
static int32_t distinct_groups(vt_sched *s, request *const *list, int32_t n, bool skip_running) {
    if (s->n_follower_requests == 0 || n == 0) return n; /* each request its own group, in one list only */
    const size_t need = (size_t)n + (size_t)s->n_running;
    if (need > s->cap_groups) {
        uint64_t *grown = realloc(s->groups, need * sizeof *grown);
        if (!grown) { /* no memory for the sort: the same count by scanning */
            int32_t k = 0;
            for (int32_t i = 0; i < n; i++)
                k += !group_listed(list, i, list[i]->group) &&
                     !(skip_running && group_listed(s->running, s->n_running, list[i]->group));
            return k;
        }
        s->groups = grown;
        s->cap_groups = need;
    }
    uint64_t *running = s->groups, *listed = s->groups + s->n_running;
    for (int32_t i = 0; i < s->n_running; i++) running[i] = s->running[i]->group;
    for (int32_t i = 0; i < n; i++) listed[i] = list[i]->group;
    /* n > 0 here, so the scratch is allocated; running may be empty */
    if (s->n_running > 0) qsort(running, (size_t)s->n_running, sizeof *running, by_group);
    qsort(listed, (size_t)n, sizeof *listed, by_group);
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (i > 0 && listed[i] == listed[i - 1]) continue;
        k += !(skip_running && s->n_running > 0 &&
               bsearch(&listed[i], running, (size_t)s->n_running, sizeof *running, by_group));
    }
    return k;
}

int32_t vt_sched_n_running_requests(vt_sched *s) { return distinct_groups(s, s->running, s->n_running, false); }

int32_t vt_sched_n_waiting_requests(vt_sched *s) { return distinct_groups(s, s->waiting, s->n_waiting, true); }
int32_t vt_sched_n_running(const vt_sched *s) { return s->n_running; }
vt_sched_stats vt_sched_get_stats(const vt_sched *s) {
    vt_sched_stats st = s->stats;
    const bool known = s->fixed_prefill_chunk > 0 || s->decode_step_s > 0;
    st.prefill_chunk = known ? prefill_chunk(s) : 0;
    return st;
}

/* ---- planning one step ------------------------------------------------- */

static void plan_add(vt_sched *s, request *r, int64_t n) {
    s->plan_req[s->n_plan] = r;
    s->plan_n[s->n_plan] = n;
    s->n_plan++;
    s->plan_blocks += new_blocks(s, r, n);
    s->plan_budget -= n;
}

/* Take r's entry out of the plan, if it has one. */
static void plan_drop(vt_sched *s, const request *r) {
    for (int32_t i = 0; i < s->n_plan; i++)
        if (s->plan_req[i] == r) {
            s->plan_blocks -= new_blocks(s, r, s->plan_n[i]);
            s->plan_budget += s->plan_n[i];
            memmove(s->plan_req + i, s->plan_req + i + 1, (size_t)(s->n_plan - i - 1) * sizeof *s->plan_req);
            memmove(s->plan_n + i, s->plan_n + i + 1, (size_t)(s->n_plan - i - 1) * sizeof *s->plan_n);
            s->n_plan--;
            return;
        }
}

/* The most recently admitted running request gives its blocks back and
 * waits again at the front of the queue: the others keep their progress, and
 * the oldest request, which alone always fits, is never the victim of a
 * younger one. Waiting at the front keeps arrival order, since requests are
 * preempted newest first. */
static request *preempt_newest(vt_sched *s) {
    request *r = s->running[--s->n_running];
    plan_drop(s, r);
    s->stats.n_recomputed += r->n_computed;
    release_slot(s, r);
    r->n_preemptions++;
    s->stats.n_preemptions++;
    r->state = VT_SCHED_WAITING;
    memmove(s->waiting + 1, s->waiting, (size_t)s->n_waiting * sizeof *s->waiting);
    s->waiting[0] = r;
    s->n_waiting++;
    return r;
}

/* Plan the running requests with one token left (one_token: decodes) or with
 * more (the rest of a prompt, or a recomputation), in admission order. A
 * request whose tokens do not fit even partly preempts the newest running
 * request, itself last; without preempt (a prediction, which must change no
 * request) it returns false there instead. */
static bool plan_running(vt_sched *s, bool one_token, bool preempt, vt_sched_step_info *info) {
    for (int32_t i = 0; i < s->n_running; i++) {
        request *r = s->running[i];
        const int64_t left = total_tokens(r) - r->n_computed;
        if ((left == 1) != one_token) continue;
        while (s->plan_budget > 0) {
            const int64_t n =
                same_plan_tokens(s, r, r->n_computed, min64(min64(left, s->plan_budget), tokens_that_fit(s, r)));
            if (n >= 1) {
                plan_add(s, r, n);
                break;
            }
            if (!preempt) return false;
            info->n_preempted++;
            if (preempt_newest(s) == r) break; /* r was last: the loop ends with it */
        }
    }
    return true;
}

/* Whether q, a request with q_computed tokens computed, is still computing
 * whole blocks r's prompt begins with beyond r's hit. */
static bool computes_blocks_of(const vt_sched *s, const request *q, int64_t q_computed, const request *r,
                               int64_t hit) {
    if (q_computed >= q->n_prompt) return false; /* its prompt's blocks are filed */
    const int64_t n = min64(q->n_prompt, total_tokens(r) - 1);
    int64_t same = 0;
    while (same < n && q->tokens[same] == r->tokens[same]) same++;
    const int64_t whole = same / s->block_size * s->block_size;
    return whole > hit && q_computed < whole;
}

/* Whether a running request is still computing whole blocks that r's
 * prompt begins with, beyond the hit r would take now: r then waits for them
 * to be filed rather than compute the same tokens beside it (two requests
 * arriving together with one system prompt compute it once). The running
 * request makes progress every step, so the wait ends. */
static bool shares_blocks_in_flight(const vt_sched *s, const request *r, int64_t hit) {
    if (!vt_engine_kv_cache(s->engine)->prefix_cache) return false;
    for (int32_t i = 0; i < s->n_running; i++)
        if (computes_blocks_of(s, s->running[i], s->running[i]->n_computed, r, hit)) return true;
    return false;
}

/* The tokens waiting request r starts with in the step being planned when
 * n_running requests already run in it, or 0 when it cannot start: no
 * budget left, no sequence (max_running, so every running request gets a
 * token), or too few free blocks for that first chunk. */
static int64_t admission_tokens(const vt_sched *s, const request *r, int32_t n_running, int64_t *hit,
                                int32_t *blocks, uint8_t *marks) {
    *hit = 0;
    *blocks = 0;
    if (s->plan_budget <= 0 || n_running >= s->max_running) return 0;
    /* The beginning the prefix cache holds is taken, not computed: it costs
     * no budget, and of the available blocks it uses only those no one
     * holds now (and a tail's copy). */
    int32_t taken = 0;
    *hit = vt_engine_match_prefix(s->engine, r->tokens, total_tokens(r), &taken, marks);
    if (shares_blocks_in_flight(s, r, *hit)) return 0;
    const int64_t n = same_plan_tokens(s, r, *hit, min64(total_tokens(r) - *hit, s->plan_budget));
    *blocks = (int32_t)(blocks_for(s, *hit + n) - blocks_for(s, *hit)) + taken;
    return *blocks > available_blocks(s) ? 0 : n;
}

/* The tokens the oldest waiting request gets in this step ahead of the
 * running prompts (called once the decodes are planned, before the prompt
 * cap): its whole uncomputed prompt when that is shorter than what a
 * running prompt still has to compute and it can start now (a sequence,
 * the KV blocks for it and for a block of the running prompt free, no
 * preemption in the step), so a short request arriving behind a long prompt
 * starts in the next step instead of after every chunk of the long one
 * (shortest remaining first between the two). Beside decodes it must fit
 * one prompt chunk (prefill_chunk), so that step lasts at most about as long
 * as two of them; without decodes it may take all but a block of the
 * budget. 0 otherwise: first come, first served. */
static int64_t reserve_for_waiting(const vt_sched *s, const vt_sched_step_info *info) {
    if (s->n_waiting == 0 || s->n_running >= s->max_running || (info && info->n_preempted > 0)) return 0;
    int64_t running_left = 0;
    for (int32_t i = 0; i < s->n_running; i++) {
        const request *q = s->running[i];
        const int64_t left = total_tokens(q) - q->n_computed;
        if (left > 1 && left > running_left) running_left = left;
    }
    if (running_left == 0) return 0;
    const request *r = s->waiting[0];
    int32_t taken = 0;
    const int64_t hit = vt_engine_match_prefix(s->engine, r->tokens, total_tokens(r), &taken, NULL);
    if (shares_blocks_in_flight(s, r, hit)) return 0; /* it waits for those blocks either way */
    const int64_t need = total_tokens(r) - hit;
    const int64_t room = s->plan_budget - s->block_size; /* the running prompts keep a block */
    if (need >= running_left || need > room || (s->n_plan > 0 && need > prefill_chunk(s))) return 0;
    /* blocks it would take, and the running prompt's block beside it */
    const int64_t blocks = blocks_for(s, hit + need) - blocks_for(s, hit) + taken + 1;
    return blocks > available_blocks(s) ? 0 : need;
}

/* After the decodes are planned: the prompts of a step that decodes share
 * the prefill chunk, not the whole budget left. */
static void cap_prompt_tokens(vt_sched *s) {
    if (s->n_plan == 0) return;
    const int64_t prompt_max = prefill_chunk(s);
    if (s->plan_budget > prompt_max) s->plan_budget = prompt_max;
}

/* After the decodes: the prompt cap, the running requests' prompt chunks,
 * and the budget the admissions that follow get. When reserve_for_waiting
 * gives the oldest waiting request room, the running prompts take one block
 * (at most the cap) and the admissions exactly that room, so the step lasts
 * about as long as the short prompt (whose first token it gives) and no
 * younger request rides on it; the next steps cap the running prompts as
 * decodes do. A stream of short arrivals holds a long prompt to a block a
 * step: it slows, it never stops. */
static bool plan_prompts(vt_sched *s, bool preempt, vt_sched_step_info *info) {
    const int64_t reserve = reserve_for_waiting(s, info);
    cap_prompt_tokens(s);
    if (reserve == 0) return plan_running(s, false, preempt, info);
    s->plan_budget = min64(s->plan_budget, s->block_size);
    const bool fit = plan_running(s, false, preempt, info);
    s->plan_budget = reserve;
    return fit;
}

/* Start waiting requests, oldest first, while admission_tokens lets them.
 * The oldest that cannot start holds back the younger ones. */
static void plan_admissions(vt_sched *s, vt_sched_step_info *info) {
    while (s->n_waiting > 0) {
        request *r = s->waiting[0];
        int64_t hit = 0;
        int32_t blocks = 0;
        const int64_t n = admission_tokens(s, r, s->n_running, &hit, &blocks, NULL);
        if (n == 0) break;
        int32_t slot = 0;
        while (s->slot_owner[slot]) slot++; /* one is free: n_running < max_running <= max_seqs */
        memmove(s->waiting, s->waiting + 1, (size_t)(s->n_waiting - 1) * sizeof *s->waiting);
        s->n_waiting--;
        s->slot_owner[slot] = r;
        r->slot = slot;
        r->state = VT_SCHED_RUNNING;
        r->n_computed = vt_engine_seq_attach_prefix(s->engine, slot, r->tokens, total_tokens(r));
        if (r->n_preemptions == 0) {
            r->n_cached = r->n_computed;
            /* a request's other choices share its prompt: counted once,
             * with the first, as usage's cached_tokens counts it */
            if (vt_engine_kv_cache(s->engine)->prefix_cache && r->counts_prompt) {
                s->stats.n_prompt_looked_up += r->n_prompt;
                s->stats.n_prompt_hit += min64(r->n_computed, r->n_prompt);
            }
        }
        vt_log(VT_LOG_DEBUG, "sched", "sequence %llu starts: %lld tokens, %lld of them from the prefix cache",
               (unsigned long long)r->id, (long long)total_tokens(r), (long long)r->n_computed);
        s->running[s->n_running++] = r;
        plan_add(s, r, n); /* attach took exactly the hit admission_tokens found */
        info->n_admitted++;
    }
}


/* Learn the times the automatic chunk is made of from a step that ran:
 * decode-only steps give the decode time; a step with prompt tokens gives,
 * after the decode time is taken off, a prompt token's share. Moving
 * averages (weight 1/4), so a change of load or context length is followed
 * within a few steps. Steps of a few prompt tokens are too short to say
 * what a token costs. */
static void learn_step_time(vt_sched *s, const vt_sched_step_info *info, double seconds) {
    const double w = 0.25;
    if (info->n_prefill_tokens == 0) {
        if (info->n_decode_tokens > 0)
            s->decode_step_s = s->decode_step_s > 0 ? (1 - w) * s->decode_step_s + w * seconds : seconds;
        return;
    }
    if (info->n_prefill_tokens < MIN_TIMED_PROMPT) return;
    /* Decodes beside timed prompts before any step decoded alone: the
     * decodes' share is the step less its prompt tokens at their measured
     * cost, a first estimate that decode-only steps then refine. */
    if (info->n_decode_tokens > 0 && s->decode_step_s <= 0 && s->prompt_token_s > 0) {
        const double decodes_s = seconds - (double)info->n_prefill_tokens * s->prompt_token_s;
        if (decodes_s > 0) {
            s->decode_step_s = decodes_s;
            return;
        }
        /* the prompt tokens' cost was set too high (a short timed step):
         * taken again from this step, as a prompt-only step would */
    }
    const double prompt_s = seconds - (info->n_decode_tokens > 0 ? s->decode_step_s : 0);
    /* prompt tokens too cheap to show beside the decodes' own time (the
     * step ran no longer than an average decode): the whole step's time
     * over its prompt tokens, an upper bound, rather than never learned
     * (which would keep the first, one-block chunk) or taken as free */
    const double per_token = (prompt_s > 0 ? prompt_s : seconds) / (double)info->n_prefill_tokens;
    if (per_token <= 0) return;
    s->prompt_token_s = s->prompt_token_s > 0 ? (1 - w) * s->prompt_token_s + w * per_token : per_token;
}

static void plan_begin(vt_sched *s) {
    s->n_plan = 0;
    s->plan_blocks = 0;
    s->plan_budget = s->budget;
}

/* The plan is scratch that every step starts afresh, so the prediction
 * plans the running requests as the step would and then counts what
 * admission_tokens admits, moving no request. A step that would preempt
 * admits none (after a preemption the pool is short). One case it does not
 * model: with no free block left, an admitted request's tail copy evicts the
 * least recently used cached block, which a later waiting request may have
 * matched; that request's hit, and so its blocks, change in the step. The
 * count can then be off by the requests behind it (seen in a stress run
 * with a 10-block pool); only the gauges and --max-waiting read it, never
 * the blocks. */
int32_t vt_sched_n_admit_next(vt_sched *s) {
    plan_begin(s);
    int32_t n_admit = 0;
    const bool decodes_fit = plan_running(s, true, false, NULL);
    if (decodes_fit && plan_prompts(s, false, NULL))
        for (; n_admit < s->n_waiting; n_admit++) {
            request *r = s->waiting[n_admit];
            int64_t hit;
            int32_t blocks;
            const int64_t n = admission_tokens(s, r, s->n_running + n_admit, &hit, &blocks, s->admit_marks);
            if (n == 0) break;
            /* a request the step starts computes from its hit on: a later
             * one sharing blocks beyond its own hit waits for them, as in
             * the step (admission_tokens sees only the running ones) */
            bool waits = false;
            for (int32_t k = 0; k < n_admit && !waits; k++)
                waits = vt_engine_kv_cache(s->engine)->prefix_cache &&
                        computes_blocks_of(s, s->waiting[k], s->admit_hit[k], r, hit);
            if (waits) break;
            s->admit_hit[n_admit] = hit;
            /* as plan_add would after the prefix is attached (an evictable
             * block an earlier admission holds by then is marked: counted
             * once, as in the step) */
            s->plan_budget -= n;
            s->plan_blocks += blocks;
        }
    plan_begin(s);
    memset(s->admit_marks, 0, (size_t)vt_engine_kv_blocks(s->engine)); /* a byte a block: cheap beside a step */
    return n_admit;
}

int32_t vt_sched_n_admit_next_requests(vt_sched *s) {
    return distinct_groups(s, s->waiting, vt_sched_n_admit_next(s), true);
}

/* ---- one step ----------------------------------------------------------- */

/* token's bytes into s->token_bytes; *n gets their count. */
static vt_status token_bytes(vt_sched *s, int32_t token, int32_t *n, vt_error *err) {
    *n = vt_token_to_bytes(s->tokenizer, token, false, s->token_bytes, s->cap_token_bytes);
    if (*n > 0 && (size_t)*n > s->cap_token_bytes) {
        char *grown = realloc(s->token_bytes, (size_t)*n);
        if (!grown) return vt_fail(err, VT_ERR_NOMEM, "out of memory for token %d's %d bytes", token, *n);
        s->token_bytes = grown;
        s->cap_token_bytes = (size_t)*n;
        *n = vt_token_to_bytes(s->tokenizer, token, false, s->token_bytes, s->cap_token_bytes);
    }
    return VT_OK;
}

/* Append token's bytes to r's text and advance its grammar (a stop id adds
 * none: it ends the request, it is not part of what was said). */
static vt_status append_text(vt_sched *s, request *r, int32_t token, vt_error *err) {
    int32_t n = 0;
    vt_status st = token_bytes(s, token, &n, err);
    if (st != VT_OK) return st;
    if (r->logprobs)
        r->lp_text_offset[r->n_generated] =
            (int64_t)vt_text_stream_offset_of(r->text, s->token_bytes, n > 0 ? (size_t)n : 0);
    if (r->grammar && !vt_grammar_sampling_accept(r->grammar, s->token_bytes, n))
        return vt_fail(err, VT_ERR_INTERNAL, "token %d left the request's grammar", token);
    return n > 0 ? vt_text_stream_feed(r->text, s->token_bytes, (size_t)n, NULL, err) : VT_OK;
}

static bool is_stop_id(const request *r, int32_t token) {
    for (int32_t i = 0; i < r->n_stop_ids; i++)
        if (token == r->stop_ids[i]) return true;
    return false;
}

/* Why r ends after generating token, or NONE. */
static vt_sched_finish finish_after(const request *r, int32_t token) {
    if (is_stop_id(r, token)) return VT_SCHED_FINISH_STOP;
    if (r->text && vt_text_stream_stopped(r->text)) return VT_SCHED_FINISH_STOP_STRING;
    if (r->grammar && vt_grammar_sampling_done(r->grammar)) return VT_SCHED_FINISH_STOP;
    if (r->n_generated >= r->max_generated) return VT_SCHED_FINISH_LENGTH;
    return VT_SCHED_FINISH_NONE;
}

/* An entry that asked for logits and got none (the engine's bug). */
#define NO_LOGITS INT32_MIN

/* Sample entries [begin, end) of the step just run. Each request has its own
 * sampler (its own random stream and scratch) and reads only its logits row
 * and its own history, so entries sample in parallel and draw the same
 * tokens as one after another. */
/* r's next token from logits (with a grammar, among the tokens that keep
 * to it: VT_GRAMMAR_NO_TOKEN when none does); with logprobs, r->lp_step gets
 * the token's log-probability and its top alternatives, from the raw logits
 * (before the grammar's mask, the sampler's penalties, filters and
 * temperature). Touches r only. */
static int32_t sample_one(const vt_sched *s, request *r, const float *logits) {
    const int32_t token =
        r->grammar ? vt_grammar_sampling_draw(r->grammar, s->trie, r->sampler, logits, r->tokens + r->n_prompt,
                                              r->n_generated, r->stop_ids, r->n_stop_ids)
                   : vt_sampler_sample_after(r->sampler, logits, s->n_vocab, r->tokens + r->n_prompt, r->n_generated);
    if (r->logprobs && token != VT_GRAMMAR_NO_TOKEN) {
        const double lse = vt_logits_lse(logits, s->n_vocab);
        r->lp_step[0] = (vt_token_logprob){token, (float)((double)logits[token] - lse)};
        const int32_t m = vt_top_logprobs(logits, s->n_vocab, r->n_top, lse, r->lp_step + 1);
        for (int32_t j = m; j < r->n_top; j++) r->lp_step[1 + j] = (vt_token_logprob){-1, -INFINITY};
    }
    return token;
}

static void sample_entries(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    vt_sched *s = arg;
    for (int64_t i = begin; i < end; i++) {
        if (!s->entries[i].logits) continue;
        const float *logits = vt_engine_step_logits(s->engine, (int32_t)i);
        s->sampled[i] = logits ? sample_one(s, s->plan_req[i], logits) : NO_LOGITS;
    }
}

/* Keep r->lp_step as the log-probabilities of generated token number
 * r->n_generated; false when out of memory. */
static bool keep_logprobs(request *r) {
    if (!r->logprobs) return true;
    if (r->n_generated >= r->cap_lp) {
        int64_t cap = r->cap_lp ? 2 * r->cap_lp : 16;
        if (cap > r->max_generated) cap = r->max_generated;
        vt_token_logprob *sampled = realloc(r->lp_sampled, (size_t)cap * sizeof *sampled);
        if (!sampled) return false;
        r->lp_sampled = sampled;
        if (r->n_top > 0) {
            vt_token_logprob *top = realloc(r->lp_top, (size_t)(cap * r->n_top) * sizeof *top);
            if (!top) return false;
            r->lp_top = top;
        }
        if (r->text) {
            int64_t *offset = realloc(r->lp_text_offset, (size_t)cap * sizeof *offset);
            if (!offset) return false;
            r->lp_text_offset = offset;
        }
        r->cap_lp = cap;
    }
    r->lp_sampled[r->n_generated] = r->lp_step[0];
    if (r->n_top > 0)
        memcpy(r->lp_top + r->n_generated * r->n_top, r->lp_step + 1, (size_t)r->n_top * sizeof *r->lp_top);
    return true;
}

/* r generated token: its text, its log-probabilities, and whether it ends r. */
static void accept_token(vt_sched *s, request *r, int32_t token, vt_sched_step_info *info) {
    if (token == VT_GRAMMAR_NO_TOKEN) { /* nothing of the vocabulary continues the grammar */
        finish(s, r, VT_SCHED_FINISH_LENGTH);
        info->n_finished++;
        return;
    }
    if (!keep_logprobs(r)) { /* no memory for its log-probabilities: it ends before this token */
        finish(s, r, VT_SCHED_FINISH_LENGTH);
        info->n_finished++;
        return;
    }
    bool ok = true;
    /* where the text ends, for a token that adds none (append_text says
     * where one that does begins) */
    if (ok && r->text && r->logprobs)
        r->lp_text_offset[r->n_generated] = (int64_t)vt_text_stream_offset_of(r->text, NULL, 0);
    if (ok && r->text && !is_stop_id(r, token)) {
        vt_error text_err = {0};
        ok = append_text(s, r, token, &text_err) == VT_OK;
    }
    r->tokens[r->n_prompt + r->n_generated++] = token;
    /* Out of memory for the text or the logprobs: the step has run, so this
     * request ends here rather than going on with some missing. */
    const vt_sched_finish why = ok ? finish_after(r, token) : VT_SCHED_FINISH_LENGTH;
    if (why != VT_SCHED_FINISH_NONE) {
        finish(s, r, why);
        info->n_finished++;
    }
}

/* The leader's prompt has just been computed and logits holds its last
 * token's row: each follower samples its first token from it (as the same
 * request alone would) and continues on a fork of the leader's KV blocks.
 * One that finds no free sequence or block waits at the front of the queue
 * and computes its prompt when it starts (the prefix cache has most of it). */
static void start_followers(vt_sched *s, request *leader, const float *logits, vt_sched_step_info *info) {
    int32_t n_queued = 0;
    for (int32_t i = 0; i < leader->n_followers; i++) {
        request *f = leader->followers[i];
        f->leader = NULL;
        accept_token(s, f, sample_one(s, f, logits), info);
        if (f->state == VT_SCHED_FINISHED) continue;
        int32_t slot = 0;
        while (slot < vt_engine_max_seqs(s->engine) && s->slot_owner[slot]) slot++;
        if (s->n_running < s->max_running && slot < vt_engine_max_seqs(s->engine) &&
            vt_engine_seq_fork(s->engine, leader->slot, slot, NULL) == VT_OK) {
            s->slot_owner[slot] = f;
            f->slot = slot;
            f->state = VT_SCHED_RUNNING;
            f->n_computed = leader->n_computed;
            s->running[s->n_running++] = f;
            s->stats.n_forks++;
        } else {
            memmove(s->waiting + n_queued + 1, s->waiting + n_queued,
                    (size_t)(s->n_waiting - n_queued) * sizeof *s->waiting);
            s->waiting[n_queued++] = f;
            s->n_waiting++;
        }
    }
    leader->n_followers = 0;
}

/* Schedule: which requests run in this step and how many tokens each
 * brings (s->plan_req, s->plan_n). Decodes first: a running request's next
 * token costs one slot of the budget and keeps its latency steady; prompts
 * share what is left. Moves requests between the queues, runs nothing. */
static void schedule(vt_sched *s, vt_sched_step_info *info) {
    plan_begin(s);
    plan_running(s, true, true, info);
    plan_prompts(s, true, info);
    /* After a preemption the pool is short: starting more requests would
     * only have them preempted again. */
    if (info->n_preempted == 0 || s->n_running == 0) plan_admissions(s, info);
}

/* Execute: the planned tokens through one forward of the engine, then a
 * token drawn for every entry that got logits (s->sampled). Changes no
 * request. */
static vt_status execute(vt_sched *s, vt_sched_step_info *info, vt_error *err) {
    for (int32_t i = 0; i < s->n_plan; i++) {
        const request *r = s->plan_req[i];
        const int64_t n = s->plan_n[i];
        s->entries[i] = (vt_step_entry){r->slot, r->tokens + r->n_computed, n, r->n_computed + n == total_tokens(r),
                                        r->n_computed >= r->n_prompt};
        if (n == 1 && r->n_computed + 1 == total_tokens(r) && r->n_generated > 0)
            info->n_decode_tokens++;
        else
            info->n_prefill_tokens += n;
    }
    info->n_entries = s->n_plan;
    const int64_t chunk = prefill_chunk(s); /* the rule this step was planned under (the step updates it) */
    const double started = vt_now_seconds();
    vt_status st = vt_engine_step(s->engine, s->entries, s->n_plan, err);
    if (st != VT_OK) return st;
    const double seconds = vt_now_seconds() - started;
    learn_step_time(s, info, seconds);
    s->stats.n_steps++;
    if (info->n_decode_tokens > 0)
        vt_log(VT_LOG_DEBUG, "sched",
               "step %llu: %lld decodes, %lld prompt tokens (at most %lld beside decodes), forward %.1f ms",
               (unsigned long long)s->stats.n_steps, (long long)info->n_decode_tokens,
               (long long)info->n_prefill_tokens, (long long)chunk, 1e3 * seconds);
    else
        vt_log(VT_LOG_DEBUG, "sched", "step %llu: %lld prompt tokens, no decodes, forward %.1f ms",
               (unsigned long long)s->stats.n_steps, (long long)info->n_prefill_tokens, 1e3 * seconds);
    /* Sampling reads the whole vocabulary once per sequence (a sort of it
     * for a temperature draw), so with several sequences it runs on the
     * engine's threads rather than on this one alone between two steps. */
    vt_engine_parallel_for(s->engine, s->n_plan, 1, sample_entries, s);
    return VT_OK;
}

/* Update: each planned request's progress, and its drawn token taken (text,
 * stop conditions, the end of the request); a leader's first token starts
 * its followers first. */
static vt_status update(vt_sched *s, vt_sched_step_info *info, vt_error *err) {
    /* the engine stored every entry's tokens: each request's progress first,
     * so a failure below leaves none behind its sequence */
    for (int32_t i = 0; i < s->n_plan; i++) s->plan_req[i]->n_computed += s->plan_n[i];
    for (int32_t i = 0; i < s->n_plan; i++) {
        request *r = s->plan_req[i];
        if (!s->entries[i].logits) continue;
        if (s->sampled[i] == NO_LOGITS)
            return vt_fail(err, VT_ERR_INTERNAL, "scheduler: step entry %d (request %llu) got no logits", i,
                           (unsigned long long)r->id);
        /* before the leader's own token, which may end it and free its blocks */
        if (r->n_followers > 0 && r->n_generated == 0)
            start_followers(s, r, vt_engine_step_logits(s->engine, i), info);
        accept_token(s, r, s->sampled[i], info);
    }
    return VT_OK;
}

vt_status vt_sched_step(vt_sched *s, vt_sched_step_info *info, vt_error *err) {
    vt_sched_step_info local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    schedule(s, info);
    if (s->n_plan == 0) return VT_OK;
    vt_status st = execute(s, info, err);
    return st == VT_OK ? update(s, info, err) : st;
}
