/* prepared_groups.h — the schedule shared by simd's 8-row interleaved
 * layouts (Q4_K, Q5_K, Q4_0, Q8_0): which groups of 8 weight rows meet which
 * activation rows, in what order, on which thread. A layout supplies only its
 * tile (one group block against a few activation rows); the walk over the
 * weights — two streams in decode (and at 2..4 rows for a layout with a pair
 * tile, at any number of rows for one with a two-group tile), each group
 * streamed once for a few rows, L2 tiles in prefill otherwise — and the stores are the same for all of them, so a
 * row's result depends on neither M nor the tile (batch invariance holds as
 * long as each layout's tile does the same arithmetic for every R).
 * Included by the kernel translation units (AVX2 and the tiers above). */
#ifndef VT_SIMD_PREPARED_GROUPS_H
#define VT_SIMD_PREPARED_GROUPS_H

#include <immintrin.h>

#include "simd.h"
#include "simd_vec.h"

#define SIMD_GROUP_ROWS 8   /* weight rows interleaved per group */
#define SIMD_GROUP_TILE_R 4 /* activation rows per tile call */

typedef struct simd_group_job simd_group_job;

/* Group wg against activation rows m0 .. m0+R-1 (1 <= R <= 4, or up to
 * the job's few_rows in the few-rows walk): res[r] holds
 * the group's 8 rows for activation row m0+r. stream = the weights come from
 * memory once (decode, a few rows: prefetch ahead) rather than from L2. */
typedef void (*simd_group_rows_fn)(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream,
                                   __m256 *res);
/* Decode: groups wg0 and wg1 (two streams) against activation row 0. */
typedef void (*simd_group_pair_fn)(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res);
/* A few rows: groups wg0 and wg1 (two streams) against activation rows
 * 0 .. R-1 (2 <= R <= SIMD_GROUP_TILE_R): res[r] for wg0, res[R + r] for wg1. */
typedef void (*simd_group_pair_rows_fn)(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int R,
                                        __m256 *res);
/* Groups wg0 and wg1 against activation rows m0 .. m0+R-1 (1 <= R <=
 * the layout's tile2_rows): res[r] for wg0, res[R + r] for wg1. stream as
 * for simd_group_rows_fn. */
typedef void (*simd_group_tile2_fn)(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int64_t m0, int R,
                                    int stream, __m256 *res);

struct simd_group_job {
    const uint8_t *w;   /* the prepared copy: groups of group_bytes */
    size_t group_bytes; /* one group's blocks along K */
    int64_t N, M;
    simd_act act; /* activations, quantized once for the op */
    void *y;      /* [M][N] of y_dtype */
    int32_t y_dtype;
    simd_group_rows_fn rows;
    simd_group_pair_fn pair;
    /* optional: when 2 <= M <= SIMD_GROUP_TILE_R, the groups in decode's
     * two streams, read together against all M rows (reading one stream at
     * a time leaves memory idle at a few rows); NULL: each group once
     * against all rows */
    simd_group_pair_rows_fn pair_rows;
    /* rows per tile call when 2 <= M <= stream_rows (SIMD_MAX_ROWS when 0)
     * and pair_rows does not take M (each group streamed
     * once against all of them): up to SIMD_MAX_ROWS if the layout's rows
     * takes that many (one pass over the group: its weights unpacked once
     * for all rows), 0 for SIMD_GROUP_TILE_R */
    int few_rows;
    /* optional: two groups against up to tile2_rows activation rows (a
     * tier whose registers hold both groups' rows), for every M >= 2:
     * decode's two streams, each pair against all rows tile2_rows at a
     * time (prepared_groups.c says why prompts too); NULL: rows, pair_rows
     * and few_rows as above */
    simd_group_tile2_fn tile2;
    int tile2_rows;
    /* rows up to which a layout without tile2 streams its groups (the
     * few-rows walk) rather than walking L2 tiles: 0 for SIMD_MAX_ROWS */
    int stream_rows;
    int64_t tile_groups; /* set by simd_run_groups */
};

/* Runs job over all ceil(N / 8) groups on ctx's threads. */
void simd_run_groups(simd_ctx *ctx, simd_group_job *job);

/* What a layout gives the walk: its tiles (the job's fields of the same
 * names), the activation quantization its integer dot products read
 * (SIMD_ACT_*), and one group's block of block_len values along K. */
typedef struct simd_group_layout {
    int act_kind;
    int64_t block_len;
    size_t block_bytes;
    simd_group_rows_fn rows;
    simd_group_pair_fn pair;
    simd_group_pair_rows_fn pair_rows;
    int few_rows;
    simd_group_tile2_fn tile2;
    int tile2_rows;
    int stream_rows;
} simd_group_layout;

/* MATMUL node on a weight prepared in layout L: the activations quantized
 * once, then every group walked (simd_run_groups). */
vt_status simd_group_matmul(simd_ctx *ctx, const vt_node *node, const simd_group_layout *L);

/* One matrix of a simd_group_matmul_parts call: its prepared copy and the
 * rows of the shared activations it multiplies (rows [row0, row0 + M)). */
typedef struct simd_group_part {
    const void *w;
    int64_t row0, M;
} simd_group_part;

/* Several {K, N} matrices in layout L, each against its own rows of X {K,
 * rows} f32, into y [rows][N] f32 (row r of y from the part holding row r):
 * the activations quantized once for all, and every part's groups walked in
 * one pass over the threads (a mixture of experts' step: one region, not one
 * per expert). Each row's arithmetic is simd_group_matmul's. */
vt_status simd_group_matmul_parts(simd_ctx *ctx, const vt_tensor *X, float *y, int64_t N,
                                  const simd_group_part *parts, int n_parts, const simd_group_layout *L);

#endif
