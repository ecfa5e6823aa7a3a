/* tokenizer_gguf_build.c — see tokenizer_gguf_build.h. */
#include "tokenizer_gguf_build.h"

#include <stdlib.h>
#include <string.h>

void tgb_put_bytes(tgb_buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->data = realloc(b->data, b->cap);
        if (!b->data) abort();
    }
    memcpy(b->data + b->n, p, n);
    b->n += n;
}
void tgb_put_u32(tgb_buf *b, uint32_t v) { tgb_put_bytes(b, &v, 4); }
void tgb_put_u64(tgb_buf *b, uint64_t v) { tgb_put_bytes(b, &v, 8); }
void tgb_put_str(tgb_buf *b, const char *s) {
    tgb_put_u64(b, strlen(s));
    tgb_put_bytes(b, s, strlen(s));
}

/* GGUF v3 header with no tensors; n_kv is patched by tgb_gguf_finish. */
void tgb_gguf_start(tgb_buf *b) {
    memset(b, 0, sizeof *b);
    tgb_put_bytes(b, "GGUF", 4);
    tgb_put_u32(b, 3);
    tgb_put_u64(b, 0);
    tgb_put_u64(b, 0);
}
void tgb_gguf_finish(tgb_buf *b) { memcpy(b->data + 16, &b->n_kv, 8); }

void tgb_kv_str(tgb_buf *b, const char *key, const char *value) {
    tgb_put_str(b, key);
    tgb_put_u32(b, 8);
    tgb_put_str(b, value);
    b->n_kv++;
}
void tgb_kv_bool(tgb_buf *b, const char *key, bool value) {
    tgb_put_str(b, key);
    tgb_put_u32(b, 7);
    unsigned char v = value;
    tgb_put_bytes(b, &v, 1);
    b->n_kv++;
}
void tgb_kv_u32(tgb_buf *b, const char *key, uint32_t value) {
    tgb_put_str(b, key);
    tgb_put_u32(b, 4);
    tgb_put_u32(b, value);
    b->n_kv++;
}
void tgb_kv_arr_head(tgb_buf *b, const char *key, uint32_t elem_type, size_t n) {
    tgb_put_str(b, key);
    tgb_put_u32(b, 9);
    tgb_put_u32(b, elem_type);
    tgb_put_u64(b, n);
    b->n_kv++;
}

