/* model.h — an architecture's hyperparameters and weights, bound zero-copy
 * to the mmapped GGUF. Knows nothing of graphs or backends.
 *
 * Every hyperparameter is checked against the tensor shapes at load (e.g.
 * n_head x head_dim must equal the rows of attn_q), so the graph builder can
 * trust them. */
#ifndef VT_CORE_MODEL_H
#define VT_CORE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"
#include "tokenizer.h"

typedef enum vt_arch { VT_ARCH_LLAMA = 0, VT_ARCH_QWEN2 = 1, VT_ARCH_QWEN3 = 2, VT_ARCH_QWEN3MOE = 3 } vt_arch;

/* Experts a mixture may have: past what any published model uses (Qwen3's
 * 128, DeepSeek's 256), and a bound on what a file may make each token's
 * routing cost. */
#define VT_MODEL_MAX_EXPERTS 512

typedef struct vt_hparams {
    vt_arch arch;
    char arch_name[32];
    int32_t n_embd;      /* E: residual width */
    int32_t n_layer;
    int32_t n_head;      /* H: query heads */
    int32_t n_head_kv;   /* KVH: key/value heads (GQA when < H) */
    int32_t head_dim;    /* D */
    int32_t n_ff;        /* F: feed-forward width (dense models) */
    int32_t n_expert;      /* NE: experts per layer; 0 = a dense model */
    int32_t n_expert_used; /* U: experts each token is routed to */
    int32_t n_ff_exp;      /* an expert's feed-forward width */
    bool norm_top_k;       /* the chosen experts' weights renormalized to sum 1 */
    int32_t n_vocab;     /* V */
    int32_t n_ctx_train; /* context_length metadata */
    int32_t n_rot;       /* rotated dims per head (rope.dimension_count, default D) */
    int32_t rope_mode;   /* vt_rope_mode: llama NORM, qwen NEOX */
    float rope_base;
    float rope_freq_scale; /* 1 / rope.scaling.factor for linear scaling */
    float rms_eps;
} vt_hparams;

/* One layer's weights: pointers into the GGUF tensor table (NULL = absent). */
typedef struct vt_layer_weights {
    const vt_gguf_tensor *attn_norm;      /* {E} */
    const vt_gguf_tensor *wq, *wk, *wv;   /* {E, H*D}, {E, KVH*D}, {E, KVH*D} */
    const vt_gguf_tensor *bq, *bk, *bv;   /* qwen2: {H*D}, {KVH*D}, {KVH*D} */
    const vt_gguf_tensor *q_norm, *k_norm; /* qwen3: {D} */
    const vt_gguf_tensor *wo;             /* {H*D, E} */
    const vt_gguf_tensor *ffn_norm;       /* {E} */
    const vt_gguf_tensor *ffn_gate, *ffn_up; /* {E, F}; dense models */
    const vt_gguf_tensor *ffn_down;       /* {F, E} */
    const vt_gguf_tensor *ffn_gate_inp;   /* mixture of experts: the router {E, NE} */
    const vt_gguf_tensor *ffn_gate_exps, *ffn_up_exps; /* {E, FE, NE} */
    const vt_gguf_tensor *ffn_down_exps;  /* {FE, E, NE} */
} vt_layer_weights;

typedef struct vt_model {
    vt_gguf *gguf;
    vt_hparams hp;
    const vt_gguf_tensor *tok_embd;    /* {E, V} */
    const vt_gguf_tensor *output_norm; /* {E} */
    const vt_gguf_tensor *output;      /* {E, V}; == tok_embd when tied */
    const vt_gguf_tensor *rope_freqs;  /* {n_rot / 2}: Llama 3.1's RoPE frequency factors, or NULL */
    vt_layer_weights *layers;          /* [n_layer] */
    vt_tokenizer *tokenizer;           /* NULL if the file has none or it failed to load */
    char tokenizer_error[VT_ERROR_MSG_SIZE];
    int64_t n_params;
    int64_t weight_bytes; /* bytes of all tensors */
} vt_model;

vt_status vt_model_load(const char *path, vt_model **out, vt_error *err);
void vt_model_free(vt_model *m);

/* Bytes of weights one decoded token reads (every matrix once; the embedding
 * only one row unless it is also the output matrix; of a mixture of
 * experts, the experts one token uses). */
int64_t vt_model_bytes_per_token(const vt_model *m);

#endif
