/* jinja_lexer.c — template text -> tokens, with jinja2's whitespace rules as
 * transformers configures them: line endings normalized to "\n", one
 * trailing newline of the template dropped, "{%-"/"-%}" (and the {{ }} and
 * {# #} forms) strip the whitespace on their side, trim_blocks removes the
 * newline right after a block or comment tag, lstrip_blocks removes the
 * spaces and tabs before a block or comment tag that starts its line
 * ("{%+" keeps them). {% raw %} ... {% endraw %} is one text token. */
#include "jinja_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    char *src; /* normalized copy */
    size_t len, pos;
    int line;
    size_t line_start;
    jtok_list *out;
    char *err;
    size_t err_size;
} lexer;

static bool lex_fail(lexer *L, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool lex_fail(lexer *L, size_t at, const char *fmt, ...) {
    int line = 1;
    size_t ls = 0;
    for (size_t i = 0; i < at && i < L->len; i++)
        if (L->src[i] == '\n') {
            line++;
            ls = i + 1;
        }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(L->err, L->err_size, "line %d, column %zu: %s", line, at - ls + 1, msg);
    return false;
}

/* Lines are counted forward from the last position asked for (positions
 * mostly grow), so lexing stays linear in the template's size. */
static int line_at(lexer *L, size_t at) {
    if (at < L->pos) {
        L->pos = 0;
        L->line = 1;
        L->line_start = 0;
    }
    for (; L->pos < at; L->pos++)
        if (L->src[L->pos] == '\n') {
            L->line++;
            L->line_start = L->pos + 1;
        }
    return L->line;
}
static int col_at(lexer *L, size_t at) {
    line_at(L, at);
    return (int)(at - L->line_start + 1);
}

static bool push(lexer *L, jtok t) {
    if (L->out->n == L->out->cap) {
        size_t cap = L->out->cap ? L->out->cap * 2 : 64;
        jtok *p = realloc(L->out->t, cap * sizeof *p);
        if (!p) {
            free(t.text);
            return lex_fail(L, 0, "out of memory");
        }
        L->out->t = p;
        L->out->cap = cap;
    }
    L->out->t[L->out->n++] = t;
    return true;
}

static bool push_text(lexer *L, int line, const char *s, size_t n) {
    if (n == 0) return true;
    jtok t = {.kind = JT_TEXT, .line = line, .len = n};
    t.text = malloc(n + 1);
    if (!t.text) return lex_fail(L, 0, "out of memory");
    memcpy(t.text, s, n);
    t.text[n] = 0;
    return push(L, t);
}

static bool push_simple(lexer *L, jtok_kind k, int line, int col, const char *text) {
    jtok t = {.kind = k, .line = line, .col = col};
    if (text) {
        t.len = strlen(text);
        t.text = malloc(t.len + 1);
        if (!t.text) return lex_fail(L, 0, "out of memory");
        memcpy(t.text, text, t.len + 1);
    }
    return push(L, t);
}

/* Find the next tag opening at or after from: returns its position or len. */
static size_t next_tag(const lexer *L, size_t from) {
    for (size_t i = from; i + 1 < L->len; i++)
        if (L->src[i] == '{' && (L->src[i + 1] == '{' || L->src[i + 1] == '%' || L->src[i + 1] == '#')) return i;
    return L->len;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* The text [start, end) before a tag opening "{X" at end, trimmed per the tag. */
static void trim_before(const lexer *L, size_t start, size_t *end, size_t tag, bool line_starting) {
    char kind = L->src[tag + 1];
    char mod = tag + 2 < L->len ? L->src[tag + 2] : 0;
    if (mod == '-') {
        while (*end > start && is_space(L->src[*end - 1])) (*end)--;
        return;
    }
    if (kind == '{' || mod == '+') return;
    /* lstrip_blocks: only spaces and tabs between the line start and the tag. */
    size_t ls = *end;
    while (ls > start && (L->src[ls - 1] == ' ' || L->src[ls - 1] == '\t')) ls--;
    if ((ls > start && L->src[ls - 1] == '\n') || (ls == start && line_starting)) *end = ls;
}

/* After a tag's closing at pos (just past it): the start of the next text. */
static size_t trim_after(const lexer *L, size_t pos, bool strip_all, bool block_like, bool keep) {
    if (strip_all) {
        while (pos < L->len && is_space(L->src[pos])) pos++;
    } else if (block_like && !keep && pos < L->len && L->src[pos] == '\n') {
        pos++;
    }
    return pos;
}

/* Code point cp (<= 0x10FFFF) as UTF-8. */
static void put_utf8(vt_text_buf *b, unsigned long cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) u[0] = (char)cp, n = 1;
    else if (cp < 0x800) u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000)
        u[0] = (char)(0xE0 | (cp >> 12)), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
    else
        u[0] = (char)(0xF0 | (cp >> 18)), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)),
        u[3] = (char)(0x80 | (cp & 63)), n = 4;
    vt_text_put(b, u, n);
}

