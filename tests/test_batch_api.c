/* test_batch_api.c — the batching API of include/vt/vt.h, through the public
 * header only: requests batched together generate the tokens each generates
 * alone through vt_session (greedy), a seeded request samples the same tokens
 * beside others as alone, cancellation ends a request and frees its KV
 * blocks, and bad requests and settings are refused naming the field. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "vt/vt.h"

#define MAX_GEN 64
#define N_REQ 4

static char model_path[1024];
/* The same engine settings for the batch and the sessions it is compared with. */
static const char *const settings[] = {"runtime.backend=reference", "runtime.threads=2", "runtime.max_seqs=4",
                                       "kv_cache.ctx_size=512", NULL};

static int suite_init(void) {
    const char *dir = vt_test_data_dir("batch API model");
    if (!dir) return 1;
    snprintf(model_path, sizeof model_path, "%s/models/qwen3-tiny-q4_k_m.gguf", dir);
    return 0;
}

static bool contains(const char *haystack, const char *needle) {
    bool found = strstr(haystack, needle) != NULL;
    if (!found) printf("\n  message \"%s\"\n  lacks   \"%s\"\n", haystack, needle);
    return found;
}

static vt_batch *open_batch(const char *const *extra_settings) {
    const vt_session_options o = {sizeof o, NULL, extra_settings ? extra_settings : settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    if (vt_batch_open(model_path, &o, &b, err, sizeof err) != VT_OK) printf("\n  vt_batch_open: %s\n", err);
    return b;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static bool is_stop(const int32_t *stop, size_t n_stop, int32_t id) {
    for (size_t i = 0; i < n_stop; i++)
        if (stop[i] == id) return true;
    return false;
}

/* Greedy generation of one prompt alone through a session; returns the count. */
static int64_t greedy_alone(const int32_t *prompt, size_t n_prompt, int64_t max_new, const int32_t *stop,
                            size_t n_stop, int32_t *out) {
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_session *s = NULL;
    char err[512] = "";
    if (vt_session_open(model_path, &o, &s, err, sizeof err) != VT_OK) {
        printf("\n  vt_session_open: %s\n", err);
        return -1;
    }
    int64_t n = 0;
    vt_status st = vt_session_eval(s, prompt, n_prompt, err, sizeof err);
    while (st == VT_OK && n < max_new) {
        int32_t t = argmax(vt_session_logits(s, 0), vt_session_n_vocab(s));
        out[n++] = t;
        if (is_stop(stop, n_stop, t) || n == max_new) break;
        st = vt_session_eval(s, &t, 1, err, sizeof err);
    }
    if (st != VT_OK) printf("\n  vt_session_eval: %s\n", err);
    vt_session_close(s);
    return st == VT_OK ? n : -1;
}

/* Steps until nothing waits or runs, reading every request after each step. */
static void run_to_end(vt_batch *b, const uint64_t *ids, int n, int32_t (*got)[MAX_GEN], int64_t *n_got,
                       vt_finish *finish) {
    char err[512] = "";
    for (int guard = 0; guard < 10000; guard++) {
        int32_t n_seqs = -1;
        CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
        CU_ASSERT(n_seqs >= 0 && n_seqs <= N_REQ);
        for (int i = 0; i < n; i++) {
            vt_batch_output out;
            CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, ids[i], &out, err, sizeof err), VT_OK);
            CU_ASSERT_FATAL(n_got[i] + (int64_t)out.n_tokens <= MAX_GEN);
            memcpy(got[i] + n_got[i], out.tokens, out.n_tokens * sizeof *out.tokens);
            n_got[i] += (int64_t)out.n_tokens;
            CU_ASSERT_EQUAL(out.n_generated, n_got[i]);
            finish[i] = out.finish;
        }
        if (n_seqs == 0) return;
    }
    CU_FAIL("the batch never ran out of work");
}

/* A prompt of n ids spread over the vocabulary, different for each salt. */
static void make_prompt(int32_t *p, size_t n, int salt, int32_t V) {
    for (size_t k = 0; k < n; k++) p[k] = (int32_t)((1 + 37 * (size_t)salt + 11 * k + k * k) % (size_t)V);
}

