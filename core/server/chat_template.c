/* chat_template.c — family detection and hand-written rendering of the chat
 * templates `vt serve` supports (see chat_template.h for the conventions). */
#include "chat_template.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_buf.h"

static const char *const family_names[VT_CHAT_N_FAMILIES] = {
    [VT_CHAT_CHATML] = "chatml",
    [VT_CHAT_LLAMA2] = "llama2",
    [VT_CHAT_LLAMA3] = "llama3",
    [VT_CHAT_MISTRAL] = "mistral",
};

static void set_err(char *err, size_t err_size, const char *fmt, ...) {
    if (!err || err_size == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

bool vt_chat_detect(const char *jinja, vt_chat_family *out, char *err, size_t err_size) {
    if (!jinja) {
        set_err(err, err_size, "the model has no chat template (tokenizer.chat_template): name one with --chat-template");
        return false;
    }
    /* Llama 3 templates mention no ChatML marker and vice versa; [INST] is
     * checked last because a few ChatML templates quote it in comments. */
    if (strstr(jinja, "<|im_start|>")) *out = VT_CHAT_CHATML;
    else if (strstr(jinja, "<|start_header_id|>")) *out = VT_CHAT_LLAMA3;
    else if (strstr(jinja, "[INST]")) *out = strstr(jinja, "<<SYS>>") ? VT_CHAT_LLAMA2 : VT_CHAT_MISTRAL;
    else {
        set_err(err, err_size,
                "tokenizer.chat_template: unknown chat template family (known: chatml, llama2, llama3, mistral); "
                "name one with --chat-template");
        return false;
    }
    return true;
}

bool vt_chat_family_by_name(const char *name, vt_chat_family *out, char *err, size_t err_size) {
    for (int f = 0; name && f < VT_CHAT_N_FAMILIES; f++)
        if (strcmp(name, family_names[f]) == 0) {
            *out = (vt_chat_family)f;
            return true;
        }
    set_err(err, err_size, "--chat-template: unknown name \"%s\" (chatml, llama2, llama3, mistral)", name ? name : "");
    return false;
}

const char *vt_chat_family_name(vt_chat_family f) {
    return (unsigned)f < VT_CHAT_N_FAMILIES ? family_names[f] : "unknown";
}

const char *const *vt_chat_end_of_turn(vt_chat_family f) {
    static const char *const chatml[] = {"<|im_end|>", NULL};
    static const char *const llama3[] = {"<|eot_id|>", NULL};
    static const char *const eos[] = {"</s>", NULL};
    static const char *const none[] = {NULL};
    switch (f) {
    case VT_CHAT_CHATML: return chatml;
    case VT_CHAT_LLAMA3: return llama3;
    case VT_CHAT_LLAMA2:
    case VT_CHAT_MISTRAL: return eos;
    default: return none;
    }
}

static const char *role_name(vt_chat_role r) {
    switch (r) {
    case VT_CHAT_SYSTEM: return "system";
    case VT_CHAT_USER: return "user";
    case VT_CHAT_ASSISTANT: return "assistant";
    }
    return NULL;
}

/* A format that writes every message as open, role, close, content, end;
 * the generation prompt is open "assistant" close. */
typedef struct role_header_format {
    const char *open, *close, *end;
} role_header_format;

static const role_header_format chatml = {"<|im_start|>", "\n", "<|im_end|>\n"};
/* <|begin_of_text|> is the BOS: the tokenizer adds it. */
static const role_header_format llama3 = {"<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>"};

static void render_role_headers(vt_text_buf *b, const role_header_format *f, const vt_chat_message *m, size_t n,
                                bool gen) {
    for (size_t i = 0; i < n; i++) {
        vt_text_puts(b, f->open);
        vt_text_puts(b, role_name(m[i].role));
        vt_text_puts(b, f->close);
        vt_text_puts(b, m[i].content);
        vt_text_puts(b, f->end);
    }
    if (gen) {
        vt_text_puts(b, f->open);
        vt_text_puts(b, "assistant");
        vt_text_puts(b, f->close);
    }
}

/* Llama 2 and Mistral: [INST] user [/INST] answer</s>, a system message
 * inside the first [INST]. Meta's Llama 2 template puts spaces around the
 * answer and a BOS before every later [INST]; Mistral's does neither. */
static bool render_inst(vt_text_buf *b, vt_chat_family f, const vt_chat_message *m, size_t n, char *err,
                        size_t err_size) {
    const char *system = NULL;
    size_t i = 0;
    if (n > 0 && m[0].role == VT_CHAT_SYSTEM) system = m[i++].content;
    bool first_turn = true;
    for (size_t turn = 0; i < n; i++, turn++) {
        vt_chat_role want = turn % 2 == 0 ? VT_CHAT_USER : VT_CHAT_ASSISTANT;
        if (m[i].role != want) {
            set_err(err, err_size,
                    "messages[%zu].role: %s cannot render \"%s\" here (an optional system message first, then "
                    "user and assistant alternating, starting with user)",
                    i, family_names[f], role_name(m[i].role));
            return false;
        }
        if (want == VT_CHAT_USER) {
            if (!first_turn && f == VT_CHAT_LLAMA2) vt_text_puts(b, "<s>");
            vt_text_puts(b, "[INST] ");
            if (first_turn && system) {
                if (f == VT_CHAT_LLAMA2) {
                    vt_text_puts(b, "<<SYS>>\n");
                    vt_text_puts(b, system);
                    vt_text_puts(b, "\n<</SYS>>\n\n");
                } else {
                    vt_text_puts(b, system);
                    vt_text_puts(b, "\n\n");
                }
            }
            vt_text_puts(b, m[i].content);
            vt_text_puts(b, " [/INST]");
            first_turn = false;
        } else if (f == VT_CHAT_LLAMA2) {
            vt_text_puts(b, " ");
            vt_text_puts(b, m[i].content);
            vt_text_puts(b, " </s>");
        } else {
            vt_text_puts(b, m[i].content);
            vt_text_puts(b, "</s>");
        }
    }
    if (first_turn && system) {
        set_err(err, err_size, "messages: %s renders a system message only with a user message after it",
                family_names[f]);
        return false;
    }
    return true;
}

bool vt_chat_render(vt_chat_family f, const vt_chat_message *msgs, size_t n, bool add_generation_prompt,
                    char **text, size_t *len, char *err, size_t err_size) {
    *text = NULL;
    *len = 0;
    if ((unsigned)f >= VT_CHAT_N_FAMILIES) {
        set_err(err, err_size, "chat template: unknown family %d", (int)f);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!role_name(msgs[i].role)) {
            set_err(err, err_size, "messages[%zu].role: unknown role %d", i, (int)msgs[i].role);
            return false;
        }
        if (!msgs[i].content) {
            set_err(err, err_size, "messages[%zu].content: missing", i);
            return false;
        }
    }
    vt_text_buf b = {0};
    bool ok = true;
    switch (f) {
    case VT_CHAT_CHATML: render_role_headers(&b, &chatml, msgs, n, add_generation_prompt); break;
    case VT_CHAT_LLAMA3: render_role_headers(&b, &llama3, msgs, n, add_generation_prompt); break;
    default: ok = render_inst(&b, f, msgs, n, err, err_size); break;
    }
    const size_t rendered = b.len;
    char *out = vt_text_take(&b); /* an empty chat renders to a valid empty string */
    if (ok && !out) set_err(err, err_size, "chat template: out of memory rendering %zu messages", n);
    if (!ok || !out) {
        free(out);
        return false;
    }
    *text = out;
    *len = rendered;
    return true;
}