static bool lex_string(lexer *L, size_t *p, int line, int col) {
    char q = L->src[*p];
    size_t i = *p + 1;
    vt_text_buf b = {0};
    for (;;) {
        if (i >= L->len) {
            free(b.data);
            return lex_fail(L, *p, "unterminated string");
        }
        char c = L->src[i];
        if (c == q) break;
        if (c != '\\' || i + 1 >= L->len) {
            vt_text_putc(&b, c);
            i++;
            continue;
        }
        char e = L->src[i + 1];
        i += 2;
        switch (e) {
        case 'n': vt_text_putc(&b, '\n'); break;
        case 't': vt_text_putc(&b, '\t'); break;
        case 'r': vt_text_putc(&b, '\r'); break;
        case 'b': vt_text_putc(&b, '\b'); break;
        case 'f': vt_text_putc(&b, '\f'); break;
        case 'v': vt_text_putc(&b, '\v'); break;
        case 'a': vt_text_putc(&b, '\a'); break;
        case '\\': vt_text_putc(&b, '\\'); break;
        case '\'': vt_text_putc(&b, '\''); break;
        case '"': vt_text_putc(&b, '"'); break;
        case '\n': break; /* a line continuation */
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
            /* octal, up to three digits, as Python reads them ('\101' is 'A', '\0' NUL) */
            unsigned long cp = (unsigned long)(e - '0');
            for (int k = 1; k < 3 && i < L->len && L->src[i] >= '0' && L->src[i] <= '7'; k++, i++)
                cp = cp * 8 + (unsigned long)(L->src[i] - '0');
            put_utf8(&b, cp);
            break;
        }
        case 'N':
            free(b.data);
            return lex_fail(L, i, "\\N{...} escapes (characters by name) are not supported; write the character or "
                                  "its \\u escape");
        case 'x':
        case 'u':
        case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            unsigned long cp = 0;
            for (int k = 0; k < nd; k++, i++) {
                if (i >= L->len || !isxdigit((unsigned char)L->src[i])) {
                    free(b.data);
                    return lex_fail(L, i, "truncated \\%c escape in a string", e);
                }
                char h = L->src[i];
                cp = cp * 16 + (unsigned long)(isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
            }
            if (cp > 0x10FFFF) {
                free(b.data);
                return lex_fail(L, i, "escape beyond Unicode in a string");
            }
            put_utf8(&b, cp);
            break;
        }
        default: /* Python keeps an unknown escape as written */
            vt_text_putc(&b, '\\');
            vt_text_putc(&b, e);
        }
    }
    if (b.failed) {
        free(b.data);
        return lex_fail(L, *p, "out of memory");
    }
    jtok t = {.kind = JT_STRING, .line = line, .col = col, .len = b.len};
    t.text = b.data ? b.data : calloc(1, 1);
    if (!t.text) return lex_fail(L, *p, "out of memory");
    *p = i + 1;
    return push(L, t);
}

/* The tokens inside a tag, from *p to its closing; sets *close_pos past the
 * closing, *strip ("-" before it), *keep ("+" before it). */
