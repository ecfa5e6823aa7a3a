/* cmd_synth.c — `vt synth`: write a random-weight GGUF of a named or given
 * shape (core/synth.c does the writing, streamed tensor by tensor). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "progress.h"
#include "synth.h"

static void help(void) {
    printf("usage: vt synth (--shape NAME | --arch A --n-embd E --n-layer L --n-head H --n-head-kv KV\n"
           "                 [--head-dim D] --n-ff F [--vocab V]) [--vocab-from VOCAB.gguf]\n"
           "                [--type T] [--seed S] [--ctx N] [--tied | --untied] -o FILE\n\n"
           "Write a model with random weights, to benchmark shapes without downloading weights. The file\n"
           "loads in llama.cpp too: its required metadata, and a tokenizer with exactly as many tokens as\n"
           "embedding rows (a small built-in vocabulary padded with placeholders, or --vocab-from's).\n\n"
           "      --shape NAME         tiny, qwen3-0.6b, qwen3-1.7b, llama-7b, qwen3-27b (explicit flags\n"
           "                           given with it override single fields)\n"
           "      --arch A             qwen3, qwen2 or llama\n"
           "      --n-embd E, --n-layer L, --n-head H, --n-head-kv KV, --head-dim D (default E/H),\n"
           "      --n-ff F, --vocab V (default 512; >= 259 with the built-in vocabulary)\n"
           "      --vocab-from FILE    copy the tokenizer of this GGUF (the vocabulary size follows it)\n"
           "      --type T             f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k (default q4_k_m).\n"
           "                           q4_k_m/q5_k_m are llama-quantize's mixes: Q6_K for the output matrix\n"
           "                           and for attn_v/ffn_down of the first eighth, last eighth and every\n"
           "                           third layer between; Q4_K (Q5_K) elsewhere. Norms stay f32.\n"
           "      --seed S             random seed (default 1)\n"
           "      --ctx N              context_length metadata (default: the shape's, else 4096)\n"
           "      --random-blocks      quantized matrices as random blocks drawn directly (uniform codes, fixed\n"
           "                           scales, |w| <~ 0.06): ~100x faster, for benchmarks at the 27B scale\n"
           "      --tied, --untied     share the embedding as the output matrix or not (default: the\n"
           "                           shape's; qwen3 tied, others untied)\n"
           "  -o, --output FILE        where to write\n");
}

static void on_progress(void *user, int64_t done, int64_t total) {
    vt_progress *bar = user;
    bar->total = (double)total;
    vt_progress_set(bar, (double)done);
}

/* Integer flags that set one field of vt_synth_params. */
typedef struct int_flag {
    const char *flag;
    size_t offset;
    int64_t lo, hi;
} int_flag;

static const int_flag int_flags[] = {
    {"--n-embd", offsetof(vt_synth_params, n_embd), 2, 1 << 20},
    {"--n-layer", offsetof(vt_synth_params, n_layer), 1, 100000},
    {"--n-head", offsetof(vt_synth_params, n_head), 1, 1 << 16},
    {"--n-head-kv", offsetof(vt_synth_params, n_head_kv), 1, 1 << 16},
    {"--head-dim", offsetof(vt_synth_params, head_dim), 2, 1 << 16},
    {"--n-ff", offsetof(vt_synth_params, n_ff), 1, 1 << 22},
    {"--vocab", offsetof(vt_synth_params, n_vocab), 1, 1 << 24},
    {"--ctx", offsetof(vt_synth_params, n_ctx), 1, 1 << 24},
};

