/* cmd_bench.c — `vt bench`: prefill and decode throughput per backend, in
 * the manner of llama-bench (pp = one prefill of -p tokens on a fresh
 * sequence, tg = -n decode steps from an empty one; a warm-up, then -r
 * repetitions; median and sample stdev), next to the memory read bandwidth
 * measured in the same run: decoding reads every weight once per token, so
 * tg tok/s x bytes per token / bandwidth says how close a backend gets to
 * what the memory allows.
 *
 * --parallel S1,S2,... (llama-batched-bench style): for each number of
 * sequences S, S prompts of -p tokens are prefilled (pp: S x p tokens in
 * steps of at most -b tokens), then -n decode steps of S tokens continue them
 * (tg: S x n tokens; tokens/s aggregate and per sequence). A decode step of S
 * tokens reads the weights once, so the bandwidth limit is per step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "backend_set.h"
#include "cli.h"
#include "json_out.h"
#include "kv_cache.h"
#include "machine.h"
#include "membw.h"
#include "metrics.h"
#include "profiler.h"
#include "progress.h"
#include "quant.h"

/* Sequences one --parallel entry may ask for. */
#define VT_BENCH_MAX_SEQS 256
/* Entries of a --parallel list. */
#define VT_BENCH_MAX_PARALLEL 16

static void help(FILE *f) {
    fprintf(f, "usage: vt bench -m MODEL [--backends LIST|all] [-p N] [-n N] [-d N] [-r N] [-t N] [--kv-cache-dtype D]\n"
               "                [--parallel LIST] [--json | --csv] [--profile] [--membw-mib N] [options]\n\n"
               "Prefill (pp: one call of -p tokens on a fresh sequence) and decode (tg: -n single-token steps from\n"
               "an empty sequence) tokens/s per backend: a warm-up, then -r repetitions; median and stdev. The\n"
               "repetitions are interleaved: each round runs every backend (and --parallel entry) once, round r\n"
               "starting with the r-th, so a drift of the machine's speed hits all alike. Also the\n"
               "model size, parameters, bytes of weights read per decoded token, the machine's read bandwidth\n"
               "measured in the same run, and tg as a fraction of that bandwidth limit.\n\n"
               "      --backends LIST      comma-separated backends (auto among them: each node where it measured\n"
               "                           fastest), or all (default: every loaded backend but reference,\n"
               "                           the slow oracle); a backend named twice gets two engines\n"
               "                           (the second's results labelled NAME#2): the spread of one plan,\n"
               "                           measured in the same run; NAME:key=value[:key=value] runs NAME\n"
               "                           with those backend options (simd,simd:isa=avx2: two tiers side by side)\n"
               "  -p, --n-prompt N         prefill tokens (default 512; 0 = skip pp)\n"
               "  -n, --n-gen N            decode steps (default 128; 0 = skip tg)\n"
               "  -d, --depth N            start pp and tg from a sequence already holding N tokens, not timed:\n"
               "                           prefilled once per sequence, each run cut back to them (tests named\n"
               "                           \"pp512 @ d4096\"): what a chat's later turn costs (default 0)\n"
               "  -r, --repetitions N      timed repetitions (default 5)\n"
               "      --parallel LIST      numbers of sequences, e.g. 1,2,4,8: S prompts of -p tokens prefilled\n"
               "                           together, then -n decode steps of S tokens (aggregate and per-sequence\n"
               "                           tokens/s); without it one sequence, tg from an empty one\n"
               "      --json, --csv        machine-readable output (default: a table; both add each median's ratio\n"
               "                           to the first backend's, JSON where each run fell in its round)\n"
               "      --profile            per-op time, calls and share per backend and test (pp, tg) over the\n"
               "                           timed runs, on stderr\n"
               "      --membw-mib N        size of each of the two bandwidth buffers (default 256; 0 = skip)\n\n"
               "Engine options (--backends takes the place of --backend):\n");
    static const char *const not_here[] = {"--backend", "--special", NULL};
    vt_cli_common_help_except(f, not_here);
}

typedef struct bench_result {
    char backend[96]; /* the --backends entry: NAME, NAME:key=value..., NAME#K */
    char test[32];     /* "pp512", "tg128" */
    bool is_tg;
    int32_t n_seqs;    /* sequences per step (--parallel), 1 without */
    int64_t n_tokens;
    double *runs;      /* [reps] tokens/s */
    int *order;        /* [reps] position of this configuration's run in each round (0: ran first) */
    double median, stdev;
    double ratio;      /* median / the first backend's at the same test and n_seqs; NAN: none */
    char error[VT_ERROR_MSG_SIZE]; /* non-empty: the backend failed; no figures */
    vt_status status;              /* error set: the failure's status */
    /* --backends auto: what placing by measured cost took at engine
     * creation (not part of the timed runs) */
    bool is_auto;
    double calibration_seconds;
    int calibration_measured; /* (class, backend) times measured now */
    bool calibration_cache_hit;
    double create_seconds;         /* the engine's creation, weight preparation included */
    size_t prepared_bytes;         /* weights its backends prepared (ABI 1.2), all backends */
    char prepared[256];            /* the same per backend: "simd 12.0 MiB (196 tensors)" or "none" */
    size_t released_bytes;         /* of the file's mapping, tensors only prepared copies read */
    size_t shared_bytes;           /* weights nodes of several backends read: the file's layout, unprepared */
    int shared_tensors;
    char isa[2 * VT_BACKEND_ISA_MAX]; /* each backend its plans run on, with the instruction set it runs at */
} bench_result;

/* The process's peak resident set so far (getrusage; Linux reports KiB). */
static size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0) return 0;
    return (size_t)ru.ru_maxrss * 1024u;
}

typedef struct bench_job {
    const vt_cli_common *c;
    vt_model *model;
    int64_t n_prompt, n_gen, reps;
    int64_t depth;         /* tokens every sequence holds before a timed pp or tg */
    bool parallel;     /* --parallel given: pp and tg of S sequences, tg after the prompts */
    int32_t *tokens;   /* [max(n_prompt, n_gen)] random ids */
    int32_t *depth_tokens; /* [depth] random ids, other than tokens' */
    vt_profiler *profiler;
    vt_progress *bar;
    size_t peak_rss_bytes; /* the process's resident high-water mark once every run is done */
    vt_machine machine;    /* what every figure was measured on */
} bench_job;

/* With --profile, the op calls from now on count under "BACKEND [xS] TEST":
 * prefill and decode apart, so a decode step's cost is read directly, not
 * as the difference of two runs. */
