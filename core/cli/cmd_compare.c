/* cmd_compare.c — `vt compare`: the same tokens through every backend, side
 * by side against `reference`.
 *
 * The model is loaded once; the backends run one after another, each with
 * its own engine (one live engine at a time: an engine's thread pool is the
 * process's current one while it exists). The reference runs first and its
 * logits of every prompt position and its greedy continuation are kept as
 * the baseline; every backend, reference included, is then scored against
 * them.
 *
 * With a list of KV-cache dtypes (--kv-cache-dtype f32,f16,bf16) every
 * backend, reference included, runs once per dtype, and the baseline is the
 * reference with an f32 cache: reference@f16 against it is the cache's own
 * share of the difference, and each backend's row at a dtype shows how much
 * it adds.
 *
 * --trace asks where instead of how much: compare_trace.c runs each
 * backend's plan nodes on the reference's inputs and names the first node
 * whose own error is above its op's threshold. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_set.h"
#include "cli.h"
#include "compare_trace.h"
#include "default_model.h"
#include "json_out.h"
#include "machine.h"
#include "metrics.h"
#include "profiler.h"
#include "progress.h"
#include "quant.h"
#include "sampler.h"

#define DEFAULT_GREEDY 32
#define DEFAULT_PPL_CTX 512

/* A prompt of ordinary English, so the tokenizer of any vocabulary gives a
 * few dozen tokens. */
static const char default_prompt[] =
    "The old lighthouse keeper climbed the stairs every evening, counting each step, and wrote the "
    "weather in a small book before lighting the lamp.";

static void help(FILE *f) {
    fprintf(f, "usage: vt compare [-m MODEL] [--backends LIST|all] [-p PROMPT | --tokens IDS] [-n N] [--ppl FILE]\n"
               "                  [--kv-cache-dtype D|LIST] [-t N] [--json] [--profile] [options]\n"
               "       vt compare --trace [--trace-all] [-m MODEL] [--backends LIST] [-p PROMPT | --tokens IDS] [-n N]\n"
               "                  [--json] [options]\n\n"
               "Run the same tokens through each backend and compare it with `reference`: max and mean |dlogit|,\n"
               "top-1 agreement and KL divergence over every prompt position, greedy continuation agreement (tokens\n"
               "until the first divergence), perplexity over --ppl FILE, prefill and decode tokens/s, and where each\n"
               "backend's plan nodes ran; then a verdict per backend (agrees with reference within its stated\n"
               "tolerance or not, a greedy difference explained by reference's top-2 gap there) and a legend of\n"
               "the columns. Without -m, a small random-weight model is synthesized into the cache\n"
               "($XDG_CACHE_HOME/vt or ~/.cache/vt) and reused.\n\n"
               "      --backends LIST      comma-separated backends (auto among them), or all (default: all\n"
               "                           loaded); reference is always run first as the baseline;\n"
               "                           NAME:key=value[:key=value] runs NAME with those backend options\n"
               "                           (simd,simd:isa=avx2: two instruction-set tiers side by side)\n"
               "  -p, --prompt TEXT        prompt (default: an English sentence); - reads stdin\n"
               "  -f, --file FILE          the prompt is the file's text\n"
               "      --tokens IDS         prompt as comma-separated token ids instead\n"
               "  -n, --n-predict N        greedy continuation length (default %d)\n"
               "      --ppl FILE           also compute perplexity over the text of FILE\n"
               "      --ppl-ctx N          perplexity chunk size in tokens (default %d or the model's trained context\n"
               "                           if shorter, capped at the text's length);\n"
               "                           like llama-perplexity, each chunk scores its second half\n"
               "      --kv-cache-dtype LIST  f32, f16, bf16, q8_0, or a list (f32,f16,q8_0): each backend, reference\n"
               "                           included, runs at each cache dtype, every row against reference at f32\n"
               "      --json               one JSON document instead of the table\n"
               "      --profile            per-op time, calls and share per backend, on stderr\n"
               "      --trace              where each backend first diverges: every node of its plans run on the\n"
               "                           reference's inputs (prompt in prefill, then -n - 1 decode steps), its NMSE\n"
               "                           against its op's threshold (as vt backends --test); one line per backend,\n"
               "                           exit 1 when one diverges\n"
               "      --trace-all          --trace with every node's error, threshold and verdict\n"
               "Prefill tokens/s here includes the logits of every position (the metrics need them);\n"
               "vt bench measures the usual last-position prefill.\n\n"
               "Engine options (--backends takes the place of --backend):\n",
               DEFAULT_GREEDY, DEFAULT_PPL_CTX);
    static const char *const said_above[] = {"--backend", "--kv-cache-dtype", NULL};
    vt_cli_common_help_except(f, said_above);
}

/* What one backend scored. */
typedef struct backend_result {
    char name[96]; /* the --backends entry: NAME or NAME:key=value... */
    int32_t kv_cache_dtype;
    vt_logit_stats stats;
    int64_t greedy_agree;
    double ppl;                 /* NAN: not asked */
    double pp_tok_s, tg_tok_s;  /* NAN: not measured */
    int n_where;                /* nodes of both plans per backend that ran them */
    char where_name[VT_CLI_MAX_BACKENDS][64];
    int64_t where_count[VT_CLI_MAX_BACKENDS];
    char where_isa[VT_CLI_MAX_BACKENDS][VT_BACKEND_ISA_MAX]; /* what it ran at (vt_backend_isa) */
    int64_t plan_nodes;
    char error[VT_ERROR_MSG_SIZE]; /* non-empty: this backend failed (plan refused, op error) */
    vt_status status;              /* error set: the failure's status */
    /* Where the greedy continuation first differs from reference's (index
     * greedy_agree < n_greedy): reference's logit of its own token minus
     * its logit of this backend's token there, i.e. how close to a tie the
     * reference was. NAN when the continuations agree. */
    double greedy_gap;
    /* Judged again with an f32 cache (recheck_at_f32): its max|dlog|, greedy
     * agreement and gap against the reference's f32-cache run. */
    bool at_f32;
    double f32_max_abs_dlogit;
    int64_t f32_greedy_agree;
    double f32_greedy_gap;
} backend_result;

/* Everything the measurement of one backend needs. */
typedef struct compare_job {
    const vt_cli_common *c;
    vt_model *model;
    const int32_t *prompt;     /* [n_prompt] */
    int64_t n_prompt;
    int64_t n_greedy;
    const int32_t *ppl_tokens; /* [n_ppl_chunks * ppl_ctx], NULL = no perplexity */
    int64_t ppl_ctx, ppl_chunks;
    float *ref_logits;         /* [n_prompt][V], filled by the reference run */
    int32_t *ref_greedy;       /* [n_greedy], filled by the reference run */
    float *ref_steps;          /* [n_greedy][V]: the logits each greedy token came from, reference run */
    int32_t *greedy;           /* [n_greedy] scratch */
    int32_t *chunk;            /* [ppl_ctx] scratch */
    vt_profiler *profiler;     /* NULL = off */
    vt_progress *bar;
    bool kv_list;              /* several cache dtypes: rows per backend x dtype, baseline reference@f32 */
    int32_t baseline_kv;       /* the baseline's cache dtype */
    bool quantized_weights;    /* the model has quantized weights (the stated bounds depend on them) */
    bool bf16_weights;         /* ... or BF16 ones */

} compare_job;

