/* test_serve.c — `vt serve` end to end over real HTTP (libcurl).
 *
 * Two servers on free ports with the qwen3-tiny test model: the main one
 * (API key, chat template forced to chatml, 4 sequences, a 512-token context,
 * a 64 KiB body limit) for every endpoint, streaming, greedy identity with
 * `vt run --temp 0`, concurrency and the bad-input answers; a small one (one
 * sequence, one waiting request, a 2 s time limit, no chat template) for the
 * full queue, the time limit and the SIGTERM drain. Skipped only when vt
 * serve was not built (no libmicrohttpd/jansson at configure time). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "explain_parse.h"
#include "json_mini.h"
#include "serve_client.h"
#include "serve_gate.h"
#include "util.h"

#define MODEL "qwen3-tiny-q8_0.gguf"
#define KEY "test-key"
#define CTX 512
/* LONG_RUN_PROMPT: the tests that need a greedy request to run to its token
 * limit (length, not stop) prompt "Greetings": on this model it samples no
 * end-of-generation token in 4,000 greedy tokens on reference and on simd
 * (checked with vt run -p Greetings -n 4000 -c 4096 --temp 0). Which prompt
 * does so depends on the last bits of the logits: "Hello" ran 4,000 tokens
 * before simd's attention changed its summation order, 471 after. */

static serve_server main_srv, small_srv;
/* The small server runs on the step_gate test backend (serve_gate.h): the
 * tests that need a request still running or still waiting when something
 * happens (a time limit, a full queue, SIGTERM) hold its
 * engine before a forward, so that state is certain on a machine of any
 * speed rather than likely on the one the test was written on. A 10x faster
 * machine cannot step past a held gate; a 10x slower one only takes longer
 * to reach each held state, and every wait for one is bounded at 60 s for
 * what takes milliseconds here. */
static serve_gate small_gate;

/* ---- HTTP ----------------------------------------------------------------- */

static serve_reply post(const serve_server *s, const char *path, const char *body) {
    return serve_http(s, NULL, path, body, KEY);
}

/* ---- JSON answers ---------------------------------------------------------- */

static bool parse(const serve_reply *r, json_value *v) {
    char err[128];
    return r->body.s && json_parse(r->body.s, r->body.n, v, err, sizeof err);
}

static const json_value *path_get(const json_value *v, const char *a, const char *b) {
    const json_value *x = json_get(v, a);
    return x && b ? json_get(x, b) : x;
}

/* error.code is `code` (NULL: null). */
static void assert_error_code(const serve_reply *r, const char *code) {
    json_value v;
    CU_ASSERT_FATAL(parse(r, &v));
    const json_value *c = path_get(&v, "error", "code");
    const bool ok = c && (code ? c->type == JSON_STRING && strcmp(c->str, code) == 0 : c->type == JSON_NULL);
    if (!ok) fprintf(stderr, "expected error.code %s in %s\n", code ? code : "null", r->body.s);
    CU_ASSERT(ok);
    json_free(&v);
}

static const json_value *choice0(const json_value *v) {
    const json_value *c = json_get(v, "choices");
    return c && c->type == JSON_ARRAY && c->n > 0 ? &c->items[0] : NULL;
}

/* The error answer: status, and error.message/type present, error.param as
 * expected (NULL = null); error.code as OpenAI's for the case (NULL: null,
 * but on a 503, which says which). */
static void assert_error_as(const serve_reply *r, long status, const char *param, const char *code) {
    CU_ASSERT_EQUAL(r->status, status);
    if (status != 503 || code) assert_error_code(r, code);
    json_value v;
    CU_ASSERT_FATAL(parse(r, &v));
    const json_value *msg = path_get(&v, "error", "message"), *type = path_get(&v, "error", "type"),
                     *p = path_get(&v, "error", "param");
    CU_ASSERT(msg && msg->type == JSON_STRING && msg->len > 0);
    CU_ASSERT(type && type->type == JSON_STRING);
    CU_ASSERT_FATAL(p != NULL);
    if (param) {
        CU_ASSERT(p->type == JSON_STRING && strcmp(p->str, param) == 0);
        if (p->type != JSON_STRING || strcmp(p->str, param) != 0)
            fprintf(stderr, "expected param %s in %s\n", param, r->body.s);
    } else {
        CU_ASSERT(p->type == JSON_NULL);
    }
    json_free(&v);
}

static void assert_error(const serve_reply *r, long status, const char *param) {
    assert_error_as(r, status, param, NULL);
}

/* A greedy /v1/completions: its text (malloc'ed), finish reason and usage. */
typedef struct completion {
    char *text;
    char finish[16];
    long prompt_tokens, completion_tokens;
    long cached_tokens; /* usage.prompt_tokens_details.cached_tokens */
} completion;

static completion complete(const serve_server *s, const char *extra_json) {
    char body[4096];
    snprintf(body, sizeof body, "{\"model\":\"x\",%s}", extra_json);
    serve_reply r = post(s, "/v1/completions", body);
    completion c = {0};
    json_value v;
    CU_ASSERT_EQUAL(r.status, 200);
    if (r.status == 200 && parse(&r, &v)) {
        const json_value *ch = choice0(&v), *t = ch ? json_get(ch, "text") : NULL,
                         *f = ch ? json_get(ch, "finish_reason") : NULL;
        CU_ASSERT(t && t->type == JSON_STRING);
        if (t && t->type == JSON_STRING) c.text = strdup(t->str);
        if (f && f->type == JSON_STRING) snprintf(c.finish, sizeof c.finish, "%s", f->str);
        const json_value *pt = path_get(&v, "usage", "prompt_tokens"), *ct = path_get(&v, "usage", "completion_tokens"),
                         *tt = path_get(&v, "usage", "total_tokens");
        CU_ASSERT(pt && ct && tt && tt->number == pt->number + ct->number);
        if (pt && ct) c.prompt_tokens = (long)pt->number, c.completion_tokens = (long)ct->number;
        const json_value *details = json_get(json_get(&v, "usage"), "prompt_tokens_details");
        const json_value *cached = details ? json_get(details, "cached_tokens") : NULL;
        CU_ASSERT(cached && cached->type == JSON_NUMBER);
        if (cached) c.cached_tokens = (long)cached->number;
        const json_value *obj = json_get(&v, "object");
        CU_ASSERT(obj && obj->type == JSON_STRING && strcmp(obj->str, "text_completion") == 0);
        json_free(&v);
    }
    serve_reply_free(&r);
    return c;
}

/* ---- SSE ------------------------------------------------------------------- */

/* ---- servers --------------------------------------------------------------- */

static int suite_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    static const char *const main_args[] = {"--api-key", KEY, "--chat-template", "chatml", "-c", "512", "--parallel",
                                            "4", "--body-limit", "65536", "--model-alias", "tiny", "--explain", NULL};
    static const char *const small_args[] = {"--parallel", "1", "--max-waiting", "1", "--timeout", "2", "-c", "4096",
                                             NULL};
    return serve_start(&main_srv, MODEL, "main.log", main_args) && serve_gate_init(&small_gate, "small-gate") &&
                   serve_start_gated(&small_srv, &small_gate, MODEL, "small.log", small_args)
               ? 0
               : 1;
}

static int suite_cleanup(void) {
    if (main_srv.pid > 0) serve_stop(&main_srv);
    if (small_srv.pid > 0) serve_stop(&small_srv);
    curl_global_cleanup();
    return 0;
}

/* ---- tests ----------------------------------------------------------------- */

static size_t discard_body(char *p, size_t size, size_t n, void *user) {
    (void)p, (void)user;
    return size * n;
}

static void test_health_models_metrics(void) {
    serve_reply r = serve_http(&main_srv, NULL, "/health", NULL, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    r = serve_http(&main_srv, NULL, "/v1/models", NULL, KEY);
    json_value v;
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_FATAL(parse(&r, &v));
    const json_value *data = json_get(&v, "data");
    CU_ASSERT(data && data->type == JSON_ARRAY && data->n == 1);
    if (data && data->n == 1) {
        const json_value *id = json_get(&data->items[0], "id");
        CU_ASSERT(id && strcmp(id->str, "tiny") == 0);
    }
    json_free(&v);
    serve_reply_free(&r);
    /* one model by its alias, as the OpenAI clients' models.retrieve asks */
    r = serve_http(&main_srv, NULL, "/v1/models/tiny", NULL, KEY);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_FATAL(parse(&r, &v));
    const json_value *one = json_get(&v, "id"), *object = json_get(&v, "object");
    CU_ASSERT(one && one->type == JSON_STRING && strcmp(one->str, "tiny") == 0);
    CU_ASSERT(object && object->type == JSON_STRING && strcmp(object->str, "model") == 0);
    json_free(&v);
    serve_reply_free(&r);
    r = serve_http(&main_srv, NULL, "/v1/models/other", NULL, KEY);
    assert_error_as(&r, 404, "model", "model_not_found");
    CU_ASSERT(r.body.s && strstr(r.body.s, "\"invalid_request_error\"")); /* OpenAI's type for it */
    serve_reply_free(&r);
    r = serve_http(&main_srv, NULL, "/v1/models/tiny", NULL, NULL);
    CU_ASSERT_EQUAL(r.status, 401);
    serve_reply_free(&r);
    /* the Authorization scheme's name is case-insensitive (RFC 7235) */
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models/tiny", main_srv.port);
    struct curl_slist *hd = curl_slist_append(NULL, "Authorization: bearer " KEY);
    long code = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
    CU_ASSERT_EQUAL(curl_easy_perform(h), CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    CU_ASSERT_EQUAL(code, 200);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    r = serve_http(&main_srv, NULL, "/metrics", NULL, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "text/plain"));
    static const char *const names[] = {"vt_requests_total{status=\"200\"}", "vt_prompt_tokens_total",
                                        "vt_generation_tokens_total", "vt_requests_running", "vt_requests_waiting",
                                        "vt_kv_blocks_used", "vt_kv_blocks_total",
                                        "vt_time_to_first_token_seconds_bucket", "vt_inter_token_latency_seconds_sum"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) CU_ASSERT(r.body.s && strstr(r.body.s, names[i]));
    serve_reply_free(&r);
    CU_ASSERT(serve_metric(&main_srv, "vt_kv_blocks_total") == CTX / 16);
    /* /health, a probe, is not counted. A request is counted when its
     * connection completes, which the client may not wait for: at `before`,
     * any of this test's 200-answered requests (the two /v1/models reads,
     * the curl one, the /metrics read, the two serve_metric reads, `before`
     * itself) may still be uncounted, so `after` may exceed it by at most
     * those six, whatever the machine's speed. Counted probes would add 20. */
    const double before = serve_metric(&main_srv, "vt_requests_total{status=\"200\"}");
    enum { PROBES = 20, COUNTED_BEFORE = 6 };
    for (int i = 0; i < PROBES; i++) {
        serve_reply p = serve_http(&main_srv, NULL, "/health", NULL, NULL);
        CU_ASSERT_EQUAL(p.status, 200);
        serve_reply_free(&p);
    }
    const double after = serve_metric(&main_srv, "vt_requests_total{status=\"200\"}");
    CU_ASSERT(after >= before && after <= before + COUNTED_BEFORE);
}

/* `vt run --temp 0` on the same prompt: its stdout without the final newline. */
static char *vt_run_text(const char *prompt, int n) {
    const char *dir = vt_test_data_dir("test models");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s run -m %s/models/%s -p '%s' -n %d --temp 0 -t 1 -c %d", VT_CLI_PATH, dir, MODEL,
             prompt, n, CTX);
    char *out = NULL;
    int rc = vt_test_run_cmd(cmd, &out, NULL);
    CU_ASSERT_EQUAL(rc, 0);
    if (out && *out && out[strlen(out) - 1] == '\n') out[strlen(out) - 1] = '\0';
    return out;
}

