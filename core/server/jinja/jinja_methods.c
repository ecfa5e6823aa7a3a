/* jinja_methods.c — the Python methods templates call on strings, dicts and
 * lists (message.get('x'), content.split('</think>'), tools.append(t), ...).
 * jinja2 looks an attribute up as a method first, so {{ d.items }} on a
 * dict is its method even if the dict has an "items" key, as here. */
#include "jinja_internal.h"

#include <stdlib.h>
#include <string.h>

static jv oom(jinja_render *r, int line) { return jinja_fail(r, line, "out of memory"); }

static const char *str_arg(jinja_render *r, int line, const jinja_args *a, size_t i, const char *method, size_t *len) {
    if (i >= a->n_pos || a->pos[i].type != JV_STRING) {
        jinja_fail(r, line, "%s() needs a string argument", method);
        return NULL;
    }
    *len = a->pos[i].u.s->len;
    return a->pos[i].u.s->data;
}

/* ---- str ---- */

static int prefix_match(jv self, jv p, bool suffix) {
    const char *s = self.u.s->data;
    size_t n = self.u.s->len, m = p.u.s->len;
    if (m > n) return 0;
    return memcmp(suffix ? s + n - m : s, p.u.s->data, m) == 0;
}

static jv affix(jinja_render *r, int line, jv self, const jinja_args *a, bool suffix) {
    const char *name = suffix ? "endswith" : "startswith";
    if (a->n_pos < 1) return jinja_fail(r, line, "%s() needs an argument", name);
    jv p = a->pos[0];
    if (p.type == JV_STRING) return jv_bool(prefix_match(self, p, suffix));
    if (p.type == JV_LIST) {
        for (size_t i = 0; i < p.u.l->n; i++) {
            if (p.u.l->items[i].type != JV_STRING) return jinja_fail(r, line, "%s(): the tuple must hold strings", name);
            if (prefix_match(self, p.u.l->items[i], suffix)) return jv_bool(true);
        }
        return jv_bool(false);
    }
    return jinja_fail(r, line, "%s() needs a string or a tuple of strings", name);
}
static jv m_startswith(jinja_render *r, int line, jv self, const jinja_args *a) { return affix(r, line, self, a, false); }
static jv m_endswith(jinja_render *r, int line, jv self, const jinja_args *a) { return affix(r, line, self, a, true); }

static jv strip(jinja_render *r, int line, jv self, const jinja_args *a, bool left, bool right) {
    const char *chars = NULL;
    size_t clen = 0;
    if (a->n_pos > 0 && a->pos[0].type != JV_NONE) {
        if (a->pos[0].type != JV_STRING) return jinja_fail(r, line, "strip(): chars must be a string");
        chars = a->pos[0].u.s->data;
        clen = a->pos[0].u.s->len;
    }
    const char *d = self.u.s->data;
    size_t b = 0, e = self.u.s->len;
    jinja_strip_span(d, &b, &e, chars, clen, left, right);
    jv out = jv_string(d + b, e - b);
    return jv_is_oom(out) ? oom(r, line) : out;
}
static jv m_strip(jinja_render *r, int line, jv self, const jinja_args *a) { return strip(r, line, self, a, true, true); }
static jv m_lstrip(jinja_render *r, int line, jv self, const jinja_args *a) { return strip(r, line, self, a, true, false); }
static jv m_rstrip(jinja_render *r, int line, jv self, const jinja_args *a) { return strip(r, line, self, a, false, true); }

/* One piece of split, rsplit or splitlines into list: at most
 * VT_JINJA_MAX_ITERATIONS of them (an error), each counted as work. */
static bool push_str(jinja_render *r, int line, jv list, const char *s, size_t n) {
    if (list.u.l->n >= VT_JINJA_MAX_ITERATIONS) {
        jinja_fail(r, line, "a split into more than %u pieces", VT_JINJA_MAX_ITERATIONS);
        return false;
    }
    if (!jinja_work(r, line, JV_METER_ITEM + n)) return false;
    jv x = jv_string(s, n);
    return !jv_is_oom(x) && jv_list_append(list, x);
}

