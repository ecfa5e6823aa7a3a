/* jinja_filters.c — the filters chat templates use, as jinja2 3.1 defines
 * them (tojson as transformers overrides it: jinja_json.c). An unknown
 * filter is an error naming it. */
#include "jinja_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef jv (*filter_fn)(jinja_render *r, int line, jv v, const jinja_args *a);

static jv oom(jinja_render *r, int line) { return jinja_fail(r, line, "out of memory"); }

static bool arg_bool(const jinja_args *a, size_t pos, const char *kw, bool def) {
    const jv *v = jinja_arg(a, pos, kw);
    return v ? jv_truthy(*v) : def;
}

static bool arg_int(jinja_render *r, int line, const jinja_args *a, size_t pos, const char *kw, int64_t def,
                    int64_t *out) {
    const jv *v = jinja_arg(a, pos, kw);
    *out = def;
    if (!v || v->type == JV_NONE) return true;
    if (v->type == JV_INT) *out = v->u.i;
    else if (v->type == JV_BOOL) *out = v->u.b;
    else return jinja_fail(r, line, "argument '%s' must be an integer, not %s", kw, jv_type_name(*v)), false;
    return true;
}

static const char *arg_str(jinja_render *r, int line, const jinja_args *a, size_t pos, const char *kw,
                           const char *def, size_t *len) {
    const jv *v = jinja_arg(a, pos, kw);
    if (!v || v->type == JV_NONE || v->type == JV_UNDEFINED) {
        if (len && def) *len = strlen(def);
        return def;
    }
    if (v->type != JV_STRING) {
        jinja_fail(r, line, "argument '%s' must be a string, not %s", kw, jv_type_name(*v));
        return NULL;
    }
    if (len) *len = v->u.s->len;
    return v->u.s->data;
}

static jv new_list(jinja_render *r, int line) {
    jv l = jv_list_new();
    return jv_is_oom(l) ? oom(r, line) : l;
}

/* ---- attribute paths ("name", "a.b", "0") as jinja2's make_attrgetter ---- */

static jv get_path(jinja_render *r, int line, jv item, const char *path) {
    jv cur = jv_incref(item);
    /* A missing attribute's undefined value borrows its key's text for
     * error messages, so each key lives until the next step has read cur,
     * and a result still undefined at the end gets a name that outlives
     * the keys. */
    jv prev_key = jv_none();
    const char *p = path;
    while (!r->failed) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        jv key;
        bool digits = n > 0;
        for (size_t i = 0; i < n; i++) digits &= isdigit((unsigned char)p[i]) != 0;
        if (digits && n < 18) key = jv_int(strtoll(p, NULL, 10));
        else key = jv_string(p, n);
        if (jv_is_oom(key)) {
            jv_decref(cur);
            jv_decref(prev_key);
            return oom(r, line);
        }
        jv next = jinja_getitem(r, line, cur, key);
        jv_decref(prev_key);
        prev_key = key;
        jv_decref(cur);
        cur = next;
        if (!dot) break;
        p = dot + 1;
    }
    if (cur.type == JV_UNDEFINED && !jv_is_oom(cur)) cur.undef_name = "attribute";
    jv_decref(prev_key);
    return cur;
}

/* ---- strings ---- */

static jv f_string(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    jv s = jv_to_string(v);
    return jv_is_oom(s) ? oom(r, line) : s;
}

static jv f_safe(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    if (v.type == JV_STRING && v.u.s->markup) return jv_incref(v);
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) return oom(r, line);
    jv out = jv_string(s.u.s->data, s.u.s->len);
    jv_decref(s);
    if (jv_is_oom(out)) return oom(r, line);
    out.u.s->markup = true;
    return out;
}

typedef enum { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_TITLE_FILTER } case_mode;

