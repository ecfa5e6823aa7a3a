/* jinja_eval.c — running the syntax tree: scopes, statements, operators,
 * attribute and item access, calls of builtins and macros.
 *
 * Scopes follow jinja2: a for loop's body and a macro's body have their own
 * (a `set` there is not seen outside: templates use namespace() for that),
 * if blocks do not. Undefined names give jinja2's default Undefined, which
 * prints nothing and is false; using it as an object (an attribute, an item,
 * arithmetic) is an error, as in jinja2. */
#include "jinja_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

jv jinja_fail(jinja_render *r, int line, const char *fmt, ...) {
    if (!r->failed) {
        r->failed = true;
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        snprintf(r->err, r->err_size, "line %d: %s", line, msg);
    }
    return jv_undefined(NULL);
}

static jv oom(jinja_render *r, int line) { return jinja_fail(r, line, "out of memory"); }

bool jinja_work(jinja_render *r, int line, uint64_t bytes) {
    if (jv_meter_tick(bytes)) return true;
    jinja_fail(r, line, "the template's work passed its limit (%llu: bytes built, searched, compared or written)",
               (unsigned long long)VT_JINJA_MAX_WORK);
    return false;
}

int64_t jinja_find(jinja_render *r, int line, const char *hay, size_t n, size_t from, const char *needle, size_t m) {
    if (from > n) return -1;
    if (m == 0) return (int64_t)from;
    /* memchr to each place the first byte occurs, then a compare there:
     * what is read (the bytes skipped, m per compare) is counted as it is
     * read, so a search that would compare at every offset (n times m) stops
     * at the work limit. (glibc's memmem is linear, but AddressSanitizer
     * checks its whole haystack on every call, which made a fuzzing run of
     * a million-piece split quadratic.) */
    const char *p = hay + from, *const end = hay + n;
    while ((size_t)(end - p) >= m) {
        const char *c = memchr(p, needle[0], (size_t)(end - p) - m + 1);
        if (!jinja_work(r, line, (uint64_t)((c ? c : end) - p) + (c ? m : 0))) return -1;
        if (!c) return -1;
        if (memcmp(c, needle, m) == 0) return (int64_t)(c - hay);
        p = c + 1;
    }
    return -1;
}

jv jinja_func_new(jfunc_kind kind, const char *name) {
    jv_func *f = calloc(1, sizeof *f);
    if (!f) return jv_undefined("out of memory");
    f->refs = 1;
    f->kind = kind;
    f->name = name;
    f->bound = jv_undefined(NULL);
    return (jv){.type = JV_FUNC, .u.fn = f};
}

/* ---- scopes ---- */

static const jv *lookup(jframe *f, const char *name) {
    for (; f; f = f->parent) {
        const jv *v = jv_dict_get_cstr(f->vars, name);
        if (v) return v;
    }
    return NULL;
}

static bool assign(jinja_render *r, int line, jframe *f, const char *name, jv value) {
    if (!jv_dict_set_cstr(f->vars, name, value)) {
        oom(r, line);
        return false;
    }
    return true;
}

static bool frame_init(jinja_render *r, int line, jframe *f, jframe *parent) {
    f->parent = parent;
    f->vars = jv_dict_new();
    if (jv_is_oom(f->vars)) {
        oom(r, line);
        return false;
    }
    return true;
}

/* ---- expressions ---- */

static jv eval(jinja_render *r, jframe *f, const jnode *n);
static bool exec_body(jinja_render *r, jframe *f, const jnode *n);

static const char *undefined_what(jv v) { return v.undef_name ? v.undef_name : "value"; }

jv jinja_getattr(jinja_render *r, int line, jv obj, const char *name) {
    if (obj.type == JV_UNDEFINED)
        return jinja_fail(r, line, "'%s' is undefined (reading its attribute '%s')", undefined_what(obj), name);
    jv m = jinja_method(r, obj, name);
    if (m.type != JV_UNDEFINED || r->failed) return m;
    if (obj.type == JV_DICT || obj.type == JV_NAMESPACE) {
        const jv *v = jv_dict_get_cstr(obj, name);
        if (v) return jv_incref(*v);
    }
    return jv_undefined(name);
}

/* Python's index into n items (negative from the end); false if outside. */
static bool py_index(int64_t i, size_t n, size_t *out) {
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return false;
    *out = (size_t)i;
    return true;
}

static size_t cp_offset(const char *s, size_t len, size_t cp);

jv jinja_buf_string(jinja_render *r, int line, vt_text_buf *b) {
    jv s = b->failed ? jv_undefined("out of memory") : jv_string(b->data ? b->data : "", b->len);
    free(b->data);
    b->data = NULL;
    if (jv_is_oom(s)) return jinja_fail(r, line, "out of memory (or a string over the output limit)");
    return s;
}

bool jinja_is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* Python's str.isspace() beyond ASCII, as UTF-8: U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
size_t jinja_py_space_len(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0) return 0;
    if (jinja_is_py_space(p[0])) return 1;
    if (n >= 2 && p[0] == 0xC2 && (p[1] == 0x85 || p[1] == 0xA0)) return 2;
    if (n < 3) return 0;
    if (p[0] == 0xE1 && p[1] == 0x9A && p[2] == 0x80) return 3;
    if (p[0] == 0xE2 && p[1] == 0x80 && (p[2] <= 0x8A || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF) && p[2] >= 0x80)
        return 3;
    if (p[0] == 0xE2 && p[1] == 0x81 && p[2] == 0x9F) return 3;
    if (p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80) return 3;
    return 0;
}

size_t jinja_py_space_len_before(const char *s, size_t end) {
    for (size_t k = 1; k <= 3 && k <= end; k++)
        if (jinja_py_space_len(s + end - k, k) == k) return k;
    return 0;
}

void jinja_strip_span(const char *d, size_t *b, size_t *e, const char *chars, size_t clen, bool left, bool right) {
    size_t k;
    while (left && *b < *e &&
           (k = chars ? memchr(chars, d[*b], clen) != NULL : jinja_py_space_len(d + *b, *e - *b)) > 0)
        *b += k;
    while (right && *e > *b && (k = chars ? memchr(chars, d[*e - 1], clen) != NULL : jinja_py_space_len_before(d + *b, *e - *b)) > 0)
        *e -= k;
}

