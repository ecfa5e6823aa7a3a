/* test_serve_choices.c — what each choice of a `vt serve` completion
 * carries, end to end over real HTTP: logprobs, and n choices.
 *
 * The main server runs the trained tiny llama (aidreams260k) on the
 * reference backend, so the logprobs it reports are checked against the
 * log-softmax of the logits vt_session computes on the reference backend for
 * the same tokens, here, in double. A second server on the step_gate backend
 * holds the engine so a client can leave while its choices certainly run.
 * Skipped only when vt serve was not built. */
#include <curl/curl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "json_mini.h"
#include "serve_client.h"
#include "serve_gate.h"
#include "util.h"
#include "vt/vt.h"

#define MODEL "aidreams260k-f32.gguf"
#define MAX_CHOICES 8
/* The server's logprobs are float32 log-softmaxes of the same float logits
 * the session gives (same backend, same plans); the expected values here are
 * double. They differ by a few float ulps of the result (|logprob| < 30,
 * ulp ~2e-6) plus the server's float sum of exp: 1e-4 is ~50 ulps, and a
 * wrong formula (a temperature or penalty applied, a missing
 * normalization) is off by far more. */
#define TOL 1e-4

static serve_server srv;
static char model_path[1024];

static int suite_init(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const char *dir = vt_test_data_dir("test models");
    if (!dir) return 1;
    snprintf(model_path, sizeof model_path, "%s/models/%s", dir, MODEL);
    static const char *const args[] = {"--backend", "reference", "--parallel", "4", "-c", "256", "--chat-template",
                                       "chatml", NULL};
    return serve_start(&srv, MODEL, "choices.log", args) ? 0 : 1;
}

static int suite_cleanup(void) {
    if (srv.pid > 0) serve_stop(&srv);
    curl_global_cleanup();
    return 0;
}

/* ---- small helpers ---------------------------------------------------------- */

typedef struct strbuf {
    char *s;
    size_t n;
} strbuf;

static void sb_add(strbuf *b, const char *p, size_t n) {
    char *g = realloc(b->s, b->n + n + 1);
    CU_ASSERT_FATAL(g != NULL);
    b->s = g;
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_printf(strbuf *b, const char *fmt, double x) {
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, fmt, x);
    sb_add(b, tmp, (size_t)n);
}

/* A canonical text of a JSON value (numbers to 9 digits), for comparing the
 * logprobs a stream sent piece by piece with those of the whole answer. */
static void canon(strbuf *b, const json_value *v) {
    switch (v->type) {
    case JSON_NULL: sb_add(b, "null", 4); break;
    case JSON_BOOL: sb_add(b, v->boolean ? "true" : "false", v->boolean ? 4 : 5); break;
    case JSON_NUMBER: sb_printf(b, "%.9g", v->number); break;
    case JSON_STRING:
        sb_add(b, "\"", 1);
        sb_add(b, v->str, v->len);
        sb_add(b, "\"", 1);
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        sb_add(b, v->type == JSON_ARRAY ? "[" : "{", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (v->type == JSON_OBJECT) {
                sb_add(b, v->keys[i], strlen(v->keys[i]));
                sb_add(b, ":", 1);
            }
            canon(b, &v->items[i]);
            sb_add(b, ",", 1);
        }
        sb_add(b, v->type == JSON_ARRAY ? "]" : "}", 1);
        break;
    }
}

/* text as the server writes a token: each byte that does not begin a valid
 * UTF-8 sequence (and NUL) becomes U+FFFD. */
static size_t lossy(const unsigned char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c == 0 ? 0 : c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                                               : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (len > n - i) len = 0;
        unsigned cp = len > 1 ? c & (0x3F >> (len - 1)) : c;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) len = 0;
            else cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if (len > 1 && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                        (cp >= 0xD800 && cp <= 0xDFFF)))
            len = 0;
        if (len) {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return o;
}

/* ---- answers ------------------------------------------------------------------ */

/* One choice as a whole answer or a stream gave it. */
typedef struct choice_got {
    strbuf text;
    strbuf logprobs; /* canon() of each token's logprobs entry, in order */
    int n_tokens;    /* logprobs entries */
    char finish[16];
    bool seen;
} choice_got;

typedef struct answer {
    long status;
    choice_got c[MAX_CHOICES];
    long prompt_tokens, completion_tokens, cached_tokens;
    bool bad;
    json_value whole; /* the whole answer's JSON (status 200, not streamed) */
    bool have_whole;
} answer;