static vt_status profile_phase(bench_job *job, const char *backend, int32_t S, const char *test, vt_error *err) {
    if (!job->profiler) return VT_OK;
    char name[64];
    if (job->parallel) snprintf(name, sizeof name, "%s x%d %s", backend, (int)S, test);
    else snprintf(name, sizeof name, "%s %s", backend, test);
    return vt_profiler_section(job->profiler, name, err);
}

/* With --profile, the depth's prefill counts apart from every timed run, in
 * one section for all backends. */
static vt_status depth_phase(bench_job *job, vt_error *err) {
    return job->profiler ? vt_profiler_section(job->profiler, "depth prefill (untimed)", err) : VT_OK;
}

/* Whether sequence seq holds the depth from an earlier run, cut back to
 * it. Every run appends its own tokens after the depth's (each sequence its
 * own ids, always the same ones), so a sequence holding at least the depth
 * begins with it; cut back, it holds what a fresh prefill of the depth would
 * leave, and the depth is computed once per sequence of an engine rather
 * than before every run (at a depth of thousands of tokens, most of the
 * bench's time). */
static bool keeps_depth(const bench_job *job, vt_engine *e, int32_t seq) {
    return job->depth > 0 && vt_engine_seq_len(e, seq) >= job->depth && vt_engine_seq_truncate(e, seq, job->depth);
}

/* The untimed part of a run: sequence 0 holding just the depth's tokens
 * (computed here unless it holds them already; op calls counted apart,
 * under "depth"), then the section the timed part counts under. */
static vt_status start_at_depth(bench_job *job, vt_engine *e, const char *backend, const char *test, vt_error *err) {
    vt_status st = VT_OK;
    if (!keeps_depth(job, e, 0)) {
        vt_engine_reset(e);
        if (job->depth > 0) {
            st = depth_phase(job, err);
            if (st == VT_OK) st = vt_engine_eval(e, job->depth_tokens, job->depth, false, err);
            vt_progress_add(job->bar, (double)job->depth);
        }
    }
    return st == VT_OK ? profile_phase(job, backend, 1, test, err) : st;
}

/* One prefill of n_prompt tokens on a fresh sequence (or one holding the
 * depth): tokens/s. */
static vt_status run_pp(bench_job *job, vt_engine *e, const char *backend, double *tok_s, vt_error *err) {
    vt_status st = start_at_depth(job, e, backend, "pp", err);
    if (st != VT_OK) return st;
    double t0 = vt_cli_now();
    st = vt_engine_eval(e, job->tokens, job->n_prompt, false, err);
    double t = vt_cli_now() - t0;
    *tok_s = t > 0 ? (double)job->n_prompt / t : NAN;
    return st;
}

/* n steps of one token each through the decode plan, from an empty sequence
 * (or one holding the depth). */
static vt_status run_tg(bench_job *job, vt_engine *e, const char *backend, int64_t n, double *tok_s, vt_error *err) {
    vt_status st = start_at_depth(job, e, backend, "tg", err);
    double t0 = vt_cli_now();
    for (int64_t k = 0; k < n && st == VT_OK; k++) st = vt_engine_eval(e, &job->tokens[k], 1, true, err);
    double t = vt_cli_now() - t0;
    *tok_s = t > 0 ? (double)n / t : NAN;
    return st;
}

/* S fresh sequences: their prompts of n_prompt tokens in steps of at most
 * the prefill plan's size (whole prompts side by side, the last one split if
 * it does not fit), then n_gen decode steps of S tokens. Aggregate tokens/s
 * of each phase. */
/* Sequence s's ids for base[0..n): its own tokens, as another conversation
 * has (the same ids would let the prefix cache keep one copy of every block
 * for all sequences, and each step read it once: not what S conversations
 * cost). Sequence 0's are base's; the others' are written into out. */
static const int32_t *sequence_ids(const bench_job *job, const int32_t *base, int32_t s, int64_t n, int32_t *out) {
    if (s == 0) return base;
    const int64_t V = job->model->hp.n_vocab;
    for (int64_t i = 0; i < n; i++) out[i] = (int32_t)(((int64_t)base[i] + (int64_t)s * 7919) % V);
    return out;
}

static vt_status run_parallel(bench_job *job, const char *backend, vt_engine *e, int32_t S, int64_t n_gen,
                              double *pp_tok_s, double *tg_tok_s, vt_error *err) {
    /* every sequence of the shared engine holding the depth or nothing,
     * those another entry's run left too: each run starts from the same
     * cache */
    bool has_depth[VT_BENCH_MAX_SEQS] = {false};
    for (int32_t s = 0; s < vt_engine_max_seqs(e) && s < VT_BENCH_MAX_SEQS; s++)
        if (!(has_depth[s] = keeps_depth(job, e, s))) vt_engine_seq_release(e, s);
    vt_step_entry entries[VT_BENCH_MAX_SEQS];
    const int64_t budget = vt_engine_max_step_tokens(e);
    /* one step's ids: at most budget prompt tokens, or one token a sequence */
    int32_t *ids = malloc((size_t)(budget > S ? budget : S) * sizeof *ids);
    if (!ids) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    vt_status st = VT_OK;
    /* the depth, untimed: each sequence its own, where it lacks it */
    if (job->depth > 0) st = depth_phase(job, err);
    for (int32_t s = 0; s < S && st == VT_OK; s++) {
        if (has_depth[s]) continue;
        for (int64_t filled = 0; filled < job->depth && st == VT_OK;) {
            const int64_t chunk = job->depth - filled < budget ? job->depth - filled : budget;
            entries[0] = (vt_step_entry){s, sequence_ids(job, job->depth_tokens + filled, s, chunk, ids), chunk, false, false};
            st = vt_engine_step(e, entries, 1, err);
            filled += chunk;
        }
        vt_progress_add(job->bar, (double)job->depth);
    }
    if (st == VT_OK) st = profile_phase(job, backend, S, "pp", err);
    int64_t done[VT_BENCH_MAX_SEQS] = {0};
    double t0 = vt_cli_now();
    for (int32_t first = 0; first < S && st == VT_OK && job->n_prompt > 0;) {
        int32_t n = 0;
        int64_t room = budget;
        for (int32_t s = first; s < S && room > 0; s++) {
            const int64_t chunk = job->n_prompt - done[s] < room ? job->n_prompt - done[s] : room;
            const int32_t *t = sequence_ids(job, job->tokens + done[s], s, chunk, ids + (budget - room));
            entries[n++] = (vt_step_entry){s, t, chunk, done[s] + chunk == job->n_prompt, false};
            room -= chunk;
        }
        st = vt_engine_step(e, entries, n, err);
        for (int32_t i = 0; i < n && st == VT_OK; i++) done[entries[i].seq] += entries[i].n_tokens;
        while (first < S && done[first] == job->n_prompt) first++;
    }
    double t = vt_cli_now() - t0;
    *pp_tok_s = t > 0 ? (double)(S * job->n_prompt) / t : NAN;
    if (st == VT_OK) st = profile_phase(job, backend, S, "tg", err);
    t0 = vt_cli_now();
    for (int64_t k = 0; k < n_gen && st == VT_OK; k++) {
        for (int32_t s = 0; s < S; s++) entries[s] = (vt_step_entry){s, sequence_ids(job, &job->tokens[k], s, 1, ids + s), 1, true, true};
        st = vt_engine_step(e, entries, S, err);
    }
    t = vt_cli_now() - t0;
    *tg_tok_s = t > 0 ? (double)(S * n_gen) / t : NAN;
    free(ids);
    return st;
}

