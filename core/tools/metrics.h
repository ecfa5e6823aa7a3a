/* metrics.h — how far two backends' logits are apart, and how good a model is
 * at predicting text: pure functions over logit rows, no engine, no I/O.
 *
 * A "row" is the [n_vocab] logits of one position. Probabilities are the
 * softmax of a row, computed in double with the max subtracted, so large or
 * shifted logits do not overflow and a row shifted by a constant has the same
 * distribution. */
#ifndef VT_CORE_METRICS_H
#define VT_CORE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* log(sum_i exp(x_i)) of one row, stable. n >= 1. */
double vt_log_sum_exp(const float *x, int64_t n);

/* KL(P || Q) in nats, P = softmax(p_logits) (the reference), Q =
 * softmax(q_logits) (the backend under test). >= 0 up to rounding (clamped at
 * 0), 0 for identical rows. Terms with P = 0 contribute nothing. */
double vt_kl_divergence(const float *p_logits, const float *q_logits, int64_t n);

/* -log softmax(logits)[target], in nats. */
double vt_nll(const float *logits, int64_t n, int32_t target);

/* Running comparison of a backend's rows against the reference's. */
typedef struct vt_logit_stats {
    double max_abs_dlogit;  /* max over every element of every row of |a - b| */
    double sum_abs_dlogit;  /* sum of |a - b| (mean = sum / n_values) */
    int64_t n_values;
    int64_t n_rows;
    int64_t top1_agree;     /* rows whose argmax (lowest id on ties) matches */
    double kl_sum, kl_max;  /* KL(reference || backend) per row */
} vt_logit_stats;

void vt_logit_stats_init(vt_logit_stats *s);
/* Add one row: ref = reference logits, got = backend's, both [n]. */
void vt_logit_stats_add(vt_logit_stats *s, const float *ref, const float *got, int64_t n);
double vt_logit_stats_mean_abs(const vt_logit_stats *s);   /* 0 with no rows */
double vt_logit_stats_top1(const vt_logit_stats *s);       /* fraction 0..1; 1 with no rows */
double vt_logit_stats_kl_mean(const vt_logit_stats *s);    /* 0 with no rows */

/* Leading tokens two sequences share (greedy continuations). */
int64_t vt_common_prefix(const int32_t *a, const int32_t *b, int64_t n);

/* Perplexity chunked like llama-perplexity: the text's tokens are cut into
 * n_chunks = n_tokens / n_ctx consecutive chunks of n_ctx tokens (the tail
 * that does not fill a chunk is dropped); each chunk is evaluated on its own
 * (fresh sequence, its first token replaced by BOS when the vocabulary adds
 * one), and only the second half is scored: logits at positions
 * first = n_ctx / 2 .. n_ctx - 2 predict tokens first + 1 .. n_ctx - 1, so
 * every scored token has at least n_ctx / 2 tokens of context.
 * ppl = exp(mean NLL over every scored token). */
typedef struct vt_ppl {
    double nll_sum;
    int64_t n_scored;
} vt_ppl;

/* Position of the first scored logit row of a chunk (n_ctx >= 2). */
int64_t vt_ppl_first_scored(int64_t n_ctx);
/* Chunks of n_ctx tokens in n_tokens (0 if n_ctx < 2). */
int64_t vt_ppl_n_chunks(int64_t n_tokens, int64_t n_ctx);
void vt_ppl_init(vt_ppl *p);
/* Score one chunk: logits[j] ([n_ctx][n_vocab], row j = after token j)
 * against tokens[j + 1] for j = first .. n_ctx - 2. */
void vt_ppl_add_chunk(vt_ppl *p, const float *logits, int64_t n_vocab, const int32_t *tokens, int64_t n_ctx);
/* exp(mean NLL); NAN with nothing scored. */
double vt_ppl_value(const vt_ppl *p);

/* Summary statistics of repeated measurements (bench). */
double vt_median(const double *x, size_t n);  /* NAN for n = 0; mean of the middle two for even n */
double vt_stdev(const double *x, size_t n);   /* sample standard deviation (n - 1); 0 for n < 2 */

#endif