static const char *const prompts[] = {"Hello world", "Once upon a time", "The quick brown fox", "1, 2, 3, 4,",
                                      "Paris is the capital of", "", "Dear diary,", "Q: why? A:"};
#define N_PROMPTS (sizeof prompts / sizeof *prompts)

static void test_completion_equals_vt_run(void) {
    for (size_t i = 0; i < 3; i++) {
        char *expected = vt_run_text(prompts[i], 24);
        char fields[256];
        snprintf(fields, sizeof fields, "\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0", prompts[i]);
        completion c = complete(&main_srv, fields);
        CU_ASSERT_PTR_NOT_NULL(c.text);
        if (c.text && expected) CU_ASSERT_STRING_EQUAL(c.text, expected);
        CU_ASSERT(strcmp(c.finish, "stop") == 0 || strcmp(c.finish, "length") == 0);
        CU_ASSERT(c.completion_tokens >= 1 && c.completion_tokens <= 24);
        CU_ASSERT(c.prompt_tokens >= 2);
        /* top_p 0 (in OpenAI's range [0, 1]) keeps the most likely token
         * alone: greedy at any temperature */
        snprintf(fields, sizeof fields, "\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":1.5,\"top_p\":0",
                 prompts[i]);
        completion z = complete(&main_srv, fields);
        CU_ASSERT_PTR_NOT_NULL(z.text);
        if (z.text && expected) CU_ASSERT_STRING_EQUAL(z.text, expected);
        free(z.text);
        free(c.text);
        free(expected);
    }
}

static void test_streaming_equals_whole(void) {
    /* completions */
    completion whole = complete(&main_srv, "\"prompt\":\"Hello\",\"max_tokens\":40,\"seed\":7");
    serve_reply r = post(&main_srv, "/v1/completions",
                   "{\"prompt\":\"Hello\",\"max_tokens\":40,\"seed\":7,\"stream\":true,"
                   "\"stream_options\":{\"include_usage\":true}}");
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "text/event-stream"));
    serve_streamed s;
    serve_read_events(r.body.s, false, &s);
    CU_ASSERT(!s.bad_event);
    CU_ASSERT(s.done);
    CU_ASSERT(whole.text && strcmp(s.text, whole.text) == 0);
    CU_ASSERT_STRING_EQUAL(s.finish, whole.finish);
    CU_ASSERT_EQUAL(s.usage_completion, whole.completion_tokens);
    /* OpenAI's rule with include_usage: every chunk before the usage one
     * carries "usage": null; there is one per "choices" entry of text */
    int with_choices = 0, usage_null = 0;
    for (const char *p = r.body.s; p && (p = strstr(p, "\"choices\":[{")); p++) with_choices++;
    for (const char *p = r.body.s; p && (p = strstr(p, "\"usage\":null")); p++) usage_null++;
    CU_ASSERT(with_choices >= 1 && usage_null == with_choices);
    free(s.text);
    free(whole.text);
    serve_reply_free(&r);
    /* chat, whole then serve_streamed */
    const char *chat = "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},{\"type\":\"text\","
                       "\"text\":\" there\"}]}],\"max_completion_tokens\":30,\"seed\":3,\"user\":\"u1\",\"metadata\":{}%s}";
    char body[1024];
    snprintf(body, sizeof body, chat, "");
    r = post(&main_srv, "/v1/chat/completions", body);
    json_value v;
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_FATAL(parse(&r, &v));
    const json_value *msg = choice0(&v) ? json_get(choice0(&v), "message") : NULL;
    const json_value *content = msg ? json_get(msg, "content") : NULL, *role = msg ? json_get(msg, "role") : NULL;
    CU_ASSERT(role && strcmp(role->str, "assistant") == 0);
    const json_value *refusal = msg ? json_get(msg, "refusal") : NULL; /* present, as OpenAI's */
    CU_ASSERT(refusal && refusal->type == JSON_NULL);
    CU_ASSERT_FATAL(content && content->type == JSON_STRING);
    const json_value *obj = json_get(&v, "object"), *id = json_get(&v, "id");
    CU_ASSERT(obj && strcmp(obj->str, "chat.completion") == 0);
    CU_ASSERT(id && strncmp(id->str, "chatcmpl-", 9) == 0);
    snprintf(body, sizeof body, chat, ",\"stream\":true");
    serve_reply rs = post(&main_srv, "/v1/chat/completions", body);
    serve_read_events(rs.body.s, true, &s);
    CU_ASSERT(!s.bad_event && s.done && s.first_has_role);
    CU_ASSERT_EQUAL(s.usage_completion, -1); /* no include_usage: no usage chunk */
    CU_ASSERT(rs.body.s && !strstr(rs.body.s, "\"usage\"")); /* nor usage in the others */
    CU_ASSERT(strcmp(s.text, content->str) == 0);
    const json_value *finish = json_get(choice0(&v), "finish_reason");
    CU_ASSERT(finish && strcmp(s.finish, finish->str) == 0);
    free(s.text);
    json_free(&v);
    serve_reply_free(&r);
    serve_reply_free(&rs);
}

typedef struct concurrent_job {
    size_t prompt;
    char *text;
} concurrent_job;

static void *concurrent_main(void *arg) {
    concurrent_job *j = arg;
    char fields[256];
    snprintf(fields, sizeof fields, "\"prompt\":\"%s\",\"max_tokens\":32,\"temperature\":0", prompts[j->prompt]);
    completion c = complete(&main_srv, fields);
    j->text = c.text;
    return NULL;
}

static void test_concurrent_same_as_alone(void) {
    char *alone[N_PROMPTS];
    for (size_t i = 0; i < N_PROMPTS; i++) {
        char fields[256];
        snprintf(fields, sizeof fields, "\"prompt\":\"%s\",\"max_tokens\":32,\"temperature\":0", prompts[i]);
        alone[i] = complete(&main_srv, fields).text;
    }
    concurrent_job jobs[2 * N_PROMPTS];
    pthread_t threads[2 * N_PROMPTS];
    for (size_t i = 0; i < 2 * N_PROMPTS; i++) {
        jobs[i] = (concurrent_job){i % N_PROMPTS, NULL};
        pthread_create(&threads[i], NULL, concurrent_main, &jobs[i]);
    }
    for (size_t i = 0; i < 2 * N_PROMPTS; i++) {
        pthread_join(threads[i], NULL);
        CU_ASSERT(jobs[i].text && alone[jobs[i].prompt] && strcmp(jobs[i].text, alone[jobs[i].prompt]) == 0);
        free(jobs[i].text);
    }
    for (size_t i = 0; i < N_PROMPTS; i++) free(alone[i]);
    CU_ASSERT(serve_metric_reaches(&main_srv, "vt_kv_blocks_used", 0, 5));
}


static bool log_grows(const serve_server *srv, const char *needle, int before, double seconds);

static void test_tokenize_detokenize(void) {
    serve_reply r = post(&main_srv, "/tokenize", "{\"content\":\"Hello world\"}");
    json_value v;
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_FATAL(parse(&r, &v));
    const json_value *t = json_get(&v, "tokens");
    CU_ASSERT_FATAL(t && t->type == JSON_ARRAY && t->n >= 2);
    char body[512] = "{\"tokens\":[";
    for (size_t i = 0; i < t->n; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s%d", i ? "," : "", (int)t->items[i].number);
    strcat(body, "]}");
    json_free(&v);
    serve_reply_free(&r);
    r = post(&main_srv, "/detokenize", body);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT_FATAL(parse(&r, &v));
    const json_value *content = json_get(&v, "content");
    CU_ASSERT(content && content->type == JSON_STRING && strstr(content->str, "Hello world"));
    json_free(&v);
    serve_reply_free(&r);
    r = post(&main_srv, "/detokenize", "{\"tokens\":[1, 99999999]}");
    assert_error(&r, 400, "tokens[1]");
    serve_reply_free(&r);
    /* their log lines name no seed: they sample nothing (logged when the
     * connection ends, so waited for) */
    CU_ASSERT(log_grows(&main_srv, "POST /tokenize 200", 0, 60));
    CU_ASSERT(log_grows(&main_srv, "POST /detokenize 200", 0, 60));
    CU_ASSERT(log_grows(&main_srv, "POST /detokenize 400", 0, 60));
    char *log = vt_test_read_file(main_srv.log, NULL);
    CU_ASSERT_FATAL(log != NULL);
    int lines = 0;
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, "POST /tokenize ") || strstr(line, "POST /detokenize ")) {
            lines++;
            CU_ASSERT(strstr(line, " seed=") == NULL);
        }
    CU_ASSERT(lines >= 3); /* this test's three, and any other test's */
    free(log);
}

