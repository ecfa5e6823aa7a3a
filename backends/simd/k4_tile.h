/* k4_tile.h — the Q4_K tile of simd's 8-row group layout (k4_group.h) and
 * the walk's entry points around it, compiled once per instruction-set
 * tier: matmul_q4_k_prepared.c includes it with AVX2 flags,
 * matmul_q4_k_prepared_vnni.c with AVX-512 VNNI flags (the same layout and
 * walk; the VNNI tier adds a two-group tile, k4_tile2_zmm, that holds two
 * groups' rows in one 512-bit register and takes every M >= 2).
 *
 * The tiers differ only in how a sub-block's 32 products per lane are
 * summed: AVX2 multiplies byte pairs into int16 (vpmaddubsw, two of them
 * added in int16) and widens once with the scales (vpmaddwd); VNNI sums
 * byte quadruples straight into int32 (vpdpbusd on 512-bit registers, two
 * quarters of a sub-block at once) and multiplies by the scales in int32. Both sums are exact (AVX2's int16 stays below 2^15,
 * matmul_q4_k_prepared.c says why), so the integer result of every block is
 * the same and the float finish (k4_block_finish) is shared: the tiers agree
 * bit for bit, and batch invariance holds in each. */
#ifndef VT_SIMD_K4_TILE_H
#define VT_SIMD_K4_TILE_H

#include <immintrin.h>
#include <string.h>

#include "k4_group.h"
#include "k4_tile2_zmm.h"
#include "prepared_groups.h"
#include "simd.h"
#include "simd_vec.h"

/* The AVX-512 VNNI tier's layout entry (matmul_q4_k_prepared_vnni.c). */
extern const simd_group_layout simd_q4k_layout_vnni;

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
/* s + lo . xl + hi . xh, four byte products per int32 lane at a time. */
SIMD_INLINE __m256i k4_dot(__m256i s, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(s, lo, xl), hi, xh);
}
/* The 8 rows' scales of sub-block j, one per int32 lane. */
SIMD_INLINE __m256i k4_tile_scales(const k4_gblock *w, int j) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)w->scales[j]));
}
SIMD_INLINE __m256i k4_scale(__m256i s, __m256i sc) { return _mm256_mullo_epi32(s, sc); }
#else
/* s + lo . xl + hi . xh in int16 lanes (pairs of byte products). */
SIMD_INLINE __m256i k4_dot(__m256i s, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return _mm256_add_epi16(s, _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh)));
}
SIMD_INLINE __m256i k4_tile_scales(const k4_gblock *w, int j) { return k4_scales(w, j); }
/* Each lane's two int16 sums widened and scaled: one vpmaddwd. */
SIMD_INLINE __m256i k4_scale(__m256i s, __m256i sc) { return _mm256_madd_epi16(s, sc); }
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
/* The same in 512-bit registers: two of the sub-block's four 32-byte
 * quarters per load (lanes 0-7 the even quarter's 8 rows, 8-15 the odd
 * one's), each lane's activation quadruple placed by one permute, the
 * halves added at the end. The same exact int32 sums. */
SIMD_INLINE void k4_sub_block_zmm(const k4_gblock *const *w, int NG, const int8_t *xb, int64_t K, int j, int R,
                                  __m256i (*s)[8]) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512i s32[2][8];
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) s32[g][r] = _mm512_setzero_si512();
    SIMD_UNROLL
    for (int p = 0; p < 2; p++) {
        __m512i lo[2], hi[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            const __m512i q = _mm512_loadu_si512((const void *)w[g]->qs[j][2 * p]);
            lo[g] = _mm512_and_si512(q, low4);
            hi[g] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
        }
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const int8_t *xq = xb + r * K + 32 * j + 8 * p;
            const __m512i xl = _mm512_permutexvar_epi32(halves, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)xq)));
            const __m512i xh =
                _mm512_permutexvar_epi32(halves, _mm512_castsi128_si512(_mm_loadl_epi64((const __m128i *)(xq + 16))));
            SIMD_UNROLL
            for (int g = 0; g < NG; g++) {
                s32[g][r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(s32[g][r], lo[g], xl), hi[g], xh);
                SIMD_KEEP(s32[g][r]);
            }
        }
    }
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++)
            s[g][r] = _mm256_add_epi32(_mm512_castsi512_si256(s32[g][r]), _mm512_extracti64x4_epi64(s32[g][r], 1));
}
#endif