static void answer_free(answer *a) {
    for (int i = 0; i < MAX_CHOICES; i++) {
        free(a->c[i].text.s);
        free(a->c[i].logprobs.s);
    }
    if (a->have_whole) json_free(&a->whole);
    memset(a, 0, sizeof *a);
}

/* Append a choice object's text, finish and logprobs (chat: message or
 * delta) to a->c[its index]. */
static void take_choice(answer *a, const json_value *ch, bool chat, bool chunk) {
    const json_value *idx = json_get(ch, "index");
    CU_ASSERT_FATAL(idx && idx->type == JSON_NUMBER && idx->number >= 0 && idx->number < MAX_CHOICES);
    choice_got *c = &a->c[(int)idx->number];
    c->seen = true;
    const json_value *t = chat ? json_get(json_get(ch, chunk ? "delta" : "message"), "content") : json_get(ch, "text");
    if (t && t->type == JSON_STRING) sb_add(&c->text, t->str, t->len);
    const json_value *f = json_get(ch, "finish_reason");
    if (f && f->type == JSON_STRING) snprintf(c->finish, sizeof c->finish, "%s", f->str);
    const json_value *lp = json_get(ch, "logprobs");
    if (!lp || lp->type == JSON_NULL) return;
    if (chat) {
        const json_value *content = json_get(lp, "content");
        CU_ASSERT_FATAL(content && content->type == JSON_ARRAY);
        for (size_t i = 0; i < content->n; i++, c->n_tokens++) canon(&c->logprobs, &content->items[i]);
    } else {
        const json_value *tokens = json_get(lp, "tokens"), *values = json_get(lp, "token_logprobs"),
                         *tops = json_get(lp, "top_logprobs"), *offsets = json_get(lp, "text_offset");
        CU_ASSERT_FATAL(tokens && values && tops && offsets);
        CU_ASSERT_FATAL(values->n == tokens->n && tops->n == tokens->n && offsets->n == tokens->n);
        for (size_t i = 0; i < tokens->n; i++, c->n_tokens++) {
            canon(&c->logprobs, &tokens->items[i]);
            canon(&c->logprobs, &values->items[i]);
            canon(&c->logprobs, &tops->items[i]);
            canon(&c->logprobs, &offsets->items[i]);
        }
    }
}

static void take_usage(answer *a, const json_value *u) {
    const json_value *p = json_get(u, "prompt_tokens"), *c = json_get(u, "completion_tokens"),
                     *d = json_get(json_get(u, "prompt_tokens_details"), "cached_tokens");
    if (p) a->prompt_tokens = (long)p->number;
    if (c) a->completion_tokens = (long)c->number;
    if (d) a->cached_tokens = (long)d->number;
}

/* POST body to path; a whole or streamed (by "stream" in body) answer. */
static answer ask(const char *path, const char *body) {
    answer a = {0};
    a.prompt_tokens = a.completion_tokens = a.cached_tokens = -1;
    const bool chat = strstr(path, "chat") != NULL;
    serve_reply r = serve_http(&srv, NULL, path, body, NULL);
    a.status = r.status;
    char err[128];
    if (r.status == 200 && r.body.s && strncmp(r.body.s, "data: ", 6) == 0) {
        for (const char *p = r.body.s; *p;) {
            const char *end = strstr(p, "\n\n");
            if (!end || strncmp(p, "data: ", 6) != 0) {
                a.bad = true;
                break;
            }
            if (strncmp(p + 6, "[DONE]", 6) != 0) {
                json_value v;
                if (!json_parse(p + 6, (size_t)(end - p - 6), &v, err, sizeof err)) {
                    a.bad = true;
                    break;
                }
                const json_value *choices = json_get(&v, "choices");
                CU_ASSERT(choices && choices->type == JSON_ARRAY && choices->n <= 1);
                if (choices && choices->n == 1) take_choice(&a, &choices->items[0], chat, true);
                if (json_get(&v, "usage")) take_usage(&a, json_get(&v, "usage"));
                json_free(&v);
            }
            p = end + 2;
        }
    } else if (r.status == 200) {
        CU_ASSERT_FATAL(r.body.s && json_parse(r.body.s, r.body.n, &a.whole, err, sizeof err));
        a.have_whole = true;
        const json_value *choices = json_get(&a.whole, "choices");
        CU_ASSERT_FATAL(choices && choices->type == JSON_ARRAY);
        for (size_t i = 0; i < choices->n; i++) {
            take_choice(&a, &choices->items[i], chat, false);
            CU_ASSERT_EQUAL(json_get(&choices->items[i], "index")->number, (double)i);
        }
        take_usage(&a, json_get(&a.whole, "usage"));
    }
    serve_reply_free(&r);
    return a;
}

