/* tool_calls.c — see tool_calls.h. */
#include "tool_calls.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json_schema_gbnf.h"
#include "text_buf.h"

static const char HERMES_OPEN[] = "<tool_call>", HERMES_CLOSE[] = "</tool_call>";
static const char PYTHON_TAG[] = "<|python_tag|>";
static const char MISTRAL_CALLS[] = "[TOOL_CALLS]", MISTRAL_ARGS[] = "[ARGS]";

vt_tool_format vt_tool_format_detect(const char *t) {
    if (!t) return VT_TOOL_FORMAT_NONE;
    /* Qwen3-Coder, functionary and GLM write calls as XML-like tags around
     * the JSON-less arguments, a syntax this parser does not read: their
     * calls stay content rather than being forced into JSON they were not
     * trained on. */
    if (strstr(t, "<function=") || strstr(t, "<arg_key>")) return VT_TOOL_FORMAT_NONE;
    if (strstr(t, HERMES_OPEN)) return VT_TOOL_FORMAT_HERMES;
    if (strstr(t, MISTRAL_CALLS)) return VT_TOOL_FORMAT_MISTRAL;
    /* Llama 3.1+ templates name the tag for built-in tools and ask for the
     * bare {"name", "parameters"} object for the others. */
    if (strstr(t, PYTHON_TAG) || (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")))
        return VT_TOOL_FORMAT_LLAMA3;
    return VT_TOOL_FORMAT_NONE;
}

const char *vt_tool_format_name(vt_tool_format f) {
    switch (f) {
    case VT_TOOL_FORMAT_HERMES: return "hermes";
    case VT_TOOL_FORMAT_LLAMA3: return "llama3";
    case VT_TOOL_FORMAT_MISTRAL: return "mistral";
    default: return "none";
    }
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct cursor {
    const char *s;
    size_t n, pos;
} cursor;

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void skip_space(cursor *c) {
    while (c->pos < c->n && is_space(c->s[c->pos])) c->pos++;
}

static bool take(cursor *c, const char *lit) {
    size_t k = strlen(lit);
    if (c->n - c->pos < k || memcmp(c->s + c->pos, lit, k) != 0) return false;
    c->pos += k;
    return true;
}

/* Position of lit in s[from, n), or n. */
static size_t find(const char *s, size_t n, size_t from, const char *lit) {
    size_t k = strlen(lit);
    for (size_t i = from; i + k <= n; i++)
        if (memcmp(s + i, lit, k) == 0) return i;
    return n;
}

/* One JSON value (an object or array) starting at the cursor, which moves
 * past it; NULL if none parses there. */
static json_t *take_json(cursor *c) {
    json_error_t e;
    json_t *v = json_loadb(c->s + c->pos, c->n - c->pos, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &e);
    if (v) c->pos += (size_t)e.position;
    return v;
}

static bool tool_named(const json_t *tools, const char *name) {
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *nm = json_object_get(json_object_get(t, "function"), "name");
        if (json_is_string(nm) && strcmp(json_string_value(nm), name) == 0) return true;
    }
    return false;
}

/* A call id, unique in this process and unlikely to repeat across
 * restarts; drawn from nothing the sampler uses. "call_" and 24 hex digits,
 * or for Mistral's format 9 letters and digits: its templates refuse any
 * other id when the call comes back in the history. */
static void new_call_id(vt_tool_format f, char out[40]) {
    static atomic_uint_fast64_t counter;
    uint64_t k = atomic_fetch_add(&counter, 1);
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    uint64_t x = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^ k;
    x += 0x9e3779b97f4a7c15u; /* splitmix64: spreads the bits of the seed */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    x ^= x >> 31;
    if (f != VT_TOOL_FORMAT_MISTRAL) {
        snprintf(out, 40, "call_%016llx%08llx", (unsigned long long)x, (unsigned long long)(k & 0xffffffffu));
        return;
    }
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    x ^= k * 0x9e3779b97f4a7c15u; /* the counter keeps ids of one instant apart */
    for (int i = 0; i < 9; i++, x /= 62) out[i] = alnum[x % 62];
    out[9] = '\0';
}

/* ---- arguments as compact JSON ---------------------------------------- */

/* The arguments re-serialized compactly, numbers as the model wrote them
 * where a double holds them: a real is written as Python's json.dumps
 * writes it, with the fewest digits that read back to the same double (3.8
 * stays 3.8; jansson's 17 digits would make it 3.7999999999999998, another
 * number to a client that reads it as text or decimal), keys in the order
 * written, strings escaped as jansson does. */
static void put_string(vt_text_buf *b, const char *s, size_t n) {
    vt_text_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            vt_text_putc(b, '\\');
            vt_text_putc(b, (char)ch);
        } else if (ch < 0x20) {
            const char *named = ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : ch == '\t' ? "\\t" : ch == '\b' ? "\\b"
                                : ch == '\f' ? "\\f" : NULL;
            if (named) vt_text_puts(b, named);
            else vt_text_printf(b, "\\u%04x", ch);
        } else {
            vt_text_putc(b, (char)ch);
        }
    }
    vt_text_putc(b, '"');
}

