/* cmd_eval.c — `vt eval`: run tokens through prefill (or one at a time
 * through decode) and print argmax per position and the last top-K as JSON. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "quant.h"
#include "sampler.h"

static void help(void) {
    printf("usage: vt eval -m MODEL (--tokens 1,2,3 | -p TEXT) [--top-k K] [--decode] --json [options]\n\n"
           "Evaluate the tokens in one prefill (or, with --decode, one token per decode step) and print\n"
           "{\"tokens\", \"argmax\" (per position), \"top\" (last position's K best [id, logit]), \"backend\",\n"
           "\"kv_cache_dtype\"} as one JSON object.\n\n"
           "      --tokens IDS         comma-separated token ids\n"
           "  -p, --prompt TEXT        text, tokenized with the model's vocabulary (BOS as its metadata says)\n"
           "      --top-k K            pairs in \"top\" (default 20)\n"
           "      --decode             feed the tokens through the decode path\n"
           "      --json               JSON output (the only format)\n"
           "      --full-last          also print \"last_logits\": every logit of the last position\n");
    vt_cli_common_help(stdout);
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

int vt_cmd_eval(int argc, char **argv) {
    vt_error err = {0};
    vt_cli_common c;
    if (vt_cli_init(&c, argc, argv, &err) != VT_OK) return vt_cli_error(&err);
    const char *prompt = NULL, *ids = NULL;
    int64_t top_k = 20;
    bool decode = false, full_last = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--top-k") == 0) { /* eval's --top-k is the report size, not sampling */
            const char *v = vt_cli_value(argc, argv, &i, &err);
            if (!v || vt_cli_int("--top-k", v, 1, 1 << 24, &top_k, &err) != VT_OK) return vt_cli_error(&err);
            continue;
        }
        vt_arg_result r = vt_cli_common_arg(&c, argc, argv, &i, &err);
        if (r == VT_ARG_ERROR) return vt_cli_error(&err);
        if (r == VT_ARG_TAKEN) continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            help();
            return 0;
        } else if ((r = vt_cli_prompt_arg(argc, argv, &i, &prompt, &ids, &err)) != VT_ARG_NOT_MINE) {
            if (r == VT_ARG_ERROR) return vt_cli_error(&err);
        } else if (strcmp(a, "--decode") == 0) {
            decode = true;
        } else if (strcmp(a, "--full-last") == 0) {
            full_last = true;
        } else if (strcmp(a, "--json") == 0) {
            /* the only output format */
        } else {
            vt_fail(&err, VT_ERR_INVALID, "eval: unknown option '%s' (see vt eval --help)", a);
            return vt_cli_error(&err);
        }
    }
    if (!prompt && !ids && !c.dry_run) {
        vt_fail(&err, VT_ERR_INVALID, "eval: give --tokens IDS or -p TEXT");
        return vt_cli_error(&err);
    }
    vt_model *model = NULL;
    vt_engine *e = NULL;
    int32_t *tokens = NULL;
    size_t n = 0;
    scored *top = NULL;
    vt_status st = vt_cli_open_engine(&c, true, &model, &e, &err);
    if (st == VT_OK && c.dry_run) goto done;
    if (st == VT_OK) st = vt_cli_prompt_tokens_for(&c, model, prompt, ids, &tokens, &n, &err);
    if (st == VT_OK && n == 0) st = vt_fail(&err, VT_ERR_INVALID, "zero tokens to evaluate");
    if (st == VT_OK && (int64_t)n > e->ctx_size)
        st = vt_fail(&err, VT_ERR_CONTEXT_FULL, "%zu tokens do not fit the KV cache of %lld tokens (-c)", n,
                     (long long)e->ctx_size);
    if (st == VT_OK) st = vt_engine_eval(e, tokens, (int64_t)n, decode, &err);
    if (st != VT_OK) goto done;
    const int32_t V = model->hp.n_vocab;
    printf("{\"tokens\": [");
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", tokens[i]);
    printf("], \"argmax\": [");
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", vt_argmax(vt_engine_logits(e, (int64_t)i), V));
    const float *last = vt_engine_logits(e, (int64_t)n - 1);
    top = malloc((size_t)V * sizeof *top);
    if (!top) {
        st = vt_fail(&err, VT_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < V; i++) top[i] = (scored){i, last[i]};
    qsort(top, (size_t)V, sizeof *top, by_logit_desc);
    if (top_k > V) top_k = V;
    printf("], \"top\": [");
    for (int64_t i = 0; i < top_k; i++) printf("%s[%d, %.9g]", i ? ", " : "", top[i].id, (double)top[i].logit);
    printf("]");
    if (full_last) {
        printf(", \"last_logits\": [");
        for (int32_t i = 0; i < V; i++) printf("%s%.9g", i ? ", " : "", (double)last[i]);
        printf("]");
    }
    printf(", \"backend\": \"%s\", \"kv_cache_dtype\": \"%s\", \"path\": \"%s\"}\n",
           vt_registry_at(e->registry, e->preferred)->name, vt_dtype_name(e->kv->dtype),
           decode ? "decode" : "prefill");
done:
    free(top);
    free(tokens);
    vt_engine_free(e);
    vt_model_free(model);
    return st == VT_OK ? 0 : vt_cli_error(&err);
}
