/* json_schema_gbnf.c — see json_schema_gbnf.h.
 *
 * Every schema becomes a rule; primitives (json-string, ws, ...) are rules
 * added once when first needed; a $ref becomes a rule named before its
 * target is converted, so recursive schemas are recursive rules. */
#include "json_schema_gbnf.h"

#include <math.h>
#include <stdarg.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "name_table.h"
#include "text_buf.h"

/* Counts above this are not generated (GBNF expands repetitions). */
#define MAX_COUNT 1000
/* json-int has at most 16 digits: bounds past these are no bound for it. */
#define INT_LIMIT 9999999999999999LL

/* ---- text ---------------------------------------------------------------- */

/* A GBNF string literal matching bytes s[0..n) exactly. */
static void sb_literal(vt_text_buf *b, const char *s, size_t n) {
    vt_text_puts(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') vt_text_puts(b, "\\\"");
        else if (c == '\\') vt_text_puts(b, "\\\\");
        else if (c == '\n') vt_text_puts(b, "\\n");
        else if (c == '\r') vt_text_puts(b, "\\r");
        else if (c == '\t') vt_text_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) vt_text_printf(b, "\\x%02X", c);
        else vt_text_put(b, (const char *)&c, 1);
    }
    vt_text_puts(b, "\"");
}

/* ---- the converter ------------------------------------------------------- */

typedef struct rule {
    char *name;
    char *body; /* NULL while a $ref's target is being converted */
} rule;

typedef struct ref_rule {
    char *ref;
    char *name;
} ref_rule;

typedef struct conv {
    const json_t *root;
    rule *rules;
    size_t n_rules, cap_rules;
    /* rule name -> index in rules, name hint -> the K its next "-K" tries
     * first, $ref -> index in refs: a schema of thousands of properties or
     * references makes thousands of rules, many from one hint ("root-tail"),
     * each named and looked up in constant time */
    vt_name_table by_name, next_suffix, by_ref;
    ref_rule *refs;
    size_t n_refs, cap_refs;
    size_t total; /* bytes of grammar so far */
    int depth;
    char *err;
    size_t err_size;
    bool failed;
} conv;

__attribute__((format(printf, 3, 4))) static char *fail(conv *c, const char *path, const char *fmt, ...) {
    if (c->failed) return NULL;
    c->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* a deep path keeps its beginning and its end, so the reason after it
     * still fits the caller's buffer */
    const size_t n = strlen(path);
    if (n > 160) {
        const char *tail = path + n - 80, *slash = strchr(tail, '/');
        snprintf(c->err, c->err_size, "%.60s/...%s: %s", path, slash ? slash : tail, msg);
    } else if (path[0])
        snprintf(c->err, c->err_size, "%s: %s", path, msg);
    else /* the schema itself: the caller names it (the request field, the tool) */
        snprintf(c->err, c->err_size, "%s", msg);
    return NULL;
}

static char *oom(conv *c) { return fail(c, "", "out of memory converting the schema"); }

static long find_rule(const conv *c, const char *name) {
    long index;
    return vt_name_get(&c->by_name, name, strlen(name), &index) ? index : -1;
}

/* Add rule name (copied) with body (taken); false when out of memory or too big. */
static bool add_rule(conv *c, const char *name, char *body) {
    if (c->failed) {
        free(body);
        return false;
    }
    if (!body) return oom(c), false;
    c->total += strlen(name) + strlen(body) + 6;
    if (c->total > VT_SCHEMA_MAX_GRAMMAR) {
        free(body);
        return fail(c, "", "the schema's grammar exceeds %d bytes", VT_SCHEMA_MAX_GRAMMAR), false;
    }
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? 2 * c->cap_rules : 32;
        rule *r = realloc(c->rules, cap * sizeof *r);
        if (!r) {
            free(body);
            return oom(c), false;
        }
        c->rules = r;
        c->cap_rules = cap;
    }
    char *n = strdup(name);
    if (!n || !vt_name_set(&c->by_name, name, strlen(name), (long)c->n_rules)) {
        free(n);
        free(body);
        return oom(c), false;
    }
    c->rules[c->n_rules++] = (rule){n, body};
    return true;
}

/* A rule name from hint ([a-zA-Z0-9-] only), unique among the rules. */
static char *unique_name(conv *c, const char *hint) {
    char base[72];
    size_t n = 0;
    for (const char *h = hint; *h && n < 48; h++) {
        char ch = *h;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
        base[n++] = ok ? ch : '-';
    }
    base[n] = 0;
    if (n == 0) strcpy(base, "s");
    char name[96];
    snprintf(name, sizeof name, "%s", base);
    if (find_rule(c, name) >= 0) {
        /* the first "-K" free from 2 on; those below the K remembered for
         * this hint are taken (rules are never removed), one above it may
         * be too (a hint "a-3" named a rule "a-3") */
        long k = 2;
        vt_name_get(&c->next_suffix, base, strlen(base), &k);
        for (;; k++) {
            snprintf(name, sizeof name, "%s-%ld", base, k);
            if (find_rule(c, name) < 0) break;
        }
        if (!vt_name_set(&c->next_suffix, base, strlen(base), k + 1)) return oom(c);
    }
    char *out = strdup(name);
    if (!out) oom(c);
    return out;
}

/* A rule named after hint with body (taken): its name (malloc'ed), or NULL. */
static char *new_rule(conv *c, const char *hint, char *body) {
    if (c->failed || !body) {
        free(body);
        return c->failed ? NULL : oom(c);
    }
    char *name = unique_name(c, hint);
    if (!name || !add_rule(c, name, body)) {
        free(name);
        return NULL;
    }
    return name;
}

static char *sb_rule(conv *c, const char *hint, vt_text_buf *b) { return new_rule(c, hint, vt_text_take(b)); }

/* ---- primitives ---------------------------------------------------------- */

typedef struct prim_def {
    const char *name, *body, *deps[4];
} prim_def;

static const prim_def PRIMS[] = {
    {"ws", "| \" \" | \"\\n\" [ \\t]{0,20}", {NULL}},
    {"json-hex", "[0-9a-fA-F]", {NULL}},
    /* \u escapes of a surrogate are left out: a lone one is not a character */
    {"json-u", "\"u\" ([0-9a-cA-C] json-hex{3} | [dD] [0-7] json-hex{2} | [eEfF] json-hex{3})", {"json-hex", NULL}},
    {"json-rawchar", "[^\"\\\\\\x00-\\x1F]", {NULL}},
    {"json-char", "json-rawchar | \"\\\\\" ([\"\\\\/bfnrt] | json-u)", {"json-rawchar", "json-u", NULL}},
    {"json-string", "\"\\\"\" json-char* \"\\\"\"", {"json-char", NULL}},
    {"json-int", "\"-\"? (\"0\" | [1-9] [0-9]{0,15})", {NULL}},
    {"json-number", "json-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?", {"json-int", NULL}},
    {"json-bool", "\"true\" | \"false\"", {NULL}},
    {"json-null", "\"null\"", {NULL}},
    {"json-value", "json-object | json-array | json-string | json-number | json-bool | json-null",
     {"json-object", "json-array", "json-number", "json-bool"}},
    {"json-object",
     "\"{\" ws ( json-string ws \":\" ws json-value ws ( \",\" ws json-string ws \":\" ws json-value ws )* )? \"}\"",
     {"ws", "json-string", "json-value", NULL}},
    {"json-array", "\"[\" ws ( json-value ws ( \",\" ws json-value ws )* )? \"]\"", {"ws", "json-value", NULL}},
    /* real dates only: years 0001-9999, each month's days (February to the 28th: leap years aside) */
    {"json-date",
     "(\"0\" (\"0\" (\"0\" [1-9] | [1-9] [0-9]) | [1-9] [0-9]{2}) | [1-9] [0-9]{3}) \"-\" "
     "((\"0\" [13578] | \"1\" [02]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01]) | "
     "(\"0\" [469] | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\") | "
     "\"02-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))",
     {NULL}},
    {"json-time",
     "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
     "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])",
     {NULL}},
    /* lowercase, as RFC 9562 asks of generators (readers take either) */
    {"json-hex-lower", "[0-9a-f]", {NULL}},
    {"json-uuid",
     "json-hex-lower{8} \"-\" json-hex-lower{4} \"-\" json-hex-lower{4} \"-\" json-hex-lower{4} \"-\" json-hex-lower{12}",
     {"json-hex-lower", NULL}},
    /* RFC 5321's dot-atom local part (no leading, trailing or doubled dot)
     * and domain labels that begin and end with a letter or digit, as
     * strict validators require; a subset of the addresses they accept */
    {"json-email-atom", "[a-zA-Z0-9_+-]{1,16}", {NULL}},
    {"json-email-label", "[a-zA-Z0-9] ([a-zA-Z0-9-]{0,29} [a-zA-Z0-9])?", {NULL}},
    {"json-email",
     "json-email-atom (\".\" json-email-atom){0,2} \"@\" json-email-label (\".\" json-email-label){0,2} \".\" "
     "[a-zA-Z]{2,8}",
     {"json-email-atom", "json-email-label", NULL}},
    {"json-octet", "\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]", {NULL}},
    {"json-ipv4", "json-octet \".\" json-octet \".\" json-octet \".\" json-octet", {"json-octet", NULL}},
};

