/* grammar_state.h — the state's layout, shared by grammar_state.c and the
 * mask (token_mask.c); users see only grammar.h's opaque type. */
#ifndef VT_CORE_GRAMMAR_STATE_H
#define VT_CORE_GRAMMAR_STATE_H

#include "grammar_internal.h"

/* One remembered mask: the state it was computed for and its answer. */
typedef struct vt_mask_cache_entry {
    bool used;
    uint64_t hash, stamp;
    vt_stackset key;
    vt_utf8_partial partial;
    uint8_t *allowed; /* [n_vocab] */
    int32_t n_allowed;
} vt_mask_cache_entry;

#define VT_MASK_CACHE_ENTRIES 4

/* The trie walk's state at one depth (one byte into the tokens). */
typedef struct vt_walk_level {
    vt_stackset own;         /* the stacks after this byte, when it completed a character */
    const vt_stackset *cur;  /* own, or an ancestor's when the character is still partial */
    vt_utf8_partial partial;
} vt_walk_level;

struct vt_grammar_state {
    const vt_grammar *g;
    vt_stackset cur, next;
    vt_utf8_partial partial;
    bool dead;
    uint32_t *scratch; /* [VT_STACK_SCRATCH] */
    /* the mask's own scratch and cache (never copied by clone) */
    vt_walk_level *levels;
    int32_t n_levels;
    int32_t cache_vocab;
    uint64_t cache_clock;
    vt_mask_cache_entry cache[VT_MASK_CACHE_ENTRIES];
};

void vt_grammar_mask_scratch_free(vt_grammar_state *s);

#endif
