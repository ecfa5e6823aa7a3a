/* batch_api.c — the batching half of include/vt/vt.h: a scheduler
 * (scheduler.h) over an engine shaped for runtime.max_seqs sequences, the
 * same engine path as vt_session. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "api_options.h"
#include "batch_open.h"
#include "engine.h"
#include "grammar.h"
#include "sampling_rules.h"
#include "scheduler.h"
#include "text_stream.h"
#include "vt/vt.h"

/* A NUL-terminated copy of one GGUF string value (GGUF strings point into
 * the mapping, unterminated). */
typedef struct meta_string {
    char *key;
    char *value;
} meta_string;

struct vt_batch {
    vt_model *model;
    vt_engine *engine;
    vt_sched *sched;
    const int32_t *eog; /* the model's end-of-generation ids (the tokenizer's): default stop ids */
    int32_t n_eog;
    meta_string *meta; /* every string of the metadata, for vt_batch_meta_string */
    int64_t n_meta;
};

/* The tokenizer's end-of-generation ids (sorted, its own array); none
 * without a tokenizer. */
static void take_eog(vt_batch *b) {
    size_t n = 0;
    b->eog = b->model->tokenizer ? vt_tokenizer_eog_ids(b->model->tokenizer, &n) : NULL;
    b->n_eog = (int32_t)n;
}

static char *copy_str(vt_gguf_str s) {
    char *c = malloc(s.len + 1);
    if (c) {
        memcpy(c, s.data, s.len);
        c[s.len] = 0;
    }
    return c;
}

/* Copies of the metadata's string values, taken once at open so that
 * vt_batch_meta_string needs no allocation and no mutable batch (the model's
 * name and chat template: a few KiB). */
static vt_status copy_meta_strings(vt_batch *b, vt_error *e) {
    const vt_gguf *g = b->model->gguf;
    const int64_t n = vt_gguf_n_kv(g);
    b->meta = calloc(n > 0 ? (size_t)n : 1, sizeof *b->meta);
    if (!b->meta) return vt_fail(e, VT_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const vt_gguf_kv *kv = vt_gguf_kv_at(g, i);
        if (kv->value.type != VT_GGUF_STRING) continue;
        meta_string *m = &b->meta[b->n_meta++];
        m->key = copy_str(kv->key);
        m->value = copy_str(kv->value.v.str);
        if (!m->key || !m->value) return vt_fail(e, VT_ERR_NOMEM, "out of memory copying metadata strings");
    }
    return VT_OK;
}

vt_status vt_batch_open(const char *model_path, const vt_session_options *options, vt_batch **out, char *err,
                        size_t err_size) {
    vt_error e = {0};
    if (!out) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_open: NULL out"}, err, err_size);
    *out = NULL;
    if (!model_path) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_open: no model path"}, err, err_size);
    vt_options opt;
    if (vt_api_options(options, &opt, NULL, &e) != VT_OK) /* a batch returns tokens, never logits */
        return vt_api_report(&e, err, err_size);
    return vt_batch_open_resolved(model_path, &opt, out, err, err_size);
}

