/* test_tokenizer_bpe.c — the byte-level BPE tokenizer (qwen2 pre-tokenizer)
 * against llama.cpp's own output (tests/data/golden/tokenizer/qwen2*.jsonl). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_model_writer.h"
#include "tokenizer.h"
#include "unicode_props.h"
#include "unicode_utf8.h"
#include "tokenizer_golden.h"
#include "util.h"

static golden_vocab qwen2;
static bool have_qwen2;

static int open_qwen2(void) {
    const char *data = vt_test_data_dir("qwen2 vocab");
    if (data) have_qwen2 = golden_vocab_open(data, "models/vocab/ggml-vocab-qwen2.gguf", &qwen2);
    return have_qwen2 ? 0 : 1; /* missing or unloadable: the suite fails */
}

static int close_qwen2(void) {
    if (have_qwen2) golden_vocab_close(&qwen2);
    return 0;
}

static void run_qwen2_jsonl(const char *file) {
    if (!have_qwen2) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/tokenizer/%s", vt_test_data_dir(NULL), file);
    golden_counts c = {0};
    CU_ASSERT(golden_run_jsonl(qwen2.t, path, &c));
    printf("\n  %s: %d records, %d id mismatches, %d detok mismatches\n", file, c.records, c.id_mismatches,
           c.detok_mismatches);
    CU_ASSERT(c.records > 0);
    CU_ASSERT_EQUAL(c.id_mismatches, 0);
    CU_ASSERT_EQUAL(c.detok_mismatches, 0);
}

static void test_qwen2_goldens(void) { run_qwen2_jsonl("qwen2.jsonl"); }
static void test_qwen2_upstream_goldens(void) { run_qwen2_jsonl("qwen2.upstream.jsonl"); }

static void test_qwen2_vocab_contract(void) {
    if (!have_qwen2) return;
    const vt_tokenizer *t = qwen2.t;
    CU_ASSERT_EQUAL(vt_tokenizer_n_vocab(t), 151936);
    CU_ASSERT_EQUAL(vt_tokenizer_bos(t), 151643);
    CU_ASSERT_EQUAL(vt_tokenizer_eos(t), 151643);
    CU_ASSERT_FALSE(vt_tokenizer_add_bos(t));
    CU_ASSERT_TRUE(vt_tokenizer_is_eog(t, 151643)); /* <|endoftext|> */
    CU_ASSERT_TRUE(vt_tokenizer_is_eog(t, 151645)); /* <|im_end|> */
    CU_ASSERT_FALSE(vt_tokenizer_is_eog(t, 9707));

    /* add_bos with a vocab whose add_bos is false still prepends when asked:
     * the caller decides (llama.cpp's add_special follows the vocab instead) */
    int32_t *ids = NULL;
    size_t n = 0;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_tokenize(t, "Hello", 5, false, false, &ids, &n, &err), VT_OK);
    CU_ASSERT_EQUAL(n, 1);
    CU_ASSERT_EQUAL(ids[0], 9707);
    free(ids);

    /* "Ġworld": the byte-level space decodes back to ' ' */
    char buf[16];
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 1879, false, buf, sizeof buf), 6);
    CU_ASSERT_EQUAL(memcmp(buf, " world", 6), 0);
    /* control tokens: nothing unless rendered */
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 151645, false, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 151645, true, buf, sizeof buf), 10);

    /* every byte value round-trips through encode and decode */
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    CU_ASSERT_EQUAL_FATAL(vt_tokenize(t, all, 128, false, false, &ids, &n, &err), VT_OK); /* ASCII: exact */
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(vt_detokenize(t, ids, n, false, &text, &len, &err), VT_OK);
    CU_ASSERT_EQUAL(len, 128);
    CU_ASSERT_EQUAL(memcmp(text, all, 128), 0);
    free(text);
    free(ids);
}

/* ---- BPE rules on a small synthetic vocab ------------------------------------ */

#define G GMW_BYTE_LEVEL_SPACE

/* ids 0..255: the byte-level character of byte id; then merged tokens, whose
 * merges are listed in rank order below. */
