/* arch_qwen3.c — qwen3: llama's layers with an RMS norm of every head of q
 * and k before RoPE (half-split, from the hyperparameters), no biases. */
#include "arch.h"

void vt_arch_qwen3(vt_graph *g) {
    arch_decoder(g, (arch_decoder_style){.attention = {.qk_norm = true}, .ffn = arch_ffn});
}