size_t jinja_cp_offset(const char *s, size_t len, size_t cp) { return cp_offset(s, len, cp); }

/* Byte offset of the code point number cp in s (len when past the end). */
static size_t cp_offset(const char *s, size_t len, size_t cp) {
    size_t i = 0;
    while (i < len && cp > 0) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        cp--;
    }
    jv_meter_tick(i); /* a walk from the start: a step slice calls it per character */
    return i;
}

jv jinja_getitem(jinja_render *r, int line, jv obj, jv key) {
    if (obj.type == JV_UNDEFINED) return jinja_fail(r, line, "'%s' is undefined (reading an item of it)", undefined_what(obj));
    if (obj.type == JV_DICT || obj.type == JV_NAMESPACE) {
        const jv *v = jv_dict_get(obj, key);
        if (v) return jv_incref(*v);
    } else if ((obj.type == JV_LIST || obj.type == JV_STRING) && (key.type == JV_INT || key.type == JV_BOOL)) {
        int64_t i = key.type == JV_BOOL ? key.u.b : key.u.i;
        size_t at;
        if (obj.type == JV_LIST) {
            if (py_index(i, obj.u.l->n, &at)) return jv_incref(obj.u.l->items[at]);
        } else {
            size_t n = jv_utf8_count(obj.u.s->data, obj.u.s->len);
            if (py_index(i, n, &at)) {
                size_t a = cp_offset(obj.u.s->data, obj.u.s->len, at);
                size_t b = cp_offset(obj.u.s->data, obj.u.s->len, at + 1);
                jv s = jv_string(obj.u.s->data + a, b - a);
                return jv_is_oom(s) ? oom(r, line) : s;
            }
        }
        return jv_undefined("item");
    }
    if (key.type == JV_STRING) return jinja_getattr(r, line, obj, key.u.s->data);
    return jv_undefined("item");
}

static jv eval_slice(jinja_render *r, int line, jv obj, const jv *parts) {
    size_t n;
    if (obj.type == JV_LIST) n = obj.u.l->n;
    else if (obj.type == JV_STRING) n = jv_utf8_count(obj.u.s->data, obj.u.s->len);
    else if (obj.type == JV_UNDEFINED) return jinja_fail(r, line, "'%s' is undefined (slicing it)", undefined_what(obj));
    else return jinja_fail(r, line, "cannot slice a %s", jv_type_name(obj));
    int64_t v[3];
    bool given[3];
    for (int k = 0; k < 3; k++) {
        given[k] = parts[k].type != JV_UNDEFINED && parts[k].type != JV_NONE;
        if (given[k] && parts[k].type != JV_INT) return jinja_fail(r, line, "slice indices must be integers");
        v[k] = given[k] ? parts[k].u.i : 0;
    }
    int64_t step = given[2] ? v[2] : 1;
    if (step == 0) return jinja_fail(r, line, "slice step cannot be zero");
    int64_t len = (int64_t)n, start, stop;
    /* Python's slice.indices() */
    if (step > 0) {
        start = !given[0] ? 0 : v[0] < 0 ? (v[0] + len < 0 ? 0 : v[0] + len) : (v[0] > len ? len : v[0]);
        stop = !given[1] ? len : v[1] < 0 ? (v[1] + len < 0 ? 0 : v[1] + len) : (v[1] > len ? len : v[1]);
    } else {
        start = !given[0] ? len - 1 : v[0] < 0 ? (v[0] + len < 0 ? -1 : v[0] + len) : (v[0] >= len ? len - 1 : v[0]);
        stop = !given[1] ? -1 : v[1] < 0 ? (v[1] + len < 0 ? -1 : v[1] + len) : (v[1] >= len ? len - 1 : v[1]);
    }
    if (obj.type == JV_LIST) {
        jv out = jv_list_new();
        if (jv_is_oom(out)) return oom(r, line);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
            if (!jv_list_append(out, jv_incref(obj.u.l->items[i]))) {
                jv_decref(out);
                return oom(r, line);
            }
        return out;
    }
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT};
    const char *s = obj.u.s->data;
    size_t slen = obj.u.s->len;
    if (step == 1) {
        if (start < stop) {
            size_t a = cp_offset(s, slen, (size_t)start), e = cp_offset(s, slen, (size_t)stop);
            vt_text_put(&b, s + a, e - a);
        }
    } else {
        for (int64_t i = start; (step > 0 ? i < stop : i > stop) && !jv_meter_spent() && !b.failed; i += step) {
            size_t a = cp_offset(s, slen, (size_t)i), e = cp_offset(s, slen, (size_t)i + 1);
            vt_text_put(&b, s + a, e - a);
        }
    }
    if (b.failed) {
        free(b.data);
        return jinja_fail(r, line, "a slice longer than the output limit, or out of memory");
    }
    jv out = jv_string(b.data ? b.data : "", b.len);
    free(b.data);
    return jv_is_oom(out) ? oom(r, line) : out;
}

int jinja_compare(jinja_render *r, int line, jv a, jv b, bool *ok) {
    *ok = true;
    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.type != JV_FLOAT && b.type != JV_FLOAT) {
            int64_t x = a.type == JV_BOOL ? a.u.b : a.u.i, y = b.type == JV_BOOL ? b.u.b : b.u.i;
            return x < y ? -1 : x > y;
        }
        double x = jv_as_double(a), y = jv_as_double(b);
        return x < y ? -1 : x > y;
    }
    if (a.type == JV_STRING && b.type == JV_STRING) {
        size_t n = a.u.s->len < b.u.s->len ? a.u.s->len : b.u.s->len;
        /* sorts compare n log n times; past the meter no more bytes are
         * read (the render fails on it) */
        if (!jv_meter_tick(JV_METER_ITEM + n)) return 0;
        int c = memcmp(a.u.s->data, b.u.s->data, n);
        if (c) return c < 0 ? -1 : 1;
        return a.u.s->len < b.u.s->len ? -1 : a.u.s->len > b.u.s->len;
    }
    if (a.type == JV_LIST && b.type == JV_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (jv_equal(a.u.l->items[i], b.u.l->items[i])) continue;
            return jinja_compare(r, line, a.u.l->items[i], b.u.l->items[i], ok);
        }
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    *ok = false;
    jinja_fail(r, line, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
    return 0;
}

