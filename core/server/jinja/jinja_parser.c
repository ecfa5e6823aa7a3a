/* jinja_parser.c — tokens -> syntax tree, with jinja2's operator precedence
 * (loosest first): x if c else y; or; and; not; comparisons and in; + -; ~;
 * * / // %; **; unary - +; then postfix . [] () and the filter/test chain
 * (| f, is t), which binds tighter than any binary operator. */
#include "jinja_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    jtok_list *toks;
    size_t i;
    int depth;
    bool failed;
    char *err;
    size_t err_size;
} parser;

static const jtok *peek(parser *P) { return &P->toks->t[P->i]; }
static const jtok *peek_at(parser *P, size_t k) {
    size_t j = P->i + k;
    return j < P->toks->n ? &P->toks->t[j] : &P->toks->t[P->toks->n - 1];
}
static const jtok *next(parser *P) {
    const jtok *t = &P->toks->t[P->i];
    if (t->kind != JT_EOF) P->i++;
    return t;
}

static void *pfail(parser *P, const jtok *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void *pfail(parser *P, const jtok *t, const char *fmt, ...) {
    if (P->failed) return NULL;
    P->failed = true;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(P->err, P->err_size, "line %d, column %d: %s", t->line, t->col, msg);
    return NULL;
}

static bool is_op(const jtok *t, const char *op) { return t->kind == JT_OP && strcmp(t->text, op) == 0; }
static bool is_name(const jtok *t, const char *name) { return t->kind == JT_NAME && strcmp(t->text, name) == 0; }

static bool accept_op(parser *P, const char *op) {
    if (!is_op(peek(P), op)) return false;
    next(P);
    return true;
}
static bool accept_name(parser *P, const char *name) {
    if (!is_name(peek(P), name)) return false;
    next(P);
    return true;
}
static bool expect_op(parser *P, const char *op) {
    if (accept_op(P, op)) return true;
    const jtok *t = peek(P);
    pfail(P, t, "expected '%s', found %s", op, t->kind == JT_EOF ? "the end of the template" : t->text ? t->text : "something else");
    return false;
}
static bool expect_block_end(parser *P) {
    if (peek(P)->kind == JT_BLOCK_END) {
        next(P);
        return true;
    }
    const jtok *t = peek(P);
    pfail(P, t, "expected the end of the statement ('%%}'), found %s", t->text ? t->text : "something else");
    return false;
}

static jnode *node(parser *P, jnode_kind k, int line) {
    jnode *n = calloc(1, sizeof *n);
    if (!n) return pfail(P, peek(P), "out of memory");
    n->kind = k;
    n->line = line;
    n->value = jv_undefined(NULL);
    return n;
}

static bool add_child(parser *P, jnode ***list, size_t *n, jnode *child) {
    jnode **p = realloc(*list, (*n + 1) * sizeof *p);
    if (!p) {
        jinja_node_free(child);
        pfail(P, peek(P), "out of memory");
        return false;
    }
    *list = p;
    p[(*n)++] = child;
    return true;
}

static bool add_name(parser *P, char ***names, size_t *n, const char *name) {
    char **p = realloc(*names, (*n + 1) * sizeof *p);
    if (!p) return pfail(P, peek(P), "out of memory"), false;
    *names = p;
    p[*n] = strdup(name);
    if (!p[*n]) return pfail(P, peek(P), "out of memory"), false;
    (*n)++;
    return true;
}

void jinja_node_free(jnode *n) {
    if (!n) return;
    jinja_node_free(n->a);
    jinja_node_free(n->b);
    jinja_node_free(n->c);
    jinja_node_free(n->d);
    for (size_t i = 0; i < n->n_list; i++) jinja_node_free(n->list[i]);
    for (size_t i = 0; i < n->n_list2; i++) jinja_node_free(n->list2[i]);
    free(n->list);
    free(n->list2);
    free(n->name);
    free(n->attr);
    for (size_t i = 0; i < n->n_names; i++) free(n->names[i]);
    free(n->names);
    jv_decref(n->value);
    free(n);
}

/* ---- expressions ---- */

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, bool with_filter);

