/* test_tokenizer_bpe.c — the byte-level BPE tokenizer (qwen2 pre-tokenizer)
 * against llama.cpp's own output (../shared/golden/tokenizer/qwen2*.jsonl). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "tokenizer_golden.h"
#include "util.h"

static golden_vocab qwen2;
static bool have_qwen2;

static int open_qwen2(void) {
    const char *shared = vt_test_shared_dir("qwen2 vocab");
    if (shared) have_qwen2 = golden_vocab_open(shared, "models/vocab/ggml-vocab-qwen2.gguf", &qwen2);
    return shared && !have_qwen2 ? 1 : 0; /* present but unloadable: the suite fails */
}

static int close_qwen2(void) {
    if (have_qwen2) golden_vocab_close(&qwen2);
    return 0;
}

static void run_qwen2_jsonl(const char *file) {
    if (!have_qwen2) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/tokenizer/%s", vt_test_shared_dir(NULL), file);
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

int main(void) {
    static CU_TestInfo tests[] = {
        {"qwen2.jsonl: ids, detok, detok_special", test_qwen2_goldens},
        {"qwen2.upstream.jsonl: ids, detok, detok_special", test_qwen2_upstream_goldens},
        {"qwen2 vocab: ids, EOG, byte-level decoding", test_qwen2_vocab_contract},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("bpe qwen2", open_qwen2, close_qwen2, tests);
    return vt_test_run();
}
