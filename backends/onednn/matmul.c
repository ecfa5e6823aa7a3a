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
 * Threading: host->parallel_for over tiles; each thread dequantizes and
 * multiplies its own tiles with oneDNN single-threaded (OpenMP team of 1),
 * so n threads keep exactly n cores busy and the dequantizing runs in
 * parallel too. oneDNN's own threads are not used: they split a call's rows
 * among themselves by the call's size, which changes the kernel a row is
 * summed by (measured with ONEDNN_MAX_CPU_ISA=AVX2), so a row's bits would
 * depend on the other rows of the call; one thread per call keeps the
 * sizes below the only thing that decides them.
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
 * is a multiple of 8 columns), and there are at least as many tiles as
 * threads. */
static int64_t tile_rows(const onednn_ctx *ctx, int64_t k, int64_t n) {
    int64_t rows = (int64_t)(ctx->tile_bytes / ((size_t)k * sizeof(float)));
    rows = rows / 16 * 16;
    if (rows < 16) rows = 16;
    if (rows > 1024) rows = 1024;
    if (ctx->n_threads > 1) {
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

/* How many rows a oneDNN call gets. oneDNN's gemm picks its kernels by M,
 * and they sum in different orders: a row's bits would depend on how many
 * rows share its call, so on the other sequences of a step (batch
 * invariance). Measured here (AMD EPYC with AVX-512, oneDNN 2.6.3; the rows
 * of calls of M = 1..40 and up to 1,100 against the same rows in one large
 * call):
 *   - AVX-512 kernels: f32 calls of fewer than 16 rows and bf16 calls of one
 *     row give other bits; every larger call the same;
 *   - AVX2 kernels (ONEDNN_MAX_CPU_ISA=AVX2, what an AVX2-only CPU runs):
 *     the last 1 to 3 rows past a call's 6-row blocks give other bits, and
 *     so do some rows of calls of 6k rows (145..1,048: its M blocking);
 *     calls of 12k rows, and of 16 (two blocks and 4 rows, summed as whole
 *     blocks), agree with each other.
 * So a call gets 16 rows, or a multiple of 12 of at least 24: M itself when
 * it is such a size (Y written in place), else the activations are copied
 * into a buffer padded with zero rows to the next one (at most 15 more),
 * and each tile's results go to its thread's buffer (the tile's columns of
 * every row, so it stays tile-sized whatever N) and their real rows on to
 * Y. One call per tile either way: splitting the rows into a direct call
 * and a padded one cost a second call per tile (pp37 0.67x here). Both
 * kernel families then give each row the same bits whatever M;
 * test_onednn_ops holds this bit for bit on whatever CPU runs it (the list
 * above is what it found on this one). */
static int64_t call_rows(int64_t m) {
    if (m <= 16) return 16;
    const int64_t r = (m + 11) / 12 * 12;
    return r < 24 ? 24 : r;
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
    size_t x_value_bytes; /* of one activation value: 4 (f32) or 2 (bf16) */
    int64_t call_m;       /* rows each oneDNN call multiplies: call_rows(m) */
    const void *call_x;   /* {K, call_m}: x itself, or x's rows then zero rows */
    bool padded;          /* call_m > m: results through each worker's tile_y */
    const onednn_matmul_entry *full; /* tiles of `rows` rows (writing Y, or tile_y when padded) */
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

/* The tile's products with every activation row: tile columns [n0, n0 +
 * nt) of Y (entry e multiplies that many weight rows, wt). Padded, they go
 * to the worker's tile_y (rows nt floats apart) and the real rows on to Y
 * while they are in cache. */
static vt_status run_tile(const matmul_job *job, const onednn_matmul_entry *e, onednn_worker *worker,
                          const void *wt, int64_t n0, int64_t nt) {
    if (!job->padded) return onednn_matmul_run(job->ctx, e, worker, job->call_m, job->call_x, wt, job->y + n0);
    void *tile_y = worker->tile_y;
    vt_status st = onednn_ensure_buffer(job->ctx->host, &tile_y, &worker->tile_y_capacity, (size_t)(job->call_m * nt),
                                        sizeof(float));
    worker->tile_y = tile_y;
    if (st == VT_OK) st = onednn_matmul_run(job->ctx, e, worker, job->call_m, job->call_x, wt, worker->tile_y);
    if (st == VT_OK)
        for (int64_t r = 0; r < job->m; r++)
            memcpy(job->y + r * job->n + n0, worker->tile_y + r * nt, sizeof(float) * (size_t)nt);
    return st;
}

static void fail(matmul_job *job, vt_status st) {
    int expected = VT_OK;
    atomic_compare_exchange_strong(&job->status, &expected, (int)st);
}

/* Tiles [begin, end) on this thread, oneDNN single-threaded. */
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
        if (st == VT_OK) st = run_tile(job, e, worker, wt, n0, nt);
        if (st != VT_OK) fail(job, st);
    }
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

/* Point job's calls at x when M is a call size, else at ctx's copy of it
 * with zero rows after. */
static vt_status pad_rows(onednn_ctx *ctx, matmul_job *job) {
    job->call_x = job->x;
    if (!job->padded) return VT_OK;
    const size_t row_bytes = (size_t)job->k * job->x_value_bytes;
    vt_status st = onednn_ensure_buffer(ctx->host, &ctx->pad_x, &ctx->pad_x_bytes, (size_t)job->call_m * row_bytes, 1);
    if (st != VT_OK) return st;
    if (job->m > 0) memcpy(ctx->pad_x, job->x, (size_t)job->m * row_bytes);
    /* zero is zero in f32 and bf16 alike */
    memset((uint8_t *)ctx->pad_x + (size_t)job->m * row_bytes, 0, (size_t)(job->call_m - job->m) * row_bytes);
    job->call_x = ctx->pad_x;
    return VT_OK;
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
    job.x_value_bytes = job.bf16 ? sizeof(uint16_t) : sizeof(float);
    job.rows = tile_rows(ctx, job.k, job.n);
    job.call_m = call_rows(job.m);
    job.padded = job.call_m != job.m;
    /* padded, a tile's results are rows of its own width in tile_y */
    int64_t tail_rows = job.n % job.rows;
    job.full = onednn_matmul_get(ctx, precision, job.k, job.rows, job.padded ? job.rows : job.n);
    job.tail = tail_rows ? onednn_matmul_get(ctx, precision, job.k, tail_rows, job.padded ? tail_rows : job.n) : job.full;
    if (!job.full || !job.tail) return VT_ERR_BACKEND;

    size_t scratch = job.full->scratch_bytes > job.tail->scratch_bytes ? job.full->scratch_bytes
                                                                       : job.tail->scratch_bytes;
    /* a tile buffer unless read in place: f32 staging unless the file is
     * F32, and its bf16 rounding for bf16 */
    const size_t tile_values = reads_in_place(&job) ? 0 : (size_t)(job.rows * job.k);
    const size_t tile_floats = job.dtype == VT_F32 ? 0 : tile_values;
    const size_t tile16_values = job.bf16 ? tile_values : 0;
    for (int i = 0; i < ctx->n_threads; i++) {
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
    vt_status st = pad_rows(ctx, &job);
    if (st != VT_OK) return st;

    int64_t n_tiles = (job.n + job.rows - 1) / job.rows;
    vt_host_parallel_for(ctx->host, n_tiles, 1, tiles_task, &job);
    return (vt_status)atomic_load(&job.status);
}
