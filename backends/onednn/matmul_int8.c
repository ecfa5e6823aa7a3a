/* matmul_int8.c — MATMUL on a weight precision=int8 prepared
 * (int8_weight.c): Y[m][n] = sx[m] sw[n] sum_k qx[m][k] qw[n][k].
 *
 * Each activation row is quantized on its own (int8_rows.c: its scale is
 * its max |x| / 127) and handed to oneDNN as qx + 128, unsigned; oneDNN
 * multiplies by the prepared weights into int32, exactly (|sum| <= 255 x
 * 127 K < 2^31 for K < 66,000, whatever order its kernel adds in), the
 * weight row's 128 x sum is taken off, exactly, and each row's products are
 * scaled back in a fixed order. So a row's result depends on that row and the
 * weight alone, never on M or the other rows of the call: batch invariance
 * holds on every CPU oneDNN picks a kernel for.
 *
 * Threads: the rows are quantized over the runtime's threads, then each
 * thread multiplies one slice of the weight's output rows (int8_weight.c)
 * with oneDNN single-threaded and scales its slice's columns. An OpenMP team
 * instead would compete for the cores with the runtime's threads, which
 * spin a while after each op (measured: pp128 on the qwen3-0.6B shape went
 * from 1.05x simd's with a team of 2 to 1.18x with the passes kept off it).
 *
 * oneDNN 2.6 runs its blocked integer kernels (VNNI, AMX) only for a
 * matmul whose M is known when the primitive is built (with a run-time M it
 * falls back to a plain gemm that reads plain weights), so primitives are
 * cached per (K, slice rows, M): a handful of prefill chunk lengths and
 * decode's M in practice. The cache is emptied (between calls) when it
 * would pass its bound, so an unusual stream of lengths costs rebuilds,
 * never memory. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "onednn.h"

/* Cached primitives at most (then rebuilt as needed). */
#define INT8_CACHE_MAX 256

typedef struct onednn_int8_prim {
    int64_t k, n, m;
    dnnl_memory_desc_t wei_md;
    dnnl_memory_desc_t scratch_md;
    size_t scratch_bytes;
    dnnl_primitive_t prim;
} onednn_int8_prim;

void onednn_int8_cache_free(onednn_ctx *ctx) {
    for (int i = 0; i < ctx->int8_cache_count; i++) {
        dnnl_primitive_destroy(ctx->int8_cache[i]->prim);
        free(ctx->int8_cache[i]);
    }
    free(ctx->int8_cache);
    ctx->int8_cache = NULL;
    ctx->int8_cache_count = ctx->int8_cache_capacity = 0;
}

/* x: m rows of k u8; y: m dense rows of n int32 (a strided y makes
 * oneDNN 2.6 fall back to its reference kernel). */
static bool operand_mds(int64_t m, int64_t k, int64_t n, dnnl_memory_desc_t *src_md, dnnl_memory_desc_t *dst_md) {
    dnnl_dims_t src_dims = {m, k}, src_strides = {k, 1}, dst_dims = {m, n}, dst_strides = {n, 1};
    return dnnl_memory_desc_init_by_strides(src_md, 2, src_dims, dnnl_u8, src_strides) == dnnl_success &&
           dnnl_memory_desc_init_by_strides(dst_md, 2, dst_dims, dnnl_s32, dst_strides) == dnnl_success;
}

/* The primitive for a slice (its layout md, n rows of K) at M = m,
 * single-threaded with a user scratchpad (threads run slices at once), or
 * NULL on failure (logged). Never evicts (onednn_matmul_int8 empties the
 * cache between calls), so the primitives a call holds stay valid through
 * it. From the op's calling thread only: the cache is not locked. */
static const onednn_int8_prim *int8_prim(onednn_ctx *ctx, int64_t k, const onednn_int8_slice *sl, int64_t m) {
    for (int i = 0; i < ctx->int8_cache_count; i++) {
        const onednn_int8_prim *p = ctx->int8_cache[i];
        if (p->k == k && p->n == sl->n && p->m == m && dnnl_memory_desc_equal(&p->wei_md, &sl->md)) return p;
    }
    if (ctx->int8_cache_count == ctx->int8_cache_capacity) {
        const int capacity = ctx->int8_cache_capacity ? ctx->int8_cache_capacity * 2 : 16;
        onednn_int8_prim **grown = realloc(ctx->int8_cache, (size_t)capacity * sizeof *grown);
        if (!grown) return NULL;
        ctx->int8_cache = grown;
        ctx->int8_cache_capacity = capacity;
    }
    onednn_int8_prim *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->k = k, p->n = sl->n, p->m = m, p->wei_md = sl->md;
    dnnl_memory_desc_t src_md, dst_md;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    onednn_omp_set_threads(1); /* fixed at creation: one thread per slice */
    bool ok = operand_mds(m, k, sl->n, &src_md, &dst_md) &&
              dnnl_matmul_desc_init(&desc, &src_md, &p->wei_md, NULL, &dst_md) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success &&
              dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
              dnnl_primitive_desc_create(&pd, &desc, attr, ctx->engine, NULL) == dnnl_success;
    /* Only its reference kernel at this M (not seen with dense rows on a
     * VNNI or AMX CPU): far slower, but the same exact integers, so a row
     * still gets the same bits at any M. Said once. */
    const char *impl = NULL;
    if (ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        strncmp(impl, "ref", 3) == 0 && !ctx->int8_reference_logged) {
        ctx->host->log(VT_LOG_WARN, ONEDNN_NAME, "int8 matmul K=%lld N=%lld M=%lld: oneDNN offers only %s (slow)",
                       (long long)k, (long long)sl->n, (long long)m, impl);
        ctx->int8_reference_logged = true;
    }
    if (ok) {
        const dnnl_memory_desc_t *scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        if (scratch) p->scratch_md = *scratch, p->scratch_bytes = dnnl_memory_desc_get_size(scratch);
        ok = dnnl_primitive_create(&p->prim, pd) == dnnl_success;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        ctx->host->log(VT_LOG_ERROR, ONEDNN_NAME, "cannot create the int8 matmul primitive K=%lld N=%lld M=%lld",
                       (long long)k, (long long)sl->n, (long long)m);
        free(p);
        return NULL;
    }
    ctx->int8_cache[ctx->int8_cache_count++] = p;
    return p;
}

