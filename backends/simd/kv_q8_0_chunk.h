/* kv_q8_0_chunk.h — attention scores against a chunk of a Q8_0 K cache,
 * for every query of a work item, with the positions in vector lanes.
 *
 * A chunk's k rows (CHUNK positions of one kv head) are widened to int16 and
 * transposed once (q8_0_transpose_chunk): word m of lane i holds values
 * 2m and 2m + 1 of position i. A query's scores for the whole chunk are
 * then one multiply-add of 16-bit pairs per value pair (vpdpwssd on the
 * AVX-512 tier; vpmaddwd + vpaddd on AVX2, two registers of 8 positions),
 * the query's pair broadcast against the chunk's column: no horizontal
 * sums, and no k widening per query. Prefill items reuse a transposed chunk
 * for up to MAX_TILE_TOKENS * G queries, a decode item for its token's G.
 *
 * The numbers: per position i and block b the integer sum
 *   isum[b][i] = qs[b] . k[i][b]   (|qs| <= 32767, |k| <= 127: < 2^31, exact)
 * and then, in block order,
 *   s[i] = float(isum[0][i]) * (qd[0] * kd[i][0]),
 *   s[i] = fma(float(isum[b][i]), qd[b] * kd[i][b], s[i])   for b = 1 .. nb - 1
 * (float() rounds a sum past 2^24 to nearest, as every path does). Integer
 * sums are exact in any order and the float steps are elementwise, so both
 * tiers, and every path that scores a query (prefill, decode, shared
 * decode), give the same bits. */
#ifndef VT_SIMD_KV_Q8_0_CHUNK_H
#define VT_SIMD_KV_Q8_0_CHUNK_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "simd_vec.h"
#include "vt/vt_dtype.h"

/* Positions per chunk: one 512-bit register of int32 or f32 lanes. */
#define Q8_CHUNK 16

#if defined(__AVX512F__) && defined(__AVX512BW__)
/* Queries scored per pass over the transposed chunk (4 accumulators and
 * the loaded column in registers). */
#define Q8_QUERIES 4

/* kt [nb * 16][Q8_CHUNK] (int32 words of two int16) from the chunk's rows
 * k[0 .. len - 1] (Q8_0 blocks, nb a row); positions len .. Q8_CHUNK - 1
 * are zero. Per block: each row widened into one register (16 words), the
 * 16 transposed. */
SIMD_INLINE void q8_0_transpose_chunk(const vt_block_q8_0 *const *k, int64_t len, int64_t nb, int32_t *kt) {
    for (int64_t b = 0; b < nb; b++) {
        __m512 r[16];
        for (int64_t i = 0; i < 16; i++)
            r[i] = i < len ? _mm512_castsi512_ps(_mm512_cvtepi8_epi16(
                                 _mm256_loadu_si256((const __m256i *)(const void *)k[i][b].qs)))
                           : _mm512_setzero_ps();
        simd_transpose16x16_ps(r);
        int32_t *col = kt + b * 16 * Q8_CHUNK;
        for (int m = 0; m < 16; m++) _mm512_storeu_ps((float *)(void *)(col + m * Q8_CHUNK), r[m]);
    }
}

/* A row's nb blocks of integers as f32 (exact): out [nb * 32]. */
SIMD_INLINE void q8_0_widen_row(const vt_block_q8_0 *row, int64_t nb, float *out) {
    for (int64_t b = 0; b < nb; b++)
        for (int h = 0; h < 2; h++)
            _mm512_storeu_ps(out + b * 32 + 16 * h, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                        _mm_loadu_si128((const __m128i *)(const void *)(row[b].qs + 16 * h)))));
}

/* One block's integer sums for Q queries (Q a constant at each call): the
 * chunk's column words loaded once for all of them. */
SIMD_INLINE __m512i q8_pairs_madd(__m512i acc, __m512i k, __m512i q) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, k, q);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(k, q));
#endif
}

/* Scores of Q queries (qs[u] [nb * 32], qd[u] [nb]) for the chunk's 16
 * positions (kd [nb][16]: their block scales), into out[u] [16]. */
SIMD_INLINE void q8_0_chunk_scores_q(int Q, const int16_t *const *qs, const float *const *qd, const int32_t *kt,
                                     const float *kd, int64_t nb, float *const *out) {
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        __m512i acc[4];
        SIMD_UNROLL
        for (int u = 0; u < Q; u++) acc[u] = _mm512_setzero_si512();
        const int32_t *col = kt + b * 16 * Q8_CHUNK;
        for (int m = 0; m < 16; m++) {
            const __m512i kv = _mm512_loadu_si512((const void *)(col + m * Q8_CHUNK));
            SIMD_UNROLL
            for (int u = 0; u < Q; u++) {
                int32_t pair;
                memcpy(&pair, qs[u] + b * 32 + 2 * m, sizeof pair);
                acc[u] = q8_pairs_madd(acc[u], kv, _mm512_set1_epi32(pair));
            }
        }
        const __m512 kdb = _mm512_loadu_ps(kd + b * Q8_CHUNK);
        SIMD_UNROLL
        for (int u = 0; u < Q; u++) {
            const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(qd[u][b]), kdb);
            const __m512 x = _mm512_cvtepi32_ps(acc[u]);
            s[u] = b == 0 ? _mm512_mul_ps(x, scale) : _mm512_fmadd_ps(x, scale, s[u]);
        }
    }
    SIMD_UNROLL
    for (int u = 0; u < Q; u++) _mm512_storeu_ps(out[u], s[u]);
}

