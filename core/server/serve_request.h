/* serve_request.h — an OpenAI request body (JSON) -> what the engine runs.
 *
 * A pure function over bytes, so the fuzz target (tests/fuzz/fuzz_serve_request.c)
 * and the HTTP handlers share it: every refusal is an HTTP status with a
 * message and the field it is about (OpenAI's {"error": {"message", "type",
 * "param"}}), never a crash or a silent default for a field that would
 * change the output. Fields the API does not define are ignored. */
#ifndef VT_SERVE_REQUEST_H
#define VT_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bodies this parser reads. */
typedef enum vt_serve_kind {
    VT_SERVE_CHAT = 0,       /* POST /v1/chat/completions */
    VT_SERVE_COMPLETION = 1, /* POST /v1/completions */
    VT_SERVE_TOKENIZE = 2,   /* POST /tokenize: {"content", "add_special", "parse_special", "with_pieces"} */
    VT_SERVE_DETOKENIZE = 3, /* POST /detokenize: {"tokens"} */
} vt_serve_kind;

/* Stop strings a request may give (vt_batch_request's limits). */
#define VT_SERVE_MAX_STOP 16
#define VT_SERVE_MAX_STOP_BYTES 256
/* Choices per request (n), and logprobs alternatives per token: chat's
 * top_logprobs (OpenAI's limit) and completions' logprobs (the legacy API's). */
#define VT_SERVE_MAX_CHOICES 8
#define VT_SERVE_MAX_TOP_LOGPROBS 20
#define VT_SERVE_MAX_COMPLETION_LOGPROBS 5

/* A refusal: HTTP status, message, OpenAI error type, the field ("" = none). */
typedef struct vt_serve_error {
    int status;
    const char *type; /* "invalid_request_error", "authentication_error", ... */
    char message[512];
    char param[96];
    /* error.code: NULL (null), OpenAI's code where it sets one
     * ("invalid_api_key", "model_not_found", "context_length_exceeded"), or
     * which 503 it is, for clients that retry: "queue_full", "timeout",
     * "shutting_down", "loading" */
    const char *code;
} vt_serve_error;

struct json_t; /* jansson's */

typedef struct vt_serve_message {
    char *role;    /* "system", "user", "assistant" or "tool" ("developer" is read as "system") */
    char *content; /* text parts joined */
} vt_serve_message;

/* Defaults for the sampling fields a request leaves out (the engine's
 * [sampling] options). */
typedef struct vt_serve_defaults {
    float temperature, top_p, min_p;
    int32_t top_k;
} vt_serve_defaults;

/* chat: what the request lets the model do with its tools */
typedef enum vt_serve_tool_choice {
    VT_TOOL_CHOICE_NONE = 0, /* no tools, or "none": the answer is content */
    VT_TOOL_CHOICE_AUTO,     /* the model decides; its answer is parsed for calls */
    VT_TOOL_CHOICE_REQUIRED, /* at least one call of any tool (a grammar forces it) */
    VT_TOOL_CHOICE_NAMED,    /* a call of tool_choice_name */
} vt_serve_tool_choice;

typedef struct vt_serve_request {
    vt_serve_kind kind;
    char *model; /* as given, or NULL */
    /* chat */
    vt_serve_message *messages;
    size_t n_messages;
    /* chat: what a Jinja chat template renders (serve_chat_input.c): an
     * object {"messages": [...], "tools": [...] (when given), "kwargs": {...}
     * (chat_template_kwargs), "add_generation_prompt": bool}; messages with
     * roles and content normalized, tool_calls' arguments parsed into objects */
    struct json_t *chat_input;
    /* completion and tokenize: text (or NULL), or token ids (completion, detokenize) */
    char *prompt;
    int32_t *ids;
    size_t n_ids;
    bool add_special;   /* tokenize: add BOS as the vocabulary says (default false, as llama-server's) */
    bool parse_special; /* tokenize: control-token text becomes its token (default true, as llama-server's) */
    bool with_pieces;   /* tokenize: each id with its text, [{"id", "piece"}] (default false) */
    /* sampling */
    int64_t max_tokens; /* 0: not given (up to the context) */
    float temperature, top_p, min_p;
    int32_t top_k;
    float presence_penalty, frequency_penalty;
    bool has_seed;
    uint64_t seed;
    char *stop[VT_SERVE_MAX_STOP];
    size_t n_stop;
    bool stream, include_usage;
    bool ignore_eos; /* llama-server's: generate past end-of-generation tokens */
    /* choices (serve_choice_options.h) */
    int32_t n;            /* 1..VT_SERVE_MAX_CHOICES */
    bool logprobs;        /* each generated token's log-probability */
    int32_t top_logprobs; /* and that many alternatives per token */
    /* chat with tools: tool_choice (NONE when no tools) and, for NAMED, the
     * function; parallel_tool_calls (default true: several calls in one
     * answer); whether the answer is parsed for calls is the server's
     * (tool_calls.h), forcing a call is a grammar it adds */
    vt_serve_tool_choice tool_choice;
    char *tool_choice_name;
    bool parallel_tool_calls;
    /* GBNF the output must follow (response_format, json_schema or grammar:
     * serve_grammar.h), or NULL */
    char *grammar;
} vt_serve_request;

/* Parse body (len bytes, need not be NUL-terminated) as a `kind` request.
 * On success *out owns its strings (vt_serve_request_free); on failure *out
 * is empty and err says why (status 400). */
bool vt_serve_parse_request(vt_serve_kind kind, const char *body, size_t len, const vt_serve_defaults *defaults,
                            vt_serve_request *out, vt_serve_error *err);
void vt_serve_request_free(vt_serve_request *r);

/* The chat fields only a Jinja template uses (tools, tool_calls,
 * tool_call_id, name, chat_template_kwargs, add_generation_prompt) into
 * r->chat_input; false with err 400 naming the field. */
bool vt_serve_parse_chat_input(const struct json_t *root, vt_serve_request *r, vt_serve_error *err);
/* OpenAI's rule for a function's name and a response format's name:
 * ^[a-zA-Z0-9_-]{1,64}$. */
bool vt_serve_name_ok(const char *name);

/* One request header as received. */
typedef struct vt_serve_header {
    const char *name, *value;
} vt_serve_header;

/* Is the body's framing unambiguous (RFC 9112 §6)? Checked on the head,
 * before a byte of the body is read, so that a request two parsers could
 * split differently (request smuggling) is refused and its connection
 * closed: false with err 400 for Content-Length values that differ or are
 * not digits, or Content-Length beside Transfer-Encoding; 501 for a
 * transfer coding other than chunked (which the server cannot decode, so
 * it cannot know where the body ends). */
bool vt_serve_check_framing(const vt_serve_header *headers, size_t n, vt_serve_error *err);

/* Client-chosen text for the log, made unable to forge lines or terminal
 * escapes: bytes outside printable ASCII become \xHH and a backslash \\.
 * out is always NUL-terminated; text that does not fit is cut at a whole
 * escape and ends with "...". */
void vt_serve_log_escape(const char *in, char *out, size_t out_size);

/* Fill err (status, type, param may be NULL, printf message; code NULL); returns false. */
bool vt_serve_fail(vt_serve_error *err, int status, const char *type, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
