/* session.c — include/vt/vt.h over the engine: the same path as `vt run`. */
#include <stdlib.h>

#include "api_options.h"
#include "engine.h"
#include "vt/vt.h"

struct vt_session {
    vt_model *model;
    vt_engine *engine;
};

vt_status vt_session_open(const char *model_path, const vt_session_options *options, vt_session **out, char *err,
                          size_t err_size) {
    vt_error e = {0};
    if (!out) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_session_open: NULL out"}, err, err_size);
    *out = NULL;
    if (!model_path) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_session_open: no model path"}, err, err_size);
    vt_options opt;
    bool all_logits = false;
    vt_status st = vt_api_options(options, &opt, &all_logits, &e);
    vt_session *s = st == VT_OK ? calloc(1, sizeof *s) : NULL;
    if (st == VT_OK && !s) st = vt_fail(&e, VT_ERR_NOMEM, "out of memory");
    if (st == VT_OK) st = vt_model_load(model_path, &s->model, &e);
    if (st == VT_OK) st = vt_engine_create(&opt, s->model, all_logits, &s->engine, &e);
    if (st != VT_OK) {
        vt_session_close(s);
        return vt_api_report(&e, err, err_size);
    }
    *out = s;
    return VT_OK;
}

void vt_session_close(vt_session *s) {
    if (!s) return;
    vt_engine_free(s->engine);
    vt_model_free(s->model);
    free(s);
}

int32_t vt_session_n_vocab(const vt_session *s) { return s ? s->model->hp.n_vocab : 0; }

int64_t vt_session_n_past(const vt_session *s) { return s ? vt_engine_n_past(s->engine) : 0; }

void vt_session_reset(vt_session *s) {
    if (s) vt_engine_reset(s->engine);
}

vt_status vt_session_tokenize(const vt_session *s, const char *text, size_t len, bool add_bos, int32_t **ids,
                              size_t *n_ids, char *err, size_t err_size) {
    vt_error e = {0};
    if (!s || !ids || !n_ids) return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_session_tokenize: NULL argument"}, err, err_size);
    if (!s->model->tokenizer) {
        vt_fail(&e, VT_ERR_UNSUPPORTED, "this model's tokenizer cannot be used: %s", s->model->tokenizer_error);
        return vt_api_report(&e, err, err_size);
    }
    vt_status st = vt_tokenize(s->model->tokenizer, text, len, add_bos && vt_tokenizer_add_bos(s->model->tokenizer),
                               false, ids, n_ids, &e);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

int32_t vt_session_token_bytes(const vt_session *s, int32_t id, char *buf, size_t cap) {
    if (!s || !s->model->tokenizer) return -1;
    return vt_token_to_bytes(s->model->tokenizer, id, false, buf, cap);
}

vt_status vt_session_eval(vt_session *s, const int32_t *ids, size_t n, char *err, size_t err_size) {
    vt_error e = {0};
    if (!s || (!ids && n > 0))
        return vt_api_report(&(vt_error){VT_ERR_INVALID, "vt_session_eval: NULL argument"}, err, err_size);
    vt_status st = vt_engine_eval(s->engine, ids, (int64_t)n, n == 1, &e);
    return st == VT_OK ? VT_OK : vt_api_report(&e, err, err_size);
}

const float *vt_session_logits(const vt_session *s, int64_t row) { return s ? vt_engine_logits(s->engine, row) : NULL; }

void vt_session_explain(const vt_session *s, FILE *f) {
    if (s && f) vt_engine_explain(s->engine, f);
}
