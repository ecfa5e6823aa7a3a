/* grammar_stacks.c — sets of parse stacks and how a code point advances
 * them; character sets; UTF-8 decoded one byte at a time. */
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"

/* ---- character sets ------------------------------------------------------ */

uint32_t vt_gset_end(const vt_grammar *g, uint32_t pos) {
    pos++;
    while (g->elems[pos].type == VT_G_RANGE_UPPER || g->elems[pos].type == VT_G_CHAR_ALT) pos++;
    return pos;
}

bool vt_gset_match(const vt_grammar *g, uint32_t pos, uint32_t c) {
    const vt_gelem *e = g->elems + pos;
    if (e->type == VT_G_CHAR_ANY) return true;
    const bool negated = e->type == VT_G_CHAR_NOT;
    bool found = false;
    do {
        if (e[1].type == VT_G_RANGE_UPPER) {
            found |= e->value <= c && c <= e[1].value;
            e += 2;
        } else {
            found |= e->value == c;
            e++;
        }
    } while (e->type == VT_G_CHAR_ALT);
    return found != negated;
}

bool vt_gset_match_range(const vt_grammar *g, uint32_t pos, uint32_t lo, uint32_t hi) {
    const vt_gelem *first = g->elems + pos;
    if (first->type == VT_G_CHAR_ANY) return true;
    if (first->type == VT_G_CHAR) {
        const vt_gelem *e = first;
        do {
            uint32_t a = e->value, b = e->value;
            if (e[1].type == VT_G_RANGE_UPPER) b = e[1].value, e += 2;
            else e++;
            if (a <= hi && lo <= b) return true;
        } while (e->type == VT_G_CHAR_ALT);
        return false;
    }
    /* Negated: is some code point of lo..hi outside every listed range?
     * Walk up from lo, jumping past each range that covers the candidate. */
    uint32_t c = lo;
    for (;;) {
        bool covered = false;
        const vt_gelem *e = first;
        do {
            uint32_t a = e->value, b = e->value;
            if (e[1].type == VT_G_RANGE_UPPER) b = e[1].value, e += 2;
            else e++;
            if (a <= c && c <= b) {
                covered = true;
                if (b >= hi) return false;
                c = b + 1;
            }
        } while (e->type == VT_G_CHAR_ALT);
        if (!covered) return true;
    }
}

/* ---- stack sets ---------------------------------------------------------- */

void vt_stackset_clear(vt_stackset *s) {
    s->n = 0;
    s->n_pos = 0;
}

void vt_stackset_free(vt_stackset *s) {
    free(s->pos);
    free(s->off);
    free(s->len);
    free(s->hash);
    memset(s, 0, sizeof *s);
}

static uint64_t hash_stack(const uint32_t *st, uint32_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (uint32_t i = 0; i < n; i++) {
        h ^= st[i];
        h *= 0x100000001B3ull;
        h ^= h >> 29;
    }
    return h;
}

static bool reserve(vt_stackset *s, uint32_t stacks, uint32_t positions) {
    if (s->n + stacks > s->cap || !s->off) {
        uint32_t cap = s->cap ? s->cap : 8;
        while (cap < s->n + stacks) cap *= 2;
        uint32_t *off = realloc(s->off, cap * sizeof *off);
        if (off) s->off = off;
        uint32_t *len = off ? realloc(s->len, cap * sizeof *len) : NULL;
        if (len) s->len = len;
        uint64_t *hash = len ? realloc(s->hash, cap * sizeof *hash) : NULL;
        if (!hash) return false;
        s->hash = hash;
        s->cap = cap;
    }
    if (s->n_pos + positions > s->cap_pos || !s->pos) { /* allocated even for empty stacks: pos + 0 needs an array */
        uint32_t cap = s->cap_pos ? s->cap_pos : 64;
        while (cap < s->n_pos + positions) cap *= 2;
        uint32_t *pos = realloc(s->pos, cap * sizeof *pos);
        if (!pos) return false;
        s->pos = pos;
        s->cap_pos = cap;
    }
    return true;
}

static bool contains(const vt_stackset *s, const uint32_t *st, uint32_t n, uint64_t h) {
    for (uint32_t i = 0; i < s->n; i++)
        if (s->hash[i] == h && s->len[i] == n && memcmp(s->pos + s->off[i], st, n * sizeof *st) == 0) return true;
    return false;
}

