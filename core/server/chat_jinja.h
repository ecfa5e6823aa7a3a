/* chat_jinja.h — a chat rendered with the model's own Jinja template, the
 * way transformers' apply_chat_template calls it: the variables messages,
 * tools (when given), add_generation_prompt, bos_token, eos_token, and any
 * extra keys (a request's chat_template_kwargs, e.g. enable_thinking).
 * The bridge from jansson's json_t to the interpreter's values lives here. */
#ifndef VT_SERVER_CHAT_JINJA_H
#define VT_SERVER_CHAT_JINJA_H

#include "jinja.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* json_t -> a template value (objects keep their key order). The result is
 * undefined with jv_is_oom true when memory runs out. */
jv vt_jinja_from_json(const json_t *j);

typedef struct vt_chat_jinja_input {
    const json_t *messages; /* array of message objects, as the template expects them */
    const json_t *tools;    /* array or NULL (then `tools` is undefined, as transformers leaves it) */
    const json_t *kwargs;   /* object or NULL: extra template variables */
    bool add_generation_prompt;
    const char *bos_token, *eos_token; /* "" when the vocabulary has none */
} vt_chat_jinja_input;

/* Render; *out malloc'ed (NUL-terminated, *len without it). False with the
 * template's line in err on a template error (raise_exception included). */
bool vt_chat_jinja_render(const vt_jinja_template *t, const vt_chat_jinja_input *in, char **out, size_t *len,
                          char *err, size_t err_size);

#endif
