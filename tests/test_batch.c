/* test_batch.c — many sequences in one forward (vt_engine_step) on the real
 * engine path: a step mixing prompts of different lengths, chunked prefill
 * and decode tokens of several sequences gives each sequence the logits it
 * gets alone — bit for bit on the reference (every row is computed on its
 * own, in double) and on simd for every weight dtype — and the KV pool's
 * blocks are all accounted for. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "model.h"
#include "sampler.h"
#include "util.h"

#define N_SEQS 3
#define N_DECODE 6

static const int32_t prompt_a[] = {1, 7, 21, 5, 9};
static const int32_t prompt_b[] = {1, 30, 2, 40, 8, 77, 13, 99, 4, 18, 6};
static const int32_t prompt_c[] = {1, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59};
static const int32_t *const prompts[N_SEQS] = {prompt_a, prompt_b, prompt_c};
static const int64_t prompt_len[N_SEQS] = {5, 11, 17};

static char model_path[1024];
static vt_model *model;
static int32_t V;

/* Load tests/data/models/<name>.gguf as the model every engine uses. */
static int load_model(const char *name) {
    const char *dir = vt_test_data_dir("batching model");
    if (!dir) return 1;
    snprintf(model_path, sizeof model_path, "%s/models/%s.gguf", dir, name);
    vt_error err = {0};
    if (vt_model_load(model_path, &model, &err) != VT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    V = model->hp.n_vocab;
    return 0;
}

static int suite_init(void) { return load_model("qwen3-tiny-q4_k_m"); }

static int suite_cleanup(void) {
    vt_model_free(model);
    return 0;
}

/* The KV-cache dtype engines are opened with (f16 unless a test says). */
static int32_t cache_dtype = VT_F16;

static vt_engine *open_engine_threads(const char *backend, int32_t max_seqs, int32_t threads) {
    vt_options o;
    vt_fixture_options(&o, backend, cache_dtype);
    o.ctx_size = 256;
    if (threads > 0) o.threads = threads;
    const vt_engine_shape shape = {false, max_seqs, false};
    vt_engine *e = NULL;
    vt_error err = {0};
    if (vt_engine_create_shaped(&o, model, &shape, &e, &err) != VT_OK) printf("\n  engine: %s\n", err.msg);
    return e;
}

static vt_engine *open_engine(const char *backend, int32_t max_seqs) { return open_engine_threads(backend, max_seqs, 0); }

/* Each sequence alone: prompt, then N_DECODE greedy steps; logits of every
 * step in want[seq][step] (step 0 = the prompt's last token). */
static float *alone(const char *backend) {
    float *want = malloc((size_t)N_SEQS * (N_DECODE + 1) * (size_t)V * sizeof *want);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    for (int s = 0; s < N_SEQS; s++) {
        vt_engine *e = open_engine(backend, 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        vt_error err = {0};
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, prompts[s], prompt_len[s], false, &err), VT_OK);
        for (int k = 0; k <= N_DECODE; k++) {
            float *row = want + ((size_t)s * (N_DECODE + 1) + (size_t)k) * (size_t)V;
            memcpy(row, vt_engine_logits(e, 0), (size_t)V * sizeof *row);
            if (k == N_DECODE) break;
            const int32_t next = vt_argmax(row, V);
            CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, &next, 1, true, &err), VT_OK);
        }
        vt_engine_free(e);
    }
    return want;
}

