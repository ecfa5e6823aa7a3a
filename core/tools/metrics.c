/* metrics.c — logit distances, KL divergence, perplexity, summary statistics.
 * Everything in double: the quantities compared are small differences of
 * float rows, and the sums run over whole vocabularies. */
#include "metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Max of a row, ignoring nothing: a NaN logit makes the row's results NaN,
 * which is what a comparison should report. */
static double row_max(const float *x, int64_t n) {
    double m = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

double vt_log_sum_exp(const float *x, int64_t n) {
    double m = row_max(x, n);
    if (isinf(m)) return m; /* all -inf, or a +inf logit */
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
    return m + log(s);
}

double vt_kl_divergence(const float *p_logits, const float *q_logits, int64_t n) {
    /* KL = sum_i P_i (log P_i - log Q_i) with log P_i = p_i - lse(p). */
    double lse_p = vt_log_sum_exp(p_logits, n), lse_q = vt_log_sum_exp(q_logits, n);
    double kl = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double log_p = (double)p_logits[i] - lse_p;
        double prob = exp(log_p);
        if (prob == 0.0) continue; /* 0 log 0 = 0, even against Q_i = 0 */
        kl += prob * (log_p - ((double)q_logits[i] - lse_q));
    }
    return kl < 0.0 ? 0.0 : kl; /* rounding can dip a hair below 0 for equal rows */
}

double vt_nll(const float *logits, int64_t n, int32_t target) {
    return vt_log_sum_exp(logits, n) - (double)logits[target];
}

/* First index of the largest value (same tie rule as the sampler's greedy). */
static int64_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void vt_logit_stats_init(vt_logit_stats *s) { memset(s, 0, sizeof *s); }

void vt_logit_stats_add(vt_logit_stats *s, const float *ref, const float *got, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)ref[i] - (double)got[i]);
        if (d > s->max_abs_dlogit || isnan(d)) s->max_abs_dlogit = d;
        s->sum_abs_dlogit += d;
    }
    s->n_values += n;
    s->n_rows++;
    if (argmax(ref, n) == argmax(got, n)) s->top1_agree++;
    double kl = vt_kl_divergence(ref, got, n);
    s->kl_sum += kl;
    if (kl > s->kl_max || isnan(kl)) s->kl_max = kl;
}

double vt_logit_stats_mean_abs(const vt_logit_stats *s) {
    return s->n_values ? s->sum_abs_dlogit / (double)s->n_values : 0.0;
}

double vt_logit_stats_top1(const vt_logit_stats *s) {
    return s->n_rows ? (double)s->top1_agree / (double)s->n_rows : 1.0;
}

double vt_logit_stats_kl_mean(const vt_logit_stats *s) { return s->n_rows ? s->kl_sum / (double)s->n_rows : 0.0; }

int64_t vt_common_prefix(const int32_t *a, const int32_t *b, int64_t n) {
    int64_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

int64_t vt_ppl_first_scored(int64_t n_ctx) { return n_ctx / 2; }

int64_t vt_ppl_n_chunks(int64_t n_tokens, int64_t n_ctx) { return n_ctx < 2 || n_tokens < 0 ? 0 : n_tokens / n_ctx; }

void vt_ppl_init(vt_ppl *p) { memset(p, 0, sizeof *p); }

void vt_ppl_add_chunk(vt_ppl *p, const float *logits, int64_t n_vocab, const int32_t *tokens, int64_t n_ctx) {
    for (int64_t j = vt_ppl_first_scored(n_ctx); j < n_ctx - 1; j++) {
        p->nll_sum += vt_nll(logits + j * n_vocab, n_vocab, tokens[j + 1]);
        p->n_scored++;
    }
}

double vt_ppl_value(const vt_ppl *p) { return p->n_scored ? exp(p->nll_sum / (double)p->n_scored) : NAN; }

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double vt_median(const double *x, size_t n) {
    if (n == 0) return NAN;
    double small[64];
    double *s = n <= 64 ? small : malloc(n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, compare_doubles);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    if (s != small) free(s);
    return m;
}

double vt_stdev(const double *x, size_t n) {
    if (n < 2) return 0.0;
    double mean = 0.0;
    for (size_t i = 0; i < n; i++) mean += x[i];
    mean /= (double)n;
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    return sqrt(ss / (double)(n - 1));
}