/* The primitive's name, its rule (and those it uses) added if missing. */
static const char *prim(conv *c, const char *name) {
    for (size_t i = 0; i < sizeof PRIMS / sizeof *PRIMS; i++) {
        if (strcmp(PRIMS[i].name, name) != 0) continue;
        if (find_rule(c, name) >= 0) return PRIMS[i].name;
        if (!add_rule(c, name, strdup(PRIMS[i].body))) return NULL;
        for (int d = 0; d < 4 && PRIMS[i].deps[d]; d++)
            if (!prim(c, PRIMS[i].deps[d])) return NULL;
        if (strcmp(name, "json-value") == 0 && (!prim(c, "json-string") || !prim(c, "json-null"))) return NULL;
        return PRIMS[i].name;
    }
    return NULL;
}

static char *prim_dup(conv *c, const char *name) {
    const char *p = prim(c, name);
    if (!p) return c->failed ? NULL : oom(c);
    char *d = strdup(p);
    return d ? d : oom(c);
}

/* ---- keywords ------------------------------------------------------------ */

/* discriminator is OpenAPI's (Pydantic writes it beside oneOf): it only
 * names the property that tells the branches apart, which oneOf enforces. */
static const char *const ANNOTATIONS[] = {"title",      "description", "examples",  "default", "$schema", "discriminator",
                                          "$id",        "$comment",    "deprecated", "readOnly", "writeOnly",
                                          "$anchor",    "contentMediaType", "contentEncoding", NULL};
/* Keywords with a meaning implemented here. */
static const char *const KNOWN[] = {"type",       "properties",  "required",  "additionalProperties",
                                    "enum",       "const",       "items",     "prefixItems",
                                    "additionalItems", "minItems", "maxItems", "uniqueItems",
                                    "anyOf",      "oneOf",       "allOf",     "$ref",
                                    "$defs",      "definitions", "minLength", "maxLength",
                                    "format",     "pattern",     "minimum",   "maximum",
                                    "exclusiveMinimum", "exclusiveMaximum", NULL};

static bool in_list(const char *const *list, const char *key) {
    for (; *list; list++)
        if (strcmp(*list, key) == 0) return true;
    return false;
}

/* The schema's keywords that constrain (not annotations, not $defs). */
static bool has_other_than(const json_t *s, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        (void)v;
        if (in_list(ANNOTATIONS, key) || !strcmp(key, "$defs") || !strcmp(key, "definitions")) continue;
        if (!in_list(allowed, key)) return true;
    }
    return false;
}

static const char *first_other_than(const json_t *s, const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        (void)v;
        if (in_list(ANNOTATIONS, key) || !strcmp(key, "$defs") || !strcmp(key, "definitions")) continue;
        if (!in_list(allowed, key)) return key;
    }
    return NULL;
}

static void child_path(char *out, size_t size, const char *path, const char *a, const char *b) {
    snprintf(out, size, "%s/%s%s%s", path, a, b ? "/" : "", b ? b : "");
}

static char *visit(conv *c, const json_t *s, const char *hint, const char *path);

/* ---- $ref ---------------------------------------------------------------- */

/* The schema a local reference ("#", "#/$defs/x", "#/definitions/x/...") points to. */
static int hex_digit(char ch) {
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* What local reference ref ("#/a/b") points to, or NULL (failed). The part
 * after '#' is a URI fragment: percent-escapes are decoded first, then the
 * pointer's ~1 and ~0 (RFC 6901, sections 6 and 4). */
static const json_t *resolve(conv *c, const char *ref, const char *path) {
    if (ref[0] != '#') return fail(c, path, "$ref '%.100s': only local references (starting with '#') are supported", ref), NULL;
    const size_t len = strlen(ref + 1);
    char *pointer = malloc(len + 1), *seg = malloc(len + 1);
    if (!pointer || !seg) {
        free(pointer), free(seg);
        return oom(c), NULL;
    }
    size_t n = 0;
    for (const char *q = ref + 1; *q; q++) {
        const int hi = q[0] == '%' ? hex_digit(q[1]) : -1, lo = hi >= 0 ? hex_digit(q[2]) : -1;
        if (lo >= 0) {
            pointer[n++] = (char)(hi * 16 + lo);
            q += 2;
        } else {
            pointer[n++] = *q;
        }
    }
    pointer[n] = 0;
    const json_t *at = c->root;
    const char *p = pointer, *pend = pointer + n;
    if (p < pend && *p != '/') {
        at = NULL;
        fail(c, path, "$ref '%.100s': only JSON pointers ('#/...') are supported", ref);
    }
    while (at && p < pend && *p == '/') {
        p++;
        size_t k = 0;
        while (p < pend && *p != '/') {
            if (p[0] == '~' && p + 1 < pend && p[1] == '1') seg[k++] = '/', p += 2;
            else if (p[0] == '~' && p + 1 < pend && p[1] == '0') seg[k++] = '~', p += 2;
            else seg[k++] = *p++;
        }
        seg[k] = 0;
        if (json_is_object(at)) {
            /* a key holding U+0000 (percent-decoded) is no key a schema has */
            at = strlen(seg) == k ? json_object_get(at, seg) : NULL;
        } else if (json_is_array(at)) {
            char *end;
            long i = strtol(seg, &end, 10);
            at = (*seg && !*end && i >= 0) ? json_array_get(at, (size_t)i) : NULL;
        } else {
            at = NULL;
        }
        if (!at) fail(c, path, "$ref '%.100s' points to nothing in the schema", ref);
    }
    free(pointer), free(seg);
    return at;
}

static char *visit_ref(conv *c, const json_t *s, const char *path) {
    static const char *const only_ref[] = {"$ref", NULL};
    const char *other = first_other_than(s, only_ref);
    if (other) return fail(c, path, "'%s' beside '$ref' is not supported", other);
    const json_t *r = json_object_get(s, "$ref");
    if (!json_is_string(r)) return fail(c, path, "$ref: expected a string");
    const char *ref = json_string_value(r);
    long known;
    if (vt_name_get(&c->by_ref, ref, strlen(ref), &known)) return strdup(c->refs[known].name);
    const json_t *target = resolve(c, ref, path);
    if (!target) return NULL;
    const char *last = strrchr(ref, '/');
    char hint[96];
    snprintf(hint, sizeof hint, "ref-%s", last && last[1] ? last + 1 : "root");
    char *name = unique_name(c, hint);
    if (!name) return NULL;
    /* named (with a placeholder rule) before the target is converted, so the target may refer back to it */
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? 2 * c->cap_refs : 8;
        ref_rule *g = realloc(c->refs, cap * sizeof *g);
        if (!g) {
            free(name);
            return oom(c);
        }
        c->refs = g;
        c->cap_refs = cap;
    }
    char *ref_copy = strdup(ref);
    if (!ref_copy || !vt_name_set(&c->by_ref, ref, strlen(ref), (long)c->n_refs) || !add_rule(c, name, strdup(""))) {
        free(ref_copy);
        free(name);
        return c->failed ? NULL : oom(c);
    }
    c->refs[c->n_refs++] = (ref_rule){ref_copy, name};
    const long index = find_rule(c, name);
    char target_path[256];
    snprintf(target_path, sizeof target_path, "%.250s", ref + 1);
    char *body = visit(c, target, name, target_path);
    if (!body) return NULL;
    free(c->rules[index].body);
    c->rules[index].body = body;
    return strdup(name);
}

/* ---- enum and const -------------------------------------------------------- */

static bool type_allows(const json_t *type, const json_t *v) {
    if (!type) return true;
    if (json_is_array(type)) {
        size_t i;
        json_t *t;
        json_array_foreach(type, i, t) {
            if (type_allows(t, v)) return true;
        }
        return false;
    }
    const char *t = json_string_value(type);
    if (!t) return false;
    if (!strcmp(t, "object")) return json_is_object(v);
    if (!strcmp(t, "array")) return json_is_array(v);
    if (!strcmp(t, "string")) return json_is_string(v);
    if (!strcmp(t, "integer")) return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(t, "number")) return json_is_number(v);
    if (!strcmp(t, "boolean")) return json_is_boolean(v);
    if (!strcmp(t, "null")) return json_is_null(v);
    return false;
}

static char *visit_enum(conv *c, const json_t *s, const char *hint, const char *path) {
    static const char *const allowed[] = {"enum", "const", "type", NULL};
    const char *other = first_other_than(s, allowed);
    if (other) return fail(c, path, "'%s' beside enum/const is not supported", other);
    const json_t *type = json_object_get(s, "type");
    const json_t *cst = json_object_get(s, "const");
    const json_t *en = json_object_get(s, "enum");
    if (en && (!json_is_array(en) || json_array_size(en) == 0)) return fail(c, path, "enum: expected a non-empty array");
    vt_text_buf b = {0};
    int n = 0;
    for (size_t i = 0; i < (cst ? 1 : json_array_size(en)); i++) {
        const json_t *v = cst ? cst : json_array_get(en, i);
        if (!type_allows(type, v)) continue;
        if (cst && en) { /* both: the const, if the enum has it */
            bool listed = false;
            for (size_t k = 0; k < json_array_size(en); k++) listed |= json_equal((json_t *)v, json_array_get(en, k));
            if (!listed) continue;
        }
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text) {
            free(b.data);
            return oom(c);
        }
        if (n++) vt_text_puts(&b, " | ");
        sb_literal(&b, text, strlen(text));
        free(text);
    }
    if (n == 0) {
        free(b.data);
        return fail(c, path, "no value of the %s has the schema's type", cst ? "const" : "enum");
    }
    return sb_rule(c, hint, &b);
}

