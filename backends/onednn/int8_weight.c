/* int8_weight.c — precision=int8's prepared weights: each quantized matmul
 * weight the runtime offers becomes int8 rows with one f32 scale per row,
 * reordered once into the layout oneDNN's integer matmul reads fastest
 * (blocked), and 128 x each row's sum: the activations reach oneDNN as
 * unsigned bytes q + 128 (its u8 x s8 kernels, and a reorder into their
 * layout measured 90x faster than into the s8 x s8 one's, which carries a
 * compensation), so the products carry 128 x the row's sum, taken off again
 * in matmul_int8.c.
 *
 * The backend asks to be offered weights its fallback reads too
 * (VT_PREPARE_SHARED): the int8 copy serves onednn's prefill matmuls while
 * the fallback decodes from the file's bytes, one byte per weight being
 * more to stream per decoded token than a 4-bit file's 0.56 (measured: the
 * int8 copy decoding took 0.56-0.62x simd's tokens/s on the qwen3-0.6B
 * shape). Both stay resident: what the user asked for with precision=int8.
 *
 * Row i's values w are first dequantized exactly (host->to_f32), then
 * q = round(w / s) with s = max|w| / 127: |w - s q| <= s / 2 per value, on
 * top of the file's own quantization (a Q4_K value's step is a sixteenth of
 * its sub-block's range, coarser than int8's 1/254 of the row's whenever the
 * sub-block spans more than a sixteenth of the row's range).
 *
 * The copy keeps 1 byte per weight beside the file: int8_max_mib bounds what
 * the copies keep resident; a weight whose copy would pass it is declined
 * (it runs as the other precisions do, on the file's bytes; a later, smaller
 * one may still fit), with a warning naming the first, and --explain shows
 * what was prepared. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "onednn.h"

bool onednn_int8_dtype(int32_t dtype) {
    return dtype == VT_Q8_0 || dtype == VT_Q4_0 || dtype == VT_Q4_K || dtype == VT_Q5_K || dtype == VT_Q6_K;
}

dnnl_primitive_desc_t onednn_int8_matmul_pd(dnnl_engine_t engine, int64_t m, int64_t k, int64_t n) {
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    dnnl_dims_t src_dims = {m, k}, wei_dims = {k, n}, dst_dims = {m, n};
    if (dnnl_memory_desc_init_by_tag(&src_md, 2, src_dims, dnnl_u8, dnnl_ab) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&wei_md, 2, wei_dims, dnnl_s8, dnnl_format_tag_any) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&dst_md, 2, dst_dims, dnnl_s32, dnnl_ab) != dnnl_success)
        return NULL;
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &src_md, &wei_md, NULL, &dst_md) != dnnl_success) return NULL;
    dnnl_primitive_desc_t pd = NULL;
    return dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) == dnnl_success ? pd : NULL;
}

bool onednn_int8_weights_md(onednn_ctx *ctx, int64_t k, int64_t n, dnnl_memory_desc_t *md) {
    /* M = 16: any M gives the same layout on the CPUs measured; matmul_int8.c
     * names it explicitly for every M, so a CPU where it differed would
     * still read these bytes (through a kernel that accepts them) */
    dnnl_primitive_desc_t pd = onednn_int8_matmul_pd(ctx->engine, 16, k, n);
    if (!pd) return false;
    const dnnl_memory_desc_t *w = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (w) *md = *w;
    dnnl_primitive_desc_destroy(pd);
    return w != NULL;
}

/* Rows [begin, end) of the weight dequantized and quantized to int8 (plain
 * rows of K, oneDNN's "ba" layout), their scales alongside. */
typedef struct quantize_job {
    onednn_ctx *ctx;
    const uint8_t *rows;
    size_t row_bytes;
    int32_t dtype;
    int64_t k;
    int8_t *q;
    float *scale;
    int32_t *offset;
    atomic_int status;
} quantize_job;

static void quantize_rows(void *arg, int64_t begin, int64_t end, int thread) {
    quantize_job *job = arg;
    onednn_worker *w = &job->ctx->workers[thread];
    float *row = w->tile; /* at least K floats: ensured before the loop */
    for (int64_t i = begin; i < end; i++) {
        vt_status st = job->ctx->host->to_f32(job->dtype, job->rows + (size_t)i * job->row_bytes, row, job->k);
        if (st != VT_OK) {
            int expected = VT_OK;
            atomic_compare_exchange_strong(&job->status, &expected, (int)st);
            return;
        }
        const int8_t *q = job->q + i * job->k;
        job->scale[i] = onednn_quantize_row_s8(row, job->q + i * job->k, job->k);
        int32_t sum = 0; /* |sum| <= 127 K: exact */
        for (int64_t j = 0; j < job->k; j++) sum += q[j];
        job->offset[i] = 128 * sum;
    }
}

