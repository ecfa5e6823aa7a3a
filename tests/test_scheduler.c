/* test_scheduler.c — continuous batching (core/engine/scheduler.h) on the
 * real engine: every request, whatever runs beside it, whether its prompt is
 * chunked or it is preempted and recomputed, generates exactly the tokens it
 * generates alone (greedy and seeded sampling); cancellation frees blocks at
 * once; a failed forward advances no request; bad requests are refused
 * naming the field; and a long random run of adds, steps and cancels on a
 * small pool ends with every block free. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_fixture.h"
#include "host.h"
#include "model.h"
#include "scheduler.h"
#include "util.h"

#define MAX_GEN 64

static vt_model *model;       /* qwen3-tiny: the layout of the models vt serves */
static vt_model *small_model; /* aidreams260k, 7x fewer weights: the long random run */
static int32_t V;

static vt_model *load(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s", dir, name);
    vt_model *m = NULL;
    vt_error err = {0};
    if (vt_model_load(path, &m, &err) != VT_OK) fprintf(stderr, "%s\n", err.msg);
    return m;
}

static int suite_init(void) {
    const char *dir = vt_test_data_dir("scheduler models");
    if (!dir) return 1;
    model = load(dir, "qwen3-tiny-q4_k_m.gguf");
    small_model = load(dir, "aidreams260k-q8_0.gguf");
    if (!model || !small_model) return 1;
    V = model->hp.n_vocab;
    return 0;
}

static int suite_cleanup(void) {
    vt_model_free(model);
    vt_model_free(small_model);
    return 0;
}

/* ctx_size tokens in the pool, in blocks of block_size. */
static vt_engine *open_engine_on(vt_model *m, const char *backend, int32_t max_seqs, int64_t ctx_size,
                                 int32_t block_size) {
    vt_options o;
    vt_fixture_options(&o, backend, VT_F16);
    o.ctx_size = ctx_size;
    o.block_size = block_size;
    const vt_engine_shape shape = {false, max_seqs, false};
    vt_engine *e = NULL;
    vt_error err = {0};
    if (vt_engine_create_shaped(&o, m, &shape, &e, &err) != VT_OK) printf("\n  engine: %s\n", err.msg);
    return e;
}

/* qwen3-tiny, blocks of 16 tokens. */
static vt_engine *open_engine(const char *backend, int32_t max_seqs, int64_t ctx_size) {
    return open_engine_on(model, backend, max_seqs, ctx_size, 16);
}

static vt_sched *open_sched(vt_engine *e, int32_t max_waiting, int64_t budget) {
    const vt_sched_options o = {max_waiting, budget, 0};
    vt_sched *s = NULL;
    vt_error err = {0};
    if (vt_sched_create(e, &o, &s, &err) != VT_OK) printf("\n  scheduler: %s\n", err.msg);
    return s;
}

/* A prompt of n ids spread over the vocabulary, different for each salt. */
static void make_prompt(int32_t *p, int64_t n, int salt) {
    for (int64_t k = 0; k < n; k++) p[k] = (int32_t)((1 + 37 * salt + 11 * k + k * k) % V);
}

static vt_sched_request greedy_request(const int32_t *prompt, int64_t n, int64_t max_new) {
    vt_sched_request q = {.prompt = prompt, .n_prompt = n, .max_new_tokens = max_new, .sampler = vt_sampler_default_params()};
    return q;
}

typedef struct generation {
    int32_t tokens[MAX_GEN];
    int64_t n;
    vt_sched_state state;
    vt_sched_finish finish;
    int32_t preemptions;
} generation;

/* The contract for one request alone, on an engine of one sequence: prefill
 * the prompt, then sample and decode one token at a time; stop after a stop
 * id, after max_new_tokens, or when the next token would not fit the context. */
static void generate_alone(vt_engine *e, const vt_sched_request *q, generation *g) {
    memset(g, 0, sizeof *g);
    vt_engine_reset(e);
    const int32_t n_vocab = e->model->hp.n_vocab;
    vt_error err = {0};
    vt_sampler *smp = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_sampler_create(&q->sampler, &smp, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, q->prompt, q->n_prompt, false, &err), VT_OK);
    const int64_t room = e->ctx_size - q->n_prompt + 1;
    const int64_t most = q->max_new_tokens < room ? q->max_new_tokens : room;
    CU_ASSERT_FATAL(most <= MAX_GEN);
    for (;;) {
        const int32_t t = vt_sampler_sample(smp, vt_engine_logits(e, 0), n_vocab);
        g->tokens[g->n++] = t;
        bool stop = false;
        for (int32_t i = 0; i < q->n_stop_ids; i++) stop |= t == q->stop_ids[i];
        if (stop || g->n == most) {
            g->finish = stop ? VT_SCHED_FINISH_STOP : VT_SCHED_FINISH_LENGTH;
            break;
        }
        CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, &t, 1, true, &err), VT_OK);
    }
    g->state = VT_SCHED_FINISHED;
    vt_sampler_free(smp);
}

/* Read request id into g (appending its new tokens). */
static void collect(vt_sched *s, uint64_t id, generation *g) {
    vt_sched_output out;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, id, &out, &err), VT_OK);
    CU_ASSERT_FATAL(g->n + out.n_tokens <= MAX_GEN);
    memcpy(g->tokens + g->n, out.tokens, (size_t)out.n_tokens * sizeof *out.tokens);
    g->n += out.n_tokens;
    CU_ASSERT_EQUAL(g->n, out.n_generated);
    g->state = out.state;
    g->finish = out.finish;
    g->preemptions = out.n_preemptions;
}

/* Sums of what the steps did, to show what a test exercised. */
typedef struct step_totals {
    int steps;
    int mixed;     /* steps with decode tokens and prompt chunks together */
    int batched;   /* steps of more than one sequence */
    int preempted; /* preemptions */
} step_totals;

static void add_step(step_totals *t, const vt_sched_step_info *info) {
    t->steps++;
    t->mixed += info->n_decode_tokens > 0 && info->n_prefill_tokens > 0;
    t->batched += info->n_entries > 1;
    t->preempted += info->n_preempted;
}

/* Step until nothing waits or runs, reading every request after each step. */
static void run_to_end(vt_sched *s, const uint64_t *ids, generation *gens, int n, step_totals *t) {
    vt_error err = {0};
    for (int guard = 0; vt_sched_n_waiting(s) + vt_sched_n_running(s) > 0; guard++) {
        CU_ASSERT_FATAL(guard < 10000);
        vt_sched_step_info info;
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        CU_ASSERT(info.n_entries >= 1);
        add_step(t, &info);
        for (int i = 0; i < n; i++) collect(s, ids[i], &gens[i]);
    }
}