/* One configuration measured: a backend at a number of sequences, its
 * engine, and the pp/tg results it fills. The --parallel entries of one
 * --backends entry share one engine, shaped for the most sequences any of
 * them runs (as vt serve runs any number up to its --parallel on one): one
 * prepared copy of the weights, not one per entry, which a large model
 * would not have room for. */
typedef struct bench_config {
    const char *backend; /* what the engine runs on */
    const char *options; /* its --backends entry's own backend options ("" for none) */
    const char *label;   /* what its results are called: the backend, or BACKEND#K when --backends repeats it */
    int32_t S;
    int32_t engine_seqs; /* sequences the shared engine is shaped for */
    int first;           /* index of the configuration that creates and frees the shared engine */
    vt_engine *e;        /* NULL once it failed (the error is in pp->error) */
    bench_result *pp, *tg;
} bench_config;

/* Record a failure in the first slot of every configuration of the engine
 * (reported in their own entries; the others still run, and the exit status
 * says something failed): an engine that failed once is not trusted again. */
static void config_failed(bench_config *cfgs, int n, int c, const vt_error *err, vt_error *first_failure) {
    if (first_failure->code == VT_OK) *first_failure = *err;
    const int owner = cfgs[c].first;
    vt_engine *e = cfgs[c].e;
    for (int k = 0; k < n; k++) {
        bench_config *cfg = &cfgs[k];
        if (cfg->first != owner || cfg->pp->error[0]) continue;
        snprintf(cfg->pp->error, sizeof cfg->pp->error, "%s", err->msg);
        cfg->pp->status = err->code;
        cfg->e = NULL;
    }
    vt_engine_free(e);
}

/* "onednn avx512_core (...) + simd avx2": every backend that runs a node of
 * e's plans, with the instruction set it reports (ABI 1.3). */
static void engine_isa(const vt_engine *e, char *buf, size_t size) {
    int32_t prefill[VT_CLI_MAX_BACKENDS] = {0}, decode[VT_CLI_MAX_BACKENDS] = {0};
    const int n = vt_registry_count(vt_engine_registry(e)) < VT_CLI_MAX_BACKENDS ? vt_registry_count(vt_engine_registry(e))
                                                                       : VT_CLI_MAX_BACKENDS;
    vt_plan_count_backends(vt_engine_plan(e, VT_PHASE_PREFILL), prefill, n);
    vt_plan_count_backends(vt_engine_plan(e, VT_PHASE_DECODE), decode, n);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < size; i++) {
        if (!prefill[i] && !decode[i]) continue;
        const vt_backend_entry *b = vt_registry_at(vt_engine_registry(e), i);
        char isa[VT_BACKEND_ISA_MAX];
        int k = snprintf(buf + used, size - used, "%s%s %s", used ? " + " : "", b->name, vt_backend_isa(b, isa, sizeof isa));
        if (k > 0) used += (size_t)k;
    }
}

static vt_status config_create(bench_job *job, bench_config *cfgs, int c, vt_error *err) {
    bench_config *cfg = &cfgs[c];
    if (cfg->first != c) {
        cfg->e = cfgs[cfg->first].e; /* failed already, or shared */
        if (!cfg->e) return VT_OK;
    } else {
        const vt_engine_shape shape = {false, cfg->engine_seqs, false};
        vt_status st = vt_cli_engine_for_backend(job->c, job->model, cfg->backend, cfg->options, &shape, &cfg->e, err);
        if (st != VT_OK) return st;
    }
    const vt_engine *e = cfg->e;
    for (bench_result *r = cfg->pp; r <= cfg->tg; r++) {
        if (vt_engine_costs(e)) {
            r->is_auto = true;
            r->calibration_seconds = vt_engine_costs(e)->calibration_seconds;
            r->calibration_measured = vt_engine_costs(e)->measured;
            r->calibration_cache_hit = vt_engine_costs(e)->cache_hit;
        }
        r->create_seconds = vt_engine_create_seconds(e);
        r->prepared_bytes = vt_weight_prep_total(vt_engine_prepared(e));
        vt_weight_prep_describe(vt_engine_prepared(e), r->prepared, sizeof r->prepared);
        r->released_bytes = vt_weight_prep_released(vt_engine_prepared(e), NULL);
        r->shared_bytes = vt_weight_prep_shared(vt_engine_prepared(e), &r->shared_tensors);
        engine_isa(e, r->isa, sizeof r->isa);
    }
    return VT_OK;
}

/* Warm-up: the prefill shape once and a couple of decode steps (first-touch
 * of weights and arenas, oneDNN primitive creation). */
static vt_status config_warm_up(bench_job *job, bench_config *cfg, vt_error *err) {
    double ignored, ignored_too;
    const int64_t warm = job->n_gen < 2 ? job->n_gen : 2;
    vt_status st = VT_OK;
    if (job->parallel) return run_parallel(job, cfg->label, cfg->e, cfg->S, warm, &ignored, &ignored_too, err);
    if (job->n_prompt > 0) st = run_pp(job, cfg->e, cfg->label, &ignored, err);
    if (st == VT_OK && job->n_gen > 0) st = run_tg(job, cfg->e, cfg->label, warm, &ignored, err);
    return st;
}