/* Count the nodes of both plans by the backend that runs them. */
static vt_status count_nodes(const vt_engine *e, backend_result *r, vt_error *err) {
    int n = vt_registry_count(vt_engine_registry(e));
    int32_t *counts = calloc((size_t)n, sizeof *counts), *dec = calloc((size_t)n, sizeof *dec);
    if (!counts || !dec) {
        free(counts);
        free(dec);
        return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    }
    vt_plan_count_backends(vt_engine_plan(e, VT_PHASE_PREFILL), counts, n);
    vt_plan_count_backends(vt_engine_plan(e, VT_PHASE_DECODE), dec, n);
    r->plan_nodes = (int64_t)vt_engine_plan(e, VT_PHASE_PREFILL)->n_nodes + vt_engine_plan(e, VT_PHASE_DECODE)->n_nodes;
    for (int i = 0; i < n; i++) {
        if (counts[i] + dec[i] == 0 || r->n_where == VT_CLI_MAX_BACKENDS) continue;
        const vt_backend_entry *b = vt_registry_at(vt_engine_registry(e), i);
        snprintf(r->where_name[r->n_where], sizeof r->where_name[0], "%s", b->name);
        vt_backend_isa(b, r->where_isa[r->n_where], sizeof r->where_isa[0]);
        r->where_count[r->n_where++] = (int64_t)counts[i] + dec[i];
    }
    free(counts);
    free(dec);
    return VT_OK;
}

/* Prompt, greedy continuation and perplexity through one engine. */
static vt_status measure(compare_job *job, vt_engine *e, bool is_reference, backend_result *r, vt_error *err) {
    const int32_t V = job->model->hp.n_vocab;
    double t0 = vt_cli_now();
    vt_status st = vt_engine_eval(e, job->prompt, job->n_prompt, false, err);
    if (st != VT_OK) return st;
    double t_pp = vt_cli_now() - t0;
    r->pp_tok_s = t_pp > 0 ? (double)job->n_prompt / t_pp : NAN;
    if (is_reference)
        memcpy(job->ref_logits, vt_engine_logits(e, 0), (size_t)job->n_prompt * (size_t)V * sizeof(float));
    vt_logit_stats_init(&r->stats);
    for (int64_t i = 0; i < job->n_prompt; i++)
        vt_logit_stats_add(&r->stats, job->ref_logits + i * V, vt_engine_logits(e, i), V);
    vt_progress_add(job->bar, (double)job->n_prompt);

    /* Greedy continuation: token 0 from the prompt's last logits, each next
     * one from a decode step; the decode steps are what tg times. */
    r->tg_tok_s = NAN;
    r->greedy_gap = NAN;
    if (job->n_greedy > 0) {
        const float *last = vt_engine_logits(e, job->n_prompt - 1);
        job->greedy[0] = vt_argmax(last, V);
        if (is_reference) memcpy(job->ref_steps, last, (size_t)V * sizeof(float));
        double t1 = vt_cli_now();
        for (int64_t k = 1; k < job->n_greedy && st == VT_OK; k++) {
            st = vt_engine_eval(e, &job->greedy[k - 1], 1, true, err);
            if (st == VT_OK) job->greedy[k] = vt_argmax(vt_engine_logits(e, 0), V);
            /* copied outside the timed loop's arithmetic only for the reference, whose tg is not the point */
            if (st == VT_OK && is_reference)
                memcpy(job->ref_steps + k * V, vt_engine_logits(e, 0), (size_t)V * sizeof(float));
            vt_progress_add(job->bar, 1);
        }
        if (st != VT_OK) return st;
        double t_tg = vt_cli_now() - t1;
        if (job->n_greedy > 1 && t_tg > 0) r->tg_tok_s = (double)(job->n_greedy - 1) / t_tg;
        if (is_reference) memcpy(job->ref_greedy, job->greedy, (size_t)job->n_greedy * sizeof(int32_t));
        r->greedy_agree = vt_common_prefix(job->ref_greedy, job->greedy, job->n_greedy);
        /* Up to the first difference both saw the same tokens, so the
         * reference's logits there are the ones this backend approximated. */
        const int64_t k = r->greedy_agree;
        if (k < job->n_greedy) {
            const float *ref = job->ref_steps + k * V;
            r->greedy_gap = (double)ref[job->ref_greedy[k]] - (double)ref[job->greedy[k]];
        }
    }

    r->ppl = NAN;
    if (job->ppl_tokens) {
        vt_ppl acc;
        vt_ppl_init(&acc);
        int32_t bos = vt_tokenizer_bos(job->model->tokenizer);
        bool add_bos = vt_tokenizer_add_bos(job->model->tokenizer) && bos >= 0;
        for (int64_t ch = 0; ch < job->ppl_chunks && st == VT_OK; ch++) {
            /* each chunk is a fresh sequence, starting with BOS as llama-perplexity does */
            memcpy(job->chunk, job->ppl_tokens + ch * job->ppl_ctx, (size_t)job->ppl_ctx * sizeof(int32_t));
            if (add_bos) job->chunk[0] = bos;
            vt_engine_reset(e);
            st = vt_engine_eval(e, job->chunk, job->ppl_ctx, false, err);
            if (st == VT_OK) vt_ppl_add_chunk(&acc, vt_engine_logits(e, 0), V, job->chunk, job->ppl_ctx);
            vt_progress_add(job->bar, (double)job->ppl_ctx);
        }
        if (st != VT_OK) return st;
        r->ppl = vt_ppl_value(&acc);
    }
    return VT_OK;
}

/* One run: backend `name` with its entry's options ("" for none) and a KV
 * cache of kv_dtype; `entry` is what the run is called (NAME[:options]). */
static vt_status run_backend(compare_job *job, const char *name, const char *options, const char *entry,
                             int32_t kv_dtype, bool is_reference, backend_result *r, vt_error *err) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", entry);
    r->kv_cache_dtype = kv_dtype;
    vt_cli_common c = *job->c;
    c.opt.kv_cache_dtype = kv_dtype;
    char label[128];
    if (job->kv_list) snprintf(label, sizeof label, "%s@%s", entry, vt_dtype_name(kv_dtype));
    else snprintf(label, sizeof label, "%s", entry);
    vt_engine *e = NULL;
    const vt_engine_shape shape = {true, 1, false};
    vt_status st = vt_cli_engine_for_backend(&c, job->model, name, options, &shape, &e, err);
    if (st != VT_OK) return st;
    st = count_nodes(e, r, err);
    /* A warm-up of the prompt, as vt bench makes before it times: a first
     * call pays once for what later ones do not (oneDNN compiling its
     * kernels, pages of weights read in), which put a row's pp tok/s off by
     * ten times depending on its place in the run. Not profiled. */
    if (st == VT_OK && !job->c->dry_run) {
        vt_progress_label(job->bar, label);
        st = vt_engine_eval(e, job->prompt, job->n_prompt, false, err);
        vt_engine_reset(e);
        if (st != VT_OK) vt_error_prefix(err, "backend %s: ", label);
    }
    if (st == VT_OK && job->profiler) {
        st = vt_profiler_attach(job->profiler, vt_engine_registry(e), err);
        if (st == VT_OK) st = vt_profiler_section(job->profiler, label, err);
    }
    if (st == VT_OK && !job->c->dry_run) {
        vt_progress_label(job->bar, label);
        st = measure(job, e, is_reference, r, err);
        if (st != VT_OK) vt_error_prefix(err, "backend %s: ", label);
    }
    vt_engine_free(e);
    return st;
}

