/* gbnf_parse.c — GBNF text -> the compiled grammar of grammar_internal.h.
 *
 * A recursive-descent parser over llama.cpp's syntax. Groups become rules of
 * their own; repetitions are expanded into copies and generated rules
 * (x{2,4} = x x (x (x)?)?), which is why their counts are bounded. Every
 * error names the line and column where the text stops making sense; after
 * the parse the rules are checked as a whole (each reference defined, a
 * root, no left recursion: a rule reaching itself before consuming a
 * character would make a step's expansion endless). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_internal.h"
#include "name_table.h"

typedef struct rulebuf {
    vt_gelem *e;
    uint32_t n, cap;
    char *name;          /* as written, or "<parent>-<k>" for a generated rule */
    bool defined;
    const char *used_at; /* the first reference, for "undefined rule" */
} rulebuf;

typedef struct parser {
    const char *src, *pos, *end;
    rulebuf *rules;
    uint32_t n_rules, cap_rules;
    uint64_t n_elems;
    int depth;
    vt_error *err;
    bool failed;
    /* where each rule name is written (definitions and references, in
     * text order), kept only when renaming (vt_grammar_union_text) */
    bool record_names;
    size_t *name_at;
    size_t n_names, cap_names;
    /* the text ends where a rule's alternative may still begin (after
     * "::=" or '|'), so text appended after a newline would continue it */
    bool ends_open;
    /* written rule names -> their index, found in constant time: a large
     * JSON schema's grammar has thousands of rules */
    vt_name_table by_name;
} parser;

static void where(const parser *p, const char *at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *c = p->src; c < at && c < p->end; c++) {
        if (*c == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

__attribute__((format(printf, 3, 4))) static bool fail_at(parser *p, const char *at, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(p, at, &line, &col);
    vt_fail(p->err, VT_ERR_INVALID, "grammar: line %d, column %d: %s", line, col, msg);
    return false;
}

static bool oom(parser *p) {
    if (!p->failed) vt_fail(p->err, VT_ERR_NOMEM, "grammar: out of memory");
    p->failed = true;
    return false;
}

static bool push(parser *p, rulebuf *r, uint32_t type, uint32_t value) {
    if (p->n_elems >= VT_GRAMMAR_MAX_ELEMENTS)
        return fail_at(p, p->pos, "the grammar expands to more than %u elements (repetitions are expanded)",
                       VT_GRAMMAR_MAX_ELEMENTS);
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 16;
        vt_gelem *e = realloc(r->e, cap * sizeof *e);
        if (!e) return oom(p);
        r->e = e;
        r->cap = cap;
    }
    r->e[r->n++] = (vt_gelem){type, value};
    p->n_elems++;
    return true;
}

/* A new rule (its index, or UINT32_MAX on failure); name is copied. */
static uint32_t new_rule(parser *p, const char *name, size_t len) {
    if (p->n_rules >= VT_GRAMMAR_MAX_RULES) {
        fail_at(p, p->pos, "more than %d rules (groups and repetitions make rules too)", VT_GRAMMAR_MAX_RULES);
        return UINT32_MAX;
    }
    if (p->n_rules == p->cap_rules) {
        uint32_t cap = p->cap_rules ? 2 * p->cap_rules : 32;
        rulebuf *r = realloc(p->rules, cap * sizeof *r);
        if (!r) return oom(p), UINT32_MAX;
        p->rules = r;
        p->cap_rules = cap;
    }
    rulebuf *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) return oom(p), UINT32_MAX;
    memcpy(r->name, name, len);
    r->name[len] = 0;
    return p->n_rules++;
}

/* A rule made for a group or a repetition inside rule parent. Its name
 * (seen only in messages) holds a '/', which no written rule name may, so it
 * never meets one a grammar defines or refers to. */
static uint32_t generated_rule(parser *p, uint32_t parent) {
    char name[96];
    int n = snprintf(name, sizeof name, "%.60s/%u", p->rules[parent].name, p->n_rules);
    return new_rule(p, name, (size_t)n);
}

