/* cmd_run.c — `vt run`: prompt -> prefill -> sample/decode loop, streaming text. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "sampler.h"
#include "sampling_rules.h"
#include "utf8_stream.h"

static void help(void) {
    printf("usage: vt run -m MODEL [-p PROMPT | -p - | -f FILE | --tokens 1,2,3] [-n N] [options]\n\n"
           "Generate text; prints the continuation to stdout and timing to stderr.\n\n"
           "  -p, --prompt TEXT        prompt text (tokenized with the model's vocabulary); - reads stdin\n"
           "  -f, --file FILE          the prompt is the file's text\n"
           "      --tokens IDS         prompt as comma-separated token ids instead\n"
           "  -n, --n-predict N        tokens to generate (default 32; 0 = only evaluate the prompt)\n"
           "      --temp T             temperature, 0 = greedy (default %g)\n"
           "      --top-k K, --top-p P, --min-p P   sampling filters (defaults %g, %g, %g)\n"
           "      --seed S             sampling seed (default -1: a fresh random one, printed with the timing\n"
           "                           line; --seed S with the printed S replays the run)\n"
           "      --ids                print generated token ids, comma-separated, instead of text\n"
           "      --ignore-eos         keep generating after an end-of-generation token\n",
           vt_sampling_rule_of(VT_KNOB_TEMPERATURE)->preset, vt_sampling_rule_of(VT_KNOB_TOP_K)->preset,
           vt_sampling_rule_of(VT_KNOB_TOP_P)->preset, vt_sampling_rule_of(VT_KNOB_MIN_P)->preset);
    vt_cli_common_help(stdout);
}

/* What `vt run` was asked. */
typedef struct run_opts {
    vt_cli_common c;
    vt_cli_prompt prompt;
    int64_t n_predict;
    bool print_ids, ignore_eos;
    bool help;
} run_opts;

static vt_arg_result run_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    run_opts *o = opts;
    const char *a = argv[*i];
    if (strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0)
        return vt_cli_int_arg(argc, argv, i, "-n", 0, 1 << 24, &o->n_predict, err);
    if (strcmp(a, "--ids") == 0) o->print_ids = true;
    else if (strcmp(a, "--ignore-eos") == 0) o->ignore_eos = true;
    else return vt_cli_prompt_arg(argc, argv, i, &o->prompt, err);
    return VT_ARG_TAKEN;
}

static vt_status parse_run(int argc, char **argv, run_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {.name = "run", .see_help = true, .own = run_arg};
    *o = (run_opts){.n_predict = 32};
    return vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
}

static vt_status validate_run(const run_opts *o, vt_error *err) {
    vt_status st = vt_cli_prompt_check(&o->prompt, err);
    return st == VT_OK ? vt_cli_require_model(o->c.model_path, err) : st;
}

