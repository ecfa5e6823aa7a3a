/* token_mask.c — which tokens keep a state inside its grammar: one walk of
 * the vocabulary's trie, each byte fed to the parent's state, a subtree
 * dropped as soon as its prefix leaves the grammar. A character still
 * partial at a node shares its parent's stacks (only a complete character
 * moves them), so multi-byte characters cost one advance, not one per byte.
 *
 * Within a walk, the stack sets met are interned and the transitions
 * between them memoized (grammar_state.h: vt_walk_memory). Across steps,
 * the few states a text comes back to (inside an unbounded JSON string,
 * every character leaves the same stacks) are remembered with their masks. */
#include <stdlib.h>
#include <string.h>

#include "grammar_state.h"
#include "token_trie.h"

typedef struct walker {
    const vt_grammar *g;
    const vt_token_trie *t;
    vt_walk_level *levels;
    vt_walk_memory *mem;
    uint32_t *scratch;
    uint8_t *allowed;
    int32_t n_allowed;
} walker;

static uint32_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (uint32_t)h;
}

static vt_walk_memo *memo_slot(vt_walk_memory *m, uint32_t from, uint32_t cp, bool *found) {
    uint32_t i = mix(((uint64_t)from << 32) | cp) & (VT_WALK_MEMO_SLOTS - 1);
    for (int probe = 0; probe < 16; probe++, i = (i + 1) & (VT_WALK_MEMO_SLOTS - 1)) {
        vt_walk_memo *e = &m->memo[i];
        if (e->gen != m->gen) {
            *found = false;
            return e;
        }
        if (e->from == from && e->cp == cp) {
            *found = true;
            return e;
        }
    }
    *found = false;
    return NULL; /* crowded: not remembered */
}

/* The interned id of set s (copied in if new), or VT_WALK_NO_ID when full. */
static uint32_t intern(vt_walk_memory *m, const vt_stackset *s) {
    const uint64_t h = vt_stackset_hash(s);
    uint32_t i = mix(h) & (VT_WALK_SET_SLOTS - 1);
    for (int probe = 0; probe < 32; probe++, i = (i + 1) & (VT_WALK_SET_SLOTS - 1)) {
        vt_walk_slot *slot = &m->set_slots[i];
        if (slot->gen != m->gen) {
            if (m->n_sets >= VT_WALK_MAX_SETS || !vt_stackset_copy(&m->sets[m->n_sets], s)) return VT_WALK_NO_ID;
            m->set_hash[m->n_sets] = h;
            *slot = (vt_walk_slot){m->gen, m->n_sets};
            return m->n_sets++;
        }
        if (m->set_hash[slot->id] == h && vt_stackset_equal(&m->sets[slot->id], s)) return slot->id;
    }
    return VT_WALK_NO_ID;
}

/* next = here after code point cp; false when no stack takes it. */
static bool step_char(walker *w, const vt_walk_level *here, vt_walk_level *next, uint32_t cp) {
    vt_walk_memory *m = w->mem;
    vt_walk_memo *slot = NULL;
    if (here->id != VT_WALK_NO_ID) {
        bool found;
        slot = memo_slot(m, here->id, cp, &found);
        if (found) {
            if (slot->to == VT_WALK_DEAD) return false;
            next->id = slot->to;
            next->cur = &m->sets[slot->to];
            return true;
        }
    }
    /* out of memory leaves own empty: the subtree is refused, never wrongly allowed */
    if (!vt_stackset_advance(w->g, here->cur, cp, &next->own, w->scratch)) vt_stackset_clear(&next->own);
    uint32_t to = VT_WALK_DEAD;
    if (next->own.n > 0) {
        to = intern(m, &next->own);
        next->id = to;
        next->cur = to == VT_WALK_NO_ID ? &next->own : &m->sets[to];
    }
    if (slot && to != VT_WALK_NO_ID) *slot = (vt_walk_memo){m->gen, here->id, cp, to};
    return next->own.n > 0;
}

static void walk(walker *w, uint32_t node, uint32_t depth) {
    const vt_trie_node *nd = &w->t->nodes[node];
    const vt_walk_level *here = &w->levels[depth];
    vt_walk_level *next = &w->levels[depth + 1];
    for (uint32_t c = nd->child_begin; c < nd->child_begin + nd->n_children; c++) {
        const vt_trie_node *child = &w->t->nodes[c];
        next->partial = here->partial;
        uint32_t cp = 0, lo = 0, hi = 0;
        int r = vt_utf8_step(&next->partial, child->byte, &cp, &lo, &hi);
        if (r == VT_UTF8_INVALID) continue;
        if (r == VT_UTF8_COMPLETE) {
            if (!step_char(w, here, next, cp)) continue;
        } else {
            if (!vt_stackset_admits(w->g, here->cur, lo, hi)) continue;
            next->cur = here->cur;
            next->id = here->id;
        }
        for (uint32_t k = 0; k < child->n_tok; k++) w->allowed[w->t->ids[child->tok_begin + k]] = 1;
        w->n_allowed += (int32_t)child->n_tok;
        if (child->n_children) walk(w, c, depth + 1);
    }
}

