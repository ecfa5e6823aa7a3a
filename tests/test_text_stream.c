/* test_text_stream.c — the final text of a generation and its stop strings
 * (core/text/text_stream.h), on its own: characters split over tokens are
 * held back until whole, a stop string split over tokens ends the text right
 * before it, a suffix that may still become a stop string is held back (the
 * longest of overlapping prefixes), the earliest of several stop strings
 * wins, and finishing flushes what was held. */
#include <stdlib.h>
#include <string.h>

#include "text_stream.h"
#include "util.h"

/* All the text taken so far, concatenated. */
typedef struct collected {
    char buf[1024];
    size_t n;
} collected;

static vt_text_stream *make(const char *const *stops, size_t n) {
    vt_text_stream *t = NULL;
    vt_error e = {0};
    if (vt_text_stream_create(stops, n, &t, &e) != VT_OK) printf("\n  %s\n", e.msg);
    return t;
}

/* Feed one token's bytes, take the final text; returns what was taken as a
 * NUL-terminated string in a static buffer. */
static const char *feed_take(vt_text_stream *t, collected *c, const char *bytes, size_t n) {
    static char out[1024];
    vt_error e = {0};
    CU_ASSERT_EQUAL(vt_text_stream_feed(t, bytes, n, NULL, &e), VT_OK);
    const char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(vt_text_stream_take(t, &text, &len, &e), VT_OK);
    memcpy(out, text, len);
    out[len] = 0;
    memcpy(c->buf + c->n, text, len);
    c->n += len;
    c->buf[c->n] = 0;
    return out;
}

static const char *finish_take(vt_text_stream *t, collected *c) {
    vt_text_stream_finish(t);
    return feed_take(t, c, "", 0);
}

static void test_split_characters_wait_until_whole(void) {
    vt_text_stream *t = make(NULL, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    collected c = {{0}, 0};
    /* "é" (C3 A9) then "🙂" (F0 9F 99 82) split 1+3 and 2+2 over tokens. */
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "caf\xC3", 4), "caf");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "\xA9 \xF0\x9F", 4), "\xC3\xA9 ");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "\x99", 1), "");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "\x82!", 2), "\xF0\x9F\x99\x82!");
    CU_ASSERT_STRING_EQUAL(c.buf, "caf\xC3\xA9 \xF0\x9F\x99\x82!");
    /* An incomplete character at the very end is flushed as U+FFFD. */
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "x\xE2\x82", 3), "x");
    CU_ASSERT_STRING_EQUAL(finish_take(t, &c), "\xEF\xBF\xBD");
    CU_ASSERT_FALSE(vt_text_stream_stopped(t));
    vt_text_stream_free(t);
}

static void test_stop_string_split_over_tokens(void) {
    const char *const stops[] = {"\nUser:"};
    vt_text_stream *t = make(stops, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    collected c = {{0}, 0};
    bool stopped = true;
    vt_error e = {0};
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "Sure.", 5), "Sure.");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "\nUs", 3), ""); /* could become "\nUser:" */
    CU_ASSERT_EQUAL(vt_text_stream_feed(t, "er", 2, &stopped, &e), VT_OK);
    CU_ASSERT_FALSE(stopped);
    CU_ASSERT_EQUAL(vt_text_stream_feed(t, ": more", 6, &stopped, &e), VT_OK);
    CU_ASSERT_TRUE(stopped);
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, " ignored", 8), "");
    CU_ASSERT_STRING_EQUAL(finish_take(t, &c), "");
    CU_ASSERT_STRING_EQUAL(c.buf, "Sure.");
    vt_text_stream_free(t);
}

static void test_a_prefix_that_does_not_become_the_stop_string_is_released(void) {
    const char *const stops[] = {"END"};
    vt_text_stream *t = make(stops, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    collected c = {{0}, 0};
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "the EN", 6), "the ");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "D", 1), ""); /* it did */
    CU_ASSERT_TRUE(vt_text_stream_stopped(t));
    vt_text_stream_free(t);

    t = make(stops, 1);
    c = (collected){{0}, 0};
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "the EN", 6), "the ");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "VY", 2), "ENVY");
    /* Held back at the finish: final then. */
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, " E", 2), " ");
    CU_ASSERT_STRING_EQUAL(finish_take(t, &c), "E");
    CU_ASSERT_STRING_EQUAL(c.buf, "the ENVY E");
    vt_text_stream_free(t);
}

static void test_overlapping_prefixes_hold_back_the_longest(void) {
    /* "abab" ends in "ab", a prefix of both; "aba" of "abac" only. */
    const char *const stops[] = {"abac", "abx"};
    vt_text_stream *t = make(stops, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    collected c = {{0}, 0};
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "xab", 3), "x");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "a", 1), ""); /* "aba" may become "abac" */
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "b", 1), "ab"); /* "abab": only its "ab" can still start one */
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "ac", 2), "");  /* "ab" + "ac": abac */
    CU_ASSERT_TRUE(vt_text_stream_stopped(t));
    CU_ASSERT_STRING_EQUAL(c.buf, "xab");
    vt_text_stream_free(t);
}