static jv concat_strings(jinja_render *r, int line, jv a, jv b) {
    vt_text_buf buf = {.limit = VT_JINJA_MAX_OUTPUT};
    jv_write_str(&buf, a);
    jv_write_str(&buf, b);
    if (buf.failed) {
        free(buf.data);
        return jinja_fail(r, line, "a string longer than the output limit (%u bytes), or out of memory",
                          VT_JINJA_MAX_OUTPUT);
    }
    jv s = jv_string(buf.data ? buf.data : "", buf.len);
    free(buf.data);
    return jv_is_oom(s) ? oom(r, line) : s;
}

static jv repeat(jinja_render *r, int line, jv seq, int64_t times) {
    if (times < 0) times = 0;
    size_t unit = seq.type == JV_STRING ? seq.u.s->len : seq.u.l->n;
    if (seq.type == JV_STRING && unit && (uint64_t)times > VT_JINJA_MAX_OUTPUT / unit)
        return jinja_fail(r, line, "repetition larger than the output limit (%u bytes)", VT_JINJA_MAX_OUTPUT);
    if (seq.type == JV_LIST && unit && (uint64_t)times > VT_JINJA_MAX_ITERATIONS / unit)
        return jinja_fail(r, line, "repetition of more than %u list items", VT_JINJA_MAX_ITERATIONS);
    if (seq.type == JV_STRING) {
        /* the whole length at once, filled by doubling: a one-byte unit
         * repeated 16 million times is a few copies, not 16 million writes */
        const size_t len = unit * (size_t)times;
        char *data = malloc(len + 1);
        if (!data) return oom(r, line);
        if (len) memcpy(data, seq.u.s->data, unit);
        for (size_t done = unit; done < len;) {
            const size_t n = done < len - done ? done : len - done;
            memcpy(data + done, data, n);
            done += n;
        }
        jv s = jv_string(data, len);
        free(data);
        return jv_is_oom(s) ? oom(r, line) : s;
    }
    jv out = jv_list_new();
    if (jv_is_oom(out)) return oom(r, line);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++)
            if (!jv_list_append(out, jv_incref(seq.u.l->items[k]))) {
                jv_decref(out);
                return oom(r, line);
            }
    return out;
}

static jv arith(jinja_render *r, int line, jop op, jv a, jv b) {
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    /* str % args: a tuple gives the arguments, anything else is the one argument */
    if (op == JOP_MOD && a.type == JV_STRING) {
        const bool tuple = b.type == JV_LIST && b.u.l->tuple;
        return jinja_percent_format(r, line, a.u.s->data, a.u.s->len, tuple ? b.u.l->items : &b, tuple ? b.u.l->n : 1);
    }
    if (a.type == JV_UNDEFINED || b.type == JV_UNDEFINED)
        return jinja_fail(r, line, "'%s' is undefined (in arithmetic with '%s')",
                          undefined_what(a.type == JV_UNDEFINED ? a : b), names[op]);
    if (jv_is_number(a) && jv_is_number(b)) {
        bool ints = a.type != JV_FLOAT && b.type != JV_FLOAT;
        int64_t x = a.type == JV_BOOL ? a.u.b : a.u.i, y = b.type == JV_BOOL ? b.u.b : b.u.i;
        double fx = jv_as_double(a), fy = jv_as_double(b);
        int64_t res;
        switch (op) {
        case JOP_ADD:
            if (!ints) return jv_float(fx + fy);
            if (__builtin_add_overflow(x, y, &res)) return jinja_fail(r, line, "integer overflow");
            return jv_int(res);
        case JOP_SUB:
            if (!ints) return jv_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &res)) return jinja_fail(r, line, "integer overflow");
            return jv_int(res);
        case JOP_MUL:
            if (!ints) return jv_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &res)) return jinja_fail(r, line, "integer overflow");
            return jv_int(res);
        case JOP_DIV:
            if (fy == 0.0) return jinja_fail(r, line, "division by zero");
            return jv_float(fx / fy);
        case JOP_FLOORDIV:
        case JOP_MOD:
            if (ints) {
                if (y == 0) return jinja_fail(r, line, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) return jinja_fail(r, line, "integer overflow");
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return jv_int(op == JOP_FLOORDIV ? q : m);
            }
            if (fy == 0.0) return jinja_fail(r, line, "float division or modulo by zero");
            if (op == JOP_FLOORDIV) return jv_float(floor(fx / fy));
            {
                double m = fmod(fx, fy);
                if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
                return jv_float(m);
            }
        case JOP_POW:
            if (ints && y >= 0) {
                int64_t acc = 1;
                for (int64_t k = 0; k < y; k++) {
                    if (__builtin_mul_overflow(acc, x, &acc)) return jinja_fail(r, line, "integer overflow");
                    if (acc == 0 || acc == 1) break;
                }
                if (acc == 1 && x == -1) acc = (y % 2) ? -1 : 1;
                return jv_int(acc);
            }
            return jv_float(pow(fx, fy));
        default: break;
        }
    }
    if (op == JOP_ADD && a.type == JV_STRING && b.type == JV_STRING) {
        if (a.u.s->markup == b.u.s->markup) {
            jv s = concat_strings(r, line, a, b);
            if (s.type == JV_STRING) s.u.s->markup = a.u.s->markup;
            return s;
        }
        /* Markup + str escapes the str (Markup.__add__ / __radd__). */
        jv ea = jinja_escape(r, line, a), eb = jinja_escape(r, line, b);
        jv s = r->failed ? jv_undefined(NULL) : concat_strings(r, line, ea, eb);
        jv_decref(ea);
        jv_decref(eb);
        if (s.type == JV_STRING) s.u.s->markup = true;
        return s;
    }
    if (op == JOP_ADD && a.type == JV_LIST && b.type == JV_LIST) {
        if (a.u.l->n + b.u.l->n > VT_JINJA_MAX_ITERATIONS)
            return jinja_fail(r, line, "a list of more than %u items", VT_JINJA_MAX_ITERATIONS);
        jv out = jv_list_new();
        if (jv_is_oom(out)) return oom(r, line);
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!jv_list_append(out, jv_incref(a.u.l->items[i]))) return jv_decref(out), oom(r, line);
        for (size_t i = 0; i < b.u.l->n; i++)
            if (!jv_list_append(out, jv_incref(b.u.l->items[i]))) return jv_decref(out), oom(r, line);
        return out;
    }
    if (op == JOP_MUL && (a.type == JV_STRING || a.type == JV_LIST) && (b.type == JV_INT || b.type == JV_BOOL))
        return repeat(r, line, a, b.type == JV_BOOL ? b.u.b : b.u.i);
    if (op == JOP_MUL && (b.type == JV_STRING || b.type == JV_LIST) && (a.type == JV_INT || a.type == JV_BOOL))
        return repeat(r, line, b, a.type == JV_BOOL ? a.u.b : a.u.i);
    return jinja_fail(r, line, "unsupported operand types for %s: %s and %s", names[op], jv_type_name(a),
                      jv_type_name(b));
}

