/* json_mini.c — recursive-descent JSON reader for the test goldens. */
#include "json_mini.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *s;
    size_t len, pos;
    char *err;
    size_t errcap;
    int depth;
} parser;

static bool fail(parser *p, const char *what) {
    if (p->err && p->errcap) snprintf(p->err, p->errcap, "json: %s at offset %zu", what, p->pos);
    return false;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                               p->s[p->pos] == '\r'))
        p->pos++;
}

static bool literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return fail(p, "bad literal");
    p->pos += n;
    return true;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool read_u16(parser *p, unsigned *out) {
    if (p->len - p->pos < 4) return fail(p, "short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[p->pos + i]);
        if (h < 0) return fail(p, "bad \\u escape");
        v = v * 16 + (unsigned)h;
    }
    p->pos += 4;
    *out = v;
    return true;
}

static size_t put_utf8(char *o, unsigned c) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F)); o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

static bool parse_string(parser *p, char **out, size_t *out_len) {
    p->pos++; /* opening quote */
    /* unescaped output is never longer than the escaped input */
    char *o = malloc(p->len - p->pos + 1);
    if (!o) return fail(p, "out of memory");
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len) { free(o); return fail(p, "unterminated string"); }
        char c = p->s[p->pos++];
        if (c == '"') break;
        if (c != '\\') { o[n++] = c; continue; }
        if (p->pos >= p->len) { free(o); return fail(p, "bad escape"); }
        char e = p->s[p->pos++];
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned c1;
            if (!read_u16(p, &c1)) { free(o); return false; }
            if (c1 >= 0xD800 && c1 <= 0xDBFF && p->len - p->pos >= 6 && p->s[p->pos] == '\\' &&
                p->s[p->pos + 1] == 'u') {
                size_t save = p->pos;
                unsigned c2;
                p->pos += 2;
                if (!read_u16(p, &c2)) { free(o); return false; }
                if (c2 >= 0xDC00 && c2 <= 0xDFFF) c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
                else p->pos = save;
            }
            n += put_utf8(o + n, c1);
            break;
        }
        default: free(o); return fail(p, "bad escape");
        }
    }
    o[n] = '\0';
    *out = o;
    *out_len = n;
    return true;
}

static bool parse_value(parser *p, json_value *v);

static bool push_item(json_value *v, size_t *cap, json_value item, char *key) {
    if (v->n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        json_value *items = realloc(v->items, c * sizeof *items);
        if (!items) return false;
        v->items = items;
        if (v->type == JSON_OBJECT) {
            char **keys = realloc(v->keys, c * sizeof *keys);
            if (!keys) return false;
            v->keys = keys;
        }
        *cap = c;
    }
    v->items[v->n] = item;
    if (v->type == JSON_OBJECT) v->keys[v->n] = key;
    v->n++;
    return true;
}

static bool parse_container(parser *p, json_value *v, bool object) {
    char close = object ? '}' : ']';
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    p->pos++;
    size_t cap = 0;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return true; }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (object) {
            size_t klen;
            if (p->pos >= p->len || p->s[p->pos] != '"') return fail(p, "expected a key");
            if (!parse_string(p, &key, &klen)) return false;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') { free(key); return fail(p, "expected ':'"); }
            p->pos++;
        }
        json_value item;
        if (!parse_value(p, &item)) { free(key); return false; }
        if (!push_item(v, &cap, item, key)) { free(key); json_free(&item); return fail(p, "out of memory"); }
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') { p->pos++; continue; }
        if (p->pos < p->len && p->s[p->pos] == close) { p->pos++; return true; }
        return fail(p, "expected ',' or a closing bracket");
    }
}

static bool parse_value(parser *p, json_value *v) {
    memset(v, 0, sizeof *v);
    if (++p->depth > 64) return fail(p, "nesting too deep");
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "unexpected end");
    char c = p->s[p->pos];
    bool ok;
    if (c == '{' || c == '[') ok = parse_container(p, v, c == '{');
    else if (c == '"') { v->type = JSON_STRING; ok = parse_string(p, &v->str, &v->len); }
    else if (c == 't') { v->type = JSON_BOOL; v->boolean = true; ok = literal(p, "true"); }
    else if (c == 'f') { v->type = JSON_BOOL; ok = literal(p, "false"); }
    else if (c == 'n') { v->type = JSON_NULL; ok = literal(p, "null"); }
    else {
        char buf[64];
        size_t n = 0;
        while (p->pos + n < p->len && n < sizeof buf - 1 && strchr("+-0123456789.eE", p->s[p->pos + n]))
            buf[n] = p->s[p->pos + n], n++;
        buf[n] = '\0';
        char *end;
        v->type = JSON_NUMBER;
        v->number = strtod(buf, &end);
        ok = n > 0 && end == buf + n;
        if (!ok) fail(p, "bad number");
        p->pos += n;
    }
    p->depth--;
    if (!ok) json_free(v);
    return ok;
}

bool json_parse(const char *text, size_t len, json_value *out, char *errbuf, size_t errcap) {
    parser p = {text, len, 0, errbuf, errcap, 0};
    if (!parse_value(&p, out)) return false;
    skip_ws(&p);
    if (p.pos != len) {
        json_free(out);
        return fail(&p, "trailing characters");
    }
    return true;
}

void json_free(json_value *v) {
    if (!v) return;
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        json_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    memset(v, 0, sizeof *v);
}

const json_value *json_get(const json_value *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

char *json_hex_decode(const char *hex, size_t hex_len, size_t *out_len) {
    if (hex_len % 2) return NULL;
    char *o = malloc(hex_len / 2 + 1);
    if (!o) return NULL;
    for (size_t i = 0; i < hex_len / 2; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) { free(o); return NULL; }
        o[i] = (char)(hi * 16 + lo);
    }
    o[hex_len / 2] = '\0';
    *out_len = hex_len / 2;
    return o;
}
