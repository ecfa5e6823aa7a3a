/* matmul_q5_k_prepared_vnni.c — simd's Q5_K matmul on its prepared layout,
 * AVX-512 VNNI tier: prefill and a few rows (2..8) run k4_tile2_zmm.h's
 * two-group tile with the fifth bits; decode (one row, bound by memory)
 * keeps the AVX2 tiles. Used only when the backend's init found the CPU
 * and OS able to run it (backend.c); bit for bit the AVX2 tier's results,
 * since both tiers' integer sums are exact and their float finish the same. */
#include "k4_tile2_zmm.h"
#include "q5k_group.h"

static void group_tile2(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int64_t m0, int R, int stream,
                        __m256 *res) {
    k4_tile2_rows(&j->act, wg0, wg1, sizeof(q5k_gblock), 1, m0, R, stream, res);
}

const simd_group_layout simd_q5k_layout_vnni = {.act_kind = SIMD_ACT_Q8_K32I,
                                                .block_len = 256,
                                                .block_bytes = sizeof(q5k_gblock),
                                                .rows = simd_q5k_group_rows,
                                                .pair = simd_q5k_group_pair,
                                                .tile2 = group_tile2,
                                                .tile2_rows = K4_TILE2_ROWS};
