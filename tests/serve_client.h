/* serve_client.h — what the `vt serve` runners share: starting a server as
 * a child process on a free port, one HTTP request over libcurl, reading a
 * value from /metrics, and decoding a Server-Sent Events answer.
 *
 * The runners talk to a real `vt serve` over real sockets, so these are the
 * client side only; they never link the server's code. Built only where
 * libcurl is (tests/CMakeLists.txt). */
#ifndef VT_TEST_SERVE_CLIENT_H
#define VT_TEST_SERVE_CLIENT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct serve_server {
    pid_t pid;
    int port;
    char log[512]; /* the server's stderr */
} serve_server;

typedef struct serve_buf {
    char *s;
    size_t n;
} serve_buf;

typedef struct serve_reply {
    long status;
    serve_buf body, headers;
    CURLcode rc;
} serve_reply;

double serve_now(void);
void serve_sleep_ms(int ms);

/* Start `vt serve -m tests/data/models/MODEL --port 0 --threads 1 EXTRA...`
 * with stderr to a temporary file named log_name; true once /health answers
 * 200 (within 60 s). */
bool serve_start(serve_server *s, const char *model, const char *log_name, const char *const *extra);
/* The same, but true once it listens (its port known), loaded or not. */
bool serve_spawn(serve_server *s, const char *model, const char *log_name, const char *const *extra);
/* SIGTERM, then wait: the wait status. */
int serve_stop(serve_server *s);

/* libcurl write callback appending to a serve_buf (user). */
size_t serve_collect(char *p, size_t size, size_t n, void *user);
/* One request; body NULL = GET unless method says otherwise; key NULL = no
 * Authorization header. */
serve_reply serve_http(const serve_server *s, const char *method, const char *path, const char *body, const char *key);
/* The same with more header lines ("Name: value", NULL-terminated). */
serve_reply serve_http_with(const serve_server *s, const char *method, const char *path, const char *body,
                            const char *key, const char *const *headers);
/* A POST of body to /v1/completions made on a thread of its own:
 * pthread_create(&t, NULL, serve_post_main, &post), then r once joined. */
typedef struct serve_post {
    const serve_server *s;
    const char *body;
    serve_reply r;
} serve_post;
void *serve_post_main(void *post);
void serve_reply_free(serve_reply *r);

/* Field a (or a.b) of r's JSON body as a malloc'ed string: NULL when the
 * body is not JSON or the field is absent, null or not a string. */
char *serve_field(const serve_reply *r, const char *a, const char *b);
/* A refusal's request field: error.param (serve_field(r, "error", "param")). */
char *serve_error_param(const serve_reply *r);

/* A metric's value from /metrics (-1 if absent). */
double serve_metric(const serve_server *s, const char *name);
/* Wait up to seconds for the metric to equal v. */
bool serve_metric_reaches(const serve_server *s, const char *name, double v, double seconds);

/* A streamed answer: the concatenated text, the finish reason, the usage
 * chunk's token counts (-1 without one), whether [DONE] ended it, the chunk
 * count, whether any event was malformed, and an error event's code ("" for
 * none; "-" for an error without one). */
typedef struct serve_streamed {
    char *text;
    size_t n_text;
    char finish[16];
    char error_code[32];
    long usage_prompt, usage_completion;
    bool done, first_has_role, bad_event;
    int chunks;
} serve_streamed;

/* Decode body's events (chat: chat.completion.chunk with delta.content;
 * else text_completion with text). out->text is malloc'ed. */
void serve_read_events(const char *body, bool chat, serve_streamed *out);

#endif
