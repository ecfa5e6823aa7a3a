/* batch_api.c — the batching half of include/vt/vt.h: a scheduler
 * (scheduler.h) over an engine shaped for runtime.max_seqs sequences, the
 * same engine path as vt_session. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api_options.h"
#include "engine.h"
#include "scheduler.h"
#include "vt/vt.h"

struct vt_batch {
    vt_model *model;
    vt_engine *engine;
    vt_sched *sched;
    const int32_t *eog; /* the model's end-of-generation ids (the tokenizer's): default stop ids */
    int32_t n_eog;
};

/* The tokenizer's end-of-generation ids (sorted, its own array); none
 * without a tokenizer. */
static void take_eog(vt_batch *b) {
    size_t n = 0;
    b->eog = b->model->tokenizer ? vt_tokenizer_eog_ids(b->model->tokenizer, &n) : NULL;
    b->n_eog = (int32_t)n;
}

vt_status vt_batch_open(const char *model_path, const vt_session_options *options, vt_batch **out, char *err,
                        size_t err_size) {
    vt_error e = {0};
    *out = NULL;
    if (!model_path) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_open: no model path"}, err, err_size);
    vt_options opt;
    vt_status st = vt_api_options(options, &opt, NULL, &e); /* a batch returns tokens, never logits */
    vt_batch *b = st == VT_OK ? calloc(1, sizeof *b) : NULL;
    if (st == VT_OK && !b) st = vt_fail(&e, VT_ERR_NOMEM, "out of memory");
    if (st == VT_OK) st = vt_model_load(model_path, &b->model, &e);
    if (st == VT_OK) take_eog(b);
    if (st == VT_OK) {
        const vt_engine_shape shape = {false, opt.max_seqs};
        st = vt_engine_create_shaped(&opt, b->model, &shape, &b->engine, &e);
    }
    if (st == VT_OK && opt.token_budget > b->engine->prefill->max_tokens)
        st = vt_fail(&e, VT_ERR_INVALID,
                     "runtime.token_budget = %d: one forward takes at most %lld tokens (runtime.batch_size, capped "
                     "by kv_cache.ctx_size); accepted values are 0 or 1..%lld",
                     opt.token_budget, (long long)b->engine->prefill->max_tokens,
                     (long long)b->engine->prefill->max_tokens);
    if (st == VT_OK) {
        const vt_sched_options so = {opt.max_waiting, opt.token_budget};
        st = vt_sched_create(b->engine, &so, &b->sched, &e);
    }
    if (st != VT_OK) {
        vt_batch_close(b);
        return vt_api_report(&e, err, err_size);
    }
    *out = b;
    return VT_OK;
}

void vt_batch_close(vt_batch *b) {
    if (!b) return;
    vt_sched_free(b->sched);
    vt_engine_free(b->engine);
    vt_model_free(b->model);
    free(b);
}

int32_t vt_batch_n_vocab(const vt_batch *b) { return b->model->hp.n_vocab; }

int32_t vt_batch_token_bytes(const vt_batch *b, int32_t id, char *buf, size_t cap) {
    if (!b->model->tokenizer) return -1;
    return vt_token_to_bytes(b->model->tokenizer, id, false, buf, cap);
}

size_t vt_batch_default_stop_ids(const vt_batch *b, int32_t *ids, size_t cap) {
    for (size_t i = 0; ids && i < cap && i < (size_t)b->n_eog; i++) ids[i] = b->eog[i];
    return (size_t)b->n_eog;
}

void vt_batch_request_init(vt_batch_request *r) {
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
    r->max_new_tokens = 16;
    r->top_p = 1.0f;
}

/* The public field names, checked before the scheduler sees the request
 * (its own messages name its internal fields). */
static vt_status check_public_request(const vt_batch *b, const vt_batch_request *r, vt_error *e) {
    if (r->struct_size < sizeof *r)
        return vt_fail(e, VT_ERR_INVALID, "request.struct_size: %u (expected sizeof(vt_batch_request), %zu)",
                       r->struct_size, sizeof *r);
    if (r->ids) {
        if (r->n_ids == 0) return vt_fail(e, VT_ERR_INVALID, "request.ids: empty prompt (n_ids 0)");
        const int32_t V = b->model->hp.n_vocab;
        for (size_t i = 0; i < r->n_ids; i++)
            if (r->ids[i] < 0 || r->ids[i] >= V)
                return vt_fail(e, VT_ERR_INVALID, "request.ids[%zu]: token id %d is outside the vocabulary (0..%d)", i,
                               r->ids[i], V - 1);
    } else if (!r->text || !r->text[0]) {
        return vt_fail(e, VT_ERR_INVALID, "request.text: empty prompt (and no request.ids)");
    }
    if (r->max_new_tokens < 1)
        return vt_fail(e, VT_ERR_INVALID, "request.max_new_tokens: %lld (accepted: >= 1)",
                       (long long)r->max_new_tokens);
    if (!isfinite(r->temperature) || r->temperature < 0)
        return vt_fail(e, VT_ERR_INVALID, "request.temperature: %g (accepted: finite numbers >= 0, 0 = greedy)",
                       (double)r->temperature);
    if (r->top_k < 0) return vt_fail(e, VT_ERR_INVALID, "request.top_k: %d (accepted: >= 0, 0 = off)", r->top_k);
    if (!(r->top_p > 0 && r->top_p <= 1))
        return vt_fail(e, VT_ERR_INVALID, "request.top_p: %g (accepted: (0, 1], 1 = off)", (double)r->top_p);
    if (!(r->min_p >= 0 && r->min_p <= 1))
        return vt_fail(e, VT_ERR_INVALID, "request.min_p: %g (accepted: [0, 1], 0 = off)", (double)r->min_p);
    if (r->n_stop_ids > 0 && !r->stop_ids)
        return vt_fail(e, VT_ERR_INVALID, "request.stop_ids: NULL with n_stop_ids %zu", r->n_stop_ids);
    if (r->n_stop_ids > INT32_MAX)
        return vt_fail(e, VT_ERR_INVALID, "request.n_stop_ids: %zu (accepted: <= %d)", r->n_stop_ids, INT32_MAX);
    const int32_t V = b->model->hp.n_vocab;
    for (size_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] < 0 || r->stop_ids[i] >= V)
            return vt_fail(e, VT_ERR_INVALID, "request.stop_ids[%zu]: token id %d is outside the vocabulary (0..%d)",
                           i, r->stop_ids[i], V - 1);
    return VT_OK;
}

