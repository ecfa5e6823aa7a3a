/* fuzz_serve_request.c — libFuzzer target for vt serve's request parsing
 * (core/server/serve_request.c): an HTTP body, as any client may send it,
 * becomes the engine's request or a 4xx naming the field.
 *
 * Input layout: byte 0 picks the endpoint (chat, completion, tokenize,
 * detokenize: its value mod 4); the rest is the body, verbatim. A byte 0 of
 * 0xf0 or more asks instead for a request's head ("Name: value" lines): its
 * framing headers are checked as the server checks them before reading a
 * body, and the whole text is escaped as the log escapes a path, into a
 * buffer of 1 + (byte 0 & 15) * 16 bytes.
 *
 * What must hold for every input, besides "no crash, no leak, no UB":
 *  - a refusal has status 400 (500 only for out of memory), a type and a
 *    message;
 *  - an accepted request is in the ranges the engine's vt_batch_add checks
 *    (so a parsed request never reaches it with a value the parser should
 *    have refused): a chat has >= 1 message with role system/user/assistant/tool
 *    and content; a completion has a prompt text or >= 1 id; ids >= 0;
 *    temperature >= 0, top_p in [0, 1], min_p in [0, 1], penalties in
 *    [-2, 2], max_tokens 0 (not given) or >= 1; at most 16 stop strings of
 *    1..256 bytes without NUL; n in 1..8; logprobs alternatives in 0..20
 *    (chat) or 0..5 (completions), none without logprobs;
 *  - what the server then builds from it is well-formed: a refusal's JSON
 *    answer is produced (never NULL: that would turn a 400 into a 500) and
 *    parses back with error.message; an accepted chat renders in every
 *    template family or is refused with a message; an answer carrying the
 *    request's own text (a completion's prompt, a chat's last message) as
 *    its generated text is produced, bad bytes and all, for each of its n
 *    choices, with logprobs (when asked) whose tokens are that text's
 *    bytes cut in pieces of 1..3 bytes (halves of characters included):
 *    the logprobs object parses back with one entry per piece; a chat with
 *    tools has that text parsed for Hermes-style calls, which the answer
 *    carries as tool_calls;
 *  - tool_choice is NONE without tools, and a named one has its name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "chat_template.h"
#include "serve_logprobs.h"
#include "serve_request.h"
#include "serve_response.h"
#include "tool_calls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail_check(const char *what) {
    fprintf(stderr, "fuzz_serve_request: invariant broken: %s\n", what);
    abort();
}

#define CHECK(cond)                     \
    do {                                \
        if (!(cond)) fail_check(#cond); \
    } while (0)

static void check_accepted(const vt_serve_request *r) {
    if (r->kind == VT_SERVE_CHAT) {
        CHECK(r->tool_choice == VT_TOOL_CHOICE_NONE || json_object_get(r->chat_input, "tools"));
        CHECK((r->tool_choice == VT_TOOL_CHOICE_NAMED) == (r->tool_choice_name != NULL));
        CHECK(r->n_messages >= 1);
        for (size_t i = 0; i < r->n_messages; i++) {
            const char *role = r->messages[i].role;
            CHECK(role && (strcmp(role, "system") == 0 || strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0 ||
                         strcmp(role, "tool") == 0));
            CHECK(r->messages[i].content != NULL);
        }
    }
    if (r->kind == VT_SERVE_COMPLETION) CHECK((r->prompt != NULL) != (r->n_ids > 0));
    if (r->kind == VT_SERVE_TOKENIZE) CHECK(r->prompt != NULL);
    for (size_t i = 0; i < r->n_ids; i++) CHECK(r->ids[i] >= 0);
    CHECK(isfinite(r->temperature) && r->temperature >= 0);
    CHECK(r->top_p >= 0 && r->top_p <= 1);
    CHECK(r->min_p >= 0 && r->min_p <= 1);
    CHECK(r->top_k >= -1);
    CHECK(r->presence_penalty >= -2 && r->presence_penalty <= 2);
    CHECK(r->frequency_penalty >= -2 && r->frequency_penalty <= 2);
    CHECK(r->max_tokens >= 0);
    CHECK(r->n_stop <= VT_SERVE_MAX_STOP);
    for (size_t i = 0; i < r->n_stop; i++) {
        size_t n = strlen(r->stop[i]);
        CHECK(n >= 1 && n <= VT_SERVE_MAX_STOP_BYTES);
    }
    if (r->kind == VT_SERVE_CHAT || r->kind == VT_SERVE_COMPLETION) {
        CHECK(r->n >= 1 && r->n <= VT_SERVE_MAX_CHOICES);
        CHECK(r->top_logprobs >= 0 && r->top_logprobs <= (r->kind == VT_SERVE_CHAT ? VT_SERVE_MAX_TOP_LOGPROBS
                                                                                    : VT_SERVE_MAX_COMPLETION_LOGPROBS));
        CHECK(r->logprobs || r->top_logprobs == 0);
    }
}

/* text as tokens of 1..3 bytes, each with made-up log-probabilities (the
 * first alternative is the token itself, the others its neighbours). */