vt_status vt_batch_open_resolved(const char *model_path, const vt_options *options, vt_batch **out, char *err,
                                 size_t err_size) {
    vt_error e = {0};
    *out = NULL;
    if (!model_path) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_open: no model path"}, err, err_size);
    const vt_options *opt = options;
    vt_status st = VT_OK;
    vt_batch *b = calloc(1, sizeof *b);
    if (!b) st = vt_fail(&e, VT_ERR_NOMEM, "out of memory");
    if (st == VT_OK) st = vt_model_load(model_path, &b->model, &e);
    if (st == VT_OK) take_eog(b);
    if (st == VT_OK) st = copy_meta_strings(b, &e);
    if (st == VT_OK) {
        const vt_engine_shape shape = {false, opt->max_seqs, false};
        st = vt_engine_create_shaped(opt, b->model, &shape, &b->engine, &e);
    }
    if (st == VT_OK) {
        const vt_sched_options so = vt_sched_options_of(opt);
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
    for (int64_t i = 0; i < b->n_meta; i++) {
        free(b->meta[i].key);
        free(b->meta[i].value);
    }
    free(b->meta);
    free(b);
}

int32_t vt_batch_n_vocab(const vt_batch *b) { return b ? b->model->hp.n_vocab : 0; }

void vt_batch_explain(const vt_batch *b, FILE *f) {
    if (b && f) vt_engine_explain(b->engine, f);
}

int32_t vt_batch_token_bytes(const vt_batch *b, int32_t id, char *buf, size_t cap) {
    if (!b || !b->model->tokenizer) return -1;
    return vt_token_to_bytes(b->model->tokenizer, id, false, buf, cap);
}

int32_t vt_batch_token_text(const vt_batch *b, int32_t id, char *buf, size_t cap) {
    if (!b || !b->model->tokenizer) return -1;
    return vt_token_to_bytes(b->model->tokenizer, id, true, buf, cap);
}

size_t vt_batch_default_stop_ids(const vt_batch *b, int32_t *ids, size_t cap) {
    if (!b) return 0;
    for (size_t i = 0; ids && i < cap && i < (size_t)b->n_eog; i++) ids[i] = b->eog[i];
    return (size_t)b->n_eog;
}

void vt_batch_request_init(vt_batch_request *r) {
    if (!r) return;
    memset(r, 0, sizeof *r);
    r->struct_size = sizeof *r;
    r->max_new_tokens = 16;
    /* every filter off: an API request asks for what it wants */
    r->temperature = (float)vt_sampling_rule_of(VT_KNOB_TEMPERATURE)->off;
    r->top_k = (int32_t)vt_sampling_rule_of(VT_KNOB_TOP_K)->off;
    r->top_p = (float)vt_sampling_rule_of(VT_KNOB_TOP_P)->off;
    r->min_p = (float)vt_sampling_rule_of(VT_KNOB_MIN_P)->off;
}

/* The size of a request before the fields appended after the first release
 * (parse_special on): a caller built then passes this struct_size. */
#define REQUEST_SIZE_V1 offsetof(vt_batch_request, parse_special)

/* The caller's request as this library's struct: the fields its struct_size
 * covers, defaults for the rest. */
static vt_status read_request(const vt_batch_request *r, vt_batch_request *full, vt_error *e) {
    if (r->struct_size < REQUEST_SIZE_V1 || r->struct_size > sizeof *r)
        return vt_fail(e, VT_ERR_INVALID,
                       "request.struct_size: %u (expected sizeof(vt_batch_request), %zu; %zu for a caller built "
                       "before parse_special)",
                       r->struct_size, sizeof *r, (size_t)REQUEST_SIZE_V1);
    vt_batch_request_init(full);
    memcpy(full, r, REQUEST_SIZE_V1);
#define TAKE(field)                                                                                                   \
    if (offsetof(vt_batch_request, field) + sizeof r->field <= r->struct_size) full->field = r->field
    TAKE(parse_special);
    TAKE(presence_penalty);
    TAKE(frequency_penalty);
    TAKE(stop_strings);
    TAKE(n_stop_strings);
    TAKE(logprobs);
    TAKE(top_logprobs);
    TAKE(grammar);
    TAKE(ignore_eos);
#undef TAKE
    full->struct_size = sizeof *full;
    return VT_OK;
}

/* The request's sampling fields by the rules every entry point shares. */
static vt_status check_sampling(const vt_batch_request *r, vt_error *e) {
    const double values[VT_KNOB_COUNT] = {
        [VT_KNOB_TEMPERATURE] = r->temperature,           [VT_KNOB_TOP_K] = r->top_k,
        [VT_KNOB_TOP_P] = r->top_p,                       [VT_KNOB_MIN_P] = r->min_p,
        [VT_KNOB_PRESENCE_PENALTY] = r->presence_penalty, [VT_KNOB_FREQUENCY_PENALTY] = r->frequency_penalty,
    };
    for (int k = 0; k < VT_KNOB_COUNT; k++) {
        char name[48];
        snprintf(name, sizeof name, "request.%s", vt_sampling_rule_of(k)->api_name);
        vt_status st = vt_sampling_check(k, values[k], name, e);
        if (st != VT_OK) return st;
    }
    return VT_OK;
}

/* The public field names, checked before the scheduler sees the request
 * (its own messages name its internal fields). */
static vt_status check_public_request(const vt_batch *b, const vt_batch_request *r, vt_error *e) {
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
    vt_status st = check_sampling(r, e);
    if (st != VT_OK) return st;
    if (r->n_stop_ids > 0 && !r->stop_ids)
        return vt_fail(e, VT_ERR_INVALID, "request.stop_ids: NULL with n_stop_ids %zu", r->n_stop_ids);
    if (r->n_stop_ids > INT32_MAX)
        return vt_fail(e, VT_ERR_INVALID, "request.n_stop_ids: %zu (accepted: <= %d)", r->n_stop_ids, INT32_MAX);
    const int32_t V = b->model->hp.n_vocab;
    for (size_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] < 0 || r->stop_ids[i] >= V)
            return vt_fail(e, VT_ERR_INVALID, "request.stop_ids[%zu]: token id %d is outside the vocabulary (0..%d)",
                           i, r->stop_ids[i], V - 1);
    if (r->n_stop_strings > VT_TEXT_STREAM_MAX_STOPS)
        return vt_fail(e, VT_ERR_INVALID, "request.n_stop_strings: %zu (accepted: 0..%d)", r->n_stop_strings,
                       VT_TEXT_STREAM_MAX_STOPS);
    if (r->n_stop_strings > 0 && !r->stop_strings)
        return vt_fail(e, VT_ERR_INVALID, "request.stop_strings: NULL with n_stop_strings %zu", r->n_stop_strings);
    for (size_t i = 0; i < r->n_stop_strings; i++) {
        const size_t len = r->stop_strings[i] ? strnlen(r->stop_strings[i], VT_TEXT_STREAM_MAX_STOP_LEN + 1) : 0;
        if (len == 0 || len > VT_TEXT_STREAM_MAX_STOP_LEN)
            return vt_fail(e, VT_ERR_INVALID, "request.stop_strings[%zu]: %s (accepted: 1..%d bytes)", i,
                           !r->stop_strings[i] ? "NULL" : len == 0 ? "empty" : "longer than that",
                           VT_TEXT_STREAM_MAX_STOP_LEN);
    }
    if (r->logprobs && (r->top_logprobs < 0 || r->top_logprobs > VT_BATCH_MAX_TOP_LOGPROBS))
        return vt_fail(e, VT_ERR_INVALID, "request.top_logprobs: %d (accepted: 0..%d)", r->top_logprobs,
                       VT_BATCH_MAX_TOP_LOGPROBS);
    if (r->n_stop_strings > 0 && !b->model->tokenizer)
        return vt_fail(e, VT_ERR_UNSUPPORTED, "request.stop_strings: this model's tokenizer cannot be used: %s",
                       b->model->tokenizer_error);
    if (r->grammar && !b->model->tokenizer)
        return vt_fail(e, VT_ERR_UNSUPPORTED, "request.grammar: this model's tokenizer cannot be used: %s",
                       b->model->tokenizer_error);
    return VT_OK;
}