static int n_seen(const answer *a) {
    int n = 0;
    while (n < MAX_CHOICES && a->c[n].seen) n++;
    return n;
}

/* ---- the session's numbers ------------------------------------------------------- */

/* The prompt's ids as the server tokenizes a text prompt (BOS as the
 * vocabulary says, no control tokens). */
static size_t prompt_ids(vt_session *s, const char *text, int32_t *ids, size_t cap) {
    int32_t *t = NULL;
    size_t n = 0;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(vt_session_tokenize(s, text, strlen(text), true, &t, &n, err, sizeof err), VT_OK);
    CU_ASSERT_FATAL(n <= cap);
    memcpy(ids, t, n * sizeof *t);
    free(t);
    return n;
}

static vt_session *open_session(void) {
    const char *const settings[] = {"runtime.backend=reference", "runtime.threads=1", "kv_cache.ctx_size=128", NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_session *s = NULL;
    char err[512] = "";
    if (vt_session_open(model_path, &o, &s, err, sizeof err) != VT_OK) printf("\n  vt_session_open: %s\n", err);
    return s;
}

/* lp[V]: the log-softmax of the session's last logits, in double. */
static void log_softmax(const vt_session *s, double *lp) {
    const int32_t V = vt_session_n_vocab(s);
    const float *x = vt_session_logits(s, 0);
    double max = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < V; i++) max = fmax(max, x[i]);
    for (int32_t i = 0; i < V; i++) sum += exp((double)x[i] - max);
    for (int32_t i = 0; i < V; i++) lp[i] = (double)x[i] - max - log(sum);
}

/* The id whose text the server writes as text (lossy) and whose expected
 * logprob is logprob; -1 if none. */
static int32_t find_token(const vt_session *s, const double *lp, const char *text, size_t len, double logprob) {
    const int32_t V = vt_session_n_vocab(s);
    for (int32_t id = 0; id < V; id++) {
        unsigned char bytes[256];
        char shown[800];
        int32_t n = vt_session_token_bytes(s, id, (char *)bytes, sizeof bytes);
        if (n < 0 || n > (int32_t)sizeof bytes) continue;
        size_t m = lossy(bytes, (size_t)n, shown);
        if (m == len && memcmp(shown, text, len) == 0 && fabs(lp[id] - logprob) < TOL) return id;
    }
    return -1;
}

/* ---- tests --------------------------------------------------------------------- */

/* /v1/completions with "logprobs": 5 at temperature 1 (with a top-k cut and
 * a penalty, which change what is drawn, not the reported numbers): each
 * token, its logprob and its alternatives are those of the session's
 * logits for the same tokens; text_offset walks the text. */
