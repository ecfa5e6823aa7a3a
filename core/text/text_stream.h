/* text_stream.h — a request's generated text as it streams out: token bytes
 * in, final text out, ended by stop strings.
 *
 * A server sends text as it is generated, but must never send something it
 * would have to take back. Two things are not final yet at the end of what
 * was generated so far: an incomplete UTF-8 character (the stream holds it,
 * through utf8_stream.h, until its last byte arrives; bytes that can never
 * form a character become U+FFFD), and the longest suffix that is a proper
 * prefix of some stop string (it may still turn into that stop string). Once
 * the text contains a stop string, the stream stops: the text ends right
 * before the earliest match and everything fed later is ignored.
 *
 * Stop strings are compared byte for byte with the valid UTF-8 text, so a
 * stop string split over tokens, or inside a character split over tokens,
 * is found all the same. At the end (finish), everything held back is final;
 * an incomplete character at the very end is flushed as U+FFFD (as
 * utf8_stream does), so the text is always valid UTF-8. */
#ifndef VT_CORE_TEXT_STREAM_H
#define VT_CORE_TEXT_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define VT_TEXT_STREAM_MAX_STOPS 16
#define VT_TEXT_STREAM_MAX_STOP_LEN 256

typedef struct vt_text_stream vt_text_stream;

/* stops[n_stops]: NUL-terminated strings, copied. Refused naming
 * stop_strings[i]: more than VT_TEXT_STREAM_MAX_STOPS, NULL, empty or longer
 * than VT_TEXT_STREAM_MAX_STOP_LEN bytes. */
vt_status vt_text_stream_create(const char *const *stops, size_t n_stops, vt_text_stream **out, vt_error *err);
void vt_text_stream_free(vt_text_stream *t);

/* Append n bytes of generated text (one token's). *stopped (may be NULL)
 * says whether the text now contains a stop string (once true it stays so).
 * Fails only for lack of memory, with nothing appended. */
vt_status vt_text_stream_feed(vt_text_stream *t, const char *bytes, size_t n, bool *stopped, vt_error *err);
bool vt_text_stream_stopped(const vt_text_stream *t);

/* Where n bytes fed next would begin in the text, in bytes from its start:
 * its length so far; where they continue a character held back incomplete,
 * that character's start; where they end one, after the U+FFFD it becomes.
 * Once stopped, the text's length. */
size_t vt_text_stream_offset_of(const vt_text_stream *t, const char *bytes, size_t n);

/* No more bytes will come: what was held back becomes final. */
void vt_text_stream_finish(vt_text_stream *t);

/* The text that became final since the last take (*n bytes; not
 * NUL-terminated; never NULL). Valid until the next take or free. Fails only
 * for lack of memory, taking nothing. */
vt_status vt_text_stream_take(vt_text_stream *t, const char **text, size_t *n, vt_error *err);

#endif
