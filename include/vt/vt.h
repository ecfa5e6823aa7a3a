/* vt.h — the runtime API for programs that embed vt (link libvt; pkg-config
 * vt, or find_package(vt) and vt::vt).
 *
 * A session is one model on the real engine path: the GGUF is mmapped,
 * backends are loaded, the KV cache is allocated and both plans (prefill,
 * decode) are negotiated when the session opens — a dtype disagreement is an
 * error from vt_session_open, never from an eval. Settings use the ini keys
 * of conf/vt.ini ("kv_cache.dtype=f32", "runtime.backend=simd", ...) and are
 * validated exactly as the command line's; the environment levers
 * (VT_KV_CACHE_DTYPE, ...) and a config file apply below them, as for `vt`.
 * [sampling] and [server] in the settings are refused: a request carries its
 * own sampling (vt_batch_request), and libvt has no server; a config file's
 * [sampling] is left to vt with a warning, its [server] is not read by libvt
 * and refused as any section it does not know.
 *
 * Errors: every call that can fail returns a vt_status and writes a one-line
 * message to err (err_size bytes, may be 0); vt_status_name() names a status.
 * A NULL session or batch is refused, never followed: a call returning a
 * status returns VT_ERR_INVALID, a getter 0 for a count or size, -1 where an
 * unknown id or token gets -1, NULL for a pointer; a void call does nothing.
 *
 * Threads: a session is used from one thread at a time. Sessions (and
 * batches) are independent: each has its own thread pool, its backends run
 * on that pool whichever thread drives it, so different sessions may be used
 * from different threads at once. The log functions may be called from any
 * thread.
 *
 * libvt exports exactly the functions declared here (VT_API); the rest of the
 * library is hidden. */
#ifndef VT_H
#define VT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this vt.h, for a program to test at compile time what its
 * headers have (vt_version() is the library's it runs with; they are the
 * same release when the two come from one install). */
#define VT_VERSION_MAJOR 0
#define VT_VERSION_MINOR 1
#define VT_VERSION_PATCH 0
#define VT_VERSION_NUMBER (VT_VERSION_MAJOR * 10000 + VT_VERSION_MINOR * 100 + VT_VERSION_PATCH)

/* The library's version: "MAJOR.MINOR.PATCH", and MAJOR*10000 + MINOR*100 + PATCH. */
VT_API const char *vt_version(void);
VT_API uint32_t vt_version_number(void);

/* "invalid argument", "out of memory", ... for a status code. */
VT_API const char *vt_status_name(vt_status code);

/* Log messages (the registry, backends through host->log, warnings such as a
 * narrowed KV cache) go to stderr as "vt[who] level: message" unless a
 * callback is set: then each message is handed to it whole, one line without
 * its newline, on whatever thread logged it. fn = NULL restores stderr.
 * vt_set_log_callback returns once no thread is still inside the previous
 * callback (so its user data may be freed then); calling it from inside the
 * callback changes nothing (a warning on stderr says so). A callback may
 * itself log.
 * Messages above the level are dropped before formatting (default
 * VT_LOG_WARN, or VT_LOG=debug|info|warn|error in the environment). */
typedef void (*vt_log_fn)(void *user, int level, const char *who, const char *message);
VT_API void vt_set_log_callback(vt_log_fn fn, void *user);
VT_API void vt_set_log_level(int level); /* VT_LOG_ERROR .. VT_LOG_DEBUG (vt_types.h); outside that, the nearest */

/* A session is the engine itself, logits in and out, for a program with its
 * own sampler; to generate text (sampling, stop ids, the context's limit,
 * grammars) use a vt_batch below, one request at a time if that is all. */
typedef struct vt_session vt_session;

typedef struct vt_session_options {
    uint32_t struct_size;          /* sizeof(vt_session_options) */
    const char *config_path;       /* ini file; NULL: VT_CONFIG's, if set; "": none. Its [sampling] is left to
                                    * vt run and vt serve (a warning says so): a request carries its own */
    const char *const *settings;   /* "key=value" with ini keys ("runtime.threads=2"), or "backend.NAME.key=value"
                                    * for a backend's own option (the ini's [backend.NAME]; a later one replaces
                                    * the ini's); each key once; NULL-terminated; may be NULL */
    bool all_logits;               /* every evaluated token gets a row of logits, not only the last */
} vt_session_options;

