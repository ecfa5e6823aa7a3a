/* serve_grammar.c — see serve_grammar.h. */
#include "serve_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_schema_gbnf.h"
#include "vt/vt.h"

#define INVALID "invalid_request_error"

static json_t *given(const json_t *obj, const char *name) {
    json_t *v = json_object_get(obj, name);
    return v && !json_is_null(v) ? v : NULL;
}

/* Convert a schema given at param; *gbnf gets the grammar. */
static bool from_schema(const json_t *schema, const char *param, char **gbnf, vt_serve_error *err) {
    if (!json_is_object(schema) && !json_is_boolean(schema))
        return vt_serve_fail(err, 400, INVALID, param, "%s: expected a JSON Schema (an object)", param);
    char why[400] = "";
    *gbnf = vt_json_schema_to_gbnf(schema, why, sizeof why);
    if (!*gbnf) {
        if (strstr(why, "out of memory")) return vt_serve_fail(err, 500, "server_error", param, "%s: %s", param, why);
        return vt_serve_fail(err, 400, INVALID, param, "%s%s%s", param, why[0] == '/' ? "" : ": ", why);
    }
    return true;
}

/* The grammar (from any source) must compile: a schema can still make one
 * that does not (a $ref loop that consumes nothing is left recursion). */
static bool check_grammar(char **gbnf, const char *param, vt_serve_error *err) {
    char why[512] = "";
    if (vt_grammar_check(*gbnf, why, sizeof why) == VT_OK) return true;
    free(*gbnf);
    *gbnf = NULL;
    const char *what = strncmp(why, "grammar: ", 9) == 0 ? why + 9 : why;
    if (strcmp(param, "grammar") == 0) return vt_serve_fail(err, 400, INVALID, param, "grammar: %s", what);
    return vt_serve_fail(err, 400, INVALID, param, "%s: the grammar made from it is refused: %s", param, what);
}

static bool from_response_format(const json_t *rf, char **gbnf, vt_serve_error *err) {
    if (!json_is_object(rf))
        return vt_serve_fail(err, 400, INVALID, "response_format", "response_format: expected an object");
    const json_t *type = json_object_get(rf, "type");
    if (!json_is_string(type))
        return vt_serve_fail(err, 400, INVALID, "response_format.type",
                             "response_format.type: required: \"text\", \"json_object\" or \"json_schema\"");
    const char *t = json_string_value(type);
    if (strcmp(t, "text") == 0) return true;
    if (strcmp(t, "json_object") == 0) {
        /* llama-server also takes a schema here */
        const json_t *schema = given(rf, "schema");
        if (schema) return from_schema(schema, "response_format.schema", gbnf, err);
        *gbnf = vt_json_object_gbnf();
        return *gbnf ? true : vt_serve_fail(err, 500, "server_error", NULL, "out of memory");
    }
    if (strcmp(t, "json_schema") != 0)
        return vt_serve_fail(err, 400, INVALID, "response_format.type",
                             "response_format.type: '%.40s' is not one of \"text\", \"json_object\", \"json_schema\"",
                             t);
    const json_t *js = given(rf, "json_schema");
    if (!json_is_object(js))
        return vt_serve_fail(err, 400, INVALID, "response_format.json_schema",
                             "response_format.json_schema: required, an object {\"name\", \"schema\", \"strict\"}");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)js, key, v) {
        char param[96];
        snprintf(param, sizeof param, "response_format.json_schema.%.40s", key);
        if (strcmp(key, "name") == 0 || strcmp(key, "description") == 0) {
            if (!json_is_string(v)) return vt_serve_fail(err, 400, INVALID, param, "%s: expected a string", param);
            /* OpenAI's rule; a missing name is taken, as llama-server takes it */
            if (strcmp(key, "name") == 0 && !vt_serve_name_ok(json_string_value(v)))
                return vt_serve_fail(err, 400, INVALID, param,
                                     "%s: 1 to 64 letters, digits, '_' or '-' (got '%.70s')", param,
                                     json_string_value(v));
        } else if (strcmp(key, "strict") == 0) {
            /* the output always follows the schema: strict or not, the same */
            if (!json_is_boolean(v) && !json_is_null(v))
                return vt_serve_fail(err, 400, INVALID, param, "%s: expected true or false", param);
        } else if (strcmp(key, "schema") != 0) {
            return vt_serve_fail(err, 400, INVALID, param, "%s: unknown field (known: name, description, schema, strict)",
                                 param);
        }
    }
    const json_t *schema = given(js, "schema");
    if (!schema) { /* no schema: any JSON object, as OpenAI's json_object */
        *gbnf = vt_json_object_gbnf();
        return *gbnf ? true : vt_serve_fail(err, 500, "server_error", NULL, "out of memory");
    }
    return from_schema(schema, "response_format.json_schema.schema", gbnf, err);
}

bool vt_serve_parse_grammar(const json_t *root, char **gbnf, vt_serve_error *err) {
    *gbnf = NULL;
    const json_t *rf = given(root, "response_format");
    const json_t *grammar = given(root, "grammar");
    const json_t *schema = given(root, "json_schema");
    const bool rf_constrains = rf && !(json_is_object(rf) && json_is_string(json_object_get(rf, "type")) &&
                                       strcmp(json_string_value(json_object_get(rf, "type")), "text") == 0);
    if ((rf_constrains ? 1 : 0) + (grammar ? 1 : 0) + (schema ? 1 : 0) > 1)
        return vt_serve_fail(err, 400, INVALID, grammar ? "grammar" : "json_schema",
                             "give one of response_format, json_schema and grammar");
    const char *param = "response_format";
    bool ok = true;
    if (grammar) {
        param = "grammar";
        if (!json_is_string(grammar) || json_string_length(grammar) == 0)
            return vt_serve_fail(err, 400, INVALID, "grammar", "grammar: expected GBNF text (a non-empty string)");
        if (memchr(json_string_value(grammar), '\0', json_string_length(grammar)))
            return vt_serve_fail(err, 400, INVALID, "grammar", "grammar: contains a NUL character");
        *gbnf = strdup(json_string_value(grammar));
        if (!*gbnf) return vt_serve_fail(err, 500, "server_error", NULL, "out of memory");
    } else if (schema) {
        param = "json_schema";
        ok = from_schema(schema, "json_schema", gbnf, err);
    } else if (rf) {
        ok = from_response_format(rf, gbnf, err);
    }
    if (!ok || !*gbnf) return ok;
    return check_grammar(gbnf, param, err);
}
