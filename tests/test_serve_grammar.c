/* test_serve_grammar.c — structured output through a real `vt serve`:
 * response_format (json_object, json_schema), llama-server's json_schema and
 * grammar fields, on both endpoints, on a random tiny model (whose output is
 * garbage unless the mask holds).
 *
 * For each schema in tests/data/schemas/, 100 seeded sampled completions
 * (several sampling settings, both endpoints, both schema fields, 8 at a
 * time) are validated by an independent checker, python-jsonschema
 * (tests/check_json_schema.py): every completion that finished must parse
 * and validate, and at least 80% must finish within max_tokens. Bad
 * grammars and unsupported schema keywords are 400s naming the field. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_mini.h"
#include "serve_client.h"
#include "util.h"

#define MODEL "qwen3-tiny-q8_0.gguf"
/* 100 completions a schema; the sanitizer build, several times slower, runs
 * 25 of them: it is there for memory errors, and the Release pass of the
 * same runner validates all 100. */
#if defined(__SANITIZE_ADDRESS__)
#define N_SEEDS 25
#else
#define N_SEEDS 100
#endif
#define N_THREADS 8

static serve_server srv;

static int suite_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    static const char *const args[] = {"--parallel", "8", "-c", "8192", "--chat-template", "chatml", NULL};
    return serve_start(&srv, MODEL, "grammar.log", args) ? 0 : 1;
}

static int suite_cleanup(void) {
    if (srv.pid > 0) serve_stop(&srv);
    curl_global_cleanup();
    return 0;
}

/* The text and finish reason of an answer (chat or completion). */
static bool answer(const serve_reply *r, char **text, char *finish, size_t finish_size) {
    json_value v;
    char e[128];
    if (!json_parse(r->body.s, r->body.n, &v, e, sizeof e)) return false;
    const json_value *choices = json_get(&v, "choices");
    const json_value *c0 = choices && choices->n > 0 ? &choices->items[0] : NULL;
    const json_value *msg = c0 ? json_get(c0, "message") : NULL;
    const json_value *t = msg ? json_get(msg, "content") : c0 ? json_get(c0, "text") : NULL;
    const json_value *f = c0 ? json_get(c0, "finish_reason") : NULL;
    bool ok = t && t->type == JSON_STRING && f && f->type == JSON_STRING;
    if (ok) {
        *text = strdup(t->str);
        snprintf(finish, finish_size, "%s", f->str);
    }
    json_free(&v);
    return ok;
}

/* ---- 100 completions per schema, validated by python-jsonschema ----------- */

typedef struct batch_job {
    const char *schema;
    int first;
    char *bodies[N_SEEDS];
    long status[N_SEEDS];
} batch_job;

static batch_job job;

/* Request i: endpoint, field and sampling vary with i; the seed is i. */
static void *run_requests(void *arg) {
    const int t = (int)(intptr_t)arg;
    size_t cap = strlen(job.schema) + 1024;
    char *body = malloc(cap);
    for (int i = t; i < N_SEEDS && body; i += N_THREADS) {
        static const char *const sampling[] = {
            "\"temperature\":1.0", "\"temperature\":0.9,\"top_k\":40", "\"temperature\":1.2,\"top_p\":0.9",
            "\"temperature\":1.0,\"min_p\":0.05,\"presence_penalty\":0.5", "\"temperature\":0"};
        const char *path = i % 3 == 1 ? "/v1/chat/completions" : "/v1/completions";
        const char *prompt = i % 3 == 1 ? "\"messages\":[{\"role\":\"user\",\"content\":\"Reply in JSON.\"}]"
                                        : "\"prompt\":\"Reply in JSON:\"";
        if (i % 3 == 2)
            snprintf(body, cap, "{%s,\"seed\":%d,\"max_tokens\":600,%s,\"json_schema\":%s}", prompt, i,
                     sampling[i % 5], job.schema);
        else
            snprintf(body, cap,
                     "{%s,\"seed\":%d,\"max_tokens\":600,%s,\"response_format\":{\"type\":\"json_schema\","
                     "\"json_schema\":{\"name\":\"answer\",\"strict\":true,\"schema\":%s}}}",
                     prompt, i, sampling[i % 5], job.schema);
        serve_reply r = serve_http(&srv, "POST", path, body, NULL);
        job.status[i] = r.status;
        job.bodies[i] = r.body.s ? strdup(r.body.s) : NULL;
        serve_reply_free(&r);
    }
    free(body);
    return NULL;
}

