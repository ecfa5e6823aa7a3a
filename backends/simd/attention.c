/* attention.c — the AVX2 tier's attention (attention_impl.h), and the door
 * to the AVX-512 tier's build of the same code when init chose that tier. */
#include "simd.h"

#define SIMD_ATTENTION_ENTRY simd_attention_avx2
#include "attention_impl.h"

vt_status simd_attention(void *opaque, const vt_node *node) {
    const simd_ctx *ctx = opaque;
    return ctx->isa == SIMD_ISA_AVX512_VNNI ? simd_attention_avx512(opaque, node) : simd_attention_avx2(opaque, node);
}
