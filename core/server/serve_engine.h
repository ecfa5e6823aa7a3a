/* serve_engine.h — the one thread that owns the vt_batch.
 *
 * vt_batch is used from one thread at a time, and a step must never wait for
 * a socket, so the HTTP threads never touch it: they hand a job (generate,
 * tokenize, detokenize) to this thread through a queue under one mutex, and
 * wait on the job's condition variable. The engine thread takes queued jobs,
 * tokenizes and adds them, steps, and appends each request's new text to
 * the job's own buffer (it grows; a slow reader never blocks the loop). A
 * job the client abandoned (disconnect) is cancelled before the next step,
 * so its KV blocks return at once; one past its time limit ends as length,
 * or as a 503 error when it has no token yet.
 *
 * Jobs are reference-counted: the submitting handler holds one reference
 * and the engine one while the job is queued or running. */
#ifndef VT_SERVE_ENGINE_H
#define VT_SERVE_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "serve_logprobs.h"
#include "serve_metrics.h"
#include "serve_request.h"
#include "vt/vt.h"

typedef enum vt_serve_job_state {
    VT_JOB_QUEUED = 0,
    VT_JOB_RUNNING = 1, /* generate: added to the batch, tokens arriving */
    VT_JOB_DONE = 2,
    VT_JOB_FAILED = 3, /* error says why; nothing was generated */
} vt_serve_job_state;

/* One of a generate job's req.n choices: a request of the batch (choice i
 * samples with the job's seed + i, vt_batch_add_n). */
typedef struct vt_serve_choice {
    /* Under the engine's lock. */
    char *text; /* generated so far */
    size_t n_text, text_cap;
    int64_t n_generated;
    vt_finish finish;           /* VT_FINISH_NONE while it runs */
    vt_serve_logprobs logprobs; /* with req.logprobs: of each token of its text (not a final end-of-generation id) */
    /* The engine thread's own. */
    uint64_t batch_id;
} vt_serve_choice;

typedef struct vt_serve_job vt_serve_job;
struct vt_serve_job {
    /* Set by the handler before submit, read-only afterwards. */
    vt_serve_request req;
    char *prompt_text;  /* generate: the text to tokenize (rendered chat or req.prompt), or NULL for req.ids */
    bool parse_special; /* generate: control-token text in prompt_text becomes its token (chat) */
    bool add_bos;       /* generate: the tokenizer adds the vocabulary's BOS (not when a template wrote it) */
    double t_submit;

    /* Under the engine's lock. */
    vt_serve_job_state state;
    vt_serve_error error;
    char *text; /* detokenize: the text */
    size_t n_text, text_cap;
    int32_t *ids; /* tokenize: the ids */
    size_t n_ids;
    vt_serve_choice *choices; /* generate: [n_choices] (req.n) */
    int32_t n_choices;
    uint64_t n_updates; /* generate: bumped whenever a choice gets text, logprobs or its end */
    int64_t n_prompt, n_generated; /* the prompt (computed once for every choice); tokens of all choices */
    int64_t n_cached; /* prompt tokens taken from the prefix cache */
    bool timed_out; /* ended by the time limit (length; a 503 error without a token) */
    bool abandoned; /* the client left: cancel it */
    int refs;
    pthread_cond_t changed;

    /* The engine thread's own. */
    double deadline, t_last;
    bool got_first;
    vt_serve_job *next;
};

typedef struct vt_serve_engine_config {
    int32_t max_waiting;    /* requests queued or waiting in the batch before 503 */
    int32_t max_seqs;       /* sequences a step runs: what the next step admits of the batch's waiting */
    double request_timeout; /* seconds from arrival; 0 = none */
    uint64_t seed;          /* requests without a seed get seed, seed + 1, ... */
    uint64_t (*draw_seed)(void); /* ... or, when set, each a fresh seed from it (--seed -1, the default) */
    /* Chat requests stop on these ids (the model's end-of-generation ids and
     * the chat template's end-of-turn token); n 0: the model's own. Copied. */
    const int32_t *chat_stop_ids;
    size_t n_chat_stop_ids;
} vt_serve_engine_config;

typedef struct vt_serve_engine vt_serve_engine;

/* Start the engine thread over b (which it then owns until stop). */
vt_serve_engine *vt_serve_engine_start(vt_batch *b, const vt_serve_engine_config *cfg, vt_serve_metrics *metrics);
/* Finish: cancel what still runs, join the thread (the batch is not closed). */
void vt_serve_engine_stop(vt_serve_engine *e);

/* A new job (refs 1, the caller's) for a parsed request; takes r's contents. */
vt_serve_job *vt_serve_job_new(vt_serve_request *r);
/* Queue it (the engine takes its own reference). False with err: 503 when
 * the waiting queue is full or the server is draining. */
bool vt_serve_engine_submit(vt_serve_engine *e, vt_serve_job *job, vt_serve_error *err);
/* Token id's text, control tokens as their text (vt_batch_token_text): at
 * most cap bytes into buf, the whole length returned; -1 outside the
 * vocabulary. The vocabulary never changes: any thread may ask. */
int32_t vt_serve_engine_token_text(const vt_serve_engine *e, int32_t id, char *buf, size_t cap);

/* The lock guarding every job's shared fields. */
void vt_serve_engine_lock(vt_serve_engine *e);
void vt_serve_engine_unlock(vt_serve_engine *e);
/* With the lock held: wait up to ms for the job to change. */
void vt_serve_job_wait_locked(vt_serve_engine *e, vt_serve_job *job, int ms);
/* The client left: cancel the job (frees its KV blocks before the next step). */
void vt_serve_job_abandon(vt_serve_engine *e, vt_serve_job *job);
/* Drop the caller's reference. */
void vt_serve_job_release(vt_serve_engine *e, vt_serve_job *job);

/* Refuse new generate jobs from now on (503), e.g. while draining. */
void vt_serve_engine_refuse_new(vt_serve_engine *e);
/* Generate jobs queued or running. */
int vt_serve_engine_in_flight(vt_serve_engine *e);
/* End every generate job now (finish length, as timed out). */
void vt_serve_engine_cancel_all(vt_serve_engine *e);

/* Seconds on the monotonic clock. */
double vt_serve_now(void);

#endif
