/* serve_http.c — see serve_http.h. */
#include "serve_http.h"

#include <errno.h>
#include <jansson.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve_logprobs.h"
#include "serve_response.h"
#include "vt/vt.h"

/* How often a waiting handler looks at its socket for a hang-up. */
#define POLL_MS 50

/* Connection limits. A connection costs a thread only once it is open, so
 * these keep idle and slow clients from taking every thread and socket:
 * - a request's head (request line and headers) must keep arriving: HEAD_TIMEOUT
 *   seconds without a byte and the connection is closed (an idle keep-alive
 *   connection too, which costs the client nothing to reopen);
 * - once the head is in, the body and the answer may pause BODY_TIMEOUT
 *   seconds (a slow upload, a stream whose reader stalls);
 * - one client address holds at most PER_CLIENT_CONNECTIONS at once, more are
 *   refused at accept;
 * - at most MAX_CONNECTIONS in all (fewer when the process may not open that
 *   many sockets). */
#define HEAD_TIMEOUT 10u
#define BODY_TIMEOUT 120u
#define PER_CLIENT_CONNECTIONS 256u
#define MAX_CONNECTIONS 4096u
/* Descriptors kept for everything but connections (model files, backends, logs). */
#define RESERVED_FDS 64u
/* A body declared past --body-limit is read and thrown away before its 413
 * up to this many bytes (see the head's handling in on_request). */
#define DISCARD_LIMIT (UINT64_C(256) << 20)

struct vt_server {
    struct MHD_Daemon *daemon;
    vt_server_config cfg;
    char *host, *api_key, *alias;
    char *cors_origin; /* NULL: browsers' pages of other origins may not read answers */
    vt_serve_metrics *metrics;
    _Atomic(vt_serve_engine *) engine;
    atomic_uint_fast64_t next_id;
    atomic_int active; /* requests between their first byte and their log line */
    int64_t started; /* unix seconds, /v1/models' "created" */
    vt_tool_format tool_format;
    /* set by vt_server_quiesce: no new connection is accepted, and those
     * still open (keep-alive) are told to close with their next answer,
     * /health's a 503, so a prober or proxy reusing one moves on */
    atomic_bool draining;
};

/* One HTTP request, from its first byte to the log line. */
typedef struct request_ctx {
    vt_server *server;
    double t0;
    char *body;
    size_t n_body, body_cap;
    bool too_large;
    uint64_t n_discarded; /* bytes of a body over the limit read and thrown away */
    int status;
    int64_t prompt_tokens, completion_tokens;
    char error[640]; /* an error answer's param and message, for the log line */
    bool has_seed; /* a generate request: the seed it sampled with, for the log line */
    uint64_t seed;
    bool client_left;
    bool stream_delivered; /* a stream's last byte was handed over: a close after it is no leaving */
    bool framing_error; /* answered from the head, the body unread (its length unknowable, or no Host): then close */
    bool body_refused;  /* libmicrohttpd refused the body's framing; vt answered (on_library_message) */
    /* as the client sent them (escaped only for the log) */
    char method[16], path[256];
} request_ctx;

/* ---- plumbing ------------------------------------------------------------ */

/* Did the peer hang up? (Data waiting to be read is not a hang-up.) A
 * half-close counts: until an answer is written, TCP cannot tell it from a
 * closed socket (docs/SERVING.md). */