static void fake_logprobs(const char *text, int32_t n_top, vt_serve_logprobs *lp) {
    memset(lp, 0, sizeof *lp);
    lp->n_top = n_top;
    const size_t n = strlen(text), row = 1 + (size_t)n_top;
    lp->e = calloc((n + 1) * row, sizeof *lp->e);
    lp->bytes = malloc(n + 1);
    CHECK(lp->e && lp->bytes);
    memcpy(lp->bytes, text, n);
    lp->n_bytes = n;
    for (size_t off = 0, t = 0; off < n; t++) {
        const uint32_t len = (uint32_t)(1 + (off + t) % 3 < n - off ? 1 + (off + t) % 3 : n - off);
        vt_serve_logprob_entry *e = lp->e + t * row;
        e[0] = (vt_serve_logprob_entry){(int32_t)t, -(float)t, off, len, (int64_t)off};
        for (int32_t k = 0; k < n_top; k++)
            e[1 + k] = (vt_serve_logprob_entry){k == n_top - 1 && t % 2 ? -1 : (int32_t)k,
                                                k == 1 ? -INFINITY : -(float)k, off, len, 0};
        off += len;
        lp->n_tokens = t + 1;
    }
}

/* The logprobs object has one token per piece of lp. */
static void check_logprobs_json(json_t *o, vt_serve_kind kind, size_t n_tokens) {
    CHECK(o != NULL);
    char *dumped = json_dumps(o, JSON_COMPACT);
    CHECK(dumped != NULL); /* no NaN or infinity: JSON would refuse it */
    json_t *back = json_loads(dumped, 0, NULL);
    CHECK(back != NULL);
    json_t *list = json_object_get(back, kind == VT_SERVE_CHAT ? "content" : "tokens");
    CHECK(json_is_array(list) && json_array_size(list) == n_tokens);
    if (kind != VT_SERVE_CHAT) {
        CHECK(json_array_size(json_object_get(back, "token_logprobs")) == n_tokens);
        CHECK(json_array_size(json_object_get(back, "top_logprobs")) == n_tokens);
        CHECK(json_array_size(json_object_get(back, "text_offset")) == n_tokens);
    }
    json_decref(back);
    free(dumped);
    json_decref(o);
}

/* The refusal as the client would get it. */
static void check_error_answer(const vt_serve_error *err) {
    char *body = vt_serve_error_json(err);
    CHECK(body != NULL);
    json_error_t jerr;
    json_t *root = json_loads(body, 0, &jerr);
    CHECK(root != NULL);
    json_t *msg = json_object_get(json_object_get(root, "error"), "message");
    CHECK(json_is_string(msg) && json_string_length(msg) > 0);
    json_decref(root);
    free(body);
}

/* What the engine and the answer would make of an accepted request. */
static void check_downstream(const vt_serve_request *r) {
    const char *text = r->prompt;
    if (r->kind == VT_SERVE_CHAT) {
        vt_chat_message msgs[8];
        size_t n = r->n_messages < 8 ? r->n_messages : 8;
        for (size_t i = 0; i < n; i++) {
            const char *role = r->messages[i].role;
            msgs[i].role = strcmp(role, "system") == 0 ? VT_CHAT_SYSTEM
                           : strcmp(role, "user") == 0 ? VT_CHAT_USER
                                                       : VT_CHAT_ASSISTANT;
            msgs[i].content = r->messages[i].content;
        }
        for (int f = 0; f < VT_CHAT_N_FAMILIES; f++) {
            char *out = NULL, err[256] = "";
            size_t len = 0;
            if (vt_chat_render((vt_chat_family)f, msgs, n, true, &out, &len, err, sizeof err)) {
                CHECK(out != NULL && strlen(out) == len);
                free(out);
            } else {
                CHECK(err[0] != '\0');
            }
        }
        text = r->messages[n - 1].content;
    }
    if (text) {
        vt_serve_ids ids = {r->kind, "cmpl-fuzz", 0, "model", r->include_usage};
        vt_serve_usage usage = {1, 1, 0};
        vt_serve_logprobs lp;
        fake_logprobs(text, r->top_logprobs, &lp);
        if (r->logprobs) check_logprobs_json(vt_serve_logprobs_json(&lp, r->kind, 0, lp.n_tokens), r->kind,
                                             lp.n_tokens);
        vt_serve_choice_json choices[VT_SERVE_MAX_CHOICES];
        const int32_t n = r->n >= 1 && r->n <= VT_SERVE_MAX_CHOICES ? r->n : 1;
        for (int32_t i = 0; i < n; i++) {
            /* a chat with tools: the text parsed for calls as the server does */
            vt_tool_parse parsed = {.content_len = strlen(text)};
            if (r->kind == VT_SERVE_CHAT && r->tool_choice != VT_TOOL_CHOICE_NONE)
                CHECK(vt_tool_calls_parse(VT_TOOL_FORMAT_HERMES, text, strlen(text),
                                          json_object_get(r->chat_input, "tools"), SIZE_MAX, &parsed));
            choices[i] = (vt_serve_choice_json){
                .index = i,
                .text = text,
                .n_text = parsed.content_len,
                .finish_reason = parsed.calls ? "tool_calls" : i % 2 ? "length" : "stop",
                .logprobs = r->logprobs ? vt_serve_logprobs_json(&lp, r->kind, 0, lp.n_tokens) : NULL,
                .tool_calls = parsed.calls,
                .null_content = parsed.calls && parsed.content_len == 0,
            };
        }
        char *body = vt_serve_completion_json(&ids, choices, (size_t)n, &usage);
        CHECK(body != NULL);
        free(body);
        vt_serve_choice_json chunk = {
            .index = n - 1,
            .text = text,
            .n_text = strlen(text),
            .first = true,
            .logprobs = r->logprobs ? vt_serve_logprobs_json(&lp, r->kind, lp.n_tokens / 2, lp.n_tokens) : NULL,
        };
        char *event = vt_serve_chunk_sse(&ids, &chunk, NULL);
        CHECK(event != NULL);
        free(event);
        if (r->include_usage) { /* the stream's usage chunk, no choices */
            event = vt_serve_chunk_sse(&ids, NULL, &usage);
            CHECK(event != NULL && strstr(event, "\"usage\"") != NULL);
            free(event);
        }
        vt_serve_logprobs_free(&lp);
    }
}