static void free_memory(vt_walk_memory *m) {
    for (uint32_t i = 0; m->sets && i < VT_WALK_MAX_SETS; i++) vt_stackset_free(&m->sets[i]);
    free(m->sets);
    free(m->set_hash);
    free(m->set_slots);
    free(m->memo);
    memset(m, 0, sizeof *m);
}

/* A fresh walk's memory: allocated once per state, emptied by a new stamp. */
static bool begin_memory(vt_walk_memory *m) {
    if (!m->sets) {
        m->sets = calloc(VT_WALK_MAX_SETS, sizeof *m->sets);
        m->set_hash = calloc(VT_WALK_MAX_SETS, sizeof *m->set_hash);
        m->set_slots = calloc(VT_WALK_SET_SLOTS, sizeof *m->set_slots);
        m->memo = calloc(VT_WALK_MEMO_SLOTS, sizeof *m->memo);
        if (!m->sets || !m->set_hash || !m->set_slots || !m->memo) {
            free_memory(m);
            return false;
        }
    }
    m->n_sets = 0;
    if (++m->gen == 0) { /* the stamp wrapped: clear for real */
        memset(m->set_slots, 0, VT_WALK_SET_SLOTS * sizeof *m->set_slots);
        memset(m->memo, 0, VT_WALK_MEMO_SLOTS * sizeof *m->memo);
        m->gen = 1;
    }
    return true;
}

void vt_grammar_mask_scratch_free(vt_grammar_state *s) {
    free_memory(&s->memory);
    for (int32_t i = 0; i < s->n_levels; i++) vt_stackset_free(&s->levels[i].own);
    free(s->levels);
    s->levels = NULL;
    s->n_levels = 0;
    for (int i = 0; i < VT_MASK_CACHE_ENTRIES; i++) {
        vt_stackset_free(&s->cache[i].key);
        free(s->cache[i].allowed);
    }
    memset(s->cache, 0, sizeof s->cache);
}

static uint64_t state_hash(const vt_grammar_state *s) {
    return vt_stackset_hash(&s->cur) ^ ((uint64_t)s->partial.value << 20) ^ ((uint64_t)s->partial.need << 8) ^
           s->partial.lead;
}

static bool same_partial(vt_utf8_partial a, vt_utf8_partial b) {
    return a.value == b.value && a.need == b.need && a.seen == b.seen && a.lead == b.lead;
}

static int32_t walk_state(vt_grammar_state *s, const vt_token_trie *t, uint8_t *allowed) {
    memset(allowed, 0, (size_t)t->n_vocab);
    if (s->dead) return 0;
    const int32_t need = (int32_t)t->max_len + 1;
    if (s->n_levels < need) {
        vt_walk_level *lv = realloc(s->levels, (size_t)need * sizeof *lv);
        if (!lv) return 0;
        memset(lv + s->n_levels, 0, (size_t)(need - s->n_levels) * sizeof *lv);
        s->levels = lv;
        s->n_levels = need;
    }
    if (!begin_memory(&s->memory)) return 0;
    s->levels[0].cur = &s->cur;
    s->levels[0].id = intern(&s->memory, &s->cur);
    s->levels[0].partial = s->partial;
    walker w = {s->g, t, s->levels, &s->memory, s->scratch, allowed, 0};
    walk(&w, 0, 0);
    return w.n_allowed;
}

int32_t vt_grammar_mask(vt_grammar_state *s, const vt_token_trie *t, uint8_t *allowed) {
    if (s->cache_vocab != t->n_vocab) { /* another vocabulary: nothing remembered applies */
        for (int i = 0; i < VT_MASK_CACHE_ENTRIES; i++) {
            vt_stackset_free(&s->cache[i].key);
            free(s->cache[i].allowed);
        }
        memset(s->cache, 0, sizeof s->cache);
        s->cache_vocab = t->n_vocab;
    }
    const uint64_t h = state_hash(s);
    s->cache_clock++;
    for (int i = 0; i < VT_MASK_CACHE_ENTRIES; i++) {
        vt_mask_cache_entry *e = &s->cache[i];
        if (e->used && e->hash == h && same_partial(e->partial, s->partial) && vt_stackset_equal(&e->key, &s->cur)) {
            e->stamp = s->cache_clock;
            memcpy(allowed, e->allowed, (size_t)t->n_vocab);
            return e->n_allowed;
        }
    }
    const int32_t n = walk_state(s, t, allowed);
    /* remember it in the least recently used entry */
    vt_mask_cache_entry *victim = &s->cache[0];
    for (int i = 1; i < VT_MASK_CACHE_ENTRIES; i++)
        if (!s->cache[i].used || (victim->used && s->cache[i].stamp < victim->stamp)) victim = &s->cache[i];
    if (!victim->allowed) victim->allowed = malloc((size_t)t->n_vocab);
    if (victim->allowed && vt_stackset_copy(&victim->key, &s->cur)) {
        memcpy(victim->allowed, allowed, (size_t)t->n_vocab);
        victim->used = true;
        victim->hash = h;
        victim->stamp = s->cache_clock;
        victim->partial = s->partial;
        victim->n_allowed = n;
    } else {
        victim->used = false;
    }
    return n;
}
