/* fuzz_vocabs.h — small vocabularies for the tokenizer fuzz targets, written
 * with vt's own GGUF writer (no outside data).
 *
 * SPM: the start of the synthetic models' built-in SentencePiece vocabulary
 * (every byte has a <0xNN> token) plus one user-defined and one control
 * token. BPE: the 256 GPT-2 byte-level characters, a handful of
 * merged tokens with their merges (ASCII words, digits, a two-byte UTF-8
 * character, runs of spaces) and three special tokens, under either the
 * qwen2 or the llama3 pre-tokenizer. */
#ifndef VT_FUZZ_VOCABS_H
#define VT_FUZZ_VOCABS_H

#include "error.h"

typedef enum fuzz_vocab_kind {
    FUZZ_VOCAB_SPM = 0,
    FUZZ_VOCAB_BPE_QWEN2 = 1,
    FUZZ_VOCAB_BPE_LLAMA3 = 2,
    FUZZ_VOCAB_KINDS = 3
} fuzz_vocab_kind;

/* Text of every vocab's user-defined token (always matched when tokenizing), */
#define FUZZ_USER_TOKEN "<tool>"
/* and its control token (matched only with parse_special). */
#define FUZZ_CONTROL_TOKEN "<|ctl|>"

/* Write vocab `kind` as a vocab-only GGUF file at path. */
vt_status fuzz_vocab_write(fuzz_vocab_kind kind, const char *path, vt_error *err);

#endif
