/* cmd_synth.c — `vt synth`: write a random-weight GGUF of a named or given
 * shape (core/synth.c does the writing, streamed tensor by tensor). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "model.h"
#include "vt/vt_dtype.h"
#include "progress.h"
#include "synth.h"

static void help(FILE *f) {
    fprintf(f, "usage: vt synth (--shape NAME | --arch A --n-embd E --n-layer L --n-head H --n-head-kv KV\n"
               "                 [--head-dim D] --n-ff F [--vocab V]\n"
               "                 [--n-expert NE --n-expert-used U --n-ff-exp FE]) [--vocab-from VOCAB.gguf]\n"
               "                [--type T] [--seed S] [--ctx N] [--tied | --untied] -o FILE\n\n"
               "Write a model with random weights, to benchmark shapes without downloading weights. The file\n"
               "loads in llama.cpp too: its required metadata, and a tokenizer with exactly as many tokens as\n"
               "embedding rows (a small built-in vocabulary padded with placeholders, or --vocab-from's).\n\n"
               "      --shape NAME         tiny, qwen3-0.6b, qwen3-1.7b, llama-7b, qwen3-27b; mixtures of experts\n"
               "                           qwen3-30b-a3b (128 experts, 8 used; 18.5 GB at q4_k_m) and\n"
               "                           qwen3moe-bench (1024 wide, 24 layers, 64 experts of 768, 8 used;\n"
               "                           3.8 B parameters, 2.3 GB at q4_k_m). Explicit flags given with it\n"
               "                           override single fields\n"
               "      --arch A             qwen3, qwen2, llama or qwen3moe\n"
               "      --n-embd E, --n-layer L, --n-head H, --n-head-kv KV, --head-dim D (default E/H),\n"
               "      --n-ff F, --vocab V (default 512; >= 259 with the built-in vocabulary)\n"
               "      --n-expert NE, --n-expert-used U (1..NE), --n-ff-exp FE\n"
               "                           qwen3moe (required with it): experts per layer, experts per token,\n"
               "                           an expert's FFN width (--n-ff is then optional metadata, default\n"
               "                           FE x U)\n"
               "      --vocab-from FILE    copy the tokenizer of this GGUF (the vocabulary size follows it)\n"
               "      --type T             f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k (default q4_k_m).\n"
               "                           q4_k_m/q5_k_m are llama-quantize's mixes: Q6_K for the output matrix\n"
               "                           and for attn_v/ffn_down of the first eighth, last eighth and every\n"
               "                           third layer between (ffn_down_exps for qwen3moe); Q4_K (Q5_K)\n"
               "                           elsewhere. Norms and the qwen3moe router stay f32. A matrix whose\n"
               "                           rows do not fit the type's blocks (256 values for K-quants, 32 for\n"
               "                           q8_0/q4_0) is written Q8_0 when they fit 32, else F16: the summary\n"
               "                           line counts the matrices written of each type.\n"
               "      --seed S             random seed (default 1)\n"
               "      --ctx N              context_length metadata (default: the shape's, else 4096)\n"
               "      --random-blocks      quantized matrices as random blocks drawn directly (uniform codes, fixed\n"
               "                           scales, |w| <~ 0.06): ~100x faster, for benchmarks at the 27B scale\n"
               "      --tied, --untied     share the embedding as the output matrix or not (default: the\n"
               "                           shape's; qwen3 tied, others untied)\n"
               "  -o, --output FILE        where to write (an existing file only if empty or written by vt synth)\n");
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
    /* what vt loads: a file it could not run is refused before it is written */
    {"--n-expert", offsetof(vt_synth_params, n_expert), 1, VT_MODEL_MAX_EXPERTS},
    {"--n-expert-used", offsetof(vt_synth_params, n_expert_used), 1, VT_MODEL_MAX_EXPERTS},
    {"--n-ff-exp", offsetof(vt_synth_params, n_ff_exp), 1, 1 << 22},
};

#define N_INT_FLAGS (sizeof int_flags / sizeof *int_flags)

/* What `vt synth` was asked. */
typedef struct synth_opts {
    const char *shape, *out, *arch, *type, *vocab_from;
    int64_t seed;
    int tied; /* -1 = the shape's / the arch's default */
    bool random_blocks;
    int32_t given[N_INT_FLAGS];
    bool has[N_INT_FLAGS];
    bool help;
    vt_synth_params params; /* settled by validate: the shape with the explicit flags over it */
} synth_opts;

