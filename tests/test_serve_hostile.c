/* test_serve_hostile.c — `vt serve` against careless and hostile clients,
 * over raw sockets where libcurl would not send what such a client sends:
 * wrong-typed fields, ambiguous body framing, control bytes in the path,
 * idle and half-open connections, uploads cut short, a request that runs out
 * of time while queued, and /metrics' gauges during a long prefill.
 *
 * One server (qwen3-tiny, chatml, 2 sequences, a 4096-token context) for
 * most cases; the time-limit case starts its own. Every wait is bounded, and
 * no assertion rests on how fast this machine is: the comments say why. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json_mini.h"
#include "serve_client.h"
#include "serve_gate.h"
#include "util.h"

#define MODEL "qwen3-tiny-q8_0.gguf"
/* vt serve's limits (core/server/serve_http.c), as README states them. */
#define PER_CLIENT_CONNECTIONS 256
#define HEAD_TIMEOUT 10

static serve_server srv;

/* ---- raw HTTP -------------------------------------------------------------- */

/* A TCP connection to the server from the loopback address `from`
 * (127.0.0.x: each is a different client address to the server); -1 when
 * it cannot be made. */
static int dial(const serve_server *s, const char *from) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, from, &a.sin_addr);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Read until the server closes (closed = true) or `seconds` pass. */
typedef struct raw_reply {
    char *s;
    size_t n;
    bool closed;
} raw_reply;

static raw_reply read_until_close(int fd, double seconds) {
    raw_reply r = {calloc(1, 1), 0, false};
    double end = serve_now() + seconds;
    while (serve_now() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        char buf[4096];
        ssize_t got = recv(fd, buf, sizeof buf, 0);
        if (got <= 0) {
            r.closed = true; /* EOF, or a reset: either way the server closed */
            break;
        }
        char *grown = realloc(r.s, r.n + (size_t)got + 1);
        if (!grown) break;
        r.s = grown;
        memcpy(r.s + r.n, buf, (size_t)got);
        r.n += (size_t)got;
        r.s[r.n] = '\0';
    }
    return r;
}

/* Send `request` on a new connection and read the answer to the close. */
static raw_reply exchange(const char *request, double seconds) {
    int fd = dial(&srv, "127.0.0.1");
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(send_all(fd, request, strlen(request)));
    raw_reply r = read_until_close(fd, seconds);
    close(fd);
    return r;
}

/* How many status lines the bytes hold (one answer has one). */
static int status_lines(const raw_reply *r) {
    int n = 0;
    for (const char *p = r->s; p && (p = strstr(p, "HTTP/1.1 ")) != NULL; p++) n++;
    return n;
}

static int status_of(const raw_reply *r) {
    return r->s && strncmp(r->s, "HTTP/1.1 ", 9) == 0 ? atoi(r->s + 9) : 0;
}

/* The error.type of the JSON body after the head ("" when the body is not an
 * error document), into type. */
static void error_type_of(const raw_reply *r, char *type, size_t size) {
    type[0] = '\0';
    const char *body = r->s ? strstr(r->s, "\r\n\r\n") : NULL;
    if (!body) return;
    body += 4;
    json_value v;
    char msg[128];
    if (!json_parse(body, r->n - (size_t)(body - r->s), &v, msg, sizeof msg)) return;
    const json_value *e = json_get(&v, "error"), *t = e ? json_get(e, "type") : NULL,
                     *m = e ? json_get(e, "message") : NULL;
    if (t && t->type == JSON_STRING && m && m->type == JSON_STRING && m->len > 0) snprintf(type, size, "%s", t->str);
    json_free(&v);
}

/* ---- /metrics ---------------------------------------------------------------- */

/* Wait up to seconds for the metric to reach at least v. */
static bool metric_at_least(const serve_server *s, const char *name, double v, double seconds) {
    double end = serve_now() + seconds;
    while (serve_now() < end) {
        if (serve_metric(s, name) >= v) return true;
        serve_sleep_ms(10);
    }
    return serve_metric(s, name) >= v;
}

static bool log_contains(const serve_server *s, const char *text, double seconds) {
    double end = serve_now() + seconds;
    for (;;) {
        char *log = vt_test_read_file(s->log, NULL);
        bool found = log && strstr(log, text);
        free(log);
        if (found || serve_now() >= end) return found;
        serve_sleep_ms(20);
    }
}

/* ---- server -------------------------------------------------------------------- */

static int suite_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* This runner holds a few hundred sockets at once. */
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
    }
    static const char *const args[] = {"--chat-template", "chatml", "-c", "4096", "--parallel", "2", NULL};
    return serve_start(&srv, MODEL, "hostile.log", args) ? 0 : 1;
}

