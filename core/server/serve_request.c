/* serve_request.c — see serve_request.h. Field names and shapes follow
 * OpenAI's chat/completions and completions APIs and llama-server's
 * /tokenize and /detokenize; `null` is read as "not given" everywhere. */
#include "serve_request.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "serve_choice_options.h"
#include "serve_grammar.h"
#include "vt/vt.h"

#define INVALID "invalid_request_error"

bool vt_serve_fail(vt_serve_error *err, int status, const char *type, const char *param, const char *fmt, ...) {
    if (!err) return false;
    err->status = status;
    err->type = type;
    err->code = NULL;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return false;
}

void vt_serve_request_free(vt_serve_request *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    json_decref(r->chat_input);
    free(r->model);
    free(r->prompt);
    free(r->ids);
    for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->grammar);
    free(r->tool_choice_name);
    memset(r, 0, sizeof *r);
}

/* The member, or NULL when absent or null. */
static json_t *field(const json_t *obj, const char *name) {
    json_t *v = json_object_get(obj, name);
    return v && !json_is_null(v) ? v : NULL;
}

static char *dup_string(const json_t *s) {
    size_t n = json_string_length(s);
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, json_string_value(s), n);
        out[n] = '\0';
    }
    return out;
}

static bool out_of_memory(vt_serve_error *err) {
    return vt_serve_fail(err, 500, "server_error", NULL, "out of memory reading the request");
}

/* A sampling field, judged by the rule vt_batch applies (vt.h). */
static bool sampling_field(const json_t *obj, const char *name, float *out, vt_serve_error *err) {
    json_t *v = field(obj, name);
    if (!v) return true;
    if (!json_is_number(v)) return vt_serve_fail(err, 400, INVALID, name, "%s: expected a number", name);
    const double d = json_number_value(v);
    const char *accepted = NULL;
    if (!vt_sampling_field_ok(name, d, &accepted))
        return vt_serve_fail(err, 400, INVALID, name, "%s: %g is out of range: expected %s", name, d,
                             accepted ? accepted : "nothing");
    *out = (float)d;
    return true;
}

static bool bool_field(const json_t *obj, const char *name, bool *out, vt_serve_error *err) {
    json_t *v = field(obj, name);
    if (!v) return true;
    if (!json_is_boolean(v)) return vt_serve_fail(err, 400, INVALID, name, "%s: expected true or false", name);
    *out = json_is_true(v);
    return true;
}

/* A field that would change the output and that vt does not implement:
 * refused unless absent, null, or the value that means "off". */
static bool refuse_if_used(const char *name, bool used, vt_serve_error *err) {
    if (!used) return true;
    return vt_serve_fail(err, 400, INVALID, name, "%s is not supported by vt serve; remove it from the request",
                         name);
}

static bool is_off(const json_t *v) {
    return !v || json_is_null(v) || json_is_false(v) || (json_is_integer(v) && json_integer_value(v) == 0) ||
           (json_is_object(v) && json_object_size(v) == 0) || (json_is_array(v) && json_array_size(v) == 0);
}

/* Fields llama-server or vLLM define, outside OpenAI's API, that would
 * change the output and that vt does not implement: clients written for
 * those servers send them, and an answer that ignored them would look like
 * theirs without being it. Each is accepted absent, null, or at the value
 * its server reads as "do nothing": `off` (false, 0, [] or {}: the field
 * is off at zero), the number `neutral` (a penalty of 1, n_predict -1 for
 * no limit: 0 would be a real setting there), true (skip_special_tokens),
 * the string "none" (reasoning_format: a model's thinking stays in the
 * content, as vt leaves it), or only null. Where vt has a field that does the job, the error names it. */
typedef enum { NEUTRAL_OFF, NEUTRAL_NUMBER, NEUTRAL_TRUE, NEUTRAL_NONE, NEUTRAL_NULL } neutral_kind;

typedef struct extension_field {
    const char *name;
    neutral_kind kind;
    double neutral; /* NEUTRAL_NUMBER's value */
    const char *instead;
} extension_field;

