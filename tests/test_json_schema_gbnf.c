/* test_json_schema_gbnf.c — the JSON Schema -> GBNF converter
 * (core/server/json_schema_gbnf.c) on its own, through the grammar engine:
 * integer ranges are exact (every integer of a span checked), whitespace is
 * bounded, keys come in the schema's order with the optional ones optional,
 * dates are real dates, patterns match as Python's re would. The validity
 * of whole sampled documents is test_serve_grammar's (python-jsonschema). */
#include <jansson.h>
#include <regex.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VT_TEST_UNDER_ASAN 1
#endif
#endif
#include "json_schema_gbnf.h"
#include "name_table.h"
#include "text_buf.h"
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
    /* lowercase hex digits, as RFC 9562 asks of generators */
    g = compile("{\"type\":\"string\",\"format\":\"uuid\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"6bd77e9e-4562-a0dd-bdff-8ede91b3fd1f\""));
    CU_ASSERT_FALSE(accepts(g, "\"6Bd77E9E-4562-a0DD-BdFF-8ede91b3fD1F\""));
    CU_ASSERT_FALSE(accepts(g, "\"6bd77e9e4562a0ddbdff8ede91b3fd1f\""));
    vt_grammar_free(g);
    /* only what strict validators take: no dot at either end of the local
     * part or doubled, no label ending in a hyphen */
    g = compile("{\"type\":\"string\",\"format\":\"email\"}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "\"ann.lee+tag@mail.example.org\""));
    CU_ASSERT_TRUE(accepts(g, "\"a@b-c.io\""));
    CU_ASSERT_FALSE(accepts(g, "\"ann..lee@example.org\""));
    CU_ASSERT_FALSE(accepts(g, "\".ann@example.org\""));
    CU_ASSERT_FALSE(accepts(g, "\"ann.@example.org\""));
    CU_ASSERT_FALSE(accepts(g, "\"ann@example-.org\""));
    CU_ASSERT_FALSE(accepts(g, "\"ann@-example.org\""));
    CU_ASSERT_FALSE(accepts(g, "\"ann@example\""));
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

/* Repeated groups that may match nothing ((a?)+, ([a-z]*\s*)*): the same
 * strings as POSIX's regexec (the oracle) over every string of up to 6
 * characters of a small alphabet. */
static void test_patterns_repeating_empty_groups(void) {
    static const char *const patterns[] = {
        "^(a?)+$",     "^(a*)*b$",       "^([ab]*[ ]*)*$", "^(a|b?)*(ba)?$",  "^((a*)(b?))+$", "^(a*|b)+.$",
        "^(a?b?){2,3}$", "^(a?){2,}b$", "^((a?)*)*$",     "^(.?)*$",         "^a*(b*a?)+$",   "^(a?b)*(a*){1,2}$",
        "^((a|b)?(b|a)?)*b$", "^(a{0,2}b{0,1}){0,3}$", "^(ab|a?){3}$", "^()*a$", "^(()|a)+$"};
    static const char alphabet[] = "ab .";
    /* A sequence of parts that may all match nothing writes its non-empty
     * form quadratically in the parts: refused at the grammar's bound as it
     * grows (this one once took 1.3 GB before its refusal). */
    char big[64 * 1024] = "{\"type\":\"string\",\"pattern\":\"^(";
    for (int k = 0; k < 100; k++) {
        strcat(big, "(");
        for (int a = 0; a < 200; a++) strcat(big, "a?");
        strcat(big, ")*");
    }
    strcat(big, ")$\"}");
    char why[512] = "";
    char *gbnf = convert(big, why, sizeof why);
    CU_ASSERT_PTR_NULL(gbnf);
    CU_ASSERT(strstr(why, "a grammar too large") != NULL);
    free(gbnf);
#if !defined(__SANITIZE_ADDRESS__) && !defined(VT_TEST_UNDER_ASAN)
    /* and within a few hundred MB of address space (a child with that
     * limit: the unbounded build of the text ran out of it; under ASan,
     * whose shadow memory needs terabytes of address space, not checked) */
    pid_t child = fork();
    if (child == 0) {
        struct rlimit lim = {(rlim_t)400 << 20, (rlim_t)400 << 20};
        setrlimit(RLIMIT_AS, &lim);
        char w[512] = "";
        char *g = convert(big, w, sizeof w);
        _exit(!g && strstr(w, "a grammar too large") ? 0 : 1);
    }
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(child, &status, 0), child);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
    for (size_t i = 0; i < sizeof patterns / sizeof *patterns; i++) {
        regex_t re;
        CU_ASSERT_FATAL(regcomp(&re, patterns[i], REG_EXTENDED | REG_NOSUB) == 0);
        char schema[256];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":\"%s\"}", patterns[i]);
        vt_grammar *g = compile(schema);
        CU_ASSERT_PTR_NOT_NULL(g);
        if (!g) {
            regfree(&re);
            continue;
        }
        int wrong = 0;
        char text[16], quoted[20];
        for (int len = 0; len <= 6; len++) {
            int total = 1;
            for (int k = 0; k < len; k++) total *= 4;
            for (int v = 0; v < total; v++) {
                int code = v;
                for (int k = 0; k < len; k++, code /= 4) text[k] = alphabet[code % 4];
                text[len] = 0;
                snprintf(quoted, sizeof quoted, "\"%s\"", text);
                const bool want = regexec(&re, text, 0, NULL, 0) == 0;
                if (accepts(g, quoted) != want && wrong++ < 3)
                    printf("\n  %s: '%s' %s", patterns[i], text, want ? "refused" : "accepted");
            }
        }
        CU_ASSERT_EQUAL(wrong, 0);
        vt_grammar_free(g);
        regfree(&re);
    }
}

