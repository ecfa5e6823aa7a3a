/* serve_engine.c — see serve_engine.h. */
#include "serve_engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct vt_serve_engine {
    vt_batch *batch;
    vt_serve_engine_config cfg;
    vt_serve_metrics *metrics;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the engine thread waits on it when idle */
    /* Under lock. */
    vt_serve_job *queue_head, *queue_tail;
    int32_t n_queued_generate; /* generate jobs in the queue or being added to the batch */
    int32_t n_batch_waiting;   /* the batch's requests still waiting after the next step's admissions */
    int32_t n_batch_running;   /* and running then */
    vt_batch_stats batch_stats; /* as last read: the gauges' running and KV counts */
    int32_t n_in_flight;       /* generate jobs queued or running */
    bool refuse_new, stopping, cancel_all;
    /* The engine thread's own. */
    vt_serve_job *active; /* generate jobs added to the batch */
    uint64_t next_seed;
    int64_t n_ctx;
    int32_t *chat_stop_ids; /* the config's, copied */
};

double vt_serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

vt_serve_job *vt_serve_job_new(vt_serve_request *r) {
    vt_serve_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    job->req = *r;
    memset(r, 0, sizeof *r);
    if (job->req.kind == VT_SERVE_CHAT || job->req.kind == VT_SERVE_COMPLETION) {
        job->n_choices = job->req.n > 0 ? job->req.n : 1;
        job->choices = calloc((size_t)job->n_choices, sizeof *job->choices);
        if (!job->choices) {
            *r = job->req;
            free(job);
            return NULL;
        }
        for (int32_t i = 0; i < job->n_choices; i++)
            job->choices[i].logprobs.n_top = job->req.logprobs ? job->req.top_logprobs : 0;
    }
    job->refs = 1;
    job->t_submit = vt_serve_now();
    pthread_cond_init(&job->changed, NULL);
    return job;
}

static void job_free(vt_serve_job *job) {
    vt_serve_request_free(&job->req);
    free(job->prompt_text);
    free(job->text);
    free(job->ids);
    for (int32_t i = 0; i < job->n_choices; i++) {
        free(job->choices[i].text);
        vt_serve_logprobs_free(&job->choices[i].logprobs);
    }
    free(job->choices);
    pthread_cond_destroy(&job->changed);
    free(job);
}

/* With the lock held. */
static void release_locked(vt_serve_job *job) {
    if (--job->refs == 0) job_free(job);
}

void vt_serve_job_release(vt_serve_engine *e, vt_serve_job *job) {
    if (!job) return;
    pthread_mutex_lock(&e->lock);
    release_locked(job);
    pthread_mutex_unlock(&e->lock);
}

void vt_serve_engine_lock(vt_serve_engine *e) { pthread_mutex_lock(&e->lock); }
void vt_serve_engine_unlock(vt_serve_engine *e) { pthread_mutex_unlock(&e->lock); }

void vt_serve_job_wait_locked(vt_serve_engine *e, vt_serve_job *job, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&job->changed, &e->lock, &ts);
}

void vt_serve_job_abandon(vt_serve_engine *e, vt_serve_job *job) {
    pthread_mutex_lock(&e->lock);
    job->abandoned = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
}

/* Requests that count against --max-waiting (lock held): the batch's
 * waiting, and of the jobs the engine thread has not handed to the batch
 * yet those the free sequences will not take, in arrival order, each job
 * its n choices: a burst that arrives at an idle server is about to run,
 * and must not be refused as a full queue. (The gauge counts every job
 * still in the hand-off queue as waiting: while a step's forward runs, and
 * it may take seconds, they do wait.) */
static int64_t waiting_for_gate_locked(const vt_serve_engine *e) {
    /* behind requests the batch already keeps waiting (for KV blocks, say),
     * every queued one waits too */
    const int64_t free_seqs = e->n_batch_waiting > 0                  ? 0
                              : e->cfg.max_seqs > e->n_batch_running ? e->cfg.max_seqs - e->n_batch_running
                                                                     : 0;
    int64_t taken = 0, seqs = 0;
    for (const vt_serve_job *job = e->queue_head; job; job = job->next) {
        if (job->req.kind != VT_SERVE_CHAT && job->req.kind != VT_SERVE_COMPLETION) continue;
        seqs += job->req.n;
        if (seqs > free_seqs) break;
        taken++;
    }
    return (int64_t)e->n_batch_waiting + (e->n_queued_generate > taken ? e->n_queued_generate - taken : 0);
}