static vt_arg_result synth_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    synth_opts *o = opts;
    const char *a = argv[*i];
    for (size_t k = 0; k < N_INT_FLAGS; k++) {
        if (strcmp(a, int_flags[k].flag) != 0) continue;
        int64_t x;
        if (vt_cli_int_arg(argc, argv, i, a, int_flags[k].lo, int_flags[k].hi, &x, err) != VT_ARG_TAKEN)
            return VT_ARG_ERROR;
        o->given[k] = (int32_t)x;
        o->has[k] = true;
        return VT_ARG_TAKEN;
    }
    const char **text_flag = strcmp(a, "--shape") == 0                             ? &o->shape
                             : strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0   ? &o->out
                             : strcmp(a, "--arch") == 0                             ? &o->arch
                             : strcmp(a, "--type") == 0                             ? &o->type
                             : strcmp(a, "--vocab-from") == 0                       ? &o->vocab_from
                                                                                    : NULL;
    if (text_flag) return vt_cli_text_arg(argc, argv, i, text_flag, err);
    if (strcmp(a, "--seed") == 0) return vt_cli_int_arg(argc, argv, i, "--seed", 0, INT64_MAX, &o->seed, err);
    if (strcmp(a, "--random-blocks") == 0) o->random_blocks = true;
    else if (strcmp(a, "--tied") == 0 || strcmp(a, "--untied") == 0) o->tied = strcmp(a, "--tied") == 0;
    else return VT_ARG_NOT_MINE;
    return VT_ARG_TAKEN;
}

static vt_status parse_synth(int argc, char **argv, synth_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {.name = "synth", .see_help = true, .own = synth_arg, .help = help};
    *o = (synth_opts){.type = "q4_k_m", .seed = 1, .tied = -1};
    return vt_cli_parse(&parser, NULL, o, &o->help, argc, argv, err);
}

/* The output and a complete shape are required; the result is o->params. */
static vt_status validate_synth(synth_opts *o, vt_error *err) {
    vt_synth_params *p = &o->params;
    memset(p, 0, sizeof *p);
    if (!o->out) return vt_fail(err, VT_ERR_INVALID, "synth: give -o FILE");
    if (o->shape) {
        if (vt_synth_shape(p, o->shape, err) != VT_OK) return err->code;
    } else {
        /* an explicit shape needs the sizes that have no sensible default */
        static const char *const required[] = {"--n-embd", "--n-layer", "--n-head", "--n-head-kv", "--n-ff"};
        if (!o->arch)
            return vt_fail(err, VT_ERR_INVALID,
                           "synth: give --shape NAME, or --arch and the sizes (see vt synth --help)");
        /* a mixture of experts has no dense FFN: --n-ff is optional metadata there */
        size_t n_required = sizeof required / sizeof *required - (strcmp(o->arch, "qwen3moe") == 0);
        for (size_t r = 0; r < n_required; r++)
            for (size_t k = 0; k < N_INT_FLAGS; k++)
                if (strcmp(int_flags[k].flag, required[r]) == 0 && !o->has[k])
                    return vt_fail(err, VT_ERR_INVALID, "synth: %s is required without --shape", required[r]);
        static const char *const required_moe[] = {"--n-expert", "--n-expert-used", "--n-ff-exp"};
        if (strcmp(o->arch, "qwen3moe") == 0)
            for (size_t r = 0; r < sizeof required_moe / sizeof *required_moe; r++)
                for (size_t k = 0; k < N_INT_FLAGS; k++)
                    if (strcmp(int_flags[k].flag, required_moe[r]) == 0 && !o->has[k])
                        return vt_fail(err, VT_ERR_INVALID, "synth: %s is required with --arch qwen3moe",
                                       required_moe[r]);
        p->n_vocab = 512;
        p->n_ctx = 4096;
        p->tied_output = strcmp(o->arch, "qwen3") == 0;
    }
    if (o->arch) {
        if (strcmp(o->arch, "qwen3") != 0 && strcmp(o->arch, "qwen2") != 0 && strcmp(o->arch, "llama") != 0 &&
            strcmp(o->arch, "qwen3moe") != 0)
            return vt_fail(err, VT_ERR_INVALID, "synth: --arch %s: expected qwen3, qwen2, llama or qwen3moe",
                           o->arch);
        p->arch = o->arch;
    }
    for (size_t k = 0; k < N_INT_FLAGS; k++)
        if (o->has[k]) memcpy((char *)p + int_flags[k].offset, &o->given[k], sizeof o->given[k]);
    /* the expert flags belong to a mixture of experts; elsewhere they would be silently ignored */
    bool moe = strcmp(p->arch, "qwen3moe") == 0;
    for (size_t k = 0; k < N_INT_FLAGS; k++)
        if (o->has[k] && !moe &&
            (strncmp(int_flags[k].flag, "--n-expert", 10) == 0 || strcmp(int_flags[k].flag, "--n-ff-exp") == 0))
            return vt_fail(err, VT_ERR_INVALID, "synth: %s needs --arch qwen3moe", int_flags[k].flag);
    if (moe && p->n_expert_used > p->n_expert) {
        bool used_given = false;
        for (size_t k = 0; k < N_INT_FLAGS; k++)
            used_given |= o->has[k] && strcmp(int_flags[k].flag, "--n-expert-used") == 0;
        return vt_fail(err, VT_ERR_INVALID, "synth: --n-expert-used %d%s must be in 1..--n-expert (%d)",
                       p->n_expert_used, used_given ? "" : " (the shape's: give --n-expert-used too)", p->n_expert);
    }
    if (o->vocab_from) {
        for (size_t k = 0; k < N_INT_FLAGS; k++)
            if (o->has[k] && strcmp(int_flags[k].flag, "--vocab") == 0)
                return vt_fail(err, VT_ERR_INVALID,
                               "synth: --vocab and --vocab-from: the vocabulary size follows --vocab-from's file; give "
                               "one of them");
        if (vt_cli_given_file(o->vocab_from, err) != VT_OK) return vt_error_prefix(err, "synth: --vocab-from ");
    }
    if (o->tied >= 0) p->tied_output = o->tied == 1;
    p->type = o->type;
    p->seed = (uint64_t)o->seed;
    p->vocab_from = o->vocab_from;
    p->random_blocks = o->random_blocks;
    /* a folder that is not there or not writable is the argument's fault
     * (exit 2), said before minutes of generating */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", o->out);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    else snprintf(dir, sizeof dir, ".");
    if (access(dir, W_OK | X_OK) != 0)
        return vt_fail(err, VT_ERR_INVALID, "synth: -o %s: cannot write in %s: %s", o->out, dir, strerror(errno));
    struct stat st;
    if (stat(o->out, &st) != 0) return VT_OK; /* a new file */
    if (S_ISDIR(st.st_mode))
        return vt_fail(err, VT_ERR_INVALID, "synth: -o %s is a folder: name the file to write", o->out);
    /* a device or a pipe: the model would be written to it whole, then fail the check that it loads */
    if (!S_ISREG(st.st_mode))
        return vt_fail(err, VT_ERR_INVALID, "synth: -o %s is not a regular file: name the file to write", o->out);
    /* an empty file, or a model synth wrote before, is replaced; anything
     * else, a downloaded model above all, is not vt's to overwrite */
    if (st.st_size == 0) return VT_OK;
    if (access(o->out, R_OK) != 0)
        return vt_fail(err, VT_ERR_INVALID, "synth: -o %s exists and cannot be read to check what it is: %s", o->out,
                       strerror(errno));
    if (!vt_synth_wrote(o->out))
        return vt_fail(err, VT_ERR_INVALID,
                       "synth: -o %s exists and is not a model vt synth wrote: remove it or name another", o->out);
    return VT_OK;
}

