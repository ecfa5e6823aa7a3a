/* test_compare_bench.c — `vt compare`, `vt bench`, `vt synth` and the op
 * profiler, end to end on a tiny synthesized model.
 *
 * The commands run as subprocesses (VT_CLI_PATH) and their JSON is parsed
 * and checked against what the library computes in this process: the plans'
 * node counts, the model's sizes, and the reference backend's own logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "engine_internal.h"
#include "json_mini.h"
#include "membw.h"
#include "metrics.h"
#include "profiler.h"
#include "synth.h"
#include "util.h"
#include "vt/vt_cpu.h"

/* Prompt token ids (the built-in vocabulary has 512 ids: all valid). */
#define PROMPT_IDS "1,72,101,108,108,111,32,119,111,114,108,100"
#define N_PROMPT 12
#define N_GREEDY 6

static char model_path[1024];

static int suite_init(void) {
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    vt_error err = {0};
    /* tiny: qwen3, 256 wide, 2 layers, vocab 512; q4_k_m exercises Q4_K and Q6_K */
    if (vt_synth_shape(&p, "tiny", &err) != VT_OK) return 1;
    p.type = "q4_k_m";
    p.seed = 7;
    vt_test_tmpfile(model_path, sizeof model_path, "tiny-q4_k_m.gguf");
    if (vt_synth_write(&p, model_path, &err) != VT_OK) {
        fprintf(stderr, "synth: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Run a vt command line (arguments after `vt`), parse stdout as JSON. */
static bool run_json(const char *args, json_value *doc, char **stderr_text) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", VT_CLI_PATH, args);
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_cmd(cmd, &out, &err);
    if (rc != 0) fprintf(stderr, "`%s` exited %d:\n%s\n", cmd, rc, err ? err : "");
    char msg[256] = "";
    bool ok = rc == 0 && out && json_parse(out, strlen(out), doc, msg, sizeof msg);
    if (rc == 0 && !ok) fprintf(stderr, "`%s`: bad JSON (%s):\n%s\n", cmd, msg, out ? out : "");
    free(out);
    if (stderr_text) *stderr_text = err;
    else free(err);
    return ok;
}

static double num(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    CU_ASSERT_PTR_NOT_NULL(v);
    if (!v) return NAN;
    CU_ASSERT_EQUAL(v->type, JSON_NUMBER);
    return v->type == JSON_NUMBER ? v->number : NAN;
}

/* Nodes per backend of both all-logits plans (as compare builds them) when
 * NAME is preferred, read from `vt eval --dry-run`'s plan listing (one line
 * per node: "prefill|decode N label op=... backend=NAME ..."). Returns the
 * total, fills counts by name. */
typedef struct plan_counts {
    char name[8][64];
    int count[8];
    int n;
    int prefill, decode;
} plan_counts;

static int dry_run_counts(const char *backend, plan_counts *pc) {
    memset(pc, 0, sizeof *pc);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' eval -m '%s' --backend %s --dry-run -c 64", VT_CLI_PATH, model_path, backend);
    char *err = NULL;
    int rc = vt_test_run_cmd(cmd, NULL, &err);
    CU_ASSERT_EQUAL(rc, 0);
    int total = 0;
    for (char *line = err ? strtok(err, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        while (*line == ' ') line++;
        bool pre = strncmp(line, "prefill ", 8) == 0, dec = strncmp(line, "decode ", 7) == 0;
        const char *b = strstr(line, " backend=");
        if ((!pre && !dec) || !b) continue;
        char name[64];
        if (sscanf(b + 9, "%63s", name) != 1) continue;
        int k = 0;
        while (k < pc->n && strcmp(pc->name[k], name) != 0) k++;
        if (k == pc->n && pc->n < 8) snprintf(pc->name[pc->n++], sizeof pc->name[0], "%s", name);
        if (k < 8) pc->count[k]++;
        pc->prefill += pre;
        pc->decode += dec;
        total++;
    }
    free(err);
    return total;
}

/* Logits of every prompt position through an engine preferring `backend`
 * ([N_PROMPT][V], malloc'ed), plus the spread (stdev) of all of them. */
static float *engine_logits_kv(const char *backend, int32_t kv_dtype, int32_t *n_vocab, double *spread) {
    vt_error err = {0};
    vt_model *m = NULL;
    vt_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &m, &err), VT_OK);
    vt_options opt;
    vt_options_defaults(&opt);
    opt.threads = 2;
    opt.ctx_size = 64;
    opt.kv_cache_dtype = kv_dtype;
    snprintf(opt.backend, sizeof opt.backend, "%s", backend);
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&opt, m, true, &e, &err), VT_OK);
    int32_t ids[N_PROMPT];
    size_t n = 0;
    char list[] = PROMPT_IDS;
    for (char *t = strtok(list, ","); t && n < N_PROMPT; t = strtok(NULL, ",")) ids[n++] = atoi(t);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, ids, N_PROMPT, false, &err), VT_OK);
    int32_t V = m->hp.n_vocab;
    float *out = malloc((size_t)N_PROMPT * (size_t)V * sizeof *out);
    CU_ASSERT_FATAL(out != NULL);
    memcpy(out, vt_engine_logits(e, 0), (size_t)N_PROMPT * (size_t)V * sizeof *out);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < (int64_t)N_PROMPT * V; i++) {
        sum += out[i];
        sq += (double)out[i] * out[i];
    }
    double mean = sum / ((double)N_PROMPT * V);
    *spread = sqrt(sq / ((double)N_PROMPT * V) - mean * mean);
    *n_vocab = V;
    vt_engine_free(e);
    vt_model_free(m);
    return out;
}

/* The same with the default KV cache (f16), as compare runs without the flag. */
static float *engine_logits(const char *backend, int32_t *n_vocab, double *spread) {
    return engine_logits_kv(backend, VT_F16, n_vocab, spread);
}

static void test_compare_json(void) {
    char args[2048];
    snprintf(args, sizeof args, "compare -m '%s' --json --backends all -t 2 --tokens " PROMPT_IDS " -n %d", model_path,
             N_GREEDY);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const json_value *model = json_get(&doc, "model");
    CU_ASSERT_FATAL(model && model->type == JSON_STRING);
    CU_ASSERT_STRING_EQUAL(model->str, model_path);
    CU_ASSERT_EQUAL(num(&doc, "n_tokens"), N_PROMPT);
    const json_value *kv = json_get(&doc, "kv_cache_dtype");
    CU_ASSERT(kv && kv->type == JSON_STRING && strcmp(kv->str, "f16") == 0);
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY && backends->n >= 1);

    int32_t V = 0;
    double spread = 0;
    float *ref = engine_logits("reference", &V, &spread);
    CU_ASSERT(spread > 0);

    for (size_t i = 0; i < backends->n; i++) {
        const json_value *b = &backends->items[i];
        const json_value *name = json_get(b, "name");
        CU_ASSERT_FATAL(name && name->type == JSON_STRING);
        const json_value *ppl = json_get(b, "ppl");
        CU_ASSERT(ppl && ppl->type == JSON_NULL); /* no --ppl */
        CU_ASSERT(num(b, "pp_tok_s") > 0);
        CU_ASSERT(num(b, "tg_tok_s") > 0);
        double greedy = num(b, "greedy_agree_tokens");
        CU_ASSERT(greedy >= 0 && greedy <= N_GREEDY);

        /* where the nodes ran: the counts sum to the plans' nodes, and match
         * the plans `vt eval --dry-run` prints for the same backend */
        plan_counts pc;
        int total = dry_run_counts(name->str, &pc);
        CU_ASSERT_EQUAL(num(b, "plan_nodes"), total);
        const json_value *where = json_get(b, "nodes_by_backend");
        CU_ASSERT_FATAL(where && where->type == JSON_OBJECT);
        double sum = 0;
        for (size_t k = 0; k < where->n; k++) {
            sum += where->items[k].number;
            int j = 0;
            while (j < pc.n && strcmp(pc.name[j], where->keys[k]) != 0) j++;
            CU_ASSERT(j < pc.n);
            if (j < pc.n) CU_ASSERT_EQUAL(where->items[k].number, pc.count[j]);
        }
        CU_ASSERT_EQUAL(sum, total);
        CU_ASSERT_EQUAL(where->n, (size_t)pc.n);

        if (i == 0) {
            /* the baseline compared with itself */
            CU_ASSERT_STRING_EQUAL(name->str, "reference");
            CU_ASSERT_EQUAL(num(b, "max_abs_dlogit"), 0.0);
            CU_ASSERT_EQUAL(num(b, "mean_abs_dlogit"), 0.0);
            CU_ASSERT_EQUAL(num(b, "kl_mean"), 0.0);
            CU_ASSERT_EQUAL(num(b, "kl_max"), 0.0);
            CU_ASSERT_EQUAL(num(b, "top1_agreement"), 1.0);
            CU_ASSERT_EQUAL(greedy, N_GREEDY);
            continue;
        }
        /* Other backends round differently (simd quantizes activations to
         * 8 bits like llama.cpp; onednn dequantizes to f32), which moves
         * logits by a few percent of their spread on this random model
         * (measured: simd max 9%, mean 1.5%; onednn ~1e-4). A wrong kernel
         * (wrong block, scale or row) moves them by the order of the spread
         * itself. Bounds: max 30%, mean 5% of the spread. */
        double mx = num(b, "max_abs_dlogit"), mean = num(b, "mean_abs_dlogit");
        CU_ASSERT(mx <= 0.30 * spread);
        CU_ASSERT(mean <= 0.05 * spread);
        CU_ASSERT(mean <= mx);
        CU_ASSERT(num(b, "kl_mean") <= num(b, "kl_max"));
        CU_ASSERT(num(b, "kl_max") < 1e-2);
        double top1 = num(b, "top1_agreement");
        CU_ASSERT(top1 >= 0.5 && top1 <= 1.0);

        /* The numbers are what they say: recompute max/mean |dlogit| and
         * top-1 from an engine in this process (same threads, so the same
         * arithmetic; the JSON prints 10 significant digits). */
        int32_t V2 = 0;
        double s2 = 0;
        float *got = engine_logits(name->str, &V2, &s2);
        CU_ASSERT_FATAL(V2 == V);
        vt_logit_stats st;
        vt_logit_stats_init(&st);
        for (int r = 0; r < N_PROMPT; r++) vt_logit_stats_add(&st, ref + (size_t)r * V, got + (size_t)r * V, V);
        VT_ASSERT_NEAR(mx, st.max_abs_dlogit, 1e-8 + 1e-6 * st.max_abs_dlogit);
        VT_ASSERT_NEAR(mean, vt_logit_stats_mean_abs(&st), 1e-8 + 1e-6 * mean);
        VT_ASSERT_NEAR(top1, vt_logit_stats_top1(&st), 1e-9);
        free(got);
    }
    free(ref);
    json_free(&doc);
}