/* ---- verdict ---- */

/* Each shipped backend's stated bound on |logit - exact| relative to
 * max(1, max|logit|), from the Correctness section of README.md, as
 * test_golden checks it: f32 arithmetic (reference, onednn, simd on float
 * weights) 1e-5; simd on quantized weights rounds activations to 8 bits, up
 * to 5.6e-2 on the test models (llama-gqa-tiny-q4_k_m), so 6e-2; onednn
 * multiplying in bf16 (where the CPU has it) rounds quantized and BF16
 * weights and the activations to bf16, up to 3.3e-2 (qwen3moe-tiny-q4_k_m),
 * so 5e-2; simd multiplying BF16 weights in bf16 (its avx512 tier where the
 * CPU has AVX-512 BF16) rounds the activations to bf16 for them, 6.9e-3
 * measured (qwen3-tiny-bf16), under the same 5e-2; simd attending over a
 * BF16 cache in bf16 (the same tier: queries and softmax weights rounded to
 * bf16) moves float-weight logits by up to 6.3e-3 on the dense test models
 * and 3.7e-2 on qwen3moe-tiny-f32 (a router near-tie moved; 2.3e-2 of its
 * scale of 1.57), also under 5e-2. reference is within 2.4e-7 of exact, so
 * the bounds hold against it. A backend not listed (a plugin) states none:
 * -1. */
static double stated_tolerance(const char *backend, const char *isa, bool quantized_weights, bool bf16_weights,
                               bool bf16_cache) {
    const bool in_bf16 = vt_isa_line_multiplies_bf16(isa);
    /* onednn's precision=int8 on quantized weights: each row of activations
     * and of weights rounded to int8 under one scale, up to 6.5e-2 on the
     * test models (qwen2-tiny-q4_k_m, AMD EPYC with AVX-512 VNNI), so 1e-1 */
    if (strcmp(backend, "onednn") == 0 && vt_isa_line_multiplies_int8(isa) && quantized_weights) return 1e-1;
    if (strcmp(backend, "onednn") == 0) return in_bf16 && (quantized_weights || bf16_weights) ? 5e-2 : 1e-5;
    if (strcmp(backend, "reference") == 0) return 1e-5;
    if (strcmp(backend, "simd") == 0)
        return quantized_weights                                                        ? 6e-2
               : (in_bf16 && bf16_weights) || (vt_isa_line_attends_bf16(isa) && bf16_cache) ? 5e-2
                                                                                        : 1e-5;
    return -1;
}

/* A row's bound: the loosest of the backends its nodes ran on (a fallback's
 * nodes carry the fallback's rounding), named in *loosest; or -1 with
 * *loosest the first backend that states none. */
static double row_tolerance(const backend_result *r, bool quantized_weights, bool bf16_weights, const char **loosest) {
    double tol = 0;
    *loosest = r->name;
    for (int k = 0; k < r->n_where; k++) {
        const double t = stated_tolerance(r->where_name[k], r->where_isa[k], quantized_weights, bf16_weights,
                                          r->kv_cache_dtype == VT_BF16);
        if (t < 0) {
            *loosest = r->where_name[k];
            return -1;
        }
        if (t > tol) {
            tol = t;
            *loosest = r->where_name[k];
        }
    }
    return tol;
}

static bool model_has_quantized_weights(const vt_model *m) {
    for (int64_t i = 0; i < vt_gguf_n_tensors(m->gguf); i++)
        if (!vt_dtype_is_float(vt_gguf_tensor_at(m->gguf, i)->dtype)) return true;
    return false;
}

static bool model_has_bf16_weights(const vt_model *m) {
    for (int64_t i = 0; i < vt_gguf_n_tensors(m->gguf); i++)
        if (vt_gguf_tensor_at(m->gguf, i)->dtype == VT_BF16) return true;
    return false;
}

/* max(1, max|logit|) of the reference's prompt logits: the scale the
 * relative bounds apply to. */
static double reference_scale(const compare_job *job) {
    const int64_t n = job->n_prompt * job->model->hp.n_vocab;
    double m = 1;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)job->ref_logits[i]));
    return m;
}

typedef enum { VERDICT_BASELINE, VERDICT_AGREES, VERDICT_DISAGREES, VERDICT_NOT_JUDGED } verdict_kind;
static const char *const verdict_names[] = {"baseline", "agrees", "disagrees", "not judged"};

