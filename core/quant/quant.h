/* quant.h — row conversion between every vt_dtype and f32.
 *
 * Dequantization is exact (the block definitions of vt_quant.h evaluated in
 * f32, as GGML does). Quantization follows GGML's reference quantizers
 * (quantize_row_*_ref), so files written by vt load in llama.cpp and round-trip
 * within each format's own error. */
#ifndef VT_CORE_QUANT_H
#define VT_CORE_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vt/vt_dtype.h"
#include "vt/vt_types.h"

/* The dtype facts (names, block sizes, classes) are vt/vt_dtype.h's. */

/* n elements (whole blocks) of dtype at src -> f32. VT_ERR_INVALID on a bad dtype or n.
 * src may sit at any byte address. Runs the fastest path this CPU has
 * (vt_to_f32_best_path); every path gives the same bits. */
vt_status vt_to_f32(int32_t dtype, const void *src, float *dst, int64_t n);

/* The implementations behind vt_to_f32. */
typedef enum vt_to_f32_path {
    VT_TO_F32_SCALAR = 0, /* portable C: the definition */
    VT_TO_F32_AVX2 = 1,   /* AVX2 + F16C for F16, BF16 and the block formats */
} vt_to_f32_path;

/* What vt_to_f32 runs here: AVX2 when the CPU and OS offer AVX2 and F16C
 * (vt/vt_cpu.h), else scalar. Detected once. */
vt_to_f32_path vt_to_f32_best_path(void);
/* vt_to_f32 through one path (tests and benchmarks compare them);
 * VT_ERR_UNSUPPORTED when this CPU cannot run it. */
vt_status vt_to_f32_with(vt_to_f32_path path, int32_t dtype, const void *src, float *dst, int64_t n);
/* n f32 -> dtype (quantize). VT_ERR_INVALID on a bad dtype or n. */
vt_status vt_from_f32(int32_t dtype, const float *src, void *dst, int64_t n);

#endif
