/* quant.c — dtype facts and the row conversions to and from f32.
 *
 * The block codecs live in quant_dequant.c, quant_legacy.c and quant_k.c;
 * this file owns the table of dtypes, the length checks, and the plain types
 * (f32, f16, bf16, i32, i64). */
#include "quant.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "quant_blocks.h"
#include "vt/vt_quant.h"

typedef struct dtype_info {
    const char *name;     /* NULL: the id is not a dtype vt accepts */
    int64_t block_length; /* elements per block */
    size_t block_bytes;   /* bytes per block */
    bool is_weight;       /* may hold a weight matrix */
    bool is_float;        /* activation / KV-cache type */
} dtype_info;

/* Indexed by the GGML type id (vt_dtype); holes stay zeroed. */
static const dtype_info DTYPES[VT_DTYPE_COUNT] = {
    [VT_F32] = {"f32", 1, sizeof(float), true, true},
    [VT_F16] = {"f16", 1, sizeof(vt_fp16_t), true, true},
    [VT_BF16] = {"bf16", 1, sizeof(vt_bf16_t), true, true},
    [VT_Q8_0] = {"q8_0", VT_QK8_0, sizeof(vt_block_q8_0), true, false},
    [VT_Q4_0] = {"q4_0", VT_QK4_0, sizeof(vt_block_q4_0), true, false},
    [VT_Q4_K] = {"q4_k", VT_QK_K, sizeof(vt_block_q4_k), true, false},
    [VT_Q5_K] = {"q5_k", VT_QK_K, sizeof(vt_block_q5_k), true, false},
    [VT_Q6_K] = {"q6_k", VT_QK_K, sizeof(vt_block_q6_k), true, false},
    [VT_I32] = {"i32", 1, sizeof(int32_t), false, false},
    [VT_I64] = {"i64", 1, sizeof(int64_t), false, false},
};

static const dtype_info *info_of(int32_t dtype) {
    if (dtype < 0 || dtype >= VT_DTYPE_COUNT || !DTYPES[dtype].name) return NULL;
    return &DTYPES[dtype];
}

bool vt_dtype_is_valid(int32_t dtype) { return info_of(dtype) != NULL; }

bool vt_dtype_is_weight(int32_t dtype) {
    const dtype_info *info = info_of(dtype);
    return info && info->is_weight;
}

bool vt_dtype_is_float(int32_t dtype) {
    const dtype_info *info = info_of(dtype);
    return info && info->is_float;
}

const char *vt_dtype_name(int32_t dtype) {
    const dtype_info *info = info_of(dtype);
    return info ? info->name : "?";
}

int32_t vt_dtype_from_name(const char *name) {
    if (!name) return -1;
    for (int32_t t = 0; t < VT_DTYPE_COUNT; t++)
        if (DTYPES[t].name && strcasecmp(DTYPES[t].name, name) == 0) return t;
    return -1;
}

int64_t vt_dtype_block_length(int32_t dtype) {
    const dtype_info *info = info_of(dtype);
    return info ? info->block_length : 0;
}

size_t vt_dtype_block_bytes(int32_t dtype) {
    const dtype_info *info = info_of(dtype);
    return info ? info->block_bytes : 0;
}

size_t vt_row_size(int32_t dtype, int64_t n) {
    const dtype_info *info = info_of(dtype);
    if (!info || n < 0 || n % info->block_length != 0) return 0;
    return (size_t)(n / info->block_length) * info->block_bytes;
}

/* Blocks in n elements of dtype, or -1 when dtype or n is unacceptable. */
static int64_t whole_blocks(int32_t dtype, int64_t n) {
    const dtype_info *info = info_of(dtype);
    if (!info || n < 0 || n % info->block_length != 0) return -1;
    return n / info->block_length;
}

/* ---- to f32 ---- */