static bool record_name(parser *p, const char *name) {
    if (p->n_names == p->cap_names) {
        size_t cap = p->cap_names ? 2 * p->cap_names : 64;
        size_t *grown = realloc(p->name_at, cap * sizeof *grown);
        if (!grown) return oom(p);
        p->name_at = grown;
        p->cap_names = cap;
    }
    p->name_at[p->n_names++] = (size_t)(name - p->src);
    return true;
}

static uint32_t rule_named(parser *p, const char *name, size_t len, const char *at) {
    if (p->record_names && !record_name(p, name)) return UINT32_MAX;
    long known;
    if (vt_name_get(&p->by_name, name, len, &known)) return (uint32_t)known;
    uint32_t id = new_rule(p, name, len);
    if (id == UINT32_MAX) return id;
    if (!vt_name_set(&p->by_name, name, len, id)) return oom(p), UINT32_MAX;
    p->rules[id].used_at = at;
    return id;
}

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Spaces, tabs and # comments; newlines too when newlines is set. */
static void skip_space(parser *p, bool newlines) {
    while (p->pos < p->end) {
        char c = *p->pos;
        if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->end && *p->pos != '\n') p->pos++;
        } else {
            break;
        }
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 character of the grammar text itself. */
static bool decode_source_utf8(parser *p, uint32_t *out) {
    const unsigned char *s = (const unsigned char *)p->pos;
    size_t left = (size_t)(p->end - p->pos);
    unsigned char b = s[0];
    int n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || (size_t)n > left) return fail_at(p, p->pos, "the grammar text is not valid UTF-8");
    uint32_t c = n == 1 ? b : n == 2 ? (b & 0x1fu) : n == 3 ? (b & 0x0fu) : (b & 0x07u);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return fail_at(p, p->pos, "the grammar text is not valid UTF-8");
        c = (c << 6) | (s[i] & 0x3fu);
    }
    static const uint32_t min_of[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min_of[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return fail_at(p, p->pos, "the grammar text is not valid UTF-8");
    p->pos += n;
    *out = c;
    return true;
}

/* One character of a literal or a class, escapes decoded. */
static bool parse_char(parser *p, uint32_t *out) {
    if (p->pos >= p->end) return fail_at(p, p->pos, "unexpected end of the grammar");
    if (*p->pos != '\\') return decode_source_utf8(p, out);
    const char *at = p->pos;
    if (p->pos + 1 >= p->end) return fail_at(p, at, "unexpected end of the grammar after '\\'");
    char e = p->pos[1];
    p->pos += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = p->pos < p->end ? hex_value(*p->pos) : -1;
            if (h < 0) return fail_at(p, at, "\\%c needs %d hexadecimal digits", e, digits);
            v = (v << 4) | (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
            return fail_at(p, at, "\\%c%0*X is not a Unicode scalar value", e, digits, v);
        *out = v;
        return true;
    }
    switch (e) {
    case 'n': *out = '\n'; return true;
    case 'r': *out = '\r'; return true;
    case 't': *out = '\t'; return true;
    case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '.': case '(': case ')':
        *out = (uint32_t)(unsigned char)e;
        return true;
    default: break;
    }
    return fail_at(p, at, "unknown escape '\\%c' (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ \\xHH \\uHHHH \\UHHHHHHHH)",
                   (e >= 0x20 && e < 0x7f) ? e : '?');
}

static bool parse_alternates(parser *p, uint32_t rule);

/* Replace the symbol r->e[start..n) by its repetition {min,max} (max
 * UINT32_MAX: unbounded). */
static bool repeat_last(parser *p, uint32_t rule, uint32_t start, uint32_t min, uint32_t max, const char *at) {
    if (min > VT_GRAMMAR_MAX_REPEAT || (max != UINT32_MAX && max > VT_GRAMMAR_MAX_REPEAT))
        return fail_at(p, at, "repetition count above %d", VT_GRAMMAR_MAX_REPEAT);
    if (max < min) return fail_at(p, at, "repetition {%u,%u}: the maximum is below the minimum", min, max);
    rulebuf *r = &p->rules[rule];
    const uint32_t len = r->n - start;
    vt_gelem *sym = malloc((len ? len : 1) * sizeof *sym);
    if (!sym) return oom(p);
    memcpy(sym, r->e + start, len * sizeof *sym);
    p->n_elems -= len;
    r->n = start;
    bool ok = true;
    for (uint32_t k = 0; ok && k < min; k++)
        for (uint32_t i = 0; ok && i < len; i++) ok = push(p, &p->rules[rule], sym[i].type, sym[i].value);
    if (ok && max == UINT32_MAX) {
        /* tail ::= sym tail | (nothing) */
        uint32_t tail = generated_rule(p, rule);
        ok = tail != UINT32_MAX;
        for (uint32_t i = 0; ok && i < len; i++) ok = push(p, &p->rules[tail], sym[i].type, sym[i].value);
        ok = ok && push(p, &p->rules[tail], VT_G_RULE_REF, tail) && push(p, &p->rules[tail], VT_G_ALT, 0) &&
             push(p, &p->rules[tail], VT_G_END, 0);
        if (ok) p->rules[tail].defined = true;
        ok = ok && push(p, &p->rules[rule], VT_G_RULE_REF, tail);
    } else if (ok && max > min) {
        /* opt_1 ::= sym | (nothing); opt_k ::= sym opt_{k-1} | (nothing) */
        uint32_t inner = UINT32_MAX;
        for (uint32_t k = 0; ok && k < max - min; k++) {
            uint32_t opt = generated_rule(p, rule);
            ok = opt != UINT32_MAX;
            for (uint32_t i = 0; ok && i < len; i++) ok = push(p, &p->rules[opt], sym[i].type, sym[i].value);
            if (ok && inner != UINT32_MAX) ok = push(p, &p->rules[opt], VT_G_RULE_REF, inner);
            ok = ok && push(p, &p->rules[opt], VT_G_ALT, 0) && push(p, &p->rules[opt], VT_G_END, 0);
            if (ok) p->rules[opt].defined = true;
            inner = opt;
        }
        ok = ok && push(p, &p->rules[rule], VT_G_RULE_REF, inner);
    }
    free(sym);
    return ok;
}

static bool parse_count(parser *p, uint32_t *out) {
    const char *at = p->pos;
    uint64_t v = 0;
    if (p->pos >= p->end || *p->pos < '0' || *p->pos > '9') return fail_at(p, at, "expected a number");
    while (p->pos < p->end && *p->pos >= '0' && *p->pos <= '9') {
        v = v * 10 + (uint64_t)(*p->pos - '0');
        if (v > VT_GRAMMAR_MAX_REPEAT) return fail_at(p, at, "repetition count above %d", VT_GRAMMAR_MAX_REPEAT);
        p->pos++;
    }
    *out = (uint32_t)v;
    return true;
}

/* One alternative: symbols until '|', ')', or (at a rule's top level) the end of the line. */
static bool parse_sequence(parser *p, uint32_t rule, bool nested) {
    uint32_t last_start = UINT32_MAX; /* where the last symbol's elements begin */
    while (!p->failed && p->pos < p->end) {
        const char *at = p->pos;
        char c = *p->pos;
        if (c == '"') {
            p->pos++;
            last_start = p->rules[rule].n;
            while (p->pos < p->end && *p->pos != '"') {
                uint32_t cp;
                if (!parse_char(p, &cp) || !push(p, &p->rules[rule], VT_G_CHAR, cp)) return false;
            }
            if (p->pos >= p->end) return fail_at(p, at, "unterminated string literal");
            p->pos++;
        } else if (c == '[') {
            p->pos++;
            last_start = p->rules[rule].n;
            uint32_t type = VT_G_CHAR;
            if (p->pos < p->end && *p->pos == '^') {
                type = VT_G_CHAR_NOT;
                p->pos++;
            }
            bool first = true;
            while (p->pos < p->end && *p->pos != ']') {
                uint32_t lo;
                if (!parse_char(p, &lo) || !push(p, &p->rules[rule], first ? type : VT_G_CHAR_ALT, lo)) return false;
                first = false;
                if (p->pos + 1 < p->end && *p->pos == '-' && p->pos[1] != ']') {
                    const char *range_at = p->pos;
                    p->pos++;
                    uint32_t hi;
                    if (!parse_char(p, &hi)) return false;
                    if (hi < lo) return fail_at(p, range_at, "character range with its end (U+%04X) below its start (U+%04X)", hi, lo);
                    if (!push(p, &p->rules[rule], VT_G_RANGE_UPPER, hi)) return false;
                }
            }
            if (p->pos >= p->end) return fail_at(p, at, "unterminated character class");
            if (first) return fail_at(p, at, "empty character class");
            p->pos++;
        } else if (is_word_char(c)) {
            const char *name = p->pos;
            while (p->pos < p->end && is_word_char(*p->pos)) p->pos++;
            uint32_t ref = rule_named(p, name, (size_t)(p->pos - name), name);
            if (ref == UINT32_MAX) return false;
            last_start = p->rules[rule].n;
            if (!push(p, &p->rules[rule], VT_G_RULE_REF, ref)) return false;
        } else if (c == '(') {
            if (++p->depth > VT_GRAMMAR_MAX_NESTING)
                return fail_at(p, at, "parentheses nested deeper than %d", VT_GRAMMAR_MAX_NESTING);
            p->pos++;
            skip_space(p, true);
            uint32_t sub = generated_rule(p, rule);
            if (sub == UINT32_MAX || !parse_alternates(p, sub)) return false;
            p->rules[sub].defined = true;
            if (p->pos >= p->end || *p->pos != ')') return fail_at(p, at, "'(' without its ')'");
            p->pos++;
            p->depth--;
            last_start = p->rules[rule].n;
            if (!push(p, &p->rules[rule], VT_G_RULE_REF, sub)) return false;
        } else if (c == '.') {
            p->pos++;
            last_start = p->rules[rule].n;
            if (!push(p, &p->rules[rule], VT_G_CHAR_ANY, 0)) return false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last_start == UINT32_MAX || last_start == p->rules[rule].n)
                return fail_at(p, at, "'%c' with nothing before it to repeat", c);
            uint32_t min = c == '+' ? 1 : 0, max = c == '?' ? 1 : UINT32_MAX;
            p->pos++;
            if (c == '{') {
                skip_space(p, false);
                if (!parse_count(p, &min)) return false;
                skip_space(p, false);
                max = min;
                if (p->pos < p->end && *p->pos == ',') {
                    p->pos++;
                    skip_space(p, false);
                    max = UINT32_MAX;
                    if (p->pos < p->end && *p->pos != '}' && !parse_count(p, &max)) return false;
                    skip_space(p, false);
                }
                if (p->pos >= p->end || *p->pos != '}') return fail_at(p, at, "'{' without its '}'");
                p->pos++;
            }
            if (!repeat_last(p, rule, last_start, min, max, at)) return false;
        } else {
            break;
        }
        skip_space(p, nested);
    }
    return !p->failed;
}

