/* quant.c — the row conversions to and from f32.
 *
 * The block codecs live in quant_dequant.c (and its AVX2 form,
 * quant_dequant_avx2.c), quant_legacy.c and quant_k.c; this file owns the
 * length checks, the choice of path and the plain types (f32, f16, bf16, i32,
 * i64). The dtype table itself is include/vt/vt_dtype.h. */
#include "quant.h"

#include <math.h>
#include <stdatomic.h>
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

/* -1 until the first call asks the CPU; any thread may store the same answer. */
static atomic_int best_path = -1;

vt_to_f32_path vt_to_f32_best_path(void) {
    int path = atomic_load_explicit(&best_path, memory_order_relaxed);
    if (path < 0) {
        path = vt_dequant_avx2_usable() ? VT_TO_F32_AVX2 : VT_TO_F32_SCALAR;
        atomic_store_explicit(&best_path, path, memory_order_relaxed);
    }
    return (vt_to_f32_path)path;
}

vt_status vt_to_f32(int32_t dtype, const void *src, float *dst, int64_t n) {
    return vt_to_f32_with(vt_to_f32_best_path(), dtype, src, dst, n);
}

vt_status vt_to_f32_with(vt_to_f32_path path, int32_t dtype, const void *src, float *dst, int64_t n) {
    int64_t nb = whole_blocks(dtype, n);
    if (nb < 0 || (n > 0 && (!src || !dst))) return VT_ERR_INVALID;
    if (path == VT_TO_F32_AVX2) {
        if (vt_to_f32_best_path() != VT_TO_F32_AVX2) return VT_ERR_UNSUPPORTED;
        if (n > 0 && vt_dequant_avx2(dtype, src, dst, n)) return VT_OK;
    } else if (path != VT_TO_F32_SCALAR) {
        return VT_ERR_INVALID;
    }
    /* Element access goes through memcpy: a row may start at any byte address. */
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
