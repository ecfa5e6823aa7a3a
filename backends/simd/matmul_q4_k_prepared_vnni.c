/* matmul_q4_k_prepared_vnni.c — simd's Q4_K matmul on its prepared layout,
 * AVX-512 VNNI tier: the tile of k4_tile.h compiled with AVX-512 VNNI/VL, so
 * a sub-block's byte products are summed by vpdpbusd. Used only when the
 * backend's init found the CPU and OS able to run it (backend.c); bit for
 * bit the AVX2 tier's results (k4_tile.h says why). */
#include "k4_tile.h"

const simd_group_layout simd_q4k_layout_vnni = K4_TILE_LAYOUT;