/* The gauges from the batch as last read and the queue as it is now (lock
 * held). Published at every change a client could see, not only between
 * steps: a step (a long prefill) can take seconds. */
static void publish_locked(vt_serve_engine *e) {
    const vt_batch_stats *s = &e->batch_stats;
    vt_serve_metrics_gauges(e->metrics, e->n_batch_running, (int64_t)e->n_batch_waiting + e->n_queued_generate,
                            s->total_kv_blocks - s->free_kv_blocks, s->total_kv_blocks);
}

bool vt_serve_engine_submit(vt_serve_engine *e, vt_serve_job *job, vt_serve_error *err) {
    bool generate = job->req.kind == VT_SERVE_CHAT || job->req.kind == VT_SERVE_COMPLETION;
    pthread_mutex_lock(&e->lock);
    if (generate && (e->refuse_new || e->stopping)) {
        pthread_mutex_unlock(&e->lock);
        vt_serve_fail(err, 503, "server_error", NULL, "the server is shutting down");
        err->code = "shutting_down";
        return false;
    }
    if (generate && waiting_for_gate_locked(e) >= e->cfg.max_waiting) {
        pthread_mutex_unlock(&e->lock);
        vt_serve_fail(err, 503, "server_error", NULL, "the waiting queue is full (%d request%s); retry later",
                      (int)e->cfg.max_waiting, e->cfg.max_waiting == 1 ? "" : "s");
        err->code = "queue_full";
        return false;
    }
    if (generate && !job->req.has_seed) {
        /* Chosen here, before the handler logs the request, so the log line
         * can name the seed that replays it. */
        job->req.seed = e->cfg.draw_seed ? e->cfg.draw_seed() : e->next_seed;
        /* its n choices take seed .. seed + n - 1: the next request starts after them */
        if (!e->cfg.draw_seed) e->next_seed = vt_seed_after(e->next_seed, (uint64_t)job->req.n);
        job->req.has_seed = true;
    }
    job->refs++;
    job->next = NULL;
    if (e->queue_tail) e->queue_tail->next = job;
    else e->queue_head = job;
    e->queue_tail = job;
    if (generate) {
        e->n_queued_generate++;
        e->n_in_flight++;
        publish_locked(e);
    }
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    return true;
}

/* ---- the engine thread -------------------------------------------------- */

/* Append s[n] to the NUL-terminated *text (lock held). */
static bool append_text(char **text, size_t *n_text, size_t *cap, const char *s, size_t n) {
    if (n == 0) return true;
    if (*n_text + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *n_text + n + 1) c *= 2;
        char *t = realloc(*text, c);
        if (!t) return false;
        *text = t;
        *cap = c;
    }
    memcpy(*text + *n_text, s, n);
    *n_text += n;
    (*text)[*n_text] = '\0';
    return true;
}

/* End a job that never reached the batch (lock not held). */
static void finish_failed(vt_serve_engine *e, vt_serve_job *job, const vt_serve_error *err, bool generate) {
    pthread_mutex_lock(&e->lock);
    job->error = *err;
    job->state = VT_JOB_FAILED;
    if (generate) e->n_in_flight--;
    pthread_cond_broadcast(&job->changed);
    release_locked(job);
    pthread_mutex_unlock(&e->lock);
}

static void finish_done(vt_serve_engine *e, vt_serve_job *job) {
    pthread_mutex_lock(&e->lock);
    job->state = VT_JOB_DONE;
    pthread_cond_broadcast(&job->changed);
    release_locked(job);
    pthread_mutex_unlock(&e->lock);
}