/* max |a - b| over a row */
static double max_diff(const float *a, const float *b) {
    double m = 0;
    for (int32_t i = 0; i < V; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* What a run together has seen so far against the runs alone. */
typedef struct comparison {
    const float *want;       /* [N_SEQS][N_DECODE + 1][V] from alone() */
    int step_of[N_SEQS];     /* next row of want each sequence meets */
    int32_t next[N_SEQS];    /* each sequence's greedy token for its next step */
    double worst;
    int greedy_same, greedy_total;
} comparison;

/* Entry i of the last step was sequence s: compare its logits with that
 * sequence's next row alone, and take its greedy token. */
static void compare_entry(comparison *c, const vt_engine *e, int32_t i, int s) {
    const float *got = vt_engine_step_logits(e, i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    const float *w = c->want + ((size_t)s * (N_DECODE + 1) + (size_t)c->step_of[s]) * (size_t)V;
    c->worst = fmax(c->worst, max_diff(got, w));
    c->next[s] = vt_argmax(got, V);
    c->greedy_same += c->next[s] == vt_argmax(w, V);
    c->greedy_total++;
    c->step_of[s]++;
}

/* The same sequences together: A and B's prompts in one step, C's prompt in
 * two chunks (the second beside A's and B's first decode tokens), then
 * decode steps of all three. tol = 0: bit-identical. */
static void together(const char *backend, double tol) {
    float *want = alone(backend);
    vt_engine *e = open_engine(backend, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const int32_t free_at_start = vt_engine_free_blocks(e);
    vt_error err = {0};
    comparison c = {.want = want};

    /* step 1: A and B whole, the first 9 tokens of C (no logits wanted for C) */
    vt_step_entry s1[3] = {{0, prompt_a, 5, true, false}, {1, prompt_b, 11, true, false}, {2, prompt_c, 9, false, false}};
    CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, s1, 3, &err), VT_OK);
    CU_ASSERT_PTR_NULL(vt_engine_step_logits(e, 2));
    for (int s = 0; s < 2; s++) compare_entry(&c, e, s, s);
    /* step 2: A and B decode, the rest of C's prompt: a mixed prefill step */
    vt_step_entry s2[3] = {{0, &c.next[0], 1, true, true}, {1, &c.next[1], 1, true, true}, {2, prompt_c + 9, 8, true, false}};
    CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, s2, 3, &err), VT_OK);
    for (int s = 0; s < 3; s++) compare_entry(&c, e, s, s);
    /* decode steps of all three (the decode plan) until each has N_DECODE */
    while (c.step_of[2] <= N_DECODE) {
        vt_step_entry d[N_SEQS];
        int32_t n = 0, seqs[N_SEQS];
        for (int s = 0; s < N_SEQS; s++) {
            if (c.step_of[s] > N_DECODE) continue;
            seqs[n] = s;
            d[n++] = (vt_step_entry){s, &c.next[s], 1, true, true};
        }
        CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, d, n, &err), VT_OK);
        for (int32_t i = 0; i < n; i++) compare_entry(&c, e, i, seqs[i]);
    }
    for (int s = 0; s < N_SEQS; s++) CU_ASSERT_EQUAL(vt_engine_seq_len(e, s), prompt_len[s] + N_DECODE);
    printf("\n  %s: batched vs alone, worst |dlogit| %.3g (bound %.3g), greedy tokens equal %d/%d", backend, c.worst,
           tol, c.greedy_same, c.greedy_total);
    CU_ASSERT(c.worst <= tol);
    CU_ASSERT_EQUAL(c.greedy_same, c.greedy_total);
    for (int s = 0; s < N_SEQS; s++) vt_engine_seq_release(e, s);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), free_at_start);
    vt_engine_free(e);
    free(want);
}

static void test_reference_batched_equals_alone(void) { together("reference", 0.0); }

/* simd: a row's logits could differ between a call of one row and a call of
 * several if a kernel's f32 summation order depended on M (8-bit activations
 * are quantized per row, so rows never mix). No kernel's does, for quantized
 * and float weights alike (matmul_float.c), so bit for bit here too: the
 * suite's Q4_K_M model, then the same model in F16, BF16 and F32. */
/* together() on backend for each of the n models, bit for bit; the suite's
 * model is loaded again after. */
static void together_on_models(const char *backend, const char *const *models, size_t n) {
    for (size_t i = 0; i < n; i++) {
        vt_model_free(model);
        model = NULL;
        CU_ASSERT_EQUAL_FATAL(load_model(models[i]), 0);
        printf("\n  %s:", models[i]);
        together(backend, 0.0);
    }
    vt_model_free(model);
    model = NULL;
    CU_ASSERT_EQUAL_FATAL(load_model("qwen3-tiny-q4_k_m"), 0);
}

