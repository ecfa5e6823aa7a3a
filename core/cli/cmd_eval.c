/* cmd_eval.c — `vt eval`: run tokens through prefill (or one at a time
 * through decode) and print argmax per position and the last top-K as JSON. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "quant.h"
#include "sampler.h"

static void help(FILE *f) {
    fprintf(f, "usage: vt eval -m MODEL (--tokens 1,2,3 | -p TEXT | -f FILE) [--top-k K] [--decode] [--json] [options]\n\n"
               "Evaluate the tokens in one prefill (or, with --decode, one token per decode step) and print\n"
               "{\"tokens\", \"argmax\" (per position), \"top\" (last position's K best [id, logit]), \"backend\",\n"
               "\"kv_cache_dtype\", \"path\" (prefill or decode)} as one JSON object.\n\n"
               "      --tokens IDS         comma-separated token ids\n"
               "  -p, --prompt TEXT        text, tokenized with the model's vocabulary (BOS as its metadata says);\n"
               "                           - reads stdin\n"
               "  -f, --file FILE          the file's text\n"
               "      --top-k K            pairs in \"top\" (default 20)\n"
               "      --decode             feed the tokens through the decode path\n"
               "      --json               accepted, changes nothing: the output is always JSON\n"
               "      --full-last          also print \"last_logits\": every logit of the last position\n");
    vt_cli_common_help(f);
}

typedef struct scored {
    int32_t id;
    float logit;
} scored;

static int by_logit_desc(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* What `vt eval` was asked. */
typedef struct eval_opts {
    vt_cli_common c;
    vt_cli_prompt prompt;
    int64_t top_k; /* pairs in "top": the report's size, not the sampling filter */
    bool decode, full_last;
    bool help;
} eval_opts;

static vt_arg_result eval_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    eval_opts *o = opts;
    const char *a = argv[*i];
    if (strcmp(a, "--top-k") == 0) return vt_cli_int_arg(argc, argv, i, "--top-k", 1, 1 << 24, &o->top_k, err);
    if (strcmp(a, "--decode") == 0) o->decode = true;
    else if (strcmp(a, "--full-last") == 0) o->full_last = true;
    else if (strcmp(a, "--json") == 0) { /* the only output format */ }
    else return vt_cli_prompt_arg(argc, argv, i, &o->prompt, err);
    return VT_ARG_TAKEN;
}

static vt_status parse_eval(int argc, char **argv, eval_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {.name = "eval", .see_help = true, .own = eval_arg, .help = help};
    *o = (eval_opts){.top_k = 20};
    return vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
}

static vt_status validate_eval(const eval_opts *o, vt_error *err) {
    if (!o->prompt.text && !o->prompt.file && !o->prompt.ids && !o->c.dry_run)
        return vt_fail(err, VT_ERR_INVALID, "eval: give --tokens IDS, -p TEXT or -f FILE");
    return vt_cli_require_model(o->c.model_path, err);
}

/* Load, evaluate the tokens, print the JSON object. */
static vt_status run_eval(const eval_opts *o, vt_error *err) {
    vt_model *model = NULL;
    vt_engine *e = NULL;
    int32_t *tokens = NULL;
    size_t n = 0;
    scored *top = NULL;
    vt_status st = vt_cli_open_engine(&o->c, true, &model, &e, err);
    if (st == VT_OK && o->c.dry_run) goto done;
    if (st == VT_OK) st = vt_cli_prompt_tokens_for(&o->c, model, &o->prompt, &tokens, &n, err);
    if (st == VT_OK && n == 0) st = vt_fail(err, VT_ERR_INVALID, "zero tokens to evaluate");
    if (st == VT_OK && (int64_t)n > vt_engine_ctx_size(e))
        st = vt_fail(err, VT_ERR_CONTEXT_FULL, "%zu tokens do not fit the KV cache of %lld tokens (-c)", n,
                     (long long)vt_engine_ctx_size(e));
    if (st == VT_OK) st = vt_engine_eval(e, tokens, (int64_t)n, o->decode, err);
    if (st != VT_OK) goto done;
    const int32_t V = model->hp.n_vocab;
    printf("{\"tokens\": [");
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", tokens[i]);
    printf("], \"argmax\": [");
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", vt_argmax(vt_engine_logits(e, (int64_t)i), V));
    const float *last = vt_engine_logits(e, (int64_t)n - 1);
    top = malloc((size_t)V * sizeof *top);
    if (!top) {
        st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < V; i++) top[i] = (scored){i, last[i]};
    qsort(top, (size_t)V, sizeof *top, by_logit_desc);
    const int64_t top_k = o->top_k < V ? o->top_k : V;
    printf("], \"top\": [");
    for (int64_t i = 0; i < top_k; i++) printf("%s[%d, %.9g]", i ? ", " : "", top[i].id, (double)top[i].logit);
    printf("]");
    if (o->full_last) {
        printf(", \"last_logits\": [");
        for (int32_t i = 0; i < V; i++) printf("%s%.9g", i ? ", " : "", (double)last[i]);
        printf("]");
    }
    /* auto places node by node: its preferred backend only takes the classes it never measured */
    printf(", \"backend\": \"%s\", \"kv_cache_dtype\": \"%s\", \"path\": \"%s\"}\n",
           vt_engine_costs(e) ? "auto" : vt_registry_at(vt_engine_registry(e), vt_engine_preferred(e))->name,
           vt_dtype_name(vt_engine_kv_dtype(e)), o->decode ? "decode" : "prefill");
done:
    free(top);
    free(tokens);
    vt_engine_free(e);
    vt_model_free(model);
    return st;
}

int vt_cmd_eval(int argc, char **argv) {
    vt_error err = {0};
    eval_opts o;
    vt_status st = parse_eval(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_eval(&o, &err);
    if (st == VT_OK) st = run_eval(&o, &err);
    return vt_cli_exit(st, &err);
}