/* Add a stack unless present; past VT_GRAMMAR_MAX_STACKS it is dropped. */
static bool add_stack(vt_stackset *s, const uint32_t *st, uint32_t n) {
    const uint64_t h = hash_stack(st, n);
    if (contains(s, st, n, h) || s->n >= VT_GRAMMAR_MAX_STACKS) return true;
    if (!reserve(s, 1, n)) return false;
    s->off[s->n] = s->n_pos;
    s->len[s->n] = n;
    s->hash[s->n] = h;
    memcpy(s->pos + s->n_pos, st, n * sizeof *st);
    s->n_pos += n;
    s->n++;
    return true;
}

bool vt_stackset_copy(vt_stackset *dst, const vt_stackset *src) {
    vt_stackset_clear(dst);
    if (!reserve(dst, src->n, src->n_pos)) return false;
    if (src->n == 0) return true; /* src may never have had arrays */
    if (src->n_pos) memcpy(dst->pos, src->pos, src->n_pos * sizeof *dst->pos);
    memcpy(dst->off, src->off, src->n * sizeof *dst->off);
    memcpy(dst->len, src->len, src->n * sizeof *dst->len);
    memcpy(dst->hash, src->hash, src->n * sizeof *dst->hash);
    dst->n = src->n;
    dst->n_pos = src->n_pos;
    return true;
}

bool vt_stackset_equal(const vt_stackset *a, const vt_stackset *b) {
    if (a->n != b->n) return false;
    for (uint32_t i = 0; i < a->n; i++)
        if (!contains(b, a->pos + a->off[i], a->len[i], a->hash[i])) return false;
    return true;
}

uint64_t vt_stackset_hash(const vt_stackset *s) {
    uint64_t h = s->n; /* order-free: the same set reached along other paths hashes the same */
    for (uint32_t i = 0; i < s->n; i++) h += s->hash[i] * 0x9E3779B97F4A7C15ull;
    return h;
}

bool vt_stackset_has_empty(const vt_stackset *s) {
    for (uint32_t i = 0; i < s->n; i++)
        if (s->len[i] == 0) return true;
    return false;
}

bool vt_stackset_admits(const vt_grammar *g, const vt_stackset *s, uint32_t lo, uint32_t hi) {
    for (uint32_t i = 0; i < s->n; i++)
        if (s->len[i] > 0 && vt_gset_match_range(g, s->pos[s->off[i] + s->len[i] - 1], lo, hi)) return true;
    return false;
}

/* ---- expansion ------------------------------------------------------------ */

typedef struct expander {
    const vt_grammar *g;
    vt_stackset *out;
    uint32_t *st; /* the stack being expanded, bottom first */
    uint32_t budget;
    bool oom;
} expander;

/* Add every stack st[0..n) leads to once the rule references on its top are
 * replaced by their alternatives, until a character set (or nothing) is on top.
 * st[0..n) is as it was on return (the caller's alternatives reuse it); only
 * st[n-1] is written below n, and it is put back. */
static void expand(expander *x, uint32_t n) {
    /* a full set takes no new stack (add_stack drops them): the rest of the
     * walk could only find duplicates, at a look over the whole set each */
    if (x->oom || x->budget == 0 || x->out->n >= VT_GRAMMAR_MAX_STACKS) return;
    x->budget--;
    if (n == 0 || x->g->elems[x->st[n - 1]].type != VT_G_RULE_REF) {
        if (!add_stack(x->out, x->st, n)) x->oom = true;
        return;
    }
    const vt_grammar *g = x->g;
    const uint32_t ref = x->st[n - 1];
    const uint32_t after = ref + 1;
    const bool has_after = !vt_gelem_ends_alt(g->elems[after]);
    /* the reference is popped; what follows it in its alternative, if
     * anything, waits beneath the rule's alternative */
    const uint32_t base = has_after ? n : n - 1;
    if (base + 1 > VT_GRAMMAR_MAX_DEPTH) return;
    uint32_t alt = g->rule_start[g->elems[ref].value];
    for (;;) {
        x->st[n - 1] = has_after ? after : ref;
        if (vt_gelem_ends_alt(g->elems[alt])) {
            expand(x, base);
        } else {
            x->st[base] = alt;
            expand(x, base + 1);
        }
        while (!vt_gelem_ends_alt(g->elems[alt])) alt++;
        if (g->elems[alt].type == VT_G_END) break;
        alt++;
    }
    x->st[n - 1] = ref;
}