static void test_greedy_batched_equals_each_alone(void) {
    vt_batch *b = open_batch(NULL);
    CU_ASSERT_FATAL(b != NULL);
    const int32_t V = vt_batch_n_vocab(b);
    int32_t stop[16];
    size_t n_stop = vt_batch_default_stop_ids(b, stop, 16);
    CU_ASSERT(n_stop >= 1 && n_stop <= 16); /* qwen3 has EOS/EOT ids */
    static const size_t lens[N_REQ] = {5, 17, 40, 9};
    static const int64_t max_new[N_REQ] = {12, 7, 20, 16};
    int32_t prompts[N_REQ][40];
    uint64_t ids[N_REQ + 1];
    char err[512] = "";
    for (int i = 0; i < N_REQ; i++) {
        make_prompt(prompts[i], lens[i], i, V);
        vt_batch_request r;
        vt_batch_request_init(&r);
        r.ids = prompts[i];
        r.n_ids = lens[i];
        r.max_new_tokens = max_new[i];
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[i], err, sizeof err), VT_OK);
    }
    /* and one text prompt, waiting for a free sequence */
    vt_batch_request r;
    vt_batch_request_init(&r);
    r.text = "Once upon a time";
    r.max_new_tokens = 10;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[N_REQ], err, sizeof err), VT_OK);
    vt_batch_stats stats;
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.n_waiting, N_REQ + 1);
    const int32_t free_before = stats.free_kv_blocks;

    int32_t got[N_REQ + 1][MAX_GEN];
    int64_t n_got[N_REQ + 1] = {0};
    vt_finish finish[N_REQ + 1];
    run_to_end(b, ids, N_REQ + 1, got, n_got, finish);

    int64_t total = 0;
    for (int i = 0; i <= N_REQ; i++) total += n_got[i];
    CU_ASSERT(total > 2 * N_REQ); /* more than a first token each: decode steps ran batched */
    for (int i = 0; i < N_REQ; i++) {
        int32_t want[MAX_GEN];
        int64_t n_want = greedy_alone(prompts[i], lens[i], max_new[i], stop, n_stop, want);
        CU_ASSERT_EQUAL(n_got[i], n_want);
        CU_ASSERT(n_want > 0 && memcmp(got[i], want, (size_t)n_want * sizeof *want) == 0);
        CU_ASSERT_EQUAL(finish[i], n_got[i] == max_new[i] && !is_stop(stop, n_stop, got[i][n_got[i] - 1])
                                       ? VT_FINISH_LENGTH
                                       : VT_FINISH_STOP);
    }
    /* the text prompt: tokenized as vt_session_tokenize does (BOS as the vocabulary says) */
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_session *s = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_session_open(model_path, &o, &s, err, sizeof err), VT_OK);
    int32_t *text_ids = NULL;
    size_t n_text = 0;
    CU_ASSERT_EQUAL_FATAL(vt_session_tokenize(s, r.text, strlen(r.text), true, &text_ids, &n_text, err, sizeof err),
                          VT_OK);
    vt_session_close(s);
    int32_t want[MAX_GEN];
    int64_t n_want = greedy_alone(text_ids, n_text, 10, stop, n_stop, want);
    CU_ASSERT_EQUAL(n_got[N_REQ], n_want);
    CU_ASSERT(n_want > 0 && memcmp(got[N_REQ], want, (size_t)n_want * sizeof *want) == 0);
    free(text_ids);

    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.n_waiting, 0);
    CU_ASSERT_EQUAL(stats.n_running, 0);
    CU_ASSERT_EQUAL(stats.free_kv_blocks, free_before);
    CU_ASSERT(stats.n_steps > 0);
    for (int i = 0; i <= N_REQ; i++) CU_ASSERT_EQUAL(vt_batch_remove(b, ids[i], err, sizeof err), VT_OK);
    vt_batch_output out;
    CU_ASSERT_EQUAL(vt_batch_read(b, ids[0], &out, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_read(b, ids[0], NULL, err, sizeof err), VT_ERR_INVALID); /* no output to fill */
    vt_batch_close(b);
}