static bool peer_left(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info) return false;
    struct pollfd p = {.fd = info->connect_fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* With --cors-origin, every answer says which origin's pages may read it. */
static void add_cors(struct MHD_Response *r, const vt_server *s) {
    if (!s->cors_origin) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", s->cors_origin);
    if (strcmp(s->cors_origin, "*") != 0) MHD_add_response_header(r, "Vary", "Origin");
}

/* What every answer carries from the server's state: CORS, and during a
 * drain a close, so a keep-alive client moves to another replica once its
 * answer (a stream's too) is done. */
static void add_server_headers(struct MHD_Response *r, const vt_server *s) {
    add_cors(r, s);
    if (atomic_load(&s->draining) && !MHD_get_response_header(r, MHD_HTTP_HEADER_CONNECTION))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* The path of a request target: the target itself, or the path of its
 * absolute form ("http://host/v1/models", what a client talking to a proxy
 * sends), which a server must take as well (RFC 9112 3.2.2). */
static const char *target_path(const char *url) {
    const char *scheme_end = strstr(url, "://");
    if (!scheme_end || !(strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0)) return url;
    const char *path = strchr(scheme_end + 3, '/');
    return path ? path : "/";
}

static enum MHD_Result send_body(struct MHD_Connection *c, request_ctx *rq, int status, char *body,
                                 const char *content_type) {
    if (!body) {
        status = 500;
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (rq->framing_error) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    add_server_headers(r, rq->server);
    const char *path = target_path(rq->path);
    if (status == 405)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                strncmp(path, "/v1/models", 10) == 0 || strcmp(path, "/health") == 0 ||
                                        strcmp(path, "/metrics") == 0
                                    ? "GET, HEAD"
                                    : "POST");
    rq->status = status;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, request_ctx *rq, int status, char *body) {
    return send_body(c, rq, status, body, "application/json");
}

static enum MHD_Result send_error(struct MHD_Connection *c, request_ctx *rq, const vt_serve_error *err) {
    /* The log line says why, not only the status; a message may quote the
     * client's bytes, so control characters are replaced to keep it one line. */
    const size_t n = strlen(err->param);
    const char *why = err->message; /* a message that begins with its field's name: said once */
    if (n && strncmp(why, err->param, n) == 0 && why[n] == ':' && why[n + 1] == ' ') why += n + 2;
    if (err->param[0]) snprintf(rq->error, sizeof rq->error, " param=%s: %s", err->param, why);
    else snprintf(rq->error, sizeof rq->error, " %s", err->message);
    for (char *p = rq->error; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return send_json(c, rq, err->status, vt_serve_error_json(err));
}

/* An error answer whose message is fmt with one string argument (and param, or NULL). */
static enum MHD_Result fail(struct MHD_Connection *c, request_ctx *rq, int status, const char *type, const char *param,
                            const char *fmt, const char *arg) {
    vt_serve_error err;
    vt_serve_fail(&err, status, type, param, fmt, arg);
    return send_error(c, rq, &err);
}

/* A chat the template could not render: the field at fault is named when
 * the renderer's message begins with one it knows ("tools: ...",
 * "chat_template_kwargs: ..."), else it is the messages. */
static enum MHD_Result render_failed(struct MHD_Connection *c, request_ctx *rq, int status, const char *msg) {
    static const char *const fields[] = {"tools", "chat_template_kwargs"};
    const char *type = status == 400 ? "invalid_request_error" : "server_error";
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const size_t n = strlen(fields[i]);
        if (strncmp(msg, fields[i], n) == 0 && msg[n] == ':') return fail(c, rq, status, type, fields[i], "%s", msg);
    }
    /* "messages[3].tool_calls: ..." names its field: the param too */
    const char *colon = strchr(msg, ':');
    if (strncmp(msg, "messages[", 9) == 0 && colon && colon - msg < 96) {
        char param[96];
        snprintf(param, sizeof param, "%.*s", (int)(colon - msg), msg);
        return fail(c, rq, status, type, param, "%s", msg);
    }
    return fail(c, rq, status, type, "messages", "messages: %s", msg);
}

/* 503 while the model loads. */
static enum MHD_Result loading(struct MHD_Connection *c, request_ctx *rq) {
    vt_serve_error err;
    vt_serve_fail(&err, 503, "server_error", NULL, "the model is loading");
    err.code = "loading";
    return send_error(c, rq, &err);
}

static const char *finish_reason(const vt_serve_choice *c) {
    return c->finish == VT_FINISH_STOP || c->finish == VT_FINISH_STOP_STRING ? "stop" : "length";
}

/* ---- streaming ----------------------------------------------------------- */

/* What a stream has sent of one choice. */
typedef struct stream_choice {
    size_t sent_text, sent_logprobs;
    bool started, ended;
} stream_choice;

/* One streamed answer: what has been sent of each choice, and the SSE
 * bytes built but not yet handed to microhttpd. */
typedef struct stream_ctx {
    vt_server *server;
    vt_serve_engine *engine;
    vt_serve_job *job;
    request_ctx *rq;
    struct MHD_Connection *conn;
    char id[40];
    vt_serve_ids ids;
    bool finished;
    uint64_t seen_updates;
    stream_choice choice[VT_SERVE_MAX_CHOICES];
    char *pending;
    size_t n_pending, pending_pos;
} stream_ctx;

/* Append an event (taking it) to the pending bytes. */
static bool push_event(stream_ctx *st, char *event) {
    if (!event) return false;
    size_t n = strlen(event);
    char *p = realloc(st->pending, st->n_pending + n + 1);
    if (!p) {
        free(event);
        return false;
    }
    memcpy(p + st->n_pending, event, n + 1);
    st->pending = p;
    st->n_pending += n;
    free(event);
    return true;
}

/* Is this answer parsed for tool calls (a chat with tools, tool_choice not
 * "none", a template whose call syntax is known)? */
static bool parses_tools(const vt_server *s, const vt_serve_request *r) {
    return r->kind == VT_SERVE_CHAT && r->tool_choice != VT_TOOL_CHOICE_NONE && s->tool_format != VT_TOOL_FORMAT_NONE;
}

/* The calls in a finished choice's text (parsed->calls NULL when none, or
 * when the answer is not parsed). False when out of memory. */
static bool parse_tool_calls(const vt_server *s, const vt_serve_request *r, const char *text, size_t n,
                             vt_tool_parse *parsed) {
    *parsed = (vt_tool_parse){.content_len = n};
    if (!parses_tools(s, r)) return true;
    return vt_tool_calls_parse(s->tool_format, text, n, json_object_get(r->chat_input, "tools"),
                               r->parallel_tool_calls ? SIZE_MAX : 1, parsed);
}

/* The events of one parsed call of choice i, as OpenAI streams a call: its
 * id, type and name with empty arguments, then the arguments. */
static bool call_events(stream_ctx *st, int32_t i, size_t k, const json_t *call) {
    const json_t *fn = json_object_get(call, "function");
    json_t *head = json_pack("[{s:I, s:O, s:s, s:{s:O, s:s}}]", "index", (json_int_t)k, "id",
                             json_object_get(call, "id"), "type", "function", "function", "name",
                             json_object_get(fn, "name"), "arguments", "");
    vt_serve_choice_json cj = {.index = i, .text = "", .tool_calls = head};
    if (!head || !push_event(st, vt_serve_chunk_sse(&st->ids, &cj, NULL))) return false;
    json_t *args = json_pack("[{s:I, s:{s:O}}]", "index", (json_int_t)k, "function", "arguments",
                             json_object_get(fn, "arguments"));
    cj.tool_calls = args;
    return args && push_event(st, vt_serve_chunk_sse(&st->ids, &cj, NULL));
}

/* Push the chunks of choice i that are due (lock held): its new text and
 * its new tokens' logprobs, its role on the first, its finish reason on the
 * last (unless the job failed: the stream then ends with the error).
 * Chunks of different choices interleave as their tokens arrive, each
 * tagged with its index. When the answer is parsed for tool calls, the
 * text that may be the start of a call is held back until the choice ends:
 * then it is sent as calls if it parses as calls, else as content. */
static bool choice_events(stream_ctx *st, int32_t i) {
    vt_serve_job *job = st->job;
    const vt_serve_choice *c = &job->choices[i];
    stream_choice *sc = &st->choice[i];
    const bool ending = c->finish != VT_FINISH_NONE && !sc->ended && !job->error.status;
    const char *text = c->text ? c->text : "";
    vt_tool_parse parsed = {.content_len = c->n_text};
    size_t upto = c->n_text;
    if (ending) {
        if (!parse_tool_calls(st->server, &job->req, text, c->n_text, &parsed)) return false;
        upto = parsed.content_len;
    } else if (parses_tools(st->server, &job->req)) {
        upto = vt_tool_calls_content_prefix(st->server->tool_format, text, c->n_text);
    }
    if (upto < sc->sent_text) upto = sc->sent_text;
    const size_t n_text = upto - sc->sent_text, n_lp = c->logprobs.n_tokens - sc->sent_logprobs;
    bool ok = true;
    if (n_text || n_lp || !sc->started || (ending && !parsed.calls)) {
        vt_serve_choice_json cj = {
            .index = i,
            .text = text + sc->sent_text,
            .n_text = n_text,
            .finish_reason = ending && !parsed.calls ? finish_reason(c) : NULL,
            .first = !sc->started,
            .logprobs = job->req.logprobs && n_lp ? vt_serve_logprobs_json(&c->logprobs, job->req.kind,
                                                                           sc->sent_logprobs, c->logprobs.n_tokens)
                                                  : NULL,
        };
        ok = !(job->req.logprobs && n_lp && !cj.logprobs) && push_event(st, vt_serve_chunk_sse(&st->ids, &cj, NULL));
    }
    sc->sent_text = upto;
    sc->sent_logprobs = c->logprobs.n_tokens;
    sc->started = true;
    sc->ended |= ending;
    if (parsed.calls) {
        size_t k;
        const json_t *call;
        json_array_foreach(parsed.calls, k, call) ok = ok && call_events(st, i, k, call);
        vt_serve_choice_json last = {.index = i, .text = "", .finish_reason = "tool_calls"};
        ok = ok && push_event(st, vt_serve_chunk_sse(&st->ids, &last, NULL));
        json_decref(parsed.calls);
    }
    return ok;
}

/* Build the next events: wait for a change of the job. False when the
 * client left (or memory ran out). */
static bool next_events(stream_ctx *st) {
    vt_serve_job *job = st->job;
    vt_serve_engine *e = st->engine;
    vt_serve_engine_lock(e);
    while (job->n_updates == st->seen_updates && job->state == VT_JOB_RUNNING) {
        vt_serve_job_wait_locked(e, job, POLL_MS);
        if (job->n_updates == st->seen_updates && job->state == VT_JOB_RUNNING && peer_left(st->conn)) {
            vt_serve_engine_unlock(e);
            return false;
        }
    }
    st->seen_updates = job->n_updates;
    bool ok = true;
    for (int32_t i = 0; ok && i < job->n_choices; i++) ok = choice_events(st, i);
    bool done = job->state != VT_JOB_RUNNING;
    vt_serve_error error = job->error;
    vt_serve_usage usage = {job->n_prompt, job->n_generated, job->n_cached};
    vt_serve_engine_unlock(e);
    st->rq->prompt_tokens = usage.prompt_tokens;
    st->rq->completion_tokens = usage.completion_tokens;
    if (ok && done) {
        st->finished = true;
        /* the error is an event of the stream ("data: " and the error
         * object, as vLLM sends it and the openai SDKs raise it), its last
         * before [DONE]: no usage chunk after it */
        if (error.status)
            ok = push_event(st, strdup("data: ")) && push_event(st, vt_serve_error_json(&error)) &&
                 push_event(st, strdup("\n\n"));
        else if (ok && job->req.include_usage) ok = push_event(st, vt_serve_chunk_sse(&st->ids, NULL, &usage));
        if (ok) ok = push_event(st, strdup("data: [DONE]\n\n"));
    }
    return ok;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *st = cls;
    while (st->pending_pos == st->n_pending) {
        free(st->pending);
        st->pending = NULL;
        st->n_pending = st->pending_pos = 0;
        if (st->finished) {
            st->rq->stream_delivered = true;
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (!next_events(st)) {
            st->rq->client_left = true;
            /* the engine stops the job now, not when the response is
             * destroyed: libmicrohttpd logs the request's completion
             * ("client left") before that, and the forwards between would
             * compute tokens nobody reads */
            vt_serve_job_abandon(st->engine, st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = st->n_pending - st->pending_pos;
    if (n > max) n = max;
    memcpy(buf, st->pending + st->pending_pos, n);
    st->pending_pos += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream_ctx *st = cls;
    if (!st->finished) vt_serve_job_abandon(st->engine, st->job);
    vt_serve_job_release(st->engine, st->job);
    free(st->pending);
    free(st);
}

/* ---- endpoints ----------------------------------------------------------- */

/* Wait until the job leaves `state` (lock not held); false if the client left. */
static bool wait_while(struct MHD_Connection *c, vt_serve_engine *e, vt_serve_job *job, bool running_too) {
    vt_serve_engine_lock(e);
    while (job->state == VT_JOB_QUEUED || (running_too && job->state == VT_JOB_RUNNING)) {
        vt_serve_job_wait_locked(e, job, POLL_MS);
        if ((job->state == VT_JOB_QUEUED || (running_too && job->state == VT_JOB_RUNNING)) && peer_left(c)) {
            vt_serve_engine_unlock(e);
            return false;
        }
    }
    vt_serve_engine_unlock(e);
    return true;
}

static enum MHD_Result client_left(vt_serve_engine *e, vt_serve_job *job, request_ctx *rq) {
    /* the log line counts what was computed for it before it left */
    vt_serve_engine_lock(e);
    rq->prompt_tokens = job->n_prompt;
    rq->completion_tokens = job->n_generated;
    vt_serve_engine_unlock(e);
    vt_serve_job_abandon(e, job);
    vt_serve_job_release(e, job);
    rq->client_left = true;
    rq->status = 499; /* nginx's "client closed request", for the log line */
    return MHD_NO;
}

/* The grammar a chat request with tools is sampled under.
 *   - A forced call ("required", a named function): the family's call
 *     syntax whatever the model would have written; a named function is
 *     called once (as OpenAI does), "required" may call several when
 *     parallel. A response_format shapes an answer's content, and a forced
 *     call has none: it is for the answer that follows the tools' results
 *     (as OpenAI's API takes it).
 *   - "auto" with a constrained answer (response_format, json_schema,
 *     grammar): either that answer or calls, a union of the two grammars,
 *     so the model may still call a tool (agent frameworks send both). With
 *     no call syntax vt knows (format none) answers are content, so only
 *     the answer's grammar.
 * False with err (400 naming tool_choice for a forced call, tools under
 * "auto"; 500 when out of memory). */
static bool tool_grammar(const vt_server *s, vt_serve_request *req, vt_serve_error *err) {
    const bool forced = req->tool_choice == VT_TOOL_CHOICE_REQUIRED || req->tool_choice == VT_TOOL_CHOICE_NAMED;
    const bool either = req->tool_choice == VT_TOOL_CHOICE_AUTO && req->grammar && s->tool_format != VT_TOOL_FORMAT_NONE;
    if (!forced && !either) return true;
    char why[400] = "";
    char *calls = vt_tool_call_gbnf(s->tool_format, json_object_get(req->chat_input, "tools"),
                                    forced ? req->tool_choice_name : NULL,
                                    req->parallel_tool_calls && req->tool_choice != VT_TOOL_CHOICE_NAMED, why,
                                    sizeof why);
    char gwhy[512] = "";
    if (calls && vt_grammar_check(calls, gwhy, sizeof gwhy) != VT_OK)
        snprintf(why, sizeof why, "the grammar made from the tools is refused: %.300s", gwhy);
    char *grammar = calls;
    if (calls && !gwhy[0] && either) {
        /* refused when the two together pass a limit neither reaches alone */
        grammar = vt_grammar_either(req->grammar, "answer-", calls, "call-", gwhy, sizeof gwhy);
        if (!grammar) snprintf(why, sizeof why, "the answer's grammar and the tools' together: %.300s", gwhy);
        free(calls);
    }
    if (!grammar || gwhy[0]) {
        free(grammar);
        /* under "auto" the client may have sent no tool_choice: the tools
         * are what could not be made into a grammar */
        const char *param = forced ? "tool_choice" : "tools";
        if (strstr(why, "out of memory"))
            return vt_serve_fail(err, 500, "server_error", param, "%s: %s", param, why);
        /* a tool's own schema at fault names the tools, as the message does */
        if (strncmp(why, "tools[", 6) == 0) return vt_serve_fail(err, 400, "invalid_request_error", "tools", "%s", why);
        return vt_serve_fail(err, 400, "invalid_request_error", param, "%s: %s", param, why);
    }
    free(req->grammar);
    req->grammar = grammar;
    return true;
}

static enum MHD_Result generate(struct MHD_Connection *c, request_ctx *rq, vt_serve_engine *e, vt_serve_kind kind) {
    vt_server *s = rq->server;
    vt_serve_request req;
    vt_serve_error err;
    if (!vt_serve_parse_request(kind, rq->body ? rq->body : "", rq->n_body, &s->cfg.defaults, &req, &err))
        return send_error(c, rq, &err);
    char *prompt_text = NULL;
    bool add_bos = true;
    if (kind == VT_SERVE_CHAT && !tool_grammar(s, &req, &err)) {
        vt_serve_request_free(&req);
        return send_error(c, rq, &err);
    }
    if (kind == VT_SERVE_CHAT) {
        char msg[512] = "";
        int status = 400;
        if (!s->cfg.render) {
            vt_serve_request_free(&req);
            return fail(c, rq, 400, "invalid_request_error", "messages",
                        "%s: the model has no chat template; start vt serve with --chat-template NAME or "
                        "--chat-template-file PATH, or use /v1/completions",
                        "messages");
        }
        prompt_text = s->cfg.render(s->cfg.render_user, &req, &add_bos, &status, msg, sizeof msg);
        if (!prompt_text) {
            vt_serve_request_free(&req);
            return render_failed(c, rq, status, msg);
        }
    }
    vt_serve_job *job = vt_serve_job_new(&req);
    if (!job) {
        free(prompt_text);
        vt_serve_request_free(&req);
        return send_json(c, rq, 500, NULL);
    }
    job->prompt_text = prompt_text;
    job->add_bos = add_bos;
    job->parse_special = kind == VT_SERVE_CHAT || s->cfg.completion_special;
    if (!vt_serve_engine_submit(e, job, &err)) {
        vt_serve_job_release(e, job);
        return send_error(c, rq, &err);
    }
    rq->has_seed = true;
    rq->seed = job->req.seed; /* fixed by the submission */
    bool stream = job->req.stream;
    if (!wait_while(c, e, job, !stream)) return client_left(e, job, rq);
    vt_serve_engine_lock(e);
    bool failed = job->state == VT_JOB_FAILED || (job->state == VT_JOB_DONE && job->error.status);
    err = job->error;
    rq->prompt_tokens = job->n_prompt;
    rq->completion_tokens = job->n_generated;
    vt_serve_engine_unlock(e);
    if (failed) {
        vt_serve_job_release(e, job);
        return send_error(c, rq, &err);
    }
    uint64_t n = atomic_fetch_add(&s->next_id, 1);
    char id[40];
    snprintf(id, sizeof id, "%s-%016llx", kind == VT_SERVE_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)n);
    vt_serve_ids ids = {kind, id, (int64_t)time(NULL), s->alias, stream && job->req.include_usage};
    if (!stream) {
        vt_serve_usage usage = {job->n_prompt, job->n_generated, job->n_cached};
        vt_serve_choice_json choices[VT_SERVE_MAX_CHOICES];
        bool ok = true;
        vt_serve_engine_lock(e); /* done: nothing changes now, but the fields are the lock's */
        for (int32_t i = 0; i < job->n_choices; i++) {
            const vt_serve_choice *ch = &job->choices[i];
            vt_tool_parse parsed;
            ok &= parse_tool_calls(s, &job->req, ch->text ? ch->text : "", ch->n_text, &parsed);
            choices[i] = (vt_serve_choice_json){
                .index = i,
                .text = ch->text ? ch->text : "",
                .n_text = parsed.content_len,
                .finish_reason = parsed.calls ? "tool_calls" : finish_reason(ch),
                .logprobs = job->req.logprobs
                                ? vt_serve_logprobs_json(&ch->logprobs, kind, 0, ch->logprobs.n_tokens)
                                : NULL,
                .tool_calls = parsed.calls,
                .null_content = parsed.calls && parsed.content_len == 0,
            };
            ok &= !job->req.logprobs || choices[i].logprobs;
        }
        vt_serve_engine_unlock(e);
        char *body = ok ? vt_serve_completion_json(&ids, choices, (size_t)job->n_choices, &usage) : NULL;
        if (!ok)
            for (int32_t i = 0; i < job->n_choices; i++) {
                json_decref(choices[i].logprobs);
                json_decref(choices[i].tool_calls);
            }
        vt_serve_job_release(e, job);
        return send_json(c, rq, 200, body);
    }
    stream_ctx *st = calloc(1, sizeof *st);
    if (!st) {
        vt_serve_job_abandon(e, job);
        vt_serve_job_release(e, job);
        return send_json(c, rq, 500, NULL);
    }
    *st = (stream_ctx){.server = s, .engine = e, .job = job, .rq = rq, .conn = c, .ids = ids, .seen_updates = UINT64_MAX};
    memcpy(st->id, id, sizeof id);
    st->ids.id = st->id;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        return send_json(c, rq, 500, NULL);
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    add_server_headers(r, s);
    rq->status = 200;
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static int32_t piece_of(const void *engine, int32_t id, char *buf, size_t cap) {
    return vt_serve_engine_token_text(engine, id, buf, cap);
}

static enum MHD_Result tokens(struct MHD_Connection *c, request_ctx *rq, vt_serve_engine *e, vt_serve_kind kind) {
    vt_serve_request req;
    vt_serve_error err;
    if (!vt_serve_parse_request(kind, rq->body ? rq->body : "", rq->n_body, NULL, &req, &err))
        return send_error(c, rq, &err);
    vt_serve_job *job = vt_serve_job_new(&req);
    if (!job) {
        vt_serve_request_free(&req);
        return send_json(c, rq, 500, NULL);
    }
    if (!vt_serve_engine_submit(e, job, &err)) {
        vt_serve_job_release(e, job);
        return send_error(c, rq, &err);
    }
    if (!wait_while(c, e, job, true)) return client_left(e, job, rq);
    enum MHD_Result ret;
    if (job->state == VT_JOB_FAILED) ret = send_error(c, rq, &job->error);
    else if (kind == VT_SERVE_TOKENIZE && job->req.with_pieces)
        ret = send_json(c, rq, 200, vt_serve_token_pieces_json(job->ids, job->n_ids, piece_of, e));
    else if (kind == VT_SERVE_TOKENIZE) ret = send_json(c, rq, 200, vt_serve_tokens_json(job->ids, job->n_ids));
    else ret = send_json(c, rq, 200, vt_serve_content_json(job->text, job->n_text));
    vt_serve_job_release(e, job);
    return ret;
}

/* POST /apply-template (llama-server's): a chat request in, the prompt its
 * template renders out, {"prompt": "..."}; nothing is generated. */
static enum MHD_Result apply_template(struct MHD_Connection *c, request_ctx *rq) {
    vt_server *s = rq->server;
    vt_serve_request req;
    vt_serve_error err;
    if (!vt_serve_parse_request(VT_SERVE_CHAT, rq->body ? rq->body : "", rq->n_body, &s->cfg.defaults, &req, &err))
        return send_error(c, rq, &err);
    if (!s->cfg.render) {
        vt_serve_request_free(&req);
        return fail(c, rq, 400, "invalid_request_error", "messages", "%s",
                    "messages: the model has no chat template; start vt serve with --chat-template NAME or "
                    "--chat-template-file PATH");
    }
    char msg[512] = "";
    int status = 400;
    bool add_bos = true;
    char *text = s->cfg.render(s->cfg.render_user, &req, &add_bos, &status, msg, sizeof msg);
    vt_serve_request_free(&req);
    if (!text) return render_failed(c, rq, status, msg);
    /* as llama-server's: the rendering, without the BOS a built-in family
     * leaves to the tokenizer, so that sent to /v1/completions (which adds
     * the vocabulary's BOS) it is the prompt the chat request has */
    json_t *body = json_pack("{s:s}", "prompt", text);
    free(text);
    char *out = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    return send_json(c, rq, out ? 200 : 500, out);
}

/* "Authorization: Bearer KEY" when a key is set; the scheme's name is
 * case-insensitive (RFC 7235), the key is not. */
static bool authorized(struct MHD_Connection *c, const vt_server *s) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
    const char *given = h + 7;
    size_t n = strlen(given);
    while (n > 0 && (given[n - 1] == ' ' || given[n - 1] == '\t')) n--; /* whitespace ending a value is not its own */
    /* compared in a time that depends on the lengths alone, not on how
     * many of the key's first bytes a guess got right */
    const size_t key_len = strlen(s->api_key);
    unsigned char diff = n != key_len;
    for (size_t i = 0; i < key_len; i++) diff |= (unsigned char)(s->api_key[i] ^ (i < n ? given[i] : 0));
    return diff == 0;
}

/* A header list as a preflight may name it: header names (RFC 9110 tokens
 * as browsers send them: letters, digits, '-', '_') separated by commas and
 * spaces, nothing else, so echoing it writes no other header. */
static bool header_list_ok(const char *s) {
    size_t n = 0;
    for (; s[n]; n++) {
        const unsigned char ch = (unsigned char)s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_' || ch == ',' || ch == ' '))
            return false;
    }
    return n > 0 && n <= 1024;
}

/* A browser's preflight before a cross-origin request (CORS): the method
 * the path takes and the headers the page's requests will carry are
 * allowed, for ten minutes; no key is asked (a preflight carries none). The
 * headers are the ones the preflight names: clients such as the openai SDK
 * send their own (x-stainless-...) beside the key and the JSON body's type. */
static enum MHD_Result cors_preflight(struct MHD_Connection *c, request_ctx *rq, const char *path_method) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    add_server_headers(r, rq->server);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", path_method);
    const char *asked = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            asked && header_list_ok(asked) ? asked : "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    rq->status = 204;
    enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ret;
}

/* a path ending in '/' names every path below it: /v1/models/{id} */
static const struct {
    const char *path, *method;
} routes[] = {{"/health", "GET"},           {"/metrics", "GET"},       {"/v1/models", "GET"},
              {"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"}, {"/tokenize", "POST"},
              {"/detokenize", "POST"},          {"/v1/models/", "GET"}, {"/apply-template", "POST"}};
enum {
    ROUTE_HEALTH,
    ROUTE_METRICS,
    ROUTE_MODELS,
    ROUTE_CHAT,
    ROUTE_COMPLETIONS,
    ROUTE_TOKENIZE,
    ROUTE_DETOKENIZE,
    ROUTE_MODEL,
    ROUTE_APPLY_TEMPLATE
}; /* routes[]'s order */

static int find_route(const char *url) {
    int found = -1;
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        const size_t n = strlen(routes[i].path);
        if (routes[i].path[n - 1] == '/' ? strncmp(url, routes[i].path, n) == 0 : strcmp(url, routes[i].path) == 0)
            found = (int)i;
    }
    return found;
}

/* Sets *cls to the first Content-Encoding value that names a coding. */
static enum MHD_Result find_coding(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    if (!key || strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) != 0 || !value) return MHD_YES;
    while (*value == ' ' || *value == '\t') value++;
    if (*value == '\0' || strcasecmp(value, "identity") == 0) return MHD_YES;
    *(const char **)cls = value;
    return MHD_NO;
}

/* The answer a request gets whatever its body: no such path (404), a
 * method the path does not take (405), a browser page's POST from an origin
 * not allowed (403), a missing or wrong API key (401), a body in a coding
 * vt does not read (415); a CORS preflight's answer.
 * *answered false when the request goes on to its route. */
static enum MHD_Result refuse_by_head(struct MHD_Connection *c, request_ctx *rq, const char *url, const char *method,
                                      int found, bool *answered) {
    vt_server *s = rq->server;
    *answered = true;
    if (found < 0) return fail(c, rq, 404, "not_found_error", NULL, "no such endpoint: %s", url);
    if (strcmp(method, "OPTIONS") == 0 && s->cors_origin)
        return cors_preflight(c, rq, strcmp(routes[found].method, "GET") == 0 ? "GET, HEAD" : routes[found].method);
    /* HEAD is GET without the body (RFC 9110; load balancers probe /health
     * so): libmicrohttpd leaves the body out of a HEAD's answer itself */
    const bool head_of_get = strcmp(method, "HEAD") == 0 && strcmp(routes[found].method, "GET") == 0;
    if (strcmp(method, routes[found].method) != 0 && !head_of_get)
        return fail(c, rq, 405, "invalid_request_error", NULL,
                    strcmp(method, "OPTIONS") == 0
                        ? "%s: method not allowed (a browser's CORS preflight: start vt serve with --cors-origin)"
                        : "%s: method not allowed",
                    url);
    /* A browser page of another origin (a browser names it in Origin) may
     * POST a "simple" request (text/plain, a form) with no preflight: it
     * cannot read the answer, but a server without a key would compute it.
     * So a POST from an origin --cors-origin does not allow is refused
     * before anything runs. Clients that are not browsers send no Origin. A
     * page served through the same proxy as the API (a web UI) is the
     * proxy's own host, which the proxy names in X-Forwarded-Host; a page
     * cannot send that header itself without a preflight. The Host header
     * is no proof: a page whose name an attacker points at this machine
     * (DNS rebinding) sends its own name in both. */
    if (strcmp(routes[found].method, "POST") == 0) {
        const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        const char *proxied = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Forwarded-Host");
        const char *authority = origin ? strstr(origin, "://") : NULL;
        const bool via_proxy = authority && proxied && strcasecmp(authority + 3, proxied) == 0;
        if (origin && !via_proxy &&
            !(s->cors_origin && (strcmp(s->cors_origin, "*") == 0 || strcmp(s->cors_origin, origin) == 0))) {
            char allowed[320];
            snprintf(allowed, sizeof allowed, "%.200s", s->cors_origin ? s->cors_origin : "");
            vt_serve_error err;
            vt_serve_fail(&err, 403, "permission_error", NULL,
                          s->cors_origin ? "a page of origin '%.200s' may not use this server from a browser "
                                           "(--cors-origin allows pages of %s only)"
                                         : "a page of origin '%.200s' may not use this server from a browser "
                                           "(start vt serve with --cors-origin to allow it)%s",
                          origin, allowed);
            return send_error(c, rq, &err);
        }
    }
    if (found != ROUTE_HEALTH && found != ROUTE_METRICS && !authorized(c, s)) {
        vt_serve_error err;
        vt_serve_fail(&err, 401, "authentication_error", NULL, "%s", "invalid or missing API key");
        err.code = "invalid_api_key"; /* OpenAI's code: clients branch on it */
        return send_error(c, rq, &err);
    }
    /* a compressed body would be read as JSON and refused for its first
     * byte; say what is wrong instead (RFC 9110 15.5.16). Every
     * Content-Encoding line counts; an empty one is no coding. */
    if (strcmp(routes[found].method, "POST") == 0) {
        const char *coding = NULL;
        MHD_get_connection_values(c, MHD_HEADER_KIND, find_coding, &coding);
        if (coding)
            return fail(c, rq, 415, "invalid_request_error", NULL,
                        "Content-Encoding '%s' is not read: send the body uncompressed", coding);
    }
    *answered = false;
    return MHD_YES;
}

static enum MHD_Result route(struct MHD_Connection *c, request_ctx *rq, const char *target, const char *method) {
    vt_server *s = rq->server;
    const char *url = target_path(target);
    const int found = find_route(url);
    bool answered = false;
    const enum MHD_Result refused = refuse_by_head(c, rq, url, method, found, &answered);
    if (answered) return refused;
    vt_serve_engine *e = atomic_load(&s->engine);
    if (found == ROUTE_HEALTH && atomic_load(&s->draining)) {
        vt_serve_error err;
        vt_serve_fail(&err, 503, "server_error", NULL, "the server is shutting down");
        err.code = "shutting_down";
        return send_error(c, rq, &err);
    }
    if (found == ROUTE_HEALTH)
        return e ? send_json(c, rq, 200, strdup("{\"status\":\"ok\"}"))
                 : loading(c, rq);
    if (found == ROUTE_METRICS)
        return send_body(c, rq, 200, vt_serve_metrics_text(s->metrics), "text/plain; version=0.0.4");
    if (!e) return loading(c, rq);
    if (found == ROUTE_MODELS) return send_json(c, rq, 200, vt_serve_models_json(s->alias, s->started));
    if (found == ROUTE_MODEL) {
        const char *id = url + strlen(routes[ROUTE_MODEL].path);
        if (strcmp(id, s->alias) == 0) return send_json(c, rq, 200, vt_serve_model_json(s->alias, s->started));
        vt_serve_error err;
        vt_serve_fail(&err, 404, "invalid_request_error", "model", "the model '%s' does not exist (this server serves '%s')",
                      id, s->alias);
        err.code = "model_not_found";
        return send_error(c, rq, &err);
    }
    if (found == ROUTE_APPLY_TEMPLATE) return apply_template(c, rq);
    if (found == ROUTE_CHAT) return generate(c, rq, e, VT_SERVE_CHAT);
    if (found == ROUTE_COMPLETIONS) return generate(c, rq, e, VT_SERVE_COMPLETION);
    return tokens(c, rq, e, found == ROUTE_TOKENIZE ? VT_SERVE_TOKENIZE : VT_SERVE_DETOKENIZE);
}

static enum MHD_Result too_large(struct MHD_Connection *c, request_ctx *rq) {
    vt_serve_error err;
    vt_serve_fail(&err, 413, "invalid_request_error", NULL, "the body is larger than the limit of %zu bytes",
                  rq->server->cfg.body_limit);
    return send_error(c, rq, &err);
}

/* ---- heads libmicrohttpd refuses itself ---------------------------------- */

/* libmicrohttpd answers some heads itself, before any handler of vt's runs
 * (a Content-Length that is not a number, or past 64 bits), and 0.9.75
 * writes that answer's status line and headers twice: two answers on one
 * connection. It logs the refusal first ("Error processing request (HTTP
 * response code is N ..."), in the connection's own thread and before any
 * byte of its answer is out, so vt answers there — one JSON error, as every
 * other refusal — and shuts the socket, which leaves the library's copy
 * nowhere to go. Should a library version word that message differently,
 * nothing happens here and the library's answer stands. The connection is
 * the one whose request line came last in this thread (one thread per
 * connection); vt's handler taking the request ends the window. */
static _Thread_local struct {
    struct MHD_Connection *conn;
    char path[256];
} head_being_read;

/* The same for a body being read, which libmicrohttpd also refuses itself
 * when its chunked framing is malformed (a chunk size that is not hex, or
 * past 64 bits, a chunk without its CRLF): vt answers in JSON there too, and
 * the request, whose handler had started, is logged and counted at the
 * status the client got, not as a 500 of a client that left. Open from the
 * head's end until the body is in. */
static _Thread_local struct {
    struct MHD_Connection *conn;
    request_ctx *rq;
} body_being_read;

static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)cls;
    head_being_read.conn = c;
    snprintf(head_being_read.path, sizeof head_being_read.path, "%s", uri ? uri : "");
    return NULL;
}