static bool only_digits(const char *s) {
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* A head's framing: refused exactly when two parsers could disagree on
 * where the body ends; the log's copy is printable ASCII, terminated, and
 * the input's own when it fits. */
static void check_head(const uint8_t *data, size_t size, size_t out_size) {
    char *text = malloc(size + 1);
    CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    char *out = malloc(out_size);
    CHECK(out != NULL);
    vt_serve_log_escape(text, out, out_size);
    size_t n_out = strlen(out);
    CHECK(n_out < out_size);
    for (size_t i = 0; i < n_out; i++) CHECK(out[i] >= 0x20 && out[i] < 0x7f);
    bool plain = true;
    for (size_t i = 0; text[i]; i++) plain = plain && text[i] >= 0x20 && text[i] < 0x7f && text[i] != '\\';
    if (plain && strlen(text) < out_size) CHECK(strcmp(out, text) == 0);
    free(out);

    /* "Name: value" lines, values trimmed as an HTTP parser trims them */
    enum { MAX_HEADERS = 32 };
    vt_serve_header h[MAX_HEADERS];
    size_t n = 0;
    for (char *line = text, *next; line && n < MAX_HEADERS; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *colon = strchr(line, ':');
        if (!colon) continue;
        *colon = '\0';
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t') value++;
        size_t len = strlen(value);
        while (len && (value[len - 1] == ' ' || value[len - 1] == '\t' || value[len - 1] == '\r')) value[--len] = '\0';
        h[n++] = (vt_serve_header){line, value};
    }
    const char *length = NULL;
    size_t n_codings = 0;
    bool ambiguous = false;
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(h[i].name, "Content-Length") == 0) {
            ambiguous = ambiguous || !only_digits(h[i].value) || (length && strcmp(length, h[i].value) != 0);
            length = h[i].value;
        } else if (strcasecmp(h[i].name, "Transfer-Encoding") == 0) {
            ambiguous = ambiguous || strcasecmp(h[i].value, "chunked") != 0 || n_codings > 0;
            n_codings++;
        }
    }
    ambiguous = ambiguous || (length && n_codings);
    vt_serve_error err;
    memset(&err, 0, sizeof err);
    bool ok = vt_serve_check_framing(h, n, &err);
    CHECK(ok == !ambiguous);
    if (!ok) {
        CHECK(err.status == 400 || err.status == 501);
        check_error_answer(&err);
    }
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] >= 0xf0) {
        check_head(data + 1, size - 1, 1 + (size_t)(data[0] & 15) * 16);
        return 0;
    }
    vt_serve_kind kind = (vt_serve_kind)(data[0] % 4);
    vt_serve_defaults d = {0.8f, 0.95f, 0.05f, 40};
    vt_serve_request r;
    vt_serve_error err;
    memset(&err, 0, sizeof err);
    if (vt_serve_parse_request(kind, (const char *)data + 1, size - 1, &d, &r, &err)) {
        CHECK(r.kind == kind);
        check_accepted(&r);
        if (kind == VT_SERVE_CHAT || kind == VT_SERVE_COMPLETION) check_downstream(&r);
        vt_serve_request_free(&r);
    } else {
        CHECK(err.status == 400 || err.status == 500);
        CHECK(err.type != NULL && err.message[0] != '\0');
        CHECK(r.messages == NULL && r.prompt == NULL && r.ids == NULL && r.n_stop == 0);
        check_error_answer(&err);
    }
    return 0;
}
