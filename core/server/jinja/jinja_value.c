/* jinja_value.c — reference-counted values with Python's semantics
 * (truthiness, equality, str and repr). */
#include "jinja_value.h"

#include "jinja_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local uint64_t meter_used, meter_limit;

void jv_meter_start(uint64_t limit) {
    meter_used = 0;
    meter_limit = limit;
}

bool jv_meter_tick(uint64_t units) {
    if (meter_limit == 0) return true;
    meter_used = units > UINT64_MAX - meter_used ? UINT64_MAX : meter_used + units;
    return meter_used <= meter_limit;
}

bool jv_meter_spent(void) { return meter_limit != 0 && meter_used > meter_limit; }

static const char oom_name[] = "out of memory";

jv jv_undefined(const char *name) {
    jv v = {.type = JV_UNDEFINED, .undef_name = name};
    return v;
}
jv jv_none(void) { return (jv){.type = JV_NONE}; }
jv jv_bool(bool b) { return (jv){.type = JV_BOOL, .u.b = b}; }
jv jv_int(int64_t i) { return (jv){.type = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.type = JV_FLOAT, .u.f = f}; }
bool jv_is_oom(jv v) { return v.type == JV_UNDEFINED && v.undef_name == oom_name; }

jv jv_string(const char *s, size_t len) {
    jv_str *p = malloc(sizeof *p + len + 1);
    if (!p) return jv_undefined(oom_name);
    p->refs = 1;
    p->markup = false;
    p->len = len;
    if (len) memcpy(p->data, s, len);
    p->data[len] = 0;
    return (jv){.type = JV_STRING, .u.s = p};
}
jv jv_cstring(const char *s) { return jv_string(s, strlen(s)); }

jv jv_list_new(void) {
    jv_list *l = calloc(1, sizeof *l);
    if (!l) return jv_undefined(oom_name);
    l->refs = 1;
    return (jv){.type = JV_LIST, .u.l = l};
}
static jv dict_of_type(jv_type t) {
    jv_dict *d = calloc(1, sizeof *d);
    if (!d) return jv_undefined(oom_name);
    d->refs = 1;
    return (jv){.type = t, .u.d = d};
}
jv jv_dict_new(void) { return dict_of_type(JV_DICT); }
jv jv_namespace_new(void) { return dict_of_type(JV_NAMESPACE); }

jv jv_incref(jv v) {
    switch (v.type) {
    case JV_STRING: v.u.s->refs++; break;
    case JV_LIST: v.u.l->refs++; break;
    case JV_DICT:
    case JV_NAMESPACE: v.u.d->refs++; break;
    case JV_FUNC: v.u.fn->refs++; break;
    default: break;
    }
    return v;
}

/* Add v to the values waiting to be released; false when out of memory. */
static bool pend(jv **pending, size_t *n, size_t *cap, jv v) {
    if (v.type != JV_STRING && v.type != JV_LIST && v.type != JV_DICT && v.type != JV_NAMESPACE && v.type != JV_FUNC)
        return true; /* holds no reference */
    if (*n == *cap) {
        size_t grown = *cap ? 2 * *cap : 64;
        jv *p = realloc(*pending, grown * sizeof *p);
        if (!p) return false;
        *pending = p;
        *cap = grown;
    }
    (*pending)[(*n)++] = v;
    return true;
}

/* Drop one reference to v. A value whose last reference this was is freed
 * and the references it held are dropped the same way, from a list of
 * values waiting instead of by recursion: a list nested 100,000 deep (a
 * loop can build one) must not take as many stack frames to free. Should
 * that list not grow, the value is released by recursion instead. */
void jv_decref(jv v) {
    jv *pending = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        switch (v.type) {
        case JV_STRING:
            if (--v.u.s->refs == 0) free(v.u.s);
            break;
        case JV_LIST:
            if (--v.u.l->refs == 0) {
                for (size_t i = 0; i < v.u.l->n; i++)
                    if (!pend(&pending, &n, &cap, v.u.l->items[i])) jv_decref(v.u.l->items[i]);
                free(v.u.l->items);
                free(v.u.l);
            }
            break;
        case JV_DICT:
        case JV_NAMESPACE:
            if (--v.u.d->refs == 0) {
                for (size_t i = 0; i < v.u.d->n; i++) {
                    if (!pend(&pending, &n, &cap, v.u.d->e[i].key)) jv_decref(v.u.d->e[i].key);
                    if (!pend(&pending, &n, &cap, v.u.d->e[i].value)) jv_decref(v.u.d->e[i].value);
                }
                free(v.u.d->e);
                free(v.u.d);
            }
            break;
        case JV_FUNC:
            if (--v.u.fn->refs == 0) {
                if (!pend(&pending, &n, &cap, v.u.fn->bound)) jv_decref(v.u.fn->bound);
                free(v.u.fn);
            }
            break;
        default: break;
        }
        if (n == 0) break;
        v = pending[--n];
    }
    free(pending);
}

