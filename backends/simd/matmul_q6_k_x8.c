/* matmul_q6_k_x8.c — MATMUL on Q6_K weights prepared in the 8-row
 * interleaved layout (q6_k_x8.h), AVX2 tier: the kernels of q6_k_x8_tile.h
 * compiled with AVX2 flags, and the entry points, which pick the tier the
 * backend's init chose (ctx->isa). */
#include "q6_k_x8_tile.h"

vt_status simd_q6_k_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    if (ctx->isa == SIMD_ISA_AVX512_VNNI) return simd_q6_k_prepared_matmul_vnni(ctx, node);
    return q6k_matmul(ctx, node);
}

static const simd_group_layout q6k_layout = Q6K_X8_LAYOUT;

const simd_group_layout *simd_q6_k_group_layout(const simd_ctx *ctx) {
    return ctx->isa == SIMD_ISA_AVX512_VNNI ? &simd_q6k_layout_vnni : &q6k_layout;
}
