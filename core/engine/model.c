/* model.c — hyperparameters from metadata, weights by name, shapes checked. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

static vt_status get_u32_key(const vt_gguf *g, const char *arch, const char *suffix, bool required, int32_t *out,
                             vt_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!vt_gguf_find(g, key)) {
        if (required) return vt_fail(err, VT_ERR_FORMAT, "missing metadata key '%s'", key);
        return VT_OK;
    }
    uint32_t v = 0;
    vt_status st = vt_gguf_get_u32(g, key, &v, err);
    if (st != VT_OK) return st;
    if (v == 0 || v > (1u << 30)) return vt_fail(err, VT_ERR_FORMAT, "metadata key '%s' = %u is out of range", key, v);
    *out = (int32_t)v;
    return VT_OK;
}

static vt_status get_f32_key(const vt_gguf *g, const char *arch, const char *suffix, float *out, vt_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!vt_gguf_find(g, key)) return VT_OK; /* absent: keep the default */
    float v = *out;
    vt_status st = vt_gguf_get_f32(g, key, &v, err);
    if (st != VT_OK) return st;
    if (!isfinite(v)) return vt_fail(err, VT_ERR_FORMAT, "metadata key '%s' is not finite", key);
    *out = v;
    return VT_OK;
}

/* The file's tensors as the graph binds them: each one bound is marked, so
 * that a tensor nothing binds (a feature the file's model has and vt's graph
 * lacks: a bias, RoPE frequency factors) is refused instead of left out. */
typedef struct binder {
    const vt_gguf *g;
    bool *used; /* [vt_gguf_n_tensors] */
} binder;

/* Look up a tensor and check its shape; ne1 = 0 means a 1-D tensor, ne2 the
 * experts of a stack of expert matrices (1 for a plain matrix). */
static vt_status bind_stack(binder *b, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, bool required,
                            const vt_gguf_tensor **out, vt_error *err) {
    const vt_gguf_tensor *t = vt_gguf_find_tensor(b->g, name);
    *out = t;
    if (!t) {
        if (required) return vt_fail(err, VT_ERR_FORMAT, "missing tensor '%s'", name);
        return VT_OK;
    }
    int64_t want1 = ne1 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != ne2 || t->ne[3] != 1) {
        return vt_fail(err, VT_ERR_FORMAT,
                       "tensor '%s' has shape [%lld, %lld, %lld, %lld] but the hyperparameters say [%lld, %lld, %lld]",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                       (long long)ne0, (long long)want1, (long long)ne2);
    }
    bool matrix = ne1 != 0;
    if (matrix ? !vt_dtype_is_weight(t->dtype) : t->dtype != VT_F32) {
        return vt_fail(err, VT_ERR_UNSUPPORTED, "tensor '%s' has dtype %s, which vt does not support for a %s", name,
                       vt_dtype_name(t->dtype), matrix ? "weight matrix" : "norm or bias (must be f32)");
    }
    /* the reader keeps its tensors in one array, in file order */
    const int64_t index = t - vt_gguf_tensor_at(b->g, 0);
    if (index >= 0 && index < vt_gguf_n_tensors(b->g)) b->used[index] = true;
    return VT_OK;
}

static vt_status bind(binder *b, const char *name, int64_t ne0, int64_t ne1, bool required,
                      const vt_gguf_tensor **out, vt_error *err) {
    return bind_stack(b, name, ne0, ne1, 1, required, out, err);
}

