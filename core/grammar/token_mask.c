/* token_mask.c — which tokens keep a state inside its grammar: one walk of
 * the vocabulary's trie, each byte fed to the parent's state, a subtree
 * dropped as soon as its prefix leaves the grammar. A character still
 * partial at a node shares its parent's stacks (only a complete character
 * moves them), so multi-byte characters cost one advance, not one per byte.
 *
 * The few states a text comes back to (inside a JSON string, every
 * character leaves the same stacks) are remembered with their masks. */
#include <stdlib.h>
#include <string.h>

#include "grammar_state.h"
#include "token_trie.h"

typedef struct walker {
    const vt_grammar *g;
    const vt_token_trie *t;
    vt_walk_level *levels;
    uint32_t *scratch;
    uint8_t *allowed;
    int32_t n_allowed;
} walker;

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
            /* out of memory leaves own empty: the subtree is refused, never wrongly allowed */
            if (!vt_stackset_advance(w->g, here->cur, cp, &next->own, w->scratch)) vt_stackset_clear(&next->own);
            if (next->own.n == 0) continue;
            next->cur = &next->own;
        } else {
            if (!vt_stackset_admits(w->g, here->cur, lo, hi)) continue;
            next->cur = here->cur;
        }
        for (uint32_t k = 0; k < child->n_tok; k++) w->allowed[w->t->ids[child->tok_begin + k]] = 1;
        w->n_allowed += (int32_t)child->n_tok;
        if (child->n_children) walk(w, c, depth + 1);
    }
}

void vt_grammar_mask_scratch_free(vt_grammar_state *s) {
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
    s->levels[0].cur = &s->cur;
    s->levels[0].partial = s->partial;
    walker w = {s->g, t, s->levels, s->scratch, allowed, 0};
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
