/* test_serve_tools.c — tool calls through a real `vt serve` on a random tiny
 * Qwen3 model with Qwen3's own template (Hermes-style <tool_call> syntax):
 * tool_choice "required" and a named function force a call whose arguments
 * parse and follow the tool's schema, whole and streamed (the streamed
 * deltas reassembled equal the whole answer's call under the same seed, for
 * n = 2 too, with the usage chunk); parallel_tool_calls false gives one
 * call; under "auto" an answer that is no call streams as the same content
 * as the whole answer, and with a response_format it is the schema's
 * document or a call; a full round trip (the call, a tool message with its
 * result, the final answer under "none" and "auto"); the 400s name their
 * field; and Llama 3.1's template on a Llama-vocabulary model, whose call is
 * a bare JSON object. The random models write a call only when the grammar
 * makes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_mini.h"
#include "serve_client.h"
#include "util.h"

#define MODEL "qwen3-tiny-q8_0.gguf"
#define TEMPLATE VT_TEST_DATA_DIR "/chat_templates/Qwen-Qwen3-0.6B.jinja"

#define TOOLS                                                                                                         \
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\","    \
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"enum\": [\"Paris\","  \
    " \"Oslo\"]}, \"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}}, \"required\": [\"city\","       \
    " \"days\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"local_time\", \"parameters\": {\"type\":"      \
    " \"object\", \"properties\": {\"zone\": {\"type\": \"string\", \"enum\": [\"UTC\", \"CET\"]}}, \"required\":"    \
    " [\"zone\"]}}}]"
#define USER "\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}]"

static serve_server server;
/* the server ask() and ask_streamed() talk to */
static serve_server *on = &server;

static int setup(void) {
    static const char *const args[] = {"--chat-template-file", TEMPLATE, "-c", "2048", NULL};
    return serve_start(&server, MODEL, "serve-tools.log", args) ? 0 : 1;
}

static int teardown(void) { return serve_stop(&server) == 0 ? 0 : 1; }

/* One call: its id, name and arguments text. */
typedef struct call {
    char id[64], name[64];
    char args[1024];
} call;

typedef struct answer {
    call calls[4];
    int n_calls;
    char finish[16];
    bool content_null;
    char content[4096];
} answer;

static void read_call(const json_value *c, call *out) {
    const json_value *id = json_get(c, "id"), *fn = json_get(c, "function");
    const json_value *name = fn ? json_get(fn, "name") : NULL, *args = fn ? json_get(fn, "arguments") : NULL;
    CU_ASSERT_TRUE(id && id->type == JSON_STRING && strncmp(id->str, "call_", 5) == 0);
    const json_value *type = json_get(c, "type");
    CU_ASSERT_TRUE(type && type->type == JSON_STRING && strcmp(type->str, "function") == 0);
    CU_ASSERT_TRUE(name && name->type == JSON_STRING && args && args->type == JSON_STRING);
    if (id && id->type == JSON_STRING) snprintf(out->id, sizeof out->id, "%s", id->str);
    if (name && name->type == JSON_STRING) snprintf(out->name, sizeof out->name, "%s", name->str);
    if (args && args->type == JSON_STRING) snprintf(out->args, sizeof out->args, "%s", args->str);
}