static void put_json(vt_text_buf *b, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        const json_t *item;
        bool first = true;
        vt_text_putc(b, '{');
        json_object_foreach((json_t *)v, key, item) {
            if (!first) vt_text_putc(b, ',');
            first = false;
            put_string(b, key, strlen(key));
            vt_text_putc(b, ':');
            put_json(b, item);
        }
        vt_text_putc(b, '}');
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        const json_t *item;
        vt_text_putc(b, '[');
        json_array_foreach(v, i, item) {
            if (i) vt_text_putc(b, ',');
            put_json(b, item);
        }
        vt_text_putc(b, ']');
        break;
    }
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: vt_text_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: vt_text_put_float(b, json_real_value(v)); break; /* finite: JSON has no nan or inf */
    case JSON_TRUE: vt_text_puts(b, "true"); break;
    case JSON_FALSE: vt_text_puts(b, "false"); break;
    case JSON_NULL: vt_text_puts(b, "null"); break;
    }
}

char *vt_tool_arguments_text(const json_t *args) {
    vt_text_buf b = {0};
    put_json(&b, args);
    return vt_text_take(&b);
}

typedef enum { ADD_OK, ADD_NOT_A_CALL, ADD_OOM } add_result;

/* Append the call (name, args object) to calls. */
static add_result add_call(vt_tool_format f, json_t *calls, const json_t *tools, const json_t *name,
                           const json_t *args) {
    if (!json_is_string(name) || !json_is_object(args) || !tool_named(tools, json_string_value(name)))
        return ADD_NOT_A_CALL;
    char *text = vt_tool_arguments_text(args);
    if (!text) return ADD_OOM;
    char id[40];
    new_call_id(f, id);
    json_t *call = json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function", "name", name,
                             "arguments", text);
    free(text);
    if (!call || json_array_append_new(calls, call) != 0) return ADD_OOM;
    return ADD_OK;
}

/* A {"name", argument_key: {...}} object as a call. */
static add_result add_object(vt_tool_format f, json_t *calls, const json_t *tools, const json_t *obj,
                             const char *argument_key) {
    if (!json_is_object(obj)) return ADD_NOT_A_CALL;
    const json_t *args = json_object_get(obj, argument_key);
    return add_call(f, calls, tools, json_object_get(obj, "name"), args);
}

/* Hermes: <tool_call> JSON </tool_call>, repeated, whitespace between. */
static add_result parse_hermes(cursor *c, json_t *calls, const json_t *tools) {
    while (c->pos < c->n) {
        if (!take(c, HERMES_OPEN)) return ADD_NOT_A_CALL;
        skip_space(c);
        json_t *obj = take_json(c);
        if (!obj) return ADD_NOT_A_CALL;
        add_result r = add_object(VT_TOOL_FORMAT_HERMES, calls, tools, obj, "arguments");
        json_decref(obj);
        if (r != ADD_OK) return r;
        skip_space(c);
        if (!take(c, HERMES_CLOSE)) return ADD_NOT_A_CALL;
        skip_space(c);
    }
    return ADD_OK;
}

/* Llama 3: one {"name", "parameters"} object (after the tag, if any). */
static add_result parse_llama3(cursor *c, json_t *calls, const json_t *tools) {
    if (take(c, PYTHON_TAG)) skip_space(c);
    json_t *obj = take_json(c);
    if (!obj) return ADD_NOT_A_CALL;
    /* the tag's form is sometimes written with "arguments" */
    add_result r = add_object(VT_TOOL_FORMAT_LLAMA3, calls, tools, obj,
                              json_object_get(obj, "parameters") ? "parameters" : "arguments");
    json_decref(obj);
    skip_space(c);
    return r == ADD_OK && c->pos != c->n ? ADD_NOT_A_CALL : r;
}

/* Mistral: [TOOL_CALLS] then a JSON array of calls, or name[ARGS]{...};
 * the marker may repeat before each call. */
