/* test_utf8_stream.c — generated text is valid UTF-8 even when a character
 * is split across tokens: the stream itself, then the qwen2 vocabulary's
 * real splits, then `vt run` on a qwen3 model carrying the qwen2 vocabulary. */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "synth.h"
#include "tokenizer.h"
#include "utf8_stream.h"
#include "util.h"

/* Strict validity check written independently of the stream (a table of the
 * well-formed byte sequences, Unicode 15 table 3-7). */
static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c <= 0x7F) len = 1;
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            unsigned char d = s[i + k];
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
        }
        i += len;
    }
    return 1;
}

static size_t push_all(const char *in, size_t n, char *out, size_t chunk) {
    vt_utf8_stream s = {{0}, 0};
    size_t w = 0;
    for (size_t i = 0; i < n; i += chunk) w += vt_utf8_stream_push(&s, in + i, n - i < chunk ? n - i : chunk, out + w);
    return w + vt_utf8_stream_flush(&s, out + w);
}

static void test_valid_text_passes_unchanged_at_any_split(void) {
    const char *text = "naïve café 🙂 ÆØÅ 𝄞 end";
    size_t n = strlen(text);
    char out[VT_UTF8_STREAM_OUT_MAX(64)];
    for (size_t chunk = 1; chunk <= n; chunk++) {
        size_t w = push_all(text, n, out, chunk);
        CU_ASSERT_EQUAL(w, n);
        CU_ASSERT_EQUAL(memcmp(out, text, n), 0);
    }
}

static void test_incomplete_character_is_held_back(void) {
    vt_utf8_stream s = {{0}, 0};
    char out[64];
    const char smile[4] = {(char)0xF0, (char)0x9F, (char)0x99, (char)0x82}; /* 🙂 */
    CU_ASSERT_EQUAL(vt_utf8_stream_push(&s, smile, 2, out), 0); /* nothing yet */
    CU_ASSERT_EQUAL(vt_utf8_stream_push(&s, smile + 2, 2, out), 4);
    CU_ASSERT_EQUAL(memcmp(out, smile, 4), 0);
}

