/* cmd_run.c — `vt run`: prompt -> prefill -> sample/decode loop, streaming text. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gen_options.h"

static void help(FILE *f) {
    fprintf(f, "usage: vt run -m MODEL [-p PROMPT | -p - | -f FILE | --tokens 1,2,3] [-n N] [options]\n\n"
               "Generate text; prints the continuation to stdout and timing to stderr. Without a prompt (or with an\n"
               "empty one) generation starts from the beginning-of-text token alone where the vocabulary puts one\n"
               "before a prompt (Llama's); otherwise there is nothing to evaluate (\"the prompt is empty\").\n\n"
               "  -p, --prompt TEXT        prompt text (tokenized with the model's vocabulary); - reads stdin\n"
               "  -f, --file FILE          the prompt is the file's text\n"
               "      --tokens IDS         prompt as comma-separated token ids instead\n"
               "      --ids                print generated token ids, comma-separated, instead of text\n");
    vt_cli_gen_help(f, "tokens to generate (default 32; 0 = only evaluate the prompt; -1 = until the end\n"
                       "                           of the text or of the KV cache)");
    vt_cli_common_help(f);
}

/* What `vt run` was asked. */
typedef struct run_opts {
    vt_cli_common c;
    vt_cli_prompt prompt;
    vt_cli_gen gen;
    bool print_ids;
    bool help;
} run_opts;

static vt_arg_result run_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    run_opts *o = opts;
    const char *a = argv[*i];
    vt_arg_result r = vt_cli_gen_arg(&o->gen, argc, argv, i, err);
    if (r != VT_ARG_NOT_MINE) return r;
    if (strcmp(a, "--ids") == 0) o->print_ids = true;
    else return vt_cli_prompt_arg(argc, argv, i, &o->prompt, err);
    return VT_ARG_TAKEN;
}

static vt_status parse_run(int argc, char **argv, run_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {
        .name = "run", .see_help = true, .samples = true, .own = run_arg, .help = help};
    *o = (run_opts){.gen = {.n_predict = 32}};
    return vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
}

static vt_status validate_run(const run_opts *o, vt_error *err) {
    vt_status st = vt_cli_prompt_check(&o->prompt, err);
    if (st == VT_OK && o->gen.n_stop > 0 && o->print_ids)
        st = vt_fail(err, VT_ERR_INVALID, "--stop matches text, and --ids prints no text: give one of them");
    return st == VT_OK ? vt_cli_require_model(o->c.model_path, err) : st;
}

/* What a run printed and how long it took. */
typedef struct run_result {
    int64_t generated;
    double t_prompt, t_gen; /* until the first token; after it */
} run_result;

/* The prompt through one request of the scheduler (the generation loop the
 * server uses too: the same sampling, penalties and stop texts), printing
 * each token's text (or id) as it becomes final. */
static vt_status generate(const run_opts *o, vt_engine *e, const vt_model *model, const int32_t *tokens,
                          int64_t n_tokens, int64_t n_predict, uint64_t seed, run_result *res, vt_error *err) {
    vt_sched *sched = NULL;
    /* the scheduler's settings as vt serve takes them (refused alike when out of range) */
    const vt_sched_options so = vt_sched_options_of(&o->c.opt);
    vt_status st = vt_sched_create(e, &so, &sched, err);
    if (st != VT_OK) return st;
    size_t n_eog = 0;
    const int32_t *eog = model->tokenizer ? vt_tokenizer_eog_ids(model->tokenizer, &n_eog) : NULL;
    const vt_sched_request req =
        vt_cli_gen_request(&o->c, &o->gen, tokens, n_tokens, n_predict, seed, eog, (int32_t)n_eog);
    uint64_t id = 0;
    st = vt_sched_add(sched, &req, &id, err);
    const double t0 = vt_cli_now();
    double t_first = -1;
    vt_sched_output out = {0};
    while (st == VT_OK && out.state != VT_SCHED_FINISHED) {
        vt_sched_step_info info;
        st = vt_sched_step(sched, &info, err);
        if (st == VT_OK) st = vt_sched_read(sched, id, &out, err);
        if (st != VT_OK) break;
        if (t_first < 0 && out.n_generated > 0) t_first = vt_cli_now();
        if (o->print_ids)
            for (int64_t k = 0; k < out.n_tokens; k++) printf("%s%d", res->generated + k ? "," : "", out.tokens[k]);
        else
            fwrite(out.text, 1, out.n_text, stdout);
        res->generated += out.n_tokens;
        fflush(stdout);
    }
    const double t_end = vt_cli_now();
    res->t_prompt = (t_first >= 0 ? t_first : t_end) - t0;
    res->t_gen = t_first >= 0 ? t_end - t_first : 0;
    vt_sched_free(sched);
    return st;
}

/* What sets the KV cache's size, for a message that it is too small:
 * "-c 256" when given, else that the default took the smaller of the
 * model's context and 4096, and how far -c may go before leaving what the
 * model was trained on; an ini file's or the environment's setting by its
 * source (not by its key: an error naming the key gets the options' own
 * note of where it was set, which would say it twice). In parentheses. */
static const char *ctx_origin(const vt_options *opt, const vt_model *model, int64_t ctx, char *buf, size_t size) {
    const int64_t trained = model->hp.n_ctx_train;
    const char *source = vt_options_source(opt, "kv_cache.ctx_size");
    char where[1100];
    if (opt->ctx_size > 0 && vt_options_source_rank(source) == 3) snprintf(buf, size, " (-c/--ctx-size %lld)", (long long)ctx);
    else if (opt->ctx_size > 0) /* an ini file or the environment: -c on the command line overrides it */
        snprintf(buf, size, " (set by %s)", vt_options_where(opt, source, where, sizeof where));
    else if (trained > ctx)
        snprintf(buf, size, " (-c/--ctx-size's default caps it at 4096; the model was trained on %lld tokens)",
                 (long long)trained);
    else snprintf(buf, size, " (-c/--ctx-size's default: the model's trained context)");
    return buf;
}

