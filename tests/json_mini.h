/* json_mini.h — a small JSON reader for test goldens (RFC 8259 values,
 * strings unescaped to UTF-8 including \uXXXX surrogate pairs). */
#ifndef VT_TEST_JSON_MINI_H
#define VT_TEST_JSON_MINI_H

#include <stdbool.h>
#include <stddef.h>

typedef enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    bool boolean;
    double number;
    char *str; /* JSON_STRING: NUL-terminated (may contain NULs: use len) */
    size_t len;
    json_value *items; /* JSON_ARRAY elements, JSON_OBJECT values */
    char **keys;       /* JSON_OBJECT keys (NUL-terminated) */
    size_t n;
};

/* Parse text[0..len) as one JSON value (surrounding whitespace allowed).
 * Returns false with a message in errbuf on bad input. */
bool json_parse(const char *text, size_t len, json_value *out, char *errbuf, size_t errcap);
void json_free(json_value *v);

/* Object member by key, or NULL. */
const json_value *json_get(const json_value *obj, const char *key);

/* Decode a hex string ("48656c") into a malloc'ed buffer; NULL on bad hex. */
char *json_hex_decode(const char *hex, size_t hex_len, size_t *out_len);

#endif