static add_result parse_mistral(cursor *c, json_t *calls, const json_t *tools) {
    while (c->pos < c->n) {
        if (!take(c, MISTRAL_CALLS)) return ADD_NOT_A_CALL;
        skip_space(c);
        if (c->pos < c->n && c->s[c->pos] == '[') {
            json_t *arr = take_json(c);
            if (!json_is_array(arr) || json_array_size(arr) == 0) {
                json_decref(arr);
                return ADD_NOT_A_CALL;
            }
            size_t i;
            json_t *obj;
            add_result r = ADD_OK;
            json_array_foreach(arr, i, obj) {
                r = add_object(VT_TOOL_FORMAT_MISTRAL, calls, tools, obj, "arguments");
                if (r != ADD_OK) break;
            }
            json_decref(arr);
            if (r != ADD_OK) return r;
        } else {
            size_t args_at = find(c->s, c->n, c->pos, MISTRAL_ARGS);
            if (args_at == c->n || args_at == c->pos) return ADD_NOT_A_CALL;
            json_t *name = json_stringn(c->s + c->pos, args_at - c->pos); /* NULL if not UTF-8 */
            if (!name) return ADD_NOT_A_CALL;
            c->pos = args_at + strlen(MISTRAL_ARGS);
            json_t *args = take_json(c);
            add_result r = args ? add_call(VT_TOOL_FORMAT_MISTRAL, calls, tools, name, args) : ADD_NOT_A_CALL;
            json_decref(name);
            json_decref(args);
            if (r != ADD_OK) return r;
        }
        skip_space(c);
    }
    return ADD_OK;
}

/* Where the calls would start: the first marker, or for Llama a text that
 * is (after whitespace) a JSON object; n if nowhere. */
static size_t calls_start(vt_tool_format f, const char *text, size_t n) {
    switch (f) {
    case VT_TOOL_FORMAT_HERMES: return find(text, n, 0, HERMES_OPEN);
    case VT_TOOL_FORMAT_MISTRAL: return find(text, n, 0, MISTRAL_CALLS);
    case VT_TOOL_FORMAT_LLAMA3: {
        size_t i = 0;
        while (i < n && is_space(text[i])) i++;
        if (i < n && text[i] == '{') return i;
        return find(text, n, 0, PYTHON_TAG);
    }
    default: return n;
    }
}

static size_t trim_end(const char *text, size_t k) {
    while (k > 0 && is_space(text[k - 1])) k--;
    return k;
}

bool vt_tool_calls_parse(vt_tool_format f, const char *text, size_t n, const json_t *tools, size_t max_calls,
                         vt_tool_parse *out) {
    *out = (vt_tool_parse){.content_len = n, .calls = NULL};
    size_t start = calls_start(f, text, n);
    if (start == n || !json_is_array(tools)) return true;
    json_t *calls = json_array();
    if (!calls) return false;
    cursor c = {text, n, start};
    add_result r = f == VT_TOOL_FORMAT_HERMES   ? parse_hermes(&c, calls, tools)
                   : f == VT_TOOL_FORMAT_LLAMA3 ? parse_llama3(&c, calls, tools)
                                                : parse_mistral(&c, calls, tools);
    if (r == ADD_OOM) {
        json_decref(calls);
        return false;
    }
    if (r != ADD_OK || json_array_size(calls) == 0 || json_array_size(calls) > max_calls) {
        json_decref(calls);
        return true;
    }
    out->calls = calls;
    out->content_len = trim_end(text, start);
    return true;
}

/* ---- streaming ----------------------------------------------------------- */

/* The start of the longest tail of text[0, n) that marker begins with (n if none). */
static size_t partial_marker(const char *text, size_t n, const char *marker) {
    size_t k = strlen(marker);
    for (size_t len = k - 1 < n ? k - 1 : n; len > 0; len--)
        if (memcmp(text + n - len, marker, len) == 0) return n - len;
    return n;
}

size_t vt_tool_calls_content_prefix(vt_tool_format f, const char *text, size_t n) {
    if (f == VT_TOOL_FORMAT_NONE) return n;
    size_t held = calls_start(f, text, n);
    if (f == VT_TOOL_FORMAT_LLAMA3) {
        /* only whitespace so far: it may still open a JSON object */
        size_t i = 0;
        while (i < n && is_space(text[i])) i++;
        if (i == n) return 0;
    }
    if (held == n) {
        const char *marker = f == VT_TOOL_FORMAT_HERMES ? HERMES_OPEN
                             : f == VT_TOOL_FORMAT_MISTRAL ? MISTRAL_CALLS
                                                           : PYTHON_TAG;
        held = partial_marker(text, n, marker);
    }
    /* the whitespace before a call is not content either (parse trims it) */
    return trim_end(text, held);
}

