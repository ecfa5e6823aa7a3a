/* test_serve_newcomer.c — what a new user of `vt serve` meets first, over
 * real HTTP (serve_client.c): a request without a seed samples with a fresh
 * random seed that its log line names, and that seed replays it; --seed N
 * numbers them N, N + 1, ... instead; a 400's log line says which field and
 * why; OpenAI's parallel_tool_calls, service_tier and store are decided per
 * field, never silently; a taken port or a foreign address is reported with
 * what bind said.
 *
 * The model is the trained aidreams260k (its sampled text varies with the
 * seed); nothing here depends on how fast the machine is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_mini.h"
#include "serve_client.h"
#include "util.h"

#define MODEL "aidreams260k-f32.gguf"

static serve_server random_srv, numbered_srv, last_seed_srv;

static int suite_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    static const char *const random_args[] = {"-c", "128", "--backend", "reference", NULL};
    static const char *const numbered_args[] = {"-c",   "128", "--backend",     "reference",
                                                 "--seed", "100", "--cors-origin", "https://app.example.com", NULL};
    static const char *const last_seed_args[] = {"-c", "128", "--backend", "reference", "--seed", "9223372036854775807",
                                                 NULL};
    return serve_start(&random_srv, MODEL, "random.log", random_args) &&
                   serve_start(&numbered_srv, MODEL, "numbered.log", numbered_args) &&
                   serve_start(&last_seed_srv, MODEL, "last-seed.log", last_seed_args)
               ? 0
               : 1;
}

static int suite_cleanup(void) {
    if (random_srv.pid > 0) serve_stop(&random_srv);
    if (numbered_srv.pid > 0) serve_stop(&numbered_srv);
    if (last_seed_srv.pid > 0) serve_stop(&last_seed_srv);
    curl_global_cleanup();
    return 0;
}

/* The completion's text (malloc'ed), or NULL when the answer is not a 200. */
static char *completion_text(const serve_server *s, const char *fields) {
    char body[1024];
    snprintf(body, sizeof body, "{\"prompt\":\"Once upon a time\",\"max_tokens\":24,\"temperature\":1%s}", fields);
    serve_reply r = serve_http(s, NULL, "/v1/completions", body, NULL);
    char *text = NULL;
    json_value v;
    char err[128];
    CU_ASSERT_EQUAL(r.status, 200);
    if (r.status == 200 && r.body.s && json_parse(r.body.s, r.body.n, &v, err, sizeof err)) {
        const json_value *choices = json_get(&v, "choices");
        const json_value *t = choices && choices->type == JSON_ARRAY && choices->n == 1
                                  ? json_get(&choices->items[0], "text")
                                  : NULL;
        if (t && t->type == JSON_STRING) text = strdup(t->str);
        json_free(&v);
    }
    serve_reply_free(&r);
    CU_ASSERT_PTR_NOT_NULL(text);
    return text;
}

/* The log line of the server's k-th (0-based) answer that contains `what`,
 * waited for up to 60 s: the server writes it once the answer is sent, which
 * may be just after the client has read it. Malloc'ed, or NULL. */
static char *log_line(const serve_server *s, const char *what, int k) {
    for (double t0 = serve_now(); serve_now() - t0 < 60; serve_sleep_ms(20)) {
        char *log = vt_test_read_file(s->log, NULL);
        int seen = 0;
        for (char *line = log ? strtok(log, "\n") : NULL; line; line = strtok(NULL, "\n")) {
            if (!strstr(line, what) || seen++ != k) continue;
            char *copy = strdup(line);
            free(log);
            return copy;
        }
        free(log);
    }
    printf("\n  no log line %d with \"%s\" in %s", k, what, s->log);
    return NULL;
}

/* The seed=N a log line names, or -1. */
static long long logged_seed(const char *line) {
    const char *at = line ? strstr(line, " seed=") : NULL;
    long long seed = -1;
    if (at && sscanf(at, " seed=%lld", &seed) != 1) seed = -1;
    return seed;
}

/* Without a seed each request draws one; the log names it; sent back as
 * "seed" it gives the same text. "seed": -1 draws one too. */