/* The verdict on row i, and one line saying why into why. */
static verdict_kind judge(const compare_job *job, const backend_result *res, int i, double scale, char *why,
                          size_t size) {
    const backend_result *r = &res[i];
    const char *loosest = NULL;
    if (r->error[0]) {
        snprintf(why, size, "failed: %s", r->error);
        return VERDICT_NOT_JUDGED;
    }
    /* With several cache dtypes the reference's own row at this dtype is the
     * cache's share, allowed on top of the backend's bound. */
    double cache_share = 0;
    const backend_result *cache_row = NULL;
    for (int k = 0; job->kv_list && k < i; k++)
        if (strcmp(res[k].name, "reference") == 0 && res[k].kv_cache_dtype == r->kv_cache_dtype && !res[k].error[0]) {
            cache_share = res[k].stats.max_abs_dlogit;
            cache_row = &res[k];
        }
    if (strcmp(r->name, "reference") == 0) {
        if (i == 0) snprintf(why, size, "the baseline every row is measured against");
        else snprintf(why, size, "the %s cache's own share of the difference", vt_dtype_name(r->kv_cache_dtype));
        return VERDICT_BASELINE;
    }
    /* The cache's share is a rounding share only while reference's own row
     * at that dtype keeps the baseline's greedy tokens: once the cache alone
     * changes them (on a mixture of experts, a token routed to another
     * expert), that share is as large as any error, and a bound that adds
     * it would pass anything. */
    if (cache_row && job->n_greedy > 0 && cache_row->greedy_agree < job->n_greedy && i > 0) {
        snprintf(why, size,
                 "the %s cache alone moves reference's own greedy tokens (%lld/%lld, max|dlog| %.2e%s), so the "
                 "cache's share would hide any error and the logits cannot judge this row; vt compare --trace "
                 "--backends %s --kv-cache-dtype %s judges it node by node",
                 vt_dtype_name(r->kv_cache_dtype), (long long)cache_row->greedy_agree, (long long)job->n_greedy,
                 cache_share, job->model->hp.n_expert > 0 ? ", a mixture of experts' routing" : "", r->name,
                 vt_dtype_name(r->kv_cache_dtype));
        return VERDICT_NOT_JUDGED;
    }
    /* On a mixture of experts the cache can move routing without moving
     * the greedy tokens: a share past what rounding a cache does is that,
     * not rounding. Rounding K and V moved reference's logits by at most
     * 1.6e-2 of the scale on the dense test models (llama-gqa-tiny-q4_k_m
     * with a q8_0 cache; f16 4e-4..2e-3, bf16 up to 6.7e-3); the router
     * near-ties of qwen3moe-tiny move them by 0.27 (q4_k_m, f16 cache) to
     * 0.42 (f32, bf16): a bound of twice the dense worst tells the two apart. */
    const double cache_rounding_bound = 3e-2;
    /* (a row judged on its own f32-cache run has no cache share in play) */
    if (cache_row && i > 0 && !r->at_f32 && job->model->hp.n_expert > 0 &&
        cache_share > cache_rounding_bound * scale) {
        snprintf(why, size,
                 "the %s cache alone moves reference's own logits by max|dlog| %.2e, past what rounding a cache "
                 "does (%.0e x %.2f): a mixture of experts' routing moved, so the cache's share would hide any "
                 "error and the logits cannot judge this row; vt compare --trace --backends %s --kv-cache-dtype %s "
                 "judges it node by node",
                 vt_dtype_name(r->kv_cache_dtype), cache_share, cache_rounding_bound, scale, r->name,
                 vt_dtype_name(r->kv_cache_dtype));
        return VERDICT_NOT_JUDGED;
    }
    const double rel = row_tolerance(r, job->quantized_weights, job->bf16_weights, &loosest);
    if (rel < 0) {
        snprintf(why, size, "no stated tolerance for %s (not a shipped backend); vt compare --trace shows where it "
                            "departs from reference", loosest);
        return VERDICT_NOT_JUDGED;
    }
    const double tol = rel * scale + cache_share;
    /* Judged on its f32-cache run when the cache's rounding put it above
     * (recheck_at_f32), else on this one. */
    const double max_d = r->at_f32 ? r->f32_max_abs_dlogit : r->stats.max_abs_dlogit;
    const int64_t greedy_agree = r->at_f32 ? r->f32_greedy_agree : r->greedy_agree;
    const double greedy_gap = r->at_f32 ? r->f32_greedy_gap : r->greedy_gap;
    int n = 0;
    if (r->at_f32)
        n = snprintf(why, size,
                     "with the %s cache max|dlog| %.2e, above %.2e: a k or v differing from reference's in its last "
                     "bit rounds the other way there; with an f32 cache, against reference's: ",
                     vt_dtype_name(r->kv_cache_dtype), r->stats.max_abs_dlogit, tol);
    if (n >= 0 && (size_t)n < size)
        n += snprintf(why + n, size - (size_t)n, "max|dlog| %.2e %s %.2e (%s's %.0e x %.2f%s%s%s)", max_d,
                      max_d <= tol ? "within" : "ABOVE", tol, loosest, rel, scale,
                      /* a fallback that ran some of the row's nodes brings its own, looser bound */
                      strlen(loosest) != strcspn(r->name, ":") || strncmp(loosest, r->name, strlen(loosest)) != 0
                          ? ", the loosest of the backends that ran its nodes"
                          : "",
                      cache_share > 0 ? " + the cache's share at " : "",
                      cache_share > 0 ? vt_dtype_name(r->kv_cache_dtype) : "");
    bool ok = max_d <= tol;
    /* the table shows this cache's run: an f32 run's greedy is named as such */
    const char *greedy_run = r->at_f32 ? " with the f32 cache" : "";
    if (job->n_greedy > 0 && n > 0 && (size_t)n < size) {
        if (isnan(greedy_gap)) {
            snprintf(why + n, size - (size_t)n, "; greedy%s %lld/%lld", greedy_run, (long long)greedy_agree,
                     (long long)job->n_greedy);
        } else {
            /* Logits each within tol of reference's can swap two tokens whose
             * reference logits are up to 2 tol apart: such a near-tie is
             * expected (random-weight models have many), a wider gap is not. */
            const bool near_tie = greedy_gap <= 2 * tol;
            snprintf(why + n, size - (size_t)n,
                     "; greedy%s differs at token %lld of %lld, where reference's top two are %.2e apart (%s 2 x "
                     "%.2e: %s)",
                     greedy_run, (long long)greedy_agree + 1, (long long)job->n_greedy, greedy_gap, near_tie ? "<=" : ">",
                     tol, near_tie ? "a near-tie the rounding can flip, expected" : "not explained by rounding");
            ok = ok && near_tie;
        }
    }
    /* A mixture of experts turns rounding into a discrete choice: where a
     * token's top router logits are nearly tied, 8-bit activations (or f32
     * sums in another order) can send it to another expert and move its
     * logits far past any rounding bound, with every node still within its
     * own. The logits cannot judge that; the node-by-node trace can. */
    if (!ok && job->model->hp.n_expert > 0) {
        n = (int)strlen(why);
        if ((size_t)n < size)
            snprintf(why + n, size - (size_t)n,
                     "; this is a mixture of experts, where rounding can route a token to another expert at a "
                     "near-tie of its router and move its logits past any rounding bound: vt compare --trace "
                     "--backends %s judges it node by node",
                     r->name);
        return VERDICT_NOT_JUDGED;
    }
    return ok ? VERDICT_AGREES : VERDICT_DISAGREES;
}

/* The width of the backend column: its longest entry (simd:isa=avx2), at least 10. */
static int name_width(const backend_result *res, int n) {
    int w = 10;
    for (int i = 0; i < n; i++)
        if ((int)strlen(res[i].name) > w) w = (int)strlen(res[i].name);
    return w;
}

static void print_verdicts(const compare_job *job, const backend_result *res, int n) {
    const int nw = name_width(res, n);
    const bool quantized = job->quantized_weights;
    const double scale = reference_scale(job);
    bool any_bf16 = false, any_int8 = false; /* a row ran nodes on a backend multiplying in bf16, in int8 */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < res[i].n_where; k++) {
            any_bf16 = any_bf16 || vt_isa_line_multiplies_bf16(res[i].where_isa[k]);
            any_int8 = any_int8 || vt_isa_line_multiplies_int8(res[i].where_isa[k]);
        }
    printf("\nverdict: each backend against reference within its stated tolerance (relative to max(1, max|logit|) "
           "= %.2f: 1e-5 for f32 arithmetic; simd on %s weights %s%s%s)\n",
           scale, quantized ? "these quantized" : "these float", quantized ? "6e-2, its 8-bit activations" : "1e-5",
           any_bf16 ? "; multiplying in bf16 5e-2 (onednn on quantized and bf16 weights, simd on bf16 weights and "
                      "over a bf16 cache)"
                    : "",
           any_int8 && quantized ? "; onednn in int8 1e-1 (each row of activations and weights under one scale)" : "");
    for (int i = 0; i < n; i++) {
        char why[VT_ERROR_MSG_SIZE + 256], kv[16] = "";
        const verdict_kind v = judge(job, res, i, scale, why, sizeof why);
        if (job->kv_list) snprintf(kv, sizeof kv, "%-6s ", vt_dtype_name(res[i].kv_cache_dtype));
        printf("  %-*s %s%-10s %s\n", nw, res[i].name, kv, verdict_names[v], why);
    }
    printf("\ncolumns: max|dlog|, mean|dlog| = largest and mean |logit - reference's logit| over every prompt "
           "position;\n"
           "  top-1 = share of positions whose most likely token is reference's; KL mean/max = divergence of the\n"
           "  token distribution from reference's, in nats; greedy = continuation tokens equal to reference's\n"
           "  before the first difference; ppl = perplexity over --ppl FILE; pp/tg tok/s = prefill and decode\n"
           "  speed; nodes ran on = the backend that ran each plan node (a fallback shows here).\n");
}

/* ---- output ---- */

