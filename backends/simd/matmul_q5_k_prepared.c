/* matmul_q5_k_prepared.c — Q5_K weights in simd's own layout (made once at
 * engine creation, see prepare.c) and the matmul that reads it: the layout
 * of matmul_q4_k_prepared.c (8 rows interleaved per block of 256, a 4-byte
 * activation broadcast feeding 8 rows in one vpmaddubsw, scales and
 * minimums unpacked to bytes, d and dmin f16) plus the fifth bits, arranged
 * so that one 32-byte load per sub-block serves its 4 columns of 4 values:
 * a block of 8 rows is 1440 bytes, 180 per row against the file's 176, so
 * decode, which streams the weights once, reads 2.3% more.
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
 * 2 * 31 * 127 = 7874, so only 4 of them (two columns, low and high
 * values) are summed in int16 (31496 < 2^15) before vpmaddwd widens them
 * with the scales. */
#include <string.h>

#include "k4_group.h"
#include "prepared_groups.h"
#include "q5k_group.h"
#include "simd.h"
#include "simd_vec.h"

size_t simd_q5_k_prepared_size(int64_t K, int64_t N) { return (size_t)(simd_k4_groups(N) * (K / 256)) * sizeof(q5k_gblock); }

int64_t simd_q5_k_prepared_units(int64_t N) { return simd_k4_groups(N); }

void simd_q5_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 256;
    const vt_block_q5_k *rows = src;
    q5k_gblock *out = dst;
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            q5k_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: zero weights, d = dmin = 0 */
            for (int r = 0; r < SIMD_GROUP_ROWS && g * SIMD_GROUP_ROWS + r < N; r++) {
                const vt_block_q5_k *blk = &rows[(g * SIMD_GROUP_ROWS + r) * nb + b];
                simd_k4_group_row(&o->k4, r, blk->d, blk->dmin, blk->scales, blk->qs);
                /* file: bit j of qh[l] is the fifth bit of value l of sub-block j */
                for (int j = 0; j < 8; j++)
                    for (int h = 0; h < 4; h++)
                        for (int t = 0; t < 4; t++) {
                            const int lo = (blk->qh[4 * h + t] >> j) & 1, hi = (blk->qh[16 + 4 * h + t] >> j) & 1;
                            o->qh[j][r * 4 + t] |= (uint8_t)((lo << (2 * h)) | (hi << (2 * h + 1)));
                        }
            }
        }
}

/* res[g * R + r] lane i = weight row i of group wg[g] . activation row m0 + r,
 * for g < NG, r < R (NG and R constants at each call site). `stream`: the
 * groups come from memory once (decode), so prefetch ahead. */