/* Load, then generate from the prompt (or only evaluate it with -n 0). */
static vt_status run_run(run_opts *o, vt_error *err) {
    int64_t n_predict = o->gen.n_predict;
    vt_model *model = NULL;
    vt_engine *e = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    vt_status st = vt_cli_gen_load(&o->gen, err);
    if (st == VT_OK) st = vt_cli_open_engine(&o->c, false, &model, &e, err);
    if (st == VT_OK && o->c.dry_run) goto done;
    if (st == VT_OK) st = vt_cli_prompt_tokens_for(&o->c, model, &o->prompt, &tokens, &n_tokens, err);
    if (st == VT_OK && n_tokens == 0)
        st = vt_fail(err, VT_ERR_INVALID, "the prompt is empty: zero tokens to evaluate (give -p TEXT or --tokens)");
    char origin[160];
    const bool until_end = n_predict == VT_N_PREDICT_UNTIL_END;
    if (until_end) n_predict = 1; /* at least one; the room the prompt leaves below */
    if (st == VT_OK && (int64_t)n_tokens > vt_engine_ctx_size(e))
        st = vt_fail(err, VT_ERR_CONTEXT_FULL, "the prompt has %zu tokens but the KV cache holds %lld%s; raise -c",
                     n_tokens, (long long)vt_engine_ctx_size(e),
                     ctx_origin(&o->c.opt, model, vt_engine_ctx_size(e), origin, sizeof origin));
    /* Prompt and answer together fit the cache (vt serve's rule too): a
     * prompt that fills it leaves no room to generate. */
    if (st == VT_OK && n_predict > 0 && (int64_t)n_tokens == vt_engine_ctx_size(e))
        st = vt_fail(err, VT_ERR_CONTEXT_FULL,
                     "the prompt's %zu tokens fill the KV cache of %lld%s: no room to generate; raise -c", n_tokens,
                     (long long)vt_engine_ctx_size(e),
                     ctx_origin(&o->c.opt, model, vt_engine_ctx_size(e), origin, sizeof origin));
    if (st == VT_OK && until_end) n_predict = vt_engine_ctx_size(e) - (int64_t)n_tokens;
    if (st == VT_OK && (int64_t)n_tokens + n_predict > vt_engine_ctx_size(e)) {
        const int64_t room = vt_engine_ctx_size(e) - (int64_t)n_tokens;
        fprintf(stderr, "vt: note: generating %lld token%s instead of %lld: the KV cache holds %lld tokens%s\n",
                (long long)room, room == 1 ? "" : "s", (long long)n_predict, (long long)vt_engine_ctx_size(e),
                ctx_origin(&o->c.opt, model, vt_engine_ctx_size(e), origin, sizeof origin));
        n_predict = room;
    }
    /* Drawn once for the run and printed, so a random run can be repeated
     * with --seed. */
    const uint64_t seed = vt_options_run_seed(&o->c.opt);
    const bool sampled = o->c.opt.temp > 0;
    if (st == VT_OK && o->c.explain && sampled)
        fprintf(stderr, "sampling: temp %g, top-k %d, top-p %g, min-p %g, seed %" PRIu64 " (%s)\n",
                (double)o->c.opt.temp, o->c.opt.top_k, (double)o->c.opt.top_p, (double)o->c.opt.min_p, seed,
                o->c.opt.seed_random ? "random" : vt_options_source(&o->c.opt, "sampling.seed"));
    run_result res = {0};
    if (st == VT_OK && n_predict > 0) {
        st = generate(o, e, model, tokens, (int64_t)n_tokens, n_predict, seed, &res, err);
    } else if (st == VT_OK) { /* -n 0: the prompt alone */
        const double t0 = vt_cli_now();
        st = vt_engine_eval(e, tokens, (int64_t)n_tokens, false, err);
        res.t_prompt = vt_cli_now() - t0;
    }
    if (st == VT_OK) {
        if (n_predict > 0) printf("\n"); /* ends the text (-n 0 wrote none) */
        fflush(stdout); /* the text before the timing line, wherever both go */
        /* The decode rate counts the tokens after the first (the first comes
         * from the prompt's logits): with one token there is no rate to give. */
        char rate[48] = "";
        if (res.generated > 1)
            snprintf(rate, sizeof rate, " (%.1f tok/s)",
                     (double)(res.generated - 1) / (res.t_gen > 0 ? res.t_gen : 1e-9));
        char seed_note[96] = "";
        if (sampled && res.generated > 0)
            snprintf(seed_note, sizeof seed_note, "; seed %" PRIu64 "%s", seed,
                     o->c.opt.seed_random ? " (random: --seed with it replays this run)" : "");
        fprintf(stderr, "vt: prompt %zu token%s in %.3f s (%.1f tok/s); generated %lld token%s in %.3f s%s%s\n",
                n_tokens, n_tokens == 1 ? "" : "s", res.t_prompt,
                (double)n_tokens / (res.t_prompt > 0 ? res.t_prompt : 1e-9), (long long)res.generated,
                res.generated == 1 ? "" : "s", res.t_gen, rate, seed_note);
    }
done:
    vt_cli_gen_free(&o->gen);
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
        help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_run(&o, &err);
    if (st == VT_OK) st = run_run(&o, &err);
    return vt_cli_exit(st, &err);
}