static void print_json(const compare_job *job, const char *model_path, const backend_result *res, int n,
                       const char *ppl_file) {
    vt_machine m; /* what the tok/s columns were measured on */
    vt_machine_describe(&m);
    const double scale = reference_scale(job);
    printf("{\"model\": ");
    vt_json_string(stdout, model_path);
    printf(", \"cpu\": ");
    vt_json_string(stdout, m.cpu);
    printf(", \"cores\": %d, \"cpu_isa\": ", m.cores);
    vt_json_string(stdout, m.isa);
    printf(", \"n_tokens\": %lld, \"kv_cache_dtype\": ", (long long)job->n_prompt);
    vt_json_string(stdout, vt_dtype_name(job->baseline_kv));
    printf(", \"threads\": %d, \"greedy_tokens\": %lld, \"ppl_file\": ", job->c->opt.threads,
           (long long)job->n_greedy);
    if (ppl_file) vt_json_string(stdout, ppl_file);
    else printf("null");
    printf(", \"ppl_ctx\": ");
    if (ppl_file) printf("%lld, \"ppl_chunks\": %lld", (long long)job->ppl_ctx, (long long)job->ppl_chunks);
    else printf("null, \"ppl_chunks\": null");
    printf(", \"backends\": [");
    for (int i = 0; i < n; i++) {
        const backend_result *r = &res[i];
        printf("%s{\"name\": ", i ? ", " : "");
        vt_json_string(stdout, r->name);
        printf(", \"kv_cache_dtype\": ");
        vt_json_string(stdout, vt_dtype_name(r->kv_cache_dtype));
        if (r->error[0]) {
            printf(", \"error\": ");
            vt_json_string(stdout, r->error);
            printf(", \"status\": ");
            vt_json_string(stdout, vt_status_name(r->status));
            printf(", \"verdict\": \"not judged\", \"verdict_reason\": \"the row failed\"}"); /* as the table says */
            continue;
        }
        printf(", \"max_abs_dlogit\": ");
        vt_json_number(stdout, r->stats.max_abs_dlogit);
        printf(", \"mean_abs_dlogit\": ");
        vt_json_number(stdout, vt_logit_stats_mean_abs(&r->stats));
        printf(", \"top1_agreement\": ");
        vt_json_number(stdout, vt_logit_stats_top1(&r->stats));
        printf(", \"kl_mean\": ");
        vt_json_number(stdout, vt_logit_stats_kl_mean(&r->stats));
        printf(", \"kl_max\": ");
        vt_json_number(stdout, r->stats.kl_max);
        printf(", \"greedy_agree_tokens\": %lld, \"ppl\": ", (long long)r->greedy_agree);
        vt_json_number(stdout, r->ppl);
        printf(", \"pp_tok_s\": ");
        vt_json_number(stdout, r->pp_tok_s);
        printf(", \"tg_tok_s\": ");
        vt_json_number(stdout, r->tg_tok_s);
        char why[VT_ERROR_MSG_SIZE + 256];
        const verdict_kind v = judge(job, res, i, scale, why, sizeof why);
        printf(", \"verdict\": ");
        vt_json_string(stdout, verdict_names[v]);
        printf(", \"verdict_reason\": ");
        vt_json_string(stdout, why);
        printf(", \"greedy_first_diff_gap\": ");
        vt_json_number(stdout, r->greedy_gap);
        printf(", \"plan_nodes\": %lld, \"nodes_by_backend\": {", (long long)r->plan_nodes);
        for (int k = 0; k < r->n_where; k++) {
            printf("%s", k ? ", " : "");
            vt_json_string(stdout, r->where_name[k]);
            printf(": %lld", (long long)r->where_count[k]);
        }
        printf("}, \"isa_by_backend\": {");
        for (int k = 0; k < r->n_where; k++) {
            printf("%s", k ? ", " : "");
            vt_json_string(stdout, r->where_name[k]);
            printf(": ");
            vt_json_string(stdout, r->where_isa[k]);
        }
        printf("}}");
    }
    printf("]}\n");
}

/* "%.2e" for small metrics, "0" when exactly zero (reference vs itself). */
static void format_metric(char *buf, size_t size, double x) {
    if (isnan(x)) snprintf(buf, size, "nan");
    else if (x == 0.0) snprintf(buf, size, "0");
    else snprintf(buf, size, "%.2e", x);
}

static void format_rate(char *buf, size_t size, double x) {
    if (isnan(x)) snprintf(buf, size, "-");
    else snprintf(buf, size, "%.1f", x);
}

static void print_table(const compare_job *job, const char *model_path, const backend_result *res, int n,
                        const char *ppl_file) {
    const vt_hparams *hp = &job->model->hp;
    vt_machine m; /* what the tok/s columns were measured on */
    vt_machine_describe(&m);
    printf("machine: %s, %d cores; vector extensions: %s; %d threads\n", m.cpu, m.cores, m.isa, job->c->opt.threads);
    printf("model: %s (%s, %d layers, %d wide, vocab %d, %.2f M params, %.2f MiB)\n", model_path, hp->arch_name,
           hp->n_layer, hp->n_embd, hp->n_vocab, (double)job->model->n_params * 1e-6,
           (double)job->model->weight_bytes / (1024.0 * 1024.0));
    if (job->kv_list)
        printf("prompt: %lld tokens; greedy continuation: %lld tokens; each backend at each kv cache dtype "
               "(column kv); %d threads\n",
               (long long)job->n_prompt, (long long)job->n_greedy, job->c->opt.threads);
    else
        printf("prompt: %lld tokens; greedy continuation: %lld tokens; kv cache %s; %d threads\n",
               (long long)job->n_prompt, (long long)job->n_greedy, vt_dtype_name(job->baseline_kv),
               job->c->opt.threads);
    if (ppl_file)
        printf("perplexity: %s, %lld chunks of %lld tokens (second half of each scored)\n", ppl_file,
               (long long)job->ppl_chunks, (long long)job->ppl_ctx);
    printf("metrics vs reference%s over every prompt position\n\n", job->kv_list ? " with an f32 kv cache" : "");
    const int nw = name_width(res, n);
    printf("%-*s %s%10s %10s %7s %10s %10s %8s %9s %10s %10s  %s\n", nw, "backend", job->kv_list ? "kv     " : "", "max|dlog|", "mean|dlog|", "top-1",
           "KL mean", "KL max", "greedy", "ppl", "pp tok/s", "tg tok/s", "nodes ran on");
    for (int i = 0; i < n; i++) {
        const backend_result *r = &res[i];
        char kv[16] = "";
        if (job->kv_list) snprintf(kv, sizeof kv, "%-6s ", vt_dtype_name(r->kv_cache_dtype));
        if (r->error[0]) {
            printf("%-*s %serror: %s\n", nw, r->name, kv, r->error);
            continue;
        }
        char mx[32], mean[32], klm[32], klx[32], ppl[32], pp[32], tg[32], greedy[32], where[512];
        format_metric(mx, sizeof mx, r->stats.max_abs_dlogit);
        format_metric(mean, sizeof mean, vt_logit_stats_mean_abs(&r->stats));
        format_metric(klm, sizeof klm, vt_logit_stats_kl_mean(&r->stats));
        format_metric(klx, sizeof klx, r->stats.kl_max);
        if (isnan(r->ppl)) snprintf(ppl, sizeof ppl, "-");
        else snprintf(ppl, sizeof ppl, "%.3f", r->ppl);
        format_rate(pp, sizeof pp, r->pp_tok_s);
        format_rate(tg, sizeof tg, r->tg_tok_s);
        snprintf(greedy, sizeof greedy, "%lld/%lld", (long long)r->greedy_agree, (long long)job->n_greedy);
        size_t used = 0;
        where[0] = '\0';
        for (int k = 0; k < r->n_where && used < sizeof where; k++) {
            int w = snprintf(where + used, sizeof where - used, "%s%s %lld", k ? ", " : "", r->where_name[k],
                             (long long)r->where_count[k]);
            if (w < 0) break;
            used += (size_t)w;
        }
        printf("%-*s %s%10s %10s %6.1f%% %10s %10s %8s %9s %10s %10s  %s\n", nw, r->name, kv, mx, mean,
               100.0 * vt_logit_stats_top1(&r->stats), klm, klx, greedy, ppl, pp, tg, where);
    }
    printf("\n%-*s runs on (instruction set)\n", nw, "backend");
    for (int i = 0; i < n; i++) {
        const backend_result *r = &res[i];
        if (r->error[0] || r->n_where == 0) continue;
        printf("%-*s", nw, r->name);
        for (int k = 0; k < r->n_where; k++) printf("%s%s %s", k ? " + " : " ", r->where_name[k], r->where_isa[k]);
        printf("\n");
    }
    print_verdicts(job, res, n);
}

