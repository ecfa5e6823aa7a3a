/* test_tool_calls.c — the tool-call parser and the forced-call grammar
 * (core/server/tool_calls.c) on their own: each family's syntax, several
 * calls, content before them, what stays content (malformed JSON, an
 * unknown function, text after the calls, too many calls), markers inside
 * JSON strings, the streaming hold-back, the format detected from the real
 * templates in tests/data, and the grammar accepting exactly the family's
 * call syntax. The server's use of it is test_serve_tools'. */
#include <ctype.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "tool_calls.h"
#include "util.h"

#define TEMPLATES VT_TEST_DATA_DIR "/chat_templates/"

static json_t *tools;

static int setup(void) {
    json_error_t e;
    tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                       "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"enum\": [\"Paris\", "
                       "\"Oslo\"]}, \"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}}, "
                       "\"required\": [\"city\", \"days\"]}}},"
                       " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]",
                       0, &e);
    return tools ? 0 : 1;
}

static int teardown(void) {
    json_decref(tools);
    return 0;
}

/* Parse text; the calls (NULL when none) and the content length. */
static json_t *parse(vt_tool_format f, const char *text, size_t max_calls, size_t *content_len) {
    vt_tool_parse p;
    CU_ASSERT_TRUE(vt_tool_calls_parse(f, text, strlen(text), tools, max_calls, &p));
    *content_len = p.content_len;
    return p.calls;
}

/* Whether id is Mistral's form: exactly 9 letters and digits (its
 * templates raise an exception on any other id in the history). */
static bool mistral_id(const char *id) {
    size_t n = 0;
    while (id[n] && isalnum((unsigned char)id[n])) n++;
    return n == 9 && !id[n];
}

/* Call k has this name and these arguments (compared as JSON values), an
 * id ("call_" and 24 hex digits, or Mistral's 9 letters and digits) and
 * type "function". */
