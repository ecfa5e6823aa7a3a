/* jinja_tests.c — the tests of `x is name` (and of select/reject and
 * selectattr/rejectattr), as jinja2 defines them. */
#include "jinja_internal.h"

#include <math.h>
#include <string.h>

typedef int (*test_fn)(jinja_render *r, int line, jv v, const jinja_args *a);

static int t_defined(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type != JV_UNDEFINED;
}
static int t_undefined(jinja_render *r, int line, jv v, const jinja_args *a) { return !t_defined(r, line, v, a); }
static int t_none(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_NONE;
}
static int t_string(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_STRING;
}
static int t_number(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return jv_is_number(v);
}
static int t_integer(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_INT;
}
static int t_float(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_FLOAT;
}
static int t_boolean(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_BOOL;
}
static int t_true(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_BOOL && v.u.b;
}
static int t_false(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_BOOL && !v.u.b;
}
static int t_mapping(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_DICT;
}
static int t_iterable(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    /* Undefined defines __iter__, so jinja2 calls it iterable. */
    return v.type == JV_STRING || v.type == JV_LIST || v.type == JV_DICT || v.type == JV_UNDEFINED;
}
static int t_sequence(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    /* jinja2: len() and __getitem__ both work (Undefined has neither __getitem__... but has __len__). */
    return v.type == JV_STRING || v.type == JV_LIST || v.type == JV_DICT;
}
static int t_callable(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return v.type == JV_FUNC;
}
static bool int_arg(jinja_render *r, int line, jv v, int64_t *out, const char *test) {
    if (v.type == JV_INT) *out = v.u.i;
    else if (v.type == JV_BOOL) *out = v.u.b;
    else {
        jinja_fail(r, line, "the '%s' test needs an integer, not %s", test, jv_type_name(v));
        return false;
    }
    return true;
}
static int t_odd(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    int64_t i;
    if (!int_arg(r, line, v, &i, "odd")) return -1;
    return i % 2 != 0;
}
static int t_even(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    int64_t i;
    if (!int_arg(r, line, v, &i, "even")) return -1;
    return i % 2 == 0;
}
static int t_divisibleby(jinja_render *r, int line, jv v, const jinja_args *a) {
    const jv *d = jinja_arg(a, 0, "num");
    int64_t i, k;
    if (!d) return jinja_fail(r, line, "divisibleby needs a number"), -1;
    if (!int_arg(r, line, v, &i, "divisibleby") || !int_arg(r, line, *d, &k, "divisibleby")) return -1;
    if (k == 0) return jinja_fail(r, line, "divisibleby 0"), -1;
    return i % k == 0;
}
static int t_eq(jinja_render *r, int line, jv v, const jinja_args *a) {
    const jv *o = jinja_arg(a, 0, "other");
    if (!o) return jinja_fail(r, line, "the equality test needs a value"), -1;
    return jv_equal(v, *o);
}
static int t_ne(jinja_render *r, int line, jv v, const jinja_args *a) {
    int t = t_eq(r, line, v, a);
    return t < 0 ? t : !t;
}
static int order(jinja_render *r, int line, jv v, const jinja_args *a, int want) {
    const jv *o = jinja_arg(a, 0, "other");
    if (!o) return jinja_fail(r, line, "the comparison test needs a value"), -1;
    bool ok;
    int c = jinja_compare(r, line, v, *o, &ok);
    if (!ok) return -1;
    switch (want) {
    case 0: return c < 0;
    case 1: return c <= 0;
    case 2: return c > 0;
    default: return c >= 0;
    }
}
static int t_lt(jinja_render *r, int line, jv v, const jinja_args *a) { return order(r, line, v, a, 0); }
static int t_le(jinja_render *r, int line, jv v, const jinja_args *a) { return order(r, line, v, a, 1); }
static int t_gt(jinja_render *r, int line, jv v, const jinja_args *a) { return order(r, line, v, a, 2); }
static int t_ge(jinja_render *r, int line, jv v, const jinja_args *a) { return order(r, line, v, a, 3); }
static int t_in(jinja_render *r, int line, jv v, const jinja_args *a) {
    const jv *c = jinja_arg(a, 0, "seq");
    if (!c) return jinja_fail(r, line, "the 'in' test needs a container"), -1;
    if (c->type == JV_STRING && v.type == JV_STRING) {
        const int64_t at = jinja_find(r, line, c->u.s->data, c->u.s->len, 0, v.u.s->data, v.u.s->len);
        return r->failed ? -1 : at >= 0;
    }
    if (c->type == JV_LIST) {
        for (size_t i = 0; i < c->u.l->n && !jv_meter_spent(); i++)
            if (jv_equal(v, c->u.l->items[i])) return 1;
        return 0;
    }
    if (c->type == JV_DICT) return jv_dict_get(*c, v) != NULL;
    return jinja_fail(r, line, "the 'in' test needs a string, list or dict"), -1;
}
static int t_sameas(jinja_render *r, int line, jv v, const jinja_args *a) {
    const jv *o = jinja_arg(a, 0, "other");
    if (!o) return jinja_fail(r, line, "sameas needs a value"), -1;
    if (v.type != o->type) return 0;
    switch (v.type) {
    case JV_NONE:
    case JV_UNDEFINED: return 1;
    case JV_BOOL: return v.u.b == o->u.b;
    case JV_INT: return v.u.i == o->u.i;
    case JV_FLOAT: return v.u.f == o->u.f;
    default: return v.u.d == o->u.d;
    }
}
static int t_lower(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    if (v.type != JV_STRING) return 0;
    bool cased = false;
    for (size_t i = 0; i < v.u.s->len; i++) {
        char c = v.u.s->data[i];
        if (c >= 'A' && c <= 'Z') return 0;
        cased |= c >= 'a' && c <= 'z';
    }
    return cased;
}
static int t_upper(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    if (v.type != JV_STRING) return 0;
    bool cased = false;
    for (size_t i = 0; i < v.u.s->len; i++) {
        char c = v.u.s->data[i];
        if (c >= 'a' && c <= 'z') return 0;
        cased |= c >= 'A' && c <= 'Z';
    }
    return cased;
}

static const struct {
    const char *name;
    test_fn fn;
} tests[] = {
    {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"string", t_string},
    {"number", t_number},     {"integer", t_integer},     {"float", t_float},       {"boolean", t_boolean},
    {"true", t_true},         {"false", t_false},         {"mapping", t_mapping},   {"iterable", t_iterable},
    {"sequence", t_sequence}, {"callable", t_callable},   {"odd", t_odd},           {"even", t_even},
    {"divisibleby", t_divisibleby}, {"equalto", t_eq},    {"eq", t_eq},             {"==", t_eq},
    {"ne", t_ne},             {"!=", t_ne},               {"lt", t_lt},             {"lessthan", t_lt},
    {"<", t_lt},              {"le", t_le},               {"<=", t_le},             {"gt", t_gt},
    {"greaterthan", t_gt},    {">", t_gt},                {"ge", t_ge},             {">=", t_ge},
    {"in", t_in},             {"sameas", t_sameas},       {"lower", t_lower},       {"upper", t_upper},
};

bool jinja_test_exists(const char *name) {
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++)
        if (strcmp(tests[i].name, name) == 0) return true;
    return false;
}

int jinja_apply_test(jinja_render *r, int line, const char *name, jv input, const jinja_args *args) {
    for (size_t i = 0; i < sizeof tests / sizeof *tests; i++)
        if (strcmp(tests[i].name, name) == 0) return tests[i].fn(r, line, input, args);
    jinja_fail(r, line, "unknown test '%s'", name);
    return -1;
}
