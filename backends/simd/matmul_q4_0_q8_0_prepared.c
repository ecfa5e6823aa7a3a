/* matmul_q4_0_q8_0_prepared.c — Q4_0 and Q8_0 weights (blocks of 32, one
 * f16 scale each) in simd's own layout, made once at engine creation (see
 * prepare.c), and the matmul that reads it. The two share the layout's
 * shape, the tiles and the drivers; only the inner product of a 4-value
 * column differs, so they live in one file.
 *
 * Why a layout: in the file's layout one 32-byte activation load feeds one
 * weight row, every block ends in its own int -> float conversion and FMA
 * per row, and a decode row ends in a horizontal sum. Here the rows are
 * interleaved in groups of 8 per block: a 4-byte activation broadcast feeds
 * 8 weight rows in one vpmaddubsw, the 8 32-bit lanes of the result are the
 * 8 rows, and one conversion + FMA per block serves the 8 rows. The 8 rows'
 * scales are stored together (one f16 -> f32 conversion for 8). The bytes per
 * row are the file's: Q4_0 144 bytes per 8 rows and block (18 per row, as the
 * file), Q8_0 272 (34 per row, as the file), so decode, which streams the
 * weights once, reads no more than before.
 *
 * The products, per block of 32 and 8 rows:
 *   Q4_0 (w = d (q - 8), q in 0..15): vpmaddubsw of the unsigned nibbles
 *        against the signed activations, 8 of them summed in int16
 *        (8 * 2 * 15 * 127 = 30480 < 2^15), then sumi = sum q x - 8 sum x,
 *        the activation block's sum coming with the activations (isums).
 *   Q8_0 (signed w): vpmaddubsw wants one unsigned operand, so the weights'
 *        signs move onto the activations, |w| * sign(w) x (|w| <= 128,
 *        |x| <= 127: a pair sum 2 * 128 * 127 = 32512 fits int16, two do
 *        not, so each is widened to int32 at once).
 * Then, per (weight row, activation row), in every tile (decode, a few rows,
 * prefill) the same operations in the same order, so a row's result never
 * depends on M or on which tile ran it (batch invariance):
 *   per block b: acc = acc + (dw * dx) * float(sumi)     (one FMA)
 *   result = acc after the last block. */
#include <string.h>

#include "q4_0_q8_0_tile.h"

static int64_t n_groups(int64_t N) { return (N + GROUP - 1) / GROUP; }

size_t simd_q4_0_prepared_size(int64_t K, int64_t N) { return (size_t)(n_groups(N) * (K / 32)) * sizeof(q4_0_gblock); }
size_t simd_q8_0_prepared_size(int64_t K, int64_t N) { return (size_t)(n_groups(N) * (K / 32)) * sizeof(q8_0_gblock); }

int64_t simd_q4_0_prepared_units(int64_t N) { return n_groups(N); }
int64_t simd_q8_0_prepared_units(int64_t N) { return n_groups(N); }

void simd_q4_0_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 32;
    const vt_block_q4_0 *rows = src;
    q4_0_gblock *out = dst;
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            q4_0_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: d = 0, so their products are 0 */
            for (int r = 0; r < GROUP; r++) {
                const int64_t n = g * GROUP + r;
                if (n >= N) break;
                const vt_block_q4_0 *blk = &rows[n * nb + b];
                o->d[r] = blk->d;
                /* the file's byte l holds value l (low nibble) and 16 + l
                 * (high): the same pairing, 4 bytes per h */
                for (int h = 0; h < 4; h++) memcpy(&o->qs[h][r * 4], blk->qs + 4 * h, 4);
            }
        }
}

void simd_q8_0_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 32;
    const vt_block_q8_0 *rows = src;
    q8_0_gblock *out = dst;
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            q8_0_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: zero weights, d = 0 */
            for (int r = 0; r < GROUP; r++) {
                const int64_t n = g * GROUP + r;
                if (n >= N) break;
                const vt_block_q8_0 *blk = &rows[n * nb + b];
                o->d[r] = blk->d;
                for (int h = 0; h < 8; h++) memcpy(&o->qs[h][r * 4], blk->qs + 4 * h, 4);
            }
        }
}

/* Row n of a prepared copy as K f32, equal bit for bit to the host's
 * dequantization of the file's row (q * d, (q - 8) * d): GET_ROWS on a
 * prepared table, a tied embedding read by the output matmul too. */
void simd_q4_0_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst) {
    (void)N;
    const int64_t nb = K / 32;
    const q4_0_gblock *g = (const q4_0_gblock *)w + (n / GROUP) * nb;
    const int r = (int)(n % GROUP);
    for (int64_t b = 0; b < nb; b++) {
        const float d = vt_fp16_to_f32(g[b].d[r]);
        for (int h = 0; h < 4; h++)
            for (int t = 0; t < 4; t++) {
                const uint8_t q = g[b].qs[h][r * 4 + t];
                dst[b * 32 + 4 * h + t] = (float)((q & 0x0F) - 8) * d;
                dst[b * 32 + 16 + 4 * h + t] = (float)((q >> 4) - 8) * d;
            }
    }
}

void simd_q8_0_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst) {
    (void)N;
    const int64_t nb = K / 32;
    const q8_0_gblock *g = (const q8_0_gblock *)w + (n / GROUP) * nb;
    const int r = (int)(n % GROUP);
    for (int64_t b = 0; b < nb; b++) {
        const float d = vt_fp16_to_f32(g[b].d[r]);
        for (int h = 0; h < 8; h++)
            for (int t = 0; t < 4; t++) dst[b * 32 + 4 * h + t] = (float)g[b].qs[h][r * 4 + t] * d;
    }
}

static const simd_group_layout q4_0_layout = Q4_0_TILE_LAYOUT;
static const simd_group_layout q8_0_layout = Q8_0_TILE_LAYOUT;

const simd_group_layout *simd_q4_0_group_layout(const simd_ctx *ctx) {
    return ctx->isa == SIMD_ISA_AVX512_VNNI ? &simd_q4_0_layout_vnni : &q4_0_layout;
}

vt_status simd_q4_0_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    return simd_group_matmul(ctx, node, simd_q4_0_group_layout(ctx));
}

const simd_group_layout *simd_q8_0_group_layout(const simd_ctx *ctx) {
    return ctx->isa == SIMD_ISA_AVX512_VNNI ? &simd_q8_0_layout_vnni : &q8_0_layout;
}

vt_status simd_q8_0_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    return simd_group_matmul(ctx, node, simd_q8_0_group_layout(ctx));
}