/* w [nb][Q8_CHUNK] = p [Q8_CHUNK] times each block's scales vd [nb][Q8_CHUNK]. */
SIMD_INLINE void q8_0_block_weights(const float *p, const float *vd, int64_t nb, float *w) {
    const __m512 pv = _mm512_loadu_ps(p);
    for (int64_t b = 0; b < nb; b++)
        _mm512_storeu_ps(w + b * Q8_CHUNK, _mm512_mul_ps(pv, _mm512_loadu_ps(vd + b * Q8_CHUNK)));
}

/* The 16 values h of a block's 32 as f32: from a widened row (rows), or
 * widened here from the block's integers (blocks) — the same numbers. */
SIMD_INLINE __m512 q8_values16(const void *const *v, const vt_block_q8_0 *const *vb, int64_t i, int64_t b, int h) {
    if (v) return _mm512_loadu_ps((const float *)v[i] + 32 * b + 16 * h);
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(vb[i][b].qs + 16 * h))));
}

/* y[u][32 b + e] += w[u][b][i] v[i][32 b + e] for rows i in [i0, i1), every
 * block b, for Q outputs (Q a constant at each call): each row slice
 * loaded once for all of them, from the rows widened to f32 (v) or widened
 * in registers from the blocks (v NULL, vb: where few queries share a
 * chunk, a decode's, widening into memory first costs more than it saves).
 * Per value one FMA per row in row order, so an output's numbers do not
 * depend on Q, on how its rows are split or on where they were widened. */
SIMD_INLINE void q8_0_accumulate_q(int Q, float *const *y, const float *const *w, const void *const *v,
                                   const vt_block_q8_0 *const *vb, int64_t i0, int64_t i1, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        __m512 a[4][2];
        SIMD_UNROLL
        for (int u = 0; u < Q; u++) a[u][0] = _mm512_loadu_ps(y[u] + 32 * b), a[u][1] = _mm512_loadu_ps(y[u] + 32 * b + 16);
        for (int64_t i = i0; i < i1; i++) {
            const __m512 x0 = q8_values16(v, vb, i, b, 0), x1 = q8_values16(v, vb, i, b, 1);
            SIMD_UNROLL
            for (int u = 0; u < Q; u++) {
                const __m512 wv = _mm512_set1_ps(w[u][b * Q8_CHUNK + i]);
                a[u][0] = _mm512_fmadd_ps(wv, x0, a[u][0]);
                a[u][1] = _mm512_fmadd_ps(wv, x1, a[u][1]);
            }
        }
        SIMD_UNROLL
        for (int u = 0; u < Q; u++) _mm512_storeu_ps(y[u] + 32 * b, a[u][0]), _mm512_storeu_ps(y[u] + 32 * b + 16, a[u][1]);
    }
}
#else
/* As above with 256-bit registers: positions 0-7 and 8-15 in two, two
 * queries a pass (16 registers). */
#define Q8_QUERIES 2

/* r[i] <- column i of the 8 x 8 block of 32-bit words whose rows were r[0..7]. */
SIMD_INLINE void q8_transpose8x8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 2; g++) {
        u[4 * g] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

/* As the AVX-512 tier's: each row widened into two registers (words 0-7,
 * 8-15), then four 8 x 8 transposes a block. */
SIMD_INLINE void q8_0_transpose_chunk(const vt_block_q8_0 *const *k, int64_t len, int64_t nb, int32_t *kt) {
    for (int64_t b = 0; b < nb; b++) {
        int32_t *col = kt + b * 16 * Q8_CHUNK;
        for (int half = 0; half < 2; half++) { /* rows 8 half .. 8 half + 7 */
            __m256 lo[8], hi[8];
            for (int64_t i = 0; i < 8; i++) {
                const int64_t row = 8 * half + i;
                if (row < len) {
                    const int8_t *q = k[row][b].qs;
                    lo[i] = _mm256_castsi256_ps(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)q)));
                    hi[i] = _mm256_castsi256_ps(
                        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(q + 16))));
                } else {
                    lo[i] = hi[i] = _mm256_setzero_ps();
                }
            }
            q8_transpose8x8(lo);
            q8_transpose8x8(hi);
            for (int m = 0; m < 8; m++) {
                _mm256_storeu_ps((float *)(void *)(col + m * Q8_CHUNK + 8 * half), lo[m]);
                _mm256_storeu_ps((float *)(void *)(col + (m + 8) * Q8_CHUNK + 8 * half), hi[m]);
            }
        }
    }
}

