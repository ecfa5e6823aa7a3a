/* serve_response.h — the JSON bodies vt serve answers with, in OpenAI's
 * shapes (chat.completion, chat.completion.chunk, text_completion, list,
 * error) and llama-server's (/tokenize, /detokenize). Each returns a
 * malloc'ed NUL-terminated string, or NULL when out of memory. Text that is
 * not valid UTF-8 (a /detokenize of half a character) has each bad byte
 * replaced by U+FFFD, since JSON strings are Unicode. */
#ifndef VT_SERVE_RESPONSE_H
#define VT_SERVE_RESPONSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve_request.h"

/* What every completion body and chunk names. */
typedef struct vt_serve_ids {
    vt_serve_kind kind; /* chat or completion */
    const char *id;     /* "chatcmpl-..." / "cmpl-..." */
    int64_t created;    /* unix seconds */
    const char *model;
    bool usage_chunk;   /* a stream that ends with a usage chunk: every other chunk says "usage": null (OpenAI's) */
} vt_serve_ids;

typedef struct vt_serve_usage {
    int64_t prompt_tokens, completion_tokens;
    int64_t cached_tokens; /* of the prompt tokens, those the prefix cache held */
} vt_serve_usage;

/* One choice of an answer or a chunk. */
typedef struct vt_serve_choice_json {
    int32_t index;
    const char *text; /* the whole text, or a chunk's delta */
    size_t n_text;
    const char *finish_reason; /* "stop" or "length"; NULL: null (a chunk before its choice's last) */
    bool first;                /* a chunk: its choice's first (chat: the delta carries the role) */
    struct json_t *logprobs;   /* serve_logprobs.h's object, or NULL for null; the call takes it */
    /* chat: message.tool_calls (or a chunk's delta.tool_calls), or NULL for
     * none; the call takes it */
    struct json_t *tool_calls;
    bool null_content; /* chat answer: message.content is null (only tool calls) */
} vt_serve_choice_json;

/* {"error": {"message", "type", "param", "code"}} */
char *vt_serve_error_json(const vt_serve_error *err);
/* The whole answer of a non-streamed request: choices[0..n). */
char *vt_serve_completion_json(const vt_serve_ids *ids, vt_serve_choice_json *choices, size_t n,
                               const vt_serve_usage *usage);
/* One SSE event "data: {chunk}\n\n" of one choice (its text delta and
 * logprobs, its finish reason on its last), or with choice NULL the
 * usage-only chunk of stream_options.include_usage (choices empty). */
char *vt_serve_chunk_sse(const vt_serve_ids *ids, vt_serve_choice_json *choice, const vt_serve_usage *usage);
/* A JSON string of text, bytes that are not UTF-8 (and NUL) replaced by U+FFFD. */
struct json_t *vt_serve_json_text(const char *text, size_t n);
/* GET /v1/models. */
char *vt_serve_models_json(const char *alias, int64_t created);
/* GET /v1/models/{id}: the one model object. */
char *vt_serve_model_json(const char *alias, int64_t created);
/* POST /tokenize and /detokenize answers. */
char *vt_serve_tokens_json(const int32_t *ids, size_t n);
/* {"tokens": [{"id": ID, "piece": TEXT}, ...]} (llama-server's with_pieces):
 * piece(ctx, id, buf, cap) gives a token's text as snprintf would; a piece
 * that is not whole UTF-8 (part of a character) is its byte values. */
typedef int32_t (*vt_serve_piece_fn)(const void *ctx, int32_t id, char *buf, size_t cap);
char *vt_serve_token_pieces_json(const int32_t *ids, size_t n, vt_serve_piece_fn piece, const void *ctx);
char *vt_serve_content_json(const char *text, size_t n_text);

#endif
