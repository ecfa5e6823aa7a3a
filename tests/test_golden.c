/* test_golden.c — the reference backend on every model of ../shared/models,
 * through the real engine path (GGUF -> plans -> forward), against:
 *   - golden/exact/: an independent float64 forward pass. Tolerance 1e-4 x
 *     max(1, max|logit|) on all last-position logits (the bound; we
 *     measure ~3e-7 relative), argmax wherever the golden's top-1/top-2 gap
 *     exceeds twice that;
 *   - llama.cpp's goldens, within golden/README.md's tolerances for an f32
 *     implementation: 1e-4 x max(1, max|logit|) on F32 files, 2e-3 on F16,
 *     1e-2 on BF16, 0.1 on quantized files (llama.cpp rounds activations to
 *     8 bits; the README measures up to 0.095 on llama-gqa-tiny-q4_k_m);
 *   - llama.cpp's 32 greedy tokens of aidreams260k-f32 (smallest gap on that
 *     path 0.026, far above f32 rounding, so exact equality is safe).
 * KV cache f32, as the goldens were made. Each sequence runs through prefill
 * and again one token at a time through decode, once: both golden sets hold
 * the same token sequences, so the second check reads the first one's run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "json_mini.h"
#include "sampler.h"
#include "util.h"

static const char *const models[] = {
    "aidreams260k-f32",  "aidreams260k-q8_0", "aidreams260k-q4_0", "qwen3-tiny-f32",      "qwen3-tiny-f16",
    "qwen3-tiny-bf16",   "qwen3-tiny-q8_0",   "qwen3-tiny-q4_0",   "qwen3-tiny-q4_k_m",   "qwen3-tiny-q5_k_m",
    "qwen3-tiny-q6_k",   "qwen2-tiny-f32",    "qwen2-tiny-q4_k_m", "llama-gqa-tiny-f32", "llama-gqa-tiny-q4_k_m",
};
#define N_MODELS (sizeof models / sizeof *models)

static bool load_json(const char *path, json_value *out) {
    size_t size = 0;
    char *text = vt_test_read_file(path, &size);
    if (!text) {
        printf("\ncannot read %s\n", path);
        return false;
    }
    char msg[256];
    bool ok = json_parse(text, size, out, msg, sizeof msg);
    if (!ok) printf("\n%s: %s\n", path, msg);
    free(text);
    return ok;
}

/* Tolerance for comparing with llama.cpp's goldens, by the file's weight type. */
static double llamacpp_tolerance(const char *model, double max_logit) {
    if (strstr(model, "-f32")) return 1e-4 * fmax(1.0, max_logit);
    if (strstr(model, "-f16")) return 2e-3;
    if (strstr(model, "-bf16")) return 1e-2;
    return 0.1;
}

typedef struct check_stats {
    double worst_rel; /* max |dlogit| / max(1, max|logit|) seen */
    int sequences;
} check_stats;

/* What the engine computed for one golden sequence, kept so that the exact
 * and the llama.cpp goldens (same models, same token sequences) are checked
 * against one run instead of two: the forward passes are the whole cost of
 * this test (~95% in the reference matmul under ASan). */
#define MAX_SEQUENCES 8
typedef struct sequence_run {
    int32_t *tokens; /* [n]: a golden file's sequence must match it to reuse the run */
    size_t n;
    float *last_logits[2]; /* [n_vocab] at the last position: [0] prefill, [1] decode */
    int32_t *argmax[2];    /* [n] argmax at every position */
} sequence_run;

typedef struct model_runs {
    int32_t n_vocab;
    sequence_run seqs[MAX_SEQUENCES];
} model_runs;

static model_runs runs[N_MODELS];

static void free_runs(void) {
    for (size_t m = 0; m < N_MODELS; m++) {
        for (size_t s = 0; s < MAX_SEQUENCES; s++) {
            sequence_run *r = &runs[m].seqs[s];
            free(r->tokens);
            for (int d = 0; d < 2; d++) {
                free(r->last_logits[d]);
                free(r->argmax[d]);
            }
        }
    }
    memset(runs, 0, sizeof runs);
}

static int suite_cleanup(void) {
    free_runs();
    return 0;
}

/* Run `ids` through prefill and then again one token at a time through
 * decode (f->engine reset before each), keeping what the checks read. */
