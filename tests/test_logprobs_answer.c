/* test_logprobs_answer.c — vt serve's logprobs objects (core/server/
 * serve_logprobs.h) from what a real batch reports: a sampled token whose
 * text is empty (a control token such as <s>, which a hot sampler can draw)
 * is answered as "" with no bytes, first or later in a choice (the arena
 * its bytes would go to is never touched: the first such token met no arena
 * at all); and text_offset is the library's, not a sum of token lengths. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "serve_logprobs.h"
#include "util.h"
#include "vt/vt.h"

static vt_batch *open_batch(void) {
    const char *dir = vt_test_data_dir("logprobs answer model");
    if (!dir) return NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/aidreams260k-f32.gguf", dir);
    const char *const settings[] = {"runtime.backend=reference", "runtime.threads=1", "kv_cache.ctx_size=64", NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    if (vt_batch_open(path, &o, &b, err, sizeof err) != VT_OK) printf("\n  vt_batch_open: %s\n", err);
    return b;
}

static void test_a_token_of_no_text(void) {
    vt_batch *b = open_batch();
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    char bytes[16];
    CU_ASSERT_EQUAL_FATAL(vt_batch_token_bytes(b, 1, bytes, sizeof bytes), 0); /* <s>: no text */
    CU_ASSERT_FATAL(vt_batch_token_bytes(b, 300, bytes, sizeof bytes) > 0);
    /* <s> first (no arena yet), then a token with text, then <s> again;
     * alternatives of both kinds */
    const vt_token_logprob sampled[3] = {{1, -0.5f}, {300, -1.0f}, {1, -2.0f}};
    const vt_token_logprob top[3 * 2] = {{1, -0.5f}, {300, -1.5f}, {300, -1.0f}, {1, -1.2f}, {1, -2.0f}, {-1, 0.0f}};
    const int64_t offsets[3] = {0, 0, 4};
    const vt_batch_logprobs src = {sizeof src, 3, sampled, top, 2, offsets};
    for (int kind = 0; kind < 2; kind++) {
        vt_serve_logprobs lp;
        memset(&lp, 0, sizeof lp);
        lp.n_top = 2;
        CU_ASSERT_FATAL(vt_serve_logprobs_append(&lp, b, &src, 1)); /* one read, then the rest */
        CU_ASSERT_FATAL(vt_serve_logprobs_append(&lp, b, &(vt_batch_logprobs){sizeof src, 2, sampled + 1, top + 2, 2,
                                                                             offsets + 1},
                                                 2));
        CU_ASSERT_EQUAL(lp.n_tokens, 3);
        json_t *o = vt_serve_logprobs_json(&lp, kind ? VT_SERVE_CHAT : VT_SERVE_COMPLETION, 0, lp.n_tokens);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        if (kind) {
            json_t *content = json_object_get(o, "content");
            CU_ASSERT_EQUAL_FATAL(json_array_size(content), 3);
            for (size_t t = 0; t < 3; t += 2) {
                json_t *item = json_array_get(content, t);
                CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(item, "token")), "");
                CU_ASSERT_EQUAL(json_array_size(json_object_get(item, "bytes")), 0);
            }
            CU_ASSERT_EQUAL(json_array_size(json_object_get(json_array_get(content, 1), "bytes")),
                            (size_t)vt_batch_token_bytes(b, 300, bytes, sizeof bytes));
        } else {
            json_t *tokens = json_object_get(o, "tokens"), *offs = json_object_get(o, "text_offset");
            CU_ASSERT_EQUAL_FATAL(json_array_size(tokens), 3);
            CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(tokens, 0)), "");
            CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(tokens, 2)), "");
            for (size_t t = 0; t < 3; t++) CU_ASSERT_EQUAL(json_integer_value(json_array_get(offs, t)), offsets[t]);
        }
        json_decref(o);
        vt_serve_logprobs_free(&lp);
    }
    vt_batch_close(b);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"a token of no text", test_a_token_of_no_text},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("logprobs answer", NULL, NULL, tests);
    return vt_test_run();
}
