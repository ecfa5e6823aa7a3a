/* k4_tile2_zmm.h — the AVX-512 VNNI tier's two-group tile of simd's 4-bit
 * group layouts (k4_group.h): Q4_K's (k4_tile.h) and Q5_K's
 * (matmul_q5_k_prepared_vnni.c). Included only by translation units built
 * with AVX-512 VNNI flags. */
#ifndef VT_SIMD_K4_TILE2_ZMM_H
#define VT_SIMD_K4_TILE2_ZMM_H

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#include <immintrin.h>
#include <string.h>

#include "k4_group.h"
#include "simd.h"
#include "simd_vec.h"

/* acc + the byte products of a with the 4 bytes at p repeated in every
 * lane: vpdpbusd with its third operand an embedded broadcast from memory,
 * which compilers do not form from _mm512_set1_epi32 (they emit a separate
 * vpbroadcastd, an extra instruction per vpdpbusd in the tiles; measured
 * 1.10x on one core, simd_matmul_bench -P -H -t 1 -m 128 -d q4_k). The
 * same instruction, so the same exact sums. */
SIMD_INLINE __m512i simd_dpbusd_bcst(__m512i acc, __m512i a, const void *p) {
    __asm__("vpdpbusd {%2%{1to16%}, %1, %0|%0, %1, %2%{1to16%}}" : "+v"(acc) : "v"(a), "m"(*(const int32_t *)p));
    return acc;
}

/* Rows per call: the 8 rows' sums take 8 of the 32 registers. */
#define K4_TILE2_ROWS 8
_Static_assert(K4_TILE2_ROWS >= 1 && K4_TILE2_ROWS <= SIMD_MAX_ROWS, "the walk keeps a tile's results in SIMD_MAX_ROWS");

/* Two groups' halves joined: a's 32 bytes at p in lanes 0-7, c's at the
 * same offset in lanes 8-15. */
SIMD_INLINE __m512i k4_join(const k4_gblock *a, const k4_gblock *c, const void *pa) {
    const size_t off = (size_t)((const uint8_t *)pa - (const uint8_t *)a);
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)pa)),
                              _mm256_loadu_si256((const __m256i *)((const uint8_t *)c + off)), 1);
}

/* k4_block_finish for both groups at once, lane for lane the same float
 * operations in the same order (so the same bits): acc[r] lanes 0-7 group
 * a's rows, 8-15 group c's. */
SIMD_INLINE void k4_block_finish2(const k4_gblock *a, const k4_gblock *c, const simd_act *x, int64_t m0, int R,
                                  int64_t b, const __m512i *sumi, float (*acc)[16]) {
    const int64_t K = x->K;
    const __m512 d = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a->d)),
                                                             _mm_loadu_si128((const __m128i *)c->d), 1));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a->dmin)), _mm_loadu_si128((const __m128i *)c->dmin), 1));
    __m512i mins[4];
    SIMD_UNROLL
    for (int i = 0; i < 4; i++) /* lanes 0-7: a's rows' (m_2i, m_2i+1) as int16 pairs; 8-15: c's */
        mins[i] = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a->mins[i])), _mm_loadu_si128((const __m128i *)c->mins[i]), 1));
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        const int16_t *is = x->isums + (m0 + r) * (K / 32) + b * 8;
        __m512i summ = _mm512_setzero_si512();
        SIMD_UNROLL
        for (int i = 0; i < 4; i++) {
            int32_t pair;
            memcpy(&pair, is + 2 * i, 4);
            summ = _mm512_add_epi32(summ, _mm512_madd_epi16(mins[i], _mm512_set1_epi32(pair)));
        }
        __m512 t = _mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[r]));
        t = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(summ), t);
        _mm512_store_ps(acc[r], _mm512_fmadd_ps(t, _mm512_set1_ps(x->d[(m0 + r) * (K / 256) + b]), _mm512_load_ps(acc[r])));
    }
}