static jv change_case(jinja_render *r, int line, jv v, case_mode m) {
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) return oom(r, line);
    vt_text_buf b = {0};
    vt_text_put(&b, s.u.s->data, s.u.s->len);
    bool word_start = true;
    for (size_t i = 0; i < b.len; i++) {
        char c = b.data[i];
        bool up;
        switch (m) {
        case CASE_UPPER: up = true; break;
        case CASE_LOWER: up = false; break;
        case CASE_CAPITALIZE: up = i == 0; break;
        default: /* jinja2's title: a capital after each run of "-", whitespace, ( { [ < */
            up = word_start;
            word_start = c == '-' || jinja_is_py_space((unsigned char)c) || c == '(' || c == '{' || c == '[' || c == '<';
            if (((unsigned char)c & 0xC0) == 0x80) continue;
        }
        if (up && c >= 'a' && c <= 'z') b.data[i] = (char)(c - 32);
        if (!up && c >= 'A' && c <= 'Z') b.data[i] = (char)(c + 32);
    }
    jv_decref(s);
    return jinja_buf_string(r, line, &b);
}
static jv f_upper(jinja_render *r, int line, jv v, const jinja_args *a) { (void)a; return change_case(r, line, v, CASE_UPPER); }
static jv f_lower(jinja_render *r, int line, jv v, const jinja_args *a) { (void)a; return change_case(r, line, v, CASE_LOWER); }
static jv f_capitalize(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    return change_case(r, line, v, CASE_CAPITALIZE);
}
static jv f_title(jinja_render *r, int line, jv v, const jinja_args *a) { (void)a; return change_case(r, line, v, CASE_TITLE_FILTER); }

/* jinja2's format filter: value % args, positional arguments only. */
static jv f_format(jinja_render *r, int line, jv v, const jinja_args *a) {
    if (a->n_kw) return jinja_fail(r, line, "format: keyword arguments are not supported");
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) return oom(r, line);
    jv out = jinja_percent_format(r, line, s.u.s->data, s.u.s->len, a->pos, a->n_pos);
    jv_decref(s);
    return out;
}

static jv f_trim(jinja_render *r, int line, jv v, const jinja_args *a) {
    size_t clen = 0;
    const char *chars = arg_str(r, line, a, 0, "chars", NULL, &clen);
    if (r->failed) return jv_undefined(NULL);
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) return oom(r, line);
    size_t b = 0, e = s.u.s->len;
    const char *d = s.u.s->data;
    jinja_strip_span(d, &b, &e, chars, clen, true, true);
    jv out = jv_string(d + b, e - b);
    jv_decref(s);
    return jv_is_oom(out) ? oom(r, line) : out;
}

static jv f_replace(jinja_render *r, int line, jv v, const jinja_args *a) {
    size_t olen = 0, nlen = 0;
    const char *old = arg_str(r, line, a, 0, "old", NULL, &olen);
    const char *new = arg_str(r, line, a, 1, "new", NULL, &nlen);
    int64_t count;
    if (!old || !new) return r->failed ? jv_undefined(NULL) : jinja_fail(r, line, "replace needs old and new strings");
    if (!arg_int(r, line, a, 2, "count", -1, &count)) return jv_undefined(NULL);
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) return oom(r, line);
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT};
    const char *d = s.u.s->data;
    size_t len = s.u.s->len, i = 0;
    int64_t done = 0;
    if (olen == 0) { /* Python inserts new around every character */
        while (count < 0 || done < count) {
            vt_text_put(&b, new, nlen);
            done++;
            if (i >= len) break;
            size_t j = i + 1;
            while (j < len && ((unsigned char)d[j] & 0xC0) == 0x80) j++;
            vt_text_put(&b, d + i, j - i);
            i = j;
        }
        vt_text_put(&b, d + i, len - i);
    } else {
        for (int64_t at; (count < 0 || done < count) && (at = jinja_find(r, line, d, len, i, old, olen)) >= 0; done++) {
            vt_text_put(&b, d + i, (size_t)at - i);
            vt_text_put(&b, new, nlen);
            i = (size_t)at + olen;
        }
        vt_text_put(&b, d + i, len - i);
        if (r->failed) {
            free(b.data);
            jv_decref(s);
            return jv_undefined(NULL);
        }
    }
    jv_decref(s);
    return jinja_buf_string(r, line, &b);
}