static int suite_cleanup(void) {
    if (srv.pid > 0) serve_stop(&srv);
    curl_global_cleanup();
    return 0;
}

/* ---- 1: wrong types --------------------------------------------------------------- */

static void expect_400(const char *path, const char *body, const char *param) {
    serve_reply r = serve_http(&srv, NULL, path, body, NULL);
    CU_ASSERT_EQUAL(r.status, 400);
    char *got = serve_error_param(&r);
    CU_ASSERT(got && strcmp(got, param) == 0);
    if (!got || strcmp(got, param) != 0) fprintf(stderr, "expected param %s in %s\n", param, r.body.s);
    free(got);
    serve_reply_free(&r);
}

static void test_wrong_types(void) {
    /* a valid max_completion_tokens does not excuse a wrong-typed max_tokens, nor the reverse */
    expect_400("/v1/chat/completions",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"ten\",\"max_completion_tokens\":2}",
               "max_tokens");
    expect_400("/v1/chat/completions",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2,\"max_completion_tokens\":[]}",
               "max_completion_tokens");
    expect_400("/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":\"ten\",\"max_completion_tokens\":2}", "max_tokens");
    /* a user or system turn needs its content; null is not given */
    expect_400("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content");
    expect_400("/v1/chat/completions",
               "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":null}]}",
               "messages[1].content");
    /* llama-server's ignore_eos is a boolean; true is taken: a completion the
     * end-of-generation token cut short (a seed found here) runs to its
     * max_tokens with it */
    expect_400("/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2,\"ignore_eos\":\"yes\"}", "ignore_eos");
    int seed = 0;
    for (int k = 1; k <= 300 && !seed; k++) {
        char body[160];
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"max_tokens\":40,\"temperature\":1.5,\"seed\":%d}", k);
        serve_reply early = serve_http(&srv, NULL, "/v1/completions", body, NULL);
        if (early.status == 200 && early.body.s && strstr(early.body.s, "\"finish_reason\":\"stop\"")) seed = k;
        serve_reply_free(&early);
    }
    CU_ASSERT_FATAL(seed != 0);
    char body[200];
    snprintf(body, sizeof body,
             "{\"prompt\":\"x\",\"max_tokens\":40,\"temperature\":1.5,\"seed\":%d,\"ignore_eos\":true}", seed);
    serve_reply ie = serve_http(&srv, NULL, "/v1/completions", body, NULL);
    CU_ASSERT_EQUAL(ie.status, 200);
    const bool ran_on = ie.body.s && strstr(ie.body.s, "\"completion_tokens\":40") &&
                        strstr(ie.body.s, "\"finish_reason\":\"length\"");
    if (!ran_on) printf("\nseed %d with ignore_eos: %s\n", seed, ie.body.s);
    CU_ASSERT(ran_on);
    serve_reply_free(&ie);
    /* an assistant turn may leave it out */
    serve_reply r = serve_http(&srv, NULL, "/v1/chat/completions",
                               "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\"},"
                               "{\"role\":\"user\",\"content\":\"b\"}],\"max_tokens\":1}",
                               NULL);
    CU_ASSERT_EQUAL(r.status, 200);
    serve_reply_free(&r);
}

/* ---- 2-4: framing -------------------------------------------------------------------- */

#define BODY "{\"prompt\":\"x\",\"max_tokens\":1}"

/* One answer with status `status`, and the connection closed after it. */
static void expect_refused_and_closed(const char *request, int status) {
    /* 30 s only bounds a failure: the answer comes as soon as the head is read */
    raw_reply r = exchange(request, 30);
    CU_ASSERT_EQUAL(status_of(&r), status);
    CU_ASSERT_EQUAL(status_lines(&r), 1);
    CU_ASSERT(r.closed);
    if (status_of(&r) != status || status_lines(&r) != 1 || !r.closed)
        fprintf(stderr, "%.60s...\n  answered (%s): %s\n", request, r.closed ? "closed" : "open", r.s);
    free(r.s);
}

