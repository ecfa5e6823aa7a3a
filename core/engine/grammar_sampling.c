/* grammar_sampling.c — see grammar_sampling.h. */
#include "grammar_sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct vt_grammar_sampling {
    vt_grammar *grammar;
    vt_grammar_state *state;
    int32_t n_vocab;
    uint8_t *allowed; /* [n_vocab] this step's mask */
    float *masked;    /* [n_vocab] the logits with disallowed ids at -inf */
};

vt_status vt_grammar_sampling_create(const char *gbnf, int32_t n_vocab, vt_grammar_sampling **out, vt_error *err) {
    *out = NULL;
    vt_grammar_sampling *g = calloc(1, sizeof *g);
    if (!g) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    vt_status st = vt_grammar_parse(gbnf, strlen(gbnf), &g->grammar, err);
    if (st == VT_OK) st = vt_grammar_state_create(g->grammar, &g->state, err);
    if (st == VT_OK) {
        g->n_vocab = n_vocab;
        g->allowed = malloc((size_t)n_vocab);
        g->masked = malloc((size_t)n_vocab * sizeof *g->masked);
        if (!g->allowed || !g->masked) st = vt_fail(err, VT_ERR_NOMEM, "grammar: out of memory for %d ids", n_vocab);
    }
    if (st != VT_OK) {
        vt_grammar_sampling_free(g);
        return st;
    }
    *out = g;
    return VT_OK;
}

void vt_grammar_sampling_free(vt_grammar_sampling *g) {
    if (!g) return;
    vt_grammar_state_free(g->state);
    vt_grammar_free(g->grammar);
    free(g->allowed);
    free(g->masked);
    free(g);
}

int32_t vt_grammar_sampling_draw(vt_grammar_sampling *g, const vt_token_trie *trie, vt_sampler *s, const float *logits,
                                 const int32_t *history, int64_t n_history, const int32_t *stop_ids,
                                 int32_t n_stop_ids) {
    const int32_t n = g->n_vocab;
    int32_t n_allowed = vt_grammar_mask(g->state, trie, g->allowed);
    /* a stop id ends the text: allowed where the grammar may end, whatever its bytes */
    const bool can_end = vt_grammar_state_can_end(g->state);
    for (int32_t i = 0; i < n_stop_ids; i++) {
        const int32_t id = stop_ids[i];
        if (id < 0 || id >= n) continue;
        n_allowed += (int32_t)can_end - (int32_t)g->allowed[id];
        g->allowed[id] = can_end;
    }
    if (n_allowed <= 0) return VT_GRAMMAR_NO_TOKEN;
    /* Excluded ids become NaN, which the sampler never draws and leaves out
     * before sorting (sampler.h): as -inf they would still be sorted with the
     * rest, a whole-vocabulary sort for every temperature draw. */
    for (int32_t i = 0; i < n; i++) g->masked[i] = g->allowed[i] ? logits[i] : NAN;
    int32_t id = vt_sampler_sample_after(s, g->masked, n, history, n_history);
    if (id >= 0 && id < n && g->allowed[id]) return id;
    /* Every allowed logit NaN (a broken row): the sampler then returns id 0.
     * The best allowed id, lowest first, keeps the draw in the grammar. */
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (g->allowed[i] && (best < 0 || logits[i] > logits[best])) best = i;
    return best;
}

bool vt_grammar_sampling_accept(vt_grammar_sampling *g, const char *bytes, int32_t n) {
    return n <= 0 || vt_grammar_state_feed(g->state, bytes, (size_t)n);
}

bool vt_grammar_sampling_done(const vt_grammar_sampling *g) { return vt_grammar_state_done(g->state); }
