/* tokenizer_golden.h — shared by test_tokenizer.c and test_tokenizer_bpe.c:
 * run llama.cpp tokenizer goldens (tests/data/golden/tokenizer*) through vt. */
#ifndef VT_TEST_TOKENIZER_GOLDEN_H
#define VT_TEST_TOKENIZER_GOLDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "tokenizer.h"

/* A GGUF and its tokenizer, opened from a path relative to tests/data. */
typedef struct golden_vocab {
    vt_gguf *g;
    vt_tokenizer *t;
} golden_vocab;

/* Open data_dir/rel (rel may start with "shared/", as the goldens' own paths do); false (with a printed
 * reason) on failure. */
bool golden_vocab_open(const char *data_dir, const char *rel, golden_vocab *v);
void golden_vocab_close(golden_vocab *v);

typedef struct golden_counts {
    int records;
    int id_mismatches;
    int detok_mismatches;
} golden_counts;

/* Run every record of a golden/tokenizer jsonl file: ids with parse_special =
 * with_special and no BOS; detok (render_special false) and detok_special
 * (true) of the golden ids. Prints each mismatch. Returns false if the file
 * cannot be read or parsed. */
bool golden_run_jsonl(const vt_tokenizer *t, const char *path, golden_counts *c);

/* detokenize(tokenize(text)) == text for `trials` texts of 1..30 random
 * pieces (xorshift from seed); special tokens parsed and rendered in a random
 * half of the trials when vary_special, never otherwise. Prints the first
 * three failures; returns how many trials failed. */
int golden_round_trips(const vt_tokenizer *t, const char *const *pieces, size_t n_pieces, int trials, uint64_t seed,
                       bool vary_special);

#endif