/* ---- grammar ------------------------------------------------------------- */

/* The keywords whose values are data, not schemas: a "$ref" inside one is
 * text the document holds, not a reference. */
static bool data_keyword(const char *key) {
    return strcmp(key, "const") == 0 || strcmp(key, "enum") == 0 || strcmp(key, "default") == 0 ||
           strcmp(key, "examples") == 0;
}

/* The keywords whose values map names to schemas: their keys are names (a
 * property may be called "default"), their values schemas. */
static bool schema_map_keyword(const char *key) {
    return strcmp(key, "properties") == 0 || strcmp(key, "patternProperties") == 0 || strcmp(key, "$defs") == 0 ||
           strcmp(key, "definitions") == 0 || strcmp(key, "dependentSchemas") == 0;
}

/* Every local JSON Pointer "$ref" of schema ("#", "#/..."), which counts
 * from the document the tool's parameters are, made to count from the call
 * schema that embeds them at prefix ("/properties/arguments",
 * "/anyOf/2/..."): pydantic's tools keep their nested models in "$defs" and
 * point there. Depth: the request refused values nested past
 * VT_JINJA_MAX_DEPTH before this runs. False when out of memory. */
static bool rebase_refs(json_t *schema, const char *prefix) {
    const char *key;
    json_t *v, *sub;
    size_t i;
    if (json_is_array(schema)) { /* allOf, anyOf, prefixItems, ...: schemas */
        json_array_foreach(schema, i, v) if (!rebase_refs(v, prefix)) return false;
        return true;
    }
    if (!json_is_object(schema)) return true;
    json_object_foreach(schema, key, v) {
        const char *ref = strcmp(key, "$ref") == 0 ? json_string_value(v) : NULL;
        if (ref && (strcmp(ref, "#") == 0 || strncmp(ref, "#/", 2) == 0)) {
            char *rebased = malloc(strlen(prefix) + strlen(ref) + 2);
            if (!rebased) return false;
            sprintf(rebased, "#%s%s", prefix, ref + 1);
            const int failed = json_string_set(v, rebased);
            free(rebased);
            if (failed) return false;
        } else if (schema_map_keyword(key) && json_is_object(v)) {
            const char *name;
            json_object_foreach(v, name, sub) if (!rebase_refs(sub, prefix)) return false;
        } else if (!ref && !data_keyword(key) && !rebase_refs(v, prefix)) {
            return false;
        }
    }
    return true;
}

/* {"type": "object", "properties": {"name": {"const": NAME}, KEY: PARAMS},
 * "required": ["name", KEY]} for one tool, its PARAMS' references counting
 * from where they sit in it when it is the anyOf's branch (branch >= 0) or
 * the whole schema (-1); NULL when out of memory. */
static json_t *call_schema(const json_t *function, const char *argument_key, int branch) {
    const json_t *params = json_object_get(function, "parameters");
    json_t *p = NULL;
    if (!json_is_object(params)) { /* none: no parameters (OpenAI's rule), so the arguments are {} */
        p = json_pack("{s:s, s:{}, s:b}", "type", "object", "properties", "additionalProperties", 0);
    } else {
        p = json_deep_copy(params);
        char prefix[96];
        if (branch >= 0) snprintf(prefix, sizeof prefix, "/anyOf/%d/properties/%s", branch, argument_key);
        else snprintf(prefix, sizeof prefix, "/properties/%s", argument_key);
        if (p && !rebase_refs(p, prefix)) {
            json_decref(p);
            p = NULL;
        }
        /* {} or a type-less schema: an object of it (the request checked
         * the rest); a bare reference is what it points to, "type" beside
         * it is not taken */
        if (p && !json_object_get(p, "type") && !json_object_get(p, "$ref") &&
            json_object_set_new(p, "type", json_string("object")) != 0) {
            json_decref(p);
            p = NULL;
        }
    }
    json_t *props = json_pack("{s:{s:O}}", "name", "const", json_object_get(function, "name"));
    if (!p || !props || json_object_set_new(props, argument_key, p) != 0) {
        json_decref(props);
        if (!props) json_decref(p);
        return NULL;
    }
    return json_pack("{s:s, s:o, s:[s,s]}", "type", "object", "properties", props, "required", "name", argument_key);
}