/* POST a chat body (non-streamed) and read choice `index`'s answer. */
static answer ask(const char *body, int index) {
    answer a = {0};
    serve_reply r = serve_http(on, "POST", "/v1/chat/completions", body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    if (r.status != 200) printf("\n  %ld %s\n", r.status, r.body.s ? r.body.s : "");
    json_value v;
    char err[128];
    if (r.body.s && json_parse(r.body.s, r.body.n, &v, err, sizeof err)) {
        const json_value *choices = json_get(&v, "choices");
        const json_value *ch = choices && (int)choices->n > index ? &choices->items[index] : NULL;
        const json_value *msg = ch ? json_get(ch, "message") : NULL;
        const json_value *fr = ch ? json_get(ch, "finish_reason") : NULL;
        if (fr && fr->type == JSON_STRING) snprintf(a.finish, sizeof a.finish, "%s", fr->str);
        const json_value *content = msg ? json_get(msg, "content") : NULL;
        a.content_null = content && content->type == JSON_NULL;
        if (content && content->type == JSON_STRING) snprintf(a.content, sizeof a.content, "%s", content->str);
        const json_value *tc = msg ? json_get(msg, "tool_calls") : NULL;
        for (size_t k = 0; tc && tc->type == JSON_ARRAY && k < tc->n && k < 4; k++) read_call(&tc->items[k], &a.calls[a.n_calls++]);
        json_free(&v);
    } else {
        CU_FAIL("the answer is not JSON");
    }
    serve_reply_free(&r);
    return a;
}

/* POST a streamed chat body; reassemble choice `index` from its deltas:
 * content concatenated, each call's id/name from its first delta and its
 * arguments from the fragments. *usage: a usage chunk came. */
static answer ask_streamed(const char *body, int index, bool *usage) {
    answer a = {0};
    *usage = false;
    serve_reply r = serve_http(on, "POST", "/v1/chat/completions", body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    bool done = false;
    for (const char *p = r.body.s; p && *p;) {
        const char *end = strstr(p, "\n\n");
        CU_ASSERT_PTR_NOT_NULL_FATAL(end);
        CU_ASSERT_TRUE(strncmp(p, "data: ", 6) == 0);
        if (strncmp(p + 6, "[DONE]", 6) == 0) {
            done = true;
            p = end + 2;
            continue;
        }
        json_value v;
        char err[128];
        CU_ASSERT_TRUE_FATAL(json_parse(p + 6, (size_t)(end - p - 6), &v, err, sizeof err));
        *usage |= json_get(&v, "usage") != NULL;
        const json_value *choices = json_get(&v, "choices");
        for (size_t c = 0; choices && c < choices->n; c++) {
            const json_value *ch = &choices->items[c], *ix = json_get(ch, "index");
            if (!ix || (int)ix->number != index) continue;
            const json_value *delta = json_get(ch, "delta"), *fr = json_get(ch, "finish_reason");
            if (fr && fr->type == JSON_STRING) {
                CU_ASSERT_EQUAL(a.finish[0], 0); /* one finish per choice */
                snprintf(a.finish, sizeof a.finish, "%s", fr->str);
            }
            const json_value *content = delta ? json_get(delta, "content") : NULL;
            if (content && content->type == JSON_STRING)
                strncat(a.content, content->str, sizeof a.content - strlen(a.content) - 1);
            const json_value *tc = delta ? json_get(delta, "tool_calls") : NULL;
            for (size_t k = 0; tc && k < tc->n; k++) {
                const json_value *t = &tc->items[k], *tk = json_get(t, "index");
                CU_ASSERT_TRUE_FATAL(tk && tk->type == JSON_NUMBER && tk->number >= 0 && tk->number < 4);
                int at = (int)tk->number;
                const json_value *fn = json_get(t, "function");
                const json_value *args = fn ? json_get(fn, "arguments") : NULL;
                if (json_get(t, "id")) { /* a call's first delta: id, type, name */
                    CU_ASSERT_EQUAL(at, a.n_calls);
                    read_call(t, &a.calls[at]);
                    a.n_calls = at + 1;
                } else if (args && args->type == JSON_STRING && at < a.n_calls) {
                    strncat(a.calls[at].args, args->str, sizeof a.calls[at].args - strlen(a.calls[at].args) - 1);
                } else {
                    CU_FAIL("an arguments delta before its call's first delta");
                }
            }
        }
        json_free(&v);
        p = end + 2;
    }
    CU_ASSERT_TRUE(done);
    serve_reply_free(&r);
    return a;
}

/* The arguments are JSON valid under get_weather's schema. */
static void check_weather_args(const char *args) {
    json_value v;
    char err[128];
    CU_ASSERT_TRUE_FATAL(json_parse(args, strlen(args), &v, err, sizeof err));
    CU_ASSERT_EQUAL(v.type, JSON_OBJECT);
    CU_ASSERT_EQUAL(v.n, 2);
    const json_value *city = json_get(&v, "city"), *days = json_get(&v, "days");
    CU_ASSERT_TRUE(city && city->type == JSON_STRING && (!strcmp(city->str, "Paris") || !strcmp(city->str, "Oslo")));
    CU_ASSERT_TRUE(days && days->type == JSON_NUMBER && days->number >= 1 && days->number <= 7 &&
                   days->number == (double)(int)days->number);
    json_free(&v);
}

static void same_calls(const answer *a, const answer *b) {
    CU_ASSERT_EQUAL(a->n_calls, b->n_calls);
    for (int k = 0; k < a->n_calls && k < b->n_calls; k++) {
        CU_ASSERT_STRING_EQUAL(a->calls[k].name, b->calls[k].name);
        CU_ASSERT_STRING_EQUAL(a->calls[k].args, b->calls[k].args);
    }
}

/* A tool whose parameters schema says no type (as {} does): a forced
 * call's arguments are an object of it, and the answer is a call. */
static void test_forced_call_of_a_typeless_schema(void) {
    answer a = ask("{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"g\", \"parameters\": "
                   "{\"additionalProperties\": false}}}], "
                   "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"g\"}}, \"seed\": 3, "
                   "\"max_tokens\": 200}",
                   0);
    CU_ASSERT_STRING_EQUAL(a.finish, "tool_calls");
    CU_ASSERT_EQUAL(a.n_calls, 1);
    if (a.n_calls == 1) CU_ASSERT_STRING_EQUAL(a.calls[0].name, "g");
}

static void test_named_call_whole_and_streamed(void) {
    const char *named = "{" USER ", " TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
                        "\"get_weather\"}}, \"seed\": 11, \"max_tokens\": 200%s}";
    char body[4096];
    snprintf(body, sizeof body, named, "");
    answer whole = ask(body, 0);
    CU_ASSERT_STRING_EQUAL(whole.finish, "tool_calls");
    CU_ASSERT_TRUE(whole.content_null);
    CU_ASSERT_EQUAL_FATAL(whole.n_calls, 1);
    CU_ASSERT_STRING_EQUAL(whole.calls[0].name, "get_weather");
    check_weather_args(whole.calls[0].args);

    snprintf(body, sizeof body, named, ", \"stream\": true");
    bool usage;
    answer streamed = ask_streamed(body, 0, &usage);
    CU_ASSERT_STRING_EQUAL(streamed.finish, "tool_calls");
    CU_ASSERT_STRING_EQUAL(streamed.content, "");
    CU_ASSERT_FALSE(usage);
    same_calls(&whole, &streamed);
    /* a fresh id per call */
    CU_ASSERT_STRING_NOT_EQUAL(whole.calls[0].id, streamed.calls[0].id);
}

/* "required", n = 2, one call each (parallel_tool_calls false), streamed
 * with the usage chunk: each choice's call equals the whole answer's. */
static void test_required_n2_streamed_with_usage(void) {
    const char *req = "{" USER ", " TOOLS ", \"tool_choice\": \"required\", \"parallel_tool_calls\": false, \"n\": 2, "
                      "\"temperature\": 1.0, \"seed\": 5, \"max_tokens\": 200%s}";
    char body[4096];
    snprintf(body, sizeof body, req, "");
    answer whole[2] = {ask(body, 0), ask(body, 1)};
    snprintf(body, sizeof body, req, ", \"stream\": true, \"stream_options\": {\"include_usage\": true}");
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_STRING_EQUAL(whole[i].finish, "tool_calls");
        CU_ASSERT_EQUAL(whole[i].n_calls, 1);
        CU_ASSERT_TRUE(!strcmp(whole[i].calls[0].name, "get_weather") || !strcmp(whole[i].calls[0].name, "local_time"));
        if (!strcmp(whole[i].calls[0].name, "get_weather")) check_weather_args(whole[i].calls[0].args);
        bool usage;
        answer streamed = ask_streamed(body, i, &usage);
        CU_ASSERT_TRUE(usage);
        CU_ASSERT_STRING_EQUAL(streamed.finish, "tool_calls");
        same_calls(&whole[i], &streamed);
    }
}

/* "auto" on a random model: no call, so the text held back while it might
 * have been one is all released: the stream's content is the whole answer's. */
static void test_auto_without_a_call_streams_all_content(void) {
    const char *req = "{" USER ", " TOOLS ", \"tool_choice\": \"auto\", \"seed\": 3, \"max_tokens\": 40%s}";
    char body[4096];
    snprintf(body, sizeof body, req, "");
    answer whole = ask(body, 0);
    CU_ASSERT_EQUAL(whole.n_calls, 0);
    CU_ASSERT_FALSE(whole.content_null);
    CU_ASSERT_TRUE(strlen(whole.content) > 0);
    CU_ASSERT_TRUE(!strcmp(whole.finish, "stop") || !strcmp(whole.finish, "length"));
    snprintf(body, sizeof body, req, ", \"stream\": true");
    bool usage;
    answer streamed = ask_streamed(body, 0, &usage);
    CU_ASSERT_EQUAL(streamed.n_calls, 0);
    CU_ASSERT_STRING_EQUAL(streamed.content, whole.content);
    CU_ASSERT_STRING_EQUAL(streamed.finish, whole.finish);
}

/* "auto" with a response_format: the answer is either the schema's
 * document or calls (agent frameworks send both). The random model takes
 * each branch for some seeds; every answer is whole in its own kind. A
 * forced call with a response_format is the call (the format is for the
 * answer after the tools' results). */
static void test_auto_with_response_format_answers_or_calls(void) {
    const char *req = "{" USER ", " TOOLS ", \"tool_choice\": \"auto\", \"parallel_tool_calls\": false, "
                      "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"verdict\", "
                      "\"schema\": {\"type\": \"object\", \"properties\": {\"answer\": {\"enum\": [\"yes\", \"no\"]}}, "
                      "\"required\": [\"answer\"], \"additionalProperties\": false}}}, \"seed\": %d, \"max_tokens\": 200}";
    int documents = 0, calls = 0;
    /* 64 seeds: about three answers in ten are documents here (19 on the
     * AVX-512 machine), so both kinds come on a backend whose logits differ
     * in the last bits too (all calls: a chance of 0.7^64, below 1e-9) */
    for (int seed = 1; seed <= 64; seed++) {
        char body[4096];
        snprintf(body, sizeof body, req, seed);
        answer a = ask(body, 0);
        if (a.n_calls > 0) {
            calls++;
            CU_ASSERT_STRING_EQUAL(a.finish, "tool_calls");
            CU_ASSERT_EQUAL(a.n_calls, 1);
            CU_ASSERT_TRUE(a.content_null);
            if (!strcmp(a.calls[0].name, "get_weather")) check_weather_args(a.calls[0].args);
            else CU_ASSERT_STRING_EQUAL(a.calls[0].name, "local_time");
        } else {
            documents++;
            CU_ASSERT_STRING_EQUAL(a.finish, "stop");
            json_value v;
            char err[128];
            CU_ASSERT_TRUE_FATAL(json_parse(a.content, strlen(a.content), &v, err, sizeof err));
            const json_value *answer = json_get(&v, "answer");
            CU_ASSERT_TRUE(v.type == JSON_OBJECT && v.n == 1 && answer && answer->type == JSON_STRING &&
                           (!strcmp(answer->str, "yes") || !strcmp(answer->str, "no")));
            json_free(&v);
        }
    }
    printf(" (%d documents, %d calls) ", documents, calls);
    CU_ASSERT_TRUE(documents > 0 && calls > 0);

    answer forced = ask("{" USER ", " TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
                        "\"local_time\"}}, \"response_format\": {\"type\": \"json_object\"}, \"seed\": 4, "
                        "\"max_tokens\": 200}",
                        0);
    CU_ASSERT_STRING_EQUAL(forced.finish, "tool_calls");
    CU_ASSERT_EQUAL_FATAL(forced.n_calls, 1);
    CU_ASSERT_STRING_EQUAL(forced.calls[0].name, "local_time");
}

/* The call, its result as a tool message, the final answer. */
static void test_round_trip(void) {
    char body[8192];
    snprintf(body, sizeof body,
             "{" USER ", " TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}},"
             " \"seed\": 2, \"max_tokens\": 200}");
    answer first = ask(body, 0);
    CU_ASSERT_EQUAL_FATAL(first.n_calls, 1);
    /* the arguments string goes back as the client got it (a JSON string) */
    char quoted[2048] = "";
    size_t q = 0;
    for (const char *p = first.calls[0].args; *p && q + 3 < sizeof quoted; p++) {
        if (*p == '"' || *p == '\\') quoted[q++] = '\\';
        quoted[q++] = *p;
    }
    quoted[q] = 0;
    const char *chats[] = {"none", "auto"};
    for (int i = 0; i < 2; i++) {
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", "
                 "\"content\": null, \"tool_calls\": [{\"id\": \"%s\", \"type\": \"function\", \"function\": {\"name\": "
                 "\"get_weather\", \"arguments\": \"%s\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"%s\", "
                 "\"content\": \"sunny, 21 C\"}], " TOOLS ", \"tool_choice\": \"%s\", \"seed\": 2, \"max_tokens\": 24}",
                 first.calls[0].id, quoted, first.calls[0].id, chats[i]);
        answer final = ask(body, 0);
        CU_ASSERT_EQUAL(final.n_calls, 0);
        CU_ASSERT_FALSE(final.content_null);
        CU_ASSERT_TRUE(!strcmp(final.finish, "stop") || !strcmp(final.finish, "length"));
        /* the template saw the call and its result */
        serve_reply r = serve_http(&server, "POST", "/apply-template", body, NULL);
        CU_ASSERT_EQUAL(r.status, 200);
        CU_ASSERT_PTR_NOT_NULL(r.body.s && strstr(r.body.s, "sunny, 21 C") ? r.body.s : NULL);
        CU_ASSERT_PTR_NOT_NULL(r.body.s && strstr(r.body.s, "<tool_call>") ? r.body.s : NULL);
        serve_reply_free(&r);
    }
}

