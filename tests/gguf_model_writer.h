/* gguf_model_writer.h — how the tests write GGUF files.
 *
 * Every well-formed file goes through vt's own writer (core/gguf/gguf_writer.h,
 * itself tested by test_gguf), so a test states what it puts in a file, never
 * how GGUF lays it out. On top of it: the tokenizer keys of a vocabulary, the
 * GPT-2 byte-level alphabet the BPE vocabularies are made of, copies of a file
 * with one key changed or cut short, and the byte offsets of named places in a
 * file for the tests that write what the writer refuses to (a bad dtype, a
 * lying count).
 *
 * No CUnit here: the fuzz programs (tests/fuzz) share this file. */
#ifndef VT_TEST_GGUF_MODEL_WRITER_H
#define VT_TEST_GGUF_MODEL_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf_writer.h"

/* llama.cpp's token types (tokenizer.ggml.token_type). */
enum {
    GMW_TOKEN_NORMAL = 1,
    GMW_TOKEN_UNKNOWN = 2,
    GMW_TOKEN_CONTROL = 3,
    GMW_TOKEN_USER_DEFINED = 4,
    GMW_TOKEN_BYTE = 6,
};

/* A vocabulary's tokenizer.ggml.* keys. */
typedef struct gmw_vocab {
    const char *model;          /* tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (BPE) */
    const char *pre;            /* tokenizer.ggml.pre, or NULL for none */
    const char *const *tokens;  /* [n_tokens] */
    const float *scores;        /* [n_tokens], or NULL for no scores key */
    const int32_t *types;       /* [n_tokens], or NULL for no token_type key */
    size_t n_tokens;
    const char *const *merges;  /* [n_merges] "left right", BPE only */
    size_t n_merges;
} gmw_vocab;

/* Set v's keys on w (model, pre, tokens, scores, token_type, merges: those given). */
vt_status gmw_set_vocab(vt_gguf_writer *w, const gmw_vocab *v);

/* The UTF-8 of the character GPT-2's byte-level alphabet uses for `byte`
 * (published as bytes_to_unicode): printable Latin-1 bytes stand for
 * themselves, the other 68 take U+0100.. in byte order. NUL-terminated. */
void gmw_byte_level_char(int byte, char out[4]);

#define GMW_BYTE_LEVEL_SPACE "\xc4\xa0" /* U+0120 'Ġ', the byte-level space */

/* A byte-level BPE vocabulary: ids 0..255 are the byte-level characters of
 * bytes 0..255 (normal tokens), then the extra tokens. */
typedef struct gmw_bpe_vocab {
    const char *pre;                 /* tokenizer.ggml.pre */
    const char *const *extra_tokens; /* ids 256.. */
    const int32_t *extra_types;      /* [n_extra], or NULL: all normal */
    size_t n_extra;
    const char *const *merges; /* [n_merges] in rank order */
    size_t n_merges;
} gmw_bpe_vocab;

vt_status gmw_set_byte_level_bpe(vt_gguf_writer *w, const gmw_bpe_vocab *v);

/* A writer on a new file DIR/STEM-N.gguf (N counts the calls in this
 * process), its path in path[size]: for tests that write many small files. */
vt_status gmw_create_numbered(const char *dir, const char *stem, char *path, size_t size, vt_gguf_writer **w,
                              vt_error *err);

/* Finish w, or when an earlier call failed, delete the file and report that
 * call's error (the writer's set/add calls return statuses the tests do not
 * check one by one). */
vt_status gmw_finish(vt_gguf_writer *w, vt_error *err);

/* A copy of src at dst with the u32 metadata key `key` set to value (added
 * when src lacks it); everything else as in src. */
vt_status gmw_copy_with_u32(const char *src, const char *dst, const char *key, uint32_t value, vt_error *err);

/* An f32 tensor to add to a copy: its name, shape and values. */
typedef struct gmw_tensor {
    const char *name;
    int32_t ndim;
    int64_t ne[4];
    const float *data;
} gmw_tensor;

/* src copied to dst with one f32 tensor more. */
vt_status gmw_copy_with_tensor(const char *src, const char *dst, const gmw_tensor *extra, vt_error *err);

/* The first `bytes` bytes of src, at dst. */
vt_status gmw_copy_truncated(const char *src, const char *dst, long bytes, vt_error *err);

/* A copy of src at dst with tensor `name`'s dtype field set to `dtype` in the
 * tensor table (a raw edit: the writer refuses dtypes it does not know). */
vt_status gmw_copy_with_raw_dtype(const char *src, const char *dst, const char *name, uint32_t dtype, vt_error *err);

/* Byte offset of a named place in a GGUF file image, or SIZE_MAX when the
 * image has no such place:
 *   "magic" "version" "n_tensors" "n_kv"   header fields
 *   "key:K"   the length of key K      "type:K" its value type   "val:K" its value
 *   "name:T"  the length of tensor T's name, then "ndim:T" "ne:T" "dtype:T" "off:T"
 *   "data:T"  T's first data byte      "eof"  the end of the image
 * Keys and tensor names are found as the first length-prefixed string equal
 * to them, so a name must not also appear earlier as a value. */
size_t gmw_offset_of(const uint8_t *image, size_t size, const char *where);

/* Little-endian store of the low n bytes of v (n = 1, 2, 4 or 8). */
void gmw_put_le(uint8_t *at, uint64_t v, size_t n);

#endif