/* ---- set-up ---- */

/* The text of FILE through the model's tokenizer, cut into whole chunks. */
static vt_status load_ppl_tokens(const vt_model *m, const char *file, int64_t want_ctx, int32_t **tokens,
                                 int64_t *ctx, int64_t *chunks, vt_error *err) {
    *tokens = NULL;
    if (!m->tokenizer)
        return vt_fail(err, VT_ERR_UNSUPPORTED, "--ppl: this model's tokenizer cannot be used (%s)",
                       m->tokenizer_error);
    if (vt_cli_given_stream(file, err) != VT_OK) return vt_error_prefix(err, "--ppl "); /* read once: a pipe too */
    FILE *f = fopen(file, "rb");
    if (!f) return vt_fail(err, VT_ERR_INVALID, "--ppl %s: cannot open: %s", file, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (size_t got; text && (got = fread(text + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) {
            char *grown = realloc(text, cap *= 2);
            if (!grown) free(text);
            text = grown;
        }
    }
    bool read_error = ferror(f) != 0;
    fclose(f);
    if (!text) return vt_fail(err, VT_ERR_NOMEM, "--ppl %s: out of memory", file);
    if (read_error) {
        free(text);
        return vt_fail(err, VT_ERR_IO, "--ppl %s: read error", file);
    }
    size_t n = 0;
    /* BOS at the front like llama-perplexity; each chunk's first token is
     * replaced by BOS anyway */
    vt_status st = vt_tokenize(m->tokenizer, text, len, vt_tokenizer_add_bos(m->tokenizer), false, tokens, &n, err);
    free(text);
    if (st != VT_OK) return st;
    if (n < 4) {
        free(*tokens);
        *tokens = NULL;
        return vt_fail(err, VT_ERR_INVALID, "--ppl %s: only %zu tokens; perplexity needs at least 4", file, n);
    }
    *ctx = want_ctx < (int64_t)n ? want_ctx : (int64_t)n;
    *chunks = vt_ppl_n_chunks((int64_t)n, *ctx);
    return VT_OK;
}

/* -m, or the cached synthesized model. */
static vt_status open_model(vt_cli_common *c, char *path_buf, size_t size, vt_model **model, vt_error *err) {
    if (c->model_path) {
        vt_status st = vt_cli_given_file(c->model_path, err);
        return st == VT_OK ? vt_model_load(c->model_path, model, err) : st;
    }
    bool created = false;
    vt_status st = vt_cli_default_model(path_buf, size, false, &created, err);
    if (st == VT_OK) {
        st = vt_model_load(path_buf, model, err);
        if (st != VT_OK && !created) { /* a damaged cache file: write it again */
            fprintf(stderr, "vt: cached default model %s did not load (%s); synthesizing it again\n", path_buf,
                    err->msg);
            st = vt_cli_default_model(path_buf, size, true, &created, err);
            if (st == VT_OK) st = vt_model_load(path_buf, model, err);
        }
    }
    if (st == VT_OK) {
        fprintf(stderr, "vt: no -m given: %s default model %s (%s)\n",
                created ? "synthesized the" : "using the cached", path_buf, vt_cli_default_model_shape());
        c->model_path = path_buf;
    }
    return st;
}

/* Distinct KV-cache dtypes a list can name: f32, f16, bf16, q8_0. */
#define KV_DTYPES_MAX 4

/* What `vt compare` was asked. */
typedef struct compare_opts {
    vt_cli_common c;
    vt_cli_prompt prompt;
    const char *backends, *ppl_file;
    const char *kv_dtypes; /* --kv-cache-dtype as given: one dtype, or a list */
    int64_t n_greedy, ppl_ctx;
    bool ppl_ctx_given; /* else the default, at most the model's trained context */
    bool json, profile;
    bool trace, trace_all;
    bool help;
    vt_backend_set set; /* settled by validate: --backends checked against what loads, reference first */
    int32_t kv_list[KV_DTYPES_MAX]; /* settled by validate: the cache dtypes of a list (n_kv >= 2), each once */
    int n_kv;
} compare_opts;

static vt_arg_result compare_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    compare_opts *o = opts;
    const char *a = argv[*i];
    if (strcmp(a, "--backends") == 0) return vt_cli_text_arg(argc, argv, i, &o->backends, err);
    if (strcmp(a, "--ppl") == 0) return vt_cli_text_arg(argc, argv, i, &o->ppl_file, err);
    if (strcmp(a, "--kv-cache-dtype") == 0) return vt_cli_text_arg(argc, argv, i, &o->kv_dtypes, err);
    if (strcmp(a, "-n") == 0 || strcmp(a, "--n-predict") == 0)
        return vt_cli_int_arg(argc, argv, i, "-n", 0, 1 << 20, &o->n_greedy, err);
    if (strcmp(a, "--ppl-ctx") == 0) {
        o->ppl_ctx_given = true;
        return vt_cli_int_arg(argc, argv, i, "--ppl-ctx", 4, 1 << 20, &o->ppl_ctx, err);
    }
    if (strcmp(a, "--json") == 0) o->json = true;
    else if (strcmp(a, "--profile") == 0) o->profile = true;
    else if (strcmp(a, "--trace") == 0) o->trace = true;
    else if (strcmp(a, "--trace-all") == 0) o->trace = o->trace_all = true;
    else return vt_cli_prompt_arg(argc, argv, i, &o->prompt, err);
    return VT_ARG_TAKEN;
}

static vt_status parse_compare(int argc, char **argv, compare_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {
        .name = "compare", .see_help = true, .several_backends = true, .own = compare_arg, .help = help};
    *o = (compare_opts){.n_greedy = DEFAULT_GREEDY, .ppl_ctx = DEFAULT_PPL_CTX};
    return vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
}

/* --kv-cache-dtype: one dtype sets the cache as for every command; a list
 * (each name validated as the single value is, duplicates dropped) runs every
 * backend at each. */
static vt_status settle_kv_dtypes(compare_opts *o, vt_error *err) {
    o->n_kv = 0;
    if (!o->kv_dtypes) return VT_OK;
    if (!strchr(o->kv_dtypes, ',')) return vt_options_set(&o->c.opt, "kv_cache.dtype", o->kv_dtypes, "cli", err);
    char name[16];
    for (const char *p = o->kv_dtypes;;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
        vt_options probe = o->c.opt;
        vt_status st = vt_options_set(&probe, "kv_cache.dtype", name, "cli", err);
        if (st != VT_OK) return st;
        bool seen = false;
        for (int k = 0; k < o->n_kv; k++) seen |= o->kv_list[k] == probe.kv_cache_dtype;
        if (!seen) o->kv_list[o->n_kv++] = probe.kv_cache_dtype;
        if (!end) break;
        p = end + 1;
    }
    if (o->n_kv == 1) { /* "f16,f16": one dtype after all */
        o->c.opt.kv_cache_dtype = o->kv_list[0];
        o->n_kv = 0;
    }
    return VT_OK;
}

static vt_status validate_compare(compare_opts *o, vt_error *err) {
    if (vt_cli_prompt_check(&o->prompt, err) != VT_OK) return vt_error_prefix(err, "compare: ");
    vt_status st = settle_kv_dtypes(o, err);
    if (st != VT_OK) return st;
    /* A trace runs the reference once per backend at one cache dtype and
     * measures no speed: the other measurements are separate runs. */
    if (o->trace && (o->n_kv > 0 || o->ppl_file || o->profile))
        return vt_fail(err, VT_ERR_INVALID, "compare --trace: %s is a separate run (leave it out of the trace)",
                       o->n_kv > 0 ? "a --kv-cache-dtype list" : o->ppl_file ? "--ppl" : "--profile");
    st = vt_cli_backend_set(&o->c.opt, o->backends, VT_BACKEND_SET_REFERENCE_FIRST, &o->set, err);
    return st;
}

/* One measurement of run_compare: a backend at a cache dtype. */
typedef struct compare_run {
    const char *name;    /* the backend */
    const char *options; /* its --backends entry's options, "" for none */
    const char *entry;   /* the entry as given: NAME[:options] */
    int32_t kv_dtype;
} compare_run;

/* The runs in order, the baseline first: each backend at the one cache
 * dtype; or with a list, reference@f32 then every backend (reference first)
 * at each listed dtype, the baseline not twice. Returns how many. */
static int plan_runs(const compare_opts *o, compare_run *runs) {
    int n = 0;
    if (o->n_kv == 0) {
        for (int b = 0; b < o->set.n; b++)
            runs[n++] = (compare_run){o->set.names[b], o->set.options[b], o->set.labels[b], o->c.opt.kv_cache_dtype};
        return n;
    }
    runs[n++] = (compare_run){o->set.names[0], o->set.options[0], o->set.labels[0], VT_F32};
    for (int b = 0; b < o->set.n; b++)
        for (int k = 0; k < o->n_kv; k++)
            if (b > 0 || o->kv_list[k] != VT_F32)
                runs[n++] = (compare_run){o->set.names[b], o->set.options[b], o->set.labels[b], o->kv_list[k]};
    return n;
}

/* A 16-bit or q8_0 cache rounds every stored k and v, and a backend whose
 * k and v differ from the reference's in the last f32 bit (another summation
 * order) can land on the other side of a rounding there: a flip of one unit
 * of the cache dtype, which moves later logits past the f32 bound (measured:
 * simd and onednn 4e-5 to 1e-4 of max|logit| on the float test models at
 * f16, 4 to 10 times it, and within it with an f32 cache). So with one cache
 * dtype other than f32, a row above its bound (or whose greedy continuation
 * departs where rounding cannot explain it) is judged again with an f32
 * cache, against the reference with an f32 cache: a kernel's error still
 * shows there, a flipped rounding does not. Only those rows and the
 * reference run again, without perplexity or the profiler; if they cannot
 * run, the rows keep their first verdict and a warning says why. */
static void recheck_at_f32(const compare_job *job, const compare_run *runs, backend_result *res, int n) {
    if (job->kv_list || job->baseline_kv == VT_F32) return;
    const bool quantized = job->quantized_weights, bf16w = job->bf16_weights;
    const double scale = reference_scale(job);
    bool needed[VT_CLI_MAX_BACKENDS * KV_DTYPES_MAX + 1] = {false}, any = false;
    for (int i = 1; i < n; i++) {
        const char *loosest = NULL;
        const double rel = row_tolerance(&res[i], quantized, bf16w, &loosest), tol = rel * scale;
        needed[i] = !res[i].error[0] && rel >= 0 && strcmp(res[i].name, "reference") != 0 &&
                    (res[i].stats.max_abs_dlogit > tol || (!isnan(res[i].greedy_gap) && res[i].greedy_gap > 2 * tol));
        any = any || needed[i];
    }
    if (!any) return;
    const int32_t V = job->model->hp.n_vocab;
    compare_job j = *job; /* the f32 cache's own baseline, no perplexity, no profile */
    j.ppl_tokens = NULL;
    j.ppl_chunks = 0;
    j.profiler = NULL;
    j.baseline_kv = VT_F32;
    j.ref_logits = malloc((size_t)job->n_prompt * (size_t)V * sizeof(float));
    j.ref_greedy = malloc((size_t)(job->n_greedy + 1) * sizeof(int32_t));
    j.ref_steps = malloc((size_t)(job->n_greedy + 1) * (size_t)V * sizeof(float));
    vt_error err = {0};
    vt_status st = j.ref_logits && j.ref_greedy && j.ref_steps ? VT_OK : vt_fail(&err, VT_ERR_NOMEM, "out of memory");
    int n_checks = 1;
    for (int i = 1; i < n; i++) n_checks += needed[i];
    fprintf(stderr, "vt compare: judging %d row%s again with an f32 kv cache (the %s cache's rounding)\n", n_checks - 1,
            n_checks == 2 ? "" : "s", vt_dtype_name(job->baseline_kv));
    vt_progress_begin(job->bar, "compare", (double)n_checks * (double)(job->n_prompt + job->n_greedy));
    backend_result ref = {0};
    if (st == VT_OK) st = run_backend(&j, runs[0].name, runs[0].options, runs[0].entry, VT_F32, true, &ref, &err);
    for (int i = 1; i < n && st == VT_OK; i++) {
        if (!needed[i]) continue;
        backend_result f32 = {0};
        if (run_backend(&j, runs[i].name, runs[i].options, runs[i].entry, VT_F32, false, &f32, &err) != VT_OK) {
            fprintf(stderr, "vt compare: %s with an f32 kv cache: %s (its verdict stays the %s cache's)\n",
                    res[i].name, err.msg, vt_dtype_name(job->baseline_kv));
            continue;
        }
        res[i].at_f32 = true;
        res[i].f32_max_abs_dlogit = f32.stats.max_abs_dlogit;
        res[i].f32_greedy_agree = f32.greedy_agree;
        res[i].f32_greedy_gap = f32.greedy_gap;
    }
    vt_progress_end(job->bar);
    if (st != VT_OK)
        fprintf(stderr, "vt compare: reference with an f32 kv cache: %s (verdicts stay the %s cache's)\n", err.msg,
                vt_dtype_name(job->baseline_kv));
    free(j.ref_logits);
    free(j.ref_greedy);
    free(j.ref_steps);
}

/* Load (or synthesize) the model, tokenize, size the KV cache, measure every
 * backend (at every cache dtype) in turn, then print. */
static vt_status run_compare(const compare_opts *o, bool *diverged, vt_error *err) {
    vt_cli_common c = o->c; /* the KV cache size and, without -m, the model path are settled here */
    char default_path[4200];
    vt_model *model = NULL;
    int32_t *tokens = NULL, *ppl_tokens = NULL;
    size_t n_tokens = 0;
    backend_result *results = NULL;
    vt_profiler *profiler = NULL;
    compare_job job = {0};
    vt_progress bar;
    vt_error first_failure = {0};

    vt_status st = open_model(&c, default_path, sizeof default_path, &model, err);
    if (st == VT_OK) {
        vt_cli_prompt given = o->prompt;
        if (!given.text && !given.file && !given.ids) given.text = default_prompt;
        st = vt_cli_prompt_tokens_for(&c, model, &given, &tokens, &n_tokens, err);
    }
    if (st == VT_OK && n_tokens == 0) st = vt_fail(err, VT_ERR_INVALID, "the prompt is empty: zero tokens");
    /* the default chunk stays within the positions the model was trained
     * on: a perplexity past them measures the extrapolation, not the model */
    int64_t ppl_ctx = o->ppl_ctx;
    if (st == VT_OK && !o->ppl_ctx_given && model->hp.n_ctx_train >= 4 && model->hp.n_ctx_train < ppl_ctx)
        ppl_ctx = model->hp.n_ctx_train;
    if (st == VT_OK && o->ppl_file)
        st = load_ppl_tokens(model, o->ppl_file, ppl_ctx, &ppl_tokens, &job.ppl_ctx, &job.ppl_chunks, err);
    if (st == VT_OK && o->profile) st = vt_profiler_create(&profiler, err);
    if (st != VT_OK) goto done;

    /* KV cache: exactly what the longest run needs, unless -c was given. */
    int64_t need = (int64_t)n_tokens + o->n_greedy;
    if (ppl_tokens && job.ppl_ctx > need) need = job.ppl_ctx;
    if (c.opt.ctx_size == 0) {
        /* set as a source of its own, which warnings name (the trained-context one) */
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)need);
        st = vt_options_set(&c.opt, "kv_cache.ctx_size", v,
                            ppl_tokens && job.ppl_ctx == need
                                ? (o->ppl_ctx_given ? "--ppl-ctx" : "the --ppl-ctx default")
                                : "the run's length (prompt + -n)",
                            err);
        if (st != VT_OK) goto done;
    } else if (c.opt.ctx_size < need) {
        if (ppl_tokens && job.ppl_ctx == need)
            st = vt_fail(err, VT_ERR_CONTEXT_FULL,
                         "a perplexity chunk is %lld tokens (--ppl-ctx) but -c/--ctx-size is %lld: lower --ppl-ctx "
                         "or raise -c",
                         (long long)need, (long long)c.opt.ctx_size);
        else
            st = vt_fail(err, VT_ERR_CONTEXT_FULL,
                         "the run needs %lld tokens of KV cache (prompt + -n) but -c/--ctx-size is %lld",
                         (long long)need, (long long)c.opt.ctx_size);
        goto done;
    }

    if (o->trace) {
        /* -n greedy tokens are the prompt's argmax and n - 1 decode steps, as without --trace */
        const vt_compare_trace_job tj = {&c, model, c.model_path, tokens, (int64_t)n_tokens,
                                         o->n_greedy > 1 ? o->n_greedy - 1 : 0, &o->set, o->trace_all, o->json};
        st = vt_compare_trace(&tj, diverged, err);
        goto done;
    }

    const int64_t V = model->hp.n_vocab;
    job.c = &c;
    job.model = model;
    job.prompt = tokens;
    job.n_prompt = (int64_t)n_tokens;
    job.n_greedy = o->n_greedy;
    job.ppl_tokens = ppl_tokens;
    job.profiler = profiler;
    job.bar = &bar;
    job.ref_logits = malloc((size_t)n_tokens * (size_t)V * sizeof(float));
    job.ref_greedy = malloc((size_t)(o->n_greedy + 1) * sizeof(int32_t));
    job.greedy = malloc((size_t)(o->n_greedy + 1) * sizeof(int32_t));
    job.ref_steps = malloc((size_t)(o->n_greedy + 1) * (size_t)V * sizeof(float));
    job.chunk = malloc((size_t)(job.ppl_ctx + 1) * sizeof(int32_t));
    compare_run runs[VT_CLI_MAX_BACKENDS * KV_DTYPES_MAX + 1] = {{"reference", "", "reference", VT_F32}};
    const int n_runs = plan_runs(o, runs);
    job.kv_list = o->n_kv > 0;
    job.baseline_kv = runs[0].kv_dtype;
    job.quantized_weights = model_has_quantized_weights(model);
    job.bf16_weights = model_has_bf16_weights(model);
    results = calloc((size_t)n_runs, sizeof *results);
    if (!job.ref_logits || !job.ref_greedy || !job.greedy || !job.ref_steps || !job.chunk || !results) {
        st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
        goto done;
    }

    double per_backend = (double)n_tokens + (double)o->n_greedy + (double)(job.ppl_chunks * job.ppl_ctx);
    vt_progress_begin(&bar, "compare", per_backend * n_runs);
    for (int b = 0; b < n_runs && st == VT_OK; b++) {
        st = run_backend(&job, runs[b].name, runs[b].options, runs[b].entry, runs[b].kv_dtype, b == 0, &results[b], err);
        vt_progress_set(&bar, per_backend * (b + 1));
        /* Without the reference there is nothing to compare with; any other
         * backend that fails is reported in its row and the rest still run
         * (the exit status still says something failed). */
        if (st != VT_OK && b > 0) {
            snprintf(results[b].error, sizeof results[b].error, "%s", err->msg);
            results[b].status = err->code;
            if (first_failure.code == VT_OK) first_failure = *err;
            st = VT_OK;
        }
    }
    vt_progress_end(&bar);
    if (st != VT_OK || c.dry_run) goto done;
    recheck_at_f32(&job, runs, results, n_runs);

    if (o->json) print_json(&job, c.model_path, results, n_runs, o->ppl_file);
    else print_table(&job, c.model_path, results, n_runs, o->ppl_file);
    fflush(stdout); /* the table first, then the profile, also when both go to one pipe */
    if (profiler) vt_profiler_print(profiler, stderr);

done:
    free(results);
    free(job.ref_logits);
    free(job.ref_greedy);
    free(job.greedy);
    free(job.ref_steps);
    free(job.chunk);
    free(ppl_tokens);
    free(tokens);
    vt_model_free(model);
    vt_profiler_free(profiler); /* after every engine (and its registry) is gone */
    return vt_cli_first_failure(st, &first_failure, err);
}

int vt_cmd_compare(int argc, char **argv) {
    vt_error err = {0};
    compare_opts o;
    vt_status st = parse_compare(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    if (st == VT_OK) st = validate_compare(&o, &err);
    bool diverged = false;
    if (st == VT_OK) st = run_compare(&o, &diverged, &err);
    if (st == VT_OK && diverged) return 1; /* the trace named a first divergence */
    return vt_cli_exit(st, &err);
}
