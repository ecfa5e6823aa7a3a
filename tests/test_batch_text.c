/* test_batch_text.c — the text side of the batching API (include/vt/vt.h),
 * through the public header on the real engine path: each read's text is
 * final (whole UTF-8 characters; a character split over tokens waits for its
 * last byte), stop strings end a request before them and free its blocks,
 * preemption adds no text twice, the repetition penalties move greedy
 * output the expected way, a caller built before the appended fields still
 * works, out-of-range fields are refused by name, and the model queries
 * (tokenize with special tokens, metadata strings, context, pool size). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "vt/vt.h"

#define MAX_GEN 96

static char story_model[1024]; /* aidreams260k: trained, its greedy text is English */
static char tiny_model[1024];  /* qwen3-tiny: random weights over a 32000-id SentencePiece vocabulary */

static int suite_init(void) {
    const char *dir = vt_test_data_dir("batch text models");
    if (!dir) return 1;
    snprintf(story_model, sizeof story_model, "%s/models/aidreams260k-f32.gguf", dir);
    snprintf(tiny_model, sizeof tiny_model, "%s/models/qwen3-tiny-q4_k_m.gguf", dir);
    return 0;
}

static vt_batch *open_batch(const char *model, const char *setting) {
    /* a setting of the context replaces the 512 tokens; any other is added */
    const bool ctx = setting && strncmp(setting, "kv_cache.ctx_size=", 18) == 0;
    const char *const settings[] = {"runtime.backend=reference", "runtime.threads=2", "runtime.max_seqs=4",
                                    ctx ? setting : "kv_cache.ctx_size=512", ctx ? NULL : setting, NULL};
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    if (vt_batch_open(model, &o, &b, err, sizeof err) != VT_OK) printf("\n  vt_batch_open: %s\n", err);
    return b;
}

/* What one request gave, read after every step. */
typedef struct generation {
    int32_t tokens[MAX_GEN];
    int64_t n_tokens;
    char text[MAX_GEN * 64 + 1];
    size_t n_text;
    vt_finish finish;
    bool text_after_finish; /* a read after the finish still returned text */
} generation;

static bool is_valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (len == 0 || i + len > n) return false;
        for (size_t k = 1; k < len; k++)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

static void read_into(vt_batch *b, uint64_t id, generation *g) {
    vt_batch_output out;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, id, &out, err, sizeof err), VT_OK);
    CU_ASSERT_FATAL(g->n_tokens + (int64_t)out.n_tokens <= MAX_GEN);
    memcpy(g->tokens + g->n_tokens, out.tokens, out.n_tokens * sizeof *out.tokens);
    g->n_tokens += (int64_t)out.n_tokens;
    CU_ASSERT_PTR_NOT_NULL_FATAL(out.text);
    CU_ASSERT(is_valid_utf8(out.text, out.n_text)); /* every read: whole characters */
    CU_ASSERT_FATAL(g->n_text + out.n_text < sizeof g->text);
    memcpy(g->text + g->n_text, out.text, out.n_text);
    g->n_text += out.n_text;
    g->text[g->n_text] = 0;
    if (g->finish != VT_FINISH_NONE && out.n_text > 0) g->text_after_finish = true;
    g->finish = out.finish;
}

/* Step until nothing runs, reading every request after each step. */
static void run_to_end(vt_batch *b, const uint64_t *ids, int n, generation *g) {
    char err[512] = "";
    for (int guard = 0; guard < 10000; guard++) {
        int32_t n_seqs = -1;
        CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
        for (int i = 0; i < n; i++) read_into(b, ids[i], &g[i]);
        if (n_seqs == 0) return;
    }
    CU_FAIL("the batch never ran out of work");
}

static vt_batch_request text_request(const char *prompt, int64_t max_new) {
    vt_batch_request r;
    vt_batch_request_init(&r);
    r.text = prompt;
    r.max_new_tokens = max_new;
    return r;
}

/* One request alone to its end. */
static void generate(vt_batch *b, const vt_batch_request *r, generation *g) {
    memset(g, 0, sizeof *g);
    uint64_t id = 0;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, r, &id, err, sizeof err), VT_OK);
    run_to_end(b, &id, 1, g);
    CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
}

/* The bytes of tokens[0..n) as the tokenizer renders them, concatenated. */
static size_t token_bytes(vt_batch *b, const int32_t *tokens, int64_t n, char *out, size_t cap) {
    size_t len = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t k = vt_batch_token_bytes(b, tokens[i], out + len, cap - len);
        CU_ASSERT_FATAL(k >= 0 && (size_t)k < cap - len);
        len += (size_t)k;
    }
    return len;
}

