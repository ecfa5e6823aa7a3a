/* fuzz_grammar.c — libFuzzer target for the grammar engine (core/grammar/):
 * GBNF text from anyone (vt serve's grammar field), then bytes fed to its
 * state.
 *
 * Input layout: the GBNF text up to the first NUL byte; after it, bytes fed
 * to the state one at a time (none when there is no NUL).
 *
 * What must hold for every input, besides "no crash, no leak, no UB, no
 * hang" (the parse and every step are bounded by grammar.h's limits):
 *  - a refusal says where: "grammar: line L, column C: ..." (or a size
 *    limit before any line);
 *  - for an accepted grammar, at the start and after every fed byte, the
 *    mask over a small vocabulary of awkward byte strings equals brute
 *    force (feeding each token's bytes to a copy of the state);
 *  - a dead state stays dead, and done implies can_end;
 *  - vt_grammar_union_text of the grammar and a one-byte grammar parses
 *    (within the size limit), and its state lives only while the grammar's
 *    does or the bytes fed are that one byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail_check(const char *what) {
    fprintf(stderr, "fuzz_grammar: invariant broken: %s\n", what);
    abort();
}

#define CHECK(cond)                     \
    do {                                \
        if (!(cond)) fail_check(#cond); \
    } while (0)

/* Every byte alone, then strings splitting characters in every way. */
static const char *const EXTRA[] = {"ab", "abc", "\"", "\\\"", "{\"", "\xC3\xA9", "\xC3", "\xA9x", "\xE2\x82\xAC",
                                    "\xE2\x82", "\x82\xAC", "\xF0\x9F\x99\x82", "\xF0\x9F", "\x99\x82\x61", "  ", "\n ",
                                    "12", "-0.", "true", "null", "\xED\xA0\x80", "\xC0\x80", ""};
#define N_EXTRA (sizeof EXTRA / sizeof *EXTRA)
#define N_VOCAB (256 + (int32_t)N_EXTRA)

static int32_t vocab_bytes(void *user, int32_t id, char *buf, size_t cap) {
    (void)user;
    if (id < 256) {
        if (cap >= 1) buf[0] = (char)id;
        return 1;
    }
    const char *s = EXTRA[id - 256];
    size_t n = strlen(s);
    if (n <= cap) memcpy(buf, s, n);
    return (int32_t)n;
}

static vt_token_trie *trie(void) {
    static vt_token_trie *t;
    if (!t && vt_token_trie_build(N_VOCAB, vocab_bytes, NULL, &t, NULL) != VT_OK) abort();
    return t;
}

static void check_mask(vt_grammar_state *s) {
    uint8_t allowed[N_VOCAB];
    int32_t n = vt_grammar_mask(s, trie(), allowed);
    int32_t counted = 0;
    char buf[16];
    for (int32_t id = 0; id < N_VOCAB; id++) {
        int32_t len = vocab_bytes(NULL, id, buf, sizeof buf);
        bool want = false;
        if (len > 0) {
            vt_grammar_state *c = vt_grammar_state_clone(s);
            if (!c) return; /* out of memory under the fuzzer's limit: nothing to compare */
            want = vt_grammar_state_feed(c, buf, (size_t)len);
            vt_grammar_state_free(c);
        }
        CHECK(want == (allowed[id] != 0));
        counted += allowed[id];
    }
    CHECK(counted == n);
}

/* The union's state, or NULL when the union cannot be made within the
 * limits (its text past VT_GRAMMAR_MAX_TEXT, out of memory). */
static vt_grammar_state *union_state(const uint8_t *text, size_t len, vt_grammar **u) {
    *u = NULL;
    char *own = malloc(len + 1);
    if (!own) return NULL;
    memcpy(own, text, len);
    own[len] = 0;
    vt_error e = {0};
    char *both = vt_grammar_union_text(own, "fuzz-", "root ::= [\\x01]\n", "one-", &e);
    free(own);
    /* the grammar itself parsed: the union fails only for memory or a
     * limit it passes (a rule and a few elements more, a chain one longer) */
    CHECK(both || e.code == VT_ERR_NOMEM ||
          (e.code == VT_ERR_INVALID && (strstr(e.msg, "bytes") || strstr(e.msg, "more than"))));
    vt_grammar_state *s = NULL;
    if (both) {
        CHECK(vt_grammar_parse(both, strlen(both), u, &e) == VT_OK || e.code == VT_ERR_NOMEM);
        if (*u) vt_grammar_state_create(*u, &s, NULL);
    }
    free(both);
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    const size_t text_len = nul ? (size_t)(nul - data) : size;
    vt_grammar *g = NULL;
    vt_error e = {0};
    if (vt_grammar_parse((const char *)data, text_len, &g, &e) != VT_OK) {
        CHECK(e.code == VT_ERR_INVALID || e.code == VT_ERR_NOMEM);
        CHECK(strncmp(e.msg, "grammar: ", 9) == 0);
        CHECK(e.code != VT_ERR_INVALID || strstr(e.msg, "line ") || strstr(e.msg, "bytes"));
        return 0;
    }
    vt_grammar_state *s = NULL;
    vt_grammar *u = NULL;
    vt_grammar_state *us = union_state(data, text_len, &u);
    if (vt_grammar_state_create(g, &s, NULL) == VT_OK) {
        check_mask(s);
        const uint8_t *feed = nul ? nul + 1 : data + size;
        bool one_byte = true; /* the bytes fed so far are the one-byte grammar's prefix */
        for (size_t i = 0; feed + i < data + size && i < 64; i++) {
            bool was_dead = vt_grammar_state_dead(s);
            bool alive = vt_grammar_state_feed(s, feed + i, 1);
            CHECK(!(was_dead && alive));
            CHECK(!vt_grammar_state_done(s) || vt_grammar_state_can_end(s));
            one_byte = one_byte && i == 0 && feed[i] == 1;
            /* never more than either: the union's stacks sit one rule deeper
             * and one more at the start, so near grammar.h's bounds it may
             * drop one the grammar alone keeps (test_grammar checks that it
             * takes both) */
            if (us) CHECK(!vt_grammar_state_feed(us, feed + i, 1) || alive || one_byte);
            if (i < 8 || !alive) check_mask(s);
            if (!alive) break;
        }
        vt_grammar_state_free(s);
    }
    vt_grammar_state_free(us);
    vt_grammar_free(u);
    vt_grammar_free(g);
    return 0;
}
