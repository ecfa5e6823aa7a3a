/* matmul_q4_k_prepared.c — Q4_K weights in simd's own layout (made once at
 * engine creation, see prepare.c) and the matmul that reads it.
 *
 * Why a layout: in the file's layout one 32-byte activation load feeds one
 * weight row, and every call unpacks each block's 6-bit scales again. Here
 * rows are interleaved in groups of 8, so a 4-byte activation broadcast
 * feeds 8 weight rows in one vpmaddubsw, whose 8 32-bit lanes then hold the
 * 8 rows' partial sums: a sub-block costs 8 vpmaddubsw + 8 16-bit adds per
 * activation row and one vpmaddwd with the 8 rows' scales, where the file's
 * layout needs a vpmaddwd per vpmaddubsw. Scales and minimums are stored
 * unpacked (bytes), d and dmin stay f16 (8 converted at once), so a block of
 * 8 rows is 1184 bytes, 148 per row against the file's 144: decode, which
 * streams the weights once, reads 3% more.
 *
 * Arithmetic per (weight row, activation row), in lane = row order, the same
 * in every tile (decode, a few rows, prefill), so a row's result never
 * depends on M or on which tile ran it (batch invariance):
 *   per block b: sumi = sum_j sc_j (q_j . x_j)        exact int32
 *                summ = sum_j m_j sum(x_j)            exact int32
 *                t = d * float(sumi); t = t - dmin * float(summ) (one FMA)
 *                acc = acc + t * dx                     (one FMA)
 *   result = acc after the last block.
 * The integer sums cannot overflow: a vpmaddubsw lane is at most
 * 2 * 15 * 127 = 3810, 8 of them 30480 < 2^15. */
#include <string.h>

#include "k4_group.h"
#include "prepared_groups.h"
#include "simd.h"
#include "simd_vec.h"

typedef k4_gblock q4k_gblock; /* the 4-bit group block, nothing more */

size_t simd_q4_k_prepared_size(int64_t K, int64_t N) { return (size_t)(simd_k4_groups(N) * (K / 256)) * sizeof(q4k_gblock); }

int64_t simd_q4_k_prepared_units(int64_t N) { return simd_k4_groups(N); }

void simd_k4_group_row(k4_gblock *o, int r, vt_fp16_t d, vt_fp16_t dmin, const uint8_t *scales, const uint8_t *qs) {
    const __m128i low4 = _mm_set1_epi8(0x0F), high4 = _mm_set1_epi8((char)0xF0);
    o->d[r] = d;
    o->dmin[r] = dmin;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        vt_get_scale_min_k4(j, scales, &sc, &m);
        o->scales[j][r] = sc;
        o->mins[j / 2][r][j % 2] = m;
    }
    for (int i = 0; i < 4; i++) {
        /* file bytes 32i..32i+31: sub-block 2i in the low nibbles, 2i+1 in the high;
         * value l of a sub-block pairs with value 16 + l in one byte here */
        const __m128i a = _mm_loadu_si128((const __m128i *)(qs + 32 * i));
        const __m128i c = _mm_loadu_si128((const __m128i *)(qs + 32 * i + 16));
        const __m128i even = _mm_or_si128(_mm_and_si128(a, low4), _mm_slli_epi16(_mm_and_si128(c, low4), 4));
        const __m128i odd = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), low4), _mm_and_si128(c, high4));
        uint8_t e[16], od[16];
        _mm_storeu_si128((__m128i *)e, even);
        _mm_storeu_si128((__m128i *)od, odd);
        for (int h = 0; h < 4; h++) {
            memcpy(&o->qs[2 * i][h][r * 4], e + 4 * h, 4);
            memcpy(&o->qs[2 * i + 1][h][r * 4], od + 4 * h, 4);
        }
    }
}