/* Send all of p (a few hundred bytes to a socket that has sent nothing for
 * this request yet: one send, or a few short waits at most). */
static void send_briefly(int fd, const char *p, size_t n) {
    for (int tries = 0; n > 0 && tries < 20; tries++) {
        ssize_t sent = send(fd, p, n, MSG_NOSIGNAL);
        if (sent > 0) {
            p += sent;
            n -= (size_t)sent;
        } else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd w = {.fd = fd, .events = POLLOUT};
            poll(&w, 1, POLL_MS);
        } else {
            return;
        }
    }
}

/* One JSON error with `status` on c's socket, then the socket shut (the
 * library's own answer, written after, goes nowhere); false if it could not
 * be written. */
static bool answer_refusal(struct MHD_Connection *c, unsigned status, const char *what) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const char *reason = MHD_get_reason_phrase_for(status);
    if (!info || status < 400 || status > 599 || !reason || !*reason) return false;
    vt_serve_error err;
    vt_serve_fail(&err, (int)status, "invalid_request_error", NULL, "%s (%s)", what, reason);
    char *body = vt_serve_error_json(&err);
    size_t n_body = body ? strlen(body) : 0;
    char *answer = body ? malloc(n_body + 256) : NULL;
    bool sent = false;
    if (answer) {
        int n = snprintf(answer, 256,
                         "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n\r\n",
                         status, reason, n_body);
        if (n > 0 && n < 256) {
            memcpy(answer + n, body, n_body);
            send_briefly(info->connect_fd, answer, (size_t)n + n_body);
            shutdown(info->connect_fd, SHUT_RDWR);
            sent = true;
        }
    }
    free(answer);
    free(body);
    return sent;
}