/* Every refusal names its field. */
static void test_bad_input(void) {
    static const struct {
        const char *path, *body;
        long status;
        const char *param;
    } cases[] = {
        {"/v1/chat/completions", "{\"messages\": [", 400, NULL},
        {"/v1/chat/completions", "[1,2]", 400, NULL},
        {"/v1/chat/completions", "{}", 400, "messages"},
        {"/v1/chat/completions", "{\"messages\":\"hi\"}", 400, "messages"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", 400, "messages[0].role"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", 400,
         "messages[0].tool_call_id"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
         "messages[0].content[0].type"},
        /* a refusal part is an assistant's only */
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"refusal\",\"refusal\":\"no\"}]}]}",
         400, "messages[0].content[0].type"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":"
         "[{\"type\":\"refusal\"}]}]}", 400, "messages[1].content[0].refusal"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}", 400, "n"},
        /* parts of a turn a prompt cannot hold are refused, not dropped */
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
         "\"audio\":{\"id\":\"a1\"}}]}", 400, "messages[1].audio"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
         "\"content\":null,\"function_call\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}", 400,
         "messages[1].function_call"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", 400,
         "temperature"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":3}", 400,
         "logprobs"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"5\":1}}",
         400, "logit_bias"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]}", 400,
         "tools[0].function.name"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"yaml\"}}", 400,
         "response_format.type"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400,
         "max_tokens"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":-0.5}", 400, "top_p"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", 400,
         "stop[0]"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", 400, "stream"},
        /* OpenAI's rule: stream_options only with a stream (else it would be ignored silently) */
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{\"include_usage\":true}}", 400,
         "stream_options"},
        {"/v1/completions", "{\"prompt\":\"x\",\"stream\":false,\"stream_options\":{}}", 400, "stream_options"},
        /* a tool of another type is named by its type, not by the function it lacks */
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"code_interpreter\"}]}", 400,
         "tools[0].type"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[7]}", 400, "tools[0]"},
        /* a call names its tool: two of one name are refused */
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\",\"function\":"
         "{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}",
         400, "tools[1].function.name"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\","
         "\"type\":\"x\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
         400, "messages[1].tool_calls[0].type"},
        {"/v1/completions", "{}", 400, "prompt"},
        /* jansson quotes the bad bytes in its message: still a 400 with JSON, not a 500 */
        {"/v1/completions", "{\"prompt\":\"a\\u1\xcb\x9c\x9a\"}", 400, NULL},
        {"/v1/completions", "{\"prompt\":12}", 400, "prompt"},
        {"/v1/completions", "{\"prompt\":[1,-2]}", 400, "prompt[1]"},
        {"/v1/completions", "{\"prompt\":[1.0,2]}", 400, "prompt[0]"}, /* a number, not a second prompt */
        {"/v1/completions", "{\"prompt\":[[1,2.5]]}", 400, "prompt[0][1]"},
        {"/v1/completions", "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt"},
        {"/v1/completions", "{\"prompt\":\"x\",\"echo\":true}", 400, "echo"},
        {"/v1/completions", "{\"prompt\":\"x\",\"presence_penalty\":3}", 400, "presence_penalty"},
        {"/v1/completions", "{\"prompt\":[5, 99999999]}", 400, "prompt[1]"},
        {"/v1/completions", "{\"prompt\":[]}", 400, "prompt"},
        /* llama-server's and vLLM's fields that would change the answer */
        {"/v1/completions", "{\"prompt\":\"x\",\"repeat_penalty\":1.5}", 400, "repeat_penalty"},
        {"/v1/completions", "{\"prompt\":\"x\",\"n_predict\":5}", 400, "n_predict"},
        {"/v1/completions", "{\"prompt\":\"x\",\"mirostat\":2}", 400, "mirostat"},
        {"/v1/completions", "{\"prompt\":\"x\",\"repeat_penalty\":0}", 400, "repeat_penalty"}, /* 0 is no "off" there */
        {"/v1/completions", "{\"prompt\":\"x\",\"prompt_logprobs\":0}", 400, "prompt_logprobs"},
        {"/v1/completions", "{\"prompt\":\"x\",\"skip_special_tokens\":false}", 400, "skip_special_tokens"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"guided_json\":{\"type\":\"object\"}}", 400,
         "guided_json"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"min_tokens\":50}", 400,
         "min_tokens"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop_token_ids\":[5]}",
         400, "stop_token_ids"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"continue_final_message\":true}", 400,
         "continue_final_message"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"echo\":true}", 400,
         "echo"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"add_special_tokens\":false}", 400,
         "add_special_tokens"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_format\":\"deepseek\"}", 400,
         "reasoning_format"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
         "\"stream_options\":{\"continuous_usage_stats\":true}}",
         400, "stream_options.continuous_usage_stats"},
        {"/v1/completions", "{\"prompt\":\"x\",\"lora\":[{\"id\":0,\"scale\":1}]}", 400, "lora"},
        {"/v1/completions", "{\"prompt\":\"x\",\"timings_per_token\":true}", 400, "timings_per_token"},
        {"/v1/completions", "{\"prompt\":\"x\",\"return_tokens_as_token_ids\":true}", 400,
         "return_tokens_as_token_ids"},
        {"/tokenize", "{\"content\":5}", 400, "content"},
        {"/detokenize", "{}", 400, "tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        serve_reply r = post(&main_srv, cases[i].path, cases[i].body);
        if (r.status != cases[i].status) fprintf(stderr, "case %zu: %ld %s\n", i, r.status, r.body.s);
        assert_error(&r, cases[i].status, cases[i].param);
        serve_reply_free(&r);
    }
    /* messages say what was sent, in the request's terms */
    serve_reply m = post(&main_srv, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":12}");
    CU_ASSERT(m.body.s && strstr(m.body.s, "got 12"));
    serve_reply_free(&m);
    m = post(&main_srv, "/v1/completions", "{\"prompt\":[5, 99999999]}");
    CU_ASSERT(m.body.s && strstr(m.body.s, "prompt[1]: token id 99999999") && !strstr(m.body.s, "request."));
    assert_error(&m, 400, "prompt[1]"); /* the param names the id, as the message */
    serve_reply_free(&m);
    /* valid JSON vt cannot hold is said as such, not called malformed */
    static const struct {
        const char *body, *says;
    } held[] = {{"{\"prompt\":\"a\\u0000b\"}", "\\\\u0000"},
                {"{\"prompt\":\"x\",\"seed\":123456789012345678901}", "an integer past 64 bits"},
                {"{\"prompt\":\"x\",\"temperature\":1e400}", "past a double's range"}};
    for (size_t i = 0; i < sizeof held / sizeof *held; i++) {
        m = post(&main_srv, "/v1/completions", held[i].body);
        assert_error(&m, 400, NULL);
        CU_ASSERT(m.body.s && strstr(m.body.s, held[i].says) && !strstr(m.body.s, "not valid JSON"));
        if (!m.body.s || !strstr(m.body.s, held[i].says)) fprintf(stderr, "%s -> %s\n", held[i].body, m.body.s);
        serve_reply_free(&m);
    }
    /* the refusal says what to use instead where vt has it */
    m = post(&main_srv, "/v1/completions", "{\"prompt\":\"x\",\"repetition_penalty\":1.2}");
    assert_error(&m, 400, "repetition_penalty");
    CU_ASSERT(m.body.s && strstr(m.body.s, "presence_penalty or frequency_penalty"));
    serve_reply_free(&m);
    /* Fields the API does not define are ignored; those other servers
     * define are accepted where they change nothing (their neutral value,
     * or off). */
    completion c = complete(&main_srv, "\"prompt\":\"Hi\",\"max_tokens\":2,\"no_such_field\":[1,{}],\"user\":\"u\","
                                       "\"repeat_penalty\":1,\"typical_p\":1.0,\"mirostat\":0,\"top_n_sigma\":-1,"
                                       "\"n_predict\":-1,\"prompt_logprobs\":null,"
                                       "\"skip_special_tokens\":true,\"stop_token_ids\":[],\"guided_json\":null,"
                                       "\"cache_prompt\":true,\"lora\":[],\"reasoning_format\":\"none\","
                                       "\"continue_final_message\":false,\"documents\":[],\"timings_per_token\":false");
    CU_ASSERT_PTR_NOT_NULL(c.text);
    free(c.text);
}

/* A vocabulary with control tokens (Qwen2's, on a tiny synthesized model):
 * /detokenize writes them as their text, as llama-server's does, so the
 * ids /tokenize gives turn back into the text it read; with_pieces pairs
 * each id with its text. */