/* Containers already searched, by address (open addressing): a value that
 * shares its parts (x = [y, y], doubled in a loop) is searched once per part,
 * not once per path to it, which is exponential in the doublings. Out of
 * memory, the set stops pruning (the search stays right, only slower). */
typedef struct seen_set {
    const void **slot;
    size_t cap, n;
    bool failed; /* out of memory: the search goes on unpruned */
} seen_set;

/* True when p was not in the set (and is now). */
static bool seen_first(seen_set *s, const void *p) {
    if (s->failed) return true;
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        const void **slot = calloc(cap, sizeof *slot);
        if (!slot) {
            s->failed = true;
            return true;
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i]) continue;
            size_t h = ((uintptr_t)s->slot[i] >> 4) & (cap - 1);
            while (slot[h]) h = (h + 1) & (cap - 1);
            slot[h] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t h = ((uintptr_t)p >> 4) & (s->cap - 1);
    while (s->slot[h]) {
        if (s->slot[h] == p) return false;
        h = (h + 1) & (s->cap - 1);
    }
    s->slot[h] = p;
    s->n++;
    return true;
}

/* Does v hold (or is it) the container at `target`, and how deep does it
 * go? HOLDS_DEEP when some part lies deeper than VT_JINJA_MAX_DEPTH
 * containers (no value may be stored that deep, so no cycle hides past the
 * bound). Each container is searched once (the seen set: a container met
 * again by a shorter path has nothing new, since its first search found
 * neither the target nor a part too deep), from a list of containers still
 * to search rather than by recursion. */
enum { HOLDS_NOT, HOLDS_TARGET, HOLDS_DEEP, HOLDS_SPENT };

typedef struct pending_part {
    jv v;
    int depth;
} pending_part;

static int holds(jv v, const void *target, seen_set *seen) {
    pending_part *todo = NULL;
    size_t n = 0, cap = 0;
    int depth = 0, verdict = HOLDS_NOT;
    for (;;) {
        if (!jv_meter_tick(JV_METER_ITEM)) { /* refused, as a cycle would be: the render fails on its meter anyway */
            verdict = HOLDS_SPENT;
            break;
        }
        const void *self = v.type == JV_LIST                               ? (const void *)v.u.l
                           : v.type == JV_DICT || v.type == JV_NAMESPACE ? (const void *)v.u.d
                           : v.type == JV_FUNC                           ? (const void *)v.u.fn
                                                                         : NULL;
        if (self == target) {
            verdict = HOLDS_TARGET;
            break;
        }
        if (self && depth >= VT_JINJA_MAX_DEPTH) {
            verdict = HOLDS_DEEP;
            break;
        }
        if (self && seen_first(seen, self)) {
            size_t k = v.type == JV_LIST ? v.u.l->n : v.type == JV_FUNC ? 1 : v.u.d->n;
            if (n + k > cap) {
                size_t grown = cap ? cap : 64;
                while (grown < n + k) grown *= 2;
                pending_part *t = realloc(todo, grown * sizeof *t);
                if (!t) { /* out of memory: refuse, so nothing is built that might be a cycle */
                    verdict = HOLDS_DEEP;
                    break;
                }
                todo = t;
                cap = grown;
            }
            for (size_t i = 0; i < k; i++)
                todo[n++] = (pending_part){v.type == JV_LIST   ? v.u.l->items[i]
                                           : v.type == JV_FUNC ? v.u.fn->bound
                                                               : v.u.d->e[i].value,
                                           depth + 1};
        }
        if (n == 0) break;
        n--;
        v = todo[n].v;
        depth = todo[n].depth;
    }
    free(todo);
    return verdict;
}

const char *jv_holds(jv v, jv container) {
    const void *target = container.type == JV_LIST ? (const void *)container.u.l
                         : container.type == JV_DICT || container.type == JV_NAMESPACE ? (const void *)container.u.d
                                                                                        : NULL;
    if (!target) return NULL;
    seen_set seen = {0};
    const int verdict = holds(v, target, &seen);
    free(seen.slot);
    return verdict == HOLDS_TARGET  ? "may not hold itself"
           : verdict == HOLDS_DEEP  ? "may not hold a value nested deeper than " VT_JINJA_MAX_DEPTH_TEXT
           : verdict == HOLDS_SPENT ? "cannot be checked within the template's work limit"
                                    : NULL;
}