/* Alternatives of rule into its elements, END-terminated. */
static bool parse_alternates(parser *p, uint32_t rule) {
    if (!parse_sequence(p, rule, p->depth > 0)) return false;
    while (p->pos < p->end && *p->pos == '|') {
        p->pos++;
        if (!push(p, &p->rules[rule], VT_G_ALT, 0)) return false;
        skip_space(p, true);
        p->ends_open = p->pos == p->end;
        if (!parse_sequence(p, rule, p->depth > 0)) return false;
    }
    return push(p, &p->rules[rule], VT_G_END, 0);
}

static bool parse_rule(parser *p) {
    const char *at = p->pos;
    const char *name = p->pos;
    while (p->pos < p->end && is_word_char(*p->pos)) p->pos++;
    if (p->pos == name) return fail_at(p, at, "expected a rule name");
    uint32_t id = rule_named(p, name, (size_t)(p->pos - name), name);
    if (id == UINT32_MAX) return false;
    if (p->rules[id].defined)
        return fail_at(p, at, "rule '%s' is defined twice", p->rules[id].name);
    skip_space(p, false);
    if (p->end - p->pos < 3 || memcmp(p->pos, "::=", 3) != 0) return fail_at(p, p->pos, "expected '::=' after the rule name");
    p->pos += 3;
    skip_space(p, true);
    p->ends_open = p->pos == p->end;
    if (!parse_alternates(p, id)) return false;
    p->rules[id].defined = true;
    skip_space(p, false);
    if (p->pos < p->end && *p->pos != '\n')
        return fail_at(p, p->pos, *p->pos == ')' ? "')' without its '('" : "unexpected character '%c'",
                       (*p->pos >= 0x20 && *p->pos < 0x7f) ? *p->pos : '?');
    return true;
}