static bool lex_tag(lexer *L, size_t *p, char closer, size_t *close_at, bool *strip, bool *keep) {
    int depth = 0;
    size_t i = *p;
    for (;;) {
        while (i < L->len && is_space(L->src[i])) i++;
        if (i >= L->len) return lex_fail(L, *p, "unterminated tag (no \"%c}\")", closer);
        int line = line_at(L, i), col = col_at(L, i);
        char c = L->src[i];
        /* The closing, possibly after "-" or "+"; only outside brackets. */
        if (depth == 0) {
            size_t j = i;
            bool s = false, k = false;
            if ((c == '-' || c == '+') && j + 2 < L->len + 1 && j + 1 < L->len && L->src[j + 1] == closer &&
                j + 2 < L->len && L->src[j + 2] == '}') {
                s = c == '-';
                k = c == '+';
                j++;
            }
            if (j + 1 < L->len && L->src[j] == closer && L->src[j + 1] == '}') {
                *close_at = j + 2;
                *strip = s;
                *keep = k;
                return push_simple(L, closer == '%' ? JT_BLOCK_END : JT_VAR_END, line, col, NULL);
            }
        }
        if (c == '"' || c == '\'') {
            if (!lex_string(L, &i, line, col)) return false;
            continue;
        }
        if (isdigit((unsigned char)c)) {
            size_t j = i;
            bool is_float = false;
            while (j < L->len && (isdigit((unsigned char)L->src[j]) || L->src[j] == '_')) j++;
            if (j + 1 < L->len && L->src[j] == '.' && isdigit((unsigned char)L->src[j + 1])) {
                is_float = true;
                j++;
                while (j < L->len && isdigit((unsigned char)L->src[j])) j++;
            }
            if (j < L->len && (L->src[j] == 'e' || L->src[j] == 'E')) {
                size_t k = j + 1;
                if (k < L->len && (L->src[k] == '+' || L->src[k] == '-')) k++;
                if (k < L->len && isdigit((unsigned char)L->src[k])) {
                    is_float = true;
                    j = k;
                    while (j < L->len && isdigit((unsigned char)L->src[j])) j++;
                }
            }
            char num[64];
            size_t n = 0;
            for (size_t k = i; k < j && n < sizeof num - 1; k++)
                if (L->src[k] != '_') num[n++] = L->src[k];
            num[n] = 0;
            if (j - i >= sizeof num - 1) return lex_fail(L, i, "number too long");
            jtok t = {.kind = is_float ? JT_FLOAT : JT_INT, .line = line, .col = col};
            if (is_float) t.f = strtod(num, NULL);
            else {
                char *end;
                unsigned long long v = strtoull(num, &end, 10);
                if (v > INT64_MAX) return lex_fail(L, i, "integer literal too large");
                t.i = (int64_t)v;
            }
            if (!push(L, t)) return false;
            i = j;
            continue;
        }
        if (isalpha((unsigned char)c) || c == '_') {
            size_t j = i;
            while (j < L->len && (isalnum((unsigned char)L->src[j]) || L->src[j] == '_')) j++;
            jtok t = {.kind = JT_NAME, .line = line, .col = col, .len = j - i};
            t.text = malloc(j - i + 1);
            if (!t.text) return lex_fail(L, i, "out of memory");
            memcpy(t.text, L->src + i, j - i);
            t.text[j - i] = 0;
            if (!push(L, t)) return false;
            i = j;
            continue;
        }
        static const char *const ops[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ".",
                                          ",",  ":",  "|",  "~",  "+",  "-",  "*", "/", "%", "=", "<", ">"};
        const char *op = NULL;
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
            size_t ol = strlen(ops[k]);
            if (i + ol <= L->len && memcmp(L->src + i, ops[k], ol) == 0) {
                op = ops[k];
                break;
            }
        }
        if (!op) return lex_fail(L, i, "unexpected character '%c'", c);
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') depth++;
        if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && depth > 0) depth--;
        if (!push_simple(L, JT_OP, line, col, op)) return false;
        i += strlen(op);
    }
}

/* "{% raw %}" at tag: is this tag a raw opening? Sets *body_start past it. */
static bool match_word_tag(const lexer *L, size_t tag, const char *word, size_t *after, bool *strip_before,
                           bool *strip_after) {
    size_t i = tag + 2;
    *strip_before = i < L->len && L->src[i] == '-';
    if (i < L->len && (L->src[i] == '-' || L->src[i] == '+')) i++;
    while (i < L->len && is_space(L->src[i])) i++;
    size_t wl = strlen(word);
    if (i + wl > L->len || memcmp(L->src + i, word, wl) != 0) return false;
    i += wl;
    while (i < L->len && is_space(L->src[i])) i++;
    *strip_after = i < L->len && L->src[i] == '-';
    if (i < L->len && (L->src[i] == '-' || L->src[i] == '+')) i++;
    if (i + 1 < L->len && L->src[i] == '%' && L->src[i + 1] == '}') {
        *after = i + 2;
        return true;
    }
    return false;
}