static bool same_generation(const generation *a, const generation *b) {
    return a->n == b->n && a->finish == b->finish && a->state == b->state &&
           memcmp(a->tokens, b->tokens, (size_t)a->n * sizeof *a->tokens) == 0;
}

/* Requests, what each generates alone, and what each got from a scheduler. */
#define MAX_REQS 8

typedef struct workload {
    int n;
    int32_t prompts[MAX_REQS][32];
    vt_sched_request reqs[MAX_REQS];
    uint64_t ids[MAX_REQS];
    generation want[MAX_REQS], got[MAX_REQS];
} workload;

/* n greedy requests: prompt i of lens[i] tokens (salted salt + i), news[i] new tokens. */
static void workload_make(workload *w, int n, const int64_t *lens, const int64_t *news, int salt) {
    memset(w, 0, sizeof *w);
    CU_ASSERT_FATAL(n <= MAX_REQS);
    w->n = n;
    for (int i = 0; i < n; i++) {
        CU_ASSERT_FATAL(lens[i] <= 32);
        make_prompt(w->prompts[i], lens[i], salt + i);
        w->reqs[i] = greedy_request(w->prompts[i], lens[i], news[i]);
    }
}

/* want: each request alone, on an engine of one sequence of ctx_size tokens. */
static void workload_alone(workload *w, const char *backend, int64_t ctx_size) {
    vt_engine *one = open_engine(backend, 1, ctx_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    for (int i = 0; i < w->n; i++) generate_alone(one, &w->reqs[i], &w->want[i]);
    vt_engine_free(one);
}

/* Queue requests [from, to). */
static void workload_add(vt_sched *s, workload *w, int from, int to) {
    vt_error err = {0};
    for (int i = from; i < to; i++) CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &w->reqs[i], &w->ids[i], &err), VT_OK);
}

/* Requests that got what they generate alone. */
static int workload_same(const workload *w) {
    int same = 0;
    for (int i = 0; i < w->n; i++) same += same_generation(&w->got[i], &w->want[i]);
    return same;
}

/* ---- equivalence ------------------------------------------------------- */

/* Six greedy requests on an engine of four sequences: three at the start,
 * three more after two steps (their prompts beside the first ones' decodes),
 * so some wait for a sequence. Each must produce its tokens alone. */
static void batched_equals_alone(const char *backend) {
    static const int64_t lens[6] = {5, 11, 17, 3, 23, 9}, news[6] = {12, 8, 16, 20, 10, 14};
    workload w;
    workload_make(&w, 6, lens, news, 0);
    workload_alone(&w, backend, 256);

    vt_engine *e = open_engine(backend, 4, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const int32_t all_free = vt_engine_free_blocks(e);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    step_totals t = {0};
    workload_add(s, &w, 0, 3);
    for (int k = 0; k < 2; k++) {
        vt_sched_step_info info;
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        add_step(&t, &info);
    }
    workload_add(s, &w, 3, 6);
    run_to_end(s, w.ids, w.got, w.n, &t);
    for (int i = 0; i < w.n; i++) CU_ASSERT_EQUAL(w.got[i].finish, VT_SCHED_FINISH_LENGTH);
    const int same = workload_same(&w);
    printf("\n  %s: %d/%d requests equal alone; %d steps, %d batched, %d mixing decodes with prompts", backend, same,
           w.n, t.steps, t.batched, t.mixed);
    CU_ASSERT_EQUAL(same, w.n);
    CU_ASSERT(t.mixed >= 1);
    CU_ASSERT(t.batched >= 1);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free);
    vt_sched_free(s);
    vt_engine_free(e);
}

static void test_reference_batched_equals_alone(void) { batched_equals_alone("reference"); }

static void test_simd_batched_equals_alone(void) {
    if (!vt_test_simd_expected()) return;
    batched_equals_alone("simd");
}

/* Seeded sampling: each request's random stream is its own, so beside three
 * others (and a greedy one) it draws exactly what it draws alone. */
