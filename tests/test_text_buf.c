/* test_text_buf.c — the server's shared text buffer: writes, a printf of
 * any length, the limit, failure sticking, taking the text, and doubles as
 * Python's repr() (and json.dumps) writes them. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "text_buf.h"
#include "util.h"

static void test_writes_and_take(void) {
    vt_text_buf b = {0};
    char *empty = vt_text_take(&b); /* nothing written: "", not NULL */
    CU_ASSERT(empty && empty[0] == '\0');
    free(empty);
    vt_text_puts(&b, "ab");
    vt_text_putc(&b, 'c');
    vt_text_put(&b, "de-not-this", 2);
    vt_text_printf(&b, "|%d|%s", 42, "x");
    CU_ASSERT_EQUAL(b.len, 10);
    char *text = vt_text_take(&b);
    CU_ASSERT_STRING_EQUAL(text, "abcde|42|x");
    CU_ASSERT(b.data == NULL && b.len == 0); /* handed over */
    free(text);
    /* a printf longer than any fixed scratch is written in full */
    char *big = malloc(5001);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    memset(big, 'y', 5000);
    big[5000] = '\0';
    vt_text_printf(&b, "<%s>", big);
    CU_ASSERT_EQUAL(b.len, 5002);
    CU_ASSERT(b.data && b.data[0] == '<' && b.data[5001] == '>' && b.data[5002] == '\0');
    free(big);
    free(vt_text_take(&b));
}

static void test_limit_fails_for_good(void) {
    vt_text_buf b = {.limit = 4};
    vt_text_puts(&b, "abc");
    vt_text_puts(&b, "de"); /* past 4 bytes: failed */
    CU_ASSERT_TRUE(b.failed);
    vt_text_puts(&b, "f"); /* and nothing more is written */
    CU_ASSERT_EQUAL(b.len, 3);
    CU_ASSERT_PTR_NULL(vt_text_take(&b));
}

static void test_floats_as_python_writes_them(void) {
    static const struct {
        double x;
        const char *want;
    } cases[] = {{3.8, "3.8"},        {0.1, "0.1"},       {2.0, "2.0"},          {-0.0, "-0.0"},
                 {1e300, "1e+300"},   {2.5e-7, "2.5e-07"}, {1e16, "1e+16"},      {1e15, "1000000000000000.0"},
                 {0.0001, "0.0001"},  {0.00001, "1e-05"},  {0.1 + 0.2, "0.30000000000000004"},
                 {5e-324, "5e-324"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vt_text_buf b = {0};
        vt_text_put_float(&b, cases[i].x);
        char *text = vt_text_take(&b);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        if (strcmp(text, cases[i].want) != 0) printf("\n  %.17g -> %s, want %s", cases[i].x, text, cases[i].want);
        CU_ASSERT_STRING_EQUAL(text, cases[i].want);
        free(text);
    }
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"writes, a printf of any length, take", test_writes_and_take},
        {"past the limit the buffer fails for good", test_limit_fails_for_good},
        {"doubles as Python's repr writes them", test_floats_as_python_writes_them},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("text buffer", NULL, NULL, tests);
    return vt_test_run();
}