static void test_simd_batched_equals_alone(void) {
    if (!vt_test_simd_expected()) return;
    together("simd", 0.0);
    static const char *const float_models[] = {"qwen3-tiny-f16", "qwen3-tiny-bf16", "qwen3-tiny-f32"};
    together_on_models("simd", float_models, sizeof float_models / sizeof *float_models);
}

/* With a q8_0 cache (quantized on store, one block per 32 values of a head):
 * batched = alone bit for bit on the reference and on simd, with the same
 * greedy tokens. The store quantizes each token's rows alone, so neighbours
 * in a step cannot change a sequence's cache bytes. */
static void test_q8_0_cache_batched_equals_alone(void) {
    cache_dtype = VT_Q8_0;
    together("reference", 0.0);
    if (vt_test_simd_expected()) together("simd", 0.0);
    cache_dtype = VT_F16;
}

/* onednn: its prefill matmuls are oneDNN's gemm, whose kernels (and so
 * summation orders) change with M; the backend gives every call a size at
 * which they agree (backends/onednn/README.md), so a sequence's prompt
 * computed beside others gives the bits it gets alone. Float weights
 * (oneDNN's f32 gemm), quantized ones (bf16 tiles where the CPU has it),
 * and a mixture of experts (its router is f32). Decode tokens run on the
 * fallback (simd). */
static void test_onednn_batched_equals_alone(void) {
    if (!vt_test_onednn_expected()) return; /* it said why */
    static const char *const models[] = {"qwen3-tiny-q4_k_m", "qwen3-tiny-f32", "qwen3-tiny-q8_0", "qwen3moe-tiny-q8_0"};
    together_on_models("onednn", models, sizeof models / sizeof *models);
}

/* A step that does not fit the pool changes nothing: every sequence keeps its
 * tokens and blocks, and the pool's free count is back where it was; it has
 * no logits to give. */
static void test_context_full_changes_nothing(void) {
    vt_engine *e = open_engine("reference", 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_error err = {0};
    vt_step_entry first[2] = {{0, prompt_b, 11, true, false}, {1, prompt_c, 17, true, false}};
    CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, first, 2, &err), VT_OK);
    const int32_t free_before = vt_engine_free_blocks(e);
    int32_t *big = calloc(250, sizeof *big); /* 250 more tokens: the 256-token pool cannot hold them */
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    /* the entry that does not fit first: the one after it reserves nothing */
    vt_step_entry over[2] = {{2, big, 250, true, false}, {0, prompt_a, 5, true, false}};
    CU_ASSERT_PTR_NOT_NULL(vt_engine_step_logits(e, 1)); /* the first step's */
    CU_ASSERT_EQUAL(vt_engine_step(e, over, 2, &err), VT_ERR_CONTEXT_FULL);
    VT_ASSERT_ERROR(err, VT_ERR_CONTEXT_FULL);
    /* a failed step gives no entry logits, not the previous step's */
    for (int i = 0; i < 4; i++) CU_ASSERT_PTR_NULL(vt_engine_step_logits(e, i));
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), free_before);
    CU_ASSERT_EQUAL(vt_engine_seq_len(e, 0), 11);
    CU_ASSERT_EQUAL(vt_engine_seq_len(e, 1), 17);
    CU_ASSERT_EQUAL(vt_engine_seq_len(e, 2), 0);
    /* and the sequences carry on */
    const int32_t t = 5;
    vt_step_entry d[2] = {{0, &t, 1, true, true}, {1, &t, 1, true, true}};
    CU_ASSERT_EQUAL(vt_engine_step(e, d, 2, &err), VT_OK);
    free(big);
    vt_engine_free(e);
}