int vt_cmd_synth(int argc, char **argv) {
    vt_error err = {0};
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    const char *shape = NULL, *out = NULL, *arch = NULL, *type = "q4_k_m", *vocab_from = NULL;
    int64_t seed = 1;
    int tied = -1; /* -1 = the shape's / the arch's default */
    int32_t given[sizeof int_flags / sizeof *int_flags];
    bool has[sizeof int_flags / sizeof *int_flags] = {false};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t k = 0;
        for (; k < sizeof int_flags / sizeof *int_flags; k++)
            if (strcmp(a, int_flags[k].flag) == 0) break;
        if (k < sizeof int_flags / sizeof *int_flags) {
            const char *v = vt_cli_value(argc, argv, &i, &err);
            int64_t x;
            if (!v || vt_cli_int(a, v, int_flags[k].lo, int_flags[k].hi, &x, &err) != VT_OK) return vt_cli_error(&err);
            given[k] = (int32_t)x;
            has[k] = true;
            continue;
        }
        const char **text_flag = strcmp(a, "--shape") == 0                             ? &shape
                                 : strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0   ? &out
                                 : strcmp(a, "--arch") == 0                             ? &arch
                                 : strcmp(a, "--type") == 0                             ? &type
                                 : strcmp(a, "--vocab-from") == 0                       ? &vocab_from
                                                                                        : NULL;
        if (text_flag) {
            if (!(*text_flag = vt_cli_value(argc, argv, &i, &err))) return vt_cli_error(&err);
        } else if (strcmp(a, "--seed") == 0) {
            const char *v = vt_cli_value(argc, argv, &i, &err);
            if (!v || vt_cli_int("--seed", v, 0, INT64_MAX, &seed, &err) != VT_OK) return vt_cli_error(&err);
        } else if (strcmp(a, "--random-blocks") == 0) {
            p.random_blocks = true;
        } else if (strcmp(a, "--tied") == 0 || strcmp(a, "--untied") == 0) {
            tied = strcmp(a, "--tied") == 0;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            help();
            return 0;
        } else {
            vt_fail(&err, VT_ERR_INVALID, "synth: unknown option '%s' (see vt synth --help)", a);
            return vt_cli_error(&err);
        }
    }
    if (!out) {
        vt_fail(&err, VT_ERR_INVALID, "synth: give -o FILE");
        return vt_cli_error(&err);
    }
    if (shape) {
        if (vt_synth_shape(&p, shape, &err) != VT_OK) return vt_cli_error(&err);
    } else {
        /* an explicit shape needs the sizes that have no sensible default */
        static const char *const required[] = {"--n-embd", "--n-layer", "--n-head", "--n-head-kv", "--n-ff"};
        if (!arch) {
            vt_fail(&err, VT_ERR_INVALID, "synth: give --shape NAME, or --arch and the sizes (see vt synth --help)");
            return vt_cli_error(&err);
        }
        for (size_t r = 0; r < sizeof required / sizeof *required; r++)
            for (size_t k = 0; k < sizeof int_flags / sizeof *int_flags; k++)
                if (strcmp(int_flags[k].flag, required[r]) == 0 && !has[k]) {
                    vt_fail(&err, VT_ERR_INVALID, "synth: %s is required without --shape", required[r]);
                    return vt_cli_error(&err);
                }
        p.n_vocab = 512;
        p.n_ctx = 4096;
        p.tied_output = strcmp(arch, "qwen3") == 0;
    }
    if (arch) {
        if (strcmp(arch, "qwen3") != 0 && strcmp(arch, "qwen2") != 0 && strcmp(arch, "llama") != 0) {
            vt_fail(&err, VT_ERR_INVALID, "synth: --arch %s: expected qwen3, qwen2 or llama", arch);
            return vt_cli_error(&err);
        }
        p.arch = arch;
    }
    for (size_t k = 0; k < sizeof int_flags / sizeof *int_flags; k++)
        if (has[k]) memcpy((char *)&p + int_flags[k].offset, &given[k], sizeof given[k]);
    if (tied >= 0) p.tied_output = tied == 1;
    p.type = type;
    p.seed = (uint64_t)seed;
    p.vocab_from = vocab_from;

    vt_progress bar;
    vt_progress_begin(&bar, "synth", 1);
    p.progress = on_progress;
    p.progress_user = &bar;
    vt_status st = vt_synth_write(&p, out, &err);
    vt_progress_end(&bar);
    if (st != VT_OK) return vt_cli_error(&err);

    /* Read it back: the summary shows what a loader sees, and a file vt
     * cannot load is an error here rather than at the first benchmark. */
    vt_model *m = NULL;
    if (vt_model_load(out, &m, &err) != VT_OK) {
        vt_error_prefix(&err, "synth: wrote %s but it does not load: ", out);
        return vt_cli_error(&err);
    }
    const vt_hparams *hp = &m->hp;
    fprintf(stderr,
            "vt: wrote %s: %s, %d layers, n_embd %d, %d heads (%d kv) of %d, n_ff %d, vocab %d, %s, %.2f M params, "
            "%.2f MiB of weights\n",
            out, hp->arch_name, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff,
            hp->n_vocab, type, (double)m->n_params * 1e-6, (double)m->weight_bytes / (1024.0 * 1024.0));
    vt_model_free(m);
    return 0;
}
