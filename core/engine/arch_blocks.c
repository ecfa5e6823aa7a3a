/* arch_blocks.c — the blocks the architectures are made of (arch.h), and
 * the table from an architecture to its builder. */
#include <stdio.h>

#include "arch.h"

vt_arch_build_fn vt_arch_builder(vt_arch arch) {
    switch (arch) {
    case VT_ARCH_LLAMA: return vt_arch_llama;
    case VT_ARCH_QWEN2: return vt_arch_qwen2;
    case VT_ARCH_QWEN3: return vt_arch_qwen3;
    case VT_ARCH_QWEN3MOE: return vt_arch_qwen3moe;
    }
    return NULL;
}

/* "blk.<il>.<what>" in buf (node labels name their layer). */
static const char *layer_label(char buf[40], int il, const char *what) {
    snprintf(buf, 40, "blk.%d.%s", il, what);
    return buf;
}

int32_t arch_embed(vt_graph *g) {
    return graph_get_rows(g, "token_embd", graph_weight(g, g->model->tok_embd), g->p->v_tokens);
}

int32_t arch_attention(vt_graph *g, int il, int32_t x, arch_attention_style style) {
    const vt_layer_weights *w = &g->model->layers[il];
    const vt_hparams *hp = &g->model->hp;
    const int64_t T = g->p->max_tokens, H = hp->n_head, KVH = hp->n_head_kv, D = hp->head_dim;
    char l[40];
    int32_t h = graph_rms_norm(g, layer_label(l, il, "attn_norm"), x, graph_weight(g, w->attn_norm));
    int32_t q = graph_matmul(g, layer_label(l, il, "attn_q"), graph_weight(g, w->wq), h);
    int32_t k = graph_matmul(g, layer_label(l, il, "attn_k"), graph_weight(g, w->wk), h);
    int32_t v = graph_matmul(g, layer_label(l, il, "attn_v"), graph_weight(g, w->wv), h);
    /* the biases the file has (qwen2 has all three; other architectures may) */
    if (w->bq) q = graph_add(g, layer_label(l, il, "attn_q.bias"), q, graph_view(g, graph_weight(g, w->bq), "bq", 2, H * D, 1, 1));
    if (w->bk) k = graph_add(g, layer_label(l, il, "attn_k.bias"), k, graph_view(g, graph_weight(g, w->bk), "bk", 2, KVH * D, 1, 1));
    if (w->bv) v = graph_add(g, layer_label(l, il, "attn_v.bias"), v, graph_view(g, graph_weight(g, w->bv), "bv", 2, KVH * D, 1, 1));
    if (style.qk_norm) { /* per head: q and k seen as rows of head_dim */
        q = graph_rms_norm(g, layer_label(l, il, "attn_q_norm"), graph_view(g, q, "q_heads", 2, D, H * T, 1),
                           graph_weight(g, w->q_norm));
        k = graph_rms_norm(g, layer_label(l, il, "attn_k_norm"), graph_view(g, k, "k_heads", 2, D, KVH * T, 1),
                           graph_weight(g, w->k_norm));
    }
    const int32_t factors = g->model->rope_freqs ? graph_weight(g, g->model->rope_freqs) : -1;
    int32_t qr = graph_rope(g, layer_label(l, il, "rope_q"), graph_view(g, q, "q3", 3, D, H, T), factors);
    int32_t kr = graph_rope(g, layer_label(l, il, "rope_k"), graph_view(g, k, "k3", 3, D, KVH, T), factors);
    int32_t kc = graph_kv_cache(g, il, 0), vc = graph_kv_cache(g, il, 1);
    graph_store_kv(g, layer_label(l, il, "store_kv"), kr, graph_view(g, v, "v3", 3, D, KVH, T), kc, vc);
    int32_t o = graph_attention(g, layer_label(l, il, "attention"), qr, kc, vc);
    int32_t a = graph_matmul(g, layer_label(l, il, "attn_output"), graph_weight(g, w->wo),
                             graph_view(g, o, "attn_out", 2, H * D, T, 1));
    return graph_add(g, layer_label(l, il, "attn_residual"), x, a);
}

int32_t arch_ffn(vt_graph *g, int il, int32_t x) {
    const vt_layer_weights *w = &g->model->layers[il];
    char l[40];
    int32_t h = graph_rms_norm(g, layer_label(l, il, "ffn_norm"), x, graph_weight(g, w->ffn_norm));
    int32_t gate = graph_matmul(g, layer_label(l, il, "ffn_gate"), graph_weight(g, w->ffn_gate), h);
    int32_t up = graph_matmul(g, layer_label(l, il, "ffn_up"), graph_weight(g, w->ffn_up), h);
    int32_t s = graph_swiglu(g, layer_label(l, il, "ffn_swiglu"), gate, up);
    int32_t d = graph_matmul(g, layer_label(l, il, "ffn_down"), graph_weight(g, w->ffn_down), s);
    return graph_add(g, layer_label(l, il, "ffn_residual"), x, d);
}

int32_t arch_moe_ffn(vt_graph *g, int il, int32_t x) {
    const vt_layer_weights *w = &g->model->layers[il];
    const vt_hparams *hp = &g->model->hp;
    const int64_t T = g->p->max_tokens, U = hp->n_expert_used, FE = hp->n_ff_exp;
    char l[40];
    int32_t h = graph_rms_norm(g, layer_label(l, il, "ffn_norm"), x, graph_weight(g, w->ffn_norm));
    int32_t logits = graph_matmul(g, layer_label(l, il, "ffn_gate_inp"), graph_weight(g, w->ffn_gate_inp), h);
    int32_t ids = graph_moe_route(g, layer_label(l, il, "ffn_moe_route"), logits);
    int32_t gate = graph_moe_matmul(g, layer_label(l, il, "ffn_gate_exps"), graph_weight(g, w->ffn_gate_exps), h, ids);
    int32_t up = graph_moe_matmul(g, layer_label(l, il, "ffn_up_exps"), graph_weight(g, w->ffn_up_exps), h, ids);
    /* swiglu over the chosen experts' rows seen as one matrix */
    int32_t s = graph_swiglu(g, layer_label(l, il, "ffn_moe_swiglu"), graph_view(g, gate, "gate_rows", 2, FE, U * T, 1),
                             graph_view(g, up, "up_rows", 2, FE, U * T, 1));
    int32_t d = graph_moe_matmul(g, layer_label(l, il, "ffn_down_exps"), graph_weight(g, w->ffn_down_exps),
                                 graph_view(g, s, "act3", 3, FE, U, T), ids);
    int32_t sum = graph_moe_combine(g, layer_label(l, il, "ffn_moe_combine"), d, ids, logits);
    return graph_add(g, layer_label(l, il, "ffn_residual"), x, sum);
}

void arch_output(vt_graph *g, int32_t x) {
    vt_plan *p = g->p;
    if (p->v_out_rows >= 0) x = graph_get_rows(g, "output_rows", x, p->v_out_rows);
    int32_t xn = graph_rms_norm(g, "output_norm", x, graph_weight(g, g->model->output_norm));
    p->v_logits = graph_matmul(g, "output", graph_weight(g, g->model->output), xn);
}

void arch_decoder(vt_graph *g, arch_decoder_style style) {
    int32_t x = arch_embed(g);
    for (int il = 0; il < g->model->hp.n_layer && g->status == VT_OK; il++) {
        x = arch_attention(g, il, x, style.attention);
        x = style.ffn(g, il, x);
    }
    arch_output(g, x);
}