static jv f_indent(jinja_render *r, int line, jv v, const jinja_args *a) {
    const jv *w = jinja_arg(a, 0, "width");
    bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
    vt_text_buf ind = {0};
    if (!w) vt_text_puts(&ind, "    ");
    else if (w->type == JV_STRING) vt_text_put(&ind, w->u.s->data, w->u.s->len);
    else if (w->type == JV_INT)
        for (int64_t i = 0; i < w->u.i && i < 4096; i++) vt_text_putc(&ind, ' ');
    else return jinja_fail(r, line, "indent: width must be an integer or a string");
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) {
        free(ind.data);
        return oom(r, line);
    }
    /* jinja2: s + "\n", split into lines, indent every line after the
     * first (blank ones only with blank=True), join with "\n". */
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT};
    const char *d = s.u.s->data;
    size_t len = s.u.s->len, i = 0;
    bool first_line = true;
    while (i < len) {
        size_t j = i;
        while (j < len && d[j] != '\n' && d[j] != '\r') j++;
        if (!first_line) vt_text_putc(&b, '\n');
        bool empty = j == i;
        if ((first_line && first) || (!first_line && (blank || !empty)))
            if (ind.len) vt_text_put(&b, ind.data, ind.len);
        vt_text_put(&b, d + i, j - i);
        first_line = false;
        if (j < len && d[j] == '\r' && j + 1 < len && d[j + 1] == '\n') j++;
        i = j + 1;
    }
    if (first_line && first && ind.len) vt_text_put(&b, ind.data, ind.len);
    free(ind.data);
    jv_decref(s);
    return jinja_buf_string(r, line, &b);
}

static jv f_wordcount(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) return oom(r, line);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < s.u.s->len; i++) {
        unsigned char c = (unsigned char)s.u.s->data[i];
        bool w = isalnum(c) || c == '_' || c >= 0x80;
        if (w && !in) n++;
        in = w;
    }
    jv_decref(s);
    return jv_int(n);
}

jv jinja_escape(jinja_render *r, int line, jv v) {
    if (v.type == JV_STRING && v.u.s->markup) return jv_incref(v);
    jv s = jv_to_string(v);
    if (jv_is_oom(s)) return oom(r, line);
    vt_text_buf b = {0};
    for (size_t i = 0; i < s.u.s->len; i++) {
        char c = s.u.s->data[i];
        switch (c) {
        case '&': vt_text_puts(&b, "&amp;"); break;
        case '<': vt_text_puts(&b, "&lt;"); break;
        case '>': vt_text_puts(&b, "&gt;"); break;
        case '"': vt_text_puts(&b, "&#34;"); break;
        case '\'': vt_text_puts(&b, "&#39;"); break;
        default: vt_text_putc(&b, c);
        }
    }
    jv_decref(s);
    jv out = jinja_buf_string(r, line, &b);
    if (out.type == JV_STRING) out.u.s->markup = true;
    return out;
}

static jv f_escape(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    return jinja_escape(r, line, v);
}

/* ---- numbers ---- */

/* strtod reads C's hexadecimal floats ("0x1A"), which Python's float() does
 * not: such a text is no number to the int and float filters. */
static bool hex_float(const char *s) { return strpbrk(s, "xX") != NULL; }

static jv f_int(jinja_render *r, int line, jv v, const jinja_args *a) {
    int64_t def;
    if (!arg_int(r, line, a, 0, "default", 0, &def)) return jv_undefined(NULL);
    switch (v.type) {
    case JV_INT: return v;
    case JV_BOOL: return jv_int(v.u.b);
    case JV_FLOAT:
        if (isnan(v.u.f) || fabs(v.u.f) >= 9.2e18) return jv_int(def);
        return jv_int((int64_t)v.u.f);
    case JV_STRING: {
        const char *s = v.u.s->data;
        char *end;
        long long i = strtoll(s, &end, 10);
        while (*end && jinja_is_py_space((unsigned char)*end)) end++;
        if (end != s && !*end) return jv_int(i);
        double f = strtod(s, &end);
        while (*end && jinja_is_py_space((unsigned char)*end)) end++;
        if (end != s && !*end && !hex_float(s) && isfinite(f) && fabs(f) < 9.2e18) return jv_int((int64_t)f);
        return jv_int(def);
    }
    default: return jv_int(def);
    }
}

static jv f_float(jinja_render *r, int line, jv v, const jinja_args *a) {
    const jv *d = jinja_arg(a, 0, "default");
    double def = d ? jv_as_double(*d) : 0.0;
    (void)r, (void)line;
    if (jv_is_number(v)) return jv_float(jv_as_double(v));
    if (v.type == JV_STRING) {
        char *end;
        double f = strtod(v.u.s->data, &end);
        while (*end && jinja_is_py_space((unsigned char)*end)) end++;
        if (end != v.u.s->data && !*end && !hex_float(v.u.s->data)) return jv_float(f);
    }
    return jv_float(def);
}