void simd_q4_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 256;
    const vt_block_q4_k *rows = src;
    q4k_gblock *out = dst;
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            q4k_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: zero weights, d = dmin = 0 */
            for (int r = 0; r < SIMD_GROUP_ROWS && g * SIMD_GROUP_ROWS + r < N; r++) {
                const vt_block_q4_k *blk = &rows[(g * SIMD_GROUP_ROWS + r) * nb + b];
                simd_k4_group_row(o, r, blk->d, blk->dmin, blk->scales, blk->qs);
            }
        }
}

/* res[g * R + r] lane i = weight row i of group wg[g] . activation row m0 + r,
 * for g < NG, r < R, NG * R <= 8 (NG and R constants at each call site). `stream`: the
 * groups come from memory once (decode), so prefetch ahead. */
SIMD_INLINE void tile(const q4k_gblock *const *wg, int NG, const simd_act *x, int64_t m0, int R, int stream,
                      __m256 *res) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    SIMD_ALIGNED float acc[8][8]; /* NG * R <= 8; in memory: touched once per block */
    SIMD_UNROLL
    for (int i = 0; i < NG * R; i++) _mm256_store_ps(acc[i], _mm256_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        const q4k_gblock *w[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            w[g] = wg[g] + b;
            if (stream && R > 1) /* a few rows: their activations own L1 */
                simd_prefetch_ahead_l2(w[g], (int)sizeof(q4k_gblock));
            else if (stream)
                simd_prefetch_ahead(w[g], (int)sizeof(q4k_gblock));
        }
        __m256i sumi[2][8];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++)
            SIMD_UNROLL
            for (int r = 0; r < R; r++) sumi[g][r] = _mm256_setzero_si256();
        const int8_t *xb = x->qs + m0 * K + b * 256;
        for (int j = 0; j < 8; j++) {
            __m256i s16[2][8];
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
                        s16[g][r] = _mm256_add_epi16(
                            s16[g][r], _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], xl), _mm256_maddubs_epi16(hi[g], xh)));
                        SIMD_KEEP(s16[g][r]);
                    }
                }
            }
            SIMD_UNROLL
            for (int g = 0; g < NG; g++) {
                const __m256i sc = k4_scales(w[g], j);
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    sumi[g][r] = _mm256_add_epi32(sumi[g][r], _mm256_madd_epi16(s16[g][r], sc));
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
static void group_rows(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    const q4k_gblock *g[1] = {(const q4k_gblock *)wg};
#define TILE_R(n) (stream ? tile(g, 1, &j->act, m0, n, 1, res) : tile(g, 1, &j->act, m0, n, 0, res))
    switch (R) {
    case 1: TILE_R(1); break;
    case 2: TILE_R(2); break;
    case 3: TILE_R(3); break;
    case 4: TILE_R(4); break;
    case 5: TILE_R(5); break;
    case 6: TILE_R(6); break;
    case 7: TILE_R(7); break;
    default: TILE_R(8); break;
    }
#undef TILE_R
}

static void group_pair(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    const q4k_gblock *g[2] = {(const q4k_gblock *)wg0, (const q4k_gblock *)wg1};
    tile(g, 2, &j->act, 0, 1, 1, res);
}

static void group_pair_rows(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int R, __m256 *res) {
    const q4k_gblock *g[2] = {(const q4k_gblock *)wg0, (const q4k_gblock *)wg1};
    switch (R) {
    case 2: tile(g, 2, &j->act, 0, 2, 1, res); break;
    case 3: tile(g, 2, &j->act, 0, 3, 1, res); break;
    default: tile(g, 2, &j->act, 0, 4, 1, res); break;
    }
}

static const simd_group_layout q4k_layout = {
    .act_kind = SIMD_ACT_Q8_K32I, .block_len = 256, .block_bytes = sizeof(q4k_gblock), .rows = group_rows,
    .pair = group_pair, .pair_rows = group_pair_rows, .few_rows = SIMD_MAX_ROWS};

vt_status simd_q4_k_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    return simd_group_matmul(ctx, node, &q4k_layout);
}
