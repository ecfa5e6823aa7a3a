/* serve_options.c — see serve_options.h. */
#include "serve_options.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "chat_template.h"

_Static_assert(sizeof(vt_serve_options) <= VT_OPTIONS_LAYER_BYTES, "[server] values fit the options' layer room");

enum { HOST, PORT, CHAT_TEMPLATE, CHAT_TEMPLATE_FILE, MODEL_ALIAS, BODY_LIMIT, TIMEOUT, SHUTDOWN_GRACE, CORS_ORIGIN, N_KEYS };

static const char *const names[N_KEYS] = {
    [HOST] = "host",
    [PORT] = "port",
    [CHAT_TEMPLATE] = "chat_template",
    [CHAT_TEMPLATE_FILE] = "chat_template_file",
    [MODEL_ALIAS] = "model_alias",
    [BODY_LIMIT] = "body_limit",
    [TIMEOUT] = "timeout",
    [SHUTDOWN_GRACE] = "shutdown_grace",
    [CORS_ORIGIN] = "cors_origin",
};

/* chat_template's: the built-in families' names, from chat_template.c. */
static char template_names[128];

static const char *accepted[N_KEYS] = {
    [HOST] = "addresses or host names of 1 to 255 characters from A-Z, a-z, 0-9, '.', ':', '-', '_' and '%'",
    [PORT] = "integers 0..65535 (0 = any free port)",
    [CHAT_TEMPLATE] = template_names,
    [CHAT_TEMPLATE_FILE] = "paths of up to 4095 bytes to a Jinja chat template, or empty for none",
    [MODEL_ALIAS] = "names of up to 255 printable characters, or empty for the model file's name",
    [BODY_LIMIT] = "integers 1024..1073741824 (bytes)",
    [TIMEOUT] = "seconds 0..10000000 (0 = no limit)",
    [SHUTDOWN_GRACE] = "seconds 0..10000000",
    [CORS_ORIGIN] = "an origin (http:// or https://, a host, perhaps :port; up to 255 characters), * for any, or empty "
                    "for none",
};

static void defaults(void *values) {
    vt_serve_options *s = values;
    memset(s, 0, sizeof *s);
    snprintf(s->host, sizeof s->host, "127.0.0.1");
    s->port = 8080;
    s->body_limit = INT64_C(4) << 20;
    s->timeout = 600;
    s->shutdown_grace = 30;
}

/* Every character of s is in `allowed` besides letters and digits (or
 * printable ASCII when NULL); length lo..hi. */
static bool is_text_of(const char *s, size_t lo, size_t hi, const char *allowed) {
    size_t n = strlen(s);
    if (n < lo || n > hi) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool ok = allowed ? ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                             (c && strchr(allowed, c)))
                          : (c >= 0x20 && c < 0x7F);
        if (!ok) return false;
    }
    return true;
}

static bool store(void *values, int k, const char *value) {
    vt_serve_options *s = values;
    int64_t i64;
    double d;
    vt_chat_family family;
    switch (k) {
    case HOST:
        if (!is_text_of(value, 1, 255, ".:-_%")) return false;
        snprintf(s->host, sizeof s->host, "%s", value);
        return true;
    case PORT:
        if (!vt_options_parse_int(value, 0, 65535, &i64)) return false;
        s->port = (int32_t)i64;
        return true;
    case CHAT_TEMPLATE:
        if (value[0] && !vt_chat_family_by_name(value, &family, NULL, 0)) return false;
        snprintf(s->chat_template, sizeof s->chat_template, "%s", value);
        return true;
    case CHAT_TEMPLATE_FILE:
        if (strlen(value) >= sizeof s->chat_template_file) return false;
        snprintf(s->chat_template_file, sizeof s->chat_template_file, "%s", value);
        return true;
    case MODEL_ALIAS:
        if (!is_text_of(value, 0, 255, NULL)) return false;
        snprintf(s->model_alias, sizeof s->model_alias, "%s", value);
        return true;
    case BODY_LIMIT:
        if (!vt_options_parse_int(value, 1024, INT64_C(1) << 30, &i64)) return false;
        s->body_limit = i64;
        return true;
    case TIMEOUT:
    case SHUTDOWN_GRACE:
        if (!vt_options_parse_number(value, &d) || d < 0 || d > 1e7) return false;
        *(k == TIMEOUT ? &s->timeout : &s->shutdown_grace) = d;
        return true;
    case CORS_ORIGIN: /* what a browser sends as Origin: scheme://host[:port], no path */
        if (value[0] && strcmp(value, "*") != 0 &&
            !((strncmp(value, "http://", 7) == 0 || strncmp(value, "https://", 8) == 0) &&
              is_text_of(value, 8, 255, ":/.-_[]") && !strchr(strchr(value, ':') + 3, '/')))
            return false;
        snprintf(s->cors_origin, sizeof s->cors_origin, "%s", value);
        return true;
    default: return false;
    }
}