static void on_library_message(void *cls, const char *fmt, va_list ap) {
    static const char refusal[] = "Error processing request (HTTP response code is %u";
    vt_server *s = cls;
    if (strncmp(fmt, refusal, sizeof refusal - 1) != 0) return;
    va_list args;
    va_copy(args, ap);
    unsigned status = va_arg(args, unsigned);
    va_end(args);
    if (head_being_read.conn) {
        struct MHD_Connection *c = head_being_read.conn;
        head_being_read.conn = NULL;
        if (!answer_refusal(c, status, "the request's head was refused: check Content-Length and the header lines"))
            return;
        vt_serve_metrics_request(s->metrics, (int)status);
        char path[4 * sizeof head_being_read.path];
        vt_serve_log_escape(head_being_read.path, path, sizeof path);
        fprintf(stderr, "vt serve: %s %u (refused while reading the head)\n", path, status);
    } else if (body_being_read.conn) {
        request_ctx *rq = body_being_read.rq;
        struct MHD_Connection *c = body_being_read.conn;
        body_being_read.conn = NULL;
        /* on_completed logs and counts it, at this status */
        const char *what = status == 413 ? "a chunk size of the request's body passes what a body may hold"
                                         : "the request's body was refused as its chunked framing was read";
        if (!answer_refusal(c, status, what)) return;
        rq->status = (int)status;
        rq->body_refused = true;
        snprintf(rq->error, sizeof rq->error, " %s", what);
    }
}

