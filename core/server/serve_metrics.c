/* serve_metrics.c — see serve_metrics.h. Metric names carry the vt_ prefix
 * and the unit in the name, as Prometheus' conventions ask. */
#include "serve_metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_buf.h"

/* 499: the client left before its answer was complete (nginx's code; logged,
 * never sent); 408: the client stopped sending its request; 415: a body in a
 * Content-Encoding vt does not decode. Anything else counts as "other". */
static const int counted_statuses[VT_SERVE_STATUS_SLOTS] = {200, 400, 401, 403, 404, 405, 408, 413, 415, 499, 500, 501, 503};
static const double ttft_bounds[VT_SERVE_HIST_BUCKETS] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
static const double itl_bounds[VT_SERVE_HIST_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                         0.1,   0.25,   0.5,   1,    2.5,   5};

void vt_serve_metrics_init(vt_serve_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->lock, NULL);
    m->ttft.bounds = ttft_bounds;
    m->itl.bounds = itl_bounds;
}

void vt_serve_metrics_destroy(vt_serve_metrics *m) { pthread_mutex_destroy(&m->lock); }

void vt_serve_metrics_request(vt_serve_metrics *m, int status) {
    int slot = VT_SERVE_STATUS_SLOTS;
    for (int i = 0; i < VT_SERVE_STATUS_SLOTS; i++)
        if (counted_statuses[i] == status) slot = i;
    pthread_mutex_lock(&m->lock);
    m->requests[slot]++;
    pthread_mutex_unlock(&m->lock);
}

void vt_serve_metrics_tokens(vt_serve_metrics *m, int64_t prompt, int64_t generated) {
    pthread_mutex_lock(&m->lock);
    m->prompt_tokens += (uint64_t)prompt;
    m->generated_tokens += (uint64_t)generated;
    pthread_mutex_unlock(&m->lock);
}

static void observe(vt_serve_histogram *h, double v, uint64_t n) {
    int b = 0;
    while (b < VT_SERVE_HIST_BUCKETS && v > h->bounds[b]) b++;
    h->counts[b] += n;
    h->count += n;
    h->sum += v * (double)n;
}

void vt_serve_metrics_ttft(vt_serve_metrics *m, double seconds) {
    pthread_mutex_lock(&m->lock);
    observe(&m->ttft, seconds, 1);
    pthread_mutex_unlock(&m->lock);
}

void vt_serve_metrics_itl(vt_serve_metrics *m, double seconds, int64_t n) {
    if (n <= 0) return;
    pthread_mutex_lock(&m->lock);
    observe(&m->itl, seconds / (double)n, (uint64_t)n);
    pthread_mutex_unlock(&m->lock);
}

void vt_serve_metrics_gauges(vt_serve_metrics *m, int64_t running, int64_t waiting, int64_t kv_used, int64_t kv_total) {
    pthread_mutex_lock(&m->lock);
    m->running = running;
    m->waiting = waiting;
    m->kv_used = kv_used;
    m->kv_total = kv_total;
    pthread_mutex_unlock(&m->lock);
}

void vt_serve_metrics_prefix_cache(vt_serve_metrics *m, int64_t cached_blocks, int64_t hit_tokens, int64_t query_tokens) {
    pthread_mutex_lock(&m->lock);
    m->cached_blocks = cached_blocks;
    m->cache_hit_tokens = hit_tokens;
    m->cache_query_tokens = query_tokens;
    pthread_mutex_unlock(&m->lock);
}

static void add_histogram(vt_text_buf *t, const char *name, const char *help, const vt_serve_histogram *h) {
    vt_text_printf(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cumulative = 0;
    for (int b = 0; b < VT_SERVE_HIST_BUCKETS; b++) {
        cumulative += h->counts[b];
        vt_text_printf(t, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[b], (unsigned long long)cumulative);
    }
    vt_text_printf(t, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)h->count, name,
        h->sum, name, (unsigned long long)h->count);
}

/* One metric without labels: its HELP and TYPE lines, then its value. */
static void add_metric(vt_text_buf *t, const char *name, const char *type, const char *help, long long value) {
    vt_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name, type, name, value);
}

char *vt_serve_metrics_text(vt_serve_metrics *m) {
    vt_text_buf t = {0};
    pthread_mutex_lock(&m->lock);
    vt_text_printf(&t, "# HELP vt_requests_total HTTP requests answered, by status.\n# TYPE vt_requests_total counter\n");
    for (int i = 0; i < VT_SERVE_STATUS_SLOTS; i++)
        if (counted_statuses[i])
            vt_text_printf(&t, "vt_requests_total{status=\"%d\"} %llu\n", counted_statuses[i],
                (unsigned long long)m->requests[i]);
    vt_text_printf(&t, "vt_requests_total{status=\"other\"} %llu\n", (unsigned long long)m->requests[VT_SERVE_STATUS_SLOTS]);
    add_metric(&t, "vt_prompt_tokens_total", "counter",
               "Prompt tokens of the requests the engine accepted (counted when queued: one cancelled while "
               "waiting counts too).",
               (long long)m->prompt_tokens);
    add_metric(&t, "vt_generation_tokens_total", "counter",
               "Tokens generated (with those computed after a client left, before its request was ended).",
               (long long)m->generated_tokens);
    add_metric(&t, "vt_requests_running", "gauge", "Requests holding a sequence.", (long long)m->running);
    add_metric(&t, "vt_requests_waiting", "gauge", "Requests queued, not started.", (long long)m->waiting);
    add_metric(&t, "vt_kv_blocks_used", "gauge", "KV-cache blocks held by sequences.", (long long)m->kv_used);
    add_metric(&t, "vt_kv_blocks_total", "gauge", "KV-cache blocks in the pool.", (long long)m->kv_total);
    add_metric(&t, "vt_prefix_cache_blocks", "gauge",
               "KV-cache blocks filed in the prefix cache (held or reclaimable).", (long long)m->cached_blocks);
    add_metric(&t, "vt_prefix_cache_hit_tokens_total", "counter", "Prompt tokens taken from the prefix cache.",
               (long long)m->cache_hit_tokens);
    add_metric(&t, "vt_prefix_cache_query_tokens_total", "counter",
               "Prompt tokens looked up in the prefix cache (hits and misses).", (long long)m->cache_query_tokens);
    add_histogram(&t, "vt_time_to_first_token_seconds", "Time from a request's arrival to its first token.", &m->ttft);
    add_histogram(&t, "vt_inter_token_latency_seconds", "Time between two tokens of one request.", &m->itl);
    pthread_mutex_unlock(&m->lock);
    return vt_text_take(&t);
}