/* ---- whole-grammar checks ------------------------------------------------ */

static bool elem_nullable(const bool *nullable, vt_gelem e) {
    return e.type == VT_G_RULE_REF && nullable[e.value];
}

/* Does the element at rb->e[*i] have the property mark_rules computes, given
 * the rules marked so far? Leaves *i on the element's last position (a set
 * runs over several). */
typedef bool (*elem_holds_fn)(const rulebuf *rb, uint32_t *i, const bool *marked);

/* marked[r] for every rule r one of whose alternatives has every element
 * holding: the least such marking, found by marking until nothing changes
 * (a rule's mark can rest on rules marked after it). */
static void mark_rules(const parser *p, bool *marked, elem_holds_fn holds) {
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < p->n_rules; r++) {
            if (marked[r]) continue;
            const rulebuf *rb = &p->rules[r];
            bool all = true;
            for (uint32_t i = 0; i < rb->n; i++) {
                if (vt_gelem_ends_alt(rb->e[i])) {
                    if (all) {
                        marked[r] = changed = true;
                        break;
                    }
                    all = true;
                    continue;
                }
                if (all && !holds(rb, &i, marked)) all = false;
            }
        }
    }
}

/* A rule reference to a rule that matches the empty string (a set never does). */
static bool elem_matches_empty(const rulebuf *rb, uint32_t *i, const bool *nullable) {
    return elem_nullable(nullable, rb->e[*i]);
}