/* The headers that say where the body ends, as the client sent them, and
 * the first header line refused (every line is looked at on the way). */
#define MAX_FRAMING_HEADERS 8
typedef struct framing_headers {
    vt_serve_header h[MAX_FRAMING_HEADERS];
    size_t n;
    bool overflow;
    int hosts; /* Host headers seen */
    char bad_header[240]; /* why a header line is refused, naming it as sent (cut to fit) */
} framing_headers;

/* Whether name begins with a header name that says where the body ends but
 * runs on past it ("Content-Length47"). libmicrohttpd glues a folded line
 * (obs-fold: a line starting with a space) onto the header *name* before it,
 * so "Content-Length:\r\n 47" reaches us as a header "Content-Length47"
 * and no Content-Length, where a proxy that unfolds reads a length of 47:
 * the body would be the next request to one of the two. RFC 9112 5.2 lets
 * a server refuse obs-fold with a 400. */
static bool framing_name_run_on(const char *name, size_t size) {
    static const char *const framing[] = {MHD_HTTP_HEADER_CONTENT_LENGTH, MHD_HTTP_HEADER_TRANSFER_ENCODING};
    for (size_t i = 0; i < 2; i++) {
        const size_t n = strlen(framing[i]);
        if (size > n && strncasecmp(name, framing[i], n) == 0) return true;
    }
    return false;
}