static const extension_field extension_fields[] = {
    {"n_predict", NEUTRAL_NUMBER, -1, "max_tokens"},
    {"repeat_penalty", NEUTRAL_NUMBER, 1, "presence_penalty or frequency_penalty"},
    {"repetition_penalty", NEUTRAL_NUMBER, 1, "presence_penalty or frequency_penalty"},
    {"typical_p", NEUTRAL_NUMBER, 1, NULL},
    {"tfs_z", NEUTRAL_NUMBER, 1, NULL},
    {"top_n_sigma", NEUTRAL_NUMBER, -1, NULL},
    {"mirostat", NEUTRAL_OFF, 0, NULL},
    {"dynatemp_range", NEUTRAL_OFF, 0, NULL},
    {"xtc_probability", NEUTRAL_OFF, 0, NULL},
    {"dry_multiplier", NEUTRAL_OFF, 0, NULL},
    {"t_max_predict_ms", NEUTRAL_OFF, 0, NULL},
    {"n_probs", NEUTRAL_OFF, 0, "logprobs and top_logprobs"},
    {"min_tokens", NEUTRAL_OFF, 0, NULL},
    {"stop_token_ids", NEUTRAL_OFF, 0, "stop"},
    {"bad_words", NEUTRAL_OFF, 0, NULL},
    {"use_beam_search", NEUTRAL_OFF, 0, NULL},
    {"include_stop_str_in_output", NEUTRAL_OFF, 0, NULL},
    {"skip_special_tokens", NEUTRAL_TRUE, 0, NULL},
    {"samplers", NEUTRAL_NULL, 0, NULL},
    {"allowed_token_ids", NEUTRAL_NULL, 0, NULL},
    {"prompt_logprobs", NEUTRAL_NULL, 0, NULL},
    {"truncate_prompt_tokens", NEUTRAL_NULL, 0, NULL},
    {"guided_json", NEUTRAL_NULL, 0, "response_format {\"type\": \"json_schema\"}"},
    {"guided_regex", NEUTRAL_NULL, 0, "grammar"},
    {"guided_choice", NEUTRAL_NULL, 0, "grammar"},
    {"guided_grammar", NEUTRAL_NULL, 0, "grammar"},
    {"structured_outputs", NEUTRAL_NULL, 0, "response_format or grammar"},
    {"continue_final_message", NEUTRAL_OFF, 0, NULL},
    {"add_special_tokens", NEUTRAL_NULL, 0, NULL},
    {"documents", NEUTRAL_OFF, 0, NULL},
    {"logits_processors", NEUTRAL_OFF, 0, NULL},
    {"return_tokens_as_token_ids", NEUTRAL_OFF, 0, NULL},
    {"lora", NEUTRAL_OFF, 0, NULL},
    {"post_sampling_probs", NEUTRAL_OFF, 0, NULL},
    {"timings_per_token", NEUTRAL_OFF, 0, NULL},
    {"reasoning_format", NEUTRAL_NONE, 0, NULL},
};

static bool extension_is_neutral(const json_t *v, const extension_field *f) {
    if (!v || json_is_null(v)) return true;
    switch (f->kind) {
    case NEUTRAL_OFF: return is_off(v);
    case NEUTRAL_NUMBER: return json_is_number(v) && json_number_value(v) == f->neutral;
    case NEUTRAL_TRUE: return json_is_true(v);
    case NEUTRAL_NONE: return json_is_string(v) && strcmp(json_string_value(v), "none") == 0;
    case NEUTRAL_NULL: return false;
    }
    return false;
}

