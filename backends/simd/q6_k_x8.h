/* q6_k_x8.h — simd's prepared layout for Q6_K weights: 8 rows interleaved.
 *
 * The file's Q6_K rows make every kernel call unpack one row's 6-bit values
 * and reduce its products horizontally. Prepared at engine creation, 8 rows
 * share one record per block of 256 values, laid out so one 32-byte register
 * holds 4 consecutive values of each of the 8 rows: one broadcast activation
 * load feeds all 8 rows, the 32-bit lanes of every integer sum are the 8
 * rows (no horizontal reduction), and 4 runs of 8 x 4 values unpack from 3
 * loads with masks and shifts only.
 *
 * One record (1696 bytes, 32-byte multiple; the file spends 1680 on 8 rows):
 *   d[8]          the rows' super-block scales as f32 (exact widening of f16);
 *   scales[16][8] int8 sub-block scales, [sub-block][row];
 *   qs[16][3][32] per sub-block s of 16 values, 3 registers: byte 4 r + j of
 *                 register t (0..2) holds in bits 0-5 value q of row r at
 *                 16 s + 4 t + j, and in bits 6-7 bits 2t..2t+1 of the value
 *                 at 16 s + 12 + j (the fourth run, spread over the three).
 * q is the file's unsigned 6-bit value (weight = d * scale * (q - 32)).
 * A tensor of N rows and K values is ceil(N / 8) groups, each K / 256
 * records in order; rows past N in the last group are zero (d = 0,
 * scales 0), so kernels always run whole groups and store the valid rows. */
#ifndef VT_SIMD_Q6_K_X8_H
#define VT_SIMD_Q6_K_X8_H

#include <stddef.h>
#include <stdint.h>

#include "simd.h"

#define Q6K_X8_ROWS 8

typedef struct q6_k_x8 {
    float d[Q6K_X8_ROWS];
    int8_t scales[16][Q6K_X8_ROWS];
    uint8_t qs[16][3][32];
} q6_k_x8;

_Static_assert(sizeof(q6_k_x8) == 1696, "q6_k_x8 record is 1696 bytes");

/* The entry of prepare.c's table for Q6_K. Bytes of the copy of a {K, N}
 * weight (K a multiple of 256); its units of preparation (groups of 8 rows);
 * writing groups [u0, u1) of the copy of the file's contiguous rows src. */
size_t simd_q6_k_prepared_size(int64_t K, int64_t N);
int64_t simd_q6_k_prepared_units(int64_t N);
void simd_q6_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1);

/* Row n of the copy as K floats, equal bit for bit to the host's
 * dequantization of the file's row (GET_ROWS on a tied embedding). */
void simd_q6_k_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst);

/* Y = X W^T with W the copy (node->src[0].data, bit 0 of node->prepared
 * set). Every (weight row, activation row) result gets the same arithmetic
 * whatever M and tile, so batched rows equal single ones. */
vt_status simd_q6_k_prepared_matmul(simd_ctx *ctx, const vt_node *node);

#endif