static int contains(jinja_render *r, int line, jv item, jv container) {
    switch (container.type) {
    case JV_UNDEFINED: return 0;
    case JV_STRING:
        if (item.type != JV_STRING) {
            jinja_fail(r, line, "'in <string>' requires a string on the left, not %s", jv_type_name(item));
            return -1;
        }
        if (item.u.s->len > container.u.s->len) return 0;
        if (jinja_find(r, line, container.u.s->data, container.u.s->len, 0, item.u.s->data, item.u.s->len) >= 0)
            return 1;
        return r->failed ? -1 : 0;
    case JV_LIST:
        if (!jinja_work(r, line, container.u.l->n * sizeof(jv))) return -1;
        for (size_t i = 0; i < container.u.l->n && !jv_meter_spent(); i++)
            if (jv_equal(item, container.u.l->items[i])) return 1;
        return 0;
    case JV_DICT:
    case JV_NAMESPACE: return jv_dict_get(container, item) != NULL;
    default: jinja_fail(r, line, "argument of type %s is not iterable", jv_type_name(container)); return -1;
    }
}

static jv binary_op(jinja_render *r, int line, jop op, jv a, jv b) {
    bool ok;
    int c;
    switch (op) {
    case JOP_CONCAT: return concat_strings(r, line, a, b);
    case JOP_EQ: return jv_bool(jv_equal(a, b));
    case JOP_NE: return jv_bool(!jv_equal(a, b));
    case JOP_LT:
    case JOP_LE:
    case JOP_GT:
    case JOP_GE:
        if (a.type == JV_UNDEFINED || b.type == JV_UNDEFINED)
            return jinja_fail(r, line, "'%s' is undefined (in a comparison)",
                              undefined_what(a.type == JV_UNDEFINED ? a : b));
        c = jinja_compare(r, line, a, b, &ok);
        if (!ok) return jv_undefined(NULL);
        return jv_bool(op == JOP_LT ? c < 0 : op == JOP_LE ? c <= 0 : op == JOP_GT ? c > 0 : c >= 0);
    case JOP_IN:
    case JOP_NOT_IN:
        c = contains(r, line, a, b);
        if (c < 0) return jv_undefined(NULL);
        return jv_bool(op == JOP_IN ? c == 1 : c == 0);
    default: return arith(r, line, op, a, b);
    }
}

/* Evaluate a call's arguments into arrays (new references). */
typedef struct eval_args {
    jinja_args a;
    jv pos[16], kw[16];
} eval_args;

static bool eval_call_args(jinja_render *r, jframe *f, const jnode *n, eval_args *ea) {
    memset(ea, 0, sizeof *ea);
    if (n->n_list > 16 || n->n_list2 > 16) {
        jinja_fail(r, n->line, "more than 16 arguments");
        return false;
    }
    for (size_t i = 0; i < n->n_list; i++) {
        ea->pos[i] = eval(r, f, n->list[i]);
        ea->a.n_pos = i + 1;
        if (r->failed) return false;
    }
    for (size_t i = 0; i < n->n_list2; i++) {
        ea->kw[i] = eval(r, f, n->list2[i]);
        ea->a.n_kw = i + 1;
        if (r->failed) return false;
    }
    ea->a.pos = ea->pos;
    ea->a.kw = ea->kw;
    ea->a.kw_names = n->names;
    return true;
}

static void free_call_args(eval_args *ea) {
    for (size_t i = 0; i < ea->a.n_pos; i++) jv_decref(ea->pos[i]);
    for (size_t i = 0; i < ea->a.n_kw; i++) jv_decref(ea->kw[i]);
}

const jv *jinja_arg(const jinja_args *a, size_t pos, const char *kw) {
    if (pos < a->n_pos) return &a->pos[pos];
    for (size_t i = 0; kw && i < a->n_kw; i++)
        if (strcmp(a->kw_names[i], kw) == 0) return &a->kw[i];
    return NULL;
}

/* Render a body into a string (block set, filter block, macro, caller). */
static jv capture(jinja_render *r, jframe *f, const jnode *body) {
    vt_text_buf buf = {.limit = VT_JINJA_MAX_OUTPUT};
    vt_text_buf *saved = r->out;
    r->out = &buf;
    bool ok = exec_body(r, f, body);
    r->out = saved;
    if (!ok) {
        free(buf.data);
        return jv_undefined(NULL);
    }
    if (buf.failed) {
        free(buf.data);
        return jinja_fail(r, body->line, "output larger than %u bytes", VT_JINJA_MAX_OUTPUT);
    }
    jv s = jv_string(buf.data ? buf.data : "", buf.len);
    free(buf.data);
    return jv_is_oom(s) ? oom(r, body->line) : s;
}

/* Whether keyword argument k names a parameter that no positional argument
 * filled: otherwise it is an extra one (jinja2 files a parameter already
 * given by position under kwargs too). */
static bool names_open_param(const jnode *def, const jinja_args *args, size_t k) {
    for (size_t p = args->n_pos; p < def->n_names; p++)
        if (strcmp(def->names[p], args->kw_names[k]) == 0) return true;
    return false;
}

/* Bind parameters (names, defaults in list) of a macro or caller. Extra
 * positional arguments go to varargs (a tuple) and extra keywords to kwargs
 * (a dict) when the body reads them, and are an error otherwise, as jinja2
 * has it. */