/* Sub-block j of block w[g] (g < NG) against activation rows xb + r * K
 * (r < R): s[g][r] lane i = row i's sum of q . x over the sub-block's 32
 * values, before its scale. */
SIMD_INLINE void k4_sub_block_ymm(const k4_gblock *const *w, int NG, const int8_t *xb, int64_t K, int j, int R,
                                  __m256i (*s16)[8]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) s16[g][r] = _mm256_setzero_si256();
    SIMD_UNROLL
    for (int h = 0; h < 4; h++) {
        __m256i lo[2], hi[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            const __m256i p = _mm256_loadu_si256((const __m256i *)w[g]->qs[j][h]);
            lo[g] = _mm256_and_si256(p, low4);
            hi[g] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
        }
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const int8_t *xq = xb + r * K + 32 * j + 4 * h;
            int32_t xl4, xh4;
            memcpy(&xl4, xq, 4);
            memcpy(&xh4, xq + 16, 4);
            const __m256i xl = _mm256_set1_epi32(xl4), xh = _mm256_set1_epi32(xh4);
            SIMD_UNROLL
            for (int g = 0; g < NG; g++) {
                s16[g][r] = k4_dot(s16[g][r], lo[g], xl, hi[g], xh);
                SIMD_KEEP(s16[g][r]);
            }
        }
    }
}

/* The sub-block in the registers that pay: with VNNI, 512-bit ones for two
 * rows or more; one row (decode, bound by memory) stays in 256-bit ones,
 * which measured faster there (simd_matmul_bench -P -t 2 q4_k M=1). */
SIMD_INLINE void k4_sub_block(const k4_gblock *const *w, int NG, const int8_t *xb, int64_t K, int j, int R,
                              __m256i (*s)[8]) {
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
    if (R >= 2) {
        k4_sub_block_zmm(w, NG, xb, K, j, R, s);
        return;
    }
#endif
    k4_sub_block_ymm(w, NG, xb, K, j, R, s);
}

/* Where decode (one activation row) prefetches its weights: into L1 on
 * the AVX2 tier, as measured on the AVX2 machines; into L2 on the AVX-512
 * VNNI tier, whose tile reads 44 GB/s a thread with the weights in cache.
 * Measured on an AMD EPYC with AVX-512 only (no Intel AVX-512 machine was
 * at hand): there the L1 prefetches slowed decode's two streams (an L1
 * prefetch holds one of L1's few miss buffers for a whole DRAM latency),
 * 24-25 GB/s against 30-31 into L2 and 30 with no software prefetch at all
 * (simd_matmul_bench -P -t 2 -d q4_k -m 1, six alternated rounds); vt
 * bench's tg 1.15-1.23x. L2 rather than none, which measured alike: one
 * rule for decode and a few rows. The other layouts' tiles, slower in
 * cache, measured alike either way. */
#if defined(__AVX512VNNI__)
#define K4_DECODE_PREFETCH_L2 1
#else
#define K4_DECODE_PREFETCH_L2 0
#endif

/* res[g * R + r] lane i = weight row i of group wg[g] . activation row m0 + r,
 * for g < NG, r < R, NG * R <= 8 (NG and R constants at each call site). `stream`: the
 * groups come from memory once (decode), so prefetch ahead. */