static void test_control_tokens_round_trip(void) {
    const char *dir = vt_test_data_dir("the Qwen2 vocabulary");
    if (!dir) return;
    char model[512], cmd[2048];
    vt_test_tmpfile(model, sizeof model, "qwen-vocab-tiny.gguf");
    snprintf(cmd, sizeof cmd, "%s synth --shape tiny --arch qwen3 --type q8_0 --vocab-from %s/models/vocab/ggml-vocab-qwen2.gguf "
                              "-o %s >/dev/null 2>&1",
             VT_CLI_PATH, dir, model);
    CU_ASSERT_FATAL(system(cmd) == 0);
    serve_server s;
    static const char *const args[] = {"-c", "256", NULL};
    CU_ASSERT_FATAL(serve_start(&s, model, "control-tokens.log", args));
    static const char text[] = "<|im_start|>user\\nHi<|im_end|>";
    char body[256];
    snprintf(body, sizeof body, "{\"content\": \"%s\"}", text);
    serve_reply r = serve_http(&s, "POST", "/tokenize", body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    json_value v;
    char ids[512] = "{\"tokens\":[";
    size_t n = 0;
    if (parse(&r, &v)) {
        const json_value *t = json_get(&v, "tokens");
        for (size_t i = 0; t && i < t->n; i++, n++)
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", (int)t->items[i].number);
        json_free(&v);
    }
    strcat(ids, "]}");
    serve_reply_free(&r);
    CU_ASSERT(n >= 4 && n <= 6); /* the two control tokens are one id each */
    r = serve_http(&s, "POST", "/detokenize", ids, NULL);
    char *content = serve_field(&r, "content", NULL);
    CU_ASSERT(content && strcmp(content, "<|im_start|>user\nHi<|im_end|>") == 0);
    if (!content || strcmp(content, "<|im_start|>user\nHi<|im_end|>") != 0) fprintf(stderr, "detokenized: %s\n", content);
    free(content);
    serve_reply_free(&r);
    snprintf(body, sizeof body, "{\"content\": \"%s\", \"with_pieces\": true}", text);
    r = serve_http(&s, "POST", "/tokenize", body, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT(r.body.s && strstr(r.body.s, "\"piece\":\"<|im_start|>\"") && strstr(r.body.s, "\"piece\":\"<|im_end|>\"") &&
              strstr(r.body.s, "{\"id\":"));
    if (r.body.s && !strstr(r.body.s, "\"piece\":\"<|im_start|>\"")) fprintf(stderr, "with_pieces: %s\n", r.body.s);
    serve_reply_free(&r);
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
    unlink(model);
}

static void test_auth_and_routes(void) {
    serve_reply r = serve_http(&main_srv, NULL, "/v1/completions", "{\"prompt\":\"x\"}", NULL);
    assert_error_as(&r, 401, NULL, "invalid_api_key");
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "WWW-Authenticate"));
    serve_reply_free(&r);
    r = serve_http(&main_srv, NULL, "/v1/completions", "{\"prompt\":\"x\"}", "wrong");
    assert_error_as(&r, 401, NULL, "invalid_api_key");
    serve_reply_free(&r);
    r = serve_http(&main_srv, NULL, "/v1/nothing", NULL, KEY);
    assert_error(&r, 404, NULL);
    serve_reply_free(&r);
    r = serve_http(&main_srv, NULL, "/v1/completions", NULL, KEY); /* GET */
    assert_error(&r, 405, NULL);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "Allow: POST"));
    serve_reply_free(&r);
    /* a client that waits for "100 Continue" before its body is answered
     * at once when its head decides: never invited to upload for nothing */
    static const char *const expect[] = {"Expect: 100-continue", NULL};
    static const struct {
        const char *method, *path, *key;
        long status;
    } early[] = {{NULL, "/v1/completions", "wrong", 401},
                 {NULL, "/v1/nothing", KEY, 404},
                 {"PUT", "/v1/completions", KEY, 405}};
    for (size_t i = 0; i < sizeof early / sizeof *early; i++) {
        r = serve_http_with(&main_srv, early[i].method, early[i].path, "{\"prompt\":\"x\"}", early[i].key, expect);
        CU_ASSERT_EQUAL(r.status, early[i].status);
        CU_ASSERT(r.headers.s && !strstr(r.headers.s, " 100 "));
        serve_reply_free(&r);
    }
    r = serve_http_with(&main_srv, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}", KEY, expect);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "HTTP/1.1 100 Continue"));
    serve_reply_free(&r);
    /* a compressed body: 415 naming the coding, not a JSON error about its first byte */
    static const char *const gzipped[] = {"Content-Encoding: gzip", NULL};
    r = serve_http_with(&main_srv, NULL, "/v1/completions", "\x1f\x8b\x08", KEY, gzipped);
    assert_error(&r, 415, NULL);
    CU_ASSERT(r.body.s && strstr(r.body.s, "Content-Encoding 'gzip'"));
    serve_reply_free(&r);
    /* counted under its own status, once its connection completes (which
     * the client does not wait for): polled until it is, the bound (30 s)
     * only for a server that never counts it */
    double n415 = 0;
    for (int i = 0; i < 3000 && n415 < 1; i++) {
        n415 = serve_metric(&main_srv, "vt_requests_total{status=\"415\"}");
        if (n415 < 1) usleep(10000);
    }
    CU_ASSERT(n415 >= 1);
    /* only bodies are coded: a GET with the header is served, as is an empty
     * coding; every Content-Encoding line counts */
    r = serve_http_with(&main_srv, NULL, "/health", NULL, NULL, gzipped);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    static const char *const two_codings[] = {"Content-Encoding: identity", "Content-Encoding: gzip", NULL};
    r = serve_http_with(&main_srv, NULL, "/v1/completions", "{\"prompt\":\"x\"}", KEY, two_codings);
    assert_error(&r, 415, NULL);
    serve_reply_free(&r);
    /* whitespace after the key ends the header's value, not the key */
    r = serve_http(&main_srv, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}", KEY " \t");
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    r = serve_http(&main_srv, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}", KEY "x");
    assert_error_as(&r, 401, NULL, "invalid_api_key");
    serve_reply_free(&r);
    r = serve_http(&main_srv, "DELETE", "/health", NULL, NULL);
    assert_error(&r, 405, NULL);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "Allow: GET, HEAD"));
    serve_reply_free(&r);
    /* HEAD of a GET endpoint: GET's status and headers, no body (load
     * balancers probe /health so); of a POST endpoint: 405 */
    r = serve_http(&main_srv, "HEAD", "/health", NULL, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT(r.body.n == 0);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "Content-Type: application/json"));
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "Content-Length: 15")); /* GET's {"status":"ok"} */
    serve_reply_free(&r);
    r = serve_http(&main_srv, "HEAD", "/v1/models", NULL, KEY);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT(r.body.n == 0);
    serve_reply_free(&r);
    r = serve_http(&main_srv, "HEAD", "/v1/completions", NULL, KEY);
    CU_ASSERT_EQUAL(r.status, 405);
    serve_reply_free(&r);
}

/* The key from a file (--api-key-file, or VT_API_KEY_FILE): its first line,
 * trailing whitespace off; a file others can read is warned about; a missing
 * or empty file, or both flags, refuse to start. */
static void test_api_key_file(void) {
    char keyfile[512];
    vt_test_tmpfile(keyfile, sizeof keyfile, "api-key");
    FILE *f = fopen(keyfile, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs("file-key-42  \nsecond line ignored\n", f);
    fclose(f);
    chmod(keyfile, 0644);
    serve_server s = {0};
    const char *const args[] = {"--api-key-file", keyfile, "-c", "512", NULL};
    CU_ASSERT_FATAL(serve_start(&s, MODEL, "key-file.log", args));
    serve_reply r = serve_http(&s, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}", "file-key-42");
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    r = serve_http(&s, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}", "file-key-4");
    CU_ASSERT_EQUAL(r.status, 401); /* the key's beginning is not the key */
    serve_reply_free(&r);
    r = serve_http(&s, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}", NULL);
    CU_ASSERT_EQUAL(r.status, 401);
    serve_reply_free(&r);
    CU_ASSERT(log_grows(&s, "is readable by other users", 0, 10));
    serve_stop(&s);
    const char *dir = vt_test_data_dir("test models");
    CU_ASSERT_FATAL(dir != NULL);
    char *err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(NULL, &err, "serve -m %s/models/%s --port 0 --api-key-file %s.missing", dir,
                                           MODEL, keyfile), 2);
    CU_ASSERT(err && strstr(err, "--api-key-file ") && strstr(err, "cannot open"));
    free(err);
    /* named by the environment, the message names the variable */
    char missing[600];
    snprintf(missing, sizeof missing, "%s.missing", keyfile);
    setenv("VT_API_KEY_FILE", missing, 1);
    err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(NULL, &err, "serve -m %s/models/%s --port 0", dir, MODEL), 2);
    CU_ASSERT(err && strstr(err, "VT_API_KEY_FILE ") && strstr(err, "cannot open") && !strstr(err, "--api-key-file"));
    free(err);
    unsetenv("VT_API_KEY_FILE");
    err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(NULL, &err, "serve -m %s/models/%s --port 0 --api-key k --api-key-file %s",
                                           dir, MODEL, keyfile), 2);
    CU_ASSERT(err && strstr(err, "give one of them"));
    free(err);
    /* an empty key, on the command line or in the environment, is refused
     * (unset, the variables mean no key) */
    static const char *const empty[] = {"--api-key ''", "--api-key-file ''", "", ""};
    static const char *const env[] = {NULL, NULL, "VT_API_KEY", "VT_API_KEY_FILE"};
    static const char *const named[] = {"--api-key is empty", "--api-key-file is empty", "VT_API_KEY is empty",
                                        "VT_API_KEY_FILE is empty"};
    for (int i = 0; i < 4; i++) {
        if (env[i]) setenv(env[i], "", 1);
        err = NULL;
        CU_ASSERT_EQUAL(vt_test_run_vt_checked(NULL, &err, "serve -m %s/models/%s --port 0 %s", dir, MODEL, empty[i]), 2);
        CU_ASSERT(err && strstr(err, named[i]));
        free(err);
        if (env[i]) unsetenv(env[i]);
    }
    /* a key no header can carry (HTTP trims a value's ends) is refused, not
     * a server that answers every request 401 */
    err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_vt_checked(NULL, &err, "serve -m %s/models/%s --port 0 --api-key 'abc '", dir, MODEL), 2);
    CU_ASSERT(err && strstr(err, "--api-key begins or ends with whitespace"));
    free(err);
}