static const char story_prompt[] = "Once upon a time";

/* Greedy text alone, then with a stop string taken from it that spans two
 * tokens: the text ends right before its first occurrence, the request ends
 * at the token that completed it, and its blocks are free at once. */
static void test_a_stop_string_ends_the_generation_before_it(void) {
    vt_batch *b = open_batch(story_model, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    generation *full = calloc(2, sizeof *full), *cut = full + 1;
    vt_batch_request r = text_request(story_prompt, 48);
    generate(b, &r, full);
    CU_ASSERT_EQUAL(full->finish, VT_FINISH_LENGTH);
    CU_ASSERT_EQUAL_FATAL(full->n_tokens, 48);
    char bytes[MAX_GEN * 64];
    CU_ASSERT_EQUAL(token_bytes(b, full->tokens, 48, bytes, sizeof bytes), full->n_text);
    CU_ASSERT_EQUAL(memcmp(bytes, full->text, full->n_text), 0);
    /* The last 2 bytes of a token and the first 3 of the next, from token
     * 10 on. */
    int64_t k = 10;
    size_t end_k = 0;
    for (; k + 1 < 48; k++) {
        end_k = token_bytes(b, full->tokens, k + 1, bytes, sizeof bytes);
        if (token_bytes(b, full->tokens + k, 1, bytes, sizeof bytes) >= 2 &&
            token_bytes(b, full->tokens + k + 1, 1, bytes, sizeof bytes) >= 3)
            break;
    }
    CU_ASSERT_FATAL(k + 1 < 48);
    char stop[6];
    memcpy(stop, full->text + end_k - 2, 5);
    stop[5] = 0;
    const char *first = strstr(full->text, stop);
    CU_ASSERT_PTR_NOT_NULL_FATAL(first);
    const size_t at = (size_t)(first - full->text);
    /* The token whose bytes complete the first occurrence. */
    int64_t n_want = 0;
    while (token_bytes(b, full->tokens, n_want, bytes, sizeof bytes) < at + 5) n_want++;
    printf("\n  greedy: \"%s\"\n  stop string \"%s\" at byte %zu, token %lld\n", full->text, stop, at,
           (long long)n_want);

    vt_batch_stats stats;
    vt_batch_get_stats(b, &stats);
    const int32_t free_idle = stats.free_kv_blocks;
    CU_ASSERT_EQUAL(free_idle, stats.total_kv_blocks);
    const char *const stops[] = {"zzz-never", stop};
    r.stop_strings = stops;
    r.n_stop_strings = 2;
    memset(cut, 0, sizeof *cut);
    uint64_t id = 0;
    char err[512] = "";
    CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    for (int guard = 0; guard < 200 && cut->finish == VT_FINISH_NONE; guard++) {
        CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, NULL, err, sizeof err), VT_OK);
        read_into(b, id, cut);
        /* Never ahead of what is final: always a prefix of the cut text. */
        CU_ASSERT(cut->n_text <= at && memcmp(cut->text, full->text, cut->n_text) == 0);
    }
    CU_ASSERT_EQUAL(cut->finish, VT_FINISH_STOP_STRING);
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.free_kv_blocks, free_idle); /* freed at the finish, before any remove */
    CU_ASSERT_EQUAL(stats.n_running, 0);
    CU_ASSERT_EQUAL(cut->n_tokens, n_want);
    CU_ASSERT_EQUAL(cut->n_text, at);
    CU_ASSERT_EQUAL(memcmp(cut->text, full->text, at), 0);
    read_into(b, id, cut); /* nothing more */
    CU_ASSERT_EQUAL(cut->n_text, at);
    CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
    free(full);
    vt_batch_close(b);
}

/* Preempted requests are recomputed, not re-sampled: their text is what
 * each gives alone, with nothing twice. A pool of 4 blocks of 16 tokens for
 * three requests of ~45 tokens each forces preemptions. */
