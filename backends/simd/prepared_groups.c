/* prepared_groups.c — the walk over a prepared 8-row interleaved layout that
 * Q4_K, Q5_K, Q4_0 and Q8_0 share (see prepared_groups.h); their tiles are in
 * matmul_<dtype>_prepared.c. Q6_K's layout has a walk of its own for a plain
 * matmul and gives this one its tiles for the experts' one pass
 * (matmul_q6_k_x8.c). */
#include "prepared_groups.h"

#include <stdbool.h>
#include <string.h>

/* Store the 8 rows of group g for activation row m (fewer at the tail). */
static inline void store_group(const simd_group_job *t, int64_t g, int64_t m, __m256 v) {
    const int64_t n0 = g * SIMD_GROUP_ROWS;
    if (n0 + SIMD_GROUP_ROWS <= t->N) {
        simd_store8(t->y_dtype, t->y, m * t->N + n0, v);
        return;
    }
    SIMD_ALIGNED float lanes[8];
    _mm256_store_ps(lanes, v);
    for (int64_t i = 0; n0 + i < t->N; i++) simd_store1(t->y_dtype, t->y, m * t->N + n0 + i, lanes[i]);
}

static inline const uint8_t *group_at(const simd_group_job *t, int64_t g) { return t->w + (size_t)g * t->group_bytes; }

/* Group g against activation rows m0 .. m0+R-1. */
static void group_rows(const simd_group_job *t, int64_t g, int64_t m0, int R, int stream) {
    __m256 res[SIMD_MAX_ROWS];
    t->rows(t, group_at(t, g), m0, R, stream, res);
    for (int r = 0; r < R; r++) store_group(t, g, m0 + r, res[r]);
}

/* Group g against rows m0 .. m0+R-1 in one-group tiles of at most
 * SIMD_GROUP_TILE_R rows (the odd group out of a two-group walk). */
static void group_rows_tiled(const simd_group_job *t, int64_t g, int64_t m0, int R, int stream) {
    for (int r0 = 0; r0 < R; r0 += SIMD_GROUP_TILE_R)
        group_rows(t, g, m0 + r0, R - r0 < SIMD_GROUP_TILE_R ? R - r0 : SIMD_GROUP_TILE_R, stream);
}

/* A two-group tile's results: res[r] for group ga, res[R + r] for gb. */
static void store_pair(const simd_group_job *t, int64_t ga, int64_t gb, int64_t m0, int R, const __m256 *res) {
    for (int r = 0; r < R; r++) {
        store_group(t, ga, m0 + r, res[r]);
        store_group(t, gb, m0 + r, res[R + r]);
    }
}

/* Decode's two streams (groups g and g + half of the range) read
 * together, each pair against all M rows while it is in L1 or L2: one call of
 * the layout's pair_rows (M <= SIMD_GROUP_TILE_R), or its two-group tile
 * (tile2) tile2_rows rows at a time, the first call pulling the pair from
 * memory and prefetching ahead; an odd last group through rows.
 *
 * A layout with a two-group tile walks every M so, prompts too, rather
 * than in L2 tiles of groups that every few rows pass over: a tile's first
 * pass read its weights from memory with no prefetch, which a few rows
 * cannot hide, and at large K a tile held a single group, walked by the
 * one-group tile. Measured on an AMD EPYC with AVX-512 (VNNI tier,
 * simd_matmul_bench -P -t 2 -d q4_k, weights from DRAM, medians): at
 * K = 1024, N = 3072, 141 -> 85-107 us at 9 rows, 187 -> 138-146 at 16,
 * 1858 -> 1550 at 256, 3302 -> 3162 at 512; at K = 14336, N = 1024,
 * 6653 -> 4420 us at 128 rows, 25953 -> 15489 at 512; vt bench pp16
 * 500 -> 640 tok/s, pp512 654-702 -> 718-735 (qwen3-0.6B Q4_K_M). Layouts
 * without a two-group tile stream one group at a time up to their
 * stream_rows (SIMD_MAX_ROWS when 0) and keep the L2 tiles above: the AVX2
 * tier's Q4_K streamed so measured slower at 512 rows (K = 1024, N = 3072:
 * 7.7 -> 9.1 ms). Neither walk changes a row's numbers: every tile does
 * the same arithmetic for each row (prepared_groups.h). */