static jv f_abs(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    if (v.type == JV_INT) return v.u.i == INT64_MIN ? jinja_fail(r, line, "integer overflow") : jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    if (v.type == JV_BOOL) return jv_int(v.u.b);
    if (v.type == JV_FLOAT) return jv_float(fabs(v.u.f));
    return jinja_fail(r, line, "bad operand type for abs(): %s", jv_type_name(v));
}

static jv f_round(jinja_render *r, int line, jv v, const jinja_args *a) {
    int64_t prec;
    if (!arg_int(r, line, a, 0, "precision", 0, &prec)) return jv_undefined(NULL);
    size_t mlen;
    const char *method = arg_str(r, line, a, 1, "method", "common", &mlen);
    if (!method) return jv_undefined(NULL);
    if (!jv_is_number(v)) return jinja_fail(r, line, "round: a %s is not a number", jv_type_name(v));
    double x = jv_as_double(v), scale = pow(10.0, (double)prec);
    if (strcmp(method, "ceil") == 0) return jv_float(ceil(x * scale) / scale);
    if (strcmp(method, "floor") == 0) return jv_float(floor(x * scale) / scale);
    if (strcmp(method, "common") != 0) return jinja_fail(r, line, "round: method must be common, ceil or floor");
    if (v.type != JV_FLOAT) return v; /* round(int, n) is the int */
    if (prec <= 0 && prec > -20) return jv_float(nearbyint(x / pow(10.0, (double)-prec)) * pow(10.0, (double)-prec));
    /* Python rounds the exact binary value, as printf does. */
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", (int)(prec > 300 ? 300 : prec), x);
    return jv_float(strtod(buf, NULL));
}

/* ---- sequences ---- */

static jv f_length(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    switch (v.type) {
    case JV_STRING:
        if (!jinja_work(r, line, v.u.s->len)) return jv_undefined(NULL);
        return jv_int((int64_t)jv_utf8_count(v.u.s->data, v.u.s->len));
    case JV_LIST: return jv_int((int64_t)v.u.l->n);
    case JV_DICT:
    case JV_NAMESPACE: return jv_int((int64_t)v.u.d->n);
    case JV_UNDEFINED: return jv_int(0);
    default: return jinja_fail(r, line, "object of type %s has no len()", jv_type_name(v));
    }
}

static jv f_list(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    jv l = jinja_to_list(r, line, v);
    if (r->failed || v.type != JV_LIST) return l;
    /* list(x) is a copy */
    jv out = new_list(r, line);
    for (size_t i = 0; !r->failed && i < l.u.l->n; i++)
        if (!jv_list_append(out, jv_incref(l.u.l->items[i]))) oom(r, line);
    jv_decref(l);
    return out;
}

static jv f_items(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    if (v.type == JV_UNDEFINED) return new_list(r, line);
    if (v.type != JV_DICT && v.type != JV_NAMESPACE) return jinja_fail(r, line, "items: a %s is not a mapping", jv_type_name(v));
    jv out = new_list(r, line);
    for (size_t i = 0; !r->failed && i < v.u.d->n; i++) {
        jv pair = jv_list_new();
        if (!jv_is_oom(pair)) pair.u.l->tuple = true;
        if (jv_is_oom(pair) || !jv_list_append(pair, jv_incref(v.u.d->e[i].key)) ||
            !jv_list_append(pair, jv_incref(v.u.d->e[i].value)) || !jv_list_append(out, pair)) {
            if (!jv_is_oom(pair)) jv_decref(pair);
            oom(r, line);
        }
    }
    return out;
}

static jv f_first(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    jv out = l.u.l->n ? jv_incref(l.u.l->items[0]) : jv_undefined("first");
    jv_decref(l);
    return out;
}

static jv f_last(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    jv out = l.u.l->n ? jv_incref(l.u.l->items[l.u.l->n - 1]) : jv_undefined("last");
    jv_decref(l);
    return out;
}

static jv f_reverse(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)a;
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    if (v.type == JV_STRING) {
        vt_text_buf b = {0};
        for (size_t i = l.u.l->n; i-- > 0;) jv_write_str(&b, l.u.l->items[i]);
        jv_decref(l);
        return jinja_buf_string(r, line, &b);
    }
    jv out = new_list(r, line);
    for (size_t i = l.u.l->n; !r->failed && i-- > 0;)
        if (!jv_list_append(out, jv_incref(l.u.l->items[i]))) oom(r, line);
    jv_decref(l);
    return out;
}