vt_status vt_batch_add(vt_batch *b, const vt_batch_request *r, uint64_t *id, char *err, size_t err_size) {
    return vt_batch_add_n(b, r, 1, id, err, err_size);
}

vt_status vt_batch_add_n(vt_batch *b, const vt_batch_request *r, size_t n, uint64_t *ids, char *err,
                         size_t err_size) {
    vt_error e = {0};
    if (!b) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_add: NULL handle"}, err, err_size);
    if (!ids) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_add: no ids"}, err, err_size);
    for (size_t i = 0; i < n && i < VT_BATCH_MAX_CHOICES; i++) ids[i] = 0;
    if (!r) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_add: no request"}, err, err_size);
    if (n < 1 || n > VT_BATCH_MAX_CHOICES) {
        vt_fail(&e, VT_ERR_INVALID, "n: %zu choices (accepted: 1..%d)", n, VT_BATCH_MAX_CHOICES);
        return vt_api_report(&e, err, err_size);
    }
    vt_batch_request full;
    vt_status st = read_request(r, &full, &e);
    if (st != VT_OK) return vt_api_report(&e, err, err_size);
    r = &full;
    st = check_public_request(b, r, &e);
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
        st = vt_tokenize(t, r->text, strlen(r->text), vt_tokenizer_add_bos(t), r->parse_special, &text_ids, &n_prompt, &e);
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
        .stop_ids = r->n_stop_ids ? r->stop_ids : r->ignore_eos ? NULL : b->eog,
        .n_stop_ids = r->n_stop_ids ? (int32_t)r->n_stop_ids : r->ignore_eos ? 0 : b->n_eog,
        .presence_penalty = r->presence_penalty,
        .frequency_penalty = r->frequency_penalty,
        .stop_strings = r->stop_strings,
        .n_stop_strings = (int32_t)r->n_stop_strings,
        .logprobs = r->logprobs,
        .top_logprobs = r->top_logprobs,
        .grammar = r->grammar,
    };
    st = vt_sched_add_n(b->sched, &q, (int32_t)n, ids, &e);
    free(text_ids);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

