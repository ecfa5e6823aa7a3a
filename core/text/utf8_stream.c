/* utf8_stream.c — incremental UTF-8 validation (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). */
#include "utf8_stream.h"

#include <string.h>

static const char replacement[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Length of the sequence a lead byte starts, 0 if it cannot start one. */
static int sequence_length(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Is byte c acceptable at position i (>= 1) of a sequence starting with lead? */
static int continuation_ok(unsigned char lead, int i, unsigned char c) {
    if (c < 0x80 || c > 0xBF) return 0;
    if (i != 1) return 1;
    if (lead == 0xE0) return c >= 0xA0; /* overlong */
    if (lead == 0xED) return c <= 0x9F; /* surrogates */
    if (lead == 0xF0) return c >= 0x90; /* overlong */
    if (lead == 0xF4) return c <= 0x8F; /* above U+10FFFF */
    return 1;
}

size_t vt_utf8_stream_push(vt_utf8_stream *s, const char *in, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (s->n_pending > 0) {
            unsigned char lead = s->pending[0];
            if (continuation_ok(lead, s->n_pending, c)) {
                s->pending[s->n_pending++] = c;
                if (s->n_pending == sequence_length(lead)) {
                    memcpy(out + w, s->pending, (size_t)s->n_pending);
                    w += (size_t)s->n_pending;
                    s->n_pending = 0;
                }
                continue;
            }
            /* The held-back sequence can never complete: one U+FFFD for it,
             * then treat c afresh. */
            memcpy(out + w, replacement, 3);
            w += 3;
            s->n_pending = 0;
        }
        int len = sequence_length(c);
        if (len == 1) {
            out[w++] = (char)c;
        } else if (len == 0) {
            memcpy(out + w, replacement, 3);
            w += 3;
        } else {
            s->pending[0] = c;
            s->n_pending = 1;
        }
    }
    return w;
}

int vt_utf8_stream_continues(const vt_utf8_stream *s, unsigned char c) {
    return s->n_pending > 0 && continuation_ok(s->pending[0], s->n_pending, c);
}

size_t vt_utf8_stream_flush(vt_utf8_stream *s, char *out) {
    if (s->n_pending == 0) return 0;
    s->n_pending = 0;
    memcpy(out, replacement, 3);
    return 3;
}