static bool enter(parser *P) {
    if (++P->depth > VT_JINJA_MAX_DEPTH) {
        pfail(P, peek(P), "expression nested deeper than %d", VT_JINJA_MAX_DEPTH);
        return false;
    }
    return true;
}

/* Arguments of a call, a filter or a test: "(" already consumed. */
static bool parse_args(parser *P, jnode *n) {
    if (accept_op(P, ")")) return true;
    for (;;) {
        if (peek(P)->kind == JT_NAME && is_op(peek_at(P, 1), "=")) {
            if (!add_name(P, &n->names, &n->n_names, next(P)->text)) return false;
            next(P);
            jnode *v = parse_expr(P);
            if (!v || !add_child(P, &n->list2, &n->n_list2, v)) return false;
        } else {
            if (n->n_names) return pfail(P, peek(P), "a positional argument after keyword arguments"), false;
            jnode *v = parse_expr(P);
            if (!v || !add_child(P, &n->list, &n->n_list, v)) return false;
        }
        if (accept_op(P, ")")) return true;
        if (!expect_op(P, ",")) return false;
        if (accept_op(P, ")")) return true;
    }
}

/* The items of a list literal (with keys: a dict's key: value pairs) after
 * its opening bracket, through the closing one: n, or NULL after freeing
 * it. A trailing comma is allowed, as in Python. */
static jnode *parse_items(parser *P, jnode *n, const char *close, bool keys) {
    while (!accept_op(P, close)) {
        if (n->n_list && !expect_op(P, ",")) break;
        if (accept_op(P, close)) return n;
        jnode *k = parse_expr(P);
        if (!k || !add_child(P, &n->list, &n->n_list, k)) break;
        if (!keys) continue;
        jnode *v = expect_op(P, ":") ? parse_expr(P) : NULL;
        if (!v || !add_child(P, &n->list2, &n->n_list2, v)) break;
    }
    if (P->failed) {
        jinja_node_free(n);
        return NULL;
    }
    return n;
}

static jnode *parse_primary(parser *P) {
    const jtok *t = next(P);
    jnode *n;
    switch (t->kind) {
    case JT_STRING: {
        n = node(P, JE_LITERAL, t->line);
        if (!n) return NULL;
        vt_text_buf b = {0};
        vt_text_put(&b, t->text, t->len);
        /* Adjacent string literals concatenate, as in Python. */
        while (peek(P)->kind == JT_STRING) {
            const jtok *u = next(P);
            vt_text_put(&b, u->text, u->len);
        }
        n->value = jv_string(b.data ? b.data : "", b.len);
        free(b.data);
        if (b.failed || jv_is_oom(n->value)) {
            jinja_node_free(n);
            return pfail(P, t, "out of memory");
        }
        return n;
    }
    case JT_INT:
        if (!(n = node(P, JE_LITERAL, t->line))) return NULL;
        n->value = jv_int(t->i);
        return n;
    case JT_FLOAT:
        if (!(n = node(P, JE_LITERAL, t->line))) return NULL;
        n->value = jv_float(t->f);
        return n;
    case JT_NAME: {
        static const struct {
            const char *name;
            int v;
        } consts[] = {{"true", 1}, {"True", 1}, {"false", 0}, {"False", 0}, {"none", 2}, {"None", 2}};
        for (size_t k = 0; k < sizeof consts / sizeof *consts; k++)
            if (strcmp(t->text, consts[k].name) == 0) {
                if (!(n = node(P, JE_LITERAL, t->line))) return NULL;
                n->value = consts[k].v == 2 ? jv_none() : jv_bool(consts[k].v);
                return n;
            }
        if (!(n = node(P, JE_NAME, t->line))) return NULL;
        n->name = strdup(t->text);
        if (!n->name) {
            jinja_node_free(n);
            return pfail(P, t, "out of memory");
        }
        return n;
    }
    case JT_OP:
        if (strcmp(t->text, "(") == 0) {
            if (accept_op(P, ")")) { /* the empty tuple */
                if ((n = node(P, JE_LIST, t->line))) n->negate = true;
                return n;
            }
            jnode *e = parse_expr(P);
            if (!e) return NULL;
            if (is_op(peek(P), ",")) { /* a tuple */
                if (!(n = node(P, JE_LIST, t->line)) || !add_child(P, &n->list, &n->n_list, e)) {
                    jinja_node_free(n);
                    return NULL;
                }
                n->negate = true;
                while (accept_op(P, ",")) {
                    if (is_op(peek(P), ")")) break;
                    jnode *v = parse_expr(P);
                    if (!v || !add_child(P, &n->list, &n->n_list, v)) {
                        jinja_node_free(n);
                        return NULL;
                    }
                }
                e = n;
            }
            if (!expect_op(P, ")")) {
                jinja_node_free(e);
                return NULL;
            }
            return e;
        }
        if (strcmp(t->text, "[") == 0) return (n = node(P, JE_LIST, t->line)) ? parse_items(P, n, "]", false) : NULL;
        if (strcmp(t->text, "{") == 0) return (n = node(P, JE_DICT, t->line)) ? parse_items(P, n, "}", true) : NULL;
        /* fallthrough */
    default:
        return pfail(P, t, "unexpected %s in an expression",
                     t->kind == JT_EOF ? "end of template" : t->kind == JT_BLOCK_END ? "'%}'" : t->kind == JT_VAR_END ? "'}}'" : t->text ? t->text : "token");
    }
}