vt_status vt_batch_step(vt_batch *b, int32_t *n_seqs, char *err, size_t err_size) {
    vt_error e = {0};
    if (!b) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_step: NULL handle"}, err, err_size);
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
    case VT_SCHED_FINISH_STOP_STRING: return VT_FINISH_STOP_STRING;
    case VT_SCHED_FINISH_NONE: break;
    }
    return VT_FINISH_NONE;
}

vt_status vt_batch_read(vt_batch *b, uint64_t id, vt_batch_output *out, char *err, size_t err_size) {
    vt_error e = {0};
    if (!b || !out) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_read: NULL argument"}, err, err_size);
    vt_sched_output o;
    memset(out, 0, sizeof *out);
    vt_status st = vt_sched_read(b->sched, id, &o, &e);
    if (st != VT_OK) return vt_api_report(&e, err, err_size);
    out->tokens = o.tokens;
    out->n_tokens = (size_t)o.n_tokens;
    out->n_generated = o.n_generated;
    out->finish = public_finish(o.finish);
    out->text = o.text;
    out->n_text = o.n_text;
    return VT_OK;
}

vt_status vt_batch_read_logprobs(vt_batch *b, uint64_t id, vt_batch_logprobs *out, char *err, size_t err_size) {
    vt_error e = {0};
    if (!b) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_read_logprobs: NULL handle"}, err, err_size);
    if (!out || out->struct_size == 0)
        return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_read_logprobs: out->struct_size is not set"}, err,
                             err_size);
    vt_sched_logprobs o;
    vt_status st = vt_sched_read_logprobs(b->sched, id, &o, &e);
    if (st != VT_OK) return vt_api_report(&e, err, err_size);
    vt_batch_logprobs full = {
        .struct_size = out->struct_size,
        .n_tokens = (size_t)o.n_tokens,
        .sampled = o.sampled,
        .top = o.top,
        .n_top = o.n_top,
        .text_offset = o.text_offset,
    };
    memcpy(out, &full, out->struct_size < sizeof full ? out->struct_size : sizeof full);
    return VT_OK;
}