SIMD_INLINE void tile(const q5k_gblock *const *wg, int NG, const simd_act *x, int64_t m0, int R, int stream,
                      __m256 *res) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F), bit0 = _mm256_set1_epi8(0x01), bit1 = _mm256_set1_epi8(0x02);
    SIMD_ALIGNED float acc[8][8]; /* NG * R <= 8; in memory: touched once per block */
    SIMD_UNROLL
    for (int i = 0; i < NG * R; i++) _mm256_store_ps(acc[i], _mm256_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        const q5k_gblock *w[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            w[g] = wg[g] + b;
            if (stream) simd_prefetch_ahead(w[g], (int)sizeof(q5k_gblock));
        }
        /* more than 4 (group, row) pairs: their 16-bit sums take the
         * registers, so the 32-bit sums live in memory (touched once per
         * sub-block) */
        const int sumi_in_memory = NG * R > 4;
        __m256i sumi[2][4];
        SIMD_ALIGNED int32_t sumi_mem[2][4][8];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++)
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                if (sumi_in_memory)
                    _mm256_store_si256((__m256i *)sumi_mem[g][r], _mm256_setzero_si256());
                else
                    sumi[g][r] = _mm256_setzero_si256();
            }
        const int8_t *xb = x->qs + m0 * K + b * 256;
        for (int j = 0; j < 8; j++) {
            __m256i sc[2], hb[2];
            SIMD_UNROLL
            for (int g = 0; g < NG; g++) {
                sc[g] = k4_scales(&w[g]->k4, j);
                /* fifth bits, 2 per column h in bits 2h, 2h + 1: shifted right
                 * by 2 per column; a 16-bit shift pulls the upper byte's bits
                 * into bits 6-7 of the lower, and 3 shifts move them no lower
                 * than bit 2, so bits 0-1 are always the byte's own */
                hb[g] = _mm256_loadu_si256((const __m256i *)w[g]->qh[j]);
            }
            SIMD_UNROLL
            for (int hp = 0; hp < 2; hp++) { /* two columns per int16 sum */
                __m256i s16[2][4];
                SIMD_UNROLL
                for (int g = 0; g < NG; g++)
                    SIMD_UNROLL
                    for (int r = 0; r < R; r++) s16[g][r] = _mm256_setzero_si256();
                SIMD_UNROLL
                for (int h = 2 * hp; h < 2 * hp + 2; h++) {
                    __m256i lo[2], hi[2];
                    SIMD_UNROLL
                    for (int g = 0; g < NG; g++) {
                        const __m256i p = _mm256_loadu_si256((const __m256i *)w[g]->k4.qs[j][h]);
                        lo[g] = _mm256_or_si256(_mm256_and_si256(p, low4), _mm256_slli_epi16(_mm256_and_si256(hb[g], bit0), 4));
                        hi[g] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(p, 4), low4),
                                                _mm256_slli_epi16(_mm256_and_si256(hb[g], bit1), 3));
                        hb[g] = _mm256_srli_epi16(hb[g], 2);
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
                            s16[g][r] = _mm256_add_epi16(s16[g][r], _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], xl),
                                                                                     _mm256_maddubs_epi16(hi[g], xh)));
                            SIMD_KEEP(s16[g][r]);
                        }
                    }
                }
                SIMD_UNROLL
                for (int g = 0; g < NG; g++)
                    SIMD_UNROLL
                    for (int r = 0; r < R; r++) {
                        if (sumi_in_memory) {
                            __m256i *sm = (__m256i *)sumi_mem[g][r];
                            _mm256_store_si256(sm, _mm256_add_epi32(_mm256_load_si256(sm), _mm256_madd_epi16(s16[g][r], sc[g])));
                        } else {
                            sumi[g][r] = _mm256_add_epi32(sumi[g][r], _mm256_madd_epi16(s16[g][r], sc[g]));
                            SIMD_KEEP(sumi[g][r]);
                        }
                    }
            }
        }
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            __m256i si[4];
            SIMD_UNROLL
            for (int r = 0; r < R; r++)
                si[r] = sumi_in_memory ? _mm256_load_si256((const __m256i *)sumi_mem[g][r]) : sumi[g][r];
            k4_block_finish(&w[g]->k4, x, m0, R, b, si, acc + g * R);
        }
        /* keep acc in memory: no promotion of all of them to registers */
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int i = 0; i < NG * R; i++) res[i] = _mm256_load_ps(acc[i]);
}

/* The layout's tile for the shared walk (prepared_groups.c); the switch
 * gives the inlined tile constant R and stream. */
void simd_q5k_group_rows(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    const q5k_gblock *g[1] = {(const q5k_gblock *)wg};
#define TILE_R(n) (stream ? tile(g, 1, &j->act, m0, n, 1, res) : tile(g, 1, &j->act, m0, n, 0, res))
    switch (R) {
    case 1: TILE_R(1); break;
    case 2: TILE_R(2); break;
    case 3: TILE_R(3); break;
    default: TILE_R(4); break;
    }
#undef TILE_R
}

void simd_q5k_group_pair(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    const q5k_gblock *g[2] = {(const q5k_gblock *)wg0, (const q5k_gblock *)wg1};
    tile(g, 2, &j->act, 0, 1, 1, res);
}

static const simd_group_layout q5k_layout = {.act_kind = SIMD_ACT_Q8_K32I,
                                             .block_len = 256,
                                             .block_bytes = sizeof(q5k_gblock),
                                             .rows = simd_q5k_group_rows,
                                             .pair = simd_q5k_group_pair};

const simd_group_layout *simd_q5_k_group_layout(const simd_ctx *ctx) {
    return ctx->isa == SIMD_ISA_AVX512_VNNI ? &simd_q5k_layout_vnni : &q5k_layout;
}

vt_status simd_q5_k_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    return simd_group_matmul(ctx, node, simd_q5_k_group_layout(ctx));
}
