/* serve_logprobs.c — see serve_logprobs.h. */
#include "serve_logprobs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "serve_response.h"

/* OpenAI's stand-in for the log-probability of a token that cannot occur. */
#define LOGPROB_FLOOR -9999.0

static bool grow(void **p, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return true;
    size_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *q = realloc(*p, cap2 * item);
    if (!q) return false;
    *p = q;
    *cap = cap2;
    return true;
}

/* entry for (id, logprob), its token's bytes appended to the arena. */
static bool make_entry(vt_serve_logprobs *lp, const vt_batch *b, vt_token_logprob t, vt_serve_logprob_entry *out) {
    *out = (vt_serve_logprob_entry){t.id, t.logprob, lp->n_bytes, 0, 0};
    if (t.id < 0) return true;
    char small[128];
    int32_t n = vt_batch_token_bytes(b, t.id, small, sizeof small);
    if (n <= 0) return true; /* a token of no text (a control token) */
    if (!grow((void **)&lp->bytes, &lp->cap_bytes, lp->n_bytes + (size_t)n, 1)) return false;
    if ((size_t)n <= sizeof small) memcpy(lp->bytes + lp->n_bytes, small, (size_t)n);
    else vt_batch_token_bytes(b, t.id, lp->bytes + lp->n_bytes, (size_t)n);
    out->len = (uint32_t)n;
    lp->n_bytes += (size_t)n;
    return true;
}

bool vt_serve_logprobs_append(vt_serve_logprobs *lp, const vt_batch *b, const vt_batch_logprobs *src, size_t n) {
    const size_t row = 1 + (size_t)lp->n_top;
    if (n > src->n_tokens) n = src->n_tokens;
    if (!grow((void **)&lp->e, &lp->cap_tokens, (lp->n_tokens + n) * row, sizeof *lp->e)) return false;
    const size_t bytes_before = lp->n_bytes;
    for (size_t t = 0; t < n; t++) {
        vt_serve_logprob_entry *e = lp->e + (lp->n_tokens + t) * row;
        bool ok = make_entry(lp, b, src->sampled[t], &e[0]);
        for (int32_t k = 0; ok && k < lp->n_top; k++) {
            const vt_token_logprob alt =
                k < src->n_top ? src->top[t * (size_t)src->n_top + (size_t)k] : (vt_token_logprob){-1, 0.0f};
            ok = make_entry(lp, b, alt, &e[1 + k]);
        }
        if (!ok) {
            lp->n_bytes = bytes_before;
            return false;
        }
        e[0].text_offset = src->text_offset ? src->text_offset[t] : 0; /* NULL: no tokenizer, no text */
    }
    lp->n_tokens += n;
    return true;
}

void vt_serve_logprobs_clamp(vt_serve_logprobs *lp, int64_t end) {
    const size_t row = 1 + (size_t)lp->n_top;
    for (size_t t = 0; t < lp->n_tokens; t++)
        if (lp->e[t * row].text_offset > end) lp->e[t * row].text_offset = end;
}

void vt_serve_logprobs_free(vt_serve_logprobs *lp) {
    free(lp->e);
    free(lp->bytes);
    memset(lp, 0, sizeof *lp);
}

static json_t *number(float logprob) { return json_real(isfinite(logprob) ? (double)logprob : LOGPROB_FLOOR); }

static json_t *byte_array(const vt_serve_logprobs *lp, const vt_serve_logprob_entry *e) {
    json_t *a = json_array();
    for (uint32_t i = 0; a && i < e->len; i++)
        if (json_array_append_new(a, json_integer((unsigned char)lp->bytes[e->off + i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    return a;
}

static json_t *text_of(const vt_serve_logprobs *lp, const vt_serve_logprob_entry *e) {
    return vt_serve_json_text(lp->bytes + e->off, e->len);
}

/* {"token", "logprob", "bytes"} of a chat entry. */
static json_t *chat_token(const vt_serve_logprobs *lp, const vt_serve_logprob_entry *e) {
    return json_pack("{s:o, s:o, s:o}", "token", text_of(lp, e), "logprob", number(e->logprob), "bytes",
                     byte_array(lp, e));
}

static json_t *chat_json(const vt_serve_logprobs *lp, size_t from, size_t to) {
    const size_t row = 1 + (size_t)lp->n_top;
    json_t *content = json_array();
    for (size_t t = from; content && t < to; t++) {
        const vt_serve_logprob_entry *e = lp->e + t * row;
        json_t *top = json_array(), *item = chat_token(lp, &e[0]);
        for (int32_t k = 0; top && k < lp->n_top; k++)
            if (e[1 + k].id >= 0 && json_array_append_new(top, chat_token(lp, &e[1 + k])) != 0) {
                json_decref(top);
                top = NULL;
            }
        if (!top || !item) {
            json_decref(top);
            json_decref(item);
            json_decref(content);
            return NULL;
        }
        /* the _new calls take the reference, failing or not */
        if (json_object_set_new(item, "top_logprobs", top) != 0) {
            json_decref(item);
            json_decref(content);
            return NULL;
        }
        if (json_array_append_new(content, item) != 0) {
            json_decref(content);
            return NULL;
        }
    }
    return content ? json_pack("{s:o, s:n}", "content", content, "refusal") : NULL;
}

static json_t *completion_json(const vt_serve_logprobs *lp, size_t from, size_t to) {
    const size_t row = 1 + (size_t)lp->n_top;
    json_t *tokens = json_array(), *values = json_array(), *tops = json_array(), *offsets = json_array();
    bool ok = tokens && values && tops && offsets;
    for (size_t t = from; ok && t < to; t++) {
        const vt_serve_logprob_entry *e = lp->e + t * row;
        json_t *top = json_object();
        /* the alternatives, most likely first (a repeated text keeps the
         * first), then the sampled token if its text is not there yet */
        for (int32_t k = 0; top && k <= lp->n_top; k++) {
            const vt_serve_logprob_entry *x = k < lp->n_top ? &e[1 + k] : &e[0];
            if (x->id < 0) continue;
            json_t *key = text_of(lp, x);
            if (!key) {
                json_decref(top);
                top = NULL;
                break;
            }
            if (!json_object_get(top, json_string_value(key)))
                json_object_set_new(top, json_string_value(key), number(x->logprob));
            json_decref(key);
        }
        ok = top && json_array_append_new(tokens, text_of(lp, &e[0])) == 0 &&
             json_array_append_new(values, number(e[0].logprob)) == 0 && json_array_append_new(tops, top) == 0 &&
             json_array_append_new(offsets, json_integer((json_int_t)e[0].text_offset)) == 0;
    }
    if (!ok) {
        json_decref(tokens);
        json_decref(values);
        json_decref(tops);
        json_decref(offsets);
        return NULL;
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", values, "top_logprobs", tops,
                     "text_offset", offsets);
}

json_t *vt_serve_logprobs_json(const vt_serve_logprobs *lp, vt_serve_kind kind, size_t from, size_t to) {
    if (to > lp->n_tokens) to = lp->n_tokens;
    if (from > to) from = to;
    return kind == VT_SERVE_CHAT ? chat_json(lp, from, to) : completion_json(lp, from, to);
}
