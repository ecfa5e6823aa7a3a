/* text_buf.h — a growing text buffer, the one the server's writers share:
 * the Jinja renderer, the chat templates, the JSON Schema converter, the
 * tool-call arguments and the metrics page.
 *
 * A failed allocation (or passing the limit) marks the buffer failed and
 * every later write does nothing, so a writer checks once, at the end. The
 * text is NUL-terminated whenever it is not empty. */
#ifndef VT_SERVER_TEXT_BUF_H
#define VT_SERVER_TEXT_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vt_text_buf {
    char *data;
    size_t len, cap, limit; /* limit 0: none */
    bool failed;            /* out of memory or over the limit */
} vt_text_buf;

void vt_text_put(vt_text_buf *b, const char *s, size_t n);
void vt_text_puts(vt_text_buf *b, const char *s);
void vt_text_putc(vt_text_buf *b, char c);
void vt_text_printf(vt_text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A double as Python's repr() writes it, which is also what Python's
 * json.dumps writes: the fewest digits that read back to the same double,
 * positional for decimal exponents -4..15 and scientific otherwise, a
 * whole number with ".0" (3.8, 2.0, 1e+300, 2.5e-07; nan, inf, -inf). */
void vt_text_put_float(vt_text_buf *b, double f);

/* The text, handed over (the buffer is emptied): "" when nothing was
 * written; NULL when the buffer failed (its memory is freed). */
char *vt_text_take(vt_text_buf *b);

#endif