static void test_bad_content_length(void) {
    /* libmicrohttpd refuses these itself, before vt's handlers; the answer
     * is still one JSON error, and the connection closes after it */
    static const struct {
        const char *length;
        int status;
    } cases[] = {{"-1", 400}, {"abc", 400}, {"99999999999999999999999", 413}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char req[256];
        snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n" BODY,
                 cases[i].length);
        expect_refused_and_closed(req, cases[i].status);
        raw_reply r = exchange(req, 30);
        char type[64];
        error_type_of(&r, type, sizeof type);
        CU_ASSERT_STRING_EQUAL(type, "invalid_request_error");
        free(r.s);
    }
    /* also as the second request on a kept-alive connection */
    raw_reply r = exchange("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
                           "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
                           30);
    CU_ASSERT_EQUAL(status_of(&r), 200);
    CU_ASSERT_EQUAL(status_lines(&r), 2);
    CU_ASSERT(r.closed && r.s && strstr(r.s, "HTTP/1.1 400 "));
    free(r.s);
    CU_ASSERT(log_contains(&srv, "/v1/completions 413 (refused while reading the head)", 10));
    serve_reply h = serve_http(&srv, NULL, "/health", NULL, NULL);
    CU_ASSERT_EQUAL(h.status, 200);
    serve_reply_free(&h);
}

static void test_two_content_lengths(void) {
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\nContent-Length: 5\r\n\r\n" BODY,
             strlen(BODY));
    expect_refused_and_closed(req, 400);
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\nTransfer-Encoding: chunked\r\n\r\n"
             "%zx\r\n" BODY "\r\n0\r\n\r\n",
             strlen(BODY), strlen(BODY));
    expect_refused_and_closed(req, 400);
    /* whitespace before the colon: no Content-Length to libmicrohttpd, one
     * to a proxy that trims names; the body would be read as a second
     * request (RFC 9112 5.1: a 400) */
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length : %zu\r\n\r\n"
             "GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
             strlen("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    expect_refused_and_closed(req, 400);
    /* a name holding a character no header name may (RFC 9110 5.6.2), or a
     * value holding a control character: read otherwise by a proxy or a log */
    static const char *const bad_lines[] = {"X(Foo): 1", "X-Foo: a\x01b", "X-Foo: a\rb"};
    for (size_t i = 0; i < sizeof bad_lines / sizeof *bad_lines; i++) {
        snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%s\r\nContent-Length: %zu\r\n\r\n" BODY,
                 bad_lines[i], strlen(BODY));
        expect_refused_and_closed(req, 400);
    }
    /* a folded line (obs-fold) after an empty Content-Length or
     * Transfer-Encoding: libmicrohttpd glues it onto the name, so it saw no
     * length and read the body as a second request, where a proxy that
     * unfolds reads one (RFC 9112 5.2: a 400) */
    expect_refused_and_closed("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 34\r\n\r\n"
                              "GET /v1/models/SMUGGLED HTTP/1.1\r\n\r\n",
                              400);
    expect_refused_and_closed("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n\tchunked\r\n\r\n"
                              "0\r\n\r\nGET /v1/models/SMUGGLED HTTP/1.1\r\nHost: x\r\n\r\n",
                              400);
    /* (the refusal's wording depends on how the library hands the fold
     * over: 0.9.75, Debian 12's, glues it onto the name; a later one may
     * refuse the line itself) */
    raw_reply folded = exchange("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 0\r\n\r\n", 30);
    CU_ASSERT_EQUAL(status_of(&folded), 400);
    free(folded.s);
    /* two Hosts: a proxy and vt could each take another (RFC 9112 3.2) */
    expect_refused_and_closed("GET /health HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400);
    raw_reply named = exchange("GET /health HTTP/1.1\r\nHost: x\r\nX(Foo): 1\r\n\r\n", 30);
    CU_ASSERT(named.s && strstr(named.s, "the header name 'X(Foo)' holds a character") != NULL);
    free(named.s);
    /* HTTP/1.1 without Host: 400 (RFC 9112 3.2); HTTP/1.0 needs none */
    expect_refused_and_closed("GET /health HTTP/1.1\r\nConnection: close\r\n\r\n", 400);
    expect_refused_and_closed("GET /health HTTP/1.2\r\nConnection: close\r\n\r\n", 400); /* read as 1.1 */
    raw_reply old_version = exchange("GET /health HTTP/1.0\r\n\r\n", 30);
    CU_ASSERT_EQUAL(status_of(&old_version), 200);
    free(old_version.s);
    /* the absolute form of a target is its path (RFC 9112 3.2.2) */
    raw_reply absolute = exchange("GET http://x/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 30);
    CU_ASSERT_EQUAL(status_of(&absolute), 200);
    free(absolute.s);
    snprintf(req, sizeof req,
             "POST http://x:8080/v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n" BODY,
             strlen(BODY));
    absolute = exchange(req, 30);
    CU_ASSERT_EQUAL(status_of(&absolute), 200);
    free(absolute.s);
    absolute = exchange("DELETE http://x/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 30);
    CU_ASSERT_EQUAL(status_of(&absolute), 405);
    CU_ASSERT(absolute.s && strstr(absolute.s, "Allow: GET, HEAD"));
    free(absolute.s);
    /* a tab inside a value, and bytes past ASCII, are a value's own */
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Foo: a\tb \xc3\xa9\r\n"
             "Content-Length: %zu\r\n\r\n" BODY,
             strlen(BODY));
    raw_reply fine = exchange(req, 30);
    CU_ASSERT_EQUAL(status_of(&fine), 200);
    free(fine.s);
    /* the same length twice says one thing: served */
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n"
             "Content-Length: %zu\r\n\r\n" BODY,
             strlen(BODY), strlen(BODY));
    raw_reply r = exchange(req, 30);
    CU_ASSERT_EQUAL(status_of(&r), 200);
    free(r.s);
}