static jv f_join(jinja_render *r, int line, jv v, const jinja_args *a) {
    size_t dlen;
    const char *d = arg_str(r, line, a, 0, "d", "", &dlen);
    const jv *attr = jinja_arg(a, 1, "attribute");
    if (!d) return jv_undefined(NULL);
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT};
    for (size_t i = 0; !r->failed && !jv_meter_spent() && i < l.u.l->n; i++) {
        if (i) vt_text_put(&b, d, dlen);
        if (attr && attr->type == JV_STRING) {
            jv x = get_path(r, line, l.u.l->items[i], attr->u.s->data);
            jv_write_str(&b, x);
            jv_decref(x);
        } else jv_write_str(&b, l.u.l->items[i]);
    }
    jv_decref(l);
    if (r->failed) {
        free(b.data);
        return jv_undefined(NULL);
    }
    return jinja_buf_string(r, line, &b);
}

static jv f_default(jinja_render *r, int line, jv v, const jinja_args *a) {
    (void)r, (void)line;
    const jv *d = jinja_arg(a, 0, "default_value");
    bool boolean = arg_bool(a, 1, "boolean", false);
    if (v.type == JV_UNDEFINED || (boolean && !jv_truthy(v))) {
        if (!d) return jv_cstring("");
        return jv_incref(*d);
    }
    return jv_incref(v);
}

/* select/reject/selectattr/rejectattr: keep the items whose (attribute's)
 * test result equals want; no test name means truthiness. */
static jv filter_items(jinja_render *r, int line, jv v, const jinja_args *a, bool by_attr, bool want) {
    size_t skip = by_attr ? 1 : 0;
    const char *attr = NULL;
    if (by_attr) {
        if (a->n_pos < 1 || a->pos[0].type != JV_STRING)
            return jinja_fail(r, line, "%s needs an attribute name", want ? "selectattr" : "rejectattr");
        attr = a->pos[0].u.s->data;
    }
    const char *test = NULL;
    if (a->n_pos > skip) {
        if (a->pos[skip].type != JV_STRING) return jinja_fail(r, line, "the test name must be a string");
        test = a->pos[skip].u.s->data;
        if (!jinja_test_exists(test)) return jinja_fail(r, line, "unknown test '%s'", test);
    }
    jinja_args targs = {.pos = a->pos + (test ? skip + 1 : skip), .n_pos = a->n_pos - (test ? skip + 1 : skip)};
    if (!jv_truthy(v)) return new_list(r, line); /* jinja2: "if seq:" (none selects nothing) */
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    jv out = new_list(r, line);
    for (size_t i = 0; !r->failed && !jv_meter_spent() && i < l.u.l->n; i++) {
        jv item = l.u.l->items[i];
        jv x = attr ? get_path(r, line, item, attr) : jv_incref(item);
        if (r->failed) break;
        int t = test ? jinja_apply_test(r, line, test, x, &targs) : jv_truthy(x);
        jv_decref(x);
        if (t < 0) break;
        if ((t == 1) == want && !jv_list_append(out, jv_incref(item))) oom(r, line);
    }
    jv_decref(l);
    if (r->failed) {
        jv_decref(out);
        return jv_undefined(NULL);
    }
    return out;
}
static jv f_select(jinja_render *r, int line, jv v, const jinja_args *a) { return filter_items(r, line, v, a, false, true); }
static jv f_reject(jinja_render *r, int line, jv v, const jinja_args *a) { return filter_items(r, line, v, a, false, false); }
static jv f_selectattr(jinja_render *r, int line, jv v, const jinja_args *a) { return filter_items(r, line, v, a, true, true); }
static jv f_rejectattr(jinja_render *r, int line, jv v, const jinja_args *a) { return filter_items(r, line, v, a, true, false); }