static void check_call(const json_t *calls, size_t k, const char *name, const char *args_json) {
    const json_t *call = json_array_get(calls, k);
    CU_ASSERT_PTR_NOT_NULL_FATAL(call);
    const char *id = json_string_value(json_object_get(call, "id"));
    CU_ASSERT_TRUE(id && ((strncmp(id, "call_", 5) == 0 && strlen(id) == 29) || mistral_id(id)));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(call, "type")), "function");
    const json_t *fn = json_object_get(call, "function");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(fn, "name")), name);
    const char *arguments = json_string_value(json_object_get(fn, "arguments"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(arguments);
    json_t *got = json_loads(arguments, 0, NULL), *want = json_loads(args_json, 0, NULL);
    CU_ASSERT_TRUE(got && want && json_equal(got, want));
    json_decref(got);
    json_decref(want);
}

/* The whole text stays content. */
static void check_content(vt_tool_format f, const char *text) {
    size_t n;
    json_t *calls = parse(f, text, SIZE_MAX, &n);
    CU_ASSERT_PTR_NULL(calls);
    CU_ASSERT_EQUAL(n, strlen(text));
    json_decref(calls);
}

static void test_hermes(void) {
    size_t n;
    const char *one = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
                      "</tool_call>";
    json_t *calls = parse(VT_TOOL_FORMAT_HERMES, one, SIZE_MAX, &n);
    CU_ASSERT_EQUAL(json_array_size(calls), 1);
    CU_ASSERT_EQUAL(n, 0);
    check_call(calls, 0, "get_weather", "{\"city\": \"Paris\", \"days\": 2}");
    json_decref(calls);

    /* content before, two calls, a closing tag and nested braces inside strings */
    const char *two = "Let me look.\n\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"x</tool_call>{}\","
                      "\"days\":1}}</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n";
    calls = parse(VT_TOOL_FORMAT_HERMES, two, SIZE_MAX, &n);
    CU_ASSERT_EQUAL(json_array_size(calls), 2);
    CU_ASSERT_EQUAL(n, strlen("Let me look."));
    check_call(calls, 0, "get_weather", "{\"city\": \"x</tool_call>{}\", \"days\": 1}");
    check_call(calls, 1, "now", "{}");
    /* ids differ */
    CU_ASSERT_STRING_NOT_EQUAL(json_string_value(json_object_get(json_array_get(calls, 0), "id")),
                               json_string_value(json_object_get(json_array_get(calls, 1), "id")));
    json_decref(calls);
    /* parallel_tool_calls false: two calls are not one, the answer is content */
    calls = parse(VT_TOOL_FORMAT_HERMES, two, 1, &n);
    CU_ASSERT_PTR_NULL(calls);
    CU_ASSERT_EQUAL(n, strlen(two));

    check_content(VT_TOOL_FORMAT_HERMES, "no calls here");
    check_content(VT_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }</tool_call>");
    check_content(VT_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>");
    check_content(VT_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call> and more");
    check_content(VT_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"now\", \"arguments\": {}}");
    check_content(VT_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"now\", \"arguments\": \"{}\"}</tool_call>");
    check_content(VT_TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"now\", \"name\": \"now\", \"arguments\": {}}</tool_call>");
    check_content(VT_TOOL_FORMAT_HERMES, "<tool_call>[1]</tool_call>");
    /* another family's syntax is content */
    check_content(VT_TOOL_FORMAT_HERMES, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}]");
}

static void test_llama3(void) {
    size_t n;
    json_t *calls = parse(VT_TOOL_FORMAT_LLAMA3, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"days\": 3}}\n",
                          SIZE_MAX, &n);
    CU_ASSERT_EQUAL(json_array_size(calls), 1);
    CU_ASSERT_EQUAL(n, 0);
    check_call(calls, 0, "get_weather", "{\"city\": \"Oslo\", \"days\": 3}");
    json_decref(calls);
    calls = parse(VT_TOOL_FORMAT_LLAMA3, "Sure.<|python_tag|>{\"name\": \"now\", \"parameters\": {}}", SIZE_MAX, &n);
    CU_ASSERT_EQUAL(json_array_size(calls), 1);
    CU_ASSERT_EQUAL(n, strlen("Sure."));
    check_call(calls, 0, "now", "{}");
    json_decref(calls);
    /* JSON that is an answer, not a call */
    check_content(VT_TOOL_FORMAT_LLAMA3, "{\"answer\": 42}");
    check_content(VT_TOOL_FORMAT_LLAMA3, "{\"name\": \"now\", \"parameters\": {}} and then");
    check_content(VT_TOOL_FORMAT_LLAMA3, "The call is {\"name\": \"now\", \"parameters\": {}}");
    check_content(VT_TOOL_FORMAT_LLAMA3, "{\"name\": \"now\", \"parameters\": {");
}

static void test_mistral(void) {
    size_t n;
    json_t *calls = parse(VT_TOOL_FORMAT_MISTRAL,
                          "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1}}, "
                          "{\"name\": \"now\", \"arguments\": {}}]",
                          SIZE_MAX, &n);
    CU_ASSERT_EQUAL(json_array_size(calls), 2);
    CU_ASSERT_EQUAL(n, 0);
    check_call(calls, 0, "get_weather", "{\"city\": \"Paris\", \"days\": 1}");
    check_call(calls, 1, "now", "{}");
    json_decref(calls);
    calls = parse(VT_TOOL_FORMAT_MISTRAL, "Ok [TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\", \"days\": 7}",
                  SIZE_MAX, &n);
    CU_ASSERT_EQUAL(json_array_size(calls), 2);
    CU_ASSERT_EQUAL(n, 2);
    check_call(calls, 0, "now", "{}");
    check_call(calls, 1, "get_weather", "{\"city\": \"Oslo\", \"days\": 7}");
    /* Mistral's ids: 9 letters and digits (Nemo's and Small 3.2's templates
     * refuse any other when the call comes back), one call's not another's */
    const char *id0 = json_string_value(json_object_get(json_array_get(calls, 0), "id"));
    const char *id1 = json_string_value(json_object_get(json_array_get(calls, 1), "id"));
    CU_ASSERT_TRUE(id0 && id1 && mistral_id(id0) && mistral_id(id1) && strcmp(id0, id1) != 0);
    json_decref(calls);
    check_content(VT_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS][]");
    check_content(VT_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS][{\"name\": \"nope\", \"arguments\": {}}]");
    check_content(VT_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]now{}");
    check_content(VT_TOOL_FORMAT_MISTRAL, "[TOOL_CALLS][ARGS]{}");
    /* no format: never calls */
    check_content(VT_TOOL_FORMAT_NONE, "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>");
}

static void test_content_prefix_while_streaming(void) {
    const vt_tool_format H = VT_TOOL_FORMAT_HERMES;
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(H, "Hello", 5), 5);
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(H, "Hello <tool", 11), 5); /* the space may precede a call */
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(H, "Hello <tools are", 16), 16);
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(H, "Hi\n<tool_call>{\"na", 18), 2);
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(H, "Hi <", 4), 2);
    const vt_tool_format L = VT_TOOL_FORMAT_LLAMA3;
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(L, "  ", 2), 0);
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(L, " {\"name\"", 8), 0);
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(L, "Yes <|python", 12), 3);
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(VT_TOOL_FORMAT_MISTRAL, "a [TOOL_", 8), 1);
    CU_ASSERT_EQUAL(vt_tool_calls_content_prefix(VT_TOOL_FORMAT_NONE, "a <tool_call>", 13), 13);
    /* never shrinks as text grows, over every prefix of a real answer */
    const char *answer = "I will call it.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
    size_t last = 0;
    for (size_t k = 0; k <= strlen(answer); k++) {
        size_t p = vt_tool_calls_content_prefix(H, answer, k);
        CU_ASSERT_TRUE(p >= last && p <= k);
        last = p;
    }
    CU_ASSERT_EQUAL(last, strlen("I will call it."));
}

