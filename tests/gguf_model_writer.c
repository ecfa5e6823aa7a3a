/* gguf_model_writer.c — see gguf_model_writer.h. */
#include "gguf_model_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

vt_status gmw_set_vocab(vt_gguf_writer *w, const gmw_vocab *v) {
    vt_status st = vt_gguf_writer_set_str(w, "tokenizer.ggml.model", v->model);
    if (st == VT_OK && v->pre) st = vt_gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre);
    if (st == VT_OK) st = vt_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", v->tokens, v->n_tokens);
    if (st == VT_OK && v->scores)
        st = vt_gguf_writer_set_arr(w, "tokenizer.ggml.scores", VT_GGUF_FLOAT32, v->scores, v->n_tokens);
    if (st == VT_OK && v->types)
        st = vt_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", VT_GGUF_INT32, v->types, v->n_tokens);
    if (st == VT_OK && v->n_merges)
        st = vt_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", v->merges, v->n_merges);
    return st;
}

void gmw_byte_level_char(int byte, char out[4]) {
    uint32_t c = 0;
    int n_unprintable = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        if (b == byte) {
            c = printable ? (uint32_t)b : 0x100u + (uint32_t)n_unprintable;
            break;
        }
        if (!printable) n_unprintable++;
    }
    memset(out, 0, 4);
    if (c < 0x80) {
        out[0] = (char)c;
    } else { /* every character of the alphabet is below U+0800: two bytes */
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
    }
}

vt_status gmw_set_byte_level_bpe(vt_gguf_writer *w, const gmw_bpe_vocab *v) {
    size_t n = 256 + v->n_extra;
    char(*chars)[4] = malloc(256 * sizeof *chars);
    const char **tokens = malloc(n * sizeof *tokens);
    int32_t *types = malloc(n * sizeof *types);
    vt_status st = VT_ERR_NOMEM;
    if (chars && tokens && types) {
        for (int b = 0; b < 256; b++) {
            gmw_byte_level_char(b, chars[b]);
            tokens[b] = chars[b];
            types[b] = GMW_TOKEN_NORMAL;
        }
        for (size_t i = 0; i < v->n_extra; i++) {
            tokens[256 + i] = v->extra_tokens[i];
            types[256 + i] = v->extra_types ? v->extra_types[i] : GMW_TOKEN_NORMAL;
        }
        gmw_vocab vocab = {.model = "gpt2",
                           .pre = v->pre,
                           .tokens = tokens,
                           .types = types,
                           .n_tokens = n,
                           .merges = v->merges,
                           .n_merges = v->n_merges};
        st = gmw_set_vocab(w, &vocab);
    }
    free(chars);
    free(tokens);
    free(types);
    return st;
}

vt_status gmw_create_numbered(const char *dir, const char *stem, char *path, size_t size, vt_gguf_writer **w,
                              vt_error *err) {
    static unsigned n_created;
    int n = snprintf(path, size, "%s/%s-%u.gguf", dir, stem, n_created++);
    if (n < 0 || (size_t)n >= size) return vt_fail(err, VT_ERR_INVALID, "path %s/%s-N.gguf is too long", dir, stem);
    return vt_gguf_writer_create(path, w, err);
}

vt_status gmw_finish(vt_gguf_writer *w, vt_error *err) {
    const char *why = vt_gguf_writer_error(w);
    if (why && why[0]) {
        vt_status st = vt_fail(err, VT_ERR_INVALID, "test GGUF writer: %s", why);
        vt_gguf_writer_abort(w);
        return st;
    }
    return vt_gguf_writer_finish(w, err);
}

/* src copied to dst with key set to value (added when src lacks it) and, when
 * extra is given, one tensor more. */
static vt_status copy_with(const char *src, const char *dst, const char *key, uint32_t value, const gmw_tensor *extra,
                           vt_error *err) {
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
        if (key && strcmp(name, key) == 0) {
            vt_gguf_writer_set_u32(w, name, value);
            seen = true;
        } else {
            vt_gguf_writer_set_value(w, name, &kv->value);
        }
    }
    if (key && !seen) vt_gguf_writer_set_u32(w, key, value);
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        vt_gguf_writer_add_tensor(w, t->name, t->dtype, t->ndim, t->ne);
    }
    if (extra) vt_gguf_writer_add_tensor(w, extra->name, VT_F32, extra->ndim, extra->ne);
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        vt_gguf_writer_write_data(w, t->data, t->nbytes);
    }
    if (extra) {
        size_t n = 1;
        for (int d = 0; d < extra->ndim; d++) n *= (size_t)extra->ne[d];
        vt_gguf_writer_write_data(w, extra->data, n * sizeof(float));
    }
    st = gmw_finish(w, err);
    vt_gguf_close(g);
    return st;
}

vt_status gmw_copy_with_u32(const char *src, const char *dst, const char *key, uint32_t value, vt_error *err) {
    return copy_with(src, dst, key, value, NULL, err);
}