/* rule -> the rules it may start with (after nullable symbols); a cycle here is left recursion. */
static bool find_left_cycle(parser *p, const bool *nullable, uint32_t r, uint8_t *mark, uint32_t *path, uint32_t depth) {
    /* the walk recurses once per rule of a chain: bounded, so the stack is too
     * (the step's expansion recurses along the same chains) */
    if (depth >= VT_GRAMMAR_MAX_LEFT_CHAIN)
        return fail_at(p, p->rules[r].used_at ? p->rules[r].used_at : p->src,
                       "more than %d rules in a chain each starting with the next", VT_GRAMMAR_MAX_LEFT_CHAIN),
               true;
    mark[r] = 1;
    path[depth] = r;
    const rulebuf *rb = &p->rules[r];
    bool blocked = false;
    for (uint32_t i = 0; i < rb->n; i++) {
        vt_gelem e = rb->e[i];
        if (e.type == VT_G_ALT || e.type == VT_G_END) { /* the next alternative starts afresh */
            blocked = false;
            continue;
        }
        if (blocked) continue;
        if (e.type == VT_G_RULE_REF) {
            if (mark[e.value] == 1) {
                char chain[300];
                size_t used = 0;
                uint32_t from = 0;
                while (path[from] != e.value) from++;
                for (uint32_t k = from; k <= depth && used < sizeof chain - 80; k++)
                    used += (size_t)snprintf(chain + used, sizeof chain - used, "%s -> ", p->rules[path[k]].name);
                snprintf(chain + used, sizeof chain - used, "%s", p->rules[e.value].name);
                const char *at = p->rules[e.value].used_at ? p->rules[e.value].used_at : p->src;
                return fail_at(p, at, "left recursion (%s): a rule may not reach itself before matching a character",
                               chain);
            }
            if (mark[e.value] == 0 && find_left_cycle(p, nullable, e.value, mark, path, depth + 1)) return true;
            if (p->failed) return true;
        }
        if (!elem_nullable(nullable, e)) blocked = true;
    }
    mark[r] = 2;
    return false;
}

