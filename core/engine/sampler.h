/* sampler.h — pick the next token from a row of logits.
 *
 * The filters follow llama.cpp's default chain order: top-k, then top-p, then
 * min-p (the last two on the untempered distribution), then temperature, then
 * one draw from the renormalized softmax. temp <= 0 is greedy: the argmax,
 * ties going to the lowest id (what llama.cpp's goldens do).
 *
 * Every filter keeps a prefix of the candidates sorted by logit (descending,
 * ties by ascending id) and never keeps fewer than one token. The random stream
 * is a seeded xorshift64* generator: the same seed and the same logits give the
 * same tokens on every machine.
 *
 * Threads: a sampler owns its random stream and scratch and touches no
 * shared state, so different samplers may draw at the same time on
 * different threads (the scheduler samples a step's sequences in parallel);
 * one sampler is used by one thread at a time. */
#ifndef VT_CORE_SAMPLER_H
#define VT_CORE_SAMPLER_H

#include <stdint.h>

#include "error.h"

typedef struct vt_sampler_params {
    float temp;    /* <= 0: greedy argmax */
    int32_t top_k; /* <= 0: off */
    float top_p;   /* >= 1: off; keep the smallest prefix whose probability reaches top_p */
    float min_p;   /* <= 0: off; keep tokens with p >= min_p * p_max */
    uint64_t seed;
} vt_sampler_params;

typedef struct vt_sampler vt_sampler;

/* Greedy (temp 0), filters off, seed 0. */
vt_sampler_params vt_sampler_default_params(void);

vt_status vt_sampler_create(const vt_sampler_params *params, vt_sampler **out, vt_error *err);
void vt_sampler_free(vt_sampler *s);

/* OpenAI's repetition penalties over the tokens generated so far (the
 * history given to vt_sampler_sample_after): a token seen count > 0 times
 * gets logit -= presence + frequency * count, before any filter and in greedy
 * mode too. Both 0 (the default) is off. n_vocab sizes the scratch the
 * counting needs, allocated here so sampling never fails for memory. */
vt_status vt_sampler_set_penalties(vt_sampler *s, float presence, float frequency, int32_t n_vocab, vt_error *err);

/* Restart the random stream as if freshly created with this seed. */
void vt_sampler_reseed(vt_sampler *s, uint64_t seed);

/* Sample one id in [0, n) from logits[n]. Returns -1 if n <= 0 or logits is
 * NULL. NaN logits are never chosen (unless every logit is NaN: then 0). */
int32_t vt_sampler_sample(vt_sampler *s, const float *logits, int32_t n);

/* vt_sampler_sample after the penalties over history[n_history] (the
 * tokens generated so far), when set; logits is not modified. */
int32_t vt_sampler_sample_after(vt_sampler *s, const float *logits, int32_t n, const int32_t *history,
                                int64_t n_history);

/* The distribution vt_sampler_sample draws from: probs[n] gets the filtered,
 * tempered, renormalized probability of every id (0 for excluded ids; for
 * greedy, 1 at the argmax). For tests and for callers that want the numbers. */
vt_status vt_sampler_probs(vt_sampler *s, const float *logits, int32_t n, float *probs, vt_error *err);

/* Greedy argmax of logits[n], ties to the lowest id; -1 if n <= 0. */
int32_t vt_argmax(const float *logits, int32_t n);

#endif