static void free_weight(const vt_host *host, onednn_int8_weight *w) {
    if (!w) return;
    for (int i = 0; w->slice && i < w->n_slices; i++) host->free(w->slice[i].blocked);
    host->free(w->slice);
    host->free(w->scale);
    host->free(w->offset);
    host->free(w);
}

/* Reorder the plain int8 rows of a slice (n rows of K at plain) into md, on the calling
 * pool thread `thread` with oneDNN single-threaded: an OpenMP team would
 * compete for the cores with the pool's threads (see matmul_int8.c). */
static bool reorder_into(onednn_ctx *ctx, int thread, const int8_t *plain, int64_t k, int64_t n,
                         const dnnl_memory_desc_t *md, void *dst) {
    dnnl_memory_desc_t src_md;
    dnnl_dims_t dims = {k, n}, strides = {1, k};
    if (dnnl_memory_desc_init_by_strides(&src_md, 2, dims, dnnl_s8, strides) != dnnl_success) return false;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_reorder_primitive_desc_create(&pd, &src_md, ctx->engine, md, ctx->engine, NULL) != dnnl_success)
        return false;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t src = NULL, out = NULL;
    bool ok = dnnl_primitive_create(&reorder, pd) == dnnl_success &&
              dnnl_memory_create(&src, &src_md, ctx->engine, (void *)plain) == dnnl_success &&
              dnnl_memory_create(&out, md, ctx->engine, dst) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, out}};
        ok = dnnl_primitive_execute(reorder, ctx->workers[thread].stream, 2, args) == dnnl_success &&
             dnnl_stream_wait(ctx->workers[thread].stream) == dnnl_success;
    }
    if (src) dnnl_memory_destroy(src);
    if (out) dnnl_memory_destroy(out);
    if (reorder) dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

typedef struct reorder_job {
    onednn_ctx *ctx;
    onednn_int8_weight *w;
    const int8_t *plain;
    atomic_bool failed;
} reorder_job;

static void reorder_slices(void *arg, int64_t begin, int64_t end, int thread) {
    reorder_job *j = arg;
    onednn_omp_set_threads(1); /* OpenMP's count is per calling thread */
    for (int64_t i = begin; i < end; i++) {
        const onednn_int8_slice *sl = &j->w->slice[i];
        if (!reorder_into(j->ctx, thread, j->plain + sl->n0 * j->w->k, j->w->k, sl->n, &sl->md, sl->blocked))
            atomic_store(&j->failed, true);
    }
}

/* The weight's output rows cut into one slice per thread, each a multiple
 * of 64 rows (oneDNN's column block) but the last: fewer slices when the
 * weight is small. Fills the slices' rows and layouts; false if oneDNN
 * has no int8 matmul for one. */
static bool cut_slices(onednn_ctx *ctx, onednn_int8_weight *w) {
    const int64_t per = ((w->n + ctx->n_threads - 1) / ctx->n_threads + 63) / 64 * 64;
    const int64_t count = (w->n + per - 1) / per;
    w->slice = ctx->host->alloc(sizeof *w->slice * (size_t)(count < ONEDNN_INT8_MAX_SLICES ? count : ONEDNN_INT8_MAX_SLICES), 64);
    if (!w->slice) return false;
    memset(w->slice, 0, sizeof *w->slice * (size_t)(count < ONEDNN_INT8_MAX_SLICES ? count : ONEDNN_INT8_MAX_SLICES));
    w->n_slices = 0;
    for (int64_t n0 = 0; n0 < w->n && w->n_slices < ONEDNN_INT8_MAX_SLICES; n0 += per) {
        onednn_int8_slice *sl = &w->slice[w->n_slices++];
        sl->n0 = n0;
        sl->n = w->n - n0 < per ? w->n - n0 : per;
        if (w->n_slices == ONEDNN_INT8_MAX_SLICES) sl->n = w->n - n0; /* the last takes the rest */
        if (!onednn_int8_weights_md(ctx, w->k, sl->n, &sl->md)) return false;
    }
    return true;
}