/* ---- integers and numbers ------------------------------------------------------ */

/* Digits of a range of equal-length numbers lo..hi (decimal strings). */
static void digits_range(vt_text_buf *b, const char *lo, const char *hi) {
    size_t n = strlen(lo);
    if (n == 0) return;
    /* 0..0 to 9..9: any digits (else both halves below would split again: exponential) */
    if (strspn(lo, "0") == n && strspn(hi, "9") == n) {
        vt_text_printf(b, "[0-9]{%zu}", n);
        return;
    }
    if (n == 1) {
        if (lo[0] == hi[0]) vt_text_printf(b, "\"%c\"", lo[0]);
        else vt_text_printf(b, "[%c-%c]", lo[0], hi[0]);
        return;
    }
    if (lo[0] == hi[0]) {
        vt_text_printf(b, "\"%c\" (", lo[0]);
        digits_range(b, lo + 1, hi + 1);
        vt_text_puts(b, ")");
        return;
    }
    char nines[24], zeros[24];
    memset(nines, '9', n - 1);
    nines[n - 1] = 0;
    memset(zeros, '0', n - 1);
    zeros[n - 1] = 0;
    vt_text_printf(b, "(\"%c\" (", lo[0]);
    digits_range(b, lo + 1, nines);
    vt_text_puts(b, ")");
    if (hi[0] - lo[0] >= 2) vt_text_printf(b, " | [%c-%c] [0-9]{%zu}", lo[0] + 1, hi[0] - 1, n - 1);
    vt_text_printf(b, " | \"%c\" (", hi[0]);
    digits_range(b, zeros, hi + 1);
    vt_text_puts(b, "))");
}

/* The natural numbers lo..hi (0 <= lo <= hi <= INT_LIMIT), without leading zeros. */
static void natural_range(vt_text_buf *b, long long lo, long long hi) {
    vt_text_puts(b, "(");
    bool first = true;
    long long start = lo;
    while (start <= hi) {
        char a[24], z[24];
        int len = snprintf(a, sizeof a, "%lld", start);
        long long top = 9;
        for (int i = 1; i < len; i++) top = top * 10 + 9;
        long long end = top < hi ? top : hi;
        snprintf(z, sizeof z, "%lld", end);
        if (!first) vt_text_puts(b, " | ");
        first = false;
        vt_text_puts(b, "(");
        digits_range(b, a, z);
        vt_text_puts(b, ")");
        if (end == hi) break;
        start = end + 1;
    }
    vt_text_puts(b, ")");
}

/* Integers lo..hi (|bounds| <= INT_LIMIT). */
static void integer_range(vt_text_buf *b, long long lo, long long hi) {
    bool any = false;
    vt_text_puts(b, "(");
    if (lo < 0) {
        long long nlo = hi < 0 ? -hi : 1, nhi = -lo;
        vt_text_puts(b, "\"-\" ");
        natural_range(b, nlo, nhi);
        any = true;
    }
    if (hi >= 0) {
        if (any) vt_text_puts(b, " | ");
        natural_range(b, lo > 0 ? lo : 0, hi);
    }
    vt_text_puts(b, ")");
}

/* The integer bound a number gives: the least integer at or above v (a
 * lower bound) or the greatest at or below it (an upper one), one step in
 * when the bound is exclusive and met; clamped to +-INT_LIMIT. Integers are
 * taken as the JSON gave them (a double cannot hold every 17-digit one). */
static long long integer_from(const json_t *v, bool upper, bool exclusive) {
    long long r;
    if (json_is_integer(v)) {
        const json_int_t x = json_integer_value(v);
        r = x > INT_LIMIT ? INT_LIMIT + 1 : x < -INT_LIMIT ? -INT_LIMIT - 1 : (long long)x;
    } else {
        const double x = json_number_value(v), f = upper ? floor(x) : ceil(x);
        /* +-1e16 is where INT_LIMIT rounds to as a double */
        r = f >= 1e16 ? INT_LIMIT + 1 : f <= -1e16 ? -INT_LIMIT - 1 : (long long)f;
        exclusive = exclusive && f == x;
    }
    return exclusive ? r + (upper ? -1 : 1) : r;
}

/* The number as the JSON spelled it, near enough: an integer exactly, a
 * real in the fewest digits that read back as the same double. */
static void spell_number(const json_t *v, char *buf, size_t size) {
    if (json_is_integer(v)) {
        snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return;
    }
    const double x = json_number_value(v);
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, x);
        if (strtod(buf, NULL) == x) return;
    }
}

/* A bound from minimum/maximum and their exclusive forms (draft 4's
 * booleans or draft 6's numbers), as an integer bound; false on an error. */
static bool integer_bound(conv *c, const json_t *s, bool upper, long long *out, const char *path) {
    const json_t *incl = json_object_get(s, upper ? "maximum" : "minimum");
    const json_t *excl = json_object_get(s, upper ? "exclusiveMaximum" : "exclusiveMinimum");
    const char *iname = upper ? "maximum" : "minimum", *ename = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    *out = upper ? INT_LIMIT : -INT_LIMIT;
    if (incl && !json_is_number(incl)) return fail(c, path, "%s: expected a number", iname), false;
    if (excl && !json_is_number(excl) && !json_is_boolean(excl))
        return fail(c, path, "%s: expected a number", ename), false;
    const json_t *const given[2] = {incl, json_is_number(excl) ? excl : NULL};
    for (int k = 0; k < 2; k++) {
        if (!given[k]) continue;
        const long long r = integer_from(given[k], upper, k == 1 || json_is_true(excl));
        /* a lower bound past the largest integer generated (INT_LIMIT), or
         * an upper one below the least, leaves nothing to generate */
        if (upper ? r < -INT_LIMIT : r > INT_LIMIT) {
            char spelled[40];
            spell_number(given[k], spelled, sizeof spelled);
            return fail(c, path, "%s %s: beyond the 16 digits an integer is generated with", k ? ename : iname, spelled),
                   false;
        }
        if (upper ? r < *out : r > *out) *out = r;
    }
    return true;
}

static bool has_bounds(const json_t *s) {
    return json_object_get(s, "minimum") || json_object_get(s, "maximum") || json_object_get(s, "exclusiveMinimum") ||
           json_object_get(s, "exclusiveMaximum");
}

/* integer, or number with bounds (generated as integers: a subset of the valid numbers). */
static char *gen_number(conv *c, const json_t *s, bool integer, const char *hint, const char *path) {
    if (!has_bounds(s)) return prim_dup(c, integer ? "json-int" : "json-number");
    long long lo, hi;
    if (!integer_bound(c, s, false, &lo, path) || !integer_bound(c, s, true, &hi, path)) return NULL;
    if (lo > hi)
        return fail(c, path, "no integer lies within minimum/maximum%s",
                    integer ? "" : " (a bounded number is generated as an integer in its range)");
    vt_text_buf b = {0};
    integer_range(&b, lo, hi);
    return sb_rule(c, hint, &b);
}

/* ---- strings and patterns ------------------------------------------------------ */

typedef struct regex {
    conv *c;
    const char *p, *end, *path;
    int depth;
} regex;

/* A code point of the string, as the JSON text spells it (escaped where JSON must). */
static void json_spelling(vt_text_buf *b, uint32_t cp) {
    if (cp == '"') vt_text_puts(b, "\"\\\\\\\"\"");
    else if (cp == '\\') vt_text_puts(b, "\"\\\\\\\\\"");
    else if (cp == '\n') vt_text_puts(b, "\"\\\\n\"");
    else if (cp == '\t') vt_text_puts(b, "\"\\\\t\"");
    else if (cp == '\r') vt_text_puts(b, "\"\\\\r\"");
    else if (cp < 0x20) vt_text_printf(b, "\"\\\\u%04x\"", cp);
    else if (cp < 0x10000) vt_text_printf(b, "\"\\u%04X\"", cp);
    else vt_text_printf(b, "\"\\U%08X\"", cp);
}

static void class_member(vt_text_buf *b, uint32_t cp) {
    if (cp < 0x10000) vt_text_printf(b, "\\u%04X", cp);
    else vt_text_printf(b, "\\U%08X", cp);
}

typedef struct range {
    uint32_t lo, hi;
} range;

/* A set of code points as the JSON text may spell them: raw where JSON allows
 * it, escaped for '"', '\' and control characters. */