/* Load, prefill the prompt, then sample and decode, streaming the text. */
static vt_status run_run(const run_opts *o, vt_error *err) {
    int64_t n_predict = o->n_predict;
    vt_model *model = NULL;
    vt_engine *e = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    vt_sampler *sampler = NULL;
    vt_status st = vt_cli_open_engine(&o->c, false, &model, &e, err);
    if (st == VT_OK && o->c.dry_run) goto done;
    if (st == VT_OK) st = vt_cli_prompt_tokens_for(&o->c, model, &o->prompt, &tokens, &n_tokens, err);
    if (st == VT_OK && n_tokens == 0)
        st = vt_fail(err, VT_ERR_INVALID, "the prompt is empty: zero tokens to evaluate (give -p TEXT or --tokens)");
    if (st == VT_OK && (int64_t)n_tokens > e->ctx_size)
        st = vt_fail(err, VT_ERR_CONTEXT_FULL,
                     "the prompt has %zu tokens but the KV cache holds %lld (-c/--ctx-size %lld); raise -c", n_tokens,
                     (long long)e->ctx_size, (long long)e->ctx_size);
    if (st == VT_OK && (int64_t)n_tokens + n_predict > e->ctx_size) {
        fprintf(stderr, "vt: note: generating %lld tokens instead of %lld: the KV cache holds %lld tokens\n",
                (long long)(e->ctx_size - (int64_t)n_tokens), (long long)n_predict, (long long)e->ctx_size);
        n_predict = e->ctx_size - (int64_t)n_tokens;
    }
    /* Drawn once for the run (the sampler keeps its own stream from it) and
     * printed, so a random run can be repeated with --seed. */
    const uint64_t seed = vt_options_run_seed(&o->c.opt);
    const bool sampled = o->c.opt.temp > 0;
    if (st == VT_OK && o->c.explain && sampled)
        fprintf(stderr, "sampling: temp %g, top-k %d, top-p %g, min-p %g, seed %" PRIu64 " (%s)\n",
                (double)o->c.opt.temp, o->c.opt.top_k, (double)o->c.opt.top_p, (double)o->c.opt.min_p, seed,
                o->c.opt.seed_random ? "random" : vt_options_source(&o->c.opt, "sampling.seed"));
    if (st == VT_OK) {
        vt_sampler_params sp = {o->c.opt.temp, o->c.opt.top_k, o->c.opt.top_p, o->c.opt.min_p, seed};
        st = vt_sampler_create(&sp, &sampler, err);
    }
    vt_utf8_stream text_stream = {{0}, 0};
    double t0 = vt_cli_now(), t_prompt = 0;
    int64_t generated = 0;
    if (st == VT_OK) st = vt_engine_eval(e, tokens, (int64_t)n_tokens, false, err);
    t_prompt = vt_cli_now() - t0;
    double t1 = vt_cli_now();
    for (int64_t k = 0; st == VT_OK && k < n_predict; k++) {
        int32_t next = vt_sampler_sample(sampler, vt_engine_logits(e, 0), model->hp.n_vocab);
        generated++;
        if (o->print_ids) {
            printf("%s%d", k ? "," : "", next);
        } else if (model->tokenizer) {
            /* A character split over tokens is printed once its last byte arrives. */
            char buf[256], out[VT_UTF8_STREAM_OUT_MAX(256)];
            int32_t len = vt_token_to_bytes(model->tokenizer, next, false, buf, sizeof buf);
            if (len > (int32_t)sizeof buf) len = (int32_t)sizeof buf;
            if (len > 0) fwrite(out, 1, vt_utf8_stream_push(&text_stream, buf, (size_t)len, out), stdout);
        }
        fflush(stdout);
        if (!o->ignore_eos && model->tokenizer && vt_tokenizer_is_eog(model->tokenizer, next)) break;
        if (k + 1 < n_predict) st = vt_engine_eval(e, &next, 1, true, err);
    }
    if (st == VT_OK) {
        char tail[4];
        fwrite(tail, 1, vt_utf8_stream_flush(&text_stream, tail), stdout);
        printf("\n");
        double t_gen = vt_cli_now() - t1;
        /* The decode rate counts the tokens after the first (the first comes
         * from the prompt's logits): with one token there is no rate to give. */
        char rate[48] = "";
        if (generated > 1)
            snprintf(rate, sizeof rate, " (%.1f tok/s)", (double)(generated - 1) / (t_gen > 0 ? t_gen : 1e-9));
        char seed_note[96] = "";
        if (sampled && generated > 0)
            snprintf(seed_note, sizeof seed_note, "; seed %" PRIu64 "%s", seed,
                     o->c.opt.seed_random ? " (random: --seed with it replays this run)" : "");
        fprintf(stderr, "vt: prompt %zu token%s in %.3f s (%.1f tok/s); generated %lld token%s in %.3f s%s%s\n",
                n_tokens, n_tokens == 1 ? "" : "s", t_prompt, (double)n_tokens / (t_prompt > 0 ? t_prompt : 1e-9),
                (long long)generated, generated == 1 ? "" : "s", t_gen, rate, seed_note);
    }
done:
    vt_sampler_free(sampler);
    free(tokens);
    vt_engine_free(e);
    vt_model_free(model);
    return st;
}

int vt_cmd_run(int argc, char **argv) {
    vt_error err = {0};
    run_opts o;
    vt_status st = parse_run(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help();
        return 0;
    }
    if (st == VT_OK) st = validate_run(&o, &err);
    if (st == VT_OK) st = run_run(&o, &err);
    return vt_cli_exit(st, &err);
}