static void test_seeded_sampling_independent_of_batch(void) {
    static const int64_t lens[5] = {6, 8, 10, 12, 14}, news[5] = {16, 16, 16, 16, 16};
    workload w;
    workload_make(&w, 5, lens, news, 10);
    workload_alone(&w, "reference", 256);
    generation greedy[5];
    memcpy(greedy, w.want, sizeof greedy);
    for (int i = 1; i < w.n; i++) w.reqs[i].sampler = (vt_sampler_params){0.9f, 40, 0.95f, 0.05f, 1000u + (uint64_t)i};
    workload_alone(&w, "reference", 256);
    int differs_from_greedy = 0; /* the draws are not just the argmax */
    for (int i = 1; i < w.n; i++) differs_from_greedy += !same_generation(&w.want[i], &greedy[i]);
    CU_ASSERT(differs_from_greedy >= 1);

    vt_engine *e = open_engine("reference", 4, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    step_totals t = {0};
    workload_add(s, &w, 0, w.n);
    run_to_end(s, w.ids, w.got, w.n, &t);
    const int same = workload_same(&w);
    printf("\n  seeded: %d/%d requests equal alone (%d/%d differ from greedy); %d steps, %d batched", same, w.n,
           differs_from_greedy, w.n - 1, t.steps, t.batched);
    CU_ASSERT_EQUAL(same, w.n);
    vt_sched_free(s);
    vt_engine_free(e);
}

/* ---- preemption -------------------------------------------------------- */

/* A pool of 64 tokens (4 blocks) for four requests of up to 44 tokens each:
 * they cannot all hold their blocks at once, so some are preempted and
 * recomputed, and every one still finishes with its tokens alone. */
static void preemption_completes_every_request(const char *backend) {
    static const int64_t lens[4] = {10, 12, 7, 14}, news[4] = {30, 30, 30, 30};
    workload w;
    workload_make(&w, 4, lens, news, 20);
    workload_alone(&w, backend, 64);

    vt_engine *e = open_engine(backend, 4, 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const int32_t all_free = vt_engine_free_blocks(e);
    CU_ASSERT_EQUAL(all_free, 4);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    step_totals t = {0};
    workload_add(s, &w, 0, w.n);
    run_to_end(s, w.ids, w.got, w.n, &t);
    int per_request = 0;
    for (int i = 0; i < w.n; i++) {
        per_request += w.got[i].preemptions;
        CU_ASSERT_EQUAL(w.got[i].n, 30);
    }
    const int same = workload_same(&w);
    const vt_sched_stats st = vt_sched_get_stats(s);
    printf("\n  %s: %d/%d requests equal alone; %lld preemptions (%lld tokens recomputed) in %d steps", backend, same,
           w.n, (long long)st.n_preemptions, (long long)st.n_recomputed, t.steps);
    CU_ASSERT_EQUAL(same, w.n);
    CU_ASSERT(st.n_preemptions >= 1);
    CU_ASSERT_EQUAL(st.n_preemptions, per_request);
    CU_ASSERT_EQUAL(st.n_preemptions, t.preempted);
    CU_ASSERT(st.n_recomputed >= 1);
    /* the prefix cache's counts are of the prompts, each once: a
     * recomputation finds its own blocks again, which is no prompt hit */
    CU_ASSERT_FATAL(vt_engine_kv_cache(e)->prefix_cache);
    CU_ASSERT_EQUAL(st.n_prompt_looked_up, lens[0] + lens[1] + lens[2] + lens[3]);
    CU_ASSERT_EQUAL(st.n_prompt_hit, 0); /* four different prompts */
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free);
    vt_sched_free(s);
    vt_engine_free(e);
}

static void test_reference_preemption(void) { preemption_completes_every_request("reference"); }

/* simd: a recomputed sequence's k/v come from the prefill kernels, where they
 * first came from decode's; its greedy tokens must not change. */
static void test_simd_preemption(void) {
    if (!vt_test_simd_expected()) return;
    preemption_completes_every_request("simd");
}

/* A forward that fails (an allocation refused through the host's failure
 * injection, at a different point of each step) advances no request: retried,
 * the same requests under the same preemption pressure still generate their
 * tokens alone and give every block back. */
static void test_failed_step_changes_no_request(void) {
    static const int64_t lens[3] = {10, 12, 7}, news[3] = {20, 20, 20};
    workload w;
    workload_make(&w, 3, lens, news, 80);
    workload_alone(&w, "reference", 48);

    vt_engine *e = open_engine("reference", 3, 48);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const int32_t all_free = vt_engine_free_blocks(e);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    workload_add(s, &w, 0, w.n);
    int failures = 0, steps = 0;
    while (vt_sched_n_waiting(s) + vt_sched_n_running(s) > 0) {
        CU_ASSERT_FATAL(steps++ < 1000);
        /* the n-th allocation of this step fails, n cycling over the step's
         * allocations (some 36 on this model) */
        vt_host_fail_alloc_after(1 + (steps * 7) % 40);
        vt_status st = vt_sched_step(s, NULL, &err);
        vt_host_fail_alloc_after(0);
        if (st != VT_OK) {
            CU_ASSERT_EQUAL_FATAL(st, VT_ERR_NOMEM);
            failures++;
            for (int i = 0; i < w.n; i++) collect(s, w.ids[i], &w.got[i]);
            CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
        }
        for (int i = 0; i < w.n; i++) collect(s, w.ids[i], &w.got[i]);
    }
    const int same = workload_same(&w);
    printf("\n  %d/%d requests equal alone after %d failed steps (of %d), %lld preemptions", same, w.n, failures, steps,
           (long long)vt_sched_get_stats(s).n_preemptions);
    CU_ASSERT_EQUAL(same, w.n);
    CU_ASSERT(failures >= 1);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free);
    vt_sched_free(s);
    vt_engine_free(e);
}

/* ---- chunked prefill --------------------------------------------------- */

/* want: what qa and qb generate alone (on the reference); got cleared. */
static void two_alone(const vt_sched_request *qa, const vt_sched_request *qb, generation want[2], generation got[2]) {
    memset(got, 0, 2 * sizeof *got);
    vt_engine *one = open_engine("reference", 1, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    generate_alone(one, qa, &want[0]);
    generate_alone(one, qb, &want[1]);
    vt_engine_free(one);
}

/* Run both requests to their end: each generates what it does alone. Frees s and e. */
static void two_to_end(vt_sched *s, vt_engine *e, const uint64_t ids[2], const generation want[2], generation got[2]) {
    step_totals t = {0};
    run_to_end(s, ids, got, 2, &t);
    CU_ASSERT(same_generation(&got[0], &want[0]));
    CU_ASSERT(same_generation(&got[1], &want[1]));
    vt_sched_free(s);
    vt_engine_free(e);
}

/* Budget 8 tokens per step: a running request's decode takes one, so a
 * 23-token prompt is prefilled 7 + 7 + 7 + 2 over four steps beside it, and
 * only the fourth gives its first token. */
static void test_chunked_prefill(void) {
    int32_t pa[5], pb[23];
    make_prompt(pa, 5, 30);
    make_prompt(pb, 23, 31);
    const vt_sched_request qa = greedy_request(pa, 5, 12), qb = greedy_request(pb, 23, 6);
    generation want[2], got[2];
    two_alone(&qa, &qb, want, got);

    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 8);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    uint64_t ids[2];
    vt_sched_step_info info;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qa, &ids[0], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 5);
    collect(s, ids[0], &got[0]);
    CU_ASSERT_EQUAL(got[0].n, 1);
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qb, &ids[1], &err), VT_OK);
    static const int64_t chunks[4] = {7, 7, 7, 2};
    for (int k = 0; k < 4; k++) {
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        CU_ASSERT_EQUAL(info.n_entries, 2);
        CU_ASSERT_EQUAL(info.n_decode_tokens, 1);
        CU_ASSERT_EQUAL(info.n_prefill_tokens, chunks[k]);
        collect(s, ids[0], &got[0]);
        collect(s, ids[1], &got[1]);
        CU_ASSERT_EQUAL(got[1].n, k == 3 ? 1 : 0);
    }
    two_to_end(s, e, ids, want, got);
}

/* A short request arriving while a long prompt is prefilled (no decode
 * beside it, budget 32) starts in the next step with its whole prompt,
 * beside one block (16 tokens) of the long one, and has its first token
 * there instead of after every chunk of the long one; both generate what
 * they generate alone. */
static void test_short_prompt_not_behind_long_one(void) {
    int32_t pl[150], ps[10];
    make_prompt(pl, 150, 32);
    make_prompt(ps, 10, 33);
    const vt_sched_request ql = greedy_request(pl, 150, 4), qs = greedy_request(ps, 10, 4);
    generation want[2], got[2];
    two_alone(&ql, &qs, want, got);

    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 32);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    uint64_t ids[2];
    vt_sched_step_info info;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &ql, &ids[0], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 32);
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qs, &ids[1], &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_n_admit_next(s), 1); /* the prediction plans the step alike */
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
    CU_ASSERT_EQUAL(info.n_entries, 2);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 16 + 10);
    collect(s, ids[0], &got[0]);
    collect(s, ids[1], &got[1]);
    CU_ASSERT_EQUAL(got[1].n, 1); /* the short one's first token */
    CU_ASSERT_EQUAL(got[0].n, 0); /* the long one still prefilling: 48 of 150 */
    two_to_end(s, e, ids, want, got);
}

