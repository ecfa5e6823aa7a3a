/* serve_logprobs.h — one choice's log-probabilities as vt serve collects
 * and answers them.
 *
 * The engine thread appends what vt_batch_read_logprobs reports (rendering
 * each token to its bytes, which needs the batch); the HTTP side turns a
 * range of tokens into OpenAI's object, so a stream sends each chunk's own
 * tokens and a whole answer all of them:
 *   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs":
 *                [{"token", "logprob", "bytes"}]}], "refusal": null}
 *   completions: {"tokens", "token_logprobs", "top_logprobs": [{token:
 *                logprob}], "text_offset"}
 * "token" is the token's text with bytes that are not UTF-8 on their own
 * (part of a character) replaced by U+FFFD; "bytes" are its exact bytes.
 * A completions top_logprobs dict holds the N alternatives and the sampled
 * token (OpenAI's "up to logprobs + 1"); two tokens of the same text are one
 * key there, the more likely one's. text_offset counts bytes of the choice's
 * UTF-8 text (vt_batch_logprobs.text_offset: a byte the model produced that
 * is no character counts as the U+FFFD the text has in its place). A
 * log-probability of -inf (a token of probability 0) is
 * written -9999.0, as OpenAI does, since JSON has no infinity. */
#ifndef VT_SERVE_LOGPROBS_H
#define VT_SERVE_LOGPROBS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve_request.h"
#include "vt/vt.h"

typedef struct vt_serve_logprob_entry {
    int32_t id;    /* -1: no such alternative (written nowhere) */
    float logprob;
    size_t off;    /* its token's bytes in the arena */
    uint32_t len;
    int64_t text_offset; /* a sampled token's: where it begins in the choice's text */
} vt_serve_logprob_entry;

typedef struct vt_serve_logprobs {
    int32_t n_top;
    vt_serve_logprob_entry *e; /* [n_tokens * (1 + n_top)]: each token, then its alternatives */
    size_t n_tokens, cap_tokens;
    char *bytes; /* every entry's token bytes */
    size_t n_bytes, cap_bytes;
} vt_serve_logprobs;

/* Append the first n of src's tokens (n <= src->n_tokens: the caller leaves
 * out a final end-of-generation token, which is no part of the text); false
 * when out of memory (nothing appended). */
bool vt_serve_logprobs_append(vt_serve_logprobs *lp, const vt_batch *b, const vt_batch_logprobs *src, size_t n);
void vt_serve_logprobs_free(vt_serve_logprobs *lp);
/* No token's text offset past end (the text's length once a stop string cut it). */
void vt_serve_logprobs_clamp(vt_serve_logprobs *lp, int64_t end);

/* The object for tokens [from, to) in kind's shape (NULL: out of memory). */
json_t *vt_serve_logprobs_json(const vt_serve_logprobs *lp, vt_serve_kind kind, size_t from, size_t to);

#endif
