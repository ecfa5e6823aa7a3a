/* tokenizer_gguf_build.h — build small GGUF files in memory for tokenizer
 * tests (vocab-only: metadata, no tensors). */
#ifndef VT_TEST_TOKENIZER_GGUF_BUILD_H
#define VT_TEST_TOKENIZER_GGUF_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tgb_buf {
    unsigned char *data; /* malloc'ed; free() it */
    size_t n, cap;
    uint64_t n_kv;
} tgb_buf;

void tgb_put_bytes(tgb_buf *b, const void *p, size_t n);
void tgb_put_u32(tgb_buf *b, uint32_t v);
void tgb_put_u64(tgb_buf *b, uint64_t v);
void tgb_put_str(tgb_buf *b, const char *s); /* GGUF string: u64 length + bytes */

/* GGUF v3 header with no tensors; tgb_gguf_finish patches in the key count. */
void tgb_gguf_start(tgb_buf *b);
void tgb_gguf_finish(tgb_buf *b);

void tgb_kv_str(tgb_buf *b, const char *key, const char *value);
void tgb_kv_bool(tgb_buf *b, const char *key, bool value);
void tgb_kv_u32(tgb_buf *b, const char *key, uint32_t value);
/* An array key's header; the caller then writes n elements of elem_type
 * (GGUF type ids: 4 u32, 5 i32, 6 f32, 8 string). */
void tgb_kv_arr_head(tgb_buf *b, const char *key, uint32_t elem_type, size_t n);

#endif
