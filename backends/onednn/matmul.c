/* matmul.c — MATMUL: Y[m][n] = sum_k X[m][k] W[n][k] through oneDNN's matmul.
 *
 * oneDNN has no matmul on vt's quantized dtypes (per-block scales), so
 * weights of every dtype are brought to the precision the primitive takes a
 * tile at a time: `rows` output rows x K, sized to stay in a core's L2,
 * dequantized with host->to_f32 (the core's row conversion, vectorised where
 * the CPU allows) and multiplied at once by a cached primitive writing the
 * tile's column slice of Y. The precision is chosen at init (onednn.h):
 *   f32   the dequantized tile as is; F32 weights need no copy, the primitive
 *         reads them in place (a tile of GGUF rows is oneDNN's "ba" layout);
 *   bf16  where the CPU multiplies bf16 in hardware (AVX-512 BF16, AMX), for
 *         quantized and BF16 weights: the tile rounded to bf16, the
 *         activations rounded once per matmul, the products summed in f32;
 *         BF16 weights are read in place. F32 and F16 weights run in f32.
 *
 * Threading (ctx->threading, measured in bench/onednn_matmul_bench.c):
 *   TILES  host->parallel_for over tiles; each thread dequantizes and
 *          multiplies its own tiles with oneDNN single-threaded (OpenMP team
 *          of 1), so n threads keep exactly n cores busy and the dequantizing
 *          runs in parallel too.
 *   OMP    tiles one after another: dequantize with host->parallel_for, then
 *          one oneDNN call on n OpenMP threads.
 */
#include <stdatomic.h>
#include <string.h>

#include "onednn.h"
/* the bf16 rounding (AVX-512 F, its own target): run only where oneDNN found
 * AVX-512 with BF16 or AMX (caps.c) */
#include "vt/vt_bf16_row.h"
#include "vt/vt_check.h"

int onednn_matmul_supports(const onednn_ctx *ctx, const vt_node *node) {
    /* everything here runs on oneDNN's f32 matmul, or its bf16 one where init chose it */
    if (!ctx->caps.matmul_f32) return 0;
    /* Decode (M = 1) is declined by default: each weight is used once, so
     * dequantizing it to f32 and streaming the f32 copy through an sgemv
     * moves ~8x the bytes of a fused quantized dot product: several times
     * slower than simd's decode kernel (bench/onednn_matmul_bench.c measures
     * both on this machine). Declining lets negotiation route decode matmuls to the fallback
     * backend (best with --fallback simd); option decode=1 accepts them
     * (README.md). */
    if (node->phase == VT_PHASE_DECODE && !ctx->decode_matmul) return 0;
    /* The matmul convention (two sources, 2-D operands, K in whole blocks,
     * shapes agreeing), checked as every in-tree backend checks it. */
    if (!vt_check_convention(node, NULL, 0)) return 0;
    /* F16/BF16 results would need a second pass; the runtime inserts a convert. */
    if (node->dst.dtype != VT_F32) return 0;
    return 1;
}

/* The precision a weight of dtype multiplies in on the tile path (see
 * onednn_precision; precision=int8's unprepared weights as auto would). */
static onednn_precision precision_for(const onednn_ctx *ctx, int32_t dtype) {
    if (ctx->tile_precision == ONEDNN_PRECISION_BF16 && dtype != VT_F32 && dtype != VT_F16) return ONEDNN_PRECISION_BF16;
    return ONEDNN_PRECISION_F32;
}

/* Output rows per tile for K inputs: the tile (rows x K f32) fits the
 * configured budget, is a multiple of 16 rows (the AVX2 gemm's register block
 * is a multiple of 8 columns), and in TILES mode there are at least as many
 * tiles as threads. */
static int64_t tile_rows(const onednn_ctx *ctx, int64_t k, int64_t n) {
    int64_t rows = (int64_t)(ctx->tile_bytes / ((size_t)k * sizeof(float)));
    rows = rows / 16 * 16;
    if (rows < 16) rows = 16;
    if (rows > 1024) rows = 1024;
    if (ctx->threading == ONEDNN_THREADING_TILES && ctx->n_threads > 1) {
        int64_t per_thread = (n + ctx->n_threads - 1) / ctx->n_threads;
        per_thread = (per_thread + 15) / 16 * 16;
        if (per_thread < rows) rows = per_thread;
    }
    return rows < n ? rows : n;
}

/* Grow a worker's tile buffers (f32 and, for bf16, its rounding) and scratch. */
static vt_status ensure_worker(onednn_ctx *ctx, onednn_worker *w, size_t tile_floats, size_t tile16_values,
                               size_t scratch_bytes) {
    const vt_host *host = ctx->host;
    void *tile = w->tile, *tile16 = w->tile16;
    vt_status st = onednn_ensure_buffer(host, &tile, &w->tile_capacity, tile_floats, sizeof(float));
    w->tile = tile;
    if (st == VT_OK) st = onednn_ensure_buffer(host, &tile16, &w->tile16_capacity, tile16_values, sizeof(uint16_t));
    w->tile16 = tile16;
    if (st == VT_OK) st = onednn_ensure_buffer(host, &w->scratch, &w->scratch_bytes, scratch_bytes, 1);
    return st;
}