static void test_the_earliest_of_several_stop_strings_wins(void) {
    const char *const stops[] = {"world", "lo w", "\xC3\xA9t\xC3\xA9"};
    vt_text_stream *t = make(stops, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    collected c = {{0}, 0};
    /* Both "lo w" and "world" complete in this token; "lo w" starts first. */
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "hel", 3), "he");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "lo world", 8), "l");
    CU_ASSERT_TRUE(vt_text_stream_stopped(t));
    CU_ASSERT_STRING_EQUAL(c.buf, "hel");
    vt_text_stream_free(t);

    /* A multibyte stop string, its characters split over tokens. */
    t = make(stops, 3);
    c = (collected){{0}, 0};
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "summer \xC3", 8), "summer ");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "\xA9t\xC3", 3), "");
    CU_ASSERT_STRING_EQUAL(feed_take(t, &c, "\xA9 later", 8), "");
    CU_ASSERT_TRUE(vt_text_stream_stopped(t));
    CU_ASSERT_STRING_EQUAL(c.buf, "summer ");
    vt_text_stream_free(t);
}

static void test_bad_stop_strings_are_refused_naming_the_field(void) {
    vt_text_stream *t = NULL;
    vt_error e = {0};
    char long_stop[300];
    memset(long_stop, 'x', sizeof long_stop - 1);
    long_stop[sizeof long_stop - 1] = 0;
    const char *const bad[] = {"ok", "", long_stop};
    CU_ASSERT_EQUAL(vt_text_stream_create(bad, 2, &t, &e), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "stop_strings[1]: empty"));
    const char *const too_long[] = {long_stop};
    CU_ASSERT_EQUAL(vt_text_stream_create(too_long, 1, &t, &e), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "stop_strings[0]: too long"));
    const char *const many[17] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"};
    CU_ASSERT_EQUAL(vt_text_stream_create(many, 17, &t, &e), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "stop_strings: 17 strings"));
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_EQUAL(vt_text_stream_create(many, 16, &t, &e), VT_OK);
    vt_text_stream_free(t);
    /* the text they are matched against is valid UTF-8: a stop that is not
     * (a lone byte, a cut character, an overlong form, a surrogate, past
     * U+10FFFF) could never match, and is refused */
    static const char *const invalid[] = {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"};
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++) {
        t = NULL;
        CU_ASSERT_EQUAL(vt_text_stream_create(&invalid[i], 1, &t, &e), VT_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "stop_strings[0]: not valid UTF-8"));
        CU_ASSERT_PTR_NULL(t);
    }
    static const char *const valid[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"};
    CU_ASSERT_EQUAL(vt_text_stream_create(valid, 4, &t, &e), VT_OK);
    vt_text_stream_free(t);
}

/* Where each token begins in the text (vt_batch_logprobs.text_offset):
 * the text's length before it, counting a byte that is no character as the
 * U+FFFD the text has in its place; a token continuing a held-back
 * character has that character's start; one that ends a held-back
 * character that cannot complete begins after its U+FFFD; after a stop
 * string, the text's end. Every offset is checked against the text itself. */
static void test_token_offsets_index_the_text(void) {
    const char *const stops[] = {"STOP"};
    vt_text_stream *t = make(stops, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    collected c = {{0}, 0};
    static const struct {
        const char *bytes;
        size_t n;
        size_t offset;
    } tokens[] = {
        {"ab", 2, 0},          /* "ab" */
        {"\xC3", 1, 2},        /* the start of "é": held back */
        {"\xA9" "c", 2, 2},       /* continues it: the character's start */
        {"\xFF", 1, 5},        /* no character: U+FFFD at 5 */
        {"d", 1, 8},           /* after the 3 bytes of that U+FFFD */
        {"\xE2\x82", 2, 9},    /* the start of "€", never completed */
        {"e", 1, 12},          /* ends it: it becomes U+FFFD (9..12), "e" after */
        {"", 0, 13},           /* no text: where the text ends */
        {"fST", 3, 13},        /* "f", then "ST" held back (it may become the stop string) */
        {"OPgh", 4, 16},       /* the stop string matches at 14: the text ends there */
        {"ij", 2, 14},         /* after the stop string: the text's end */
    };
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++) {
        CU_ASSERT_EQUAL(vt_text_stream_offset_of(t, tokens[i].bytes, tokens[i].n), tokens[i].offset);
        feed_take(t, &c, tokens[i].bytes, tokens[i].n);
    }
    finish_take(t, &c);
    CU_ASSERT_EQUAL(c.n, 14);
    CU_ASSERT_STRING_EQUAL(c.buf, "ab\xC3\xA9" "c\xEF\xBF\xBD" "d\xEF\xBF\xBD" "ef");
    /* the text at each offset is the token's own where its bytes are characters */
    CU_ASSERT_EQUAL(memcmp(c.buf + 0, "ab", 2), 0);
    CU_ASSERT_EQUAL(memcmp(c.buf + 2, "\xC3\xA9", 2), 0);
    CU_ASSERT_EQUAL(memcmp(c.buf + 5, "\xEF\xBF\xBD", 3), 0);
    CU_ASSERT_EQUAL(memcmp(c.buf + 8, "d", 1), 0);
    CU_ASSERT_EQUAL(memcmp(c.buf + 12, "e", 1), 0);
    CU_ASSERT_EQUAL(memcmp(c.buf + 13, "f", 1), 0);
    vt_text_stream_free(t);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"split characters wait until whole", test_split_characters_wait_until_whole},
        {"stop string split over tokens", test_stop_string_split_over_tokens},
        {"a prefix that does not become the stop string is released",
         test_a_prefix_that_does_not_become_the_stop_string_is_released},
        {"overlapping prefixes hold back the longest", test_overlapping_prefixes_hold_back_the_longest},
        {"the earliest of several stop strings wins", test_the_earliest_of_several_stop_strings_wins},
        {"bad stop strings are refused naming the field", test_bad_stop_strings_are_refused_naming_the_field},
        {"token offsets index the text", test_token_offsets_index_the_text},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("text stream", NULL, NULL, tests);
    return vt_test_run();
}