static bool bind_params(jinja_render *r, int line, jframe *mf, const jnode *def, const jinja_args *args,
                        const char *what) {
    if (args->n_pos > def->n_names && !def->uses_varargs)
        return jinja_fail(r, line, "%s takes at most %zu arguments (%zu given)", what, def->n_names, args->n_pos),
               false;
    jv kwargs = jv_dict_new(), varargs = jv_list_new();
    if (jv_is_oom(kwargs) || jv_is_oom(varargs)) {
        jv_decref(kwargs);
        jv_decref(varargs);
        return oom(r, line), false;
    }
    varargs.u.l->tuple = true;
    bool ok = true;
    for (size_t k = 0; ok && k < args->n_kw; k++) {
        if (names_open_param(def, args, k)) continue;
        if (!def->uses_kwargs) {
            jv_decref(kwargs);
            jv_decref(varargs);
            return jinja_fail(r, line, "%s takes no argument named '%s'", what, args->kw_names[k]), false;
        }
        ok = jv_dict_set_cstr(kwargs, args->kw_names[k], jv_incref(args->kw[k]));
    }
    for (size_t i = def->n_names; ok && i < args->n_pos; i++) ok = jv_list_append(varargs, jv_incref(args->pos[i]));
    if (!ok) {
        jv_decref(kwargs);
        jv_decref(varargs);
        return oom(r, line), false;
    }
    for (size_t p = 0; p < def->n_names; p++) {
        const jv *given = jinja_arg(args, p, def->names[p]);
        jv v;
        if (given) v = jv_incref(*given);
        else if (p < def->n_list && def->list[p]) {
            v = eval(r, mf, def->list[p]);
            if (r->failed) {
                jv_decref(kwargs);
                jv_decref(varargs);
                return false;
            }
        } else v = jv_undefined(def->names[p]);
        if (!assign(r, line, mf, def->names[p], v)) {
            jv_decref(kwargs);
            jv_decref(varargs);
            return false;
        }
    }
    return assign(r, line, mf, "kwargs", kwargs) && assign(r, line, mf, "varargs", varargs);
}

jv jinja_call(jinja_render *r, int line, jv fn, const jinja_args *args) {
    if (fn.type == JV_UNDEFINED) return jinja_fail(r, line, "'%s' is undefined (called as a function)", undefined_what(fn));
    if (fn.type != JV_FUNC) return jinja_fail(r, line, "a %s is not callable", jv_type_name(fn));
    jv_func *f = fn.u.fn;
    if (f->kind == JF_BUILTIN) {
        jv caller = r->pending_caller;
        r->pending_caller = jv_undefined(NULL);
        jv_decref(caller);
        return f->builtin(r, line, f->bound, args);
    }
    if (r->depth >= VT_JINJA_MAX_DEPTH)
        return jinja_fail(r, line, "macro calls nested deeper than %d", VT_JINJA_MAX_DEPTH);
    /* a call costs work even when it writes nothing: a macro calling itself
     * twice, 40 deep, is 2^41 calls */
    if (!jinja_work(r, line, 1024)) return jv_undefined(NULL);
    if (f->kind == JF_CALLER && f->dead) return jinja_fail(r, line, "caller() used after its call block ended");
    jframe mf;
    jframe *parent = f->kind == JF_CALLER ? f->frame : r->globals;
    if (!frame_init(r, line, &mf, parent)) return jv_undefined(NULL);
    jv caller = r->pending_caller;
    r->pending_caller = jv_undefined(NULL);
    const jnode *def = f->macro;
    jv out = jv_undefined(NULL);
    r->depth++;
    char what[96];
    if (f->kind == JF_CALLER) snprintf(what, sizeof what, "caller()");
    else snprintf(what, sizeof what, "macro '%.80s'", def->name);
    bool ok = bind_params(r, line, &mf, def, args, what);
    if (ok && caller.type == JV_FUNC) {
        ok = assign(r, line, &mf, "caller", caller);
        caller = jv_undefined(NULL);
    }
    if (ok) out = capture(r, &mf, def->c);
    r->depth--;
    jv_decref(caller);
    jv_decref(mf.vars);
    return out;
}

static jv eval_call(jinja_render *r, jframe *f, const jnode *n) {
    jv fn = eval(r, f, n->a);
    if (r->failed) return jv_undefined(NULL);
    eval_args ea;
    jv out = jv_undefined(NULL);
    jv caller = r->pending_caller; /* a call block's caller belongs to this call, not to its arguments */
    r->pending_caller = jv_undefined(NULL);
    if (eval_call_args(r, f, n, &ea)) {
        r->pending_caller = caller;
        caller = jv_undefined(NULL);
        out = jinja_call(r, n->line, fn, &ea.a);
    }
    jv_decref(caller);
    free_call_args(&ea);
    jv_decref(fn);
    return out;
}

static jv eval_filter(jinja_render *r, jframe *f, const jnode *n, jv input) {
    eval_args ea;
    jv out = jv_undefined(NULL);
    if (eval_call_args(r, f, n, &ea)) out = jinja_apply_filter(r, n->line, n->name, input, &ea.a);
    free_call_args(&ea);
    return out;
}

static jv eval_node(jinja_render *r, jframe *f, const jnode *n);

/* Every value an expression builds is counted as work (VT_JINJA_MAX_WORK):
 * a string or list no one else holds yet (one reference) was just made,
 * at a cost of its size; a name or a literal hands out one already held. */
static jv eval(jinja_render *r, jframe *f, const jnode *n) {
    jv v = eval_node(r, f, n);
    uint64_t built = 0;
    if (v.type == JV_STRING && v.u.s->refs == 1) built = v.u.s->len;
    if (v.type == JV_LIST && v.u.l->refs == 1) built = v.u.l->n * sizeof(jv);
    if ((built && !jinja_work(r, n->line, built)) || (jv_meter_spent() && !jinja_work(r, n->line, 0))) {
        jv_decref(v);
        return jv_undefined(NULL);
    }
    return v;
}

