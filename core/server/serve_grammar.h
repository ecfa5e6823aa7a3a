/* serve_grammar.h — the fields of a request that constrain its output:
 * OpenAI's response_format ({"type": "text" | "json_object" |
 * "json_schema", "json_schema": {"name", "schema", "strict",
 * "description"}}), and llama-server's grammar (GBNF text) and json_schema
 * (a schema) — one of them per request. Each becomes the GBNF grammar the
 * engine samples under (vt_batch_request.grammar), checked here so that a
 * bad one is a 400 naming its field before anything is queued. */
#ifndef VT_SERVE_GRAMMAR_H
#define VT_SERVE_GRAMMAR_H

#include <jansson.h>
#include <stdbool.h>

#include "serve_request.h"

/* *gbnf gets the grammar (malloc'ed) or NULL when the request asks for none.
 * False with err (400, or 500 out of memory). */
bool vt_serve_parse_grammar(const json_t *root, char **gbnf, vt_serve_error *err);

#endif