/* Perplexity: every backend scores the same chunks; the reference's ppl is
 * finite and > 1, and the others' are within 1% of it (their KL from the
 * reference is < 1e-2 nats per token, and |log ppl_a - log ppl_b| is bounded
 * by the mean NLL difference, which such small deviations keep well under
 * 0.01 here). */
static void test_compare_perplexity(void) {
    char text[256];
    vt_test_tmpfile(text, sizeof text, "ppl.txt");
    FILE *f = fopen(text, "w");
    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < 6; i++) fprintf(f, "A small boat crossed the bay at dawn, and the gulls followed it. ");
    fclose(f);
    char args[2048];
    snprintf(args, sizeof args, "compare -m '%s' --json -n 2 --tokens 1,2,3 --ppl '%s' --ppl-ctx 64", model_path, text);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    CU_ASSERT_EQUAL(num(&doc, "ppl_ctx"), 64);
    double chunks = num(&doc, "ppl_chunks");
    CU_ASSERT(chunks >= 2);
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->n >= 1);
    double ref_ppl = num(&backends->items[0], "ppl");
    CU_ASSERT(isfinite(ref_ppl) && ref_ppl > 1.0);
    for (size_t i = 1; i < backends->n; i++) {
        double p = num(&backends->items[i], "ppl");
        CU_ASSERT(fabs(p / ref_ppl - 1.0) < 0.01);
    }
    json_free(&doc);
    /* without --ppl-ctx the chunk is the default (512) or the model's
     * trained context if shorter: aidreams260k was trained on 128 positions,
     * so its chunks are 128 and nothing warns of positions past training */
    char aidreams[1024], *err = NULL;
    snprintf(aidreams, sizeof aidreams, "%s/models/aidreams260k-q8_0.gguf", vt_test_data_dir("trained model"));
    f = fopen(text, "w");
    CU_ASSERT_FATAL(f != NULL);
    for (int i = 0; i < 80; i++) fprintf(f, "A small boat crossed the bay at dawn, and the gulls followed it. ");
    fclose(f);
    snprintf(args, sizeof args, "compare -m '%s' --json -n 2 --backends reference --ppl '%s'", aidreams, text);
    CU_ASSERT_FATAL(run_json(args, &doc, &err));
    CU_ASSERT_EQUAL(num(&doc, "ppl_ctx"), 128);
    CU_ASSERT(err && !strstr(err, "trained context"));
    free(err);
    json_free(&doc);
}

static void test_compare_profile_counts_every_op_call(void) {
    char args[2048];
    /* simd if it loaded, else reference alone: either way one section per backend */
    snprintf(args, sizeof args, "compare -m '%s' --json --profile -n 3 --tokens 5,6,7,8", model_path);
    json_value doc;
    char *err = NULL;
    CU_ASSERT_FATAL(run_json(args, &doc, &err));
    CU_ASSERT_FATAL(err != NULL);
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY);
    for (size_t i = 0; i < backends->n; i++) {
        const char *name = json_get(&backends->items[i], "name")->str;
        /* one prefill call and n - 1 = 2 decode steps: every node of the
         * prefill plan once and of the decode plan twice */
        plan_counts pc;
        dry_run_counts(name, &pc);
        long want = pc.prefill + 2L * pc.decode;
        char head[128];
        snprintf(head, sizeof head, "profile [%s]: %ld op calls", name, want);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, head));
        if (!strstr(err, head)) fprintf(stderr, "expected '%s' in:\n%s\n", head, err);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "matmul"));
    free(err);
    json_free(&doc);
}

/* No -m: a model is synthesized into $XDG_CACHE_HOME/vt once, then reused. */
static void test_compare_default_model_is_cached(void) {
    char cache[512], args[1024];
    vt_test_tmpfile(cache, sizeof cache, "cache");
    snprintf(args, sizeof args, "env XDG_CACHE_HOME='%s' '%s' compare --backends reference -n 2 --tokens 1,2,3 --json",
             cache, VT_CLI_PATH);
    for (int round = 0; round < 2; round++) {
        char *out = NULL, *err = NULL;
        int rc = vt_test_run_cmd(args, &out, &err);
        CU_ASSERT_EQUAL(rc, 0);
        const char *said = round == 0 ? "synthesized the default model" : "using the cached default model";
        CU_ASSERT(err && strstr(err, said) != NULL);
        json_value doc;
        char msg[128];
        CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
        const json_value *model = json_get(&doc, "model");
        CU_ASSERT_FATAL(model && model->type == JSON_STRING);
        CU_ASSERT(strncmp(model->str, cache, strlen(cache)) == 0);
        struct stat sb;
        CU_ASSERT(stat(model->str, &sb) == 0 && sb.st_size > 0);
        json_free(&doc);
        free(out);
        free(err);
    }
}

/* A backend whose plan cannot be built (here: no fallback for the nodes it
 * declines) gets an "error" entry; the others are still measured, and the
 * exit status says something failed. */
