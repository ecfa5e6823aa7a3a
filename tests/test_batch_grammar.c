/* test_batch_grammar.c — vt_batch_request.grammar through the public API
 * (include/vt/vt.h) on a random tiny model, whose unconstrained output is
 * garbage: what it generates under a grammar matches the grammar (checked
 * here by hand-written matchers, not by the engine), the stop ids come only
 * where the grammar may end, a complete grammar stops the request, a request
 * cut by max_new_tokens inside the grammar ends as length, a request's
 * tokens are the same alone as beside other requests, and bad grammars are
 * refused with their line and column. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "vt/vt.h"

static char model_path[1024];
static const char *const settings[] = {"runtime.backend=reference", "runtime.threads=2", "runtime.max_seqs=4",
                                       "kv_cache.ctx_size=512", NULL};

static int suite_init(void) {
    const char *dir = vt_test_data_dir("batch grammar model");
    if (!dir) return 1;
    snprintf(model_path, sizeof model_path, "%s/models/qwen3-tiny-q8_0.gguf", dir);
    return 0;
}

static vt_batch *open_batch(void) {
    const vt_session_options o = {sizeof o, NULL, settings, false};
    vt_batch *b = NULL;
    char err[512] = "";
    if (vt_batch_open(model_path, &o, &b, err, sizeof err) != VT_OK) printf("\n  vt_batch_open: %s\n", err);
    return b;
}

typedef struct result {
    char text[4096];
    size_t n_text;
    int32_t tokens[512];
    int64_t n_tokens;
    vt_finish finish;
} result;

/* Run the requests to their end, collecting each one's text and tokens. */
static void run_all(vt_batch *b, const vt_batch_request *reqs, int n, result *out) {
    uint64_t ids[16];
    char err[512] = "";
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        CU_ASSERT_EQUAL_FATAL(vt_batch_add(b, &reqs[i], &ids[i], err, sizeof err), VT_OK);
    }
    for (int guard = 0; guard < 10000; guard++) {
        int32_t n_seqs = 0;
        CU_ASSERT_EQUAL_FATAL(vt_batch_step(b, &n_seqs, err, sizeof err), VT_OK);
        bool all_done = true;
        for (int i = 0; i < n; i++) {
            vt_batch_output o;
            CU_ASSERT_EQUAL_FATAL(vt_batch_read(b, ids[i], &o, err, sizeof err), VT_OK);
            CU_ASSERT_FATAL(out[i].n_text + o.n_text < sizeof out[i].text);
            memcpy(out[i].text + out[i].n_text, o.text, o.n_text);
            out[i].n_text += o.n_text;
            for (size_t k = 0; k < o.n_tokens && out[i].n_tokens < 512; k++) out[i].tokens[out[i].n_tokens++] = o.tokens[k];
            out[i].finish = o.finish;
            all_done &= o.finish != VT_FINISH_NONE;
        }
        if (all_done) break;
    }
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(vt_batch_remove(b, ids[i], err, sizeof err), VT_OK);
}

static vt_batch_request request(const char *grammar, float temperature, uint64_t seed, int64_t max_new) {
    vt_batch_request r;
    vt_batch_request_init(&r);
    r.text = "Answer in the format asked:";
    r.grammar = grammar;
    r.temperature = temperature;
    r.seed = seed;
    r.max_new_tokens = max_new;
    return r;
}

/* "ddd-dd" */
static bool is_code(const char *s) {
    if (strlen(s) != 6) return false;
    for (int i = 0; i < 6; i++)
        if (i == 3 ? s[i] != '-' : !isdigit((unsigned char)s[i])) return false;
    return true;
}

/* [a-z]{1,8} ("," [a-z]{1,8}){0,3} "." */
static bool is_word_list(const char *s) {
    int words = 0;
    for (;;) {
        int n = 0;
        while (*s >= 'a' && *s <= 'z') s++, n++;
        if (n < 1 || n > 8) return false;
        words++;
        if (*s == '.') return s[1] == 0 && words <= 4;
        if (*s != ',') return false;
        s++;
    }
}

static const char CODE_GRAMMAR[] = "root ::= [0-9]{3} \"-\" [0-9]{2}\n";
static const char LIST_GRAMMAR[] = "root ::= word (\",\" word){0,3} \".\"\nword ::= [a-z]{1,8}\n";
static const char CHOICE_GRAMMAR[] = "root ::= \"yes\" | \"no\" | \"maybe\"\n";