/* Llama 3.1's template on a Llama-vocabulary model: the forced call is the
 * bare {"name", "parameters"} object, parsed back whole and streamed. */
static void test_llama3_syntax(void) {
    static const char *const args[] = {"--chat-template-file",
                                       VT_TEST_DATA_DIR "/chat_templates/meta-llama-Llama-3.1-8B-Instruct.jinja", "-c",
                                       "2048", NULL};
    serve_server llama;
    CU_ASSERT_FATAL(serve_start(&llama, "aidreams260k-f32.gguf", "serve-tools-llama.log", args));
    on = &llama;
    const char *req = "{" USER ", " TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
                      "\"get_weather\"}}, \"seed\": 1, \"max_tokens\": 400%s}";
    char body[4096];
    snprintf(body, sizeof body, req, "");
    answer whole = ask(body, 0);
    CU_ASSERT_STRING_EQUAL(whole.finish, "tool_calls");
    CU_ASSERT_TRUE(whole.content_null);
    CU_ASSERT_EQUAL(whole.n_calls, 1);
    CU_ASSERT_STRING_EQUAL(whole.calls[0].name, "get_weather");
    check_weather_args(whole.calls[0].args);
    snprintf(body, sizeof body, req, ", \"stream\": true");
    bool usage;
    answer streamed = ask_streamed(body, 0, &usage);
    CU_ASSERT_STRING_EQUAL(streamed.finish, "tool_calls");
    CU_ASSERT_STRING_EQUAL(streamed.content, "");
    same_calls(&whole, &streamed);
    on = &server;
    CU_ASSERT_EQUAL(serve_stop(&llama), 0);
}