/* Repetition r of one configuration: its pp then its tg. */
static vt_status config_run(bench_job *job, bench_config *cfg, int64_t r, vt_error *err) {
    vt_status st = VT_OK;
    if (job->parallel) {
        st = run_parallel(job, cfg->label, cfg->e, cfg->S, job->n_gen, &cfg->pp->runs[r], &cfg->tg->runs[r], err);
        vt_progress_add(job->bar, (double)cfg->S * (double)(job->n_prompt + job->n_gen));
        return st;
    }
    if (job->n_prompt > 0) {
        st = run_pp(job, cfg->e, cfg->label, &cfg->pp->runs[r], err);
        vt_progress_add(job->bar, (double)job->n_prompt);
    }
    if (st == VT_OK && job->n_gen > 0) {
        st = run_tg(job, cfg->e, cfg->label, job->n_gen, &cfg->tg->runs[r], err);
        vt_progress_add(job->bar, (double)job->n_gen);
    }
    return st;
}

/* Every configuration's engine exists before the first timed run; then
 * the repetitions go round-robin, one run of each configuration per round,
 * round r starting with configuration r mod n. The speed of a shared or
 * thermally limited machine drifts over tens of seconds: measured one after
 * the other, the order of the backends would decide their ratio; interleaved,
 * the drift reaches every configuration alike. */
static void bench_interleaved(bench_job *job, bench_config *cfgs, int n, vt_error *first_failure) {
    vt_error err = {0};
    for (int c = 0; c < n; c++)
        if (config_create(job, cfgs, c, &err) != VT_OK) config_failed(cfgs, n, c, &err, first_failure);
    for (int c = 0; c < n && !job->c->dry_run; c++) {
        if (!cfgs[c].e) continue;
        vt_progress_label(job->bar, cfgs[c].label);
        if (config_warm_up(job, &cfgs[c], &err) != VT_OK) {
            vt_error_prefix(&err, "backend %s: ", cfgs[c].label);
            config_failed(cfgs, n, c, &err, first_failure);
        }
    }
    /* profile only the timed runs: attached once every warm-up is done (a
     * wrapped table is shared by every registry of the process) */
    for (int c = 0; c < n && job->profiler; c++)
        if (cfgs[c].e && cfgs[c].first == c &&
            vt_profiler_attach(job->profiler, vt_engine_registry(cfgs[c].e), &err) != VT_OK)
            config_failed(cfgs, n, c, &err, first_failure);
    for (int64_t r = 0; r < job->reps && !job->c->dry_run; r++)
        for (int i = 0; i < n; i++) {
            const int c = (int)((r + i) % n);
            bench_config *cfg = &cfgs[c];
            if (!cfg->e) continue;
            cfg->pp->order[r] = cfg->tg->order[r] = i;
            vt_progress_label(job->bar, cfg->label);
            vt_status st = config_run(job, cfg, r, &err);
            if (st != VT_OK) {
                vt_error_prefix(&err, "backend %s: ", cfg->label);
                config_failed(cfgs, n, c, &err, first_failure);
            }
        }
    for (int c = 0; c < n; c++) {
        if (cfgs[c].first == c) vt_engine_free(cfgs[c].e);
        cfgs[c].e = NULL;
    }
}

/* ---- output ---- */

/* Decode steps per second: a step of S sequences reads the weights once. */
static double steps_per_s(const bench_result *r) { return r->median / (double)r->n_seqs; }

/* Whether the weights a decode step reads are known: one token's, or for a
 * step of several sequences the same once for all. Not for a mixture of
 * experts' step of several: it reads every expert any of its tokens chose,
 * between one token's and all of them, as the routing fell. */
static bool step_bytes_known(const bench_job *job, const bench_result *r) {
    return job->model->hp.n_expert == 0 || r->n_seqs == 1;
}

static size_t kv_bytes_per_token(const bench_job *job, int32_t d);

/* Positions a decode step of the tg run attends to on average: step k of n
 * after s tokens sees s + k + 1, their mean is s + (n + 1) / 2, where s is
 * the depth (and with --parallel the prompt the steps continue). */
static double tg_mean_positions(const bench_job *job) {
    return (double)(job->depth + (job->parallel ? job->n_prompt : 0)) + (double)(job->n_gen + 1) / 2.0;
}

/* Bytes a decode step of the tg run reads on average: the weights once, and
 * each sequence's K/V rows of every position it attends to. NAN where the
 * weights it reads are not known. */
static double step_bytes(const bench_job *job, const bench_result *r, int64_t bytes_per_token) {
    if (!r->is_tg || !step_bytes_known(job, r)) return NAN;
    const double positions = tg_mean_positions(job);
    return (double)bytes_per_token +
           (double)r->n_seqs * positions * (double)kv_bytes_per_token(job, job->c->opt.kv_cache_dtype);
}

static double fraction_of_limit(const bench_job *job, const bench_result *r, int64_t bytes_per_token,
                                double bw_gb_s) {
    if (!(bw_gb_s > 0)) return NAN;
    return steps_per_s(r) * step_bytes(job, r, bytes_per_token) / (bw_gb_s * 1e9);
}

/* GB/s of weights and K/V the median decode rate implies. */
static double implied_gb_s(const bench_job *job, const bench_result *r, int64_t bytes_per_token) {
    return steps_per_s(r) * step_bytes(job, r, bytes_per_token) * 1e-9;
}

/* The KV-cache dtypes whose bytes per token bench reports, every one the
 * --kv-cache-dtype lever takes. */
static const int32_t kv_dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};
#define N_KV_DTYPES ((int)(sizeof kv_dtypes / sizeof kv_dtypes[0]))

/* Bytes a token takes in a cache of dtype d for this model, all layers, K
 * and V (0: the dtype cannot hold this model's heads, e.g. q8_0 with a
 * head_dim that is not whole blocks). */
static size_t kv_bytes_per_token(const bench_job *job, int32_t d) {
    const vt_hparams *hp = &job->model->hp;
    return vt_kv_cache_bytes_per_token(d, hp->n_layer, hp->n_head_kv, hp->head_dim);
}

