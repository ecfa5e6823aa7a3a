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

#include "prepared_groups.h"
#include "simd.h"
#include "simd_vec.h"

#define GROUP 8 /* weight rows interleaved per group */

/* One block of 256 values of GROUP rows. */
typedef struct q4k_gblock {
    vt_fp16_t d[GROUP];
    vt_fp16_t dmin[GROUP];
    uint8_t scales[8][GROUP];   /* [sub-block j][row] */
    uint8_t mins[4][GROUP][2];  /* [pair i][row][sub-block 2i, 2i+1] */
    uint8_t qs[8][4][GROUP * 4]; /* [sub-block j][h][row * 4 + t]: low nibble value 4h + t of sub-block j,
                                    high nibble value 16 + 4h + t */
} q4k_gblock;

_Static_assert(sizeof(q4k_gblock) == 1184, "prepared q4_k group block is 1184 bytes");

static int64_t n_groups(int64_t N) { return (N + GROUP - 1) / GROUP; }

size_t simd_q4_k_prepared_size(int64_t K, int64_t N) { return (size_t)(n_groups(N) * (K / 256)) * sizeof(q4k_gblock); }

int64_t simd_q4_k_prepared_units(int64_t N) { return n_groups(N); }

void simd_q4_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 256;
    const vt_block_q4_k *rows = src;
    q4k_gblock *out = dst;
    const __m128i low4 = _mm_set1_epi8(0x0F), high4 = _mm_set1_epi8((char)0xF0);
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            q4k_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: zero weights, d = dmin = 0 */
            for (int r = 0; r < GROUP; r++) {
                const int64_t n = g * GROUP + r;
                if (n >= N) break;
                const vt_block_q4_k *blk = &rows[n * nb + b];
                o->d[r] = blk->d;
                o->dmin[r] = blk->dmin;
                for (int j = 0; j < 8; j++) {
                    uint8_t sc, m;
                    vt_get_scale_min_k4(j, blk->scales, &sc, &m);
                    o->scales[j][r] = sc;
                    o->mins[j / 2][r][j % 2] = m;
                }
                for (int i = 0; i < 4; i++) {
                    /* file bytes 32i..32i+31: sub-block 2i in the low nibbles, 2i+1 in the high;
                     * value l of a sub-block pairs with value 16 + l in one byte here */
                    const __m128i a = _mm_loadu_si128((const __m128i *)(blk->qs + 32 * i));
                    const __m128i c = _mm_loadu_si128((const __m128i *)(blk->qs + 32 * i + 16));
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
                /* the 8 rows' scales of sub-block j, each in both int16 halves of its lane */
                __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)w[g]->scales[j]));
                sc = _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    sumi[g][r] = _mm256_add_epi32(sumi[g][r], _mm256_madd_epi16(s16[g][r], sc));
                    SIMD_KEEP(sumi[g][r]);
                }
            }
        }
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[g]->d));
            const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[g]->dmin));
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const int16_t *is = x->isums + (m0 + r) * (K / 32) + b * 8;
                __m256i summ = _mm256_setzero_si256();
                SIMD_UNROLL
                for (int i = 0; i < 4; i++) {
                    int32_t pair;
                    memcpy(&pair, is + 2 * i, 4);
                    const __m256i m = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)w[g]->mins[i]));
                    summ = _mm256_add_epi32(summ, _mm256_madd_epi16(m, _mm256_set1_epi32(pair)));
                }
                __m256 t = _mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[g][r]));
                t = _mm256_fnmadd_ps(dmin, _mm256_cvtepi32_ps(summ), t);
                const __m256 a = _mm256_fmadd_ps(t, _mm256_set1_ps(x->d[(m0 + r) * nb + b]), _mm256_load_ps(acc[g * R + r]));
                _mm256_store_ps(acc[g * R + r], a);
            }
        }
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

vt_status simd_q4_k_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    const vt_tensor *W = &node->src[0], *X = &node->src[1], *Y = &node->dst;
    const int64_t K = W->ne[0];
    if (K % 256 != 0) return VT_ERR_INVALID;
    simd_group_job j;
    memset(&j, 0, sizeof j);
    vt_status st = simd_quantize_activations(ctx, X, SIMD_ACT_Q8_K32I, &j.act);
    if (st != VT_OK) return st;
    j.w = W->data;
    j.group_bytes = (size_t)(K / 256) * sizeof(q4k_gblock);
    j.N = W->ne[1];
    j.M = X->ne[1];
    j.y = Y->data;
    j.y_dtype = Y->dtype;
    j.rows = group_rows;
    j.pair = group_pair;
    j.pair_rows = group_pair_rows;
    j.few_rows = SIMD_MAX_ROWS;
    simd_run_groups(ctx, &j);
    return VT_OK;
}
