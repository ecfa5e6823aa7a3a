/* test_tokenizer.c — the SPM ("llama") tokenizer against llama.cpp's own
 * output (tests/data/golden/tokenizer.json and tokenizer/llama-spm*.jsonl),
 * plus the loader's error paths on hand-built GGUFs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_model_writer.h"
#include "json_mini.h"
#include "tokenizer.h"
#include "tokenizer_internal.h" /* to switch the SPM chunking off and compare */
#include "tokenizer_golden.h"
#include "util.h"

/* ---- goldens ---------------------------------------------------------- */

/* tokenizer.json: add_special=true (BOS from the vocab's own add_bos),
 * parse_special=false; check ids and the vocab pieces they name. */
static void test_tokenizer_json_goldens(void) {
    const char *dir = vt_test_data_dir("tokenizer.json goldens");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/tokenizer.json", dir);
    size_t size = 0;
    char *data = vt_test_read_file(path, &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    json_value root;
    char msg[200];
    CU_ASSERT_FATAL(json_parse(data, size, &root, msg, sizeof msg));
    free(data);
    CU_ASSERT_FATAL(root.type == JSON_ARRAY && root.n > 0);

    int mismatches = 0, checked = 0;
    for (size_t e = 0; e < root.n; e++) {
        const json_value *rec = &root.items[e];
        const json_value *model = json_get(rec, "model"), *text = json_get(rec, "text"),
                         *tokens = json_get(rec, "tokens"), *pieces = json_get(rec, "pieces"),
                         *add_special = json_get(rec, "add_special"), *parse_special = json_get(rec, "parse_special");
        CU_ASSERT_FATAL(model && text && tokens && pieces && add_special && parse_special);
        golden_vocab v;
        CU_ASSERT_FATAL(golden_vocab_open(dir, model->str, &v));
        bool add_bos = add_special->boolean && vt_tokenizer_add_bos(v.t);
        int32_t *ids = NULL;
        size_t n = 0;
        vt_error err = {0};
        CU_ASSERT_EQUAL_FATAL(vt_tokenize(v.t, text->str, text->len, add_bos, parse_special->boolean, &ids, &n, &err),
                              VT_OK);
        bool same = n == tokens->n;
        for (size_t i = 0; same && i < n; i++) {
            same = ids[i] == (int32_t)tokens->items[i].number;
            const char *piece = vt_tokenizer_piece(v.t, ids[i]);
            same = same && piece && strcmp(piece, pieces->items[i].str) == 0;
        }
        if (!same) {
            printf("\n  %s: '%s' tokenizes differently (%zu ids, golden %zu)\n", model->str, text->str, n, tokens->n);
            mismatches++;
        }
        checked++;
        free(ids);
        golden_vocab_close(&v);
    }
    json_free(&root);
    printf("\n  tokenizer.json: %d records, %d mismatches\n", checked, mismatches);
    CU_ASSERT_EQUAL(mismatches, 0);
}

static void run_spm_jsonl(const char *file) {
    const char *data = vt_test_data_dir("llama-spm goldens");
    if (!data) return;
    golden_vocab v;
    CU_ASSERT_FATAL(golden_vocab_open(data, "models/vocab/ggml-vocab-llama-spm.gguf", &v));
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/tokenizer/%s", data, file);
    golden_counts c = {0};
    CU_ASSERT(golden_run_jsonl(v.t, path, &c));
    printf("\n  %s: %d records, %d id mismatches, %d detok mismatches\n", file, c.records, c.id_mismatches,
           c.detok_mismatches);
    CU_ASSERT(c.records > 0);
    CU_ASSERT_EQUAL(c.id_mismatches, 0);
    CU_ASSERT_EQUAL(c.detok_mismatches, 0);
    golden_vocab_close(&v);
}

static void test_llama_spm_goldens(void) { run_spm_jsonl("llama-spm.jsonl"); }
static void test_llama_spm_upstream_goldens(void) { run_spm_jsonl("llama-spm.upstream.jsonl"); }

/* ---- the contract on the real LLaMA vocab --------------------------------- */

static void test_spm_vocab_contract(void) {
    const char *data = vt_test_data_dir("llama-spm vocab");
    if (!data) return;
    golden_vocab v;
    CU_ASSERT_FATAL(golden_vocab_open(data, "models/vocab/ggml-vocab-llama-spm.gguf", &v));
    const vt_tokenizer *t = v.t;
    CU_ASSERT_EQUAL(vt_tokenizer_n_vocab(t), 32000);
    CU_ASSERT_EQUAL(vt_tokenizer_bos(t), 1);
    CU_ASSERT_EQUAL(vt_tokenizer_eos(t), 2);
    CU_ASSERT_TRUE(vt_tokenizer_add_bos(t));
    CU_ASSERT_TRUE(vt_tokenizer_is_eog(t, 2));
    CU_ASSERT_FALSE(vt_tokenizer_is_eog(t, 1));
    CU_ASSERT_STRING_EQUAL(vt_tokenizer_piece(t, 1), "<s>");
    CU_ASSERT_PTR_NULL(vt_tokenizer_piece(t, 32000));
    CU_ASSERT_PTR_NULL(vt_tokenizer_piece(t, -1));

    char buf[16];
    /* byte token <0x0A> renders as a newline; "▁Hello" as " Hello" */
    int32_t nl = -1;
    for (int32_t id = 0; id < 300 && nl < 0; id++)
        if (strcmp(vt_tokenizer_piece(t, id), "<0x0A>") == 0) nl = id;
    CU_ASSERT_FATAL(nl >= 0);
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, nl, false, buf, sizeof buf), 1);
    CU_ASSERT_EQUAL(buf[0], '\n');
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 15043, false, buf, sizeof buf), 6); /* "▁Hello" */
    CU_ASSERT_EQUAL(memcmp(buf, " Hello", 6), 0);
    /* a too-small buffer reports the full length and writes only what fits */
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 15043, false, buf, 2), 6);
    /* control tokens render as nothing unless asked */
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 1, false, buf, sizeof buf), 0);
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 1, true, buf, sizeof buf), 3);
    CU_ASSERT_EQUAL(vt_token_to_bytes(t, 32000, true, buf, sizeof buf), -1);

    /* BOS + text round trip: the first text token's space prefix is dropped only
     * when it comes first, so after a (silent) BOS it stays — as llama.cpp does */
    int32_t *ids = NULL;
    size_t n = 0;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_tokenize(t, "Hello world", 11, true, false, &ids, &n, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_EQUAL(ids[0], 1);
    CU_ASSERT_EQUAL(ids[1], 15043);
    CU_ASSERT_EQUAL(ids[2], 3186);
    char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(vt_detokenize(t, ids + 1, 2, false, &text, &len, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(text, "Hello world");
    free(text);
    CU_ASSERT_EQUAL(vt_detokenize(t, ids, 3, true, &text, &len, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(text, "<s> Hello world");
    free(text);
    free(ids);

    /* empty text: just BOS, or nothing */
    CU_ASSERT_EQUAL(vt_tokenize(t, "", 0, true, false, &ids, &n, &err), VT_OK);
    CU_ASSERT_EQUAL(n, 1);
    free(ids);
    CU_ASSERT_EQUAL(vt_tokenize(t, "", 0, false, false, &ids, &n, &err), VT_OK);
    CU_ASSERT_EQUAL(n, 0);
    free(ids);

    /* an id outside the vocab is an error naming it */
    int32_t bad[] = {1, 40000};
    CU_ASSERT_EQUAL(vt_detokenize(t, bad, 2, false, &text, &len, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "40000"));
    golden_vocab_close(&v);
}

/* ---- hand-built GGUFs ------------------------------------------------------ */

/* A vocab-only GGUF in the temporary directory, from a writer the caller filled. */
static vt_gguf *open_written(vt_gguf_writer *w, const char *path) {
    vt_error err = {0};
    vt_gguf *g = NULL;
    CU_ASSERT_EQUAL_FATAL(gmw_finish(w, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(path, &g, &err), VT_OK);
    return g;
}

static void expect_load_error(const char *const *kv, int n_kv, vt_status want, const char *in_msg) {
    char path[1024];
    vt_gguf_writer *w = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(gmw_create_numbered(vt_test_tmpdir(), "vocab", path, sizeof path, &w, &err), VT_OK);
    for (int i = 0; i < n_kv; i++) vt_gguf_writer_set_str(w, kv[2 * i], kv[2 * i + 1]);
    vt_gguf *g = open_written(w, path);
    vt_tokenizer *t = (vt_tokenizer *)&err; /* must be reset to NULL on failure */
    CU_ASSERT_EQUAL(vt_tokenizer_load(g, &t, &err), want);
    CU_ASSERT_PTR_NULL(t);
    if (!strstr(err.msg, in_msg)) printf("\n  message '%s' lacks '%s'\n", err.msg, in_msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, in_msg));
    vt_gguf_close(g);
}

static void test_loader_errors(void) {
    expect_load_error(NULL, 0, VT_ERR_FORMAT, "tokenizer.ggml.model");
    const char *const bert[] = {"tokenizer.ggml.model", "bert"};
    expect_load_error(bert, 1, VT_ERR_UNSUPPORTED, "bert");
    const char *const no_tokens[] = {"tokenizer.ggml.model", "llama"};
    expect_load_error(no_tokens, 1, VT_ERR_FORMAT, "tokenizer.ggml.tokens");
    const char *const other_pre[] = {"tokenizer.ggml.model", "gpt2", "tokenizer.ggml.pre", "falcon"};
    expect_load_error(other_pre, 2, VT_ERR_UNSUPPORTED, "falcon");
}

/* ---- SPM rules on a small synthetic vocab ----------------------------------- */

/* llama.cpp token types */
enum { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, BYTE = 6 };

typedef struct synth_token {
    const char *text;
    float score;
    int32_t type;
} synth_token;

#define SP "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then these: */
static const synth_token synth_words[] = {
    {SP, -1.0f, NORMAL},        /* 259 */
    {"a", -1.0f, NORMAL},       /* 260 */
    {"b", -1.0f, NORMAL},       /* 261 */
    {"c", -1.0f, NORMAL},       /* 262 */
    {"ab", -5.0f, NORMAL},      /* 263: loses to "bc" in "abc" */
    {"bc", -2.0f, NORMAL},      /* 264 */
    {"ba", -5.0f, NORMAL},      /* 265: ties with "ab" */
    {SP "a", -3.0f, NORMAL},    /* 266 */
    {"<ctrl>", 0.0f, CONTROL},  /* 267 */
    {"<|u|>", 0.0f, USER_DEFINED}, /* 268 */
    {"x", -1.0f, NORMAL},       /* 269 */
};
enum { ID_SP = 259, ID_A, ID_B, ID_C, ID_AB, ID_BC, ID_BA, ID_SP_A, ID_CTRL, ID_USER, ID_X };

/* With inner_space, two more tokens: 270 "▁x" and 271 "x▁x", a token with
 * U+2581 after another character (merges then cross spaces). */
static const synth_token inner_space_words[] = {{SP "x", -1.0f, NORMAL}, {"x" SP "x", -1.0f, NORMAL}};
enum { ID_SP_X = 270, ID_X_SP_X };

static vt_tokenizer *synth_spm_ex(bool add_space_prefix, bool inner_space, vt_gguf **g_out) {
    enum { N_FIXED = 3 + 256, MAX_TOKENS = N_FIXED + sizeof synth_words / sizeof synth_words[0] + 2 };
    size_t n_words = sizeof synth_words / sizeof synth_words[0], n_extra = inner_space ? 2 : 0;
    static char byte_tokens[256][8];
    const char *tokens[MAX_TOKENS] = {"<unk>", "<s>", "</s>"};
    float scores[MAX_TOKENS] = {0};
    int32_t types[MAX_TOKENS] = {UNKNOWN, CONTROL, CONTROL};
    for (int byte = 0; byte < 256; byte++) {
        snprintf(byte_tokens[byte], sizeof byte_tokens[byte], "<0x%02X>", byte);
        tokens[3 + byte] = byte_tokens[byte], types[3 + byte] = BYTE;
    }
    size_t n = N_FIXED;
    for (size_t i = 0; i < n_words + n_extra; i++, n++) {
        const synth_token *word = i < n_words ? &synth_words[i] : &inner_space_words[i - n_words];
        tokens[n] = word->text, scores[n] = word->score, types[n] = word->type;
    }
    char path[1024];
    vt_gguf_writer *w = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(gmw_create_numbered(vt_test_tmpdir(), "spm", path, sizeof path, &w, &err), VT_OK);
    gmw_vocab v = {.model = "llama", .tokens = tokens, .scores = scores, .types = types, .n_tokens = n};
    gmw_set_vocab(w, &v);
    if (!add_space_prefix) vt_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false);
    vt_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    *g_out = open_written(w, path);
    vt_tokenizer *t = NULL;
    if (vt_tokenizer_load(*g_out, &t, &err) != VT_OK) printf("\n  %s\n", err.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    /* optional keys this vocab lacks (tokenizer.ggml.pre, add_bos_token, ...) leave no error behind */
    CU_ASSERT_EQUAL(err.code, VT_OK);
    CU_ASSERT_STRING_EQUAL(err.msg, "");
    return t;
}

static vt_tokenizer *synth_spm(bool add_space_prefix, vt_gguf **g_out) {
    return synth_spm_ex(add_space_prefix, false, g_out);
}

/* Tokenize and compare with the ids derived by hand from the SPM rules. */
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
    free(ids);
}

static void test_spm_rules(void) {
    vt_gguf *g = NULL;
    vt_tokenizer *t = synth_spm(false, &g); /* no space prefix: the merges alone */

    /* highest score merges first: "bc" (-2) beats "ab" (-5) */
    expect_ids(t, "abc", false, (int32_t[]){ID_A, ID_BC}, 2);
    /* equal scores: the leftmost pair merges first ("ab" then "a" is left) */
    expect_ids(t, "aba", false, (int32_t[]){ID_AB, ID_A}, 2);
    expect_ids(t, "bab", false, (int32_t[]){ID_BA, ID_B}, 2);
    /* characters not in the vocab fall back to their UTF-8 bytes (<0xNN> = 3 + byte) */
    expect_ids(t, "a\xc3\xa9", false, (int32_t[]){ID_A, 3 + 0xC3, 3 + 0xA9}, 3);
    /* spaces become U+2581 and merge like any character */
    expect_ids(t, "x a", false, (int32_t[]){ID_X, ID_SP_A}, 2);
    /* control tokens are text unless parse_special; user-defined tokens always match */
    expect_ids(t, "a<ctrl>", true, (int32_t[]){ID_A, ID_CTRL}, 2);
    expect_ids(t, "<|u|>a", false, (int32_t[]){ID_USER, ID_A}, 2);
    vt_tokenizer_free(t);
    vt_gguf_close(g);

    t = synth_spm(true, &g); /* llama.cpp's SPM default: add_space_prefix */
    CU_ASSERT_TRUE(t->spm_chunk_at_spaces); /* U+2581 only leads its tokens here */
    /* " " is prefixed to the text ... */
    expect_ids(t, "a", false, (int32_t[]){ID_SP_A}, 1);
    /* ... and to the text after every special token */
    expect_ids(t, "x<ctrl>a", true, (int32_t[]){ID_SP, ID_X, ID_CTRL, ID_SP_A}, 4);
    expect_ids(t, "<|u|>a", false, (int32_t[]){ID_USER, ID_SP_A}, 2);
    /* without parse_special "<ctrl>" is plain text: '<' '>' 't' 'r' 'l' are bytes */
    expect_ids(t, "<ctrl>", false,
               (int32_t[]){ID_SP, 3 + '<', ID_C, 3 + 't', 3 + 'r', 3 + 'l', 3 + '>'}, 7);

    /* detokenizing drops the first token's leading space only */
    int32_t ids[] = {ID_SP_A, ID_CTRL, ID_SP_A, 3 + 0xC3, 3 + 0xA9};
    char *text = NULL;
    size_t len = 0;
    vt_error err = {0};
    CU_ASSERT_EQUAL(vt_detokenize(t, ids, 5, false, &text, &len, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(text, "a a\xc3\xa9");
    free(text);
    CU_ASSERT_EQUAL(vt_detokenize(t, ids, 5, true, &text, &len, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(text, "a<ctrl> a\xc3\xa9");
    free(text);
    vt_tokenizer_free(t);
    vt_gguf_close(g);

    /* a vocab with "x▁x": merges cross the space, so no chunking at spaces */
    t = synth_spm_ex(false, true, &g);
    CU_ASSERT_FALSE(t->spm_chunk_at_spaces);
    expect_ids(t, "x x", false, (int32_t[]){ID_X_SP_X}, 1); /* "▁x" first, then "x" + "▁x" */
    vt_tokenizer_free(t);
    vt_gguf_close(g);
}

/* ---- round trip on random text ------------------------------------------------ */

/* detokenize(tokenize(x)) == x for any bytes when special tokens are not
 * parsed: SPM's byte fallback covers every byte and only the added prefix
 * space is dropped again. Excluded: U+2581 itself (SPM reads it as a space) and
 * truncated lead bytes such as a lone \xff or \xc3: like llama.cpp, the
 * splitter takes the length a lead byte announces, so a following space is
 * swallowed after its escaping into U+2581 and comes back as that character. */
static void test_spm_round_trip_random_text(void) {
    const char *data = vt_test_data_dir("llama-spm vocab");
    if (!data) return;
    golden_vocab v;
    CU_ASSERT_FATAL(golden_vocab_open(data, "models/vocab/ggml-vocab-llama-spm.gguf", &v));
    static const char *const pieces[] = {"a", "Z", "hello", "world", " ", "  ", "\n", "\t", "\xc3\xa9", "\xc3\xb1",
                                         "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x99\x82", "'s", "123", "!", "...",
                                         "<s>", "</s>", "<unk>", "\r\n", "\x80", "\xbf", "\x01"};
    const size_t n_pieces = sizeof pieces / sizeof pieces[0];
    CU_ASSERT_EQUAL(golden_round_trips(v.t, pieces, n_pieces, 300, 0x2545F4914F6CDD1Dull, false), 0);
    golden_vocab_close(&v);
}

/* The SPM merge queue runs chunk by chunk between spaces when the vocab
 * allows it; that must give exactly the ids of one queue over the whole text. */
static void test_spm_chunking_matches_single_queue(void) {
    const char *data = vt_test_data_dir("llama-spm vocab");
    if (!data) return;
    golden_vocab v;
    CU_ASSERT_FATAL(golden_vocab_open(data, "models/vocab/ggml-vocab-llama-spm.gguf", &v));
    CU_ASSERT_TRUE_FATAL(v.t->spm_chunk_at_spaces); /* LLaMA's vocab has U+2581 only in leading runs */
    static const char *const pieces[] = {" ", "  ", "a", "the", " the", SP, SP SP, "\n", "\xff", "\xc3", "ing",
                                         "\xe6\x97\xa5", "Hello", "<s>", "12", "\xe2\x96"};
    uint64_t x = 99;
    int diffs = 0;
    for (int trial = 0; trial < 2000; trial++) {
        char text[1024];
        size_t len = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int n_pieces = 1 + (int)(x % 60);
        for (int i = 0; i < n_pieces; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const char *p = pieces[x % (sizeof pieces / sizeof pieces[0])];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        int32_t *chunked = NULL, *whole = NULL;
        size_t n_chunked = 0, n_whole = 0;
        vt_error err = {0};
        CU_ASSERT_EQUAL_FATAL(vt_tokenize(v.t, text, len, false, x & 1, &chunked, &n_chunked, &err), VT_OK);
        v.t->spm_chunk_at_spaces = false;
        CU_ASSERT_EQUAL_FATAL(vt_tokenize(v.t, text, len, false, x & 1, &whole, &n_whole, &err), VT_OK);
        v.t->spm_chunk_at_spaces = true;
        diffs += n_chunked != n_whole || memcmp(chunked, whole, n_whole * sizeof *whole) != 0;
        free(chunked);
        free(whole);
    }
    CU_ASSERT_EQUAL(diffs, 0);
    golden_vocab_close(&v);
}

int main(void) {
    static CU_TestInfo goldens[] = {
        {"tokenizer.json (tok512 and llama2 vocabs, with BOS)", test_tokenizer_json_goldens},
        {"llama-spm.jsonl: ids, detok, detok_special", test_llama_spm_goldens},
        {"llama-spm.upstream.jsonl: ids, detok, detok_special", test_llama_spm_upstream_goldens},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo contract[] = {
        {"SPM vocab: ids, pieces, bytes, BOS, errors", test_spm_vocab_contract},
        {"loader errors name what is wrong", test_loader_errors},
        {"SPM rules on a synthetic vocab", test_spm_rules},
        {"SPM round trip of random text", test_spm_round_trip_random_text},
        {"SPM chunked merging equals one queue", test_spm_chunking_matches_single_queue},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("spm goldens", NULL, NULL, goldens);
    vt_test_add_suite("tokenizer contract", NULL, NULL, contract);
    return vt_test_run();
}