static void print_json(const bench_job *job, const char *path, const bench_result *res, int n, int64_t bpt,
                       double bw) {
    printf("{\"model\": ");
    vt_json_string(stdout, path);
    printf(", \"cpu\": ");
    vt_json_string(stdout, job->machine.cpu);
    printf(", \"cores\": %d, \"cpu_isa\": ", job->machine.cores);
    vt_json_string(stdout, job->machine.isa);
    printf(", \"threads\": %d, \"kv_cache_dtype\": ", job->c->opt.threads);
    vt_json_string(stdout, vt_dtype_name(job->c->opt.kv_cache_dtype));
    printf(", \"repetitions\": %lld, \"model_bytes\": %lld, \"params\": %lld, \"bytes_per_token\": %lld, "
           "\"bandwidth_gb_s\": ",
           (long long)job->reps, (long long)job->model->weight_bytes, (long long)job->model->n_params, (long long)bpt);
    vt_json_number(stdout, bw);
    printf(", \"peak_rss_bytes\": %zu", job->peak_rss_bytes);
    printf(", \"kv_cache_bytes_per_token\": %lld, \"kv_cache_bytes_per_token_by_dtype\": {",
           (long long)kv_bytes_per_token(job, job->c->opt.kv_cache_dtype));
    for (int i = 0; i < N_KV_DTYPES; i++) {
        const size_t b = kv_bytes_per_token(job, kv_dtypes[i]);
        printf("%s\"%s\": ", i ? ", " : "", vt_dtype_name(kv_dtypes[i]));
        if (b) printf("%lld", (long long)b);
        else printf("null");
    }
    /* every configuration's runs interleaved, round r starting with
     * configuration r mod n (round_positions: where each run fell) */
    printf("}, \"schedule\": \"round-robin\", \"results\": [");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        printf("%s{\"backend\": ", i ? ", " : "");
        vt_json_string(stdout, r->backend);
        if (r->error[0]) {
            printf(", \"error\": ");
            vt_json_string(stdout, r->error);
            printf(", \"status\": ");
            vt_json_string(stdout, vt_status_name(r->status));
            printf("}");
            continue;
        }
        printf(", \"isa\": ");
        vt_json_string(stdout, r->isa);
        /* n_depth: -d's tokens held before the test, as llama-bench's field */
        printf(", \"test\": \"%s\", \"n_seqs\": %d, \"n_tokens\": %lld, \"n_depth\": %lld, \"tok_s_median\": ", r->test,
               r->n_seqs, (long long)r->n_tokens, (long long)job->depth);
        vt_json_number(stdout, r->median);
        if (job->parallel && r->is_tg) {
            printf(", \"tok_s_per_seq_median\": ");
            vt_json_number(stdout, steps_per_s(r));
        }
        printf(", \"tok_s_stdev\": ");
        vt_json_number(stdout, r->stdev);
        printf(", \"create_seconds\": ");
        vt_json_number(stdout, r->create_seconds);
        printf(", \"prepared_weight_bytes\": %zu, \"released_original_bytes\": %zu", r->prepared_bytes,
               r->released_bytes);
        printf(", \"shared_weight_bytes\": %zu, \"shared_weight_tensors\": %d", r->shared_bytes, r->shared_tensors);
        printf(", \"runs\": [");
        for (int64_t k = 0; k < job->reps; k++) {
            printf("%s", k ? ", " : "");
            vt_json_number(stdout, r->runs[k]);
        }
        printf("], \"round_positions\": [");
        for (int64_t k = 0; k < job->reps; k++) printf("%s%d", k ? ", " : "", r->order[k]);
        printf("], \"tok_s_ratio_to_first\": ");
        vt_json_number(stdout, r->ratio);
        if (r->is_auto)
            printf(", \"calibration_seconds\": %.3f, \"calibration_measured\": %d, \"calibration_cache_hit\": %s",
                   r->calibration_seconds, r->calibration_measured, r->calibration_cache_hit ? "true" : "false");
        if (r->is_tg) {
            printf(", \"bytes_per_step\": ");
            vt_json_number(stdout, step_bytes(job, r, bpt));
            printf(", \"gb_s\": ");
            vt_json_number(stdout, implied_gb_s(job, r, bpt));
            printf(", \"fraction_of_limit\": ");
            vt_json_number(stdout, fraction_of_limit(job, r, bpt, bw));
        }
        printf("}");
    }
    printf("]}\n");
}

static void csv_number(double x) {
    if (isfinite(x)) printf("%.6g", x);
}

/* A CSV field, quoted, inner quotes doubled. */
static void csv_string(const char *s) {
    putchar('"');
    for (const char *p = s; *p; p++) {
        if (*p == '"') putchar('"');
        putchar(*p);
    }
    putchar('"');
}

static void print_csv(const bench_job *job, const char *path, const bench_result *res, int n, int64_t bpt,
                      double bw) {
    printf("model,backend,test,n_tokens,threads,kv_cache_dtype,tok_s_median,tok_s_stdev,gb_s,fraction_of_limit,"
           "model_bytes,params,bytes_per_token,bandwidth_gb_s,error,n_seqs,tok_s_per_seq_median,tok_s_ratio_to_first,cpu,cores,"
           "isa,n_depth\n");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        csv_string(path);
        printf(",%s,%s,%lld,%d,%s,", r->backend, r->test, (long long)r->n_tokens, job->c->opt.threads,
               vt_dtype_name(job->c->opt.kv_cache_dtype));
        csv_number(r->median);
        putchar(',');
        csv_number(r->stdev);
        putchar(',');
        csv_number(implied_gb_s(job, r, bpt));
        putchar(',');
        csv_number(fraction_of_limit(job, r, bpt, bw));
        printf(",%lld,%lld,%lld,", (long long)job->model->weight_bytes, (long long)job->model->n_params,
               (long long)bpt);
        csv_number(bw);
        putchar(',');
        if (r->error[0]) csv_string(r->error);
        printf(",%d,", r->n_seqs);
        if (r->is_tg) csv_number(steps_per_s(r));
        putchar(',');
        csv_number(r->ratio);
        putchar(',');
        csv_string(job->machine.cpu);
        printf(",%d,", job->machine.cores);
        csv_string(r->isa);
        printf(",%lld\n", (long long)job->depth);
    }
}

