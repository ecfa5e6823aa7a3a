/* arch.h — the architectures vt runs, each a small file (arch_<name>.c)
 * that describes its forward pass as a graph (graph.h) from the model's
 * hyperparameters and weights, out of the blocks they share
 * (arch_blocks.c). Adding an architecture: its loader keys and tensors in
 * model.c, a file here, a line in arch_blocks.c's table. */
#ifndef VT_CORE_ARCH_H
#define VT_CORE_ARCH_H

#include <stdbool.h>

#include "graph.h"

/* The forward pass of g->model into g, from the token inputs to the logits. */
typedef void (*vt_arch_build_fn)(vt_graph *g);

/* The builder of an architecture (NULL for one vt does not run). */
vt_arch_build_fn vt_arch_builder(vt_arch arch);

void vt_arch_llama(vt_graph *g);
void vt_arch_qwen2(vt_graph *g);
void vt_arch_qwen3(vt_graph *g);
void vt_arch_qwen3moe(vt_graph *g);

/* ---- shared blocks (arch_blocks.c) ---- */

/* How a layer's attention differs between the architectures (the q, k and v
 * biases are added wherever the file has them: qwen2's always are). */
typedef struct arch_attention_style {
    bool qk_norm; /* qwen3: an RMS norm of every head of q and k */
} arch_attention_style;

/* What a decoder-only architecture chooses per layer. */
typedef struct arch_decoder_style {
    arch_attention_style attention;
    /* the feed-forward block: arch_ffn or arch_moe_ffn */
    int32_t (*ffn)(vt_graph *g, int il, int32_t x);
} arch_decoder_style;

/* embeddings, n_layer x (attention, feed-forward) on the residual stream,
 * the output head: the whole forward pass of the architectures vt runs. */
void arch_decoder(vt_graph *g, arch_decoder_style style);

/* The token embeddings: the residual stream's first value. */
int32_t arch_embed(vt_graph *g);
/* x + wo(attention(rope(q), cache)) of layer il, storing rope(k) and v. */
int32_t arch_attention(vt_graph *g, int il, int32_t x, arch_attention_style style);
/* x + down(silu(gate(h)) * up(h)), h = ffn_norm(x). */
int32_t arch_ffn(vt_graph *g, int il, int32_t x);
/* x + the routing-weighted sum over each token's chosen experts of
 * down_e(silu(gate_e(h)) * up_e(h)). */
int32_t arch_moe_ffn(vt_graph *g, int il, int32_t x);
/* Final norm and output matrix (over the selected rows when the plan selects
 * them); sets the plan's logits. */
void arch_output(vt_graph *g, int32_t x);

#endif