static bool check_unsupported(const json_t *root, vt_serve_kind kind, vt_serve_error *err) {
    static const char *const both[] = {"logit_bias", "functions",
                                       "function_call", "audio", "prediction", "reasoning_effort",
                                       "web_search_options", "suffix"};
    for (size_t i = 0; i < sizeof both / sizeof *both; i++)
        if (!refuse_if_used(both[i], !is_off(json_object_get(root, both[i])), err)) return false;
    for (size_t i = 0; i < sizeof extension_fields / sizeof *extension_fields; i++) {
        const extension_field *f = &extension_fields[i];
        if (extension_is_neutral(json_object_get(root, f->name), f)) continue;
        if (f->instead)
            return vt_serve_fail(err, 400, INVALID, f->name,
                                 "%s is not supported by vt serve; use %s instead, or remove it from the request",
                                 f->name, f->instead);
        return refuse_if_used(f->name, true, err);
    }
    /* Chat reads tool_choice with its tools (serve_chat_input.c). */
    json_t *tc = field(root, "tool_choice");
    if (kind != VT_SERVE_CHAT && tc && !(json_is_string(tc) && (strcmp(json_string_value(tc), "none") == 0 ||
                                       strcmp(json_string_value(tc), "auto") == 0)))
        return refuse_if_used("tool_choice", true, err);
    json_t *mod = field(root, "modalities");
    if (mod) {
        bool text_only = json_is_array(mod) && json_array_size(mod) == 1 &&
                         json_is_string(json_array_get(mod, 0)) &&
                         strcmp(json_string_value(json_array_get(mod, 0)), "text") == 0;
        if (!text_only) return refuse_if_used("modalities", true, err);
    }
    json_t *best_of = field(root, "best_of");
    if (best_of && !(json_is_integer(best_of) && json_integer_value(best_of) == 1))
        return refuse_if_used("best_of", true, err);
    json_t *echo = field(root, "echo"); /* in chat, vLLM's: the last message repeated in the answer */
    if (echo && !json_is_false(echo)) return vt_serve_fail(err, 400, INVALID, "echo", "echo: only false is supported");
    /* Four of OpenAI's fields clients send by habit, decided one by one:
     * parallel_tool_calls (a boolean; chat reads it with its tools); there is
     * one service tier here, so "auto" and "default" are that tier and any
     * other asks for what is not there; verbosity "medium", OpenAI's
     * default, is what every answer is, and shorter or longer ones are not
     * done; nothing is ever stored, so store false is what happens and true
     * asks for what is not done. */
    json_t *ptc = field(root, "parallel_tool_calls");
    if (ptc && !json_is_boolean(ptc))
        return vt_serve_fail(err, 400, INVALID, "parallel_tool_calls", "parallel_tool_calls: expected true or false");
    json_t *tier = field(root, "service_tier");
    if (tier && !(json_is_string(tier) && (strcmp(json_string_value(tier), "auto") == 0 ||
                                           strcmp(json_string_value(tier), "default") == 0)))
        return vt_serve_fail(err, 400, INVALID, "service_tier",
                             "service_tier: only \"auto\" or \"default\" (this server has one tier)");
    json_t *verbosity = field(root, "verbosity");
    if (verbosity && !(json_is_string(verbosity) && strcmp(json_string_value(verbosity), "medium") == 0))
        return vt_serve_fail(err, 400, INVALID, "verbosity",
                             "verbosity: only \"medium\" (OpenAI's default; vt serve does not adjust an answer's length)");
    json_t *store = field(root, "store");
    if (store && !json_is_false(store))
        return vt_serve_fail(err, 400, INVALID, "store", "store: only false (this server keeps no completions)");
    return true;
}

/* The key holding the text of content part `part`: "text" for a text part,
 * "refusal" for an assistant message's refusal part (what the model said,
 * as OpenAI's API sends it back in the history); NULL for any other part. */
static const char *part_text_key(const json_t *part, bool assistant) {
    const json_t *type = json_is_object(part) ? json_object_get(part, "type") : NULL;
    if (!json_is_string(type)) return NULL;
    if (strcmp(json_string_value(type), "text") == 0) return "text";
    if (assistant && strcmp(json_string_value(type), "refusal") == 0) return "refusal";
    return NULL;
}

/* Text of a message's content: a string, or an array of text parts (and of
 * refusal parts in an assistant message), joined. */