static void test_body_limit_and_context(void) {
    /* 100 KiB over the 64 KiB limit. */
    size_t n = 100 * 1024;
    char *big = malloc(n + 64);
    strcpy(big, "{\"prompt\":\"");
    memset(big + strlen(big), 'a', n);
    strcpy(big + 11 + n, "\"}");
    serve_reply r = post(&main_srv, "/v1/completions", big);
    assert_error(&r, 413, NULL);
    serve_reply_free(&r);
    /* ~1,000 tokens in a 512-token context: both numbers in the message. */
    size_t words = 1000;
    char *longp = malloc(words * 6 + 64);
    strcpy(longp, "{\"prompt\":\"");
    for (size_t i = 0; i < words; i++) strcat(longp, " cat 7");
    strcat(longp, "\"}");
    r = post(&main_srv, "/v1/completions", longp);
    assert_error_as(&r, 400, "prompt", "context_length_exceeded");
    CU_ASSERT(r.body.s && strstr(r.body.s, "512") && strstr(r.body.s, "tokens"));
    serve_reply_free(&r);
    free(longp);
    free(big);
    /* max_tokens past the context: generation stops at the context, as length. */
    completion c = complete(&main_srv, "\"prompt\":\"Greetings\",\"max_tokens\":100000,\"temperature\":0");
    CU_ASSERT_STRING_EQUAL(c.finish, "length");
    CU_ASSERT_EQUAL(c.prompt_tokens + c.completion_tokens, CTX);
    free(c.text);
    /* A prompt of CTX - 1 token ids leaves room for one token; one of CTX
     * ids fills the context: 400, as a longer one. */
    for (int n = CTX - 1; n <= CTX; n++) {
        char *ids = malloc((size_t)n * 4 + 64);
        CU_ASSERT_FATAL(ids != NULL);
        strcpy(ids, "{\"prompt\":[");
        for (int i = 0; i < n; i++) strcat(ids, i ? ",5" : "5");
        strcat(ids, "],\"max_tokens\":10,\"temperature\":0}");
        r = post(&main_srv, "/v1/completions", ids);
        if (n == CTX - 1) {
            CU_ASSERT_EQUAL(r.status, 200);
            CU_ASSERT(r.body.s && strstr(r.body.s, "\"completion_tokens\":1") && strstr(r.body.s, "\"length\""));
        } else {
            assert_error_as(&r, 400, "prompt", "context_length_exceeded");
            CU_ASSERT(r.body.s && strstr(r.body.s, "room for the answer"));
        }
        serve_reply_free(&r);
        free(ids);
    }
}

/* The same prompt twice: the second takes all of it but the last token
 * from the prefix cache (whole blocks shared, the rest copied from the
 * block the first left; usage.prompt_tokens_details.cached_tokens, counted
 * in /metrics) and answers the same text. The first shares only what
 * earlier tests' prompts began with (the BOS token; no other prompt begins
 * with its first word). */
static void test_prefix_cache_in_usage(void) {
    const char *body = "\"prompt\":\"Zanzibar's lighthouse keeper counted the ships that passed in the night, one by one, "
                       "and wrote each name in a book that nobody else would ever read.\",\"max_tokens\":12,"
                       "\"temperature\":0";
    const double hits_before = serve_metric(&main_srv, "vt_prefix_cache_hit_tokens_total");
    completion a = complete(&main_srv, body), b = complete(&main_srv, body);
    CU_ASSERT(a.prompt_tokens > 16);
    CU_ASSERT(a.cached_tokens < 8);
    CU_ASSERT_EQUAL(b.cached_tokens, b.prompt_tokens - 1);
    CU_ASSERT(a.text && b.text && strcmp(a.text, b.text) == 0);
    CU_ASSERT(serve_metric(&main_srv, "vt_prefix_cache_hit_tokens_total") - hits_before >= (double)b.cached_tokens);
    free(a.text);
    free(b.text);
}

static void test_stop_string(void) {
    completion base = complete(&main_srv, "\"prompt\":\"Hello\",\"max_tokens\":40,\"seed\":7");
    CU_ASSERT_FATAL(base.text && strlen(base.text) > 12);
    /* Stop at a piece from the middle of the text. */
    char stop[8], fields[256];
    memcpy(stop, base.text + 8, 4);
    stop[4] = '\0';
    char *json_stop = stop;
    bool plain = true;
    for (const char *p = stop; *p; p++)
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x80) plain = false;
    if (!plain) json_stop = "Hello"; /* keep the test's JSON simple; "Hello" then never matches mid-word */
    snprintf(fields, sizeof fields, "\"prompt\":\"Hello\",\"max_tokens\":40,\"seed\":7,\"stop\":[\"%s\"]", json_stop);
    completion c = complete(&main_srv, fields);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.text);
    const char *at = strstr(base.text, json_stop);
    if (at) {
        CU_ASSERT_EQUAL(strlen(c.text), (size_t)(at - base.text));
        CU_ASSERT(strncmp(c.text, base.text, strlen(c.text)) == 0);
        CU_ASSERT_STRING_EQUAL(c.finish, "stop");
    }
    free(c.text);
    free(base.text);
}

/* How many times needle occurs in the server's log so far. */
static int log_count(const serve_server *srv, const char *needle) {
    char *log = vt_test_read_file(srv->log, NULL);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    free(log);
    return n;
}

/* Wait up to seconds until needle occurs more than `before` times in the log. */
static bool log_grows(const serve_server *srv, const char *needle, int before, double seconds) {
    double end = serve_now() + seconds;
    while (log_count(srv, needle) <= before && serve_now() < end) serve_sleep_ms(10);
    return log_count(srv, needle) > before;
}

/* A streaming client that hangs up at its first chunk. */
static size_t hang_up(char *p, size_t size, size_t n, void *user) {
    (void)p, (void)size, (void)n;
    (*(int *)user)++;
    return 0; /* aborts the transfer */
}

static void test_disconnect_frees_blocks(void) {
    /* The engine is held after the request's first forward, so it is
     * certainly running (one token, its blocks in use) when its client hangs
     * up at the first chunk; the server sees the client leave while nothing
     * moves ("(client left)" in the log), and the request is cancelled at
     * the next step once the gate opens. Neither a faster nor a slower
     * machine changes that order: no forward can start while held. It runs
     * on a server of its own without a time limit: the small server's 2 s
     * would start counting before the hold, and on a slow machine could
     * end the request before its client leaves. */
    serve_server srv = {0};
    serve_gate gate;
    CU_ASSERT_FATAL(serve_gate_init(&gate, "disconnect-gate"));
    static const char *const args[] = {"--parallel", "1", "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&srv, &gate, MODEL, "disconnect.log", args));
    long base = serve_gate_reached(&gate);
    serve_gate_allow(&gate, base + 1);
    double gen_before = serve_metric(&srv, "vt_generation_tokens_total");
    int left_before = log_count(&srv, "(client left)");
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", srv.port);
    int chunks = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"prompt\":\"Greetings\",\"max_tokens\":400,\"temperature\":0,\"stream\":true}");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, hang_up);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &chunks);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    CU_ASSERT_EQUAL(curl_easy_perform(h), CURLE_WRITE_ERROR);
    curl_easy_cleanup(h);
    CU_ASSERT_EQUAL(chunks, 1);
    CU_ASSERT(log_grows(&srv, "(client left)", left_before, 60));
    /* Two orders are possible, and neither depends on speed being right:
     * the engine reached its second forward before the cancel came (then it
     * is held there, the request still holding its blocks), or the cancel
     * came first (then no second forward is ever asked for and the blocks
     * are already back). Which one happened is read, not waited for. */
    if (serve_gate_reached(&gate) >= base + 2)
        CU_ASSERT(serve_metric(&srv, "vt_kv_blocks_used") > 0);
    serve_gate_open(&gate);
    CU_ASSERT(serve_metric_reaches(&srv, "vt_kv_blocks_used", 0, 60));
    CU_ASSERT(serve_metric_reaches(&srv, "vt_requests_running", 0, 60));
    /* Cancelled after its second forward, not run to its 400 tokens. */
    CU_ASSERT(serve_metric(&srv, "vt_generation_tokens_total") - gen_before <= 2);
    int status = serve_stop(&srv);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Gives up (aborts the transfer) once the engine is held before its second
 * forward: the request's prompt and first token are computed by then,
 * whatever the machine's speed. */
typedef struct held_after_first {
    const serve_gate *gate;
    long base;
} held_after_first;

static int leave_when_held(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    const held_after_first *h = user;
    return serve_gate_reached(h->gate) >= h->base + 2; /* nonzero aborts */
}

/* A client that gives up waiting for a whole (not streamed) answer while
 * the engine is held after the request's first forward: the request is
 * cancelled, and its log line counts the prompt computed for it and the
 * token generated (not zeros). */
