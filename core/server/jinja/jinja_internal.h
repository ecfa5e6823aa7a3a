/* jinja_internal.h — what the interpreter's parts share: tokens, the syntax
 * tree, callables and the render state. Not for users of jinja.h. */
#ifndef VT_JINJA_INTERNAL_H
#define VT_JINJA_INTERNAL_H

#include "jinja.h"
#include "jinja_value.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- tokens (jinja_lexer.c) ---- */

typedef enum jtok_kind {
    JT_EOF,
    JT_TEXT,        /* template text between tags (whitespace control applied) */
    JT_VAR_BEGIN,   /* {{ */
    JT_VAR_END,     /* }} */
    JT_BLOCK_BEGIN, /* {% */
    JT_BLOCK_END,   /* %} */
    JT_NAME,
    JT_STRING, /* escapes resolved */
    JT_INT,
    JT_FLOAT,
    JT_OP, /* text holds the operator: ( ) [ ] { } . , : | ~ + - * / // % ** = == != < <= > >= */
} jtok_kind;

typedef struct jtok {
    jtok_kind kind;
    int line, col;
    char *text; /* JT_TEXT, JT_NAME, JT_STRING, JT_OP (malloc'ed) */
    size_t len;
    int64_t i;
    double f;
} jtok;

typedef struct jtok_list {
    jtok *t;
    size_t n, cap;
} jtok_list;

bool jinja_lex(const char *src, size_t len, jtok_list *out, char *err, size_t err_size);
void jinja_tokens_free(jtok_list *l);

/* ---- syntax tree (jinja_parser.c) ---- */

typedef enum jnode_kind {
    /* statements */
    JN_BODY,      /* list: statements */
    JN_TEXT,      /* value: the text */
    JN_OUTPUT,    /* a: expression */
    JN_IF,        /* a: condition, b: body, c: else body or the elif's JN_IF (may be NULL) */
    JN_FOR,       /* names: targets, a: iterable, b: filter condition or NULL, c: body, d: else body or NULL */
    JN_SET,       /* names: targets, a: value; or name + attr: namespace attribute assignment */
    JN_SET_BLOCK, /* name: target, c: body, list: filters applied to the captured text */
    JN_MACRO,     /* name, names: parameters, list: defaults (NULL: none), c: body */
    JN_CALL_BLOCK, /* a: the call, names/list: caller's parameters and defaults, c: body */
    JN_FILTER_BLOCK, /* list: filters (their input NULL), c: body */
    JN_BREAK,
    JN_CONTINUE,
    /* expressions */
    JE_LITERAL, /* value */
    JE_NAME,    /* name */
    JE_LIST,    /* list: items; negate: a tuple */
    JE_DICT,    /* list: keys, list2: values */
    JE_ATTR,    /* a: object, name */
    JE_ITEM,    /* a: object, b: key or index */
    JE_SLICE,   /* a: object, b, c, d: start, stop, step (each may be NULL) */
    JE_CALL,    /* a: callee, list: positional, names + list2: keyword arguments */
    JE_FILTER,  /* a: input (NULL in a filter block), name, arguments as JE_CALL */
    JE_TEST,    /* a: input, name, list: arguments, negate */
    JE_UNARY,   /* op, a */
    JE_BINARY,  /* op, a, b */
    JE_COND,    /* a: condition, b: value, c: else value or NULL */
} jnode_kind;

typedef enum jop {
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOT_IN,
    JOP_AND, JOP_OR, JOP_NOT, JOP_NEG, JOP_POS,
} jop;

typedef struct jnode jnode;
struct jnode {
    jnode_kind kind;
    int line;
    jop op;
    bool negate;
    jnode *a, *b, *c, *d;
    jnode **list, **list2;
    size_t n_list, n_list2;
    char *name, *attr;
    char **names;
    size_t n_names;
    jv value;
    /* JN_MACRO, JN_CALL_BLOCK: whether the body reads varargs / kwargs,
     * which then take the extra positional / keyword arguments (as jinja2
     * decides, from the body's names); otherwise such arguments are an error */
    bool uses_varargs, uses_kwargs;
};

void jinja_node_free(jnode *n);

struct vt_jinja_template {
    jnode *root;
    /* A render increments and decrements the reference counts of the values
     * the parsed template owns (its literals), which are plain integers: two
     * renders of one template at once would lose counts and free a literal
     * the template still holds. Renders of one template take this, one at a
     * time (a render takes milliseconds). */
    pthread_mutex_t render_lock;
};

/* ---- callables ---- */

struct jinja_render;
typedef struct jinja_args {
    const jv *pos;
    size_t n_pos;
    char *const *kw_names;
    const jv *kw;
    size_t n_kw;
} jinja_args;

typedef jv (*jinja_builtin)(struct jinja_render *r, int line, jv self, const jinja_args *args);

typedef enum jfunc_kind { JF_BUILTIN, JF_MACRO, JF_CALLER } jfunc_kind;