static void positive_class(vt_text_buf *b, const range *r, int n) {
    vt_text_puts(b, "(");
    bool any = false;
    vt_text_buf raw = {0};
    for (int i = 0; i < n; i++) {
        /* the raw part: minus controls, '"' and '\' */
        uint32_t lo = r[i].lo < 0x20 ? 0x20 : r[i].lo, hi = r[i].hi;
        uint32_t cuts[] = {'"', '\\'};
        uint32_t a = lo;
        for (int k = 0; k < 2 && a <= hi; k++) {
            if (cuts[k] < a || cuts[k] > hi) continue;
            if (cuts[k] > a) {
                class_member(&raw, a);
                if (cuts[k] - 1 > a) vt_text_puts(&raw, "-"), class_member(&raw, cuts[k] - 1);
            }
            a = cuts[k] + 1;
        }
        if (a <= hi && lo <= hi) {
            class_member(&raw, a);
            if (hi > a) vt_text_puts(&raw, "-"), class_member(&raw, hi);
        }
    }
    if (raw.len) {
        vt_text_puts(b, "[");
        vt_text_put(b, raw.data, raw.len);
        vt_text_puts(b, "]");
        any = true;
    }
    free(raw.data);
    for (int i = 0; i < n; i++)
        for (uint32_t cp = r[i].lo; cp <= r[i].hi && cp < 0x80; cp++)
            if (cp < 0x20 || cp == '"' || cp == '\\') {
                if (any) vt_text_puts(b, " | ");
                json_spelling(b, cp);
                any = true;
            }
    if (!any) vt_text_puts(b, "[^\\u0000-\\U0010FFFF]"); /* empty: matches nothing */
    vt_text_puts(b, ")");
}

/* Raw characters outside r (escapes aside: a subset of what the class allows). */
static void negative_class(vt_text_buf *b, const range *r, int n) {
    vt_text_puts(b, "[^\\\"\\\\\\x00-\\x1F");
    for (int i = 0; i < n; i++) {
        class_member(b, r[i].lo);
        if (r[i].hi > r[i].lo) vt_text_puts(b, "-"), class_member(b, r[i].hi);
    }
    vt_text_puts(b, "]");
}

static bool re_fail(regex *x, const char *what) {
    fail(x->c, x->path, "pattern: %s (supported: literals, ., [classes], \\d \\w \\s and their negations, groups, |, "
                        "* + ? {m,n}, ^ and $ at the ends)",
         what);
    return false;
}

static bool re_utf8(regex *x, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)x->p;
    unsigned char b0 = s[0];
    int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || x->p + n > x->end) return re_fail(x, "invalid UTF-8");
    uint32_t v = n == 1 ? b0 : n == 2 ? (b0 & 0x1fu) : n == 3 ? (b0 & 0x0fu) : (b0 & 0x07u);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return re_fail(x, "invalid UTF-8");
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return re_fail(x, "invalid UTF-8");
    x->p += n;
    *cp = v;
    return true;
}

/* The classes \d \w \s as ranges; false for another letter. */
static int shorthand(char e, range *out) {
    switch (e) {
    case 'd': out[0] = (range){'0', '9'}; return 1;
    case 'w': out[0] = (range){'0', '9'}, out[1] = (range){'A', 'Z'}, out[2] = (range){'_', '_'}, out[3] = (range){'a', 'z'}; return 4;
    case 's': out[0] = (range){'\t', '\r'}, out[1] = (range){' ', ' '}; return 2;
    default: return 0;
    }
}

/* An escape's single character; false when it is not one. */
static bool escape_char(regex *x, char e, uint32_t *cp) {
    switch (e) {
    case 'n': *cp = '\n'; return true;
    case 't': *cp = '\t'; return true;
    case 'r': *cp = '\r'; return true;
    case 'f': *cp = '\f'; return true;
    case 'v': *cp = '\v'; return true;
    default: break;
    }
    if (strchr(".^$*+?()[]{}|\\/-\"' #&~,:;<=>!@%`", e)) {
        *cp = (uint32_t)(unsigned char)e;
        return true;
    }
    (void)x;
    return false;
}

static bool re_class(regex *x, vt_text_buf *b) {
    x->p++; /* '[' */
    bool negated = false;
    if (x->p < x->end && *x->p == '^') negated = true, x->p++;
    range r[128];
    int n = 0;
    bool first = true;
    while (x->p < x->end && (*x->p != ']' || first)) {
        first = false;
        if (n > 120) return re_fail(x, "a class with too many ranges");
        uint32_t lo;
        if (*x->p == '\\') {
            if (x->p + 1 >= x->end) return re_fail(x, "a trailing backslash");
            char e = x->p[1];
            x->p += 2;
            int k = shorthand(e, r + n);
            if (k) {
                n += k;
                continue;
            }
            if (!escape_char(x, e, &lo)) return re_fail(x, "an escape it does not know inside a class");
        } else if (!re_utf8(x, &lo)) {
            return false;
        }
        uint32_t hi = lo;
        if (x->p + 1 < x->end && *x->p == '-' && x->p[1] != ']') {
            x->p++;
            if (*x->p == '\\') {
                if (x->p + 1 >= x->end || !escape_char(x, x->p[1], &hi)) return re_fail(x, "a class range it cannot read");
                x->p += 2;
            } else if (!re_utf8(x, &hi)) {
                return false;
            }
            if (hi < lo) return re_fail(x, "a class range whose end is below its start");
        }
        r[n++] = (range){lo, hi};
    }
    if (x->p >= x->end) return re_fail(x, "an unterminated class");
    x->p++;
    if (negated) negative_class(b, r, n);
    else positive_class(b, r, n);
    return true;
}

/* An atom other than a group, into b (a language without the empty string). */
static bool re_atom(regex *x, vt_text_buf *b) {
    char ch = *x->p;
    if (ch == '[') return re_class(x, b);
    if (ch == '.') {
        x->p++;
        vt_text_puts(b, "[^\\\"\\\\\\x00-\\x1F]");
        return true;
    }
    if (ch == '\\') {
        if (x->p + 1 >= x->end) return re_fail(x, "a trailing backslash");
        char e = x->p[1];
        x->p += 2;
        range r[4];
        int k = shorthand(e, r);
        if (k) {
            positive_class(b, r, k);
            return true;
        }
        if (e == 'D' || e == 'W' || e == 'S') {
            k = shorthand((char)(e + 32), r);
            negative_class(b, r, k);
            return true;
        }
        uint32_t cp;
        if (e >= '1' && e <= '9') return re_fail(x, "back-references are not supported");
        if (!escape_char(x, e, &cp)) return re_fail(x, "an escape it does not know");
        json_spelling(b, cp);
        return true;
    }
    if (ch == '^' || ch == '$') return re_fail(x, "'^' and '$' only at the start and the end");
    if (ch == '*' || ch == '+' || ch == '?' || ch == '{') return re_fail(x, "a quantifier with nothing before it");
    uint32_t cp;
    if (!re_utf8(x, &cp)) return false;
    json_spelling(b, cp);
    return true;
}

static bool re_count(regex *x, unsigned *out) {
    unsigned v = 0;
    if (x->p >= x->end || *x->p < '0' || *x->p > '9') return re_fail(x, "a malformed {m,n}");
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
        v = v * 10 + (unsigned)(*x->p++ - '0');
        if (v > MAX_COUNT) return re_fail(x, "a repetition count above 1000");
    }
    *out = v;
    return true;
}

/* A part of a pattern as GBNF, twice: `all` matches what the part matches;
 * `some` (when !none) matches the same strings but the empty one. A part
 * that matches the empty string (nullable) is repeated through `some`: a
 * repetition of something that may match nothing would make the grammar
 * reach its repetition rule again before consuming a character, which the
 * grammar engine refuses as left recursion, and (X)* is (X without "")*. */
/* pre, s (NULL: nothing), post: texts of any length (sb_printf cuts at 512 bytes). */
static void sb_wrap(vt_text_buf *b, const char *pre, const char *s, const char *post) {
    vt_text_puts(b, pre);
    if (s) vt_text_puts(b, s);
    vt_text_puts(b, post);
}

typedef struct re_part {
    vt_text_buf all, some;
    bool nullable, none; /* none: `some` is empty, the part matches "" only */
} re_part;

static void re_part_free(re_part *v) {
    free(v->all.data);
    free(v->some.data);
    *v = (re_part){0};
}

/* Sizes are checked as parts grow: `some` of a sequence of nullable parts
 * repeats its later parts once per part, which nesting could multiply. */
static bool re_too_big(regex *x, const re_part *v) {
    if (v->all.failed || v->some.failed) return oom(x->c), true;
    if (v->all.len + v->some.len > VT_SCHEMA_MAX_GRAMMAR) {
        re_fail(x, "a grammar too large (repeated groups that may match nothing, nested)");
        return true;
    }
    return false;
}

static bool re_alt(regex *x, re_part *v);

static bool re_group_or_atom(regex *x, re_part *v) {
    *v = (re_part){0};
    if (*x->p != '(') {
        if (!re_atom(x, &v->all)) return false;
        vt_text_puts(&v->some, v->all.data ? v->all.data : "");
        return true;
    }
    if (++x->depth > 32) return re_fail(x, "groups nested too deep");
    x->p++;
    if (x->p < x->end && *x->p == '?') {
        if (x->p + 1 < x->end && x->p[1] == ':') x->p += 2;
        else return re_fail(x, "lookarounds and named groups are not supported");
    }
    if (!re_alt(x, v)) return false;
    if (x->p >= x->end || *x->p != ')') return re_fail(x, "a '(' without its ')'");
    x->p++;
    x->depth--;
    return true;
}

/* Apply a quantifier to part a (taken) into q: '?', '*', '+', or {m,n}
 * (n = UINT_MAX when open). */