/* RFC 9110 5.6.2: a field name is a token, these characters and no other */
static bool token_char(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The header name (as the client sent it, control characters escaped) into
 * out [size]. */
static void printable_name(const char *key, size_t key_size, char *out, size_t size) {
    size_t n = 0;
    for (size_t i = 0; i < key_size && n + 5 < size; i++) {
        const unsigned char c = (unsigned char)key[i];
        n += (size_t)snprintf(out + n, size - n, c < 0x20 || c == 0x7f ? "\\x%02x" : "%c", c);
    }
    out[n] = '\0';
}

static enum MHD_Result collect_framing(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                       const char *value, size_t value_size) {
    (void)kind;
    framing_headers *f = cls;
    /* "Content-Length : 5" is no Content-Length to libmicrohttpd, but is
     * one to a proxy that trims the name: the two would end the body in
     * different places (RFC 9112 5.1: refuse whitespace before the colon).
     * Any other character a name may not hold is refused alike, and so are
     * control characters in a value (RFC 9110 5.5: a NUL, CR or LF in a
     * value is rejected), which proxies and logs would read differently. */
    if (key && !f->bad_header[0]) {
        char name[64];
        printable_name(key, key_size, name, sizeof name);
        bool name_ok = key_size > 0;
        for (size_t i = 0; i < key_size && name_ok; i++) name_ok = token_char((unsigned char)key[i]);
        if (!name_ok) {
            snprintf(f->bad_header, sizeof f->bad_header,
                     strpbrk(name, " \t") ? "the header name '%s' holds whitespace (none may come before the colon)"
                                          : "the header name '%s' holds a character a header name may not hold",
                     name);
            return MHD_NO;
        }
        if (framing_name_run_on(key, key_size)) {
            snprintf(f->bad_header, sizeof f->bad_header,
                     "the header name '%s' runs on past Content-Length or Transfer-Encoding (a folded line, "
                     "RFC 9112 5.2?): where the body ends is in doubt",
                     name);
            return MHD_NO;
        }
        /* two Hosts name two targets a proxy and vt could each pick from
         * (RFC 9112 3.2: a 400) */
        if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0 && ++f->hosts > 1) {
            snprintf(f->bad_header, sizeof f->bad_header, "the Host header is given twice (RFC 9112 3.2: once)");
            return MHD_NO;
        }
        for (size_t i = 0; value && i < value_size; i++) {
            const unsigned char c = (unsigned char)value[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f) {
                snprintf(f->bad_header, sizeof f->bad_header,
                         "the value of the header '%s' holds the control character 0x%02x", name, c);
                return MHD_NO;
            }
        }
    }
    if (!key || (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0 &&
                 strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) != 0))
        return MHD_YES;
    if (f->n == MAX_FRAMING_HEADERS) {
        f->overflow = true;
        return MHD_NO;
    }
    f->h[f->n++] = (vt_serve_header){key, value};
    return MHD_YES;
}