/* The same beside a decoding stream (a fixed chunk of 16): D decodes, L's
 * 200-token prompt is being computed, then S (6 tokens) and a younger long
 * L2 arrive. The next step holds D's decode, one block of L and S's whole
 * prompt, not L2 (younger, and long: it waits its turn); every request
 * generates what it does alone. */
static void test_short_prompt_beside_decodes(void) {
    enum { N = 4 };
    int32_t pd[5], pl[200], ps[6], pl2[100];
    make_prompt(pd, 5, 34);
    make_prompt(pl, 200, 35);
    make_prompt(ps, 6, 36);
    make_prompt(pl2, 100, 37);
    const vt_sched_request q[N] = {greedy_request(pd, 5, 12), greedy_request(pl, 200, 3), greedy_request(ps, 6, 3),
                                   greedy_request(pl2, 100, 3)};
    generation want[N], got[N];
    memset(got, 0, sizeof got);
    vt_engine *one = open_engine("reference", 1, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    for (int i = 0; i < N; i++) generate_alone(one, &q[i], &want[i]);
    vt_engine_free(one);

    vt_engine *e = open_engine("reference", 4, 512);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const vt_sched_options o = {16, 64, 16};
    vt_sched *s = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_sched_create(e, &o, &s, &err), VT_OK);
    uint64_t ids[N];
    vt_sched_step_info info;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q[0], &ids[0], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK); /* D's prompt */
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q[1], &ids[1], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK); /* D decodes, L's first chunk */
    CU_ASSERT_EQUAL(info.n_decode_tokens, 1);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 16);
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q[2], &ids[2], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q[3], &ids[3], &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_n_admit_next(s), 1); /* the prediction plans the step alike */
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
    CU_ASSERT_EQUAL(info.n_entries, 3);
    CU_ASSERT_EQUAL(info.n_decode_tokens, 1);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 16 + 6);
    for (int i = 0; i < N; i++) collect(s, ids[i], &got[i]);
    CU_ASSERT_EQUAL(got[2].n, 1); /* S's first token */
    CU_ASSERT_EQUAL(vt_sched_n_waiting(s), 1); /* L2 */
    step_totals t = {0};
    run_to_end(s, ids, got, N, &t);
    for (int i = 0; i < N; i++) CU_ASSERT(same_generation(&got[i], &want[i]));
    vt_sched_free(s);
    vt_engine_free(e);
}

/* A step that decodes takes at most prefill_chunk prompt tokens: a fixed 4
 * cuts a 23-token prompt arriving beside a decoding request into chunks of
 * 4, while a prompt with no decode beside it takes the whole budget; the
 * tokens are those generated alone either way. */
static void test_fixed_prefill_chunk_beside_decodes(void) {
    int32_t pa[5], pb[23];
    make_prompt(pa, 5, 40);
    make_prompt(pb, 23, 41);
    const vt_sched_request qa = greedy_request(pa, 5, 20), qb = greedy_request(pb, 23, 4);
    generation want[2], got[2];
    two_alone(&qa, &qb, want, got);

    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const vt_sched_options o = {16, 64, 4};
    vt_sched *s = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_sched_create(e, &o, &s, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_get_stats(s).prefill_chunk, 4);
    uint64_t ids[2];
    vt_sched_step_info info;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qb, &ids[1], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 23); /* nothing decodes: the whole prompt */
    collect(s, ids[1], &got[1]);
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qa, &ids[0], &err), VT_OK);
    /* qb decodes from now on: qa's 5 tokens come as 4, then 1 */
    static const int64_t chunks[2] = {4, 1};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        CU_ASSERT_EQUAL(info.n_decode_tokens, 1);
        CU_ASSERT_EQUAL(info.n_prefill_tokens, chunks[k]);
        collect(s, ids[0], &got[0]);
        collect(s, ids[1], &got[1]);
    }
    two_to_end(s, e, ids, want, got);
}

/* The automatic chunk (prefill_chunk 0): unknown (0) until a decode-only
 * step and a prompt step have run, then at least a KV block's worth, and
 * every step that decodes keeps to the value reported before it. Whatever
 * the machine's speed made of it, the tokens are those generated alone. */
static void test_automatic_prefill_chunk(void) {
    enum { LONG_PROMPT = 150 };
    int32_t pa[24], pb[LONG_PROMPT];
    make_prompt(pa, 24, 50);
    make_prompt(pb, LONG_PROMPT, 51);
    const vt_sched_request qa = greedy_request(pa, 24, 40), qb = greedy_request(pb, LONG_PROMPT, 4);
    generation want[2], got[2];
    two_alone(&qa, &qb, want, got);

    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(vt_sched_get_stats(s).prefill_chunk, 0);
    vt_error err = {0};
    uint64_t ids[2];
    vt_sched_step_info info;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qa, &ids[0], &err), VT_OK);
    for (int k = 0; k < 3; k++) { /* the prompt, then two decode-only steps */
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        collect(s, ids[0], &got[0]);
    }
    const int64_t chunk = vt_sched_get_stats(s).prefill_chunk;
    CU_ASSERT(chunk >= 16); /* the engine's block size */
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qb, &ids[1], &err), VT_OK);
    int64_t prompt_done = 0;
    int capped_steps = 0;
    while (prompt_done < LONG_PROMPT) {
        const int64_t cap = vt_sched_get_stats(s).prefill_chunk;
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        CU_ASSERT_FATAL(info.n_entries > 0);
        if (info.n_decode_tokens > 0) {
            CU_ASSERT(info.n_prefill_tokens <= cap);
            capped_steps++;
        }
        prompt_done += info.n_prefill_tokens;
        collect(s, ids[0], &got[0]);
        collect(s, ids[1], &got[1]);
    }
    CU_ASSERT(capped_steps >= 1);
    printf("\n  automatic chunk %lld tokens at first; %d steps decoded beside the %d-token prompt ", (long long)chunk,
           capped_steps, LONG_PROMPT);
    two_to_end(s, e, ids, want, got);
}

/* A fresh scheduler whose first prompts were too short to time a prompt
 * token (2 tokens) but whose decodes were timed: a long prompt arriving then
 * is taken a KV block's worth beside the decodes until its cost is measured,
 * not the whole budget at once (which stalled the streams for seconds). */
