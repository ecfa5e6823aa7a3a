/* gguf_writer.c — streaming GGUF v3 writer (see gguf_writer.h).
 *
 * Metadata is serialized into a memory buffer as it is set (it is small: a
 * 150k-token vocabulary is a few MB); tensor declarations are kept as a table.
 * When the first data byte arrives (or at finish) the header, the metadata and
 * the tensor table go out, then the data streams through a large stdio buffer,
 * each tensor padded to the alignment. Nothing of a tensor's data is kept, so
 * a 16 GB model needs no more memory than its metadata.
 *
 * The first error sticks: every later call returns it, and finish reports it. */
#include "gguf_writer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

#define WRITER_ALIGNMENT 32
#define WRITER_IO_BUFFER (4u << 20)
/* llama.cpp's GGML_MAX_NAME is 64 including the NUL: longer names would not load there. */
#define WRITER_MAX_TENSOR_NAME 63

typedef struct declared_tensor {
    char *name;
    int32_t dtype;
    int ndim;
    int64_t ne[4];
    uint64_t offset; /* in the data section */
    uint64_t nbytes;
} declared_tensor;

typedef struct byte_buf {
    uint8_t *p;
    size_t len, cap;
} byte_buf;

struct vt_gguf_writer {
    FILE *f;
    char *path;
    char *io_buffer;
    byte_buf meta; /* serialized key/value pairs */
    int64_t n_kv;
    char **keys; /* for duplicate detection */
    size_t keys_cap;
    declared_tensor *tensors;
    int64_t n_tensors;
    size_t tensors_cap;
    uint64_t data_size; /* total of the data section, padded */
    bool header_written;
    int64_t cur;          /* tensor receiving data */
    uint64_t cur_written; /* bytes of it so far */
    vt_status status;     /* first error (sticky) */
    char error[VT_ERROR_MSG_SIZE];
};

__attribute__((format(printf, 3, 4))) static vt_status fail(vt_gguf_writer *w, vt_status code, const char *fmt, ...) {
    if (w->status) return w->status; /* keep the first error */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->error, sizeof w->error, fmt, ap);
    va_end(ap);
    w->status = code;
    return code;
}

/* ---- metadata serialization ---- */

static bool buf_reserve(byte_buf *b, size_t extra) {
    if (extra <= b->cap - b->len) return true;
    if (extra > SIZE_MAX / 2 - b->len) return false;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static void buf_put(byte_buf *b, const void *data, size_t n) {
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void buf_put_le(byte_buf *b, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) b->p[b->len++] = (uint8_t)(v >> (8 * i));
}

static bool put_u32(byte_buf *b, uint32_t v) {
    if (!buf_reserve(b, 4)) return false;
    buf_put_le(b, v, 4);
    return true;
}

static bool put_u64(byte_buf *b, uint64_t v) {
    if (!buf_reserve(b, 8)) return false;
    buf_put_le(b, v, 8);
    return true;
}

static bool put_bytes(byte_buf *b, const void *data, size_t n) {
    if (!buf_reserve(b, n)) return false;
    if (n) buf_put(b, data, n);
    return true;
}

static bool put_str(byte_buf *b, const char *s, size_t n) { return put_u64(b, n) && put_bytes(b, s, n); }

/* Whether the writer can start a new key: not after data, not a duplicate. */
static vt_status begin_key(vt_gguf_writer *w, const char *key) {
    if (w->status) return w->status;
    if (!key || !*key) return fail(w, VT_ERR_INVALID, "gguf writer: empty or NULL key");
    if (w->header_written)
        return fail(w, VT_ERR_INVALID, "gguf writer: key '%s' set after tensor data started", key);
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) return fail(w, VT_ERR_INVALID, "gguf writer: duplicate key '%s'", key);
    if ((size_t)w->n_kv == w->keys_cap) {
        size_t cap = w->keys_cap ? 2 * w->keys_cap : 32;
        char **k = realloc(w->keys, cap * sizeof *k);
        if (!k) return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
        w->keys = k;
        w->keys_cap = cap;
    }
    if (!(w->keys[w->n_kv] = strdup(key))) return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
    w->n_kv++;
    if (!put_str(&w->meta, key, strlen(key))) return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
    return VT_OK;
}

static vt_status set_scalar(vt_gguf_writer *w, const char *key, vt_gguf_type type, uint64_t bits) {
    vt_status st = begin_key(w, key);
    if (st) return st;
    if (!put_u32(&w->meta, type) || !buf_reserve(&w->meta, 8))
        return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
    buf_put_le(&w->meta, bits, vt_gguf_scalar_size(type));
    return VT_OK;
}

