/* grammar_state.c — one generated text's place in its grammar: the parse
 * stacks plus a partial UTF-8 character; fed bytes, asked whether it may end. */
#include <stdlib.h>
#include <string.h>

#include "grammar_state.h"

vt_status vt_grammar_state_create(const vt_grammar *g, vt_grammar_state **out, vt_error *err) {
    *out = NULL;
    vt_grammar_state *s = calloc(1, sizeof *s);
    if (!s || !(s->scratch = malloc(VT_STACK_SCRATCH * sizeof *s->scratch)) ||
        !vt_stackset_init(g, &s->cur, s->scratch)) {
        vt_grammar_state_free(s);
        return vt_fail(err, VT_ERR_NOMEM, "grammar: out of memory for the parse state");
    }
    s->g = g;
    s->dead = s->cur.n == 0;
    *out = s;
    return VT_OK;
}

void vt_grammar_state_free(vt_grammar_state *s) {
    if (!s) return;
    vt_stackset_free(&s->cur);
    vt_stackset_free(&s->next);
    free(s->scratch);
    vt_grammar_mask_scratch_free(s);
    free(s);
}

vt_grammar_state *vt_grammar_state_clone(const vt_grammar_state *s) {
    vt_grammar_state *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->g = s->g;
    c->partial = s->partial;
    c->dead = s->dead;
    if (!(c->scratch = malloc(VT_STACK_SCRATCH * sizeof *c->scratch)) || !vt_stackset_copy(&c->cur, &s->cur)) {
        vt_grammar_state_free(c);
        return NULL;
    }
    return c;
}

static bool feed_byte(vt_grammar_state *s, uint8_t b) {
    uint32_t cp = 0, lo = 0, hi = 0;
    switch (vt_utf8_step(&s->partial, b, &cp, &lo, &hi)) {
    case VT_UTF8_COMPLETE: {
        if (!vt_stackset_advance(s->g, &s->cur, cp, &s->next, s->scratch)) return false;
        vt_stackset t = s->cur;
        s->cur = s->next;
        s->next = t;
        return s->cur.n > 0;
    }
    case VT_UTF8_PARTIAL: return vt_stackset_admits(s->g, &s->cur, lo, hi);
    default: return false;
    }
}

bool vt_grammar_state_feed(vt_grammar_state *s, const void *bytes, size_t n) {
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n && !s->dead; i++)
        if (!feed_byte(s, b[i])) s->dead = true;
    if (s->dead) vt_stackset_clear(&s->cur);
    return !s->dead;
}

bool vt_grammar_state_can_end(const vt_grammar_state *s) {
    return !s->dead && s->partial.need == 0 && vt_stackset_has_empty(&s->cur);
}

bool vt_grammar_state_done(const vt_grammar_state *s) {
    return vt_grammar_state_can_end(s) && s->cur.n == 1;
}

bool vt_grammar_state_dead(const vt_grammar_state *s) { return s->dead; }