static void test_transfer_encodings(void) {
    static const char *const codings[] = {"gzip, chunked", "identity", "chunked, chunked"};
    for (size_t i = 0; i < 3; i++) {
        char req[512];
        snprintf(req, sizeof req,
                 "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: %s\r\n\r\n%zx\r\n" BODY "\r\n0\r\n\r\n",
                 codings[i], strlen(BODY));
        expect_refused_and_closed(req, 501);
    }
    /* chunked alone is read */
    char req[512];
    snprintf(req, sizeof req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
             "%zx\r\n" BODY "\r\n0\r\n\r\n",
             strlen(BODY));
    raw_reply r = exchange(req, 30);
    CU_ASSERT_EQUAL(status_of(&r), 200);
    free(r.s);
    /* malformed chunked framing is refused by libmicrohttpd as it reads the
     * body: one JSON error and a close, counted and logged at that status
     * (not a 500 of a client that left) */
    const double before_500 = serve_metric(&srv, "vt_requests_total{status=\"500\"}");
    static const struct {
        const char *chunks;
        int status;
    } bad[] = {{"zz\r\n{}\r\n0\r\n\r\n", 400}, {"2\r\n{}XX0\r\n\r\n", 400}, {"1ffffffffffffffff\r\n{}", 413}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%s",
                 bad[i].chunks);
        expect_refused_and_closed(req, bad[i].status);
        r = exchange(req, 30);
        char type[64];
        error_type_of(&r, type, sizeof type);
        CU_ASSERT_STRING_EQUAL(type, "invalid_request_error");
        free(r.s);
    }
    CU_ASSERT(log_contains(&srv, "/v1/completions 400 prompt=0 completion=0", 10));
    CU_ASSERT_EQUAL(serve_metric(&srv, "vt_requests_total{status=\"500\"}"), before_500);
}

/* ---- 5: log injection ------------------------------------------------------------------ */

