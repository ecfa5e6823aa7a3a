/* test_serve_stress.c — `vt serve` under load: 500 requests from 16
 * concurrent clients, some of them leaving mid-answer, against one server.
 *
 * What it proves, beyond test_serve's one-at-a-time faults: many requests
 * joining and leaving the batch at random points (queued, prefilling,
 * decoding, streaming) neither crash, leak (the suite runs this under ASan,
 * and the server must exit 0 on SIGTERM, which a leak report would spoil)
 * nor mix two clients' tokens: every answer that completes equals what the
 * same request gives alone, and afterwards /metrics shows every KV block
 * free, nothing running or waiting, and request counters that add up.
 *
 * The randomness is seeded (STRESS_SEED), so a failure replays the same mix
 * of requests; thread timing still varies from run to run. The model is the
 * tiny qwen3 and max_tokens small, so the run stays within ~a minute under
 * ASan on two cores. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "json_mini.h"
#include "serve_client.h"
#include "util.h"

#define MODEL "qwen3-tiny-q8_0.gguf"
#define N_REQUESTS 500
#define N_CLIENTS 16
#define MAX_TOKENS 10
#define STRESS_SEED 0x5eedu
/* Out of 100: requests whose client leaves before the answer is complete. */
#define LEAVE_PERCENT 25

static serve_server srv;

/* A request shape: prompt x endpoint x sampling. Each has its answer alone. */
static const char *const prompts[] = {"Hello world", "Once upon a time", "The quick brown fox",
                                      "1, 2, 3, 4,", "Paris is the capital of", "Dear diary,"};
#define N_PROMPTS (sizeof prompts / sizeof *prompts)
#define N_SHAPES (N_PROMPTS * 2 * 2)

typedef struct shape {
    size_t prompt;
    bool chat;
    bool sampled; /* temperature 0.9 with a fixed seed; otherwise greedy */
} shape;

static shape shape_of(size_t k) { return (shape){k / 4, (k / 2) % 2 == 1, k % 2 == 1}; }

static char *alone_text[N_SHAPES];

static void request_body(shape s, bool stream, char *out, size_t cap) {
    char sampling[64];
    snprintf(sampling, sizeof sampling, s.sampled ? "\"temperature\":0.9,\"seed\":%d" : "\"temperature\":0",
             (int)s.prompt + 11);
    if (s.chat)
        snprintf(out, cap,
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],\"max_tokens\":%d,%s%s}",
                 prompts[s.prompt], MAX_TOKENS, sampling,
                 stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "");
    else
        snprintf(out, cap, "{\"model\":\"m\",\"prompt\":\"%s\",\"max_tokens\":%d,%s%s}", prompts[s.prompt],
                 MAX_TOKENS, sampling, stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "");
}

/* The text of a whole (non-streamed) answer, or NULL. */
static char *answer_text(const char *body, bool chat, long *completion_tokens) {
    json_value v;
    char err[128];
    if (!body || !json_parse(body, strlen(body), &v, err, sizeof err)) return NULL;
    char *text = NULL;
    const json_value *choices = json_get(&v, "choices");
    const json_value *c0 = choices && choices->type == JSON_ARRAY && choices->n > 0 ? &choices->items[0] : NULL;
    const json_value *msg = c0 && chat ? json_get(c0, "message") : NULL;
    const json_value *t = c0 ? (chat ? (msg ? json_get(msg, "content") : NULL) : json_get(c0, "text")) : NULL;
    if (t && t->type == JSON_STRING) text = strdup(t->str);
    const json_value *usage = json_get(&v, "usage");
    const json_value *ct = usage ? json_get(usage, "completion_tokens") : NULL;
    *completion_tokens = ct ? (long)ct->number : -1;
    json_free(&v);
    return text;
}

/* ---- one client request --------------------------------------------------- */

typedef struct leave_after {
    serve_buf body;
    int chunks_left; /* write callbacks before the client hangs up; < 0 never */
} leave_after;

