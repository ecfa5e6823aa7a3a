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
#define TILE2_R(n)                                                                                                \
    (stream ? k4_tile2_zmm(wg0, wg1, sizeof(q5k_gblock), 1, &j->act, m0, n, 1, res)                                \
            : k4_tile2_zmm(wg0, wg1, sizeof(q5k_gblock), 1, &j->act, m0, n, 0, res))
    switch (R) {
    case 1: TILE2_R(1); break;
    case 2: TILE2_R(2); break;
    case 3: TILE2_R(3); break;
    case 4: TILE2_R(4); break;
    case 5: TILE2_R(5); break;
    case 6: TILE2_R(6); break;
    case 7: TILE2_R(7); break;
    default: TILE2_R(8); break;
    }
#undef TILE2_R
}

const simd_group_layout simd_q5k_layout_vnni = {.act_kind = SIMD_ACT_Q8_K32I,
                                                .block_len = 256,
                                                .block_bytes = sizeof(q5k_gblock),
                                                .rows = simd_q5k_group_rows,
                                                .pair = simd_q5k_group_pair,
                                                .tile2 = group_tile2,
                                                .tile2_rows = K4_TILE2_ROWS};
