/* grammar_internal.h — the compiled grammar shared by the parser, the state
 * and the mask (not for users of grammar.h).
 *
 * The layout is llama.cpp's: every rule is a run of elements, its
 * alternatives separated by ALT and ended by END; a character set is a CHAR
 * or CHAR_NOT element, optionally followed by RANGE_UPPER (making the
 * previous one a range) and CHAR_ALT elements adding more characters or
 * ranges. All rules live in one array so that a parse position is one
 * index. */
#ifndef VT_CORE_GRAMMAR_INTERNAL_H
#define VT_CORE_GRAMMAR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar.h"

typedef enum vt_gtype {
    VT_G_END = 0,     /* end of a rule */
    VT_G_ALT,         /* start of another alternative */
    VT_G_RULE_REF,    /* value: the rule's index */
    VT_G_CHAR,        /* value: a code point; starts a set */
    VT_G_CHAR_NOT,    /* value: a code point; starts a negated set */
    VT_G_RANGE_UPPER, /* value: the upper end of the range the previous element starts */
    VT_G_CHAR_ALT,    /* value: one more code point of the set */
    VT_G_CHAR_ANY,    /* any code point ('.') */
} vt_gtype;

typedef struct vt_gelem {
    uint32_t type;
    uint32_t value;
} vt_gelem;

struct vt_grammar {
    vt_gelem *elems;
    uint32_t n_elems;
    uint32_t *rule_start; /* [n_rules] index of each rule's first element */
    uint32_t n_rules;
    uint32_t root;
};

static inline bool vt_gelem_ends_alt(vt_gelem e) { return e.type == VT_G_END || e.type == VT_G_ALT; }
static inline bool vt_gelem_is_char(vt_gelem e) {
    return e.type == VT_G_CHAR || e.type == VT_G_CHAR_NOT || e.type == VT_G_CHAR_ANY;
}

/* Does the set starting at pos contain c? Does it contain any of lo..hi? */
bool vt_gset_match(const vt_grammar *g, uint32_t pos, uint32_t c);
bool vt_gset_match_range(const vt_grammar *g, uint32_t pos, uint32_t lo, uint32_t hi);
/* The position after the set starting at pos. */
uint32_t vt_gset_end(const vt_grammar *g, uint32_t pos);

#endif

/* ---- stacks (grammar_stacks.c) ----------------------------------------- */

/* A set of parse stacks, each a run of element positions (bottom first, the
 * top a character set), without duplicates. */
typedef struct vt_stackset {
    uint32_t *pos; /* every stack's positions, one after another */
    uint32_t n_pos, cap_pos;
    uint32_t *off, *len;
    uint64_t *hash;
    uint32_t n, cap;
} vt_stackset;

void vt_stackset_clear(vt_stackset *s);
void vt_stackset_free(vt_stackset *s);
bool vt_stackset_copy(vt_stackset *dst, const vt_stackset *src);
bool vt_stackset_equal(const vt_stackset *a, const vt_stackset *b);
uint64_t vt_stackset_hash(const vt_stackset *s);

/* Scratch one expansion needs (VT_GRAMMAR_MAX_DEPTH + 2 positions). */
#define VT_STACK_SCRATCH (VT_GRAMMAR_MAX_DEPTH + 2)

/* out = the stacks before any character (the root rule expanded). */
bool vt_stackset_init(const vt_grammar *g, vt_stackset *out, uint32_t *scratch);
/* out = the stacks of in after code point c (cleared first; empty if c
 * matches no stack). False only when out of memory. */
bool vt_stackset_advance(const vt_grammar *g, const vt_stackset *in, uint32_t c, vt_stackset *out, uint32_t *scratch);
/* Some stack's top admits a code point in lo..hi. */
bool vt_stackset_admits(const vt_grammar *g, const vt_stackset *s, uint32_t lo, uint32_t hi);
bool vt_stackset_has_empty(const vt_stackset *s);

/* ---- UTF-8, one byte at a time ------------------------------------------ */

/* A character begun but not finished: the bits so far, the continuation
 * bytes still needed, and its lead byte (which bounds the next byte). */
typedef struct vt_utf8_partial {
    uint32_t value;
    uint8_t need, seen, lead;
} vt_utf8_partial;

enum { VT_UTF8_INVALID = -1, VT_UTF8_PARTIAL = 0, VT_UTF8_COMPLETE = 1 };

/* Feed byte b: COMPLETE with *cp, PARTIAL with the code points the
 * character can still become in *lo..*hi (well-formed ones only: no
 * overlong form, no surrogate, nothing above U+10FFFF), or INVALID. */
int vt_utf8_step(vt_utf8_partial *p, uint8_t b, uint32_t *cp, uint32_t *lo, uint32_t *hi);
