/* make_fuzz_seeds.c — writes the seed corpora of fuzz_options, fuzz_tokenizer
 * and fuzz_vocab with vt's own code (options API, GGUF writer, tokenizer).
 *
 * Usage: make_fuzz_seeds DIR  (writes DIR/corpus-options, DIR/corpus-tokenizer,
 * DIR/corpus-vocab and DIR/corpus-model, which must exist). The committed copies live in
 * tests/fuzz/; rerun after an input-format change of a target. Findings that
 * run_fuzz.sh saves next to the seeds (crash-*, timeout-*, ...) are kept as
 * regression inputs and not rewritten here. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_vocabs.h"
#include "gguf.h"
#include "options.h"
#include "serve_options.h"
#include "synth.h"
#include "tokenizer.h"

#define SEP "\xff" /* the part separator of fuzz_options */

static int write_seed(const char *dir, const char *sub, const char *name, const void *data, size_t size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        return 1;
    }
    fwrite(data, 1, size, f);
    return fclose(f) != 0;
}

/* ---- fuzz_options ------------------------------------------------------- */

/* An ini setting every knob to its default, as `vt config` would print it. */
static size_t defaults_ini(char *buf, size_t size) {
    vt_options o;
    vt_options_defaults(&o);
    o.threads = 4; /* the machine's CPU count would make the seed vary */
    size_t n = 0;
    char section[64] = "";
    for (int i = 0; i < vt_options_key_count(); i++) {
        const char *key = vt_options_key(i);
        const char *dot = strchr(key, '.');
        char value[1100];
        vt_options_value(&o, key, value, sizeof value, NULL);
        if (strncmp(section, key, (size_t)(dot - key)) != 0 || section[dot - key] != '\0') {
            snprintf(section, sizeof section, "%.*s", (int)(dot - key), key);
            n += (size_t)snprintf(buf + n, size - n, "%s[%s]\n", n ? "\n" : "", section);
        }
        n += (size_t)snprintf(buf + n, size - n, "%s = %s\n", dot + 1, value);
    }
    return n;
}

