/* jinja_globals.c — the functions every template sees: jinja2's range,
 * namespace, dict, and what transformers adds: raise_exception(message)
 * (the render fails with that message) and strftime_now(format) (the local
 * time, as datetime.now().strftime does). */
#include "jinja_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static jv g_range(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)self;
    int64_t v[3] = {0, 0, 1};
    if (a->n_pos < 1 || a->n_pos > 3) return jinja_fail(r, line, "range() takes 1 to 3 integers");
    for (size_t i = 0; i < a->n_pos; i++) {
        if (a->pos[i].type != JV_INT && a->pos[i].type != JV_BOOL) return jinja_fail(r, line, "range() takes integers");
        v[a->n_pos == 1 ? 1 : i] = a->pos[i].type == JV_BOOL ? a->pos[i].u.b : a->pos[i].u.i;
    }
    if (v[2] == 0) return jinja_fail(r, line, "range() step must not be zero");
    jv out = jv_list_new();
    if (jv_is_oom(out)) return jinja_fail(r, line, "out of memory");
    uint64_t count = 0;
    for (int64_t x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) {
        if (++count > VT_JINJA_MAX_ITERATIONS) {
            jv_decref(out);
            return jinja_fail(r, line, "range() of more than %u items", VT_JINJA_MAX_ITERATIONS);
        }
        if (!jv_list_append(out, jv_int(x))) {
            jv_decref(out);
            return jinja_fail(r, line, "out of memory");
        }
        if ((v[2] > 0 && x > INT64_MAX - v[2]) || (v[2] < 0 && x < INT64_MIN - v[2])) break;
    }
    return out;
}

static jv from_kwargs(jinja_render *r, int line, const jinja_args *a, jv out, const char *what) {
    if (jv_is_oom(out)) return jinja_fail(r, line, "out of memory");
    for (size_t i = 0; i < a->n_pos; i++) {
        if (a->pos[i].type != JV_DICT && a->pos[i].type != JV_NAMESPACE) {
            jv_decref(out);
            return jinja_fail(r, line, "%s() takes a mapping and keyword arguments", what);
        }
        for (size_t k = 0; k < a->pos[i].u.d->n; k++)
            if (!jv_dict_set(out, jv_incref(a->pos[i].u.d->e[k].key), jv_incref(a->pos[i].u.d->e[k].value))) {
                jv_decref(out);
                return jinja_fail(r, line, "out of memory");
            }
    }
    for (size_t i = 0; i < a->n_kw; i++)
        if (!jv_dict_set_cstr(out, a->kw_names[i], jv_incref(a->kw[i]))) {
            jv_decref(out);
            return jinja_fail(r, line, "out of memory");
        }
    return out;
}

static jv g_namespace(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)self;
    return from_kwargs(r, line, a, jv_namespace_new(), "namespace");
}

static jv g_dict(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)self;
    return from_kwargs(r, line, a, jv_dict_new(), "dict");
}

static jv g_raise_exception(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)self;
    vt_text_buf b = {.limit = 300};
    if (a->n_pos > 0) jv_write_str(&b, a->pos[0]);
    jv out = jinja_fail(r, line, "the template raised: %s", b.data ? b.data : "");
    free(b.data);
    return out;
}

static jv g_strftime_now(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)self;
    if (a->n_pos != 1 || a->pos[0].type != JV_STRING) return jinja_fail(r, line, "strftime_now() takes a format string");
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm)) return jinja_fail(r, line, "strftime_now(): no local time");
    char buf[256];
    size_t n = a->pos[0].u.s->len ? strftime(buf, sizeof buf, a->pos[0].u.s->data, &tm) : 0;
    if (n == 0 && a->pos[0].u.s->len) return jinja_fail(r, line, "strftime_now(): the result is empty or too long");
    jv s = jv_string(buf, n);
    return jv_is_oom(s) ? jinja_fail(r, line, "out of memory") : s;
}

static const struct {
    const char *name;
    jinja_builtin fn;
} g[] = {{"range", g_range},
         {"namespace", g_namespace},
         {"dict", g_dict},
         {"raise_exception", g_raise_exception},
         {"strftime_now", g_strftime_now}};

bool vt_jinja_is_builtin(const char *name) {
    for (size_t i = 0; i < sizeof g / sizeof *g; i++)
        if (strcmp(g[i].name, name) == 0) return true;
    return false;
}

bool jinja_add_globals(jv globals) {
    for (size_t i = 0; i < sizeof g / sizeof *g; i++) {
        jv f = jinja_func_new(JF_BUILTIN, g[i].name);
        if (jv_is_oom(f)) return false;
        f.u.fn->builtin = g[i].fn;
        if (!jv_dict_set_cstr(globals, g[i].name, f)) return false;
    }
    return true;
}