static jnode *parse_postfix(parser *P, jnode *n) {
    while (n) {
        const jtok *t = peek(P);
        if (is_op(t, ".")) {
            next(P);
            const jtok *name = next(P);
            if (name->kind != JT_NAME && name->kind != JT_INT) {
                jinja_node_free(n);
                return pfail(P, name, "expected an attribute name after '.'");
            }
            jnode *a = node(P, name->kind == JT_NAME ? JE_ATTR : JE_ITEM, t->line);
            if (!a) {
                jinja_node_free(n);
                return NULL;
            }
            a->a = n;
            if (name->kind == JT_NAME) {
                a->name = strdup(name->text);
                if (!a->name) {
                    jinja_node_free(a);
                    return pfail(P, t, "out of memory");
                }
            } else {
                if (!(a->b = node(P, JE_LITERAL, t->line))) {
                    jinja_node_free(a);
                    return NULL;
                }
                a->b->value = jv_int(name->i);
            }
            n = a;
        } else if (is_op(t, "[")) {
            next(P);
            jnode *parts[3] = {0};
            int k = 0;
            bool slice = false;
            for (;;) {
                if (!is_op(peek(P), ":") && !is_op(peek(P), "]")) {
                    parts[k] = parse_expr(P);
                    if (!parts[k]) break;
                }
                if (is_op(peek(P), ":") && k < 2) {
                    next(P);
                    slice = true;
                    k++;
                    continue;
                }
                break;
            }
            jnode *s = P->failed ? NULL : node(P, slice ? JE_SLICE : JE_ITEM, t->line);
            if (!s || !expect_op(P, "]") || (!slice && !parts[0])) {
                if (s && !P->failed) pfail(P, t, "an empty subscript");
                for (int j = 0; j < 3; j++) jinja_node_free(parts[j]);
                jinja_node_free(s);
                jinja_node_free(n);
                return NULL;
            }
            s->a = n;
            s->b = parts[0];
            s->c = parts[1];
            s->d = parts[2];
            n = s;
        } else if (is_op(t, "(")) {
            next(P);
            jnode *c = node(P, JE_CALL, t->line);
            if (!c) {
                jinja_node_free(n);
                return NULL;
            }
            c->a = n;
            if (!parse_args(P, c)) {
                jinja_node_free(c);
                return NULL;
            }
            n = c;
        } else break;
    }
    return n;
}

/* Can this token start the single argument of a test written without
 * parentheses ("is divisibleby 3", "is sameas none")? As jinja2: a name,
 * literal, list or dict that is not "else", "or" or "and". */
static bool starts_test_arg(const jtok *t) {
    if (t->kind == JT_STRING || t->kind == JT_INT || t->kind == JT_FLOAT) return true;
    if (t->kind == JT_OP) return strcmp(t->text, "[") == 0 || strcmp(t->text, "{") == 0;
    if (t->kind != JT_NAME) return false;
    return strcmp(t->text, "else") != 0 && strcmp(t->text, "or") != 0 && strcmp(t->text, "and") != 0;
}