static void run_tokenize(vt_serve_engine *e, vt_serve_job *job) {
    vt_serve_error err;
    char msg[256];
    int32_t *ids = NULL;
    size_t n = 0;
    vt_status st = vt_batch_tokenize(e->batch, job->req.prompt, strlen(job->req.prompt), job->req.add_special,
                                     job->req.parse_special, &ids, &n, msg, sizeof msg);
    if (st != VT_OK) {
        vt_serve_fail(&err, 400, "invalid_request_error", "content", "content: %s", msg);
        finish_failed(e, job, &err, false);
        return;
    }
    pthread_mutex_lock(&e->lock);
    job->ids = ids;
    job->n_ids = n;
    pthread_mutex_unlock(&e->lock);
    finish_done(e, job);
}

static void run_detokenize(vt_serve_engine *e, vt_serve_job *job) {
    vt_serve_error err;
    int32_t n_vocab = vt_batch_n_vocab(e->batch);
    for (size_t i = 0; i < job->req.n_ids; i++) {
        char buf[512];
        /* control tokens as their text, as llama-server's: /tokenize of the
         * result (control-token text parsed by default) gives the ids back */
        int32_t len = job->req.ids[i] < n_vocab ? vt_batch_token_text(e->batch, job->req.ids[i], buf, sizeof buf) : -1;
        if (len < 0) {
            char param[48];
            snprintf(param, sizeof param, "tokens[%zu]", i);
            vt_serve_fail(&err, 400, "invalid_request_error", param, "%s: %d is not a token of the model (%d tokens)",
                          param, job->req.ids[i], n_vocab);
            finish_failed(e, job, &err, false);
            return;
        }
        if (len > (int32_t)sizeof buf) len = (int32_t)sizeof buf;
        pthread_mutex_lock(&e->lock);
        bool ok = append_text(&job->text, &job->n_text, &job->text_cap, buf, (size_t)len);
        pthread_mutex_unlock(&e->lock);
        if (!ok) {
            vt_serve_fail(&err, 500, "server_error", NULL, "out of memory");
            finish_failed(e, job, &err, false);
            return;
        }
    }
    finish_done(e, job);
}