static void test_preemption_adds_no_text_twice(void) {
    vt_batch *alone = open_batch(story_model, NULL);
    vt_batch *small = open_batch(story_model, "kv_cache.ctx_size=64");
    CU_ASSERT_PTR_NOT_NULL_FATAL(alone);
    CU_ASSERT_PTR_NOT_NULL_FATAL(small);
    static const char *const prompts[3] = {"Once upon a time", "The little dog", "Lily and Tom went"};
    generation *want = calloc(6, sizeof *want), *got = want + 3;
    uint64_t ids[3];
    char err[512] = "";
    for (int i = 0; i < 3; i++) {
        vt_batch_request r = text_request(prompts[i], 40);
        generate(alone, &r, &want[i]);
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(small, &r, &ids[i], err, sizeof err), VT_OK);
    }
    run_to_end(small, ids, 3, got);
    vt_batch_stats stats;
    vt_batch_get_stats(small, &stats);
    printf("\n  %lld preemptions\n", (long long)stats.n_preemptions);
    CU_ASSERT(stats.n_preemptions >= 1);
    CU_ASSERT_EQUAL(stats.free_kv_blocks, stats.total_kv_blocks);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(got[i].n_tokens, want[i].n_tokens);
        CU_ASSERT_STRING_EQUAL(got[i].text, want[i].text);
    }
    free(want);
    vt_batch_close(alone);
    vt_batch_close(small);
}

/* The length of the character a lead byte starts, 0 for any other byte. */
static size_t char_len(unsigned char c) {
    return c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
}

/* qwen3-tiny's random weights sampled hot produce byte-fallback tokens
 * (<0xC3>, ...): characters split over tokens. Every read is valid UTF-8, so
 * a character begun at the end of the tokens' bytes is not in it; once its
 * last byte arrives, the character appears whole in the text read since. */
static void test_characters_split_over_tokens_are_held_back(void) {
    vt_batch *b = open_batch(tiny_model, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    int completed = 0;
    char err[512] = "";
    for (uint64_t seed = 1; seed <= 8 && completed < 3; seed++) {
        vt_batch_request r = text_request("Hello", 64);
        r.temperature = 3.0f;
        r.seed = seed;
        uint64_t id = 0;
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
        generation *g = calloc(1, sizeof *g);
        char bytes[MAX_GEN * 64];
        size_t split_at = 0, text_at_split = 0; /* split_at: 1 + where a held character starts */
        for (int guard = 0; guard < 200 && g->finish == VT_FINISH_NONE; guard++) {
            CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, NULL, err, sizeof err), VT_OK);
            read_into(b, id, g); /* asserts the read is valid UTF-8 */
            const size_t n = token_bytes(b, g->tokens, g->n_tokens, bytes, sizeof bytes);
            if (split_at) {
                const size_t start = split_at - 1, len = char_len((unsigned char)bytes[start]);
                if (n < start + len) continue; /* still incomplete */
                if (is_valid_utf8(bytes + start, len)) {
                    completed++;
                    CU_ASSERT_PTR_NOT_NULL(memmem(g->text + text_at_split, g->n_text - text_at_split, bytes + start, len));
                }
                split_at = 0;
            }
            size_t lead = n;
            while (lead > 0 && n - lead < 3 && ((unsigned char)bytes[lead - 1] & 0xC0) == 0x80) lead--;
            if (g->finish == VT_FINISH_NONE && lead > 0 && char_len((unsigned char)bytes[lead - 1]) > n - lead + 1) {
                split_at = lead; /* a character begun, not finished */
                text_at_split = g->n_text;
            }
        }
        CU_ASSERT(g->finish == VT_FINISH_LENGTH || g->finish == VT_FINISH_STOP);
        /* Where the bytes are valid UTF-8 as a whole, the text is exactly them. */
        const size_t n = token_bytes(b, g->tokens, g->n_tokens, bytes, sizeof bytes);
        if (is_valid_utf8(bytes, n)) CU_ASSERT(n == g->n_text && memcmp(bytes, g->text, n) == 0);
        CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
        free(g);
    }
    printf("\n  %d characters split over tokens came out whole\n", completed);
    CU_ASSERT(completed > 0); /* the case this test is about happened */
    vt_batch_close(b);
}

/* The largest number of times one token occurs. */
static int max_repeats(const generation *g) {
    int best = 0;
    for (int64_t i = 0; i < g->n_tokens; i++) {
        int c = 0;
        for (int64_t k = 0; k < g->n_tokens; k++) c += g->tokens[k] == g->tokens[i];
        if (c > best) best = c;
    }
    return best;
}

static int distinct(const generation *g) {
    int n = 0;
    for (int64_t i = 0; i < g->n_tokens; i++) {
        bool seen = false;
        for (int64_t k = 0; k < i && !seen; k++) seen = g->tokens[k] == g->tokens[i];
        n += !seen;
    }
    return n;
}

