/* q4_0_q8_0_tile.h — the tiles of simd's prepared Q4_0 and Q8_0 layouts
 * (matmul_q4_0_q8_0_prepared.c describes the layouts and the arithmetic)
 * and the walk's entry points around them, compiled once per
 * instruction-set tier: matmul_q4_0_q8_0_prepared.c includes it with AVX2
 * flags, matmul_q4_0_q8_0_prepared_vnni.c with AVX-512 VNNI flags (the same
 * layouts, 8 rows per 256-bit register in both).
 *
 * The tiers differ only in how a column's byte products are summed (q8_dot,
 * q4_dot, q4_widen below): AVX2 in int16 pairs (vpmaddubsw) widened by
 * vpmaddwd, VNNI in int32 quadruples (vpdpbusd). Both sums are exact, so a
 * block's integer sum is the same, the float steps after it are shared, and
 * the tiers agree bit for bit; batch invariance holds in each. */
#ifndef VT_SIMD_Q4_0_Q8_0_TILE_H
#define VT_SIMD_Q4_0_Q8_0_TILE_H

#include <immintrin.h>
#include <string.h>

#include "prepared_groups.h"
#include "simd.h"
#include "simd_vec.h"

#define GROUP 8 /* weight rows interleaved per group */

/* One block of 32 values of GROUP rows. */
typedef struct q4_0_gblock {
    vt_fp16_t d[GROUP];
    uint8_t qs[4][GROUP * 4]; /* [h][row * 4 + t]: low nibble value 4h + t, high nibble value 16 + 4h + t */
} q4_0_gblock;

typedef struct q8_0_gblock {
    vt_fp16_t d[GROUP];
    int8_t qs[8][GROUP * 4]; /* [h][row * 4 + t]: value 4h + t */
} q8_0_gblock;

_Static_assert(sizeof(q4_0_gblock) == GROUP * sizeof(vt_block_q4_0), "prepared q4_0 keeps the file's bytes per row");
_Static_assert(sizeof(q8_0_gblock) == GROUP * sizeof(vt_block_q8_0), "prepared q8_0 keeps the file's bytes per row");

/* The AVX-512 VNNI tier's layout entries (matmul_q4_0_q8_0_prepared_vnni.c). */
extern const simd_group_layout simd_q4_0_layout_vnni, simd_q8_0_layout_vnni;

/* The tiers' inner products (the only code that differs between them).
 * Both sums are exact, so a block's int32 sumi is the same in each. */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
/* Q8_0: s + a . y, four byte products per int32 lane (vpdpbusd, a = |w|
 * unsigned, y = sign(w) x): one instruction per column. */
SIMD_INLINE __m256i q8_dot(__m256i s, __m256i a, __m256i y) { return _mm256_dpbusd_epi32(s, a, y); }
/* Two accumulators per (group, row), even and odd columns (both dtypes): a
 * vpdpbusd waits for the previous one's result, so one chain per tile of 1
 * or 2 (decode) would leave the multiplier idle between them. */
#define DOT_CHAINS 2
/* Q4_0: s + lo . xl + hi . xh in int32 lanes; no widening needed. */
SIMD_INLINE __m256i q4_dot(__m256i s, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(s, lo, xl), hi, xh);
}
SIMD_INLINE __m256i q4_widen(__m256i s) { return s; }
#else
/* Q8_0: pairs of products in int16 (|a y| <= 128 x 127, a pair 32512: two
 * pairs would not fit), widened to int32 at once by vpmaddwd with ones. */
SIMD_INLINE __m256i q8_dot(__m256i s, __m256i a, __m256i y) {
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(a, y), _mm256_set1_epi16(1)));
}
#define DOT_CHAINS 1
/* Q4_0: in int16 lanes (8 x 2 x 15 x 127 = 30480 < 2^15 over a block). */
SIMD_INLINE __m256i q4_dot(__m256i s, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_add_epi16(s, _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)));
}
/* Each lane's two int16 sums into one int32. */
SIMD_INLINE __m256i q4_widen(__m256i s) { return _mm256_madd_epi16(s, _mm256_set1_epi16(1)); }
#endif

