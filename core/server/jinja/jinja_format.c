/* jinja_format.c — Python's printf-style string formatting, `'%s: %d' % (a, b)`
 * and jinja2's `format` filter, for the conversions chat templates write:
 * s r d i u f F e E g G x X o c and %%, with the flags - + space 0 #, a
 * width and a precision. Mapping keys (`%(name)s`) and `*` widths are
 * errors naming the line, as is an argument count that does not match. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"

/* Code points of UTF-8 text. */
static size_t code_points(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

/* text (n bytes) in a field: at most precision code points (< 0: all),
 * padded with spaces to width code points, on the left unless left-aligned. */
static void put_field(vt_text_buf *b, const char *text, size_t n, int width, int precision, bool left) {
    if (precision >= 0) n = jinja_cp_offset(text, n, (size_t)precision);
    const size_t cps = code_points(text, n);
    const size_t pad = width > 0 && (size_t)width > cps ? (size_t)width - cps : 0;
    for (size_t i = 0; !left && i < pad; i++) vt_text_putc(b, ' ');
    vt_text_put(b, text, n);
    for (size_t i = 0; left && i < pad; i++) vt_text_putc(b, ' ');
}

jv jinja_percent_format(jinja_render *r, int line, const char *fmt, size_t len, const jv *args, size_t n_args) {
    vt_text_buf b = {0};
    size_t used = 0;
    for (size_t i = 0; i < len; i++) {
        if (fmt[i] != '%') {
            vt_text_putc(&b, fmt[i]);
            continue;
        }
        if (++i >= len) {
            free(b.data);
            return jinja_fail(r, line, "string formatting: incomplete format");
        }
        if (fmt[i] == '%') {
            vt_text_putc(&b, '%');
            continue;
        }
        if (fmt[i] == '(') {
            free(b.data);
            return jinja_fail(r, line, "string formatting: '%%(name)' keys are not supported");
        }
        char flags[8];
        size_t n_flags = 0;
        for (; i < len && strchr("-+ 0#", fmt[i]); i++)
            if (n_flags + 1 < sizeof flags && !memchr(flags, fmt[i], n_flags)) flags[n_flags++] = fmt[i];
        flags[n_flags] = 0;
        int width = 0, precision = -1;
        for (; i < len && fmt[i] >= '0' && fmt[i] <= '9'; i++) width = width < 10000 ? width * 10 + (fmt[i] - '0') : width;
        if (i < len && fmt[i] == '.') {
            precision = 0;
            for (i++; i < len && fmt[i] >= '0' && fmt[i] <= '9'; i++)
                precision = precision < 10000 ? precision * 10 + (fmt[i] - '0') : precision;
        }
        while (i < len && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) i++; /* length: read and ignored, as Python */
        if (i >= len || fmt[i] == '*') {
            free(b.data);
            return jinja_fail(r, line, "string formatting: %s", i >= len ? "incomplete format" : "'*' widths are not supported");
        }
        const char conv = fmt[i];
        if (!strchr("srdiufFeEgGxXoc", conv)) {
            free(b.data);
            return jinja_fail(r, line, "string formatting: unsupported format character '%c'", conv);
        }
        if (used >= n_args) {
            free(b.data);
            return jinja_fail(r, line, "not enough arguments for format string");
        }
        const jv v = args[used++];
        const bool left = strchr(flags, '-') != NULL;
        if (conv == 's' || conv == 'r') {
            vt_text_buf t = {0};
            if (conv == 's') jv_write_str(&t, v);
            else jv_write_repr(&t, v);
            put_field(&b, t.data ? t.data : "", t.len, width, precision, left);
            free(t.data);
            continue;
        }
        if (conv == 'c') {
            char one[8];
            size_t n = 0;
            if (v.type == JV_STRING && code_points(v.u.s->data, v.u.s->len) == 1) {
                n = v.u.s->len < sizeof one ? v.u.s->len : 0;
                memcpy(one, v.u.s->data, n);
            } else if (v.type == JV_INT && v.u.i >= 0 && v.u.i < 0x80) {
                one[0] = (char)v.u.i;
                n = 1;
            }
            if (!n) {
                free(b.data);
                return jinja_fail(r, line, "string formatting: %%c requires an int below 128 or one character");
            }
            put_field(&b, one, n, width, -1, left);
            continue;
        }
        if (!jv_is_number(v)) {
            free(b.data);
            return jinja_fail(r, line, "string formatting: %%%c requires a number, not %s", conv, jv_type_name(v));
        }
        /* the number through C's printf, whose conversions these are
         * (Python's %#o writes 0o, C's a lone 0: not taken) */
        if (conv == 'o' && strchr(flags, '#')) {
            free(b.data);
            return jinja_fail(r, line, "string formatting: '%%#o' is not supported");
        }
        if (width > 256 || precision > 256) {
            free(b.data);
            return jinja_fail(r, line, "string formatting: a number's width or precision above 256");
        }
        char spec[64], out[1024];
        const bool integer = strchr("diuxXo", conv) != NULL;
        if (precision >= 0)
            snprintf(spec, sizeof spec, "%%%s%d.%d%s%c", flags, width, precision, integer ? "ll" : "",
                     conv == 'u' ? 'd' : conv);
        else
            snprintf(spec, sizeof spec, "%%%s%d%s%c", flags, width, integer ? "ll" : "", conv == 'u' ? 'd' : conv);
        int n;
        if (integer) {
            const double d = jv_as_double(v);
            if (v.type == JV_FLOAT && (!isfinite(d) || fabs(d) >= 9.2e18)) {
                free(b.data);
                return jinja_fail(r, line, "string formatting: %g does not fit %%%c", d, conv);
            }
            const long long x = v.type == JV_FLOAT ? (long long)d : v.type == JV_BOOL ? v.u.b : (long long)v.u.i;
            n = snprintf(out, sizeof out, spec, x);
        } else {
            n = snprintf(out, sizeof out, spec, jv_as_double(v));
        }
        vt_text_put(&b, out, n > 0 ? ((size_t)n < sizeof out ? (size_t)n : sizeof out - 1) : 0);
    }
    if (used < n_args) {
        free(b.data);
        return jinja_fail(r, line, "not all arguments converted during string formatting");
    }
    return jinja_buf_string(r, line, &b);
}