static const char *const merged_tokens[] = {"ab", G "a", "12", "'R", "'RE", G G, "bc", "<|ctl|>", "xy"};
enum { ID_AB = 256, ID_GA, ID_12, ID_QR, ID_QRE, ID_GG, ID_BC, ID_CTL, ID_XY /* in the vocab, no merge makes it */ };
static const char *const merges[] = {"a b", G " a", "1 2", "' R", "'R E", G " " G, "b c"};

static vt_tokenizer *synth_bpe(const char *pre, vt_gguf **g) {
    enum { N_MERGED = sizeof merged_tokens / sizeof merged_tokens[0] };
    int32_t types[N_MERGED];
    for (int i = 0; i < N_MERGED; i++) types[i] = 256 + i == ID_CTL ? GMW_TOKEN_CONTROL : GMW_TOKEN_NORMAL;
    char path[1024];
    vt_gguf_writer *w = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(gmw_create_numbered(vt_test_tmpdir(), "bpe", path, sizeof path, &w, &err), VT_OK);
    gmw_bpe_vocab v = {.pre = pre,
                       .extra_tokens = merged_tokens,
                       .extra_types = types,
                       .n_extra = N_MERGED,
                       .merges = merges,
                       .n_merges = sizeof merges / sizeof merges[0]};
    gmw_set_byte_level_bpe(w, &v);
    CU_ASSERT_EQUAL_FATAL(gmw_finish(w, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(path, g, &err), VT_OK);
    vt_tokenizer *t = NULL;
    if (vt_tokenizer_load(*g, &t, &err) != VT_OK) printf("\n  %s\n", err.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    return t;
}

static void expect_ids(const vt_tokenizer *t, const char *text, bool parse_special, const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_tokenize(t, text, strlen(text), false, parse_special, &ids, &n, &err), VT_OK);
    bool same = n == n_want && memcmp(ids, want, n * sizeof *ids) == 0;
    if (!same) {
        printf("\n  '%s': got [", text);
        for (size_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
        printf("]\n");
    }
    CU_ASSERT(same);
    /* and the ids decode back to the text (every byte has a token) */
    char *back = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(vt_detokenize(t, ids, n, true, &back, &len, &err), VT_OK);
    CU_ASSERT(len == strlen(text) && memcmp(back, text, len) == 0);
    free(back);
    free(ids);
}

static void test_bpe_rules(void) {
    vt_gguf *g = NULL;
    vt_tokenizer *t = synth_bpe("qwen2", &g);
    /* the lowest-rank merge wins: "a b" (0) before "b c" (6) */
    expect_ids(t, "abc", false, (int32_t[]){ID_AB, 'c'}, 2);
    /* a space joins the following word: " a" is one pre-token, merged to "Ġa" */
    expect_ids(t, "x a", false, (int32_t[]){'x', ID_GA}, 2);
    /* \p{N} alone: digits are separate pre-tokens, so "1 2" can never merge */
    expect_ids(t, "12", false, (int32_t[]){'1', '2'}, 2);
    /* contractions are matched case-insensitively and split off the word */
    expect_ids(t, "x'REally", false, (int32_t[]){'x', ID_QRE, 'a', 'l', 'l', 'y'}, 6);
    /* \s+(?!\S): of two spaces before a word, the last goes with the word, so
     * "Ġ Ġ" cannot merge; trailing spaces stay together and do merge */
    expect_ids(t, "a  b", false, (int32_t[]){'a', ' ', ' ', 'b'}, 4);
    expect_ids(t, "a  ", false, (int32_t[]){'a', ID_GG}, 2);
    /* control tokens only with parse_special */
    expect_ids(t, "a<|ctl|>", true, (int32_t[]){'a', ID_CTL}, 2);
    expect_ids(t, "<|", false, (int32_t[]){'<', '|'}, 2);
    /* merges decide, not the vocab: "xy" is a token but no merge builds it */
    expect_ids(t, "xy", false, (int32_t[]){'x', 'y'}, 2);
    CU_ASSERT_FALSE(vt_tokenizer_add_bos(t));
    vt_tokenizer_free(t);
    vt_gguf_close(g);
}

/* llama.cpp's llama3 pre-tokenizer: digits in groups of up to three, a
 * pre-token found whole in the vocab skips the merges, BOS added by default. */
static void test_bpe_llama3_rules(void) {
    vt_gguf *g = NULL;
    vt_tokenizer *t = synth_bpe("llama-bpe", &g);
    expect_ids(t, "12345", false, (int32_t[]){ID_12, '3', '4', '5'}, 4);
    expect_ids(t, "xy", false, (int32_t[]){ID_XY}, 1);
    expect_ids(t, "x'REally", false, (int32_t[]){'x', ID_QRE, 'a', 'l', 'l', 'y'}, 6);
    expect_ids(t, "a  b", false, (int32_t[]){'a', ' ', ' ', 'b'}, 4);
    expect_ids(t, "a \n\n b", false, (int32_t[]){'a', ' ', '\n', '\n', ' ', 'b'}, 6);
    CU_ASSERT_TRUE(vt_tokenizer_add_bos(t));
    vt_tokenizer_free(t);
    vt_gguf_close(g);
}

/* detokenize(tokenize(x)) == x for valid UTF-8, with special tokens parsed
 * and rendered or neither: byte-level BPE loses nothing. */
static void test_qwen2_round_trip_random_text(void) {
    if (!have_qwen2) return;
    static const char *const pieces[] = {"a", "Z", "hello", "World", " ", "   ", "\n", "\n\n", "\t", "\xc3\xa9",
                                         "e\xcc\x81", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x99\x82", "'s", "'LL",
                                         "123", "!", "...", "<|im_end|>", "<|endoftext|>", "[PAD151650]", "</s>",
                                         "\r\n", "\xe2\x80\x83", "\xd9\xa3", "\x01"};
    const size_t n_pieces = sizeof pieces / sizeof pieces[0];
    CU_ASSERT_EQUAL(golden_round_trips(qwen2.t, pieces, n_pieces, 400, 0x9E3779B97F4A7C15ull, true), 0);
}

static void expect_detok(const vt_tokenizer *t, const int32_t *ids, size_t n, const char *want) {
    char *text = NULL;
    size_t len = 0;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_detokenize(t, ids, n, false, &text, &len, &err), VT_OK);
    if (strcmp(text, want) != 0) printf("\n  detok gave '%s', want '%s'\n", text, want);
    CU_ASSERT_STRING_EQUAL(text, want);
    free(text);
}

/* clean_up_tokenization_spaces: on for most gpt2 pre-tokenizers (here
 * stablelm2, same regex as qwen2), off for qwen2 itself. */
static void test_bpe_clean_spaces(void) {
    vt_gguf *g = NULL;
    vt_tokenizer *t = synth_bpe("stablelm2", &g);
    expect_detok(t, (int32_t[]){'a', ' ', ',', ' ', 'b', ' ', '.'}, 7, "a, b.");
    expect_detok(t, (int32_t[]){'a', ' ', '\'', 's'}, 4, "a's");
    expect_detok(t, (int32_t[]){'a', ' ', '\'', 't'}, 4, "a 't"); /* " 't" keeps its space */
    expect_detok(t, (int32_t[]){'a', ' ', '\'', ' ', 'b'}, 5, "a'b");
    vt_tokenizer_free(t);
    vt_gguf_close(g);
    t = synth_bpe("qwen2", &g);
    expect_detok(t, (int32_t[]){'a', ' ', ',', ' ', '\'', 's'}, 6, "a , 's");
    vt_tokenizer_free(t);
    vt_gguf_close(g);
}

/* ---- the Unicode layer the pre-tokenizers stand on ----------------------------- */

static void test_unicode_classes_and_utf8(void) {
    CU_ASSERT_EQUAL(vt_unicode_flags('A'), VT_UFLAG_LETTER);
    CU_ASSERT_EQUAL(vt_unicode_flags('5'), VT_UFLAG_NUMBER);
    CU_ASSERT_EQUAL(vt_unicode_flags(' '), VT_UFLAG_SEPARATOR | VT_UFLAG_WHITESPACE);
    CU_ASSERT_EQUAL(vt_unicode_flags('\n'), VT_UFLAG_CONTROL | VT_UFLAG_WHITESPACE);
    CU_ASSERT_EQUAL(vt_unicode_flags(0x1C), VT_UFLAG_CONTROL); /* not White_Space, unlike Python's isspace */
    CU_ASSERT_EQUAL(vt_unicode_flags('!'), VT_UFLAG_PUNCTUATION);
    CU_ASSERT_EQUAL(vt_unicode_flags('$'), VT_UFLAG_SYMBOL);
    CU_ASSERT_EQUAL(vt_unicode_flags(0x85), VT_UFLAG_CONTROL | VT_UFLAG_WHITESPACE);
    CU_ASSERT_EQUAL(vt_unicode_flags(0xA0), VT_UFLAG_SEPARATOR | VT_UFLAG_WHITESPACE);
    CU_ASSERT_EQUAL(vt_unicode_flags(0x3000), VT_UFLAG_SEPARATOR | VT_UFLAG_WHITESPACE);
    CU_ASSERT_EQUAL(vt_unicode_flags(0x0661), VT_UFLAG_NUMBER);      /* ARABIC-INDIC DIGIT ONE */
    CU_ASSERT_EQUAL(vt_unicode_flags(0x4E00), VT_UFLAG_LETTER);      /* CJK */
    CU_ASSERT_EQUAL(vt_unicode_flags(0x0301), VT_UFLAG_ACCENT_MARK); /* COMBINING ACUTE */
    CU_ASSERT_EQUAL(vt_unicode_flags(0x1F642), VT_UFLAG_SYMBOL);     /* emoji */
    CU_ASSERT_EQUAL(vt_unicode_flags(0x200B), 0);                    /* ZWSP is Cf: no group */
    CU_ASSERT_EQUAL(vt_unicode_flags(0x0378), 0);                    /* unassigned */
    CU_ASSERT_EQUAL(vt_unicode_flags(0x10FFFF), 0);
    CU_ASSERT_EQUAL(vt_unicode_flags(0x110000), 0);

    size_t used;
    CU_ASSERT_EQUAL(vt_utf8_decode("\xc3\xa9", 2, &used), 0xE9u);
    CU_ASSERT_EQUAL(used, 2);
    CU_ASSERT_EQUAL(vt_utf8_decode("\xf0\x9f\x99\x82", 4, &used), 0x1F642u);
    CU_ASSERT_EQUAL(used, 4);
    CU_ASSERT_EQUAL(vt_utf8_decode("\xff", 1, &used), 0xFFFDu); /* not a lead byte */
    CU_ASSERT_EQUAL(used, 1);
    CU_ASSERT_EQUAL(vt_utf8_decode("\xe6\x97", 2, &used), 0xFFFDu); /* truncated */
    CU_ASSERT_EQUAL(used, 1);
    CU_ASSERT_EQUAL(vt_utf8_decode("\xc3(", 2, &used), 0xFFFDu); /* bad continuation */
    CU_ASSERT_EQUAL(used, 1);
    CU_ASSERT_EQUAL(vt_utf8_decode("\xc0\x80", 2, &used), 0u); /* overlong, accepted as llama.cpp does */
    CU_ASSERT_EQUAL(used, 2);
    char out[4];
    for (uint32_t c = 0; c <= 0x10FFFF; c += 0x3F1) { /* encode/decode agree across all lengths */
        size_t n = vt_utf8_encode(c, out);
        CU_ASSERT_EQUAL(vt_utf8_seq_len((uint8_t)out[0]), n);
        CU_ASSERT_EQUAL(vt_utf8_decode(out, n, &used), c);
        CU_ASSERT_EQUAL(used, n);
    }
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"qwen2.jsonl: ids, detok, detok_special", test_qwen2_goldens},
        {"qwen2.upstream.jsonl: ids, detok, detok_special", test_qwen2_upstream_goldens},
        {"qwen2 vocab: ids, EOG, byte-level decoding", test_qwen2_vocab_contract},
        {"qwen2 round trip of random text", test_qwen2_round_trip_random_text},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo rules[] = {
        {"BPE merge ranks and qwen2 pre-tokenizer on a synthetic vocab", test_bpe_rules},
        {"llama3 pre-tokenizer on a synthetic vocab", test_bpe_llama3_rules},
        {"detokenizer's clean_up_tokenization_spaces", test_bpe_clean_spaces},
        {"Unicode classes and UTF-8 decoding", test_unicode_classes_and_utf8},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("bpe qwen2", open_qwen2, close_qwen2, tests);
    vt_test_add_suite("bpe rules", NULL, NULL, rules);
    return vt_test_run();
}
