/* fuzz_json_schema.c — libFuzzer target for vt serve's structured-output
 * fields (core/server/serve_grammar.c) and the JSON Schema -> GBNF
 * converter (core/server/json_schema_gbnf.c).
 *
 * Input layout: byte 0 picks where the rest (a JSON text) goes: 0 the
 * top-level json_schema field, 1 response_format.json_schema.schema, 2 the
 * whole response_format, 3 the grammar field as a JSON string of the bytes;
 * its value mod 4.
 *
 * What must hold for every input, besides "no crash, no leak, no UB, no
 * hang" (schema depth and grammar size are bounded):
 *  - a refusal is a 400 (500 only for out of memory) with a message and a
 *    param naming one of the three fields;
 *  - an accepted request's grammar compiles (vt_grammar_check), and the
 *    converter's own output for the same schema is that grammar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "json_schema_gbnf.h"
#include "serve_grammar.h"
#include "vt/vt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail_check(const char *what) {
    fprintf(stderr, "fuzz_json_schema: invariant broken: %s\n", what);
    abort();
}

#define CHECK(cond)                     \
    do {                                \
        if (!(cond)) fail_check(#cond); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int where = data[0] % 4;
    json_t *value = NULL;
    if (where == 3) {
        value = json_stringn_nocheck((const char *)data + 1, size - 1);
    } else {
        json_error_t jerr;
        value = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    }
    if (!value) return 0;
    json_t *root = json_object();
    if (where == 0) json_object_set(root, "json_schema", value);
    else if (where == 1)
        json_object_set_new(root, "response_format",
                            json_pack("{s:s,s:{s:s,s:O}}", "type", "json_schema", "json_schema", "name", "n", "schema",
                                      value));
    else if (where == 2) json_object_set(root, "response_format", value);
    else json_object_set(root, "grammar", value);

    char *gbnf = NULL;
    vt_serve_error err = {0};
    if (vt_serve_parse_grammar(root, &gbnf, &err)) {
        if (gbnf) CHECK(vt_grammar_check(gbnf, NULL, 0) == VT_OK);
        if (gbnf && where <= 1 && !json_is_null(value)) { /* the converter alone gives the same grammar (null: none given) */
            char why[256];
            char *again = vt_json_schema_to_gbnf(value, why, sizeof why);
            CHECK(again && strcmp(again, gbnf) == 0);
            free(again);
        }
        free(gbnf);
    } else {
        CHECK(gbnf == NULL);
        CHECK(err.status == 400 || err.status == 500);
        CHECK(err.message[0] != 0);
        CHECK(err.status == 500 || strncmp(err.param, "json_schema", 11) == 0 ||
              strncmp(err.param, "response_format", 15) == 0 || strcmp(err.param, "grammar") == 0);
    }
    json_decref(root);
    json_decref(value);
    return 0;
}
