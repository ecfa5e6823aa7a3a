/* test_serve_chat_template.c — vt serve renders chats with a Jinja template
 * through the real binary: --chat-template-file with Qwen3's own template,
 * POST /apply-template giving exactly the prompt Python's jinja2 renders
 * (tools, an assistant tool call whose arguments arrive as a JSON string and
 * reach the template as an object, a tool result, chat_template_kwargs'
 * enable_thinking false), a chat completion through it, 400s naming the
 * field for bad arguments and for what the built-in templates cannot render,
 * a template's raise_exception as a 400 naming its line, tools, tool calls
 * and tool results refused by a template that would drop them from the
 * prompt (Phi-3.5's), and one BOS when a
 * template writes bos_token itself (Llama 3.1's on a Llama vocabulary).
 * Needs python3-jinja2 for the expected prompt (bash .ci/install-deps). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_mini.h"
#include "serve_client.h"
#include "util.h"

#define TEMPLATES VT_TEST_DATA_DIR "/chat_templates/"

static const char chat_body[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"Use tools.\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Weather in \"}, {\"type\": \"text\", \"text\": \"Paris?\"}]},"
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\","
    "  \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"21 C\"},"
    "{\"role\": \"developer\", \"content\": \"Be brief.\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}],"
    " \"chat_template_kwargs\": {\"enable_thinking\": false}, \"max_tokens\": 2, \"temperature\": 0}";

/* The same chat as transformers hands it to the template: arguments parsed,
 * text parts joined, null content as "", developer as system. */