static void test_completion_logprobs_are_the_models(void) {
    vt_session *s = open_session();
    CU_ASSERT_FATAL(s != NULL);
    int32_t ids[64];
    const size_t n_ids = prompt_ids(s, "Once upon a time", ids, 64);
    char body[1024];
    int used = snprintf(body, sizeof body, "{\"prompt\":[");
    for (size_t i = 0; i < n_ids; i++) used += snprintf(body + used, sizeof body - (size_t)used, "%s%d", i ? "," : "", ids[i]);
    snprintf(body + used, sizeof body - (size_t)used,
             "],\"max_tokens\":20,\"temperature\":1,\"top_k\":10,\"frequency_penalty\":1,\"seed\":9,\"logprobs\":5}");
    answer a = ask("/v1/completions", body);
    CU_ASSERT_EQUAL_FATAL(a.status, 200);
    const json_value *lp = json_get(&json_get(&a.whole, "choices")->items[0], "logprobs");
    const json_value *tokens = json_get(lp, "tokens"), *values = json_get(lp, "token_logprobs"),
                     *tops = json_get(lp, "top_logprobs"), *offsets = json_get(lp, "text_offset");
    CU_ASSERT_FATAL(tokens && tokens->n >= 1 && (long)tokens->n <= a.completion_tokens);
    const int32_t V = vt_session_n_vocab(s);
    double *expected = malloc((size_t)V * sizeof *expected);
    CU_ASSERT_FATAL(expected != NULL);
    char err[256];
    CU_ASSERT_EQUAL_FATAL(vt_session_eval(s, ids, n_ids, err, sizeof err), VT_OK);
    size_t offset = 0;
    for (size_t t = 0; t < tokens->n; t++) {
        log_softmax(s, expected);
        const json_value *tok = &tokens->items[t];
        const int32_t id = find_token(s, expected, tok->str, tok->len, values->items[t].number);
        CU_ASSERT_FATAL(id >= 0); /* a token of that text with that logprob */
        CU_ASSERT_EQUAL(offsets->items[t].number, (double)offset);
        char bytes[256];
        offset += (size_t)vt_session_token_bytes(s, id, bytes, sizeof bytes);
        /* the alternatives: the 5 most likely (one text per key), and the
         * sampled token, each with its own logprob */
        const json_value *top = &tops->items[t];
        CU_ASSERT(top->type == JSON_OBJECT && top->n >= 1 && top->n <= 6);
        double sorted[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int32_t i = 0; i < V; i++)
            for (int k = 0; k < 5; k++)
                if (expected[i] > sorted[k]) {
                    memmove(sorted + k + 1, sorted + k, (size_t)(4 - k) * sizeof *sorted);
                    sorted[k] = expected[i];
                    break;
                }
        bool has_best = false, has_sampled = false;
        for (size_t k = 0; k < top->n; k++) {
            const double v = top->items[k].number;
            CU_ASSERT(find_token(s, expected, top->keys[k], strlen(top->keys[k]), v) >= 0);
            CU_ASSERT(v >= sorted[4] - TOL || fabs(v - values->items[t].number) < TOL);
            has_best |= fabs(v - sorted[0]) < TOL;
            has_sampled |= strcmp(top->keys[k], tok->str) == 0;
        }
        CU_ASSERT(has_best && has_sampled);
        if (t + 1 < tokens->n) CU_ASSERT_EQUAL_FATAL(vt_session_eval(s, &id, 1, err, sizeof err), VT_OK);
    }
    const json_value *text = json_get(&json_get(&a.whole, "choices")->items[0], "text");
    CU_ASSERT(offset >= text->len); /* the tokens' bytes cover the text (an end-of-text token adds none) */
    free(expected);
    vt_session_close(s);
    answer_free(&a);
}

/* Chat logprobs: top_logprobs sorted, the sampled token's own logprob where
 * it is among them, bytes exact (their concatenation is the text) and token
 * their text; streamed chunks carry exactly the whole answer's logprobs. */