static void two_streams_rows(const simd_group_job *t, int64_t begin, int64_t end) {
    const int64_t half = (end - begin) / 2;
    const int R = (int)t->M;
    for (int64_t g = begin; g < begin + half; g++) {
        __m256 res[2 * SIMD_MAX_ROWS];
        if (!t->tile2) {
            t->pair_rows(t, group_at(t, g), group_at(t, g + half), R, res);
            store_pair(t, g, g + half, 0, R, res);
            continue;
        }
        for (int64_t m0 = 0; m0 < R; m0 += t->tile2_rows) {
            const int n = R - m0 < t->tile2_rows ? (int)(R - m0) : t->tile2_rows;
            t->tile2(t, group_at(t, g), group_at(t, g + half), m0, n, m0 == 0, res);
            store_pair(t, g, g + half, m0, n, res);
        }
    }
    if ((end - begin) % 2) group_rows_tiled(t, end - 1, 0, R, 1);
}

/* Whether M rows of a layout with tiles tile2 and stream_rows stream its
 * groups (two_streams_rows or the few-rows walk) rather than walk them in
 * L2 tiles. */
static bool streams(bool tile2, int stream_rows, int64_t M) {
    return tile2 || M <= (stream_rows ? stream_rows : SIMD_MAX_ROWS);
}

static bool streamed(const simd_group_job *t) { return streams(t->tile2 != NULL, t->stream_rows, t->M); }

/* The layout's tiles into job j. */
static void take_layout(simd_group_job *j, const simd_group_layout *L) {
    j->rows = L->rows;
    j->pair = L->pair;
    j->pair_rows = L->pair_rows;
    j->few_rows = L->few_rows;
    j->tile2 = L->tile2;
    j->tile2_rows = L->tile2_rows;
    j->stream_rows = L->stream_rows;
}

/* Groups per L2 tile in prefill: ~64 KiB of weights. */
static int64_t prefill_tile_groups(size_t group_bytes) {
    const int64_t tile = (int64_t)(65536 / group_bytes);
    return tile < 1 ? 1 : tile;
}

/* Groups [begin, end) against every activation row. */
static void run_range(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const simd_group_job *t = arg;
    const int tr = SIMD_GROUP_TILE_R;
    if (t->M == 1) {
        /* decode: two groups at once, from the two halves of the range, so
         * the thread reads two sequential streams (one left DRAM bandwidth
         * unused: the prefetchers keep more lines in flight for two) */
        const int64_t half = (end - begin) / 2;
        for (int64_t g = begin; g < begin + half; g++) {
            __m256 res[2];
            t->pair(t, group_at(t, g), group_at(t, g + half), res);
            store_group(t, g, 0, res[0]);
            store_group(t, g + half, 0, res[1]);
        }
        if ((end - begin) % 2) group_rows(t, end - 1, 0, 1, 1);
        return;
    }
    if (t->tile2 || (t->pair_rows && t->M <= tr)) {
        two_streams_rows(t, begin, end);
        return;
    }
    if (streamed(t)) {
        /* a few sequences decoding together (or a short prompt, up to the
         * layout's stream_rows): each group streamed from memory once,
         * against all rows few_rows at a time (past 8 rows only the first
         * tile prefetches: the later ones find the group in L1) */
        const int fr = t->few_rows ? t->few_rows : tr;
        for (int64_t g = begin; g < end; g++)
            for (int64_t m0 = 0; m0 < t->M; m0 += fr)
                group_rows(t, g, m0, t->M - m0 < fr ? (int)(t->M - m0) : fr, m0 == 0 || t->M <= SIMD_MAX_ROWS);
        return;
    }
    /* prefill: a tile of groups stays in L2 while every few activation
     * rows pass over it */
    for (int64_t g0 = begin; g0 < end; g0 += t->tile_groups) {
        const int64_t g1 = g0 + t->tile_groups < end ? g0 + t->tile_groups : end;
        for (int64_t m0 = 0; m0 < t->M; m0 += tr) {
            const int R = t->M - m0 < tr ? (int)(t->M - m0) : tr;
            for (int64_t g = g0; g < g1; g++) group_rows(t, g, m0, R, 0);
        }
    }
}

/* Groups a thread claims at a time out of `groups`: streamed, about 4
 * chunks per thread in whole pairs (a thread that falls behind does not
 * leave the other waiting for long); else one L2 tile. */
static int64_t claim_chunk(const simd_ctx *ctx, int64_t groups, bool streaming, int64_t tile_groups) {
    if (!streaming) return tile_groups;
    const int64_t chunk = groups / (4 * (int64_t)ctx->n_threads);
    return chunk < 4 ? 4 : (chunk + 1) & ~(int64_t)1;
}

