/* arch_qwen3moe.c — qwen3moe: qwen3's attention, and in every layer a
 * mixture of experts in place of the dense feed-forward: each token routed
 * to the expert_used_count experts its router scores highest, their outputs
 * weighed by the renormalized router probabilities. */
#include "arch.h"

void vt_arch_qwen3moe(vt_graph *g) {
    int32_t x = arch_embed(g);
    for (int il = 0; il < g->model->hp.n_layer && g->status == VT_OK; il++) {
        x = arch_attention(g, il, x, (arch_attention_style){.qkv_bias = false, .qk_norm = true});
        x = arch_moe_ffn(g, il, x);
    }
    arch_output(g, x);
}
