/* serve_response.c — see serve_response.h. Built with jansson, dumped compact. */
#include "serve_response.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_buf.h"

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, min = 0x10000;
    else return 0;
    if (n < len) return 0;
    unsigned cp = c & (0x3F >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* A JSON string of text, bad bytes (and NUL) replaced by U+FFFD. */
static json_t *text_string(const char *text, size_t n) {
    if (!text) return json_string("");
    const unsigned char *s = (const unsigned char *)text;
    size_t clean = 0;
    while (clean < n && s[clean] && utf8_seq(s + clean, n - clean)) clean += utf8_seq(s + clean, n - clean);
    if (clean == n) return json_stringn(text, n);
    char *buf = malloc(n * 3 + 1);
    if (!buf) return NULL;
    size_t used = 0;
    for (size_t i = 0; i < n;) {
        size_t len = s[i] ? utf8_seq(s + i, n - i) : 0;
        if (len) {
            memcpy(buf + used, s + i, len);
            used += len;
            i += len;
        } else {
            memcpy(buf + used, "\xEF\xBF\xBD", 3);
            used += 3;
            i++;
        }
    }
    json_t *j = json_stringn(buf, used);
    free(buf);
    return j;
}

/* Dump and free root (NULL stays NULL). */
static char *dump(json_t *root) {
    if (!root) return NULL;
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return s;
}

/* dump() of any value, a string or an array too. */
static char *dump_any(json_t *value) {
    if (!value) return NULL;
    char *s = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(value);
    return s;
}

char *vt_serve_error_json(const vt_serve_error *err) {
    /* The message may quote the request (jansson's "near '...'" of a
     * malformed body, a truncated field value): bytes that are not UTF-8
     * would make jansson refuse the whole answer, so they become U+FFFD. */
    json_t *e = json_pack("{s:o, s:s, s:o, s:o}", "message", text_string(err->message, strlen(err->message)), "type",
                          err->type ? err->type : "server_error", "param",
                          err->param[0] ? text_string(err->param, strlen(err->param)) : json_null(), "code",
                          err->code ? json_string(err->code) : json_null());
    return dump(e ? json_pack("{s:o}", "error", e) : NULL);
}

/* OpenAI's usage, with prompt_tokens_details.cached_tokens: the prompt
 * tokens the prefix cache held (computed by an earlier request). */
static json_t *usage_object(const vt_serve_usage *u) {
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)u->prompt_tokens, "completion_tokens",
                     (json_int_t)u->completion_tokens, "total_tokens",
                     (json_int_t)(u->prompt_tokens + u->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)u->cached_tokens);
}

static json_t *envelope(const vt_serve_ids *ids, const char *object, json_t *choices) {
    return json_pack("{s:s, s:s, s:I, s:s, s:o, s:n}", "id", ids->id, "object", object, "created",
                     (json_int_t)ids->created, "model", ids->model, "choices", choices, "system_fingerprint");
}

json_t *vt_serve_json_text(const char *text, size_t n) { return text_string(text, n); }

/* One choice object; takes c->logprobs. */
static json_t *choice_object(const vt_serve_ids *ids, vt_serve_choice_json *c, bool chunk) {
    json_t *logprobs = c->logprobs ? c->logprobs : json_null();
    c->logprobs = NULL;
    json_t *finish = c->finish_reason ? json_string(c->finish_reason) : json_null();
    json_t *calls = c->tool_calls;
    c->tool_calls = NULL;
    if (ids->kind != VT_SERVE_CHAT)
        return json_pack("{s:i, s:o, s:o, s:o}", "index", c->index, "text", text_string(c->text, c->n_text),
                         "logprobs", logprobs, "finish_reason", finish);
    if (!chunk) {
        /* refusal null as OpenAI's messages carry it: a model here never
         * refuses apart from its text */
        json_t *message = json_pack("{s:s, s:o, s:n}", "role", "assistant", "content",
                                    c->null_content ? json_null() : text_string(c->text, c->n_text), "refusal");
        if (message && calls && json_object_set_new(message, "tool_calls", calls) != 0) {
            json_decref(message);
            message = NULL;
        } else if (!message) {
            json_decref(calls);
        }
        return json_pack("{s:i, s:o, s:o, s:o}", "index", c->index, "message", message, "logprobs", logprobs,
                         "finish_reason", finish);
    }
    json_t *delta = json_object();
    if (delta && c->first) json_object_set_new(delta, "role", json_string("assistant"));
    if (delta && (c->n_text || c->first)) json_object_set_new(delta, "content", text_string(c->text, c->n_text));
    if (calls && (!delta || json_object_set_new(delta, "tool_calls", calls) != 0)) {
        json_decref(delta);
        delta = NULL;
    }
    return json_pack("{s:i, s:o, s:o, s:o}", "index", c->index, "delta", delta, "logprobs", logprobs,
                     "finish_reason", finish);
}

