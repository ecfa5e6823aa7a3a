/* serve_http.h — vt serve's HTTP side over libmicrohttpd: routes, API key,
 * body limit, JSON answers, Server-Sent Events, one log line per request.
 *
 * microhttpd runs one thread per connection (how many, and for how long a
 * silent one is kept: serve_http.c's limits), so a handler may wait for its
 * job (and a stream's reader callback for the next tokens) without holding
 * up anyone else; while waiting it polls its socket, so a client that hangs
 * up has its job cancelled within ~50 ms. Nothing here calls vt_batch_*: the
 * engine thread (serve_engine.h) does. The listener comes up before the
 * model has loaded: /health answers 503 until vt_server_set_engine. */
#ifndef VT_SERVE_HTTP_H
#define VT_SERVE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve_engine.h"
#include "serve_metrics.h"
#include "serve_request.h"
#include "tool_calls.h"

/* A chat request -> the prompt text (control tokens as text, tokenized with
 * parse_special); *add_bos: whether the tokenizer adds the vocabulary's BOS
 * (false when the template writes its own). NULL with a message in err when
 * it cannot (*status: 400 for what the request asks that the template
 * refuses, 500 for a template that fails by itself). */
typedef char *(*vt_serve_render_fn)(void *user, const vt_serve_request *req, bool *add_bos, int *status, char *err,
                                    size_t err_size);

typedef struct vt_server_config {
    const char *host;          /* address or name to listen on */
    int port;                  /* 0 = any free port (vt_server_port says which) */
    const char *api_key;       /* NULL or "" = no key */
    const char *model_alias;   /* the name /v1/models lists and answers carry */
    const char *cors_origin;   /* NULL or "" = no CORS headers; "*" or one origin browsers' pages may call from */
    size_t body_limit;         /* bytes; larger bodies get 413 */
    vt_serve_defaults defaults;/* sampling fields a request leaves out */
    bool completion_special;   /* /v1/completions text prompts: control-token text becomes its token (--special) */
    vt_serve_render_fn render; /* NULL: the model has no chat template (chat answers 400) */
    void *render_user;
} vt_server_config;

typedef struct vt_server vt_server;

/* Listen (strings in cfg are copied). NULL with a message in err. */
vt_server *vt_server_start(const vt_server_config *cfg, vt_serve_metrics *metrics, char *err, size_t err_size);
int vt_server_port(const vt_server *s);
/* "host:port" as a URL writes it (an IPv6 address in brackets: [::1]:8080). */
void vt_server_host_port(const char *host, int port, char *buf, size_t size);
/* Chat messages are rendered with fn from now on (set before the engine). */
void vt_server_set_render(vt_server *s, vt_serve_render_fn fn, void *user);
/* The tool-call syntax chat answers are parsed for and forced calls are
 * written in (from the chat template; set before the engine). */
void vt_server_set_tool_format(vt_server *s, vt_tool_format f);
/* The model is loaded: serve requests through e (/health turns 200). */
void vt_server_set_engine(vt_server *s, vt_serve_engine *e);
/* Stop accepting connections (the listening socket closes); open ones go on. */
void vt_server_quiesce(vt_server *s);
/* Requests received and not yet answered to their last byte (a stream
 * whose job has ended may still be sending its last events). */
int vt_server_active_requests(vt_server *s);
/* Close everything (after the engine has finished every job). */
void vt_server_stop(vt_server *s);

#endif