static void print_table(const bench_job *job, const char *path, const bench_result *res, int n, int64_t bpt,
                        double bw) {
    const vt_hparams *hp = &job->model->hp;
    printf("machine: %s, %d cores; vector extensions: %s\n", job->machine.cpu, job->machine.cores, job->machine.isa);
    printf("model: %s (%s, %d layers, %d wide)\n", path, hp->arch_name, hp->n_layer, hp->n_embd);
    printf("size %.2f MiB, %.2f M params, %.2f MiB read per decoded token; %d threads, kv cache %s\n",
           (double)job->model->weight_bytes / (1024.0 * 1024.0), (double)job->model->n_params * 1e-6,
           (double)bpt / (1024.0 * 1024.0), job->c->opt.threads, vt_dtype_name(job->c->opt.kv_cache_dtype));
    printf("kv cache per token (all layers, K and V):");
    for (int i = 0; i < N_KV_DTYPES; i++) {
        const size_t b = kv_bytes_per_token(job, kv_dtypes[i]);
        if (b) printf("%s %s %.2f KiB", i ? "," : "", vt_dtype_name(kv_dtypes[i]), (double)b / 1024.0);
        else printf("%s %s - (head_dim %d)", i ? "," : "", vt_dtype_name(kv_dtypes[i]), hp->head_dim);
        if (kv_dtypes[i] == job->c->opt.kv_cache_dtype) printf(" (this run)");
    }
    printf("\n");
    if (bw > 0)
        printf("memory read bandwidth (measured now): %.1f GB/s -> decode limit %.1f tok/s (weights alone)\n", bw,
               bw * 1e9 / (double)bpt);
    if (job->n_gen > 0)
        printf("tg's GB/s and of limit count what a decode step reads: the weights, and the K/V rows of every\n"
               "position so far (%.1f on average)\n",
               tg_mean_positions(job));
    if (job->parallel && job->model->hp.n_expert > 0)
        printf("tok/s: all sequences together; per seq: each sequence's rate; GB/s and the limit are per decode\n"
               "step: one sequence's reads one token's experts; a step of several reads every expert its tokens\n"
               "chose, which depends on the routing, so no GB/s is given there (-)\n");
    else if (job->parallel)
        printf("tok/s: all sequences together; per seq: each sequence's rate; GB/s and the limit are per decode\n"
               "step, which reads the weights once for all its sequences\n");
    printf("runs interleaved: each round runs every configuration once, round r starting with the r-th;\n"
           "x first: median over the first backend's at the same test and seqs\n");
    int w = 10; /* the backend column: as wide as the longest entry */
    for (int i = 0; i < n; i++)
        if ((int)strlen(res[i].backend) > w) w = (int)strlen(res[i].backend);
    int tw = 8; /* the test column: "pp512 @ d4096" with --depth */
    for (int i = 0; i < n; i++)
        if ((int)strlen(res[i].test) > tw) tw = (int)strlen(res[i].test);
    printf("\n%-*s %5s %-*s %14s %10s %10s %8s %9s %9s\n", w, "backend", "seqs", tw, "test", "tok/s", "per seq", "stdev",
           "x first", "GB/s", "of limit");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        if (r->error[0]) {
            printf("%-*s error: %s\n", w, r->backend, r->error);
            continue;
        }
        printf("%-*s %5d %-*s %14.2f %10.2f %10.2f %8.3f", w, r->backend, r->n_seqs, tw, r->test, r->median,
               r->median / (double)r->n_seqs, r->stdev, r->ratio);
        if (r->is_tg) {
            const double gb_s = implied_gb_s(job, r, bpt), f = fraction_of_limit(job, r, bpt, bw);
            if (isfinite(gb_s)) printf(" %9.2f", gb_s);
            else printf(" %9s", "-");
            if (isfinite(f)) printf(" %8.1f%%", 100.0 * f);
        }
        putchar('\n');
    }
    /* A decode above the measured limit means the limit was not one here. */
    for (int i = 0; i < n; i++)
        if (!res[i].error[0] && res[i].is_tg && fraction_of_limit(job, &res[i], bpt, bw) > 1.0) {
            printf("note: a decode read faster than the %.1f GB/s measured at the start, so \"of limit\" is no bound in\n"
                   "this run: weights that fit in the CPU's caches are not read from memory, or the measurement\n"
                   "was disturbed (another job; --membw-mib sets its buffers)\n",
                   bw);
            break;
        }
    for (int i = 0; i < n; i++)
        if (res[i].is_auto && !res[i].error[0]) {
            printf("auto: calibration %.2f s at engine creation (%s)\n", res[i].calibration_seconds,
                   res[i].calibration_cache_hit ? "cache hit"
                   : res[i].calibration_measured ? "measured now"
                                                 : "nothing to measure");
            break;
        }
    /* released: the file's pages of tensors only prepared copies read (they
     * left the resident set); shared: weights nodes of several backends
     * read, kept in the file's layout (one resident layout per weight) */
    printf("\nengine creation: create s = seconds to load the backends, negotiate the plans and prepare weights; "
           "released MiB = the file's pages no node reads any more (a backend reads its prepared copy), let go; "
           "shared MiB = weights several backends read in the file's layout; prepared weights = the copies made\n");
    printf("%-*s %10s %13s %11s  %s\n", w, "backend", "create s", "released MiB", "shared MiB", "prepared weights");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        bool seen = false; /* one engine per backend, whatever --parallel runs on it */
        for (int j = 0; j < i && !seen; j++) seen = !res[j].error[0] && strcmp(res[j].backend, r->backend) == 0;
        if (r->error[0] || seen) continue;
        printf("%-*s %10.3f %13.1f %11.1f  %s\n", w, r->backend, r->create_seconds,
               (double)r->released_bytes / (1024.0 * 1024.0), (double)r->shared_bytes / (1024.0 * 1024.0),
               r->prepared);
    }
    printf("\n%-*s  %s\n", w, "backend", "runs on (instruction set)");
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(res[j].backend, r->backend) == 0;
        if (!r->error[0] && !seen) printf("%-*s  %s\n", w, r->backend, r->isa);
    }
    printf("peak RSS: %.1f MiB (the process's high-water mark: every engine of this run at once, the bandwidth "
           "buffers when measured)\n",
           (double)job->peak_rss_bytes / (1024.0 * 1024.0));
}

/* ---- set-up ---- */

/* What `vt bench` was asked. */
typedef struct bench_opts {
    vt_cli_common c;
    const char *backends;
    int64_t n_prompt, n_gen, depth, reps, membw_mib;
    int32_t parallel[VT_BENCH_MAX_PARALLEL]; /* sequences per entry; {1} without --parallel */
    int n_parallel;
    bool parallel_given;
    bool json, csv, profile;
    bool help;
    vt_backend_set set; /* settled by validate: --backends checked against what loads */
} bench_opts;

