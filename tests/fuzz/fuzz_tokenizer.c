/* fuzz_tokenizer.c — libFuzzer target for both directions of the tokenizer.
 *
 * Input: byte 0 holds flags, the rest is the payload.
 *   bits 0-2  vocabulary: 0 SPM, 1 BPE (qwen2 pre-tokenizer), 2 BPE (llama3),
 *             3 the real LLaMA SPM vocab, 4 the real qwen2 vocab (both from
 *             tests/data/models/vocab; the target aborts when they are missing);
 *             5..7 wrap around
 *   bit 3     direction: 0 tokenize the payload, 1 detokenize it
 *   bit 4     add_bos    bit 5 parse_special    bit 6 render_special
 * Detokenize reads the payload as 3-byte little-endian ids: values from
 * 0xFFFFF0 pick an id outside the vocabulary (-1, INT32_MIN, n_vocab, ...),
 * the others are taken modulo n_vocab.
 *
 * What must hold, besides no crash, leak, UB or hang:
 *  - tokenizing any bytes succeeds, every id is inside the vocabulary, and
 *    BOS comes first exactly when asked for (and the vocab has one);
 *  - valid UTF-8 comes back byte for byte from detokenize where the format
 *    promises it (byte-level BPE without clean-up; SPM without special-token
 *    parsing), special tokens rendered iff they were parsed;
 *  - detokenize accepts exactly the id lists inside the vocabulary, refusing
 *    the others with a message; its text is the concatenation of each
 *    token's bytes (vt_token_to_bytes), which truncates at any buffer size
 *    without writing past it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_vocabs.h"
#include "gguf.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_VOCABS 5

typedef struct vocab {
    vt_gguf *gguf;
    vt_tokenizer *tok;
    bool bpe;
    bool clean_spaces; /* llama3-style BPE cleans " ." etc. on decode: no exact round trip */
    bool synthetic;    /* has FUZZ_USER_TOKEN / FUZZ_CONTROL_TOKEN */
} vocab;

static vocab vocabs[N_VOCABS];

static void die(const char *what) {
    fprintf(stderr, "fuzz_tokenizer: %s\n", what);
    abort();
}

#define CHECK(cond)                                  \
    do {                                             \
        if (!(cond)) die("invariant broken: " #cond); \
    } while (0)

static bool load_file(const char *path, vocab *v) {
    vt_error err = {0};
    if (vt_gguf_open(path, &v->gguf, &err) != VT_OK) return false;
    if (vt_tokenizer_load(v->gguf, &v->tok, &err) != VT_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.msg);
        vt_gguf_close(v->gguf);
        v->gguf = NULL;
        return false;
    }
    return true;
}

static void load_synthetic(fuzz_vocab_kind kind, vocab *v) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/vt-fuzz-vocab-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) die("mkstemp");
    close(fd);
    vt_error err = {0};
    if (fuzz_vocab_write(kind, path, &err) != VT_OK) die(err.msg);
    if (!load_file(path, v)) die("cannot load a synthetic vocab");
    unlink(path); /* the tokenizer keeps its own copies; the mapping stays valid */
    v->bpe = kind != FUZZ_VOCAB_SPM;
    v->clean_spaces = kind == FUZZ_VOCAB_BPE_LLAMA3;
    v->synthetic = true;
}

/* The committed vocab `name` ($VT_TEST_DATA_DIR overrides the build-time
 * path). Missing data stops the target: a fuzz run on stand-ins would pass
 * without exercising the real vocabularies. */
static bool load_data_vocab(const char *name, vocab *v) {
    const char *dir = getenv("VT_TEST_DATA_DIR");
    if (!dir || !*dir) dir = VT_TEST_DATA_DIR;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/vocab/%s", dir, name);
    if (access(path, R_OK) != 0 || !load_file(path, v)) {
        fprintf(stderr, "fuzz_tokenizer: cannot load the vocabulary %s\n", path);
        abort();
    }
    return true;
}

static void init_vocabs(void) {
    if (vocabs[0].tok) return;
    for (int k = 0; k < FUZZ_VOCAB_KINDS; k++) load_synthetic((fuzz_vocab_kind)k, &vocabs[k]);
    load_data_vocab("ggml-vocab-llama-spm.gguf", &vocabs[3]);
    vocabs[3].bpe = false;
    load_data_vocab("ggml-vocab-qwen2.gguf", &vocabs[4]);
    vocabs[4].bpe = true;
}

/* Strictly valid UTF-8: no stray or missing continuation bytes, no overlong
 * forms, no surrogates, nothing above U+10FFFF. */
static bool valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > n) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

static bool contains(const uint8_t *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, needle, k) == 0) return true;
    return false;
}

/* detokenize(ids) == concatenation of vt_token_to_bytes over ids (SPM drops
 * one leading space of the first token); and vt_token_to_bytes honours every
 * buffer size. */