/* struct_size set, every other field empty: what NULL options mean, ready to
 * fill (a struct_size left 0 is refused: it would drop the settings silently). */
VT_API void vt_session_options_init(vt_session_options *o);

/* Open model_path with the given options (NULL = defaults). Opening a large
 * model reads and prepares its weights for seconds or minutes (and
 * `runtime.backend=auto` calibrates); libvt writes nothing to the program's
 * terminal meanwhile but through the log (the vt command draws a progress
 * line there). */
VT_API vt_status vt_session_open(const char *model_path, const vt_session_options *options, vt_session **out, char *err,
                          size_t err_size);
VT_API void vt_session_close(vt_session *s);

VT_API int32_t vt_session_n_vocab(const vt_session *s);
/* Tokens evaluated so far (the sequence's length in the KV cache). */
VT_API int64_t vt_session_n_past(const vt_session *s);
/* Forget the sequence (the KV cache's blocks return to the free list). */
VT_API void vt_session_reset(vt_session *s);

/* Text -> ids with the model's tokenizer (BOS as the vocabulary says when
 * add_bos). *ids is malloc'ed: free() it. */
VT_API vt_status vt_session_tokenize(const vt_session *s, const char *text, size_t len, bool add_bos, int32_t **ids,
                              size_t *n_ids, char *err, size_t err_size);
/* The bytes token id renders to (may be part of a UTF-8 character), at most
 * cap of them written to buf; returns the token's whole length, as snprintf
 * does (more than cap: call again with a larger buf), or -1 for an id outside
 * the vocabulary. */
VT_API int32_t vt_session_token_bytes(const vt_session *s, int32_t id, char *buf, size_t cap);

/* Append n tokens to the sequence and run them: one token through the decode
 * plan, more through the prefill plan. VT_ERR_CONTEXT_FULL leaves the
 * sequence as it was. */
VT_API vt_status vt_session_eval(vt_session *s, const int32_t *ids, size_t n, char *err, size_t err_size);
/* Logits of the last eval: row 0 is its last token, or with all_logits row i
 * is its i-th token. n_vocab floats, valid until the next eval; NULL if the
 * row does not exist. */
VT_API const float *vt_session_logits(const vt_session *s, int64_t row);

/* The negotiated plans, one line per node, and the KV-cache dtype with its
 * source (what `vt run --explain` prints). */
VT_API void vt_session_explain(const vt_session *s, FILE *f);

/* ---- Batching: many requests, one forward per step ----
 *
 * A batch is one model on the real engine path, like a session, whose
 * engine carries up to runtime.max_seqs sequences per forward over one
 * shared KV cache, with a scheduler in front: requests (a prompt, a number of
 * new tokens, their own sampler and seed, stop ids) wait in a FIFO queue of
 * runtime.max_waiting entries beyond those the next step starts (a burst
 * added to an idle batch with free sequences is not refused); each
 * vt_batch_step runs one forward holding
 * the next token of every running request and chunks of waiting prompts, at
 * most runtime.token_budget tokens in all (0 = runtime.batch_size). When the
 * KV cache runs out of blocks, the latest started request is set back and
 * recomputed later. Each request samples from its own logits with its own
 * seed, so its tokens do not depend on what else runs beside it.
 *
 * Settings and config file as for vt_session_open (vt_session_options;
 * all_logits is ignored): "runtime.max_seqs=8", "runtime.token_budget=256",
 * "runtime.max_waiting=64", "runtime.backend=simd", ... The defaults are
 * runtime.max_seqs 1 (one sequence per forward: set it to batch; vt serve
 * sets 4), runtime.max_waiting 256 and runtime.token_budget 0.
 *
 * Threads: a batch is used from one thread at a time, like a session. */
typedef struct vt_batch vt_batch;

