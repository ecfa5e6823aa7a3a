/* tokenizer_internal.h — the tokenizer's state, shared by vocab.c (the
 * vocabulary and its lookups), tokenizer.c (loading, special-token
 * splitting, dispatch), tokenizer_special.c, tokenizer_decode.c and the two
 * encoders. Private to the core. */
#ifndef VT_CORE_TOKENIZER_INTERNAL_H
#define VT_CORE_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

/* Token attributes, as llama.cpp derives them from tokenizer.ggml.token_type
 * (and then adjusts by token text, see tokenizer.c). */
enum {
    VT_TOKEN_ATTR_UNDEFINED = 0,
    VT_TOKEN_ATTR_UNKNOWN = 1 << 0,
    VT_TOKEN_ATTR_UNUSED = 1 << 1,
    VT_TOKEN_ATTR_NORMAL = 1 << 2,
    VT_TOKEN_ATTR_CONTROL = 1 << 3,
    VT_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    VT_TOKEN_ATTR_BYTE = 1 << 5,
    VT_TOKEN_ATTR_LSTRIP = 1 << 7, /* strip whitespace before the token when matching it in text */
    VT_TOKEN_ATTR_RSTRIP = 1 << 8, /* ... and after it */
};

typedef enum vt_vocab_type { VT_VOCAB_SPM, VT_VOCAB_BPE } vt_vocab_type;

/* BPE pre-tokenizers we implement (tokenizer.ggml.pre). */
typedef enum vt_bpe_pre {
    VT_BPE_PRE_QWEN2,  /* qwen2 / qwen3: \p{N} one digit per pre-token */
    VT_BPE_PRE_LLAMA3, /* llama 3: \p{N}{1,3} */
} vt_bpe_pre;

typedef struct vt_token_data {
    const char *text; /* NUL-terminated, in the tokenizer's arena */
    uint32_t len;
    uint32_t attr;
    float score;
} vt_token_data;

/* Open-addressing hash set of byte strings -> index; slots hold index + 1. */
typedef struct vt_str_index {
    uint32_t *slots;
    uint32_t mask; /* capacity - 1, capacity a power of two */
} vt_str_index;

/* One BPE merge "first second": the pair's rank is its position in the list. */
typedef struct vt_bpe_merge {
    const char *text; /* "first second", in merge_arena */
    uint32_t first_len;
    uint32_t second_len;
} vt_bpe_merge;

struct vt_tokenizer {
    vt_vocab_type type;
    vt_bpe_pre pre;
    int32_t n_vocab;
    vt_token_data *tokens; /* [n_vocab] */
    char *arena;           /* token texts */
    vt_str_index by_text;  /* token text -> id */

    int32_t bos, eos, eot, eom, unk; /* -1 when absent */
    bool add_bos, add_eos;
    bool add_space_prefix; /* SPM: prefix " " to text at the start and after a special token */
    bool clean_spaces;     /* detokenizer's clean_up_tokenization_spaces */
    bool ignore_merges;    /* BPE: a whole pre-token in the vocab is emitted as is */

    int32_t *eog; /* sorted ids that end generation */
    size_t n_eog;

    /* CONTROL, USER_DEFINED and UNKNOWN ids, longest text first (ties: lower id),
     * the order llama.cpp splits text on them. */
    int32_t *special;
    size_t n_special;

    int32_t byte_token[256]; /* SPM: id of <0xNN> (or of the raw byte), -1 if absent */
    /* SPM: no token has U+2581 right after something other than U+2581, so no
     * merge can cross into a space that follows a non-space: such positions
     * split the text into independent chunks (same result, small queues). */
    bool spm_chunk_at_spaces;

    /* BPE merges */
    vt_bpe_merge *merges; /* [n_merges], rank = index */
    uint32_t n_merges;
    char *merge_arena;
    vt_str_index merge_index; /* keyed by the (first, second) pair */
};

/* Growable list of token ids. */
typedef struct vt_id_list {
    int32_t *ids;
    size_t n, cap;
} vt_id_list;

/* ---- vocab.c: the vocabulary and its lookups ---- */

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

/* 64-bit FNV-1a, continued from h (start with VT_FNV_OFFSET). */
#define VT_FNV_OFFSET 0xcbf29ce484222325ull
static inline uint64_t vt_fnv1a(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Encode one text fragment (no special tokens in it) and append the ids.
 * SPM: text is already space-escaped (" " -> U+2581) and prefixed. */
/* Loading steps that decide which tokens are special (tokenizer_special.c):
 * fix up token types by text and build the end-of-generation set (fim ids as
 * read from the GGUF, -1 when absent); list CONTROL/USER_DEFINED/UNKNOWN ids
 * longest first; set per-model LSTRIP/RSTRIP. */
vt_status vt_special_apply_heuristics(vt_tokenizer *t, const int32_t fim_ids_from_gguf[6], vt_error *err);
vt_status vt_special_build_list(vt_tokenizer *t, vt_error *err);
void vt_special_apply_name_attrs(vt_tokenizer *t, const vt_gguf *g);

/* Whether t's vocab allows spm_chunk_at_spaces. */
bool vt_spm_spaces_bound_merges(const vt_tokenizer *t);
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