static jv f_map(jinja_render *r, int line, jv v, const jinja_args *a) {
    const jv *attr = jinja_arg(a, a->n_pos, "attribute");
    const jv *def = jinja_arg(a, a->n_pos, "default");
    const char *filter = NULL;
    if (!attr) {
        if (a->n_pos < 1 || a->pos[0].type != JV_STRING) return jinja_fail(r, line, "map needs a filter name or attribute=");
        filter = a->pos[0].u.s->data;
    } else if (attr->type != JV_STRING) return jinja_fail(r, line, "map: attribute must be a string");
    jinja_args fargs = {.pos = a->pos + 1, .n_pos = a->n_pos ? a->n_pos - 1 : 0, .kw_names = a->kw_names, .kw = a->kw,
                        .n_kw = a->n_kw};
    if (!jv_truthy(v)) return new_list(r, line); /* jinja2: "if value:" */
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    jv out = new_list(r, line);
    for (size_t i = 0; !r->failed && !jv_meter_spent() && i < l.u.l->n; i++) {
        jv x;
        if (filter) x = jinja_apply_filter(r, line, filter, l.u.l->items[i], &fargs);
        else {
            x = get_path(r, line, l.u.l->items[i], attr->u.s->data);
            if (x.type == JV_UNDEFINED && def) x = jv_incref(*def);
        }
        if (r->failed) break;
        if (!jv_list_append(out, x)) oom(r, line);
    }
    jv_decref(l);
    if (r->failed) {
        jv_decref(out);
        return jv_undefined(NULL);
    }
    return out;
}

static jv lowered(jv v) {
    if (v.type != JV_STRING) return jv_incref(v);
    /* a copy per item; past the meter none (the render fails on it) */
    if (!jv_meter_tick(v.u.s->len)) return jv_incref(v);
    jv s = jv_string(v.u.s->data, v.u.s->len);
    if (jv_is_oom(s)) return s;
    for (size_t i = 0; i < s.u.s->len; i++)
        if (s.u.s->data[i] >= 'A' && s.u.s->data[i] <= 'Z') s.u.s->data[i] = (char)(s.u.s->data[i] + 32);
    return s;
}

static jv f_unique(jinja_render *r, int line, jv v, const jinja_args *a) {
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    const jv *attr = jinja_arg(a, 1, "attribute");
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    jv out = new_list(r, line), seen = new_list(r, line);
    for (size_t i = 0; !r->failed && !jv_meter_spent() && i < l.u.l->n; i++) {
        jv item = l.u.l->items[i];
        jv key = attr && attr->type == JV_STRING ? get_path(r, line, item, attr->u.s->data) : jv_incref(item);
        jv k = cs ? jv_incref(key) : lowered(key);
        jv_decref(key);
        bool dup = false;
        for (size_t j = 0; j < seen.u.l->n && !dup && !jv_meter_spent(); j++) dup = jv_equal(seen.u.l->items[j], k);
        if (dup) jv_decref(k);
        else if (!jv_list_append(seen, k) || !jv_list_append(out, jv_incref(item))) oom(r, line);
    }
    jv_decref(l);
    jv_decref(seen);
    return out;
}

typedef struct sort_item {
    jv key, item;
} sort_item;

/* A stable merge sort with Python's ordering; the first comparison error
 * stops it (recorded in r). */
static void merge_sort(jinja_render *r, int line, sort_item *x, sort_item *tmp, size_t n, bool reverse) {
    if (n < 2 || r->failed) return;
    size_t h = n / 2;
    merge_sort(r, line, x, tmp, h, reverse);
    merge_sort(r, line, x + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        bool ok;
        int c = jinja_compare(r, line, x[j].key, x[i].key, &ok);
        if (!ok) return;
        bool take_right = reverse ? c > 0 : c < 0;
        tmp[k++] = take_right ? x[j++] : x[i++];
    }
    while (i < h) tmp[k++] = x[i++];
    while (j < n) tmp[k++] = x[j++];
    memcpy(x, tmp, n * sizeof *x);
}

static jv sorted(jinja_render *r, int line, jv l, bool reverse, bool cs, const char *attr, int pair_index) {
    size_t n = l.u.l->n;
    sort_item *x = calloc(n ? n : 1, sizeof *x), *tmp = calloc(n ? n : 1, sizeof *tmp);
    jv out = jv_undefined(NULL);
    if (!x || !tmp) {
        free(x);
        free(tmp);
        return oom(r, line);
    }
    for (size_t i = 0; i < n; i++) {
        jv item = l.u.l->items[i];
        jv k = attr ? get_path(r, line, item, attr)
               : pair_index >= 0 && item.type == JV_LIST && item.u.l->n == 2 ? jv_incref(item.u.l->items[pair_index])
                                                                            : jv_incref(item);
        x[i].key = cs ? jv_incref(k) : lowered(k);
        jv_decref(k);
        x[i].item = item;
    }
    merge_sort(r, line, x, tmp, n, reverse);
    if (!r->failed) {
        out = new_list(r, line);
        for (size_t i = 0; !r->failed && i < n; i++)
            if (!jv_list_append(out, jv_incref(x[i].item))) oom(r, line);
    }
    for (size_t i = 0; i < n; i++) jv_decref(x[i].key);
    free(x);
    free(tmp);
    return out;
}