typedef struct int8_job {
    onednn_ctx *ctx;
    const onednn_int8_weight *w;
    const float *x;
    float *y;
    int64_t m;
    const onednn_int8_prim *prim[ONEDNN_INT8_MAX_SLICES];
    atomic_int status;
} int8_job;

static void quantize_task(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const int8_job *j = arg;
    const int64_t k = j->w->k;
    for (int64_t r = begin; r < end; r++) j->ctx->x_scale[r] = onednn_quantize_row_u8(j->x + r * k, j->ctx->x8 + r * k, k);
}

/* Slice s on this thread: its integer products, then its columns scaled. */
static vt_status run_slice(const int8_job *j, int s, int thread) {
    onednn_ctx *ctx = j->ctx;
    const onednn_int8_weight *w = j->w;
    const onednn_int8_slice *sl = &w->slice[s];
    const onednn_int8_prim *p = j->prim[s];
    onednn_worker *worker = &ctx->workers[thread];
    dnnl_memory_desc_t src_md, dst_md;
    if (!operand_mds(j->m, w->k, sl->n, &src_md, &dst_md)) return VT_ERR_BACKEND;
    int32_t *y32 = ctx->y32 + sl->n0 * j->m; /* the slice's own dense rows */
    const vt_status st = onednn_execute(ctx, p->prim, worker, &src_md, ctx->x8, &sl->md, sl->blocked, &dst_md, y32,
                                        &p->scratch_md, p->scratch_bytes);
    if (st != VT_OK) return st;
    for (int64_t r = 0; r < j->m; r++)
        onednn_scale_row(y32 + r * sl->n, w->offset + sl->n0, w->scale + sl->n0, ctx->x_scale[r],
                         j->y + r * w->n + sl->n0, sl->n);
    return VT_OK;
}

static void slices_task(void *arg, int64_t begin, int64_t end, int thread) {
    int8_job *j = arg;
    /* OpenMP's thread count belongs to the calling thread (see matmul.c) */
    onednn_omp_set_threads(1);
    for (int64_t s = begin; s < end && atomic_load(&j->status) == VT_OK; s++) {
        const vt_status st = run_slice(j, (int)s, thread);
        if (st != VT_OK) {
            int expected = VT_OK;
            atomic_compare_exchange_strong(&j->status, &expected, (int)st);
        }
    }
}

vt_status onednn_matmul_int8(onednn_ctx *ctx, const onednn_int8_weight *w, const float *x, int64_t m, float *y) {
    const vt_host *host = ctx->host;
    int8_job job = {.ctx = ctx, .w = w, .x = x, .y = y, .m = m};
    atomic_init(&job.status, VT_OK);
    size_t scratch = 0;
    /* room for this call's primitives first: none is freed while held */
    if (ctx->int8_cache_count + w->n_slices > INT8_CACHE_MAX) onednn_int8_cache_free(ctx);
    for (int s = 0; s < w->n_slices; s++) {
        job.prim[s] = int8_prim(ctx, w->k, &w->slice[s], m);
        if (!job.prim[s]) return VT_ERR_BACKEND;
        if (job.prim[s]->scratch_bytes > scratch) scratch = job.prim[s]->scratch_bytes;
    }
    void *x8 = ctx->x8, *xs = ctx->x_scale, *y32 = ctx->y32;
    vt_status st = onednn_ensure_buffer(host, &x8, &ctx->x8_capacity, (size_t)(m * w->k), 1);
    if (st == VT_OK) st = onednn_ensure_buffer(host, &xs, &ctx->x_scale_capacity, (size_t)m, sizeof(float));
    if (st == VT_OK) st = onednn_ensure_buffer(host, &y32, &ctx->y32_capacity, (size_t)(m * w->n), sizeof(int32_t));
    ctx->x8 = x8, ctx->x_scale = xs, ctx->y32 = y32;
    for (int i = 0; st == VT_OK && i < ctx->n_threads; i++)
        st = onednn_ensure_buffer(host, &ctx->workers[i].scratch, &ctx->workers[i].scratch_bytes, scratch, 1);
    if (st != VT_OK) return st;
    vt_host_parallel_for(host, m, 4, quantize_task, &job);
    vt_host_parallel_for(host, w->n_slices, 1, slices_task, &job);
    return (vt_status)atomic_load(&job.status);
}