/* Tokenize a generate job's prompt and add it to the batch. */
static void start_generate(vt_serve_engine *e, vt_serve_job *job) {
    vt_serve_error err;
    char msg[256] = "";
    const char *param = job->req.kind == VT_SERVE_CHAT ? "messages" : "prompt";
    int32_t *owned = NULL;
    const int32_t *ids = job->req.ids;
    size_t n = job->req.n_ids;
    if (!ids) {
        const char *text = job->prompt_text ? job->prompt_text : job->req.prompt;
        if (vt_batch_tokenize(e->batch, text, strlen(text), job->add_bos, job->parse_special, &owned, &n, msg, sizeof msg) !=
            VT_OK) {
            vt_serve_fail(&err, 400, "invalid_request_error", param, "%s: %s", param, msg);
            finish_failed(e, job, &err, true);
            return;
        }
        ids = owned;
    }
    /* the batch API would refuse these too, in its own terms (request.ids):
     * here they are said in the request's */
    if (n == 0) {
        vt_serve_fail(&err, 400, "invalid_request_error", param, "%s: the prompt is empty (no tokens)", param);
        free(owned);
        finish_failed(e, job, &err, true);
        return;
    }
    const int32_t n_vocab = vt_batch_n_vocab(e->batch);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            char at[96];
            snprintf(at, sizeof at, "%s[%zu]", param, i); /* the param names the id, as the message does */
            vt_serve_fail(&err, 400, "invalid_request_error", at, "%s: token id %d is not a token of the model (ids 0..%d)",
                          at, ids[i], n_vocab - 1);
            free(owned);
            finish_failed(e, job, &err, true);
            return;
        }
    /* prompt and answer together fit the context (usage.total_tokens never
     * passes it): a prompt that fills it leaves no room for one token */
    if ((int64_t)n >= e->n_ctx) {
        vt_serve_fail(&err, 400, "invalid_request_error", param,
                      "%s: the prompt has %zu tokens but the context holds %lld, which must leave room for the answer "
                      "(start vt serve with a larger -c)",
                      param, n, (long long)e->n_ctx);
        err.code = "context_length_exceeded"; /* OpenAI's code for it */
        free(owned);
        finish_failed(e, job, &err, true);
        return;
    }
    int64_t room = e->n_ctx - (int64_t)n;
    int64_t max_new = job->req.max_tokens > 0 && job->req.max_tokens < room ? job->req.max_tokens : room;
    vt_batch_request r;
    vt_batch_request_init(&r);
    r.ids = ids;
    r.n_ids = n;
    r.max_new_tokens = max_new;
    r.temperature = job->req.temperature;
    r.top_k = job->req.top_k;
    r.top_p = job->req.top_p;
    r.min_p = job->req.min_p;
    r.seed = job->req.seed; /* given, or chosen at submission */
    r.presence_penalty = job->req.presence_penalty;
    r.frequency_penalty = job->req.frequency_penalty;
    /* the chat's end-of-turn ids are its end-of-generation ids: ignore_eos drops them too */
    if (job->req.kind == VT_SERVE_CHAT && e->cfg.n_chat_stop_ids > 0 && !job->req.ignore_eos) {
        r.stop_ids = e->chat_stop_ids;
        r.n_stop_ids = e->cfg.n_chat_stop_ids;
    }
    r.stop_strings = (const char *const *)job->req.stop;
    r.n_stop_strings = job->req.n_stop;
    r.logprobs = job->req.logprobs;
    r.top_logprobs = job->req.top_logprobs;
    r.grammar = job->req.grammar;
    r.ignore_eos = job->req.ignore_eos;
    uint64_t batch_ids[VT_SERVE_MAX_CHOICES];
    vt_status st = vt_batch_add_n(e->batch, &r, (size_t)job->n_choices, batch_ids, msg, sizeof msg);
    free(owned);
    if (st != VT_OK) {
        if (st == VT_ERR_UNSUPPORTED) {
            vt_serve_fail(&err, 503, "server_error", NULL, "the waiting queue is full; retry later");
            err.code = "queue_full";
        } else if (st == VT_ERR_NOMEM) {
            vt_serve_fail(&err, 500, "server_error", NULL, "%s", msg);
        } else {
            vt_serve_fail(&err, 400, "invalid_request_error", param, "%s: %s", param, msg);
        }
        finish_failed(e, job, &err, true);
        return;
    }
    for (int32_t i = 0; i < job->n_choices; i++) job->choices[i].batch_id = batch_ids[i];
    job->deadline = e->cfg.request_timeout > 0 ? job->t_submit + e->cfg.request_timeout : 0;
    job->t_last = job->t_submit;
    job->next = e->active;
    e->active = job;
    vt_serve_metrics_tokens(e->metrics, (int64_t)n, 0);
    pthread_mutex_lock(&e->lock);
    job->n_prompt = (int64_t)n;
    job->state = VT_JOB_RUNNING;
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&e->lock);
}

/* Read choice c's new tokens, text and logprobs into it (lock not held):
 * the tokens read, and whether it has finished (forced: end it so, when the
 * batch has not). */
/* Whether token id is one the job's request stops on: the chat's end-of-
 * turn ids, or the model's end-of-generation ids (none with ignore_eos). A
 * request that finished as "stop" on another token ended because its
 * grammar was complete, and that token is part of the answer. */