static jv f_sort(jinja_render *r, int line, jv v, const jinja_args *a) {
    bool reverse = arg_bool(a, 0, "reverse", false), cs = arg_bool(a, 1, "case_sensitive", false);
    const char *attr = arg_str(r, line, a, 2, "attribute", NULL, NULL);
    if (r->failed) return jv_undefined(NULL);
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    jv out = sorted(r, line, l, reverse, cs, attr, -1);
    jv_decref(l);
    return out;
}

static jv f_dictsort(jinja_render *r, int line, jv v, const jinja_args *a) {
    bool cs = arg_bool(a, 0, "case_sensitive", false);
    size_t blen;
    const char *by = arg_str(r, line, a, 1, "by", "key", &blen);
    bool reverse = arg_bool(a, 2, "reverse", false);
    if (!by) return jv_undefined(NULL);
    if (strcmp(by, "key") != 0 && strcmp(by, "value") != 0) return jinja_fail(r, line, "dictsort: by must be 'key' or 'value'");
    jv items = f_items(r, line, v, &(jinja_args){0});
    if (r->failed) return jv_undefined(NULL);
    jv out = sorted(r, line, items, reverse, cs, NULL, by[0] == 'k' ? 0 : 1);
    jv_decref(items);
    return out;
}

static jv f_batch(jinja_render *r, int line, jv v, const jinja_args *a) {
    int64_t size;
    if (!arg_int(r, line, a, 0, "linecount", 1, &size)) return jv_undefined(NULL);
    if (size <= 0) return jinja_fail(r, line, "batch: linecount must be positive");
    const jv *fill = jinja_arg(a, 1, "fill_with");
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    jv out = new_list(r, line), cur = jv_undefined(NULL);
    for (size_t i = 0; !r->failed && !jv_meter_spent() && i < l.u.l->n; i++) {
        if (cur.type == JV_UNDEFINED) cur = new_list(r, line);
        if (r->failed || !jv_list_append(cur, jv_incref(l.u.l->items[i]))) break;
        if ((int64_t)cur.u.l->n == size) {
            if (!jv_list_append(out, cur)) oom(r, line);
            cur = jv_undefined(NULL);
        }
    }
    if (cur.type == JV_LIST) {
        while (fill && fill->type != JV_NONE && (int64_t)cur.u.l->n < size && !r->failed)
            if (!jv_list_append(cur, jv_incref(*fill))) oom(r, line);
        if (!jv_list_append(out, cur)) oom(r, line);
    }
    jv_decref(l);
    return out;
}

static jv fold(jinja_render *r, int line, jv v, const jinja_args *a, int kind) {
    jv l = jinja_to_list(r, line, v);
    if (r->failed) return jv_undefined(NULL);
    const char *attr = arg_str(r, line, a, kind == 2 ? 0 : 1, "attribute", NULL, NULL);
    jv acc = kind == 2 ? jv_incref(jinja_arg(a, 1, "start") ? *jinja_arg(a, 1, "start") : jv_int(0)) : jv_undefined("empty sequence");
    for (size_t i = 0; !r->failed && i < l.u.l->n && jinja_work(r, line, JV_METER_ITEM); i++) {
        jv x = attr ? get_path(r, line, l.u.l->items[i], attr) : jv_incref(l.u.l->items[i]);
        if (kind == 2) {
            jv s;
            if (jv_is_number(acc) && jv_is_number(x))
                s = acc.type == JV_FLOAT || x.type == JV_FLOAT ? jv_float(jv_as_double(acc) + jv_as_double(x))
                                                               : jv_int(acc.u.i + x.u.i);
            else s = jinja_fail(r, line, "sum: unsupported types %s and %s", jv_type_name(acc), jv_type_name(x));
            jv_decref(acc);
            jv_decref(x);
            acc = s;
        } else if (i == 0) {
            acc = x;
        } else {
            bool ok;
            int c = jinja_compare(r, line, x, acc, &ok);
            if (ok && (kind == 0 ? c < 0 : c > 0)) {
                jv_decref(acc);
                acc = x;
            } else jv_decref(x);
        }
    }
    jv_decref(l);
    return acc;
}
static jv f_min(jinja_render *r, int line, jv v, const jinja_args *a) { return fold(r, line, v, a, 0); }
static jv f_max(jinja_render *r, int line, jv v, const jinja_args *a) { return fold(r, line, v, a, 1); }
static jv f_sum(jinja_render *r, int line, jv v, const jinja_args *a) { return fold(r, line, v, a, 2); }

