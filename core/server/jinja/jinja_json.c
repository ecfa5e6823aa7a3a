/* jinja_json.c — the tojson filter as transformers registers it: Python's
 * json.dumps(x, ensure_ascii=False, indent=None, separators=None,
 * sort_keys=False), with each option settable from the template. Byte for
 * byte: ", " and ": " separators by default ("," with an indent), floats as
 * repr() writes them (NaN, Infinity), non-ASCII kept unless ensure_ascii. */
#include "jinja_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void write_string(vt_text_buf *b, const char *s, size_t len, bool ensure_ascii) {
    if (!jv_meter_tick(len)) return; /* the render fails on its meter */
    vt_text_putc(b, '"');
    for (size_t i = 0; i < len && !b->failed; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': vt_text_puts(b, "\\\""); continue;
        case '\\': vt_text_puts(b, "\\\\"); continue;
        case '\n': vt_text_puts(b, "\\n"); continue;
        case '\r': vt_text_puts(b, "\\r"); continue;
        case '\t': vt_text_puts(b, "\\t"); continue;
        case '\b': vt_text_puts(b, "\\b"); continue;
        case '\f': vt_text_puts(b, "\\f"); continue;
        default: break;
        }
        if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            vt_text_printf(b, "\\u%04x", c);
            continue;
        }
        if (c < 0x80 || !ensure_ascii) {
            vt_text_putc(b, (char)c);
            continue;
        }
        /* Decode one UTF-8 sequence; a malformed byte is written as U+FFFD. */
        unsigned cp = 0xFFFD;
        size_t need = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
        if (need && i + need < len) {
            unsigned v = c & (0x3F >> need);
            bool ok = true;
            for (size_t k = 1; k <= need; k++) {
                unsigned char cc = (unsigned char)s[i + k];
                ok &= (cc & 0xC0) == 0x80;
                v = (v << 6) | (cc & 0x3F);
            }
            if (ok) {
                cp = v;
                i += need;
            }
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            vt_text_printf(b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
        } else vt_text_printf(b, "\\u%04x", cp);
    }
    vt_text_putc(b, '"');
}

static void newline_indent(vt_text_buf *b, const jinja_json_opts *o, int level) {
    vt_text_putc(b, '\n');
    for (int i = 0; i < level; i++) vt_text_puts(b, o->indent);
}

static int key_cmp(const void *x, const void *y) {
    const jv_dict_entry *a = *(const jv_dict_entry *const *)x, *b = *(const jv_dict_entry *const *)y;
    size_t n = a->key.u.s->len < b->key.u.s->len ? a->key.u.s->len : b->key.u.s->len;
    int c = memcmp(a->key.u.s->data, b->key.u.s->data, n);
    if (c) return c;
    return a->key.u.s->len < b->key.u.s->len ? -1 : a->key.u.s->len > b->key.u.s->len;
}

static bool dump(jinja_render *r, int line, jv v, const jinja_json_opts *o, vt_text_buf *b, int level) {
    /* a full buffer or a spent meter ends the walk (a list holding itself
     * twice per level, 60 levels deep, has 2^60 paths) */
    if (b->failed) return false;
    if (!jv_meter_tick(JV_METER_ITEM)) return jinja_work(r, line, 0);
    if (level > VT_JINJA_MAX_DEPTH) {
        jinja_fail(r, line, "tojson: value nested deeper than %d", VT_JINJA_MAX_DEPTH);
        return false;
    }
    switch (v.type) {
    case JV_NONE: vt_text_puts(b, "null"); return true;
    case JV_BOOL: vt_text_puts(b, v.u.b ? "true" : "false"); return true;
    case JV_INT: vt_text_printf(b, "%lld", (long long)v.u.i); return true;
    case JV_FLOAT:
        if (isnan(v.u.f)) vt_text_puts(b, "NaN");
        else if (isinf(v.u.f)) vt_text_puts(b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else vt_text_put_float(b, v.u.f);
        return true;
    case JV_STRING: write_string(b, v.u.s->data, v.u.s->len, o->ensure_ascii); return true;
    case JV_LIST:
        if (v.u.l->n == 0) {
            vt_text_puts(b, "[]");
            return true;
        }
        vt_text_putc(b, '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) vt_text_puts(b, o->item_sep);
            if (o->indent) newline_indent(b, o, level + 1);
            if (!dump(r, line, v.u.l->items[i], o, b, level + 1)) return false;
        }
        if (o->indent) newline_indent(b, o, level);
        vt_text_putc(b, ']');
        return true;
    case JV_DICT: {
        size_t n = v.u.d->n;
        if (n == 0) {
            vt_text_puts(b, "{}");
            return true;
        }
        const jv_dict_entry **order = malloc(n * sizeof *order);
        if (!order) {
            jinja_fail(r, line, "out of memory");
            return false;
        }
        bool all_strings = true;
        for (size_t i = 0; i < n; i++) {
            order[i] = &v.u.d->e[i];
            all_strings &= order[i]->key.type == JV_STRING;
        }
        if (o->sort_keys && all_strings) qsort(order, n, sizeof *order, key_cmp);
        vt_text_putc(b, '{');
        bool ok = true;
        for (size_t i = 0; ok && i < n; i++) {
            if (i) vt_text_puts(b, o->item_sep);
            if (o->indent) newline_indent(b, o, level + 1);
            jv k = order[i]->key;
            if (k.type == JV_STRING) write_string(b, k.u.s->data, k.u.s->len, o->ensure_ascii);
            else if (k.type == JV_NONE || k.type == JV_BOOL) {
                /* json.dumps writes these keys as their JSON words */
                vt_text_puts(b, k.type == JV_NONE ? "\"null\"" : k.u.b ? "\"true\"" : "\"false\"");
            } else {
                vt_text_putc(b, '"');
                jv_write_str(b, k);
                vt_text_putc(b, '"');
            }
            vt_text_puts(b, o->key_sep);
            ok = dump(r, line, order[i]->value, o, b, level + 1);
        }
        free(order);
        if (!ok) return false;
        if (o->indent) newline_indent(b, o, level);
        vt_text_putc(b, '}');
        return true;
    }
    case JV_UNDEFINED: jinja_fail(r, line, "tojson: '%s' is undefined", v.undef_name ? v.undef_name : "value"); return false;
    default: jinja_fail(r, line, "tojson: a %s is not JSON serializable", jv_type_name(v)); return false;
    }
}

bool jinja_tojson(jinja_render *r, int line, jv v, const jinja_json_opts *o, vt_text_buf *out) {
    if (!dump(r, line, v, o, out, 0) && !out->failed) return false;
    if (out->failed) {
        jinja_fail(r, line, "tojson: output too large (or out of memory)");
        return false;
    }
    return true;
}