static size_t write_or_leave(char *p, size_t size, size_t n, void *user) {
    leave_after *l = user;
    if (l->chunks_left == 0) return 0; /* 0 aborts the transfer: the client hangs up */
    if (l->chunks_left > 0) l->chunks_left--;
    return serve_collect(p, size, n, &l->body);
}

typedef enum outcome { COMPLETED, LEFT, BROKEN } outcome;

typedef struct result {
    outcome how;
    bool text_matches;
    long completion_tokens;
    bool reached; /* the whole request was sent */
    char detail[160];
} result;

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Request i of the run: its shape, stream or not, and whether and when its
 * client leaves, all from the seed. */
static result run_request(size_t i) {
    uint64_t r = splitmix(STRESS_SEED ^ (i * 0x100000001b3ull));
    shape s = shape_of((size_t)(r % N_SHAPES));
    bool stream = (r >> 8) & 1;
    bool leave = (r >> 16) % 100 < LEAVE_PERCENT;
    char body[512];
    request_body(s, stream, body, sizeof body);

    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", srv.port, s.chat ? "/v1/chat/completions" : "/v1/completions");
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    leave_after l = {{0}, -1};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_or_leave);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &l);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    if (leave && stream) l.chunks_left = (int)((r >> 24) % 4); /* 0: before the first byte of the answer */
    if (leave && !stream) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(20 + (r >> 24) % 400)); /* queued or running */
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_off_t uploaded = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &uploaded);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);

    result out = {BROKEN, false, -1, true, ""};
    if (leave && (rc == CURLE_WRITE_ERROR || rc == CURLE_OPERATION_TIMEDOUT)) {
        out.how = LEFT;
        /* A client that gave up before its body was out never made a request the server could count. */
        out.reached = uploaded >= (curl_off_t)strlen(body);
    } else if (rc != CURLE_OK || status != 200) {
        snprintf(out.detail, sizeof out.detail, "request %zu: curl %d, HTTP %ld: %.100s", i, (int)rc, status,
                 l.body.s ? l.body.s : "");
    } else {
        /* A client meant to leave whose answer came first completed: check it too. */
        char *text = NULL;
        if (stream) {
            serve_streamed st;
            serve_read_events(l.body.s ? l.body.s : "", s.chat, &st);
            if (st.done && !st.bad_event && st.finish[0]) {
                text = st.text;
                out.completion_tokens = st.usage_completion;
            } else {
                free(st.text);
            }
        } else {
            text = answer_text(l.body.s, s.chat, &out.completion_tokens);
        }
        size_t k = (size_t)(r % N_SHAPES);
        if (!text) {
            snprintf(out.detail, sizeof out.detail, "request %zu: malformed answer: %.100s", i, l.body.s ? l.body.s : "");
        } else {
            out.how = COMPLETED;
            out.text_matches = alone_text[k] && strcmp(text, alone_text[k]) == 0;
            if (!out.text_matches)
                snprintf(out.detail, sizeof out.detail, "request %zu (shape %zu, %s): \"%.50s\" alone \"%.50s\"", i,
                         k, stream ? "streamed" : "whole", text, alone_text[k] ? alone_text[k] : "(none)");
        }
        free(text);
    }
    free(l.body.s);
    return out;
}

/* Requests whose client certainly leaves: streamed, hanging up at the
 * first write callback (the same draws as run_request). */
static int certain_leavers(void) {
    int n = 0;
    for (size_t i = 0; i < N_REQUESTS; i++) {
        uint64_t r = splitmix(STRESS_SEED ^ (i * 0x100000001b3ull));
        bool stream = (r >> 8) & 1, leave = (r >> 16) % 100 < LEAVE_PERCENT;
        n += leave && stream && (r >> 24) % 4 == 0;
    }
    return n;
}

/* ---- the run -------------------------------------------------------------- */

static atomic_size_t next_request;
static result results[N_REQUESTS];

static void *client_main(void *arg) {
    (void)arg;
    for (;;) {
        size_t i = atomic_fetch_add(&next_request, 1);
        if (i >= N_REQUESTS) return NULL;
        results[i] = run_request(i);
    }
}

