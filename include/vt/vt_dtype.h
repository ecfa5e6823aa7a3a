/* vt_dtype.h — the facts about each vt_dtype, written once: name, block
 * length and bytes, and its class (weight type, float type). Header-only
 * (static inline) so the core and every backend, which see only include/vt/,
 * read the same table. */
#ifndef VT_DTYPE_H
#define VT_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>

#include "vt_quant.h"
#include "vt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vt_dtype_info {
    const char *name;     /* "f32", "q4_k", ...; NULL: the id is not a dtype vt accepts */
    int64_t block_length; /* elements per block: 1 for plain types, 32 or 256 for quant types */
    size_t block_bytes;   /* bytes per block (the element size for plain types) */
    bool is_weight;       /* may hold a weight matrix: the floats and the quant types */
    bool is_float;        /* F32, F16, BF16: activation and KV-cache types */
} vt_dtype_info;

/* One dtype's facts (a function rather than compound literals, which C++
 * does not have: the header compiles as C++ with -pedantic too). */
static inline vt_dtype_info vt_dtype_info_make(const char *name, int64_t block_length, size_t block_bytes,
                                               bool is_weight, bool is_float) {
    vt_dtype_info i;
    i.name = name;
    i.block_length = block_length;
    i.block_bytes = block_bytes;
    i.is_weight = is_weight;
    i.is_float = is_float;
    return i;
}

/* The facts of `dtype`; every field zero (name NULL) for an id vt does not accept. */
static inline vt_dtype_info vt_dtype_info_of(int32_t dtype) {
    switch (dtype) {
    case VT_F32: return vt_dtype_info_make("f32", 1, sizeof(float), true, true);
    case VT_F16: return vt_dtype_info_make("f16", 1, sizeof(vt_fp16_t), true, true);
    case VT_BF16: return vt_dtype_info_make("bf16", 1, sizeof(vt_bf16_t), true, true);
    case VT_Q8_0: return vt_dtype_info_make("q8_0", VT_QK8_0, sizeof(vt_block_q8_0), true, false);
    case VT_Q4_0: return vt_dtype_info_make("q4_0", VT_QK4_0, sizeof(vt_block_q4_0), true, false);
    case VT_Q4_K: return vt_dtype_info_make("q4_k", VT_QK_K, sizeof(vt_block_q4_k), true, false);
    case VT_Q5_K: return vt_dtype_info_make("q5_k", VT_QK_K, sizeof(vt_block_q5_k), true, false);
    case VT_Q6_K: return vt_dtype_info_make("q6_k", VT_QK_K, sizeof(vt_block_q6_k), true, false);
    case VT_I32: return vt_dtype_info_make("i32", 1, sizeof(int32_t), false, false);
    case VT_I64: return vt_dtype_info_make("i64", 1, sizeof(int64_t), false, false);
    default: return vt_dtype_info_make(NULL, 0, 0, false, false);
    }
}

/* True for the dtypes vt accepts anywhere (F32 F16 BF16 Q8_0 Q4_0 Q4_K Q5_K Q6_K I32 I64). */
static inline bool vt_dtype_is_valid(int32_t dtype) { return vt_dtype_info_of(dtype).name != NULL; }
/* True for the dtypes a weight matrix may have (the floats and quant types). */
static inline bool vt_dtype_is_weight(int32_t dtype) { return vt_dtype_info_of(dtype).is_weight; }
/* True for F32, F16, BF16 (activation / KV-cache types). */
static inline bool vt_dtype_is_float(int32_t dtype) { return vt_dtype_info_of(dtype).is_float; }
/* True for the dtypes a KV cache may have (ABI 1.1): the floats, and Q8_0
 * blocks of 32 along the head dimension. k/v themselves stay float; a Q8_0
 * cache is filled by reshape_and_cache quantizing on store. */
static inline bool vt_dtype_is_kv_cache(int32_t dtype) { return vt_dtype_is_float(dtype) || dtype == VT_Q8_0; }
/* The dtype's name; "?" if invalid. */
static inline const char *vt_dtype_name(int32_t dtype) {
    const char *n = vt_dtype_info_of(dtype).name;
    return n ? n : "?";
}
/* Elements per block; 0 if invalid. */
static inline int64_t vt_dtype_block_length(int32_t dtype) { return vt_dtype_info_of(dtype).block_length; }
/* Bytes per block; 0 if invalid. */
static inline size_t vt_dtype_block_bytes(int32_t dtype) { return vt_dtype_info_of(dtype).block_bytes; }
/* Bytes of n elements; 0 if the dtype is invalid, n is not a whole number of
 * blocks, or the size does not fit a size_t. */
static inline size_t vt_row_size(int32_t dtype, int64_t n) {
    const vt_dtype_info i = vt_dtype_info_of(dtype);
    if (!i.name || n < 0 || n % i.block_length != 0) return 0;
    const uint64_t blocks = (uint64_t)(n / i.block_length);
    if (blocks > SIZE_MAX / i.block_bytes) return 0;
    return (size_t)blocks * i.block_bytes;
}
/* Inverse of vt_dtype_name (case-insensitive); -1 if unknown. */
static inline int32_t vt_dtype_from_name(const char *name) {
    if (!name) return -1;
    for (int32_t t = 0; t < VT_DTYPE_COUNT; t++) {
        const char *n = vt_dtype_info_of(t).name;
        if (n && strcasecmp(n, name) == 0) return t;
    }
    return -1;
}

#ifdef __cplusplus
}
#endif
#endif /* VT_DTYPE_H */