static vt_tool_format detect_file(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s%s", TEMPLATES, name);
    size_t len = 0;
    char *text = vt_test_read_file(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    vt_tool_format f = vt_tool_format_detect(text);
    free(text);
    return f;
}

static void test_format_from_real_templates(void) {
    CU_ASSERT_EQUAL(detect_file("Qwen-Qwen3-0.6B.jinja"), VT_TOOL_FORMAT_HERMES);
    CU_ASSERT_EQUAL(detect_file("Qwen-Qwen2.5-7B-Instruct.jinja"), VT_TOOL_FORMAT_HERMES);
    CU_ASSERT_EQUAL(detect_file("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"), VT_TOOL_FORMAT_HERMES);
    CU_ASSERT_EQUAL(detect_file("meta-llama-Llama-3.1-8B-Instruct.jinja"), VT_TOOL_FORMAT_LLAMA3);
    CU_ASSERT_EQUAL(detect_file("meta-llama-Llama-3.2-3B-Instruct.jinja"), VT_TOOL_FORMAT_LLAMA3);
    CU_ASSERT_EQUAL(detect_file("mistralai-Mistral-Nemo-Instruct-2407.jinja"), VT_TOOL_FORMAT_MISTRAL);
    CU_ASSERT_EQUAL(detect_file("Mistral-Small-3.2-24B-Instruct-2506.jinja"), VT_TOOL_FORMAT_MISTRAL);
    CU_ASSERT_EQUAL(detect_file("ibm-granite-granite-4.0.jinja"), VT_TOOL_FORMAT_HERMES);
    CU_ASSERT_EQUAL(detect_file("unsloth-mistral-Devstral-Small-2507.jinja"), VT_TOOL_FORMAT_MISTRAL);
    CU_ASSERT_EQUAL(detect_file("google-gemma-2-2b-it.jinja"), VT_TOOL_FORMAT_NONE);
    /* tag syntaxes around non-JSON arguments: not parsed */
    CU_ASSERT_EQUAL(detect_file("Qwen3-Coder.jinja"), VT_TOOL_FORMAT_NONE);
    CU_ASSERT_EQUAL(detect_file("GLM-4.6.jinja"), VT_TOOL_FORMAT_NONE);
    CU_ASSERT_EQUAL(detect_file("meetkai-functionary-medium-v3.1.jinja"), VT_TOOL_FORMAT_NONE);
}

/* text is a whole sentence of the GBNF grammar g. */
static bool grammar_accepts(const char *gbnf, const char *text) {
    vt_grammar *g = NULL;
    vt_error e = {0};
    if (vt_grammar_parse(gbnf, strlen(gbnf), &g, &e) != VT_OK) {
        printf("\n  grammar refused: %s\n%s", e.msg, gbnf);
        return false;
    }
    vt_grammar_state *s = NULL;
    bool ok = vt_grammar_state_create(g, &s, NULL) == VT_OK && vt_grammar_state_feed(s, text, strlen(text)) &&
              vt_grammar_state_can_end(s);
    vt_grammar_state_free(s);
    vt_grammar_free(g);
    return ok;
}

static void test_forced_call_grammar(void) {
    char why[400] = "";
    char *g = vt_tool_call_gbnf(VT_TOOL_FORMAT_HERMES, tools, "get_weather", false, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const char *good = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 5}}\n"
                       "</tool_call>";
    CU_ASSERT_TRUE(grammar_accepts(g, good));
    CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", "
                                       "\"days\": 5}}\n</tool_call>"));
    CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", "
                                       "\"days\": 9}}\n</tool_call>"));
    free(g);
    /* any tool, several: each sentence parses back as those calls */
    g = vt_tool_call_gbnf(VT_TOOL_FORMAT_HERMES, tools, NULL, true, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const char *two = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                      "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1}}\n</tool_call>";
    CU_ASSERT_TRUE(grammar_accepts(g, two));
    size_t n;
    json_t *calls = parse(VT_TOOL_FORMAT_HERMES, two, SIZE_MAX, &n);
    CU_ASSERT_EQUAL(json_array_size(calls), 2);
    json_decref(calls);
    free(g);
    g = vt_tool_call_gbnf(VT_TOOL_FORMAT_MISTRAL, tools, NULL, true, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(grammar_accepts(g, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"now\", "
                                      "\"arguments\": {}}]"));
    free(g);
    g = vt_tool_call_gbnf(VT_TOOL_FORMAT_LLAMA3, tools, "now", true, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(grammar_accepts(g, "{\"name\": \"now\", \"parameters\": {}}"));
    CU_ASSERT_FALSE(grammar_accepts(g, "{\"name\": \"now\", \"arguments\": {}}"));
    free(g);
    /* a tool without parameters has an empty parameter list (OpenAI's rule):
     * its forced call's arguments are {} and nothing else */
    g = vt_tool_call_gbnf(VT_TOOL_FORMAT_HERMES, tools, "now", false, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(grammar_accepts(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
    CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"now\", \"arguments\": {\"x\": 3.8}}\n</tool_call>"));
    free(g);
    /* refusals name what they are about */
    CU_ASSERT_PTR_NULL(vt_tool_call_gbnf(VT_TOOL_FORMAT_NONE, tools, NULL, true, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "no tool-call syntax"));
    json_t *bad = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
                             "\"object\", \"properties\": {\"x\": {\"type\": \"string\", \"not\": {}}}}}}]",
                             0, NULL);
    CU_ASSERT_PTR_NULL(vt_tool_call_gbnf(VT_TOOL_FORMAT_HERMES, bad, NULL, true, why, sizeof why));
    /* the path as the client wrote it, not inside the call's wrapper */
    const char *want = "tools[0].function.parameters/properties/x: 'not' is not supported";
    CU_ASSERT_EQUAL(strncmp(why, want, strlen(want)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "(tool f)"));
    json_decref(bad);
}

/* Tools as pydantic writes them (the openai SDK's pydantic_function_tool):
 * nested models in "$defs", pointed to from the parameters or as the
 * parameters themselves. A reference counts from the tool's parameters, so
 * it still finds its target inside the call's wrapper, alone or as one of
 * several; a "$ref" inside data (a const, written compact) is the data's. */
static void test_tools_with_defs(void) {
    json_t *defs = json_loads(
        "[{\"type\": \"function\", \"function\": {\"name\": \"book\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"guest\": {\"$ref\": \"#/$defs/Guest\"}, \"tag\": {\"const\": {\"$ref\": \"#/x\"}}}, "
        "\"required\": [\"guest\", \"tag\"], \"$defs\": {\"Guest\": {\"type\": \"object\", \"properties\": {\"name\": "
        "{\"enum\": [\"Ann\"]}}, \"required\": [\"name\"], \"additionalProperties\": false}}}}},"
        " {\"type\": \"function\", \"function\": {\"name\": \"count\", \"parameters\": {\"$ref\": \"#/$defs/C\", "
        "\"$defs\": {\"C\": {\"type\": \"object\", \"properties\": {\"n\": {\"enum\": [7]}}, \"required\": [\"n\"], "
        "\"additionalProperties\": false}}}}}]",
        0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(defs);
    const char *book = "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"guest\": {\"name\": \"Ann\"}, \"tag\": "
                       "{\"$ref\":\"#/x\"}}}\n</tool_call>";
    const char *count = "<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 7}}\n</tool_call>";
    char why[400] = "";
    for (int named = 0; named < 2; named++) {
        char *g = vt_tool_call_gbnf(VT_TOOL_FORMAT_HERMES, defs, named ? "book" : NULL, false, why, sizeof why);
        if (!g) printf("\n  refused: %s", why);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        CU_ASSERT_TRUE(grammar_accepts(g, book));
        CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"guest\": {\"name\": "
                                           "\"Bob\"}, \"tag\": {\"$ref\":\"#/x\"}}}\n</tool_call>"));
        /* the const is the text it holds, not a reference rewritten */
        CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"guest\": {\"name\": "
                                           "\"Ann\"}, \"tag\": {\"$ref\":\"#/properties/arguments/x\"}}}\n</tool_call>"));
        CU_ASSERT_EQUAL(grammar_accepts(g, count), !named);
        free(g);
    }
    char *g = vt_tool_call_gbnf(VT_TOOL_FORMAT_HERMES, defs, "count", false, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(grammar_accepts(g, count));
    CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"count\", \"arguments\": {\"n\": 8}}\n</tool_call>"));
    free(g);
    json_decref(defs);
    /* a property named like a data keyword ("default") is a schema whose
     * reference counts from the parameters too */
    json_t *named = json_loads(
        "[{\"type\": \"function\", \"function\": {\"name\": \"set\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"default\": {\"$ref\": \"#/$defs/V\"}}, \"required\": [\"default\"], \"$defs\": {\"V\": "
        "{\"enum\": [\"on\"]}}}}}]",
        0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(named);
    g = vt_tool_call_gbnf(VT_TOOL_FORMAT_HERMES, named, NULL, false, why, sizeof why);
    if (!g) printf("\n  refused: %s", why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_TRUE(grammar_accepts(g, "<tool_call>\n{\"name\": \"set\", \"arguments\": {\"default\": \"on\"}}\n</tool_call>"));
    CU_ASSERT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"set\", \"arguments\": {\"default\": \"off\"}}\n</tool_call>"));
    free(g);
    json_decref(named);
}