bool jv_list_append(jv list, jv item) {
    jv_list *l = list.u.l;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *p = realloc(l->items, cap * sizeof *p);
        if (!p) {
            jv_decref(item);
            return false;
        }
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = item;
    return true;
}

static bool key_equal(jv a, jv b) {
    if (a.type == JV_STRING && b.type == JV_STRING)
        return a.u.s->len == b.u.s->len && memcmp(a.u.s->data, b.u.s->data, a.u.s->len) == 0;
    if (a.type == JV_STRING || b.type == JV_STRING) return false;
    return jv_equal(a, b);
}

const jv *jv_dict_get(jv dict, jv key) {
    jv_dict *d = dict.u.d;
    for (size_t i = 0; i < d->n; i++)
        if (key_equal(d->e[i].key, key)) return &d->e[i].value;
    return NULL;
}

const jv *jv_dict_get_cstr(jv dict, const char *key) {
    jv_dict *d = dict.u.d;
    size_t len = strlen(key);
    for (size_t i = 0; i < d->n; i++) {
        jv k = d->e[i].key;
        if (k.type == JV_STRING && k.u.s->len == len && memcmp(k.u.s->data, key, len) == 0) return &d->e[i].value;
    }
    return NULL;
}

bool jv_dict_set(jv dict, jv key, jv value) {
    jv_dict *d = dict.u.d;
    for (size_t i = 0; i < d->n; i++)
        if (key_equal(d->e[i].key, key)) {
            jv_decref(key);
            jv_decref(d->e[i].value);
            d->e[i].value = value;
            return true;
        }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv_dict_entry *p = realloc(d->e, cap * sizeof *p);
        if (!p) {
            jv_decref(key);
            jv_decref(value);
            return false;
        }
        d->e = p;
        d->cap = cap;
    }
    d->e[d->n].key = key;
    d->e[d->n].value = value;
    d->n++;
    return true;
}

bool jv_dict_set_cstr(jv dict, const char *key, jv value) {
    jv k = jv_cstring(key);
    if (jv_is_oom(k)) {
        jv_decref(value);
        return false;
    }
    return jv_dict_set(dict, k, value);
}

bool jv_truthy(jv v) {
    switch (v.type) {
    case JV_UNDEFINED:
    case JV_NONE: return false;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STRING: return v.u.s->len > 0;
    case JV_LIST: return v.u.l->n > 0;
    case JV_DICT: return v.u.d->n > 0;
    default: return true;
    }
}

bool jv_is_number(jv v) { return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL; }

double jv_as_double(jv v) {
    switch (v.type) {
    case JV_INT: return (double)v.u.i;
    case JV_FLOAT: return v.u.f;
    case JV_BOOL: return v.u.b ? 1.0 : 0.0;
    default: return 0.0;
    }
}

/* ==, at most VT_JINJA_MAX_DEPTH containers deep: the same container is
 * equal to itself without a look inside (so one that holds itself compares),
 * and two compared deeper than the bound are unequal rather than a stack
 * overflow. */
static bool equal_at(jv a, jv b, int depth) {
    if (!jv_meter_tick(JV_METER_ITEM)) return false; /* the render fails on its meter */
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.type != JV_FLOAT && b.type != JV_FLOAT) {
            int64_t x = a.type == JV_BOOL ? a.u.b : a.u.i, y = b.type == JV_BOOL ? b.u.b : b.u.i;
            return x == y;
        }
        return jv_as_double(a) == jv_as_double(b);
    }
    if (a.type != b.type) return false;
    switch (a.type) {
    case JV_UNDEFINED:
    case JV_NONE: return true;
    case JV_STRING:
        return a.u.s->len == b.u.s->len && jv_meter_tick(a.u.s->len) &&
               memcmp(a.u.s->data, b.u.s->data, a.u.s->len) == 0;
    case JV_LIST:
        if (a.u.l == b.u.l) return true;
        if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple || depth >= VT_JINJA_MAX_DEPTH) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_at(a.u.l->items[i], b.u.l->items[i], depth + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d == b.u.d) return true;
        if (a.u.d->n != b.u.d->n || depth >= VT_JINJA_MAX_DEPTH) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            const jv *o = jv_dict_get(b, a.u.d->e[i].key);
            if (!o || !equal_at(a.u.d->e[i].value, *o, depth + 1)) return false;
        }
        return true;
    default: return a.u.d == b.u.d; /* namespaces and callables: identity */
    }
}

bool jv_equal(jv a, jv b) { return equal_at(a, b, 0); }

