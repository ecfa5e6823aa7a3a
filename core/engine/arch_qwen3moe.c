/* arch_qwen3moe.c — qwen3moe: qwen3's attention, and in every layer a
 * mixture of experts in place of the dense feed-forward: each token routed
 * to the expert_used_count experts its router scores highest, their outputs
 * weighed by the renormalized router probabilities. */
#include "arch.h"

void vt_arch_qwen3moe(vt_graph *g) {
    arch_decoder(g, (arch_decoder_style){.attention = {.qk_norm = true}, .ffn = arch_moe_ffn});
}