typedef struct jv_func {
    int refs;
    jfunc_kind kind;
    jinja_builtin builtin;
    const char *name;
    jv bound;            /* the object a method is bound to (or undefined) */
    const jnode *macro;  /* JF_MACRO: the JN_MACRO; JF_CALLER: the JN_CALL_BLOCK */
    struct jframe *frame; /* JF_CALLER: the scope the call block's body runs in */
    bool dead;            /* JF_CALLER: its call block has finished (the frame is gone) */
} jv_func;

jv jinja_func_new(jfunc_kind kind, const char *name);

/* ---- rendering (jinja_eval.c) ---- */

typedef struct jframe {
    struct jframe *parent;
    jv vars; /* a dict */
} jframe;

typedef struct jinja_render {
    vt_text_buf *out;
    jframe *globals;
    int depth;           /* macro calls and nested evaluation */
    uint64_t iterations; /* loop iterations so far */
    bool failed;
    char *err;
    size_t err_size;
    int break_state; /* 1: break, 2: continue pending */
    jv pending_caller; /* set by a call block for the macro call it makes */
} jinja_render;

/* Record the first error ("line N: ..."); returns an undefined value for
 * convenience. */
jv jinja_fail(jinja_render *r, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Count bytes built or searched against VT_JINJA_MAX_WORK; false (the
 * error recorded) past it. */
bool jinja_work(jinja_render *r, int line, uint64_t bytes);
/* The first occurrence of needle (m bytes) in hay (n bytes) at or after
 * offset from, or -1; linear in n + m, its bytes counted as work. */
int64_t jinja_find(jinja_render *r, int line, const char *hay, size_t n, size_t from, const char *needle, size_t m);
jv jinja_call(jinja_render *r, int line, jv fn, const jinja_args *args);
/* Attribute lookup as jinja2's getattr does (missing: undefined). */
jv jinja_getattr(jinja_render *r, int line, jv obj, const char *name);
jv jinja_getitem(jinja_render *r, int line, jv obj, jv key);

/* ---- filters, tests, methods, globals (jinja_filters.c, jinja_tests.c, jinja_methods.c, jinja_globals.c) ---- */

jv jinja_apply_filter(jinja_render *r, int line, const char *name, jv input, const jinja_args *args);
/* Returns 0 false, 1 true, -1 error (recorded). */
int jinja_apply_test(jinja_render *r, int line, const char *name, jv input, const jinja_args *args);
bool jinja_test_exists(const char *name);
/* A method of a str, dict or list (bound to obj), or undefined. */
jv jinja_method(jinja_render *r, jv obj, const char *name);
bool jinja_add_globals(jv globals);

/* Helpers shared by the filters and methods. */
const jv *jinja_arg(const jinja_args *a, size_t pos, const char *kw);
/* Iterate v as Python does (a list's items, a dict's keys, a string's
 * characters) into a new list; undefined iterates as empty. */
jv jinja_to_list(jinja_render *r, int line, jv v);
/* The buffer as a new string value (its data freed); undefined and an
 * error recorded when it failed. */
jv jinja_buf_string(jinja_render *r, int line, vt_text_buf *b);
/* jinja2's escape(): HTML-escaped Markup (a Markup is returned as is). */
jv jinja_escape(jinja_render *r, int line, jv v);
/* Python's str.strip() whitespace. */
bool jinja_is_py_space(unsigned char c);
/* The bytes of the Python whitespace character (Unicode's, as str.strip()
 * and str.split() take them) that starts s (n bytes there), or that ends
 * at s[end - 1]; 0 when none does. */
size_t jinja_py_space_len(const char *s, size_t n);
size_t jinja_py_space_len_before(const char *s, size_t end);
/* Narrow d[*b, *e) past leading (left) and trailing (right) bytes of chars
 * (clen of them), or with chars NULL past Python's whitespace. */
void jinja_strip_span(const char *d, size_t *b, size_t *e, const char *chars, size_t clen, bool left, bool right);
/* Code point counts and offsets of UTF-8 text. */
size_t jinja_cp_offset(const char *s, size_t len, size_t cp);
/* Python's < on numbers, strings, lists; records an error for others. */
int jinja_compare(jinja_render *r, int line, jv a, jv b, bool *ok);

/* ---- printf-style formatting (jinja_format.c) ---- */

/* fmt (len bytes) % args: Python's `'%s and %d' % (a, b)` for the
 * conversions s r d i u f F e E g G x X o c, flags, width and precision. */
jv jinja_percent_format(jinja_render *r, int line, const char *fmt, size_t len, const jv *args, size_t n_args);

/* ---- tojson (jinja_json.c) ---- */

typedef struct jinja_json_opts {
    bool ensure_ascii, sort_keys;
    const char *indent; /* NULL: none; else the text of one level */
    const char *item_sep, *key_sep;
} jinja_json_opts;
bool jinja_tojson(jinja_render *r, int line, jv v, const jinja_json_opts *o, vt_text_buf *out);

#endif
