/* serve_options.h — vt serve's knobs, the [server] section of the ini file.
 *
 * The library knows nothing of them: the `vt` program declares this table
 * as the options' layer at start-up (vt_options_declare_layer), so the ini
 * file, `vt config` and vt serve's flags (server.host is --host, ...) read
 * and check them like any knob, and their values travel in vt_options. */
#ifndef VT_SERVER_SERVE_OPTIONS_H
#define VT_SERVER_SERVE_OPTIONS_H

#include <stdint.h>

#include "options.h"

typedef struct vt_serve_options {
    char host[256];                /* address or name to listen on; default "127.0.0.1" */
    int32_t port;                  /* 0..65535 (0 = any free port); default 8080 */
    char chat_template[16];        /* "" = the model's own; else a built-in family's name (chat_template.h) */
    char chat_template_file[4096]; /* "" = none; else a Jinja chat template rendered instead of the model's */
    char model_alias[256];         /* "" = the model file's name */
    int64_t body_limit;            /* bytes, 1024..1 GiB; default 4 MiB */
    double timeout;                /* seconds a request may run, 0..1e7 (0 = none); default 600 */
    double shutdown_grace;         /* seconds running requests get on SIGTERM, 0..1e7; default 30 */
    char cors_origin[256];         /* "" = no CORS (default); "*" or an origin whose pages may call the server */
} vt_serve_options;

/* The [server] layer's table (static). */
const vt_option_layer *vt_serve_option_layer(void);

/* Declare it as the options' layer: once, before any options are made. */
vt_status vt_serve_options_declare(vt_error *err);

/* o's [server] values; the layer must have been declared. */
const vt_serve_options *vt_serve_options_of(const vt_options *o);

/* The knob a flag of vt serve's own sets ("--port": "server.port"; its
 * llama-server names --parallel and -np: "runtime.max_seqs"), or NULL: vt
 * serve sets them from its command line, vt config shows what they resolve
 * to. */
const char *vt_serve_option_of_flag(const char *flag);

#endif
