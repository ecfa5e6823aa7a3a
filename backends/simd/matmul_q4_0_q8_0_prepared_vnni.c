/* matmul_q4_0_q8_0_prepared_vnni.c — simd's Q4_0 and Q8_0 matmuls on their
 * prepared layouts, AVX-512 VNNI tier: the tiles of q4_0_q8_0_tile.h
 * compiled with AVX-512 VNNI/VL, so a column's byte products are summed by
 * vpdpbusd. Used only when the backend's init found the CPU and OS able to
 * run it (backend.c); bit for bit the AVX2 tier's results
 * (q4_0_q8_0_tile.h says why). */
#include "q4_0_q8_0_tile.h"

const simd_group_layout simd_q4_0_layout_vnni = Q4_0_TILE_LAYOUT;
const simd_group_layout simd_q8_0_layout_vnni = Q8_0_TILE_LAYOUT;