static bool check_rules(parser *p) {
    for (uint32_t i = 0; i < p->n_rules; i++)
        if (!p->rules[i].defined)
            return fail_at(p, p->rules[i].used_at ? p->rules[i].used_at : p->end, "rule '%s' is used but not defined",
                           p->rules[i].name);
    bool has_root = false;
    for (uint32_t i = 0; i < p->n_rules; i++) has_root |= strcmp(p->rules[i].name, "root") == 0;
    if (!has_root) return fail_at(p, p->end, "no rule named 'root' (the grammar's start)");
    bool *nullable = calloc(p->n_rules, sizeof *nullable);
    uint8_t *mark = calloc(p->n_rules, 1);
    uint32_t *path = calloc(p->n_rules + 1, sizeof *path);
    if (!nullable || !mark || !path) {
        free(nullable), free(mark), free(path);
        return oom(p);
    }
    mark_rules(p, nullable, elem_matches_empty);
    for (uint32_t r = 0; r < p->n_rules && !p->failed; r++)
        if (mark[r] == 0) find_left_cycle(p, nullable, r, mark, path, 0);
    free(nullable);
    free(mark);
    free(path);
    return !p->failed;
}

/* ---- alternatives no string completes ----------------------------------- */

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

static int by_low_end(const void *a, const void *b) {
    const cp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Is the character set starting at rb->e[*i] empty (a negated set covering
 * every character, "[^\x00-\U0010FFFF]")? Surrogates count as covered: no
 * UTF-8 decodes to one. *i is left on the set's last element. */
static bool set_is_empty(const rulebuf *rb, uint32_t *i) {
    const uint32_t start = *i;
    uint32_t end = start + 1;
    while (end < rb->n && (rb->e[end].type == VT_G_CHAR_ALT || rb->e[end].type == VT_G_RANGE_UPPER)) end++;
    *i = end - 1;
    if (rb->e[start].type != VT_G_CHAR_NOT) return false; /* a set of characters, or '.' */
    cp_range *r = malloc((end - start + 1) * sizeof *r);
    if (!r) return false; /* taken as not empty: nothing is dropped */
    size_t n = 0;
    for (uint32_t k = start; k < end; k++) {
        if (rb->e[k].type == VT_G_RANGE_UPPER) {
            r[n - 1].hi = rb->e[k].value; /* a range's upper end follows its lower one */
            continue;
        }
        r[n].lo = r[n].hi = rb->e[k].value, n++;
    }
    r[n].lo = 0xD800, r[n].hi = 0xDFFF, n++;
    qsort(r, n, sizeof *r, by_low_end);
    uint32_t covered = 0; /* every code point below this is in some range */
    for (size_t k = 0; k < n && r[k].lo <= covered; k++)
        if (r[k].hi >= covered) covered = r[k].hi + 1;
    free(r);
    return covered > 0x10FFFF;
}

/* Does the element at rb->e[*i] (a whole set, or a rule reference) match
 * some string? *i is left on its last element. */
static bool elem_completes(const rulebuf *rb, uint32_t *i, const bool *completes) {
    const vt_gelem e = rb->e[*i];
    if (e.type == VT_G_RULE_REF) return completes[e.value];
    return !set_is_empty(rb, i);
}

/* Drops every alternative no string completes (one holding an empty set, or
 * a rule no string completes): a grammar's strings stay the same, and a
 * generation it steers can then never reach a point where no character
 * fits and none may end it (it would stop there as if out of tokens). A
 * root that no string completes is an error. */
static bool prune_dead_alternatives(parser *p) {
    bool *completes = calloc(p->n_rules, sizeof *completes);
    if (!completes) return oom(p);
    mark_rules(p, completes, elem_completes);
    uint32_t root = 0;
    for (uint32_t r = 0; r < p->n_rules; r++)
        if (strcmp(p->rules[r].name, "root") == 0) root = r;
    if (!completes[root]) {
        free(completes);
        return fail_at(p, p->rules[root].used_at ? p->rules[root].used_at : p->src,
                       "no string matches the grammar: every way through 'root' holds a character set no "
                       "character is in, or a rule no string matches");
    }
    for (uint32_t r = 0; r < p->n_rules; r++) {
        rulebuf *rb = &p->rules[r];
        if (!completes[r]) continue; /* no alternative left: unreachable once the others are pruned */
        uint32_t out = 0, alt_start = 0;
        bool alt_ok = true, kept_any = false;
        for (uint32_t i = 0; i < rb->n; i++) {
            const vt_gelem e = rb->e[i];
            if (vt_gelem_ends_alt(e)) {
                if (alt_ok) { /* keep [alt_start, i) (an empty one too) and its separator */
                    if (kept_any) rb->e[out++] = (vt_gelem){VT_G_ALT, 0};
                    kept_any = true;
                    memmove(rb->e + out, rb->e + alt_start, (i - alt_start) * sizeof *rb->e);
                    out += i - alt_start;
                }
                alt_start = i + 1;
                alt_ok = true;
                if (e.type == VT_G_END) break;
                continue;
            }
            /* once an element fails, the rest of the alternative (a set's
             * continuation elements too) is passed over to its end */
            if (alt_ok && !elem_completes(rb, &i, completes)) alt_ok = false;
        }
        rb->e[out++] = (vt_gelem){VT_G_END, 0};
        p->n_elems -= rb->n - out;
        rb->n = out;
    }
    free(completes);
    return true;
}

static void free_parser(parser *p) {
    for (uint32_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].e);
        free(p->rules[i].name);
    }
    free(p->rules);
    vt_name_table_free(&p->by_name);
    free(p->name_at);
}