static void test_requests_without_seed_are_random_and_replayable(void) {
    char *first = completion_text(&random_srv, "");
    char *second = completion_text(&random_srv, ",\"seed\":-1");
    char *line0 = log_line(&random_srv, "POST /v1/completions 200", 0);
    char *line1 = log_line(&random_srv, "POST /v1/completions 200", 1);
    const long long seed0 = logged_seed(line0), seed1 = logged_seed(line1);
    CU_ASSERT(seed0 >= 0 && seed1 >= 0);
    /* Two draws from 2^32 seeds: equal once in four billion runs. */
    CU_ASSERT_NOT_EQUAL(seed0, seed1);
    char given[64];
    snprintf(given, sizeof given, ",\"seed\":%lld", seed0);
    char *replayed = completion_text(&random_srv, given);
    CU_ASSERT(first && replayed && strcmp(first, replayed) == 0);
    char *line2 = log_line(&random_srv, "POST /v1/completions 200", 2);
    CU_ASSERT_EQUAL(logged_seed(line2), seed0);
    free(first), free(second), free(replayed);
    free(line0), free(line1), free(line2);
}

/* --seed N: requests without a seed get N, N + 1, ... in arrival order; a
 * request of n choices takes n of them (choice i draws with seed + i), so
 * the next one does not repeat its last choice. */
static void test_given_seed_numbers_requests(void) {
    for (int k = 0; k < 2; k++) {
        char *text = completion_text(&numbered_srv, "");
        char *line = log_line(&numbered_srv, "POST /v1/completions 200", k);
        CU_ASSERT_EQUAL(logged_seed(line), 100 + k);
        free(text);
        free(line);
    }
    serve_reply r = serve_http(&numbered_srv, NULL, "/v1/completions",
                               "{\"prompt\":\"Once upon a time\",\"max_tokens\":4,\"n\":3}", NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    char *text = completion_text(&numbered_srv, "");
    char *n_line = log_line(&numbered_srv, "POST /v1/completions 200", 2);
    char *next = log_line(&numbered_srv, "POST /v1/completions 200", 3);
    CU_ASSERT_EQUAL(logged_seed(n_line), 102);
    CU_ASSERT_EQUAL(logged_seed(next), 105);
    free(text), free(n_line), free(next);
}

/* Every seed the server names can be sent back: --seed at the largest
 * seed (a JSON integer's int64) numbers the next request 0, and both
 * replay their texts. */
static void test_numbered_seeds_wrap_and_replay(void) {
    char *text[2];
    for (int k = 0; k < 2; k++) {
        text[k] = completion_text(&last_seed_srv, "");
        char *line = log_line(&last_seed_srv, "POST /v1/completions 200", k);
        CU_ASSERT(line && strstr(line, k ? " seed=0 " : " seed=9223372036854775807 ") != NULL);
        free(line);
    }
    char *again0 = completion_text(&last_seed_srv, ",\"seed\":9223372036854775807");
    char *again1 = completion_text(&last_seed_srv, ",\"seed\":0");
    CU_ASSERT(text[0] && again0 && strcmp(text[0], again0) == 0);
    CU_ASSERT(text[1] && again1 && strcmp(text[1], again1) == 0);
    free(text[0]), free(text[1]), free(again0), free(again1);
}

/* A 400's log line gives the field and the reason the client was told. */
static void test_bad_request_log_names_field_and_reason(void) {
    serve_reply r = serve_http(&random_srv, NULL, "/v1/completions", "{\"prompt\":\"x\",\"temperature\":\"hot\"}", NULL);
    CU_ASSERT_EQUAL(r.status, 400);
    serve_reply_free(&r);
    char *line = log_line(&random_srv, "POST /v1/completions 400", 0);
    CU_ASSERT(line && strstr(line, "param=temperature: expected a number"));
    free(line);
}

/* parallel_tool_calls: changes nothing without tools, so a boolean is
 * accepted; service_tier: "auto"/"default" only; store: false only;
 * verbosity: "medium" (OpenAI's default) only. */
static void test_openai_habit_fields_decided_per_field(void) {
    static const struct {
        const char *field;
        long status;
    } cases[] = {
        {"\"parallel_tool_calls\":true", 200}, {"\"parallel_tool_calls\":false", 200},
        {"\"parallel_tool_calls\":\"yes\"", 400}, {"\"service_tier\":\"auto\"", 200},
        {"\"service_tier\":\"default\"", 200}, {"\"service_tier\":\"flex\"", 400},
        {"\"store\":false", 200},  {"\"store\":true", 400},
        {"\"verbosity\":\"medium\"", 200}, {"\"verbosity\":\"low\"", 400},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char body[256];
        /* on /v1/completions: this model has no chat template, and both
         * endpoints read these fields with the same parser */
        snprintf(body, sizeof body, "{\"prompt\":\"hi\",\"max_tokens\":2,%s}", cases[i].field);
        serve_reply r = serve_http(&random_srv, NULL, "/v1/completions", body, NULL);
        if (r.status != cases[i].status) printf("\n  %s: %ld %s", cases[i].field, r.status, r.body.s ? r.body.s : "");
        CU_ASSERT_EQUAL(r.status, cases[i].status);
        if (cases[i].status == 400) { /* error.param is the field's name */
            char param[64];
            snprintf(param, sizeof param, "%.*s", (int)(strchr(cases[i].field + 1, '"') - cases[i].field - 1),
                     cases[i].field + 1);
            char *got = serve_error_param(&r);
            CU_ASSERT(got && strcmp(got, param) == 0);
            free(got);
        }
        serve_reply_free(&r);
    }
}

/* A second server on the first one's port is told the port is taken; one
 * on an address that is not this machine's is told so. */
static void test_listen_errors_say_what_bind_said(void) {
    const char *dir = vt_test_data_dir("test models");
    char cmd[2048], *err = NULL;
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' serve -m '%s/models/%s' -t 1 --port %d", VT_CLI_PATH, dir, MODEL,
             random_srv.port);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 2); /* VT_ERR_INVALID: the --port given */
    CU_ASSERT(err && strstr(err, "the port is in use (bind: EADDRINUSE)"));
    if (err && !strstr(err, "EADDRINUSE")) printf("\n  %s", err);
    free(err);
    err = NULL;
    /* 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine */
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' serve -m '%s/models/%s' -t 1 --host 192.0.2.1 --port 0", VT_CLI_PATH,
             dir, MODEL);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 2); /* the --host given */
    CU_ASSERT(err && strstr(err, "not an address of this machine (bind: EADDRNOTAVAIL)"));
    if (err && !strstr(err, "EADDRNOTAVAIL")) printf("\n  %s", err);
    free(err);
}

