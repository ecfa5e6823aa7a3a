/* tokenizer_internal.h — what the tokenizer's files share beyond its state
 * (tokenizer_state.h) and the vocabulary (vocab.h): the special-token
 * steps, the two encoders and the BPE pre-tokenizer settings. Private to
 * the core. */
#ifndef VT_CORE_TOKENIZER_INTERNAL_H
#define VT_CORE_TOKENIZER_INTERNAL_H

#include "tokenizer.h"
#include "tokenizer_state.h"
#include "vocab.h"

/* Loading steps that decide which tokens are special (tokenizer_special.c):
 * fix up token types by text and build the end-of-generation set (fim ids as
 * read from the GGUF, -1 when absent); list CONTROL/USER_DEFINED/UNKNOWN ids
 * longest first; set per-model LSTRIP/RSTRIP. */
vt_status vt_special_apply_heuristics(vt_tokenizer *t, const int32_t fim_ids_from_gguf[6], vt_error *err);
vt_status vt_special_build_list(vt_tokenizer *t, vt_error *err);
void vt_special_apply_name_attrs(vt_tokenizer *t, const vt_gguf *g);

/* Whether t's vocab allows spm_chunk_at_spaces. */
bool vt_spm_spaces_bound_merges(const vt_tokenizer *t);
/* Encode one text fragment (no special tokens in it) and append the ids.
 * SPM: text is already space-escaped (" " -> U+2581) and prefixed. */
vt_status vt_spm_encode(const vt_tokenizer *t, const char *text, size_t len, vt_id_list *out, vt_error *err);
vt_status vt_bpe_encode(const vt_tokenizer *t, const char *text, size_t len, vt_id_list *out, vt_error *err);

/* BPE: undo the GPT-2 byte-to-unicode mapping of a token's text into buf
 * (returns the full length; writes at most cap bytes). Characters outside the
 * mapping render as llama.cpp does: "[UNK_BYTE_0x..." + text + "]". */
size_t vt_bpe_decode_text(const char *text, size_t len, char *buf, size_t cap);

/* Configure t for the pre-tokenizer `name` (t->pre, and the flags llama.cpp
 * ties to it: clean_spaces, ignore_merges, add_bos); false if unsupported. */
bool vt_bpe_pre_configure(vt_tokenizer *t, const char *name, size_t len);

#endif
