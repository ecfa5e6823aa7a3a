/* kv_bf16_chunk.h — attention over a chunk of a BF16 KV cache in bf16 dot
 * products (vdpbf16ps), for CPUs with AVX-512 BF16.
 *
 * With a BF16 cache the k and v values are already bf16; what the f32 path
 * spends is the multiply-adds (one FMA per value pair and query) and the
 * widening of every row. vdpbf16ps multiplies 32 bf16 pairs into 16 f32
 * lanes per instruction, twice an FMA's, with no widening. The price is
 * that the other factor must be bf16 too: each query is rounded to bf16
 * once per item, each softmax weight once per chunk (vt_f32_to_bf16's
 * rounding, nearest even: relative error at most 2^-8 each).
 *
 * The layouts, built once per chunk and kv head and used by every query:
 *   - kt [D / 2][CHUNK]: the chunk's k rows transposed by value pairs: lane i
 *     of word m holds values 2m and 2m + 1 of position i (zeros for
 *     positions past the chunk's length). A query's scores are then one
 *     vdpbf16ps per value pair, the pair broadcast against the column, with
 *     the positions in lanes: no horizontal sum;
 *   - vi [CHUNK / 2][D]: the v rows interleaved by position pairs: word d of
 *     pair m holds value d of positions 2m and 2m + 1. A query's weighted
 *     sum is one vdpbf16ps per pair and 16 values, its two weights
 *     broadcast.
 *
 * The numbers, the same for every path that runs a query (prefill, decode,
 * shared decode) and whichever queries share a pass:
 *   s[i] = sum over m = 0 .. D/2 - 1, in order, of the pair (2m + 1, then 2m)
 *          of exact bf16 products added to a running f32 (vdpbf16ps: rounded
 *          to nearest even, subnormals flushed to zero),
 * and for the accumulation, per value d, the pairs m of positions the query
 * sees in order (2m + 1 then 2m; a query seeing an odd number of positions
 * takes its last pair with the missing position's value 0, its weight being
 * 0 too), so no position a query does not see, whatever it holds, reaches
 * its sums. */
#ifndef VT_SIMD_KV_BF16_CHUNK_H
#define VT_SIMD_KV_BF16_CHUNK_H

#if defined(__AVX512BF16__)
#include <immintrin.h>
#include <stdint.h>

#include "simd_vec.h"
#include "vt/vt_bf16_row.h"

/* Queries scored per pass over a transposed chunk: each one's 16 lanes
 * are a chain of dependent vdpbf16ps, so 16 chains in flight cover the
 * instruction's latency at two a cycle (16 accumulators and the loaded
 * column in registers). */
#define BF16_QUERIES 16
/* SIMD_UNROLL's reason, for loops of up to BF16_QUERIES */
#define BF16_UNROLL _Pragma("GCC unroll 16")

/* kt from the chunk's len rows (each D bf16 values; D a multiple of 64, as
 * for everything here). */
static inline void bf16_transpose_chunk(const void *const *rows, int64_t len, int64_t D, uint32_t *kt) {
    for (int64_t b = 0; b < D / 32; b++) { /* 32 values: 16 pairs of every position */
        __m512 r[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < len ? _mm512_loadu_ps((const float *)rows[i] + 16 * b) : _mm512_setzero_ps();
        simd_transpose16x16_ps(r); /* r[m]: pair m of the block for each position */
        for (int m = 0; m < 16; m++) _mm512_storeu_ps((float *)(void *)(kt + (16 * b + m) * 16), r[m]);
    }
}

/* vi from the chunk's len rows: the pairs (2m, 2m + 1) with 2m < len, a
 * missing second row as zeros. */
static inline void bf16_interleave_chunk(const void *const *rows, int64_t len, int64_t D, uint32_t *vi) {
    for (int64_t m = 0; 2 * m < len; m++) {
        const uint16_t *a = rows[2 * m], *b = 2 * m + 1 < len ? (const uint16_t *)rows[2 * m + 1] : NULL;
        for (int64_t d = 0; d < D; d += 16) {
            const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(a + d)));
            const __m512i hi = b ? _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(b + d)))
                                 : _mm512_setzero_si512();
            _mm512_storeu_si512((void *)(vi + m * D + d), _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
        }
    }
}

/* out[u * 16 .. u * 16 + 15] = the scores of Q queries (bf16 rows of D
 * values, D apart from q on) against the transposed chunk kt. Q and, where
 * inlined with one, D are constants: each query's pair is then a broadcast
 * from a fixed offset of one moving pointer. */