char *vt_tool_call_gbnf(vt_tool_format f, const json_t *tools, const char *name, bool several, char *err,
                        size_t err_size) {
    if (f == VT_TOOL_FORMAT_NONE || !json_is_array(tools)) {
        snprintf(err, err_size, "the chat template shows no tool-call syntax vt knows (see docs/TOOL_CALLS.md)");
        return NULL;
    }
    const char *key = f == VT_TOOL_FORMAT_LLAMA3 ? "parameters" : "arguments";
    json_t *branches = json_array();
    size_t i;
    const json_t *t;
    bool oom = !branches;
    /* several become the branches of an anyOf, one is the schema itself */
    size_t n_calls = 0;
    json_array_foreach(tools, i, t) {
        const char *tool = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        n_calls += tool && (!name || strcmp(tool, name) == 0);
    }
    const bool as_anyof_branches = n_calls > 1;
    json_array_foreach(tools, i, t) {
        if (oom) break;
        const json_t *fn = json_object_get(t, "function");
        const char *tool = json_string_value(json_object_get(fn, "name"));
        if (!tool || (name && strcmp(tool, name) != 0)) continue;
        /* each tool's schema alone first, so a refusal names its tool */
        json_t *s = call_schema(fn, key, -1);
        char why[300] = "";
        char *g = s ? vt_json_schema_to_gbnf_rule(s, "tool-call", why, sizeof why) : NULL;
        free(g);
        if (s && !g) {
            json_decref(s);
            json_decref(branches);
            /* the path inside the call's wrapper, and any reference the
             * message quotes, as the client wrote them: in the tool's
             * parameters ("#/properties/arguments/$defs/X" was "#/$defs/X") */
            char inner[32], rebased[40];
            const size_t n = (size_t)snprintf(inner, sizeof inner, "/properties/%s", key);
            const size_t m = (size_t)snprintf(rebased, sizeof rebased, "'#%s", inner);
            for (char *at = strstr(why, rebased); at; at = strstr(at + 2, rebased)) {
                memmove(at + 2, at + m, strlen(at + m) + 1);
            }
            if (strncmp(why, inner, n) == 0 && (why[n] == '/' || why[n] == ':'))
                snprintf(err, err_size, "tools[%zu].function.parameters%s (tool %.60s)", i, why + n, tool);
            else /* the schema as a whole: its grammar's size */
                snprintf(err, err_size, "tools[%zu].function.parameters (tool %.60s): %s", i, tool, why);
            return NULL;
        }
        json_decref(s);
        /* then as the branch it is among several (its references count
         * from there) */
        s = call_schema(fn, key, as_anyof_branches ? (int)json_array_size(branches) : -1);
        oom = !s || json_array_append_new(branches, s) != 0;
    }
    if (oom) {
        json_decref(branches);
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    if (json_array_size(branches) == 0) {
        json_decref(branches);
        snprintf(err, err_size, "%.60s: no such tool", name ? name : "tools");
        return NULL;
    }
    json_t *schema = json_array_size(branches) == 1 ? json_incref(json_array_get(branches, 0))
                                                    : json_pack("{s:O}", "anyOf", branches);
    json_decref(branches);
    char why[300] = "";
    char *body = schema ? vt_json_schema_to_gbnf_rule(schema, "tool-call", why, sizeof why) : NULL;
    json_decref(schema);
    if (!body) {
        snprintf(err, err_size, "%s", why[0] ? why : "out of memory");
        return NULL;
    }
    const char *top;
    switch (f) {
    case VT_TOOL_FORMAT_HERMES:
        top = several ? "root ::= tagged-call ( \"\\n\" tagged-call )*\n"
                        "tagged-call ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n"
                      : "root ::= \"<tool_call>\\n\" tool-call \"\\n</tool_call>\"\n";
        break;
    case VT_TOOL_FORMAT_MISTRAL:
        top = several ? "root ::= \"[TOOL_CALLS][\" tool-call ( \", \" tool-call )* \"]\"\n"
                      : "root ::= \"[TOOL_CALLS][\" tool-call \"]\"\n";
        break;
    default: /* Llama writes one call per answer */
        top = "root ::= tool-call\n";
        break;
    }
    size_t a = strlen(top), b = strlen(body);
    char *g = malloc(a + b + 1);
    if (!g) {
        free(body);
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    memcpy(g, top, a);
    memcpy(g + a, body, b + 1);
    free(body);
    return g;
}