static jv split(jinja_render *r, int line, jv self, const jinja_args *a, bool from_right) {
    const jv *sepv = jinja_arg(a, 0, "sep");
    const jv *maxv = jinja_arg(a, 1, "maxsplit");
    int64_t max = -1;
    if (maxv && maxv->type == JV_INT) max = maxv->u.i;
    jv out = jv_list_new();
    if (jv_is_oom(out)) return oom(r, line);
    const char *s = self.u.s->data;
    size_t n = self.u.s->len;
    bool ok = true;
    if (!sepv || sepv->type == JV_NONE) { /* runs of whitespace (Unicode's too), no empty strings */
        int64_t done = 0;
        if (!from_right) {
            size_t i = 0;
            while (ok) {
                jinja_strip_span(s, &i, &n, NULL, 0, true, false);
                if (i >= n) break;
                if (max >= 0 && done >= max) {
                    size_t e = n;
                    jinja_strip_span(s, &i, &e, NULL, 0, false, true);
                    ok = push_str(r, line, out, s + i, e - i);
                    break;
                }
                size_t j = i;
                while (j < n && jinja_py_space_len(s + j, n - j) == 0) j++;
                ok = push_str(r, line, out, s + i, j - i);
                done++;
                i = j;
            }
        } else {
            size_t e = n;
            while (ok) {
                size_t zero = 0;
                jinja_strip_span(s, &zero, &e, NULL, 0, false, true);
                if (e == 0) break;
                if (max >= 0 && done >= max) {
                    size_t b = 0;
                    jinja_strip_span(s, &b, &e, NULL, 0, true, false);
                    ok = push_str(r, line, out, s + b, e - b);
                    break;
                }
                size_t b = e;
                while (b > 0 && jinja_py_space_len_before(s, b) == 0) b--;
                ok = push_str(r, line, out, s + b, e - b);
                done++;
                e = b;
            }
        }
    } else {
        if (sepv->type != JV_STRING) {
            jv_decref(out);
            return jinja_fail(r, line, "split(): the separator must be a string");
        }
        const char *sep = sepv->u.s->data;
        size_t m = sepv->u.s->len;
        if (m == 0) {
            jv_decref(out);
            return jinja_fail(r, line, "split(): empty separator");
        }
        int64_t done = 0;
        if (!from_right) {
            size_t start = 0;
            for (int64_t at; (max < 0 || done < max) && (at = jinja_find(r, line, s, n, start, sep, m)) >= 0; done++) {
                ok = ok && push_str(r, line, out, s + start, (size_t)at - start);
                start = (size_t)at + m;
            }
            if (r->failed) {
                jv_decref(out);
                return jv_undefined(NULL);
            }
            ok = ok && push_str(r, line, out, s + start, n - start);
        } else {
            /* from the right, a compare at each offset: its worst case, n
             * times m, is counted as work up front */
            if (!jinja_work(r, line, (uint64_t)n * m)) {
                jv_decref(out);
                return jv_undefined(NULL);
            }
            size_t end = n, i = n;
            while (i >= m && (max < 0 || done < max)) {
                if (memcmp(s + i - m, sep, m) == 0) {
                    ok = ok && push_str(r, line, out, s + i, end - i);
                    i -= m;
                    end = i;
                    done++;
                } else i--;
            }
            ok = ok && push_str(r, line, out, s, end);
        }
    }
    if (!ok) {
        jv_decref(out);
        return oom(r, line);
    }
    if (from_right) { /* collected from the end: into order once (not a move of the list per piece) */
        jv_list *l = out.u.l;
        for (size_t i = 0, j = l->n; i + 1 < j; i++, j--) {
            const jv t = l->items[i];
            l->items[i] = l->items[j - 1];
            l->items[j - 1] = t;
        }
    }
    return out;
}
static jv m_split(jinja_render *r, int line, jv self, const jinja_args *a) { return split(r, line, self, a, false); }
static jv m_rsplit(jinja_render *r, int line, jv self, const jinja_args *a) { return split(r, line, self, a, true); }

