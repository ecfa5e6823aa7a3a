/* logprobs.h — log-probabilities of a row of logits, as OpenAI reports them:
 * the log-softmax of the model's raw logits (no temperature, no penalties,
 * no filter), for the sampled token and for the few most likely ones.
 *
 * Cheap enough to run per token for the requests that ask: one pass keeps
 * the top n in a small heap (no sort of the vocabulary), one pass sums
 * exp(logit - max) for the log-sum-exp. NaN logits are never among the top
 * and count as probability 0. */
#ifndef VT_CORE_LOGPROBS_H
#define VT_CORE_LOGPROBS_H

#include <stdint.h>

#include "vt/vt.h"

/* log(sum_i exp(logits[i])) over the non-NaN logits of logits[n]; -inf when
 * there are none (or all are -inf), +inf when one is +inf. */
double vt_logits_lse(const float *logits, int32_t n);

/* The k (0..VT_BATCH_MAX_TOP_LOGPROBS) most likely ids of logits[n], best first
 * (ties to the lower id), each with logits[id] - lse: top[0..returned). Fewer
 * than k when fewer non-NaN logits exist. */
int32_t vt_top_logprobs(const float *logits, int32_t n, int32_t k, double lse, vt_token_logprob *top);

#endif