static void test_automatic_chunk_before_a_prompt_is_timed(void) {
    enum { LONG_PROMPT = 150 };
    int32_t pa[2], pb[LONG_PROMPT];
    make_prompt(pa, 2, 52);
    make_prompt(pb, LONG_PROMPT, 53);
    const vt_sched_request qa = greedy_request(pa, 2, 40), qb = greedy_request(pb, LONG_PROMPT, 4);
    generation want[2], got[2];
    two_alone(&qa, &qb, want, got);
    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    uint64_t ids[2];
    vt_sched_step_info info;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qa, &ids[0], &err), VT_OK);
    for (int k = 0; k < 3; k++) { /* the 2-token prompt, then two decode-only steps */
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        collect(s, ids[0], &got[0]);
    }
    CU_ASSERT_EQUAL(vt_sched_get_stats(s).prefill_chunk, 16); /* the engine's block size */
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qb, &ids[1], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
    CU_ASSERT_EQUAL(info.n_decode_tokens, 1);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 16);
    collect(s, ids[0], &got[0]);
    collect(s, ids[1], &got[1]);
    two_to_end(s, e, ids, want, got);
}

/* The other way round: prompts timed (a long one prefilled alone) but no
 * step has decoded alone, when a short request starts beside it and
 * decodes. Its decodes' steps take one block of the long prompt, not the
 * whole budget (a step of the whole budget would hold its tokens back as
 * long as a 64-token prefill); both generate what they do alone. */
static void test_automatic_chunk_before_a_decode_is_timed(void) {
    enum { LONG_PROMPT = 200 };
    int32_t pl[LONG_PROMPT], ps[10];
    make_prompt(pl, LONG_PROMPT, 54);
    make_prompt(ps, 10, 55);
    const vt_sched_request ql = greedy_request(pl, LONG_PROMPT, 4), qs = greedy_request(ps, 10, 8);
    generation want[2], got[2];
    two_alone(&ql, &qs, want, got);
    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    uint64_t ids[2];
    vt_sched_step_info info;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &ql, &ids[0], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK); /* 64 prompt tokens alone: timed */
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 64);
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qs, &ids[1], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK); /* the short one's prompt beside the long one's */
    CU_ASSERT_EQUAL(info.n_decode_tokens, 0);
    collect(s, ids[0], &got[0]);
    collect(s, ids[1], &got[1]);
    CU_ASSERT_EQUAL(got[1].n, 1);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK); /* its first decode beside the long prompt */
    CU_ASSERT_EQUAL(info.n_decode_tokens, 1);
    CU_ASSERT_EQUAL(info.n_prefill_tokens, 16); /* the engine's block size */
    collect(s, ids[0], &got[0]);
    collect(s, ids[1], &got[1]);
    two_to_end(s, e, ids, want, got);
}

/* ---- cancellation ------------------------------------------------------ */

static void test_cancel_frees_blocks_at_once(void) {
    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const int32_t all_free = vt_engine_free_blocks(e);
    vt_sched *s = open_sched(e, 16, 8);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    vt_sched_output out;
    int32_t p[40];
    make_prompt(p, 40, 40);

    /* mid-prefill: 8 of 40 prompt tokens computed, one block held */
    const vt_sched_request q = greedy_request(p, 40, 50);
    uint64_t a;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q, &a, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free - 1);
    CU_ASSERT_EQUAL(vt_sched_cancel(s, a, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free);
    CU_ASSERT_EQUAL(vt_sched_n_running(s), 0);
    CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, a, &out, &err), VT_OK);
    CU_ASSERT_EQUAL(out.state, VT_SCHED_FINISHED);
    CU_ASSERT_EQUAL(out.finish, VT_SCHED_FINISH_CANCELLED);
    CU_ASSERT_EQUAL(out.n_tokens, 0);

    /* mid-decode: 40 prompt tokens, 3 generated (42 stored: 3 blocks); another
     * prompt, or it would begin with the 8 tokens a left cached */
    int32_t p2[40];
    make_prompt(p2, 40, 41);
    const vt_sched_request q2 = greedy_request(p2, 40, 50);
    uint64_t b;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q2, &b, &err), VT_OK);
    for (int k = 0; k < 7; k++) CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, b, &out, &err), VT_OK);
    CU_ASSERT_EQUAL(out.n_tokens, 3);
    CU_ASSERT_EQUAL(out.state, VT_SCHED_RUNNING);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free - 3);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK); /* one more token, unread */
    CU_ASSERT_EQUAL(vt_sched_cancel(s, b, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free);
    CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, b, &out, &err), VT_OK);
    CU_ASSERT_EQUAL(out.n_tokens, 1); /* generated before the cancel: still reported */
    CU_ASSERT_EQUAL(out.finish, VT_SCHED_FINISH_CANCELLED);

    /* waiting: never started */
    uint64_t c;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q, &c, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_n_waiting(s), 1);
    CU_ASSERT_EQUAL(vt_sched_cancel(s, c, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_n_waiting(s), 0);
    CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, c, &out, &err), VT_OK);
    CU_ASSERT_EQUAL(out.finish, VT_SCHED_FINISH_CANCELLED);

    /* a finished request keeps its reason; a removed one is unknown */
    const vt_sched_request short_q = greedy_request(p, 3, 1);
    uint64_t d;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &short_q, &d, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_cancel(s, d, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, d, &out, &err), VT_OK);
    CU_ASSERT_EQUAL(out.finish, VT_SCHED_FINISH_LENGTH);
    CU_ASSERT_EQUAL(out.n_tokens, 1);
    CU_ASSERT_EQUAL(vt_sched_remove(s, d, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_read(s, d, &out, &err), VT_ERR_INVALID);
    VT_ASSERT_ERROR(err, VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_sched_cancel(s, 999, &err), VT_ERR_INVALID);

    /* removing a running request cancels it first */
    uint64_t f;
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q, &f, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
    CU_ASSERT(vt_engine_free_blocks(e) < all_free);
    CU_ASSERT_EQUAL(vt_sched_remove(s, f, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), all_free);
    CU_ASSERT_EQUAL(vt_sched_n_running(s), 0);
    vt_sched_free(s);
    vt_engine_free(e);
}

/* ---- finishing --------------------------------------------------------- */

/* A stop id ends the request at its first occurrence, reported as the last
 * token; a prompt near the context's end stops at the context. */