/* Rule names come from the schema's property names, cut to a length: long
 * names alike in their first characters, and deep nesting, still give
 * every rule a name of its own. */
static void test_rule_names_unique(void) {
    char schema[4096] = "{\"type\":\"object\",\"properties\":{";
    for (int i = 0; i <= 10; i++)
        snprintf(schema + strlen(schema), sizeof schema - strlen(schema),
                 "%s\"notification_preferences_for_the_user_account_%d\":{\"type\":\"integer\",\"minimum\":1,"
                 "\"maximum\":3}",
                 i ? "," : "", i);
    strcat(schema, "},\"required\":[");
    for (int i = 0; i <= 10; i++)
        snprintf(schema + strlen(schema), sizeof schema - strlen(schema),
                 "%s\"notification_preferences_for_the_user_account_%d\"", i ? "," : "", i);
    strcat(schema, "],\"additionalProperties\":false}");
    vt_grammar *g = compile(schema);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    char doc[2048] = "{";
    for (int i = 0; i <= 10; i++)
        snprintf(doc + strlen(doc), sizeof doc - strlen(doc), "%s\"notification_preferences_for_the_user_account_%d\":%d",
                 i ? "," : "", i, 1 + i % 3);
    strcat(doc, "}");
    CU_ASSERT_TRUE(accepts(g, doc));
    vt_grammar_free(g);
    /* arrays nested 40 deep around a string */
    char nested[1024] = "";
    for (int i = 0; i < 40; i++) strcat(nested, "{\"type\":\"array\",\"items\":");
    strcat(nested, "{\"type\":\"string\"}");
    for (int i = 0; i < 40; i++) strcat(nested, "}");
    g = compile(nested);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    char text[256] = "";
    for (int i = 0; i < 40; i++) strcat(text, "[");
    strcat(text, "\"x\"");
    for (int i = 0; i < 40; i++) strcat(text, "]");
    CU_ASSERT_TRUE(accepts(g, text));
    vt_grammar_free(g);
}

/* Thousands of properties, most sharing their first 48 characters (where a
 * rule name's hint is cut) and some spelled like the "-K" suffixes that
 * tell such rules apart: every rule name stays unique, the grammar parses
 * and takes a document of them. The schema is the size one that took the
 * converter tens of seconds when names were found by a scan (the time is
 * not asserted: benchmarks measure speed, not this suite). */
static void test_many_properties(void) {
    enum { N = 2000 };
    const char *prefix = "a_property_name_long_enough_to_be_cut_at_the_hint_limit_";
    vt_text_buf b = {0};
    vt_text_puts(&b, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < N; i++) vt_text_printf(&b, "%s\"%s%d\":{\"type\":\"integer\"}", i ? "," : "", prefix, i);
    for (int k = 2; k < 6; k++) vt_text_printf(&b, ",\"tail-%d\":{\"type\":\"string\"}", k);
    vt_text_puts(&b, "},\"required\":[");
    for (int i = 0; i < N; i += 2) vt_text_printf(&b, "%s\"%s%d\"", i ? "," : "", prefix, i);
    vt_text_puts(&b, "]}");
    CU_ASSERT_FATAL(!b.failed);
    char why[512] = "";
    char *gbnf = convert(b.data, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gbnf);
    /* each rule defined once */
    size_t n_rules = 0, dups = 0;
    vt_name_table seen = {0};
    for (const char *line = gbnf; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        const char *def = strstr(line, " ::= ");
        const char *eol = strchr(line, '\n');
        if (!def || (eol && def > eol)) continue;
        n_rules++;
        if (vt_name_get(&seen, line, (size_t)(def - line), NULL)) dups++;
        CU_ASSERT_FATAL(vt_name_set(&seen, line, (size_t)(def - line), 0));
    }
    vt_name_table_free(&seen);
    CU_ASSERT(n_rules > 2 * N);
    CU_ASSERT_EQUAL(dups, 0);
    vt_grammar *g = NULL;
    vt_error e = {0};
    CU_ASSERT_EQUAL_FATAL(vt_grammar_parse(gbnf, strlen(gbnf), &g, &e), VT_OK);
    vt_text_buf doc = {0};
    vt_text_puts(&doc, "{");
    for (int i = 0; i < N; i += 2) vt_text_printf(&doc, "%s\"%s%d\":%d", i ? "," : "", prefix, i, i);
    vt_text_puts(&doc, ",\"tail-5\":\"x\"}");
    CU_ASSERT_TRUE(accepts(g, doc.data));
    /* without a required one: refused */
    char *cut = strstr(doc.data, ",\"a_property");
    memmove(doc.data + 1, cut + 1, strlen(cut + 1) + 1);
    CU_ASSERT_FALSE(accepts(g, doc.data));
    vt_grammar_free(g);
    free(gbnf);
    free(doc.data);
    free(b.data);
}