SIMD_INLINE void k4_tile(const k4_gblock *const *wg, int NG, const simd_act *x, int64_t m0, int R, int stream,
                      __m256 *res) {
    const int64_t K = x->K, nb = K / 256;
    SIMD_ALIGNED float acc[8][8]; /* NG * R <= 8; in memory: touched once per block */
    SIMD_UNROLL
    for (int i = 0; i < NG * R; i++) _mm256_store_ps(acc[i], _mm256_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        const k4_gblock *w[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            w[g] = wg[g] + b;
            /* a few rows: their activations own L1; decode on the VNNI tier: see above */
            if (stream && (R > 1 || K4_DECODE_PREFETCH_L2))
                simd_prefetch_ahead_l2(w[g], (int)sizeof(k4_gblock));
            else if (stream)
                simd_prefetch_ahead(w[g], (int)sizeof(k4_gblock));
        }
        __m256i sumi[2][8];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++)
            SIMD_UNROLL
            for (int r = 0; r < R; r++) sumi[g][r] = _mm256_setzero_si256();
        const int8_t *xb = x->qs + m0 * K + b * 256;
        for (int j = 0; j < 8; j++) {
            __m256i s16[2][8]; /* the sub-block's q . x per lane: int16 (AVX2) or int32 (VNNI) */
            k4_sub_block(w, NG, xb, K, j, R, s16);
            SIMD_UNROLL
            for (int g = 0; g < NG; g++) {
                const __m256i sc = k4_tile_scales(w[g], j);
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    sumi[g][r] = _mm256_add_epi32(sumi[g][r], k4_scale(s16[g][r], sc));
                    SIMD_KEEP(sumi[g][r]);
                }
            }
        }
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) k4_block_finish(w[g], x, m0, R, b, sumi[g], acc + g * R);
        /* keep acc in memory: no promotion of all of them to registers */
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int i = 0; i < NG * R; i++) res[i] = _mm256_load_ps(acc[i]);
}

/* The layout's tile for the shared walk (prepared_groups.c); the switch
 * gives the inlined tile constant R and stream. */
static void k4_group_rows(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    const k4_gblock *g[1] = {(const k4_gblock *)wg};
#define TILE_R(n) (stream ? k4_tile(g, 1, &j->act, m0, n, 1, res) : k4_tile(g, 1, &j->act, m0, n, 0, res))
    SIMD_WITH_CONST_R8(R, TILE_R)
#undef TILE_R
}

static void k4_group_pair(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    const k4_gblock *g[2] = {(const k4_gblock *)wg0, (const k4_gblock *)wg1};
    k4_tile(g, 2, &j->act, 0, 1, 1, res);
}

static void k4_group_pair_rows(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int R, __m256 *res) {
    const k4_gblock *g[2] = {(const k4_gblock *)wg0, (const k4_gblock *)wg1};
    switch (R) {
    case 2: k4_tile(g, 2, &j->act, 0, 2, 1, res); break;
    case 3: k4_tile(g, 2, &j->act, 0, 3, 1, res); break;
    default: k4_tile(g, 2, &j->act, 0, 4, 1, res); break;
    }
}

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
static void k4_group_tile2(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int64_t m0, int R, int stream,
                           __m256 *res) {
    k4_tile2_rows(&j->act, wg0, wg1, sizeof(k4_gblock), 0, m0, R, stream, res);
}
#define K4_TILE2 .tile2 = k4_group_tile2, .tile2_rows = K4_TILE2_ROWS
#else
#define K4_TILE2 .tile2 = NULL
#endif

/* The layout's entry in the shared walk (prepared_groups.h). */
#define K4_TILE_LAYOUT                                                                                            \
    {.act_kind = SIMD_ACT_Q8_K32I, .block_len = 256, .block_bytes = sizeof(k4_gblock), .rows = k4_group_rows,  \
     .pair = k4_group_pair, .pair_rows = k4_group_pair_rows, .few_rows = SIMD_MAX_ROWS, K4_TILE2}

#endif