static void test_chat_logprobs_shape_and_stream(void) {
    static const char fmt[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story\"}],\"max_tokens\":24,"
                              "\"temperature\":1,\"seed\":4,\"logprobs\":true,\"top_logprobs\":4%s}";
    char body[512];
    snprintf(body, sizeof body, fmt, "");
    answer whole = ask("/v1/chat/completions", body);
    CU_ASSERT_EQUAL_FATAL(whole.status, 200);
    const json_value *content =
        json_get(json_get(&json_get(&whole.whole, "choices")->items[0], "logprobs"), "content");
    CU_ASSERT_FATAL(content && content->type == JSON_ARRAY && content->n >= 1);
    strbuf joined = {0};
    for (size_t t = 0; t < content->n; t++) {
        const json_value *e = &content->items[t], *bytes = json_get(e, "bytes"), *top = json_get(e, "top_logprobs");
        const json_value *tok = json_get(e, "token"), *lp = json_get(e, "logprob");
        CU_ASSERT_FATAL(bytes && bytes->type == JSON_ARRAY && top && top->type == JSON_ARRAY && tok && lp);
        unsigned char raw[256];
        char shown[800];
        for (size_t i = 0; i < bytes->n && i < sizeof raw; i++) raw[i] = (unsigned char)bytes->items[i].number;
        lossy(raw, bytes->n, shown);
        CU_ASSERT_STRING_EQUAL(shown, tok->str);
        sb_add(&joined, (const char *)raw, bytes->n);
        CU_ASSERT(lp->number <= 0);
        CU_ASSERT_EQUAL(top->n, 4);
        for (size_t k = 0; k < top->n; k++) {
            const json_value *x = &top->items[k];
            if (k > 0) CU_ASSERT(json_get(x, "logprob")->number <= json_get(&top->items[k - 1], "logprob")->number);
            if (strcmp(json_get(x, "token")->str, tok->str) == 0)
                CU_ASSERT_EQUAL(json_get(x, "logprob")->number, lp->number);
        }
        /* the sampled token is at most as likely as the most likely one */
        CU_ASSERT(lp->number <= json_get(&top->items[0], "logprob")->number);
    }
    CU_ASSERT_STRING_EQUAL(joined.s, whole.c[0].text.s);
    free(joined.s);
    snprintf(body, sizeof body, fmt, ",\"stream\":true");
    answer streamed = ask("/v1/chat/completions", body);
    CU_ASSERT(!streamed.bad);
    CU_ASSERT_STRING_EQUAL(streamed.c[0].text.s, whole.c[0].text.s);
    CU_ASSERT_STRING_EQUAL(streamed.c[0].finish, whole.c[0].finish);
    CU_ASSERT_EQUAL(streamed.c[0].n_tokens, whole.c[0].n_tokens);
    CU_ASSERT(streamed.c[0].logprobs.s && whole.c[0].logprobs.s &&
              strcmp(streamed.c[0].logprobs.s, whole.c[0].logprobs.s) == 0);
    answer_free(&whole);
    answer_free(&streamed);
    /* completions, streamed and whole: the same tokens, logprobs and offsets */
    static const char cfmt[] = "{\"prompt\":\"The dog\",\"max_tokens\":16,\"seed\":2,\"logprobs\":3%s}";
    snprintf(body, sizeof body, cfmt, "");
    whole = ask("/v1/completions", body);
    snprintf(body, sizeof body, cfmt, ",\"stream\":true");
    streamed = ask("/v1/completions", body);
    CU_ASSERT(whole.c[0].n_tokens >= 1 && streamed.c[0].n_tokens == whole.c[0].n_tokens);
    CU_ASSERT(streamed.c[0].logprobs.s && whole.c[0].logprobs.s &&
              strcmp(streamed.c[0].logprobs.s, whole.c[0].logprobs.s) == 0);
    CU_ASSERT_STRING_EQUAL(streamed.c[0].text.s, whole.c[0].text.s);
    answer_free(&whole);
    answer_free(&streamed);
    /* without logprobs: null, as before */
    whole = ask("/v1/completions", "{\"prompt\":\"The dog\",\"max_tokens\":2}");
    const json_value *none = json_get(&json_get(&whole.whole, "choices")->items[0], "logprobs");
    CU_ASSERT(none && none->type == JSON_NULL);
    answer_free(&whole);
}

/* n choices are the separate requests with seed, seed + 1, ...: the same
 * text and finish reason each (a stop string ends some of them); usage
 * counts the prompt once and every choice's tokens; the prompt is looked up
 * in the prefix cache (and computed) once. */
static void test_n_choices_equal_separate_requests(void) {
    static const char fmt[] = "{\"prompt\":\"There was a %s\",\"max_tokens\":24,\"temperature\":1,\"seed\":%d,"
                              "\"stop\":[\".\"]%s}";
    char body[512];
    const double queried = serve_metric(&srv, "vt_prefix_cache_query_tokens_total");
    snprintf(body, sizeof body, fmt, "cat", 70, ",\"n\":4,\"logprobs\":1");
    answer all = ask("/v1/completions", body);
    CU_ASSERT_EQUAL_FATAL(all.status, 200);
    CU_ASSERT_EQUAL(n_seen(&all), 4);
    CU_ASSERT(serve_metric_reaches(&srv, "vt_prefix_cache_query_tokens_total", queried + (double)all.prompt_tokens, 10));
    CU_ASSERT_EQUAL(serve_metric(&srv, "vt_prefix_cache_query_tokens_total"), queried + (double)all.prompt_tokens);
    long completion = 0;
    int differ = 0;
    for (int i = 0; i < 4; i++) {
        snprintf(body, sizeof body, fmt, "cat", 70 + i, ",\"logprobs\":1");
        answer one = ask("/v1/completions", body);
        CU_ASSERT_EQUAL_FATAL(one.status, 200);
        CU_ASSERT_STRING_EQUAL(all.c[i].text.s ? all.c[i].text.s : "", one.c[0].text.s ? one.c[0].text.s : "");
        CU_ASSERT_STRING_EQUAL(all.c[i].finish, one.c[0].finish);
        CU_ASSERT(all.c[i].logprobs.s && one.c[0].logprobs.s && strcmp(all.c[i].logprobs.s, one.c[0].logprobs.s) == 0);
        CU_ASSERT_EQUAL(all.prompt_tokens, one.prompt_tokens);
        completion += one.completion_tokens;
        differ += i > 0 && strcmp(all.c[i].text.s ? all.c[i].text.s : "", all.c[0].text.s ? all.c[0].text.s : "");
        answer_free(&one);
    }
    CU_ASSERT_EQUAL(all.completion_tokens, completion);
    CU_ASSERT(differ > 0); /* different seeds: not every choice the same text */
    answer_free(&all);
    /* streamed: chunks tagged with their choice, each choice the same as whole */
    snprintf(body, sizeof body, fmt, "dog", 5, ",\"n\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    answer streamed = ask("/v1/completions", body);
    snprintf(body, sizeof body, fmt, "dog", 5, ",\"n\":3");
    answer whole = ask("/v1/completions", body);
    CU_ASSERT(!streamed.bad);
    CU_ASSERT_EQUAL(n_seen(&streamed), 3);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_STRING_EQUAL(streamed.c[i].text.s ? streamed.c[i].text.s : "",
                               whole.c[i].text.s ? whole.c[i].text.s : "");
        CU_ASSERT_STRING_EQUAL(streamed.c[i].finish, whole.c[i].finish);
    }
    CU_ASSERT_EQUAL(streamed.prompt_tokens, whole.prompt_tokens);
    CU_ASSERT_EQUAL(streamed.completion_tokens, whole.completion_tokens);
    answer_free(&streamed);
    answer_free(&whole);
}

static void test_greedy_choices_are_identical(void) {
    answer a = ask("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":16,"
                                           "\"temperature\":0,\"n\":3,\"logprobs\":true}");
    CU_ASSERT_EQUAL_FATAL(a.status, 200);
    CU_ASSERT_EQUAL(n_seen(&a), 3);
    for (int i = 1; i < 3; i++) {
        CU_ASSERT_STRING_EQUAL(a.c[i].text.s ? a.c[i].text.s : "", a.c[0].text.s ? a.c[0].text.s : "");
        CU_ASSERT(a.c[i].logprobs.s && a.c[0].logprobs.s && strcmp(a.c[i].logprobs.s, a.c[0].logprobs.s) == 0);
        CU_ASSERT_STRING_EQUAL(a.c[i].finish, a.c[0].finish);
    }
    answer_free(&a);
}

/* top_k -1, vLLM's and llama-server's "off", samples as vt's 0 does (the
 * same seed, the same text); -2 is refused (the one rule of
 * core/runtime/sampling_rules.c, test_sampling_rules). */
static void test_top_k_minus_one_is_off(void) {
    const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":16,"
                       "\"temperature\":1.5,\"seed\":21,\"top_p\":1,\"min_p\":0,\"top_k\":%d}";
    char req[512];
    snprintf(req, sizeof req, body, -1);
    answer off = ask("/v1/chat/completions", req);
    snprintf(req, sizeof req, body, 0);
    answer zero = ask("/v1/chat/completions", req);
    snprintf(req, sizeof req, body, 1);
    answer one = ask("/v1/chat/completions", req);
    CU_ASSERT_EQUAL_FATAL(off.status, 200);
    CU_ASSERT_EQUAL_FATAL(zero.status, 200);
    CU_ASSERT_STRING_EQUAL(off.c[0].text.s ? off.c[0].text.s : "", zero.c[0].text.s ? zero.c[0].text.s : "");
    /* and the field is read: top_k 1 (greedy) differs at this temperature */
    CU_ASSERT_EQUAL_FATAL(one.status, 200);
    CU_ASSERT_STRING_NOT_EQUAL(one.c[0].text.s ? one.c[0].text.s : "", zero.c[0].text.s ? zero.c[0].text.s : "");
    answer_free(&off);
    answer_free(&zero);
    answer_free(&one);
    snprintf(req, sizeof req, body, -2);
    answer bad = ask("/v1/chat/completions", req);
    CU_ASSERT_EQUAL(bad.status, 400);
    answer_free(&bad);
}

/* A stop string spelled over several tokens: the text ends before it
 * (whole or streamed), and in a whole answer the tokens that spelled it
 * (listed up to the one that completed it) begin where the text ends, no
 * offset past it. (A stream has sent the first of them before the stop
 * string was certain, at the offsets they would have had.) */
static void test_offsets_with_a_stop_string(void) {
    for (int stream = 0; stream < 2; stream++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"prompt\":\"Once upon a time\",\"max_tokens\":40,\"temperature\":0,\"logprobs\":1,"
                 "\"stop\":[\"etals\"],\"stream\":%s}",
                 stream ? "true" : "false");
        answer a = ask("/v1/completions", body);
        CU_ASSERT_EQUAL_FATAL(a.status, 200);
        const json_value *ch = stream ? NULL : &json_get(&a.whole, "choices")->items[0];
        const char *text = stream ? a.c[0].text.s : json_get(ch, "text")->str;
        const size_t n_text = stream ? a.c[0].text.n : json_get(ch, "text")->len;
        CU_ASSERT_STRING_EQUAL(stream ? a.c[0].finish : json_get(ch, "finish_reason")->str, "stop");
        CU_ASSERT(n_text > 0 && strstr(text, "etals") == NULL);
        if (!stream) {
            const json_value *lp = json_get(ch, "logprobs"), *offsets = json_get(lp, "text_offset");
            int at_end = 0;
            for (size_t t = 0; t < offsets->n; t++) {
                CU_ASSERT(offsets->items[t].number <= (double)n_text);
                CU_ASSERT(t == 0 || offsets->items[t].number >= offsets->items[t - 1].number);
                at_end += offsets->items[t].number == (double)n_text;
            }
            CU_ASSERT(at_end >= 2); /* "etals" took more than one token */
        }
        answer_free(&a);
    }
}