/* Write the file, then read it back. */
static vt_status run_synth(const synth_opts *o, vt_error *err) {
    vt_synth_params p = o->params;
    vt_progress bar;
    vt_progress_begin(&bar, "synth", 1);
    p.progress = on_progress;
    p.progress_user = &bar;
    vt_status st = vt_synth_write(&p, o->out, err);
    vt_progress_end(&bar);
    if (st != VT_OK) return st;

    /* Read it back: the summary shows what a loader sees, and a file vt
     * cannot load is an error here rather than at the first benchmark. */
    vt_model *m = NULL;
    if (vt_model_load(o->out, &m, err) != VT_OK)
        return vt_error_prefix(err, "synth: wrote %s but it does not load: ", o->out);
    const vt_hparams *hp = &m->hp;
    char experts[96] = "";
    if (hp->n_expert > 0)
        snprintf(experts, sizeof experts, "%d experts (%d used) of %d, ", hp->n_expert, hp->n_expert_used,
                 hp->n_ff_exp);
    /* the matrices' dtypes as written: rows that do not fit the mix's
     * blocks were written in another (see --help), which shows here */
    int64_t count[VT_DTYPE_COUNT] = {0};
    for (int64_t i = 0; i < vt_gguf_n_tensors(m->gguf); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(m->gguf, i);
        if (t->ndim >= 2 && t->dtype >= 0 && t->dtype < VT_DTYPE_COUNT) count[t->dtype]++;
    }
    char matrices[256] = "";
    for (int d = 0, n = 0; d < VT_DTYPE_COUNT; d++)
        if (count[d] > 0 && (size_t)n < sizeof matrices)
            n += snprintf(matrices + n, sizeof matrices - (size_t)n, "%s%lld %s", n ? ", " : "", (long long)count[d],
                          vt_dtype_name(d));
    fprintf(stderr,
            "vt: wrote %s: %s, %d layers, n_embd %d, %d heads (%d kv) of %d, n_ff %d, %svocab %d, %s (matrices: %s), "
            "%.2f M params, %.2f MiB of weights\n",
            o->out, hp->arch_name, hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff, experts,
            hp->n_vocab, o->type, matrices, (double)m->n_params * 1e-6, (double)m->weight_bytes / (1024.0 * 1024.0));
    vt_model_free(m);
    return VT_OK;
}

int vt_cmd_synth(int argc, char **argv) {
    vt_error err = {0};
    synth_opts o;
    vt_status st = parse_synth(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_synth(&o, &err);
    if (st == VT_OK) st = run_synth(&o, &err);
    return vt_cli_exit(st, &err);
}
