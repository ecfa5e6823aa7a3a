/* test_limits.c — the CLI at its limits: every bad number or lying file ends
 * in one clear line on stderr and the documented exit code (2 bad argument,
 * 3 context full, 4 unsupported, 6 out of memory), never a crash.
 *
 * Runs the built vt (VT_CLI_PATH) as a subprocess on tiny models written by
 * tests/hostile_models.c. Malformed GGUF files in bulk are test_gguf's job;
 * here two of them are only checked to reach the user as one line. */
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_model_writer.h"
#include "hostile_models.h"
#include "util.h"

static char tiny[512], nobos[512], mismatch[512], bad_dtype[512], truncated[512], wide_kv[512], long_trained[512];

static const char *const option_env_vars[] = {"VT_CONFIG", "VT_BACKEND", "VT_THREADS", "VT_CTX_SIZE",
                                              "VT_KV_CACHE_DTYPE", "VT_KV_CACHE_F32", "VT_FAIL_ALLOC_AT"};

static int make_models(void) {
    /* levers from the caller's environment must not change what the CLI sees */
    for (size_t i = 0; i < sizeof option_env_vars / sizeof option_env_vars[0]; i++) unsetenv(option_env_vars[i]);
    vt_error err = {0};
    char vocab[512];
    vt_test_tmpfile(tiny, sizeof tiny, "tiny.gguf");
    vt_test_tmpfile(vocab, sizeof vocab, "bpe-vocab.gguf");
    vt_test_tmpfile(nobos, sizeof nobos, "nobos.gguf");
    vt_test_tmpfile(mismatch, sizeof mismatch, "mismatch.gguf");
    vt_test_tmpfile(bad_dtype, sizeof bad_dtype, "bad-dtype.gguf");
    vt_test_tmpfile(truncated, sizeof truncated, "truncated.gguf");
    vt_test_tmpfile(wide_kv, sizeof wide_kv, "wide-kv.gguf");
    vt_test_tmpfile(long_trained, sizeof long_trained, "long-trained.gguf");
    /* wide_kv: one KV head of 8192 dims, 32 KiB of f32 per token per layer:
     * at the largest accepted -c (16 Mi tokens) one K store is 512 GiB. */
    if (hm_write_tiny(tiny, NULL, 0, &err) || hm_write_bpe_vocab(vocab, &err) ||
        hm_write_tiny(nobos, vocab, 0, &err) ||
        gmw_copy_with_u32(tiny, mismatch, "qwen3.attention.head_count", 2 * HM_N_HEAD, &err) ||
        gmw_copy_with_raw_dtype(tiny, bad_dtype, "blk.0.attn_k.weight", 99, &err) ||
        gmw_copy_truncated(tiny, truncated, 20000, &err) || hm_write_tiny(wide_kv, NULL, 8192, &err) ||
        gmw_copy_with_u32(tiny, long_trained, "qwen3.context_length", 40960, &err)) {
        fprintf(stderr, "test_limits: cannot write the models: %s\n", err.msg);
        return 1;
    }
    return 0;
}

typedef struct result {
    int rc;
    char *out, *err;
} result;

static result vt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static result vt(const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    /* A refused huge allocation is reported, not fatal, under ASan too (as in
     * a release build): the allocator returns NULL like malloc would. */
    const char *asan = getenv("ASAN_OPTIONS");
    /* timeout: a hang shows up as exit 124 (and a failed test), not a stuck suite */
    snprintf(cmd, sizeof cmd, "ASAN_OPTIONS='%s%sallocator_may_return_null=1' timeout 120 '%s' %s", asan ? asan : "",
             asan && *asan ? ":" : "", VT_CLI_PATH, args);
    result r = {0};
    r.rc = vt_test_run_cmd(cmd, &r.out, &r.err);
    if (getenv("VT_TEST_VERBOSE")) printf("\n  vt %s\n  -> exit %d: %s", args, r.rc, r.err ? r.err : "");
    return r;
}

static void free_result(result *r) {
    free(r->out);
    free(r->err);
}

/* Exit code `rc`, and stderr is exactly one line "vt: ..." containing every
 * one of the NULL-terminated fragments. */
static void expect_one_line_error(result *r, int rc, const char *const *fragments) {
    const char *e = r->err ? r->err : "";
    bool ok = r->rc == rc && strncmp(e, "vt: ", 4) == 0 && hm_count_lines(e) == 1;
    for (const char *const *f = fragments; *f; f++) ok = ok && strstr(e, *f) != NULL;
    if (!ok) printf("\n  exit %d (want %d), stderr: %s", r->rc, rc, e);
    CU_ASSERT(ok);
}

