/* token_trie.h — the trie's layout, shared by its builder (token_trie.c)
 * and the mask's walk (token_mask.c). */
#ifndef VT_CORE_TOKEN_TRIE_H
#define VT_CORE_TOKEN_TRIE_H

#include "grammar.h"

/* A node: the byte that leads to it, its children (contiguous, ascending
 * bytes) and the tokens whose text ends here (ids[tok_begin..+n_tok)). */
typedef struct vt_trie_node {
    uint32_t child_begin, n_children;
    uint32_t tok_begin, n_tok;
    uint8_t byte;
} vt_trie_node;

struct vt_token_trie {
    vt_trie_node *nodes; /* [0] is the root (the empty prefix) */
    uint32_t n_nodes;
    int32_t *ids;
    int32_t n_vocab;
    uint32_t max_len; /* the longest token, in bytes */
};

#endif
