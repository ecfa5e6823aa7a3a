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

/* A compile-time check that C11 and C++11 compilers both read (C++ has
 * static_assert, not C's _Static_assert keyword). */
#ifdef __cplusplus
#define VT_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define VT_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

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

/* Every op's facts, one line each, in ABI order (the enum follows it):
 *
 *   X(ID, name, n_src, weight_src, since_minor, params)
 *
 *   ID          VT_OP_<ID>
 *   name        its name in messages and tables, and the vt_backend field
 *               holding its pointer
 *   n_src       operand count (vt_backend.h gives each op's convention; a
 *               widened convention may add one: ROPE's frequency factors, 1.8)
 *   weight_src  the operand that is a weight tensor of the file, which the
 *               runtime may offer to prepare_weight; -1 for none
 *   since_minor the ABI minor 1.<since_minor> the op arrived in: a plugin
 *               built at an earlier minor is never offered it
 *   params      the member of vt_node.params it reads, or `none`
 *
 * Adding an op: append a line here, append its pointer to vt_backend (the
 * table only grows), its convention and vt_check_<name> in vt_check.h, its
 * kernels and its tests; everything else derives from this list. */
#define VT_OP_LIST(X)                                                                                                  \
    X(MATMUL, matmul, 2, 0, 0, none)                            /* dst[M][N] = src0(weights)[N][K] x src1[M][K]^T */   \
    X(ATTENTION, attention, 6, -1, 0, attention)                /* paged causal GQA attention */                       \
    X(RESHAPE_AND_CACHE, reshape_and_cache, 5, -1, 0, none)     /* write k/v rows into the paged cache */              \
    X(RMS_NORM, rms_norm, 2, 1, 0, rms_norm)                    /* dst = src0 / rms(src0) * src1 */                    \
    X(ROPE, rope, 2, -1, 0, rope)                               /* rotary position embedding, norm or neox pairing */  \
    X(SWIGLU, swiglu, 2, -1, 0, none)                           /* dst = silu(src0) * src1 */                          \
    X(ADD, add, 2, -1, 0, none)                                 /* dst = src0 + src1 (src1 may be one row) */          \
    X(GET_ROWS, get_rows, 2, 0, 0, none)                        /* dst[i] = f32(src0[src1[i]]) */                      \
    X(CONVERT, convert, 1, -1, 0, none)                         /* dst = src0 cast to dst's dtype */                   \
    X(MOE_ROUTE, moe_route, 1, -1, 4, moe)                      /* each token's experts: the top router logits */      \
    X(MOE_MATMUL, moe_matmul, 3, 0, 4, none)                    /* matmul with each token's chosen experts */          \
    X(MOE_COMBINE, moe_combine, 3, -1, 4, moe)                  /* the routing-weighted sum of the experts' outputs */

/* Op kinds. The order is ABI: new ops are appended to VT_OP_LIST. */
typedef enum vt_op {
#define VT_OP_ENUM_(ID, name, n_src, weight_src, since_minor, params) VT_OP_##ID,
    VT_OP_LIST(VT_OP_ENUM_)
#undef VT_OP_ENUM_
    VT_OP_COUNT
} vt_op;

/* "matmul", "attention", ...: the op's name in messages, --explain and tables;
 * "?" for an id that is not an op. */
static inline const char *vt_op_name(int op) {
    switch (op) {
#define VT_OP_NAME_(ID, name, n_src, weight_src, since_minor, params)                                                 \
    case VT_OP_##ID: return #name;
        VT_OP_LIST(VT_OP_NAME_)
#undef VT_OP_NAME_
    default: return "?";
    }
}

/* Operand count of op (0 for an id that is not an op). */
static inline int vt_op_n_src(int op) {
    switch (op) {
#define VT_OP_N_SRC_(ID, name, n_src, weight_src, since_minor, params)                                                \
    case VT_OP_##ID: return n_src;
        VT_OP_LIST(VT_OP_N_SRC_)
#undef VT_OP_N_SRC_
    default: return 0;
    }
}

/* The ABI minor 1.<minor> op arrived in (-1 for an id that is not an op). */
static inline int vt_op_since_minor(int op) {
    switch (op) {
#define VT_OP_SINCE_(ID, name, n_src, weight_src, since_minor, params)                                                \
    case VT_OP_##ID: return since_minor;
        VT_OP_LIST(VT_OP_SINCE_)
#undef VT_OP_SINCE_
    default: return -1;
    }
}

/* Is operand `src` of op `op` a weight operand, one the runtime may offer
 * to prepare_weight and mark in vt_node.prepared? */
static inline int vt_is_weight_operand(int op, int src) {
    switch (op) {
#define VT_OP_WEIGHT_(ID, name, n_src, weight_src, since_minor, params)                                               \
    case VT_OP_##ID: return (weight_src) >= 0 && src == (weight_src);
        VT_OP_LIST(VT_OP_WEIGHT_)
#undef VT_OP_WEIGHT_
    default: return 0;
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

/* Log levels: host->log's (a backend's messages) and vt_set_log_level's. */
typedef enum vt_log_level { VT_LOG_ERROR = 0, VT_LOG_WARN = 1, VT_LOG_INFO = 2, VT_LOG_DEBUG = 3 } vt_log_level;

#ifdef __cplusplus
}
#endif
#endif /* VT_TYPES_H */
