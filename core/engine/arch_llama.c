/* arch_llama.c — llama: pre-norm attention with adjacent-pair RoPE, a
 * SwiGLU feed-forward, every layer alike. */
#include "arch.h"

void vt_arch_llama(vt_graph *g) {
    int32_t x = arch_embed(g);
    for (int il = 0; il < g->model->hp.n_layer && g->status == VT_OK; il++) {
        x = arch_attention(g, il, x, (arch_attention_style){.qkv_bias = false, .qk_norm = false});
        x = arch_ffn(g, il, x);
    }
    arch_output(g, x);
}