static bool message_content(const json_t *content, size_t i, bool assistant, char **out, vt_serve_error *err) {
    char param[96];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!content) {
        *out = calloc(1, 1);
        return *out ? true : out_of_memory(err);
    }
    if (json_is_string(content)) {
        *out = dup_string(content);
        return *out ? true : out_of_memory(err);
    }
    if (!json_is_array(content))
        return vt_serve_fail(err, 400, INVALID, param, "%s: expected a string or an array of text parts", param);
    size_t total = 0, n = json_array_size(content);
    for (size_t j = 0; j < n; j++) {
        const json_t *part = json_array_get(content, j);
        const char *key = part_text_key(part, assistant);
        if (!key) {
            snprintf(param, sizeof param, "messages[%zu].content[%zu].type", i, j);
            return vt_serve_fail(err, 400, INVALID, param, "%s: only \"text\" parts are supported%s", param,
                                 assistant ? " (and \"refusal\" in an assistant message)" : "");
        }
        const json_t *text = json_object_get(part, key);
        if (!json_is_string(text)) {
            snprintf(param, sizeof param, "messages[%zu].content[%zu].%s", i, j, key);
            return vt_serve_fail(err, 400, INVALID, param, "%s: expected a string", param);
        }
        total += json_string_length(text);
    }
    char *s = malloc(total + 1);
    if (!s) return out_of_memory(err);
    size_t used = 0;
    for (size_t j = 0; j < n; j++) {
        const json_t *part = json_array_get(content, j);
        const json_t *text = json_object_get(part, part_text_key(part, assistant));
        memcpy(s + used, json_string_value(text), json_string_length(text));
        used += json_string_length(text);
    }
    s[used] = '\0';
    *out = s;
    return true;
}

static bool parse_messages(const json_t *root, vt_serve_request *r, vt_serve_error *err) {
    json_t *msgs = field(root, "messages");
    if (!msgs) return vt_serve_fail(err, 400, INVALID, "messages", "messages: required");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return vt_serve_fail(err, 400, INVALID, "messages", "messages: expected a non-empty array");
    size_t n = json_array_size(msgs);
    r->messages = calloc(n, sizeof *r->messages);
    if (!r->messages) return out_of_memory(err);
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        char param[96];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) return vt_serve_fail(err, 400, INVALID, param, "%s: expected an object", param);
        json_t *role = json_object_get(m, "role");
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!json_is_string(role))
            return vt_serve_fail(err, 400, INVALID, param, "%s: required, a string", param);
        const char *rs = json_string_value(role);
        if (strcmp(rs, "developer") == 0) rs = "system";
        if (strcmp(rs, "system") != 0 && strcmp(rs, "user") != 0 && strcmp(rs, "assistant") != 0 &&
            strcmp(rs, "tool") != 0)
            return vt_serve_fail(err, 400, INVALID, param,
                                 "%s: '%.40s' is not supported; roles are system, developer, user, assistant and tool",
                                 param, rs);
        r->messages[i].role = strdup(rs);
        r->n_messages = i + 1;
        if (!r->messages[i].role) return out_of_memory(err);
        /* Only an assistant turn may come without content (OpenAI's shape for
         * one that called tools); a system or user turn without it is a
         * client's mistake, not an empty message. */
        json_t *content = field(m, "content");
        if (!content && strcmp(rs, "assistant") != 0) {
            snprintf(param, sizeof param, "messages[%zu].content", i);
            return vt_serve_fail(err, 400, INVALID, param, "%s: required for a %s message", param, rs);
        }
        if (!message_content(content, i, strcmp(rs, "assistant") == 0, &r->messages[i].content, err)) return false;
        /* an assistant's reference to an earlier audio answer, and the
         * deprecated function_call: parts of the turn vt cannot render,
         * refused rather than dropped from the prompt */
        static const char *const unrendered[] = {"audio", "function_call"};
        for (size_t k = 0; k < sizeof unrendered / sizeof *unrendered; k++)
            if (!is_off(json_object_get(m, unrendered[k]))) {
                snprintf(param, sizeof param, "messages[%zu].%s", i, unrendered[k]);
                return vt_serve_fail(err, 400, INVALID, param,
                                     "%s is not supported by vt serve%s; remove it from the message", param,
                                     k == 1 ? " (use tool_calls)" : "");
            }
    }
    return true;
}