/* The bytes of the line break (Python's str.splitlines: \n, \r\n, \r, \v,
 * \f, \x1c-\x1e, U+0085, U+2028, U+2029) starting at s (n bytes), or 0. */
static size_t line_break_len(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] == '\r') return n > 1 && p[1] == '\n' ? 2 : 1;
    if (p[0] == '\n' || p[0] == '\v' || p[0] == '\f' || (p[0] >= 0x1c && p[0] <= 0x1e)) return 1;
    if (n >= 2 && p[0] == 0xC2 && p[1] == 0x85) return 2;
    if (n >= 3 && p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9)) return 3;
    return 0;
}

static jv m_splitlines(jinja_render *r, int line, jv self, const jinja_args *a) {
    const jv *keep = jinja_arg(a, 0, "keepends");
    const bool keepends = keep && jv_truthy(*keep);
    jv out = jv_list_new();
    if (jv_is_oom(out)) return oom(r, line);
    const char *s = self.u.s->data;
    const size_t n = self.u.s->len;
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        const size_t k = line_break_len(s + i, n - i);
        if (!k) {
            i++;
            continue;
        }
        if (!push_str(r, line, out, s + start, i - start + (keepends ? k : 0))) return jv_decref(out), oom(r, line);
        i += k;
        start = i;
    }
    if (start < n && !push_str(r, line, out, s + start, n - start)) return jv_decref(out), oom(r, line);
    return out;
}

static jv m_upper(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)a;
    return jinja_apply_filter(r, line, "upper", self, &(jinja_args){0});
}
static jv m_lower(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)a;
    return jinja_apply_filter(r, line, "lower", self, &(jinja_args){0});
}
static jv m_capitalize(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)a;
    return jinja_apply_filter(r, line, "capitalize", self, &(jinja_args){0});
}
static jv m_replace(jinja_render *r, int line, jv self, const jinja_args *a) {
    return jinja_apply_filter(r, line, "replace", self, a);
}

/* Python's str.title(): a capital after anything that is not a letter. */
static jv m_title(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)a;
    jv out = jv_string(self.u.s->data, self.u.s->len);
    if (jv_is_oom(out)) return oom(r, line);
    bool prev_cased = false;
    for (size_t i = 0; i < out.u.s->len; i++) {
        char c = out.u.s->data[i];
        bool lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
        if (lower && !prev_cased) out.u.s->data[i] = (char)(c - 32);
        if (upper && prev_cased) out.u.s->data[i] = (char)(c + 32);
        prev_cased = lower || upper || ((unsigned char)c >= 0x80);
    }
    return out;
}

static jv find(jinja_render *r, int line, jv self, const jinja_args *a, bool last) {
    size_t m;
    const char *sub = str_arg(r, line, a, 0, last ? "rfind" : "find", &m);
    if (!sub) return jv_undefined(NULL);
    const char *s = self.u.s->data;
    size_t n = self.u.s->len;
    if (m > n) return jv_int(-1);
    if (!last) {
        const int64_t at = jinja_find(r, line, s, n, 0, sub, m);
        return r->failed ? jv_undefined(NULL) : jv_int(at < 0 ? -1 : (int64_t)jv_utf8_count(s, (size_t)at));
    }
    /* from the right, a compare at each offset: its worst case counted up front */
    if (!jinja_work(r, line, (uint64_t)n * (m ? m : 1))) return jv_undefined(NULL);
    for (size_t k = 0; k + m <= n; k++)
        if (memcmp(s + n - m - k, sub, m) == 0) return jv_int((int64_t)jv_utf8_count(s, n - m - k));
    return jv_int(-1);
}
static jv m_find(jinja_render *r, int line, jv self, const jinja_args *a) { return find(r, line, self, a, false); }
static jv m_rfind(jinja_render *r, int line, jv self, const jinja_args *a) { return find(r, line, self, a, true); }