/* One seeded request's tokens, with `others` greedy requests beside it. */
static int64_t seeded_tokens(int others, int32_t *out) {
    vt_batch *b = open_batch(NULL);
    CU_ASSERT_FATAL(b != NULL);
    const int32_t V = vt_batch_n_vocab(b);
    char err[512] = "";
    int32_t prompts[N_REQ][24];
    uint64_t ids[N_REQ];
    for (int i = 0; i <= others; i++) {
        make_prompt(prompts[i], 24 - 5 * (size_t)i, 10 + i, V);
        vt_batch_request r;
        vt_batch_request_init(&r);
        r.ids = prompts[i];
        r.n_ids = 24 - 5 * (size_t)i;
        r.max_new_tokens = i == 0 ? 24 : 8 + 3 * i;
        const int32_t no_stop = V - 1; /* a padding id: runs to its length, more tokens to compare */
        r.stop_ids = &no_stop;
        r.n_stop_ids = 1;
        if (i == 0) {
            r.temperature = 0.9f;
            r.top_k = 50;
            r.top_p = 0.95f;
            r.min_p = 0.02f;
            r.seed = 1234;
        }
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[i], err, sizeof err), VT_OK);
    }
    int32_t got[N_REQ][MAX_GEN];
    int64_t n_got[N_REQ] = {0};
    vt_finish finish[N_REQ];
    run_to_end(b, ids, others + 1, got, n_got, finish);
    memcpy(out, got[0], (size_t)n_got[0] * sizeof *out);
    vt_batch_close(b);
    return n_got[0];
}

static void test_seeded_sampling_is_the_same_beside_others(void) {
    int32_t alone[MAX_GEN], beside[MAX_GEN];
    int64_t n_alone = seeded_tokens(0, alone);
    int64_t n_beside = seeded_tokens(3, beside);
    CU_ASSERT(n_alone >= 1);
    CU_ASSERT_EQUAL(n_beside, n_alone);
    CU_ASSERT(memcmp(alone, beside, (size_t)n_alone * sizeof *alone) == 0);
}