static void test_log_escapes_the_path(void) {
    raw_reply r = exchange("GET /x%0Avt%20serve:%20FORGED%0D%1B[2J HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 30);
    CU_ASSERT_EQUAL(status_of(&r), 404);
    free(r.s);
    CU_ASSERT(log_contains(&srv, "GET /x\\x0avt serve: FORGED\\x0d\\x1b[2J 404", 10));
    char *log = vt_test_read_file(srv.log, NULL);
    CU_ASSERT(log && !strstr(log, "\nvt serve: FORGED") && !strchr(log, '\r') && !strchr(log, 0x1b));
    free(log);
}

/* ---- 6: idle and half-open connections ------------------------------------------------------- */

/* How many of fds the server has not closed. */
static int still_open(const int *fds, int n) {
    int open = 0;
    for (int i = 0; i < n; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        char c;
        if (poll(&p, 1, 0) == 0 || (recv(fds[i], &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN)) open++;
    }
    return open;
}

static void test_connection_limits(void) {
    /* One address opens 300 connections, each a complete head promising a
     * body it never sends (a slow upload: BODY_TIMEOUT, 120 s, applies).
     * The server keeps PER_CLIENT_CONNECTIONS of them and closes the rest at
     * accept, and a client from another address is still served. The
     * server closes the held ones only after 120 s of silence, far beyond
     * this test's few seconds of work on any machine. */
    enum { N = PER_CLIENT_CONNECTIONS + 44 };
    int fds[N];
    int made = 0;
    static const char head[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n";
    for (; made < N; made++) {
        fds[made] = dial(&srv, "127.0.0.3");
        if (fds[made] < 0) break;
        send_all(fds[made], head, sizeof head - 1); /* a refused one may be closed already */
    }
    CU_ASSERT_EQUAL_FATAL(made, N);
    /* the refused ones are closed at once; 30 s bounds a failure */
    double end = serve_now() + 30;
    while (still_open(fds, N) > PER_CLIENT_CONNECTIONS && serve_now() < end) serve_sleep_ms(50);
    CU_ASSERT_EQUAL(still_open(fds, N), PER_CLIENT_CONNECTIONS);
    serve_reply h = serve_http(&srv, NULL, "/health", NULL, NULL);
    CU_ASSERT_EQUAL(h.status, 200);
    serve_reply_free(&h);
    for (int i = 0; i < N; i++) close(fds[i]);
    /* closing mid-body is a client that left, not a server error (point 8 too) */
    CU_ASSERT(metric_at_least(&srv, "vt_requests_total{status=\"499\"}", PER_CLIENT_CONNECTIONS, 30));
}

static void test_half_open_head_times_out(void) {
    /* Half a request line, then silence: the server closes it after
     * HEAD_TIMEOUT seconds without answering. The wait is bounded at six
     * times the timeout; the server's clock decides, not this one's speed. */
    int fd = dial(&srv, "127.0.0.2");
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(send_all(fd, "GET /hea", 8));
    raw_reply r = read_until_close(fd, 6 * HEAD_TIMEOUT);
    CU_ASSERT(r.closed);
    CU_ASSERT_EQUAL(r.n, 0);
    free(r.s);
    close(fd);
    /* meanwhile and after, others are served */
    serve_reply h = serve_http(&srv, NULL, "/health", NULL, NULL);
    CU_ASSERT_EQUAL(h.status, 200);
    serve_reply_free(&h);
}

/* ---- 8: an upload cut short ------------------------------------------------------------------- */

static void test_upload_cut_short(void) {
    double before_500 = serve_metric(&srv, "vt_requests_total{status=\"500\"}");
    double before_499 = serve_metric(&srv, "vt_requests_total{status=\"499\"}");
    /* "Expect: 100-continue" makes the server say when it has read the head
     * (and so begun the request): only then does the client send part of
     * the body and leave. */
    int fd = dial(&srv, "127.0.0.1");
    CU_ASSERT_FATAL(fd >= 0);
    static const char head[] =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n";
    CU_ASSERT(send_all(fd, head, sizeof head - 1));
    char got[256] = "";
    size_t n = 0;
    double end = serve_now() + 30;
    while (!strstr(got, "\r\n\r\n") && n + 1 < sizeof got && serve_now() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t k = recv(fd, got + n, 1, 0);
        if (k <= 0) break;
        got[++n] = '\0';
    }
    CU_ASSERT(strncmp(got, "HTTP/1.1 100", 12) == 0);
    CU_ASSERT(send_all(fd, "{\"prompt\":", 10));
    close(fd);
    CU_ASSERT(metric_at_least(&srv, "vt_requests_total{status=\"499\"}", before_499 + 1, 30));
    CU_ASSERT_EQUAL(serve_metric(&srv, "vt_requests_total{status=\"500\"}"), before_500);
    CU_ASSERT(log_contains(&srv, "POST /v1/completions 499", 10));
    char *log = vt_test_read_file(srv.log, NULL);
    CU_ASSERT(log && !strstr(log, "POST /v1/completions 500"));
    free(log);
}

/* ---- 7b: a body over the limit -------------------------------------------------------------- */

/* Clients such as the openai SDKs write the whole body before they read an
 * answer: the 413 must reach them after it, not a connection closed under
 * the upload (which they take for a network error and retry). */
static void test_body_over_limit_sent_whole(void) {
    const size_t n = (size_t)5 << 20; /* over the default --body-limit of 4 MiB */
    char head[256];
    snprintf(head, sizeof head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", n);
    char *body = malloc(n);
    CU_ASSERT_FATAL(body != NULL);
    memset(body, 'a', n);
    int fd = dial(&srv, "127.0.0.1");
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(send_all(fd, head, strlen(head)));
    /* every byte is taken: a server that closed early makes this fail
     * (EPIPE or a reset) once the socket buffers are full */
    CU_ASSERT(send_all(fd, body, n));
    static const char next[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send_all(fd, next, sizeof next - 1);
    raw_reply r = read_until_close(fd, 30);
    close(fd);
    free(body);
    CU_ASSERT_EQUAL(status_of(&r), 413);
    /* the body was read to its end, so the connection goes on to the next request */
    CU_ASSERT_EQUAL(status_lines(&r), 2);
    char *second = r.s ? strstr(r.s + 1, "HTTP/1.1 ") : NULL;
    CU_ASSERT(second && strncmp(second, "HTTP/1.1 200 ", 13) == 0);
    if (second) { /* the 413's own bytes: one error document */
        *second = '\0';
        r.n = (size_t)(second - r.s);
    }
    char type[64];
    error_type_of(&r, type, sizeof type);
    CU_ASSERT_STRING_EQUAL(type, "invalid_request_error");
    free(r.s);

    /* A client that asks first (Expect: 100-continue) is told before it sends. */
    snprintf(head, sizeof head,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %zu\r\n\r\n", n);
    fd = dial(&srv, "127.0.0.1");
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(send_all(fd, head, strlen(head)));
    r = read_until_close(fd, 30);
    close(fd);
    CU_ASSERT_EQUAL(status_of(&r), 413);
    CU_ASSERT(r.s && !strstr(r.s, "HTTP/1.1 100"));
    CU_ASSERT(r.closed);
    free(r.s);
}

/* ---- 8b: a stream whose client leaves ------------------------------------------------------ */

static void test_stream_left_is_499(void) {
    /* The stream's 200 went out with its first event; the client then
     * hangs up while the engine is held before its next forward (the gate
     * makes "during the answer" certain at any speed). Counted and logged
     * 499 as SERVING.md says, not 200. */
    serve_gate g;
    serve_server s = {0};
    CU_ASSERT_FATAL(serve_gate_init(&g, "stream-left-gate"));
    static const char *const args[] = {"--parallel", "1", "-c", "512", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g, MODEL, "stream-left.log", args));
    serve_gate_hold(&g);
    const long base = serve_gate_reached(&g);
    serve_gate_allow(&g, base + 1); /* the prefill, which gives the first token */
    /* a long answer (no end token can cut it) whose rest, once the gate
     * opens, takes many 4 KiB writes: the first write after the hang-up
     * may still succeed, the ones after it fail, however fast the engine
     * produced the tokens */
    static const char body[] =
        "{\"prompt\":\"Greetings\",\"max_tokens\":300,\"ignore_eos\":true,\"temperature\":0,\"stream\":true}";
    char req[512];
    snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    int fd = dial(&s, "127.0.0.1");
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(send_all(fd, req, strlen(req)));
    CU_ASSERT_FATAL(serve_gate_wait_reached(&g, base + 2, 60)); /* the second forward waits */
    char got[4096] = "";
    size_t n = 0;
    const double end = serve_now() + 30;
    while (!strstr(got, "data: ") && n + 1 < sizeof got && serve_now() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        const ssize_t k = recv(fd, got + n, sizeof got - 1 - n, 0);
        if (k <= 0) break;
        n += (size_t)k;
        got[n] = '\0';
    }
    CU_ASSERT(strncmp(got, "HTTP/1.1 200", 12) == 0 && strstr(got, "data: ") != NULL);
    close(fd);
    serve_gate_open(&g);
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_total{status=\"499\"}", 1, 60));
    CU_ASSERT(log_contains(&s, "POST /v1/completions 499", 10));
    char *log = vt_test_read_file(s.log, NULL);
    CU_ASSERT(log && !strstr(log, "POST /v1/completions 200"));
    free(log);
    CU_ASSERT(serve_metric_reaches(&s, "vt_kv_blocks_used", 0, 60));
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
}

/* ---- 9: gauges during a long prefill ---------------------------------------------------------- */

/* running, waiting and the time-to-first-token count from one /metrics
 * answer (one snapshot, read under the metrics' lock). */
static bool gauges(const serve_server *on, double *running, double *waiting, double *ttft_count) {
    serve_reply r = serve_http(on, NULL, "/metrics", NULL, NULL);
    *running = *waiting = *ttft_count = -1;
    for (const char *p = r.body.s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, "vt_requests_running ", 20) == 0) *running = atof(p + 20);
        if (strncmp(p, "vt_requests_waiting ", 20) == 0) *waiting = atof(p + 20);
        if (strncmp(p, "vt_time_to_first_token_seconds_count ", 37) == 0) *ttft_count = atof(p + 37);
    }
    serve_reply_free(&r);
    return *running >= 0 && *waiting >= 0 && *ttft_count >= 0;
}

static void test_gauges_during_prefill(void) {
    /* A streamed request held in its prefill (the step_gate backend,
     * serve_gate.h: its first forward waits for the test), then a second
     * one queued behind it (--parallel 1): while the prefill is held the
     * gauges must show the first as running and the second as waiting, read
     * after read, although no step has ended since either arrived. The gate
     * makes "during a long prefill" certain on a machine of any speed: a
     * faster one cannot finish the held forward, a slower one only takes
     * longer to reach it (waits bounded at 60 s). */
    serve_gate g;
    serve_server s = {0};
    CU_ASSERT_FATAL(serve_gate_init(&g, "gauges-gate"));
    static const char *const args[] = {"--parallel", "1", "-c", "512", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g, MODEL, "gauges.log", args));
    serve_gate_hold(&g);
    const long base = serve_gate_reached(&g);
    static const char body[] = "{\"prompt\":\"Greetings\",\"max_tokens\":2,\"stream\":true}";
    char req[512];
    snprintf(req, sizeof req, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    int first = dial(&s, "127.0.0.1");
    CU_ASSERT_FATAL(first >= 0);
    CU_ASSERT(send_all(first, req, strlen(req)));
    CU_ASSERT_FATAL(serve_gate_wait_reached(&g, base + 1, 60)); /* its prefill has begun, and waits */
    double running, waiting, ttft;
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_FATAL(gauges(&s, &running, &waiting, &ttft));
        CU_ASSERT_EQUAL(running, 1);
        CU_ASSERT_EQUAL(waiting, 0);
        CU_ASSERT_EQUAL(ttft, 0);
    }
    int second = dial(&s, "127.0.0.1");
    CU_ASSERT_FATAL(second >= 0);
    CU_ASSERT(send_all(second, req, strlen(req)));
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_waiting", 1, 60));
    CU_ASSERT_FATAL(gauges(&s, &running, &waiting, &ttft));
    CU_ASSERT_EQUAL(running, 1);
    CU_ASSERT_EQUAL(ttft, 0); /* still inside the held prefill */
    serve_gate_open(&g);
    raw_reply rest = read_until_close(first, 60), other = read_until_close(second, 60);
    CU_ASSERT(rest.closed && rest.s && strstr(rest.s, "[DONE]"));
    CU_ASSERT(other.closed && other.s && strstr(other.s, "[DONE]"));
    free(rest.s);
    free(other.s);
    close(first);
    close(second);
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_running", 0, 60));
    CU_ASSERT_EQUAL(serve_metric(&s, "vt_requests_waiting"), 0);
    CU_ASSERT_EQUAL(serve_stop(&s), 0);
}

/* ---- 7: out of time while queued ---------------------------------------------------------------- */

static void test_timed_out_while_queued(void) {
    /* One sequence, a 3 s limit, on the step_gate backend (serve_gate.h).
     * The engine is held before A is sent, so A's time runs only while A
     * waits in its first forward (its prefill); B queues behind it. The
     * test waits out the limit of both on the wall clock and opens the gate:
     * A's first forward ends with one token and the engine then finds both
     * past their deadlines in one pass; B never held the sequence, so B is a
     * 503 with Retry-After, A a 200 ending as length after that one token.
     * No forward can start while held and no time limit runs before the
     * hold, so neither a faster nor a slower machine changes any of this
     * (waits for a held state are bounded at 60 s). */
    serve_server s = {0};
    serve_gate g;
    CU_ASSERT_FATAL(serve_gate_init(&g, "queued-timeout-gate"));
    static const char *const args[] = {"--parallel", "1", "--timeout", "3", "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g, MODEL, "queued-timeout.log", args));
    serve_gate_hold(&g);
    const long base = serve_gate_reached(&g);
    serve_post a = {&s, "{\"prompt\":\"Greetings\",\"temperature\":0,\"stream\":true}", {0}};
    serve_post b = {&s, "{\"prompt\":\"Greetings\",\"temperature\":0,\"max_tokens\":4}", {0}};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, serve_post_main, &a);
    CU_ASSERT(serve_gate_wait_reached(&g, base + 1, 60));
    pthread_create(&tb, NULL, serve_post_main, &b);
    CU_ASSERT(serve_metric_reaches(&s, "vt_requests_waiting", 1, 60));
    const double queued_by = serve_now(); /* both limits end by queued_by + 3 */
    while (serve_now() < queued_by + 3.5) serve_sleep_ms(20);
    serve_gate_open(&g);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CU_ASSERT_EQUAL(b.r.status, 503);
    CU_ASSERT(b.r.headers.s && strstr(b.r.headers.s, "Retry-After:"));
    json_value v;
    char msg[128];
    const bool parsed = b.r.body.s && json_parse(b.r.body.s, b.r.body.n, &v, msg, sizeof msg);
    CU_ASSERT(parsed);
    if (parsed) {
        const json_value *e = json_get(&v, "error"), *type = e ? json_get(e, "type") : NULL,
                         *code = e ? json_get(e, "code") : NULL;
        CU_ASSERT(type && type->type == JSON_STRING && strcmp(type->str, "server_error") == 0);
        /* 503 is also a full queue or a shutdown: the code says which */
        CU_ASSERT(code && code->type == JSON_STRING && strcmp(code->str, "timeout") == 0);
        CU_ASSERT_PTR_NULL(json_get(&v, "choices")); /* no answer rather than an empty one */
        json_free(&v);
    }
    CU_ASSERT_EQUAL(a.r.status, 200);
    serve_streamed st;
    serve_read_events(a.r.body.s, false, &st);
    CU_ASSERT(st.done && !st.bad_event);
    CU_ASSERT_STRING_EQUAL(st.finish, "length");
    free(st.text);
    serve_reply_free(&a.r);
    serve_reply_free(&b.r);
    CU_ASSERT(log_contains(&s, "before its first token: 503", 10));
    CU_ASSERT(log_contains(&s, "exceeded the time limit of 3 s after 1 tokens", 10));
    CU_ASSERT(serve_metric_reaches(&s, "vt_kv_blocks_used", 0, 60));
    int status = serve_stop(&s);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* After all of the above the server still stops cleanly: exit 0 (under the
 * sanitizers, also no leak and no error report, which change the status). */
/* A stream that has begun (its 200 and first event out) and then runs out
 * of time before its first token ends with the error as an SSE event
 * ("data: " and the error object, which the openai SDKs raise), then [DONE].
 * The prompt is prefilled 4 tokens a step (the token budget) and the engine is held in the
 * first of those steps until 3.5 s after it was held there (the limit began
 * earlier, at its arrival), so the 3 s limit has passed; the
 * next step finds the request past its deadline with no token. Held states
 * only: no machine's speed changes it. */
static void test_stream_error_is_an_event(void) {
    serve_server s = {0};
    serve_gate g;
    CU_ASSERT_FATAL(serve_gate_init(&g, "stream-timeout-gate"));
    static const char *const args[] = {"--parallel", "1", "--timeout", "3", "--token-budget", "4", "-c", "4096", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&s, &g, MODEL, "stream-timeout.log", args));
    serve_gate_hold(&g);
    const long base = serve_gate_reached(&g);
    serve_post a = {&s,
                        "{\"prompt\":\"one two three four five six seven eight nine ten eleven twelve\","
                        "\"temperature\":0,\"stream\":true}",
                        {0}};
    pthread_t ta;
    pthread_create(&ta, NULL, serve_post_main, &a);
    CU_ASSERT(serve_gate_wait_reached(&g, base + 1, 60));
    /* its limit began when it arrived, before its first forward was held
     * here: 3.5 s from now is past it however slow the arrival was */
    const double held = serve_now();
    while (serve_now() < held + 3.5) serve_sleep_ms(20);
    serve_gate_open(&g);
    pthread_join(ta, NULL);
    CU_ASSERT_EQUAL(a.r.status, 200);
    serve_streamed st;
    serve_read_events(a.r.body.s, false, &st);
    CU_ASSERT(!st.bad_event);
    CU_ASSERT_STRING_EQUAL(st.error_code, "timeout");
    CU_ASSERT(st.done);
    CU_ASSERT_EQUAL(st.n_text, 0);
    if (st.bad_event || strcmp(st.error_code, "timeout") != 0) fprintf(stderr, "stream: [%s]\n", a.r.body.s);
    free(st.text);
    serve_reply_free(&a.r);
    int status = serve_stop(&s);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_stops_cleanly(void) {
    int status = serve_stop(&srv);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fprintf(stderr, "see %s\n", srv.log);
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    static CU_TestInfo tests[] = {
        {"wrong-typed fields are 400 whatever else the request carries", test_wrong_types},
        {"a malformed Content-Length is a 400 and a close", test_bad_content_length},
        {"two Content-Lengths, one beside Transfer-Encoding, a spaced or invalid name, a control character: 400 and close",
         test_two_content_lengths},
        {"a transfer coding other than chunked: 501, malformed chunks 400/413, each a JSON error and close",
         test_transfer_encodings},
        {"the log escapes what the client chose", test_log_escapes_the_path},
        {"one address is capped, another is served", test_connection_limits},
        {"a half-open head is closed after the head timeout", test_half_open_head_times_out},
        {"an upload cut short is 499, not 500", test_upload_cut_short},
        {"a body over the limit sent whole gets its 413 after it, or before it if asked", test_body_over_limit_sent_whole},
        {"a stream whose client leaves is 499, not 200", test_stream_left_is_499},
        {"gauges count a request during its prefill", test_gauges_during_prefill},
        {"out of time before the first token: 503", test_timed_out_while_queued},
        {"a begun stream out of time: the error is an SSE event", test_stream_error_is_an_event},
        {"the server stops cleanly after all this", test_stops_cleanly},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("serve_hostile", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
