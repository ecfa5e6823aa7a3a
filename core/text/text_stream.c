/* text_stream.c — final text and stop strings over a stream of token bytes.
 * See text_stream.h for the contract.
 *
 * `pending` holds the valid text not taken yet. A stop string can never
 * start inside taken text: when it was taken, the part of the stop string it
 * held was a suffix that is a proper prefix of a stop string, which is held
 * back. So the search only looks at pending, and only at matches that end in
 * the bytes just appended (an earlier one would have been found before). */
#include "text_stream.h"

#include <stdlib.h>
#include <string.h>

#include "utf8_stream.h"

struct vt_text_stream {
    char *stops[VT_TEXT_STREAM_MAX_STOPS];
    size_t stop_len[VT_TEXT_STREAM_MAX_STOPS];
    size_t n_stops;
    vt_utf8_stream utf8;
    char *pending; /* valid UTF-8 not taken yet */
    size_t n_pending, cap_pending;
    char *taken; /* what the last take returned */
    size_t cap_taken;
    size_t n_taken_total; /* every take's bytes: the text before pending */
    bool stopped;  /* a stop string matched: pending ends before it, nothing more is appended */
    bool finished; /* no more input: everything pending is final */
};

/* Whether s[0..n) is well-formed UTF-8 (no overlong form, surrogate or code
 * point past U+10FFFF): what the stream's text always is. */
static bool valid_utf8(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        }
        if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

vt_status vt_text_stream_create(const char *const *stops, size_t n_stops, vt_text_stream **out, vt_error *err) {
    *out = NULL;
    if (n_stops > VT_TEXT_STREAM_MAX_STOPS)
        return vt_fail(err, VT_ERR_INVALID, "stop_strings: %zu strings (accepted: at most %d)", n_stops,
                       VT_TEXT_STREAM_MAX_STOPS);
    if (n_stops > 0 && !stops) return vt_fail(err, VT_ERR_INVALID, "stop_strings: NULL with %zu strings", n_stops);
    for (size_t i = 0; i < n_stops; i++) {
        const size_t len = stops[i] ? strnlen(stops[i], VT_TEXT_STREAM_MAX_STOP_LEN + 1) : 0;
        if (len == 0 || len > VT_TEXT_STREAM_MAX_STOP_LEN)
            return vt_fail(err, VT_ERR_INVALID, "stop_strings[%zu]: %s (accepted: 1..%d bytes)", i,
                           !stops[i] ? "NULL" : len == 0 ? "empty" : "too long", VT_TEXT_STREAM_MAX_STOP_LEN);
        /* the generated text it is matched against is valid UTF-8 (malformed
         * bytes become U+FFFD), so such a string could never match */
        if (!valid_utf8((const unsigned char *)stops[i], len))
            return vt_fail(err, VT_ERR_INVALID, "stop_strings[%zu]: not valid UTF-8, so it could never match the text",
                           i);
    }
    vt_text_stream *t = calloc(1, sizeof *t);
    if (!t) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_stops; i++) {
        t->stop_len[i] = strlen(stops[i]);
        t->stops[i] = malloc(t->stop_len[i]);
        if (!t->stops[i]) {
            vt_text_stream_free(t);
            return vt_fail(err, VT_ERR_NOMEM, "out of memory");
        }
        memcpy(t->stops[i], stops[i], t->stop_len[i]);
        t->n_stops++;
    }
    *out = t;
    return VT_OK;
}

void vt_text_stream_free(vt_text_stream *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n_stops; i++) free(t->stops[i]);
    free(t->pending);
    free(t->taken);
    free(t);
}

static bool grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *b = realloc(*buf, c);
    if (!b) return false;
    *buf = b;
    *cap = c;
    return true;
}

/* The earliest stop string match that ends after byte `from` of pending;
 * its start, or n_pending if none. */
static size_t earliest_match(const vt_text_stream *t, size_t from) {
    size_t best = t->n_pending;
    for (size_t i = 0; i < t->n_stops; i++) {
        const size_t len = t->stop_len[i];
        if (len > t->n_pending) continue;
        size_t start = from + 1 > len ? from + 1 - len : 0;
        for (; start + len <= t->n_pending && start < best; start++)
            if (memcmp(t->pending + start, t->stops[i], len) == 0) {
                best = start;
                break;
            }
    }
    return best;
}

vt_status vt_text_stream_feed(vt_text_stream *t, const char *bytes, size_t n, bool *stopped, vt_error *err) {
    if (!t->stopped && !t->finished && n > 0) {
        if (!grow(&t->pending, &t->cap_pending, t->n_pending + VT_UTF8_STREAM_OUT_MAX(n)))
            return vt_fail(err, VT_ERR_NOMEM, "out of memory for %zu bytes of generated text", t->n_pending + n);
        const size_t before = t->n_pending;
        t->n_pending += vt_utf8_stream_push(&t->utf8, bytes, n, t->pending + t->n_pending);
        if (t->n_pending > before) {
            const size_t match = earliest_match(t, before);
            if (match < t->n_pending) {
                t->n_pending = match;
                t->stopped = true;
            }
        }
    }
    if (stopped) *stopped = t->stopped;
    return VT_OK;
}

bool vt_text_stream_stopped(const vt_text_stream *t) { return t->stopped; }

size_t vt_text_stream_offset_of(const vt_text_stream *t, const char *bytes, size_t n) {
    const size_t length = t->n_taken_total + t->n_pending;
    if (t->stopped || t->finished || n == 0 || t->utf8.n_pending == 0) return length;
    return vt_utf8_stream_continues(&t->utf8, (unsigned char)bytes[0]) ? length : length + 3;
}

void vt_text_stream_finish(vt_text_stream *t) {
    if (t->finished) return;
    t->finished = true;
    if (t->stopped) return; /* what followed the stop string is not part of the text */
    /* A flush writes at most one U+FFFD. */
    if (t->utf8.n_pending > 0 && grow(&t->pending, &t->cap_pending, t->n_pending + 3))
        t->n_pending += vt_utf8_stream_flush(&t->utf8, t->pending + t->n_pending);
}

/* Bytes at the end of pending that may still become (part of) a stop string:
 * the longest suffix that is a proper prefix of one. */
static size_t held_back(const vt_text_stream *t) {
    size_t hold = 0;
    for (size_t i = 0; i < t->n_stops; i++) {
        size_t k = t->stop_len[i] - 1;
        if (k > t->n_pending) k = t->n_pending;
        for (; k > hold; k--)
            if (memcmp(t->pending + t->n_pending - k, t->stops[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}

vt_status vt_text_stream_take(vt_text_stream *t, const char **text, size_t *n, vt_error *err) {
    size_t final = t->n_pending;
    if (!t->finished && !t->stopped) {
        final -= held_back(t);
        /* Only whole characters: a stop string that starts with a
         * continuation byte must not split one. */
        while (final > 0 && final < t->n_pending && ((unsigned char)t->pending[final] & 0xC0) == 0x80) final--;
    }
    if (!grow(&t->taken, &t->cap_taken, final ? final : 1)) {
        *text = "";
        *n = 0;
        return vt_fail(err, VT_ERR_NOMEM, "out of memory for %zu bytes of generated text", final);
    }
    if (final) {
        memcpy(t->taken, t->pending, final);
        memmove(t->pending, t->pending + final, t->n_pending - final);
        t->n_pending -= final;
        t->n_taken_total += final;
    }
    *text = t->taken;
    *n = final;
    return VT_OK;
}