#define EXPECT_ERROR(r, rc, ...) expect_one_line_error(&(r), (rc), (const char *const[]){__VA_ARGS__, NULL})

/* 40 token ids "3,4,...,42" */
static const char *forty_ids(void) {
    static char ids[256];
    size_t n = 0;
    for (int i = 0; i < 40; i++) n += (size_t)snprintf(ids + n, sizeof ids - n, "%s%d", i ? "," : "", 3 + i);
    return ids;
}

static void test_context_full(void) {
    result r = vt("run -m '%s' -c 16 --tokens %s -n 4 --backend reference", tiny, forty_ids());
    EXPECT_ERROR(r, 3, "40 tokens", "16", "-c");
    free_result(&r);
    /* the same prompt fits in 64 */
    r = vt("run -m '%s' -c 64 --tokens %s -n 2 --temp 0 --backend reference", tiny, forty_ids());
    CU_ASSERT_EQUAL(r.rc, 0);
    free_result(&r);
    /* eval reports it the same way */
    r = vt("eval -m '%s' -c 16 --tokens %s --backend reference", tiny, forty_ids());
    EXPECT_ERROR(r, 3, "16");
    free_result(&r);
}

/* A run cut short by the cache says what sized it: -c when given; else
 * -c's default, and whether that cap (4096) is below what the model was
 * trained on, so raising -c is worth it. */
static void test_context_size_origin_named(void) {
    result r = vt("run -m '%s' --tokens 5,6,7 -c 8 -n 10 --temp 0 --ids", tiny);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(r.err && strstr(r.err, "generating 5 tokens instead of 10: the KV cache holds 8 tokens (-c/--ctx-size 8)"));
    free_result(&r);
    /* set by an ini file: named by its line, once (the options' own note
     * would name it again were the message to name the key) */
    char ini[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_test_write_tmpfile(ini, sizeof ini, "ctx8.ini", "[kv_cache]\nctx_size = 8\n"));
    r = vt("run -m '%s' --tokens 5,6,7,8,9,10,11,12,13 --config '%s' -n 2", tiny, ini);
    char said[1200];
    snprintf(said, sizeof said, "the KV cache holds 8 (set by %s:2); raise -c", ini);
    EXPECT_ERROR(r, 3, said);
    free_result(&r);
    r = vt("run -m '%s' --tokens 5,6,7 -n 5000 --temp 0 --ids", long_trained);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(r.err && strstr(r.err, "generating 4093 tokens instead of 5000: the KV cache holds 4096 tokens "
                                     "(-c/--ctx-size's default caps it at 4096; the model was trained on 40960 tokens)"));
    free_result(&r);
}

/* -n -1, as llama.cpp takes it: until the end of the text or of the KV
 * cache, without the note a number too large gets; any other negative
 * number says -1 is the one. */
static void test_n_predict_until_end(void) {
    result r = vt("run -m '%s' --tokens 5,6,7 -c 16 -n -1 --temp 0 --ids --ignore-eos", tiny);
    CU_ASSERT_EQUAL(r.rc, 0);
    size_t commas = 0;
    for (const char *p = r.out; p && *p; p++) commas += *p == ',';
    CU_ASSERT_EQUAL(commas, 12); /* 13 ids: the 16 the cache holds less the prompt's 3 */
    CU_ASSERT(r.err && !strstr(r.err, "instead of"));
    free_result(&r);
    r = vt("run -m '%s' --tokens 5,6,7 -n -2", tiny);
    EXPECT_ERROR(r, 2, "or -1: until the end of the text or of the KV cache");
    free_result(&r);
}

/* A prompt that fills the context leaves no room to generate (prompt and
 * answer fit the cache together, as vt serve counts them); one token less
 * leaves room for one. -n 0 evaluates a full one. */
static void test_prompt_filling_the_context(void) {
    result r = vt("run -m '%s' --tokens 5,6,7,8,9,10,11,12,13,14,15,16 -c 12 -n 10 --temp 0", tiny);
    EXPECT_ERROR(r, 3, "fill the KV cache", "raise -c");
    free_result(&r);
    r = vt("run -m '%s' --tokens 5,6,7,8,9,10,11,12,13,14,15 -c 12 -n 10 --temp 0 --ids", tiny);
    CU_ASSERT_EQUAL(r.rc, 0);
    CU_ASSERT(r.err && strstr(r.err, "generating 1 token instead of 10"));
    CU_ASSERT(r.out && !strchr(r.out, ','));
    free_result(&r);
    r = vt("run -m '%s' --tokens 5,6,7,8,9,10,11,12,13,14,15,16 -c 12 -n 0", tiny);
    CU_ASSERT_EQUAL(r.rc, 0);
    free_result(&r);
}

