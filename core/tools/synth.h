/* synth.h — random-weight models of any shape and weight type, written
 * through the GGUF writer (test fixtures, `vt synth`, benchmarks).
 *
 * Streams tensor by tensor: memory use is one tensor's f32 copy plus its
 * quantized form, whatever the model size. The files load in llama.cpp too:
 * the metadata keys it requires and a tokenizer with exactly n_vocab tokens
 * (a built-in SentencePiece vocabulary padded with placeholder tokens, or the
 * one of vocab_from). */
#ifndef VT_CORE_SYNTH_H
#define VT_CORE_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

typedef struct vt_synth_params {
    const char *arch;  /* "llama", "qwen2", "qwen3", "qwen3moe" */
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;  /* 0 = n_embd / n_head (qwen3 writes attention.key_length) */
    int32_t n_ff;      /* qwen3moe: feed_forward_length metadata only (no dense FFN tensors);
                        * 0 there = n_ff_exp * n_expert_used */
    int32_t n_expert;      /* qwen3moe: experts per layer */
    int32_t n_expert_used; /* qwen3moe: experts per token, 1..n_expert */
    int32_t n_ff_exp;      /* qwen3moe: an expert's feed-forward width */
    int32_t n_vocab;   /* >= 259 with the built-in vocabulary */
    int32_t n_ctx;     /* context_length metadata */
    bool tied_output;  /* no output.weight: the embedding is reused */
    /* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k". Norms
     * and biases stay f32. Mixes follow llama-quantize (documented in synth.c). */
    const char *type;
    uint64_t seed;
    float rope_base;   /* 0 = arch default (llama 1e4, qwen 1e6) */
    float rms_eps;     /* 0 = arch default (llama 1e-5, qwen 1e-6) */
    const char *vocab_from; /* GGUF whose tokenizer.* keys are copied (n_vocab then follows it); NULL = built-in */
    void (*progress)(void *user, int64_t done_bytes, int64_t total_bytes);
    void *progress_user;
    int32_t n_threads; /* generation/quantization threads; 0 = every CPU vt may use (same file either way) */
    /* Quantized matrices as random blocks drawn directly (uniform codes, fixed
     * block scales giving values within about +-0.06) instead of normal
     * samples run through the quantizer: ~100x faster, for benchmarks at the
     * 27B scale where only shapes, types and bytes matter. Not llama-quantize
     * output; float tensors, norms and biases are unaffected. */
    bool random_blocks;
} vt_synth_params;

/* Fill p with a named shape: "tiny" (qwen3, 256 wide, 2 layers), "qwen3-0.6b",
 * "qwen3-1.7b", "llama-7b", "qwen3-27b", "qwen3-30b-a3b" and "qwen3moe-bench"
 * (qwen3moe). Returns VT_ERR_INVALID for an unknown name. */
vt_status vt_synth_shape(vt_synth_params *p, const char *shape, vt_error *err);

vt_status vt_synth_write(const vt_synth_params *p, const char *path, vt_error *err);

/* Whether the GGUF at path is one vt synth wrote (its general.name says
 * so): the only existing model `vt synth -o` replaces. */
bool vt_synth_wrote(const char *path);

#endif