/* libmicrohttpd reads the first Content-Length and takes any
 * Transfer-Encoding for "read to the end": every one is looked at here,
 * and every header line's name and value (collect_framing). */
static bool framing_ok(struct MHD_Connection *c, vt_serve_error *err) {
    framing_headers f = {0};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, collect_framing, &f);
    if (f.bad_header[0]) return vt_serve_fail(err, 400, "invalid_request_error", NULL, "%s", f.bad_header);
    if (f.overflow)
        return vt_serve_fail(err, 400, "invalid_request_error", NULL, "more than %d Content-Length and "
                             "Transfer-Encoding headers", MAX_FRAMING_HEADERS);
    return vt_serve_check_framing(f.h, f.n, err);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    vt_server *s = cls;
    request_ctx *rq = *con_cls;
    if (!rq) {
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        rq->server = s;
        rq->t0 = vt_serve_now();
        head_being_read.conn = NULL; /* the head was read: vt answers from here */
        atomic_fetch_add(&s->active, 1);
        snprintf(rq->method, sizeof rq->method, "%s", method);
        snprintf(rq->path, sizeof rq->path, "%s", url);
        *con_cls = rq;
        vt_serve_error err;
        if (!framing_ok(c, &err)) {
            rq->framing_error = true;
            return send_error(c, rq, &err);
        }
        /* RFC 9112 3.2: an HTTP/1.1 request without Host is answered 400
         * (a later 1.x is read as 1.1, RFC 9110 2.5) */
        if (version && strncmp(version, "HTTP/1.", 7) == 0 && strcmp(version, MHD_HTTP_VERSION_1_0) != 0 &&
            !MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST)) {
            vt_serve_fail(&err, 400, "invalid_request_error", NULL,
                          "the Host header is missing (RFC 9112 3.2: every request of version 1.1 names its host)");
            rq->framing_error = true;
            return send_error(c, rq, &err);
        }
        /* The head is in: from here the body and the answer get the longer pause. */
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, BODY_TIMEOUT);
        /* A declared length over the limit is refused. A client that asked
         * to be told first (Expect: 100-continue) is told before it sends
         * the body, and so is one whose body would pass DISCARD_LIMIT (the
         * connection then closes under its upload). Any other is told after
         * its body was read and thrown away: clients such as the openai
         * SDKs write the whole body before they read an answer, and a
         * connection closed under their upload reads to them as a network
         * error, which they retry, instead of the 413. */
        const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long declared = len ? strtoull(len, NULL, 10) : 0;
        const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        const bool asks_first = expect && strcasecmp(expect, "100-continue") == 0;
        /* A client waiting to be told before it sends its body is told at
         * once what its head alone decides (404, 405, 401, 415): invited to
         * upload with a 100 it would send the body for nothing */
        if (asks_first) {
            bool answered = false;
            const enum MHD_Result refused =
                refuse_by_head(c, rq, target_path(url), method, find_route(target_path(url)), &answered);
            if (answered) return refused;
        }
        if (declared > s->cfg.body_limit) {
            rq->too_large = true;
            if (asks_first || declared > DISCARD_LIMIT) return too_large(c, rq);
        }
        body_being_read.conn = c;
        body_being_read.rq = rq;
        return MHD_YES;
    }
    if (*upload_size) {
        if (!rq->too_large && rq->n_body + *upload_size <= s->cfg.body_limit) {
            if (rq->n_body + *upload_size + 1 > rq->body_cap) {
                size_t cap = rq->body_cap ? rq->body_cap : 4096;
                while (cap < rq->n_body + *upload_size + 1) cap *= 2;
                char *b = realloc(rq->body, cap);
                if (!b) return MHD_NO;
                rq->body = b;
                rq->body_cap = cap;
            }
            memcpy(rq->body + rq->n_body, upload, *upload_size);
            rq->n_body += *upload_size;
            rq->body[rq->n_body] = '\0';
        } else {
            rq->too_large = true;
            /* a body of no declared length is thrown away up to the same
             * bound, then the connection is closed under it */
            rq->n_discarded += *upload_size;
            if (rq->n_discarded > DISCARD_LIMIT) return MHD_NO;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (body_being_read.rq == rq) body_being_read.conn = NULL; /* the body is in */
    if (rq->status) return MHD_YES; /* answered already (413 on the first call) */
    if (rq->too_large) return too_large(c, rq);
    return route(c, rq, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    vt_server *s = cls;
    request_ctx *rq = *con_cls;
    if (!rq) return;
    *con_cls = NULL;
    if (body_being_read.rq == rq) body_being_read.conn = NULL, body_being_read.rq = NULL;
    /* The next request on this connection starts with its head again. */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, HEAD_TIMEOUT);
    /* Ended before an answer was queued because the client stopped sending
     * (its upload cut short, 499, or stalled past BODY_TIMEOUT, 408): not a
     * server error. Unanswered otherwise (out of memory, shutdown) is 500. */
    bool timed_out = !rq->status && toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED;
    bool cut_short = !rq->status && (toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ||
                                     toe == MHD_REQUEST_TERMINATED_READ_ERROR);
    int status = rq->status ? rq->status : timed_out ? 408 : cut_short ? 499 : 500;
    bool left = !rq->body_refused && (rq->client_left || (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !timed_out));
    /* A stream's 200 went out with its first event; a client that hangs up
     * before the last one left all the same (not a server that is stopping:
     * its drain ended the stream). */
    if (left && status == 200 && !rq->stream_delivered && toe != MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN)
        status = 499;
    /* /health is a probe, asked every few seconds and 503 while the model
     * loads: counting it would make the request counters (and an alert on
     * their 503s) about the prober */
    if (strcmp(target_path(rq->path), "/health") != 0) vt_serve_metrics_request(s->metrics, status);
    char method[4 * sizeof rq->method], path[4 * sizeof rq->path];
    vt_serve_log_escape(rq->method, method, sizeof method);
    vt_serve_log_escape(rq->path, path, sizeof path);
    char seed[32] = "";
    if (rq->has_seed) snprintf(seed, sizeof seed, " seed=%" PRIu64, rq->seed);
    fprintf(stderr, "vt serve: %s %s %d prompt=%lld completion=%lld%s %.3fs%s%s\n", method, path, status,
            (long long)rq->prompt_tokens, (long long)rq->completion_tokens, seed, vt_serve_now() - rq->t0,
            left ? " (client left)" : timed_out ? " (client timed out)" : "", rq->error);
    free(rq->body);
    free(rq);
    atomic_fetch_sub(&s->active, 1);
}

int vt_server_active_requests(vt_server *s) { return atomic_load(&s->active); }

/* libmicrohttpd reports a failed start without its reason: bind a socket
 * to the same address the way it does (SO_REUSEADDR on) to learn whether the
 * port is taken or the address is not this machine's. 0: the bind works. */
static int bind_errno(const struct addrinfo *ai) {
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0) return errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int why = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    close(fd);
    return why;
}