static void test_bad_steps_are_refused(void) {
    vt_engine *e = open_engine("reference", 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_error err = {0};
    const int32_t ok[2] = {1, 2}, oov[2] = {1, 100000};
    vt_step_entry dup[2] = {{0, ok, 2, true, false}, {0, ok, 1, true, false}};
    CU_ASSERT_EQUAL(vt_engine_step(e, dup, 2, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "sequence 0 appears in entries 0 and 1"));
    vt_step_entry bad_seq[1] = {{5, ok, 2, true, false}};
    CU_ASSERT_EQUAL(vt_engine_step(e, bad_seq, 1, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "sequence 5"));
    vt_step_entry bad_tok[1] = {{1, oov, 2, true, false}};
    CU_ASSERT_EQUAL(vt_engine_step(e, bad_tok, 1, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "outside the vocabulary"));
    vt_step_entry empty[1] = {{1, ok, 0, true, false}};
    CU_ASSERT_EQUAL(vt_engine_step(e, empty, 1, &err), VT_ERR_INVALID);
    vt_step_entry three[3] = {{0, ok, 1, true, false}, {1, ok, 1, true, false}, {1, ok, 1, true, false}};
    CU_ASSERT_EQUAL(vt_engine_step(e, three, 3, &err), VT_ERR_INVALID); /* more entries than sequences */
    CU_ASSERT_EQUAL(vt_engine_seq_len(e, 0), 0);
    CU_ASSERT_EQUAL(vt_engine_seq_len(e, 1), 0);
    vt_engine_free(e);
}

/* A forked sequence continues exactly as one that computed the whole prompt
 * itself, and the original is untouched: prompt B computed once into
 * sequence 0, forked to 1, then each decodes a different token; sequence 1's
 * logits equal those of a fresh sequence 2 fed the prompt and that token. */
static void test_fork_continues_like_a_fresh_sequence(void) {
    vt_engine *e = open_engine("reference", 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_error err = {0};
    const int32_t free_at_start = vt_engine_free_blocks(e);
    vt_step_entry p[1] = {{0, prompt_b, 11, true, false}};
    CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, p, 1, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_seq_fork(e, 0, 1, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_seq_len(e, 1), 11);
    CU_ASSERT_EQUAL(vt_engine_seq_fork(e, 0, 1, &err), VT_ERR_INVALID); /* dst not empty */
    CU_ASSERT_EQUAL(vt_engine_seq_fork(e, 0, 0, &err), VT_ERR_INVALID);
    const int32_t t0 = 7, t1 = 42;
    vt_step_entry d[2] = {{0, &t0, 1, true, true}, {1, &t1, 1, true, true}};
    CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, d, 2, &err), VT_OK);
    float *forked = malloc((size_t)V * sizeof *forked), *orig = malloc((size_t)V * sizeof *orig);
    CU_ASSERT_FATAL(forked && orig);
    memcpy(orig, vt_engine_step_logits(e, 0), (size_t)V * sizeof *orig);
    memcpy(forked, vt_engine_step_logits(e, 1), (size_t)V * sizeof *forked);
    int32_t fresh_tokens[12];
    memcpy(fresh_tokens, prompt_b, sizeof prompt_b);
    fresh_tokens[11] = t1;
    vt_step_entry f[1] = {{2, fresh_tokens, 12, true, false}};
    CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, f, 1, &err), VT_OK);
    CU_ASSERT_EQUAL(memcmp(forked, vt_engine_step_logits(e, 0), (size_t)V * sizeof *forked), 0);
    fresh_tokens[11] = t0;
    vt_step_entry g[1] = {{3, fresh_tokens, 12, true, false}};
    CU_ASSERT_EQUAL_FATAL(vt_engine_step(e, g, 1, &err), VT_OK);
    CU_ASSERT_EQUAL(memcmp(orig, vt_engine_step_logits(e, 0), (size_t)V * sizeof *orig), 0);
    for (int s = 0; s < 4; s++) vt_engine_seq_release(e, s);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), free_at_start);
    free(forked), free(orig);
    vt_engine_free(e);
}

/* Two engines, each driven from its own thread at the same time, on pools
 * of 1 and 2 threads: every sequence gets exactly the logits it gets when
 * the engines run one after the other. host->parallel_for must run each
 * engine's ops on that engine's pool: on the other one, the one-thread
 * engine's backends (per-thread scratch sized for one thread) would be
 * handed thread index 1. */