static void test_stop_token_and_context_end(void) {
    int32_t p[60];
    make_prompt(p, 60, 50);
    vt_sched_request q = greedy_request(p, 9, 12);
    generation free_run, want_stop, want_ctx, got[2];
    memset(got, 0, sizeof got);
    vt_engine *one = open_engine("reference", 1, 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    generate_alone(one, &q, &free_run);
    const int32_t stops[2] = {V - 1 == free_run.tokens[4] ? 0 : V - 1, free_run.tokens[4]};
    vt_sched_request qs = q;
    qs.stop_ids = stops;
    qs.n_stop_ids = 2;
    generate_alone(one, &qs, &want_stop);
    const vt_sched_request qc = greedy_request(p, 60, 100);
    generate_alone(one, &qc, &want_ctx);
    vt_engine_free(one);
    CU_ASSERT_EQUAL(want_stop.finish, VT_SCHED_FINISH_STOP);
    CU_ASSERT(want_stop.n <= 5);
    CU_ASSERT_EQUAL(want_ctx.n, 64 - 60 + 1); /* the last token needs no room */

    vt_engine *e = open_engine("reference", 2, 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    uint64_t ids[2];
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qs, &ids[0], &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &qc, &ids[1], &err), VT_OK);
    step_totals t = {0};
    run_to_end(s, ids, got, 2, &t);
    CU_ASSERT(same_generation(&got[0], &want_stop));
    CU_ASSERT(same_generation(&got[1], &want_ctx));
    CU_ASSERT_EQUAL(got[0].finish, VT_SCHED_FINISH_STOP);
    CU_ASSERT_EQUAL(got[1].finish, VT_SCHED_FINISH_LENGTH);
    vt_sched_free(s);
    vt_engine_free(e);
}

/* First come, first started: with two sequences the third request waits
 * until one of the first two finishes, and requests start in arrival order. */
static void test_fifo_admission(void) {
    vt_engine *e = open_engine("reference", 2, 256);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_sched *s = open_sched(e, 16, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    vt_error err = {0};
    int32_t p[8];
    make_prompt(p, 8, 60);
    static const int64_t news[4] = {6, 3, 4, 2};
    uint64_t ids[4];
    for (int i = 0; i < 4; i++) {
        const vt_sched_request q = greedy_request(p, 8, news[i]);
        CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q, &ids[i], &err), VT_OK);
    }
    int started_at[4] = {-1, -1, -1, -1}, finished_at[4] = {-1, -1, -1, -1};
    for (int step = 0; vt_sched_n_waiting(s) + vt_sched_n_running(s) > 0; step++) {
        CU_ASSERT_FATAL(step < 100);
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
        CU_ASSERT(vt_sched_n_running(s) <= 2);
        for (int i = 0; i < 4; i++) {
            vt_sched_output out;
            CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, ids[i], &out, &err), VT_OK);
            if (out.n_generated > 0 && started_at[i] < 0) started_at[i] = step;
            if (out.state == VT_SCHED_FINISHED && finished_at[i] < 0) finished_at[i] = step;
        }
    }
    /* A and B start together; C when B (3 tokens) ends; D when C or A ends */
    CU_ASSERT_EQUAL(started_at[0], 0);
    CU_ASSERT_EQUAL(started_at[1], 0);
    CU_ASSERT_EQUAL(started_at[2], finished_at[1] + 1);
    CU_ASSERT(started_at[3] > started_at[2]);
    CU_ASSERT_EQUAL(started_at[3], (finished_at[0] < finished_at[2] ? finished_at[0] : finished_at[2]) + 1);
    vt_sched_free(s);
    vt_engine_free(e);
}

/* ---- refusals ---------------------------------------------------------- */

/* The request is refused with code and a message containing field; nothing queued. */
static void expect_refused(vt_sched *s, const vt_sched_request *q, vt_status code, const char *field) {
    vt_error err = {0};
    uint64_t id = 7;
    const int32_t waiting = vt_sched_n_waiting(s);
    CU_ASSERT_EQUAL(vt_sched_add(s, q, &id, &err), code);
    CU_ASSERT_EQUAL(id, 0);
    CU_ASSERT_EQUAL(vt_sched_n_waiting(s), waiting);
    if (!strstr(err.msg, field)) printf("\n  expected '%s' in: %s", field, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, field));
}

static void test_bad_requests_are_refused(void) {
    vt_engine *e = open_engine("reference", 2, 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    vt_error err = {0};
    vt_sched *s = NULL;
    const vt_sched_options too_much = {16, 100000, 0};
    CU_ASSERT_EQUAL(vt_sched_create(e, &too_much, &s, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "token_budget"));
    const vt_sched_options no_queue = {0, 0, 0};
    CU_ASSERT_EQUAL(vt_sched_create(e, &no_queue, &s, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "max_waiting"));
    s = open_sched(e, 2, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);

    int32_t p[80];
    make_prompt(p, 80, 70);
    const vt_sched_request ok = greedy_request(p, 4, 8);
    vt_sched_request q = ok;
    q.n_prompt = 0;
    expect_refused(s, &q, VT_ERR_INVALID, "request.prompt: empty");
    q = ok;
    q.prompt = NULL;
    expect_refused(s, &q, VT_ERR_INVALID, "request.prompt: empty");
    const int32_t oov[3] = {1, 2, 100000};
    q = greedy_request(oov, 3, 8);
    expect_refused(s, &q, VT_ERR_INVALID, "request.prompt[2]: token id 100000 is outside the vocabulary");
    q = greedy_request(p, 65, 8);
    expect_refused(s, &q, VT_ERR_CONTEXT_FULL, "request.prompt: 65 tokens, but a sequence's context holds 64");
    q = ok;
    q.max_new_tokens = 0;
    expect_refused(s, &q, VT_ERR_INVALID, "request.max_new_tokens");
    q = ok;
    q.sampler.temp = -0.5f;
    expect_refused(s, &q, VT_ERR_INVALID, "request.sampler.temp");
    q.sampler.temp = NAN;
    expect_refused(s, &q, VT_ERR_INVALID, "request.sampler.temp");
    q = ok;
    q.sampler.top_k = -2; /* -1 is off, as 0 */
    expect_refused(s, &q, VT_ERR_INVALID, "request.sampler.top_k");
    q = ok;
    q.sampler.top_p = -0.25f;
    expect_refused(s, &q, VT_ERR_INVALID, "request.sampler.top_p");
    q.sampler.top_p = 1.5f;
    expect_refused(s, &q, VT_ERR_INVALID, "request.sampler.top_p");
    q = ok;
    q.sampler.min_p = 1.5f;
    expect_refused(s, &q, VT_ERR_INVALID, "request.sampler.min_p");
    const int32_t stops[2] = {3, -4};
    q = ok;
    q.stop_ids = stops;
    q.n_stop_ids = 2;
    expect_refused(s, &q, VT_ERR_INVALID, "request.stop_ids[1]");
    q.stop_ids = NULL;
    expect_refused(s, &q, VT_ERR_INVALID, "request.stop_ids");

    /* the queue holds two beyond those the next step starts: with both
     * sequences free, four are taken and a fifth waits nowhere */
    uint64_t ids[4];
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(vt_sched_add(s, &ok, &ids[i], &err), VT_OK);
    CU_ASSERT(ids[0] >= 1 && ids[1] > ids[0]);
    expect_refused(s, &ok, VT_ERR_UNSUPPORTED, "waiting queue full: 2 requests wait for a sequence (max_waiting 2)");
    /* a step starts two; the other two still wait, both sequences busy */
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_n_running(s), 2);
    expect_refused(s, &ok, VT_ERR_UNSUPPORTED, "waiting queue full: 2 requests wait for a sequence (max_waiting 2)");
    /* once the first two end, the next step starts the other two: room again */
    for (int step = 0; step < 20 && vt_sched_n_waiting(s) == 2; step++) {
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
        if (vt_sched_n_running(s) == 0 || vt_sched_n_admit_next(s) > 0) break;
    }
    uint64_t c;
    CU_ASSERT_EQUAL(vt_sched_add(s, &ok, &c, &err), VT_OK);
    vt_sched_free(s);

    /* the scheduler owns every sequence: one in use is refused */
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, p, 3, false, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_sched_create(e, NULL, &s, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "sequence 0 is in use"));
    vt_engine_free(e);
}