static void test_waiting_client_leaving_is_logged_with_its_tokens(void) {
    serve_server srv = {0};
    serve_gate gate;
    CU_ASSERT_FATAL(serve_gate_init(&gate, "left-waiting-gate"));
    static const char *const args[] = {"--parallel", "1", "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&srv, &gate, MODEL, "left-waiting.log", args));
    long base = serve_gate_reached(&gate);
    serve_gate_allow(&gate, base + 1);
    int left_before = log_count(&srv, "(client left)");
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", srv.port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"prompt\":\"Greetings\",\"max_tokens\":400,\"temperature\":0}");
    held_after_first held = {&gate, base};
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, leave_when_held);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &held);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L); /* a bound, not a speed claim: the held engine never answers */
    CU_ASSERT_EQUAL(curl_easy_perform(h), CURLE_ABORTED_BY_CALLBACK);
    curl_easy_cleanup(h);
    CU_ASSERT(log_grows(&srv, "(client left)", left_before, 60));
    CU_ASSERT_EQUAL(log_count(&srv, "499 prompt=0 "), 0);
    CU_ASSERT_EQUAL(log_count(&srv, "completion=1 "), 1); /* the one forward let through */
    serve_gate_open(&gate);
    CU_ASSERT(serve_metric_reaches(&srv, "vt_requests_running", 0, 60));
    int status = serve_stop(&srv);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A client that never reads its stream does not hold up another. The bound
 * is not a speed claim: a stalled engine would never answer the second
 * request (the client gives up after 120 s), and 60 s is far past what its
 * 8 tokens take on any machine, under ASan and beside another test. */
static void test_slow_reader(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)main_srv.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int small = 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    CU_ASSERT_FATAL(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    const char *body = "{\"prompt\":\"Greetings\",\"max_tokens\":400,\"temperature\":0,\"stream\":true}";
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " KEY
             "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    CU_ASSERT(write(fd, req, strlen(req)) == (ssize_t)strlen(req));
    double t0 = serve_now();
    completion c = complete(&main_srv, "\"prompt\":\"Hi\",\"max_tokens\":8,\"temperature\":0");
    CU_ASSERT_PTR_NOT_NULL(c.text);
    CU_ASSERT(serve_now() - t0 < 60);
    free(c.text);
    /* The unread request ran to its end meanwhile (the engine buffers for it). */
    CU_ASSERT(serve_metric_reaches(&main_srv, "vt_requests_running", 0, 120));
    close(fd);
    CU_ASSERT(serve_metric_reaches(&main_srv, "vt_kv_blocks_used", 0, 5));
}

/* ---- the small server: full queue, time limit, no template, drain ---------- */


typedef struct request_thread {
    serve_post t;
    atomic_bool done;
} request_thread;

static void *request_main(void *arg) {
    request_thread *t = arg;
    serve_post_main(&t->t);
    atomic_store(&t->done, true);
    return NULL;
}

static void test_queue_full_and_time_limit(void) {
    /* A is held in its first forward (its prefill) past the 2 s limit. B
     * and C arrive while it is held: the queue holds one, so exactly one of
     * them waits and the other is refused 503 with Retry-After. The test
     * then waits out the limit of all three on the wall clock and opens the
     * gate: A's first forward ends and A is past its limit (length, after
     * one token, logged); the waiting one is past its limit too and never
     * ran. The engine cannot take a step while held, so how fast the
     * machine generates changes none of this. */
    serve_gate_hold(&small_gate);
    long base = serve_gate_reached(&small_gate);
    int limit_lines = log_count(&small_srv, "exceeded the time limit");
    serve_post a = {&small_srv, "{\"prompt\":\"Greetings\",\"max_tokens\":4000,\"temperature\":0,\"stream\":true}", {0}};
    pthread_t ta, tb, tc;
    pthread_create(&ta, NULL, serve_post_main, &a);
    CU_ASSERT(serve_gate_wait_reached(&small_gate, base + 1, 60));
    static const char body[] = "{\"prompt\":\"Greetings\",\"max_tokens\":4000,\"temperature\":0}";
    request_thread b = {{&small_srv, body, {0}}, false}, c = {{&small_srv, body, {0}}, false};
    pthread_create(&tb, NULL, request_main, &b);
    pthread_create(&tc, NULL, request_main, &c);
    double end = serve_now() + 60;
    while (!atomic_load(&b.done) && !atomic_load(&c.done) && serve_now() < end) serve_sleep_ms(5);
    double refused_at = serve_now(); /* both were submitted before this: the refusal needed the other queued */
    CU_ASSERT(atomic_load(&b.done) != atomic_load(&c.done));
    request_thread *refused = atomic_load(&b.done) ? &b : &c, *waited = refused == &b ? &c : &b;
    CU_ASSERT_EQUAL(serve_metric(&small_srv, "vt_requests_waiting"), 1);
    while (serve_now() < refused_at + 2.5) serve_sleep_ms(20); /* every deadline is at most refused_at + 2 */
    serve_gate_open(&small_gate);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    assert_error(&refused->t.r, 503, NULL);
    assert_error_code(&refused->t.r, "queue_full");
    CU_ASSERT(refused->t.r.headers.s && strstr(refused->t.r.headers.s, "Retry-After:"));
    serve_streamed s;
    CU_ASSERT_EQUAL(a.r.status, 200);
    serve_read_events(a.r.body.s, false, &s);
    CU_ASSERT(s.done && !s.bad_event);
    CU_ASSERT_STRING_EQUAL(s.finish, "length");
    free(s.text);
    /* the waiting one never ran: no answer rather than an empty one */
    assert_error(&waited->t.r, 503, NULL);
    assert_error_code(&waited->t.r, "timeout");
    CU_ASSERT(waited->t.r.headers.s && strstr(waited->t.r.headers.s, "Retry-After:"));
    serve_reply_free(&a.r);
    serve_reply_free(&b.t.r);
    serve_reply_free(&c.t.r);
    CU_ASSERT(log_count(&small_srv, "exceeded the time limit of 2 s after 1 tokens") == limit_lines + 1);
    /* logged when the connection ends, which may follow the client's answer */
    CU_ASSERT(log_grows(&small_srv, "POST /v1/completions 503", 0, 60));
    CU_ASSERT(serve_metric_reaches(&small_srv, "vt_kv_blocks_used", 0, 60));
}

static void test_no_template_and_drain(void) {
    serve_reply r = serve_http(&small_srv, NULL, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                   NULL);
    assert_error(&r, 400, "messages");
    CU_ASSERT(r.body.s && strstr(r.body.s, "--chat-template"));
    serve_reply_free(&r);
    /* SIGHUP (a closed terminal) is logged and changes nothing: still serving */
    kill(small_srv.pid, SIGHUP);
    CU_ASSERT(log_grows(&small_srv, "SIGHUP ignored", 0, 60));
    r = serve_http(&small_srv, "GET", "/health", NULL, NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    /* SIGTERM while a request streams: it still ends with [DONE], then the
     * server exits 0. The request is held in its first forward when the
     * signal arrives and is handled ("1 running or waiting" in the log), so
     * it is certainly in flight then, however fast the machine; once the
     * gate opens it runs to its end well within the 30 s grace. */
    serve_gate_hold(&small_gate);
    long base = serve_gate_reached(&small_gate);
    serve_post a = {&small_srv, "{\"prompt\":\"Greetings\",\"max_tokens\":300,\"temperature\":0,\"stream\":true}", {0}};
    pthread_t ta;
    pthread_create(&ta, NULL, serve_post_main, &a);
    CU_ASSERT(serve_gate_wait_reached(&small_gate, base + 1, 60));
    kill(small_srv.pid, SIGTERM);
    CU_ASSERT(log_grows(&small_srv, "SIGTERM: no new requests; 1 running or waiting", 0, 60));
    serve_gate_open(&small_gate);
    pthread_join(ta, NULL);
    serve_streamed s;
    CU_ASSERT_EQUAL(a.r.status, 200);
    serve_read_events(a.r.body.s, false, &s);
    CU_ASSERT(s.done && !s.bad_event && s.finish[0]);
    free(s.text);
    serve_reply_free(&a.r);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(small_srv.pid, &status, 0), small_srv.pid);
    small_srv.pid = 0;
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *log = vt_test_read_file(small_srv.log, NULL);
    CU_ASSERT(log && strstr(log, "vt serve: stopped"));
    free(log);
}

/* SIGTERM with no grace: the running request ends as length with the
 * tokens it has, while the waiting one, which has none, is a 503 with
 * Retry-After (no answer rather than an empty one: its client or load
 * balancer can send it to another replica); the server exits 0.
 * The engine is held before A's second forward: A has one token and
 * certainly runs, B is certainly waiting (the gauge counts it from its
 * submission), and both are in flight when the signal is handled ("2
 * running or waiting"), on a machine of any speed. */
/* A GET /health on the keep-alive connection fd: the answer's head and
 * body (read until the body's Content-Length is in, or the peer closes;
 * 30 s bounds only a failure). */
static char *health_on(int fd) {
    static const char req[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) return NULL;
    char *got = calloc(1, 4096);
    size_t n = 0;
    for (double end = serve_now() + 30; got && n < 4095 && serve_now() < end;) {
        const char *head_end = strstr(got, "\r\n\r\n"), *len = strstr(got, "Content-Length: ");
        if (head_end && len && n >= (size_t)(head_end + 4 - got) + strtoul(len + 16, NULL, 10)) break;
        const ssize_t k = read(fd, got + n, 4095 - n);
        if (k <= 0) break;
        n += (size_t)k;
    }
    return got;
}

