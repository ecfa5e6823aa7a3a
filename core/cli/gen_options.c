/* gen_options.c — see gen_options.h. */
#include "gen_options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sampling_rules.h"

/* A sampling value given on the command line, judged by the rule every
 * entry point shares (sampling_rules.c). */
static vt_arg_result penalty_arg(int argc, char **argv, int *i, vt_sampling_knob k, double *out, vt_error *err) {
    const char *flag = argv[*i];
    if (*i + 1 >= argc) {
        vt_fail(err, VT_ERR_INVALID, "%s needs a value", flag);
        return VT_ARG_ERROR;
    }
    const char *text = argv[++*i];
    char *end = NULL;
    const double v = strtod(text, &end);
    if (end == text || *end || !vt_sampling_accepts(k, v)) {
        vt_fail(err, VT_ERR_INVALID, "%s %s: accepted values are %s", flag, text, vt_sampling_rule_of(k)->accepted);
        return VT_ARG_ERROR;
    }
    *out = v;
    return VT_ARG_TAKEN;
}

vt_arg_result vt_cli_gen_arg(vt_cli_gen *g, int argc, char **argv, int *i, vt_error *err) {
    const char *a = argv[*i];
    if (strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0) {
        g->n_predict_given = true;
        /* -1, as llama.cpp takes it: until the end of the text, or of the
         * KV cache (VT_N_PREDICT_UNTIL_END) */
        if (*i + 1 < argc && strcmp(argv[*i + 1], "-1") == 0) {
            g->n_predict = VT_N_PREDICT_UNTIL_END;
            (*i)++;
            return VT_ARG_TAKEN;
        }
        const bool valued = *i + 1 < argc; /* (the call below moves *i) */
        vt_arg_result r = vt_cli_int_arg(argc, argv, i, "-n", 0, 1 << 24, &g->n_predict, err);
        if (r == VT_ARG_ERROR && valued) { /* a value given: and what llama.cpp's users write for "no limit" */
            const size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, ", or -1: until the end of the text or of the KV cache");
        }
        return r;
    }
    if (strcmp(a, "--presence-penalty") == 0)
        return penalty_arg(argc, argv, i, VT_KNOB_PRESENCE_PENALTY, &g->presence_penalty, err);
    if (strcmp(a, "--frequency-penalty") == 0)
        return penalty_arg(argc, argv, i, VT_KNOB_FREQUENCY_PENALTY, &g->frequency_penalty, err);
    if (strcmp(a, "--stop") == 0) {
        if (*i + 1 >= argc || !argv[*i + 1][0] || strlen(argv[*i + 1]) > VT_CLI_MAX_STOP_BYTES) {
            vt_fail(err, VT_ERR_INVALID, "--stop needs a text of 1..%d bytes", VT_CLI_MAX_STOP_BYTES);
            return VT_ARG_ERROR;
        }
        if (g->n_stop == VT_CLI_MAX_STOP) {
            vt_fail(err, VT_ERR_INVALID, "--stop: at most %d stop texts", VT_CLI_MAX_STOP);
            return VT_ARG_ERROR;
        }
        g->stop[g->n_stop++] = argv[++*i];
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--grammar-file") == 0) {
        if (*i + 1 >= argc) {
            vt_fail(err, VT_ERR_INVALID, "--grammar-file needs a file");
            return VT_ARG_ERROR;
        }
        g->grammar_file = argv[++*i];
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--ignore-eos") == 0) {
        g->ignore_eos = true;
        return VT_ARG_TAKEN;
    }
    return VT_ARG_NOT_MINE;
}

vt_status vt_cli_gen_load(vt_cli_gen *g, vt_error *err) {
    if (!g->grammar_file) return VT_OK;
    FILE *f = fopen(g->grammar_file, "rb");
    if (!f) return vt_fail(err, VT_ERR_INVALID, "--grammar-file %s: cannot open: %s", g->grammar_file, strerror(errno));
    size_t n = 0, cap = 4096;
    char *text = malloc(cap);
    for (size_t got; text && (got = fread(text + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap && n < VT_GRAMMAR_MAX_TEXT) {
            char *grown = realloc(text, cap * 2);
            if (!grown) free(text);
            text = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (!text) return vt_fail(err, VT_ERR_NOMEM, "--grammar-file %s: out of memory", g->grammar_file);
    text[n] = 0;
    g->grammar = text;
    vt_grammar *parsed = NULL;
    vt_status st = vt_grammar_parse(text, n, &parsed, err);
    vt_grammar_free(parsed);
    return st == VT_OK ? VT_OK : vt_error_prefix(err, "--grammar-file %s: ", g->grammar_file);
}

void vt_cli_gen_free(vt_cli_gen *g) {
    free(g->grammar);
    g->grammar = NULL;
}

void vt_cli_gen_help(FILE *f, const char *n_help) {
    fprintf(f,
            "  -n, --n-predict N        %s\n"
            "      --temp T             temperature, 0 = greedy (default %g)\n"
            "      --top-k K, --top-p P, --min-p P   sampling filters (defaults %g, %g, %g)\n"
            "      --seed S             sampling seed (default -1: a fresh random one, printed on stderr when\n"
            "                           it samples; --seed S with the printed S replays the run)\n"
            "      --presence-penalty P, --frequency-penalty P   OpenAI's repetition penalties, in [-2, 2]\n"
            "                           (default 0 = off)\n"
            "      --stop TEXT          end the text before TEXT when it appears (repeatable, up to %d)\n"
            "      --grammar-file FILE  the text follows the GBNF grammar in FILE (llama.cpp's syntax, rule root);\n"
            "                           generation stops once the grammar is complete\n"
            "      --ignore-eos         keep generating after an end-of-generation token\n",
            n_help, vt_sampling_rule_of(VT_KNOB_TEMPERATURE)->preset, vt_sampling_rule_of(VT_KNOB_TOP_K)->preset,
            vt_sampling_rule_of(VT_KNOB_TOP_P)->preset, vt_sampling_rule_of(VT_KNOB_MIN_P)->preset, VT_CLI_MAX_STOP);
}

vt_sched_request vt_cli_gen_request(const vt_cli_common *c, const vt_cli_gen *g, const int32_t *tokens,
                                    int64_t n_tokens, int64_t max_new_tokens, uint64_t seed, const int32_t *stop_ids,
                                    int32_t n_stop_ids) {
    return (vt_sched_request){
        .prompt = tokens,
        .n_prompt = n_tokens,
        .max_new_tokens = max_new_tokens,
        .sampler = {c->opt.temp, c->opt.top_k, c->opt.top_p, c->opt.min_p, seed},
        .stop_ids = g->ignore_eos ? NULL : stop_ids,
        .n_stop_ids = g->ignore_eos ? 0 : n_stop_ids,
        .presence_penalty = (float)g->presence_penalty,
        .frequency_penalty = (float)g->frequency_penalty,
        .stop_strings = g->stop,
        .n_stop_strings = g->n_stop,
        .grammar = g->grammar,
    };
}