static void re_quantify(re_part *a, char kind, unsigned m, unsigned n, re_part *q) {
    *q = (re_part){0};
    if (kind == '?') {
        sb_wrap(&q->all, "(", a->all.data, ")?");
        q->nullable = true;
        q->none = a->none;
        if (!a->none) sb_wrap(&q->some, "(", a->some.data, ")");
        re_part_free(a);
        return;
    }
    if (kind == '*') m = 0, n = UINT_MAX;
    if (kind == '+') m = 1, n = UINT_MAX;
    if (a->none || n == 0) { /* repetitions of "" only, or none at all */
        vt_text_puts(&q->all, "\"\"");
        q->nullable = q->none = true;
        re_part_free(a);
        return;
    }
    /* a nullable part's m required copies may each be empty: (some){0,n} */
    const char *unit = a->nullable ? a->some.data : a->all.data;
    const unsigned lo = a->nullable ? 0 : m;
    if (n == UINT_MAX) {
        sb_wrap(&q->all, "(", unit, lo == 0 ? ")*" : lo == 1 ? ")+" : ")");
        if (lo > 1) vt_text_printf(&q->all, "{%u,}", lo);
        sb_wrap(&q->some, "(", unit, lo <= 1 ? ")+" : ")");
        if (lo > 1) vt_text_printf(&q->some, "{%u,}", lo);
    } else {
        sb_wrap(&q->all, "(", unit, ")");
        vt_text_printf(&q->all, "{%u,%u}", lo, n);
        sb_wrap(&q->some, "(", unit, ")");
        vt_text_printf(&q->some, "{%u,%u}", lo ? lo : 1, n);
    }
    q->nullable = lo == 0;
    re_part_free(a);
}

static bool re_seq(regex *x, re_part *v) {
    *v = (re_part){0};
    re_part *items = NULL;
    size_t n_items = 0;
    bool ok = true;
    while (ok && x->p < x->end && *x->p != '|' && *x->p != ')') {
        if (*x->p == '$' && x->p + 1 == x->end) break;
        re_part *grown = realloc(items, (n_items + 1) * sizeof *items);
        if (!grown) {
            ok = false;
            oom(x->c);
            break;
        }
        items = grown;
        re_part a;
        if (!re_group_or_atom(x, &a)) {
            re_part_free(&a);
            ok = false;
            break;
        }
        char kind = 0;
        unsigned m = 0, n = 0;
        if (x->p < x->end && (*x->p == '*' || *x->p == '+' || *x->p == '?')) {
            kind = *x->p++;
        } else if (x->p < x->end && *x->p == '{') {
            x->p++;
            kind = '{';
            ok = re_count(x, &m);
            n = m;
            if (ok && x->p < x->end && *x->p == ',') {
                x->p++;
                if (x->p < x->end && *x->p == '}') n = UINT_MAX;
                else ok = re_count(x, &n);
            }
            if (ok && (x->p >= x->end || *x->p != '}')) ok = re_fail(x, "a malformed {m,n}");
            if (ok) x->p++;
            if (ok && n < m) ok = re_fail(x, "{m,n} with n below m");
        }
        if (!ok) {
            re_part_free(&a);
            break;
        }
        if (kind) {
            re_quantify(&a, kind, m, n, &items[n_items++]);
            /* lazy or possessive: the same set of strings */
            if (x->p < x->end && (*x->p == '?' || *x->p == '+')) x->p++;
            if (x->p < x->end && (*x->p == '*' || *x->p == '+' || *x->p == '?' || *x->p == '{'))
                ok = re_fail(x, "a quantifier after a quantifier");
        } else {
            /* a group keeps its parentheses (an alternation inside it) */
            re_part g = {0};
            sb_wrap(&g.all, "(", a.all.data, ")");
            if (!a.none) sb_wrap(&g.some, "(", a.some.data, ")");
            g.nullable = a.nullable;
            g.none = a.none;
            re_part_free(&a);
            items[n_items++] = g;
        }
        if (ok && re_too_big(x, &items[n_items - 1])) ok = false;
    }
    if (ok) {
        v->nullable = true;
        for (size_t i = 0; ok && i < n_items; i++) {
            sb_wrap(&v->all, i ? " " : "", items[i].all.data, "");
            v->nullable = v->nullable && items[i].nullable;
            ok = !re_too_big(x, v);
        }
        if (n_items == 0) vt_text_puts(&v->all, "\"\"");
        if (!ok) {
            /* refused above */
        } else if (!v->nullable) {
            vt_text_puts(&v->some, v->all.data);
        } else {
            /* all may be empty: the first non-empty one is part i, every one
             * before it matched "" */
            bool any = false;
            for (size_t i = 0; ok && i < n_items; i++) {
                if (items[i].none) continue;
                sb_wrap(&v->some, any ? " | " : "", items[i].some.data, "");
                /* the size checked as it grows: this text is quadratic in
                 * the parts, and must stop at the bound, not past it */
                for (size_t k = i + 1; ok && k < n_items; k++) {
                    sb_wrap(&v->some, " ", items[k].all.data, "");
                    ok = !re_too_big(x, v);
                }
                ok = ok && !re_too_big(x, v);
                any = true;
            }
            v->none = !any;
        }
        ok = ok && !re_too_big(x, v);
    }
    for (size_t i = 0; i < n_items; i++) re_part_free(&items[i]);
    free(items);
    return ok;
}

static bool re_alt(regex *x, re_part *v) {
    if (!re_seq(x, v)) return false;
    while (x->p < x->end && *x->p == '|') {
        x->p++;
        re_part next;
        if (!re_seq(x, &next)) {
            re_part_free(&next);
            return false;
        }
        sb_wrap(&v->all, " | ", next.all.data, "");
        if (!next.none) sb_wrap(&v->some, v->none ? "" : " | ", next.some.data, "");
        v->none = v->none && next.none;
        v->nullable = v->nullable || next.nullable;
        re_part_free(&next);
        if (re_too_big(x, v)) return false;
    }
    return true;
}

static char *gen_pattern(conv *c, const json_t *s, const char *hint, const char *path) {
    static const char *const allowed[] = {"type", "pattern", NULL};
    const char *other = first_other_than(s, allowed);
    if (other) return fail(c, path, "'%s' beside 'pattern' is not supported", other);
    const json_t *pat = json_object_get(s, "pattern");
    if (!json_is_string(pat)) return fail(c, path, "pattern: expected a string");
    const char *p = json_string_value(pat);
    size_t n = json_string_length(pat);
    regex x = {c, p, p + n, path, 0};
    bool anchored_start = n > 0 && p[0] == '^';
    if (anchored_start) x.p++;
    bool anchored_end = n > 0 && p[n - 1] == '$' && (n < 2 || p[n - 2] != '\\');
    const char *chr = prim(c, "json-char");
    if (!chr) return oom(c);
    vt_text_buf b = {0};
    vt_text_puts(&b, "\"\\\"\" ");
    /* unanchored: the match may sit anywhere in the string */
    if (!anchored_start) vt_text_puts(&b, "json-char* ");
    re_part v;
    if (!re_alt(&x, &v)) {
        re_part_free(&v);
        free(b.data);
        return NULL;
    }
    if (x.p < x.end && !(anchored_end && x.p + 1 == x.end)) {
        re_part_free(&v);
        free(b.data);
        re_fail(&x, "a ')' without its '('");
        return NULL;
    }
    sb_wrap(&b, "(", v.all.data, ")");
    re_part_free(&v);
    if (!anchored_end) vt_text_puts(&b, " json-char*");
    vt_text_puts(&b, " \"\\\"\"");
    return sb_rule(c, hint, &b);
}

static bool count_field(conv *c, const json_t *s, const char *name, long long *out, const char *path) {
    const json_t *v = json_object_get(s, name);
    if (!v) return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return fail(c, path, "%s: expected an integer >= 0", name), false;
    *out = json_integer_value(v);
    return true;
}