static void test_refusals_name_the_field(void) {
    static const struct {
        const char *path, *body, *param;
    } cases[] = {
        {"/v1/completions", "{\"prompt\":\"x\",\"n\":0}", "n"},
        {"/v1/completions", "{\"prompt\":\"x\",\"n\":9}", "n"},
        {"/v1/completions", "{\"prompt\":\"x\",\"n\":\"2\"}", "n"},
        {"/v1/completions", "{\"prompt\":\"x\",\"logprobs\":6}", "logprobs"},
        {"/v1/completions", "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs"},
        {"/v1/completions", "{\"prompt\":\"x\",\"logprobs\":2,\"top_logprobs\":2}", "top_logprobs"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":2}", "logprobs"},
        {"/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
         "top_logprobs"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":21}",
         "top_logprobs"},
        {"/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":-1}",
         "top_logprobs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        serve_reply r = serve_http(&srv, NULL, cases[i].path, cases[i].body, NULL);
        json_value v;
        char err[128];
        CU_ASSERT_EQUAL(r.status, 400);
        CU_ASSERT_FATAL(r.body.s && json_parse(r.body.s, r.body.n, &v, err, sizeof err));
        const json_value *p = json_get(json_get(&v, "error"), "param");
        CU_ASSERT(p && p->type == JSON_STRING && strcmp(p->str, cases[i].param) == 0);
        if (!p || p->type != JSON_STRING || strcmp(p->str, cases[i].param) != 0)
            fprintf(stderr, "case %zu: expected param %s in %s\n", i, cases[i].param, r.body.s);
        json_free(&v);
        serve_reply_free(&r);
    }
    /* null is "not given": one choice, no logprobs */
    answer a = ask("/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1,\"n\":null,\"logprobs\":null}");
    CU_ASSERT_EQUAL(a.status, 200);
    CU_ASSERT_EQUAL(n_seen(&a), 1);
    CU_ASSERT_EQUAL(a.c[0].n_tokens, 0);
    answer_free(&a);
}