vt_status vt_gguf_writer_set_u32(vt_gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, VT_GGUF_UINT32, v);
}

vt_status vt_gguf_writer_set_i32(vt_gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, VT_GGUF_INT32, (uint32_t)v);
}

vt_status vt_gguf_writer_set_u64(vt_gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, VT_GGUF_UINT64, v);
}

vt_status vt_gguf_writer_set_f32(vt_gguf_writer *w, const char *key, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return set_scalar(w, key, VT_GGUF_FLOAT32, bits);
}

vt_status vt_gguf_writer_set_bool(vt_gguf_writer *w, const char *key, bool v) {
    return set_scalar(w, key, VT_GGUF_BOOL, v ? 1 : 0);
}

vt_status vt_gguf_writer_set_str(vt_gguf_writer *w, const char *key, const char *v) {
    if (!v) return fail(w, VT_ERR_INVALID, "gguf writer: NULL string for key '%s'", key ? key : "?");
    vt_status st = begin_key(w, key);
    if (st) return st;
    if (!put_u32(&w->meta, VT_GGUF_STRING) || !put_str(&w->meta, v, strlen(v)))
        return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
    return VT_OK;
}

vt_status vt_gguf_writer_set_arr(vt_gguf_writer *w, const char *key, vt_gguf_type type, const void *data,
                                 uint64_t n) {
    size_t esize = vt_gguf_scalar_size(type);
    if (esize == 0)
        return fail(w, VT_ERR_INVALID, "gguf writer: key '%s': set_arr takes scalar elements, not %s",
                    key ? key : "?", vt_gguf_type_name(type));
    if (n && !data) return fail(w, VT_ERR_INVALID, "gguf writer: key '%s': NULL array data", key ? key : "?");
    if (n > SIZE_MAX / esize) return fail(w, VT_ERR_INVALID, "gguf writer: key '%s': array too large", key ? key : "?");
    vt_status st = begin_key(w, key);
    if (st) return st;
    if (!put_u32(&w->meta, VT_GGUF_ARRAY) || !put_u32(&w->meta, type) || !put_u64(&w->meta, n) ||
        !put_bytes(&w->meta, data, (size_t)n * esize))
        return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
    return VT_OK;
}

vt_status vt_gguf_writer_set_str_arr(vt_gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    if (n && !strs) return fail(w, VT_ERR_INVALID, "gguf writer: key '%s': NULL string array", key ? key : "?");
    for (uint64_t i = 0; i < n; i++)
        if (!strs[i])
            return fail(w, VT_ERR_INVALID, "gguf writer: key '%s': string %llu is NULL", key ? key : "?",
                        (unsigned long long)i);
    vt_status st = begin_key(w, key);
    if (st) return st;
    bool ok = put_u32(&w->meta, VT_GGUF_ARRAY) && put_u32(&w->meta, VT_GGUF_STRING) && put_u64(&w->meta, n);
    for (uint64_t i = 0; ok && i < n; i++) ok = put_str(&w->meta, strs[i], strlen(strs[i]));
    return ok ? VT_OK : fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
}

/* The body of a value (no type tag for array elements' own tags: see below). */
static bool put_value_body(vt_gguf_writer *w, const vt_gguf_value *v, int depth) {
    byte_buf *b = &w->meta;
    switch (v->type) {
    case VT_GGUF_STRING: return put_str(b, v->v.str.data, (size_t)v->v.str.len);
    case VT_GGUF_FLOAT32: {
        float f = (float)v->v.f64;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        return put_u32(b, bits);
    }
    case VT_GGUF_FLOAT64: {
        uint64_t bits;
        memcpy(&bits, &v->v.f64, sizeof bits);
        return put_u64(b, bits);
    }
    case VT_GGUF_BOOL: return put_bytes(b, &(uint8_t){v->v.b ? 1 : 0}, 1);
    case VT_GGUF_ARRAY: {
        const vt_gguf_array *a = &v->v.arr;
        if (depth > 64) return false;
        if (!put_u32(b, a->type) || !put_u64(b, a->n)) return false;
        size_t esize = vt_gguf_scalar_size(a->type);
        if (esize) return a->n <= SIZE_MAX / esize && put_bytes(b, a->data, (size_t)a->n * esize);
        for (uint64_t i = 0; i < a->n; i++) {
            if (a->items[i].type != a->type) return false;
            if (!put_value_body(w, &a->items[i], depth + 1)) return false;
        }
        return true;
    }
    default: {
        size_t n = vt_gguf_scalar_size(v->type);
        if (!n) return false;
        /* integers: the low n bytes of the (zero- or sign-extended) 64-bit value */
        return buf_reserve(b, n) && (buf_put_le(b, v->v.u64, n), true);
    }
    }
}