static void test_cancel_ends_a_request_and_frees_its_blocks(void) {
    vt_batch *b = open_batch(NULL);
    CU_ASSERT_FATAL(b != NULL);
    const int32_t V = vt_batch_n_vocab(b);
    char err[512] = "";
    vt_batch_stats stats;
    vt_batch_get_stats(b, &stats);
    const int32_t free_before = stats.free_kv_blocks;
    int32_t prompts[3][40];
    uint64_t ids[3];
    for (int i = 0; i < 3; i++) {
        make_prompt(prompts[i], 40, 20 + i, V);
        vt_batch_request r;
        vt_batch_request_init(&r);
        r.ids = prompts[i];
        r.n_ids = 40;
        r.max_new_tokens = 30;
        const int32_t no_stop = V - 1; /* a padding id: every request runs to its length */
        r.stop_ids = &no_stop;
        r.n_stop_ids = 1;
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[i], err, sizeof err), VT_OK);
    }
    for (int k = 0; k < 3; k++) CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, NULL, err, sizeof err), VT_OK);
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.n_running, 3);
    const int32_t free_running = stats.free_kv_blocks;
    CU_ASSERT_EQUAL(vt_batch_cancel(b, ids[1], err, sizeof err), VT_OK);
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.n_running, 2);
    CU_ASSERT(stats.free_kv_blocks > free_running);
    vt_batch_output out;
    CU_ASSERT_EQUAL(vt_batch_read(b, ids[1], &out, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(out.finish, VT_FINISH_CANCELLED);
    CU_ASSERT(out.n_generated >= 1 && out.n_generated < 30);
    const int64_t n_cancelled = out.n_generated;
    /* the others run to their length; the cancelled one gets nothing more */
    int32_t got[3][MAX_GEN];
    int64_t n_got[3] = {0};
    vt_finish finish[3];
    uint64_t rest[2] = {ids[0], ids[2]};
    run_to_end(b, rest, 2, got, n_got, finish);
    CU_ASSERT_EQUAL(finish[0], VT_FINISH_LENGTH);
    CU_ASSERT_EQUAL(finish[1], VT_FINISH_LENGTH);
    CU_ASSERT_EQUAL(vt_batch_read(b, ids[1], &out, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(out.n_tokens, 0);
    CU_ASSERT_EQUAL(out.n_generated, n_cancelled);
    CU_ASSERT_EQUAL(out.finish, VT_FINISH_CANCELLED);
    /* cancelling a finished request keeps its reason */
    CU_ASSERT_EQUAL(vt_batch_cancel(b, ids[0], err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_read(b, ids[0], &out, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(out.finish, VT_FINISH_LENGTH);
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.free_kv_blocks, free_before);
    /* remove an unfinished request: it is cancelled and forgotten */
    vt_batch_request r;
    vt_batch_request_init(&r);
    r.ids = prompts[0];
    r.n_ids = 40;
    uint64_t id;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_step(b, NULL, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_read(b, id, &out, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_batch_cancel(b, id, err, sizeof err), VT_ERR_INVALID);
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.free_kv_blocks, free_before);
    vt_batch_close(b);
}

static void test_bad_input_is_refused_naming_the_field(void) {
    vt_batch *b = open_batch(NULL);
    CU_ASSERT_FATAL(b != NULL);
    const int32_t V = vt_batch_n_vocab(b);
    char err[512] = "";
    int32_t prompt[4] = {1, 2, 3, 4};
    uint64_t id = 99;
    vt_batch_request r;

    vt_batch_request_init(&r);
    r.ids = prompt;
    r.n_ids = 0;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.ids"));
    CU_ASSERT_EQUAL(id, 0);

    vt_batch_request_init(&r);
    r.text = "";
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.text"));

    vt_batch_request_init(&r);
    prompt[2] = V;
    r.ids = prompt;
    r.n_ids = 4;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.ids[2]"));
    prompt[2] = -1;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.ids[2]"));
    prompt[2] = 3;

    r.temperature = -0.5f;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.temperature"));
    r.temperature = 0;
    r.top_p = -0.25f;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.top_p"));
    r.top_p = 1;
    r.max_new_tokens = 0;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.max_new_tokens"));
    r.max_new_tokens = 4;
    const int32_t bad_stop = V + 3;
    r.stop_ids = &bad_stop;
    r.n_stop_ids = 1;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT(contains(err, "request.stop_ids[0]"));

    vt_batch_stats stats;
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.n_waiting, 0); /* nothing refused was queued */
    vt_batch_output out;
    CU_ASSERT_EQUAL(vt_batch_read(b, 12345, &out, err, sizeof err), VT_ERR_INVALID);
    vt_batch_close(b);

    static const char *const zero[] = {"runtime.backend=reference", "runtime.max_seqs=0", NULL};
    static const char *const many[] = {"runtime.backend=reference", "runtime.max_seqs=257", NULL};
    static const char *const budget[] = {"runtime.backend=reference", "runtime.batch_size=32",
                                         "runtime.token_budget=64", NULL};
    static const char *const waiting[] = {"runtime.backend=reference", "runtime.max_waiting=0", NULL};
    const char *const *bad[] = {zero, many, budget, waiting};
    const char *named[] = {"runtime.max_seqs", "runtime.max_seqs", "runtime.token_budget", "runtime.max_waiting"};
    for (int i = 0; i < 4; i++) {
        const vt_session_options o = {sizeof o, NULL, bad[i], false};
        static char dummy;
        vt_batch *nb = (vt_batch *)(void *)&dummy; /* vt_batch_open must set it to NULL on failure */
        CU_ASSERT_EQUAL(vt_batch_open(model_path, &o, &nb, err, sizeof err), VT_ERR_INVALID);
        CU_ASSERT_PTR_NULL(nb);
        CU_ASSERT(contains(err, named[i]));
    }
}

/* A sampled request (temperature 1.5) of the prompt, seeded. */
static void sampled_request(vt_batch_request *r, const int32_t *prompt, size_t n, int64_t max_new, uint64_t seed) {
    vt_batch_request_init(r);
    r->ids = prompt;
    r->n_ids = n;
    r->max_new_tokens = max_new;
    r->temperature = 1.5f;
    r->seed = seed;
}

/* ignore_eos: a request the model's end-of-generation token ends early (a
 * seed found at run time) runs to max_new_tokens with it, the same tokens
 * up to there, the end token among them; a stop id the caller gives still
 * ends it; and a caller built before the field (its struct_size ends before
 * it) gets the default whatever its memory holds there. */
static void test_ignore_eos_runs_past_end_of_generation(void) {
    vt_batch *b = open_batch(NULL);
    CU_ASSERT_FATAL(b != NULL);
    int32_t prompt[9];
    make_prompt(prompt, 9, 5, vt_batch_n_vocab(b));
    char err[512] = "";
    int32_t got[3][MAX_GEN];
    int64_t n_got[3];
    vt_finish finish[3];
    const int64_t max_new = 40;
    uint64_t seed = 0;
    for (uint64_t s = 1; s <= 400 && !seed; s++) { /* a sampled answer the end token cuts short */
        vt_batch_request r;
        sampled_request(&r, prompt, 9, max_new, s);
        uint64_t id;
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
        n_got[0] = 0;
        run_to_end(b, &id, 1, got, n_got, finish);
        CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
        if (finish[0] == VT_FINISH_STOP && n_got[0] < max_new) seed = s;
    }
    CU_ASSERT_FATAL(seed != 0);
    const int64_t stopped_at = n_got[0];
    const int32_t end_token = got[0][stopped_at - 1];
    vt_batch_request r;
    sampled_request(&r, prompt, 9, max_new, seed);
    r.ignore_eos = true;
    uint64_t ids[3];
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[0], err, sizeof err), VT_OK);
    r.stop_ids = &end_token; /* the caller's own stop id still ends it */
    r.n_stop_ids = 1;
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[1], err, sizeof err), VT_OK);
    /* built before ignore_eos: the field is past its struct, set or not */
    r.stop_ids = NULL;
    r.n_stop_ids = 0;
    r.struct_size = (uint32_t)offsetof(vt_batch_request, ignore_eos);
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &ids[2], err, sizeof err), VT_OK);
    for (int i = 0; i < 3; i++) n_got[i] = 0;
    run_to_end(b, ids, 3, got, n_got, finish);
    CU_ASSERT_EQUAL(n_got[0], max_new);
    CU_ASSERT_EQUAL(finish[0], VT_FINISH_LENGTH);
    CU_ASSERT_EQUAL(got[0][stopped_at - 1], end_token);
    CU_ASSERT_EQUAL(n_got[1], stopped_at);
    CU_ASSERT_EQUAL(finish[1], VT_FINISH_STOP);
    CU_ASSERT_EQUAL(n_got[2], stopped_at);
    CU_ASSERT_EQUAL(finish[2], VT_FINISH_STOP);
    CU_ASSERT(memcmp(got[0], got[1], (size_t)stopped_at * sizeof **got) == 0);
    CU_ASSERT(memcmp(got[0], got[2], (size_t)stopped_at * sizeof **got) == 0);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(vt_batch_remove(b, ids[i], err, sizeof err), VT_OK);
    vt_batch_close(b);
}