vt_status vt_batch_add(vt_batch *b, const vt_batch_request *r, uint64_t *id, char *err, size_t err_size) {
    vt_error e = {0};
    *id = 0;
    if (!r) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_add: no request"}, err, err_size);
    vt_status st = check_public_request(b, r, &e);
    if (st != VT_OK) return vt_api_report(&e, err, err_size);
    int32_t *text_ids = NULL;
    size_t n_prompt = r->n_ids;
    const int32_t *prompt = r->ids;
    if (!prompt) {
        const vt_tokenizer *t = b->model->tokenizer;
        if (!t) {
            vt_fail(&e, VT_ERR_UNSUPPORTED, "request.text: this model's tokenizer cannot be used: %s",
                    b->model->tokenizer_error);
            return vt_api_report(&e, err, err_size);
        }
        st = vt_tokenize(t, r->text, strlen(r->text), vt_tokenizer_add_bos(t), false, &text_ids, &n_prompt, &e);
        if (st == VT_OK && n_prompt == 0) st = vt_fail(&e, VT_ERR_INVALID, "request.text: no tokens");
        if (st != VT_OK) {
            free(text_ids);
            return vt_api_report(&e, err, err_size);
        }
        prompt = text_ids;
    }
    const vt_sched_request q = {
        .prompt = prompt,
        .n_prompt = (int64_t)n_prompt,
        .max_new_tokens = r->max_new_tokens,
        .sampler = {r->temperature, r->top_k, r->top_p, r->min_p, r->seed},
        .stop_ids = r->n_stop_ids ? r->stop_ids : b->eog,
        .n_stop_ids = r->n_stop_ids ? (int32_t)r->n_stop_ids : b->n_eog,
    };
    st = vt_sched_add(b->sched, &q, id, &e);
    free(text_ids);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

vt_status vt_batch_step(vt_batch *b, int32_t *n_seqs, char *err, size_t err_size) {
    vt_error e = {0};
    vt_sched_step_info info = {0};
    vt_status st = vt_sched_step(b->sched, &info, &e);
    if (n_seqs) *n_seqs = st == VT_OK ? info.n_entries : 0;
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

static vt_finish public_finish(vt_sched_finish f) {
    switch (f) {
    case VT_SCHED_FINISH_LENGTH: return VT_FINISH_LENGTH;
    case VT_SCHED_FINISH_STOP: return VT_FINISH_STOP;
    case VT_SCHED_FINISH_CANCELLED: return VT_FINISH_CANCELLED;
    case VT_SCHED_FINISH_NONE: break;
    }
    return VT_FINISH_NONE;
}

vt_status vt_batch_read(vt_batch *b, uint64_t id, vt_batch_output *out, char *err, size_t err_size) {
    vt_error e = {0};
    vt_sched_output o;
    memset(out, 0, sizeof *out);
    vt_status st = vt_sched_read(b->sched, id, &o, &e);
    if (st != VT_OK) return vt_api_report(&e, err, err_size);
    out->tokens = o.tokens;
    out->n_tokens = (size_t)o.n_tokens;
    out->n_generated = o.n_generated;
    out->finish = public_finish(o.finish);
    return VT_OK;
}

vt_status vt_batch_cancel(vt_batch *b, uint64_t id, char *err, size_t err_size) {
    vt_error e = {0};
    vt_status st = vt_sched_cancel(b->sched, id, &e);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

vt_status vt_batch_remove(vt_batch *b, uint64_t id, char *err, size_t err_size) {
    vt_error e = {0};
    vt_status st = vt_sched_remove(b->sched, id, &e);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

void vt_batch_get_stats(const vt_batch *b, vt_batch_stats *out) {
    const vt_sched_stats s = vt_sched_get_stats(b->sched);
    out->n_waiting = vt_sched_n_waiting(b->sched);
    out->n_running = vt_sched_n_running(b->sched);
    out->free_kv_blocks = vt_engine_free_blocks(b->engine);
    out->n_steps = s.n_steps;
    out->n_preemptions = s.n_preemptions;
}
