/* matmul_q5_k_prepared_vnni.c — simd's Q5_K matmul on its prepared layout,
 * AVX-512 VNNI tier: prefill, a few rows (2..8) and decode's two streams
 * run k4_tile2_zmm.h's two-group tile with the fifth bits (decode on the
 * AVX2 tiles was bound by their arithmetic, not memory: on an AMD EPYC
 * with AVX-512, simd_matmul_bench -P -d q5_k -m 1 read 29 GB/s a thread
 * with the weights in cache and 19-20 from DRAM on 2 threads, against 35-36
 * and 28.5-29 with this tile, which prefetches into L2 as for a few rows
 * (not measured apart from the tile); tg64 1.25-1.32x on a
 * qwen3-0.6B-shaped Q5_K_M). Used only when the backend's init found the CPU
 * and OS able to run it (backend.c); bit for bit the AVX2 tier's results,
 * since both tiers' integer sums are exact and their float finish the same. */
#include "k4_tile2_zmm.h"
#include "q5k_group.h"

static void group_tile2(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int64_t m0, int R, int stream,
                        __m256 *res) {
    k4_tile2_rows(&j->act, wg0, wg1, sizeof(q5k_gblock), 1, m0, R, stream, res);
}

static void group_pair(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    k4_tile2_rows(&j->act, wg0, wg1, sizeof(q5k_gblock), 1, 0, 1, 1, res);
}

const simd_group_layout simd_q5k_layout_vnni = {.act_kind = SIMD_ACT_Q8_K32I,
                                                .block_len = 256,
                                                .block_bytes = sizeof(q5k_gblock),
                                                .rows = simd_q5k_group_rows,
                                                .pair = group_pair,
                                                .tile2 = group_tile2,
                                                .tile2_rows = K4_TILE2_ROWS};