static jnode *parse_filter_chain(parser *P, jnode *n) {
    while (n) {
        const jtok *t = peek(P);
        if (is_op(t, "|")) {
            next(P);
            const jtok *name = next(P);
            if (name->kind != JT_NAME) {
                jinja_node_free(n);
                return pfail(P, name, "expected a filter name after '|'");
            }
            jnode *f = node(P, JE_FILTER, t->line);
            if (!f) {
                jinja_node_free(n);
                return NULL;
            }
            f->a = n;
            f->name = strdup(name->text);
            if (!f->name || (accept_op(P, "(") && !parse_args(P, f))) {
                jinja_node_free(f);
                return pfail(P, t, "out of memory");
            }
            n = f;
        } else if (is_name(t, "is")) {
            next(P);
            jnode *f = node(P, JE_TEST, t->line);
            if (!f) {
                jinja_node_free(n);
                return NULL;
            }
            f->a = n;
            f->negate = accept_name(P, "not");
            const jtok *name = next(P);
            if (name->kind != JT_NAME && !(name->kind == JT_NAME)) {
                jinja_node_free(f);
                return pfail(P, name, "expected a test name after 'is'");
            }
            f->name = strdup(name->text);
            if (!f->name) {
                jinja_node_free(f);
                return pfail(P, t, "out of memory");
            }
            if (accept_op(P, "(")) {
                if (!parse_args(P, f)) {
                    jinja_node_free(f);
                    return NULL;
                }
            } else if (starts_test_arg(peek(P))) {
                if (is_name(peek(P), "is")) {
                    jinja_node_free(f);
                    return pfail(P, peek(P), "tests cannot be chained with 'is'");
                }
                jnode *arg = parse_postfix(P, parse_primary(P));
                if (!arg || !add_child(P, &f->list, &f->n_list, arg)) {
                    jinja_node_free(f);
                    return NULL;
                }
            }
            n = f;
        } else break;
    }
    return n;
}