bool vt_stackset_init(const vt_grammar *g, vt_stackset *out, uint32_t *scratch) {
    vt_stackset_clear(out);
    /* the root rule is entered as if referenced: a RULE_REF to it is not in
     * the element array, so its alternatives are pushed here */
    expander x = {g, out, scratch, VT_GRAMMAR_MAX_EXPANSIONS, false};
    uint32_t alt = g->rule_start[g->root];
    for (;;) {
        if (vt_gelem_ends_alt(g->elems[alt])) {
            expand(&x, 0);
        } else {
            scratch[0] = alt;
            expand(&x, 1);
        }
        while (!vt_gelem_ends_alt(g->elems[alt])) alt++;
        if (g->elems[alt].type == VT_G_END) break;
        alt++;
    }
    return !x.oom;
}

bool vt_stackset_advance(const vt_grammar *g, const vt_stackset *in, uint32_t c, vt_stackset *out, uint32_t *scratch) {
    vt_stackset_clear(out);
    expander x = {g, out, scratch, VT_GRAMMAR_MAX_EXPANSIONS, false};
    for (uint32_t i = 0; i < in->n && !x.oom; i++) {
        const uint32_t n = in->len[i];
        if (n == 0) continue;
        const uint32_t *st = in->pos + in->off[i];
        const uint32_t top = st[n - 1];
        if (!vt_gset_match(g, top, c)) continue;
        memcpy(scratch, st, (n - 1) * sizeof *scratch);
        const uint32_t next = vt_gset_end(g, top);
        if (vt_gelem_ends_alt(g->elems[next])) {
            expand(&x, n - 1);
        } else {
            scratch[n - 1] = next;
            expand(&x, n);
        }
    }
    return !x.oom;
}

/* ---- UTF-8 ------------------------------------------------------------------ */

int vt_utf8_step(vt_utf8_partial *p, uint8_t b, uint32_t *cp, uint32_t *lo, uint32_t *hi) {
    if (p->need == 0) {
        if (b < 0x80) {
            *cp = b;
            return VT_UTF8_COMPLETE;
        }
        if (b >= 0xC2 && b <= 0xDF) p->need = 1, p->value = b & 0x1fu;
        else if (b >= 0xE0 && b <= 0xEF) p->need = 2, p->value = b & 0x0fu;
        else if (b >= 0xF0 && b <= 0xF4) p->need = 3, p->value = b & 0x07u;
        else return VT_UTF8_INVALID;
        p->lead = b;
        p->seen = 1;
        *lo = p->value << (6 * p->need);
        *hi = *lo | ((1u << (6 * p->need)) - 1);
        /* the second byte's bounds (Unicode's well-formed table) narrow these leads */
        if (b == 0xE0) *lo = 0x800;
        if (b == 0xED) *hi = 0xD7FF;
        if (b == 0xF0) *lo = 0x10000;
        if (b == 0xF4) *hi = 0x10FFFF;
        return VT_UTF8_PARTIAL;
    }
    uint8_t min = 0x80, max = 0xBF;
    if (p->seen == 1) {
        if (p->lead == 0xE0) min = 0xA0;
        if (p->lead == 0xED) max = 0x9F;
        if (p->lead == 0xF0) min = 0x90;
        if (p->lead == 0xF4) max = 0x8F;
    }
    if (b < min || b > max) return VT_UTF8_INVALID;
    p->value = (p->value << 6) | (b & 0x3fu);
    p->need--;
    p->seen++;
    if (p->need == 0) {
        *cp = p->value;
        p->value = 0;
        p->seen = 0;
        p->lead = 0;
        return VT_UTF8_COMPLETE;
    }
    *lo = p->value << (6 * p->need);
    *hi = *lo | ((1u << (6 * p->need)) - 1);
    return VT_UTF8_PARTIAL;
}
