/* line_reader.h — lines from a file descriptor that a signal can interrupt.
 *
 * `vt chat` reads its input with this instead of stdio so that Ctrl-C at the
 * prompt is seen at once: the caller keeps SIGINT blocked and the wait
 * unblocks it atomically (ppoll), so a signal can never slip in between a
 * check and the blocking read. Lines are buffered here, not in a FILE, so
 * piped input with many lines in one read is never hidden from the wait.
 * Plain line reading: no editing keys beyond the terminal's own (backspace,
 * Ctrl-U), no history. */
#ifndef VT_CLI_LINE_READER_H
#define VT_CLI_LINE_READER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct vt_line_reader {
    int fd;
    char *buf; /* bytes read and not yet returned */
    size_t len, cap;
    size_t line_len; /* the line last returned, still at the start of buf */
    bool eof;
} vt_line_reader;

typedef enum {
    VT_LINE_OK,          /* a line, without its newline */
    VT_LINE_EOF,         /* end of input, nothing left */
    VT_LINE_INTERRUPTED, /* a signal of wait_mask's unblocked set arrived while waiting */
    VT_LINE_ERROR,       /* read failed or out of memory */
} vt_line_status;

void vt_line_reader_init(vt_line_reader *r, int fd);
void vt_line_reader_free(vt_line_reader *r);

/* The next line (NUL-terminated, valid until the next call; a last line
 * without a newline is returned at end of input). While waiting for input
 * the thread's signal mask is wait_mask (ppoll's sigmask). */
vt_line_status vt_line_read(vt_line_reader *r, const sigset_t *wait_mask, const char **line, size_t *len);

#endif
