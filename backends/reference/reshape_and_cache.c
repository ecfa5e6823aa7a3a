/* reshape_and_cache.c — write each token's k and v rows ({D, KVH} each) into
 * the paged caches at its slot, converting to the cache dtype on store.
 *
 * A slot is block * BS + offset, i.e. row `slot` of the cache viewed as
 * [B * BS][KVH][D]; a negative slot is padding and skipped. Every slot is
 * checked before anything is written, so a bad mapping changes nothing. The
 * tokens are stored one after another on the calling thread: this is a copy
 * of T rows, cheap next to the matmuls, and a serial loop keeps the result
 * defined (last token wins) even if a mapping repeats a slot. */
#include <string.h>

#include "reference.h"

/* One token's {D, KVH} row from src into the cache row at slot. */
static vt_status store_row(const ref_ctx *c, const vt_tensor *src, int64_t t, const vt_tensor *cache, int64_t slot,
                           float *f32_row /* [D * KVH] */) {
    const int64_t n = src->ne[0] * vt_tensor_dim(src, 1);
    const size_t src_bytes = c->host->row_size(src->dtype, n), cache_bytes = c->host->row_size(cache->dtype, n);
    const unsigned char *from = (const unsigned char *)src->data + (size_t)t * src_bytes;
    unsigned char *to = (unsigned char *)cache->data + (size_t)slot * cache_bytes;
    if (src->dtype == cache->dtype) {
        memcpy(to, from, src_bytes);
        return VT_OK;
    }
    vt_status st = c->host->to_f32(src->dtype, from, f32_row, n);
    if (st == VT_OK) st = c->host->from_f32(cache->dtype, f32_row, to, n);
    return st;
}

vt_status ref_reshape_and_cache(void *ctx, const vt_node *node) {
    const ref_ctx *c = ctx;
    if (!ref_validate(c, node, "reshape_and_cache")) return VT_ERR_INVALID;
    const vt_tensor *k = &node->src[0], *v = &node->src[1], *kc = &node->src[2], *vc = &node->src[3];
    const int64_t *slots = node->src[4].data; /* [T] */
    const int64_t T = vt_tensor_dim(k, 2), n_slots = vt_tensor_dim(kc, 2) * vt_tensor_dim(kc, 3);
    for (int64_t t = 0; t < T; t++) {
        if (slots[t] >= n_slots) {
            c->host->log(VT_LOG_ERROR, REF_NAME, "reshape_and_cache: token %lld maps to slot %lld, cache has %lld slots",
                         (long long)t, (long long)slots[t], (long long)n_slots);
            return VT_ERR_INVALID;
        }
    }
    float *row = c->host->alloc((size_t)(k->ne[0] * vt_tensor_dim(k, 1)) * sizeof(float), 64);
    if (!row) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "reshape_and_cache: out of memory");
        return VT_ERR_NOMEM;
    }
    vt_status st = VT_OK;
    for (int64_t t = 0; t < T && st == VT_OK; t++) {
        if (slots[t] < 0) continue; /* padding */
        st = store_row(c, k, t, kc, slots[t], row);
        if (st == VT_OK) st = store_row(c, v, t, vc, slots[t], row);
    }
    c->host->free(row);
    if (st != VT_OK) {
        c->host->log(VT_LOG_ERROR, REF_NAME, "reshape_and_cache: cannot convert %s to %s", c->host->dtype_name(k->dtype),
                     c->host->dtype_name(kc->dtype));
        return VT_ERR_INTERNAL;
    }
    return VT_OK;
}
