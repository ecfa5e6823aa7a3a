/* quant.h — dtype facts and row conversion between every vt_dtype and f32.
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

#include "vt/vt_types.h"

/* True for the dtypes vt accepts anywhere (F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K I32 I64). */
bool vt_dtype_is_valid(int32_t dtype);
/* True for the dtypes a weight matrix may have (the floats and quant types). */
bool vt_dtype_is_weight(int32_t dtype);
/* True for F32, F16, BF16 (activation / KV-cache types). */
bool vt_dtype_is_float(int32_t dtype);
/* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "i32", "i64"; "?" if invalid. */
const char *vt_dtype_name(int32_t dtype);
/* Inverse of vt_dtype_name (case-insensitive); -1 if unknown. */
int32_t vt_dtype_from_name(const char *name);
/* Elements per block: 1 for plain types, 32 or 256 for quant types; 0 if invalid. */
int64_t vt_dtype_block_length(int32_t dtype);
/* Bytes per block (element size for plain types); 0 if invalid. */
size_t vt_dtype_block_bytes(int32_t dtype);
/* Bytes of n elements; 0 if invalid dtype or n is not a whole number of blocks. */
size_t vt_row_size(int32_t dtype, int64_t n);

/* n elements (whole blocks) of dtype at src -> f32. VT_ERR_INVALID on a bad dtype or n. */
vt_status vt_to_f32(int32_t dtype, const void *src, float *dst, int64_t n);
/* n f32 -> dtype (quantize). VT_ERR_INVALID on a bad dtype or n. */
vt_status vt_from_f32(int32_t dtype, const float *src, void *dst, int64_t n);

#endif