static void test_invalid_bytes_become_replacement_characters(void) {
    static const struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"\xFF", 1, "\xEF\xBF\xBD"},                       /* never valid */
        {"a\xC3", 2, "a\xEF\xBF\xBD"},                     /* truncated at the end: flushed */
        {"\xC3(", 2, "\xEF\xBF\xBD("},                     /* lead then ASCII */
        {"\xE0\x80\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong */
        {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate */
        {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* > U+10FFFF */
        {"\x80x", 2, "\xEF\xBF\xBDx"},                     /* stray continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[64];
        size_t w = push_all(cases[i].in, cases[i].n, out, 1);
        CU_ASSERT_EQUAL(w, strlen(cases[i].want));
        CU_ASSERT_EQUAL(memcmp(out, cases[i].want, w), 0);
        CU_ASSERT(valid_utf8((const unsigned char *)out, w));
    }
    /* Random bytes: whatever comes in, what goes out is valid UTF-8. */
    uint32_t x = 99;
    char in[4096], out[VT_UTF8_STREAM_OUT_MAX(4096)];
    for (int round = 0; round < 50; round++) {
        for (size_t i = 0; i < sizeof in; i++) {
            x = x * 1103515245u + 12345u;
            in[i] = (char)(x >> 16);
        }
        size_t w = push_all(in, sizeof in, out, 1 + (size_t)round);
        CU_ASSERT(valid_utf8((const unsigned char *)out, w));
    }
}

/* The qwen2 vocabulary splits rare characters over byte-level tokens; the
 * stream prints each character whole, and the whole equals the input. */
static void test_qwen2_split_characters_stream_whole(void) {
    const char *data = vt_test_data_dir("qwen2 vocabulary");
    if (!data) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/vocab/ggml-vocab-qwen2.gguf", data);
    vt_gguf *g = NULL;
    vt_tokenizer *t = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(path, &g, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_tokenizer_load(g, &t, NULL), VT_OK);
    const char *text = "𝄞 naïve 🙂 ÆØÅ";
    int32_t *ids = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(vt_tokenize(t, text, strlen(text), false, false, &ids, &n, NULL), VT_OK);
    vt_utf8_stream s = {{0}, 0};
    char out[1024];
    size_t w = 0, split_tokens = 0;
    for (size_t i = 0; i < n; i++) {
        char bytes[64];
        int32_t len = vt_token_to_bytes(t, ids[i], false, bytes, sizeof bytes);
        CU_ASSERT_FATAL(len > 0 && len < (int32_t)sizeof bytes);
        if (!valid_utf8((unsigned char *)bytes, (size_t)len)) split_tokens++;
        w += vt_utf8_stream_push(&s, bytes, (size_t)len, out + w);
        CU_ASSERT(valid_utf8((unsigned char *)out, w)); /* every prefix printed is valid */
    }
    w += vt_utf8_stream_flush(&s, out + w);
    printf("\n%zu tokens, %zu of them partial characters\n", n, split_tokens);
    CU_ASSERT(split_tokens >= 2); /* the case this is about does occur */
    CU_ASSERT_EQUAL(w, strlen(text));
    CU_ASSERT_EQUAL(memcmp(out, text, w), 0);
    free(ids);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
}

/* vt run end to end: a qwen3 model with the qwen2 vocabulary takes a
 * multi-byte prompt and prints valid UTF-8, whatever the random model says. */
static void test_vt_run_with_qwen2_vocab_prints_valid_utf8(void) {
    const char *data = vt_test_data_dir("vt run with the qwen2 vocabulary");
    if (!data) return;
    char vocab[1024], model[1024];
    snprintf(vocab, sizeof vocab, "%s/models/vocab/ggml-vocab-qwen2.gguf", data);
    vt_test_tmpfile(model, sizeof model, "qwen3-qwen2vocab.gguf");
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_synth_shape(&p, "tiny", &err), VT_OK);
    p.n_embd = 64;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.head_dim = 32;
    p.n_ff = 128;
    p.type = "q8_0";
    p.vocab_from = vocab;
    CU_ASSERT_EQUAL_FATAL(vt_synth_write(&p, model, &err), VT_OK);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p '𝄞 naïve café 🙂' -n 48 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 "
             "--seed 3 --backend reference --ignore-eos", VT_CLI_PATH, model);
    char *out = NULL, *errout = NULL;
    int rc = vt_test_run_cmd(cmd, &out, &errout);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    size_t len = strlen(out);
    CU_ASSERT(len > 0);
    CU_ASSERT(valid_utf8((unsigned char *)out, len));
    CU_ASSERT_PTR_NOT_NULL(strstr(errout ? errout : "", "generated 48 tokens"));
    /* The prompt itself round-trips through the model's tokenizer. */
    snprintf(cmd, sizeof cmd, "'%s' tokenize -m '%s' --ids '𝄞 naïve café 🙂'", VT_CLI_PATH, model);
    char *ids = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &ids, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    ids[strcspn(ids, "\n")] = '\0';
    snprintf(cmd, sizeof cmd, "'%s' detokenize -m '%s' %s", VT_CLI_PATH, model, ids);
    char *text = NULL;
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &text, NULL), 0);
    CU_ASSERT_STRING_EQUAL(text ? text : "", "𝄞 naïve café 🙂");
    free(text);
    free(ids);
    free(out);
    free(errout);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"valid text passes unchanged at any split", test_valid_text_passes_unchanged_at_any_split},
        {"an incomplete character is held back until its last byte", test_incomplete_character_is_held_back},
        {"invalid bytes become U+FFFD; output always valid", test_invalid_bytes_become_replacement_characters},
        {"qwen2 byte-level splits stream out whole characters", test_qwen2_split_characters_stream_whole},
        {"vt run on a qwen3 model with the qwen2 vocabulary prints valid UTF-8",
         test_vt_run_with_qwen2_vocab_prints_valid_utf8},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("utf8 stream", NULL, NULL, tests);
    return vt_test_run();
}