vt_status onednn_prepare_weight(void *opaque, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                                size_t err_size) {
    onednn_ctx *ctx = opaque;
    const vt_host *host = ctx->host;
    const vt_tensor *t = &offer->tensor;
    /* Only precision=int8 keeps copies, only of quantized matmul weights
     * (F32/F16/BF16 keep running on their own bytes), only 2-D ones. */
    if (ctx->precision != ONEDNN_PRECISION_INT8 || !(offer->ops & (1u << VT_OP_MATMUL)) ||
        !onednn_int8_dtype(t->dtype) || t->ndim != 2 || !t->data)
        return VT_OK;
    const int64_t k = t->ne[0], n = t->ne[1];
    const size_t row_bytes = host->row_size(t->dtype, k);
    if (row_bytes == 0 || t->nb[1] != row_bytes) return VT_OK; /* not dense rows: run on the file's bytes */
    if (k > 65536) return VT_OK; /* beyond it an int32 sum of K products of 255 x 127 could overflow */

    onednn_int8_weight *w = host->alloc(sizeof *w, 64);
    if (!w) return VT_ERR_NOMEM;
    memset(w, 0, sizeof *w);
    w->magic = ONEDNN_INT8_MAGIC;
    w->k = k;
    w->n = n;
    if (!cut_slices(ctx, w)) { /* the weight still runs, on the tile path */
        host->log(VT_LOG_WARN, ONEDNN_NAME, "%s: no int8 layout for K=%lld N=%lld here: it stays on the file's bytes",
                  offer->name, (long long)k, (long long)n);
        free_weight(host, w);
        return VT_OK;
    }
    w->bytes = (size_t)n * (sizeof(float) + sizeof(int32_t)) + sizeof *w + sizeof *w->slice * (size_t)w->n_slices;
    for (int i = 0; i < w->n_slices; i++) w->bytes += dnnl_memory_desc_get_size(&w->slice[i].md);
    if (ctx->int8_max_bytes && ctx->int8_bytes + w->bytes > ctx->int8_max_bytes) {
        if (!ctx->int8_full_logged)
            host->log(VT_LOG_WARN, ONEDNN_NAME,
                      "int8_max_mib=%zu reached with %.1f MiB prepared: %s (%.1f MiB) and the weights after it "
                      "that do not fit stay on the file's bytes",
                      ctx->int8_max_bytes >> 20, (double)ctx->int8_bytes / 1048576.0, offer->name,
                      (double)w->bytes / 1048576.0);
        ctx->int8_full_logged = true;
        free_weight(host, w);
        return VT_OK;
    }
    vt_status st = VT_OK;
    for (int i = 0; i < w->n_slices && st == VT_OK; i++) {
        w->slice[i].blocked = host->alloc(dnnl_memory_desc_get_size(&w->slice[i].md), 64);
        if (!w->slice[i].blocked) st = VT_ERR_NOMEM;
    }
    w->scale = host->alloc((size_t)n * sizeof(float), 64);
    w->offset = host->alloc((size_t)n * sizeof(int32_t), 64);
    int8_t *plain = host->alloc((size_t)(k * n), 64);
    if (!w->scale || !w->offset || !plain) st = VT_ERR_NOMEM;
    for (int i = 0; st == VT_OK && i < ctx->n_threads; i++) { /* a dequantized row per thread */
        void *tile = ctx->workers[i].tile;
        st = onednn_ensure_buffer(host, &tile, &ctx->workers[i].tile_capacity, (size_t)k, sizeof(float));
        ctx->workers[i].tile = tile;
    }
    if (st == VT_OK) {
        quantize_job job = {.ctx = ctx, .rows = t->data, .row_bytes = row_bytes, .dtype = t->dtype, .k = k,
                            .q = plain, .scale = w->scale, .offset = w->offset};
        atomic_init(&job.status, VT_OK);
        vt_host_parallel_for(host, n, 16, quantize_rows, &job);
        st = (vt_status)atomic_load(&job.status);
        if (st != VT_OK) snprintf(err, err_size, "cannot dequantize %s (status %d)", offer->name, (int)st);
    }
    bool reordered = false;
    if (st == VT_OK) {
        reorder_job job = {.ctx = ctx, .w = w, .plain = plain};
        atomic_init(&job.failed, false);
        vt_host_parallel_for(host, w->n_slices, 1, reorder_slices, &job);
        reordered = !atomic_load(&job.failed);
    }
    host->free(plain);
    if (st != VT_OK) {
        free_weight(host, w);
        return st;
    }
    if (!reordered) { /* the weight still runs, on the tile path */
        host->log(VT_LOG_WARN, ONEDNN_NAME, "%s: oneDNN could not reorder it into its int8 layout: it stays on the "
                  "file's bytes", offer->name);
        free_weight(host, w);
        return VT_OK;
    }
    ctx->int8_bytes += w->bytes;
    out->data = w;
    out->bytes = w->bytes;
    return VT_OK;
}

void onednn_release_weight(void *opaque, void *data) {
    onednn_ctx *ctx = opaque;
    onednn_int8_weight *w = data;
    if (!w) return;
    ctx->int8_bytes = ctx->int8_bytes > w->bytes ? ctx->int8_bytes - w->bytes : 0;
    free_weight(ctx->host, w);
}
