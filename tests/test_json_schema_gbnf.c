/* test_json_schema_gbnf.c — the JSON Schema -> GBNF converter
 * (core/server/json_schema_gbnf.c) on its own, through the grammar engine:
 * integer ranges are exact (every integer of a span checked), whitespace is
 * bounded, keys come in the schema's order with the optional ones optional,
 * dates are real dates, patterns match as Python's re would. The validity
 * of whole sampled documents is test_serve_grammar's (python-jsonschema). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json_schema_gbnf.h"
#include "util.h"

/* The grammar of a schema given as JSON text (NULL with the error printed). */
/* The schema's GBNF (malloc'ed), or NULL with the reason in why. */
static char *convert(const char *schema_json, char *why, size_t size) {
    json_error_t jerr;
    json_t *schema = json_loads(schema_json, 0, &jerr);
    if (!schema) {
        snprintf(why, size, "bad test schema: %s", jerr.text);
        return NULL;
    }
    char *gbnf = vt_json_schema_to_gbnf(schema, why, size);
    json_decref(schema);
    return gbnf;
}

static vt_grammar *compile(const char *schema_json) {
    char why[512] = "";
    char *gbnf = convert(schema_json, why, sizeof why);
    if (!gbnf) {
        printf("\n  refused: %s", why);
        return NULL;
    }
    vt_grammar *g = NULL;
    vt_error e = {0};
    if (vt_grammar_parse(gbnf, strlen(gbnf), &g, &e) != VT_OK) printf("\n  grammar refused: %s\n%s", e.msg, gbnf);
    free(gbnf);
    return g;
}

/* text is a whole document of g. */
static bool accepts(const vt_grammar *g, const char *text) {
    vt_grammar_state *s = NULL;
    if (vt_grammar_state_create(g, &s, NULL) != VT_OK) return false;
    bool ok = vt_grammar_state_feed(s, text, strlen(text)) && vt_grammar_state_can_end(s);
    vt_grammar_state_free(s);
    return ok;
}

static void check_range(const char *schema, long lo, long hi, long from, long to) {
    vt_grammar *g = compile(schema);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    int wrong = 0;
    for (long v = from; v <= to; v++) {
        char text[32];
        snprintf(text, sizeof text, "%ld", v);
        const bool want = v >= lo && v <= hi;
        if (accepts(g, text) != want) {
            if (wrong++ < 5) printf("\n  %s: %ld %s", schema, v, want ? "refused" : "accepted");
        }
    }
    CU_ASSERT_EQUAL(wrong, 0);
    /* never a leading zero or "-0" */
    CU_ASSERT_FALSE(accepts(g, "-0"));
    CU_ASSERT_FALSE(accepts(g, "007"));
    vt_grammar_free(g);
}

static void test_integer_ranges_are_exact(void) {
    check_range("{\"type\":\"integer\",\"minimum\":-37,\"maximum\":1234}", -37, 1234, -3000, 3000);
    check_range("{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":100}", 1, 99, -200, 200);
    check_range("{\"type\":\"integer\",\"minimum\":-950,\"maximum\":-12}", -950, -12, -2000, 100);
    check_range("{\"type\":\"integer\",\"minimum\":5}", 5, 1000000, -100, 20000);
    check_range("{\"type\":\"integer\",\"maximum\":5.5}", -1000000, 5, -20000, 100);
    /* number with bounds: the integers in them */
    check_range("{\"type\":\"number\",\"minimum\":-2.5,\"exclusiveMaximum\":7}", -2, 6, -50, 50);
    /* ranges nothing generated can meet are refused, saying why */
    static const struct {
        const char *schema, *says;
    } refused[] = {
        {"{\"type\":\"number\",\"minimum\":0.5,\"maximum\":0.9}", "a bounded number is generated as an integer"},
        {"{\"type\":\"integer\",\"minimum\":1e20}", "minimum 1e+20: beyond the 16 digits"},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":1e20}", "exclusiveMinimum 1e+20: beyond the 16 digits"},
        {"{\"type\":\"integer\",\"maximum\":-1e20}", "maximum -1e+20: beyond the 16 digits"},
        {"{\"type\":\"integer\",\"minimum\":0,\"exclusiveMinimum\":1e20}", "exclusiveMinimum 1e+20: beyond"},
        {"{\"type\":\"integer\",\"minimum\":1e16}", "minimum 1e+16: beyond the 16 digits"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        char why[512] = "";
        char *gbnf = convert(refused[i].schema, why, sizeof why);
        CU_ASSERT_PTR_NULL(gbnf);
        if (!strstr(why, refused[i].says)) printf("\n  %s: '%s'", refused[i].schema, why);
        CU_ASSERT(strstr(why, refused[i].says) != NULL);
        free(gbnf);
    }
    vt_grammar *g = compile("{\"type\":\"number\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "-0.25e-12"));
    CU_ASSERT_TRUE(accepts(g, "12"));
    CU_ASSERT_FALSE(accepts(g, "1."));
    CU_ASSERT_FALSE(accepts(g, "01"));
    vt_grammar_free(g);
}

static void test_whitespace_is_bounded(void) {
    vt_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"}},\"required\":[\"a\"]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "{\"a\":true}"));
    CU_ASSERT_TRUE(accepts(g, "{ \"a\" : true }"));
    CU_ASSERT_TRUE(accepts(g, "{\n                    \"a\": true\n}"));   /* newline + 20 */
    CU_ASSERT_FALSE(accepts(g, "{\n                     \"a\": true\n}")); /* newline + 21 */
    CU_ASSERT_FALSE(accepts(g, "{  \"a\":true}"));                          /* two spaces */
    CU_ASSERT_FALSE(accepts(g, " {\"a\":true}"));                           /* nothing before the document */
    vt_grammar_free(g);
}

