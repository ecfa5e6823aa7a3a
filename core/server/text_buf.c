/* text_buf.c — see text_buf.h. */
#include "text_buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vt_text_put(vt_text_buf *b, const char *s, size_t n) {
    if (b->failed || n == 0) return;
    if (b->limit && b->len + n > b->limit) {
        b->failed = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void vt_text_puts(vt_text_buf *b, const char *s) {
    if (!b->failed) vt_text_put(b, s, strlen(s)); /* a failed buffer takes nothing: not even a look at s */
}

void vt_text_putc(vt_text_buf *b, char c) { vt_text_put(b, &c, 1); }

void vt_text_printf(vt_text_buf *b, const char *fmt, ...) {
    if (b->failed) return;
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n < sizeof small) {
        vt_text_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1); /* a long line: written in full, never cut */
    if (!big) {
        b->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    vt_text_put(b, big, (size_t)n);
    free(big);
}

void vt_text_put_float(vt_text_buf *b, double f) {
    if (isnan(f)) {
        vt_text_puts(b, "nan");
        return;
    }
    if (isinf(f)) {
        vt_text_puts(b, f < 0 ? "-inf" : "inf");
        return;
    }
    /* Shortest digits that round-trip, then Python's layout: positional for
     * decimal exponents -4..15, scientific otherwise. */
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *q = e;
    bool neg = *q == '-';
    if (neg) q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    if (neg) vt_text_putc(b, '-');
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            vt_text_puts(b, "0.");
            for (int i = -1; i > exp; i--) vt_text_putc(b, '0');
            vt_text_put(b, digits, nd);
        } else {
            for (int i = 0; i <= exp; i++) vt_text_putc(b, (size_t)i < nd ? digits[i] : '0');
            vt_text_putc(b, '.');
            if ((size_t)exp + 1 < nd) vt_text_put(b, digits + exp + 1, nd - (size_t)exp - 1);
            else vt_text_putc(b, '0');
        }
    } else {
        vt_text_putc(b, digits[0]);
        if (nd > 1) {
            vt_text_putc(b, '.');
            vt_text_put(b, digits + 1, nd - 1);
        }
        vt_text_printf(b, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

char *vt_text_take(vt_text_buf *b) {
    char *s = b->failed ? NULL : b->data ? b->data : calloc(1, 1);
    if (b->failed) free(b->data);
    *b = (vt_text_buf){.limit = b->limit};
    return s;
}
