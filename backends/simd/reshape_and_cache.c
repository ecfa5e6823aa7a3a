/* reshape_and_cache.c — write new tokens' k and v rows into their cache
 * slots, converting to the cache dtype on the way (through f32, exact for
 * widening, round to nearest even for narrowing; a Q8_0 cache quantizes, in
 * kv_q8_0.c). A negative slot is padding and is skipped. */
#include <string.h>

#include "simd.h"

/* src: T rows of width elements of src_dtype; cache: slots of width elements. */
static vt_status store_rows(const vt_tensor *src, const vt_tensor *cache, const int64_t *slots, int64_t T,
                            float *buf) {
    const int64_t width = src->ne[0] * src->ne[1];
    const int64_t n_slots = cache->ne[2] * cache->ne[3];
    const size_t ss = simd_float_size(src->dtype), cs = simd_float_size(cache->dtype);
    for (int64_t t = 0; t < T; t++) {
        const int64_t slot = slots[t];
        if (slot < 0) continue;
        if (slot >= n_slots) return VT_ERR_INVALID;
        const uint8_t *s = (const uint8_t *)src->data + (size_t)(t * width) * ss;
        uint8_t *d = (uint8_t *)cache->data + (size_t)(slot * width) * cs;
        if (src->dtype == cache->dtype) {
            memcpy(d, s, (size_t)width * ss);
        } else if (src->dtype == VT_F32) {
            simd_store_row(cache->dtype, (const float *)s, d, width);
        } else {
            simd_load_row(src->dtype, s, buf, width);
            simd_store_row(cache->dtype, buf, d, width);
        }
    }
    return VT_OK;
}

vt_status simd_reshape_and_cache(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_tensor *k = &node->src[0], *v = &node->src[1];
    const vt_tensor *kc = &node->src[2], *vc = &node->src[3];
    const int64_t *slots = node->src[4].data;
    const int64_t T = k->ne[2];
    const int64_t width = k->ne[0] * k->ne[1] > v->ne[0] * v->ne[1] ? k->ne[0] * k->ne[1] : v->ne[0] * v->ne[1];
    if (v->ne[2] != T) return VT_ERR_INVALID;
    float *buf = simd_scratch(ctx, (size_t)width * sizeof(float));
    if (!buf) return VT_ERR_NOMEM;
    vt_status st = kc->dtype == VT_Q8_0 ? simd_store_rows_q8_0(ctx->host, k, kc, slots, T, buf)
                                        : store_rows(k, kc, slots, T, buf);
    if (st == VT_OK)
        st = vc->dtype == VT_Q8_0 ? simd_store_rows_q8_0(ctx->host, v, vc, slots, T, buf)
                                  : store_rows(v, vc, slots, T, buf);
    return st;
}
