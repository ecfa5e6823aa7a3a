/* serve_metrics.h — what /metrics reports, in Prometheus' text format.
 *
 * Counters and histograms are updated from the HTTP threads and the engine
 * thread alike, so every update takes the metrics' own lock; the gauges
 * (running, waiting, KV blocks) are written by the engine thread when it
 * reads the batch and by a submitting handler when a request joins the
 * queue, so admitted work shows even while a long step runs. */
#ifndef VT_SERVE_METRICS_H
#define VT_SERVE_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define VT_SERVE_HIST_BUCKETS 12
/* HTTP statuses counted one by one; anything else goes to "other". */
#define VT_SERVE_STATUS_SLOTS 13

typedef struct vt_serve_histogram {
    const double *bounds; /* VT_SERVE_HIST_BUCKETS upper bounds, seconds */
    uint64_t counts[VT_SERVE_HIST_BUCKETS + 1];
    double sum;
    uint64_t count;
} vt_serve_histogram;

typedef struct vt_serve_metrics {
    pthread_mutex_t lock;
    uint64_t requests[VT_SERVE_STATUS_SLOTS + 1];
    uint64_t prompt_tokens, generated_tokens;
    int64_t running, waiting, kv_used, kv_total;
    int64_t cached_blocks, cache_hit_tokens, cache_query_tokens; /* the prefix cache's */
    vt_serve_histogram ttft, itl;
} vt_serve_metrics;

void vt_serve_metrics_init(vt_serve_metrics *m);
void vt_serve_metrics_destroy(vt_serve_metrics *m);
void vt_serve_metrics_request(vt_serve_metrics *m, int status);
void vt_serve_metrics_tokens(vt_serve_metrics *m, int64_t prompt, int64_t generated);
void vt_serve_metrics_ttft(vt_serve_metrics *m, double seconds);
/* n tokens arrived `seconds` after the previous ones: n samples of seconds/n. */
void vt_serve_metrics_itl(vt_serve_metrics *m, double seconds, int64_t n);
void vt_serve_metrics_gauges(vt_serve_metrics *m, int64_t running, int64_t waiting, int64_t kv_used, int64_t kv_total);
/* The prefix cache: blocks filed, and prompt tokens taken from it and looked up (counters). */
void vt_serve_metrics_prefix_cache(vt_serve_metrics *m, int64_t cached_blocks, int64_t hit_tokens, int64_t query_tokens);
/* The exposition text (malloc'ed, NUL-terminated), or NULL. */
char *vt_serve_metrics_text(vt_serve_metrics *m);

#endif