static void test_properties_order_and_optional(void) {
    vt_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"null\"},"
                            "\"z\":{\"type\":\"boolean\"}},\"required\":[\"y\"]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "{\"y\":null}"));
    CU_ASSERT_TRUE(accepts(g, "{\"x\":1,\"y\":null,\"z\":false}"));
    CU_ASSERT_TRUE(accepts(g, "{\"y\":null,\"z\":true}"));
    CU_ASSERT_FALSE(accepts(g, "{\"x\":1}"));                 /* y is required */
    CU_ASSERT_FALSE(accepts(g, "{\"y\":null,\"x\":1}"));      /* the schema's order */
    CU_ASSERT_FALSE(accepts(g, "{\"y\":null,\"w\":1}"));      /* only declared properties */
    CU_ASSERT_FALSE(accepts(g, "{\"y\":null,}"));
    vt_grammar_free(g);
    g = compile("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "{}"));
    CU_ASSERT_TRUE(accepts(g, "{\"b\":2}"));
    CU_ASSERT_FALSE(accepts(g, "{,\"b\":2}"));
    vt_grammar_free(g);
    /* a map: any keys, one value schema */
    g = compile("{\"type\":\"object\",\"additionalProperties\":{\"enum\":[1,\"two\"]}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "{\"k\":1, \"\\u00e9\":\"two\"}"));
    CU_ASSERT_FALSE(accepts(g, "{\"k\":2}"));
    vt_grammar_free(g);
}

static void test_strings_dates_patterns(void) {
    vt_grammar *g = compile("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"ab\""));
    CU_ASSERT_TRUE(accepts(g, "\"\\n\\u00e9\\\"\"")); /* escapes count one character each */
    CU_ASSERT_FALSE(accepts(g, "\"a\""));
    CU_ASSERT_FALSE(accepts(g, "\"abcd\""));
    CU_ASSERT_FALSE(accepts(g, "\"a\\ud800\""));     /* a lone surrogate is not a character */
    CU_ASSERT_FALSE(accepts(g, "\"a\tb\""));         /* a raw control character */
    vt_grammar_free(g);
    g = compile("{\"type\":\"string\",\"format\":\"date\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"2024-04-30\""));
    CU_ASSERT_TRUE(accepts(g, "\"0001-12-31\""));
    CU_ASSERT_FALSE(accepts(g, "\"2024-04-31\""));
    CU_ASSERT_FALSE(accepts(g, "\"2023-02-29\""));
    CU_ASSERT_FALSE(accepts(g, "\"0000-01-01\""));
    CU_ASSERT_FALSE(accepts(g, "\"2024-13-01\""));
    vt_grammar_free(g);
    g = compile("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}(-[a-z]+)?$\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"AB-123\""));
    CU_ASSERT_TRUE(accepts(g, "\"AB-123-xyz\""));
    CU_ASSERT_FALSE(accepts(g, "\"AB-12\""));
    CU_ASSERT_FALSE(accepts(g, "\"ab-123\""));
    vt_grammar_free(g);
    /* a quote and a backslash in a class are spelt escaped, as JSON must */
    g = compile("{\"type\":\"string\",\"pattern\":\"^[\\\"\\\\\\\\x]+$\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"x\\\"\\\\\""));
    CU_ASSERT_FALSE(accepts(g, "\"y\""));
    vt_grammar_free(g);
    /* unanchored: the match may sit anywhere */
    g = compile("{\"type\":\"string\",\"pattern\":\"ab+c\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"xxabbbcyy\""));
    CU_ASSERT_FALSE(accepts(g, "\"xxacyy\""));
    vt_grammar_free(g);
}

