/* serve_choice_options.h — the request fields that shape a completion's
 * choices: n (how many) and logprobs (what each reports besides its text),
 * in OpenAI's two spellings:
 *   chat:        "n": 1..8, "logprobs": true|false, "top_logprobs": 0..20
 *                (top_logprobs only with logprobs true, as OpenAI requires);
 *   completions: "n": 1..8, "logprobs": 0..5 (the legacy API's integer: the
 *                sampled token's logprob and that many alternatives).
 * null is "not given" as everywhere; any other value out of these is a 400
 * naming the field. */
#ifndef VT_SERVE_CHOICE_OPTIONS_H
#define VT_SERVE_CHOICE_OPTIONS_H

#include <jansson.h>
#include <stdbool.h>

#include "serve_request.h"

/* Read n, logprobs and top_logprobs of a chat or completion body into r. */
bool vt_serve_parse_choice_options(const json_t *root, vt_serve_kind kind, vt_serve_request *r, vt_serve_error *err);

#endif