static void test_compare_reports_a_failing_backend(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' compare -m '%s' --json --fallback none -n 2 --tokens 1,2,3", VT_CLI_PATH,
             model_path);
    char *out = NULL;
    int rc = vt_test_run_cmd(cmd, &out, NULL);
    json_value doc;
    char msg[128];
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY && backends->n >= 1);
    CU_ASSERT_PTR_NULL(json_get(&backends->items[0], "error")); /* reference runs every op itself */
    CU_ASSERT_EQUAL(num(&backends->items[0], "max_abs_dlogit"), 0.0);
    int failed = 0;
    for (size_t i = 0; i < backends->n; i++) {
        const json_value *e = json_get(&backends->items[i], "error");
        if (!e) {
            CU_ASSERT_PTR_NOT_NULL(json_get(&backends->items[i], "nodes_by_backend"));
            continue;
        }
        failed++;
        /* a plan nobody can run with the nodes it declines: unsupported, not a backend fault */
        const json_value *status = json_get(&backends->items[i], "status");
        CU_ASSERT(e->type == JSON_STRING && e->len > 0);
        CU_ASSERT(status && status->type == JSON_STRING && strcmp(status->str, vt_status_name(VT_ERR_UNSUPPORTED)) == 0);
        const json_value *verdict = json_get(&backends->items[i], "verdict"); /* as the table's "not judged" */
        CU_ASSERT(verdict && verdict->type == JSON_STRING && strcmp(verdict->str, "not judged") == 0);
        CU_ASSERT_PTR_NULL(json_get(&backends->items[i], "max_abs_dlogit"));
    }
    /* onednn declines get_rows & co, so with it loaded one entry fails */
    CU_ASSERT_EQUAL(rc, failed > 0 ? 4 : 0); /* 4: the CLI's code for VT_ERR_UNSUPPORTED */
    json_free(&doc);
    free(out);

    /* bench: the same, one "error" entry in place of that backend's pp/tg pair */
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' --json --fallback none -p 4 -n 2 -r 1 --membw-mib 0", VT_CLI_PATH,
             model_path);
    rc = vt_test_run_cmd(cmd, &out, NULL);
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY);
    int bench_failed = 0;
    for (size_t i = 0; i < results->n; i++) {
        const json_value *e = json_get(&results->items[i], "error"), *test = json_get(&results->items[i], "test");
        CU_ASSERT((e != NULL) != (test != NULL));
        if (e) {
            const json_value *status = json_get(&results->items[i], "status");
            CU_ASSERT(status && status->type == JSON_STRING &&
                      strcmp(status->str, vt_status_name(VT_ERR_UNSUPPORTED)) == 0);
            bench_failed++;
        } else if (test && test->type == JSON_STRING && strcmp(test->str, "pp4") == 0) {
            /* a pp entry is followed by its backend's tg entry */
            CU_ASSERT_FATAL(i + 1 < results->n);
            const json_value *next = json_get(&results->items[i + 1], "test");
            CU_ASSERT(next && next->type == JSON_STRING && strcmp(next->str, "tg2") == 0);
            CU_ASSERT_PTR_NULL(json_get(&results->items[i], "fraction_of_limit"));
        }
    }
    CU_ASSERT_EQUAL(rc, bench_failed > 0 ? 4 : 0);
    json_free(&doc);
    free(out);
}

/* What `vt bench` says simd runs at on this CPU, its best tier. */
static const char *simd_isa_expected(void) {
    static char buf[320];
    const vt_cpu_features f = vt_cpu_detect();
    snprintf(buf, sizeof buf, "simd %s",
             f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni ? vt_test_simd_avx512_isa() : "avx2");
    return buf;
}

static void test_bench_json(void) {
    char args[2048];
    /* 64 MiB per bandwidth buffer keeps the test quick (under ASan too); the
     * size changes the figure's accuracy, not the plumbing checked here */
    snprintf(args, sizeof args, "bench -m '%s' --json -p 16 -n 4 -r 2 -t 2 --membw-mib 64", model_path);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    vt_model *m = NULL;
    vt_error e = {0};
    CU_ASSERT_FATAL(vt_model_load(model_path, &m, &e) == VT_OK);
    CU_ASSERT_EQUAL(num(&doc, "threads"), 2);
    /* the machine every figure was measured on */
    const json_value *cpu = json_get(&doc, "cpu"), *cpu_isa = json_get(&doc, "cpu_isa");
    CU_ASSERT(cpu && cpu->type == JSON_STRING && cpu->str[0]);
    CU_ASSERT(cpu_isa && cpu_isa->type == JSON_STRING && cpu_isa->str[0]);
    if (vt_cpu_has_avx2_fma_f16c()) CU_ASSERT(cpu_isa && cpu_isa->type == JSON_STRING && strstr(cpu_isa->str, "avx2"));
    CU_ASSERT(num(&doc, "cores") >= 1);
    CU_ASSERT_EQUAL(num(&doc, "model_bytes"), (double)m->weight_bytes);
    CU_ASSERT_EQUAL(num(&doc, "params"), (double)m->n_params);
    double bpt = num(&doc, "bytes_per_token");
    CU_ASSERT_EQUAL(bpt, (double)vt_model_bytes_per_token(m));
    /* KV-cache bytes per token: 2 (K, V) x layers x kv heads x one head's row in the dtype; the run's own (f16) too */
    const vt_hparams *hp = &m->hp;
    const double heads = 2.0 * hp->n_layer * hp->n_head_kv;
    const json_value *kv = json_get(&doc, "kv_cache_bytes_per_token_by_dtype");
    CU_ASSERT_PTR_NOT_NULL_FATAL(kv);
    CU_ASSERT_EQUAL(num(kv, "f32"), heads * hp->head_dim * 4);
    CU_ASSERT_EQUAL(num(kv, "f16"), heads * hp->head_dim * 2);
    CU_ASSERT_EQUAL(num(kv, "bf16"), heads * hp->head_dim * 2);
    CU_ASSERT_EQUAL(num(kv, "q8_0"), heads * hp->head_dim / 32 * 34);
    CU_ASSERT_EQUAL(num(&doc, "kv_cache_bytes_per_token"), num(kv, "f16"));
    vt_model_free(m);
    double bw = num(&doc, "bandwidth_gb_s");
    CU_ASSERT(bw > 0.05 && bw < 10000); /* GB/s: any real machine, loaded or not */
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n >= 2 && results->n % 2 == 0);
    for (size_t i = 0; i < results->n; i++) {
        const json_value *r = &results->items[i];
        const json_value *test = json_get(r, "test"), *backend = json_get(r, "backend");
        CU_ASSERT_FATAL(test && test->type == JSON_STRING && backend && backend->type == JSON_STRING);
        bool tg = i % 2 == 1;
        CU_ASSERT_STRING_EQUAL(test->str, tg ? "tg4" : "pp16");
        CU_ASSERT_EQUAL(num(r, "n_tokens"), tg ? 4 : 16);
        CU_ASSERT_EQUAL(num(r, "n_seqs"), 1);                  /* without --parallel: one sequence */
        CU_ASSERT_PTR_NULL(json_get(r, "tok_s_per_seq_median")); /* and nothing else new */
        CU_ASSERT(strcmp(backend->str, "reference") != 0); /* the default leaves the oracle out */
        /* the backends its plans ran on, each with its instruction set: the
         * run's own backend first ("simd avx2", "onednn ... + simd avx2") */
        const json_value *isa = json_get(r, "isa");
        CU_ASSERT_FATAL(isa && isa->type == JSON_STRING);
        CU_ASSERT(strstr(isa->str, backend->str) != NULL);
        if (strcmp(backend->str, "simd") == 0) CU_ASSERT_STRING_EQUAL(isa->str, simd_isa_expected());
        CU_ASSERT_PTR_NULL(strstr(isa->str, "not reported"));
        const json_value *runs = json_get(r, "runs");
        CU_ASSERT_FATAL(runs && runs->type == JSON_ARRAY && runs->n == 2);
        double a = runs->items[0].number, b = runs->items[1].number;
        CU_ASSERT(a > 0 && b > 0);
        /* two runs: the median is their mean, the sample stdev |a - b| / sqrt 2 */
        VT_ASSERT_NEAR(num(r, "tok_s_median"), (a + b) / 2, 1e-6 * (a + b));
        VT_ASSERT_NEAR(num(r, "tok_s_stdev"), fabs(a - b) / sqrt(2.0), 1e-6 * (a + b));
        /* the ratio to the first backend's median of the same test */
        const double first = num(&results->items[tg ? 1 : 0], "tok_s_median");
        VT_ASSERT_NEAR(num(r, "tok_s_ratio_to_first"), num(r, "tok_s_median") / first, 1e-6);
        if (tg) {
            /* a step reads the weights and the K/V rows of every position so
             * far: 4 steps from an empty sequence see (4 + 1) / 2 on average */
            const double step = bpt + (4 + 1) / 2.0 * num(kv, "f16");
            VT_ASSERT_NEAR(num(r, "bytes_per_step"), step, 1e-9 * step);
            double want = num(r, "tok_s_median") * step / (bw * 1e9);
            VT_ASSERT_NEAR(num(r, "fraction_of_limit"), want, 1e-6 * want);
        } else {
            CU_ASSERT_PTR_NULL(json_get(r, "fraction_of_limit"));
        }
    }
    json_free(&doc);
}

/* --parallel 1,3: per number of sequences S a pp of S x p tokens and a tg of
 * S x n tokens; tok_s_median is the aggregate, tok_s_per_seq_median the
 * per-sequence rate (aggregate / S), and the bandwidth fraction counts a
 * decode step of S tokens as one read of the weights. */