/* A template the flags name that cannot be read or does not parse is
 * refused before the port opens and the model loads (a typo must not cost a
 * load, nor show a load balancer a listening server that then exits), with
 * --dry-run too. One that parses but fails on a chat of one user message is
 * warned of before the load, not refused: its requests may give what it
 * lacks through chat_template_kwargs (firefunction-v2's `functions`). */
static void test_bad_template_refused_before_listening(void) {
    const char *dir = vt_test_data_dir("test models");
    char bad[1024], failing[1024], cmd[3200], *err = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(
        vt_test_write_tmpfile(bad, sizeof bad, "broken.jinja", "{% for m in messages %}{{ m.content }"));
    const char *files[] = {"/nonexistent/t.jinja", bad, bad};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "timeout 60 '%s' serve -m '%s/models/%s' -t 1 --port 0 --chat-template-file '%s'%s",
                 VT_CLI_PATH, dir, MODEL, files[i], i == 2 ? " --dry-run" : "");
        CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 2);
        /* refused before the port opens, and before a dry run loads and prints the plans */
        CU_ASSERT(err && strstr(err, files[i]) && !strstr(err, "listening") && !strstr(err, "backend:"));
        if (err && (strstr(err, "listening") || strstr(err, "backend:"))) printf("\n  %s", err);
        free(err);
        err = NULL;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(
        vt_test_write_tmpfile(failing, sizeof failing, "failing.jinja", "{{ messages[0].content | nosuchfilter }}"));
    const char *warned[] = {failing, VT_TEST_DATA_DIR "/chat_templates/fireworks-ai-llama-3-firefunction-v2.jinja"};
    const char *why[] = {"line 1: unknown filter 'nosuchfilter'", "'functions' is undefined"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "timeout 60 '%s' serve -m '%s/models/%s' -t 1 --port 0 --chat-template-file '%s' --dry-run",
                 VT_CLI_PATH, dir, MODEL, warned[i]);
        CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 0);
        const char *w = err ? strstr(err, "vt serve: warning: the chat template ") : NULL;
        /* said before the load prints the plans, naming the error and the way out */
        CU_ASSERT(w && strstr(w, "fails on a chat of one user message") && strstr(w, why[i]) &&
                  strstr(w, "chat_template_kwargs") && (!strstr(err, "backend:") || strstr(err, "backend:") > w));
        if (!w) printf("\n  %s", err ? err : "");
        free(err);
        err = NULL;
    }
}