static void test_penalties_move_greedy_output_the_expected_way(void) {
    vt_batch *b = open_batch(story_model, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    generation *g = calloc(3, sizeof *g);
    vt_batch_request r = text_request(story_prompt, 64);
    const int32_t no_stop = 0; /* <unk>: the length is what ends them */
    r.stop_ids = &no_stop;
    r.n_stop_ids = 1;
    generate(b, &r, &g[0]);
    r.frequency_penalty = 2.0f;
    generate(b, &r, &g[1]);
    r.frequency_penalty = 0.0f;
    r.presence_penalty = -2.0f;
    generate(b, &r, &g[2]);
    printf("\n  plain:        %d distinct, max repeats %d: \"%s\"\n", distinct(&g[0]), max_repeats(&g[0]), g[0].text);
    printf("  frequency 2:  %d distinct, max repeats %d: \"%s\"\n", distinct(&g[1]), max_repeats(&g[1]), g[1].text);
    printf("  presence -2:  %d distinct, max repeats %d: \"%s\"\n", distinct(&g[2]), max_repeats(&g[2]), g[2].text);
    CU_ASSERT(distinct(&g[1]) > distinct(&g[0]));
    CU_ASSERT(max_repeats(&g[1]) < max_repeats(&g[0]));
    CU_ASSERT(distinct(&g[2]) < distinct(&g[0]));
    free(g);
    vt_batch_close(b);
}

/* A caller compiled before parse_special existed passes the old, shorter
 * struct_size; whatever lies past it in memory is not read. */
static void test_a_request_of_the_first_release_still_works(void) {
    vt_batch *b = open_batch(story_model, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    generation *g = calloc(2, sizeof *g);
    vt_batch_request r = text_request(story_prompt, 12);
    generate(b, &r, &g[0]);
    union {
        vt_batch_request r;
        unsigned char bytes[sizeof(vt_batch_request)];
    } old;
    memset(old.bytes, 0xA5, sizeof old.bytes); /* garbage where the new fields are */
    memcpy(old.bytes, &r, offsetof(vt_batch_request, parse_special));
    old.r.struct_size = offsetof(vt_batch_request, parse_special);
    generate(b, &old.r, &g[1]);
    CU_ASSERT_EQUAL(g[1].n_tokens, g[0].n_tokens);
    CU_ASSERT_EQUAL(memcmp(g[1].tokens, g[0].tokens, sizeof g[0].tokens), 0);
    CU_ASSERT_STRING_EQUAL(g[1].text, g[0].text);
    free(g);
    vt_batch_close(b);
}

static void expect_refused(vt_batch *b, const vt_batch_request *r, const char *needle) {
    uint64_t id = 99;
    char err[512] = "";
    CU_ASSERT_EQUAL(vt_batch_add(b, r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(id, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, needle));
    if (!strstr(err, needle)) printf("\n  message \"%s\"\n  lacks   \"%s\"\n", err, needle);
}

static void test_out_of_range_fields_are_refused_by_name(void) {
    vt_batch *b = open_batch(story_model, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    vt_batch_request r = text_request(story_prompt, 4);
    r.presence_penalty = 2.5f;
    expect_refused(b, &r, "request.presence_penalty: 2.5");
    r = text_request(story_prompt, 4);
    r.frequency_penalty = -2.01f;
    expect_refused(b, &r, "request.frequency_penalty");
    r.frequency_penalty = NAN;
    expect_refused(b, &r, "request.frequency_penalty: nan");
    r = text_request(story_prompt, 4);
    const char *const seventeen[17] = {"a", "b", "c", "d", "e", "f", "g", "h", "i",
                                       "j", "k", "l", "m", "n", "o", "p", "q"};
    r.stop_strings = seventeen;
    r.n_stop_strings = 17;
    expect_refused(b, &r, "request.n_stop_strings: 17");
    r.n_stop_strings = 16; /* the most accepted */
    uint64_t id = 0;
    char err[512] = "";
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
    char long_stop[258];
    memset(long_stop, 'x', 257);
    long_stop[257] = 0;
    const char *const bad[3] = {"ok", "", long_stop};
    r.stop_strings = bad;
    r.n_stop_strings = 2;
    expect_refused(b, &r, "request.stop_strings[1]: empty");
    r.stop_strings = bad + 2;
    r.n_stop_strings = 1;
    expect_refused(b, &r, "request.stop_strings[0]: longer");
    long_stop[256] = 0; /* 256 bytes: accepted */
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
    r.stop_strings = NULL;
    expect_refused(b, &r, "request.stop_strings: NULL");
    r = text_request(story_prompt, 4);
    r.struct_size = offsetof(vt_batch_request, parse_special) - 8;
    expect_refused(b, &r, "request.struct_size");
    r.struct_size = sizeof r + 8;
    expect_refused(b, &r, "request.struct_size");
    vt_batch_stats stats;
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.n_waiting, 0);
    vt_batch_close(b);
}

/* Tokenize with and without special tokens, parse_special on a text prompt,
 * metadata strings, the context and the pool. */
static void test_model_queries(void) {
    vt_batch *b = open_batch(tiny_model, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    int32_t *ids = NULL;
    size_t n = 0;
    char err[512] = "";
    const char text[] = "hi</s>";
    CU_ASSERT_EQUAL_FATAL(vt_batch_tokenize(b, text, strlen(text), false, true, &ids, &n, err, sizeof err), VT_OK);
    CU_ASSERT_FATAL(n >= 2);
    CU_ASSERT_EQUAL(ids[n - 1], 2); /* "</s>" is EOS, id 2, in this vocabulary */
    const size_t n_special = n;
    free(ids);
    CU_ASSERT_EQUAL_FATAL(vt_batch_tokenize(b, text, strlen(text), true, false, &ids, &n, err, sizeof err), VT_OK);
    CU_ASSERT(n > n_special + 1); /* BOS, and "</s>" spelled out */
    CU_ASSERT_EQUAL(ids[0], 1);
    for (size_t i = 1; i < n; i++) CU_ASSERT_NOT_EQUAL(ids[i], 2);
    free(ids);

    /* A text prompt with parse_special: its "</s>" is one token; the
     * request runs the same as the ids tokenize gives. */
    int32_t prompt[8];
    CU_ASSERT_EQUAL_FATAL(vt_batch_tokenize(b, text, strlen(text), true, true, &ids, &n, err, sizeof err), VT_OK);
    CU_ASSERT_FATAL(n <= 8);
    memcpy(prompt, ids, n * sizeof *ids);
    free(ids);
    generation *g = calloc(2, sizeof *g);
    vt_batch_request r = text_request(text, 6);
    r.parse_special = true;
    generate(b, &r, &g[0]);
    r.text = NULL;
    r.ids = prompt;
    r.n_ids = n;
    generate(b, &r, &g[1]);
    CU_ASSERT_EQUAL(g[0].n_tokens, g[1].n_tokens);
    CU_ASSERT_EQUAL(memcmp(g[0].tokens, g[1].tokens, sizeof g[0].tokens), 0);
    free(g);

    CU_ASSERT_STRING_EQUAL(vt_batch_meta_string(b, "general.architecture"), "qwen3");
    CU_ASSERT_PTR_NULL(vt_batch_meta_string(b, "tokenizer.chat_template")); /* this file has none */
    CU_ASSERT_PTR_NULL(vt_batch_meta_string(b, "qwen3.context_length"));   /* not a string */
    CU_ASSERT_PTR_NULL(vt_batch_meta_string(b, NULL));
    CU_ASSERT_EQUAL(vt_batch_n_ctx(b), 512);
    /* the KV pool is the context's tokens at the cache dtype's bytes each:
     * twice the context, or f32 for f16, twice the bytes */
    const size_t kv_bytes = vt_batch_kv_cache_bytes(b);
    CU_ASSERT(kv_bytes > 0 && kv_bytes % 512 == 0);
    vt_batch *wide = open_batch(tiny_model, "kv_cache.ctx_size=1024");
    vt_batch *f32 = open_batch(tiny_model, "kv_cache.dtype=f32");
    CU_ASSERT_PTR_NOT_NULL_FATAL(wide);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f32);
    CU_ASSERT_EQUAL(vt_batch_kv_cache_bytes(wide), 2 * kv_bytes);
    CU_ASSERT_EQUAL(vt_batch_n_ctx(f32), 512);
    CU_ASSERT_EQUAL(vt_batch_kv_cache_bytes(f32), 2 * kv_bytes);
    vt_batch_close(wide);
    vt_batch_close(f32);
    vt_batch_stats stats;
    vt_batch_get_stats(b, &stats);
    CU_ASSERT_EQUAL(stats.total_kv_blocks, 512 / 16); /* ctx_size over the default block_size */
    CU_ASSERT_EQUAL(stats.free_kv_blocks, stats.total_kv_blocks);
    vt_batch_close(b);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"a stop string ends the generation before it", test_a_stop_string_ends_the_generation_before_it},
        {"preemption adds no text twice", test_preemption_adds_no_text_twice},
        {"characters split over tokens are held back", test_characters_split_over_tokens_are_held_back},
        {"penalties move greedy output the expected way", test_penalties_move_greedy_output_the_expected_way},
        {"a request of the first release still works", test_a_request_of_the_first_release_still_works},
        {"out-of-range fields are refused by name", test_out_of_range_fields_are_refused_by_name},
        {"model queries", test_model_queries},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("batch text", suite_init, NULL, tests);
    return vt_test_run();
}
