/* vt_types.h — dtypes, tensor descriptors, op kinds and status codes.
 *
 * Part of the versioned plugin contract (see vt_backend.h): every enum value and
 * every struct field here is ABI. Enums only grow at the end; struct fields are
 * only appended (and only in structs that carry struct_size).
 *
 * Self-contained C11: a third-party backend includes only this file and
 * vt_backend.h (and optionally vt_quant.h for the block layouts). */
#ifndef VT_TYPES_H
#define VT_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions libvt exports (include/vt/vt.h); everything else in
 * libvt is hidden. */
#if defined(__GNUC__)
#define VT_API __attribute__((visibility("default")))
#else
#define VT_API
#endif

/* Status codes returned by every vt function and every backend op. */
typedef enum vt_status {
    VT_OK = 0,
    VT_ERR_INVALID = 1,      /* bad argument, bad option value, bad shape */
    VT_ERR_NOMEM = 2,        /* an allocation failed */
    VT_ERR_IO = 3,           /* open/read/mmap failed */
    VT_ERR_FORMAT = 4,       /* a file is malformed (GGUF, ini, ...) */
    VT_ERR_UNSUPPORTED = 5,  /* a valid request nobody can serve (dtype, arch, op) */
    VT_ERR_BACKEND = 6,      /* a backend failed to load, init, or run an op */
    VT_ERR_CONTEXT_FULL = 7, /* the KV cache has no room for the tokens */
    VT_ERR_INTERNAL = 8      /* a broken invariant: a bug in vt */
} vt_status;

/* Element types. The numeric values are GGML's (and so GGUF's) type ids, so a
 * GGUF tensor type converts with a range check and no table. Only the types
 * listed are accepted anywhere in vt; other ids are rejected as unknown. */
typedef enum vt_dtype {
    VT_F32 = 0,
    VT_F16 = 1,
    VT_Q4_0 = 2,
    VT_Q8_0 = 8,
    VT_Q4_K = 12,
    VT_Q5_K = 13,
    VT_Q6_K = 14,
    VT_I32 = 26,
    VT_I64 = 27,
    VT_BF16 = 30,
    VT_DTYPE_COUNT = 31 /* one past the largest id; not every id below is valid */
} vt_dtype;

/* Maximum number of dimensions of a tensor descriptor. */
#define VT_MAX_DIMS 4

/* A tensor descriptor: a view of memory the caller owns.
 *
 * Dimensions follow GGML's order: ne[0] is the innermost (contiguous) dimension,
 * e.g. a weight matrix of N output rows of K inputs has ne = {K, N}; activations
 * of M tokens of width D have ne = {D, M}. Unused dimensions have ne = 1.
 * nb[i] is the stride of dimension i in bytes; nb[0] is the element size (for
 * block-quantized types, the block size in bytes over its block length, so use
 * nb[1] as the row stride). Rows of quantized tensors are always whole blocks.
 *
 * In supports() queries data is NULL and ne[] holds the largest shape the plan
 * will run (the dimension over tokens varies at run time up to that bound). */
typedef struct vt_tensor {
    void *data;
    int32_t dtype;  /* a vt_dtype */
    int32_t ndim;   /* 1..VT_MAX_DIMS */
    int64_t ne[VT_MAX_DIMS];
    size_t nb[VT_MAX_DIMS];
} vt_tensor;

/* Op kinds. The order is ABI: new ops are appended before VT_OP_COUNT. */
typedef enum vt_op {
    VT_OP_MATMUL = 0,            /* dst[M][N] = src0(weights)[N][K] x src1[M][K]^T */
    VT_OP_ATTENTION = 1,         /* paged causal GQA attention */
    VT_OP_RESHAPE_AND_CACHE = 2, /* write k/v rows into the paged cache */
    VT_OP_RMS_NORM = 3,          /* dst = src0 / rms(src0) * src1 */
    VT_OP_ROPE = 4,              /* rotary position embedding, norm or neox pairing */
    VT_OP_SWIGLU = 5,            /* dst = silu(src0) * src1 */
    VT_OP_ADD = 6,               /* dst = src0 + src1 (src1 may be one row, broadcast) */
    VT_OP_GET_ROWS = 7,          /* dst[i] = f32(src0[src1[i]]) */
    VT_OP_CONVERT = 8,           /* dst = src0 cast to dst's dtype */
    VT_OP_COUNT = 9
} vt_op;

/* "matmul", "attention", ...: the op's name in messages, --explain and tables;
 * "?" for an id that is not an op. */
static inline const char *vt_op_name(int op) {
    switch (op) {
    case VT_OP_MATMUL: return "matmul";
    case VT_OP_ATTENTION: return "attention";
    case VT_OP_RESHAPE_AND_CACHE: return "reshape_and_cache";
    case VT_OP_RMS_NORM: return "rms_norm";
    case VT_OP_ROPE: return "rope";
    case VT_OP_SWIGLU: return "swiglu";
    case VT_OP_ADD: return "add";
    case VT_OP_GET_ROWS: return "get_rows";
    case VT_OP_CONVERT: return "convert";
    default: return "?";
    }
}

/* Shape classes: a plan is built per class, and a backend may accept an op in
 * one class and decline it in the other. */
typedef enum vt_phase {
    VT_PHASE_PREFILL = 0, /* many tokens per call */
    VT_PHASE_DECODE = 1   /* one token per sequence per call */
} vt_phase;

/* RoPE pairing. */
typedef enum vt_rope_mode {
    VT_ROPE_NORM = 0, /* adjacent pairs (2i, 2i+1): llama */
    VT_ROPE_NEOX = 2  /* halves (i, i + n_rot/2): qwen2, qwen3 (GGML's value) */
} vt_rope_mode;

#ifdef __cplusplus
}
#endif
#endif /* VT_TYPES_H */