/* A browser's preflight of path asking for the request headers `asked`. */
static serve_reply preflight(const serve_server *s, const char *path, const char *asked) {
    char line[512];
    snprintf(line, sizeof line, "Access-Control-Request-Headers: %s", asked);
    const char *const headers[] = {"Origin: https://app.example.com", "Access-Control-Request-Method: POST", line, NULL};
    return serve_http_with(s, "OPTIONS", path, NULL, NULL, headers);
}

/* --cors-origin: a browser's preflight gets 204 with the method the path
 * takes and the headers requests carry, without a key; every answer, an
 * error too, names the origin. Without it a preflight is 405 saying what to
 * start the server with, and answers name no origin. A POST from a page of
 * an origin not allowed is 403. */
static void test_cors(void) {
    serve_reply r = serve_http(&numbered_srv, "OPTIONS", "/v1/chat/completions", NULL, NULL);
    CU_ASSERT_EQUAL(r.status, 204);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "Access-Control-Allow-Origin: https://app.example.com") &&
              strstr(r.headers.s, "Access-Control-Allow-Methods: POST") &&
              strstr(r.headers.s, "Access-Control-Allow-Headers: Authorization, Content-Type"));
    serve_reply_free(&r);
    /* the headers the page's client names are allowed (the openai SDK sends
     * its own beside the key), and a list that is not header names is not
     * echoed */
    r = preflight(&numbered_srv, "/v1/chat/completions", "authorization, content-type, x-stainless-os, x-stainless-retry-count");
    CU_ASSERT(r.status == 204 && r.headers.s &&
              strstr(r.headers.s, "Access-Control-Allow-Headers: authorization, content-type, x-stainless-os, "
                                  "x-stainless-retry-count"));
    serve_reply_free(&r);
    r = preflight(&numbered_srv, "/v1/chat/completions", "x-a;y=1");
    CU_ASSERT(r.status == 204 && r.headers.s && strstr(r.headers.s, "Access-Control-Allow-Headers: Authorization, Content-Type"));
    serve_reply_free(&r);
    r = serve_http(&numbered_srv, "OPTIONS", "/v1/models", NULL, NULL);
    CU_ASSERT(r.status == 204 && r.headers.s && strstr(r.headers.s, "Access-Control-Allow-Methods: GET, HEAD"));
    serve_reply_free(&r);
    r = serve_http(&numbered_srv, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}", NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "Access-Control-Allow-Origin: https://app.example.com"));
    serve_reply_free(&r);
    r = serve_http(&numbered_srv, NULL, "/v1/completions", "{\"prompt\":5}", NULL);
    CU_ASSERT_EQUAL(r.status, 400);
    CU_ASSERT(r.headers.s && strstr(r.headers.s, "Access-Control-Allow-Origin: https://app.example.com"));
    serve_reply_free(&r);
    r = serve_http(&numbered_srv, NULL, "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1,\"stream\":true}", NULL);
    CU_ASSERT(r.status == 200 && r.headers.s && strstr(r.headers.s, "Access-Control-Allow-Origin"));
    serve_reply_free(&r);
    r = serve_http(&random_srv, "OPTIONS", "/v1/chat/completions", NULL, NULL);
    CU_ASSERT_EQUAL(r.status, 405);
    CU_ASSERT(r.body.s && strstr(r.body.s, "--cors-origin"));
    CU_ASSERT(r.headers.s && !strstr(r.headers.s, "Access-Control-Allow-Origin"));
    serve_reply_free(&r);
    /* a browser page's POST that needs no preflight (a text/plain body, a
     * form: whatever its type, the Origin a browser adds decides) runs only
     * from the origin --cors-origin allows: from another, or with no
     * --cors-origin, it is 403 before anything runs; a client that is not a
     * browser sends no Origin and is served */
    const char *body = "{\"prompt\":\"x\",\"max_tokens\":1}";
    static const struct {
        const serve_server *srv;
        const char *origin;
        int status;
    } posts[] = {
        {&numbered_srv, "Origin: https://app.example.com", 200},
        {&numbered_srv, "Origin: https://other.example", 403},
        {&random_srv, "Origin: https://app.example.com", 403},
        {&random_srv, "Origin: null", 403},
        {&random_srv, NULL, 200},
    };
    for (size_t i = 0; i < sizeof posts / sizeof *posts; i++) {
        const char *const headers[] = {posts[i].origin, NULL};
        r = serve_http_with(posts[i].srv, "POST", "/v1/completions", body, NULL, headers);
        CU_ASSERT_EQUAL(r.status, posts[i].status);
        if (posts[i].status == 403)
            CU_ASSERT(r.body.s && strstr(r.body.s, "permission_error") && strstr(r.body.s, "--cors-origin"));
        serve_reply_free(&r);
    }
    /* a page served through the same proxy as the API (a web UI) is no
     * other origin: the proxy names its host in X-Forwarded-Host, and the
     * Origin names the same; the Host header alone proves nothing (a page
     * under a name pointed at this machine sends its own name in both) */
    char own[96];
    snprintf(own, sizeof own, "Origin: http://127.0.0.1:%d", random_srv.port);
    const char *const same_host[] = {own, NULL};
    r = serve_http_with(&random_srv, "POST", "/v1/completions", body, NULL, same_host);
    CU_ASSERT_EQUAL(r.status, 403);
    serve_reply_free(&r);
    const char *const proxied[] = {"Origin: https://chat.example.com", "X-Forwarded-Host: chat.example.com", NULL};
    r = serve_http_with(&random_srv, "POST", "/v1/completions", body, NULL, proxied);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
    const char *const elsewhere[] = {"Origin: https://evil.example", "X-Forwarded-Host: chat.example.com", NULL};
    r = serve_http_with(&random_srv, "POST", "/v1/completions", body, NULL, elsewhere);
    CU_ASSERT_EQUAL(r.status, 403);
    serve_reply_free(&r);
    /* counted under their own status */
    r = serve_http(&random_srv, NULL, "/metrics", NULL, NULL);
    CU_ASSERT(r.body.s && strstr(r.body.s, "vt_requests_total{status=\"403\"}"));
    serve_reply_free(&r);
    /* an origin is scheme://host[:port], nothing more */
    const char *dir = vt_test_data_dir("test models");
    char cmd[2048], *err = NULL;
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' serve -m '%s/models/%s' --port 0 --cors-origin https://a.example/x",
             VT_CLI_PATH, dir, MODEL);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 2);
    CU_ASSERT(err && strstr(err, "cors_origin"));
    free(err);
}