/* What the run checks in /metrics: the sum of every vt_requests_total
 * counter, the 200s and 499s, the token totals and the gauges. */
typedef struct snapshot {
    double all, ok, left;
    double prompt_tokens, generated_tokens;
    double running, waiting, kv_used;
} snapshot;

static double value_after(const char *line, const char *name) {
    size_t n = strlen(name);
    return strncmp(line, name, n) == 0 && line[n] == ' ' ? atof(line + n + 1) : -1;
}

static snapshot read_metrics(void) {
    serve_reply r = serve_http(&srv, NULL, "/metrics", NULL, NULL);
    snapshot c = {0, 0, 0, 0, 0, -1, -1, -1};
    for (const char *p = r.body.s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, "vt_requests_total{", 18) == 0) {
            double v = atof(strchr(p, ' ') + 1);
            c.all += v;
            if (strncmp(p + 18, "status=\"200\"}", 13) == 0) c.ok = v;
            if (strncmp(p + 18, "status=\"499\"}", 13) == 0) c.left = v;
        }
        double v;
        if ((v = value_after(p, "vt_prompt_tokens_total")) >= 0) c.prompt_tokens = v;
        if ((v = value_after(p, "vt_generation_tokens_total")) >= 0) c.generated_tokens = v;
        if ((v = value_after(p, "vt_requests_running")) >= 0) c.running = v;
        if ((v = value_after(p, "vt_requests_waiting")) >= 0) c.waiting = v;
        if ((v = value_after(p, "vt_kv_blocks_used")) >= 0) c.kv_used = v;
    }
    serve_reply_free(&r);
    return c;
}

