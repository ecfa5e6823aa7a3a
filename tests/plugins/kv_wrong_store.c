/* kv_wrong_store.c — test backend with a deliberately wrong cache store:
 * it accepts exactly what the reference accepts, but before storing k/v it
 * rounds them through the wrong 16-bit dtype — bf16 for an f16 cache, f16
 * for an f32 cache — so the cache holds values of another precision than the
 * one asked for, while every plan and dtype on the way looks right. A bf16
 * cache it fills correctly: no float dtype is narrower (rounding through f16
 * first changes nothing at these magnitudes), which makes it the control.
 *
 * It exists so test_kv_matrix can show that its logits bound catches a store
 * of the wrong dtype: a plan-level check cannot see this, only the numbers
 * can. Every other op runs on the reference (forward_to_reference.h). */
#define PLUGIN_NAME "kv_wrong_store"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_RESHAPE_AND_CACHE wrong_reshape_and_cache
#include "forward_to_reference.h"

/* t's elements rounded through `wrong` into a new buffer of that dtype; t
 * is changed to describe it (contiguous). */
static vt_status round_through(const fwd_ctx *c, vt_tensor *t, int32_t wrong, void **buf) {
    const vt_host *h = c->host;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->ne[i];
    float *f32 = h->alloc((size_t)n * sizeof *f32, 64);
    *buf = h->alloc(h->row_size(wrong, n), 64);
    if (!f32 || !*buf) {
        h->free(f32);
        return VT_ERR_NOMEM;
    }
    vt_status st = h->to_f32(t->dtype, t->data, f32, n);
    if (st == VT_OK) st = h->from_f32(wrong, f32, *buf, n);
    h->free(f32);
    t->dtype = wrong;
    t->data = *buf;
    t->nb[0] = h->row_size(wrong, 1);
    t->nb[1] = h->row_size(wrong, t->ne[0]);
    for (int i = 2; i < VT_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
    return st;
}

static vt_status wrong_reshape_and_cache(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, "reshape_and_cache");
    if (st != VT_OK) return st;
    const int32_t cache = node->src[2].dtype;
    if (cache == VT_BF16) return c->ref->reshape_and_cache(c->ref_ctx, node);
    const int32_t wrong = cache == VT_F16 ? VT_BF16 : VT_F16;
    vt_node q = *node;
    void *kb = NULL, *vb = NULL;
    st = round_through(c, &q.src[0], wrong, &kb);
    if (st == VT_OK) st = round_through(c, &q.src[1], wrong, &vb);
    if (st == VT_OK) st = c->ref->reshape_and_cache(c->ref_ctx, &q);
    c->host->free(kb);
    c->host->free(vb);
    return st;
}

FWD_BACKEND("test plugin: reference ops, but the cache store rounds k/v through the wrong 16-bit dtype")
