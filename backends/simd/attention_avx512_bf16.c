/* attention_avx512_bf16.c — attention_impl.h compiled for the AVX-512 tier
 * with AVX-512 BF16: a BF16 cache's scores and weighted sums in bf16 dot
 * products (kv_bf16_chunk.h). simd_attention calls it only for BF16 k and
 * v caches on a CPU that has the instructions; every other cache takes the
 * AVX-512 tier's build (attention_avx512.c). */
#include "simd.h"

#define SIMD_ATTENTION_ENTRY simd_attention_avx512_bf16
#include "attention_impl.h"
