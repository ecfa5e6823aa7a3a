/* fuzz_serve_request.c — libFuzzer target for vt serve's request parsing
 * (core/server/serve_request.c): an HTTP body, as any client may send it,
 * becomes the engine's request or a 4xx naming the field.
 *
 * Input layout: byte 0 picks the endpoint (chat, completion, tokenize,
 * detokenize: its value mod 4); the rest is the body, verbatim.
 *
 * What must hold for every input, besides "no crash, no leak, no UB":
 *  - a refusal has status 400 (500 only for out of memory), a type and a
 *    message;
 *  - an accepted request is in the ranges the engine's vt_batch_add checks
 *    (so a parsed request never reaches it with a value the parser should
 *    have refused): a chat has >= 1 message with role system/user/assistant
 *    and content; a completion has a prompt text or >= 1 id; ids >= 0;
 *    temperature >= 0, top_p in (0, 1], min_p in [0, 1], penalties in
 *    [-2, 2], max_tokens 0 (not given) or >= 1; at most 16 stop strings of
 *    1..256 bytes without NUL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_request.h"

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
        CHECK(r->n_messages >= 1);
        for (size_t i = 0; i < r->n_messages; i++) {
            const char *role = r->messages[i].role;
            CHECK(role && (strcmp(role, "system") == 0 || strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0));
            CHECK(r->messages[i].content != NULL);
        }
    }
    if (r->kind == VT_SERVE_COMPLETION) CHECK((r->prompt != NULL) != (r->n_ids > 0));
    if (r->kind == VT_SERVE_TOKENIZE) CHECK(r->prompt != NULL);
    for (size_t i = 0; i < r->n_ids; i++) CHECK(r->ids[i] >= 0);
    CHECK(isfinite(r->temperature) && r->temperature >= 0);
    CHECK(r->top_p > 0 && r->top_p <= 1);
    CHECK(r->min_p >= 0 && r->min_p <= 1);
    CHECK(r->top_k >= 0);
    CHECK(r->presence_penalty >= -2 && r->presence_penalty <= 2);
    CHECK(r->frequency_penalty >= -2 && r->frequency_penalty <= 2);
    CHECK(r->max_tokens >= 0);
    CHECK(r->n_stop <= VT_SERVE_MAX_STOP);
    for (size_t i = 0; i < r->n_stop; i++) {
        size_t n = strlen(r->stop[i]);
        CHECK(n >= 1 && n <= VT_SERVE_MAX_STOP_BYTES);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    vt_serve_kind kind = (vt_serve_kind)(data[0] % 4);
    vt_serve_defaults d = {0.8f, 0.95f, 0.05f, 40};
    vt_serve_request r;
    vt_serve_error err;
    memset(&err, 0, sizeof err);
    if (vt_serve_parse_request(kind, (const char *)data + 1, size - 1, &d, &r, &err)) {
        CHECK(r.kind == kind);
        check_accepted(&r);
        vt_serve_request_free(&r);
    } else {
        CHECK(err.status == 400 || err.status == 500);
        CHECK(err.type != NULL && err.message[0] != '\0');
        CHECK(r.messages == NULL && r.prompt == NULL && r.ids == NULL && r.n_stop == 0);
    }
    return 0;
}