static jv m_count(jinja_render *r, int line, jv self, const jinja_args *a) {
    size_t m;
    const char *sub = str_arg(r, line, a, 0, "count", &m);
    if (!sub) return jv_undefined(NULL);
    if (m == 0) return jv_int((int64_t)jv_utf8_count(self.u.s->data, self.u.s->len) + 1);
    int64_t c = 0;
    for (int64_t at = 0; (at = jinja_find(r, line, self.u.s->data, self.u.s->len, (size_t)at, sub, m)) >= 0;
         at += (int64_t)m)
        c++;
    return r->failed ? jv_undefined(NULL) : jv_int(c);
}

static jv m_join(jinja_render *r, int line, jv self, const jinja_args *a) {
    if (a->n_pos < 1) return jinja_fail(r, line, "join() needs an iterable");
    jv l = jinja_to_list(r, line, a->pos[0]);
    if (r->failed) return jv_undefined(NULL);
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT};
    for (size_t i = 0; i < l.u.l->n; i++) {
        if (l.u.l->items[i].type != JV_STRING) {
            jv_decref(l);
            free(b.data);
            return jinja_fail(r, line, "join(): item %zu is a %s, not a string", i, jv_type_name(l.u.l->items[i]));
        }
        if (i) vt_text_put(&b, self.u.s->data, self.u.s->len);
        vt_text_put(&b, l.u.l->items[i].u.s->data, l.u.l->items[i].u.s->len);
    }
    jv_decref(l);
    return jinja_buf_string(r, line, &b);
}

/* str.format with "{}", "{0}" and "{name}" fields (no format specs). */
static jv m_format(jinja_render *r, int line, jv self, const jinja_args *a) {
    vt_text_buf b = {.limit = VT_JINJA_MAX_OUTPUT};
    const char *s = self.u.s->data;
    size_t n = self.u.s->len, auto_i = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '{' && i + 1 < n && s[i + 1] == '{') {
            vt_text_putc(&b, '{');
            i++;
            continue;
        }
        if (s[i] == '}' && i + 1 < n && s[i + 1] == '}') {
            vt_text_putc(&b, '}');
            i++;
            continue;
        }
        if (s[i] != '{') {
            vt_text_putc(&b, s[i]);
            continue;
        }
        const char *close = memchr(s + i, '}', n - i);
        if (!close) {
            free(b.data);
            return jinja_fail(r, line, "format(): single '{' in the format string");
        }
        size_t flen = (size_t)(close - (s + i + 1));
        char field[64];
        if (flen >= sizeof field || memchr(s + i + 1, ':', flen) || memchr(s + i + 1, '!', flen)) {
            free(b.data);
            return jinja_fail(r, line, "format(): only {}, {N} and {name} fields are supported");
        }
        memcpy(field, s + i + 1, flen);
        field[flen] = 0;
        const jv *v = NULL;
        if (flen == 0) v = auto_i < a->n_pos ? &a->pos[auto_i++] : NULL;
        else if (field[0] >= '0' && field[0] <= '9') {
            size_t k = (size_t)strtoul(field, NULL, 10);
            v = k < a->n_pos ? &a->pos[k] : NULL;
        } else
            for (size_t k = 0; k < a->n_kw; k++)
                if (strcmp(a->kw_names[k], field) == 0) v = &a->kw[k];
        if (!v) {
            free(b.data);
            return jinja_fail(r, line, "format(): no argument for {%s}", field);
        }
        jv_write_str(&b, *v);
        i += flen + 1;
    }
    return jinja_buf_string(r, line, &b);
}