static void test_bench_parallel_json(void) {
    char args[2048];
    snprintf(args, sizeof args,
             "bench -m '%s' --json --backends reference --parallel 1,3 -p 8 -n 3 -r 1 -t 2 --membw-mib 64",
             model_path);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const double bpt = num(&doc, "bytes_per_token"), bw = num(&doc, "bandwidth_gb_s");
    const double kv = num(&doc, "kv_cache_bytes_per_token");
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n == 4);
    static const int seqs[4] = {1, 1, 3, 3};
    for (size_t i = 0; i < results->n; i++) {
        const json_value *r = &results->items[i];
        const bool tg = i % 2 == 1;
        /* one engine (one prepared copy of the weights) for every --parallel entry */
        CU_ASSERT_EQUAL(num(r, "create_seconds"), num(&results->items[0], "create_seconds"));
        const json_value *test = json_get(r, "test");
        CU_ASSERT_FATAL(test && test->type == JSON_STRING);
        CU_ASSERT_STRING_EQUAL(test->str, tg ? "tg3" : "pp8");
        CU_ASSERT_EQUAL(num(r, "n_seqs"), seqs[i]);
        CU_ASSERT_EQUAL(num(r, "n_tokens"), seqs[i] * (tg ? 3 : 8));
        CU_ASSERT(num(r, "tok_s_median") > 0);
        if (tg) {
            const double per_seq = num(r, "tok_s_per_seq_median");
            VT_ASSERT_NEAR(per_seq, num(r, "tok_s_median") / seqs[i], 1e-9 * per_seq);
            /* the weights once per step, each sequence's K/V rows (3 steps
             * after 8 prompt tokens: 8 + (3 + 1) / 2 positions on average) */
            const double step = bpt + seqs[i] * (8 + (3 + 1) / 2.0) * kv;
            VT_ASSERT_NEAR(num(r, "bytes_per_step"), step, 1e-9 * step);
            const double want = per_seq * step / (bw * 1e9);
            VT_ASSERT_NEAR(num(r, "fraction_of_limit"), want, 1e-6 * want);
        } else {
            CU_ASSERT_PTR_NULL(json_get(r, "tok_s_per_seq_median"));
        }
    }
    json_free(&doc);
}

/* A mixture of experts: bytes_per_token is one token's experts, and a step
 * of one sequence is charged that; a step of several reads every expert
 * its tokens chose, which depends on the routing, so it gets no GB/s and no
 * fraction (null) rather than one token's bytes (which read as a fraction
 * of what the step moved). */
static void test_bench_parallel_moe_has_no_step_bytes(void) {
    char args[2048], moe[1024];
    snprintf(moe, sizeof moe, "%s/models/qwen3moe-tiny-q8_0.gguf", vt_test_data_dir("moe model"));
    snprintf(args, sizeof args, "bench -m '%s' --json --backends reference --parallel 1,3 -p 4 -n 2 -r 1 -t 2 --membw-mib 64",
             moe);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n == 4);
    const double bpt = num(&doc, "bytes_per_token"), bw = num(&doc, "bandwidth_gb_s");
    for (size_t i = 1; i < results->n; i += 2) { /* the tg rows */
        const json_value *r = &results->items[i], *gb = json_get(r, "gb_s"), *f = json_get(r, "fraction_of_limit");
        CU_ASSERT_FATAL(gb && f);
        if (num(r, "n_seqs") == 1) {
            const double step = bpt + (4 + (2 + 1) / 2.0) * num(&doc, "kv_cache_bytes_per_token");
            VT_ASSERT_NEAR(num(r, "bytes_per_step"), step, 1e-9 * step);
            VT_ASSERT_NEAR(gb->number, num(r, "tok_s_median") * step * 1e-9, 1e-6 * gb->number);
            VT_ASSERT_NEAR(f->number, gb->number / bw, 1e-6 * f->number);
        } else {
            CU_ASSERT_EQUAL(gb->type, JSON_NULL);
            CU_ASSERT_EQUAL(f->type, JSON_NULL);
            CU_ASSERT_EQUAL(json_get(r, "bytes_per_step")->type, JSON_NULL);
        }
    }
    json_free(&doc);
}

/* Op calls of `op` under one profile section of --profile's stderr ("profile
 * [NAME]: ..." then a row per backend and op), summed over backends; -1 if
 * the section is missing. */
static long profile_calls(const char *text, const char *section, const char *op) {
    char head[128];
    snprintf(head, sizeof head, "profile [%s]:", section);
    const char *p = text ? strstr(text, head) : NULL;
    if (!p) return -1;
    const char *end = strstr(p + 1, "profile [");
    long calls = 0;
    for (p = strchr(p, '\n'); p && (!end || p < end); p = strchr(p + 1, '\n')) {
        char backend[64], name[64];
        long n;
        if (sscanf(p + 1, "%63s %63s %ld", backend, name, &n) == 3 && strcmp(name, op) == 0) calls += n;
    }
    return calls;
}

/* -d N: every timed pp and tg starts from a sequence already holding N
 * tokens, prefilled outside the timed part once per sequence (in the
 * warm-up) and cut back to them after every run, and tg's bytes per
 * step count the K/V rows its steps read: on average N + (n + 1) / 2
 * positions for each sequence (and the prompt with --parallel), beside the
 * weights once per step. */
static void test_bench_depth(void) {
    vt_model *m = NULL;
    vt_error e = {0};
    CU_ASSERT_FATAL(vt_model_load(model_path, &m, &e) == VT_OK);
    const double layers = m->hp.n_layer;
    const double kv_f16 = 2.0 * m->hp.n_layer * m->hp.n_head_kv * m->hp.head_dim * 2;
    vt_model_free(m);
    static const int seqs[2] = {1, 3};
    for (int k = 0; k < 2; k++) {
        char args[2048], *err = NULL;
        snprintf(args, sizeof args,
                 "bench -m '%s' --json --backends reference%s -p 4 -n 3 -d 20 -r 2 -t 2 --membw-mib 16 --profile",
                 model_path, seqs[k] > 1 ? " --parallel 3" : "");
        json_value doc;
        CU_ASSERT_FATAL(run_json(args, &doc, &err));
        const json_value *results = json_get(&doc, "results");
        CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n == 2);
        const double bpt = num(&doc, "bytes_per_token"), bw = num(&doc, "bandwidth_gb_s");
        for (size_t i = 0; i < 2; i++) {
            const json_value *r = &results->items[i], *test = json_get(r, "test");
            CU_ASSERT_FATAL(test && test->type == JSON_STRING);
            CU_ASSERT_STRING_EQUAL(test->str, i ? "tg3 @ d20" : "pp4 @ d20");
            CU_ASSERT_EQUAL(num(r, "n_tokens"), seqs[k] * (i ? 3 : 4)); /* the depth is not counted */
            CU_ASSERT_EQUAL(num(r, "n_depth"), 20);                      /* but said, as a number */
            CU_ASSERT(num(r, "tok_s_median") > 0);
        }
        const json_value *tg = &results->items[1];
        /* with --parallel the decode steps continue the 4-token prompts */
        const double want = bpt + seqs[k] * kv_f16 * (20 + (seqs[k] > 1 ? 4 : 0) + (3 + 1) / 2.0);
        VT_ASSERT_NEAR(num(tg, "bytes_per_step"), want, 1e-9 * want);
        const double steps = num(tg, "tok_s_median") / seqs[k];
        VT_ASSERT_NEAR(num(tg, "fraction_of_limit"), steps * want / (bw * 1e9), 1e-6 * steps * want / (bw * 1e9));
        /* profiled (from the first timed round on): two rounds, each running
         * pp (one call per layer) and 3 decode steps; the depth was computed
         * in the warm-up, before the profiler attached, and each run starts
         * from it cut back, so no timed round computes it again. (A run that
         * did not cut its sequence back would outgrow the KV cache, sized
         * for the depth and one test, and fail.) */
        const char *pp = seqs[k] > 1 ? "reference x3 pp" : "reference pp";
        const char *tgs = seqs[k] > 1 ? "reference x3 tg" : "reference tg";
        CU_ASSERT_EQUAL(profile_calls(err, "depth prefill (untimed)", "attention"), -1); /* no such section */
        CU_ASSERT_EQUAL(profile_calls(err, pp, "attention"), (long)(2 * layers));
        CU_ASSERT_EQUAL(profile_calls(err, tgs, "attention"), (long)(2 * 3 * layers));
        free(err);
        json_free(&doc);
    }
}

/* The repetitions are interleaved: with --parallel 1,2,3 there are three
 * configurations; round r runs each once, starting with configuration
 * r mod 3, so configuration c runs at position (c - r) mod 3 of round r. Each
 * configuration's median is of its own runs. */