/* The largest sampling seed: a JSON integer (OpenAI's seed) holds it, so any
 * seed vt uses or prints can be sent back to replay what it drew. Seeds vt
 * derives from one (choice i: seed + i; vt serve --seed N: N, N + 1, ...)
 * wrap around within 0..VT_SEED_MAX. */
#define VT_SEED_MAX INT64_MAX
/* The seed k after seed, wrapping within 0..VT_SEED_MAX. */
static inline uint64_t vt_seed_after(uint64_t seed, uint64_t k) { return (seed + k) & (uint64_t)VT_SEED_MAX; }

/* Why a request ended. */
typedef enum vt_finish {
    VT_FINISH_NONE = 0,      /* still waiting or running */
    VT_FINISH_LENGTH = 1,    /* max_new_tokens generated, or its context is full */
    VT_FINISH_STOP = 2,      /* a stop id was generated (it is the last token read) */
    VT_FINISH_CANCELLED = 3, /* vt_batch_cancel */
    VT_FINISH_STOP_STRING = 4, /* the text reached one of request.stop_strings (not part of the output text) */
} vt_finish;

typedef struct vt_batch_request {
    uint32_t struct_size;     /* sizeof(vt_batch_request); vt_batch_request_init sets it */
    /* The prompt: token ids, or when ids is NULL, text tokenized with the
     * model's tokenizer (BOS as the vocabulary says, control-token text matched only with parse_special). */
    const int32_t *ids;
    size_t n_ids;
    const char *text;
    int64_t max_new_tokens;   /* >= 1 */
    float temperature;        /* >= 0; 0 = greedy */
    int32_t top_k;            /* >= -1; 0 or -1 = off */
    float top_p;              /* [0, 1]; 1 = off, 0 = the most likely token only */
    float min_p;              /* [0, 1]; 0 = off */
    uint64_t seed;            /* 0..VT_SEED_MAX */
    /* Ids that end the request; n_stop_ids 0: the model's end-of-generation
     * ids (EOS, EOT), vt_batch_default_stop_ids gives them. */
    const int32_t *stop_ids;
    size_t n_stop_ids;
    /* Fields below were appended after the first release: a caller whose
     * struct_size ends before a field gets its default. */
    /* Text prompts: control-token text ("<|im_start|>", "[INST]" where it is
     * a control token of the vocabulary) becomes its token. Default false. */
    bool parse_special;
    /* OpenAI's penalties over the tokens this request has generated:
     * logit -= presence_penalty * (count > 0) + frequency_penalty * count,
     * before the filters. [-2, 2]; 0 = off (default). */
    float presence_penalty;
    float frequency_penalty;
    /* UTF-8 strings that end the request when the generated text contains
     * one (VT_FINISH_STOP_STRING); the output text stops before it. Up to 16
     * strings of 1..256 bytes. */
    const char *const *stop_strings;
    size_t n_stop_strings;
    /* Log-probabilities of the generated tokens (vt_batch_read_logprobs):
     * the log-softmax of the model's raw logits at each position, before
     * temperature, penalties and filters (what OpenAI reports as the model's
     * probability). Only requests that ask pay for it. Default false. */
    bool logprobs;
    /* With logprobs: also the top_logprobs most likely tokens at each
     * position, 0..20 (VT_BATCH_MAX_TOP_LOGPROBS). Default 0. */
    int32_t top_logprobs;
    /* A GBNF grammar (llama.cpp's syntax, start rule `root`) the generated
     * text must follow, or NULL (default). Each step the tokens whose bytes
     * would leave the grammar are excluded before the sampling settings
     * apply; the stop ids are allowed only where the grammar may end. The
     * request finishes as VT_FINISH_STOP once the grammar is complete and
     * admits nothing more, as VT_FINISH_LENGTH at max_new_tokens or when no
     * token can continue it. Needs the model's tokenizer. */
    const char *grammar;
    /* Generation goes on past the model's end-of-generation ids (which end
     * a request whose n_stop_ids is 0); stop_ids the caller gives still end
     * it, as do max_new_tokens, a stop string, a complete grammar and
     * cancellation. The end-of-generation tokens are generated as any other
     * (as vt run --ignore-eos does). For benchmarks of a fixed length.
     * Default false. */
    bool ignore_eos;
} vt_batch_request;

