/* capabilities.c — representative nodes for supports() queries. */
#include "capabilities.h"

#include <math.h>
#include <string.h>

#include "plan_internal.h"
#include "quant.h"

const int32_t vt_cap_dtypes[VT_CAP_N_DTYPES] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};

static vt_tensor tensor(int32_t dtype, int ndim, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    vt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim;
    int64_t ne[4] = {ne0, ne1, ne2, ne3};
    for (int i = 0; i < 4; i++) t.ne[i] = ne[i];
    t.nb[0] = vt_dtype_block_bytes(dtype);
    t.nb[1] = vt_row_size(dtype, ne0);
    for (int i = 2; i < 4; i++) t.nb[i] = t.nb[i - 1] * (size_t)t.ne[i - 1];
    return t;
}

int vt_cap_node(int op, int32_t d, vt_phase phase, vt_node *n) {
    const int64_t M = phase == VT_PHASE_DECODE ? 1 : 8, K = 256, N = 32, D = 64, H = 4, KVH = 2, BS = 16, B = 4;
    bool is_float = vt_dtype_is_float(d), is_weight = vt_dtype_is_weight(d);
    memset(n, 0, sizeof *n);
    n->struct_size = sizeof *n;
    n->op = op;
    n->phase = phase;
    switch (op) {
    case VT_OP_MATMUL:
        if (!is_weight) return 0;
        n->n_src = 2;
        n->src[0] = tensor(d, 2, K, N, 1, 1);
        n->src[1] = tensor(VT_F32, 2, K, M, 1, 1);
        n->dst = tensor(VT_F32, 2, N, M, 1, 1);
        return 1;
    case VT_OP_GET_ROWS:
        if (!is_weight) return 0;
        n->n_src = 2;
        n->src[0] = tensor(d, 2, K, N, 1, 1);
        n->src[1] = tensor(VT_I32, 1, M, 1, 1, 1);
        n->dst = tensor(VT_F32, 2, K, M, 1, 1);
        return 1;
    case VT_OP_ATTENTION:
        if (!vt_dtype_is_kv_cache(d)) return 0;
        n->n_src = 6;
        n->src[0] = tensor(VT_F32, 3, D, H, M, 1);
        n->src[1] = n->src[2] = tensor(d, 4, D, KVH, BS, B);
        n->src[3] = tensor(VT_I32, 2, B, 1, 1, 1);
        n->src[4] = n->src[5] = tensor(VT_I32, 1, M, 1, 1, 1);
        n->dst = tensor(VT_F32, 3, D, H, M, 1);
        n->params.attention.scale = 1.0f / sqrtf((float)D);
        n->params.attention.block_size = (int32_t)BS;
        n->params.attention.n_seqs = 1;
        n->params.attention.max_blocks_per_seq = (int32_t)B;
        return 1;
    case VT_OP_RESHAPE_AND_CACHE:
        if (!vt_dtype_is_kv_cache(d)) return 0;
        n->n_src = 5;
        /* k/v in the cache dtype; f32 k/v into a quantized cache (the store quantizes) */
        n->src[0] = n->src[1] = tensor(is_float ? d : VT_F32, 3, D, KVH, M, 1);
        n->src[2] = n->src[3] = tensor(d, 4, D, KVH, BS, B);
        n->src[4] = tensor(VT_I64, 1, M, 1, 1, 1);
        return 1;
    case VT_OP_RMS_NORM:
        if (!is_float) return 0;
        n->n_src = 2;
        n->src[0] = tensor(VT_F32, 2, K, M, 1, 1);
        n->src[1] = tensor(VT_F32, 1, K, 1, 1, 1);
        n->dst = tensor(d, 2, K, M, 1, 1);
        n->params.rms_norm.eps = 1e-6f;
        return 1;
    case VT_OP_ROPE:
        if (!is_float) return 0;
        n->n_src = 2;
        n->src[0] = tensor(VT_F32, 3, D, H, M, 1);
        n->src[1] = tensor(VT_I32, 1, M, 1, 1, 1);
        n->dst = tensor(d, 3, D, H, M, 1);
        n->params.rope = (vt_rope_params){(int32_t)D, VT_ROPE_NEOX, 10000.0f, 1.0f};
        return 1;
    case VT_OP_SWIGLU:
    case VT_OP_ADD:
        if (!is_float) return 0;
        n->n_src = 2;
        n->src[0] = n->src[1] = tensor(VT_F32, 2, K, M, 1, 1);
        n->dst = tensor(d, 2, K, M, 1, 1);
        return 1;
    case VT_OP_CONVERT:
        if (!is_float) return 0;
        n->n_src = 1;
        n->src[0] = tensor(VT_F32, 2, K, M, 1, 1);
        n->dst = tensor(d, 2, K, M, 1, 1);
        return 1;
    case VT_OP_MOE_ROUTE: /* 8 experts, 2 used; the axis is the logits' dtype, f32 alone */
        if (d != VT_F32) return 0;
        n->n_src = 1;
        n->src[0] = tensor(VT_F32, 2, 8, M, 1, 1);
        n->dst = tensor(VT_I32, 2, 2, M, 1, 1);
        n->params.moe = (vt_moe_params){2, 1};
        return 1;
    case VT_OP_MOE_MATMUL:
        if (!is_weight) return 0;
        n->n_src = 3;
        n->src[0] = tensor(d, 3, K, N, 8, 1);
        n->src[1] = tensor(VT_F32, 2, K, M, 1, 1);
        n->src[2] = tensor(VT_I32, 2, 2, M, 1, 1);
        n->dst = tensor(VT_F32, 3, N, 2, M, 1);
        return 1;
    case VT_OP_MOE_COMBINE:
        if (d != VT_F32) return 0;
        n->n_src = 3;
        n->src[0] = tensor(VT_F32, 3, N, 2, M, 1);
        n->src[1] = tensor(VT_I32, 2, 2, M, 1, 1);
        n->src[2] = tensor(VT_F32, 2, 8, M, 1, 1);
        n->dst = tensor(VT_F32, 2, N, M, 1, 1);
        n->params.moe = (vt_moe_params){2, 1};
        return 1;
    default: return 0;
    }
}

int vt_capability(const vt_backend_entry *b, int op, int32_t dtype) {
    vt_node n;
    if (!vt_cap_node(op, dtype, VT_PHASE_PREFILL, &n)) return -1;
    int bits = vt_backend_accepts(b, &n) ? 1 : 0;
    vt_cap_node(op, dtype, VT_PHASE_DECODE, &n);
    if (vt_backend_accepts(b, &n)) bits |= 2;
    return bits;
}
