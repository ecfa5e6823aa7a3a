/* tool_calls.h — the tool calls in a model's answer, in the syntax its
 * family was trained to write, and the grammar that makes a model write one.
 *
 * The syntax is chosen from the chat template's text (vt_tool_format_detect):
 * a template that shows the model how to call tools spells out its markers.
 * Parsing is all or nothing: an answer is either content followed by calls
 * that all parse, name tools the request gave and leave nothing but
 * whitespace after them, or it is all content — text that only looks like a
 * call is never half-turned into one. No HTTP here: serve_http.c turns the
 * result into OpenAI's message.tool_calls and streamed deltas. */
#ifndef VT_SERVER_TOOL_CALLS_H
#define VT_SERVER_TOOL_CALLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum vt_tool_format {
    VT_TOOL_FORMAT_NONE = 0, /* the template shows no call syntax vt knows: answers stay content */
    /* Hermes / Qwen: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one or more */
    VT_TOOL_FORMAT_HERMES,
    /* Llama 3.x: the whole answer a JSON object {"name": ..., "parameters": {...}},
     * or <|python_tag|> followed by one */
    VT_TOOL_FORMAT_LLAMA3,
    /* Mistral: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...], or
     * [TOOL_CALLS]name[ARGS]{...} repeated */
    VT_TOOL_FORMAT_MISTRAL,
} vt_tool_format;

/* The format a Jinja chat template's text shows (NONE if none). */
vt_tool_format vt_tool_format_detect(const char *template_text);
const char *vt_tool_format_name(vt_tool_format f);

typedef struct vt_tool_parse {
    /* bytes of the text that are content: all of it when there are no
     * calls, else what precedes the first call without trailing whitespace */
    size_t content_len;
    /* [{"id": "call_...", "type": "function", "function": {"name", "arguments"
     * (a JSON string)}}, ...], or NULL when the text holds no calls */
    json_t *calls;
} vt_tool_parse;

/* Parse text (n bytes) against tools (the request's array of
 * {"type": "function", "function": {"name", ...}}). More than max_calls
 * calls is no calls (all content). False only when memory runs out. */
bool vt_tool_calls_parse(vt_tool_format f, const char *text, size_t n, const json_t *tools, size_t max_calls,
                         vt_tool_parse *out);

/* While an answer streams: how many leading bytes of the text so far are
 * content whatever comes next. The rest (a marker, the start of one, the
 * whitespace before it, or a Llama answer that opens with '{') is held back
 * until the answer ends and is parsed whole. Never shrinks as text grows. */
size_t vt_tool_calls_content_prefix(vt_tool_format f, const char *text, size_t n);

/* A call's arguments object as the `arguments` string: compact JSON, keys in
 * the order written, every real as Python's json.dumps writes it, with the
 * fewest digits that read back to the same double (the number the model
 * wrote, where a double holds it). malloc'ed; NULL when out of memory. */
char *vt_tool_arguments_text(const json_t *args);

/* The GBNF grammar of a forced call in format f: one call of the tool named
 * `name`, or (name NULL) of any of tools — several in a row when `several`
 * and the format writes them so. The arguments follow each tool's
 * "parameters" JSON Schema (json_schema_gbnf.h). NULL with err ("NAME: why",
 * naming the tool whose schema is refused) when it cannot be built. */
char *vt_tool_call_gbnf(vt_tool_format f, const json_t *tools, const char *name, bool several, char *err,
                        size_t err_size);

#endif
