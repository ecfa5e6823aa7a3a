/* vocab.h — the vocabulary and its lookups (vocab.c): loading the token
 * table and the BPE merges from the GGUF, text -> id, merge ranks. */
#ifndef VT_CORE_VOCAB_H
#define VT_CORE_VOCAB_H

#include "error.h"
#include "gguf.h"
#include "tokenizer_state.h"

bool vt_id_list_push(vt_id_list *l, int32_t id);

/* Id of the token whose text is exactly s[0..len), or -1. */
int32_t vt_vocab_find(const vt_tokenizer *t, const char *s, size_t len);
/* Rank of the merge (left, right), or -1. */
int32_t vt_vocab_merge_rank(const vt_tokenizer *t, const char *left, size_t left_len, const char *right,
                            size_t right_len);
/* tokenizer.ggml.tokens (+ scores, token_type) into t->tokens, t->by_text. */
vt_status vt_vocab_load_tokens(vt_tokenizer *t, const vt_gguf *g, vt_error *err);
/* tokenizer.ggml.merges into t->merges and t->merge_index (BPE). */
vt_status vt_vocab_load_merges(vt_tokenizer *t, const vt_gguf *g, vt_error *err);
/* An optional token id key: *id set when present and inside the vocab. */
vt_status vt_vocab_read_token_id(const vt_gguf *g, const char *key, int32_t n_vocab, int32_t *id, vt_error *err);
/* An optional bool key: *out set when present. */
vt_status vt_vocab_read_bool(const vt_gguf *g, const char *key, bool *out, vt_error *err);

#endif