#define VT_BATCH_MAX_TOP_LOGPROBS 20

/* A token id and its log-probability. */
typedef struct vt_token_logprob {
    int32_t id;    /* -1: no such token (fewer non-NaN logits than asked for) */
    float logprob; /* natural log; -inf for a token of probability 0 */
} vt_token_logprob;

/* What vt_batch_read_logprobs reports: the log-probabilities of the tokens
 * the last vt_batch_read of the request returned, in the same order. */
typedef struct vt_batch_logprobs {
    uint32_t struct_size;            /* sizeof(vt_batch_logprobs) as the caller knows it */
    size_t n_tokens;                 /* the last read's n_tokens */
    const vt_token_logprob *sampled; /* [n_tokens]: each generated token with its logprob */
    const vt_token_logprob *top;     /* [n_tokens * n_top]: row i holds token i's n_top most likely
                                      * alternatives, most likely first (ties to the lower id) */
    int32_t n_top;                   /* the request's top_logprobs */
    /* [n_tokens]: where each token begins in the request's text, in bytes
     * from its start (the text vt_batch_read returns, read after read). A
     * byte that is no character stands there as U+FFFD (3 bytes); a token
     * beginning inside a character has the character's start; one adding no
     * text has the text's length then. The tokens that spell a stop string
     * begin where the text ends once it matched (those read before it was
     * complete were told where they would begin without it). NULL for a
     * model without a tokenizer. */
    const int64_t *text_offset;
} vt_batch_logprobs;

/* What vt_batch_read reports. */
typedef struct vt_batch_output {
    const int32_t *tokens;    /* generated since the last read; valid until the next read or remove of this id */
    size_t n_tokens;
    int64_t n_generated;      /* in all, read or not */
    vt_finish finish;
    /* The generated text that is final since the last read: whole UTF-8
     * characters only, and nothing that could still be the start of a stop
     * string (held back until it cannot). Once finished, the rest up to (not
     * including) a matched stop string; an end-of-generation token adds no
     * text. Valid until the next read or remove of this id. */
    const char *text;
    size_t n_text;
} vt_batch_output;

/* This struct has no struct_size, so it keeps its fields as they are: new
 * counters go to a struct that has one (as vt_batch_cache_stats). */
typedef struct vt_batch_stats {
    /* Requests as added: vt_batch_add_n's n choices count as one request. */
    int32_t n_waiting;        /* requests queued (not started, or set back to be recomputed), none of
                               * whose choices runs */
    int32_t n_running;        /* requests with a choice holding a sequence */
    int32_t free_kv_blocks;   /* KV-cache blocks no sequence holds */
    int64_t n_steps;          /* steps that ran a forward */
    int64_t n_preemptions;    /* requests set back for lack of KV blocks */
    int32_t total_kv_blocks;  /* KV-cache blocks in the pool */
} vt_batch_stats;

/* Automatic prefix caching (ini kv_cache.prefix_cache, on by default): a
 * request whose prompt begins with tokens an earlier request computed takes
 * them from the cache instead of computing them again (whole KV blocks
 * shared, the matching positions of a partly matching block copied; at
 * least its last token is computed, for its logits), bit for bit what
 * computing them gives. */
typedef struct vt_batch_cache_stats {
    uint32_t struct_size;    /* sizeof(vt_batch_cache_stats) as the caller knows it */
    bool enabled;            /* off by the setting, or because this engine's prefill and decode plans compute
                              * differently (--explain says which) */
    int32_t cached_blocks;   /* KV blocks filed in the cache, held by requests or not */
    int32_t evictable_blocks; /* of those, held by none: reclaimed (least recently used first) when needed */
    int64_t hit_tokens;      /* prompt tokens taken from the cache since the batch opened (by requests
                              * starting: not recomputations after preemption, not a request's other
                              * choices, whose prompt is its first's) */
    int64_t query_tokens;    /* prompt tokens looked up in it (the same requests' whole prompts) */
} vt_batch_cache_stats;

