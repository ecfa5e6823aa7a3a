/* fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Any input must either fail to open with an error message, or open and then
 * survive every accessor: each key, each array element (nested too), each
 * typed get, and a read of the first and last byte of every tensor (ASan
 * catches a tensor that was let through pointing outside the input). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink; /* keeps the reads from being optimized away */

static void touch_value(const vt_gguf_value *v) {
    switch (v->type) {
    case VT_GGUF_STRING:
        if (v->v.str.len) sink += (uint8_t)v->v.str.data[0] + (uint8_t)v->v.str.data[v->v.str.len - 1];
        break;
    case VT_GGUF_ARRAY: {
        const vt_gguf_array *a = &v->v.arr;
        if (a->items) {
            for (uint64_t i = 0; i < a->n; i++) touch_value(&a->items[i]);
        } else {
            for (uint64_t i = 0; i < a->n; i++) {
                double d = vt_gguf_arr_f64(a, i);
                uint64_t bits;
                memcpy(&bits, &d, sizeof bits); /* a float-to-integer cast could be UB */
                sink += (uint64_t)vt_gguf_arr_i64(a, i) + bits;
            }
        }
        break;
    }
    default: sink += v->v.u64; break;
    }
}

/* The listing open (vt info's) over the same bytes: it refuses no more
 * than the strict one, and where the strict one accepts, it finds nothing
 * missing and the same tensors, every one with its data. */
static void check_listing(const uint8_t *data, size_t size, const vt_gguf *strict) {
    vt_gguf *g = NULL;
    vt_error err = {0};
    char missing[768];
    if (vt_gguf_open_memory_listing(data, size, &g, missing, sizeof missing, &err) != VT_OK) {
        if (strict || err.msg[0] == '\0') __builtin_trap();
        return;
    }
    if (strict && (missing[0] || vt_gguf_n_tensors(g) != vt_gguf_n_tensors(strict))) __builtin_trap();
    bool lacking = false;
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        lacking |= t->data == NULL;
        if (t->data && t->nbytes) /* what it hands out lies in the buffer (ASan reads it) */
            sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
    }
    if (lacking != (missing[0] != '\0')) __builtin_trap(); /* a tensor without data is named, and only then */
    vt_gguf_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    vt_gguf *g = NULL;
    vt_error err = {0};
    if (vt_gguf_open_memory(data, size, &g, &err) != VT_OK) {
        if (err.msg[0] == '\0') __builtin_trap(); /* every refusal says why */
        check_listing(data, size, NULL);
        return 0;
    }
    check_listing(data, size, g);
    for (int64_t i = 0; i < vt_gguf_n_kv(g); i++) {
        const vt_gguf_kv *kv = vt_gguf_kv_at(g, i);
        touch_value(&kv->value);
        /* look every key up again by name, through a NUL-terminated copy */
        char key[256];
        if (kv->key.len < sizeof key && !memchr(kv->key.data, 0, (size_t)kv->key.len)) {
            memcpy(key, kv->key.data, (size_t)kv->key.len);
            key[kv->key.len] = '\0';
            if (vt_gguf_find(g, key) != kv) __builtin_trap();
            uint32_t u32;
            int32_t i32;
            float f;
            bool b;
            vt_gguf_str s;
            const vt_gguf_array *a;
            vt_gguf_get_u32(g, key, &u32, NULL);
            vt_gguf_get_i32(g, key, &i32, NULL);
            vt_gguf_get_f32(g, key, &f, NULL);
            vt_gguf_get_bool(g, key, &b, NULL);
            vt_gguf_get_str(g, key, &s, NULL);
            vt_gguf_get_arr(g, key, -1, &a, NULL);
        }
    }
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        if (vt_gguf_find_tensor(g, t->name) != t) __builtin_trap();
        const uint8_t *p = t->data;
        if (t->nbytes == 0 || p < data || p + t->nbytes > data + size) __builtin_trap();
        sink += p[0] + p[t->nbytes - 1];
    }
    vt_gguf_close(g);
    return 0;
}