/* arguments as the model wrote them: every number the same text where a
 * double holds it (3.8, not the 3.7999999999999998 of 17 digits), keys in
 * their order, strings escaped, nothing but the whitespace taken out */
static void test_arguments_text(void) {
    static const struct {
        const char *written, *want;
    } cases[] = {
        {"{\"x\": 3.8, \"y\": 0.1, \"z\": -2.5e-7}", "{\"x\":3.8,\"y\":0.1,\"z\":-2.5e-07}"},
        {"{\"b\": 1, \"a\": 2.0, \"c\": 1e300, \"d\": 0.30000000000000004}",
         "{\"b\":1,\"a\":2.0,\"c\":1e+300,\"d\":0.30000000000000004}"},
        {"{\"s\": \"a\\\"b\\n\\u00e9\\u0001\", \"t\": [true, false, null, {}, []]}",
         "{\"s\":\"a\\\"b\\n\xc3\xa9\\u0001\",\"t\":[true,false,null,{},[]]}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *v = json_loads(cases[i].written, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        char *text = vt_tool_arguments_text(v);
        CU_ASSERT_PTR_NOT_NULL_FATAL(text);
        if (strcmp(text, cases[i].want) != 0) printf("\n  %s -> %s, want %s", cases[i].written, text, cases[i].want);
        CU_ASSERT_STRING_EQUAL(text, cases[i].want);
        json_t *back = json_loads(text, 0, NULL); /* and the same value */
        CU_ASSERT_TRUE(back && json_equal(back, v));
        json_decref(back);
        free(text);
        json_decref(v);
    }
}

int main(void) {
    CU_TestInfo tests[] = {
        {"arguments keep the model's numbers and key order", test_arguments_text},
        {"Hermes/Qwen <tool_call>", test_hermes},
        {"Llama 3 JSON and <|python_tag|>", test_llama3},
        {"Mistral [TOOL_CALLS]", test_mistral},
        {"streaming holds back only what may be a call", test_content_prefix_while_streaming},
        {"format from the real templates", test_format_from_real_templates},
        {"the forced-call grammar", test_forced_call_grammar},
        {"tools whose parameters keep their models in $defs", test_tools_with_defs},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("tool calls", setup, teardown, tests);
    return vt_test_run();
}