typedef struct engine_job {
    const char *backend;
    int32_t threads;
    int seq;          /* which prompt */
    float *logits;    /* [N_DECODE + 1][V] */
    vt_status st;
} engine_job;

static void run_job(engine_job *j) {
    vt_engine *e = open_engine_threads(j->backend, 1, j->threads);
    j->st = e ? VT_OK : VT_ERR_BACKEND;
    vt_error err = {0};
    if (j->st == VT_OK) j->st = vt_engine_eval(e, prompts[j->seq], prompt_len[j->seq], false, &err);
    for (int k = 0; j->st == VT_OK && k <= N_DECODE; k++) {
        float *row = j->logits + (size_t)k * (size_t)V;
        memcpy(row, vt_engine_logits(e, 0), (size_t)V * sizeof *row);
        if (k == N_DECODE) break;
        const int32_t next = vt_argmax(row, V);
        j->st = vt_engine_eval(e, &next, 1, true, &err);
    }
    vt_engine_free(e);
}

static void *job_thread(void *arg) {
    run_job(arg);
    return NULL;
}

static void two_engines(const char *backend) {
    const size_t rows = (size_t)(N_DECODE + 1) * (size_t)V;
    float *seq_a = malloc(rows * sizeof(float)), *seq_b = malloc(rows * sizeof(float));
    float *par_a = malloc(rows * sizeof(float)), *par_b = malloc(rows * sizeof(float));
    CU_ASSERT_FATAL(seq_a && seq_b && par_a && par_b);
    engine_job ja = {backend, 1, 1, seq_a, VT_OK}, jb = {backend, 2, 2, seq_b, VT_OK};
    run_job(&ja); /* one after the other */
    run_job(&jb);
    CU_ASSERT_EQUAL_FATAL(ja.st, VT_OK);
    CU_ASSERT_EQUAL_FATAL(jb.st, VT_OK);
    /* A few rounds: the threads' ops interleave differently each time (one
     * shared pool was caught in the second round of two in a Debug build,
     * by the pool's reentrancy assertion). */
    for (int round = 0; round < 4; round++) {
        engine_job pa = {backend, 1, 1, par_a, VT_OK}, pb = {backend, 2, 2, par_b, VT_OK};
        pthread_t ta, tb;
        CU_ASSERT_EQUAL_FATAL(pthread_create(&ta, NULL, job_thread, &pa), 0);
        CU_ASSERT_EQUAL_FATAL(pthread_create(&tb, NULL, job_thread, &pb), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CU_ASSERT_EQUAL(pa.st, VT_OK);
        CU_ASSERT_EQUAL(pb.st, VT_OK);
        CU_ASSERT_EQUAL(memcmp(par_a, seq_a, rows * sizeof(float)), 0);
        CU_ASSERT_EQUAL(memcmp(par_b, seq_b, rows * sizeof(float)), 0);
    }
    free(seq_a), free(seq_b), free(par_a), free(par_b);
}

static void test_two_engines_in_two_threads_reference(void) { two_engines("reference"); }
static void test_two_engines_in_two_threads_simd(void) {
    if (!vt_test_simd_expected()) return;
    two_engines("simd");
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"reference: batched steps give each sequence its own logits bit for bit", test_reference_batched_equals_alone},
        {"simd: batched steps give each sequence its own logits bit for bit, quantized and float weights",
         test_simd_batched_equals_alone},
        {"q8_0 cache: batched = alone bit for bit on the reference and on simd", test_q8_0_cache_batched_equals_alone},
        {"onednn: batched steps give each sequence its own logits bit for bit", test_onednn_batched_equals_alone},
        {"a step that does not fit the KV pool changes nothing", test_context_full_changes_nothing},
        {"bad steps are refused naming the entry", test_bad_steps_are_refused},
        {"a forked sequence continues like a fresh one, the original untouched", test_fork_continues_like_a_fresh_sequence},
        {"two engines in two threads at once: reference, as one after the other", test_two_engines_in_two_threads_reference},
        {"two engines in two threads at once: simd, as one after the other", test_two_engines_in_two_threads_simd},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("batching", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
