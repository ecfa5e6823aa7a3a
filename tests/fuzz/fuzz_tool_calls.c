/* fuzz_tool_calls.c — libFuzzer target for the tool-call parser and the
 * forced-call grammar (core/server/tool_calls.c).
 *
 * Input layout: byte 0 picks the mode: bit 2 clear: parse; the format is
 * its value mod 4 (none, hermes, llama3, mistral), byte 1 the most calls
 * allowed (0: any, else its value mod 4), the rest a generated answer,
 * parsed against two fixed tools. Bit 2 set: the rest is a tools array
 * (JSON) whose forced-call grammar is built in every format.
 *
 * What must hold for every input, besides "no crash, no leak, no UB":
 *  - the content is a prefix of the text; calls, when any, are no more than
 *    allowed, each with an id ("call_" and 24 hex digits; Mistral's format:
 *    9 letters and digits), type "function", a name among the
 *    tools and arguments that parse as a JSON object;
 *  - while streaming, the content released for every prefix of the text
 *    grows with the prefix and never reaches into what the whole text
 *    turns out to be calls (text once sent as content cannot be taken back);
 *  - a grammar that is built compiles, or its schema is the one refused. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tool_calls.h"
#include "vt/vt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail_check(const char *what) {
    fprintf(stderr, "fuzz_tool_calls: invariant broken: %s\n", what);
    abort();
}

#define CHECK(cond)                     \
    do {                                \
        if (!(cond)) fail_check(#cond); \
    } while (0)

static const char TOOLS[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                            "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}},"
                            " {\"type\": \"function\", \"function\": {\"name\": \"now\"}}]";

static void fuzz_parse(vt_tool_format f, size_t max_calls, const char *text, size_t n) {
    json_t *tools = json_loads(TOOLS, 0, NULL);
    CHECK(tools);
    vt_tool_parse p;
    if (!vt_tool_calls_parse(f, text, n, tools, max_calls, &p)) {
        json_decref(tools);
        return; /* out of memory */
    }
    CHECK(p.content_len <= n);
    if (p.calls) {
        CHECK(json_array_size(p.calls) >= 1 && json_array_size(p.calls) <= max_calls);
        size_t i;
        json_t *call;
        json_array_foreach(p.calls, i, call) {
            const char *id = json_string_value(json_object_get(call, "id"));
            if (f == VT_TOOL_FORMAT_MISTRAL) {
                size_t k = 0;
                while (id && isalnum((unsigned char)id[k])) k++;
                CHECK(id && k == 9 && !id[k]);
            } else {
                CHECK(id && strncmp(id, "call_", 5) == 0 && strlen(id) == 29);
            }
            CHECK(json_is_string(json_object_get(call, "type")));
            const json_t *fn = json_object_get(call, "function");
            const char *name = json_string_value(json_object_get(fn, "name"));
            CHECK(name && (strcmp(name, "get_weather") == 0 || strcmp(name, "now") == 0));
            const char *args = json_string_value(json_object_get(fn, "arguments"));
            CHECK(args);
            json_t *a = json_loads(args, 0, NULL);
            CHECK(json_is_object(a));
            json_decref(a);
        }
    } else {
        CHECK(p.content_len == n);
    }
    /* the streaming hold-back at 65 prefixes, the empty and the whole text among them */
    size_t last = 0;
    for (size_t i = 0; i <= 64; i++) {
        size_t k = n * i / 64, c = vt_tool_calls_content_prefix(f, text, k);
        CHECK(c <= k);
        CHECK(c >= last);
        CHECK(!p.calls || c <= p.content_len);
        last = c;
    }
    json_decref(p.calls);
    json_decref(tools);
}

static void fuzz_grammar(const char *text, size_t n) {
    json_t *tools = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_array(tools)) {
        json_decref(tools);
        return;
    }
    for (int f = VT_TOOL_FORMAT_NONE; f <= VT_TOOL_FORMAT_MISTRAL; f++) {
        char why[400] = "";
        char *g = vt_tool_call_gbnf((vt_tool_format)f, tools, NULL, f != VT_TOOL_FORMAT_LLAMA3, why, sizeof why);
        CHECK(g || why[0]);
        if (g) {
            char gwhy[512] = "";
            /* a schema may still make a grammar the checker refuses (left
             * recursion through $ref); the server answers 400 then */
            (void)vt_grammar_check(g, gwhy, sizeof gwhy);
        }
        free(g);
    }
    json_decref(tools);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *text = (const char *)data + 2;
    if (data[0] & 4) {
        fuzz_grammar(text, size - 2);
        return 0;
    }
    fuzz_parse((vt_tool_format)(data[0] % 4), data[1] ? (size_t)(data[1] % 4) : SIZE_MAX, text, size - 2);
    return 0;
}