static jv f_attr(jinja_render *r, int line, jv v, const jinja_args *a) {
    const char *name = arg_str(r, line, a, 0, "name", NULL, NULL);
    if (!name) return r->failed ? jv_undefined(NULL) : jinja_fail(r, line, "attr needs a name");
    return jinja_getattr(r, line, v, name);
}

static jv f_tojson(jinja_render *r, int line, jv v, const jinja_args *a) {
    jinja_json_opts o = {.ensure_ascii = arg_bool(a, 1, "ensure_ascii", false),
                         .sort_keys = arg_bool(a, 4, "sort_keys", false)};
    char spaces[64];
    const jv *ind = jinja_arg(a, 0, "indent");
    if (ind && ind->type == JV_INT) {
        int64_t n = ind->u.i < 0 ? 0 : ind->u.i > 63 ? 63 : ind->u.i;
        memset(spaces, ' ', (size_t)n);
        spaces[n] = 0;
        o.indent = spaces;
    } else if (ind && ind->type == JV_STRING) o.indent = ind->u.s->data;
    else if (ind && ind->type != JV_NONE) return jinja_fail(r, line, "tojson: indent must be an integer or a string");
    o.item_sep = o.indent ? "," : ", ";
    o.key_sep = ": ";
    const jv *sep = jinja_arg(a, 2, "separators");
    if (sep && sep->type != JV_NONE) {
        if (sep->type != JV_LIST || sep->u.l->n != 2 || sep->u.l->items[0].type != JV_STRING ||
            sep->u.l->items[1].type != JV_STRING)
            return jinja_fail(r, line, "tojson: separators must be a pair of strings");
        o.item_sep = sep->u.l->items[0].u.s->data;
        o.key_sep = sep->u.l->items[1].u.s->data;
    }
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT};
    if (!jinja_tojson(r, line, v, &o, &b)) {
        free(b.data);
        return jv_undefined(NULL);
    }
    return jinja_buf_string(r, line, &b);
}

static const struct {
    const char *name;
    filter_fn fn;
} filters[] = {
    {"tojson", f_tojson},       {"trim", f_trim},           {"format", f_format},           {"length", f_length},     {"count", f_length},
    {"items", f_items},         {"upper", f_upper},         {"lower", f_lower},       {"capitalize", f_capitalize},
    {"title", f_title},         {"replace", f_replace},     {"join", f_join},         {"first", f_first},
    {"last", f_last},           {"default", f_default},     {"d", f_default},         {"map", f_map},
    {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"select", f_select}, {"reject", f_reject},
    {"list", f_list},           {"string", f_string},       {"int", f_int},           {"float", f_float},
    {"abs", f_abs},             {"round", f_round},         {"safe", f_safe},         {"unique", f_unique},
    {"reverse", f_reverse},     {"sort", f_sort},           {"indent", f_indent},     {"dictsort", f_dictsort},
    {"batch", f_batch},         {"wordcount", f_wordcount}, {"min", f_min},           {"max", f_max},
    {"sum", f_sum},             {"attr", f_attr},           {"escape", f_escape},     {"e", f_escape},
};

jv jinja_apply_filter(jinja_render *r, int line, const char *name, jv input, const jinja_args *args) {
    for (size_t i = 0; i < sizeof filters / sizeof *filters; i++)
        if (strcmp(filters[i].name, name) == 0) {
            /* a fresh string or list is work however the filter was reached
             * (map, select and methods call filters without eval) */
            jv v = filters[i].fn(r, line, input, args);
            const uint64_t built = v.type == JV_STRING && v.u.s->refs == 1 ? v.u.s->len
                                   : v.type == JV_LIST && v.u.l->refs == 1 ? v.u.l->n * sizeof(jv)
                                                                           : 0;
            if (built && !jinja_work(r, line, built)) {
                jv_decref(v);
                return jv_undefined(NULL);
            }
            return v;
        }
    return jinja_fail(r, line, "unknown filter '%s'", name);
}