static void test_stress(void) {
    /* Every shape alone first: the answers the loaded run must reproduce. */
    for (size_t k = 0; k < N_SHAPES; k++) {
        shape s = shape_of(k);
        char body[512];
        request_body(s, false, body, sizeof body);
        serve_reply r = serve_http(&srv, NULL, s.chat ? "/v1/chat/completions" : "/v1/completions", body, NULL);
        long ct = -1;
        CU_ASSERT_EQUAL(r.status, 200);
        alone_text[k] = answer_text(r.body.s, s.chat, &ct);
        CU_ASSERT_PTR_NOT_NULL(alone_text[k]);
        CU_ASSERT(ct >= 1 && ct <= MAX_TOKENS);
        serve_reply_free(&r);
    }
    /* The server counts a request when its connection ends, which may be
     * after the client has its answer: the baseline is a read that shows
     * every request made before it (the single ones above and the earlier
     * reads; nothing else is counted, /health being a probe), and no
     * block in use. A read is never counted in its own answer. */
    int made = (int)N_SHAPES;
    snapshot before;
    for (double end = serve_now() + 60;;) {
        before = read_metrics();
        made++;
        if ((before.all == made - 1 && before.kv_used == 0) || serve_now() > end) break;
        serve_sleep_ms(20);
    }
    CU_ASSERT_FATAL(before.all == made - 1 && before.kv_used == 0);

    double t0 = serve_now();
    pthread_t threads[N_CLIENTS];
    atomic_init(&next_request, 0);
    for (int t = 0; t < N_CLIENTS; t++) CU_ASSERT_EQUAL_FATAL(pthread_create(&threads[t], NULL, client_main, NULL), 0);
    for (int t = 0; t < N_CLIENTS; t++) pthread_join(threads[t], NULL);
    double seconds = serve_now() - t0;

    int completed = 0, left = 0, broken = 0, mismatched = 0, not_reached = 0;
    long completion_tokens = 0;
    for (size_t i = 0; i < N_REQUESTS; i++) {
        const result *r = &results[i];
        if (r->how == COMPLETED) {
            completed++;
            completion_tokens += r->completion_tokens;
            CU_ASSERT(r->completion_tokens >= 1 && r->completion_tokens <= MAX_TOKENS);
            if (!r->text_matches) mismatched++;
        } else if (r->how == LEFT) {
            left++;
            not_reached += !r->reached;
        } else {
            broken++;
        }
        if (r->detail[0] && (broken + mismatched) <= 5) fprintf(stderr, "test_serve_stress: %s\n", r->detail);
    }
    fprintf(stderr, "test_serve_stress: %d requests from %d clients in %.1f s: %d completed, %d left mid-way\n",
            N_REQUESTS, N_CLIENTS, seconds, completed, left);
    CU_ASSERT_EQUAL(broken, 0);
    CU_ASSERT_EQUAL(mismatched, 0);
    CU_ASSERT(completed >= N_REQUESTS / 2);
    /* The disconnects happened, not only planned: a streamed request whose
     * client hangs up at its first write always leaves, however fast the
     * server answers (the others may finish first on a fast machine). */
    CU_ASSERT(left >= certain_leavers());
    CU_ASSERT(certain_leavers() >= N_REQUESTS / 50);

    /* Every block free, nothing running or waiting; and the counters add
     * up: each request is counted once its connection ends (one whose client
     * left may be counted a moment later), as 200 or 499, and each /metrics
     * read counts one 200 after it is answered. */
    int reads = 0; /* reads since `before`, which counts too */
    snapshot after;
    double end = serve_now() + 15;
    double settled_since = 0;
    do {
        after = read_metrics();
        reads++;
        bool idle = after.running == 0 && after.waiting == 0 && after.kv_used == 0;
        double expected = before.all + N_REQUESTS + reads;
        if (idle && after.all == expected) break;
        /* Requests whose client left before sending all of it may never count: give the rest a second. */
        if (idle && after.all >= expected - not_reached) {
            if (settled_since == 0) settled_since = serve_now();
            else if (serve_now() - settled_since > 1) break;
        }
        serve_sleep_ms(50);
    } while (serve_now() < end);
    CU_ASSERT_EQUAL(after.running, 0);
    CU_ASSERT_EQUAL(after.waiting, 0);
    CU_ASSERT_EQUAL(after.kv_used, 0);
    CU_ASSERT(after.all <= before.all + N_REQUESTS + reads);
    CU_ASSERT(after.all >= before.all + N_REQUESTS + reads - not_reached);
    if (after.all != before.all + N_REQUESTS + reads)
        fprintf(stderr, "test_serve_stress: %.0f of the %d clients that left before sending their whole request were "
                "never counted\n", before.all + N_REQUESTS + reads - after.all, not_reached);
    CU_ASSERT_EQUAL(after.all - before.all, (after.ok - before.ok) + (after.left - before.left)); /* no other status */
    CU_ASSERT(after.ok - before.ok >= completed + reads);
    CU_ASSERT(after.left - before.left <= left);
    CU_ASSERT(after.generated_tokens - before.generated_tokens >= completion_tokens);
    CU_ASSERT(after.prompt_tokens > before.prompt_tokens);
    fprintf(stderr, "test_serve_stress: /metrics after: %.0f answered 200, %.0f counted 499 (client left)\n",
            after.ok - before.ok - reads, after.left - before.left);
    for (size_t k = 0; k < N_SHAPES; k++) free(alone_text[k]);

    /* The server drains and exits 0: under ASan, a leak would make it fail. */
    int status = serve_stop(&srv);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char *log = vt_test_read_file(srv.log, NULL);
        size_t n = log ? strlen(log) : 0;
        fprintf(stderr, "test_serve_stress: the server exited with status %d; its log ends:\n%s\n", status,
                log ? log + (n > 4000 ? n - 4000 : 0) : "(none)");
        free(log);
    }
}

static int suite_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    static const char *const args[] = {"--chat-template", "chatml", "-c", "1024", "--parallel", "6", NULL};
    return serve_start(&srv, MODEL, "stress.log", args) ? 0 : 1;
}

static int suite_cleanup(void) {
    if (srv.pid > 0) serve_stop(&srv);
    curl_global_cleanup();
    return 0;
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    static CU_TestInfo tests[] = {
        {"500 requests, 16 clients, random disconnects: same answers, every block free", test_stress},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("serve stress", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