static char *gen_string(conv *c, const json_t *s, const char *hint, const char *path) {
    if (json_object_get(s, "pattern")) return gen_pattern(c, s, hint, path);
    const json_t *format = json_object_get(s, "format");
    long long min = 0, max = -1;
    if (!count_field(c, s, "minLength", &min, path) || !count_field(c, s, "maxLength", &max, path)) return NULL;
    if (format) {
        if (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
            return fail(c, path, "minLength/maxLength beside 'format' are not supported");
        const char *f = json_string_value(format);
        const char *rule = !f ? NULL : !strcmp(f, "date") ? "json-date" : !strcmp(f, "time") ? "json-time"
                         : !strcmp(f, "uuid") ? "json-uuid" : !strcmp(f, "date-time") ? "date-time"
                         : !strcmp(f, "email") ? "json-email" : !strcmp(f, "ipv4") ? "json-ipv4" : NULL;
        if (!rule)
            return fail(c, path,
                        "format '%.60s' is not supported (supported: date, time, date-time, uuid, email, ipv4)",
                        f ? f : "(not a string)");
        vt_text_buf b = {0};
        if (!strcmp(rule, "date-time")) {
            if (!prim(c, "json-date") || !prim(c, "json-time")) return oom(c);
            vt_text_puts(&b, "\"\\\"\" json-date \"T\" json-time \"\\\"\"");
        } else {
            if (!prim(c, rule)) return oom(c);
            vt_text_printf(&b, "\"\\\"\" %s \"\\\"\"", rule);
        }
        return sb_rule(c, hint, &b);
    }
    if (min == 0 && max < 0) return prim_dup(c, "json-string");
    if (min > MAX_COUNT) return fail(c, path, "minLength above %d is not supported", MAX_COUNT);
    if (max >= 0 && max < min) return fail(c, path, "maxLength is below minLength");
    if (max > MAX_COUNT) max = MAX_COUNT; /* longer strings are valid but not generated */
    if (!prim(c, "json-char")) return oom(c);
    vt_text_buf b = {0};
    if (max < 0) vt_text_printf(&b, "\"\\\"\" json-char{%lld,} \"\\\"\"", min);
    else vt_text_printf(&b, "\"\\\"\" json-char{%lld,%lld} \"\\\"\"", min, max);
    return sb_rule(c, hint, &b);
}

/* ---- arrays ------------------------------------------------------------------ */

static char *gen_array(conv *c, const json_t *s, const char *hint, const char *path) {
    const json_t *items = json_object_get(s, "items");
    const json_t *prefix = json_object_get(s, "prefixItems");
    const json_t *rest = items;
    char sub[512];
    const char *prefix_kw = "prefixItems";
    if (json_is_array(items)) { /* draft 7's tuple form */
        if (prefix) return fail(c, path, "items as an array beside prefixItems");
        prefix = items;
        prefix_kw = "items";
        rest = json_object_get(s, "additionalItems");
    } else if (json_object_get(s, "additionalItems")) {
        return fail(c, path, "'additionalItems' without an array 'items' is not supported");
    }
    if (prefix && !json_is_array(prefix)) return fail(c, path, "%s: expected an array of schemas", prefix_kw);
    const json_t *unique = json_object_get(s, "uniqueItems");
    if (unique && !json_is_false(unique)) return fail(c, path, "'uniqueItems' is not supported");
    long long min = 0, max = -1;
    if (!count_field(c, s, "minItems", &min, path) || !count_field(c, s, "maxItems", &max, path)) return NULL;
    if (max >= 0 && max < min) return fail(c, path, "maxItems is below minItems");
    if (min > MAX_COUNT) return fail(c, path, "minItems above %d is not supported", MAX_COUNT);
    if (max > MAX_COUNT) max = MAX_COUNT; /* longer arrays are valid but not generated; -1: unbounded */
    const long long k = prefix ? (long long)json_array_size(prefix) : 0;
    const long long used = max >= 0 && max < k ? max : k; /* prefix items generated: all, within maxItems */
    const bool rest_allowed = !json_is_false(rest);
    long long rest_min = min > used ? min - used : 0, rest_max = max >= 0 ? max - used : -1;
    if (!rest_allowed) {
        if (rest_min > 0) return fail(c, path, "minItems needs more items than the schema allows");
        rest_max = 0;
    }
    if (!prim(c, "ws")) return oom(c);
    vt_text_buf b = {0};
    vt_text_puts(&b, "\"[\" ws");
    for (long long i = 0; i < used; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%lld", i);
        child_path(sub, sizeof sub, path, prefix_kw, idx);
        char h[96];
        snprintf(h, sizeof h, "%s-%lld", hint, i);
        char *e = visit(c, json_array_get(prefix, (size_t)i), h, sub);
        if (!e) {
            free(b.data);
            return NULL;
        }
        vt_text_printf(&b, " %s%s ws", i ? "\",\" ws " : "", e);
        free(e);
    }
    if (rest_max != 0) {
        char *r;
        if (!rest || json_is_true(rest)) {
            r = prim_dup(c, "json-value");
        } else {
            child_path(sub, sizeof sub, path, items == rest ? "items" : "additionalItems", NULL);
            char h[96];
            snprintf(h, sizeof h, "%s-item", hint);
            r = visit(c, rest, h, sub);
        }
        if (!r) {
            free(b.data);
            return NULL;
        }
        /* the repetition of ("," item) after a first item: {lo,hi} or {lo,} */
        char reps[64];
        const long long lo = used > 0 ? rest_min : (rest_min > 0 ? rest_min - 1 : 0);
        if (rest_max < 0) snprintf(reps, sizeof reps, "{%lld,}", lo);
        else snprintf(reps, sizeof reps, "{%lld,%lld}", lo, used > 0 ? rest_max : rest_max - 1);
        if (used > 0) vt_text_printf(&b, " (\",\" ws %s ws)%s", r, reps);
        else if (rest_min == 0) vt_text_printf(&b, " (%s ws (\",\" ws %s ws)%s)?", r, r, reps);
        else vt_text_printf(&b, " %s ws (\",\" ws %s ws)%s", r, r, reps);
        free(r);
    }
    vt_text_puts(&b, " \"]\"");
    return sb_rule(c, hint, &b);
}

/* ---- objects ------------------------------------------------------------------- */

typedef struct member {
    const char *name;
    char *kv; /* the rule matching "name": value */
    bool required;
} member;

static bool listed(const json_t *arr, const char *name) {
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), name) == 0) return true;
    }
    return false;
}

static char *member_rule(conv *c, const char *name, const json_t *schema, const char *hint, const char *path) {
    char h[128];
    snprintf(h, sizeof h, "%s-%s", hint, name);
    char *v = visit(c, schema, h, path);
    if (!v) return NULL;
    json_t *js = json_string(name);
    char *key = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
    json_decref(js);
    if (!key) {
        free(v);
        return oom(c);
    }
    vt_text_buf b = {0};
    sb_literal(&b, key, strlen(key));
    vt_text_printf(&b, " ws \":\" ws %s ws", v);
    free(key);
    free(v);
    snprintf(h, sizeof h, "%s-%s-kv", hint, name);
    return sb_rule(c, h, &b);
}

static char *gen_object(conv *c, const json_t *s, const char *hint, const char *path) {
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *addl = json_object_get(s, "additionalProperties");
    char sub[512];
    if (props && !json_is_object(props)) return fail(c, path, "properties: expected an object");
    if (req && !json_is_array(req)) return fail(c, path, "required: expected an array of strings");
    if (addl && !json_is_object(addl) && !json_is_boolean(addl))
        return fail(c, path, "additionalProperties: expected a schema or a boolean");
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v) {
        if (!json_is_string(v)) return fail(c, path, "required[%zu]: expected a string", i);
    }
    if (!prim(c, "ws")) return oom(c);
    const size_t n_props = props ? json_object_size(props) : 0;
    if (n_props == 0 && json_array_size(req) == 0) {
        vt_text_buf b = {0};
        if (json_is_false(addl)) {
            vt_text_puts(&b, "\"{\" ws \"}\"");
        } else if (json_is_object(addl)) { /* a map: any keys, values of one schema */
            child_path(sub, sizeof sub, path, "additionalProperties", NULL);
            char h[96];
            snprintf(h, sizeof h, "%s-value", hint);
            char *val = visit(c, addl, h, sub);
            if (!val || !prim(c, "json-string")) {
                free(val);
                return c->failed ? NULL : oom(c);
            }
            vt_text_printf(&b, "\"{\" ws ( json-string ws \":\" ws %s ws ( \",\" ws json-string ws \":\" ws %s ws )* )? \"}\"",
                      val, val);
            free(val);
        } else {
            return prim_dup(c, "json-object");
        }
        return sb_rule(c, hint, &b);
    }
    const size_t n_req = json_array_size(req);
    member *m = calloc(n_props + n_req + 1, sizeof *m);
    /* the required names, then also the members made: looked up once per
     * property in constant time */
    vt_name_table required = {0};
    bool ok = m != NULL;
    json_array_foreach(req, i, v) {
        ok = ok && vt_name_set(&required, json_string_value(v), strlen(json_string_value(v)), 0);
    }
    if (!ok) {
        free(m);
        vt_name_table_free(&required);
        return oom(c);
    }
    size_t n = 0;
    const char *key;
    json_object_foreach((json_t *)props, key, v) {
        const bool is_required = vt_name_get(&required, key, strlen(key), NULL);
        /* an optional property of schema false is one that never appears
         * (a required one admits no document: refused by the visit) */
        if (json_is_false(v) && !is_required) continue;
        child_path(sub, sizeof sub, path, "properties", key);
        m[n] = (member){key, member_rule(c, key, v, hint, sub), is_required};
        if (!m[n++].kv) break;
    }
    /* required names without a declared schema take additionalProperties'
     * (once each: "required" may name one twice) */
    json_array_foreach(req, i, v) {
        if (c->failed) break;
        const char *name = json_string_value(v);
        if (props && json_object_get(props, name)) continue;
        long made = 0;
        vt_name_get(&required, name, strlen(name), &made);
        if (made) continue;
        if (!vt_name_set(&required, name, strlen(name), 1)) {
            oom(c);
            break;
        }
        if (json_is_false(addl)) {
            fail(c, path, "required '%.60s' is not in properties and additionalProperties is false", name);
            break;
        }
        json_t *any = json_true();
        child_path(sub, sizeof sub, path, "additionalProperties", NULL);
        m[n] = (member){name, member_rule(c, name, json_is_object(addl) ? addl : any, hint, sub), true};
        json_decref(any);
        if (!m[n++].kv) break;
    }
    char *result = NULL;
    if (!c->failed) {
        /* tail_i: the members from i on, each after a comma, the optional ones optional */
        char **tail = calloc(n + 1, sizeof *tail);
        if (!tail) oom(c);
        for (size_t k = n; tail && k-- > 0 && !c->failed;) {
            vt_text_buf b = {0};
            vt_text_printf(&b, m[k].required ? "\",\" ws %s" : "(\",\" ws %s)?", m[k].kv);
            if (tail[k + 1]) vt_text_printf(&b, " %s", tail[k + 1]);
            char h[128];
            snprintf(h, sizeof h, "%s-tail", hint);
            tail[k] = sb_rule(c, h, &b);
        }
        if (!c->failed) {
            /* the first member present is one of those up to the first required one */
            vt_text_buf b = {0};
            vt_text_puts(&b, "\"{\" ws (");
            bool required_seen = false;
            for (size_t k = 0; k < n && !required_seen; k++) {
                if (k) vt_text_puts(&b, " |");
                vt_text_printf(&b, " %s%s%s", m[k].kv, tail[k + 1] ? " " : "", tail[k + 1] ? tail[k + 1] : "");
                required_seen = m[k].required;
            }
            if (!required_seen) vt_text_puts(&b, " |");
            vt_text_puts(&b, " ) \"}\"");
            result = sb_rule(c, hint, &b);
        }
        for (size_t k = 0; tail && k <= n; k++) free(tail[k]);
        free(tail);
    }
    for (size_t k = 0; k < n; k++) free(m[k].kv);
    free(m);
    vt_name_table_free(&required);
    return result;
}

