/* grammar_sampling_bench.c — what a grammar adds to a decode step: the
 * sampling stage of 1 and 8 sequences (as the scheduler runs it: one
 * sequence per task on the thread pool, then each accepts its token), with
 * and without a grammar, on a real vocabulary.
 *
 *   grammar_sampling_bench VOCAB.gguf [--steps N] [--threads T] [--temp X]
 *
 * Logits are fixed-seed random (no model needed: the cost under study is
 * the mask and the draw, not the forward), so the sequences wander through
 * the grammar as a random model would: long strings, every branch. A
 * sequence whose grammar completes starts again. Prints the median, p90 and
 * max step time in microseconds. Built with the project (bench/CMakeLists.txt):
 *   build/bin/grammar_sampling_bench tests/data/models/vocab/ggml-vocab-qwen2.gguf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "gguf.h"
#include "grammar.h"
#include "grammar_sampling.h"
#include "sampler.h"
#include "threadpool.h"
#include "tokenizer.h"

/* What vt serve makes of a schema with nested objects, a bounded string, an
 * integer range, an enum and an array (json_schema_gbnf.c's shape). */
static const char GRAMMAR[] =
    "root ::= \"{\" ws root-name-kv \",\" ws root-age-kv (\",\" ws root-tags-kv)? \"}\"\n"
    "root-name-kv ::= \"\\\"name\\\"\" ws \":\" ws \"\\\"\" json-char{1,24} \"\\\"\" ws\n"
    "root-age-kv ::= \"\\\"age\\\"\" ws \":\" ws ([0-9] | [1-9] [0-9] | \"1\" [01] [0-9] | \"120\") ws\n"
    "root-tags-kv ::= \"\\\"tags\\\"\" ws \":\" ws \"[\" ws (tag ws (\",\" ws tag ws){0,3})? \"]\" ws\n"
    "tag ::= \"\\\"red\\\"\" | \"\\\"green\\\"\" | \"\\\"blue\\\"\"\n"
    "json-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

#define MAX_SEQS 8

typedef struct seq {
    vt_grammar_sampling *g; /* NULL: unconstrained */
    vt_sampler *sampler;
    const float *logits;
    int32_t token;
    int32_t history[4096];
    int64_t n_history;
} seq;

typedef struct run {
    seq seqs[MAX_SEQS];
    int n;
    const vt_token_trie *trie;
    int32_t n_vocab;
    int32_t eos;
} run;

static void draw(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    run *r = arg;
    for (int64_t i = begin; i < end; i++) {
        seq *s = &r->seqs[i];
        s->token = s->g ? vt_grammar_sampling_draw(s->g, r->trie, s->sampler, s->logits, s->history, s->n_history,
                                                   &r->eos, 1)
                        : vt_sampler_sample_after(s->sampler, s->logits, r->n_vocab, s->history, s->n_history);
    }
}

static void restart(seq *s, bool constrained, int32_t n_vocab) {
    vt_grammar_sampling_free(s->g);
    s->g = NULL;
    s->n_history = 0;
    if (constrained && vt_grammar_sampling_create(GRAMMAR, n_vocab, &s->g, NULL) != VT_OK) abort();
}

static void bench(const vt_tokenizer *t, const vt_token_trie *trie, vt_threadpool *pool, int n_seqs, bool constrained,
                  int steps, float temp, const float *logits_pool, int n_rows) {
    run r = {.n = n_seqs, .trie = trie, .n_vocab = vt_tokenizer_n_vocab(t), .eos = vt_tokenizer_eos(t)};
    for (int i = 0; i < n_seqs; i++) {
        vt_sampler_params p = vt_sampler_default_params();
        p.temp = temp;
        p.seed = 1000 + (uint64_t)i;
        if (vt_sampler_create(&p, &r.seqs[i].sampler, NULL) != VT_OK) abort();
        restart(&r.seqs[i], constrained, r.n_vocab);
    }
    double *times = malloc((size_t)steps * sizeof *times);
    char bytes[512];
    int restarts = 0;
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < n_seqs; i++)
            r.seqs[i].logits = logits_pool + (size_t)((step * 7 + i * 3) % n_rows) * (size_t)r.n_vocab;
        const double t0 = now_s();
        vt_threadpool_parallel_for(pool, n_seqs, 1, draw, &r);
        for (int i = 0; i < n_seqs; i++) { /* each sequence takes its token, as the scheduler does */
            seq *s = &r.seqs[i];
            if (s->token < 0 || s->token == r.eos || s->n_history >= 4096) continue;
            if (s->g) {
                int32_t n = vt_token_to_bytes(t, s->token, false, bytes, sizeof bytes);
                if (!vt_grammar_sampling_accept(s->g, bytes, n > (int32_t)sizeof bytes ? 0 : n)) abort();
            }
            s->history[s->n_history++] = s->token;
        }
        times[step] = now_s() - t0;
        for (int i = 0; i < n_seqs; i++) {
            seq *s = &r.seqs[i];
            bool again = s->token < 0 || s->token == r.eos || s->n_history >= 4096 ||
                         (s->g && vt_grammar_sampling_done(s->g));
            if (again) {
                restart(s, constrained, r.n_vocab);
                restarts++;
            }
        }
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_double);
    printf("  %d seq%s %-13s temp %.1f: step median %8.1f us  p90 %8.1f us  max %8.1f us  (%d steps, %d texts "
           "completed)\n",
           n_seqs, n_seqs > 1 ? "s" : " ", constrained ? "grammar" : "no grammar", (double)temp,
           1e6 * times[steps / 2], 1e6 * times[steps * 9 / 10], 1e6 * times[steps - 1], steps, restarts);
    free(times);
    for (int i = 0; i < n_seqs; i++) {
        vt_sampler_free(r.seqs[i].sampler);
        vt_grammar_sampling_free(r.seqs[i].g);
    }
}

