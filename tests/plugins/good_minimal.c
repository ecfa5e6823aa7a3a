/* good_minimal.c — the smallest correct backend: rms_norm on f32 only, rows
 * spread over host->parallel_for. The registry tests load it next to the bad
 * plugins to show a refusal never takes a good backend down with it. */
#include <math.h>
#include <stdio.h>

#include "vt/vt_backend.h"

#ifndef MINIMAL_NAME /* tests/plugins/shadow/reference.c builds it under another name */
#define MINIMAL_NAME "good_minimal"
#endif

typedef struct minimal_ctx {
    const vt_host *host;
} minimal_ctx;

static vt_status minimal_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                              size_t err_size) {
    (void)config;
    minimal_ctx *c = host->alloc(sizeof *c, 64);
    if (!c) {
        snprintf(err, err_size, "out of memory");
        return VT_ERR_NOMEM;
    }
    c->host = host;
    *ctx = c;
    return VT_OK;
}

static void minimal_shutdown(void *ctx) {
    minimal_ctx *c = ctx;
    c->host->free(c);
}

static int is_f32_rows(const vt_tensor *t, int64_t width) {
    return t->dtype == VT_F32 && t->ndim >= 1 && t->ndim <= VT_MAX_DIMS && t->ne[0] == width;
}

/* src0 X {D, R} f32, src1 weight {D} f32, dst {D, R} f32. */
static int minimal_supports(void *ctx, const vt_node *node) {
    (void)ctx;
    if (node->op != VT_OP_RMS_NORM || node->n_src != 2) return 0;
    const vt_tensor *x = &node->src[0], *w = &node->src[1], *y = &node->dst;
    int64_t d = x->ne[0];
    if (d <= 0 || !is_f32_rows(x, d) || !is_f32_rows(w, d) || !is_f32_rows(y, d)) return 0;
    for (int i = 1; i < VT_MAX_DIMS; i++)
        if (y->ne[i] != x->ne[i] || (i < w->ndim && w->ne[i] != 1)) return 0;
    return 1;
}

typedef struct rms_job {
    const vt_node *node;
    int64_t d; /* row width */
} rms_job;

static void rms_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const rms_job *job = arg;
    const vt_tensor *x = &job->node->src[0], *w = &job->node->src[1], *y = &job->node->dst;
    const float *weight = w->data;
    for (int64_t r = begin; r < end; r++) {
        const float *xr = (const float *)((const char *)x->data + (size_t)r * x->nb[1]);
        float *yr = (float *)((char *)y->data + (size_t)r * y->nb[1]);
        double sum = 0;
        for (int64_t i = 0; i < job->d; i++) sum += (double)xr[i] * xr[i];
        float scale = 1.0f / sqrtf((float)(sum / (double)job->d) + job->node->params.rms_norm.eps);
        for (int64_t i = 0; i < job->d; i++) yr[i] = xr[i] * scale * weight[i];
    }
}

static vt_status minimal_rms_norm(void *ctx, const vt_node *node) {
    minimal_ctx *c = ctx;
    const vt_tensor *x = &node->src[0];
    int64_t rows = 1;
    for (int i = 1; i < x->ndim; i++) rows *= x->ne[i];
    rms_job job = {node, x->ne[0]};
    c->host->parallel_for(rows, 1, rms_rows, &job);
    return VT_OK;
}

static const vt_backend table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = MINIMAL_NAME,
    .description = "test plugin: f32 rms_norm only",
    .init = minimal_init,
    .shutdown = minimal_shutdown,
    .supports = minimal_supports,
    .rms_norm = minimal_rms_norm,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