/* ---- combinations ---------------------------------------------------------------- */

/* The JSON types a schema can produce, as bits (object 1, array 2, string 4,
 * number 8 (integer too), boolean 16, null 32); all bits when unknown. */
static unsigned kinds(conv *c, const json_t *s, int depth) {
    const unsigned ALL = 63;
    if (depth > 16 || !json_is_object(s)) return ALL;
    const json_t *ref = json_object_get(s, "$ref");
    if (json_is_string(ref)) {
        const json_t *t = resolve(c, json_string_value(ref), "");
        if (c->failed) return ALL;
        return kinds(c, t, depth + 1);
    }
    const json_t *values = json_object_get(s, "enum");
    const json_t *cst = json_object_get(s, "const");
    if (cst || json_is_array(values)) {
        unsigned k = 0;
        for (size_t i = 0; i < (cst ? 1 : json_array_size(values)); i++) {
            const json_t *v = cst ? cst : json_array_get(values, i);
            k |= json_is_object(v) ? 1 : json_is_array(v) ? 2 : json_is_string(v) ? 4 : json_is_number(v) ? 8
               : json_is_boolean(v) ? 16 : 32;
        }
        return k;
    }
    const json_t *type = json_object_get(s, "type");
    if (!type) return ALL;
    unsigned k = 0;
    for (size_t i = 0; i < (json_is_array(type) ? json_array_size(type) : 1); i++) {
        const char *t = json_string_value(json_is_array(type) ? json_array_get(type, i) : type);
        if (!t) return ALL;
        k |= !strcmp(t, "object") ? 1 : !strcmp(t, "array") ? 2 : !strcmp(t, "string") ? 4
           : (!strcmp(t, "number") || !strcmp(t, "integer")) ? 8 : !strcmp(t, "boolean") ? 16 : !strcmp(t, "null") ? 32 : ALL;
    }
    return k;
}

/* A branch's schema with its $refs followed (NULL if it is not an object schema). */
static const json_t *follow_refs(conv *c, const json_t *s) {
    for (int hops = 0; json_is_object(s) && json_is_string(json_object_get(s, "$ref")) && hops < 16; hops++)
        s = resolve(c, json_string_value(json_object_get(s, "$ref")), "");
    return json_is_object(s) ? s : NULL;
}

/* The value a property must have in an object schema: its const, or a
 * one-value enum; NULL when it may have others. */
static const json_t *fixed_value(conv *c, const json_t *obj, const char *name) {
    const json_t *props = json_object_get(obj, "properties");
    const json_t *p = follow_refs(c, json_object_get(props, name));
    if (!p || !listed(json_object_get(obj, "required"), name)) return NULL;
    const json_t *cst = json_object_get(p, "const");
    if (cst) return cst;
    const json_t *en = json_object_get(p, "enum");
    return json_is_array(en) && json_array_size(en) == 1 ? json_array_get(en, 0) : NULL;
}

/* Append rule e as alternative i of b (" | " between alternatives) and
 * free it; for a NULL e (a branch that failed) free b instead and return
 * false. */
static bool add_alternative(vt_text_buf *b, size_t i, char *e) {
    if (!e) {
        free(b->data);
        b->data = NULL;
        return false;
    }
    vt_text_printf(b, "%s%s", i ? " | " : "", e);
    free(e);
    return true;
}

/* oneOf of object schemas told apart by one property (a discriminated union,
 * as Pydantic writes them): each branch requires it with its own fixed value,
 * so no object can match two branches. */
static bool discriminated(conv *c, const json_t *branches) {
    const json_t *first = follow_refs(c, json_array_get(branches, 0));
    if (c->failed || !first) return false;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(first, "properties"), key, v) {
        (void)v;
        bool distinct = true;
        for (size_t i = 0; i < json_array_size(branches) && distinct; i++) {
            const json_t *bi = follow_refs(c, json_array_get(branches, i));
            const json_t *t = bi ? json_object_get(bi, "type") : NULL;
            const json_t *vi = bi ? fixed_value(c, bi, key) : NULL;
            distinct = vi && json_is_string(t) && !strcmp(json_string_value(t), "object");
            for (size_t k = 0; k < i && distinct; k++)
                distinct = !json_equal((json_t *)vi, (json_t *)fixed_value(c, follow_refs(c, json_array_get(branches, k)), key));
        }
        if (c->failed) return false;
        if (distinct) return true;
    }
    return false;
}

static char *gen_any_of(conv *c, const json_t *s, const char *kw, const char *hint, const char *path) {
    static const char *const allowed[] = {"anyOf", "oneOf", NULL};
    const char *other = first_other_than(s, allowed);
    if (other) return fail(c, path, "'%s' beside '%s' is not supported (move it into each branch)", other, kw);
    if (json_object_get(s, "anyOf") && json_object_get(s, "oneOf")) return fail(c, path, "anyOf beside oneOf is not supported");
    const json_t *branches = json_object_get(s, kw);
    if (!json_is_array(branches) || json_array_size(branches) == 0)
        return fail(c, path, "%s: expected a non-empty array of schemas", kw);
    const size_t n = json_array_size(branches);
    if (!strcmp(kw, "oneOf")) {
        /* exactly one branch must match: generated only when no value can match two */
        unsigned seen = 0;
        bool overlap = false;
        for (size_t i = 0; i < n; i++) {
            unsigned k = kinds(c, json_array_get(branches, i), 0);
            if (c->failed) return NULL;
            overlap |= (k & seen) != 0;
            seen |= k;
        }
        if (overlap && !discriminated(c, branches))
            return fail(c, path,
                        "oneOf: its branches may match the same value (vt generates oneOf when the branches' types "
                        "differ, or when they are objects told apart by a required property with a different "
                        "const in each); use anyOf");
    }
    vt_text_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        char idx[24], sub[512], h[96];
        snprintf(idx, sizeof idx, "%zu", i);
        child_path(sub, sizeof sub, path, kw, idx);
        snprintf(h, sizeof h, "%s-%zu", hint, i);
        if (!add_alternative(&b, i, visit(c, json_array_get(branches, i), h, sub))) return NULL;
    }
    return sb_rule(c, hint, &b);
}