static void expect_400(const char *body, const char *param) {
    serve_reply r = serve_http(&server, "POST", "/v1/chat/completions", body, NULL);
    CU_ASSERT_EQUAL(r.status, 400);
    char *got = serve_error_param(&r);
    bool named = got && strcmp(got, param) == 0;
    free(got);
    CU_ASSERT_TRUE(named);
    if (r.status != 400 || !named) printf("\n  want 400 naming %s: %ld %s\n", param, r.status, r.body.s ? r.body.s : "");
    serve_reply_free(&r);
}

static void test_refusals_name_the_field(void) {
    expect_400("{" USER ", " TOOLS ", \"tool_choice\": \"sometimes\"}", "tool_choice");
    expect_400("{" USER ", " TOOLS ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}",
               "tool_choice.function.name");
    expect_400("{" USER ", " TOOLS ", \"tool_choice\": {\"type\": \"function\"}}", "tool_choice.function.name");
    expect_400("{" USER ", " TOOLS ", \"tool_choice\": {\"type\": \"code\", \"function\": {\"name\": \"nope\"}}}",
               "tool_choice");
    expect_400("{" USER ", \"tool_choice\": \"required\"}", "tool_choice");
    expect_400("{" USER ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}}",
               "tool_choice.function.name");
    expect_400("{" USER ", " TOOLS ", \"parallel_tool_calls\": \"yes\"}", "parallel_tool_calls");
    /* OpenAI's function names, and parameters that are an object's schema */
    static const char *const bad_names[] = {"", "has space", "a\\\"b", "\\u00fcn",
                                            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        char body[512];
        snprintf(body, sizeof body, "{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"%s\"}}]}",
                 bad_names[i]);
        expect_400(body, "tools[0].function.name");
    }
    static const char *const bad_params[] = {"\"str\"", "{\"type\": \"string\", \"enum\": [\"x\"]}",
                                             "{\"type\": \"array\"}", "5"};
    for (size_t i = 0; i < sizeof bad_params / sizeof *bad_params; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"g\", \"parameters\": %s}}]}",
                 bad_params[i]);
        expect_400(body, "tools[0].function.parameters");
    }
    /* a description that is not a string would reach the template (which
     * joins it to text) and fail there, naming the messages */
    expect_400("{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"t\", \"description\": 5}}]}",
               "tools[0].function.description");
    /* a reference to nothing is named as the client wrote it, not as the
     * call's wrapper rebased it */
    serve_reply r = serve_http(&server, "POST", "/v1/chat/completions",
                               "{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                               "\"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"$ref\": "
                               "\"#/$defs/Nope\"}}}}}], \"tool_choice\": \"required\"}",
                               NULL);
    CU_ASSERT_EQUAL(r.status, 400);
    CU_ASSERT(r.body.s && strstr(r.body.s, "'#/$defs/Nope' points to nothing") && !strstr(r.body.s, "/arguments/"));
    serve_reply_free(&r);
    /* template variables the request's own fields set are not set twice */
    expect_400("{" USER ", \"chat_template_kwargs\": {\"tools\": 5}}", "chat_template_kwargs.tools");
    expect_400("{" USER ", \"chat_template_kwargs\": {\"messages\": []}}", "chat_template_kwargs.messages");
    /* a schema the grammar converter refuses, when its grammar is made (a
     * forced call, or "auto" beside a constrained answer): the tools are at
     * fault, named so whatever asked for the grammar */
    expect_400("{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\":"
               " \"object\", \"not\": {}}}}], \"tool_choice\": \"required\"}",
               "tools");
    expect_400("{" USER ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\":"
               " \"object\", \"not\": {}}}}], \"response_format\": {\"type\": \"json_object\"}}",
               "tools");
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    static CU_TestInfo tests[] = {
        {"a named call, whole and streamed", test_named_call_whole_and_streamed},
        {"a forced call of a tool whose schema names no type", test_forced_call_of_a_typeless_schema},
        {"required, n=2, one call each, streamed with usage", test_required_n2_streamed_with_usage},
        {"auto without a call streams all its content", test_auto_without_a_call_streams_all_content},
        {"auto with a response_format: a document or calls", test_auto_with_response_format_answers_or_calls},
        {"round trip: call, tool result, final answer", test_round_trip},
        {"refusals name the field", test_refusals_name_the_field},
        {"Llama 3.1's JSON call syntax", test_llama3_syntax},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("serve tool calls", setup, teardown, tests);
    return vt_test_run();
}