SIMD_INLINE void bf16_chunk_scores_q(int Q, const uint16_t *q, int64_t D, const uint32_t *kt, float *out) {
    __m512 a[BF16_QUERIES];
    BF16_UNROLL
    for (int u = 0; u < Q; u++) a[u] = _mm512_setzero_ps();
    const int32_t *qp = (const int32_t *)(const void *)q;
    for (int64_t m = 0; m < D / 2; m++) {
        const __m512bh col = (__m512bh)_mm512_loadu_si512((const void *)(kt + m * 16));
        BF16_UNROLL
        for (int u = 0; u < Q; u++) {
            const __m512bh pair = (__m512bh)_mm512_set1_epi32(qp[u * (D / 2) + m]);
            a[u] = _mm512_dpbf16_ps(a[u], col, pair);
        }
    }
    BF16_UNROLL
    for (int u = 0; u < Q; u++) _mm512_storeu_ps(out + 16 * u, a[u]);
}

SIMD_INLINE void bf16_chunk_scores_d(int64_t n, const uint16_t *q, int64_t D, const uint32_t *kt, float *out) {
    int64_t j = 0;
    for (; j + BF16_QUERIES <= n; j += BF16_QUERIES) bf16_chunk_scores_q(BF16_QUERIES, q + j * D, D, kt, out + 16 * j);
    if (n - j >= 8) bf16_chunk_scores_q(8, q + j * D, D, kt, out + 16 * j), j += 8;
    if (n - j >= 4) bf16_chunk_scores_q(4, q + j * D, D, kt, out + 16 * j), j += 4;
    if (n - j >= 2) bf16_chunk_scores_q(2, q + j * D, D, kt, out + 16 * j), j += 2;
    if (n - j >= 1) bf16_chunk_scores_q(1, q + j * D, D, kt, out + 16 * j);
}

/* The scores of n queries, side by side from q (D values each) into out
 * (16 each): BF16_QUERIES a pass, the rest in smaller passes; the usual
 * head dim of 128 as a constant. */
static inline void bf16_chunk_scores(int64_t n, const uint16_t *q, int64_t D, const uint32_t *kt, float *out) {
    if (D == 128) bf16_chunk_scores_d(n, q, 128, kt, out);
    else bf16_chunk_scores_d(n, q, D, kt, out);
}

/* The softmax weights p[0..15] of a chunk (0 past what the query sees) as
 * 8 words of bf16 pairs. */
SIMD_INLINE void bf16_weight_pairs(const float *p, uint32_t *pairs) {
    vt_f32_to_bf16_row_avx512(p, (vt_bf16_t *)(void *)pairs, 16);
}

/* y[u][0..D) += the weighted v of the n positions every one of Q queries
 * sees (n the same for all, 1 .. CHUNK): pairs[u] their weights (as
 * bf16_weight_pairs), vi the interleaved chunk, last the row of position
 * n - 1 when n is odd (its pair taken with a zero second value). 64 values
 * at a time, Q * 4 accumulators. Q is a constant at each call. */
SIMD_INLINE void bf16_accumulate_q(int Q, float *const *y, const uint32_t *const *pairs, const uint32_t *vi,
                                   const uint16_t *last, int64_t n, int64_t D) {
    for (int64_t d = 0; d < D; d += 64) {
        __m512 a[4][4];
        SIMD_UNROLL
        for (int u = 0; u < Q; u++)
            SIMD_UNROLL
            for (int c = 0; c < 4; c++) a[u][c] = _mm512_loadu_ps(y[u] + d + 16 * c);
        int64_t m = 0;
        for (; 2 * m + 2 <= n; m++) {
            __m512bh w[4];
            SIMD_UNROLL
            for (int u = 0; u < Q; u++) w[u] = (__m512bh)_mm512_set1_epi32((int32_t)pairs[u][m]);
            SIMD_UNROLL
            for (int c = 0; c < 4; c++) {
                const __m512bh x = (__m512bh)_mm512_loadu_si512((const void *)(vi + m * D + d + 16 * c));
                SIMD_UNROLL
                for (int u = 0; u < Q; u++) a[u][c] = _mm512_dpbf16_ps(a[u][c], x, w[u]);
            }
        }
        if (n & 1) {
            __m512bh w[4];
            SIMD_UNROLL
            for (int u = 0; u < Q; u++) w[u] = (__m512bh)_mm512_set1_epi32((int32_t)pairs[u][m]);
            SIMD_UNROLL
            for (int c = 0; c < 4; c++) {
                const __m512bh x = (__m512bh)_mm512_cvtepu16_epi32(
                    _mm256_loadu_si256((const __m256i *)(const void *)(last + d + 16 * c)));
                SIMD_UNROLL
                for (int u = 0; u < Q; u++) a[u][c] = _mm512_dpbf16_ps(a[u][c], x, w[u]);
            }
        }
        SIMD_UNROLL
        for (int u = 0; u < Q; u++)
            SIMD_UNROLL
            for (int c = 0; c < 4; c++) _mm512_storeu_ps(y[u] + d + 16 * c, a[u][c]);
    }
}
#endif
#endif