static const char reference_context[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"Use tools.\"},"
    "{\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": "
    "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, \"id\": \"call_1\"}]},"
    "{\"role\": \"tool\", \"content\": \"21 C\", \"tool_call_id\": \"call_1\"},"
    "{\"role\": \"system\", \"content\": \"Be brief.\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\","
    "  \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}],"
    " \"enable_thinking\": false, \"add_generation_prompt\": true, \"bos_token\": \"\", \"eos_token\": \"\"}";

/* jinja2's rendering of the reference chat with TEMPLATE (malloc'ed). */
static char *jinja2_prompt(const char *template_path, const char *context) {
    char dir[] = "/tmp/vt_serve_tmpl_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    char cases[256], results[256], cmd[1024];
    snprintf(cases, sizeof cases, "%s/cases.json", dir);
    snprintf(results, sizeof results, "%s/results.json", dir);
    FILE *f = fopen(cases, "w");
    fprintf(f, "[{\"template\": \"%s\", \"context\": %s}]", template_path, context);
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/jinja_reference.py %s %s", VT_SOURCE_DIR, cases, results);
    char *text = NULL;
    if (system(cmd) == 0) {
        f = fopen(results, "rb");
        char buf[65536];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        json_value v;
        char err[128];
        if (json_parse(buf, n, &v, err, sizeof err)) {
            const json_value *t = json_get(&v.items[0], "text");
            if (t) text = strdup(t->str);
            json_free(&v);
        }
    }
    unlink(cases);
    unlink(results);
    rmdir(dir);
    return text;
}

/* r is a 400 whose error names request field `param`. */
static void assert_refused_field(const serve_reply *r, const char *param) {
    CU_ASSERT_EQUAL(r->status, 400);
    char *got = serve_error_param(r);
    if (!got || strcmp(got, param) != 0) printf("\n  want param %s in %s\n", param, r->body.s ? r->body.s : "");
    CU_ASSERT(got && strcmp(got, param) == 0);
    free(got);
}

/* POST body to /apply-template: a 200 whose prompt contains want. */
static void assert_prompt_has(const serve_server *s, const char *body, const char *want) {
    serve_reply r = serve_http(s, "POST", "/apply-template", body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    char *prompt = serve_field(&r, "prompt", NULL);
    CU_ASSERT(prompt && strstr(prompt, want));
    if (!prompt || !strstr(prompt, want)) printf("\n  want %s in: %s\n", want, prompt ? prompt : r.body.s);
    free(prompt);
    serve_reply_free(&r);
}

/* Field a.b of r's JSON body as a number, or -1. */
static double field_number(const serve_reply *r, const char *a, const char *b) {
    json_value v;
    char err[128];
    if (!r->body.s || !json_parse(r->body.s, r->body.n, &v, err, sizeof err)) return -1;
    const json_value *x = json_get(&v, a);
    if (x && b) x = json_get(x, b);
    double d = x && x->type == JSON_NUMBER ? x->number : -1;
    json_free(&v);
    return d;
}

static void test_model_template_renders_as_jinja2_and_serves(void) {
    if (system("python3 -c 'import jinja2' >/dev/null 2>&1") != 0)
        CU_FAIL_FATAL("python3-jinja2 is not installed (bash .ci/install-deps)");
    static const char *const args[] = {"--chat-template-file", TEMPLATES "Qwen-Qwen3-0.6B.jinja", "-c", "1024", NULL};
    serve_server s;
    CU_ASSERT_FATAL(serve_start(&s, "qwen3-tiny-f32.gguf", "chat-template.log", args));

    serve_reply r = serve_http(&s, "POST", "/apply-template", chat_body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    char *prompt = serve_field(&r, "prompt", NULL);
    char *want = jinja2_prompt(TEMPLATES "Qwen-Qwen3-0.6B.jinja", reference_context);
    CU_ASSERT_PTR_NOT_NULL(prompt);
    CU_ASSERT_PTR_NOT_NULL(want);
    CU_ASSERT(prompt && want && strcmp(prompt, want) == 0);
    if (prompt && want && strcmp(prompt, want) != 0) printf("\n  vt:\n%s\n  jinja2:\n%s\n", prompt, want);
    /* the arguments reached the template as an object, dumped by tojson */
    CU_ASSERT(prompt && strstr(prompt, "\"arguments\": {\"city\": \"Paris\"}"));
    /* enable_thinking false: Qwen3's empty think block opens the answer */
    CU_ASSERT(prompt && strstr(prompt, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    free(prompt);
    free(want);
    serve_reply_free(&r);

    r = serve_http(&s, "POST", "/v1/chat/completions", chat_body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    char *object = serve_field(&r, "object", NULL);
    CU_ASSERT(object && strcmp(object, "chat.completion") == 0);
    free(object);
    serve_reply_free(&r);

    /* arguments that are not JSON (a model's, cut short) are taken as
     * OpenAI takes them, and reach the template as the string */
    assert_prompt_has(&s,
                      "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"tool_calls\": "
                      "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{not json\"}}]}]}",
                      "\"arguments\": {not json}");

    r = serve_http(&s, "POST", "/apply-template",
                   "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", NULL);
    assert_refused_field(&r, "messages[0].tool_call_id");
    serve_reply_free(&r);

    r = serve_http(&s, "POST", "/apply-template",
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": 3}", NULL);
    assert_refused_field(&r, "chat_template_kwargs");
    serve_reply_free(&r);
    /* what would make the template fail is the request's doing, a 400
     * naming the field (not a server error): a variable replacing a
     * function the template calls (this one calls namespace), a value
     * nested deeper than a render writes */
    r = serve_http(&s, "POST", "/v1/chat/completions",
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": "
                   "{\"namespace\": \"x\"}, \"max_tokens\": 1}",
                   NULL);
    assert_refused_field(&r, "chat_template_kwargs.namespace");
    serve_reply_free(&r);
    char deep[2600];
    int n = snprintf(deep, sizeof deep, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, "
                                        "{\"role\": \"assistant\", \"tool_calls\": [{\"type\": \"function\", "
                                        "\"function\": {\"name\": \"f\", \"arguments\": \"");
    for (int i = 0; i < 1000; i++) deep[n++] = '[';
    for (int i = 0; i < 1000; i++) deep[n++] = ']';
    snprintf(deep + n, sizeof deep - (size_t)n, "\"}}]}], \"max_tokens\": 1}");
    r = serve_http(&s, "POST", "/v1/chat/completions", deep, NULL);
    assert_refused_field(&r, "messages[1].tool_calls[0].function.arguments");
    serve_reply_free(&r);
    CU_ASSERT(serve_metric(&s, "vt_requests_total{status=\"500\"}") <= 0); /* 0, or no such series (-1) */
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
}

static void test_builtin_template_refuses_what_it_cannot_render(void) {
    static const char *const args[] = {"--chat-template", "chatml", "-c", "512", NULL};
    serve_server s;
    CU_ASSERT_FATAL(serve_start(&s, "qwen3-tiny-f32.gguf", "chat-template-builtin.log", args));
    serve_reply r = serve_http(&s, "POST", "/v1/chat/completions", chat_body, NULL);
    assert_refused_field(&r, "tools"); /* the request's tools come first */
    /* and says why, for a newcomer who did not pick the template */
    CU_ASSERT(r.body.s && strstr(r.body.s, "built-in chatml template renders no tools"));
    serve_reply_free(&r);
    r = serve_http(&s, "POST", "/apply-template", "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}", NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    char *prompt = serve_field(&r, "prompt", NULL);
    CU_ASSERT(prompt && strcmp(prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") == 0);
    free(prompt);
    serve_reply_free(&r);
    /* an assistant's refusal part, as OpenAI's API returns one, is what it said */
    assert_prompt_has(&s,
                      "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": "
                      "[{\"type\": \"refusal\", \"refusal\": \"I cannot.\"}]}], \"add_generation_prompt\": false}",
                      "<|im_start|>assistant\nI cannot.<|im_end|>");
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
}

/* Many clients render one Jinja template at once (each HTTP connection has
 * its thread): every answer is the prompt one client alone gets. The
 * template's values are shared, their reference counts plain integers:
 * renders at once used to lose counts and free what the template still
 * held (heap corruption within a thousand renders; ASan reports it at once). */
#define RENDER_CLIENTS 8
#define RENDERS_EACH 60

typedef struct render_client {
    const serve_server *s;
    const char *body, *want;
    int same, asked;
} render_client;

static void *render_main(void *arg) {
    render_client *c = arg;
    for (int i = 0; i < RENDERS_EACH; i++) {
        serve_reply r = serve_http(c->s, "POST", "/apply-template", c->body, NULL);
        char *prompt = r.status == 200 ? serve_field(&r, "prompt", NULL) : NULL;
        c->same += prompt && strcmp(prompt, c->want) == 0;
        c->asked++;
        free(prompt);
        serve_reply_free(&r);
    }
    return NULL;
}

/* 8 clients render body with the template at path RENDERS_EACH times each,
 * all at once. */
static void render_from_many_clients(const char *path, const char *body, const char *log) {
    const char *const args[] = {"--chat-template-file", path, "-c", "1024", NULL};
    serve_server s;
    CU_ASSERT_FATAL(serve_start(&s, "qwen3-tiny-f32.gguf", log, args));
    serve_reply r = serve_http(&s, "POST", "/apply-template", body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    char *want = r.status == 200 ? serve_field(&r, "prompt", NULL) : NULL;
    if (!want) printf("\n  %s: %s\n", path, r.body.s ? r.body.s : "");
    serve_reply_free(&r);
    CU_ASSERT_PTR_NOT_NULL(want);
    if (!want) {
        serve_stop(&s);
        return;
    }
    pthread_t threads[RENDER_CLIENTS];
    render_client clients[RENDER_CLIENTS];
    for (int i = 0; i < RENDER_CLIENTS; i++) {
        clients[i] = (render_client){&s, body, want, 0, 0};
        CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[i], NULL, render_main, &clients[i]), 0);
    }
    int same = 0, asked = 0;
    for (int i = 0; i < RENDER_CLIENTS; i++) {
        pthread_join(threads[i], NULL);
        same += clients[i].same;
        asked += clients[i].asked;
    }
    printf("\n  %s: %d of %d renders from %d clients at once equal one client's ", strrchr(path, '/') + 1, same,
           asked, RENDER_CLIENTS);
    CU_ASSERT_EQUAL(asked, RENDER_CLIENTS * RENDERS_EACH);
    CU_ASSERT_EQUAL(same, asked);
    free(want);
    CU_ASSERT_EQUAL(serve_stop(&s), 0); /* the server is still there, and stops cleanly */
}

static void test_one_template_rendered_by_many_clients_at_once(void) {
    render_from_many_clients(TEMPLATES "Qwen-Qwen3-0.6B.jinja", chat_body, "chat-template-threads.log");
    /* A template that stores its own literal into the request's messages,
     * 200 times: the last references to it go with the render's variables,
     * which must be released under the template's lock too. */
    char path[1024];
    vt_test_tmpfile(path, sizeof path, "appends-literals.jinja");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{%- for i in range(200) %}{% set _ = messages.append('a literal of the template') %}{% endfor %}"
          "{{ messages | length }} {{ messages[-1] }}",
          f);
    fclose(f);
    render_from_many_clients(path, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}",
                             "chat-template-threads-append.log");
}

/* /apply-template's rendering, sent as a /v1/completions prompt, is the
 * prompt the chat request has: a built-in family leaves the BOS to the
 * tokenizer, and completions add the vocabulary's (Llama 2's adds <s>), so
 * both count the same prompt tokens. */
static void test_builtin_template_renders_what_completions_take(void) {
    static const char *const args[] = {"--chat-template", "llama2", NULL};
    serve_server s;
    CU_ASSERT_FATAL(serve_start(&s, "aidreams260k-q8_0.gguf", "chat-template-builtin-bos.log", args));
    static const char chat[] = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 1}";
    serve_reply r = serve_http(&s, "POST", "/apply-template", chat, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    char *prompt = serve_field(&r, "prompt", NULL);
    CU_ASSERT(prompt && strcmp(prompt, "[INST] Hi [/INST]") == 0);
    serve_reply_free(&r);
    double counts[2] = {-1, -2};
    char completion[256];
    snprintf(completion, sizeof completion, "{\"prompt\": \"%s\", \"max_tokens\": 1}", prompt ? prompt : "");
    for (int k = 0; k < 2; k++) {
        r = serve_http(&s, "POST", k ? "/v1/completions" : "/v1/chat/completions", k ? completion : chat, NULL);
        json_value doc;
        char msg[128];
        if (r.body.s && json_parse(r.body.s, strlen(r.body.s), &doc, msg, sizeof msg)) {
            const json_value *n = json_get(json_get(&doc, "usage"), "prompt_tokens");
            counts[k] = n && n->type == JSON_NUMBER ? n->number : -1;
            json_free(&doc);
        }
        serve_reply_free(&r);
    }
    CU_ASSERT(counts[0] > 1 && counts[0] == counts[1]);
    if (counts[0] != counts[1]) printf("\n  chat %g prompt tokens, completion of its rendering %g", counts[0], counts[1]);
    free(prompt);
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
}

/* A template that writes no tools, tool calls or tool results (Phi-3.5's
 * has branches for system, user and assistant only): a request carrying
 * them is refused naming the part the model would never see, not answered
 * as if it had not sent it; a plain chat renders. */
static void test_template_ignoring_tools_refuses_them(void) {
    static const char *const args[] = {"--chat-template-file", TEMPLATES "microsoft-Phi-3.5-mini-instruct.jinja", "-c",
                                       "512", NULL};
    serve_server s;
    CU_ASSERT_FATAL(serve_start(&s, "qwen3-tiny-f32.gguf", "chat-template-no-tools.log", args));
    serve_reply r = serve_http(&s, "POST", "/apply-template", "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}",
                               NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    static const struct {
        const char *body, *param;
    } cases[] = {
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}], \"tools\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}}]}",
         "tools"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"tool_calls\": "
         "[{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{}\"}}]}]}",
         "messages[1].tool_calls"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": "
         "\"Looking.\"}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": \"21 C\"}]}",
         "messages[2]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        r = serve_http(&s, "POST", "/apply-template", cases[i].body, NULL);
        assert_refused_field(&r, cases[i].param);
        CU_ASSERT(r.body.s && strstr(r.body.s, "this chat template does not write"));
        serve_reply_free(&r);
    }
    r = serve_http(&s, "POST", "/v1/chat/completions", cases[0].body, NULL);
    assert_refused_field(&r, "tools");
    serve_reply_free(&r);
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
}

/* Llama 3.1's template writes bos_token and refuses two tool calls at once
 * with raise_exception. */
static void test_template_bos_once_and_its_errors_name_the_line(void) {
    static const char *const args[] = {"--chat-template-file", TEMPLATES "meta-llama-Llama-3.1-8B-Instruct.jinja", "-c",
                                       "1024", NULL};
    serve_server s;
    CU_ASSERT_FATAL(serve_start(&s, "aidreams260k-f32.gguf", "chat-template-bos.log", args));
    const char *chat = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 1}";
    serve_reply r = serve_http(&s, "POST", "/apply-template", chat, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    char *prompt = serve_field(&r, "prompt", NULL);
    serve_reply_free(&r);
    CU_ASSERT_PTR_NOT_NULL(prompt);
    if (!prompt) prompt = strdup("");
    CU_ASSERT_EQUAL(strncmp(prompt, "<s><|start_header_id|>system", 28), 0);
    /* The prompt's tokens with nothing added: BOS once, written by the template. */
    char body[8192];
    size_t at = (size_t)snprintf(body, sizeof body, "{\"add_special\": false, \"parse_special\": true, \"content\": \"");
    for (const char *p = prompt; *p && at < sizeof body - 8; p++) {
        if (*p == '\n') at += (size_t)snprintf(body + at, sizeof body - at, "\\n");
        else if (*p == '"' || *p == '\\') at += (size_t)snprintf(body + at, sizeof body - at, "\\%c", *p);
        else body[at++] = *p;
    }
    snprintf(body + at, sizeof body - at, "\"}");
    free(prompt);
    r = serve_http(&s, "POST", "/tokenize", body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    json_value v;
    char err[128];
    long n_tokens = -1;
    int n_bos = 0;
    if (r.body.s && json_parse(r.body.s, r.body.n, &v, err, sizeof err)) {
        const json_value *t = json_get(&v, "tokens");
        if (t) {
            n_tokens = (long)t->n;
            for (size_t i = 0; i < t->n; i++) n_bos += t->items[i].number == 1;
            CU_ASSERT(t->n > 0 && t->items[0].number == 1);
        }
        json_free(&v);
    }
    serve_reply_free(&r);
    CU_ASSERT_EQUAL(n_bos, 1);
    r = serve_http(&s, "POST", "/v1/chat/completions", chat, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_EQUAL(field_number(&r, "usage", "prompt_tokens"), (double)n_tokens);
    serve_reply_free(&r);

    r = serve_http(&s, "POST", "/apply-template",
                   "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"tool_calls\": ["
                   "{\"type\": \"function\", \"function\": {\"name\": \"a\", \"arguments\": \"{}\"}},"
                   "{\"type\": \"function\", \"function\": {\"name\": \"b\", \"arguments\": \"{}\"}}]}]}",
                   NULL);
    assert_refused_field(&r, "messages");
    /* the template's own refusal reaches the client, with where it failed */
    CU_ASSERT(r.body.s && strstr(r.body.s, "the chat template failed on this request: line "));
    CU_ASSERT(r.body.s && strstr(r.body.s, "only supports single tool-calls at once"));
    serve_reply_free(&r);
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
}

/* A tool may leave out "description" and "parameters" (OpenAI's API), but
 * templates write both of every tool (Hermes 3 reads
 * tool.parameters.properties, gpt-oss adds "// " + tool.description): the
 * template gets "" and the empty parameter list, and renders; a failure is
 * still a 400, which clients do not send again. */
static void test_tools_without_description_or_parameters(void) {
    static const char *const templates[] = {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
                                            "openai-gpt-oss-120b.jinja"};
    static const char *const written[] = {"\"name\": \"ping\", \"description\": \"ping() - ",
                                          "\"parameters\": {}} </tools>"};
    static const char *const written_gpt_oss = "// \ntype ping = () => any;";
    for (size_t i = 0; i < 2; i++) {
        char path[512], log[64];
        snprintf(path, sizeof path, "%s%s", TEMPLATES, templates[i]);
        snprintf(log, sizeof log, "tools-bare-%zu.log", i);
        const char *const args[] = {"--chat-template-file", path, "-c", "1024", NULL};
        serve_server s;
        CU_ASSERT_FATAL(serve_start(&s, "qwen3-tiny-f32.gguf", log, args));
        serve_reply r = serve_http(&s, "POST", "/apply-template",
                                   "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": "
                                   "[{\"type\": \"function\", \"function\": {\"name\": \"ping\"}}]}",
                                   NULL);
        CU_ASSERT_EQUAL(r.status, 200);
        char *prompt = serve_field(&r, "prompt", NULL);
        const bool as_expected = prompt && (i == 0 ? strstr(prompt, written[0]) && strstr(prompt, written[1])
                                                   : strstr(prompt, written_gpt_oss) != NULL);
        if (!as_expected) printf("\n  %s wrote:\n%s\n", templates[i], prompt ? prompt : "");
        CU_ASSERT(as_expected);
        free(prompt);
        serve_reply_free(&r);
        CU_ASSERT_EQUAL(serve_stop(&s), 0);
    }
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    static CU_TestInfo tests[] = {
        {"the model's template renders as jinja2 and serves", test_model_template_renders_as_jinja2_and_serves},
        {"a built-in template refuses what it cannot render", test_builtin_template_refuses_what_it_cannot_render},
        {"a built-in template's rendering is the prompt /v1/completions takes", test_builtin_template_renders_what_completions_take},
        {"a template's BOS once, its errors name the line", test_template_bos_once_and_its_errors_name_the_line},
        {"a template that ignores tools refuses them", test_template_ignoring_tools_refuses_them},
        {"one template rendered by many clients at once", test_one_template_rendered_by_many_clients_at_once},
        {"tools without description or parameters render", test_tools_without_description_or_parameters},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("serve chat template", NULL, NULL, tests);
    return vt_test_run();
}