/* An array of token ids (integers 0..INT32_MAX) into r->ids. */
static bool parse_ids(const json_t *arr, const char *name, vt_serve_request *r, vt_serve_error *err) {
    size_t n = json_array_size(arr);
    r->ids = malloc((n ? n : 1) * sizeof *r->ids);
    if (!r->ids) return out_of_memory(err);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            char param[96];
            snprintf(param, sizeof param, "%s[%zu]", name, i);
            return vt_serve_fail(err, 400, INVALID, param, "%s: expected a token id (an integer >= 0)", param);
        }
        r->ids[i] = (int32_t)json_integer_value(v);
    }
    r->n_ids = n;
    return true;
}

static bool parse_prompt(const json_t *root, vt_serve_request *r, vt_serve_error *err) {
    json_t *p = field(root, "prompt");
    if (!p) return vt_serve_fail(err, 400, INVALID, "prompt", "prompt: required");
    /* One prompt per request: ["text"] and [[ids]] are that one prompt; an
     * array whose first item is a string or an array is a batch of them */
    const char *name = "prompt";
    const json_t *first = json_is_array(p) ? json_array_get(p, 0) : NULL;
    const bool nested = json_is_string(first) || json_is_array(first);
    if (nested && json_array_size(p) == 1) {
        p = json_array_get(p, 0);
        name = "prompt[0]";
    } else if (nested) {
        return vt_serve_fail(err, 400, INVALID, "prompt", "prompt: one prompt per request (got %zu)",
                             json_array_size(p));
    }
    if (json_is_string(p)) {
        r->prompt = dup_string(p);
        return r->prompt ? true : out_of_memory(err);
    }
    if (json_is_array(p) && json_array_size(p) > 0) return parse_ids(p, name, r, err);
    return vt_serve_fail(err, 400, INVALID, "prompt", "prompt: expected a string or a non-empty array of token ids");
}

static bool parse_stop(const json_t *root, vt_serve_request *r, vt_serve_error *err) {
    json_t *stop = field(root, "stop");
    if (!stop) return true;
    bool single = json_is_string(stop);
    if (!single && !json_is_array(stop))
        return vt_serve_fail(err, 400, INVALID, "stop", "stop: expected a string or an array of strings");
    size_t n = single ? 1 : json_array_size(stop);
    if (n > VT_SERVE_MAX_STOP)
        return vt_serve_fail(err, 400, INVALID, "stop", "stop: at most %d strings (got %zu)", VT_SERVE_MAX_STOP, n);
    for (size_t i = 0; i < n; i++) {
        json_t *s = single ? stop : json_array_get(stop, i);
        char param[32];
        snprintf(param, sizeof param, single ? "stop" : "stop[%zu]", i);
        if (!json_is_string(s)) return vt_serve_fail(err, 400, INVALID, param, "%s: expected a string", param);
        size_t len = json_string_length(s);
        if (len == 0) continue; /* an empty stop string matches nothing */
        if (len > VT_SERVE_MAX_STOP_BYTES || memchr(json_string_value(s), '\0', len))
            return vt_serve_fail(err, 400, INVALID, param, "%s: at most %d bytes, no NUL", param,
                                 VT_SERVE_MAX_STOP_BYTES);
        if (!(r->stop[r->n_stop] = dup_string(s))) return out_of_memory(err);
        r->n_stop++;
    }
    return true;
}

