/* hostile_models.c — see hostile_models.h. */
#include "hostile_models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "synth.h"
#include "tokenizer_gguf_build.h"
#include "util.h"

vt_status hm_write_tiny(const char *path, const char *vocab_from, int32_t head_dim, vt_error *err) {
    vt_synth_params p = {
        .arch = "qwen3",
        .n_embd = HM_N_EMBD,
        .n_layer = 1,
        .n_head = HM_N_HEAD,
        .n_head_kv = 1,
        .head_dim = head_dim > 0 ? head_dim : HM_HEAD_DIM,
        .n_ff = 128,
        .n_vocab = HM_N_VOCAB,
        .n_ctx = 256,
        .tied_output = true,
        .type = "f32",
        .seed = 7,
        .vocab_from = vocab_from,
    };
    return vt_synth_write(&p, path, err);
}

/* GPT-2's byte-level character of a byte (see tests/test_tokenizer_bpe.c). */
static uint32_t byte_level_char(int byte) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        if (b == byte) return printable ? (uint32_t)b : 0x100u + (uint32_t)n;
        if (!printable) n++;
    }
    return 0;
}

vt_status hm_write_bpe_vocab(const char *path, vt_error *err) {
    tgb_buf b;
    tgb_gguf_start(&b);
    tgb_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    tgb_kv_str(&b, "tokenizer.ggml.pre", "qwen2");
    tgb_kv_arr_head(&b, "tokenizer.ggml.tokens", 8, 257);
    for (int i = 0; i < 256; i++) {
        uint32_t c = byte_level_char(i);
        char s[4] = {0};
        if (c < 0x80) s[0] = (char)c;
        else s[0] = (char)(0xC0 | (c >> 6)), s[1] = (char)(0x80 | (c & 0x3F));
        tgb_put_str(&b, s);
    }
    tgb_put_str(&b, "ab");
    tgb_kv_arr_head(&b, "tokenizer.ggml.token_type", 5, 257);
    for (int i = 0; i < 257; i++) {
        int32_t type = 1;
        tgb_put_bytes(&b, &type, 4);
    }
    tgb_kv_arr_head(&b, "tokenizer.ggml.merges", 8, 1);
    tgb_put_str(&b, "a b");
    tgb_kv_bool(&b, "tokenizer.ggml.add_bos_token", false);
    tgb_gguf_finish(&b);
    FILE *f = fopen(path, "wb");
    vt_status st = VT_OK;
    if (!f || fwrite(b.data, 1, b.n, f) != b.n) st = vt_fail(err, VT_ERR_IO, "cannot write %s", path);
    if (f && fclose(f) != 0) st = vt_fail(err, VT_ERR_IO, "cannot write %s", path);
    free(b.data);
    return st;
}

vt_status hm_copy_with_u32(const char *src, const char *dst, const char *key, uint32_t value, vt_error *err) {
    vt_gguf *g = NULL;
    vt_status st = vt_gguf_open(src, &g, err);
    if (st != VT_OK) return st;
    vt_gguf_writer *w = NULL;
    st = vt_gguf_writer_create(dst, &w, err);
    if (st != VT_OK) {
        vt_gguf_close(g);
        return st;
    }
    bool seen = false;
    for (int64_t i = 0; i < vt_gguf_n_kv(g); i++) {
        const vt_gguf_kv *kv = vt_gguf_kv_at(g, i);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)kv->key.len, kv->key.data);
        if (strcmp(name, key) == 0) {
            vt_gguf_writer_set_u32(w, name, value);
            seen = true;
        } else {
            vt_gguf_writer_set_value(w, name, &kv->value);
        }
    }
    if (!seen) vt_gguf_writer_set_u32(w, key, value);
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        vt_gguf_writer_add_tensor(w, t->name, t->dtype, t->ndim, t->ne);
    }
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        vt_gguf_writer_write_data(w, t->data, t->nbytes);
    }
    st = vt_gguf_writer_finish(w, err);
    vt_gguf_close(g);
    return st;
}

static vt_status write_bytes(const char *dst, const char *data, size_t n, vt_error *err) {
    FILE *f = fopen(dst, "wb");
    if (!f) return vt_fail(err, VT_ERR_IO, "cannot create %s", dst);
    size_t put = fwrite(data, 1, n, f);
    if (fclose(f) != 0 || put != n) return vt_fail(err, VT_ERR_IO, "cannot write %s", dst);
    return VT_OK;
}

vt_status hm_copy_with_raw_dtype(const char *src, const char *dst, const char *name, uint32_t dtype, vt_error *err) {
    size_t size = 0;
    char *data = vt_test_read_file(src, &size);
    if (!data) return vt_fail(err, VT_ERR_IO, "cannot read %s", src);
    /* tensor info: u64 name length, name, u32 n_dims, n_dims x u64 ne, u32 dtype, u64 offset */
    uint64_t len = strlen(name);
    size_t at = 0;
    bool found = false;
    for (; at + 8 + len + 4 <= size; at++) {
        if (memcmp(data + at, &len, 8) == 0 && memcmp(data + at + 8, name, len) == 0) {
            found = true;
            break;
        }
    }
    vt_status st = VT_OK;
    if (!found) {
        st = vt_fail(err, VT_ERR_FORMAT, "%s: tensor %s not found", src, name);
    } else {
        size_t dims_at = at + 8 + len;
        uint32_t n_dims;
        memcpy(&n_dims, data + dims_at, 4);
        size_t dtype_at = dims_at + 4 + 8 * (size_t)n_dims;
        if (n_dims < 1 || n_dims > 4 || dtype_at + 4 > size) st = vt_fail(err, VT_ERR_FORMAT, "%s: odd tensor info", src);
        else memcpy(data + dtype_at, &dtype, 4);
    }
    if (st == VT_OK) st = write_bytes(dst, data, size, err);
    free(data);
    return st;
}

vt_status hm_copy_truncated(const char *src, const char *dst, long bytes, vt_error *err) {
    size_t size = 0;
    char *data = vt_test_read_file(src, &size);
    if (!data) return vt_fail(err, VT_ERR_IO, "cannot read %s", src);
    vt_status st = bytes < 0 || (size_t)bytes > size ? vt_fail(err, VT_ERR_INVALID, "%s has only %zu bytes", src, size)
                                                     : write_bytes(dst, data, (size_t)bytes, err);
    free(data);
    return st;
}

int hm_count_lines(const char *s) {
    int n = 0;
    for (; s && *s; s++)
        if (*s == '\n' || s[1] == '\0') n++;
    return n;
}