static jnode *parse_unary(parser *P, bool with_filter) {
    const jtok *t = peek(P);
    jnode *n;
    if (!enter(P)) return NULL;
    if (is_op(t, "-") || is_op(t, "+")) {
        next(P);
        jnode *x = parse_unary(P, false);
        if (!x) return NULL;
        if (!(n = node(P, JE_UNARY, t->line))) {
            jinja_node_free(x);
            return NULL;
        }
        n->op = t->text[0] == '-' ? JOP_NEG : JOP_POS;
        n->a = x;
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_chain(P, n);
    P->depth--;
    return n;
}

static jnode *binary(parser *P, int line, jop op, jnode *a, jnode *b) {
    if (!a || !b) {
        jinja_node_free(a);
        jinja_node_free(b);
        return NULL;
    }
    jnode *n = node(P, JE_BINARY, line);
    if (!n) {
        jinja_node_free(a);
        jinja_node_free(b);
        return NULL;
    }
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *P) {
    jnode *n = parse_unary(P, true);
    while (n && is_op(peek(P), "**")) {
        int line = next(P)->line;
        n = binary(P, line, JOP_POW, n, parse_unary(P, true));
    }
    return n;
}

static jnode *parse_math2(parser *P) {
    jnode *n = parse_pow(P);
    for (;;) {
        const jtok *t = peek(P);
        jop op;
        if (is_op(t, "*")) op = JOP_MUL;
        else if (is_op(t, "/")) op = JOP_DIV;
        else if (is_op(t, "//")) op = JOP_FLOORDIV;
        else if (is_op(t, "%")) op = JOP_MOD;
        else return n;
        if (!n) return NULL;
        next(P);
        n = binary(P, t->line, op, n, parse_pow(P));
    }
}

static jnode *parse_concat(parser *P) {
    jnode *n = parse_math2(P);
    while (n && is_op(peek(P), "~")) {
        int line = next(P)->line;
        n = binary(P, line, JOP_CONCAT, n, parse_math2(P));
    }
    return n;
}

static jnode *parse_math1(parser *P) {
    jnode *n = parse_concat(P);
    for (;;) {
        const jtok *t = peek(P);
        if (!n || !(is_op(t, "+") || is_op(t, "-"))) return n;
        next(P);
        n = binary(P, t->line, t->text[0] == '+' ? JOP_ADD : JOP_SUB, n, parse_concat(P));
    }
}

static jnode *parse_compare(parser *P) {
    jnode *n = parse_math1(P);
    jnode *chain = NULL; /* a < b < c: (a < b) and (b < c); b is evaluated twice */
    for (;;) {
        const jtok *t = peek(P);
        jop op;
        if (is_op(t, "==")) op = JOP_EQ;
        else if (is_op(t, "!=")) op = JOP_NE;
        else if (is_op(t, "<")) op = JOP_LT;
        else if (is_op(t, "<=")) op = JOP_LE;
        else if (is_op(t, ">")) op = JOP_GT;
        else if (is_op(t, ">=")) op = JOP_GE;
        else if (is_name(t, "in")) op = JOP_IN;
        else if (is_name(t, "not") && is_name(peek_at(P, 1), "in")) {
            next(P);
            op = JOP_NOT_IN;
        } else break;
        if (!n) break;
        next(P);
        jnode *rhs = parse_math1(P);
        if (!rhs) {
            jinja_node_free(n);
            jinja_node_free(chain);
            return NULL;
        }
        if (chain) {
            pfail(P, t, "chained comparisons are not supported; use 'and'");
            jinja_node_free(rhs);
            jinja_node_free(n);
            jinja_node_free(chain);
            return NULL;
        }
        n = binary(P, t->line, op, n, rhs);
        if (!n) return NULL;
        chain = NULL;
        if (op != JOP_IN && op != JOP_NOT_IN) {
            const jtok *u = peek(P);
            if (is_op(u, "==") || is_op(u, "!=") || is_op(u, "<") || is_op(u, "<=") || is_op(u, ">") || is_op(u, ">=")) {
                jinja_node_free(n);
                return pfail(P, u, "chained comparisons are not supported; use 'and'");
            }
        }
    }
    return n;
}

static jnode *parse_not(parser *P) {
    const jtok *t = peek(P);
    if (is_name(t, "not")) {
        next(P);
        if (!enter(P)) return NULL;
        jnode *x = parse_not(P);
        P->depth--;
        if (!x) return NULL;
        jnode *n = node(P, JE_UNARY, t->line);
        if (!n) {
            jinja_node_free(x);
            return NULL;
        }
        n->op = JOP_NOT;
        n->a = x;
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P) {
    jnode *n = parse_not(P);
    while (n && is_name(peek(P), "and")) {
        int line = next(P)->line;
        n = binary(P, line, JOP_AND, n, parse_not(P));
    }
    return n;
}

static jnode *parse_or(parser *P) {
    jnode *n = parse_and(P);
    while (n && is_name(peek(P), "or")) {
        int line = next(P)->line;
        n = binary(P, line, JOP_OR, n, parse_and(P));
    }
    return n;
}

static jnode *parse_expr(parser *P) {
    if (!enter(P)) return NULL;
    jnode *n = parse_or(P);
    while (n && is_name(peek(P), "if")) {
        int line = next(P)->line;
        jnode *c = node(P, JE_COND, line);
        if (!c) break;
        c->b = n;
        n = c;
        if (!(c->a = parse_or(P))) break;
        if (accept_name(P, "else") && !(c->c = parse_expr(P))) break;
    }
    P->depth--;
    if (P->failed) {
        jinja_node_free(n);
        return NULL;
    }
    return n;
}

/* ---- statements ---- */

static jnode *parse_body(parser *P, const char *const *ends, const char **which);

static bool parse_targets(parser *P, jnode *n) {
    bool paren = accept_op(P, "(");
    do {
        const jtok *t = next(P);
        if (t->kind != JT_NAME) return pfail(P, t, "expected a variable name"), false;
        if (!add_name(P, &n->names, &n->n_names, t->text)) return false;
    } while (accept_op(P, ","));
    if (paren && !expect_op(P, ")")) return false;
    return true;
}

static bool parse_params(parser *P, jnode *n) {
    if (!expect_op(P, "(")) return false;
    if (accept_op(P, ")")) return true;
    for (;;) {
        const jtok *t = next(P);
        if (t->kind != JT_NAME) return pfail(P, t, "expected a parameter name"), false;
        if (!add_name(P, &n->names, &n->n_names, t->text)) return false;
        jnode *def = NULL;
        if (accept_op(P, "=") && !(def = parse_expr(P))) return false;
        if (!add_child(P, &n->list, &n->n_list, def)) return false;
        if (accept_op(P, ")")) return true;
        if (!expect_op(P, ",")) return false;
    }
}

/* Whether a name `name` is read anywhere below n. */
static bool mentions(const jnode *n, const char *name) {
    if (!n) return false;
    if (n->kind == JE_NAME && n->name && strcmp(n->name, name) == 0) return true;
    if (mentions(n->a, name) || mentions(n->b, name) || mentions(n->c, name) || mentions(n->d, name)) return true;
    for (size_t i = 0; i < n->n_list; i++)
        if (mentions(n->list[i], name)) return true;
    for (size_t i = 0; i < n->n_list2; i++)
        if (mentions(n->list2[i], name)) return true;
    return false;
}

/* A macro's or caller's body decides what extra arguments it takes. */
static void note_extra_params(jnode *n) {
    n->uses_varargs = mentions(n->c, "varargs");
    n->uses_kwargs = mentions(n->c, "kwargs");
}

static jnode *parse_statement(parser *P) {
    const jtok *kw = next(P);
    if (kw->kind != JT_NAME) return pfail(P, kw, "expected a statement name after '{%%'");
    int line = kw->line;
    const char *w = kw->text;
    jnode *n = NULL;
    if (strcmp(w, "if") == 0 || strcmp(w, "elif") == 0) {
        if (!(n = node(P, JN_IF, line)) || !(n->a = parse_expr(P)) || !expect_block_end(P)) goto fail;
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        const char *which = NULL;
        if (!(n->b = parse_body(P, ends, &which))) goto fail;
        if (strcmp(which, "elif") == 0) {
            P->i--; /* the elif becomes the else branch's if */
            if (!(n->c = parse_statement(P))) goto fail;
            return n;
        }
        if (strcmp(which, "else") == 0) {
            static const char *const endif[] = {"endif", NULL};
            if (!expect_block_end(P) || !(n->c = parse_body(P, endif, &which))) goto fail;
        }
        if (!expect_block_end(P)) goto fail;
        return n;
    }
    if (strcmp(w, "for") == 0) {
        if (!(n = node(P, JN_FOR, line)) || !parse_targets(P, n)) goto fail;
        if (!accept_name(P, "in")) {
            pfail(P, peek(P), "expected 'in' in a for loop");
            goto fail;
        }
        /* The iterable stops before "if" (the loop's filter), so no
         * inline-if here. */
        if (!(n->a = parse_or(P))) goto fail;
        if (accept_name(P, "if") && !(n->b = parse_expr(P))) goto fail;
        if (is_name(peek(P), "recursive")) {
            pfail(P, peek(P), "recursive loops are not supported");
            goto fail;
        }
        if (!expect_block_end(P)) goto fail;
        static const char *const ends[] = {"else", "endfor", NULL};
        const char *which = NULL;
        if (!(n->c = parse_body(P, ends, &which))) goto fail;
        if (strcmp(which, "else") == 0) {
            static const char *const endfor[] = {"endfor", NULL};
            if (!expect_block_end(P) || !(n->d = parse_body(P, endfor, &which))) goto fail;
        }
        if (!expect_block_end(P)) goto fail;
        return n;
    }
    if (strcmp(w, "set") == 0) {
        const jtok *target = peek(P);
        if (target->kind == JT_NAME && is_op(peek_at(P, 1), ".")) {
            if (!(n = node(P, JN_SET, line))) goto fail;
            n->name = strdup(next(P)->text);
            next(P);
            const jtok *attr = next(P);
            if (attr->kind != JT_NAME) {
                pfail(P, attr, "expected an attribute name");
                goto fail;
            }
            n->attr = strdup(attr->text);
            if (!n->name || !n->attr) {
                pfail(P, attr, "out of memory");
                goto fail;
            }
            if (!expect_op(P, "=") || !(n->a = parse_expr(P)) || !expect_block_end(P)) goto fail;
            return n;
        }
        if (!(n = node(P, JN_SET, line)) || !parse_targets(P, n)) goto fail;
        if (accept_op(P, "=")) {
            if (!(n->a = parse_expr(P))) goto fail;
            if (is_op(peek(P), ",")) { /* set a = 1, 2: a tuple */
                jnode *tuple = node(P, JE_LIST, line);
                if (!tuple || !add_child(P, &tuple->list, &tuple->n_list, n->a)) {
                    n->a = NULL;
                    jinja_node_free(tuple);
                    goto fail;
                }
                n->a = tuple;
                while (accept_op(P, ",")) {
                    jnode *v = parse_expr(P);
                    if (!v || !add_child(P, &tuple->list, &tuple->n_list, v)) goto fail;
                }
            }
            if (!expect_block_end(P)) goto fail;
            return n;
        }
        if (n->n_names != 1) {
            pfail(P, peek(P), "a block set takes one variable");
            goto fail;
        }
        n->kind = JN_SET_BLOCK;
        n->name = n->names[0];
        n->names[0] = NULL;
        n->n_names = 0;
        while (accept_op(P, "|")) {
            const jtok *f = next(P);
            if (f->kind != JT_NAME) {
                pfail(P, f, "expected a filter name");
                goto fail;
            }
            jnode *fn = node(P, JE_FILTER, f->line);
            if (!fn || !(fn->name = strdup(f->text)) || !add_child(P, &n->list, &n->n_list, fn)) {
                jinja_node_free(fn);
                goto fail;
            }
            if (accept_op(P, "(") && !parse_args(P, fn)) goto fail;
        }
        static const char *const ends[] = {"endset", NULL};
        const char *which;
        if (!expect_block_end(P) || !(n->c = parse_body(P, ends, &which)) || !expect_block_end(P)) goto fail;
        return n;
    }
    if (strcmp(w, "macro") == 0) {
        const jtok *name = next(P);
        if (name->kind != JT_NAME) {
            pfail(P, name, "expected a macro name");
            return NULL;
        }
        if (!(n = node(P, JN_MACRO, line)) || !(n->name = strdup(name->text)) || !parse_params(P, n) ||
            !expect_block_end(P))
            goto fail;
        static const char *const ends[] = {"endmacro", NULL};
        const char *which;
        if (!(n->c = parse_body(P, ends, &which))) goto fail;
        note_extra_params(n);
        if (peek(P)->kind == JT_NAME) next(P); /* {% endmacro name %} */
        if (!expect_block_end(P)) goto fail;
        return n;
    }
    if (strcmp(w, "call") == 0) {
        if (!(n = node(P, JN_CALL_BLOCK, line))) goto fail;
        if (is_op(peek(P), "(") && !parse_params(P, n)) goto fail;
        if (!(n->a = parse_expr(P))) goto fail;
        if (n->a->kind != JE_CALL) {
            pfail(P, kw, "{%% call %%} needs a macro call");
            goto fail;
        }
        static const char *const ends[] = {"endcall", NULL};
        const char *which;
        if (!expect_block_end(P) || !(n->c = parse_body(P, ends, &which)) || !expect_block_end(P)) goto fail;
        note_extra_params(n);
        return n;
    }
    if (strcmp(w, "filter") == 0) {
        if (!(n = node(P, JN_FILTER_BLOCK, line))) goto fail;
        do {
            const jtok *f = next(P);
            if (f->kind != JT_NAME) {
                pfail(P, f, "expected a filter name");
                goto fail;
            }
            jnode *fn = node(P, JE_FILTER, f->line);
            if (!fn || !(fn->name = strdup(f->text)) || !add_child(P, &n->list, &n->n_list, fn)) {
                jinja_node_free(fn);
                goto fail;
            }
            if (accept_op(P, "(") && !parse_args(P, fn)) goto fail;
        } while (accept_op(P, "|"));
        static const char *const ends[] = {"endfilter", NULL};
        const char *which;
        if (!expect_block_end(P) || !(n->c = parse_body(P, ends, &which)) || !expect_block_end(P)) goto fail;
        return n;
    }
    if (strcmp(w, "generation") == 0) {
        /* transformers' {% generation %} marks the assistant's tokens for
         * training masks; for rendering it is its body. */
        static const char *const ends[] = {"endgeneration", NULL};
        const char *which;
        if (!expect_block_end(P) || !(n = parse_body(P, ends, &which)) || !expect_block_end(P)) goto fail;
        return n;
    }
    if (strcmp(w, "break") == 0 || strcmp(w, "continue") == 0) {
        if (!(n = node(P, w[0] == 'b' ? JN_BREAK : JN_CONTINUE, line)) || !expect_block_end(P)) goto fail;
        return n;
    }
    return pfail(P, kw, "unknown statement '%s'", w);
fail:
    jinja_node_free(n);
    if (!P->failed) pfail(P, peek(P), "out of memory");
    return NULL;
}

/* Statements and text up to one of ends (NULL: the end of the template);
 * *which is the end word found, its "%}" not yet consumed. */
static jnode *parse_body(parser *P, const char *const *ends, const char **which) {
    int start = peek(P)->line;
    if (!enter(P)) return NULL;
    jnode *body = node(P, JN_BODY, start);
    while (body) {
        const jtok *t = peek(P);
        jnode *s = NULL;
        if (t->kind == JT_EOF) {
            if (ends) {
                const char *const *last = ends;
                while (last[1]) last++;
                pfail(P, t, "unexpected end of template: expected {%% %s %%} (the block opened on line %d)", *last,
                      start);
                break;
            }
            P->depth--;
            return body;
        }
        if (t->kind == JT_TEXT) {
            next(P);
            if (!(s = node(P, JN_TEXT, t->line))) break;
            s->value = jv_string(t->text, t->len);
            if (jv_is_oom(s->value)) {
                jinja_node_free(s);
                pfail(P, t, "out of memory");
                break;
            }
        } else if (t->kind == JT_VAR_BEGIN) {
            next(P);
            if (!(s = node(P, JN_OUTPUT, t->line))) break;
            if (!(s->a = parse_expr(P))) {
                jinja_node_free(s);
                break;
            }
            if (peek(P)->kind != JT_VAR_END) {
                jinja_node_free(s);
                const jtok *u = peek(P);
                pfail(P, u, "expected '}}', found %s", u->text ? u->text : "something else");
                break;
            }
            next(P);
        } else if (t->kind == JT_BLOCK_BEGIN) {
            const jtok *w = peek_at(P, 1);
            if (w->kind == JT_NAME && ends) {
                for (const char *const *e = ends; *e; e++)
                    if (strcmp(w->text, *e) == 0) {
                        next(P);
                        next(P);
                        *which = *e;
                        P->depth--;
                        return body;
                    }
            }
            if (w->kind == JT_NAME &&
                (strncmp(w->text, "end", 3) == 0 || strcmp(w->text, "else") == 0 || strcmp(w->text, "elif") == 0)) {
                pfail(P, w, "unexpected {%% %s %%}%s%s", w->text, ends ? ": expected " : "", ends ? ends[0] : "");
                break;
            }
            next(P);
            if (!(s = parse_statement(P))) break;
        } else {
            pfail(P, t, "unexpected token");
            break;
        }
        if (!add_child(P, &body->list, &body->n_list, s)) break;
    }
    jinja_node_free(body);
    return NULL;
}

vt_jinja_template *vt_jinja_parse(const char *src, size_t len, char *err, size_t err_size) {
    jtok_list toks;
    if (!src) {
        snprintf(err, err_size, "no template");
        return NULL;
    }
    if (!jinja_lex(src, len, &toks, err, err_size)) return NULL;
    parser P = {.toks = &toks, .err = err, .err_size = err_size};
    const char *which = NULL;
    jnode *root = parse_body(&P, NULL, &which);
    jinja_tokens_free(&toks);
    if (!root) return NULL;
    vt_jinja_template *t = malloc(sizeof *t);
    if (!t) {
        jinja_node_free(root);
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    t->root = root;
    pthread_mutex_init(&t->render_lock, NULL);
    return t;
}

void vt_jinja_free(vt_jinja_template *t) {
    if (!t) return;
    jinja_node_free(t->root);
    pthread_mutex_destroy(&t->render_lock);
    free(t);
}