vt_status vt_gguf_writer_set_value(vt_gguf_writer *w, const char *key, const vt_gguf_value *v) {
    if (!v || (unsigned)v->type >= VT_GGUF_TYPE_COUNT)
        return fail(w, VT_ERR_INVALID, "gguf writer: key '%s': bad value", key ? key : "?");
    vt_status st = begin_key(w, key);
    if (st) return st;
    size_t mark = w->meta.len;
    if (!put_u32(&w->meta, v->type) || !put_value_body(w, v, 0)) {
        w->meta.len = mark;
        return fail(w, VT_ERR_INVALID,
                    "gguf writer: key '%s': value could not be serialized (out of memory, or an array whose items do "
                    "not match its element type)",
                    key);
    }
    return VT_OK;
}

/* ---- tensors ---- */

vt_status vt_gguf_writer_add_tensor(vt_gguf_writer *w, const char *name, int32_t dtype, int ndim,
                                    const int64_t *ne) {
    if (w->status) return w->status;
    if (!name || !*name || strlen(name) > WRITER_MAX_TENSOR_NAME)
        return fail(w, VT_ERR_INVALID, "gguf writer: tensor name '%s' must be 1..%d bytes", name ? name : "(null)",
                    WRITER_MAX_TENSOR_NAME);
    if (w->header_written)
        return fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s' declared after tensor data started", name);
    if (ndim < 1 || ndim > 4 || !ne)
        return fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s': ndim %d (must be 1..4)", name, ndim);
    if (!vt_dtype_is_valid(dtype))
        return fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s': invalid dtype %d", name, (int)dtype);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return fail(w, VT_ERR_INVALID, "gguf writer: duplicate tensor name '%s'", name);
    uint64_t rows = 1;
    for (int d = 0; d < ndim; d++) {
        if (ne[d] < 1) return fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s': dimension %d is %lld", name, d,
                                   (long long)ne[d]);
        if (d > 0) {
            if ((uint64_t)ne[d] > UINT64_MAX / rows)
                return fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s': size overflows", name);
            rows *= (uint64_t)ne[d];
        }
    }
    size_t row = vt_row_size(dtype, ne[0]);
    if (row == 0)
        return fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s': row of %lld is not whole blocks of %s", name,
                    (long long)ne[0], vt_dtype_name(dtype));
    if (rows > (UINT64_MAX / 2) / row) return fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s': size overflows", name);
    if ((size_t)w->n_tensors == w->tensors_cap) {
        size_t cap = w->tensors_cap ? 2 * w->tensors_cap : 64;
        declared_tensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t) return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
        w->tensors = t;
        w->tensors_cap = cap;
    }
    declared_tensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < 4; d++) t->ne[d] = d < ndim ? ne[d] : 1;
    t->nbytes = rows * row;
    t->offset = w->data_size;
    w->data_size += (t->nbytes + WRITER_ALIGNMENT - 1) / WRITER_ALIGNMENT * WRITER_ALIGNMENT;
    w->n_tensors++;
    return VT_OK;
}

/* ---- output ---- */

static vt_status write_out(vt_gguf_writer *w, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, w->f) != n)
        return fail(w, VT_ERR_IO, "gguf writer: %s: write failed: %s", w->path, strerror(errno));
    return VT_OK;
}

static vt_status write_zeros(vt_gguf_writer *w, size_t n) {
    static const uint8_t zeros[WRITER_ALIGNMENT];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        vt_status st = write_out(w, zeros, k);
        if (st) return st;
        n -= k;
    }
    return VT_OK;
}

static vt_status write_header(vt_gguf_writer *w) {
    byte_buf h = {0};
    bool ok = put_bytes(&h, "GGUF", 4) && put_u32(&h, 3) && put_u64(&h, (uint64_t)w->n_tensors) &&
              put_u64(&h, (uint64_t)w->n_kv);
    vt_status st = ok ? write_out(w, h.p, h.len) : fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
    uint64_t total = h.len + w->meta.len;
    if (!st) st = write_out(w, w->meta.p, w->meta.len);
    for (int64_t i = 0; !st && i < w->n_tensors; i++) {
        const declared_tensor *t = &w->tensors[i];
        h.len = 0;
        ok = put_str(&h, t->name, strlen(t->name)) && put_u32(&h, (uint32_t)t->ndim);
        for (int d = 0; ok && d < t->ndim; d++) ok = put_u64(&h, (uint64_t)t->ne[d]);
        ok = ok && put_u32(&h, (uint32_t)t->dtype) && put_u64(&h, t->offset);
        st = ok ? write_out(w, h.p, h.len) : fail(w, VT_ERR_NOMEM, "gguf writer: out of memory");
        total += h.len;
    }
    free(h.p);
    if (!st) st = write_zeros(w, (size_t)((WRITER_ALIGNMENT - total % WRITER_ALIGNMENT) % WRITER_ALIGNMENT));
    w->header_written = true;
    return st;
}