char *vt_serve_completion_json(const vt_serve_ids *ids, vt_serve_choice_json *choices, size_t n,
                               const vt_serve_usage *usage) {
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *c = choice_object(ids, &choices[i], false); /* every one: each takes its logprobs */
        if (!arr) {
            json_decref(c);
        } else if (!c || json_array_append_new(arr, c) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    json_t *root = arr ? envelope(ids, ids->kind == VT_SERVE_CHAT ? "chat.completion" : "text_completion", arr) : NULL;
    if (root) json_object_set_new(root, "usage", usage_object(usage));
    return dump(root);
}

char *vt_serve_chunk_sse(const vt_serve_ids *ids, vt_serve_choice_json *choice, const vt_serve_usage *usage) {
    json_t *choices = json_array();
    if (choice) {
        json_t *c = choice_object(ids, choice, true);
        if (!choices) {
            json_decref(c);
        } else if (!c || json_array_append_new(choices, c) != 0) {
            json_decref(choices);
            choices = NULL;
        }
    }
    json_t *root =
        choices ? envelope(ids, ids->kind == VT_SERVE_CHAT ? "chat.completion.chunk" : "text_completion", choices)
                : NULL;
    if (root && !choice && usage) json_object_set_new(root, "usage", usage_object(usage));
    else if (root && ids->usage_chunk) json_object_set_new(root, "usage", json_null());
    char *body = dump(root);
    if (!body) return NULL;
    size_t n = strlen(body);
    char *event = malloc(n + 9);
    if (event) {
        memcpy(event, "data: ", 6);
        memcpy(event + 6, body, n);
        memcpy(event + 6 + n, "\n\n", 3);
    }
    free(body);
    return event;
}

/* The one model, as /v1/models lists it and /v1/models/{id} answers it. */
static json_t *model_object(const char *alias, int64_t created) {
    return json_pack("{s:s, s:s, s:I, s:s}", "id", alias, "object", "model", "created", (json_int_t)created,
                     "owned_by", "vt");
}

char *vt_serve_models_json(const char *alias, int64_t created) {
    return dump(json_pack("{s:s, s:[o]}", "object", "list", "data", model_object(alias, created)));
}

char *vt_serve_model_json(const char *alias, int64_t created) { return dump(model_object(alias, created)); }

/* The token answers are written as text, a token at a time: a body's worth
 * of tokens (millions, from a few MB of text) needs the answer's bytes and
 * no more, where a jansson tree of them would take hundreds of bytes each. */
char *vt_serve_tokens_json(const int32_t *ids, size_t n) {
    vt_text_buf b = {0};
    vt_text_puts(&b, "{\"tokens\":[");
    for (size_t i = 0; i < n && !b.failed; i++) vt_text_printf(&b, "%s%d", i ? "," : "", (int)ids[i]);
    vt_text_puts(&b, "]}");
    return vt_text_take(&b);
}

/* One token's piece: its text, or its byte values when they are not whole
 * UTF-8 (a byte token holding part of a character). */
static json_t *piece_json(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t clean = 0;
    while (clean < n && s[clean] && utf8_seq(s + clean, n - clean)) clean += utf8_seq(s + clean, n - clean);
    if (clean == n) return json_stringn(text, n);
    json_t *bytes = json_array();
    for (size_t i = 0; bytes && i < n; i++)
        if (json_array_append_new(bytes, json_integer(s[i])) != 0) {
            json_decref(bytes);
            bytes = NULL;
        }
    return bytes;
}

char *vt_serve_token_pieces_json(const int32_t *ids, size_t n, vt_serve_piece_fn piece, const void *ctx) {
    vt_text_buf b = {0};
    vt_text_puts(&b, "{\"tokens\":[");
    for (size_t i = 0; i < n && !b.failed; i++) {
        char buf[512];
        int32_t len = piece(ctx, ids[i], buf, sizeof buf);
        if (len < 0) len = 0;
        if (len > (int32_t)sizeof buf) len = (int32_t)sizeof buf;
        char *p = dump_any(piece_json(buf, (size_t)len));
        if (!p) {
            free(b.data);
            return NULL;
        }
        vt_text_printf(&b, "%s{\"id\":%d,\"piece\":%s}", i ? "," : "", (int)ids[i], p);
        free(p);
    }
    vt_text_puts(&b, "]}");
    return vt_text_take(&b);
}

char *vt_serve_content_json(const char *text, size_t n_text) {
    return dump(json_pack("{s:o}", "content", text_string(text, n_text)));
}