static void check_schema(const char *name) {
    const char *data = vt_test_data_dir("schemas");
    if (!data) return;
    char schema_path[1024], answers[1024], cmd[3072];
    snprintf(schema_path, sizeof schema_path, "%s/schemas/%s.json", data, name);
    char *schema = vt_test_read_file(schema_path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(schema);
    memset(&job, 0, sizeof job);
    job.schema = schema;
    pthread_t th[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) pthread_create(&th[t], NULL, run_requests, (void *)(intptr_t)t);
    for (int t = 0; t < N_THREADS; t++) pthread_join(th[t], NULL);
    vt_test_tmpfile(answers, sizeof answers, name);
    FILE *f = fopen(answers, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int ok = 0;
    for (int i = 0; i < N_SEEDS; i++) {
        if (job.status[i] != 200) printf("\n  %s seed %d: HTTP %ld %s", name, i, job.status[i], job.bodies[i]);
        CU_ASSERT_EQUAL(job.status[i], 200);
        if (job.status[i] == 200 && job.bodies[i]) {
            for (char *p = job.bodies[i]; *p; p++)
                if (*p == '\n') *p = ' '; /* one answer per line (JSON allows a newline only as whitespace) */
            fprintf(f, "%s\n", job.bodies[i]);
            ok++;
        }
        free(job.bodies[i]);
    }
    fclose(f);
    CU_ASSERT_EQUAL(ok, N_SEEDS);
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/check_json_schema.py' '%s' '%s' 0.8", VT_SOURCE_DIR, schema_path,
             answers);
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_cmd(cmd, &out, &err);
    printf("\n  %s%s", out ? out : "", err ? err : "");
    CU_ASSERT_EQUAL(rc, 0);
    free(out);
    free(err);
    free(schema);
}

static void test_nested_objects(void) { check_schema("nested_objects"); }
static void test_arrays(void) { check_schema("arrays"); }
static void test_enums(void) { check_schema("enums"); }
static void test_any_of(void) { check_schema("any_of"); }
static void test_recursive_ref(void) { check_schema("recursive_ref"); }
static void test_patterns(void) { check_schema("patterns"); }

/* ---- the other fields ------------------------------------------------------ */

static void post_answer(const char *path, const char *body, char **text, char *finish, size_t fsize) {
    serve_reply r = serve_http(&srv, "POST", path, body, NULL);
    if (r.status != 200) printf("\n  %s: HTTP %ld %s", body, r.status, r.body.s);
    CU_ASSERT_EQUAL(r.status, 200);
    *text = NULL;
    CU_ASSERT_TRUE(r.status == 200 && answer(&r, text, finish, fsize));
    serve_reply_free(&r);
}

static void test_gbnf_grammar_on_both_endpoints(void) {
    static const char *const paths[] = {"/v1/completions", "/v1/chat/completions"};
    static const char *const prompts[] = {"\"prompt\":\"Answer:\"",
                                          "\"messages\":[{\"role\":\"user\",\"content\":\"Yes or no?\"}]"};
    for (int e = 0; e < 2; e++)
        for (int seed = 0; seed < 5; seed++) {
            char body[512];
            snprintf(body, sizeof body,
                     "{%s,\"seed\":%d,\"temperature\":1.0,\"grammar\":\"root ::= (\\\"yes\\\" | \\\"no\\\") "
                     "\\\"!\\\"{1,3}\\n\"}",
                     prompts[e], seed);
            char *text, finish[16];
            post_answer(paths[e], body, &text, finish, sizeof finish);
            CU_ASSERT_TRUE(text && (!strncmp(text, "yes!", 4) || !strncmp(text, "no!", 3)));
            CU_ASSERT_STRING_EQUAL(finish, "stop");
            free(text);
        }
    /* streamed: the same text in chunks */
    serve_reply r = serve_http(&srv, "POST", "/v1/completions",
                               "{\"prompt\":\"Answer:\",\"seed\":1,\"stream\":true,\"grammar\":\"root ::= [a-c]{4}\"}",
                               NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_streamed st;
    serve_read_events(r.body.s, false, &st);
    CU_ASSERT_TRUE(st.done && !st.bad_event);
    CU_ASSERT_EQUAL(st.n_text, 4);
    for (size_t i = 0; i < st.n_text; i++) CU_ASSERT_TRUE(st.text[i] >= 'a' && st.text[i] <= 'c');
    CU_ASSERT_STRING_EQUAL(st.finish, "stop");
    free(st.text);
    serve_reply_free(&r);
}

/* A grammar that completes ends the answer as "stop" on a token that is
 * part of it: its log-probability is reported with the others (one per
 * generated token), not dropped as a stop token's is. */
static void test_logprobs_of_a_completed_grammar(void) {
    serve_reply r = serve_http(&srv, "POST", "/v1/completions",
                               "{\"prompt\":\"Answer:\",\"seed\":2,\"max_tokens\":8,\"logprobs\":1,"
                               "\"grammar\":\"root ::= [a-c]{3}\"}",
                               NULL);
    CU_ASSERT_EQUAL_FATAL(r.status, 200);
    json_value v;
    char e[256];
    CU_ASSERT_FATAL(json_parse(r.body.s, r.body.n, &v, e, sizeof e));
    const json_value *c0 = json_get(&v, "choices") ? &json_get(&v, "choices")->items[0] : NULL;
    const json_value *lp = c0 ? json_get(c0, "logprobs") : NULL, *tokens = lp ? json_get(lp, "tokens") : NULL;
    const json_value *usage = json_get(&v, "usage"), *n = usage ? json_get(usage, "completion_tokens") : NULL;
    const json_value *finish = c0 ? json_get(c0, "finish_reason") : NULL;
    CU_ASSERT(finish && finish->str && strcmp(finish->str, "stop") == 0);
    CU_ASSERT(tokens && n && tokens->n == (size_t)n->number && tokens->n >= 1);
    if (tokens && n && tokens->n != (size_t)n->number)
        printf("\n  %zu logprobs for %g tokens: %s", tokens->n, n->number, r.body.s);
    json_free(&v);
    serve_reply_free(&r);
}

/* json_object: any object; those that finish parse as one (json_mini). */
static void test_json_object(void) {
    int completed = 0;
    for (int seed = 0; seed < 6; seed++) {
        char body[256], *text, finish[16];
        snprintf(body, sizeof body,
                 "{\"prompt\":\"JSON:\",\"seed\":%d,\"temperature\":0.7,\"max_tokens\":1500,\"response_format\":{"
                 "\"type\":\"json_object\"}}",
                 seed);
        post_answer("/v1/completions", body, &text, finish, sizeof finish);
        CU_ASSERT_TRUE(!strcmp(finish, "stop") || !strcmp(finish, "length"));
        if (text && !strcmp(finish, "stop")) {
            json_value v;
            char e[128];
            bool parsed = json_parse(text, strlen(text), &v, e, sizeof e);
            if (!parsed) printf("\n  not JSON (%s): %s", e, text);
            CU_ASSERT_TRUE(parsed && v.type == JSON_OBJECT);
            if (parsed) json_free(&v);
            completed++;
        }
        if (text) CU_ASSERT_EQUAL(text[0], '{');
        free(text);
    }
    printf("\n  %d of 6 json_object answers completed", completed);
    CU_ASSERT_TRUE(completed >= 1);
    /* response_format text is plain text */
    char *text, finish[16];
    post_answer("/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":3,\"response_format\":{\"type\":\"text\"}}", &text,
                finish, sizeof finish);
    free(text);
}

static void test_length_inside_the_schema(void) {
    char *text, finish[16];
    post_answer("/v1/completions",
                "{\"prompt\":\"x\",\"max_tokens\":3,\"seed\":1,\"json_schema\":{\"type\":\"object\",\"properties\":{"
                "\"a\":{\"type\":\"string\",\"minLength\":20}},\"required\":[\"a\"]}}",
                &text, finish, sizeof finish);
    CU_ASSERT_STRING_EQUAL(finish, "length");
    CU_ASSERT_TRUE(text && text[0] == '{');
    free(text);
}

/* ---- refusals ------------------------------------------------------------- */

static void expect_400(const char *path, const char *body, const char *param, const char *fragment) {
    serve_reply r = serve_http(&srv, "POST", path, body, NULL);
    CU_ASSERT_EQUAL(r.status, 400);
    json_value v;
    char e[128];
    bool parsed = r.body.s && json_parse(r.body.s, r.body.n, &v, e, sizeof e);
    CU_ASSERT_TRUE_FATAL(parsed);
    const json_value *err = json_get(&v, "error");
    const json_value *m = err ? json_get(err, "message") : NULL, *p = err ? json_get(err, "param") : NULL;
    const bool good = m && m->type == JSON_STRING && strstr(m->str, fragment) && p && p->type == JSON_STRING &&
                      strcmp(p->str, param) == 0;
    if (!good) printf("\n  %s\n  -> %ld %s\n  wanted param %s and '%s'", body, r.status, r.body.s, param, fragment);
    CU_ASSERT_TRUE(good);
    json_free(&v);
    serve_reply_free(&r);
}

#define COMPLETION(fields) "{\"prompt\":\"x\"," fields "}"
#define RF_SCHEMA(schema) "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":" schema "}}"

static void test_refusals_name_the_field(void) {
    const char *c = "/v1/completions";
    expect_400(c, COMPLETION("\"grammar\":\"root ::= digit+\""), "grammar",
               "grammar: line 1, column 10: rule 'digit' is used but not defined");
    expect_400(c, COMPLETION("\"grammar\":\"root ::= \\\"a\\\"\\nroot ::= \\\"b\\\"\""), "grammar",
               "line 2, column 1: rule 'root' is defined twice");
    expect_400(c, COMPLETION("\"grammar\":\"root ::= x\\nx ::= x \\\"a\\\" | \\\"b\\\"\""), "grammar", "left recursion");
    expect_400(c, COMPLETION("\"grammar\":42"), "grammar", "expected GBNF text");
    expect_400(c, COMPLETION("\"json_schema\":{\"type\":\"integer\",\"multipleOf\":3}"), "json_schema",
               "'multipleOf' is not supported");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"type\":\"object\",\"properties\":{\"t\":{\"type\":\"array\",\"uniqueItems\":true}}}")),
               "response_format.json_schema.schema", "/properties/t: 'uniqueItems' is not supported");
    /* a refusal of the schema itself follows the field's name directly */
    expect_400(c, COMPLETION(RF_SCHEMA("{\"not\":{\"type\":\"string\"}}")), "response_format.json_schema.schema",
               "response_format.json_schema.schema: 'not' is not supported");
    /* the schema's name follows OpenAI's rule (a missing one is taken) */
    expect_400(c,
               COMPLETION("\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"has space!\","
                          "\"schema\":{\"type\":\"integer\"}}}"),
               "response_format.json_schema.name", "1 to 64 letters");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"type\":\"object\",\"patternProperties\":{\"^x\":{}}}")),
               "response_format.json_schema.schema", "'patternProperties' is not supported");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"type\":\"string\",\"format\":\"hostname\"}")),
               "response_format.json_schema.schema", "format 'hostname' is not supported");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}")),
               "response_format.json_schema.schema", "use anyOf");
    /* objects whose common property is not fixed differently in each branch */
    expect_400(c, COMPLETION(RF_SCHEMA("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}},"
                                       "\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":1}},"
                                       "\"required\":[\"k\"]}]}")),
               "response_format.json_schema.schema", "use anyOf");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"$ref\":\"https://example.com/s.json\"}")),
               "response_format.json_schema.schema", "only local references");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"$ref\":\"#/$defs/missing\"}")), "response_format.json_schema.schema",
               "points to nothing");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"type\":\"string\",\"pattern\":\"^(?=a)b$\"}")),
               "response_format.json_schema.schema", "pattern: lookarounds");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"type\":\"string\",\"pattern\":\"^(a)\\\\1$\"}")),
               "response_format.json_schema.schema", "back-references");
    expect_400(c, COMPLETION(RF_SCHEMA("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}")),
               "response_format.json_schema.schema", "no integer lies within");
    expect_400(c, COMPLETION("\"json_schema\":{\"$ref\":\"#\"}"), "json_schema", "left recursion");
    expect_400(c, COMPLETION("\"json_schema\":{\"type\":\"strin\"}"), "json_schema", "'strin' is not a JSON Schema type");
    expect_400(c, COMPLETION("\"response_format\":{\"type\":\"xml\"}"), "response_format.type", "'xml'");
    expect_400(c, COMPLETION("\"response_format\":{\"type\":\"json_schema\"}"), "response_format.json_schema",
               "required");
    expect_400(c, COMPLETION("\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"bogus\":1}}"),
               "response_format.json_schema.bogus", "unknown field");
    expect_400(c, COMPLETION("\"grammar\":\"root ::= \\\"a\\\"\",\"json_schema\":{}"), "grammar", "give one of");
    expect_400("/v1/chat/completions",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\","
               "\"json_schema\":{\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"if\":{}}}}}}}",
               "response_format.json_schema.schema", "/properties/a: 'if' is not supported");
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    CU_TestInfo tests[] = {
        {"100 completions validate: nested objects", test_nested_objects},
        {"100 completions validate: arrays", test_arrays},
        {"100 completions validate: enums and const", test_enums},
        {"100 completions validate: anyOf, oneOf (discriminated too), allOf", test_any_of},
        {"100 completions validate: $ref recursion", test_recursive_ref},
        {"100 completions validate: patterns and formats", test_patterns},
        {"GBNF grammar on both endpoints", test_gbnf_grammar_on_both_endpoints},
        {"logprobs of an answer its grammar completed: one per token", test_logprobs_of_a_completed_grammar},
        {"json_object", test_json_object},
        {"max_tokens inside the schema is length", test_length_inside_the_schema},
        {"refusals name the field", test_refusals_name_the_field},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("vt serve structured output", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