static void test_bench_interleaves_runs(void) {
    char args[2048];
    snprintf(args, sizeof args,
             "bench -m '%s' --json --backends reference --parallel 1,2,3 -p 4 -n 2 -r 4 -t 2 --membw-mib 0",
             model_path);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const json_value *schedule = json_get(&doc, "schedule");
    CU_ASSERT(schedule && schedule->type == JSON_STRING && strcmp(schedule->str, "round-robin") == 0);
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n == 6);
    enum { N_CFG = 3, REPS = 4 };
    int seen[REPS][N_CFG] = {{0}};
    for (size_t i = 0; i < results->n; i++) {
        const json_value *r = &results->items[i];
        const int c = (int)i / 2;
        CU_ASSERT_EQUAL(num(r, "n_seqs"), c + 1);
        const json_value *pos = json_get(r, "round_positions"), *runs = json_get(r, "runs");
        CU_ASSERT_FATAL(pos && pos->type == JSON_ARRAY && pos->n == REPS);
        CU_ASSERT_FATAL(runs && runs->type == JSON_ARRAY && runs->n == REPS);
        double v[REPS];
        for (int k = 0; k < REPS; k++) {
            const int p = (int)pos->items[k].number;
            CU_ASSERT_EQUAL(p, ((c - k) % N_CFG + N_CFG) % N_CFG);
            if (p >= 0 && p < N_CFG && i % 2 == 0) seen[k][p]++;
            v[k] = runs->items[k].number;
            CU_ASSERT(v[k] > 0);
        }
        VT_ASSERT_NEAR(num(r, "tok_s_median"), vt_median(v, REPS), 1e-6 * vt_median(v, REPS));
        /* every configuration is reference: each one is its own "first" */
        VT_ASSERT_NEAR(num(r, "tok_s_ratio_to_first"), 1.0, 1e-12);
    }
    /* each round ran every configuration exactly once */
    for (int k = 0; k < REPS; k++)
        for (int p = 0; p < N_CFG; p++) CU_ASSERT_EQUAL(seen[k][p], 1);
    json_free(&doc);
}

/* A backend named twice in --backends runs on two engines of the same plan,
 * the second labelled NAME#2, each with its own runs (the in-run spread of
 * one plan); compare keeps one of each. */
static void test_bench_repeated_backend(void) {
    char args[2048];
    snprintf(args, sizeof args, "bench -m '%s' --json --backends reference,reference -p 4 -n 2 -r 2 -t 2 --membw-mib 0",
             model_path);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n == 4);
    static const char *const labels[] = {"reference", "reference", "reference#2", "reference#2"};
    for (size_t i = 0; i < results->n; i++) {
        const json_value *r = &results->items[i], *b = json_get(r, "backend");
        CU_ASSERT_FATAL(b && b->type == JSON_STRING);
        CU_ASSERT_STRING_EQUAL(b->str, labels[i]);
        CU_ASSERT(num(r, "tok_s_median") > 0);
        /* the second engine's ratio is to the first's, not to itself */
        const double want = num(r, "tok_s_median") / num(&results->items[i % 2], "tok_s_median");
        VT_ASSERT_NEAR(num(r, "tok_s_ratio_to_first"), want, 1e-9 * want);
    }
    json_free(&doc);
    snprintf(args, sizeof args, "compare -m '%s' --json --backends reference,reference -t 2 --tokens 1,2,3 -n 2",
             model_path);
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT(backends && backends->type == JSON_ARRAY && backends->n == 1);
    json_free(&doc);
}

static void test_bench_csv(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' bench -m '%s' --csv -p 8 -n 2 -r 1 --membw-mib 0 --backends reference", VT_CLI_PATH,
             model_path);
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_test_run_cmd(cmd, &out, NULL), 0);
    CU_ASSERT_FATAL(out != NULL);
    int lines = 0, header_fields = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        int fields = 1;
        for (char *c = strchr(line, ','); c; c = strchr(c + 1, ',')) fields++;
        if (lines == 0) {
            header_fields = fields;
            CU_ASSERT(strncmp(line, "model,backend,test,", 19) == 0);
            CU_ASSERT(strlen(line) > 8 && strcmp(line + strlen(line) - 8, ",n_depth") == 0); /* the last column */
        } else {
            CU_ASSERT_EQUAL(fields, header_fields);
            CU_ASSERT_PTR_NOT_NULL(strstr(line, lines == 1 ? ",reference,pp8,8," : ",reference,tg2,2,"));
            CU_ASSERT(strlen(line) > 2 && strcmp(line + strlen(line) - 2, ",0") == 0); /* no -d: depth 0 */
        }
    }
    CU_ASSERT_EQUAL(lines, 3);
    free(out);
}

/* vt compare of a mixture of experts at f32 and one narrower cache dtype,
 * reference and simd: doc gets the JSON; the rows are reference@f32,
 * reference@dtype, simd@f32, simd@dtype. simd's row at dtype, where simd
 * runs here, is "not judged" with a reason holding both texts. */
static void compare_moe_cache_rows(const char *model, const char *dtype, json_value *doc, const char *reason,
                                   const char *reason2) {
    const bool simd = vt_test_simd_expected();
    char path[1024], args[2048];
    snprintf(path, sizeof path, "%s/models/%s", vt_test_data_dir("models"), model);
    snprintf(args, sizeof args, "compare -m '%s' --json --backends %s -t 2 --kv-cache-dtype f32,%s", path,
             simd ? "reference,simd" : "reference,reference", dtype);
    CU_ASSERT_FATAL(run_json(args, doc, NULL));
    const json_value *backends = json_get(doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY && backends->n == 4);
    if (!simd) {
        printf("\n  simd is not expected on this CPU: only reference's own %s row is checked here ", dtype);
        return;
    }
    const json_value *row = &backends->items[3], *v = json_get(row, "verdict"), *why = json_get(row, "verdict_reason");
    CU_ASSERT(v && v->type == JSON_STRING && strcmp(v->str, "not judged") == 0);
    CU_ASSERT(why && why->type == JSON_STRING && strstr(why->str, reason) && strstr(why->str, reason2));
}

/* A mixture of experts whose q8_0 cache alone sends reference's tokens
 * elsewhere (a routing flip: the greedy continuation departs at once): the
 * cache's share then is as large as any error, so a row at that dtype is
 * not judged by the logits (it was "agrees" with any error up to it), and
 * says why and what judges it. */
static void test_compare_cache_share_that_moves_greedy(void) {
    json_value doc;
    compare_moe_cache_rows("qwen3moe-tiny-f32.gguf", "q8_0", &doc, "cache alone moves reference's own greedy tokens",
                           "--trace");
    /* reference's own q8_0 row departs from the baseline's greedy tokens */
    const json_value *ref_q8 = &json_get(&doc, "backends")->items[1];
    CU_ASSERT(num(ref_q8, "greedy_agree_tokens") < num(&doc, "greedy_tokens"));
    json_free(&doc);
}

/* A mixture of experts whose f16 cache alone moves reference's logits by
 * a router near-tie while its greedy tokens stay (qwen3moe-tiny-q4_k_m:
 * max|dlog| 0.435, 32/32): that share is no rounding, so a row at f16 is
 * not judged (it "agreed" within a bound the flip had inflated), saying
 * why. */
static void test_compare_cache_share_that_moves_routing(void) {
    json_value doc;
    compare_moe_cache_rows("qwen3moe-tiny-q4_k_m.gguf", "f16", &doc, "past what rounding a cache does",
                           "--trace --backends simd --kv-cache-dtype f16");
    const json_value *ref_f16 = &json_get(&doc, "backends")->items[1];
    CU_ASSERT_EQUAL(num(ref_f16, "greedy_agree_tokens"), num(&doc, "greedy_tokens"));
    CU_ASSERT(num(ref_f16, "max_abs_dlogit") > 0.1);
    json_free(&doc);
}

/* --kv-cache-dtype f32,f16,bf16: every backend, reference included, at
 * every cache dtype, each row against reference@f32 (the top-level
 * kv_cache_dtype); reference@f16 vs reference@f32 is the cache's own term,
 * recomputed here from two engines in this process. */