size_t jv_utf8_count(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

const char *jv_type_name(jv v) {
    static const char *const names[] = {"undefined", "none", "bool", "int", "float",
                                        "str", "list", "dict", "namespace", "function"};
    return names[v.type];
}

/* ---- the buffer ---- */

/* ---- str() and repr() ---- */

static void write_str_repr(vt_text_buf *b, const char *s, size_t len) {
    if (b->failed || !jv_meter_tick(len)) return;
    bool has_single = memchr(s, '\'', len) != NULL, has_double = memchr(s, '"', len) != NULL;
    char quote = has_single && !has_double ? '"' : '\'';
    vt_text_putc(b, quote);
    for (size_t i = 0; i < len && !b->failed; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') vt_text_puts(b, "\\\\");
        else if (c == (unsigned char)quote) {
            vt_text_putc(b, '\\');
            vt_text_putc(b, (char)c);
        } else if (c == '\n') vt_text_puts(b, "\\n");
        else if (c == '\r') vt_text_puts(b, "\\r");
        else if (c == '\t') vt_text_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) vt_text_printf(b, "\\x%02x", c);
        else vt_text_putc(b, (char)c);
    }
    vt_text_putc(b, quote);
}

/* Containers are written to VT_JINJA_MAX_DEPTH levels; deeper ones (a
 * temporary that wraps a value stored at the bound) as Python writes a
 * container it will not descend into, [...] or {...}. No value holds itself
 * (jv_holds refuses that), so the depth alone bounds the walk. */
static void write_value(vt_text_buf *b, jv v, bool repr, int depth);

static void write_container(vt_text_buf *b, jv v, int depth) {
    if (b->failed || !jv_meter_tick(JV_METER_ITEM)) return; /* a full buffer fails the render; so does a spent meter */
    if (depth >= VT_JINJA_MAX_DEPTH) {
        vt_text_puts(b, v.type == JV_LIST        ? (v.u.l->tuple ? "(...)" : "[...]")
                       : v.type == JV_NAMESPACE ? "<Namespace {...}>"
                                                : "{...}");
        return;
    }
    if (v.type == JV_LIST) {
        bool t = v.u.l->tuple;
        vt_text_putc(b, t ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n && !b->failed && !jv_meter_spent(); i++) {
            if (i) vt_text_puts(b, ", ");
            write_value(b, v.u.l->items[i], true, depth + 1);
        }
        if (t && v.u.l->n == 1) vt_text_putc(b, ',');
        vt_text_putc(b, t ? ')' : ']');
    } else {
        if (v.type == JV_NAMESPACE) vt_text_puts(b, "<Namespace ");
        vt_text_putc(b, '{');
        for (size_t i = 0; i < v.u.d->n && !b->failed && !jv_meter_spent(); i++) {
            if (i) vt_text_puts(b, ", ");
            write_value(b, v.u.d->e[i].key, true, depth + 1);
            vt_text_puts(b, ": ");
            write_value(b, v.u.d->e[i].value, true, depth + 1);
        }
        vt_text_putc(b, '}');
        if (v.type == JV_NAMESPACE) vt_text_putc(b, '>');
    }
}

static void write_value(vt_text_buf *b, jv v, bool repr, int depth) {
    switch (v.type) {
    case JV_UNDEFINED: break;
    case JV_NONE: vt_text_puts(b, "None"); break;
    case JV_BOOL: vt_text_puts(b, v.u.b ? "True" : "False"); break;
    case JV_INT: vt_text_printf(b, "%lld", (long long)v.u.i); break;
    case JV_FLOAT: vt_text_put_float(b, v.u.f); break;
    case JV_STRING:
        if (repr) write_str_repr(b, v.u.s->data, v.u.s->len);
        else if (jv_meter_tick(v.u.s->len)) vt_text_put(b, v.u.s->data, v.u.s->len);
        break;
    case JV_LIST:
    case JV_DICT:
    case JV_NAMESPACE: write_container(b, v, depth); break;
    case JV_FUNC: vt_text_puts(b, "<function>"); break;
    }
}

void jv_write_str(vt_text_buf *b, jv v) { write_value(b, v, false, 0); }

void jv_write_repr(vt_text_buf *b, jv v) { write_value(b, v, true, 0); }

jv jv_to_string(jv v) {
    if (v.type == JV_STRING) return jv_incref(v);
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT}; /* no string is longer than an output */
    jv_write_str(&b, v);
    if (b.failed) {
        free(b.data);
        return jv_undefined(oom_name);
    }
    jv s = jv_string(b.data ? b.data : "", b.len);
    free(b.data);
    return s;
}
