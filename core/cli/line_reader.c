/* line_reader.c — see line_reader.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* ppoll */
#endif
#include "line_reader.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vt_line_reader_init(vt_line_reader *r, int fd) { *r = (vt_line_reader){.fd = fd}; }

void vt_line_reader_free(vt_line_reader *r) {
    free(r->buf);
    *r = (vt_line_reader){.fd = -1};
}

/* The returned line leaves the buffer only when the next one is asked for,
 * so the caller's pointer stays valid until then. */
static void drop_returned(vt_line_reader *r) {
    if (r->line_len == 0) return;
    memmove(r->buf, r->buf + r->line_len, r->len - r->line_len);
    r->len -= r->line_len;
    r->line_len = 0;
}

static vt_line_status take(vt_line_reader *r, size_t n, bool newline, const char **line, size_t *len) {
    r->buf[n] = '\0'; /* the newline's place, or the spare byte every read leaves */
    *line = r->buf;
    *len = n;
    r->line_len = n + (newline ? 1 : 0);
    return VT_LINE_OK;
}

vt_line_status vt_line_read(vt_line_reader *r, const sigset_t *wait_mask, const char **line, size_t *len) {
    drop_returned(r);
    for (;;) {
        char *nl = r->len ? memchr(r->buf, '\n', r->len) : NULL;
        if (nl) return take(r, (size_t)(nl - r->buf), true, line, len);
        if (r->eof) {
            if (r->len == 0) return VT_LINE_EOF;
            return take(r, r->len, false, line, len);
        }
        if (r->cap - r->len < 4097) { /* room for a read and the NUL of a last line */
            size_t cap = r->cap ? r->cap * 2 : 8192;
            char *b = realloc(r->buf, cap);
            if (!b) return VT_LINE_ERROR;
            r->buf = b;
            r->cap = cap;
        }
        struct pollfd p = {.fd = r->fd, .events = POLLIN};
        int rc = ppoll(&p, 1, NULL, wait_mask);
        if (rc < 0 && errno == EINTR) return VT_LINE_INTERRUPTED;
        if (rc < 0) return VT_LINE_ERROR;
        ssize_t got = read(r->fd, r->buf + r->len, r->cap - r->len - 1);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got < 0) return VT_LINE_ERROR;
        if (got == 0) r->eof = true;
        r->len += (size_t)got;
    }
}
