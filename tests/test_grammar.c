/* test_grammar.c — the grammar engine (core/grammar/) on its own: GBNF
 * parsing and its errors, what a state accepts, and the token mask, which
 * must equal brute force over the whole vocabulary (for every token: does
 * feeding its bytes to a copy of the state keep it alive?) for several
 * grammars and states, on a synthetic vocabulary of awkward byte strings and
 * on the tokenizers of the test models and of real Qwen2 and Llama. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "grammar.h"
#include "tokenizer.h"
#include "util.h"

static vt_grammar *parse_ok(const char *text) {
    vt_grammar *g = NULL;
    vt_error e = {0};
    if (vt_grammar_parse(text, strlen(text), &g, &e) != VT_OK) printf("\n  unexpected: %s\n", e.msg);
    return g;
}

/* The error a grammar is refused with ("" when it is accepted). */
static const char *parse_error(const char *text) {
    static vt_error e;
    memset(&e, 0, sizeof e);
    vt_grammar *g = NULL;
    if (vt_grammar_parse(text, strlen(text), &g, &e) == VT_OK) {
        vt_grammar_free(g);
        return "";
    }
    return e.msg;
}

#define ASSERT_REFUSED(text, needle)                                                                                   \
    do {                                                                                                               \
        const char *msg_ = parse_error(text);                                                                          \
        if (!strstr(msg_, needle)) printf("\n  %s: got '%s', wanted '%s'\n", #text, msg_, needle);                   \
        CU_ASSERT_PTR_NOT_NULL(strstr(msg_, needle));                                                                  \
    } while (0)

/* Does text (a whole sentence) match, and is every prefix of it alive? */
static bool matches(const vt_grammar *g, const char *text) {
    vt_grammar_state *s = NULL;
    vt_error e = {0};
    if (vt_grammar_state_create(g, &s, &e) != VT_OK) return false;
    bool alive = true;
    for (size_t i = 0; text[i] && alive; i++) alive = vt_grammar_state_feed(s, text + i, 1);
    bool whole = alive && vt_grammar_state_can_end(s);
    vt_grammar_state_free(s);
    return whole;
}

static bool is_prefix(const vt_grammar *g, const char *text) {
    vt_grammar_state *s = NULL;
    vt_error e = {0};
    if (vt_grammar_state_create(g, &s, &e) != VT_OK) return false;
    bool alive = vt_grammar_state_feed(s, text, strlen(text));
    vt_grammar_state_free(s);
    return alive;
}

static const char JSON_GBNF[] =
    "# any JSON value, whitespace bounded\n"
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
    "array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
    "number ::= \"-\"? ([0-9] | [1-9] [0-9]{1,15}) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws\n"
    "ws     ::= | \" \" | \"\\n\" [ \\t]{0,8}\n";

static void test_parse_accepts_the_syntax(void) {
    vt_grammar *g = parse_ok(JSON_GBNF);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(matches(g, "{}"));
    CU_ASSERT_TRUE(matches(g, "{\"a\": [1, 2.5e3, true, null, \"x\\u00e9\\n\"], \"b\": {}}"));
    CU_ASSERT_TRUE(matches(g, "{\n  \"k\": -0.5\n}"));
    CU_ASSERT_FALSE(matches(g, "{\"a\": 01}"));
    CU_ASSERT_FALSE(matches(g, "{\"a\": }"));
    CU_ASSERT_FALSE(matches(g, "[1]"));
    CU_ASSERT_TRUE(is_prefix(g, "{\"a\": [1, 2"));
    CU_ASSERT_FALSE(is_prefix(g, "{\"a\": [1, 2]]"));
    vt_grammar_free(g);

    /* escapes, classes, any, repetition counts, comments, nested groups over lines */
    g = parse_ok("root ::= \"\\x41\\u00e9\\U0001F642\" [^a-z] . x{2} x{1,} x{0,2} # trailing comment\n"
                 "x ::= ( \"a\"\n  | \"b\" )  # alternatives over lines inside parentheses\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x99\x82" "Z!" "ab" "a"));
    CU_ASSERT_TRUE(matches(g, "A\xC3\xA9\xF0\x9F\x99\x82" "Z\xE2\x82\xAC" "ab" "abba"));
    CU_ASSERT_FALSE(matches(g, "A\xC3\xA9\xF0\x9F\x99\x82" "z!" "ab" "a"));
    CU_ASSERT_FALSE(matches(g, "A\xC3\xA9\xF0\x9F\x99\x82" "Z!" "a"));       /* x{2} then x{1,}: 3 at least */
    CU_ASSERT_FALSE(matches(g, "A\xC3\xA9\xF0\x9F\x99\x82" "Z!" "abababab" "c"));
    vt_grammar_free(g);

    /* rules named as the parser's own group rules might be (parent, a dash,
     * a number) are the grammar's own: defined once, referred to as written */
    g = parse_ok("root ::= (\"a\" | \"b\") root-1 root-2 root-3\nroot-1 ::= \"x\"\nroot-2 ::= (\"y\")*\n"
                 "root-3 ::= \"z\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(matches(g, "axyyz"));
    CU_ASSERT_TRUE(matches(g, "bxz"));
    CU_ASSERT_FALSE(matches(g, "ax"));
    vt_grammar_free(g);

    /* "abc"* repeats the whole literal; [a-c]{0,2} bounds */
    g = parse_ok("root ::= \"ab\"* [a-c]{0,2}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(matches(g, ""));
    CU_ASSERT_TRUE(matches(g, "ababcc"));
    CU_ASSERT_FALSE(matches(g, "abaccc"));
    vt_grammar_free(g);
}

static void test_parse_errors_name_line_and_column(void) {
    ASSERT_REFUSED("root ::= foo\n", "line 1, column 10: rule 'foo' is used but not defined");
    ASSERT_REFUSED("a ::= \"x\"\n", "no rule named 'root'");
    ASSERT_REFUSED("root ::= \"abc\n", "line 1, column 10: unterminated string literal");
    ASSERT_REFUSED("root ::= [a-", "unterminated character class");
    ASSERT_REFUSED("root ::= []\n", "empty character class");
    ASSERT_REFUSED("root ::= [z-a]\n", "range with its end");
    ASSERT_REFUSED("root ::= \"\\q\"\n", "unknown escape '\\q'");
    ASSERT_REFUSED("root ::= \"\\x4\"\n", "\\x needs 2 hexadecimal digits");
    ASSERT_REFUSED("root ::= \"\\uD800\"\n", "not a Unicode scalar value");
    ASSERT_REFUSED("root ::= * \"a\"\n", "line 1, column 10: '*' with nothing before it to repeat");
    ASSERT_REFUSED("root ::= \"a\"{3,2}\n", "the maximum is below the minimum");
    ASSERT_REFUSED("root ::= \"a\"{5000}\n", "repetition count above 1000");
    ASSERT_REFUSED("root ::= (\"a\"\n", "'(' without its ')'");
    ASSERT_REFUSED("root ::= \"a\")\n", "')' without its '('");
    ASSERT_REFUSED("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule 'root' is defined twice");
    ASSERT_REFUSED("root\n", "expected '::='");
    ASSERT_REFUSED("root ::= \"a\" @\n", "unexpected character '@'");
    ASSERT_REFUSED("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n",
                   "left recursion (expr -> expr)");
    /* no string matches: an empty set on every way through root */
    ASSERT_REFUSED("root ::= [^\\x00-\\U0010FFFF]\n", "no string matches the grammar");
    ASSERT_REFUSED("root ::= \"ab\" dead\ndead ::= \"c\" [^\\x00-\\x40\\x41-\\U0010FFFF]\n",
                   "no string matches the grammar");
    ASSERT_REFUSED("root ::= loop\nloop ::= \"a\" loop\n", "no string matches the grammar"); /* never ends */
    /* through a nullable prefix and another rule */
    ASSERT_REFUSED("root ::= a\na ::= b? c \"x\"\nb ::= \"y\"\nc ::= a | \"z\"\n", "left recursion (a -> c -> a)");
    char deep[400] = "root ::= ";
    for (int i = 0; i < 70; i++) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 70; i++) strcat(deep, ")");
    ASSERT_REFUSED(deep, "parentheses nested deeper than 64");
    /* repetitions expand into copies and rules: bounded, refused before memory runs out */
    static char big[4096];
    strcpy(big, "root ::=");
    for (int i = 0; i < 35; i++) strcat(big, " \"abcdefgh\"{1000}");
    ASSERT_REFUSED(big, "expands to more than 262144 elements");
    strcpy(big, "root ::=");
    for (int i = 0; i < 17; i++) strcat(big, " \"a\"{0,1000}");
    ASSERT_REFUSED(big, "more than 16384 rules");
    /* a chain of rules each starting with the next: bounded (its check and the expansion recurse along it) */
    size_t cap = 3000 * 24;
    char *chain = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(chain);
    size_t used = (size_t)snprintf(chain, cap, "root ::= r0\n");
    for (int i = 0; i < 3000; i++) used += (size_t)snprintf(chain + used, cap - used, "r%d ::= r%d \"x\"\n", i, i + 1);
    snprintf(chain + used, cap - used, "r3000 ::= \"y\"\n");
    ASSERT_REFUSED(chain, "more than 2048 rules in a chain");
    free(chain);
    /* a group repeated is one reference per copy, so nesting does not multiply */
    CU_ASSERT_STRING_EQUAL(parse_error("root ::= (((\"abcdefgh\"{1000}){1000}){1000})\n"), "");
    ASSERT_REFUSED("root ::= \"\xC3(\"\n", "not valid UTF-8");
    /* right recursion is fine */
    CU_ASSERT_STRING_EQUAL(parse_error("root ::= \"(\" root \")\" | \"x\"\n"), "");
}

/* A rule nesting as deep as the text goes: the state's stacks are bounded
 * (VT_GRAMMAR_MAX_DEPTH), past which the text cannot continue. */
static void test_nesting_is_bounded(void) {
    vt_grammar *g = parse_ok("root ::= \"(\" root \")\" | \"x\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    vt_grammar_state *s = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_grammar_state_create(g, &s, NULL), VT_OK);
    int fed = 0;
    while (fed < 5000 && vt_grammar_state_feed(s, "(", 1)) fed++;
    CU_ASSERT_TRUE(fed > 500 && fed < VT_GRAMMAR_MAX_DEPTH + 2);
    vt_grammar_state_free(s);
    CU_ASSERT_EQUAL_FATAL(vt_grammar_state_create(g, &s, NULL), VT_OK);
    for (int i = 0; i < 100; i++) CU_ASSERT_TRUE(vt_grammar_state_feed(s, "(", 1));
    CU_ASSERT_TRUE(vt_grammar_state_feed(s, "x", 1));
    for (int i = 0; i < 100; i++) CU_ASSERT_TRUE(vt_grammar_state_feed(s, ")", 1));
    CU_ASSERT_TRUE(vt_grammar_state_done(s));
    CU_ASSERT_FALSE(vt_grammar_state_feed(s, ")", 1));
    CU_ASSERT_TRUE(vt_grammar_state_dead(s));
    vt_grammar_state_free(s);
    vt_grammar_free(g);
}

static void test_end_and_done(void) {
    vt_grammar *g = parse_ok("root ::= \"a\" \"b\"?\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    vt_grammar_state *s = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_grammar_state_create(g, &s, NULL), VT_OK);
    CU_ASSERT_FALSE(vt_grammar_state_can_end(s));
    CU_ASSERT_TRUE(vt_grammar_state_feed(s, "a", 1));
    CU_ASSERT_TRUE(vt_grammar_state_can_end(s));
    CU_ASSERT_FALSE(vt_grammar_state_done(s)); /* "b" may still come */
    CU_ASSERT_TRUE(vt_grammar_state_feed(s, "b", 1));
    CU_ASSERT_TRUE(vt_grammar_state_done(s));
    vt_grammar_state_free(s);
    vt_grammar_free(g);

    /* a partial character is never an end */
    g = parse_ok("root ::= \"\xC3\xA9\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL_FATAL(vt_grammar_state_create(g, &s, NULL), VT_OK);
    CU_ASSERT_TRUE(vt_grammar_state_feed(s, "\xC3", 1));
    CU_ASSERT_FALSE(vt_grammar_state_can_end(s));
    CU_ASSERT_FALSE(vt_grammar_state_feed(s, "\xA8", 1)); /* è, not é */
    vt_grammar_state_free(s);
    CU_ASSERT_EQUAL_FATAL(vt_grammar_state_create(g, &s, NULL), VT_OK);
    CU_ASSERT_FALSE(vt_grammar_state_feed(s, "\xC4", 1)); /* no allowed character starts with C4 */
    vt_grammar_state_free(s);
    /* malformed UTF-8 is refused even where the grammar takes anything */
    vt_grammar_free(g);
    g = parse_ok("root ::= .*\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    static const char *const bad[] = {"\x80", "\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5",
                                      "\xFF", "\xC3\x41"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CU_ASSERT_EQUAL_FATAL(vt_grammar_state_create(g, &s, NULL), VT_OK);
        CU_ASSERT_FALSE(vt_grammar_state_feed(s, bad[i], strlen(bad[i])));
        vt_grammar_state_free(s);
    }
    CU_ASSERT_TRUE(matches(g, "\xF4\x8F\xBF\xBF\xED\x9F\xBF\xE0\xA0\x80"));
    vt_grammar_free(g);
}

/* ---- the mask against brute force ------------------------------------------- */

typedef struct byte_vocab {
    char **text;
    int32_t *len;
    int32_t n;
} byte_vocab;

static int32_t byte_vocab_bytes(void *user, int32_t id, char *buf, size_t cap) {
    const byte_vocab *v = user;
    if (id < 0 || id >= v->n) return -1;
    if ((size_t)v->len[id] <= cap) memcpy(buf, v->text[id], (size_t)v->len[id]);
    return v->len[id];
}

static int32_t tokenizer_bytes(void *user, int32_t id, char *buf, size_t cap) {
    return vt_token_to_bytes(user, id, false, buf, cap);
}

static const char *const MASK_GRAMMARS[] = {
    JSON_GBNF,
    /* multi-byte characters in literals, ranges and negations */
    "root ::= \"h\xC3\xA9llo\" [\xE2\x82\xAC-\xE2\x82\xAF]? \"\xF0\x9F\x99\x82\"+ | [^a-z\xC3\xA9]{2,3} | [\xC3\x80-\xC3\xBF]+ \"!\"\n",
    /* ambiguity: several stacks alive at once */
    "root ::= (\"a\" | \"ab\" | \"abc\")* \"c\" | x* \"b\"\nx ::= \"a\" | \"ba\"\n",
    /* identifiers and calls */
    "root ::= id (\"(\" (id (\", \" id)*)? \")\")?\nid ::= [a-zA-Z_] [a-zA-Z0-9_]{0,5}\n",
    "root ::= .+\n",
    "root ::= \"(\" root \")\" | [0-9]+\n",
};

/* Prefixes to reach states from, per grammar (NULL-terminated). */
static const char *const *mask_prefixes(size_t grammar) {
    static const char *const json[] = {"", "{", "{\"a", "{\"a\\", "{\"a\\u0", "{\"k\": ", "{\"k\": [1", "{\"k\": -0.",
                                       "{\"k\": \"\xC3", "{\"k\": tr", "{\"a\":{}}", NULL};
    static const char *const multi[] = {"", "h", "h\xC3", "h\xC3\xA9llo", "h\xC3\xA9llo\xE2", "h\xC3\xA9llo\xE2\x82",
                                        "h\xC3\xA9llo\xF0\x9F\x99", "\xC3", "\xC3\x80", NULL};
    static const char *const ambiguous[] = {"", "a", "ab", "aba", "abc", NULL};
    static const char *const ident[] = {"", "f", "f(", "f(x, ", "abcdef", NULL};
    static const char *const any[] = {"", "x", "\xE2", "\xF0\x9F", NULL};
    static const char *const nest[] = {"", "((", "((1", "((12)", NULL};
    static const char *const *const all[] = {json, multi, ambiguous, ident, any, nest};
    return all[grammar];
}

/* Compare the mask to brute force for every grammar and state on one vocabulary. */
static void check_mask_on(int32_t n_vocab, vt_token_bytes_fn bytes, void *user, size_t max_prefixes) {
    vt_token_trie *t = NULL;
    vt_error e = {0};
    CU_ASSERT_EQUAL_FATAL(vt_token_trie_build(n_vocab, bytes, user, &t, &e), VT_OK);
    uint8_t *allowed = malloc((size_t)n_vocab);
    char *buf = malloc(1 << 16);
    CU_ASSERT_PTR_NOT_NULL_FATAL(allowed);
    int64_t checked = 0, mismatches = 0, allowed_total = 0;
    for (size_t gi = 0; gi < sizeof MASK_GRAMMARS / sizeof *MASK_GRAMMARS; gi++) {
        vt_grammar *g = parse_ok(MASK_GRAMMARS[gi]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        const char *const *prefixes = mask_prefixes(gi);
        for (size_t pi = 0; prefixes[pi] && pi < max_prefixes; pi++) {
            vt_grammar_state *s = NULL;
            CU_ASSERT_EQUAL_FATAL(vt_grammar_state_create(g, &s, NULL), VT_OK);
            CU_ASSERT_TRUE_FATAL(vt_grammar_state_feed(s, prefixes[pi], strlen(prefixes[pi])));
            /* twice: the second answer comes from the state's cache */
            for (int round = 0; round < 2; round++) {
                const int32_t n_allowed = vt_grammar_mask(s, t, allowed);
                int32_t counted = 0;
                for (int32_t id = 0; id < n_vocab; id++) {
                    int32_t n = bytes(user, id, buf, 1 << 16);
                    bool want = false;
                    if (n > 0) {
                        vt_grammar_state *c = vt_grammar_state_clone(s);
                        CU_ASSERT_PTR_NOT_NULL_FATAL(c);
                        want = vt_grammar_state_feed(c, buf, (size_t)n);
                        vt_grammar_state_free(c);
                    }
                    counted += allowed[id];
                    if (want != (allowed[id] != 0)) {
                        if (mismatches < 5)
                            printf("\n  grammar %zu prefix '%s' token %d (%d bytes): mask %d, brute force %d", gi,
                                   prefixes[pi], id, n, allowed[id], want);
                        mismatches++;
                    }
                    checked++;
                }
                CU_ASSERT_EQUAL(counted, n_allowed);
                if (round == 0) allowed_total += n_allowed;
            }
            vt_grammar_state_free(s);
        }
        vt_grammar_free(g);
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT_TRUE(checked > 0);
    CU_ASSERT_TRUE(allowed_total > 0); /* the comparisons were not all "nothing allowed" */
    free(allowed);
    free(buf);
    vt_token_trie_free(t);
}

/* An alternative no string completes is dropped: the grammar's strings are
 * the same, and no prefix it lets through is a dead end (where generation
 * would stop with no character allowed and the grammar unfinished). */
static void test_dead_alternatives_are_dropped(void) {
    vt_grammar *g = parse_ok("root ::= \"a\" | \"b\" [^\\x00-\\U0010FFFF] | \"c\" dead\n"
                             "dead ::= \"d\" dead\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(matches(g, "a"));
    CU_ASSERT(!is_prefix(g, "b"));
    CU_ASSERT(!is_prefix(g, "c"));
    vt_grammar_free(g);
    /* an empty alternative among dropped ones stays */
    g = parse_ok("root ::= \"\" | [^\\x00-\\U0010FFFF] | \"q\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(matches(g, ""));
    CU_ASSERT(matches(g, "q"));
    vt_grammar_free(g);
    /* empty too: every character but the surrogates (no UTF-8 is one), and
     * a set of many items that together cover everything */
    g = parse_ok("root ::= \"a\" [^\\x00-\\uD7FF\\uE000-\\U0010FFFF] | \"b\"\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(!is_prefix(g, "a"));
    CU_ASSERT(matches(g, "b"));
    vt_grammar_free(g);
    char many[4096] = "root ::= \"a\" [^";
    for (unsigned c = 0; c < 100; c++) snprintf(many + strlen(many), sizeof many - strlen(many), "\\x%02x", c);
    strcat(many, "\\x64-\\U0010FFFF] | \"b\"\n");
    g = parse_ok(many);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(!is_prefix(g, "a"));
    CU_ASSERT(matches(g, "b"));
    vt_grammar_free(g);
    /* sets that together cover everything are each fine */
    g = parse_ok("root ::= ([^\\x00-\\x40] | [^\\x41-\\U0010FFFF])+\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(matches(g, "A"));
    CU_ASSERT(matches(g, "zz"));
    vt_grammar_free(g);
}

/* The union of two grammars that share rule names (ws, item) with other
 * meanings, written with comments, literals and classes that hold those
 * names: each keeps its own rules, and only its own sentences are new. */
static void test_either_keeps_each_grammar_apart(void) {
    static const char answer[] = "# item and ws here are the answer's\n"
                                 "root ::= \"{\" ws item ws \"}\"\n"
                                 "item ::= [0-9]+ # not \"item\" of the call\n"
                                 "ws ::= \" \"?\n";
    static const char call[] = "root ::= \"<call>\" ws item{1,2} \"</call>\"\n"
                               "item ::= \"item\" | [a-z-]\n"
                               "ws ::= \"\\n\"*\n";
    vt_error e = {0};
    char *text = vt_grammar_union_text(answer, "answer-", call, "call-", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    vt_grammar *g = parse_ok(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(matches(g, "{ 42 }"));
    CU_ASSERT(matches(g, "<call>\n\nitemx</call>"));
    CU_ASSERT(matches(g, "<call>q</call>"));
    CU_ASSERT(!is_prefix(g, "{\n"));        /* the call's ws inside the answer */
    CU_ASSERT(!is_prefix(g, "{ item"));      /* the call's item inside the answer */
    CU_ASSERT(!is_prefix(g, "<call> "));     /* the answer's ws inside the call */
    CU_ASSERT(!is_prefix(g, "<call>7"));     /* the answer's item inside the call */
    CU_ASSERT(strstr(text, "\"item\"") != NULL); /* literals and comments untouched */
    CU_ASSERT(strstr(text, "# not \"item\" of the call") != NULL);
    vt_grammar_free(g);
    free(text);
    /* a text ending where an alternative may begin ("::=", '|', then
     * spaces, a comment or newlines) keeps its empty alternative, and the
     * other grammar's rules stay their own */
    static const char *const open_ends[] = {"root ::=", "root ::= \"a\" |", "root ::= \"a\" | # c\n\n",
                                            "root ::= # c"};
    for (size_t i = 0; i < sizeof open_ends / sizeof *open_ends; i++) {
        text = vt_grammar_union_text(open_ends[i], "open-", call, "call-", &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        g = parse_ok(text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        CU_ASSERT(matches(g, ""));
        CU_ASSERT(matches(g, "<call>q</call>"));
        vt_grammar_free(g);
        free(text);
    }
    /* either grammar's error is vt_grammar_parse's, and no text */
    CU_ASSERT_PTR_NULL(vt_grammar_union_text(answer, "a-", "root ::= undefined\n", "b-", &e));
    CU_ASSERT_EQUAL(e.code, VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "undefined"));
    CU_ASSERT_PTR_NULL(vt_grammar_union_text("root ::= (\n", "a-", call, "b-", &e));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "line 1"));
    /* prefixes whose renamed names could meet: equal, one beginning the
     * other (a + "bx" = ab + "x"), one beginning "root" (r + "oot") */
    static const char *const bad_prefixes[][2] = {{"same", "same"}, {"a", "ab"}, {"a-", "a"}, {"r", "x"},
                                                  {"x", "roo"}, {"a b", "c"}, {"", "c"}};
    for (size_t i = 0; i < sizeof bad_prefixes / sizeof *bad_prefixes; i++) {
        e = (vt_error){0};
        CU_ASSERT_PTR_NULL(vt_grammar_union_text(answer, bad_prefixes[i][0], call, bad_prefixes[i][1], &e));
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "prefixes"));
    }
    CU_ASSERT_PTR_NULL(vt_grammar_union_text(answer, NULL, call, "c", &e));
    CU_ASSERT_PTR_NULL(vt_grammar_union_text(NULL, "a", call, "c", &e));
    /* each within the elements' limit, the two together past it: refused
     * here, not by whoever parses the text next */
    char big[256] = "root ::= \"";
    for (int i = 0; i < 150; i++) strcat(big, "x");
    strcat(big, "\"{1000}\n"); /* 150,000 elements of 262,144 */
    vt_grammar *alone = parse_ok(big);
    CU_ASSERT_PTR_NOT_NULL(alone);
    vt_grammar_free(alone);
    e = (vt_error){0};
    CU_ASSERT_PTR_NULL(vt_grammar_union_text(big, "a-", big, "b-", &e));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "grammar: the two grammars together: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "elements"));
}

/* Every single byte, and strings that split characters everywhere: leads
 * alone, continuations alone, a character's tail plus the next one's head,
 * overlong and surrogate forms, duplicates, an empty (control) token. */
static void test_mask_synthetic_vocab(void) {
    static const char *const extra[] = {
        "", "h\xC3", "\xA9llo", "\xA9", "h\xC3\xA9llo", "\xE2\x82", "\xAC\xF0", "\x9F\x99\x82", "\xF0\x9F\x99\x82",
        "\xF0\x9F\x99\x82\xF0\x9F", "\x99\x82\xF0\x9F\x99\x82", "\xC0\x80", "\xED\xA0\x80", "\xE0\x80", "\xE0\xA0",
        "{\"", "\":", "\": ", "\"a\"", "\\u00", "00e9", "\\n\"", "true", "tr", "ue}", "null,", "1.5e", "-0", "01",
        "  ", "\n  ", "\n\t\t", "{}", "[]", "f(x", ", y)", "abc", "ba", "((", "))", "12)", "h\xC3\xA9llo", "\xC3\x80!",
    };
    byte_vocab v;
    v.n = 256 + (int32_t)(sizeof extra / sizeof *extra);
    v.text = calloc((size_t)v.n, sizeof *v.text);
    v.len = calloc((size_t)v.n, sizeof *v.len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v.len);
    static char singles[256];
    for (int i = 0; i < 256; i++) {
        singles[i] = (char)i;
        v.text[i] = &singles[i];
        v.len[i] = 1;
    }
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        v.text[256 + i] = (char *)extra[i];
        v.len[256 + i] = (int32_t)strlen(extra[i]);
    }
    check_mask_on(v.n, byte_vocab_bytes, &v, 100);
    free(v.text);
    free(v.len);
}

static void check_model_vocab(const char *rel, size_t max_prefixes) {
    const char *data = vt_test_data_dir(rel);
    if (!data) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", data, rel);
    vt_gguf *g = NULL;
    vt_tokenizer *t = NULL;
    vt_error e = {0};
    if (vt_gguf_open(path, &g, &e) != VT_OK || vt_tokenizer_load(g, &t, &e) != VT_OK) printf("\n  %s: %s\n", rel, e.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    check_mask_on(vt_tokenizer_n_vocab(t), tokenizer_bytes, t, max_prefixes);
    vt_tokenizer_free(t);
    vt_gguf_close(g);
}

static void test_mask_tiny_model_vocabs(void) {
    check_model_vocab("models/qwen3-tiny-f32.gguf", 100);
    check_model_vocab("models/llama-gqa-tiny-f32.gguf", 100);
    check_model_vocab("models/aidreams260k-f32.gguf", 100);
}

/* The real vocabularies: 151,936 and 32,000 tokens, a few states per grammar
 * (brute force clones a state per token). */
static void test_mask_real_vocabs(void) {
    check_model_vocab("models/vocab/ggml-vocab-qwen2.gguf", 3);
    check_model_vocab("models/vocab/ggml-vocab-llama-spm.gguf", 4);
}

int main(void) {
    CU_TestInfo parse[] = {
        {"the syntax is accepted", test_parse_accepts_the_syntax},
        {"errors name line and column", test_parse_errors_name_line_and_column},
        {"nesting is bounded", test_nesting_is_bounded},
        {"end and done", test_end_and_done},
        {"alternatives no string completes are dropped", test_dead_alternatives_are_dropped},
        {"the union of two grammars keeps each apart", test_either_keeps_each_grammar_apart},
        CU_TEST_INFO_NULL,
    };
    CU_TestInfo mask[] = {
        {"synthetic vocabulary", test_mask_synthetic_vocab},
        {"tiny model vocabularies", test_mask_tiny_model_vocabs},
        {"real Qwen2 and Llama vocabularies", test_mask_real_vocabs},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("grammar parse and state", NULL, NULL, parse);
    vt_test_add_suite("mask equals brute force", NULL, NULL, mask);
    return vt_test_run();
}