vt_status vt_batch_cancel(vt_batch *b, uint64_t id, char *err, size_t err_size) {
    vt_error e = {0};
    if (!b) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_cancel: NULL handle"}, err, err_size);
    vt_status st = vt_sched_cancel(b->sched, id, &e);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

vt_status vt_batch_remove(vt_batch *b, uint64_t id, char *err, size_t err_size) {
    vt_error e = {0};
    if (!b) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_remove: NULL handle"}, err, err_size);
    vt_status st = vt_sched_remove(b->sched, id, &e);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

void vt_batch_get_stats(const vt_batch *b, vt_batch_stats *out) {
    if (!out) return;
    if (!b) {
        memset(out, 0, sizeof *out);
        return;
    }
    const vt_sched_stats s = vt_sched_get_stats(b->sched);
    out->n_waiting = vt_sched_n_waiting_requests(b->sched);
    out->n_running = vt_sched_n_running_requests(b->sched);
    out->free_kv_blocks = vt_engine_free_blocks(b->engine);
    out->n_steps = s.n_steps;
    out->n_preemptions = s.n_preemptions;
    out->total_kv_blocks = vt_engine_total_blocks(b->engine);
}

int32_t vt_batch_n_admit_next(const vt_batch *b) { return b ? vt_sched_n_admit_next_requests(b->sched) : 0; }

vt_status vt_batch_tokenize(const vt_batch *b, const char *text, size_t len, bool add_bos, bool parse_special,
                            int32_t **ids, size_t *n_ids, char *err, size_t err_size) {
    vt_error e = {0};
    if (!b || !ids || !n_ids) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_tokenize: NULL argument"}, err, err_size);
    *ids = NULL;
    *n_ids = 0;
    if (!b->model->tokenizer) {
        vt_fail(&e, VT_ERR_UNSUPPORTED, "this model's tokenizer cannot be used: %s", b->model->tokenizer_error);
        return vt_api_report(&e, err, err_size);
    }
    if (!text && len > 0) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_batch_tokenize: no text"}, err, err_size);
    vt_status st = vt_tokenize(b->model->tokenizer, text ? text : "", len,
                               add_bos && vt_tokenizer_add_bos(b->model->tokenizer), parse_special, ids, n_ids, &e);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

const char *vt_batch_meta_string(const vt_batch *b, const char *key) {
    for (int64_t i = 0; b && key && i < b->n_meta; i++)
        if (strcmp(b->meta[i].key, key) == 0) return b->meta[i].value;
    return NULL;
}

int64_t vt_batch_n_ctx(const vt_batch *b) { return b ? vt_engine_ctx_size(b->engine) : 0; }

size_t vt_batch_kv_cache_bytes(const vt_batch *b) { return b ? vt_kv_cache_bytes(vt_engine_kv_cache(b->engine)) : 0; }

bool vt_sampling_field_ok(const char *field, double value, const char **accepted) {
    if (accepted) *accepted = NULL;
    for (int k = 0; field && k < VT_KNOB_COUNT; k++) {
        const vt_sampling_rule *r = vt_sampling_rule_of(k);
        if (strcmp(field, r->api_name) != 0) continue;
        if (accepted) *accepted = r->accepted;
        return vt_sampling_accepts(k, value);
    }
    return false;
}

void vt_batch_get_cache_stats(const vt_batch *b, vt_batch_cache_stats *out) {
    if (!b || !out || out->struct_size == 0) return;
    const vt_kv_cache *c = vt_engine_kv_cache(b->engine);
    vt_batch_cache_stats s = {
        .struct_size = out->struct_size,
        .enabled = c->prefix_cache,
        .cached_blocks = c->n_filed,
        .evictable_blocks = c->n_evictable,
        .hit_tokens = vt_sched_get_stats(b->sched).n_prompt_hit,
        .query_tokens = vt_sched_get_stats(b->sched).n_prompt_looked_up,
    };
    memcpy(out, &s, out->struct_size < sizeof s ? out->struct_size : sizeof s);
}

int64_t vt_batch_cached_tokens(const vt_batch *b, uint64_t id) { return b ? vt_sched_cached_tokens(b->sched, id) : -1; }

vt_status vt_grammar_check(const char *gbnf, char *err, size_t err_size) {
    vt_error e = {0};
    vt_grammar *g = NULL;
    if (!gbnf) return vt_api_report(&(vt_error){VT_ERR_INVALID, "grammar: NULL"}, err, err_size);
    vt_status st = vt_grammar_parse(gbnf, strlen(gbnf), &g, &e);
    vt_grammar_free(g);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

char *vt_grammar_either(const char *first, const char *first_prefix, const char *second, const char *second_prefix,
                        char *err, size_t err_size) {
    vt_error e = {0};
    char *text = vt_grammar_union_text(first, first_prefix, second, second_prefix, &e);
    if (!text) vt_api_report(&e, err, err_size);
    return text;
}