/* Pad the current (complete) tensor and move to the next. */
static vt_status next_tensor(vt_gguf_writer *w) {
    const declared_tensor *t = &w->tensors[w->cur];
    vt_status st = write_zeros(w, (size_t)((WRITER_ALIGNMENT - t->nbytes % WRITER_ALIGNMENT) % WRITER_ALIGNMENT));
    w->cur++;
    w->cur_written = 0;
    return st;
}

vt_status vt_gguf_writer_write_data(vt_gguf_writer *w, const void *data, size_t size) {
    if (w->status) return w->status;
    if (size && !data) return fail(w, VT_ERR_INVALID, "gguf writer: NULL data");
    if (!w->header_written) {
        vt_status st = write_header(w);
        if (st) return st;
    }
    const uint8_t *p = data;
    while (size > 0) {
        if (w->cur < w->n_tensors && w->cur_written == w->tensors[w->cur].nbytes) {
            vt_status st = next_tensor(w);
            if (st) return st;
        }
        if (w->cur >= w->n_tensors)
            return fail(w, VT_ERR_INVALID, "gguf writer: %zu bytes of data past the last declared tensor", size);
        uint64_t room = w->tensors[w->cur].nbytes - w->cur_written;
        size_t k = room < size ? (size_t)room : size;
        vt_status st = write_out(w, p, k);
        if (st) return st;
        w->cur_written += k;
        p += k;
        size -= k;
    }
    return VT_OK;
}

/* ---- lifecycle ---- */

vt_status vt_gguf_writer_create(const char *path, vt_gguf_writer **out, vt_error *err) {
    if (!path || !out) return vt_fail(err, VT_ERR_INVALID, "gguf writer: NULL argument");
    *out = NULL;
    vt_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return vt_fail(err, VT_ERR_NOMEM, "gguf writer: out of memory");
    w->path = strdup(path);
    w->io_buffer = malloc(WRITER_IO_BUFFER);
    if (!w->path || !w->io_buffer) {
        free(w->path);
        free(w->io_buffer);
        free(w);
        return vt_fail(err, VT_ERR_NOMEM, "gguf writer: out of memory");
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        vt_status st = vt_fail(err, VT_ERR_IO, "gguf writer: cannot create %s: %s", path, strerror(errno));
        free(w->path);
        free(w->io_buffer);
        free(w);
        return st;
    }
    setvbuf(w->f, w->io_buffer, _IOFBF, WRITER_IO_BUFFER);
    *out = w;
    return VT_OK;
}

static void destroy(vt_gguf_writer *w) {
    for (int64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w->meta.p);
    free(w->path);
    free(w->io_buffer); /* after fclose: stdio used it */
    free(w);
}

vt_status vt_gguf_writer_finish(vt_gguf_writer *w, vt_error *err) {
    if (!w) return vt_fail(err, VT_ERR_INVALID, "gguf writer: NULL writer");
    if (!w->status && !w->header_written) write_header(w);
    if (!w->status && w->n_tensors > 0) {
        if (w->cur < w->n_tensors && w->cur_written == w->tensors[w->cur].nbytes) next_tensor(w);
        if (!w->status && w->cur < w->n_tensors) {
            const declared_tensor *t = &w->tensors[w->cur];
            fail(w, VT_ERR_INVALID, "gguf writer: tensor '%s' got %llu of its %llu bytes (%lld tensors not written)",
                 t->name, (unsigned long long)w->cur_written, (unsigned long long)t->nbytes,
                 (long long)(w->n_tensors - w->cur));
        }
    }
    if (fclose(w->f) != 0) fail(w, VT_ERR_IO, "gguf writer: %s: close failed: %s", w->path, strerror(errno));
    w->f = NULL;
    vt_status st = w->status;
    if (st) {
        vt_fail(err, st, "%s", w->error);
        remove(w->path); /* never leave a half-written model behind */
    }
    destroy(w);
    return st;
}

void vt_gguf_writer_abort(vt_gguf_writer *w) {
    if (!w) return;
    fclose(w->f);
    remove(w->path);
    destroy(w);
}

const char *vt_gguf_writer_error(const vt_gguf_writer *w) { return w->status ? w->error : ""; }