static bool is_stop_id(vt_serve_engine *e, const vt_serve_job *job, int32_t id) {
    if (job->req.ignore_eos) return false;
    if (job->req.kind == VT_SERVE_CHAT && e->cfg.n_chat_stop_ids > 0) {
        for (size_t i = 0; i < e->cfg.n_chat_stop_ids; i++)
            if (e->chat_stop_ids[i] == id) return true;
        return false;
    }
    int32_t ids[64];
    const size_t n = vt_batch_default_stop_ids(e->batch, ids, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        if (ids[i] == id) return true;
    return false;
}

static int64_t collect_choice(vt_serve_engine *e, vt_serve_job *job, vt_serve_choice *c, vt_finish forced,
                              bool *finished) {
    vt_batch_output out;
    char msg[256];
    if (vt_batch_read(e->batch, c->batch_id, &out, msg, sizeof msg) != VT_OK) {
        out = (vt_batch_output){0};
        out.finish = VT_FINISH_CANCELLED;
        out.n_generated = c->n_generated;
    }
    vt_batch_logprobs lp = {.struct_size = sizeof lp};
    bool have_lp = job->req.logprobs && out.n_tokens > 0 &&
                   vt_batch_read_logprobs(e->batch, c->batch_id, &lp, msg, sizeof msg) == VT_OK;
    /* a final stop id adds no text, so it has no place beside it */
    const bool stop_last = out.finish == VT_FINISH_STOP && have_lp && lp.n_tokens > 0 &&
                           is_stop_id(e, job, lp.sampled[lp.n_tokens - 1].id);
    const size_t n_lp = have_lp ? lp.n_tokens - stop_last : 0;
    vt_finish finish = out.finish != VT_FINISH_NONE ? out.finish : forced;
    pthread_mutex_lock(&e->lock);
    bool ok = append_text(&c->text, &c->n_text, &c->text_cap, out.text, out.n_text) &&
              (n_lp == 0 || vt_serve_logprobs_append(&c->logprobs, e->batch, &lp, n_lp));
    c->n_generated = out.n_generated;
    if (!ok) {
        vt_serve_fail(&job->error, 500, "server_error", NULL, "out of memory");
        finish = VT_FINISH_CANCELLED;
    }
    if (finish != VT_FINISH_NONE) c->finish = finish;
    /* a stop string's tokens, read before it matched, begin where the text ends */
    if (finish == VT_FINISH_STOP_STRING) vt_serve_logprobs_clamp(&c->logprobs, (int64_t)c->n_text);
    pthread_mutex_unlock(&e->lock);
    if (!ok) vt_batch_cancel(e->batch, c->batch_id, msg, sizeof msg);
    *finished = finish != VT_FINISH_NONE;
    return (int64_t)out.n_tokens;
}

/* Read a running job's choices; true when every one has finished (the job
 * is then removed from the batch and released). */
static bool collect(vt_serve_engine *e, vt_serve_job *job, vt_finish forced) {
    int64_t n_new = 0;
    bool all_done = true;
    for (int32_t i = 0; i < job->n_choices; i++) {
        vt_serve_choice *c = &job->choices[i];
        bool finished = c->finish != VT_FINISH_NONE; /* read only by this thread's writes */
        if (!finished) n_new += collect_choice(e, job, c, forced, &finished);
        all_done &= finished;
    }
    double now = vt_serve_now();
    if (n_new > 0) {
        if (!job->got_first) {
            vt_serve_metrics_ttft(e->metrics, now - job->t_submit);
            if (n_new > 1) vt_serve_metrics_itl(e->metrics, 0, n_new - 1);
        } else {
            vt_serve_metrics_itl(e->metrics, now - job->t_last, n_new);
        }
        job->got_first = true;
        job->t_last = now;
        vt_serve_metrics_tokens(e->metrics, 0, n_new);
    }
    /* the first choice computed the prompt: the others forked from it */
    const int64_t cached = vt_batch_cached_tokens(e->batch, job->choices[0].batch_id);
    pthread_mutex_lock(&e->lock);
    int64_t total = 0;
    for (int32_t i = 0; i < job->n_choices; i++) total += job->choices[i].n_generated;
    job->n_generated = total;
    if (cached >= 0) job->n_cached = cached;
    job->n_updates++;
    if (all_done) {
        job->state = VT_JOB_DONE;
        e->n_in_flight--;
    }
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&e->lock);
    if (!all_done) return false;
    char msg[256];
    for (int32_t i = 0; i < job->n_choices; i++) vt_batch_remove(e->batch, job->choices[i].batch_id, msg, sizeof msg);
    vt_serve_job_release(e, job);
    return true;
}

/* End every choice of job now (they are read by the next collect). */
static void cancel_job(vt_serve_engine *e, vt_serve_job *job) {
    char msg[256];
    for (int32_t i = 0; i < job->n_choices; i++) vt_batch_cancel(e->batch, job->choices[i].batch_id, msg, sizeof msg);
}