static void test_outputs_follow_the_grammar(void) {
    vt_batch *b = open_batch();
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    int codes = 0, lists = 0, choices = 0;
    for (uint64_t seed = 1; seed <= 12; seed++) {
        vt_batch_request reqs[3] = {request(CODE_GRAMMAR, 1.0f, seed, 64), request(LIST_GRAMMAR, 1.5f, seed, 200),
                                    request(CHOICE_GRAMMAR, 0.8f, seed, 64)};
        reqs[1].top_k = 40;
        reqs[2].min_p = 0.05f;
        result out[3];
        run_all(b, reqs, 3, out);
        CU_ASSERT_EQUAL(out[0].finish, VT_FINISH_STOP);
        CU_ASSERT_TRUE(is_code(out[0].text));
        codes += is_code(out[0].text);
        /* the list may end early (a stop id after "."), never be cut */
        CU_ASSERT_EQUAL(out[1].finish, VT_FINISH_STOP);
        if (!is_word_list(out[1].text)) printf("\n  not a word list: '%s'", out[1].text);
        lists += is_word_list(out[1].text);
        CU_ASSERT_EQUAL(out[2].finish, VT_FINISH_STOP);
        const bool choice = !strcmp(out[2].text, "yes") || !strcmp(out[2].text, "no") || !strcmp(out[2].text, "maybe");
        if (!choice) printf("\n  not a choice: '%s'", out[2].text);
        choices += choice;
    }
    CU_ASSERT_EQUAL(codes, 12);
    CU_ASSERT_EQUAL(lists, 12);
    CU_ASSERT_EQUAL(choices, 12);
    vt_batch_close(b);
}

/* "maybe" may stop after "yes"? No: "yes" admits nothing more, so the request
 * stops there without a stop id; "a" "b"? may end after "a" with a stop id. */
static void test_stop_ids_only_where_the_grammar_may_end(void) {
    vt_batch *b = open_batch();
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    int32_t stop[8];
    const size_t n_stop = vt_batch_default_stop_ids(b, stop, 8);
    CU_ASSERT_TRUE_FATAL(n_stop > 0);
    for (uint64_t seed = 1; seed <= 8; seed++) {
        vt_batch_request r = request("root ::= \"a\"{1,40}\n", 1.0f, seed, 100);
        result out;
        run_all(b, &r, 1, &out);
        CU_ASSERT_TRUE(out.n_text >= 1 && out.n_text <= 40);
        for (size_t i = 0; i < out.n_text; i++) CU_ASSERT_EQUAL(out.text[i], 'a');
        /* ends by a stop id (generated only after at least one "a") or by the 40th "a" */
        const bool by_stop_id = out.n_tokens > 0 && out.tokens[out.n_tokens - 1] == stop[0];
        CU_ASSERT_EQUAL(out.finish, VT_FINISH_STOP);
        CU_ASSERT_TRUE(by_stop_id || out.n_text == 40);
        for (int64_t i = 0; i + 1 < out.n_tokens; i++)
            for (size_t k = 0; k < n_stop; k++) CU_ASSERT_NOT_EQUAL(out.tokens[i], stop[k]);
    }
    vt_batch_close(b);
}

static void test_length_inside_the_grammar(void) {
    vt_batch *b = open_batch();
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    vt_batch_request r = request("root ::= \"x\"{100}\n", 0.0f, 0, 5);
    result out;
    run_all(b, &r, 1, &out);
    CU_ASSERT_EQUAL(out.finish, VT_FINISH_LENGTH);
    CU_ASSERT_EQUAL(out.n_tokens, 5);
    CU_ASSERT_TRUE(out.n_text >= 5);
    for (size_t i = 0; i < out.n_text; i++) CU_ASSERT_EQUAL(out.text[i], 'x');
    /* a character no token holds whole is spelt with byte tokens */
    r = request("root ::= \"\\U0010FFFD\"\n", 0.0f, 0, 5);
    run_all(b, &r, 1, &out);
    CU_ASSERT_EQUAL(out.finish, VT_FINISH_STOP);
    CU_ASSERT_STRING_EQUAL(out.text, "\xF4\x8F\xBF\xBD");
    vt_batch_close(b);
}

/* A request's tokens alone equal its tokens beside three others (with and
 * without grammars, started at other steps). */