static int option_seeds(const char *dir) {
    char ini[4096];
    size_t n = defaults_ini(ini, sizeof ini);
    char seed[8192];
    int bad = 0;
    /* flags 0x0F: ini + env + argv + sets */
    int len = snprintf(seed, sizeof seed, "\x0f%.*s" SEP "VT_THREADS=3" SEP "VT_KV_CACHE_F32=1" SEP "-t" SEP "8" SEP
                       "--ctx-size=64" SEP "sampling.temp=0.5" SEP "--kv-cache-dtype" SEP "bf16",
                       (int)n, ini);
    bad |= write_seed(dir, "corpus-options", "defaults-all-levers", seed, (size_t)len);
    len = snprintf(seed, sizeof seed, "\x01%.*s", (int)n, ini);
    bad |= write_seed(dir, "corpus-options", "defaults-ini", seed, (size_t)len);

    static const struct {
        const char *name, *text;
    } cases[] = {
        {"bad-value", "\x01[runtime]\nthreads = 0\n"},
        {"unknown-section", "\x01[runtimes]\nthreads = 2\n"},
        {"unknown-key", "\x01[kv_cache]\nsize = 2\n"},
        {"duplicate-key", "\x01[sampling]\ntop_k = 2\ntop_k = 3\n"},
        {"continuation", "\x01[backends]\npath = /a\n  /b\n"},
        {"outside-section", "\x01threads = 2\n[runtime]\n"},
        {"bom-comments", "\x01\xef\xbb\xbf; comment\n# another\n[runtime]\nbackend = simd ; inline\n"},
        {"syntax-error", "\x01[runtime\nthreads 2\n"},
        {"env-only", "\x02" SEP "VT_KV_CACHE_DTYPE=f32" SEP "VT_CTX_SIZE=128" SEP "VT_BACKEND=reference" SEP
                     "VT_KV_CACHE_F32=0"},
        {"env-invalid", "\x02" SEP "VT_THREADS=" SEP "VT_KV_CACHE_F32=2"},
        {"argv-limits", "\x04" SEP "-c" SEP "1000000000000" SEP "-t" SEP "0" SEP "--threads=10000" SEP "-b"},
        {"sets", "\x08" SEP "runtime.batch_size=65536" SEP "kv_cache.block_size=48" SEP "sampling.top_p=-0.5" SEP
                 "sampling.seed=9223372036854775807" SEP "sampling.min_p=1e-300" SEP "runtime.fallback=none"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad |= write_seed(dir, "corpus-options", cases[i].name, cases[i].text, strlen(cases[i].text));
    return bad;
}

/* ---- fuzz_tokenizer and fuzz_vocab --------------------------------------- */

static const char *const sample_texts[] = {
    "Hello world, the thing's 12 apples.",
    "  leading and trailing spaces  \n\n\ttabs",
    "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \xce\xb1\xce\xb2",
    "a<|ctl|>b<tool>c<s>d</s><|endoftext|>",
    "\xff\xfe invalid \xc3 utf-8 \xe2\x96",
    "\xe2\x96\x81the \xe2\x96\x81marker",
};

static int tokenizer_seeds(const char *dir, vt_tokenizer *const toks[FUZZ_VOCAB_KINDS]) {
    int bad = 0;
    unsigned char seed[512];
    for (size_t i = 0; i < sizeof sample_texts / sizeof sample_texts[0]; i++) {
        size_t len = strlen(sample_texts[i]);
        /* vocab i % 5, with add_bos / parse_special / render_special varied */
        seed[0] = (unsigned char)((i % 5) | (i & 1 ? 16 : 0) | (i & 2 ? 32 | 64 : 0));
        memcpy(seed + 1, sample_texts[i], len);
        char name[32];
        snprintf(name, sizeof name, "text-%zu", i);
        bad |= write_seed(dir, "corpus-tokenizer", name, seed, len + 1);
    }
    /* id lists: sample texts tokenized by the synthetic vocabs, plus ids outside */
    for (int k = 0; k < FUZZ_VOCAB_KINDS; k++) {
        int32_t *ids = NULL;
        size_t n = 0;
        vt_error err = {0};
        const char *text = sample_texts[(size_t)k % 4];
        if (vt_tokenize(toks[k], text, strlen(text), true, true, &ids, &n, &err) != VT_OK) {
            fprintf(stderr, "tokenize: %s\n", err.msg);
            return 1;
        }
        size_t at = 0;
        seed[at++] = (unsigned char)(k | 8 | (k == 1 ? 64 : 0));
        for (size_t i = 0; i < n && at + 3 <= sizeof seed - 3; i++) {
            seed[at++] = (unsigned char)(ids[i] & 0xFF);
            seed[at++] = (unsigned char)((ids[i] >> 8) & 0xFF);
            seed[at++] = (unsigned char)((ids[i] >> 16) & 0xFF);
        }
        free(ids);
        char name[32];
        snprintf(name, sizeof name, "ids-%d", k);
        bad |= write_seed(dir, "corpus-tokenizer", name, seed, at);
        seed[at++] = 0xF1, seed[at++] = 0xFF, seed[at++] = 0xFF; /* one id outside the vocab */
        snprintf(name, sizeof name, "ids-outside-%d", k);
        bad |= write_seed(dir, "corpus-tokenizer", name, seed, at);
    }
    return bad;
}

/* ---- fuzz_model ----------------------------------------------------------- */

/* The smallest models of each architecture: 8 wide, one layer, f32, the
 * vocabularies above (or the built-in one at its minimum size). */
static int model_seeds(const char *dir) {
    static const struct {
        const char *arch, *vocab, *type;
        int32_t head_dim;
        bool tied;
        int32_t n_expert; /* qwen3moe: 4 experts of 8, 2 used */
    } models[] = {
        {"llama", NULL, "f32", 0, false, 0},
        {"qwen2", "bpe-qwen2.gguf", "f32", 0, true, 0},
        {"qwen3", "bpe-llama3.gguf", "f32", 8, true, 0},
        {"qwen3moe", "bpe-qwen2.gguf", "f32", 8, true, 4},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char vocab[1024], path[1024];
        snprintf(vocab, sizeof vocab, "%s/corpus-vocab/%s", dir, models[i].vocab ? models[i].vocab : "");
        snprintf(path, sizeof path, "%s/corpus-model/%s.gguf", dir, models[i].arch);
        vt_synth_params p = {
            .arch = models[i].arch, .n_embd = 8, .n_layer = 1, .n_head = 2, .n_head_kv = 1,
            .head_dim = models[i].head_dim, .n_ff = 16, .n_vocab = 259, .n_ctx = 64,
            .tied_output = models[i].tied, .type = models[i].type, .seed = 1 + i,
            .vocab_from = models[i].vocab ? vocab : NULL, .n_expert = models[i].n_expert,
            .n_expert_used = models[i].n_expert ? 2 : 0, .n_ff_exp = models[i].n_expert ? 8 : 0,
        };
        vt_error err = {0};
        if (vt_synth_write(&p, path, &err) != VT_OK) {
            fprintf(stderr, "%s: %s\n", path, err.msg);
            bad = 1;
        }
    }
    return bad;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    if (vt_serve_options_declare(NULL) != VT_OK) return 1; /* the ini seeds hold vt serve's [server] too */
    int bad = option_seeds(dir);
    static const char *const vocab_names[FUZZ_VOCAB_KINDS] = {"spm.gguf", "bpe-qwen2.gguf", "bpe-llama3.gguf"};
    vt_gguf *g[FUZZ_VOCAB_KINDS] = {0};
    vt_tokenizer *toks[FUZZ_VOCAB_KINDS] = {0};
    for (int k = 0; k < FUZZ_VOCAB_KINDS && !bad; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/corpus-vocab/%s", dir, vocab_names[k]);
        vt_error err = {0};
        if (fuzz_vocab_write((fuzz_vocab_kind)k, path, &err) != VT_OK || vt_gguf_open(path, &g[k], &err) != VT_OK ||
            vt_tokenizer_load(g[k], &toks[k], &err) != VT_OK) {
            fprintf(stderr, "%s: %s\n", path, err.msg);
            bad = 1;
        }
    }
    if (!bad) bad = tokenizer_seeds(dir, toks);
    if (!bad) bad = model_seeds(dir);
    for (int k = 0; k < FUZZ_VOCAB_KINDS; k++) {
        vt_tokenizer_free(toks[k]);
        vt_gguf_close(g[k]);
    }
    return bad;
}
