/* tokenizer_bench.c — encode ~1 MB of English-like text and report the time.
 *
 *   tokenizer_bench VOCAB.gguf [TEXT_FILE] [--special]
 *
 * Without TEXT_FILE the text is synthesized here (common English words,
 * punctuation, numbers, newlines; deterministic), so no outside data is needed.
 * Build (from the repository root, against a built libvt):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Icore bench/tokenizer_bench.c \
 *      -Lbuild/lib -lvt -Wl,-rpath,$PWD/build/lib -o tokenizer_bench */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "tokenizer.h"

static const char *const words[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "with",
    "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "hot", "word",
    "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your",
    "how", "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way", "about", "many",
    "then", "them", "write", "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him",
    "two", "has", "look", "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most",
    "people", "my", "over", "know", "water", "than", "call", "first", "who", "may", "down", "side", "been",
    "now", "find", "Once", "upon", "little", "robot", "named", "Pip", "found", "shiny", "red", "ball",
    "garden", "wanted", "share", "friends", "rolled", "hill", "don't", "it's", "we'll", "they're",
    "international", "understanding", "extraordinary", "responsibility", "September", "Tuesday",
};

static char *synthesize(size_t target, size_t *len) {
    char *buf = malloc(target + 64);
    size_t n = 0;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int in_sentence = 0;
    while (n < target) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *w = words[x % (sizeof words / sizeof words[0])];
        if (n) buf[n++] = ' ';
        if ((x >> 20) % 29 == 0) {
            n += (size_t)sprintf(buf + n, "%u", (unsigned)((x >> 32) % 100000));
        } else {
            size_t wl = strlen(w);
            memcpy(buf + n, w, wl);
            if (!in_sentence && buf[n] >= 'a' && buf[n] <= 'z') buf[n] = (char)(buf[n] - 32);
            n += wl;
        }
        in_sentence = 1;
        unsigned r = (unsigned)((x >> 40) % 23);
        if (r == 0) buf[n++] = ',';
        if (r == 1 || r == 2) buf[n++] = '.', in_sentence = 0;
        if (r == 3) buf[n++] = '.', buf[n++] = '\n', in_sentence = 0;
    }
    *len = n;
    return buf;
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
/* CPU time too: on a shared machine wall time mostly measures the neighbours. */
static double cpu(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s VOCAB.gguf [TEXT_FILE] [--special]\n", argv[0]);
        return 2;
    }
    bool special = argc > 2 && strcmp(argv[argc - 1], "--special") == 0;
    const char *text_file = argc > 2 && argv[2][0] != '-' ? argv[2] : NULL;
    vt_error err = {0};
    vt_gguf *g = NULL;
    vt_tokenizer *t = NULL;
    double t0 = now();
    if (vt_gguf_open(argv[1], &g, &err) != VT_OK || vt_tokenizer_load(g, &t, &err) != VT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t_load = now() - t0;

    size_t len = 0;
    char *text = NULL;
    if (text_file) {
        FILE *f = fopen(text_file, "rb");
        if (!f) return perror(text_file), 1;
        fseek(f, 0, SEEK_END);
        len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        text = malloc(len + 1);
        if (fread(text, 1, len, f) != len) return fprintf(stderr, "short read\n"), 1;
        fclose(f);
    } else {
        text = synthesize(1 << 20, &len);
    }

    int32_t *ids = NULL;
    size_t n = 0;
    t0 = now();
    double c0 = cpu();
    if (vt_tokenize(t, text, len, false, special, &ids, &n, &err) != VT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t_enc = now() - t0, c_enc = cpu() - c0;

    char *back = NULL;
    size_t back_len = 0;
    t0 = now();
    if (vt_detokenize(t, ids, n, false, &back, &back_len, &err) != VT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    double t_dec = now() - t0;

    printf("vocab %s: load %.3f s\n", argv[1], t_load);
    printf("encode %zu bytes -> %zu tokens in %.3f s wall, %.3f s CPU (%.2f MB/s of CPU)\n", len, n, t_enc, c_enc,
           len / c_enc / 1e6);
    printf("decode %zu tokens in %.3f s; round trip %s\n", n, t_dec,
           back_len == len && memcmp(back, text, len) == 0 ? "exact" : "differs");
    free(back);
    free(ids);
    free(text);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
    return 0;
}