/* Greedy, filters off, seed 0, max_new_tokens 16, the model's stop ids, no prompt. */
VT_API void vt_batch_request_init(vt_batch_request *r);

/* The rule vt_batch_add applies to a sampling field of a request, by its
 * name ("temperature", "top_k", "top_p", "min_p", "presence_penalty",
 * "frequency_penalty"): true if value is accepted. Either way *accepted (when
 * not NULL) gets what the field accepts, in words ("numbers in [0, 1] (1 =
 * off, ...)"), or NULL for a name that is not a sampling field. For callers
 * that check input before building a request (vt serve names the JSON
 * field). */
VT_API bool vt_sampling_field_ok(const char *field, double value, const char **accepted);

/* Is gbnf a valid grammar for vt_batch_request.grammar? VT_OK, or
 * VT_ERR_INVALID with "grammar: line L, column C: ..." in err. For callers
 * that check input before queueing it (vt serve answers 400). */
VT_API vt_status vt_grammar_check(const char *gbnf, char *err, size_t err_size);

/* A grammar whose sentences are exactly those of either GBNF text (for one
 * answer that may take either of two shapes, such as a document or a tool
 * call): each one's rules renamed with its prefix (words of a-z, A-Z, 0-9,
 * - and _, neither beginning the other or "root"), so rules of one name in
 * both stay apart, and a root choosing between their roots. malloc'ed:
 * free() it. NULL with vt_grammar_check's message in err when either text,
 * or the union (which may pass a size or rule limit neither reaches alone),
 * is refused, or a prefix is. Sampling bounds its work per step; near those
 * bounds the union may drop a path one grammar alone keeps, never accept
 * more. */
VT_API char *vt_grammar_either(const char *first, const char *first_prefix, const char *second,
                               const char *second_prefix, char *err, size_t err_size);

/* Open model_path with the given options (NULL = defaults). runtime.max_seqs
 * out of range, a token_budget above the batch size: VT_ERR_INVALID naming
 * the key. */
VT_API vt_status vt_batch_open(const char *model_path, const vt_session_options *options, vt_batch **out, char *err,
                               size_t err_size);
/* Frees every request (unread tokens included). */
VT_API void vt_batch_close(vt_batch *b);

VT_API int32_t vt_batch_n_vocab(const vt_batch *b);
/* As vt_session_token_bytes. */
VT_API int32_t vt_batch_token_bytes(const vt_batch *b, int32_t id, char *buf, size_t cap);
/* As vt_batch_token_bytes, but a control token renders as its text
 * ("<|im_start|>") where vt_batch_token_bytes renders nothing: what
 * `vt detokenize --special` and llama-server's /detokenize show. */
VT_API int32_t vt_batch_token_text(const vt_batch *b, int32_t id, char *buf, size_t cap);
/* The model's end-of-generation ids, the stop ids of a request that gives
 * none: copies up to cap of them into ids (may be NULL) and returns how many
 * there are. */
VT_API size_t vt_batch_default_stop_ids(const vt_batch *b, int32_t *ids, size_t cap);

/* Queue a request (everything is copied); *id gets its id (>= 1). Refused,
 * nothing queued, with the message naming the field ("request.ids[3]: ...",
 * "request.temperature: ..."): an empty prompt, an id outside the vocabulary,
 * sampler values out of range, max_new_tokens < 1 (VT_ERR_INVALID); a prompt
 * longer than the context (VT_ERR_CONTEXT_FULL); a full waiting queue
 * (VT_ERR_UNSUPPORTED: step, then add again). */
VT_API vt_status vt_batch_add(vt_batch *b, const vt_batch_request *r, uint64_t *id, char *err, size_t err_size);

/* Queue n requests of one prompt (OpenAI's n choices): choice i is request
 * r with seed (r->seed + i) mod (VT_SEED_MAX + 1), ids[i] its id, read and cancelled like any
 * request. The prompt is computed once: when its last token's logits are
 * out, every other choice samples its first token from them and continues
 * on a fork of the first choice's KV blocks (full blocks shared, the partial
 * last one copied); a choice that finds no free sequence or block then
 * waits and takes the prompt from the prefix cache when it starts. n is
 * 1..VT_BATCH_MAX_CHOICES; the checks and refusals are vt_batch_add's,
 * counting the first choice only: the others wait with it, outside
 * runtime.max_waiting and vt_batch_stats.n_waiting. */