static void show(const void *values, int k, char *buf, size_t size) {
    const vt_serve_options *s = values;
    switch (k) {
    case HOST: snprintf(buf, size, "%s", s->host); break;
    case PORT: snprintf(buf, size, "%" PRId32, s->port); break;
    case CHAT_TEMPLATE: snprintf(buf, size, "%s", s->chat_template); break;
    case CHAT_TEMPLATE_FILE: snprintf(buf, size, "%s", s->chat_template_file); break;
    case MODEL_ALIAS: snprintf(buf, size, "%s", s->model_alias); break;
    case BODY_LIMIT: snprintf(buf, size, "%" PRId64, s->body_limit); break;
    case TIMEOUT: vt_options_show_number(buf, size, s->timeout); break;
    case SHUTDOWN_GRACE: vt_options_show_number(buf, size, s->shutdown_grace); break;
    case CORS_ORIGIN: snprintf(buf, size, "%s", s->cors_origin); break;
    default: snprintf(buf, size, "?"); break;
    }
}

static const vt_option_layer serve_layer = {
    .section = "server",
    .names = names,
    .accepted = accepted,
    .n_keys = N_KEYS,
    .values_size = sizeof(vt_serve_options),
    .defaults = defaults,
    .store = store,
    .show = show,
};

const vt_option_layer *vt_serve_option_layer(void) {
    if (!template_names[0]) { /* "chatml, llama2, llama3, mistral, or empty for the model's own" */
        size_t used = 0;
        for (int f = 0; f < VT_CHAT_N_FAMILIES; f++)
            used += (size_t)snprintf(template_names + used, sizeof template_names - used, "%s, ",
                                     vt_chat_family_name((vt_chat_family)f));
        snprintf(template_names + used, sizeof template_names - used, "or empty for the model's own");
    }
    return &serve_layer;
}

vt_status vt_serve_options_declare(vt_error *err) { return vt_options_declare_layer(vt_serve_option_layer(), err); }

const vt_serve_options *vt_serve_options_of(const vt_options *o) {
    const vt_serve_options *s = vt_options_layer_values_of(o);
    assert(s && "vt_serve_options_of before vt_serve_options_declare");
    return s;
}

const char *vt_serve_option_of_flag(const char *flag) {
    static const struct {
        const char *flag, *key;
    } flags[] = {
        {"--host", "server.host"},
        {"--port", "server.port"},
        {"--chat-template", "server.chat_template"},
        {"--chat-template-file", "server.chat_template_file"},
        {"--model-alias", "server.model_alias"},
        {"--body-limit", "server.body_limit"},
        {"--timeout", "server.timeout"},
        {"--shutdown-grace", "server.shutdown_grace"},
        {"--cors-origin", "server.cors_origin"},
        /* llama-server's names for the sequences a step runs */
        {"--parallel", "runtime.max_seqs"},
        {"-np", "runtime.max_seqs"},
    };
    for (size_t k = 0; flag && k < sizeof flags / sizeof *flags; k++)
        if (strcmp(flag, flags[k].flag) == 0) return flags[k].key;
    return NULL;
}
