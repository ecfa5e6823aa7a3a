/* q5k_group.h — simd's prepared Q5_K layout (matmul_q5_k_prepared.c says
 * why it is arranged so): the 4-bit group block of k4_group.h followed by
 * the fifth bits, and the tiles both instruction-set tiers share. */
#ifndef VT_SIMD_Q5K_GROUP_H
#define VT_SIMD_Q5K_GROUP_H

#include "k4_group.h"
#include "prepared_groups.h"

/* One block of 256 values of SIMD_GROUP_ROWS rows: the 4-bit group block,
 * then the fifth bits. */
typedef struct q5k_gblock {
    k4_gblock k4;
    uint8_t qh[8][SIMD_GROUP_ROWS * 4]; /* [sub-block j][row * 4 + t]: bit 2h = fifth bit of value 4h + t of
                                           sub-block j, bit 2h + 1 that of value 16 + 4h + t */
} q5k_gblock;

_Static_assert(sizeof(q5k_gblock) == 1440, "prepared q5_k group block is 1440 bytes");

/* The AVX2 tiles (matmul_q5_k_prepared.c): the walk's rows and pair. */
void simd_q5k_group_rows(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res);
void simd_q5k_group_pair(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res);

/* The AVX-512 VNNI tier's layout entry (matmul_q5_k_prepared_vnni.c): the
 * AVX2 tiles plus the two-group 512-bit tile for prefill, a few rows and decode. */
extern const simd_group_layout simd_q5k_layout_vnni;

#endif