/* One matmul call split into tiles of `rows` output rows. */
typedef struct matmul_job {
    onednn_ctx *ctx;
    int32_t dtype;
    bool bf16; /* multiplied in bf16 (precision_for) */
    const uint8_t *w;   /* {K, N} weights, row_bytes apart */
    size_t row_bytes;
    const void *x;      /* {K, M} of the precision (the node's f32, or its bf16 rounding) */
    float *y;           /* {N, M} */
    int64_t k, n, m, rows;
    const onednn_matmul_entry *full; /* tiles of `rows` rows */
    const onednn_matmul_entry *tail; /* the last tile when rows does not divide N */
    atomic_int status;               /* first error, VT_OK if none */
} matmul_job;

/* The file holds the weight rows as the primitive reads them (F32 for f32,
 * BF16 for bf16): no tile buffer, the primitive reads them in place. */
static bool reads_in_place(const matmul_job *job) { return job->dtype == (job->bf16 ? VT_BF16 : VT_F32); }

static const onednn_matmul_entry *tile_entry(const matmul_job *job, int64_t n0, int64_t *nt) {
    *nt = job->n - n0 < job->rows ? job->n - n0 : job->rows;
    return *nt == job->rows ? job->full : job->tail;
}

/* rows [n0, n0 + nt) of W as rows of K values of the precision: in place
 * when the file holds them so (F32 for f32, BF16 for bf16), else dequantized
 * into buf (and rounded into buf16 for bf16). */
static const void *tile_weights(const matmul_job *job, int64_t n0, int64_t nt, float *buf, uint16_t *buf16,
                                vt_status *st) {
    const uint8_t *rows = job->w + (size_t)n0 * job->row_bytes;
    *st = VT_OK;
    if (reads_in_place(job)) return rows;
    /* Rows are whole blocks and contiguous, so nt rows convert as one run. */
    const float *f = (const float *)rows;
    if (job->dtype != VT_F32) {
        *st = job->ctx->host->to_f32(job->dtype, rows, buf, nt * job->k);
        if (*st != VT_OK) return NULL;
        f = buf;
    }
    if (!job->bf16) return f;
    vt_f32_to_bf16_row_avx512(f, buf16, nt * job->k);
    return buf16;
}

static void fail(matmul_job *job, vt_status st) {
    int expected = VT_OK;
    atomic_compare_exchange_strong(&job->status, &expected, (int)st);
}

/* TILES: tiles [begin, end) on this thread, oneDNN single-threaded. */
static void tiles_task(void *arg, int64_t begin, int64_t end, int thread) {
    matmul_job *job = arg;
    onednn_worker *worker = &job->ctx->workers[thread];
    /* OpenMP's thread count belongs to the calling thread: pool threads have
     * their own, so set it here or each oneDNN call would start a team of
     * all cores on every thread (oversubscription). */
    onednn_omp_set_threads(1);
    for (int64_t t = begin; t < end && atomic_load(&job->status) == VT_OK; t++) {
        int64_t n0 = t * job->rows, nt;
        const onednn_matmul_entry *e = tile_entry(job, n0, &nt);
        vt_status st;
        const void *wt = tile_weights(job, n0, nt, worker->tile, worker->tile16, &st);
        if (st == VT_OK) st = onednn_matmul_run(job->ctx, e, worker, job->m, job->x, wt, job->y + n0);
        if (st != VT_OK) fail(job, st);
    }
}

/* OMP: dequantize rows [begin, end) of the tile starting at weight row n0
 * (tile_weights on a slice of the tile). */
typedef struct dequant_job {
    const matmul_job *job;
    int64_t n0;
    float *buf;
    uint16_t *buf16;
    atomic_int status;
} dequant_job;

static void dequant_task(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    dequant_job *d = arg;
    const matmul_job *job = d->job;
    vt_status st;
    uint16_t *buf16 = job->bf16 ? d->buf16 + begin * job->k : NULL; /* allocated for bf16 only */
    tile_weights(job, d->n0 + begin, end - begin, d->buf + begin * job->k, buf16, &st);
    if (st != VT_OK) {
        int expected = VT_OK;
        atomic_compare_exchange_strong(&d->status, &expected, (int)st);
    }
}

