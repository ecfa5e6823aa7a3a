/* fuzz_vocab.c — libFuzzer target for loading a vocabulary from hostile GGUF
 * metadata (token lists, scores, types, merges, special ids, flags), then
 * using it.
 *
 * The input is a whole GGUF file. fuzz_gguf already covers the reader; this
 * target starts from vocab seeds (SPM and BPE, written by make_fuzz_seeds) so
 * mutations reach the tokenizer's loader: duplicate or empty tokens, merges
 * naming no token, ids outside the vocab, wrong element types, short score
 * arrays, unknown pre-tokenizers.
 *
 * What must hold: a refused vocab says why; an accepted one has its special
 * ids inside the vocab (or -1), answers piece/to_bytes for every id and only
 * for those, tokenizes a fixed set of texts (ASCII, UTF-8, invalid bytes,
 * every token's own text) into in-vocab ids with and without special parsing
 * or refuses with a message (a mutated vocab may lack a byte token the text
 * needs), and detokenizes every id. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Ids decoded per input at most: keeps one run fast on a big mutated vocab. */
#define MAX_IDS_CHECKED 2048

static void die(const char *what) {
    fprintf(stderr, "fuzz_vocab: %s\n", what);
    abort();
}

#define CHECK(cond)                                  \
    do {                                             \
        if (!(cond)) die("invariant broken: " #cond); \
    } while (0)

static void tokenize_checked(const vt_tokenizer *t, const char *text, size_t len) {
    int32_t n_vocab = vt_tokenizer_n_vocab(t);
    for (int mode = 0; mode < 4; mode++) {
        int32_t *ids = NULL;
        size_t n = 0;
        vt_error err = {0};
        vt_status st = vt_tokenize(t, text, len, mode & 1, mode & 2, &ids, &n, &err);
        if (st != VT_OK) {
            /* a vocab may lack what the text needs (a byte token, say): refusing is fine, silently is not */
            CHECK(err.msg[0] != '\0' && ids == NULL);
            continue;
        }
        for (size_t i = 0; i < n; i++) CHECK(ids[i] >= 0 && ids[i] < n_vocab);
        char *back = NULL;
        size_t back_len = 0;
        CHECK(vt_detokenize(t, ids, n, mode & 2, &back, &back_len, &err) == VT_OK);
        free(back);
        free(ids);
    }
}

static void exercise(const vt_tokenizer *t) {
    int32_t n_vocab = vt_tokenizer_n_vocab(t);
    CHECK(n_vocab >= 1);
    int32_t bos = vt_tokenizer_bos(t), eos = vt_tokenizer_eos(t);
    CHECK(bos >= -1 && bos < n_vocab && eos >= -1 && eos < n_vocab);
    if (vt_tokenizer_add_bos(t)) CHECK(bos >= 0);
    CHECK(vt_tokenizer_piece(t, -1) == NULL && vt_tokenizer_piece(t, n_vocab) == NULL);
    CHECK(vt_token_to_bytes(t, n_vocab, true, NULL, 0) == -1 && vt_token_to_bytes(t, INT32_MIN, true, NULL, 0) == -1);

    static const char *const texts[] = {
        "Hello world", " the  theory\n\n of 123 things's", "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
        "\xff\xfe\x80 \xc3", "<s></s><unk><|endoftext|><|im_start|>", "\xe2\x96\x81\xe2\x96\x81x", "",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) tokenize_checked(t, texts[i], strlen(texts[i]));
    char all_bytes[256];
    for (int b = 0; b < 256; b++) all_bytes[b] = (char)b;
    tokenize_checked(t, all_bytes, sizeof all_bytes);

    int32_t checked = n_vocab < MAX_IDS_CHECKED ? n_vocab : MAX_IDS_CHECKED;
    int32_t *ids = malloc((size_t)checked * sizeof *ids);
    if (!ids) die("malloc");
    for (int32_t i = 0; i < checked; i++) {
        /* spread over the whole vocab when it is bigger than the budget */
        int32_t id = (int32_t)((int64_t)i * n_vocab / checked);
        ids[i] = id;
        const char *piece = vt_tokenizer_piece(t, id);
        CHECK(piece != NULL);
        /* a token's own text (special ones included) tokenizes without trouble */
        tokenize_checked(t, piece, strlen(piece));
        char small[8];
        int32_t n = vt_token_to_bytes(t, id, true, small, sizeof small);
        CHECK(n >= 0);
        (void)vt_tokenizer_is_eog(t, id);
    }
    char *text = NULL;
    size_t len = 0;
    vt_error err = {0};
    CHECK(vt_detokenize(t, ids, (size_t)checked, true, &text, &len, &err) == VT_OK);
    CHECK(text[len] == '\0');
    free(text);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vt_gguf *g = NULL;
    vt_error err = {0};
    if (vt_gguf_open_memory(data, size, &g, &err) != VT_OK) return 0; /* fuzz_gguf's ground */
    vt_tokenizer *t = NULL;
    if (vt_tokenizer_load(g, &t, &err) != VT_OK) {
        CHECK(err.msg[0] != '\0' && t == NULL);
    } else {
        exercise(t);
        vt_tokenizer_free(t);
    }
    vt_gguf_close(g);
    return 0;
}
