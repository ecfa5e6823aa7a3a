/* k4_group.h — the 4-bit part of simd's Q4_K and Q5_K layouts
 * (matmul_q4_k_prepared.c, matmul_q5_k_prepared.c): 8 weight rows of one
 * block of 256 values interleaved, their 6-bit scales and minimums unpacked
 * to bytes, d and dmin kept f16. Both dtypes share the file's block fields
 * (d, dmin, 12 scale bytes, 128 nibble bytes) and the arithmetic around the
 * nibbles, so the layout, its unpacking and the per-block finish live here
 * once; Q5_K's layout is this block followed by its fifth bits.
 * Included by the AVX2 translation units only. */
#ifndef VT_SIMD_K4_GROUP_H
#define VT_SIMD_K4_GROUP_H

#include <immintrin.h>
#include <string.h>

#include "prepared_groups.h"
#include "simd.h"
#include "simd_vec.h"

/* One block of 256 values of SIMD_GROUP_ROWS rows. */
typedef struct k4_gblock {
    vt_fp16_t d[SIMD_GROUP_ROWS];
    vt_fp16_t dmin[SIMD_GROUP_ROWS];
    uint8_t scales[8][SIMD_GROUP_ROWS];   /* [sub-block j][row] */
    uint8_t mins[4][SIMD_GROUP_ROWS][2];  /* [pair i][row][sub-block 2i, 2i+1] */
    uint8_t qs[8][4][SIMD_GROUP_ROWS * 4]; /* [sub-block j][h][row * 4 + t]: low nibble value 4h + t of
                                             sub-block j, high nibble value 16 + 4h + t */
} k4_gblock;

_Static_assert(sizeof(k4_gblock) == 1184, "the 4-bit group block is 1184 bytes");

/* Groups of SIMD_GROUP_ROWS rows covering N rows (the last one padded). */
static inline int64_t simd_k4_groups(int64_t N) { return (N + SIMD_GROUP_ROWS - 1) / SIMD_GROUP_ROWS; }

/* Row r of o from one file block's fields: d, dmin, the 12 packed scale
 * bytes and the 128 nibble bytes (the same in a Q4_K and a Q5_K block). */
void simd_k4_group_row(k4_gblock *o, int r, vt_fp16_t d, vt_fp16_t dmin, const uint8_t *scales, const uint8_t *qs);

/* The 8 rows' scales of sub-block j, each in both int16 halves of its lane:
 * the multiplier of a vpmaddwd that widens a lane's two 16-bit sums. */
SIMD_INLINE __m256i k4_scales(const k4_gblock *w, int j) {
    const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)w->scales[j]));
    return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
}

/* The end of block b for activation rows m0 .. m0 + R - 1: acc[r] (lane =
 * weight row) += (d * sumi[r] - dmin * sum_j m_j sum(x_j)) * dx, where
 * sumi[r] is the block's exact sum_j sc_j (q_j . x_j) for row m0 + r. One
 * FMA each, in this order, for every tile: a row's result never depends on
 * which tile ran it. */
SIMD_INLINE void k4_block_finish(const k4_gblock *w, const simd_act *x, int64_t m0, int R, int64_t b,
                                 const __m256i *sumi, float (*acc)[8]) {
    const int64_t K = x->K;
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->d));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w->dmin));
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        const int16_t *is = x->isums + (m0 + r) * (K / 32) + b * 8;
        __m256i summ = _mm256_setzero_si256();
        SIMD_UNROLL
        for (int i = 0; i < 4; i++) {
            int32_t pair;
            memcpy(&pair, is + 2 * i, 4);
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)w->mins[i]));
            summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mins, _mm256_set1_epi32(pair)));
        }
        __m256 t = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[r]));
        t = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(summ), t);
        _mm256_store_ps(acc[r], _mm256_fmadd_ps(t, _mm256_set1_ps(x->d[(m0 + r) * (K / 256) + b]), _mm256_load_ps(acc[r])));
    }
}

#endif
