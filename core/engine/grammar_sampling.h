/* grammar_sampling.h — sampling one request's tokens under a grammar.
 *
 * Before each draw the tokens whose bytes would leave the grammar are
 * excluded (in the request's own copy of its logits row); the request's sampler
 * (penalties, top-k/p, min-p, temperature or greedy) then draws from what
 * remains. The request's stop ids are allowed exactly where the grammar may
 * end. The state advances by the drawn token's bytes; once the grammar is
 * complete and admits no further byte, the request is done.
 *
 * Everything here reads the request's own state and the shared, read-only
 * vocabulary trie, so requests sample in parallel and a request's tokens do
 * not depend on what else shares its step. */
#ifndef VT_CORE_GRAMMAR_SAMPLING_H
#define VT_CORE_GRAMMAR_SAMPLING_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "grammar.h"
#include "sampler.h"

typedef struct vt_grammar_sampling vt_grammar_sampling;

/* What vt_grammar_sampling_draw returns when no token of the vocabulary (nor
 * a stop id) can continue the grammar. */
#define VT_GRAMMAR_NO_TOKEN (-2)

/* Compile gbnf for a vocabulary of n_vocab ids. Errors as vt_grammar_parse. */
vt_status vt_grammar_sampling_create(const char *gbnf, int32_t n_vocab, vt_grammar_sampling **out, vt_error *err);
void vt_grammar_sampling_free(vt_grammar_sampling *g);

/* Draw one id from logits[n_vocab] with sampler s (history: the tokens
 * generated so far, for the penalties) among the ids the grammar allows. */
int32_t vt_grammar_sampling_draw(vt_grammar_sampling *g, const vt_token_trie *trie, vt_sampler *s, const float *logits,
                                 const int32_t *history, int64_t n_history, const int32_t *stop_ids,
                                 int32_t n_stop_ids);

/* Advance by a drawn token's bytes (false if they leave the grammar, which
 * a drawn token never does). */
bool vt_grammar_sampling_accept(vt_grammar_sampling *g, const char *bytes, int32_t n);
/* The grammar is complete and admits nothing more. */
bool vt_grammar_sampling_done(const vt_grammar_sampling *g);

#endif