vt_status vt_to_f32(int32_t dtype, const void *src, float *dst, int64_t n) {
    int64_t nb = whole_blocks(dtype, n);
    if (nb < 0 || (n > 0 && (!src || !dst))) return VT_ERR_INVALID;
    /* Element access goes through memcpy: rows inside a GGUF mapping are only
     * guaranteed byte alignment for the quant types' 2-byte scales. */
    const unsigned char *bytes = src;
    switch ((vt_dtype)dtype) {
    case VT_F32:
        if (n > 0) memmove(dst, src, (size_t)n * sizeof(float));
        return VT_OK;
    case VT_F16:
        for (int64_t i = 0; i < n; i++) {
            vt_fp16_t h;
            memcpy(&h, bytes + i * (int64_t)sizeof h, sizeof h);
            dst[i] = vt_fp16_to_f32(h);
        }
        return VT_OK;
    case VT_BF16:
        for (int64_t i = 0; i < n; i++) {
            vt_bf16_t h;
            memcpy(&h, bytes + i * (int64_t)sizeof h, sizeof h);
            dst[i] = vt_bf16_to_f32(h);
        }
        return VT_OK;
    case VT_I32:
        for (int64_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, bytes + i * (int64_t)sizeof v, sizeof v);
            dst[i] = (float)v;
        }
        return VT_OK;
    case VT_I64:
        for (int64_t i = 0; i < n; i++) {
            int64_t v;
            memcpy(&v, bytes + i * (int64_t)sizeof v, sizeof v);
            dst[i] = (float)v;
        }
        return VT_OK;
    case VT_Q8_0: vt_dequant_q8_0(src, dst, nb); return VT_OK;
    case VT_Q4_0: vt_dequant_q4_0(src, dst, nb); return VT_OK;
    case VT_Q4_K: vt_dequant_q4_k(src, dst, nb); return VT_OK;
    case VT_Q5_K: vt_dequant_q5_k(src, dst, nb); return VT_OK;
    case VT_Q6_K: vt_dequant_q6_k(src, dst, nb); return VT_OK;
    default: return VT_ERR_INVALID;
    }
}

/* ---- from f32 ---- */

/* f32 -> integer: truncation toward zero like a C cast, saturated to the
 * type's range (NaN -> 0) so no input is undefined behaviour. */
static int64_t saturating_to_int(float v, double lo, double hi) {
    if (v != v) return 0;
    double d = (double)v;
    if (d <= lo) return (int64_t)lo;
    if (d >= hi) return (int64_t)hi;
    return (int64_t)d;
}

vt_status vt_from_f32(int32_t dtype, const float *src, void *dst, int64_t n) {
    int64_t nb = whole_blocks(dtype, n);
    if (nb < 0 || (n > 0 && (!src || !dst))) return VT_ERR_INVALID;
    unsigned char *bytes = dst;
    switch ((vt_dtype)dtype) {
    case VT_F32:
        if (n > 0) memmove(dst, src, (size_t)n * sizeof(float));
        return VT_OK;
    case VT_F16:
        for (int64_t i = 0; i < n; i++) {
            vt_fp16_t h = vt_f32_to_fp16(src[i]);
            memcpy(bytes + i * (int64_t)sizeof h, &h, sizeof h);
        }
        return VT_OK;
    case VT_BF16:
        for (int64_t i = 0; i < n; i++) {
            vt_bf16_t h = vt_f32_to_bf16(src[i]);
            memcpy(bytes + i * (int64_t)sizeof h, &h, sizeof h);
        }
        return VT_OK;
    case VT_I32:
        for (int64_t i = 0; i < n; i++) {
            /* 2^31 - 128 is the largest float below 2^31. */
            int32_t v = (int32_t)saturating_to_int(src[i], -2147483648.0, 2147483520.0);
            memcpy(bytes + i * (int64_t)sizeof v, &v, sizeof v);
        }
        return VT_OK;
    case VT_I64:
        for (int64_t i = 0; i < n; i++) {
            /* 2^63 - 2^39 is the largest float below 2^63. */
            int64_t v = saturating_to_int(src[i], -9223372036854775808.0, 9223371487098961920.0);
            memcpy(bytes + i * (int64_t)sizeof v, &v, sizeof v);
        }
        return VT_OK;
    case VT_Q8_0: vt_quant_q8_0(src, dst, nb); return VT_OK;
    case VT_Q4_0: vt_quant_q4_0(src, dst, nb); return VT_OK;
    case VT_Q4_K: vt_quant_q4_k(src, dst, nb); return VT_OK;
    case VT_Q5_K: vt_quant_q5_k(src, dst, nb); return VT_OK;
    case VT_Q6_K: vt_quant_q6_k(src, dst, nb); return VT_OK;
    default: return VT_ERR_INVALID;
    }
}
