/* jinja.h — a Jinja interpreter for chat templates.
 *
 * It renders a template the way Hugging Face transformers does with Python's
 * jinja2: trim_blocks and lstrip_blocks on, a single trailing newline of the
 * template dropped, autoescaping off, loop controls (break, continue) on,
 * tojson as transformers defines it (json.dumps, ensure_ascii false), and the
 * globals raise_exception(msg), strftime_now(fmt), range, namespace, dict.
 * What it supports is listed in docs/CHAT_TEMPLATES.md; anything else is an
 * error naming the template line, never a silent difference.
 *
 * Limits: a template of at most VT_JINJA_MAX_TEMPLATE bytes, output of at
 * most VT_JINJA_MAX_OUTPUT bytes (and no string built along the way
 * longer), lists of at most VT_JINJA_MAX_ITERATIONS items, that many loop
 * iterations in one render, at most VT_JINJA_MAX_WORK units of work in one
 * render (jv_meter_tick: bytes built, searched, compared, copied or
 * written, a list slot's size per item walked; a template from a model file
 * cannot make a render run for hours),
 * nesting (expressions, statements, macro calls) at most VT_JINJA_MAX_DEPTH
 * deep. Exceeding one is an error, as a bad template is. */
#ifndef VT_JINJA_H
#define VT_JINJA_H

#include "jinja_value.h"

#include <stdbool.h>
#include <stddef.h>

#define VT_JINJA_MAX_TEMPLATE (1u << 20)
#define VT_JINJA_MAX_OUTPUT (16u << 20)
#define VT_JINJA_MAX_ITERATIONS 1000000u
/* 4 outputs' worth: a real template builds and searches a few times its
 * messages' text (each message's content looked at a few times), and no
 * context window's prompt is near the 16 MiB output limit. */
#define VT_JINJA_MAX_WORK (4ull * VT_JINJA_MAX_OUTPUT)
#define VT_JINJA_MAX_DEPTH 200
#define VT_JINJA_MAX_DEPTH_TEXT "200"

typedef struct vt_jinja_template vt_jinja_template;

/* Parse template text (len bytes; NUL bytes allowed). NULL on error, with
 * "line L, column C: what" in err. */
vt_jinja_template *vt_jinja_parse(const char *src, size_t len, char *err, size_t err_size);
void vt_jinja_free(vt_jinja_template *t);

/* Render with the variables of ctx (a dict: its keys become template
 * variables). *out is malloc'ed and NUL-terminated, *out_len excludes the
 * NUL. False on a runtime error ("line L: what", including the message of
 * raise_exception) with *out NULL. ctx is the render's: it is released before
 * the call returns. Threads may render one template at once: its renders
 * run one at a time (the template's values are shared, and may end up in
 * ctx). ctx's values must not be shared with a render on another thread. */
bool vt_jinja_render(const vt_jinja_template *t, jv ctx, char **out, size_t *out_len, char *err, size_t err_size);

/* Whether name is a function every template may call (range, namespace,
 * dict, raise_exception, strftime_now): a variable of that name given to a
 * render replaces it, as in Jinja2, and a template calling it then fails. */
bool vt_jinja_is_builtin(const char *name);

#endif