/* Cancel what the clients left, what ran past its time, or everything. */
static void cancel_pass(vt_serve_engine *e) {
    double now = vt_serve_now();
    pthread_mutex_lock(&e->lock);
    bool all = e->cancel_all;
    pthread_mutex_unlock(&e->lock);
    for (vt_serve_job **p = &e->active; *p;) {
        vt_serve_job *job = *p;
        pthread_mutex_lock(&e->lock);
        bool abandoned = job->abandoned;
        bool late = all || (job->deadline > 0 && now > job->deadline);
        if (late && !abandoned) job->timed_out = true;
        /* shut down before its first token: not a short answer but no
         * answer. Not streamed, it is a 503 its client (or load balancer)
         * can retry elsewhere; a stream has sent its 200 already and ends
         * with this error as its last event. */
        if (all && !abandoned && job->n_generated == 0) {
            vt_serve_fail(&job->error, 503, "server_error", NULL,
                          "the server shut down before this request produced a token; retry");
            job->error.code = "shutting_down";
        }
        /* Out of time before its first token (queued behind others, or a
         * prefill longer than the limit): an empty "length" answer would
         * pass for a success. It is 503, not 408: the request arrived in
         * full and on time, it was the server too busy to start it, and 503
         * with Retry-After is what clients and load balancers retry. */
        bool never_started = late && !all && !abandoned && job->n_generated == 0;
        if (never_started) {
            vt_serve_fail(&job->error, 503, "server_error", NULL,
                          "the request produced no token within the time limit of %g s (the server is busy); retry",
                          e->cfg.request_timeout);
            job->error.code = "timeout";
        }
        pthread_mutex_unlock(&e->lock);
        if (abandoned || late) {
            cancel_job(e, job);
            if (never_started)
                fprintf(stderr, "vt serve: request reached the time limit of %g s before its first token: 503\n",
                        e->cfg.request_timeout);
            else if (late && !abandoned && !all)
                fprintf(stderr, "vt serve: request exceeded the time limit of %g s after %lld tokens: ended as length\n",
                        e->cfg.request_timeout, (long long)job->n_generated);
        }
        vt_serve_job *next = job->next; /* collect may free a finished job */
        if ((abandoned || late) && collect(e, job, VT_FINISH_CANCELLED)) *p = next;
        else p = &job->next;
    }
}

/* Read the batch's counts and publish; dequeued: a generate job has just
 * left the queue for the batch (or failed), so it moves from one count to
 * the other in one update and is never missing from both. */
static void publish_gauges(vt_serve_engine *e, bool dequeued) {
    vt_batch_stats s;
    vt_batch_get_stats(e->batch, &s);
    vt_batch_cache_stats c = {.struct_size = sizeof c};
    vt_batch_get_cache_stats(e->batch, &c);
    vt_serve_metrics_prefix_cache(e->metrics, c.cached_blocks, c.hit_tokens, c.query_tokens);
    pthread_mutex_lock(&e->lock);
    if (dequeued) e->n_queued_generate--;
    e->batch_stats = s;
    /* Running and waiting as the next step will have them, once it has
     * admitted what the scheduler lets in (sequences, token budget, KV
     * blocks): read before a step, a request just added is about to run (its
     * prefill may take seconds), not to wait, and must neither fill the
     * queue nor show as waiting. */
    const int32_t admitted = vt_batch_n_admit_next(e->batch);
    e->n_batch_running = s.n_running + admitted;
    e->n_batch_waiting = s.n_waiting - admitted;
    publish_locked(e);
    pthread_mutex_unlock(&e->lock);
}