static void test_compare_kv_dtype_list(void) {
    const bool simd = vt_test_simd_expected();
    char args[2048];
    snprintf(args, sizeof args, "compare -m '%s' --json --backends %s -t 2 --tokens " PROMPT_IDS " -n %d "
             "--kv-cache-dtype f32,f16,bf16", model_path, simd ? "reference,simd" : "reference", N_GREEDY);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const json_value *kv = json_get(&doc, "kv_cache_dtype");
    CU_ASSERT(kv && kv->type == JSON_STRING && strcmp(kv->str, "f32") == 0);
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY);
    CU_ASSERT_EQUAL_FATAL(backends->n, simd ? 6 : 3);
    static const char *const names[] = {"reference", "reference", "reference", "simd", "simd", "simd"};
    static const char *const dtypes[] = {"f32", "f16", "bf16", "f32", "f16", "bf16"};
    for (size_t i = 0; i < backends->n; i++) {
        const json_value *name = json_get(&backends->items[i], "name");
        const json_value *d = json_get(&backends->items[i], "kv_cache_dtype");
        CU_ASSERT_FATAL(name && d && name->type == JSON_STRING && d->type == JSON_STRING);
        CU_ASSERT_STRING_EQUAL(name->str, names[i]);
        CU_ASSERT_STRING_EQUAL(d->str, dtypes[i]);
        CU_ASSERT(num(&backends->items[i], "max_abs_dlogit") >= num(&backends->items[i], "mean_abs_dlogit"));
    }
    /* the baseline against itself is exact; a narrower cache moves the
     * logits, bf16 (8 bits of mantissa) more than f16 (11) */
    const double ref_f32 = num(&backends->items[0], "max_abs_dlogit"), ref_f16 = num(&backends->items[1], "max_abs_dlogit"),
                 ref_bf16 = num(&backends->items[2], "max_abs_dlogit");
    CU_ASSERT_EQUAL(ref_f32, 0.0);
    CU_ASSERT(ref_f16 > 0.0);
    CU_ASSERT(ref_bf16 > ref_f16);

    /* the KV term, recomputed: reference with an f16 cache against reference with an f32 cache */
    int32_t V = 0, V2 = 0;
    double spread = 0, spread2 = 0;
    float *base = engine_logits_kv("reference", VT_F32, &V, &spread);
    float *at_f16 = engine_logits_kv("reference", VT_F16, &V2, &spread2);
    double mx = 0;
    for (int64_t i = 0; i < (int64_t)N_PROMPT * V; i++) mx = fmax(mx, fabs((double)at_f16[i] - base[i]));
    VT_ASSERT_NEAR(ref_f16, mx, 1e-9 * fmax(1.0, mx) + 1e-6 * mx);
    free(base);
    free(at_f16);
    json_free(&doc);

    /* one dtype: the old shape, each entry at that dtype, the baseline too */
    snprintf(args, sizeof args, "compare -m '%s' --json --backends reference -t 2 --tokens 1,2,3 -n 2 "
             "--kv-cache-dtype bf16", model_path);
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    kv = json_get(&doc, "kv_cache_dtype");
    CU_ASSERT(kv && kv->type == JSON_STRING && strcmp(kv->str, "bf16") == 0);
    backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY && backends->n == 1);
    kv = json_get(&backends->items[0], "kv_cache_dtype");
    CU_ASSERT(kv && kv->type == JSON_STRING && strcmp(kv->str, "bf16") == 0);
    json_free(&doc);

    /* the text table: one row per backend x dtype, the dtype in column kv */
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' compare -m '%s' --backends reference -t 2 --tokens 1,2,3 -n 2 "
             "--kv-cache-dtype f32,f16,bf16,q8_0", VT_CLI_PATH, model_path); /* all four: the longest list */
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, NULL), 0);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nbackend    kv "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nreference  f32             0 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nreference  f16 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nreference  bf16 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nreference  q8_0 "));
    free(out);
}

/* --backends NAME:key=value: an entry with its own backend options, beside
 * the same backend without them, in one run; an option the backend refuses
 * fails that entry alone, with the backend's reason. */
static void test_bench_entry_options(void) {
    if (!vt_test_simd_expected()) return;
    char args[2048];
    snprintf(args, sizeof args,
             "bench -m '%s' --json --backends simd,simd:isa=avx2,simd:frob=1 -p 4 -n 2 -r 1 -t 2 --membw-mib 0",
             model_path);
    char cmd[4096], *out = NULL, msg[256] = "";
    snprintf(cmd, sizeof cmd, "'%s' %s", VT_CLI_PATH, args);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, NULL), 5); /* one entry failed, a backend's refusal: the run says so */
    json_value doc;
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    free(out);
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n == 5);
    static const char *const labels[] = {"simd", "simd", "simd:isa=avx2", "simd:isa=avx2", "simd:frob=1"};
    for (size_t i = 0; i < results->n; i++) {
        const json_value *r = &results->items[i], *b = json_get(r, "backend"), *isa = json_get(r, "isa");
        CU_ASSERT_FATAL(b && b->type == JSON_STRING);
        CU_ASSERT_STRING_EQUAL(b->str, labels[i]);
        if (i < 4) {
            CU_ASSERT(num(r, "tok_s_median") > 0);
            CU_ASSERT_FATAL(isa && isa->type == JSON_STRING);
            if (i >= 2) CU_ASSERT_STRING_EQUAL(isa->str, "simd avx2"); /* the entry's option reached its engine */
        } else {
            const json_value *e = json_get(r, "error"), *status = json_get(r, "status");
            CU_ASSERT(status && status->type == JSON_STRING &&
                      strcmp(status->str, vt_status_name(VT_ERR_BACKEND)) == 0); /* the backend refused */
            /* its reason reaches the entry */
            CU_ASSERT(e && e->type == JSON_STRING && strstr(e->str, "unknown option 'frob'"));
            /* the refusal names where the option was written */
            CU_ASSERT(e && e->type == JSON_STRING && strstr(e->str, "--backends simd:frob=1") &&
                      !strstr(e->str, "--backend-option"));
        }
    }
    json_free(&doc);
}

/* vt compare takes the same entries: simd at its best tier and at avx2 are
 * two rows of one comparison, and (the tiers being bit for bit equal) the
 * same rows; --trace names each entry. */
static void test_compare_entry_options(void) {
    if (!vt_test_simd_expected()) return;
    char args[2048];
    snprintf(args, sizeof args, "compare -m '%s' --json --backends simd,simd:isa=avx2 -t 2 --tokens 1,2,3,4 -n 4",
             model_path);
    json_value doc;
    CU_ASSERT_FATAL(run_json(args, &doc, NULL));
    const json_value *backends = json_get(&doc, "backends");
    CU_ASSERT_FATAL(backends && backends->type == JSON_ARRAY && backends->n == 3);
    const json_value *a = &backends->items[1], *b = &backends->items[2];
    const json_value *na = json_get(a, "name"), *nb = json_get(b, "name");
    CU_ASSERT_FATAL(na && nb && na->type == JSON_STRING && nb->type == JSON_STRING);
    CU_ASSERT_STRING_EQUAL(na->str, "simd");
    CU_ASSERT_STRING_EQUAL(nb->str, "simd:isa=avx2");
    CU_ASSERT_EQUAL(num(a, "max_abs_dlogit"), num(b, "max_abs_dlogit"));
    CU_ASSERT_EQUAL(num(a, "greedy_agree_tokens"), num(b, "greedy_agree_tokens"));
    /* each row names what its backend ran at: the entry's own tier */
    const json_value *ia = json_get(json_get(a, "isa_by_backend"), "simd");
    const json_value *ib = json_get(json_get(b, "isa_by_backend"), "simd");
    CU_ASSERT_FATAL(ia && ib && ia->type == JSON_STRING && ib->type == JSON_STRING);
    CU_ASSERT_STRING_EQUAL(ib->str, "avx2");
    CU_ASSERT_STRING_EQUAL(ia->str, simd_isa_expected() + strlen("simd "));
    json_free(&doc);
    char cmd[2048], *out = NULL;
    /* and the text says it under "runs on", the longer label aligned */
    snprintf(cmd, sizeof cmd, "'%s' compare -m '%s' --backends simd,simd:isa=avx2 -t 2 --tokens 1,2,3 -n 2",
             VT_CLI_PATH, model_path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, NULL), 0);
    CU_ASSERT(out && strstr(out, "runs on (instruction set)") && strstr(out, "\nsimd:isa=avx2 simd avx2\n"));
    free(out);
    out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' compare --trace -m '%s' --backends simd:isa=avx2 -t 2 --tokens 1,2,3 -n 2",
             VT_CLI_PATH, model_path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, NULL), 0);
    CU_ASSERT(out && strstr(out, "no divergence: simd:isa=avx2 ("));
    free(out);
}

/* Entries are labelled by their full text: two entries whose options differ
 * only past the 31st character are two labels (the reference backend
 * refuses both unknown options, and bench reports each under its own
 * label, naming --backends as where the option was written), and a label
 * that would still be shared (an option value ending in what a repeat's
 * "#2" adds) is refused before anything runs, naming both entries. */