/* A model file vt cannot run (cut short, or not a model at all), or a KV
 * cache dtype its heads do not fit, is refused before the port opens, with
 * one line saying why, as a missing file is. */
static void test_bad_model_refused_before_listening(void) {
    const char *dir = vt_test_data_dir("test models");
    char path[1024], cut[1024], cmd[3200], *err = NULL;
    snprintf(path, sizeof path, "%s/models/%s", dir, MODEL);
    /* its header and tensor table whole (a few KB), its tensors' data past the end */
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_cut_file(cut, sizeof cut, "cut-short.gguf", path, 65536));
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' serve -m '%s' -t 1 --port 0", VT_CLI_PATH, cut);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 2);
    CU_ASSERT(err && strstr(err, "lies outside the file") && !strstr(err, "listening"));
    if (err && strstr(err, "listening")) printf("\n  %s", err);
    free(err);
    err = NULL;
    /* a KV cache dtype the model's heads do not fit (q8_0's blocks of 32,
     * heads of 16), set in an ini file: refused before listening, naming
     * the line that set it */
    char ini[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(ini, sizeof ini, "q8-cache.ini", "[kv_cache]\ndtype = q8_0\n"));
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' serve -m '%s' -t 1 --port 0 --config '%s'", VT_CLI_PATH, path, ini);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 4);
    char where[1100];
    snprintf(where, sizeof where, "(kv_cache.dtype = q8_0 from %s:2)", ini);
    CU_ASSERT(err && strstr(err, "head_dim is 16") && strstr(err, where) && !strstr(err, "listening"));
    if (err && (strstr(err, "listening") || !strstr(err, where))) printf("\n  %s", err);
    free(err);
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    static CU_TestInfo tests[] = {
        {"requests without a seed: random, logged, replayable", test_requests_without_seed_are_random_and_replayable},
        {"--seed N numbers requests N, N + 1, ...", test_given_seed_numbers_requests},
        {"a 400's log line names the field and the reason", test_bad_request_log_names_field_and_reason},
        {"parallel_tool_calls, service_tier, store, verbosity: decided per field",
         test_openai_habit_fields_decided_per_field},
        {"listen errors say what bind said", test_listen_errors_say_what_bind_said},
        {"a bad --chat-template-file is refused before listening", test_bad_template_refused_before_listening},
        {"a model file vt cannot run, or a KV cache dtype it cannot hold, is refused before listening",
         test_bad_model_refused_before_listening},
        {"--cors-origin: preflights and the origin on every answer", test_cors},
        {"--seed numbers wrap at the largest seed and replay", test_numbered_seeds_wrap_and_replay},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("serve newcomer", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