static bool parse_sampling(const json_t *root, vt_serve_request *r, vt_serve_error *err) {
    /* Both names are checked, whichever wins: a wrong-typed field is a
     * mistake worth hearing about even when the other one is valid.
     * max_completion_tokens is OpenAI's current name and wins. */
    static const char *const max_names[] = {"max_tokens", "max_completion_tokens"};
    for (size_t i = 0; i < sizeof max_names / sizeof *max_names; i++) {
        json_t *max = field(root, max_names[i]);
        if (!max) continue;
        if (!json_is_integer(max) || json_integer_value(max) < 1)
            return vt_serve_fail(err, 400, INVALID, max_names[i], "%s: expected an integer >= 1", max_names[i]);
        r->max_tokens = json_integer_value(max);
    }
    if (!sampling_field(root, "temperature", &r->temperature, err) || !sampling_field(root, "top_p", &r->top_p, err) ||
        !sampling_field(root, "min_p", &r->min_p, err) ||
        !sampling_field(root, "presence_penalty", &r->presence_penalty, err) ||
        !sampling_field(root, "frequency_penalty", &r->frequency_penalty, err))
        return false;
    json_t *top_k = field(root, "top_k");
    if (top_k) {
        const char *accepted = NULL;
        if (!json_is_integer(top_k) || !vt_sampling_field_ok("top_k", (double)json_integer_value(top_k), &accepted))
            return vt_serve_fail(err, 400, INVALID, "top_k", "top_k: expected %s", accepted ? accepted : "an integer");
        r->top_k = (int32_t)json_integer_value(top_k);
    }
    json_t *seed = field(root, "seed");
    if (seed) {
        if (!json_is_integer(seed) || json_integer_value(seed) < -1)
            return vt_serve_fail(err, 400, INVALID, "seed", "seed: expected an integer >= 0, or -1 for a random one");
        /* -1: a fresh random seed, as when the field is left out (llama-server's meaning) */
        r->has_seed = json_integer_value(seed) >= 0;
        r->seed = r->has_seed ? (uint64_t)json_integer_value(seed) : 0;
    }
    if (!bool_field(root, "stream", &r->stream, err)) return false;
    if (!bool_field(root, "ignore_eos", &r->ignore_eos, err)) return false;
    json_t *so = field(root, "stream_options");
    if (so) {
        if (!json_is_object(so))
            return vt_serve_fail(err, 400, INVALID, "stream_options", "stream_options: expected an object");
        json_t *iu = field(so, "include_usage");
        if (iu && !json_is_boolean(iu))
            return vt_serve_fail(err, 400, INVALID, "stream_options.include_usage",
                                 "stream_options.include_usage: expected true or false");
        r->include_usage = iu && json_is_true(iu);
        /* vLLM's: usage on every chunk, which vt does not send */
        if (!is_off(field(so, "continuous_usage_stats")))
            return refuse_if_used("stream_options.continuous_usage_stats", true, err);
        /* OpenAI's rule: a reply that is not streamed has no stream to
         * shape, and the field would otherwise be ignored silently */
        if (!r->stream)
            return vt_serve_fail(err, 400, INVALID, "stream_options",
                                 "stream_options: only allowed with \"stream\": true");
    }
    return parse_stop(root, r, err);
}

static bool parse_root(vt_serve_kind kind, const json_t *root, vt_serve_request *r, vt_serve_error *err) {
    if (kind == VT_SERVE_TOKENIZE) {
        json_t *c = field(root, "content");
        if (!json_is_string(c)) return vt_serve_fail(err, 400, INVALID, "content", "content: required, a string");
        r->add_special = false;
        r->parse_special = true;
        if (!(r->prompt = dup_string(c))) return out_of_memory(err);
        return bool_field(root, "add_special", &r->add_special, err) &&
               bool_field(root, "parse_special", &r->parse_special, err) &&
               bool_field(root, "with_pieces", &r->with_pieces, err);
    }
    if (kind == VT_SERVE_DETOKENIZE) {
        json_t *t = field(root, "tokens");
        if (!json_is_array(t))
            return vt_serve_fail(err, 400, INVALID, "tokens", "tokens: required, an array of token ids");
        return parse_ids(t, "tokens", r, err);
    }
    json_t *model = field(root, "model");
    if (model && !json_is_string(model)) return vt_serve_fail(err, 400, INVALID, "model", "model: expected a string");
    if (model && !(r->model = dup_string(model))) return out_of_memory(err);
    if (!check_unsupported(root, kind, err)) return false;
    if (!(kind == VT_SERVE_CHAT ? parse_messages(root, r, err) && vt_serve_parse_chat_input(root, r, err)
                                : parse_prompt(root, r, err)))
        return false;
    if (!(parse_sampling(root, r, err) && vt_serve_parse_choice_options(root, kind, r, err) &&
          vt_serve_parse_grammar(root, &r->grammar, err)))
        return false;
    return true;
}

