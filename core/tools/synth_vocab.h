/* synth_vocab.h — the built-in SentencePiece-style vocabulary of synthetic models.
 *
 * Layout: <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF> (type BYTE),
 * then "▁", single printable ASCII characters and common English words as
 * prefix-closed pieces (so SentencePiece merges can reach every word), then
 * "<unused_N>" placeholders (type UNUSED) up to n_vocab. */
#ifndef VT_CORE_SYNTH_VOCAB_H
#define VT_CORE_SYNTH_VOCAB_H

#include <stdint.h>

#include "error.h"

/* llama.cpp's token types (llama_token_type). */
enum {
    VT_TOKEN_NORMAL = 1,
    VT_TOKEN_UNKNOWN = 2,
    VT_TOKEN_CONTROL = 3,
    VT_TOKEN_UNUSED = 5,
    VT_TOKEN_BYTE = 6
};

#define VT_SYNTH_VOCAB_MIN 259 /* the 3 special tokens and the 256 byte tokens */

typedef struct vt_synth_vocab {
    int32_t n;
    const char **tokens; /* [n], NUL-terminated, into one buffer */
    float *scores;       /* [n] */
    int32_t *types;      /* [n] */
    char *text;          /* backing store of tokens */
} vt_synth_vocab;

vt_status vt_synth_vocab_build(int32_t n_vocab, vt_synth_vocab *out, vt_error *err);
void vt_synth_vocab_free(vt_synth_vocab *v);

#endif