static void test_batch_invariance(void) {
    vt_batch *b = open_batch();
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    vt_batch_request target = request(LIST_GRAMMAR, 1.2f, 77, 120);
    target.top_p = 0.9f;
    target.presence_penalty = 0.5f;
    result alone;
    run_all(b, &target, 1, &alone);
    vt_batch_request mix[4] = {request(CODE_GRAMMAR, 1.0f, 3, 40), target, request(NULL, 1.0f, 5, 30),
                               request(CHOICE_GRAMMAR, 0.0f, 0, 10)};
    result beside[4];
    run_all(b, mix, 4, beside);
    CU_ASSERT_EQUAL(alone.n_tokens, beside[1].n_tokens);
    CU_ASSERT_EQUAL(memcmp(alone.tokens, beside[1].tokens, (size_t)alone.n_tokens * sizeof *alone.tokens), 0);
    CU_ASSERT_STRING_EQUAL(alone.text, beside[1].text);
    vt_batch_close(b);
}

static void test_bad_grammars_are_refused(void) {
    char err[512] = "";
    CU_ASSERT_EQUAL(vt_grammar_check("root ::= [0-9]+\n", err, sizeof err), VT_OK);
    CU_ASSERT_EQUAL(vt_grammar_check("root ::= digit+\n", err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "grammar: line 1, column 10: rule 'digit' is used but not defined"));
    vt_batch *b = open_batch();
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    /* the union of two grammars through the public API, and its refusals */
    char *either = vt_grammar_either("root ::= [0-9]+\n", "num-", "root ::= \"x\" item\nitem ::= [a-z]\n", "word-", err,
                                     sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(either);
    CU_ASSERT_EQUAL(vt_grammar_check(either, err, sizeof err), VT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(either, "word-item ::= [a-z]"));
    free(either);
    CU_ASSERT_PTR_NULL(vt_grammar_either("root ::= digit+\n", "a-", "root ::= \"x\"\n", "b-", err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "grammar: line 1, column 10: rule 'digit' is used but not defined"));
    CU_ASSERT_PTR_NULL(vt_grammar_either("root ::= \"x\"\n", "a", "root ::= \"y\"\n", "ab", err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "prefixes"));
    vt_batch_request r = request("root ::= \"a\"\nroot ::= x x\n", 0.0f, 0, 5);
    uint64_t id = 0;
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "request.grammar: line 2, column 1: rule 'root' is defined twice"));
    r = request("expr ::= expr \"+\" \"1\" | \"1\"\nroot ::= expr\n", 0.0f, 0, 5);
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "left recursion"));
    vt_batch_stats st;
    vt_batch_get_stats(b, &st);
    CU_ASSERT_EQUAL(st.n_waiting, 0);
    /* a caller built before the field existed gets no grammar */
    r = request("this is not read", 0.0f, 0, 3);
    r.struct_size = (uint32_t)offsetof(vt_batch_request, grammar);
    CU_ASSERT_EQUAL(vt_batch_add(b, &r, &id, err, sizeof err), VT_OK);
    vt_batch_close(b);
}

/* vt run --grammar-file: the CLI's text follows the grammar and stops with it. */
static void test_vt_run_grammar_file(void) {
    char path[1024];
    vt_test_tmpfile(path, sizeof path, "code.gbnf");
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("# a code\nroot ::= [A-Z]{2} \"-\" [0-9]{3}\n", f);
    fclose(f);
    for (int seed = 1; seed <= 3; seed++) {
        char *out = NULL, *err = NULL;
        int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --backend reference -p 'Code:' -n 40 --temp 1 --seed %d --grammar-file '%s'",
                                        model_path, seed, path);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_TRUE(out && strlen(out) == 7 && out[6] == '\n'); /* the text, then run's newline */
        if (out && strlen(out) == 7)
            CU_ASSERT_TRUE(isupper((unsigned char)out[0]) && isupper((unsigned char)out[1]) && out[2] == '-' &&
                           isdigit((unsigned char)out[3]) && isdigit((unsigned char)out[5]));
        free(out);
        free(err);
    }
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("root ::= code\n", f);
    fclose(f);
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' -p x --grammar-file '%s'", model_path, path);
    CU_ASSERT_EQUAL(rc, 2); /* VT_ERR_INVALID: refused before the model runs */
    CU_ASSERT_TRUE(err && strstr(err, "--grammar-file") && strstr(err, "line 1, column 10: rule 'code' is used but not defined"));
    if (err && !strstr(err, "line 1, column 10")) printf("\n  %s", err);
    free(out);
    free(err);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"outputs follow the grammar", test_outputs_follow_the_grammar},
        {"stop ids only where the grammar may end", test_stop_ids_only_where_the_grammar_may_end},
        {"length inside the grammar", test_length_inside_the_grammar},
        {"a request's tokens do not depend on its neighbours", test_batch_invariance},
        {"bad grammars are refused", test_bad_grammars_are_refused},
        {"vt run --grammar-file", test_vt_run_grammar_file},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("vt_batch with a grammar", suite_init, NULL, tests);
    return vt_test_run();
}