vt_status gmw_copy_with_tensor(const char *src, const char *dst, const gmw_tensor *extra, vt_error *err) {
    return copy_with(src, dst, NULL, 0, extra, err);
}

static vt_status write_bytes(const char *dst, const void *data, size_t n, vt_error *err) {
    FILE *f = fopen(dst, "wb");
    if (!f) return vt_fail(err, VT_ERR_IO, "cannot create %s", dst);
    size_t put = fwrite(data, 1, n, f);
    if (fclose(f) != 0 || put != n) return vt_fail(err, VT_ERR_IO, "cannot write %s", dst);
    return VT_OK;
}

/* src's bytes, through the reader's mapping (a copy the caller frees): what
 * the raw edits start from is a file the reader accepts. */
static uint8_t *read_image(const char *src, size_t *size, vt_error *err) {
    vt_gguf *g = NULL;
    if (vt_gguf_open(src, &g, err) != VT_OK) return NULL;
    const void *mapping = vt_gguf_mapping(g, size);
    uint8_t *copy = mapping ? malloc(*size ? *size : 1) : NULL;
    if (copy) memcpy(copy, mapping, *size);
    else vt_fail(err, VT_ERR_NOMEM, "cannot copy %s", src);
    vt_gguf_close(g);
    return copy;
}

vt_status gmw_copy_truncated(const char *src, const char *dst, long bytes, vt_error *err) {
    size_t size = 0;
    uint8_t *image = read_image(src, &size, err);
    if (!image) return err ? err->code : VT_ERR_IO;
    vt_status st = bytes < 0 || (size_t)bytes > size ? vt_fail(err, VT_ERR_INVALID, "%s has only %zu bytes", src, size)
                                                     : write_bytes(dst, image, (size_t)bytes, err);
    free(image);
    return st;
}

vt_status gmw_copy_with_raw_dtype(const char *src, const char *dst, const char *name, uint32_t dtype, vt_error *err) {
    size_t size = 0;
    uint8_t *image = read_image(src, &size, err);
    if (!image) return err ? err->code : VT_ERR_IO;
    char where[300];
    snprintf(where, sizeof where, "dtype:%s", name);
    size_t at = gmw_offset_of(image, size, where);
    vt_status st = VT_OK;
    if (at == SIZE_MAX || at + 4 > size) {
        st = vt_fail(err, VT_ERR_FORMAT, "%s: tensor %s not found", src, name);
    } else {
        gmw_put_le(image + at, dtype, 4);
        st = write_bytes(dst, image, size, err);
    }
    free(image);
    return st;
}

void gmw_put_le(uint8_t *at, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) at[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)at[i] << (8 * i);
    return v;
}

/* Offset of the 8-byte length of the first length-prefixed string equal to s. */
static size_t find_string(const uint8_t *image, size_t size, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i + 8 + n <= size; i++)
        if (get_le(image + i, 8) == n && memcmp(image + i + 8, s, n) == 0) return i;
    return SIZE_MAX;
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

size_t gmw_offset_of(const uint8_t *image, size_t size, const char *where) {
    static const struct {
        const char *name;
        size_t at;
    } header[] = {{"magic", 0}, {"version", 4}, {"n_tensors", 8}, {"n_kv", 16}};
    for (size_t i = 0; i < sizeof header / sizeof header[0]; i++)
        if (strcmp(where, header[i].name) == 0) return header[i].at;
    if (strcmp(where, "eof") == 0) return size;
    const char *colon = strchr(where, ':');
    if (!colon) return SIZE_MAX;
    const char *name = colon + 1;
    if (starts_with(where, "data:")) {
        vt_gguf *g = NULL;
        if (vt_gguf_open_memory(image, size, &g, NULL) != VT_OK) return SIZE_MAX;
        const vt_gguf_tensor *t = vt_gguf_find_tensor(g, name);
        size_t at = t ? (size_t)((const uint8_t *)t->data - image) : SIZE_MAX;
        vt_gguf_close(g);
        return at;
    }
    size_t at = find_string(image, size, name);
    if (at == SIZE_MAX) return SIZE_MAX;
    size_t after = at + 8 + strlen(name); /* the value type of a key, the ndim of a tensor */
    if (starts_with(where, "key:") || starts_with(where, "name:")) return at;
    if (starts_with(where, "type:") || starts_with(where, "ndim:")) return after;
    if (starts_with(where, "val:") || starts_with(where, "ne:")) return after + 4;
    if (after + 4 > size) return SIZE_MAX;
    uint64_t ndim = get_le(image + after, 4);
    if (ndim > 4) return SIZE_MAX;
    if (starts_with(where, "dtype:")) return after + 4 + 8 * (size_t)ndim;
    if (starts_with(where, "off:")) return after + 8 + 8 * (size_t)ndim;
    return SIZE_MAX;
}