SIMD_INLINE void q8_0_widen_row(const vt_block_q8_0 *row, int64_t nb, float *out) {
    for (int64_t b = 0; b < nb; b++)
        for (int u = 0; u < 4; u++)
            _mm256_storeu_ps(out + b * 32 + 8 * u, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                                       _mm_loadl_epi64((const __m128i *)(const void *)(row[b].qs + 8 * u)))));
}


SIMD_INLINE void q8_0_chunk_scores_q(int Q, const int16_t *const *qs, const float *const *qd, const int32_t *kt,
                                     const float *kd, int64_t nb, float *const *out) {
    __m256 s[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()}, {_mm256_setzero_ps(), _mm256_setzero_ps()}};
    for (int64_t b = 0; b < nb; b++) {
        __m256i acc[2][2];
        SIMD_UNROLL
        for (int u = 0; u < Q; u++) acc[u][0] = acc[u][1] = _mm256_setzero_si256();
        const int32_t *col = kt + b * 16 * Q8_CHUNK;
        for (int m = 0; m < 16; m++) {
            const __m256i k0 = _mm256_loadu_si256((const __m256i *)(const void *)(col + m * Q8_CHUNK));
            const __m256i k1 = _mm256_loadu_si256((const __m256i *)(const void *)(col + m * Q8_CHUNK + 8));
            SIMD_UNROLL
            for (int u = 0; u < Q; u++) {
                int32_t pair;
                memcpy(&pair, qs[u] + b * 32 + 2 * m, sizeof pair);
                const __m256i q = _mm256_set1_epi32(pair);
                acc[u][0] = _mm256_add_epi32(acc[u][0], _mm256_madd_epi16(k0, q));
                acc[u][1] = _mm256_add_epi32(acc[u][1], _mm256_madd_epi16(k1, q));
            }
        }
        SIMD_UNROLL
        for (int u = 0; u < Q; u++)
            for (int h = 0; h < 2; h++) {
                const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(qd[u][b]), _mm256_loadu_ps(kd + b * Q8_CHUNK + 8 * h));
                const __m256 x = _mm256_cvtepi32_ps(acc[u][h]);
                s[u][h] = b == 0 ? _mm256_mul_ps(x, scale) : _mm256_fmadd_ps(x, scale, s[u][h]);
            }
    }
    SIMD_UNROLL
    for (int u = 0; u < Q; u++) _mm256_storeu_ps(out[u], s[u][0]), _mm256_storeu_ps(out[u] + 8, s[u][1]);
}

SIMD_INLINE void q8_0_block_weights(const float *p, const float *vd, int64_t nb, float *w) {
    const __m256 p0 = _mm256_loadu_ps(p), p1 = _mm256_loadu_ps(p + 8);
    for (int64_t b = 0; b < nb; b++) {
        _mm256_storeu_ps(w + b * Q8_CHUNK, _mm256_mul_ps(p0, _mm256_loadu_ps(vd + b * Q8_CHUNK)));
        _mm256_storeu_ps(w + b * Q8_CHUNK + 8, _mm256_mul_ps(p1, _mm256_loadu_ps(vd + b * Q8_CHUNK + 8)));
    }
}

SIMD_INLINE __m256 q8_values8(const void *const *v, const vt_block_q8_0 *const *vb, int64_t i, int64_t b, int e) {
    if (v) return _mm256_loadu_ps((const float *)v[i] + 32 * b + 8 * e);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(vb[i][b].qs + 8 * e))));
}

SIMD_INLINE void q8_0_accumulate_q(int Q, float *const *y, const float *const *w, const void *const *v,
                                   const vt_block_q8_0 *const *vb, int64_t i0, int64_t i1, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        __m256 a[2][4];
        SIMD_UNROLL
        for (int u = 0; u < Q; u++)
            SIMD_UNROLL
            for (int e = 0; e < 4; e++) a[u][e] = _mm256_loadu_ps(y[u] + 32 * b + 8 * e);
        for (int64_t i = i0; i < i1; i++) {
            __m256 x[4];
            SIMD_UNROLL
            for (int e = 0; e < 4; e++) x[e] = q8_values8(v, vb, i, b, e);
            SIMD_UNROLL
            for (int u = 0; u < Q; u++) {
                const __m256 wv = _mm256_set1_ps(w[u][b * Q8_CHUNK + i]);
                SIMD_UNROLL
                for (int e = 0; e < 4; e++) a[u][e] = _mm256_fmadd_ps(wv, x[e], a[u][e]);
            }
        }
        SIMD_UNROLL
        for (int u = 0; u < Q; u++)
            SIMD_UNROLL
            for (int e = 0; e < 4; e++) _mm256_storeu_ps(y[u] + 32 * b + 8 * e, a[u][e]);
    }
}
#endif

#endif