/* The 4 activation bytes at p, in every 32-bit lane. */
SIMD_INLINE __m256i broadcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* res[g * R + r] lane i = weight row i of group wg[g] . activation row m0 + r,
 * for g < NG, r < R (NG, R and q8 constants at each call site). `stream`:
 * the groups come from memory once (decode), so prefetch ahead. */
SIMD_INLINE void tile(const void *const *wg, int NG, const simd_act *x, int64_t m0, int R, int q8, int stream,
                      __m256 *res) {
    const int64_t K = x->K, nb = K / 32;
    const size_t gbytes = q8 ? sizeof(q8_0_gblock) : sizeof(q4_0_gblock);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[2][4];
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[g][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *w[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            w[g] = (const uint8_t *)wg[g] + (size_t)b * gbytes;
            if (stream) simd_prefetch_ahead(w[g], (int)gbytes);
        }
        __m256i sumi[2][4];
        if (q8) {
            __m256i chain[DOT_CHAINS][2][4];
            SIMD_UNROLL
            for (int c = 0; c < DOT_CHAINS; c++)
                SIMD_UNROLL
                for (int g = 0; g < NG; g++)
                    SIMD_UNROLL
                    for (int r = 0; r < R; r++) chain[c][g][r] = _mm256_setzero_si256();
            SIMD_UNROLL
            for (int h = 0; h < 8; h++) {
                __m256i p[2], a[2];
                SIMD_UNROLL
                for (int g = 0; g < NG; g++) {
                    p[g] = _mm256_loadu_si256((const __m256i *)((const q8_0_gblock *)w[g])->qs[h]);
                    a[g] = _mm256_sign_epi8(p[g], p[g]);
                }
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const __m256i xb = broadcast4(x->qs + (m0 + r) * K + b * 32 + 4 * h);
                    SIMD_UNROLL
                    for (int g = 0; g < NG; g++) {
                        __m256i *s = &chain[h % DOT_CHAINS][g][r];
                        *s = q8_dot(*s, a[g], _mm256_sign_epi8(xb, p[g]));
                        SIMD_KEEP(*s);
                    }
                }
            }
            SIMD_UNROLL
            for (int g = 0; g < NG; g++)
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    sumi[g][r] = chain[0][g][r];
                    SIMD_UNROLL
                    for (int c = 1; c < DOT_CHAINS; c++) sumi[g][r] = _mm256_add_epi32(sumi[g][r], chain[c][g][r]);
                }
        } else {
            __m256i s16[DOT_CHAINS][2][4]; /* q . x per lane: int16 pairs (AVX2) or int32 (VNNI) */
            SIMD_UNROLL
            for (int c = 0; c < DOT_CHAINS; c++)
                SIMD_UNROLL
                for (int g = 0; g < NG; g++)
                    SIMD_UNROLL
                    for (int r = 0; r < R; r++) s16[c][g][r] = _mm256_setzero_si256();
            SIMD_UNROLL
            for (int h = 0; h < 4; h++) {
                __m256i lo[2], hi[2];
                SIMD_UNROLL
                for (int g = 0; g < NG; g++) {
                    const __m256i p = _mm256_loadu_si256((const __m256i *)((const q4_0_gblock *)w[g])->qs[h]);
                    lo[g] = _mm256_and_si256(p, low4);
                    hi[g] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
                }
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const int8_t *xq = x->qs + (m0 + r) * K + b * 32 + 4 * h;
                    const __m256i xl = broadcast4(xq), xh = broadcast4(xq + 16);
                    SIMD_UNROLL
                    for (int g = 0; g < NG; g++) {
                        __m256i *c = &s16[h % DOT_CHAINS][g][r];
                        *c = q4_dot(*c, lo[g], xl, hi[g], xh);
                        SIMD_KEEP(*c);
                    }
                }
            }
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                /* 8 sum x of the activation block: the weights' offset of 8 */
                const __m256i off = _mm256_set1_epi32(8 * (int32_t)x->isums[(m0 + r) * nb + b]);
                SIMD_UNROLL
                for (int g = 0; g < NG; g++) {
                    sumi[g][r] = _mm256_sub_epi32(q4_widen(s16[0][g][r]), off);
                    SIMD_UNROLL
                    for (int c = 1; c < DOT_CHAINS; c++)
                        sumi[g][r] = _mm256_add_epi32(sumi[g][r], q4_widen(s16[c][g][r]));
                }
            }
        }
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[g])); /* d[] leads both blocks */
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const __m256 s = _mm256_mul_ps(dw, _mm256_set1_ps(x->d[(m0 + r) * nb + b]));
                acc[g][r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sumi[g][r]), acc[g][r]);
                SIMD_KEEP(acc[g][r]);
            }
        }
    }
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) res[g * R + r] = acc[g][r];
}

