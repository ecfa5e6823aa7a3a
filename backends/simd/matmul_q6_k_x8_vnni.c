/* matmul_q6_k_x8_vnni.c — the Q6_K matmul on the 8-row layout, AVX-512
 * VNNI tier: the kernels of q6_k_x8_tile.h compiled with AVX-512 VNNI
 * flags, so a sub-block's byte products are summed by vpdpbusd. Called only
 * when the backend's init found the CPU and OS able to run it (backend.c);
 * bit for bit the AVX2 tier's results (q6_k_x8_tile.h says why). */
#include "q6_k_x8_tile.h"

vt_status simd_q6_k_prepared_matmul_vnni(simd_ctx *ctx, const vt_node *node) { return q6k_matmul(ctx, node); }

const simd_group_layout simd_q6k_layout_vnni = Q6K_X8_LAYOUT;
