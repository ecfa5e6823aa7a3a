/* arch_llama.c — llama: pre-norm attention with adjacent-pair RoPE, a
 * SwiGLU feed-forward, every layer alike. */
#include "arch.h"

void vt_arch_llama(vt_graph *g) {
    arch_decoder(g, (arch_decoder_style){.attention = {.qk_norm = false}, .ffn = arch_ffn});
}
