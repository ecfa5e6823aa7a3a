/* arch_qwen2.c — qwen2: llama's layers with biases on q, k and v (and
 * half-split RoPE, from the hyperparameters). */
#include "arch.h"

void vt_arch_qwen2(vt_graph *g) {
    int32_t x = arch_embed(g);
    for (int il = 0; il < g->model->hp.n_layer && g->status == VT_OK; il++) {
        x = arch_attention(g, il, x, (arch_attention_style){.qkv_bias = true, .qk_norm = false});
        x = arch_ffn(g, il, x);
    }
    arch_output(g, x);
}