static jv eval_node(jinja_render *r, jframe *f, const jnode *n) {
    if (r->failed) return jv_undefined(NULL);
    jv a, b, out;
    switch (n->kind) {
    case JE_LITERAL: return jv_incref(n->value);
    case JE_NAME: {
        const jv *v = lookup(f, n->name);
        return v ? jv_incref(*v) : jv_undefined(n->name);
    }
    case JE_LIST: {
        out = jv_list_new();
        if (jv_is_oom(out)) return oom(r, n->line);
        out.u.l->tuple = n->negate;
        for (size_t i = 0; i < n->n_list; i++) {
            jv v = eval(r, f, n->list[i]);
            if (r->failed || !jv_list_append(out, v)) {
                jv_decref(out);
                return r->failed ? jv_undefined(NULL) : oom(r, n->line);
            }
        }
        return out;
    }
    case JE_DICT: {
        out = jv_dict_new();
        if (jv_is_oom(out)) return oom(r, n->line);
        for (size_t i = 0; i < n->n_list; i++) {
            jv k = eval(r, f, n->list[i]);
            jv v = eval(r, f, n->list2[i]);
            if (!r->failed && (k.type == JV_LIST || k.type == JV_DICT || k.type == JV_UNDEFINED))
                jinja_fail(r, n->line, "a %s cannot be a dict key", jv_type_name(k));
            if (r->failed || !jv_dict_set(out, k, v)) {
                if (r->failed) {
                    jv_decref(k);
                    jv_decref(v);
                }
                jv_decref(out);
                return r->failed ? jv_undefined(NULL) : oom(r, n->line);
            }
        }
        return out;
    }
    case JE_ATTR:
        a = eval(r, f, n->a);
        if (r->failed) return jv_undefined(NULL);
        out = jinja_getattr(r, n->line, a, n->name);
        jv_decref(a);
        return out;
    case JE_ITEM:
        a = eval(r, f, n->a);
        b = eval(r, f, n->b);
        out = r->failed ? jv_undefined(NULL) : jinja_getitem(r, n->line, a, b);
        jv_decref(a);
        jv_decref(b);
        return out;
    case JE_SLICE: {
        jv parts[3] = {jv_undefined(NULL), jv_undefined(NULL), jv_undefined(NULL)};
        a = eval(r, f, n->a);
        if (n->b) parts[0] = eval(r, f, n->b);
        if (n->c) parts[1] = eval(r, f, n->c);
        if (n->d) parts[2] = eval(r, f, n->d);
        out = r->failed ? jv_undefined(NULL) : eval_slice(r, n->line, a, parts);
        jv_decref(a);
        for (int k = 0; k < 3; k++) jv_decref(parts[k]);
        return out;
    }
    case JE_CALL: return eval_call(r, f, n);
    case JE_FILTER:
        a = eval(r, f, n->a);
        if (r->failed) return jv_undefined(NULL);
        out = eval_filter(r, f, n, a);
        jv_decref(a);
        return out;
    case JE_TEST: {
        if (!jinja_test_exists(n->name)) return jinja_fail(r, n->line, "unknown test '%s'", n->name);
        a = eval(r, f, n->a);
        eval_args ea;
        memset(&ea, 0, sizeof ea); /* freed below even when the input failed */
        int t = -1;
        if (!r->failed && eval_call_args(r, f, n, &ea)) t = jinja_apply_test(r, n->line, n->name, a, &ea.a);
        free_call_args(&ea);
        jv_decref(a);
        if (t < 0) return jv_undefined(NULL);
        return jv_bool(n->negate ? !t : t);
    }
    case JE_UNARY:
        a = eval(r, f, n->a);
        if (r->failed) return jv_undefined(NULL);
        if (n->op == JOP_NOT) out = jv_bool(!jv_truthy(a));
        else if (a.type == JV_INT) {
            if (n->op == JOP_NEG && a.u.i == INT64_MIN) out = jinja_fail(r, n->line, "integer overflow");
            else out = jv_int(n->op == JOP_NEG ? -a.u.i : a.u.i);
        } else if (a.type == JV_BOOL) out = jv_int(n->op == JOP_NEG ? -(int64_t)a.u.b : a.u.b);
        else if (a.type == JV_FLOAT) out = jv_float(n->op == JOP_NEG ? -a.u.f : a.u.f);
        else out = jinja_fail(r, n->line, "bad operand type for unary %c: %s", n->op == JOP_NEG ? '-' : '+', jv_type_name(a));
        jv_decref(a);
        return out;
    case JE_BINARY:
        a = eval(r, f, n->a);
        if (r->failed) return jv_undefined(NULL);
        if (n->op == JOP_AND || n->op == JOP_OR) {
            bool t = jv_truthy(a);
            if ((n->op == JOP_AND) != t) return a; /* short circuit: the deciding operand itself */
            jv_decref(a);
            return eval(r, f, n->b);
        }
        b = eval(r, f, n->b);
        out = r->failed ? jv_undefined(NULL) : binary_op(r, n->line, n->op, a, b);
        jv_decref(a);
        jv_decref(b);
        return out;
    case JE_COND:
        a = eval(r, f, n->a);
        if (r->failed) return jv_undefined(NULL);
        {
            bool t = jv_truthy(a);
            jv_decref(a);
            if (t) return eval(r, f, n->b);
            return n->c ? eval(r, f, n->c) : jv_undefined(NULL);
        }
    default: return jinja_fail(r, n->line, "internal: not an expression");
    }
}

/* ---- statements ---- */

static bool emit(jinja_render *r, int line, jv v) {
    jv_write_str(r->out, v);
    if (r->out->failed) {
        jinja_fail(r, line, "output larger than %u bytes (or out of memory)", VT_JINJA_MAX_OUTPUT);
        return false;
    }
    return true;
}

jv jinja_to_list(jinja_render *r, int line, jv v) {
    jv out;
    switch (v.type) {
    case JV_LIST: return jv_incref(v);
    case JV_UNDEFINED: out = jv_list_new(); break;
    case JV_DICT:
    case JV_NAMESPACE:
        out = jv_list_new();
        if (jv_is_oom(out)) return oom(r, line);
        for (size_t i = 0; i < v.u.d->n; i++)
            if (!jv_list_append(out, jv_incref(v.u.d->e[i].key))) return jv_decref(out), oom(r, line);
        return out;
    case JV_STRING: {
        out = jv_list_new();
        if (jv_is_oom(out)) return oom(r, line);
        const char *s = v.u.s->data;
        size_t len = v.u.s->len;
        if (jv_utf8_count(s, len) > VT_JINJA_MAX_ITERATIONS)
            return jinja_fail(r, line, "a string of more than %u characters made a list", VT_JINJA_MAX_ITERATIONS);
        if (!jinja_work(r, line, len + jv_utf8_count(s, len) * sizeof(jv))) return jv_undefined(NULL);
        for (size_t i = 0; i < len;) {
            size_t j = i + 1;
            while (j < len && ((unsigned char)s[j] & 0xC0) == 0x80) j++;
            jv c = jv_string(s + i, j - i);
            if (jv_is_oom(c) || !jv_list_append(out, c)) return jv_decref(out), oom(r, line);
            i = j;
        }
        return out;
    }
    default: return jinja_fail(r, line, "a %s is not iterable", jv_type_name(v));
    }
    return jv_is_oom(out) ? oom(r, line) : out;
}