/* The layouts' tiles for the shared walk (prepared_groups.c); the switch
 * gives the inlined tile constant R and stream, q8 picks the layout. */
SIMD_INLINE void rows_of(const simd_group_job *j, int q8, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    const void *g[1] = {wg};
#define TILE_R(n) (stream ? tile(g, 1, &j->act, m0, n, q8, 1, res) : tile(g, 1, &j->act, m0, n, q8, 0, res))
    switch (R) {
    case 1: TILE_R(1); break;
    case 2: TILE_R(2); break;
    case 3: TILE_R(3); break;
    default: TILE_R(4); break;
    }
#undef TILE_R
}

static void rows_q4_0(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    rows_of(j, 0, wg, m0, R, stream, res);
}

static void rows_q8_0(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    rows_of(j, 1, wg, m0, R, stream, res);
}

static void pair_q4_0(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    const void *g[2] = {wg0, wg1};
    tile(g, 2, &j->act, 0, 1, 0, 1, res);
}

static void pair_q8_0(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    const void *g[2] = {wg0, wg1};
    tile(g, 2, &j->act, 0, 1, 1, 1, res);
}

/* Rows up to which the groups are streamed from memory (prefetched) rather
 * than walked in L2 tiles, whose first pass reads them unprefetched
 * (prepared_groups.c): on the AVX-512 VNNI tier, measured on an AMD EPYC
 * (simd_matmul_bench -P -t 2 -d q8_0, K = 1024, N = 3072 and K = 3072,
 * N = 1024, weights from DRAM) Q8_0 223-255 -> 179-187 us at 9 rows,
 * 340-368 -> 271-283 at 16, 421-450 -> 365-376 at 23, 559-604 -> 508-536
 * at 32; Q4_0 172-184 -> 158-165 at 9, 243-250 -> 223-232 at 16, alike at
 * 32. The AVX2 tier keeps the tiles above 8 rows. */
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define Q4_0_Q8_0_STREAM_ROWS 32
#else
#define Q4_0_Q8_0_STREAM_ROWS 0
#endif

/* The layouts' entries in the shared walk (prepared_groups.h); Q4_0 needs
 * each activation block's sum for its offset of 8. */
#define Q4_0_TILE_LAYOUT                                                                                          \
    {.act_kind = SIMD_ACT_Q8_0I, .block_len = 32, .block_bytes = sizeof(q4_0_gblock), .rows = rows_q4_0,         \
     .pair = pair_q4_0, .stream_rows = Q4_0_Q8_0_STREAM_ROWS}
#define Q8_0_TILE_LAYOUT                                                                                          \
    {.act_kind = SIMD_ACT_Q8_0, .block_len = 32, .block_bytes = sizeof(q8_0_gblock), .rows = rows_q8_0,          \
     .pair = pair_q8_0, .stream_rows = Q4_0_Q8_0_STREAM_ROWS}

#endif
