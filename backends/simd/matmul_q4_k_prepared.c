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
#include "k4_tile.h"
#include "prepared_groups.h"
#include "simd.h"
#include "simd_vec.h"


size_t simd_q4_k_prepared_size(int64_t K, int64_t N) { return (size_t)(simd_k4_groups(N) * (K / 256)) * sizeof(k4_gblock); }

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
    k4_gblock *out = dst;
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            k4_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: zero weights, d = dmin = 0 */
            for (int r = 0; r < SIMD_GROUP_ROWS && g * SIMD_GROUP_ROWS + r < N; r++) {
                const vt_block_q4_k *blk = &rows[(g * SIMD_GROUP_ROWS + r) * nb + b];
                simd_k4_group_row(o, r, blk->d, blk->dmin, blk->scales, blk->qs);
            }
        }
}

static const simd_group_layout q4k_layout = K4_TILE_LAYOUT;

const simd_group_layout *simd_q4_k_group_layout(const simd_ctx *ctx) {
    return ctx->isa == SIMD_ISA_AVX512_VNNI ? &simd_q4k_layout_vnni : &q4k_layout;
}

vt_status simd_q4_k_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    return simd_group_matmul(ctx, node, simd_q4_k_group_layout(ctx));
}