static vt_status run_omp(matmul_job *job) {
    onednn_ctx *ctx = job->ctx;
    onednn_worker *worker = &ctx->workers[0];
    int64_t n_tiles = (job->n + job->rows - 1) / job->rows;
    for (int64_t t = 0; t < n_tiles; t++) {
        int64_t n0 = t * job->rows, nt;
        const onednn_matmul_entry *e = tile_entry(job, n0, &nt);
        const void *wt = job->w + (size_t)n0 * job->row_bytes;
        if (!reads_in_place(job)) {
            dequant_job d = {.job = job, .n0 = n0, .buf = worker->tile, .buf16 = worker->tile16};
            atomic_init(&d.status, VT_OK);
            vt_host_parallel_for(ctx->host, nt, 8, dequant_task, &d);
            if (atomic_load(&d.status) != VT_OK) return (vt_status)atomic_load(&d.status);
            wt = job->bf16 ? (const void *)worker->tile16 : worker->tile;
        }
        onednn_omp_set_threads(ctx->n_threads);
        vt_status st = onednn_matmul_run(ctx, e, worker, job->m, job->x, wt, job->y + n0);
        if (st != VT_OK) return st;
    }
    return VT_OK;
}

/* The activations rounded to bf16, rows [begin, end). */
typedef struct round_rows_job {
    const float *x;
    uint16_t *x16;
    int64_t k;
} round_rows_job;

static void round_rows_task(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const round_rows_job *r = arg;
    vt_f32_to_bf16_row_avx512(r->x + begin * r->k, r->x16 + begin * r->k, (end - begin) * r->k);
}

vt_status onednn_matmul(void *opaque, const vt_node *node) {
    onednn_ctx *ctx = opaque;
    const vt_tensor *w = &node->src[0], *x = &node->src[1], *y = &node->dst;
    matmul_job job = {
        .ctx = ctx,
        .dtype = w->dtype,
        .w = w->data,
        .row_bytes = w->nb[1],
        .x = x->data,
        .y = y->data,
        .k = w->ne[0],
        .n = w->ne[1],
        .m = x->ne[1],
    };
    atomic_init(&job.status, VT_OK);
    if (node->prepared & 1u) { /* precision=int8's copy (int8_weight.c) */
        const onednn_int8_weight *wi = w->data;
        if (wi->magic != ONEDNN_INT8_MAGIC || wi->k != job.k || wi->n != job.n ||
            x->nb[1] != (size_t)job.k * sizeof(float) || y->nb[1] != (size_t)job.n * sizeof(float))
            return VT_ERR_INVALID;
        return onednn_matmul_int8(ctx, wi, x->data, job.m, y->data);
    }
    /* The primitives assume dense rows (the ABI promises contiguous tensors). */
    if (x->nb[1] != (size_t)job.k * sizeof(float) || y->nb[1] != (size_t)job.n * sizeof(float) ||
        job.row_bytes != ctx->host->row_size(job.dtype, job.k))
        return VT_ERR_INVALID;

    const onednn_precision precision = precision_for(ctx, job.dtype);
    job.bf16 = precision == ONEDNN_PRECISION_BF16;
    job.rows = tile_rows(ctx, job.k, job.n);
    int threads = ctx->threading == ONEDNN_THREADING_OMP ? ctx->n_threads : 1;
    job.full = onednn_matmul_get(ctx, precision, job.k, job.rows, job.n, threads);
    int64_t tail_rows = job.n % job.rows;
    job.tail = tail_rows ? onednn_matmul_get(ctx, precision, job.k, tail_rows, job.n, threads) : job.full;
    if (!job.full || !job.tail) return VT_ERR_BACKEND;

    size_t scratch = job.full->scratch_bytes > job.tail->scratch_bytes ? job.full->scratch_bytes
                                                                       : job.tail->scratch_bytes;
    /* a tile buffer unless read in place: f32 staging unless the file is
     * F32, and its bf16 rounding for bf16 */
    const size_t tile_values = reads_in_place(&job) ? 0 : (size_t)(job.rows * job.k);
    const size_t tile_floats = job.dtype == VT_F32 ? 0 : tile_values;
    const size_t tile16_values = job.bf16 ? tile_values : 0;
    int n_workers = ctx->threading == ONEDNN_THREADING_OMP ? 1 : ctx->n_threads;
    for (int i = 0; i < n_workers; i++) {
        vt_status st = ensure_worker(ctx, &ctx->workers[i], tile_floats, tile16_values, scratch);
        if (st != VT_OK) return st;
    }
    if (job.bf16) { /* the activations rounded once, read by every tile */
        void *x16 = ctx->x16;
        vt_status st =
            onednn_ensure_buffer(ctx->host, &x16, &ctx->x16_capacity, (size_t)(job.m * job.k), sizeof(uint16_t));
        ctx->x16 = x16;
        if (st != VT_OK) return st;
        round_rows_job r = {.x = x->data, .x16 = ctx->x16, .k = job.k};
        vt_host_parallel_for(ctx->host, job.m, 16, round_rows_task, &r);
        job.x = ctx->x16;
    }

    if (ctx->threading == ONEDNN_THREADING_OMP) return run_omp(&job);
    int64_t n_tiles = (job.n + job.rows - 1) / job.rows;
    vt_host_parallel_for(ctx->host, n_tiles, 1, tiles_task, &job);
    return (vt_status)atomic_load(&job.status);
}
