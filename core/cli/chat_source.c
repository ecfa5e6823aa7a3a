/* chat_source.c — see chat_source.h. */
#include "chat_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "serve_options.h"
#if VT_HAVE_SERVE
#include <jansson.h>

#include "chat_jinja.h"
#endif

/* The text of the vocabulary's special token named by key (a token id), as
 * tokenizer.ggml.tokens spells it (decoding would drop a control token). */
static void special_token(const vt_gguf *g, const char *key, char *out, size_t cap) {
    uint32_t id;
    vt_error e = {0};
    const vt_gguf_array *tokens = NULL;
    out[0] = 0;
    if (!g || vt_gguf_get_u32(g, key, &id, &e) != VT_OK ||
        vt_gguf_get_arr(g, "tokenizer.ggml.tokens", VT_GGUF_STRING, &tokens, &e) != VT_OK || id >= tokens->n)
        return;
    vt_gguf_str t = tokens->items[id].v.str;
    if (t.len < cap) {
        memcpy(out, t.data, t.len);
        out[t.len] = 0;
    }
}

static char *read_text_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *p = realloc(buf, cap);
            if (!p) break;
            buf = p;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    bool ok = !ferror(f) && buf;
    fclose(f);
    if (!ok) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Where [server] setting key was set, for a message about it: "" on the
 * command line (the flag names it) or by default, else " (set in FILE:LINE)"
 * or " (set by env VAR)". */
static const char *set_where(const vt_options *opt, const char *key, char *buf, size_t size) {
    const char *source = vt_options_source(opt, key);
    char where[VT_SOURCE_SIZE + sizeof opt->config_path];
    buf[0] = '\0';
    if (vt_options_source_rank(source) == 3 || vt_options_source_rank(source) == 0) return buf; /* cli, default */
    snprintf(buf, size, " (%s set %s %s)", key, vt_options_source_rank(source) == 1 ? "in" : "by",
             vt_options_where(opt, source, where, sizeof where));
    return buf;
}

vt_status vt_chat_source_open(vt_chat_source *c, const vt_options *opt, const char *model_template,
                              const char *model_path, vt_error *err) {
    char msg[512], forced_where[1200], file_where[1200];
    memset(c, 0, sizeof *c);
    const vt_serve_options *so = vt_serve_options_of(opt);
    const char *forced = so->chat_template, *file = so->chat_template_file;
    set_where(opt, "server.chat_template", forced_where, sizeof forced_where);
    set_where(opt, "server.chat_template_file", file_where, sizeof file_where);
    if (forced[0] && file[0])
        return vt_fail(err, VT_ERR_INVALID, "--chat-template%s and --chat-template-file%s: give one of them",
                       forced_where, file_where);
    /* the vocabulary's BOS and EOS text: a Jinja template writes them, and
     * a built-in family's rendering is shown with the BOS its tokenizing adds */
    vt_gguf *g = NULL;
    vt_error e = {0};
    if (!model_path || vt_gguf_open(model_path, &g, &e) != VT_OK) g = NULL;
    special_token(g, "tokenizer.ggml.bos_token_id", c->bos, sizeof c->bos);
    special_token(g, "tokenizer.ggml.eos_token_id", c->eos, sizeof c->eos);
    if (g) vt_gguf_close(g);
    if (forced[0]) {
        if (!vt_chat_family_by_name(forced, &c->family, msg, sizeof msg))
            return vt_fail(err, VT_ERR_INVALID, "--chat-template%s: %s", forced_where, msg);
        c->have = c->family_known = true;
        snprintf(c->name, sizeof c->name, "%s (built in)", forced);
        return VT_OK;
    }
    char *owned = NULL;
    const char *text;
    size_t len;
    if (file[0]) {
        errno = 0;
        if (!(owned = read_text_file(file, &len)))
            return vt_fail(err, errno ? VT_ERR_INVALID : VT_ERR_NOMEM, "--chat-template-file %s%s: cannot read: %s", file,
                           file_where, errno ? strerror(errno) : "out of memory");
        text = owned;
    } else {
        if (!model_template) return VT_OK;
        text = model_template;
        len = strlen(text);
    }
    c->jinja = vt_jinja_parse(text, len, msg, sizeof msg);
    c->family_known = vt_chat_detect(text, &c->family, NULL, 0);
    c->text = owned ? owned : strdup(text);
    if (!c->jinja)
        return file[0] ? vt_fail(err, VT_ERR_INVALID, "--chat-template-file %s%s: %s", file, file_where, msg)
                       : vt_fail(err, VT_ERR_UNSUPPORTED,
                                 "the model's chat template (tokenizer.chat_template): %s; start with "
                                 "--chat-template chatml|llama2|llama3|mistral or --chat-template-file PATH",
                                 msg);
    c->have = true;
    snprintf(c->name, sizeof c->name, "%.140s (Jinja)", file[0] ? file : "the model's own");
#if VT_HAVE_SERVE
    /* Tried on a chat of one user message, the least any chat is: its
     * failure is said at the start rather than at every turn or request. */
    json_t *one = json_pack("[{s:s, s:s}]", "role", "user", "content", "Hello");
    const vt_chat_jinja_input ji = {
        .messages = one, .add_generation_prompt = true, .bos_token = c->bos, .eos_token = c->eos};
    char *out = NULL;
    size_t out_len = 0;
    if (!one) snprintf(c->one_message_error, sizeof c->one_message_error, "out of memory");
    else if (!vt_chat_jinja_render(c->jinja, &ji, &out, &out_len, msg, sizeof msg))
        snprintf(c->one_message_error, sizeof c->one_message_error, "%.511s", msg);
    free(out);
    json_decref(one);
#endif
    return VT_OK;
}

vt_status vt_chat_template_check(const vt_options *opt, vt_error *err) {
    vt_chat_source c;
    const vt_status st = vt_chat_source_open(&c, opt, NULL, NULL, err);
    vt_chat_source_free(&c);
    return st;
}

void vt_chat_source_free(vt_chat_source *c) {
    vt_jinja_free(c->jinja);
    c->jinja = NULL;
    free(c->text);
    c->text = NULL;
}

void vt_chat_template_settle(vt_options *opt) {
    const vt_serve_options *so = vt_serve_options_of(opt);
    if (!so->chat_template[0] || !so->chat_template_file[0]) return;
    const char *named = vt_options_source(opt, "server.chat_template"),
               *file = vt_options_source(opt, "server.chat_template_file");
    const int rn = vt_options_source_rank(named), rf = vt_options_source_rank(file);
    if (rn > rf) vt_options_set(opt, "server.chat_template_file", "", named, NULL);
    else if (rf > rn) vt_options_set(opt, "server.chat_template", "", file, NULL);
}
