/* backend.c — the simd backend's entry table, init/shutdown and supports().
 * Built without AVX flags (it runs before and besides the kernels); the op
 * pointers lead into the AVX2 translation units, which the runtime only calls
 * after vt_backend_probe said this CPU has what they need. */
#include <stdio.h>
#include <string.h>

#include "simd.h"
#include "vt/vt_dtype.h"

void *simd_scratch(simd_ctx *ctx, size_t size) {
    if (size <= ctx->scratch_size) return ctx->scratch;
    ctx->host->free(ctx->scratch);
    ctx->scratch = NULL;
    ctx->scratch_size = 0;
    /* grow geometrically so a prefill of slightly more tokens does not reallocate */
    size_t want = simd_align_up(size + size / 4);
    ctx->scratch = ctx->host->alloc(want, SIMD_ALIGN);
    if (!ctx->scratch) return NULL;
    ctx->scratch_size = want;
    return ctx->scratch;
}

static vt_status simd_init(const vt_host *host, const vt_backend_config *config, void **out, char *err,
                           size_t err_size) {
    *out = NULL;
    if (!host || !host->alloc || !host->free || !host->parallel_for) {
        snprintf(err, err_size, "simd: host table lacks alloc/free/parallel_for");
        return VT_ERR_INVALID;
    }
    simd_ctx *ctx = host->alloc(sizeof *ctx, SIMD_ALIGN);
    if (!ctx) {
        snprintf(err, err_size, "simd: out of memory allocating the context");
        return VT_ERR_NOMEM;
    }
    memset(ctx, 0, sizeof *ctx);
    ctx->host = host;
    ctx->n_threads = host->n_threads > 0 ? host->n_threads : (config && config->n_threads > 0 ? config->n_threads : 1);
    *out = ctx;
    return VT_OK;
}

static void simd_shutdown(void *opaque) {
    simd_ctx *ctx = opaque;
    if (!ctx) return;
    const vt_host *host = ctx->host;
    host->free(ctx->scratch);
    host->free(ctx);
}

/* ---- supports() ---------------------------------------------------------- */

/* Elements of a tensor (all ne[], unused ones are 1). */
static int64_t n_elements(const vt_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim && i < VT_MAX_DIMS; i++) n *= t->ne[i];
    return n;
}

static int supports_matmul(const vt_node *n) {
    const vt_tensor *w = &n->src[0], *x = &n->src[1], *y = &n->dst;
    if (n->n_src < 2 || !vt_dtype_is_weight(w->dtype) || x->dtype != VT_F32 || !vt_dtype_is_float(y->dtype)) return 0;
    const int64_t K = w->ne[0], N = w->ne[1], M = x->ne[1];
    if (K <= 0 || K % vt_dtype_block_length(w->dtype) != 0) return 0;
    return x->ne[0] == K && y->ne[0] == N && y->ne[1] == M;
}

static int supports_attention(const vt_node *n) {
    if (n->n_src < 6) return 0;
    const vt_tensor *q = &n->src[0], *k = &n->src[1], *v = &n->src[2];
    if (q->dtype != VT_F32 || !vt_dtype_is_float(k->dtype) || !vt_dtype_is_float(v->dtype) || n->dst.dtype != VT_F32) return 0;
    if (n->src[3].dtype != VT_I32 || n->src[4].dtype != VT_I32 || n->src[5].dtype != VT_I32) return 0;
    const int64_t D = q->ne[0], H = q->ne[1], KVH = k->ne[1];
    if (k->ne[0] != D || v->ne[0] != D || v->ne[1] != KVH || KVH <= 0 || H % KVH != 0) return 0;
    return n->params.attention.block_size > 0 && k->ne[2] == n->params.attention.block_size;
}

static int supports_reshape_and_cache(const vt_node *n) {
    if (n->n_src < 5) return 0;
    for (int i = 0; i < 4; i++)
        if (!vt_dtype_is_float(n->src[i].dtype)) return 0;
    if (n->src[4].dtype != VT_I64) return 0;
    return n->src[0].ne[0] == n->src[2].ne[0] && n->src[1].ne[0] == n->src[3].ne[0] &&
           n->src[0].ne[1] == n->src[2].ne[1] && n->src[1].ne[1] == n->src[3].ne[1];
}

static int supports_node(const vt_node *n) {
    switch (n->op) {
    case VT_OP_MATMUL:
        return supports_matmul(n);
    case VT_OP_ATTENTION:
        return supports_attention(n);
    case VT_OP_RESHAPE_AND_CACHE:
        return supports_reshape_and_cache(n);
    case VT_OP_RMS_NORM:
        return n->n_src >= 2 && n->src[0].dtype == VT_F32 && n->src[1].dtype == VT_F32 && vt_dtype_is_float(n->dst.dtype) &&
               n->src[1].ne[0] == n->src[0].ne[0];
    case VT_OP_ROPE: {
        const vt_rope_params *p = &n->params.rope;
        return n->n_src >= 2 && n->src[0].dtype == VT_F32 && n->src[1].dtype == VT_I32 && vt_dtype_is_float(n->dst.dtype) &&
               (p->mode == VT_ROPE_NORM || p->mode == VT_ROPE_NEOX) && p->n_rot > 0 && p->n_rot % 2 == 0 &&
               p->n_rot <= n->src[0].ne[0];
    }
    case VT_OP_SWIGLU:
        return n->n_src >= 2 && n->src[0].dtype == VT_F32 && n->src[1].dtype == VT_F32 && n->dst.dtype == VT_F32;
    case VT_OP_ADD:
        return n->n_src >= 2 && n->src[0].dtype == VT_F32 && n->src[1].dtype == VT_F32 && vt_dtype_is_float(n->dst.dtype) &&
               n->src[1].ne[0] == n->src[0].ne[0];
    case VT_OP_GET_ROWS:
        return n->n_src >= 2 && vt_dtype_is_weight(n->src[0].dtype) && n->src[1].dtype == VT_I32 && n->dst.dtype == VT_F32 &&
               n->src[0].ne[0] % vt_dtype_block_length(n->src[0].dtype) == 0;
    case VT_OP_CONVERT:
        return n->n_src >= 1 && vt_dtype_is_float(n->src[0].dtype) && vt_dtype_is_float(n->dst.dtype) &&
               n_elements(&n->src[0]) == n_elements(&n->dst);
    default:
        return 0;
    }
}

static int simd_supports(void *ctx, const vt_node *node) {
    (void)ctx;
    if (!node || node->n_src < 0 || node->n_src > VT_MAX_SRC) return 0;
    return supports_node(node);
}

static const vt_backend simd_backend = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = SIMD_BACKEND_NAME,
    .description = "AVX2/FMA/F16C kernels: 8-bit integer dot products for quantized weights",
    .init = simd_init,
    .shutdown = simd_shutdown,
    .supports = simd_supports,
    .matmul = simd_matmul,
    .attention = simd_attention,
    .reshape_and_cache = simd_reshape_and_cache,
    .rms_norm = simd_rms_norm,
    .rope = simd_rope,
    .swiglu = simd_swiglu,
    .add = simd_add,
    .get_rows = simd_get_rows,
    .convert = simd_convert,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &simd_backend; }