static void test_entry_labels_never_collide(void) {
    static const char key[] = "a_key_longer_than_thirty_one_characters";
    char args[2048], cmd[4096], *out = NULL, *err = NULL, msg[256] = "";
    snprintf(args, sizeof args,
             "bench -m '%s' --json --backends reference:%s=1,reference:%s=2 -p 4 -n 2 -r 1 -t 2 --membw-mib 0",
             model_path, key, key);
    snprintf(cmd, sizeof cmd, "'%s' %s", VT_CLI_PATH, args);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, NULL), 5); /* both entries fail, refused by the backend: the run says so */
    json_value doc;
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    free(out);
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n == 2);
    for (size_t i = 0; i < results->n; i++) {
        char label[256];
        snprintf(label, sizeof label, "reference:%s=%zu", key, i + 1);
        const json_value *b = json_get(&results->items[i], "backend"), *e = json_get(&results->items[i], "error");
        const json_value *status = json_get(&results->items[i], "status");
        CU_ASSERT_FATAL(b && b->type == JSON_STRING);
        CU_ASSERT_STRING_EQUAL(b->str, label);
        CU_ASSERT(status && status->type == JSON_STRING && strcmp(status->str, vt_status_name(VT_ERR_BACKEND)) == 0);
        char where[300];
        snprintf(where, sizeof where, "--backends %s", label);
        CU_ASSERT(e && e->type == JSON_STRING && strstr(e->str, where) && !strstr(e->str, "--backend-option"));
    }
    json_free(&doc);
    snprintf(cmd, sizeof cmd,
             "'%s' bench -m '%s' --json --backends reference:x=1,reference:x=1,reference:x=1#2 -p 4 -n 2 -r 1 "
             "--membw-mib 0",
             VT_CLI_PATH, model_path);
    int rc = vt_test_run_cmd(cmd, NULL, &err);
    CU_ASSERT_EQUAL(rc, 2); /* refused as a bad argument, before anything runs */
    CU_ASSERT(err && strstr(err, "entries 2 (reference:x=1) and 3 (reference:x=1#2)") &&
              strstr(err, "'reference:x=1#2'"));
    if (err && !strstr(err, "entries 2")) fprintf(stderr, "%s\n", err);
    free(err);
}

/* Each refusal exits with the CLI's code for its status (core/cli/cli.c: 2
 * invalid, 3 context full, 5 backend) and says why on stderr. */
static void test_bad_flags_are_errors(void) {
    char cmd[2048];
    static const struct {
        const char *args;
        int rc;
    } bad[] = {
        {"bench -m '%s' -r 0", 2},                          /* out of range */
        {"bench -m '%s' --json --csv", 2},                  /* exclusive */
        {"bench -m '%s' --parallel 2,0", 2},                /* a number of sequences out of range */
        {"bench -m '%s' --parallel 4x", 2},                 /* not a list of numbers */
        {"bench -m '%s' -p 8 -n 4 -d 100 -c 64", 3},        /* the depth and the run overflow the cache */
        {"bench -m '%s' -d -1", 2},                         /* out of range */
        {"compare -m '%s' --backends nosuch", 2},           /* a name no backend has: a bad argument */
        {"compare -m '%s' --backend simd", 2},              /* singular flag on a multi-backend command */
        {"compare -m '%s' -n 8 -c 4 --tokens 1,2", 3},      /* KV cache too small for the run */
        {"compare -m '%s' --kv-cache-dtype f32,q4_0", 2},   /* not a cache dtype */
        {"compare -m '%s' --kv-cache-dtype f32,", 2},       /* an empty name in the list */
        {"bench -m '%s' --backends simd:isa", 2},           /* an entry's option that is not key=value */
        {"bench -m '%s' --backends auto:isa=avx2", 2},      /* auto takes no options */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char args[1024];
        snprintf(args, sizeof args, bad[i].args, model_path);
        snprintf(cmd, sizeof cmd, "'%s' %s", VT_CLI_PATH, args);
        char *err = NULL;
        int rc = vt_test_run_cmd(cmd, NULL, &err);
        if (rc != bad[i].rc) fprintf(stderr, "\n%s: exit %d, want %d: %s", args, rc, bad[i].rc, err ? err : "");
        CU_ASSERT_EQUAL(rc, bad[i].rc);
        CU_ASSERT(err && err[0] != '\0');
        free(err);
    }
}

static void test_synth_cli(void) {
    char path[512], cmd[2048];
    vt_test_tmpfile(path, sizeof path, "cli-llama.gguf");
    snprintf(cmd, sizeof cmd,
             "'%s' synth --arch llama --n-embd 64 --n-layer 3 --n-head 4 --n-head-kv 2 --n-ff 96 --vocab 300 "
             "--type q8_0 --seed 3 -o '%s'",
             VT_CLI_PATH, path);
    char *err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 0);
    CU_ASSERT(err && strstr(err, "wrote") != NULL);
    free(err);
    vt_model *m = NULL;
    vt_error e = {0};
    CU_ASSERT_FATAL(vt_model_load(path, &m, &e) == VT_OK);
    CU_ASSERT_STRING_EQUAL(m->hp.arch_name, "llama");
    CU_ASSERT_EQUAL(m->hp.n_embd, 64);
    CU_ASSERT_EQUAL(m->hp.n_layer, 3);
    CU_ASSERT_EQUAL(m->hp.n_head, 4);
    CU_ASSERT_EQUAL(m->hp.n_head_kv, 2);
    CU_ASSERT_EQUAL(m->hp.head_dim, 16);
    CU_ASSERT_EQUAL(m->hp.n_ff, 96);
    CU_ASSERT_EQUAL(m->hp.n_vocab, 300);
    CU_ASSERT_EQUAL(m->layers[0].wq->dtype, VT_Q8_0);
    vt_model_free(m);

    /* a named shape, one field overridden */
    vt_test_tmpfile(path, sizeof path, "cli-tiny.gguf");
    snprintf(cmd, sizeof cmd, "'%s' synth --shape tiny --n-layer 1 --type f16 -o '%s'", VT_CLI_PATH, path);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, NULL), 0);
    CU_ASSERT_FATAL(vt_model_load(path, &m, &e) == VT_OK);
    CU_ASSERT_STRING_EQUAL(m->hp.arch_name, "qwen3");
    CU_ASSERT_EQUAL(m->hp.n_embd, 256);
    CU_ASSERT_EQUAL(m->hp.n_layer, 1);
    CU_ASSERT_EQUAL(m->layers[0].wq->dtype, VT_F16);
    vt_model_free(m);

    /* a mixture of experts from explicit sizes (--n-ff optional) */
    vt_test_tmpfile(path, sizeof path, "cli-moe.gguf");
    snprintf(cmd, sizeof cmd,
             "'%s' synth --arch qwen3moe --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-expert 4 "
             "--n-expert-used 2 --n-ff-exp 32 --type f32 -o '%s'",
             VT_CLI_PATH, path);
    err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 0);
    CU_ASSERT(err && strstr(err, "4 experts (2 used) of 32") != NULL);
    CU_ASSERT(err && strstr(err, "(matrices: ") != NULL);
    free(err);
    /* rows that fit no K-quant block (100 values) are written F16, and the
     * summary says so rather than only naming the mix */
    char odd[1024];
    vt_test_tmpfile(odd, sizeof odd, "cli-moe-odd.gguf");
    snprintf(cmd, sizeof cmd,
             "'%s' synth --arch qwen3moe --n-embd 200 --n-layer 1 --n-head 2 --n-head-kv 1 --n-expert 4 "
             "--n-expert-used 2 --n-ff-exp 100 --vocab 300 --type q4_k_m -o '%s'",
             VT_CLI_PATH, odd);
    err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 0);
    CU_ASSERT(err && strstr(err, "q4_k_m (matrices: 1 f32, 9 f16)") != NULL);
    if (err && !strstr(err, "q4_k_m (matrices: 1 f32, 9 f16)")) fprintf(stderr, "\n%s\n", err);
    free(err);
    unlink(odd);
    CU_ASSERT_FATAL(vt_model_load(path, &m, &e) == VT_OK);
    CU_ASSERT_STRING_EQUAL(m->hp.arch_name, "qwen3moe");
    CU_ASSERT(m->hp.n_expert == 4 && m->hp.n_expert_used == 2 && m->hp.n_ff_exp == 32);
    CU_ASSERT_EQUAL(m->hp.n_ff, 64); /* no --n-ff: the chosen experts' width, 2 x 32 */
    CU_ASSERT(m->layers[1].ffn_up_exps && m->layers[1].ffn_up_exps->ne[1] == 32 && !m->layers[1].ffn_up);
    vt_model_free(m);
    /* the expert flags are checked, and the error names the flag */
    static const struct {
        const char *args, *says;
    } moe_bad[] = {
        {"--n-expert 4 --n-expert-used 5 --n-ff-exp 32", "--n-expert-used"},
        {"--n-expert 4 --n-expert-used 0 --n-ff-exp 32", "--n-expert-used"},
        {"--n-expert-used 2 --n-ff-exp 32", "--n-expert is required"},
        {"--n-expert 4 --n-expert-used 2", "--n-ff-exp is required"},
        /* more experts than vt loads: refused before anything is written */
        {"--n-expert 1024 --n-expert-used 2 --n-ff-exp 32", "--n-expert 1024: expected an integer in 1..512"},
    };
    for (size_t i = 0; i < sizeof moe_bad / sizeof *moe_bad; i++) {
        snprintf(cmd, sizeof cmd,
                 "'%s' synth --arch qwen3moe --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 96 %s "
                 "-o /dev/null",
                 VT_CLI_PATH, moe_bad[i].args);
        err = NULL;
        CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 2);
        if (!err || !strstr(err, moe_bad[i].says)) fprintf(stderr, "\n%s: %s\n", moe_bad[i].args, err ? err : "");
        CU_ASSERT(err && strstr(err, moe_bad[i].says) != NULL);
        free(err);
    }
    snprintf(cmd, sizeof cmd, "'%s' synth --shape tiny --n-expert 4 -o /dev/null", VT_CLI_PATH);
    err = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 2);
    CU_ASSERT(err && strstr(err, "--n-expert needs --arch qwen3moe") != NULL);
    free(err);

    /* errors: no -o, no shape and no sizes, an unknown type, a folder that is not there */
    const char *bad[] = {"synth --shape tiny", "synth --arch qwen3 -o /dev/null",
                         "synth --shape tiny --type q3_k -o /dev/null", "synth --shape huge -o /dev/null",
                         "synth --shape tiny -o /nonexistent-vt-folder/x.gguf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(cmd, sizeof cmd, "'%s' %s", VT_CLI_PATH, bad[i]);
        CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, NULL), 2);
    }
}