static void run_sequence(vt_fixture *f, const int32_t *ids, size_t n, sequence_run *r) {
    const int32_t V = f->model->hp.n_vocab;
    r->tokens = malloc(n * sizeof *r->tokens);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r->tokens);
    memcpy(r->tokens, ids, n * sizeof *ids);
    r->n = n;
    for (int decode = 0; decode < 2; decode++) {
        vt_engine_reset(f->engine);
        vt_status st = vt_engine_eval(f->engine, ids, (int64_t)n, decode, &f->err);
        CU_ASSERT_EQUAL_FATAL(st, VT_OK);
        r->last_logits[decode] = malloc((size_t)V * sizeof(float));
        r->argmax[decode] = malloc(n * sizeof(int32_t));
        CU_ASSERT_FATAL(r->last_logits[decode] && r->argmax[decode]);
        memcpy(r->last_logits[decode], vt_engine_logits(f->engine, (int64_t)n - 1), (size_t)V * sizeof(float));
        for (size_t i = 0; i < n; i++) r->argmax[decode][i] = vt_argmax(vt_engine_logits(f->engine, (int64_t)i), V);
    }
}

/* Check one golden file's sequences (prefill and decode) against the runs of
 * model `mi`, running the engine for the sequences not run yet. */
static void check_model(const char *shared, size_t mi, bool exact, check_stats *stats) {
    const char *name = models[mi];
    char gpath[1024], mpath[1024];
    snprintf(gpath, sizeof gpath, "%s/golden/%s%s.json", shared, exact ? "exact/" : "", name);
    snprintf(mpath, sizeof mpath, "%s/models/%s.gguf", shared, name);
    json_value g;
    if (!load_json(gpath, &g)) {
        CU_FAIL("golden unreadable");
        return;
    }
    model_runs *mr = &runs[mi];
    vt_fixture f = {0};
    bool opened = false;
    const json_value *seqs = json_get(&g, "sequences");
    CU_ASSERT_PTR_NOT_NULL_FATAL(seqs);
    CU_ASSERT_FATAL(seqs->n <= MAX_SEQUENCES);
    for (size_t s = 0; s < seqs->n; s++) {
        const json_value *seq = &seqs->items[s];
        const json_value *toks = json_get(seq, "tokens"), *last = json_get(seq, "last_logits"),
                         *am = json_get(seq, "argmax"), *gap = json_get(seq, "argmax_gap");
        CU_ASSERT_FATAL(toks && last && am && gap && am->n == toks->n && toks->n > 0);
        int32_t *ids = malloc(toks->n * sizeof *ids);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
        for (size_t i = 0; i < toks->n; i++) ids[i] = (int32_t)toks->items[i].number;
        sequence_run *r = &mr->seqs[s];
        if (!r->tokens || r->n != toks->n || memcmp(r->tokens, ids, toks->n * sizeof *ids) != 0) {
            /* not run yet (or this file's sequence differs): run it now */
            if (!opened) {
                CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&f, mpath, "reference", VT_F32, true), VT_OK);
                opened = true;
                mr->n_vocab = f.model->hp.n_vocab;
            }
            free(r->tokens);
            for (int d = 0; d < 2; d++) {
                free(r->last_logits[d]);
                free(r->argmax[d]);
            }
            memset(r, 0, sizeof *r);
            run_sequence(&f, ids, toks->n, r);
        }
        const int32_t V = mr->n_vocab;
        CU_ASSERT_FATAL(last->n == (size_t)V);
        double max_logit = 0;
        for (size_t i = 0; i < last->n; i++) max_logit = fmax(max_logit, fabs(last->items[i].number));
        double tol = exact ? 1e-4 * fmax(1.0, max_logit) : llamacpp_tolerance(name, max_logit);
        for (int decode = 0; decode < 2; decode++) {
            const float *lg = r->last_logits[decode];
            double worst = 0;
            for (int32_t i = 0; i < V; i++) worst = fmax(worst, fabs(lg[i] - last->items[i].number));
            if (worst > tol)
                printf("\n%s %s %s: max |dlogit| %.3g > tolerance %.3g\n", name, json_get(seq, "name")->str,
                       decode ? "decode" : "prefill", worst, tol);
            CU_ASSERT(worst <= tol);
            stats->worst_rel = fmax(stats->worst_rel, worst / fmax(1.0, max_logit));
            for (size_t i = 0; i < toks->n; i++) {
                if (gap->items[i].number <= 2 * tol) continue; /* too close to call */
                int32_t a = r->argmax[decode][i];
                if (a != (int32_t)am->items[i].number)
                    printf("\n%s %s %s position %zu: argmax %d, golden %d (gap %.3g)\n", name,
                           json_get(seq, "name")->str, decode ? "decode" : "prefill", i, a,
                           (int)am->items[i].number, gap->items[i].number);
                CU_ASSERT_EQUAL(a, (int32_t)am->items[i].number);
            }
        }
        stats->sequences++;
        free(ids);
    }
    if (opened) vt_fixture_close(&f);
    json_free(&g);
}