#define VT_BATCH_MAX_CHOICES 64
VT_API vt_status vt_batch_add_n(vt_batch *b, const vt_batch_request *r, size_t n, uint64_t *ids, char *err,
                                size_t err_size);

/* Run one forward and sample one token for every request whose prompt has
 * been computed. *n_seqs (may be NULL) gets the sequences in the forward; 0
 * means nothing was waiting or running. A failed step advances no request
 * and may be retried. */
VT_API vt_status vt_batch_step(vt_batch *b, int32_t *n_seqs, char *err, size_t err_size);

/* The tokens request id generated since the last read, and why it ended.
 * Unknown id (never added, or removed): VT_ERR_INVALID. */
VT_API vt_status vt_batch_read(vt_batch *b, uint64_t id, vt_batch_output *out, char *err, size_t err_size);

/* The log-probabilities of the tokens the last vt_batch_read of request id
 * returned; valid as long as those tokens. out->struct_size must be set
 * (fields past it are not written). A request without logprobs:
 * VT_ERR_INVALID; unknown id: VT_ERR_INVALID. */
VT_API vt_status vt_batch_read_logprobs(vt_batch *b, uint64_t id, vt_batch_logprobs *out, char *err,
                                        size_t err_size);

/* End request id as cancelled; its KV blocks are freed at once, unread
 * tokens stay readable. A finished request keeps its reason. */
VT_API vt_status vt_batch_cancel(vt_batch *b, uint64_t id, char *err, size_t err_size);

/* Forget request id (cancelling it if unfinished): finished requests are
 * kept until removed. */
VT_API vt_status vt_batch_remove(vt_batch *b, uint64_t id, char *err, size_t err_size);

VT_API void vt_batch_get_stats(const vt_batch *b, vt_batch_stats *out);
/* The prefix cache's counts; out->struct_size must be set (fields past it are not written). */
VT_API void vt_batch_get_cache_stats(const vt_batch *b, vt_batch_cache_stats *out);
/* Prompt tokens request id took from the prefix cache (OpenAI's
 * usage.prompt_tokens_details.cached_tokens); -1 for an unknown id. */
VT_API int64_t vt_batch_cached_tokens(const vt_batch *b, uint64_t id);
/* How many of the n_waiting requests (n choices counted once) the next vt_batch_step would start:
 * as many as its token budget, free sequences and free KV blocks let in,
 * oldest first. Changes no request; not safe alongside another call on b. */
VT_API int32_t vt_batch_n_admit_next(const vt_batch *b);

/* Text -> ids with the model's tokenizer, as vt_session_tokenize; with
 * parse_special, control-token text becomes its token. */
VT_API vt_status vt_batch_tokenize(const vt_batch *b, const char *text, size_t len, bool add_bos, bool parse_special,
                                   int32_t **ids, size_t *n_ids, char *err, size_t err_size);
/* A string value of the model's GGUF metadata ("tokenizer.chat_template",
 * "general.name"), or NULL when the key is absent or not a string. Valid
 * until vt_batch_close. */
VT_API const char *vt_batch_meta_string(const vt_batch *b, const char *key);
/* The context (kv_cache.ctx_size) the batch's sequences share, in tokens. */
VT_API int64_t vt_batch_n_ctx(const vt_batch *b);
/* The KV cache's size in bytes: K and V of every layer for the whole
 * context, in the cache dtype. Reserved when the batch opens; its pages
 * become resident as blocks are first used, so a process's memory grows
 * towards this under load rather than at start. */
VT_API size_t vt_batch_kv_cache_bytes(const vt_batch *b);
/* The negotiated plans, as vt_session_explain (what `vt serve --explain`
 * prints). */
VT_API void vt_batch_explain(const vt_batch *b, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* VT_H */
