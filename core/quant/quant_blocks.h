/* quant_blocks.h — per-format block codecs behind quant.h (internal to libvt).
 *
 * Each function converts nb whole blocks; quant.c checks dtype and length and
 * dispatches here. Dequantizers evaluate GGML's definitions in f32 with the
 * same operation order as ggml's dequantize_row_* (so results are bit-equal).
 * Quantizers reproduce ggml's quantize_row_*_ref byte for byte (the path
 * llama-quantize takes without an importance matrix). */
#ifndef VT_CORE_QUANT_BLOCKS_H
#define VT_CORE_QUANT_BLOCKS_H

#include <stdbool.h>
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

/* The fp16 at p as f32; p may be at any byte address. */
static inline float vt_fp16_at(const unsigned char *p) {
    vt_fp16_t h;
    memcpy(&h, p, sizeof h);
    return vt_fp16_to_f32(h);
}

/* quant_dequant.c: nb blocks at src (any byte address) -> f32. dst holds nb *
 * block length floats. The portable path, and the definition the AVX2 path
 * must reproduce bit for bit. */
void vt_dequant_q8_0(const unsigned char *src, float *dst, int64_t nb);
void vt_dequant_q4_0(const unsigned char *src, float *dst, int64_t nb);
void vt_dequant_q4_k(const unsigned char *src, float *dst, int64_t nb);
void vt_dequant_q5_k(const unsigned char *src, float *dst, int64_t nb);
void vt_dequant_q6_k(const unsigned char *src, float *dst, int64_t nb);

/* quant_dequant_avx2.c: the same conversions with AVX2 and F16C. */
/* The CPU has AVX2 and F16C and the OS saves their registers (vt_cpu.h). */
bool vt_dequant_avx2_usable(void);
/* n values (whole blocks) of dtype at src (any byte address) -> f32, bit-identical
 * to the portable path; false (nothing written) for a dtype it does not
 * vectorise. Call only when vt_dequant_avx2_usable(). */
bool vt_dequant_avx2(int32_t dtype, const void *src, float *dst, int64_t n);

/* quant_legacy.c: f32 -> 32-element blocks (quantize_row_q8_0_ref, _q4_0_ref). */
void vt_quant_q8_0(const float *src, vt_block_q8_0 *dst, int64_t nb);
void vt_quant_q4_0(const float *src, vt_block_q4_0 *dst, int64_t nb);

/* quant_k.c: f32 -> 256-element super-blocks (quantize_row_q{4,5,6}_K_ref). */
void vt_quant_q4_k(const float *src, vt_block_q4_k *dst, int64_t nb);
void vt_quant_q5_k(const float *src, vt_block_q5_k *dst, int64_t nb);
void vt_quant_q6_k(const float *src, vt_block_q6_k *dst, int64_t nb);

#endif
