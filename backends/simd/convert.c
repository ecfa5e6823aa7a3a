/* convert.c — dtype casts between F32, F16 and BF16, 8 values at a time
 * (F16C for f16, integer rounding for bf16, both round to nearest even), and
 * the row load/store helpers the other kernels share. */
#include <string.h>

#include "simd.h"
#include "simd_vec.h"

void simd_load_row(int32_t dtype, const void *src, float *dst, int64_t n) {
    int64_t i = 0;
    if (dtype == VT_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (dtype == VT_F16) {
        const vt_fp16_t *s = src;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, simd_load8_f16(s + i));
        for (; i < n; i++) dst[i] = vt_fp16_to_f32(s[i]);
    } else {
        const vt_bf16_t *s = src;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, simd_load8_bf16(s + i));
        for (; i < n; i++) dst[i] = vt_bf16_to_f32(s[i]);
    }
}

void simd_store_row(int32_t dtype, const float *src, void *dst, int64_t n) {
    int64_t i = 0;
    if (dtype == VT_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (; i + 8 <= n; i += 8) simd_store8(dtype, dst, i, _mm256_loadu_ps(src + i));
    for (; i < n; i++) simd_store1(dtype, dst, i, src[i]);
}

/* Same-size element counts; converts in pieces through a small f32 buffer so
 * no scratch allocation is needed. */
typedef struct convert_task {
    const uint8_t *src;
    uint8_t *dst;
    int32_t src_dtype, dst_dtype;
} convert_task;

#define PIECE 1024

static void convert_pieces(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const convert_task *t = arg;
    const size_t ss = simd_float_size(t->src_dtype), ds = simd_float_size(t->dst_dtype);
    float buf[PIECE];
    for (int64_t i = begin; i < end; i += PIECE) {
        const int64_t n = end - i < PIECE ? end - i : PIECE;
        if (t->src_dtype == VT_F32) {
            simd_store_row(t->dst_dtype, (const float *)t->src + i, t->dst + (size_t)i * ds, n);
        } else {
            simd_load_row(t->src_dtype, t->src + (size_t)i * ss, buf, n);
            simd_store_row(t->dst_dtype, buf, t->dst + (size_t)i * ds, n);
        }
    }
}

vt_status simd_convert(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_tensor *x = &node->src[0], *y = &node->dst;
    int64_t n = 1;
    for (int i = 0; i < x->ndim; i++) n *= x->ne[i];
    if (!simd_float_size(x->dtype) || !simd_float_size(y->dtype)) return VT_ERR_INVALID;
    if (n <= 0) return VT_OK;
    if (x->dtype == y->dtype) {
        memcpy(y->data, x->data, (size_t)n * simd_float_size(x->dtype));
        return VT_OK;
    }
    convert_task t = {x->data, y->data, x->dtype, y->dtype};
    if (n <= 4 * PIECE)
        convert_pieces(&t, 0, n, 0);
    else
        vt_host_parallel_for(ctx->host, n, PIECE, convert_pieces, &t);
    return VT_OK;
}