static void test_enum_const_ref(void) {
    vt_grammar *g = compile("{\"enum\":[\"a\\\"b\",{\"k\":[1,null]},2.5,true]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"a\\\"b\""));
    CU_ASSERT_TRUE(accepts(g, "{\"k\":[1,null]}"));
    CU_ASSERT_TRUE(accepts(g, "2.5"));
    CU_ASSERT_FALSE(accepts(g, "false"));
    vt_grammar_free(g);
    /* a recursive list through $ref */
    g = compile("{\"$defs\":{\"l\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/l\"},\"maxItems\":2}},"
                "\"$ref\":\"#/$defs/l\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "[[],[[],[[]]]]"));
    CU_ASSERT_FALSE(accepts(g, "[[],[],[]]"));
    vt_grammar_free(g);
}

static void test_combinations(void) {
    /* allOf merges objects; a closed branch admits only its own properties */
    vt_grammar *g = compile("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
                            "\"b\":{\"type\":\"null\"}},\"required\":[\"a\"]},{\"properties\":{\"a\":{\"type\":"
                            "\"integer\"}},\"additionalProperties\":false}]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "{\"a\":1}"));
    CU_ASSERT_FALSE(accepts(g, "{\"a\":1,\"b\":null}"));
    vt_grammar_free(g);
    /* a discriminated oneOf */
    g = compile("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"t\":{\"const\":\"x\"},\"v\":{\"type\":"
                "\"integer\"}},\"required\":[\"t\"]},{\"type\":\"object\",\"properties\":{\"t\":{\"enum\":"
                "[\"y\"]}},\"required\":[\"t\"]}],\"discriminator\":{\"propertyName\":\"t\"}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "{\"t\":\"x\",\"v\":3}"));
    CU_ASSERT_TRUE(accepts(g, "{\"t\":\"y\"}"));
    CU_ASSERT_FALSE(accepts(g, "{\"t\":\"z\"}"));
    vt_grammar_free(g);
    /* type arrays share the keywords */
    g = compile("{\"type\":[\"string\",\"null\"],\"maxLength\":1}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "null"));
    CU_ASSERT_TRUE(accepts(g, "\"a\""));
    CU_ASSERT_FALSE(accepts(g, "\"ab\""));
    vt_grammar_free(g);
    /* prefixItems, then items false: exactly the prefix */
    g = compile("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"boolean\"},{\"const\":7}],\"items\":false}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "[true, 7]"));
    CU_ASSERT_FALSE(accepts(g, "[true]"));
    CU_ASSERT_FALSE(accepts(g, "[true,7,1]"));
    vt_grammar_free(g);
    /* minItems / maxItems */
    g = compile("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},"
                "\"minItems\":2,\"maxItems\":3}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_FALSE(accepts(g, "[1]"));
    CU_ASSERT_TRUE(accepts(g, "[1,2]"));
    CU_ASSERT_TRUE(accepts(g, "[1, 2, 3]"));
    CU_ASSERT_FALSE(accepts(g, "[1,2,3,4]"));
    CU_ASSERT_FALSE(accepts(g, "[1,12]"));
    vt_grammar_free(g);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"integer ranges are exact", test_integer_ranges_are_exact},
        {"whitespace is bounded", test_whitespace_is_bounded},
        {"properties: order, optional, only declared", test_properties_order_and_optional},
        {"strings, dates, patterns", test_strings_dates_patterns},
        {"enum, const, recursive $ref", test_enum_const_ref},
        {"allOf, oneOf, type arrays, array counts", test_combinations},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("JSON Schema -> GBNF", NULL, NULL, tests);
    return vt_test_run();
}