/* ---- random operations ------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 33) % n;
}

/* Small enough to keep the run short under AddressSanitizer: requests of at
 * most 12 + 16 tokens, three sequences over a pool of 6 blocks of 8 tokens
 * (one request needs up to 4), 12 tokens per step. A third of the requests
 * ask for 2 or 3 choices, each a tracked request of its own. */
#define N_OPS 1000
#define MAX_TRACKED (3 * N_OPS)
#define RANDOM_PROMPT_MAX 12
#define RANDOM_NEW_MAX 16
#define RANDOM_SEQS 3
#define RANDOM_CTX 48
#define RANDOM_BLOCK 8
#define RANDOM_BUDGET 12

typedef struct tracked {
    uint64_t id;
    int32_t prompt[RANDOM_PROMPT_MAX];
    int32_t stop;
    vt_sched_request q;
    generation got;
    bool cancelled, removed;
} tracked;

/* KV blocks some sequence holds (prompts share prefix blocks, choices
 * their prompt's: counted once each). */
static int32_t held_blocks(const vt_engine *e) {
    int32_t n = 0;
    for (int32_t b = 0; b < e->kv->num_blocks; b++) n += e->kv->blocks[b].ref > 0;
    return n;
}

/* Three beginnings prompts draw on, so that requests share prefix blocks
 * (live ones, and ended ones' cached blocks) as chats and agents do. */
static int32_t shared_beginnings[3][RANDOM_PROMPT_MAX];

typedef struct random_run {
    vt_engine *engine;
    vt_sched *sched;
    int32_t all_free;
    tracked *tr;
    int n_tr;
    int adds, refused, steps, cancels, removes;
} random_run;

static void random_add(random_run *r) {
    if (r->n_tr + 3 > MAX_TRACKED) return;
    tracked *t = &r->tr[r->n_tr];
    const int64_t len = 1 + rnd(RANDOM_PROMPT_MAX);
    const uint32_t n_vocab = (uint32_t)small_model->hp.n_vocab;
    /* the first `shared` tokens from one of the shared beginnings */
    const int32_t *beginning = shared_beginnings[rnd(3)];
    const int64_t shared = rnd(RANDOM_PROMPT_MAX + 1);
    for (int64_t k = 0; k < len; k++) t->prompt[k] = k < shared ? beginning[k] : (int32_t)rnd(n_vocab);
    t->q = greedy_request(t->prompt, len, 1 + rnd(RANDOM_NEW_MAX));
    if (rnd(2)) t->q.sampler = (vt_sampler_params){0.8f, (int32_t)rnd(50), 0.9f, 0.0f, rnd(1000)};
    if (rnd(4) == 0) { /* the model's end of text, or any token */
        const int32_t eos = small_model->tokenizer ? vt_tokenizer_eos(small_model->tokenizer) : -1;
        t->stop = rnd(2) && eos >= 0 ? eos : (int32_t)rnd(n_vocab);
        t->q.stop_ids = &t->stop;
        t->q.n_stop_ids = 1;
    }
    vt_error err = {0};
    const int32_t n = rnd(3) == 0 ? 2 + (int32_t)rnd(2) : 1;
    uint64_t ids[3];
    const vt_status st = vt_sched_add_n(r->sched, &t->q, n, ids, &err);
    CU_ASSERT_FATAL(st == VT_OK || st == VT_ERR_UNSUPPORTED); /* the queue may be full */
    if (st == VT_OK) {
        /* choice i is the request with seed + i: each is checked alone */
        for (int32_t i = 0; i < n; i++) {
            tracked *u = &r->tr[r->n_tr + i];
            if (i > 0) {
                *u = *t;
                u->q.prompt = u->prompt;
                if (u->q.n_stop_ids) u->q.stop_ids = &u->stop;
                u->q.sampler.seed = vt_seed_after(t->q.sampler.seed, (uint64_t)i);
            }
            u->id = ids[i];
        }
        r->n_tr += n;
        r->adds++;
    } else {
        r->refused++;
    }
}

/* One step, the invariants, and a read of every request. The step admits
 * what vt_sched_n_admit_next predicted just before it, whichever of the
 * budget, the sequences or the blocks limits it (waiting requests that
 * share cached blocks no one holds count them once, as the step's first
 * attach holds them for the others); a step that preempts admits none, and
 * the prediction says so. */
static void random_step(random_run *r) {
    vt_sched_step_info info;
    vt_error err = {0};
    const int32_t waiting = vt_sched_n_waiting(r->sched), running = vt_sched_n_running(r->sched);
    const int32_t predicted = vt_sched_n_admit_next(r->sched);
    CU_ASSERT(vt_sched_n_waiting(r->sched) == waiting && vt_sched_n_running(r->sched) == running); /* moved none */
    CU_ASSERT_EQUAL_FATAL(vt_sched_step(r->sched, &info, &err), VT_OK);
    CU_ASSERT_EQUAL(info.n_preempted ? 0 : info.n_admitted, predicted);
    if ((info.n_preempted ? 0 : info.n_admitted) != predicted)
        fprintf(stderr, "step %d: predicted %d admissions, the step made %d (%d preempted)\n", r->steps, predicted,
                info.n_admitted, info.n_preempted);
    r->steps++;
    CU_ASSERT(vt_sched_n_running(r->sched) <= RANDOM_SEQS);
    CU_ASSERT(info.n_decode_tokens + info.n_prefill_tokens <= RANDOM_BUDGET);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(r->engine) + held_blocks(r->engine), r->all_free);
    for (int i = 0; i < r->n_tr; i++)
        if (!r->tr[i].removed) collect(r->sched, r->tr[i].id, &r->tr[i].got);
}