/* A full waiting queue refuses with VT_ERR_UNSUPPORTED: max_waiting
 * requests beyond those the next step starts; steps that end requests make
 * room. */
static void test_full_queue_refuses_until_a_step(void) {
    static const char *const small[] = {"runtime.backend=reference", "runtime.threads=2", "runtime.max_seqs=2",
                                        "runtime.max_waiting=2", "kv_cache.ctx_size=256", NULL};
    vt_batch *b = open_batch(small);
    CU_ASSERT_FATAL(b != NULL);
    char err[512] = "";
    int32_t prompt[3] = {5, 6, 7};
    vt_batch_request r;
    vt_batch_request_init(&r);
    r.ids = prompt;
    r.n_ids = 3;
    r.max_new_tokens = 2;
    uint64_t id;
    /* two start at the next step (two free sequences), two wait */
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_UNSUPPORTED);
    CU_ASSERT(contains(err, "max_waiting"));
    int32_t n_seqs = 0;
    CU_ASSERT_EQUAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(n_seqs, 2);
    /* both sequences run: the two still wait, the queue is still full */
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_UNSUPPORTED);
    /* two new tokens each: the first two end within a few steps, and the
     * waiting two are then next to start */
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    vt_batch_close(b); /* with requests still running and unread: frees them all */
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"greedy batched equals each alone", test_greedy_batched_equals_each_alone},
        {"seeded sampling is the same beside others", test_seeded_sampling_is_the_same_beside_others},
        {"cancel ends a request and frees its blocks", test_cancel_ends_a_request_and_frees_its_blocks},
        {"bad input is refused naming the field", test_bad_input_is_refused_naming_the_field},
        {"full queue refuses until a step", test_full_queue_refuses_until_a_step},
        {"ignore_eos runs past end-of-generation, not past the caller's stop ids", test_ignore_eos_runs_past_end_of_generation},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("batch API", suite_init, NULL, tests);
    return vt_test_run();
}