bool jinja_lex(const char *src, size_t len, jtok_list *out, char *err, size_t err_size) {
    memset(out, 0, sizeof *out);
    lexer L = {.out = out, .err = err, .err_size = err_size, .line = 1};
    if (len > VT_JINJA_MAX_TEMPLATE) {
        snprintf(err, err_size, "line 1, column 1: template of %zu bytes (at most %u)", len, VT_JINJA_MAX_TEMPLATE);
        return false;
    }
    L.src = malloc(len + 1);
    if (!L.src) {
        snprintf(err, err_size, "line 1, column 1: out of memory");
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            L.src[L.len++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else L.src[L.len++] = src[i];
    }
    if (L.len > 0 && L.src[L.len - 1] == '\n') L.len--; /* keep_trailing_newline=False */
    L.src[L.len] = 0;

    size_t pos = 0;
    bool ok = true;
    while (ok && pos < L.len) {
        size_t tag = next_tag(&L, pos);
        size_t end = tag;
        /* As jinja2: the text starts a line when the previous tag's match
         * (with what trim_blocks or "-" consumed) ended in a newline. */
        bool line_starting = pos == 0 || L.src[pos - 1] == '\n';
        if (tag < L.len) trim_before(&L, pos, &end, tag, line_starting);
        ok = push_text(&L, line_at(&L, pos), L.src + pos, end - pos);
        if (!ok || tag >= L.len) break;
        char kind = L.src[tag + 1];
        int line = line_at(&L, tag);
        int col = col_at(&L, tag);
        if (kind == '#') {
            size_t i = tag + 2, close = L.len;
            for (; i + 1 < L.len; i++)
                if (L.src[i] == '#' && L.src[i + 1] == '}') {
                    close = i;
                    break;
                }
            if (close >= L.len) {
                ok = lex_fail(&L, tag, "unterminated comment (no \"#}\")");
                break;
            }
            bool strip = close > tag + 2 && L.src[close - 1] == '-';
            bool keep = close > tag + 2 && L.src[close - 1] == '+';
            pos = trim_after(&L, close + 2, strip, true, keep);
            continue;
        }
        size_t after;
        bool sb, sa;
        if (kind == '%' && match_word_tag(&L, tag, "raw", &after, &sb, &sa)) {
            size_t body = trim_after(&L, after, sa, true, false), j = body;
            bool found = false;
            size_t end_after = 0;
            bool esb = false, esa = false;
            for (; j + 1 < L.len; j++)
                if (L.src[j] == '{' && L.src[j + 1] == '%' && match_word_tag(&L, j, "endraw", &end_after, &esb, &esa)) {
                    found = true;
                    break;
                }
            if (!found) {
                ok = lex_fail(&L, tag, "{%% raw %%} without {%% endraw %%}");
                break;
            }
            size_t body_end = j;
            if (esb)
                while (body_end > body && is_space(L.src[body_end - 1])) body_end--;
            ok = push_text(&L, line, L.src + body, body_end - body);
            pos = trim_after(&L, end_after, esa, true, false);
            continue;
        }
        ok = push_simple(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, line, col, NULL);
        size_t p = tag + 2;
        if (p < L.len && (L.src[p] == '-' || L.src[p] == '+')) p++;
        size_t close_at = 0;
        bool strip = false, keep = false;
        if (ok) ok = lex_tag(&L, &p, kind == '%' ? '%' : '}', &close_at, &strip, &keep);
        if (ok) pos = trim_after(&L, close_at, strip, kind == '%', keep);
    }
    if (ok) ok = push_simple(&L, JT_EOF, line_at(&L, L.len), 1, NULL);
    free(L.src);
    if (!ok) jinja_tokens_free(out);
    return ok;
}

void jinja_tokens_free(jtok_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->t[i].text);
    free(l->t);
    memset(l, 0, sizeof *l);
}