static void test_zero_token_prompt(void) {
    /* a vocab without BOS: "" tokenizes to nothing */
    result r = vt("run -m '%s' -p '' -n 2 --backend reference", nobos);
    EXPECT_ERROR(r, 2, "zero tokens");
    free_result(&r);
    r = vt("run -m '%s' --tokens '' -n 2 --backend reference", tiny);
    EXPECT_ERROR(r, 2, "zero tokens");
    free_result(&r);
    r = vt("eval -m '%s' --tokens '' --backend reference", tiny);
    CU_ASSERT_EQUAL(r.rc, 2); /* a bad argument, not a signal */
    CU_ASSERT_EQUAL(hm_count_lines(r.err), 1);
    free_result(&r);
    /* with BOS, "" is one token and runs */
    r = vt("run -m '%s' -p '' -n 1 --temp 0 --backend reference", tiny);
    CU_ASSERT_EQUAL(r.rc, 0);
    free_result(&r);
}

static void test_n_predict_zero(void) {
    result r = vt("run -m '%s' --tokens 5,6,7 -n 0 --backend reference", tiny);
    CU_ASSERT_EQUAL(r.rc, 0);
    /* the prompt was evaluated, nothing generated */
    CU_ASSERT(r.err && strstr(r.err, "prompt 3 tokens"));
    CU_ASSERT(r.err && strstr(r.err, "generated 0 tokens"));
    CU_ASSERT(!r.out || r.out[0] == '\0'); /* no text, not even an empty line */
    free_result(&r);
}

static void test_threads_range(void) {
    result r = vt("run -m '%s' --tokens 5 -t 0", tiny);
    EXPECT_ERROR(r, 2, "--threads", "1..1024");
    free_result(&r);
    r = vt("run -m '%s' --tokens 5 -t 10000", tiny);
    EXPECT_ERROR(r, 2, "--threads", "10000", "1..1024");
    free_result(&r);
    r = vt("run -m '%s' --tokens 5 --threads=-3", tiny);
    EXPECT_ERROR(r, 2, "1..1024");
    free_result(&r);
    /* the bounds themselves are accepted */
    r = vt("run -m '%s' --tokens 5 -n 1 -t 1 --temp 0 --backend reference", tiny);
    CU_ASSERT_EQUAL(r.rc, 0);
    free_result(&r);
}

static void test_absurd_context(void) {
    result r = vt("run -m '%s' --tokens 5 -c 1000000000000", tiny);
    EXPECT_ERROR(r, 2, "--ctx-size", "1000000000000", "16777216");
    free_result(&r);
    r = vt("run -m '%s' --tokens 5 -c -1", tiny);
    EXPECT_ERROR(r, 2, "--ctx-size");
    free_result(&r);
    /* accepted by the parser but far beyond memory: out of memory, exit 6 */
    r = vt("run -m '%s' --tokens 5 -c 16777216 --kv-cache-dtype f32 --backend reference", wide_kv);
    EXPECT_ERROR(r, 6, "KV cache", "-c");
    free_result(&r);
}

static void test_hparams_disagree_with_shapes(void) {
    /* head_count doubled: n_head x head_dim = 128 but attn_q has 64 rows */
    result r = vt("run -m '%s' --tokens 5", mismatch);
    EXPECT_ERROR(r, 2, "blk.0.attn_q.weight", "hyperparameters");
    free_result(&r);
    r = vt("eval -m '%s' --tokens 5", mismatch);
    CU_ASSERT_EQUAL(r.rc, 2); /* a malformed model: a bad argument, as vt run says */
    CU_ASSERT(r.err && strstr(r.err, "blk.0.attn_q.weight")); /* naming the tensor */
    free_result(&r);
}

/* A mixture of experts whose file asks for more experts than vt bounds (a
 * routing cost the file would choose) is refused naming the key. */
static void test_expert_count_bounded(void) {
    char many[512];
    vt_test_tmpfile(many, sizeof many, "many-experts.gguf");
    vt_error err = {0};
    CU_ASSERT_FATAL(gmw_copy_with_u32(VT_TEST_DATA_DIR "/models/qwen3moe-tiny-f32.gguf", many, "qwen3moe.expert_count",
                                      1u << 20, &err) == VT_OK);
    result r = vt("run -m '%s' --tokens 5 --backend reference", many);
    EXPECT_ERROR(r, 2, "expert_count 1048576", "1..512");
    free_result(&r);
}