static int log_count(const serve_server *s, const char *needle) {
    char *log = vt_test_read_file(s->log, NULL);
    int n = 0;
    for (const char *p = log; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    free(log);
    return n;
}

static size_t hang_up(char *p, size_t size, size_t n, void *user) {
    (void)p, (void)size, (void)n;
    (*(int *)user)++;
    return 0; /* aborts the transfer */
}

/* One request of 8 choices on 2 sequences: two run and six queue behind
 * them, yet as requests one runs and none waits, so with --max-waiting 1 the
 * next request is taken (it was refused queue_full for the first one's
 * queued choices). The engine is held after the prompt's forward, so the
 * six certainly wait when the second request arrives. */
static void test_queued_choices_leave_the_queue_to_requests(void) {
    serve_server gated = {0};
    serve_gate gate;
    CU_ASSERT_FATAL(serve_gate_init(&gate, "choices-queue-gate"));
    static const char *const args[] = {"--max-seqs", "2", "--max-waiting", "1", "-c", "512", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&gated, &gate, MODEL, "choices-queue.log", args));
    const long base = serve_gate_reached(&gate);
    serve_gate_allow(&gate, base + 1);
    serve_post a = {&gated, "{\"prompt\":\"Once upon a time\",\"max_tokens\":3,\"n\":8,\"seed\":1}", {0}};
    serve_post b = {&gated, "{\"prompt\":\"The dog\",\"max_tokens\":3,\"seed\":2}", {0}};
    pthread_t ta, tb;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&ta, NULL, serve_post_main, &a), 0);
    CU_ASSERT(serve_gate_wait_reached(&gate, base + 2, 60)); /* the prompt computed; held before the next */
    CU_ASSERT(serve_metric_reaches(&gated, "vt_requests_running", 1, 60));
    CU_ASSERT_EQUAL(serve_metric(&gated, "vt_requests_waiting"), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&tb, NULL, serve_post_main, &b), 0);
    CU_ASSERT(serve_metric_reaches(&gated, "vt_requests_waiting", 1, 60)); /* b is taken: it waits */
    serve_gate_open(&gate);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CU_ASSERT_EQUAL(a.r.status, 200);
    CU_ASSERT_EQUAL(b.r.status, 200);
    serve_reply_free(&a.r);
    serve_reply_free(&b.r);
    CU_ASSERT_EQUAL(log_count(&gated, "POST /v1/completions 503"), 0); /* (its /health polls while loading may be 503) */
    int status = serve_stop(&gated);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A client that leaves a streamed n = 3 request ends all three choices:
 * the engine is held after the forward that computed the prompt, so the
 * three certainly run (and hold blocks) when the client hangs up at its
 * first chunk, and once the gate opens every block comes back. */