/* allOf of object schemas: one object with every branch's properties and required names. */
static char *gen_all_of(conv *c, const json_t *s, const char *hint, const char *path) {
    const json_t *branches = json_object_get(s, "allOf");
    if (!json_is_array(branches) || json_array_size(branches) == 0)
        return fail(c, path, "allOf: expected a non-empty array of schemas");
    static const char *const only_all_of[] = {"allOf", NULL};
    if (json_array_size(branches) == 1 && !has_other_than(s, only_all_of)) {
        char sub[512];
        child_path(sub, sizeof sub, path, "allOf", "0");
        return visit(c, json_array_get(branches, 0), hint, sub);
    }
    static const char *const mergeable[] = {"type", "properties", "required", "additionalProperties", "allOf", NULL};
    json_t *merged = json_object();
    json_t *props = json_object(), *req = json_array();
    json_t *allowed = NULL; /* with a closed branch: the names every closed branch declares */
    bool closed = false;
    const char *err = NULL;
    char err_path[512];
    snprintf(err_path, sizeof err_path, "%s", path);
    /* the schema itself, then each branch */
    for (size_t i = 0; i <= json_array_size(branches) && !err && !c->failed; i++) {
        const json_t *b = i == 0 ? s : json_array_get(branches, i - 1);
        if (i > 0) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i - 1);
            child_path(err_path, sizeof err_path, path, "allOf", idx);
        }
        for (int hops = 0; json_is_object(b) && json_is_string(json_object_get(b, "$ref")) && hops < 16; hops++) {
            static const char *const only_ref[] = {"$ref", NULL};
            if (has_other_than(b, only_ref)) break;
            b = resolve(c, json_string_value(json_object_get(b, "$ref")), err_path);
        }
        if (c->failed) break;
        if (!json_is_object(b)) {
            err = "allOf: each branch must be an object schema";
            break;
        }
        const char *other = first_other_than(b, mergeable);
        if (other) {
            fail(c, err_path, "'%s' in an allOf branch is not supported (allOf merges object schemas: type, "
                              "properties, required, additionalProperties)", other);
            break;
        }
        if (i > 0 && json_object_get(b, "allOf")) {
            err = "allOf inside allOf is not supported";
            break;
        }
        const json_t *t = json_object_get(b, "type");
        if (t && !(json_is_string(t) && !strcmp(json_string_value(t), "object"))) {
            err = "allOf merges object schemas only (type must be \"object\")";
            break;
        }
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(b, "properties"), key, v) {
            json_t *have = json_object_get(props, key);
            if (have && !json_equal(have, v)) {
                fail(c, err_path, "allOf: property '%.60s' has different schemas in two branches", key);
                break;
            }
            json_object_set(props, key, v);
        }
        size_t k;
        json_array_foreach(json_object_get(b, "required"), k, v) {
            if (json_is_string(v) && !listed(req, json_string_value(v))) json_array_append(req, v);
        }
        const json_t *a = json_object_get(b, "additionalProperties");
        if (a && !json_is_boolean(a)) {
            err = "allOf: additionalProperties as a schema is not supported in a merge";
            break;
        }
        if (json_is_false(a)) { /* this branch admits its own properties only: so does the merge */
            const json_t *own = json_object_get(b, "properties");
            if (!closed) {
                json_decref(allowed);
                allowed = json_object();
                json_object_foreach((json_t *)own, key, v) { json_object_set_new(allowed, key, json_true()); }
            } else {
                void *tmp;
                json_object_foreach_safe(allowed, tmp, key, v) {
                    if (!json_object_get(own, key)) json_object_del(allowed, key);
                }
            }
            closed = true;
        }
    }
    if (closed && !c->failed && !err) {
        void *tmp;
        const char *key;
        json_t *v;
        json_object_foreach_safe(props, tmp, key, v) {
            if (!json_object_get(allowed, key)) json_object_del(props, key);
        }
        size_t k;
        json_array_foreach(req, k, v) {
            if (!json_object_get(allowed, json_string_value(v))) {
                fail(c, path, "allOf: '%.60s' is required but a branch with additionalProperties false does not "
                              "declare it: no value is valid",
                     json_string_value(v));
                break;
            }
        }
    }
    char *out = NULL;
    if (err) fail(c, err_path, "%s", err);
    if (!c->failed) {
        json_object_set_new(merged, "type", json_string("object"));
        json_object_set(merged, "properties", props);
        json_object_set(merged, "required", req);
        if (closed) json_object_set_new(merged, "additionalProperties", json_false());
        out = gen_object(c, merged, hint, path);
    }
    json_decref(props);
    json_decref(req);
    json_decref(merged);
    json_decref(allowed);
    return out;
}

/* ---- one schema ------------------------------------------------------------------ */

static char *gen_type(conv *c, const json_t *s, const char *t, const char *hint, const char *path) {
    if (!strcmp(t, "object")) return gen_object(c, s, hint, path);
    if (!strcmp(t, "array")) return gen_array(c, s, hint, path);
    if (!strcmp(t, "string")) return gen_string(c, s, hint, path);
    if (!strcmp(t, "integer")) return gen_number(c, s, true, hint, path);
    if (!strcmp(t, "number")) return gen_number(c, s, false, hint, path);
    if (!strcmp(t, "boolean")) return prim_dup(c, "json-bool");
    if (!strcmp(t, "null")) return prim_dup(c, "json-null");
    return fail(c, path, "type '%.40s' is not a JSON Schema type", t);
}

/* The type the keywords imply when "type" is absent, or NULL (any value). */
static const char *implied_type(conv *c, const json_t *s, const char *path) {
    static const struct {
        const char *kw, *type;
    } implies[] = {{"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
                   {"items", "array"},       {"prefixItems", "array"}, {"minItems", "array"},
                   {"maxItems", "array"},    {"additionalItems", "array"}, {"uniqueItems", "array"},
                   {"minLength", "string"},  {"maxLength", "string"}, {"pattern", "string"},
                   {"format", "string"},     {"minimum", "number"},   {"maximum", "number"},
                   {"exclusiveMinimum", "number"}, {"exclusiveMaximum", "number"}};
    const char *type = NULL, *kw = NULL;
    for (size_t i = 0; i < sizeof implies / sizeof *implies; i++) {
        if (!json_object_get(s, implies[i].kw)) continue;
        if (type && strcmp(type, implies[i].type) != 0) {
            fail(c, path, "'%s' and '%s' without 'type': give the type", kw, implies[i].kw);
            return NULL;
        }
        type = implies[i].type;
        kw = implies[i].kw;
    }
    return type;
}

static char *visit_object(conv *c, const json_t *s, const char *hint, const char *path) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        (void)v;
        if (!in_list(KNOWN, key) && !in_list(ANNOTATIONS, key))
            return fail(c, path, "'%.60s' is not supported (vt would not enforce it)", key);
    }
    if (json_object_get(s, "$ref")) return visit_ref(c, s, path);
    if (json_object_get(s, "allOf")) return gen_all_of(c, s, hint, path);
    if (json_object_get(s, "anyOf")) return gen_any_of(c, s, "anyOf", hint, path);
    if (json_object_get(s, "oneOf")) return gen_any_of(c, s, "oneOf", hint, path);
    if (json_object_get(s, "enum") || json_object_get(s, "const")) return visit_enum(c, s, hint, path);
    const json_t *type = json_object_get(s, "type");
    if (!type) {
        const char *t = implied_type(c, s, path);
        if (c->failed) return NULL;
        return t ? gen_type(c, s, t, hint, path) : prim_dup(c, "json-value");
    }
    if (json_is_string(type)) return gen_type(c, s, json_string_value(type), hint, path);
    if (!json_is_array(type) || json_array_size(type) == 0)
        return fail(c, path, "type: expected a type name or a non-empty array of them");
    vt_text_buf b = {0};
    size_t i;
    json_array_foreach(type, i, v) {
        if (!json_is_string(v)) {
            free(b.data);
            return fail(c, path, "type[%zu]: expected a type name", i);
        }
        char h[96];
        snprintf(h, sizeof h, "%s-%s", hint, json_string_value(v));
        if (!add_alternative(&b, i, gen_type(c, s, json_string_value(v), h, path))) return NULL;
    }
    return sb_rule(c, hint, &b);
}

/* The rule (its name, malloc'ed) for schema s. */
static char *visit(conv *c, const json_t *s, const char *hint, const char *path) {
    if (c->failed) return NULL;
    if (c->depth >= VT_SCHEMA_MAX_DEPTH)
        return fail(c, path, "schemas nested deeper than %d", VT_SCHEMA_MAX_DEPTH);
    char *out;
    c->depth++;
    if (json_is_true(s)) out = prim_dup(c, "json-value");
    else if (json_is_false(s)) out = fail(c, path, "the schema false admits no value");
    else if (!json_is_object(s)) out = fail(c, path, "a schema must be an object or a boolean");
    else out = visit_object(c, s, hint, path);
    c->depth--;
    if (c->failed) {
        free(out);
        return NULL;
    }
    return out;
}

static void free_conv(conv *c) {
    for (size_t i = 0; i < c->n_rules; i++) {
        free(c->rules[i].name);
        free(c->rules[i].body);
    }
    free(c->rules);
    for (size_t i = 0; i < c->n_refs; i++) {
        free(c->refs[i].ref);
        free(c->refs[i].name);
    }
    free(c->refs);
    vt_name_table_free(&c->by_name);
    vt_name_table_free(&c->next_suffix);
    vt_name_table_free(&c->by_ref);
}

char *vt_json_schema_to_gbnf(const json_t *schema, char *err, size_t err_size) {
    return vt_json_schema_to_gbnf_rule(schema, "root", err, err_size);
}

char *vt_json_schema_to_gbnf_rule(const json_t *schema, const char *rule, char *err, size_t err_size) {
    char scratch[8];
    conv c = {.root = schema, .err = err ? err : scratch, .err_size = err ? err_size : sizeof scratch};
    if (c.err_size) c.err[0] = 0;
    char *top = visit(&c, schema, rule, "");
    vt_text_buf out = {0};
    if (top && strcmp(top, rule) != 0) vt_text_printf(&out, "%s ::= %s\n", rule, top);
    free(top);
    for (size_t i = 0; !c.failed && i < c.n_rules; i++) {
        vt_text_puts(&out, c.rules[i].name);
        vt_text_puts(&out, " ::= ");
        vt_text_puts(&out, c.rules[i].body);
        vt_text_puts(&out, "\n");
    }
    bool ok = !c.failed && !out.failed;
    if (!c.failed && out.failed) fail(&c, "", "out of memory converting the schema");
    free_conv(&c);
    if (!ok) {
        free(out.data);
        return NULL;
    }
    return vt_text_take(&out);
}

char *vt_json_object_gbnf(void) {
    json_t *schema = json_pack("{s:s}", "type", "object");
    char *g = schema ? vt_json_schema_to_gbnf(schema, NULL, 0) : NULL;
    json_decref(schema);
    return g;
}
