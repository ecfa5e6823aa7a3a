/* quant_blocks.h — per-format block codecs behind quant.h (internal to libvt).
 *
 * Each function converts nb whole blocks; quant.c checks dtype and length and
 * dispatches here. Dequantizers evaluate GGML's definitions in f32 with the
 * same operation order as ggml's dequantize_row_* (so results are bit-equal).
 * Quantizers reproduce ggml's quantize_row_*_ref byte for byte (the path
 * llama-quantize takes without an importance matrix). */
#ifndef VT_CORE_QUANT_BLOCKS_H
#define VT_CORE_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

#include "vt/vt_quant.h"

/* Byte identity with ggml needs every a*b+c rounded twice, as ggml's reference
 * build does: no fused multiply-add. GCC never contracts in ISO C mode (-std=c11);
 * clang contracts within an expression unless told not to. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23 so
 * the integer lands in the low mantissa bits. Valid for |v| <= 2^22 - 1; the
 * quantizers' byte identity with llama.cpp depends on this exact rounding
 * (it differs from roundf on ties). */
static inline int vt_nearest_int(float v) {
    float shifted = v + 12582912.f;
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007FFFFF) - 0x00400000;
}

/* quant_dequant.c: blocks -> f32. dst holds nb * block length floats. */
void vt_dequant_q8_0(const vt_block_q8_0 *src, float *dst, int64_t nb);
void vt_dequant_q4_0(const vt_block_q4_0 *src, float *dst, int64_t nb);
void vt_dequant_q4_k(const vt_block_q4_k *src, float *dst, int64_t nb);
void vt_dequant_q5_k(const vt_block_q5_k *src, float *dst, int64_t nb);
void vt_dequant_q6_k(const vt_block_q6_k *src, float *dst, int64_t nb);

/* quant_legacy.c: f32 -> 32-element blocks (quantize_row_q8_0_ref, _q4_0_ref). */
void vt_quant_q8_0(const float *src, vt_block_q8_0 *dst, int64_t nb);
void vt_quant_q4_0(const float *src, vt_block_q4_0 *dst, int64_t nb);

/* quant_k.c: f32 -> 256-element super-blocks (quantize_row_q{4,5,6}_K_ref). */
void vt_quant_q4_k(const float *src, vt_block_q4_k *dst, int64_t nb);
void vt_quant_q5_k(const float *src, vt_block_q5_k *dst, int64_t nb);
void vt_quant_q6_k(const float *src, vt_block_q6_k *dst, int64_t nb);

#endif