/* Cancel or remove a request (finished or not): blocks come back at once. */
static void random_end(random_run *r) {
    tracked *t = &r->tr[rnd((uint32_t)r->n_tr)];
    if (t->removed) return;
    const int32_t free_before = vt_engine_free_blocks(r->engine);
    vt_error err = {0};
    if (rnd(4) == 0) {
        collect(r->sched, t->id, &t->got);
        t->cancelled |= t->got.state != VT_SCHED_FINISHED;
        CU_ASSERT_EQUAL(vt_sched_remove(r->sched, t->id, &err), VT_OK);
        t->removed = true;
        r->removes++;
    } else {
        CU_ASSERT_EQUAL(vt_sched_cancel(r->sched, t->id, &err), VT_OK);
        collect(r->sched, t->id, &t->got);
        CU_ASSERT_EQUAL(t->got.state, VT_SCHED_FINISHED);
        r->cancels++;
    }
    CU_ASSERT(vt_engine_free_blocks(r->engine) >= free_before);
    CU_ASSERT_EQUAL(vt_engine_free_blocks(r->engine) + held_blocks(r->engine), r->all_free);
}

/* 1,000 seeded random adds, steps, cancels and removes on three sequences
 * sharing a pool too small for them (preemption is routine), then steps until
 * idle: every block is back on the free list, every request finished or
 * cancelled, and every request that finished by itself generated exactly its
 * tokens alone. */
static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_random_operations(void) {
    const double t0 = seconds_now();
    const clock_t c0 = clock();
    random_run r = {0};
    for (int w = 0; w < 3; w++)
        for (int k = 0; k < RANDOM_PROMPT_MAX; k++)
            shared_beginnings[w][k] = (int32_t)rnd((uint32_t)small_model->hp.n_vocab);
    r.engine = open_engine_on(small_model, "reference", RANDOM_SEQS, RANDOM_CTX, RANDOM_BLOCK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.engine);
    r.all_free = vt_engine_free_blocks(r.engine);
    r.sched = open_sched(r.engine, 6, RANDOM_BUDGET);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.sched);
    r.tr = calloc(MAX_TRACKED, sizeof *r.tr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.tr);
    vt_engine *e = r.engine;
    vt_sched *s = r.sched;
    tracked *tr = r.tr;
    vt_error err = {0};
    for (int op = 0; op < N_OPS; op++) {
        const uint32_t kind = rnd(100);
        if (kind < 30)
            random_add(&r);
        else if (kind < 88)
            random_step(&r);
        else if (r.n_tr > 0)
            random_end(&r);
    }
    for (int guard = 0; vt_sched_n_waiting(s) + vt_sched_n_running(s) > 0; guard++) {
        CU_ASSERT_FATAL(guard < 100000);
        random_step(&r);
    }
    CU_ASSERT_EQUAL(vt_engine_free_blocks(e), r.all_free);
    CU_ASSERT_EQUAL(held_blocks(e), 0);

    /* every request ended; those that ended by themselves match alone */
    vt_engine *one = open_engine_on(small_model, "reference", 1, RANDOM_CTX, RANDOM_BLOCK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(one);
    int finished = 0, stopped = 0, cancelled = 0, same = 0;
    for (int i = 0; i < r.n_tr; i++) {
        tracked *t = &tr[i];
        if (!t->removed) {
            vt_sched_output out;
            CU_ASSERT_EQUAL(vt_sched_read(s, t->id, &out, &err), VT_OK);
            CU_ASSERT_EQUAL(out.state, VT_SCHED_FINISHED);
        }
        CU_ASSERT(t->removed || t->got.state == VT_SCHED_FINISHED);
        if (t->cancelled || t->got.finish == VT_SCHED_FINISH_CANCELLED) {
            cancelled++;
            continue;
        }
        finished++;
        stopped += t->got.finish == VT_SCHED_FINISH_STOP;
        generation want;
        generate_alone(one, &t->q, &want);
        same += same_generation(&t->got, &want);
    }
    vt_engine_free(one);
    const vt_sched_stats st = vt_sched_get_stats(s);
    printf("\n  %d adds (%d refused: queue full), %d steps, %d cancels, %d removes; %d finished (%d on a stop token, "
           "%d equal alone), "
           "%d cancelled; %lld preemptions, %lld tokens recomputed; %lld of %lld prompt tokens from the prefix cache; "
           "%.1f s (CPU %.1f s)",
           r.adds, r.refused, r.steps, r.cancels, r.removes, finished, stopped, same, cancelled, (long long)st.n_preemptions,
           (long long)st.n_recomputed, (long long)st.n_prompt_hit, (long long)st.n_prompt_looked_up, seconds_now() - t0,
           (double)(clock() - c0) / CLOCKS_PER_SEC);
    CU_ASSERT_EQUAL(same, finished);
    CU_ASSERT(finished >= 1);
    CU_ASSERT(cancelled >= 1);
    CU_ASSERT(st.n_preemptions >= 1);
    CU_ASSERT(st.n_prompt_hit >= 1); /* the shared beginnings were found in the cache */
    free(tr);
    vt_sched_free(s);
    vt_engine_free(e);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"reference: every request generates its tokens alone", test_reference_batched_equals_alone},
        {"simd: every request generates its greedy tokens alone", test_simd_batched_equals_alone},
        {"seeded sampling does not depend on the batch", test_seeded_sampling_independent_of_batch},
        {"reference: a pool too small for all: preemption, same tokens", test_reference_preemption},
        {"simd: a pool too small for all: preemption, same greedy tokens", test_simd_preemption},
        {"a failed step advances no request; retried, same tokens", test_failed_step_changes_no_request},
        {"a prompt over the budget is prefilled in chunks", test_chunked_prefill},
        {"a step that decodes takes at most prefill_chunk prompt tokens", test_fixed_prefill_chunk_beside_decodes},
        {"the automatic prefill chunk is kept by every step that decodes", test_automatic_prefill_chunk},
        {"before a prompt token is timed, the automatic chunk is a KV block", test_automatic_chunk_before_a_prompt_is_timed},
        {"automatic chunk beside decodes before a step decoded alone: one block", test_automatic_chunk_before_a_decode_is_timed},
        {"cancel frees blocks at once, in any state", test_cancel_frees_blocks_at_once},
        {"stop token and context end", test_stop_token_and_context_end},
        {"a short prompt starts beside a long one's prefill, not after it", test_short_prompt_not_behind_long_one},
        {"beside a decoding stream, a short prompt starts in the next step and no younger one rides on it",
         test_short_prompt_beside_decodes},
        {"requests start in arrival order", test_fifo_admission},
        {"bad requests are refused naming the field", test_bad_requests_are_refused},
        {"1,000 random operations (shared beginnings, choices) end with every block free", test_random_operations},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("scheduler", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