/* The profiler in-process: the wrapped tables forward every call exactly
 * (bit-identical logits), and count each node of the plan once per call. */
static void test_profiler_forwards_and_counts(void) {
    vt_error err = {0};
    vt_model *m = NULL;
    vt_engine *e = NULL;
    CU_ASSERT_FATAL(vt_model_load(model_path, &m, &err) == VT_OK);
    vt_options opt;
    vt_options_defaults(&opt);
    opt.threads = 2;
    opt.ctx_size = 32;
    CU_ASSERT_FATAL(vt_engine_create(&opt, m, false, &e, &err) == VT_OK);
    int32_t ids[5] = {3, 1, 4, 1, 5};
    int32_t V = m->hp.n_vocab;
    CU_ASSERT_FATAL(vt_engine_eval(e, ids, 5, false, &err) == VT_OK);
    float *plain = malloc((size_t)V * sizeof *plain);
    CU_ASSERT_FATAL(plain != NULL);
    memcpy(plain, vt_engine_logits(e, 0), (size_t)V * sizeof *plain);

    vt_profiler *p = NULL;
    CU_ASSERT_FATAL(vt_profiler_create(&p, &err) == VT_OK);
    CU_ASSERT_FATAL(vt_profiler_attach(p, e->registry, &err) == VT_OK);
    CU_ASSERT_FATAL(vt_profiler_section(p, "run", &err) == VT_OK);
    vt_engine_reset(e);
    CU_ASSERT_FATAL(vt_engine_eval(e, ids, 5, false, &err) == VT_OK);
    CU_ASSERT_EQUAL(memcmp(plain, vt_engine_logits(e, 0), (size_t)V * sizeof *plain), 0);
    int32_t next = 2;
    CU_ASSERT_FATAL(vt_engine_eval(e, &next, 1, true, &err) == VT_OK);

    /* expected calls per (backend, op): prefill nodes + decode nodes */
    for (int b = 0; b < vt_registry_count(e->registry); b++) {
        const vt_backend_entry *be = vt_registry_at(e->registry, b);
        if (be->state != VT_BACKEND_LOADED) continue;
        for (int op = 0; op < VT_OP_COUNT; op++) {
            uint64_t want = 0;
            for (int i = 0; i < e->prefill->n_nodes; i++)
                want += e->prefill->nodes[i].backend == b && e->prefill->nodes[i].op == op;
            for (int i = 0; i < e->decode->n_nodes; i++)
                want += e->decode->nodes[i].backend == b && e->decode->nodes[i].op == op;
            vt_profile_stat st = vt_profiler_get(p, "run", be->name, op);
            CU_ASSERT_EQUAL(st.calls, want);
            if (want) CU_ASSERT(st.ns > 0);
            /* nothing was counted before the section began */
            CU_ASSERT_EQUAL(vt_profiler_get(p, "all", be->name, op).calls, 0);
        }
    }
    /* attaching a second registry of the same process reuses the wrapped tables */
    CU_ASSERT_EQUAL(vt_profiler_attach(p, e->registry, &err), VT_OK);
    free(plain);
    vt_engine_free(e);
    vt_profiler_free(p);
    vt_model_free(m);
}

/* The bandwidth probe: a positive figure from any buffer size it accepts,
 * and a clear refusal of sizes too small to mean anything. The value itself
 * depends on the machine and its load, so only its sanity is checked. */
static void test_membw(void) {
    vt_threadpool *pool = NULL;
    vt_error err = {0};
    CU_ASSERT_FATAL(vt_threadpool_create(2, &pool, &err) == VT_OK);
    double gb_s = 0;
    CU_ASSERT_EQUAL(vt_membw_measure(pool, (size_t)1 << 20, 3, &gb_s, &err), VT_OK);
    CU_ASSERT(gb_s > 0.01 && gb_s < 100000);
    CU_ASSERT_EQUAL(vt_membw_measure(pool, 1024, 3, &gb_s, &err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(gb_s, 0.0);
    CU_ASSERT_EQUAL(vt_membw_measure(pool, (size_t)1 << 20, 0, &gb_s, &err), VT_ERR_INVALID);
    vt_threadpool_destroy(pool);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"compare --json: reference vs itself is exact, others close, node counts match the plans",
         test_compare_json},
        {"compare --ppl: chunked perplexity, backends agree within 1%", test_compare_perplexity},
        {"compare --profile counts every op call of both plans", test_compare_profile_counts_every_op_call},
        {"compare and bench report a backend whose plan fails and measure the rest", test_compare_reports_a_failing_backend},
        {"compare without -m synthesizes a cached default model", test_compare_default_model_is_cached},
        {"compare: a cache dtype that moves reference's greedy tokens leaves its rows not judged",
         test_compare_cache_share_that_moves_greedy},
        {"compare: a cache dtype that moves a mixture of experts' routing leaves its rows not judged",
         test_compare_cache_share_that_moves_routing},
        {"compare --kv-cache-dtype f32,f16,bf16: every backend at every cache dtype vs reference@f32",
         test_compare_kv_dtype_list},
        {"bench --json: sizes, medians, stdev, fraction of the bandwidth limit", test_bench_json},
        {"bench --parallel --json: n_seqs, aggregate and per-sequence rates", test_bench_parallel_json},
        {"bench --parallel on a mixture of experts: no step bytes past one sequence",
         test_bench_parallel_moe_has_no_step_bytes},
        {"bench interleaves configurations round-robin, medians per configuration", test_bench_interleaves_runs},
        {"bench --backends NAME,NAME: two engines of one plan, the second labelled NAME#2",
         test_bench_repeated_backend},
        {"bench --csv: header and one row per test", test_bench_csv},
        {"bench -d N: pp and tg from a sequence of N tokens, filled untimed; K/V reads in the step bytes",
         test_bench_depth},
        {"bench --backends NAME:key=value: an entry with its own backend options", test_bench_entry_options},
        {"compare --backends NAME:key=value: the entry's options reach its engine", test_compare_entry_options},
        {"--backends entries never share a label", test_entry_labels_never_collide},
        {"bad flags are errors with a message", test_bad_flags_are_errors},
        {"synth CLI: explicit sizes and named shapes load back", test_synth_cli},
        {"profiler forwards calls exactly and counts each node", test_profiler_forwards_and_counts},
        {"membw measures a positive bandwidth, refuses tiny buffers", test_membw},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("compare_bench", suite_init, NULL, tests);
    return vt_test_run();
}