static void test_shutdown_before_first_token(void) {
    serve_server s = {0};
    serve_gate g;
    CU_ASSERT_FATAL(serve_gate_init(&g, "drain503-gate"));
    static const char *const args[] = {"--parallel", "1", "--shutdown-grace", "0", "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g, MODEL, "drain503.log", args));
    long base = serve_gate_reached(&g);
    serve_gate_allow(&g, base + 1);
    serve_post a = {&s, "{\"prompt\":\"Greetings\",\"max_tokens\":4000,\"temperature\":0}", {0}};
    serve_post b = {&s, "{\"prompt\":\"Greetings\",\"max_tokens\":4000,\"temperature\":0}", {0}};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, serve_post_main, &a);
    CU_ASSERT(serve_gate_wait_reached(&g, base + 2, 60));
    CU_ASSERT(serve_metric_reaches(&s, "vt_generation_tokens_total", 1, 60));
    pthread_create(&tb, NULL, serve_post_main, &b);
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_waiting", 1, 60));
    /* a prober's keep-alive connection, opened before the drain */
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CU_ASSERT_FATAL(connect(probe, (struct sockaddr *)&at, sizeof at) == 0);
    char *healthy = health_on(probe);
    CU_ASSERT(healthy && strstr(healthy, "HTTP/1.1 200 ") && !strstr(healthy, "Connection: close"));
    free(healthy);
    kill(s.pid, SIGTERM);
    CU_ASSERT(log_grows(&s, "SIGTERM: no new requests; 2 running or waiting", 0, 60));
    /* on it, /health now says the replica is going, and the connection
     * closes, so the prober or proxy moves to another */
    char *draining = health_on(probe);
    CU_ASSERT(draining && strstr(draining, "HTTP/1.1 503 ") && strstr(draining, "Connection: close") &&
              strstr(draining, "\"shutting_down\""));
    free(draining);
    close(probe);
    serve_gate_open(&g);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CU_ASSERT_EQUAL(a.r.status, 200);
    json_value v;
    if (parse(&a.r, &v)) {
        const json_value *ch = choice0(&v), *f = ch ? json_get(ch, "finish_reason") : NULL;
        CU_ASSERT(f && f->type == JSON_STRING && strcmp(f->str, "length") == 0);
        json_free(&v);
    } else {
        CU_FAIL("the running request's answer is not JSON");
    }
    assert_error(&b.r, 503, NULL);
    assert_error_code(&b.r, "shutting_down");
    CU_ASSERT(b.r.headers.s && strstr(b.r.headers.s, "Retry-After:"));
    serve_reply_free(&a.r);
    serve_reply_free(&b.r);
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(s.pid, &status, 0), s.pid);
    s.pid = 0;
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* SIGTERM while the model loads ends the process at once (exit 0), not after
 * the load: the load is held in the backend's init (step_gate's load gate),
 * so "still loading" is certain, and the process must be gone while it is
 * still held. A second signal during a drain ends the running requests
 * without waiting out the grace period. */