static bool bind_targets(jinja_render *r, int line, jframe *f, char *const *names, size_t n, jv item) {
    if (n == 1) return assign(r, line, f, names[0], jv_incref(item));
    jv items = item.type == JV_LIST ? jv_incref(item) : jinja_to_list(r, line, item);
    if (r->failed) return false;
    if (items.u.l->n != n) {
        const size_t got = items.u.l->n; /* read before the list may be freed */
        jv_decref(items);
        jinja_fail(r, line, "cannot unpack %zu values into %zu names", got, n);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (!assign(r, line, f, names[i], jv_incref(items.u.l->items[i]))) {
            jv_decref(items);
            return false;
        }
    jv_decref(items);
    return true;
}

static bool set_loop_vars(jinja_render *r, int line, jframe *lf, jv items, size_t i) {
    size_t n = items.u.l->n;
    jv loop = jv_dict_new();
    if (jv_is_oom(loop)) return oom(r, line), false;
    bool ok = jv_dict_set_cstr(loop, "index", jv_int((int64_t)i + 1)) && jv_dict_set_cstr(loop, "index0", jv_int((int64_t)i)) &&
              jv_dict_set_cstr(loop, "revindex", jv_int((int64_t)(n - i))) &&
              jv_dict_set_cstr(loop, "revindex0", jv_int((int64_t)(n - i - 1))) &&
              jv_dict_set_cstr(loop, "first", jv_bool(i == 0)) && jv_dict_set_cstr(loop, "last", jv_bool(i + 1 == n)) &&
              jv_dict_set_cstr(loop, "length", jv_int((int64_t)n)) && jv_dict_set_cstr(loop, "depth", jv_int(1)) &&
              jv_dict_set_cstr(loop, "depth0", jv_int(0)) &&
              jv_dict_set_cstr(loop, "previtem", i > 0 ? jv_incref(items.u.l->items[i - 1]) : jv_undefined("previtem")) &&
              jv_dict_set_cstr(loop, "nextitem", i + 1 < n ? jv_incref(items.u.l->items[i + 1]) : jv_undefined("nextitem"));
    if (!ok) {
        jv_decref(loop);
        return oom(r, line), false;
    }
    return assign(r, line, lf, "loop", loop);
}

static bool exec_for(jinja_render *r, jframe *f, const jnode *n) {
    jv src = eval(r, f, n->a);
    if (r->failed) return false;
    if (src.type == JV_NONE) {
        jinja_fail(r, n->line, "'NoneType' object is not iterable");
        return false;
    }
    jv items = jinja_to_list(r, n->line, src);
    jv_decref(src);
    if (r->failed) return false;
    jframe lf;
    if (!frame_init(r, n->line, &lf, f)) {
        jv_decref(items);
        return false;
    }
    /* The loop filter runs before the loop, so loop.length and loop.last
     * count only the items it keeps. Copy: the body may change the list. */
    jv kept = jv_list_new();
    bool ok = !jv_is_oom(kept);
    if (!ok) oom(r, n->line);
    for (size_t i = 0; ok && i < items.u.l->n; i++) {
        if (++r->iterations > VT_JINJA_MAX_ITERATIONS) {
            jinja_fail(r, n->line, "more than %u loop iterations", VT_JINJA_MAX_ITERATIONS);
            ok = false;
            break;
        }
        jv item = items.u.l->items[i];
        if (n->b) {
            ok = bind_targets(r, n->line, &lf, n->names, n->n_names, item);
            if (!ok) break;
            jv c = eval(r, &lf, n->b);
            if (r->failed) {
                ok = false;
                break;
            }
            bool keep = jv_truthy(c);
            jv_decref(c);
            if (!keep) continue;
        }
        if (!jv_list_append(kept, jv_incref(item))) {
            oom(r, n->line);
            ok = false;
        }
    }
    jv_decref(items);
    for (size_t i = 0; ok && i < kept.u.l->n; i++) {
        if (++r->iterations > VT_JINJA_MAX_ITERATIONS) {
            jinja_fail(r, n->line, "more than %u loop iterations", VT_JINJA_MAX_ITERATIONS);
            ok = false;
            break;
        }
        /* Each iteration starts with the names of the loop alone: a set in
         * the body lasts until the iteration ends, as in jinja2 (only a
         * namespace() carries a value across iterations). */
        if (i > 0) {
            jv fresh = jv_dict_new();
            if (jv_is_oom(fresh)) {
                oom(r, n->line);
                ok = false;
                break;
            }
            jv_decref(lf.vars);
            lf.vars = fresh;
        }
        ok = bind_targets(r, n->line, &lf, n->names, n->n_names, kept.u.l->items[i]) &&
             set_loop_vars(r, n->line, &lf, kept, i) && exec_body(r, &lf, n->c);
        if (r->break_state == 1) {
            r->break_state = 0;
            break;
        }
        r->break_state = 0;
    }
    bool empty = ok && !jv_is_oom(kept) && kept.u.l->n == 0;
    if (!jv_is_oom(kept)) jv_decref(kept);
    jv_decref(lf.vars);
    if (ok && empty && n->d) ok = exec_body(r, f, n->d);
    return ok;
}

static bool apply_filters(jinja_render *r, jframe *f, const jnode *n, jv *v) {
    for (size_t i = 0; i < n->n_list; i++) {
        jv next = eval_filter(r, f, n->list[i], *v);
        jv_decref(*v);
        *v = next;
        if (r->failed) return false;
    }
    return true;
}

static bool exec_stmt(jinja_render *r, jframe *f, const jnode *n) {
    jv v;
    switch (n->kind) {
    case JN_BODY: return exec_body(r, f, n);
    case JN_TEXT: return emit(r, n->line, n->value);
    case JN_OUTPUT:
        v = eval(r, f, n->a);
        if (r->failed) return false;
        {
            bool ok = emit(r, n->line, v);
            jv_decref(v);
            return ok;
        }
    case JN_IF:
        v = eval(r, f, n->a);
        if (r->failed) return false;
        {
            bool t = jv_truthy(v);
            jv_decref(v);
            if (t) return exec_body(r, f, n->b);
            return n->c ? exec_stmt(r, f, n->c) : true;
        }
    case JN_FOR: return exec_for(r, f, n);
    case JN_SET:
        v = eval(r, f, n->a);
        if (r->failed) return false;
        if (n->attr) {
            const jv *ns = lookup(f, n->name);
            if (!ns || ns->type != JV_NAMESPACE) {
                jv_decref(v);
                jinja_fail(r, n->line, "cannot assign attribute '%s' of '%s': not a namespace()", n->attr, n->name);
                return false;
            }
            const char *why = jv_holds(v, *ns);
            if (why) {
                jv_decref(v);
                jinja_fail(r, n->line, "cannot assign attribute '%s' of '%s': a namespace %s", n->attr, n->name, why);
                return false;
            }
            if (!jv_dict_set_cstr(*ns, n->attr, v)) return oom(r, n->line), false;
            return true;
        }
        {
            bool ok = bind_targets(r, n->line, f, n->names, n->n_names, v);
            jv_decref(v);
            return ok;
        }
    case JN_SET_BLOCK:
        v = capture(r, f, n->c);
        if (r->failed || !apply_filters(r, f, n, &v)) return false;
        return assign(r, n->line, f, n->name, v);
    case JN_FILTER_BLOCK:
        v = capture(r, f, n->c);
        if (r->failed || !apply_filters(r, f, n, &v)) return false;
        {
            bool ok = emit(r, n->line, v);
            jv_decref(v);
            return ok;
        }
    case JN_MACRO:
        v = jinja_func_new(JF_MACRO, n->name);
        if (jv_is_oom(v)) return oom(r, n->line), false;
        v.u.fn->macro = n;
        return assign(r, n->line, f, n->name, v);
    case JN_CALL_BLOCK: {
        jv caller = jinja_func_new(JF_CALLER, "caller");
        if (jv_is_oom(caller)) return oom(r, n->line), false;
        caller.u.fn->macro = n;
        caller.u.fn->frame = f;
        jv_decref(r->pending_caller);
        r->pending_caller = jv_incref(caller);
        v = eval_call(r, f, n->a);
        caller.u.fn->dead = true;
        jv_decref(caller);
        jv_decref(r->pending_caller);
        r->pending_caller = jv_undefined(NULL);
        if (r->failed) return false;
        bool ok = emit(r, n->line, v);
        jv_decref(v);
        return ok;
    }
    case JN_BREAK: r->break_state = 1; return true;
    case JN_CONTINUE: r->break_state = 2; return true;
    default: jinja_fail(r, n->line, "internal: not a statement"); return false;
    }
}

static bool exec_body(jinja_render *r, jframe *f, const jnode *n) {
    if (n->kind != JN_BODY) return exec_stmt(r, f, n);
    if (r->depth >= VT_JINJA_MAX_DEPTH * 2) {
        jinja_fail(r, n->line, "statements nested deeper than %d", VT_JINJA_MAX_DEPTH * 2);
        return false;
    }
    r->depth++;
    bool ok = true;
    for (size_t i = 0; ok && i < n->n_list && !r->break_state; i++) {
        ok = exec_stmt(r, f, n->list[i]);
        /* a statement's own writing (its output, a loop's body) ticks too */
        if (ok && jv_meter_spent()) ok = jinja_work(r, n->list[i]->line, 0);
    }
    r->depth--;
    return ok && !r->failed;
}

static bool render_locked(const vt_jinja_template *t, jv ctx, char **out, size_t *out_len, char *err,
                          size_t err_size);

bool vt_jinja_render(const vt_jinja_template *t, jv ctx, char **out, size_t *out_len, char *err, size_t err_size) {
    pthread_mutex_t *lock = (pthread_mutex_t *)&t->render_lock; /* the template's only mutable part */
    pthread_mutex_lock(lock);
    jv_meter_start(VT_JINJA_MAX_WORK);
    const bool ok = render_locked(t, ctx, out, out_len, err, err_size);
    jv_meter_start(0);
    /* released under the lock too: a template may have stored its own
     * values into ctx's lists ({% set _ = messages.append('x') %}), and the
     * last reference to such a value goes with ctx */
    jv_decref(ctx);
    pthread_mutex_unlock(lock);
    return ok;
}

static bool render_locked(const vt_jinja_template *t, jv ctx, char **out, size_t *out_len, char *err,
                          size_t err_size) {
    *out = NULL;
    if (out_len) *out_len = 0;
    vt_text_buf buf = {.limit = VT_JINJA_MAX_OUTPUT};
    jinja_render r = {.out = &buf, .err = err, .err_size = err_size, .pending_caller = jv_undefined(NULL)};
    jframe globals, top;
    if (!frame_init(&r, 1, &globals, NULL)) return false;
    bool ok = jinja_add_globals(globals.vars);
    if (!ok) jinja_fail(&r, 1, "out of memory");
    if (ok && (ctx.type == JV_DICT || ctx.type == JV_NAMESPACE))
        for (size_t i = 0; ok && i < ctx.u.d->n; i++)
            ok = jv_dict_set(globals.vars, jv_incref(ctx.u.d->e[i].key), jv_incref(ctx.u.d->e[i].value));
    if (!ok) jinja_fail(&r, 1, "out of memory");
    /* Template-level sets go to a frame of their own above the context, as
     * jinja2 keeps them apart from the render's variables. */
    if (ok && frame_init(&r, 1, &top, &globals)) {
        r.globals = &top;
        ok = exec_body(&r, &top, t->root);
        /* a template of one statement has no body loop to check after it:
         * output cut short by a spent meter is a failure, never a result */
        if (ok && jv_meter_spent()) ok = jinja_work(&r, t->root->line, 0);
        jv_decref(top.vars);
    } else ok = false;
    if (ok && r.break_state) ok = true; /* break outside a loop: jinja2 refuses it at parse time; ignore */
    jv_decref(r.pending_caller);
    jv_decref(globals.vars);
    if (!ok || r.failed) {
        free(buf.data);
        return false;
    }
    *out = buf.data ? buf.data : calloc(1, 1);
    if (!*out) {
        snprintf(err, err_size, "out of memory");
        return false;
    }
    if (out_len) *out_len = buf.len;
    return true;
}
