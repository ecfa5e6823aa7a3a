/* attention.c — the AVX2 tier's attention (attention_impl.h), and the door
 * to the AVX-512 tier's builds of the same code when init chose that tier:
 * with AVX-512 BF16 a BF16 cache takes the bf16 dot products. */
#include "simd.h"

#define SIMD_ATTENTION_ENTRY simd_attention_avx2
#include "attention_impl.h"

vt_status simd_attention(void *opaque, const vt_node *node) {
    const simd_ctx *ctx = opaque;
    if (ctx->isa != SIMD_ISA_AVX512_VNNI) return simd_attention_avx2(opaque, node);
    if (ctx->bf16_dot && node->src[1].dtype == VT_BF16 && node->src[2].dtype == VT_BF16)
        return simd_attention_avx512_bf16(opaque, node);
    return simd_attention_avx512(opaque, node);
}