static void test_sigterm_while_loading_and_twice(void) {
    serve_server s = {0};
    serve_gate g;
    CU_ASSERT_FATAL(serve_gate_init(&g, "load-gate"));
    serve_gate_hold_load(&g);
    static const char *const args[] = {"-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_spawn_gated(&s, &g, MODEL, "sigterm-loading.log", args));
    CU_ASSERT_FATAL(serve_gate_wait_load_held(&g, 60));
    serve_reply h = serve_http(&s, NULL, "/health", NULL, NULL);
    CU_ASSERT_EQUAL(h.status, 503);
    serve_reply_free(&h);
    kill(s.pid, SIGTERM);
    int status = 0;
    pid_t got = 0;
    for (double end = serve_now() + 30; (got = waitpid(s.pid, &status, WNOHANG)) == 0 && serve_now() < end;)
        serve_sleep_ms(20);
    CU_ASSERT_EQUAL(got, s.pid);
    if (got == s.pid) CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    serve_gate_release_load(&g);
    if (got != s.pid) {
        kill(s.pid, SIGKILL);
        waitpid(s.pid, &status, 0);
    }
    s.pid = 0;
    CU_ASSERT(log_grows(&s, "SIGTERM while loading: stopped before serving", 0, 10));

    /* Twice: the drain's grace is an hour, the request would run for
     * thousands of tokens; the second SIGTERM ends it as length at once. The
     * engine is held after the first token, so the request certainly runs
     * when both signals arrive. */
    serve_gate g2;
    CU_ASSERT_FATAL(serve_gate_init(&g2, "twice-gate"));
    static const char *const args2[] = {"--parallel", "1", "--shutdown-grace", "3600", "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g2, MODEL, "sigterm-twice.log", args2));
    long base = serve_gate_reached(&g2);
    serve_gate_allow(&g2, base + 1);
    serve_post a = {&s, "{\"prompt\":\"Greetings\",\"max_tokens\":4000,\"temperature\":0}", {0}};
    pthread_t ta;
    pthread_create(&ta, NULL, serve_post_main, &a);
    CU_ASSERT(serve_gate_wait_reached(&g2, base + 2, 60));
    kill(s.pid, SIGTERM);
    CU_ASSERT(log_grows(&s, "SIGTERM: no new requests; 1 running or waiting", 0, 60));
    kill(s.pid, SIGTERM);
    CU_ASSERT(log_grows(&s, "SIGTERM again: ending the running requests now", 0, 60));
    serve_gate_open(&g2);
    pthread_join(ta, NULL);
    CU_ASSERT_EQUAL(a.r.status, 200);
    serve_reply_free(&a.r);
    CU_ASSERT_EQUAL(waitpid(s.pid, &status, 0), s.pid);
    s.pid = 0;
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The gauges count what the next step will admit as running, and the
 * scheduler, not the free sequences, decides that: with 4 sequences but a
 * token budget of 2 a step runs at most 2 requests (each running one gets a
 * token). A is held in its first forward (all of its one-token prompt)
 * while B and C queue; one more
 * forward is let through, after which the engine adds B and C to the batch
 * and is held before the next forward: that step decodes A and starts B
 * (the budget's second token), C waits. So the gauges read 2 running and 1
 * waiting, where counting free sequences alone would read 3 and 0. Every
 * state is one the gate holds, so the machine's speed changes nothing. */
static void test_gauges_follow_token_budget(void) {
    serve_server s = {0};
    serve_gate g;
    CU_ASSERT_FATAL(serve_gate_init(&g, "budget-gate"));
    static const char *const args[] = {"--parallel", "4", "--token-budget", "2", "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g, MODEL, "budget.log", args));
    serve_gate_hold(&g);
    long base = serve_gate_reached(&g);
    /* one-token prompts: each request's first forward is its whole prefill */
    static const char body[] = "{\"prompt\":[5],\"max_tokens\":8,\"temperature\":0}";
    serve_post a = {&s, body, {0}}, b = {&s, body, {0}}, c = {&s, body, {0}};
    pthread_t ta, tb, tc;
    pthread_create(&ta, NULL, serve_post_main, &a);
    CU_ASSERT(serve_gate_wait_reached(&g, base + 1, 60));
    pthread_create(&tb, NULL, serve_post_main, &b);
    pthread_create(&tc, NULL, serve_post_main, &c);
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_waiting", 2, 60)); /* both queued behind the held forward */
    serve_gate_allow(&g, base + 2);
    CU_ASSERT(serve_gate_wait_reached(&g, base + 2, 60));
    const double running = serve_metric(&s, "vt_requests_running"), waiting = serve_metric(&s, "vt_requests_waiting");
    CU_ASSERT_EQUAL(running, 2);
    CU_ASSERT_EQUAL(waiting, 1);
    if (running != 2 || waiting != 1) fprintf(stderr, "gauges: %g running, %g waiting (see %s)\n", running, waiting, s.log);
    serve_gate_open(&g);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_join(tc, NULL);
    CU_ASSERT_EQUAL(a.r.status, 200);
    CU_ASSERT_EQUAL(b.r.status, 200);
    CU_ASSERT_EQUAL(c.r.status, 200);
    serve_reply_free(&a.r);
    serve_reply_free(&b.r);
    serve_reply_free(&c.r);
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_running", 0, 60));
    int status = serve_stop(&s);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* --max-waiting counts requests that wait for a sequence, not those about
 * to start: with 8 sequences and --max-waiting 2, six requests that arrive
 * together are all served. A's first forward is held while the other five
 * queue behind it (the gauge shows them waiting: they do, until the forward
 * ends), then everything runs. One-token prompts and --prefill-chunk 64 let
 * the step after the held one start all five beside A's decode, so what
 * the scheduler admits does not depend on the machine's speed. */
static void test_burst_at_idle_is_not_queue_full(void) {
    serve_server s = {0};
    serve_gate g;
    CU_ASSERT_FATAL(serve_gate_init(&g, "burst-gate"));
    static const char *const args[] = {"--parallel", "8", "--max-waiting", "2", "--prefill-chunk", "64",
                                       "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g, MODEL, "burst.log", args));
    serve_gate_hold(&g);
    long base = serve_gate_reached(&g);
    static const char body[] = "{\"prompt\":[5],\"max_tokens\":3,\"temperature\":0}";
    serve_post posts[6];
    pthread_t threads[6];
    for (int i = 0; i < 6; i++) posts[i] = (serve_post){&s, body, {0}};
    pthread_create(&threads[0], NULL, serve_post_main, &posts[0]);
    CU_ASSERT(serve_gate_wait_reached(&g, base + 1, 60));
    for (int i = 1; i < 6; i++) pthread_create(&threads[i], NULL, serve_post_main, &posts[i]);
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_waiting", 5, 60));
    serve_gate_open(&g);
    for (int i = 0; i < 6; i++) {
        pthread_join(threads[i], NULL);
        CU_ASSERT_EQUAL(posts[i].r.status, 200);
        if (posts[i].r.status != 200) fprintf(stderr, "request %d: %ld %s\n", i, posts[i].r.status, posts[i].r.body.s);
        serve_reply_free(&posts[i].r);
    }
    int status = serve_stop(&s);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A chat request ends at the template's end of turn: the trained
 * aidreams260k, asked for a story in Llama 2's format, closes it with "</s>"
 * well before max_tokens (checked with vt run); the answer stops there, as
 * stop, without the marker's text. The start-up line names the ids. */
static void test_chat_stops_at_end_of_turn(void) {
    serve_server s = {0};
    static const char *const args[] = {"--chat-template", "llama2", NULL};
    CU_ASSERT_FATAL(serve_start(&s, "aidreams260k-f32.gguf", "eot.log", args));
    serve_reply r = serve_http(&s, NULL, "/v1/chat/completions",
                               "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                               "\"max_tokens\":100,\"temperature\":0}",
                               NULL);
    json_value v;
    CU_ASSERT_EQUAL(r.status, 200);
    if (r.status == 200 && parse(&r, &v)) {
        const json_value *ch = choice0(&v), *f = ch ? json_get(ch, "finish_reason") : NULL;
        const json_value *content = ch ? path_get(ch, "message", "content") : NULL;
        const json_value *ct = path_get(&v, "usage", "completion_tokens");
        CU_ASSERT(f && f->type == JSON_STRING && strcmp(f->str, "stop") == 0);
        CU_ASSERT(ct && ct->number > 10 && ct->number < 100);
        CU_ASSERT(content && content->type == JSON_STRING && content->len > 0 && !strstr(content->str, "</s>"));
        json_free(&v);
    }
    serve_reply_free(&r);
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
    char *log = vt_test_read_file(s.log, NULL);
    CU_ASSERT(log && strstr(log, "chat requests stop on token ids 2\n")); /* "</s>": EOS and the end of turn */
    free(log);
    /* The main server's chatml "<|im_end|>" is not a token of the test vocabulary: said at start. */
    log = vt_test_read_file(main_srv.log, NULL);
    CU_ASSERT(log && strstr(log, "end of turn <|im_end|> is not a control token of this vocabulary"));
    free(log);
}

/* `vt serve --dry-run ARGS` on the test model: exit status, stderr in *err. */
static int serve_dry_run(const char *args, char **err) {
    const char *dir = vt_test_data_dir("test models");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s serve -m %s/models/%s --dry-run -t 1 %s", VT_CLI_PATH, dir, MODEL, args);
    *err = NULL;
    return vt_test_run_cmd(cmd, NULL, err);
}

/* Every engine lever of `vt run` reaches the batch vt serve opens; --dry-run
 * prints the plans and exits without listening. */
static void test_engine_levers_dry_run(void) {
    char *err = NULL;
    int rc = serve_dry_run("--kv-cache-dtype f32 -c 256 --block-size 32 --parallel 3 -b 64 --backend reference "
                           "--fallback none --chat-template chatml",
                           &err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    vt_explain x;
    CU_ASSERT(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.kv_dtype, "f32");
    CU_ASSERT_EQUAL(x.kv_tokens, 256);
    CU_ASSERT_EQUAL(x.kv_blocks, 8);
    CU_ASSERT_EQUAL(x.kv_block_size, 32);
    CU_ASSERT_EQUAL(x.prefill_max_tokens, 64); /* -b */
    CU_ASSERT_EQUAL(x.decode_max_tokens, 3);   /* --parallel */
    CU_ASSERT_STRING_EQUAL(x.backend, "reference");
    CU_ASSERT_STRING_EQUAL(x.fallback, "none");
    CU_ASSERT(strstr(err, "dry run: would serve") && strstr(err, "sequences per step 3") && strstr(err, "chatml"));
    CU_ASSERT(strstr(err, "listening on") == NULL);
    /* --explain names where each knob came from, as vt run's does: these
     * were given on the command line, never "api" (the batch is opened with
     * the options as the command line resolved them) */
    CU_ASSERT_STRING_EQUAL(x.kv_source, "cli");
    CU_ASSERT_STRING_EQUAL(x.backend_source, "cli");
    CU_ASSERT_STRING_EQUAL(x.fallback_source, "cli");
    CU_ASSERT(strstr(err, "from api") == NULL); /* on no line, the prefix cache's included */
    vt_explain_free(&x);
    free(err);
    /* the environment's value, named as such; the default as the default */
    const char *dir = vt_test_data_dir("test models");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "VT_KV_CACHE_DTYPE=bf16 %s serve -m %s/models/%s --dry-run -t 1", VT_CLI_PATH, dir,
             MODEL);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 0);
    CU_ASSERT(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.kv_dtype, "bf16");
    CU_ASSERT_STRING_EQUAL(x.kv_source, "env VT_KV_CACHE_DTYPE");
    CU_ASSERT_STRING_EQUAL(x.backend_source, "the highest probe score");
    CU_ASSERT(err && !strstr(err, "from api"));
    vt_explain_free(&x);
    free(err);

    /* --backend-option reaches the backend's init: a test plugin refuses to
     * start when told to, and says what it got. */
    char args[1024];
    snprintf(args, sizeof args,
             "--backend-path %s --backend options_probe --fallback reference --backend-option options_probe.refuse=1",
             VT_TEST_PLUGIN_DIR);
    rc = serve_dry_run(args, &err);
    CU_ASSERT_EQUAL(rc, 5);
    CU_ASSERT(err && strstr(err, "refusing as asked by its options 'refuse=1'"));
    free(err);

    /* The ini's [backend.NAME] reaches it too, --config's knobs as well, and
     * the command line's --backend-option replaces the ini's value. */
    char ini[512];
    vt_test_tmpfile(ini, sizeof ini, "serve_levers.ini");
    FILE *f = fopen(ini, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("[kv_cache]\ndtype = bf16\n[backend.options_probe]\nrefuse = 1\n", f);
    fclose(f);
    snprintf(args, sizeof args, "--config %s --backend-path %s --backend options_probe --fallback reference", ini,
             VT_TEST_PLUGIN_DIR);
    rc = serve_dry_run(args, &err);
    CU_ASSERT_EQUAL(rc, 5);
    CU_ASSERT(err && strstr(err, "refuse=1"));
    free(err);
    snprintf(args + strlen(args), sizeof args - strlen(args), " --backend-option options_probe.refuse=0");
    rc = serve_dry_run(args, &err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(vt_explain_parse(err, &x));
    CU_ASSERT_STRING_EQUAL(x.backend, "options_probe");
    CU_ASSERT_STRING_EQUAL(x.fallback, "reference");
    CU_ASSERT_STRING_EQUAL(x.kv_dtype, "bf16");
    CU_ASSERT_STRING_EQUAL(x.kv_source, "ini 2");
    vt_explain_free(&x);
    free(err);

    /* --explain without --dry-run: the main server printed its plans (-c 512,
     * --parallel 4), then served. */
    char *log = vt_test_read_file(main_srv.log, NULL);
    CU_ASSERT(vt_explain_parse(log, &x)); /* false for NULL */
    CU_ASSERT(x.n > 0);
    CU_ASSERT_EQUAL(x.decode_max_tokens, 4);
    CU_ASSERT_EQUAL(x.kv_tokens, 512);
    vt_explain_free(&x);
    CU_ASSERT(log && strstr(log, "vt serve: ready"));
    CU_ASSERT(log && !strstr(log, "prefix cache off")); /* on, as by default: the ready line says nothing */
    free(log);
}

/* Each flag is described once in vt serve --help. */
static void test_help_says_each_flag_once(void) {
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s serve --help", VT_CLI_PATH);
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd(cmd, &out, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    static const char *const flags[] = {"--max-waiting", "--max-seqs", "--parallel", "--explain", "--dry-run",
                                        "--special", "--backend-option", "--kv-cache-dtype", "--host"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        int n = 0;
        size_t len = strlen(flags[i]);
        /* Described: on an option line (indented), in its flag column. */
        for (const char *p = strstr(out, flags[i]); p; p = strstr(p + 1, flags[i])) {
            const char *line = p;
            while (line > out && line[-1] != '\n') line--;
            n += line[0] == ' ' && p - line < 28 && (p[len] == ' ' || p[len] == ',' || p[len] == '\n');
        }
        if (n != 1) fprintf(stderr, "vt serve --help describes %s %d times\n", flags[i], n);
        CU_ASSERT_EQUAL(n, 1);
    }
    free(out);
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    static CU_TestInfo tests[] = {
        {"health, models, metrics", test_health_models_metrics},
        {"greedy completion equals vt run --temp 0", test_completion_equals_vt_run},
        {"serve_streamed text equals the whole answer (completion, chat)", test_streaming_equals_whole},
        {"concurrent greedy requests get their text alone", test_concurrent_same_as_alone},
        {"tokenize and detokenize", test_tokenize_detokenize},
        {"control tokens round-trip through /tokenize and /detokenize; with_pieces", test_control_tokens_round_trip},
        {"bad input: 400 naming the field", test_bad_input},
        {"API key, unknown path, wrong method", test_auth_and_routes},
        {"the API key from a file", test_api_key_file},
        {"body limit, prompt past the context, max_tokens past it", test_body_limit_and_context},
        {"stop string", test_stop_string},
        {"prefix cache: cached_tokens in usage, the same text", test_prefix_cache_in_usage},
        {"a client leaving mid-stream frees its blocks", test_disconnect_frees_blocks},
        {"a waiting client that leaves is logged with its tokens", test_waiting_client_leaving_is_logged_with_its_tokens},
        {"a client that does not read does not stall others", test_slow_reader},
        {"full queue 503, time limit ends as length", test_queue_full_and_time_limit},
        {"a chat request stops at the template's end of turn", test_chat_stops_at_end_of_turn},
        {"every engine lever reaches vt serve; --dry-run", test_engine_levers_dry_run},
        {"--help describes each flag once", test_help_says_each_flag_once},
        {"no chat template; SIGHUP is ignored; SIGTERM drains and exits 0", test_no_template_and_drain},
        {"SIGTERM while loading stops at once; a second SIGTERM ends the drain", test_sigterm_while_loading_and_twice},
        {"SIGTERM: a request without a token yet is 503", test_shutdown_before_first_token},
        {"the gauges follow the token budget, not only free sequences", test_gauges_follow_token_budget},
        {"a burst at an idle server is served, not refused as a full queue", test_burst_at_idle_is_not_queue_full},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("serve", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
