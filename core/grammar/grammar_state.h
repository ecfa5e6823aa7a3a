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
    const vt_stackset *cur;  /* own, an interned set, or an ancestor's when the character is still partial */
    uint32_t id;             /* cur's index among the interned sets, or VT_WALK_NO_ID */
    vt_utf8_partial partial;
} vt_walk_level;

#define VT_WALK_NO_ID UINT32_MAX
#define VT_WALK_DEAD (UINT32_MAX - 1)
/* Sets remembered during one walk, and the transitions between them. */
#define VT_WALK_MAX_SETS 8192
#define VT_WALK_MEMO_SLOTS 32768 /* a power of two */
#define VT_WALK_SET_SLOTS 16384  /* a power of two, twice the sets */

typedef struct vt_walk_memo {
    uint32_t gen, from, cp, to; /* to: an interned id or VT_WALK_DEAD */
} vt_walk_memo;

typedef struct vt_walk_slot {
    uint32_t gen, id;
} vt_walk_slot;

/* Many trie paths reach the same stacks (inside a string every character
 * leads to the same set, or to the same set for its count): a walk interns
 * the sets it meets and memoizes (set, code point) -> set, so a transition
 * already seen costs a lookup instead of an expansion. Fixed arrays, so
 * pointers to interned sets stay valid; past their capacity the walk
 * computes without remembering. */
typedef struct vt_walk_memory {
    vt_stackset *sets; /* [VT_WALK_MAX_SETS], their arrays kept from walk to walk */
    uint64_t *set_hash;
    uint32_t n_sets;
    vt_walk_slot *set_slots; /* [VT_WALK_SET_SLOTS] open addressing: hash -> id */
    vt_walk_memo *memo;      /* [VT_WALK_MEMO_SLOTS] open addressing: (id, cp) -> id */
    uint32_t gen;            /* this walk's stamp: slots of another walk are empty */
} vt_walk_memory;

struct vt_grammar_state {
    const vt_grammar *g;
    vt_stackset cur, next;
    vt_utf8_partial partial;
    bool dead;
    uint32_t *scratch; /* [VT_STACK_SCRATCH] */
    /* the mask's own scratch and cache (never copied by clone) */
    vt_walk_level *levels;
    int32_t n_levels;
    vt_walk_memory memory;
    int32_t cache_vocab;
    uint64_t cache_clock;
    vt_mask_cache_entry cache[VT_MASK_CACHE_ENTRIES];
};

void vt_grammar_mask_scratch_free(vt_grammar_state *s);

#endif