/* Parse len bytes of text into p (rules, then the whole-grammar checks);
 * false with err set, p still to be freed. */
static bool parse_text(parser *p, const char *text, size_t len, bool record_names, vt_error *err) {
    *p = (parser){.src = text, .pos = text, .end = text ? text + len : NULL, .err = err, .record_names = record_names};
    if (!text) return vt_fail(err, VT_ERR_INVALID, "grammar: no text"), false;
    if (len > VT_GRAMMAR_MAX_TEXT)
        return vt_fail(err, VT_ERR_INVALID, "grammar: %zu bytes (at most %u)", len, VT_GRAMMAR_MAX_TEXT), false;
    if (memchr(text, '\0', len)) return vt_fail(err, VT_ERR_INVALID, "grammar: the text contains a NUL byte"), false;
    skip_space(p, true);
    while (!p->failed && p->pos < p->end) {
        parse_rule(p);
        skip_space(p, true);
    }
    if (!p->failed) check_rules(p);
    if (!p->failed) prune_dead_alternatives(p);
    return !p->failed;
}

vt_status vt_grammar_parse(const char *text, size_t len, vt_grammar **out, vt_error *err) {
    *out = NULL;
    parser p;
    if (!parse_text(&p, text, len, false, err)) {
        free_parser(&p);
        return err ? err->code : VT_ERR_INVALID;
    }
    vt_grammar *g = calloc(1, sizeof *g);
    if (g) {
        g->n_rules = p.n_rules;
        g->n_elems = (uint32_t)p.n_elems;
        g->rule_start = malloc(p.n_rules * sizeof *g->rule_start);
        g->elems = malloc((p.n_elems ? p.n_elems : 1) * sizeof *g->elems);
    }
    if (!g || !g->rule_start || !g->elems) {
        vt_grammar_free(g);
        free_parser(&p);
        return vt_fail(err, VT_ERR_NOMEM, "grammar: out of memory");
    }
    uint32_t at = 0;
    for (uint32_t r = 0; r < p.n_rules; r++) {
        g->rule_start[r] = at;
        memcpy(g->elems + at, p.rules[r].e, p.rules[r].n * sizeof *g->elems);
        at += p.rules[r].n;
        if (strcmp(p.rules[r].name, "root") == 0) g->root = r;
    }
    free_parser(&p);
    *out = g;
    return VT_OK;
}