static bool all_chars(jv self, int (*pred)(int)) {
    if (self.u.s->len == 0) return false;
    for (size_t i = 0; i < self.u.s->len; i++)
        if (!pred((unsigned char)self.u.s->data[i])) return false;
    return true;
}
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
static jv m_isdigit(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return jv_bool(all_chars(self, is_digit));
}
static jv m_isalpha(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    return jv_bool(all_chars(self, is_alpha));
}
static jv m_isspace(jinja_render *r, int line, jv self, const jinja_args *a) {
    (void)r, (void)line, (void)a;
    size_t b = 0, e = self.u.s->len;
    jinja_strip_span(self.u.s->data, &b, &e, NULL, 0, true, false);
    return jv_bool(self.u.s->len > 0 && b == e);
}

/* ---- dict ---- */

static jv m_get(jinja_render *r, int line, jv self, const jinja_args *a) {
    if (a->n_pos < 1) return jinja_fail(r, line, "get() needs a key");
    const jv *v = jv_dict_get(self, a->pos[0]);
    if (v) return jv_incref(*v);
    return a->n_pos > 1 ? jv_incref(a->pos[1]) : jv_none();
}

static jv dict_view(jinja_render *r, int line, jv self, int which) {
    jv out = jv_list_new();
    if (jv_is_oom(out)) return oom(r, line);
    for (size_t i = 0; i < self.u.d->n; i++) {
        jv x;
        if (which == 0) x = jv_incref(self.u.d->e[i].key);
        else if (which == 1) x = jv_incref(self.u.d->e[i].value);
        else {
            x = jv_list_new();
            if (!jv_is_oom(x)) x.u.l->tuple = true;
            if (jv_is_oom(x) || !jv_list_append(x, jv_incref(self.u.d->e[i].key)) ||
                !jv_list_append(x, jv_incref(self.u.d->e[i].value))) {
                if (!jv_is_oom(x)) jv_decref(x);
                jv_decref(out);
                return oom(r, line);
            }
        }
        if (!jv_list_append(out, x)) {
            jv_decref(out);
            return oom(r, line);
        }
    }
    return out;
}
static jv m_keys(jinja_render *r, int line, jv self, const jinja_args *a) { (void)a; return dict_view(r, line, self, 0); }
static jv m_values(jinja_render *r, int line, jv self, const jinja_args *a) { (void)a; return dict_view(r, line, self, 1); }
static jv m_items(jinja_render *r, int line, jv self, const jinja_args *a) { (void)a; return dict_view(r, line, self, 2); }

static jv m_dict_pop(jinja_render *r, int line, jv self, const jinja_args *a) {
    if (a->n_pos < 1) return jinja_fail(r, line, "pop() needs a key");
    jv_dict *d = self.u.d;
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->e[i].key, a->pos[0]) && (d->e[i].key.type == JV_STRING) == (a->pos[0].type == JV_STRING)) {
            jv v = d->e[i].value;
            jv_decref(d->e[i].key);
            memmove(d->e + i, d->e + i + 1, (d->n - i - 1) * sizeof *d->e);
            d->n--;
            return v;
        }
    if (a->n_pos > 1) return jv_incref(a->pos[1]);
    return jinja_fail(r, line, "pop(): no such key");
}

/* ---- list ---- */

static jv m_append(jinja_render *r, int line, jv self, const jinja_args *a) {
    if (a->n_pos != 1) return jinja_fail(r, line, "append() takes one argument");
    const char *why = jv_holds(a->pos[0], self);
    if (why) return jinja_fail(r, line, "append(): a list %s", why);
    if (!jv_list_append(self, jv_incref(a->pos[0]))) return oom(r, line);
    return jv_none();
}