void simd_run_groups(simd_ctx *ctx, simd_group_job *job) {
    const int64_t groups = (job->N + SIMD_GROUP_ROWS - 1) / SIMD_GROUP_ROWS;
    job->tile_groups = prefill_tile_groups(job->group_bytes);
    simd_dynamic_for(ctx, groups, claim_chunk(ctx, groups, streamed(job), job->tile_groups), run_range, job);
}

/* The parts' jobs, one pass: groups numbered across the parts, each chunk
 * cut at the parts' boundaries. */
typedef struct parts_walk {
    simd_group_job *jobs;
    int n_jobs;
    int64_t groups; /* per part (every part has N rows) */
} parts_walk;

static void run_parts(void *arg, int64_t begin, int64_t end, int thread) {
    const parts_walk *w = arg;
    for (int64_t g = begin; g < end;) {
        const int64_t j = g / w->groups, local = g % w->groups;
        const int64_t stop = (j + 1) * w->groups < end ? (j + 1) * w->groups : end;
        run_range(&w->jobs[j], local, local + (stop - g), thread);
        g = stop;
    }
}

vt_status simd_group_matmul_parts(simd_ctx *ctx, const vt_tensor *X, float *y, int64_t N,
                                  const simd_group_part *parts, int n_parts, const simd_group_layout *L) {
    const int64_t K = X->ne[0];
    if (K % L->block_len != 0) return VT_ERR_INVALID;
    if (n_parts <= 0 || N <= 0) return VT_OK;
    simd_act all;
    memset(&all, 0, sizeof all);
    vt_status st = simd_quantize_activations(ctx, X, L->act_kind, &all);
    if (st != VT_OK) return st;
    simd_group_job *jobs = ctx->host->alloc((size_t)n_parts * sizeof *jobs, SIMD_ALIGN);
    if (!jobs) return VT_ERR_NOMEM;
    const int64_t block = L->act_kind == SIMD_ACT_Q8_0 || L->act_kind == SIMD_ACT_Q8_0I ? 32 : 256;
    const size_t group_bytes = (size_t)(K / L->block_len) * L->block_bytes;
    int64_t most = 0;
    for (int i = 0; i < n_parts; i++) {
        simd_group_job *j = &jobs[i];
        memset(j, 0, sizeof *j);
        const int64_t r0 = parts[i].row0;
        /* the part's rows of the shared activations: every array advanced r0 rows */
        j->act.K = K;
        j->act.qs = all.qs + r0 * K;
        j->act.d = all.d + r0 * (K / block);
        j->act.bsums = all.bsums ? all.bsums + r0 * (K / 16) : NULL;
        j->act.hsums = all.hsums ? all.hsums + r0 * (K / 8) : NULL;
        j->act.msums = all.msums ? all.msums + r0 * (K / 32) : NULL;
        j->act.isums = all.isums ? all.isums + r0 * (K / 32) : NULL;
        j->w = parts[i].w;
        j->group_bytes = group_bytes;
        j->N = N;
        j->M = parts[i].M;
        j->y = y + r0 * N;
        j->y_dtype = VT_F32;
        take_layout(j, L);
        j->tile_groups = prefill_tile_groups(group_bytes);
        most = parts[i].M > most ? parts[i].M : most;
    }
    parts_walk w = {jobs, n_parts, (N + SIMD_GROUP_ROWS - 1) / SIMD_GROUP_ROWS};
    const int64_t total = w.groups * n_parts;
    /* as simd_run_groups, streamed where the most rows any part has
     * stream; a chunk never spans two parts' pairs oddly, since run_parts
     * cuts it at their boundaries */
    const int64_t chunk = claim_chunk(ctx, total, streams(L->tile2 != NULL, L->stream_rows, most), jobs[0].tile_groups);
    simd_dynamic_for(ctx, total, chunk, run_parts, &w);
    ctx->host->free(jobs);
    return VT_OK;
}

vt_status simd_group_matmul(simd_ctx *ctx, const vt_node *node, const simd_group_layout *L) {
    const vt_tensor *W = &node->src[0], *X = &node->src[1], *Y = &node->dst;
    const int64_t K = W->ne[0];
    if (K % L->block_len != 0) return VT_ERR_INVALID;
    simd_group_job j;
    memset(&j, 0, sizeof j);
    vt_status st = simd_quantize_activations(ctx, X, L->act_kind, &j.act);
    if (st != VT_OK) return st;
    j.w = W->data;
    j.group_bytes = (size_t)(K / L->block_len) * L->block_bytes;
    j.N = W->ne[1];
    j.M = X->ne[1];
    j.y = Y->data;
    j.y_dtype = Y->dtype;
    take_layout(&j, L);
    simd_run_groups(ctx, &j);
    return VT_OK;
}