static void run_all(bool exact) {
    const char *shared = vt_test_data_dir(exact ? "exact goldens" : "llama.cpp goldens");
    if (!shared) return;
    check_stats stats = {0, 0};
    for (size_t i = 0; i < N_MODELS; i++) check_model(shared, i, exact, &stats);
    printf("\n%d sequences x {prefill, decode} on %zu models; worst |dlogit| / max(1, max|logit|) = %.3g\n",
           stats.sequences, N_MODELS, stats.worst_rel);
    CU_ASSERT_EQUAL(stats.sequences, (int)(3 * N_MODELS));
}

static void test_reference_matches_exact_goldens(void) { run_all(true); }
static void test_reference_within_llamacpp_tolerances(void) { run_all(false); }

static void test_aidreams_greedy_matches_llamacpp(void) {
    const char *shared = vt_test_data_dir("greedy golden");
    if (!shared) return;
    char gpath[1024], mpath[1024];
    snprintf(gpath, sizeof gpath, "%s/golden/aidreams260k-f32.json", shared);
    snprintf(mpath, sizeof mpath, "%s/models/aidreams260k-f32.gguf", shared);
    json_value g;
    CU_ASSERT_FATAL(load_json(gpath, &g));
    const json_value *greedy = json_get(&g, "greedy");
    const json_value *prompt = json_get(greedy, "prompt"), *want = json_get(greedy, "tokens");
    CU_ASSERT_FATAL(prompt && want && want->n == 32);
    vt_fixture f;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&f, mpath, "reference", VT_F32, false), VT_OK);
    int32_t ids[64];
    for (size_t i = 0; i < prompt->n; i++) ids[i] = (int32_t)prompt->items[i].number;
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, ids, (int64_t)prompt->n, false, &f.err), VT_OK);
    size_t agree = 0;
    for (size_t k = 0; k < want->n; k++) {
        int32_t next = vt_argmax(vt_engine_logits(f.engine, 0), f.model->hp.n_vocab);
        if (next != (int32_t)want->items[k].number) break;
        agree++;
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, &next, 1, true, &f.err), VT_OK);
    }
    printf("\ngreedy continuation agrees with llama.cpp for %zu/32 tokens\n", agree);
    CU_ASSERT_EQUAL(agree, 32);
    vt_fixture_close(&f);
    json_free(&g);
}

/* The CLI end to end: text in, readable text out. */
static void test_run_once_upon_a_time_is_readable(void) {
    const char *shared = vt_test_data_dir("vt run on aidreams260k");
    if (!shared) return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s/models/aidreams260k-f32.gguf' -p 'Once upon a time' -n 40 --temp 0 "
             "--backend reference", VT_CLI_PATH, shared);
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_cmd(cmd, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    size_t len = strlen(out), letters = 0, spaces = 0, other = 0;
    for (size_t i = 0; i < len; i++) {
        char c = out[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) letters++;
        else if (c == ' ') spaces++;
        else if (!strchr(".,!?'\"\n-:;", c)) other++;
    }
    printf("\nvt run printed: %s", out);
    /* 40 tokens of a story model: words separated by spaces, no mojibake or control bytes. */
    CU_ASSERT(len >= 40);
    CU_ASSERT(spaces >= 8);
    CU_ASSERT(letters >= len / 2);
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err ? err : "", "tok/s"));
    free(out);
    free(err);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"reference backend matches exact goldens (prefill and decode)", test_reference_matches_exact_goldens},
        {"reference backend within llama.cpp golden tolerances", test_reference_within_llamacpp_tolerances},
        {"aidreams260k-f32 greedy 32 tokens equal llama.cpp's", test_aidreams_greedy_matches_llamacpp},
        {"vt run -p 'Once upon a time' prints readable text", test_run_once_upon_a_time_is_readable},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("golden", NULL, suite_cleanup, tests);
    return vt_test_run();
}
