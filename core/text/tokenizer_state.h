/* tokenizer_state.h — the tokenizer's state: the vocabulary's tables and
 * the settings read from the GGUF. The types alone, below every file that
 * fills or reads them (vocab.c, tokenizer.c, tokenizer_special.c,
 * tokenizer_decode.c and the two encoders), so the vocabulary's code does
 * not depend on the tokenizer's interface (tokenizer.h) to see them.
 * Private to the core. */
#ifndef VT_CORE_TOKENIZER_STATE_H
#define VT_CORE_TOKENIZER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The same typedef as tokenizer.h's (C11 allows it twice). */
typedef struct vt_tokenizer vt_tokenizer;

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

#endif
