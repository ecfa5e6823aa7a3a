/* arch_qwen2.c — qwen2: llama's layers with biases on q, k and v (and
 * half-split RoPE, from the hyperparameters). */
#include "arch.h"

void vt_arch_qwen2(vt_graph *g) {
    arch_decoder(g, (arch_decoder_style){.attention = {.qk_norm = false}, .ffn = arch_ffn});
}
