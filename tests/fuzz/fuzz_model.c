/* fuzz_model.c — libFuzzer target for loading a model from a hostile GGUF:
 * architecture keys, hyperparameters against tensor shapes and dtypes, the
 * tokenizer that comes with it.
 *
 * The input is a whole GGUF file, written to a temporary file because
 * vt_model_load takes a path (as the CLI does). Seeds are tiny llama, qwen2,
 * qwen3 and qwen3moe models from make_fuzz_seeds. fuzz_gguf covers the reader itself;
 * this target's mutations that survive the reader reach model.c.
 *
 * What must hold: a refused file says why and names it; an accepted model is
 * what the graph builder trusts — every hyperparameter positive, n_head a
 * multiple of n_head_kv, every required weight bound with exactly the shape
 * the hyperparameters give, the vocabulary the embedding's rows — and its
 * tokenizer (if it loaded) tokenizes into its own vocabulary. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what) {
    fprintf(stderr, "fuzz_model: %s\n", what);
    abort();
}

#define CHECK(cond)                                  \
    do {                                             \
        if (!(cond)) die("invariant broken: " #cond); \
    } while (0)

static char temp_path[64];

static void remove_temp_file(void) { unlink(temp_path); }

static const char *model_path(void) {
    char *path = temp_path;
    if (!path[0]) {
        snprintf(path, sizeof temp_path, "/tmp/vt-fuzz-model-XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0) die("mkstemp");
        close(fd);
        atexit(remove_temp_file); /* libFuzzer ends with exit() when its time is up */
    }
    return path;
}

static void check_shape(const vt_gguf_tensor *t, int64_t ne0, int64_t ne1) {
    CHECK(t != NULL);
    CHECK(t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == 1 && t->ne[3] == 1);
}

/* A 3-D expert stack {ne0, ne1, NE}. */
static void check_stack(const vt_gguf_tensor *t, int64_t ne0, int64_t ne1, int64_t ne2) {
    CHECK(t != NULL);
    CHECK(t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == 1);
}

static void check_model(const vt_model *m) {
    const vt_hparams *hp = &m->hp;
    CHECK(hp->n_embd > 0 && hp->n_layer > 0 && hp->n_head > 0 && hp->n_head_kv > 0 && hp->head_dim > 0);
    CHECK((hp->n_ff > 0 || hp->n_expert > 0) && hp->n_vocab > 0 && hp->n_ctx_train > 0);
    if (hp->n_expert > 0) CHECK(hp->n_expert_used >= 1 && hp->n_expert_used <= hp->n_expert && hp->n_ff_exp > 0);
    CHECK(hp->n_head % hp->n_head_kv == 0);
    CHECK(hp->n_rot > 0 && hp->n_rot <= hp->head_dim && hp->n_rot % 2 == 0);
    CHECK(hp->rope_base > 0 && hp->rms_eps > 0 && hp->rope_freq_scale > 0);
    int64_t E = hp->n_embd, H = hp->n_head, KVH = hp->n_head_kv, D = hp->head_dim, F = hp->n_ff, V = hp->n_vocab;
    check_shape(m->tok_embd, E, V);
    check_shape(m->output, E, V);
    check_shape(m->output_norm, E, 1);
    for (int32_t i = 0; i < hp->n_layer; i++) {
        const vt_layer_weights *l = &m->layers[i];
        check_shape(l->attn_norm, E, 1);
        check_shape(l->wq, E, H * D);
        check_shape(l->wk, E, KVH * D);
        check_shape(l->wv, E, KVH * D);
        check_shape(l->wo, H * D, E);
        check_shape(l->ffn_norm, E, 1);
        if (hp->n_expert > 0) { /* a mixture of experts: the router and the experts' stacks */
            const int64_t NE = hp->n_expert, FE = hp->n_ff_exp;
            check_shape(l->ffn_gate_inp, E, NE);
            check_stack(l->ffn_gate_exps, E, FE, NE);
            check_stack(l->ffn_up_exps, E, FE, NE);
            check_stack(l->ffn_down_exps, FE, E, NE);
        } else {
            check_shape(l->ffn_gate, E, F);
            check_shape(l->ffn_up, E, F);
            check_shape(l->ffn_down, F, E);
        }
        if (hp->arch == VT_ARCH_QWEN2) check_shape(l->bq, H * D, 1);
        if (hp->arch == VT_ARCH_QWEN3) check_shape(l->q_norm, D, 1);
    }
    CHECK(vt_model_bytes_per_token(m) > 0);
    CHECK(m->weight_bytes > 0);
    if (m->tokenizer) {
        int32_t *ids = NULL;
        size_t n = 0;
        vt_error err = {0};
        static const char text[] = "Hello world <s> \xe4\xb8\xad 12";
        if (vt_tokenize(m->tokenizer, text, sizeof text - 1, true, true, &ids, &n, &err) == VT_OK) {
            for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < vt_tokenizer_n_vocab(m->tokenizer));
            free(ids);
        } else {
            CHECK(err.msg[0] != '\0');
        }
    } else {
        CHECK(m->tokenizer_error[0] != '\0');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = model_path();
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write the temporary model");
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    vt_model *m = NULL;
    vt_error err = {0};
    if (vt_model_load(path, &m, &err) != VT_OK) {
        CHECK(m == NULL && err.msg[0] != '\0' && strstr(err.msg, path) != NULL);
        return 0;
    }
    check_model(m);
    vt_model_free(m);
    return 0;
}
