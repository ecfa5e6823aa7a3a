/* utf8_stream.h — turn the bytes of generated tokens into valid UTF-8 as
 * they stream out.
 *
 * Byte-level BPE and SentencePiece byte fallback split one character over
 * several tokens (🙂 is two qwen2 tokens). Printing each token's bytes as it
 * comes is right only if the consumer reassembles them; this stream holds an
 * incomplete sequence back until its last byte arrives, and replaces bytes
 * that can never form a character with U+FFFD (as llama.cpp's detokenizer
 * does), so what it emits is always valid UTF-8. */
#ifndef VT_CORE_UTF8_STREAM_H
#define VT_CORE_UTF8_STREAM_H

#include <stddef.h>

typedef struct vt_utf8_stream {
    unsigned char pending[4];
    int n_pending; /* bytes of an incomplete sequence held back */
} vt_utf8_stream;

/* Worst-case output size of pushing n bytes (each byte may become U+FFFD). */
#define VT_UTF8_STREAM_OUT_MAX(n) (((n) + 4) * 3)

/* Feed n bytes; writes complete, valid UTF-8 to out (at least
 * VT_UTF8_STREAM_OUT_MAX(n) bytes) and returns how many. */
size_t vt_utf8_stream_push(vt_utf8_stream *s, const char *in, size_t n, char *out);
/* Whether byte c, pushed next, continues the incomplete sequence held back
 * (false when none is). */
int vt_utf8_stream_continues(const vt_utf8_stream *s, unsigned char c);
/* End of stream: a held-back incomplete sequence becomes U+FFFD. */
size_t vt_utf8_stream_flush(vt_utf8_stream *s, char *out);

#endif