/* MAX_CONNECTIONS, or as many as the descriptor limit allows once raised
 * to its hard ceiling (a soft limit of 1024 is common and would otherwise
 * make accept fail long before the budget is reached). */
static unsigned connection_budget(void) {
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024u - RESERVED_FDS;
    rlim_t want = MAX_CONNECTIONS + RESERVED_FDS;
    if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
        struct rlimit raised = lim;
        raised.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max > want ? want : lim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
    }
    if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want) return MAX_CONNECTIONS;
    return lim.rlim_cur > 2 * RESERVED_FDS ? (unsigned)(lim.rlim_cur - RESERVED_FDS) : RESERVED_FDS;
}

vt_server *vt_server_start(const vt_server_config *cfg, vt_serve_metrics *metrics, char *err, size_t err_size) {
    vt_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->metrics = metrics;
    s->host = strdup(cfg->host ? cfg->host : "127.0.0.1");
    s->alias = strdup(cfg->model_alias ? cfg->model_alias : "model");
    s->api_key = cfg->api_key && cfg->api_key[0] ? strdup(cfg->api_key) : NULL;
    s->cors_origin = cfg->cors_origin && cfg->cors_origin[0] ? strdup(cfg->cors_origin) : NULL;
    s->started = (int64_t)time(NULL);
    atomic_init(&s->engine, NULL);
    atomic_init(&s->active, 0);
    /* Ids differ from one run to the next. */
    atomic_init(&s->next_id, ((uint64_t)time(NULL) << 20) ^ (uint64_t)(uintptr_t)s);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    int rc = s->host && s->alias ? getaddrinfo(s->host, port, &hints, &ai) : EAI_MEMORY;
    if (rc != 0) {
        snprintf(err, err_size, "--host %s: %s", cfg->host ? cfg->host : "?", gai_strerror(rc));
        vt_server_stop(s);
        return NULL;
    }
    /* poll(), not select(): a connection's descriptor may be past FD_SETSIZE. */
    /* ERROR_LOG: the library's messages reach on_library_message (which
     * keeps only the refusals it answers; the rest stay unprinted). */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
                                 on_library_message, s, MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s,
                                 MHD_OPTION_SOCK_ADDR,
                                 ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_CONNECTION_TIMEOUT, HEAD_TIMEOUT, MHD_OPTION_CONNECTION_LIMIT,
                                 connection_budget(), MHD_OPTION_PER_IP_CONNECTION_LIMIT, PER_CLIENT_CONNECTIONS,
                                 MHD_OPTION_END);
    if (!s->daemon) {
        int why = bind_errno(ai);
        char where[300];
        vt_server_host_port(s->host, cfg->port, where, sizeof where);
        snprintf(err, err_size, "cannot listen on %s: %s%s", where,
                 why == EADDRINUSE      ? "the port is in use (bind: EADDRINUSE); choose another with --port"
                 : why == EADDRNOTAVAIL ? "not an address of this machine (bind: EADDRNOTAVAIL); check --host"
                 : why == EACCES        ? "permission denied (bind: EACCES): ports below 1024 need privileges"
                 : why                  ? "bind: "
                                        : "the HTTP server did not start (a bind to the address succeeds)",
                 why && why != EADDRINUSE && why != EADDRNOTAVAIL && why != EACCES ? strerror(why) : "");
        freeaddrinfo(ai);
        vt_server_stop(s);
        return NULL;
    }
    freeaddrinfo(ai);
    return s;
}

void vt_server_host_port(const char *host, int port, char *buf, size_t size) {
    const bool ipv6 = strchr(host, ':') != NULL;
    snprintf(buf, size, "%s%s%s:%d", ipv6 ? "[" : "", host, ipv6 ? "]" : "", port);
}

int vt_server_port(const vt_server *s) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : s->cfg.port;
}

void vt_server_set_tool_format(vt_server *s, vt_tool_format f) { s->tool_format = f; }

void vt_server_set_render(vt_server *s, vt_serve_render_fn fn, void *user) {
    s->cfg.render = fn;
    s->cfg.render_user = user;
}

void vt_server_set_engine(vt_server *s, vt_serve_engine *e) { atomic_store(&s->engine, e); }

void vt_server_quiesce(vt_server *s) {
    atomic_store(&s->draining, true);
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

void vt_server_stop(vt_server *s) {
    if (!s) return;
    if (s->daemon) MHD_stop_daemon(s->daemon);
    free(s->host);
    free(s->alias);
    free(s->api_key);
    free(s->cors_origin);
    free(s);
}