static vt_status load_hparams(const vt_gguf *g, vt_hparams *hp, vt_error *err) {
    vt_gguf_str arch;
    if (vt_gguf_get_str(g, "general.architecture", &arch, err) != VT_OK)
        return vt_fail(err, VT_ERR_FORMAT, "missing or non-string metadata key 'general.architecture'");
    if (arch.len >= sizeof hp->arch_name) return vt_fail(err, VT_ERR_UNSUPPORTED, "unsupported architecture");
    memcpy(hp->arch_name, arch.data, arch.len);
    hp->arch_name[arch.len] = '\0';
    if (strcmp(hp->arch_name, "llama") == 0) hp->arch = VT_ARCH_LLAMA;
    else if (strcmp(hp->arch_name, "qwen2") == 0) hp->arch = VT_ARCH_QWEN2;
    else if (strcmp(hp->arch_name, "qwen3") == 0) hp->arch = VT_ARCH_QWEN3;
    else if (strcmp(hp->arch_name, "qwen3moe") == 0) hp->arch = VT_ARCH_QWEN3MOE;
    else
        return vt_fail(err, VT_ERR_UNSUPPORTED,
                       "architecture '%s' is not supported (llama, qwen2, qwen3, qwen3moe are)", hp->arch_name);
    const char *a = hp->arch_name;
    vt_status st;
    if ((st = get_u32_key(g, a, "embedding_length", true, &hp->n_embd, err))) return st;
    if ((st = get_u32_key(g, a, "block_count", true, &hp->n_layer, err))) return st;
    const bool moe = hp->arch == VT_ARCH_QWEN3MOE;
    /* a mixture of experts has no dense feed-forward: the key is informative */
    if ((st = get_u32_key(g, a, "feed_forward_length", !moe, &hp->n_ff, err))) return st;
    if (moe) {
        if ((st = get_u32_key(g, a, "expert_count", true, &hp->n_expert, err))) return st;
        if ((st = get_u32_key(g, a, "expert_used_count", true, &hp->n_expert_used, err))) return st;
        if ((st = get_u32_key(g, a, "expert_feed_forward_length", true, &hp->n_ff_exp, err))) return st;
        if (hp->n_expert < 1 || hp->n_expert > VT_MODEL_MAX_EXPERTS)
            return vt_fail(err, VT_ERR_FORMAT, "expert_count %d must be in 1..%d", hp->n_expert, VT_MODEL_MAX_EXPERTS);
        if (hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert)
            return vt_fail(err, VT_ERR_FORMAT, "expert_used_count %d must be in 1..expert_count (%d)",
                           hp->n_expert_used, hp->n_expert);
        hp->norm_top_k = true; /* qwen3moe renormalizes the chosen experts' probabilities */
    }
    if ((st = get_u32_key(g, a, "attention.head_count", true, &hp->n_head, err))) return st;
    hp->n_head_kv = hp->n_head;
    if ((st = get_u32_key(g, a, "attention.head_count_kv", false, &hp->n_head_kv, err))) return st;
    hp->n_ctx_train = 4096;
    if ((st = get_u32_key(g, a, "context_length", false, &hp->n_ctx_train, err))) return st;
    if (hp->n_embd % hp->n_head)
        return vt_fail(err, VT_ERR_FORMAT, "embedding_length %d is not a multiple of head_count %d", hp->n_embd,
                       hp->n_head);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = get_u32_key(g, a, "attention.key_length", false, &hp->head_dim, err))) return st;
    int32_t value_length = hp->head_dim;
    if ((st = get_u32_key(g, a, "attention.value_length", false, &value_length, err))) return st;
    if (value_length != hp->head_dim)
        return vt_fail(err, VT_ERR_UNSUPPORTED, "attention.value_length %d differs from key_length %d", value_length,
                       hp->head_dim);
    if (hp->n_head % hp->n_head_kv)
        return vt_fail(err, VT_ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d", hp->n_head,
                       hp->n_head_kv);
    hp->n_rot = hp->head_dim;
    if ((st = get_u32_key(g, a, "rope.dimension_count", false, &hp->n_rot, err))) return st;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return vt_fail(err, VT_ERR_FORMAT, "rope.dimension_count %d must be even and <= head dim %d", hp->n_rot,
                       hp->head_dim);
    hp->rope_mode = hp->arch == VT_ARCH_LLAMA ? VT_ROPE_NORM : VT_ROPE_NEOX;
    hp->rope_base = hp->arch == VT_ARCH_LLAMA ? 10000.0f : 1000000.0f;
    if ((st = get_f32_key(g, a, "rope.freq_base", &hp->rope_base, err))) return st;
    hp->rms_eps = hp->arch == VT_ARCH_LLAMA ? 1e-5f : 1e-6f;
    if ((st = get_f32_key(g, a, "attention.layer_norm_rms_epsilon", &hp->rms_eps, err))) return st;
    hp->rope_freq_scale = 1.0f;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    vt_gguf_str scaling;
    if (vt_gguf_get_str(g, key, &scaling, NULL) == VT_OK && !vt_gguf_str_eq(scaling, "none")) {
        if (!vt_gguf_str_eq(scaling, "linear"))
            return vt_fail(err, VT_ERR_UNSUPPORTED, "rope scaling type '%.*s' is not supported (none, linear are)",
                           (int)scaling.len, scaling.data);
        float factor = 1.0f;
        if ((st = get_f32_key(g, a, "rope.scaling.factor", &factor, err))) return st;
        if (!(factor > 0)) return vt_fail(err, VT_ERR_FORMAT, "rope.scaling.factor must be > 0");
        hp->rope_freq_scale = 1.0f / factor;
    }
    if (!(hp->rope_base > 0) || !(hp->rms_eps > 0))
        return vt_fail(err, VT_ERR_FORMAT, "rope.freq_base and layer_norm_rms_epsilon must be > 0");
    return VT_OK;
}

