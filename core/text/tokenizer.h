/* tokenizer.h — text <-> token ids for the vocabularies GGUF files carry.
 *
 * tokenizer.ggml.model "llama": SentencePiece-style (scores, byte fallback
 * <0xNN>, add_space_prefix); "gpt2": byte-level BPE with merges and a
 * pre-tokenizer chosen by tokenizer.ggml.pre ("qwen2", ...). Both reproduce
 * llama.cpp's output exactly. Loads from any GGUF, vocab-only files included. */
#ifndef VT_CORE_TOKENIZER_H
#define VT_CORE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"

typedef struct vt_tokenizer vt_tokenizer;

vt_status vt_tokenizer_load(const vt_gguf *g, vt_tokenizer **out, vt_error *err);
void vt_tokenizer_free(vt_tokenizer *t);

int32_t vt_tokenizer_n_vocab(const vt_tokenizer *t);
int32_t vt_tokenizer_bos(const vt_tokenizer *t); /* -1 if none */
int32_t vt_tokenizer_eos(const vt_tokenizer *t); /* -1 if none */
bool vt_tokenizer_add_bos(const vt_tokenizer *t); /* what the vocab's metadata says */
/* True for ids that end generation (EOS, EOT). */
bool vt_tokenizer_is_eog(const vt_tokenizer *t, int32_t id);
/* Every id that ends generation, ascending; *n gets how many (the array
 * lives as long as the tokenizer). */
const int32_t *vt_tokenizer_eog_ids(const vt_tokenizer *t, size_t *n);
/* The vocabulary string of id ("▁Once", "<0xC3>"), NUL-terminated; NULL if out of range. */
const char *vt_tokenizer_piece(const vt_tokenizer *t, int32_t id);

/* Encode len bytes of text. add_bos: prepend BOS if the vocab has one (callers
 * pass vt_tokenizer_add_bos(t) for llama.cpp's default). parse_special: match
 * control tokens' text (user-defined tokens are always matched).
 * *ids is malloc'ed; the caller frees it. */
vt_status vt_tokenize(const vt_tokenizer *t, const char *text, size_t len, bool add_bos, bool parse_special,
                      int32_t **ids, size_t *n_ids, vt_error *err);

/* The bytes one token renders to (byte fallback decoded, SPM's ▁ -> space,
 * BPE's byte-level mapping undone). Control tokens render as nothing unless
 * render_special. Returns the number of bytes (may exceed cap: then truncated,
 * call again with a larger buffer), or -1 if id is out of range. */
int32_t vt_token_to_bytes(const vt_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap);

/* Decode a whole sequence as llama.cpp's llama_detokenize(remove_special=false,
 * unparse_special=render_special) does (SPM: the first token's leading space is
 * dropped). *text is malloc'ed and NUL-terminated; *len excludes the NUL. */
vt_status vt_detokenize(const vt_tokenizer *t, const int32_t *ids, size_t n_ids, bool render_special, char **text,
                        size_t *len, vt_error *err);

#endif
