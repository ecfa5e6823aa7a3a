/* quant.c — the row conversions to and from f32.
 *
 * The block codecs live in quant_dequant.c, quant_legacy.c and quant_k.c;
 * this file owns the length checks and the plain types (f32, f16, bf16, i32,
 * i64). The dtype table itself is include/vt/vt_dtype.h. */
#include "quant.h"

#include <math.h>
#include <string.h>

#include "quant_blocks.h"
#include "vt/vt_quant.h"

/* Blocks in n elements of dtype, or -1 when dtype or n is unacceptable. */
static int64_t whole_blocks(int32_t dtype, int64_t n) {
    const vt_dtype_info info = vt_dtype_info_of(dtype);
    if (!info.name || n < 0 || n % info.block_length != 0) return -1;
    return n / info.block_length;
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