static int32_t trie_bytes(void *user, int32_t id, char *buf, size_t cap) {
    return vt_token_to_bytes(user, id, false, buf, cap);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s VOCAB.gguf [--steps N] [--threads T] [--temp X]\n", argv[0]);
        return 2;
    }
    int steps = 400, threads = 2;
    float temp = 1.0f;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--temp")) temp = (float)atof(argv[i + 1]);
    }
    vt_gguf *g = NULL;
    vt_tokenizer *t = NULL;
    vt_error e = {0};
    if (vt_gguf_open(argv[1], &g, &e) != VT_OK || vt_tokenizer_load(g, &t, &e) != VT_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const int32_t n_vocab = vt_tokenizer_n_vocab(t);
    double t0 = now_s();
    vt_token_trie *trie = NULL;
    if (vt_token_trie_build(n_vocab, trie_bytes, t, &trie, &e) != VT_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    printf("%s: %d tokens, trie of %lld nodes built in %.1f ms; %d threads\n", argv[1], n_vocab,
           (long long)vt_token_trie_n_nodes(trie), 1e3 * (now_s() - t0), threads);
    vt_threadpool *pool = NULL;
    if (vt_threadpool_create(threads, &pool, &e) != VT_OK) return 1;
    enum { ROWS = 64 };
    float *logits = malloc((size_t)ROWS * (size_t)n_vocab * sizeof *logits);
    uint64_t state = 42;
    for (size_t i = 0; i < (size_t)ROWS * (size_t)n_vocab; i++) logits[i] = 4.0f * next_uniform(&state);
    /* Masks of states never seen before, on a state already warm (its walk's
     * memory allocated): inside the bounded string each character is a new
     * state (the count changes), so no remembered mask applies. */
    uint8_t *allowed = malloc((size_t)n_vocab);
    vt_grammar *gr = NULL;
    if (vt_grammar_parse(GRAMMAR, strlen(GRAMMAR), &gr, &e) != VT_OK) return 1;
    vt_grammar_state *st = NULL;
    if (vt_grammar_state_create(gr, &st, &e) != VT_OK) return 1;
    double first = now_s();
    int32_t n_allowed = vt_grammar_mask(st, trie, allowed);
    first = now_s() - first;
    printf("  mask at the start: %d tokens allowed, %.2f ms (the state's first walk: its memory allocated)\n",
           n_allowed, 1e3 * first);
    vt_grammar_state_feed(st, "{\"name\": \"", 10);
    vt_grammar_mask(st, trie, allowed);
    double inside[20];
    for (int k = 0; k < 20; k++) {
        vt_grammar_state_feed(st, "a", 1);
        const double m0 = now_s();
        n_allowed = vt_grammar_mask(st, trie, allowed);
        inside[k] = now_s() - m0;
    }
    qsort(inside, 20, sizeof *inside, cmp_double);
    printf("  mask inside a string, a new state each time: %d tokens allowed, median %.2f ms, min %.2f ms (20 states)\n",
           n_allowed, 1e3 * inside[10], 1e3 * inside[0]);
    const double m0 = now_s();
    n_allowed = vt_grammar_mask(st, trie, allowed);
    printf("  the same state again (remembered): %.3f ms\n", 1e3 * (now_s() - m0));
    vt_grammar_state_free(st);
    vt_grammar_free(gr);
    free(allowed);
    for (int n = 1; n <= MAX_SEQS; n *= 8)
        for (int c = 0; c < 2; c++) bench(t, trie, pool, n, c == 1, steps, temp, logits, ROWS);
    free(logits);
    vt_threadpool_destroy(pool);
    vt_token_trie_free(trie);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
    return 0;
}