static vt_arg_result bench_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    bench_opts *o = opts;
    const char *a = argv[*i];
    if (strcmp(a, "-p") == 0 || strcmp(a, "--n-prompt") == 0)
        return vt_cli_int_arg(argc, argv, i, a, 0, 1 << 20, &o->n_prompt, err);
    if (strcmp(a, "-n") == 0 || strcmp(a, "--n-gen") == 0)
        return vt_cli_int_arg(argc, argv, i, a, 0, 1 << 20, &o->n_gen, err);
    if (strcmp(a, "-d") == 0 || strcmp(a, "--depth") == 0)
        return vt_cli_int_arg(argc, argv, i, a, 0, 1 << 20, &o->depth, err);
    if (strcmp(a, "-r") == 0 || strcmp(a, "--repetitions") == 0)
        return vt_cli_int_arg(argc, argv, i, a, 1, 1000, &o->reps, err);
    if (strcmp(a, "--membw-mib") == 0) return vt_cli_int_arg(argc, argv, i, a, 0, 65536, &o->membw_mib, err);
    if (strcmp(a, "--backends") == 0) return vt_cli_text_arg(argc, argv, i, &o->backends, err);
    if (strcmp(a, "--parallel") == 0) {
        const char *list = NULL;
        vt_arg_result r = vt_cli_text_arg(argc, argv, i, &list, err);
        if (r != VT_ARG_TAKEN) return r;
        o->n_parallel = 0;
        o->parallel_given = true;
        for (const char *p = list; *p;) {
            char *end = NULL;
            long v = strtol(p, &end, 10);
            if (end == p || v < 1 || v > VT_BENCH_MAX_SEQS || (*end && *end != ',') ||
                o->n_parallel == VT_BENCH_MAX_PARALLEL) {
                vt_fail(err, VT_ERR_INVALID,
                        "bench: --parallel '%s': want up to %d comma-separated numbers of sequences in 1..%d", list,
                        VT_BENCH_MAX_PARALLEL, VT_BENCH_MAX_SEQS);
                return VT_ARG_ERROR;
            }
            o->parallel[o->n_parallel++] = (int32_t)v;
            p = *end ? end + 1 : end;
        }
        if (o->n_parallel == 0) {
            vt_fail(err, VT_ERR_INVALID, "bench: --parallel needs a list of numbers of sequences, e.g. 1,2,4,8");
            return VT_ARG_ERROR;
        }
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--json") == 0) o->json = true;
    else if (strcmp(a, "--csv") == 0) o->csv = true;
    else if (strcmp(a, "--profile") == 0) o->profile = true;
    else return VT_ARG_NOT_MINE;
    return VT_ARG_TAKEN;
}

static vt_status parse_bench(int argc, char **argv, bench_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {
        .name = "bench", .see_help = true, .several_backends = true, .own = bench_arg, .help = help};
    *o = (bench_opts){.n_prompt = 512,
                      .n_gen = 128,
                      .reps = 5,
                      .membw_mib = (int64_t)(VT_MEMBW_DEFAULT_BYTES >> 20),
                      .parallel = {1},
                      .n_parallel = 1};
    return vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
}

/* Tokens the KV cache must hold: the longest run; with --parallel, the
 * largest number of sequences each holding a prompt and its decode steps in
 * whole blocks. */
static int64_t longest_run(const bench_opts *o) {
    if (!o->parallel_given) return o->depth + (o->n_prompt > o->n_gen ? o->n_prompt : o->n_gen);
    int32_t most = 1;
    for (int i = 0; i < o->n_parallel; i++)
        if (o->parallel[i] > most) most = o->parallel[i];
    const int64_t bs = o->c.opt.block_size;
    return (int64_t)most * ((o->depth + o->n_prompt + o->n_gen + bs - 1) / bs * bs);
}

static vt_status validate_bench(bench_opts *o, vt_error *err) {
    if (o->json && o->csv) return vt_fail(err, VT_ERR_INVALID, "bench: --json and --csv exclude each other");
    if (o->c.special)
        return vt_fail(err, VT_ERR_INVALID, "--special: vt bench has no prompt text (its prompts are token ids)");
    if (o->n_prompt == 0 && o->n_gen == 0)
        return vt_fail(err, VT_ERR_INVALID, "bench: -p 0 and -n 0 leave nothing to measure");
    if (!o->c.model_path)
        return vt_fail(err, VT_ERR_INVALID, "bench: no model: pass -m FILE (vt synth writes one of any shape)");
    /* pp is one prefill call, so the plan must take -p tokens at once, and
     * the cache must hold the longest run; an explicit -b/-c is respected
     * (and -c checked). */
    vt_options *opt = &o->c.opt;
    int64_t need = longest_run(o);
    /* with --parallel prompts go in steps of -b tokens, sequences side by side */
    char v[32];
    if (!o->parallel_given && !strcmp(vt_options_source(opt, "runtime.batch_size"), "default") &&
        o->n_prompt > opt->batch_size) {
        snprintf(v, sizeof v, "%lld", (long long)o->n_prompt);
        vt_status st = vt_options_set(opt, "runtime.batch_size", v, "-p", err);
        if (st != VT_OK) return st;
    }
    /* set as a source of its own, which warnings name (the trained-context one) */
    if (opt->ctx_size == 0) {
        snprintf(v, sizeof v, "%lld", (long long)need);
        vt_status st = vt_options_set(opt, "kv_cache.ctx_size", v, "the run's length (-d, -p, -n, --parallel)", err);
        if (st != VT_OK) return st;
    } else if (opt->ctx_size < need)
        return vt_fail(err, VT_ERR_CONTEXT_FULL, "bench needs %lld tokens of KV cache but -c/--ctx-size is %lld",
                       (long long)need, (long long)opt->ctx_size);
    return vt_cli_backend_set(opt, o->backends, VT_BACKEND_SET_SKIP_REFERENCE | VT_BACKEND_SET_KEEP_REPEATS, &o->set, err);
}