/* Two groups of the 4-bit layout (Q4_K: blocks of k4_gblock; Q5_K, fifth
 * = 1: blocks of block_bytes, a k4_gblock then its fifth bits) against
 * activation rows m0 .. m0+R-1 in 512-bit registers: the groups' 8 rows
 * side by side (lanes 0-7 group a, 8-15 group c), so each activation
 * quadruple is one 32-bit broadcast feeding 16 weight rows, with no
 * permute; the weights' halves are joined once per quarter for all R rows.
 * res[r] for group a, res[R + r] for group c. Every lane's integer sums
 * are exact, as the AVX2 tiles' are, and the float finish is
 * k4_block_finish's lane for lane: bit for bit the other tiles. */
SIMD_INLINE void k4_tile2_zmm(const uint8_t *wa, const uint8_t *wc, size_t block_bytes, int fifth, const simd_act *x,
                              int64_t m0, int R, int stream, __m256 *res) {
    const int64_t K = x->K, nb = K / 256;
    const __m512i low4 = _mm512_set1_epi8(0x0F), bit0 = _mm512_set1_epi8(0x01), bit1 = _mm512_set1_epi8(0x02);
    _Alignas(64) float acc[SIMD_MAX_ROWS][16]; /* 512-bit aligned loads and stores */
    SIMD_UNROLL
    for (int r = 0; r < R; r++) _mm512_store_ps(acc[r], _mm512_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        const k4_gblock *a = (const k4_gblock *)(wa + (size_t)b * block_bytes);
        const k4_gblock *c = (const k4_gblock *)(wc + (size_t)b * block_bytes);
        if (stream) { /* a few rows: their activations own L1; one row: see k4_tile.h */
            simd_prefetch_ahead_l2(a, (int)block_bytes);
            simd_prefetch_ahead_l2(c, (int)block_bytes);
        }
        const int8_t *xb = x->qs + m0 * K + b * 256;
        __m512i sumi[SIMD_MAX_ROWS];
        SIMD_UNROLL
        for (int r = 0; r < R; r++) sumi[r] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j++) {
            __m512i s[SIMD_MAX_ROWS];
            SIMD_UNROLL
            for (int r = 0; r < R; r++) s[r] = _mm512_setzero_si512();
            /* Q5_K's fifth bits of sub-block j, bits 2h and 2h + 1 for
             * quarter h (q5k_group.h): shifted down 2 per quarter, a 16-bit
             * shift bringing the upper byte's bits no lower than bit 2 */
            __m512i hb = fifth ? k4_join(a, c, (const uint8_t *)a + sizeof(k4_gblock) + 32 * j) : _mm512_setzero_si512();
            SIMD_UNROLL
            for (int h = 0; h < 4; h++) {
                const __m512i q = k4_join(a, c, a->qs[j][h]);
                __m512i lo = _mm512_and_si512(q, low4);
                __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
                if (fifth) {
                    lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(hb, bit0), 4));
                    hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(hb, bit1), 3));
                    hb = _mm512_srli_epi16(hb, 2);
                }
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const int8_t *xq = xb + r * K + 32 * j + 4 * h;
                    s[r] = simd_dpbusd_bcst(simd_dpbusd_bcst(s[r], lo, xq), hi, xq + 16);
                }
            }
            const __m512i sc = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)a->scales[j]),
                                                                        _mm_loadl_epi64((const __m128i *)c->scales[j])));
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(s[r], sc));
                SIMD_KEEP(sumi[r]);
            }
        }
        k4_block_finish2(a, c, x, m0, R, b, sumi, acc);
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        res[r] = _mm256_load_ps(acc[r]);
        res[R + r] = _mm256_load_ps(acc[r] + 8);
    }
}

/* k4_tile2_zmm for any R up to K4_TILE2_ROWS: the switch gives the inlined
 * tile a constant R and stream (block_bytes and fifth are constants at
 * every call). */
SIMD_INLINE void k4_tile2_rows(const simd_act *x, const uint8_t *wg0, const uint8_t *wg1, size_t block_bytes, int fifth,
                               int64_t m0, int R, int stream, __m256 *res) {
#define TILE2_R(n)                                                                                                \
    (stream ? k4_tile2_zmm(wg0, wg1, block_bytes, fifth, x, m0, n, 1, res)                                         \
            : k4_tile2_zmm(wg0, wg1, block_bytes, fifth, x, m0, n, 0, res))
    SIMD_WITH_CONST_R8(R, TILE2_R)
#undef TILE2_R
}
#endif
#endif