/* A tensor no part of vt's graph reads (a feature of the model vt does not
 * run) is refused naming it, not left out of the computation; q/k/v biases
 * are read on every architecture that has them. */
static void test_unread_tensors_refused(void) {
    const char *base = VT_TEST_DATA_DIR "/models/llama-gqa-tiny-f32.gguf";
    char extra[512], biased[512];
    vt_test_tmpfile(extra, sizeof extra, "unread-tensor.gguf");
    vt_test_tmpfile(biased, sizeof biased, "llama-q-bias.gguf");
    static float values[512];
    for (int i = 0; i < 512; i++) values[i] = 0.5f * sinf((float)i);
    vt_error err = {0};
    const gmw_tensor unread = {"blk.0.attn_output.bias", 1, {256, 1, 1, 1}, values};
    CU_ASSERT_FATAL(gmw_copy_with_tensor(base, extra, &unread, &err) == VT_OK);
    result r = vt("run -m '%s' --tokens 5", extra);
    EXPECT_ERROR(r, 4, "blk.0.attn_output.bias", "not one vt's llama graph reads");
    free_result(&r);
    const gmw_tensor bias = {"blk.0.attn_q.bias", 1, {256, 1, 1, 1}, values};
    CU_ASSERT_FATAL(gmw_copy_with_tensor(base, biased, &bias, &err) == VT_OK);
    result with = vt("run -m '%s' --tokens 1,20,30,40 -n 8 --temp 0 --ids --backend reference", biased);
    result without = vt("run -m '%s' --tokens 1,20,30,40 -n 8 --temp 0 --ids --backend reference", base);
    CU_ASSERT(with.rc == 0 && without.rc == 0 && with.out && without.out && strcmp(with.out, without.out) != 0);
    free_result(&with);
    free_result(&without);
}

static void test_malformed_files_one_line(void) {
    const char *files[] = {bad_dtype, truncated};
    for (int i = 0; i < 2; i++) {
        static const char *const commands[] = {"info", "run", "tokenize"};
        for (int cmd = 0; cmd < 3; cmd++) {
            result r = cmd == 1   ? vt("run -m '%s' --tokens 5", files[i])
                       : cmd == 2 ? vt("tokenize -m '%s' hello", files[i])
                                  : vt("info '%s'", files[i]);
            const char *e = r.err ? r.err : "";
            /* exit 2 (a file given that does not parse is a bad argument), one line naming the file once */
            const char *named = strstr(e, files[i]);
            bool ok = r.rc == 2 && strncmp(e, "vt: ", 4) == 0 && hm_count_lines(e) == 1 && named != NULL &&
                      strstr(named + 1, files[i]) == NULL;
            if (!ok) printf("\n  %s %s: exit %d, stderr: %s", commands[cmd], files[i], r.rc, e);
            CU_ASSERT(ok);
            free_result(&r);
        }
    }
}

/* A config "file" that is one endless line must not be read to the end. */
static void test_endless_config_line(void) {
    result r = vt("config --config /dev/zero");
    EXPECT_ERROR(r, 2, "/dev/zero:1", "characters");
    free_result(&r);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"-c 16 with a 40-token prompt: context full, exit 3", test_context_full},
        {"a run cut short by the cache names what sized it", test_context_size_origin_named},
        {"-n -1 generates until the end of the text or of the cache", test_n_predict_until_end},
        {"a prompt filling the context: exit 3; one token less generates one", test_prompt_filling_the_context},
        {"zero-token prompt (-p '' without BOS, --tokens ''): exit 2", test_zero_token_prompt},
        {"-n 0 evaluates the prompt and exits 0", test_n_predict_zero},
        {"-t 0 and -t 10000: exit 2 naming the range", test_threads_range},
        {"absurd -c: refused (exit 2) or out of memory (exit 6)", test_absurd_context},
        {"hyperparameters that disagree with tensor shapes name the tensor", test_hparams_disagree_with_shapes},
        {"malformed GGUF: vt info / vt run print one line", test_malformed_files_one_line},
        {"a mixture's expert_count is bounded", test_expert_count_bounded},
        {"a tensor the graph does not read is refused; biases are read", test_unread_tensors_refused},
        {"a config file that never ends (/dev/zero) is refused at its first line", test_endless_config_line},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("limits", make_models, NULL, tests);
    return vt_test_run();
}