bool vt_serve_parse_request(vt_serve_kind kind, const char *body, size_t len, const vt_serve_defaults *defaults,
                            vt_serve_request *out, vt_serve_error *err) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->temperature = defaults ? defaults->temperature : 1.0f;
    out->top_p = defaults ? defaults->top_p : 1.0f;
    out->min_p = defaults ? defaults->min_p : 0.0f;
    out->top_k = defaults ? defaults->top_k : 0;
    out->n = 1;
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        /* valid JSON that vt cannot hold is said as such, not as malformed */
        const enum json_error_code code = json_error_code(&jerr);
        const bool integer = strstr(jerr.text, "integer") != NULL;
        const char *why = code == json_error_null_character ? "a string holding \\u0000, which vt does not take"
                          : code != json_error_numeric_overflow ? NULL
                          : integer ? "an integer past 64 bits, which vt does not take"
                                    : "a number past a double's range, which vt does not take";
        if (why)
            return vt_serve_fail(err, 400, INVALID, NULL, "the body holds %s (line %d, column %d)", why, jerr.line,
                                 jerr.column);
        return vt_serve_fail(err, 400, INVALID, NULL, "the body is not valid JSON: %s at line %d, column %d",
                             jerr.text, jerr.line, jerr.column);
    }
    bool ok = json_is_object(root) ? parse_root(kind, root, out, err)
                                   : vt_serve_fail(err, 400, INVALID, NULL, "the body must be a JSON object");
    json_decref(root);
    if (!ok) {
        vt_serve_request_free(out);
        out->kind = kind;
    }
    return ok;
}

static bool all_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

bool vt_serve_check_framing(const vt_serve_header *headers, size_t n, vt_serve_error *err) {
    const char *length = NULL, *coding = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *name = headers[i].name, *value = headers[i].value ? headers[i].value : "";
        if (!name) continue;
        if (strcasecmp(name, "Content-Length") == 0) {
            if (!all_digits(value))
                return vt_serve_fail(err, 400, INVALID, NULL, "Content-Length: '%.40s' is not a length", value);
            /* repeats of one value are harmless (RFC 9112 §6.3); differing ones are not */
            if (length && strcmp(length, value) != 0)
                return vt_serve_fail(err, 400, INVALID, NULL, "Content-Length: two different values (%.40s, %.40s)",
                                     length, value);
            length = value;
        } else if (strcasecmp(name, "Transfer-Encoding") == 0) {
            if (coding || strcasecmp(value, "chunked") != 0)
                return vt_serve_fail(err, 501, INVALID, NULL,
                                     "Transfer-Encoding: '%.40s' is not supported (only chunked, given once)", value);
            coding = value;
        }
    }
    if (length && coding)
        return vt_serve_fail(err, 400, INVALID, NULL, "Content-Length and Transfer-Encoding: give one of them");
    return true;
}

/* The escape of byte c into esc (4 bytes): its length. */
static size_t log_escape_byte(unsigned char c, char esc[4]) {
    static const char hex[] = "0123456789abcdef";
    if (c == '\\') {
        esc[0] = esc[1] = '\\';
        return 2;
    }
    if (c >= 0x20 && c < 0x7f) {
        esc[0] = (char)c;
        return 1;
    }
    esc[0] = '\\', esc[1] = 'x', esc[2] = hex[c >> 4], esc[3] = hex[c & 15];
    return 4;
}

void vt_serve_log_escape(const char *in, char *out, size_t out_size) {
    if (out_size == 0) return;
    const unsigned char *text = (const unsigned char *)(in ? in : "");
    char esc[4];
    size_t total = 0;
    for (const unsigned char *p = text; *p; p++) total += log_escape_byte(*p, esc);
    /* all of it, or as many whole escapes as leave room for "..." */
    bool cut = total + 1 > out_size;
    size_t room = cut ? (out_size >= 4 ? out_size - 4 : 0) : total, used = 0;
    for (const unsigned char *p = text; *p; p++) {
        size_t k = log_escape_byte(*p, esc);
        if (used + k > room) break;
        memcpy(out + used, esc, k);
        used += k;
    }
    if (cut && out_size >= 4) memcpy(out + used, "...", 3), used += 3;
    out[used] = '\0';
}