static void *engine_main(void *arg) {
    vt_serve_engine *e = arg;
    publish_gauges(e, false);
    pthread_mutex_lock(&e->lock);
    for (;;) {
        while (e->queue_head) {
            vt_serve_job *job = e->queue_head;
            e->queue_head = job->next;
            if (!e->queue_head) e->queue_tail = NULL;
            bool generate = job->req.kind == VT_SERVE_CHAT || job->req.kind == VT_SERVE_COMPLETION;
            bool abandoned = job->abandoned;
            pthread_mutex_unlock(&e->lock);
            if (abandoned && generate) {
                vt_serve_error err;
                vt_serve_fail(&err, 499, "server_error", NULL, "the client left");
                finish_failed(e, job, &err, true);
            } else if (job->req.kind == VT_SERVE_TOKENIZE) {
                run_tokenize(e, job);
            } else if (job->req.kind == VT_SERVE_DETOKENIZE) {
                run_detokenize(e, job);
            } else {
                start_generate(e, job);
            }
            if (generate) publish_gauges(e, true);
            pthread_mutex_lock(&e->lock);
        }
        if (!e->active) {
            pthread_mutex_unlock(&e->lock);
            publish_gauges(e, false);
            pthread_mutex_lock(&e->lock);
            if (e->stopping && !e->queue_head) break;
            if (!e->queue_head) pthread_cond_wait(&e->wake, &e->lock);
            continue;
        }
        pthread_mutex_unlock(&e->lock);
        cancel_pass(e);
        if (e->active) {
            char msg[256];
            int32_t n_seqs = 0;
            vt_status st = vt_batch_step(e->batch, &n_seqs, msg, sizeof msg);
            if (st != VT_OK) {
                /* A failed step advanced nothing; end every request rather than spin on it. */
                fprintf(stderr, "vt serve: step failed: %s; ending the running requests\n", msg);
                for (vt_serve_job *job = e->active; job; job = job->next) {
                    pthread_mutex_lock(&e->lock);
                    vt_serve_fail(&job->error, 500, "server_error", NULL, "the engine failed: %s", msg);
                    pthread_mutex_unlock(&e->lock);
                    cancel_job(e, job);
                }
            }
            for (vt_serve_job **p = &e->active; *p;) {
                vt_serve_job *job = *p, *next = job->next; /* collect may free a finished job */
                if (collect(e, job, VT_FINISH_NONE)) *p = next;
                else p = &job->next;
            }
        }
        publish_gauges(e, false);
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

vt_serve_engine *vt_serve_engine_start(vt_batch *b, const vt_serve_engine_config *cfg, vt_serve_metrics *metrics) {
    vt_serve_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->batch = b;
    e->cfg = *cfg;
    e->metrics = metrics;
    e->next_seed = cfg->seed;
    e->n_ctx = vt_batch_n_ctx(b);
    e->cfg.chat_stop_ids = NULL;
    if (cfg->n_chat_stop_ids > 0) {
        e->chat_stop_ids = malloc(cfg->n_chat_stop_ids * sizeof *e->chat_stop_ids);
        if (!e->chat_stop_ids) {
            free(e);
            return NULL;
        }
        memcpy(e->chat_stop_ids, cfg->chat_stop_ids, cfg->n_chat_stop_ids * sizeof *e->chat_stop_ids);
    }
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        pthread_cond_destroy(&e->wake);
        pthread_mutex_destroy(&e->lock);
        free(e->chat_stop_ids);
        free(e);
        return NULL;
    }
    return e;
}

void vt_serve_engine_refuse_new(vt_serve_engine *e) {
    pthread_mutex_lock(&e->lock);
    e->refuse_new = true;
    pthread_mutex_unlock(&e->lock);
}

int vt_serve_engine_in_flight(vt_serve_engine *e) {
    pthread_mutex_lock(&e->lock);
    int n = e->n_in_flight;
    pthread_mutex_unlock(&e->lock);
    return n;
}

void vt_serve_engine_cancel_all(vt_serve_engine *e) {
    pthread_mutex_lock(&e->lock);
    e->cancel_all = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
}

void vt_serve_engine_stop(vt_serve_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->lock);
    e->stopping = e->refuse_new = e->cancel_all = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->lock);
    free(e->chat_stop_ids);
    free(e);
}

int32_t vt_serve_engine_token_text(const vt_serve_engine *e, int32_t id, char *buf, size_t cap) {
    return id >= 0 && id < vt_batch_n_vocab(e->batch) ? vt_batch_token_text(e->batch, id, buf, cap) : -1;
}