static void test_client_leaving_cancels_every_choice(void) {
    serve_server gated = {0};
    serve_gate gate;
    CU_ASSERT_FATAL(serve_gate_init(&gate, "choices-gate"));
    static const char *const args[] = {"--parallel", "4", "-c", "256", NULL};
    CU_ASSERT_FATAL(serve_start_gated(&gated, &gate, MODEL, "choices-gated.log", args));
    long base = serve_gate_reached(&gate);
    serve_gate_allow(&gate, base + 1);
    double gen_before = serve_metric(&gated, "vt_generation_tokens_total");
    CURL *h = curl_easy_init();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", gated.port);
    int chunks = 0;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                     "{\"prompt\":\"Once upon a time\",\"max_tokens\":200,\"n\":3,\"seed\":1,\"stream\":true}");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, hang_up);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &chunks);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 120L);
    CU_ASSERT_EQUAL(curl_easy_perform(h), CURLE_WRITE_ERROR);
    curl_easy_cleanup(h);
    /* the server saw the client leave */
    const double until = serve_now() + 60;
    while (log_count(&gated, "(client left)") < 1 && serve_now() < until) serve_sleep_ms(10);
    CU_ASSERT(log_count(&gated, "(client left)") == 1);
    /* The cancel may reach the engine before or after it asks for its second
     * forward; which happened is read, not assumed. Held there, the three
     * choices run, forked from the prompt: one request running. */
    if (serve_gate_reached(&gate) >= base + 2) {
        CU_ASSERT(serve_metric_reaches(&gated, "vt_requests_running", 1, 60));
        CU_ASSERT(serve_metric(&gated, "vt_kv_blocks_used") > 0);
    }
    serve_gate_open(&gate);
    CU_ASSERT(serve_metric_reaches(&gated, "vt_kv_blocks_used", 0, 60));
    CU_ASSERT(serve_metric_reaches(&gated, "vt_requests_running", 0, 60));
    /* three first tokens from the prompt's forward, at most one more step
     * each: not run to their 200 tokens */
    const double generated = serve_metric(&gated, "vt_generation_tokens_total") - gen_before;
    CU_ASSERT(generated >= 3 && generated <= 6);
    if (generated > 6) printf("\n  %g tokens generated after the client left\n", generated);
    int status = serve_stop(&gated);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
    if (!VT_TEST_HAVE_SERVE) {
        printf("SKIP: vt serve was not built (libmicrohttpd or jansson missing at configure time)\n");
        return 77;
    }
    static CU_TestInfo tests[] = {
        {"completion logprobs are the model's (reference logits)", test_completion_logprobs_are_the_models},
        {"chat logprobs: shape, bytes, streamed = whole", test_chat_logprobs_shape_and_stream},
        {"n choices equal separate requests; prompt once", test_n_choices_equal_separate_requests},
        {"greedy choices are identical", test_greedy_choices_are_identical},
        {"top_k -1 is off, as vLLM and llama-server spell it", test_top_k_minus_one_is_off},
        {"text offsets with a stop string", test_offsets_with_a_stop_string},
        {"bad n / logprobs: 400 naming the field", test_refusals_name_the_field},
        {"a client leaving cancels every choice", test_client_leaving_cancels_every_choice},
        {"queued choices leave the queue to requests", test_queued_choices_leave_the_queue_to_requests},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("vt serve choices", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