static jv m_extend(jinja_render *r, int line, jv self, const jinja_args *a) {
    if (a->n_pos != 1) return jinja_fail(r, line, "extend() takes one argument");
    jv l = jinja_to_list(r, line, a->pos[0]);
    if (r->failed) return jv_undefined(NULL);
    size_t n = l.u.l->n; /* l may be self */
    for (size_t i = 0; i < n; i++) {
        const char *why = jv_holds(l.u.l->items[i], self);
        if (why) {
            jv_decref(l);
            return jinja_fail(r, line, "extend(): a list %s", why);
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!jv_list_append(self, jv_incref(l.u.l->items[i]))) {
            jv_decref(l);
            return oom(r, line);
        }
    jv_decref(l);
    return jv_none();
}

static jv m_list_pop(jinja_render *r, int line, jv self, const jinja_args *a) {
    jv_list *l = self.u.l;
    if (l->n == 0) return jinja_fail(r, line, "pop from empty list");
    int64_t i = (int64_t)l->n - 1;
    if (a->n_pos > 0) {
        if (a->pos[0].type != JV_INT) return jinja_fail(r, line, "pop(): the index must be an integer");
        i = a->pos[0].u.i < 0 ? a->pos[0].u.i + (int64_t)l->n : a->pos[0].u.i;
        if (i < 0 || i >= (int64_t)l->n) return jinja_fail(r, line, "pop index out of range");
    }
    jv v = l->items[i];
    jv_meter_tick((l->n - (size_t)i) * JV_METER_ITEM); /* pop(0) in a loop moves the list each time */
    memmove(l->items + i, l->items + i + 1, (l->n - (size_t)i - 1) * sizeof *l->items);
    l->n--;
    return v;
}

static jv m_index(jinja_render *r, int line, jv self, const jinja_args *a) {
    if (a->n_pos < 1) return jinja_fail(r, line, "index() needs a value");
    for (size_t i = 0; i < self.u.l->n && !jv_meter_spent(); i++)
        if (jv_equal(self.u.l->items[i], a->pos[0])) return jv_int((int64_t)i);
    return jinja_fail(r, line, "index(): value not in list");
}

typedef struct method {
    jv_type type;
    const char *name;
    jinja_builtin fn;
} method;

static const method methods[] = {
    {JV_STRING, "startswith", m_startswith}, {JV_STRING, "endswith", m_endswith}, {JV_STRING, "split", m_split},
    {JV_STRING, "splitlines", m_splitlines},
    {JV_STRING, "rsplit", m_rsplit},         {JV_STRING, "strip", m_strip},       {JV_STRING, "lstrip", m_lstrip},
    {JV_STRING, "rstrip", m_rstrip},         {JV_STRING, "upper", m_upper},       {JV_STRING, "lower", m_lower},
    {JV_STRING, "title", m_title},           {JV_STRING, "capitalize", m_capitalize}, {JV_STRING, "replace", m_replace},
    {JV_STRING, "find", m_find},             {JV_STRING, "rfind", m_rfind},       {JV_STRING, "count", m_count},
    {JV_STRING, "join", m_join},             {JV_STRING, "format", m_format},     {JV_STRING, "isdigit", m_isdigit},
    {JV_STRING, "isalpha", m_isalpha},       {JV_STRING, "isspace", m_isspace},
    {JV_DICT, "get", m_get},                 {JV_DICT, "keys", m_keys},           {JV_DICT, "values", m_values},
    {JV_DICT, "items", m_items},             {JV_DICT, "pop", m_dict_pop},
    {JV_LIST, "append", m_append},           {JV_LIST, "extend", m_extend},       {JV_LIST, "pop", m_list_pop},
    {JV_LIST, "index", m_index},
};

jv jinja_method(jinja_render *r, jv obj, const char *name) {
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
        if (methods[i].type == obj.type && strcmp(methods[i].name, name) == 0) {
            jv f = jinja_func_new(JF_BUILTIN, methods[i].name);
            if (jv_is_oom(f)) return jinja_fail(r, 0, "out of memory");
            f.u.fn->builtin = methods[i].fn;
            f.u.fn->bound = jv_incref(obj);
            return f;
        }
    return jv_undefined(name);
}