static void check_pieces(const vocab *v, const int32_t *ids, size_t n, bool render, const char *text, size_t len) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t need = vt_token_to_bytes(v->tok, ids[i], render, NULL, 0);
        CHECK(need >= 0);
        char *exact = malloc(need ? (size_t)need : 1);
        if (!exact) die("malloc");
        CHECK(vt_token_to_bytes(v->tok, ids[i], render, exact, (size_t)need) == need);
        /* a short buffer gets the same prefix and the same count */
        if (need > 1) {
            char *half = malloc((size_t)need / 2);
            if (!half) die("malloc");
            CHECK(vt_token_to_bytes(v->tok, ids[i], render, half, (size_t)need / 2) == need);
            CHECK(memcmp(half, exact, (size_t)need / 2) == 0);
            free(half);
        }
        const char *piece = exact;
        size_t plen = (size_t)need;
        if (i == 0 && !v->bpe && plen > 0 && piece[0] == ' ') piece++, plen--;
        if (!v->clean_spaces) {
            CHECK(at + plen <= len);
            CHECK(memcmp(text + at, piece, plen) == 0);
        }
        at += plen;
        free(exact);
    }
    if (!v->clean_spaces) CHECK(at == len);
}

static void fuzz_tokenize(const vocab *v, const uint8_t *text, size_t len, bool add_bos, bool special, bool render) {
    int32_t *ids = NULL;
    size_t n = 0;
    vt_error err = {0};
    vt_status st = vt_tokenize(v->tok, (const char *)text, len, add_bos, special, &ids, &n, &err);
    if (st != VT_OK) {
        fprintf(stderr, "fuzz_tokenizer: tokenize refused %zu bytes: %s\n", len, err.msg);
        abort();
    }
    int32_t n_vocab = vt_tokenizer_n_vocab(v->tok), bos = vt_tokenizer_bos(v->tok);
    for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < n_vocab);
    bool with_bos = add_bos && bos >= 0;
    if (with_bos) CHECK(n >= 1 && ids[0] == bos);
    if (len > 0) CHECK(n > (with_bos ? 1u : 0u)); /* text never vanishes */

    char *back = NULL;
    size_t back_len = 0;
    const int32_t *body = ids + (with_bos ? 1 : 0);
    size_t n_body = n - (with_bos ? 1 : 0);
    CHECK(vt_detokenize(v->tok, body, n_body, render, &back, &back_len, &err) == VT_OK);
    CHECK(back[back_len] == '\0');
    check_pieces(v, body, n_body, render, back, back_len);

    bool round_trip = valid_utf8(text, len) && !v->clean_spaces && render == special;
    if (!v->bpe) {
        /* SPM: a special token (user-defined ones always match) starts a new
         * word, which gets a space prefix: only plain text comes back. */
        round_trip = round_trip && !special && !(v->synthetic && contains(text, len, FUZZ_USER_TOKEN)) &&
                     !contains(text, len, "\xe2\x96\x81"); /* U+2581 decodes to a space */
    }
    if (round_trip && (back_len != len || memcmp(back, text, len) != 0)) {
        fprintf(stderr, "fuzz_tokenizer: %zu bytes came back as %zu different bytes\n", len, back_len);
        abort();
    }
    free(back);
    free(ids);
}

static void fuzz_detokenize(const vocab *v, const uint8_t *p, size_t len, bool special, bool render) {
    int32_t n_vocab = vt_tokenizer_n_vocab(v->tok);
    const int32_t outside[16] = {-1, INT32_MIN, n_vocab, n_vocab + 1, INT32_MAX, -2, -n_vocab, INT32_MIN + 1,
                                 -1, n_vocab, -1, n_vocab, -1, n_vocab, -1, n_vocab};
    size_t n = len / 3;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) die("malloc");
    bool all_inside = true;
    for (size_t i = 0; i < n; i++) {
        uint32_t raw = p[3 * i] | (uint32_t)p[3 * i + 1] << 8 | (uint32_t)p[3 * i + 2] << 16;
        ids[i] = raw >= 0xFFFFF0 ? outside[raw & 15] : (int32_t)(raw % (uint32_t)n_vocab);
        all_inside = all_inside && ids[i] >= 0 && ids[i] < n_vocab;
    }
    char *text = NULL;
    size_t text_len = 0;
    vt_error err = {0};
    vt_status st = vt_detokenize(v->tok, ids, n, render, &text, &text_len, &err);
    if (all_inside) {
        CHECK(st == VT_OK);
        check_pieces(v, ids, n, render, text, text_len);
        /* and the text tokenizes again without trouble */
        int32_t *again = NULL;
        size_t n_again = 0;
        CHECK(vt_tokenize(v->tok, text, text_len, false, special, &again, &n_again, &err) == VT_OK);
        for (size_t i = 0; i < n_again; i++) CHECK(again[i] >= 0 && again[i] < n_vocab);
        free(again);
        free(text);
    } else {
        CHECK(st == VT_ERR_INVALID && err.msg[0] != '\0' && text == NULL);
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= n_vocab) CHECK(vt_token_to_bytes(v->tok, ids[i], render, NULL, 0) == -1);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    init_vocabs();
    unsigned flags = data[0];
    const vocab *v = &vocabs[(flags & 7) % N_VOCABS];
    bool detok = flags & 8, add_bos = flags & 16, special = flags & 32, render = flags & 64;
    if (detok) fuzz_detokenize(v, data + 1, size - 1, special, render);
    else fuzz_tokenize(v, data + 1, size - 1, add_bos, special, render);
    return 0;
}
