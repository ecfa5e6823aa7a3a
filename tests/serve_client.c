/* serve_client.c — see serve_client.h. */
#include "serve_client.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json_mini.h"
#include "util.h"

double serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void serve_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

size_t serve_collect(char *p, size_t size, size_t n, void *user) {
    serve_buf *b = user;
    char *s = realloc(b->s, b->n + size * n + 1);
    if (!s) return 0;
    memcpy(s + b->n, p, size * n);
    b->s = s;
    b->n += size * n;
    s[b->n] = '\0';
    return size * n;
}

void serve_reply_free(serve_reply *r) {
    free(r->body.s);
    free(r->headers.s);
    memset(r, 0, sizeof *r);
}

void *serve_post_main(void *post) {
    serve_post *p = post;
    p->r = serve_http(p->s, NULL, "/v1/completions", p->body, NULL);
    return NULL;
}

serve_reply serve_http(const serve_server *s, const char *method, const char *path, const char *body, const char *key) {
    return serve_http_with(s, method, path, body, key, NULL);
}

serve_reply serve_http_with(const serve_server *s, const char *method, const char *path, const char *body,
                            const char *key, const char *const *headers) {
    serve_reply r = {0};
    CURL *c = curl_easy_init();
    char url[256], auth[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        h = curl_slist_append(h, auth);
    }
    for (const char *const *line = headers; line && *line; line++) h = curl_slist_append(h, *line);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, serve_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, serve_collect);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    if (method && strcmp(method, "HEAD") == 0) curl_easy_setopt(c, CURLOPT_NOBODY, 1L); /* else curl waits for a body */
    else if (method) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    r.rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return r;
}

double serve_metric(const serve_server *s, const char *name) {
    serve_reply r = serve_http(s, NULL, "/metrics", NULL, NULL);
    double v = -1;
    size_t n = strlen(name);
    for (const char *p = r.body.s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ') v = atof(p + n + 1);
    serve_reply_free(&r);
    return v;
}

bool serve_metric_reaches(const serve_server *s, const char *name, double v, double seconds) {
    double end = serve_now() + seconds;
    while (serve_now() < end) {
        if (serve_metric(s, name) == v) return true;
        serve_sleep_ms(20);
    }
    return serve_metric(s, name) == v;
}

bool serve_spawn(serve_server *s, const char *model_file, const char *log_name, const char *const *extra) {
    const char *dir = vt_test_data_dir("test models");
    if (!dir) return false;
    char model[512];
    /* a fixture's name, or a path of the test's own making */
    if (model_file[0] == '/') snprintf(model, sizeof model, "%s", model_file);
    else snprintf(model, sizeof model, "%s/models/%s", dir, model_file);
    vt_test_tmpfile(s->log, sizeof s->log, log_name);
    const char *argv[48] = {VT_CLI_PATH, "serve", "-m", model, "--port", "0", "--threads", "1"};
    int n = 8;
    for (; *extra && n < 46; extra++) argv[n++] = *extra;
    argv[n] = NULL;
    s->pid = fork();
    if (s->pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        close(fd);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    double end = serve_now() + 60;
    s->port = 0;
    static const char listening[] = "listening on http://127.0.0.1:";
    while (serve_now() < end && !s->port) {
        char *log = vt_test_read_file(s->log, NULL);
        const char *at = log ? strstr(log, listening) : NULL;
        if (at) s->port = atoi(at + strlen(listening));
        free(log);
        if (!s->port) serve_sleep_ms(20);
    }
    return s->port != 0;
}

bool serve_start(serve_server *s, const char *model_file, const char *log_name, const char *const *extra) {
    if (!serve_spawn(s, model_file, log_name, extra)) return false;
    double end = serve_now() + 60;
    while (serve_now() < end) {
        serve_reply r = serve_http(s, NULL, "/health", NULL, NULL);
        long st = r.status;
        serve_reply_free(&r);
        if (st == 200) return true;
        if (st != 503 && st != 0) { /* 503 while loading, 0 before the listener answers */
            fprintf(stderr, "serve_client: /health answered %ld while starting\n", st);
            return false;
        }
        serve_sleep_ms(20);
    }
    return false;
}

int serve_stop(serve_server *s) {
    if (s->pid <= 0) return -1;
    kill(s->pid, SIGTERM);
    int status = 0;
    waitpid(s->pid, &status, 0);
    s->pid = 0;
    return status;
}

char *serve_field(const serve_reply *r, const char *a, const char *b) {
    json_value v;
    char err[128];
    if (!r->body.s || !json_parse(r->body.s, r->body.n, &v, err, sizeof err)) return NULL;
    const json_value *x = json_get(&v, a);
    if (x && b) x = json_get(x, b);
    char *s = x && x->type == JSON_STRING ? strdup(x->str) : NULL;
    json_free(&v);
    return s;
}

char *serve_error_param(const serve_reply *r) { return serve_field(r, "error", "param"); }

static const json_value *first_choice(const json_value *v) {
    const json_value *c = json_get(v, "choices");
    return c && c->type == JSON_ARRAY && c->n > 0 ? &c->items[0] : NULL;
}

static const json_value *member2(const json_value *v, const char *a, const char *b) {
    const json_value *x = json_get(v, a);
    return x ? json_get(x, b) : NULL;
}

void serve_read_events(const char *body, bool chat, serve_streamed *out) {
    memset(out, 0, sizeof *out);
    out->usage_prompt = out->usage_completion = -1;
    out->text = calloc(1, 1);
    for (const char *p = body; p && *p;) {
        const char *end = strstr(p, "\n\n");
        if (!end) {
            out->bad_event = true;
            break;
        }
        if (strncmp(p, "data: ", 6) != 0) out->bad_event = true;
        else if (strncmp(p + 6, "[DONE]", 6) == 0) out->done = true;
        else {
            json_value v;
            char err[128];
            if (out->done || !json_parse(p + 6, (size_t)(end - p - 6), &v, err, sizeof err)) {
                out->bad_event = true;
                break;
            }
            const json_value *error = json_get(&v, "error");
            if (error) {
                const json_value *code = json_get(error, "code");
                snprintf(out->error_code, sizeof out->error_code, "%s",
                         code && code->type == JSON_STRING ? code->str : "-");
                json_free(&v);
                p = end + 2;
                continue;
            }
            const json_value *obj = json_get(&v, "object");
            if (!obj || obj->type != JSON_STRING ||
                strcmp(obj->str, chat ? "chat.completion.chunk" : "text_completion") != 0)
                out->bad_event = true;
            const json_value *ch = first_choice(&v);
            const json_value *uc = member2(&v, "usage", "completion_tokens"), *up = member2(&v, "usage", "prompt_tokens");
            if (uc) out->usage_completion = (long)uc->number;
            if (up) out->usage_prompt = (long)up->number;
            if (ch) {
                const json_value *t = chat ? member2(ch, "delta", "content") : json_get(ch, "text");
                if (out->chunks == 0 && chat) out->first_has_role = member2(ch, "delta", "role") != NULL;
                if (t && t->type == JSON_STRING) {
                    char *grown = realloc(out->text, out->n_text + t->len + 1);
                    if (grown) {
                        out->text = grown;
                        memcpy(out->text + out->n_text, t->str, t->len + 1);
                        out->n_text += t->len;
                    }
                }
                const json_value *f = json_get(ch, "finish_reason");
                if (f && f->type == JSON_STRING) snprintf(out->finish, sizeof out->finish, "%s", f->str);
            }
            out->chunks++;
            json_free(&v);
        }
        p = end + 2;
    }
}
