/* arch_qwen3.c — qwen3: llama's layers with an RMS norm of every head of q
 * and k before RoPE (half-split, from the hyperparameters), no biases. */
#include "arch.h"

void vt_arch_qwen3(vt_graph *g) {
    int32_t x = arch_embed(g);
    for (int il = 0; il < g->model->hp.n_layer && g->status == VT_OK; il++) {
        x = arch_attention(g, il, x, (arch_attention_style){.qkv_bias = false, .qk_norm = true});
        x = arch_ffn(g, il, x);
    }
    arch_output(g, x);
}