static vt_status bind_weights(vt_model *m, binder *b, vt_error *err) {
    const vt_gguf *g = m->gguf;
    vt_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, D = hp->head_dim, H = hp->n_head, KVH = hp->n_head_kv, F = hp->n_ff;
    if (vt_gguf_n_tensors(g) == 0)
        return vt_fail(err, VT_ERR_FORMAT,
                       "the file has no tensors: a vocabulary-only GGUF cannot run (vt tokenize and vt detokenize "
                       "work on it)");
    const vt_gguf_tensor *emb = vt_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return vt_fail(err, VT_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    hp->n_vocab = (int32_t)emb->ne[1];
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return vt_fail(err, VT_ERR_FORMAT, "token_embd.weight has %lld rows", (long long)emb->ne[1]);
    int64_t V = hp->n_vocab;
    vt_status st;
    if ((st = bind(b, "token_embd.weight", E, V, true, &m->tok_embd, err))) return st;
    if ((st = bind(b, "output_norm.weight", E, 0, true, &m->output_norm, err))) return st;
    if ((st = bind(b, "output.weight", E, V, false, &m->output, err))) return st;
    if (!m->output) m->output = m->tok_embd;
    /* Llama 3.1's RoPE scaling: a factor dividing each pair's frequency */
    if ((st = bind(b, "rope_freqs.weight", hp->n_rot / 2, 0, false, &m->rope_freqs, err))) return st;
    /* Every layer has tensors of its own: a block_count above the file's
     * tensor count is a corrupt header, refused before it sizes anything. */
    if ((int64_t)hp->n_layer > vt_gguf_n_tensors(g))
        return vt_fail(err, VT_ERR_FORMAT, "block_count %d is more than the file's %lld tensors", hp->n_layer,
                       (long long)vt_gguf_n_tensors(g));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return vt_fail(err, VT_ERR_NOMEM, "out of memory for %d layers", hp->n_layer);
    const bool qwen2 = hp->arch == VT_ARCH_QWEN2;
    const bool qwen3 = hp->arch == VT_ARCH_QWEN3 || hp->arch == VT_ARCH_QWEN3MOE;
    const bool moe = hp->n_expert > 0, dense = !moe;
    const int64_t NE = hp->n_expert, FE = hp->n_ff_exp;
    for (int i = 0; i < hp->n_layer; i++) {
        vt_layer_weights *l = &m->layers[i];
        char n[96];
#define BIND(field, suffix, ne0, ne1, req)                                   \
    snprintf(n, sizeof n, "blk.%d.%s", i, suffix);                           \
    if ((st = bind(b, n, ne0, ne1, req, &l->field, err)) != VT_OK) return st
        BIND(attn_norm, "attn_norm.weight", E, 0, true);
        BIND(wq, "attn_q.weight", E, H * D, true);
        BIND(wk, "attn_k.weight", E, KVH * D, true);
        BIND(wv, "attn_v.weight", E, KVH * D, true);
        BIND(wo, "attn_output.weight", H * D, E, true);
        BIND(ffn_norm, "ffn_norm.weight", E, 0, true);
        BIND(ffn_gate, "ffn_gate.weight", E, F, dense);
        BIND(ffn_up, "ffn_up.weight", E, F, dense);
        BIND(ffn_down, "ffn_down.weight", F, E, dense);
        BIND(ffn_gate_inp, "ffn_gate_inp.weight", E, NE, moe);
        /* required of qwen2; any architecture's file may have them (llama.cpp adds those it finds) */
        BIND(bq, "attn_q.bias", H * D, 0, qwen2);
        BIND(bk, "attn_k.bias", KVH * D, 0, qwen2);
        BIND(bv, "attn_v.bias", KVH * D, 0, qwen2);
        BIND(q_norm, "attn_q_norm.weight", D, 0, qwen3);
        BIND(k_norm, "attn_k_norm.weight", D, 0, qwen3);
#undef BIND
#define BIND_EXPERTS(field, suffix, ne0, ne1)                                \
    snprintf(n, sizeof n, "blk.%d.%s", i, suffix);                           \
    if ((st = bind_stack(b, n, ne0, ne1, NE, true, &l->field, err)) != VT_OK) return st
        if (moe) {
            BIND_EXPERTS(ffn_gate_exps, "ffn_gate_exps.weight", E, FE);
            BIND_EXPERTS(ffn_up_exps, "ffn_up_exps.weight", E, FE);
            BIND_EXPERTS(ffn_down_exps, "ffn_down_exps.weight", FE, E);
        }
#undef BIND_EXPERTS
    }
    return VT_OK;
}

vt_status vt_model_load(const char *path, vt_model **out, vt_error *err) {
    *out = NULL;
    vt_model *m = calloc(1, sizeof *m);
    if (!m) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    vt_status st = vt_gguf_open(path, &m->gguf, err);
    if (st != VT_OK) { /* the reader's message already starts with the path */
        vt_model_free(m);
        return st;
    }
    st = load_hparams(m->gguf, &m->hp, err);
    binder b = {m->gguf, calloc((size_t)vt_gguf_n_tensors(m->gguf) + 1, sizeof(bool))};
    if (st == VT_OK && !b.used) st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
    if (st == VT_OK) st = bind_weights(m, &b, err);
    for (int64_t i = 0; st == VT_OK && i < vt_gguf_n_tensors(m->gguf); i++)
        if (!b.used[i])
            st = vt_fail(err, VT_ERR_UNSUPPORTED,
                         "tensor '%s' is not one vt's %s graph reads (the model has a part vt does not run); "
                         "refused rather than computed without it",
                         vt_gguf_tensor_at(m->gguf, i)->name, m->hp.arch_name);
    free(b.used);
    if (st != VT_OK) {
        vt_error_prefix(err, "%s: ", path);
        vt_model_free(m);
        return st;
    }
    for (int64_t i = 0; i < vt_gguf_n_tensors(m->gguf); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(m->gguf, i);
        m->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        m->weight_bytes += (int64_t)t->nbytes;
    }
    vt_error tok_err = {0};
    if (vt_tokenizer_load(m->gguf, &m->tokenizer, &tok_err) != VT_OK) {
        m->tokenizer = NULL;
        snprintf(m->tokenizer_error, sizeof m->tokenizer_error, "%s", tok_err.msg);
    }
    *out = m;
    return VT_OK;
}

void vt_model_free(vt_model *m) {
    if (!m) return;
    if (m->tokenizer) vt_tokenizer_free(m->tokenizer);
    free(m->layers);
    vt_gguf_close(m->gguf);
    free(m);
}

int64_t vt_model_bytes_per_token(const vt_model *m) {
    int64_t total = 0;
    for (int64_t i = 0; i < vt_gguf_n_tensors(m->gguf); i++) total += (int64_t)vt_gguf_tensor_at(m->gguf, i)->nbytes;
    if (m->output != m->tok_embd) /* the embedding is read one row per token, not whole */
        total -= (int64_t)m->tok_embd->nbytes - (int64_t)(m->tok_embd->nbytes / (size_t)m->hp.n_vocab);
    /* a token reads only its experts: n_expert_used of each stack's n_expert matrices */
    for (int il = 0; il < m->hp.n_layer && m->hp.n_expert > 0; il++) {
        const vt_gguf_tensor *stacks[3] = {m->layers[il].ffn_gate_exps, m->layers[il].ffn_up_exps,
                                           m->layers[il].ffn_down_exps};
        for (int k = 0; k < 3; k++)
            if (stacks[k])
                total -= (int64_t)stacks[k]->nbytes / m->hp.n_expert * (m->hp.n_expert - m->hp.n_expert_used);
    }
    return total;
}