/* Pointers are URI fragments (percent-escapes decoded, RFC 6901 section 6);
 * an optional property of schema false never appears; a deep schema's
 * refusal still says why. */
static void test_refs_false_properties_deep_paths(void) {
    vt_grammar *g = compile("{\"$defs\":{\"a b\":{\"const\":1},\"c/d\":{\"const\":2}},\"type\":\"array\","
                            "\"prefixItems\":[{\"$ref\":\"#/$defs/a%20b\"},{\"$ref\":\"#/$defs/c~1d\"}],\"items\":false}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "[1,2]"));
    CU_ASSERT_FALSE(accepts(g, "[2,1]"));
    vt_grammar_free(g);
    g = compile("{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1},\"b\":false},\"required\":[\"a\"]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(accepts(g, "{\"a\":1}"));
    CU_ASSERT_FALSE(accepts(g, "{\"a\":1,\"b\":1}"));
    vt_grammar_free(g);
    char why[512] = "";
    char *gbnf = convert("{\"type\":\"object\",\"properties\":{\"b\":false},\"required\":[\"b\"]}", why, sizeof why);
    CU_ASSERT_PTR_NULL(gbnf);
    CU_ASSERT(strstr(why, "admits no value") != NULL);
    free(gbnf);
    char deep[2048] = "";
    for (int i = 0; i < 80; i++) strcat(deep, "{\"type\":\"array\",\"items\":");
    strcat(deep, "{\"type\":\"string\"}");
    for (int i = 0; i < 80; i++) strcat(deep, "}");
    gbnf = convert(deep, why, sizeof why);
    CU_ASSERT_PTR_NULL(gbnf);
    if (!strstr(why, "schemas nested deeper than")) printf("\n  %s", why);
    CU_ASSERT(strstr(why, "schemas nested deeper than") != NULL);
    free(gbnf);
}

/* Bounds are exact integers as the JSON gave them, past what a double holds. */
static void test_integer_bounds_exact(void) {
    static const struct {
        const char *schema, *yes[2], *no[2];
    } cases[] = {
        {"{\"type\":\"integer\",\"minimum\":9007199254740993,\"maximum\":9007199254740993}",
         {"9007199254740993", NULL}, {"9007199254740992", "9007199254740994"}},
        {"{\"type\":\"integer\",\"exclusiveMinimum\":9007199254740992,\"maximum\":9007199254740994}",
         {"9007199254740993", "9007199254740994"}, {"9007199254740992", "9007199254740995"}},
        {"{\"type\":\"integer\",\"maximum\":-9999999999999999}", {"-9999999999999999", NULL},
         {"-9999999999999998", "0"}},
        {"{\"type\":\"integer\",\"minimum\":9999999999999999}", {"9999999999999999", NULL},
         {"9999999999999998", "0"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vt_grammar *g = compile(cases[i].schema);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        for (int k = 0; k < 2; k++) {
            if (cases[i].yes[k] && !accepts(g, cases[i].yes[k])) printf("\n  %s refused %s", cases[i].schema, cases[i].yes[k]);
            if (cases[i].no[k] && accepts(g, cases[i].no[k])) printf("\n  %s accepted %s", cases[i].schema, cases[i].no[k]);
            CU_ASSERT(!cases[i].yes[k] || accepts(g, cases[i].yes[k]));
            CU_ASSERT(!cases[i].no[k] || !accepts(g, cases[i].no[k]));
        }
        vt_grammar_free(g);
    }
    /* the refusal spells the bound as given */
    char why[512] = "";
    char *gbnf = convert("{\"type\":\"integer\",\"minimum\":12345678901234567}", why, sizeof why);
    CU_ASSERT_PTR_NULL(gbnf);
    CU_ASSERT(strstr(why, "minimum 12345678901234567: beyond") != NULL);
    free(gbnf);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"integer ranges are exact", test_integer_ranges_are_exact},
        {"whitespace is bounded", test_whitespace_is_bounded},
        {"properties: order, optional, only declared", test_properties_order_and_optional},
        {"strings, dates, patterns", test_strings_dates_patterns},
        {"enum, const, recursive $ref", test_enum_const_ref},
        {"allOf, oneOf, type arrays, array counts", test_combinations},
        {"rule names stay unique (long property names, deep nesting)", test_rule_names_unique},
        {"thousands of properties: unique rule names, a working grammar", test_many_properties},
        {"integer bounds exact past a double's precision", test_integer_bounds_exact},
        {"$ref fragments, optional false properties, deep refusals", test_refs_false_properties_deep_paths},
        {"patterns repeating groups that may match nothing", test_patterns_repeating_empty_groups},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("JSON Schema -> GBNF", NULL, NULL, tests);
    return vt_test_run();
}