/* Measure the bandwidth, then every configuration interleaved, then print. */
static vt_status run_bench(const bench_opts *o, vt_error *err) {
    const vt_backend_set *set = &o->set;
    const int64_t n_prompt = o->n_prompt, n_gen = o->n_gen, reps = o->reps, need = longest_run(o);
    vt_model *model = NULL;
    vt_profiler *profiler = NULL;
    bench_result *results = NULL, *slots = NULL;
    bench_config *cfgs = NULL;
    double *runs = NULL;
    int *order = NULL;
    bench_job job = {.c = &o->c,
                     .n_prompt = n_prompt,
                     .n_gen = n_gen,
                     .depth = o->depth,
                     .reps = reps,
                     .parallel = o->parallel_given};
    vt_machine_describe(&job.machine);
    const int n_par = o->n_parallel, n_cfg = set->n * n_par;
    vt_progress bar;
    double bw = NAN;
    int n_results = 0;
    vt_error first_failure = {0};

    vt_status st = vt_cli_given_file(o->c.model_path, err);
    if (st == VT_OK) st = vt_model_load(o->c.model_path, &model, err);
    if (st == VT_OK && o->profile) st = vt_profiler_create(&profiler, err);
    if (st != VT_OK) goto done;
    job.model = model;
    job.profiler = profiler;
    job.bar = &bar;
    job.tokens = malloc((size_t)(need + 1) * sizeof *job.tokens);
    job.depth_tokens = malloc((size_t)(o->depth + 1) * sizeof *job.depth_tokens);
    results = calloc((size_t)n_cfg * 2, sizeof *results);
    slots = calloc((size_t)n_cfg * 2, sizeof *slots);
    cfgs = calloc((size_t)n_cfg, sizeof *cfgs);
    runs = calloc((size_t)n_cfg * 2 * (size_t)reps, sizeof *runs);
    order = calloc((size_t)n_cfg * 2 * (size_t)reps, sizeof *order);
    if (!job.tokens || !job.depth_tokens || !results || !slots || !cfgs || !runs || !order) {
        st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
        goto done;
    }
    /* Random token ids (xorshift64*, fixed seed): the same for every backend
     * and every run; ids do not change the work, only the rows fetched. */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i <= need + o->depth; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        const int32_t id = (int32_t)((x * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)model->hp.n_vocab);
        if (i <= need) job.tokens[i] = id;
        else job.depth_tokens[i - need - 1] = id;
    }

    /* Bandwidth first, with a pool of the same thread count, while no engine
     * exists (so nothing else competes for the cores). */
    if (o->membw_mib > 0 && !o->c.dry_run) {
        vt_threadpool *pool = NULL;
        st = vt_threadpool_create(o->c.opt.threads, &pool, err);
        if (st == VT_OK) st = vt_membw_measure(pool, (size_t)o->membw_mib << 20, VT_MEMBW_DEFAULT_REPS, &bw, err);
        vt_threadpool_destroy(pool);
        if (st != VT_OK) goto done;
    }

    /* the bar's work: every timed token, and the depth once per sequence of
     * each engine (shaped for the most sequences of its entries) */
    double all_seqs = 0, most_seqs = 1;
    for (int k = 0; k < n_par; k++) {
        all_seqs += o->parallel[k];
        if (o->parallel[k] > most_seqs) most_seqs = o->parallel[k];
    }
    for (int c = 0; c < n_cfg; c++) {
        bench_config *cfg = &cfgs[c];
        cfg->backend = set->names[c / n_par];
        cfg->options = set->options[c / n_par];
        cfg->label = set->labels[c / n_par];
        cfg->S = o->parallel[c % n_par];
        cfg->first = c - c % n_par;
        cfg->engine_seqs = 1;
        for (int k = 0; k < n_par; k++)
            if (o->parallel[k] > cfg->engine_seqs) cfg->engine_seqs = o->parallel[k];
        cfg->pp = &slots[2 * c];
        cfg->tg = &slots[2 * c + 1];
        for (int t = 0; t < 2; t++) {
            bench_result *r = t ? cfg->tg : cfg->pp;
            snprintf(r->backend, sizeof r->backend, "%s", cfg->label);
            /* llama-bench's names: "pp512", "tg128 @ d4096" */
            int k = snprintf(r->test, sizeof r->test, "%s%lld", t ? "tg" : "pp", (long long)(t ? n_gen : n_prompt));
            if (o->depth > 0 && k > 0 && (size_t)k < sizeof r->test)
                snprintf(r->test + k, sizeof r->test - (size_t)k, " @ d%lld", (long long)o->depth);
            r->is_tg = t;
            r->n_seqs = cfg->S;
            r->n_tokens = cfg->S * (t ? n_gen : n_prompt);
            r->runs = runs + (size_t)(2 * c + t) * (size_t)reps;
            r->order = order + (size_t)(2 * c + t) * (size_t)reps;
        }
    }
    vt_progress_begin(&bar, "bench",
                      (double)set->n * (all_seqs * (double)reps * (double)(n_prompt + n_gen) + most_seqs * (double)o->depth));
    bench_interleaved(&job, cfgs, n_cfg, &first_failure);
    job.peak_rss_bytes = peak_rss_bytes();
    vt_progress_end(&bar);
    if (o->c.dry_run) goto done;

    /* In --backends order, pp before tg; a failed configuration is one entry
     * carrying its error; only the tests asked for (-p 0 or -n 0 skip one). */
    for (int c = 0; c < n_cfg; c++) {
        bench_result *pp = cfgs[c].pp, *tg = cfgs[c].tg;
        if (pp->error[0]) {
            pp->test[0] = '\0';
            pp->is_tg = false;
            pp->median = pp->stdev = pp->ratio = NAN;
            results[n_results++] = *pp;
            continue;
        }
        for (bench_result *r = pp; r <= tg; r++) {
            r->median = vt_median(r->runs, (size_t)reps);
            r->stdev = vt_stdev(r->runs, (size_t)reps);
        }
        if (n_prompt > 0) results[n_results++] = *pp;
        if (n_gen > 0) results[n_results++] = *tg;
    }
    /* ratios to the first backend that has a figure for the same test and
     * number of sequences */
    for (int i = 0; i < n_results; i++) {
        bench_result *r = &results[i];
        r->ratio = NAN;
        for (int j = 0; j <= i && !r->error[0]; j++)
            if (!results[j].error[0] && results[j].n_seqs == r->n_seqs && !strcmp(results[j].test, r->test)) {
                r->ratio = results[j].median > 0 ? r->median / results[j].median : NAN;
                break;
            }
    }

    int64_t bpt = vt_model_bytes_per_token(model);
    if (o->json) print_json(&job, o->c.model_path, results, n_results, bpt, bw);
    else if (o->csv) print_csv(&job, o->c.model_path, results, n_results, bpt, bw);
    else print_table(&job, o->c.model_path, results, n_results, bpt, bw);
    fflush(stdout); /* the table first, then the profile, also when both go to one pipe */
    if (profiler) vt_profiler_print(profiler, stderr);

done:
    free(order);
    free(runs);
    free(cfgs);
    free(slots);
    free(results);
    free(job.tokens);
    free(job.depth_tokens);
    vt_model_free(model);
    vt_profiler_free(profiler);
    return vt_cli_first_failure(st, &first_failure, err);
}

int vt_cmd_bench(int argc, char **argv) {
    vt_error err = {0};
    bench_opts o;
    vt_status st = parse_bench(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_bench(&o, &err);
    if (st == VT_OK) st = run_bench(&o, &err);
    return vt_cli_exit(st, &err);
}