void vt_grammar_free(vt_grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->rule_start);
    free(g);
}

int32_t vt_grammar_n_rules(const vt_grammar *g) { return (int32_t)g->n_rules; }

/* text with prefix written before every rule name (p's record of them),
 * appended to out at *used. */
static void put_renamed(char *out, size_t *used, const parser *p, const char *prefix) {
    const size_t n_prefix = strlen(prefix), len = (size_t)(p->end - p->src);
    size_t from = 0;
    for (size_t i = 0; i < p->n_names; i++) {
        memcpy(out + *used, p->src + from, p->name_at[i] - from);
        *used += p->name_at[i] - from;
        memcpy(out + *used, prefix, n_prefix);
        *used += n_prefix;
        from = p->name_at[i];
    }
    memcpy(out + *used, p->src + from, len - from);
    *used += len - from;
    /* an open end gets its empty alternative written out ("" on a line
     * of its own, which the open rule reads as its continuation), so the
     * text after it starts a rule of its own */
    const char *end = p->ends_open ? "\n\"\"\n" : "\n";
    memcpy(out + *used, end, strlen(end));
    *used += strlen(end);
}

static bool is_prefix_word(const char *s) {
    if (!s || !*s) return false;
    for (; *s; s++)
        if (!is_word_char(*s)) return false;
    return true;
}

/* Whether a begins b. */
static bool begins(const char *a, const char *b) { return strncmp(a, b, strlen(a)) == 0; }

char *vt_grammar_union_text(const char *first, const char *first_prefix, const char *second, const char *second_prefix,
                        vt_error *err) {
    /* renamed names stay apart when neither prefix begins the other (a
     * + "bx" and ab + "x" would meet) and neither begins "root" (r + "oot") */
    if (!is_prefix_word(first_prefix) || !is_prefix_word(second_prefix) || begins(first_prefix, second_prefix) ||
        begins(second_prefix, first_prefix) || begins(first_prefix, "root") || begins(second_prefix, "root")) {
        vt_fail(err, VT_ERR_INVALID,
                "grammar: the prefixes must be words of a-z, A-Z, 0-9, - and _, neither beginning the other or "
                "\"root\"");
        return NULL;
    }
    /* the names are where each grammar's own parse found them, so a
     * string literal, a character class or a comment is never renamed */
    parser a = {0}, b = {0};
    const bool ok = parse_text(&a, first, first ? strlen(first) : 0, true, err) &&
                    parse_text(&b, second, second ? strlen(second) : 0, true, err);
    char *out = NULL;
    if (ok) {
        const size_t n_a = strlen(first_prefix), n_b = strlen(second_prefix);
        const size_t size = 40 + n_a + n_b + (size_t)(a.end - a.src) + a.n_names * n_a + (size_t)(b.end - b.src) +
                            b.n_names * n_b;
        out = malloc(size);
        if (out) {
            size_t used = (size_t)snprintf(out, size, "root ::= %sroot | %sroot\n", first_prefix, second_prefix);
            put_renamed(out, &used, &a, first_prefix);
            put_renamed(out, &used, &b, second_prefix);
            out[used] = 0;
            /* the two together may pass a limit (size, rules, elements, a
             * left chain) neither reaches alone */
            parser u = {0};
            if (!parse_text(&u, out, used, false, err)) {
                free(out);
                out = NULL;
                /* its lines and renamed rules are no text the caller wrote */
                if (err && err->code == VT_ERR_INVALID && !strncmp(err->msg, "grammar: ", 9)) {
                    char was[sizeof err->msg];
                    snprintf(was, sizeof was, "%s", err->msg + 9);
                    vt_fail(err, VT_ERR_INVALID, "grammar: the two grammars together: %s", was);
                }
            }
            free_parser(&u);
        } else {
            vt_fail(err, VT_ERR_NOMEM, "grammar: out of memory");
        }
    }
    free_parser(&a);
    free_parser(&b);
    return out;
}
