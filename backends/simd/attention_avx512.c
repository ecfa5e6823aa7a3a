/* attention_avx512.c — attention_impl.h compiled for the AVX-512 tier: per value the same
 * operations in the same order as the AVX2 tier (the same bits: 8-wide
 * sums laid side by side, elementwise steps 16 wide, exact integer sums in
 * any order), with AVX-512VL's 32 registers letting four queries share
 * every k and v load. Called only when init found the CPU and OS able to
 * run the tier. */
#include "simd.h"

#define SIMD_ATTENTION_ENTRY simd_attention_avx512
#include "attention_impl.h"
