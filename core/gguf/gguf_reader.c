/* gguf_reader.c — parse and validate a GGUF v2/v3 file (see gguf.h).
 *
 * File layout (little-endian throughout):
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 type | value }
 *   n_tensors x { string name | u32 ndim | u64 ne[ndim] | u32 dtype | u64 offset }
 *   padding to general.alignment | data section (tensor offsets are relative to it)
 * A string is u64 length + bytes; an array is u32 element type + u64 count + elements.
 * v1 used u32 counts and lengths and is refused; v2 and v3 share this layout.
 *
 * Everything is checked here, once, so the accessors never fail on an open
 * file. Every count read from the file is bounded by the bytes left before
 * anything is allocated for it, so a hostile header cannot make us allocate
 * more than a small multiple of the file's own size. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quant.h"

/* Limits on what a sane file holds. They are far above any real model and
 * exist so hostile counts fail early with a clear message. */
#define GGUF_MAX_TENSORS (1u << 20)
#define GGUF_MAX_KV (1u << 20)
#define GGUF_MAX_STRING (1u << 24)     /* bytes in one string */
#define GGUF_MAX_ARRAY_DEPTH 8         /* arrays of arrays of ... */
#define GGUF_MAX_TENSOR_NAME 127       /* fits vt_gguf_tensor.name with its NUL */
#define GGUF_MAX_ALIGNMENT (1u << 24)
#define GGUF_DEFAULT_ALIGNMENT 32

/* Smallest encodings, used to bound counts by the bytes left. */
#define GGUF_MIN_KV_BYTES 13     /* u64 key length + u32 type + 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 32 /* u64 name length + u32 ndim + one u64 dim + u32 type + u64 offset */

typedef struct hash_index {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    uint32_t mask;   /* capacity - 1 (capacity a power of two) */
} hash_index;

struct vt_gguf {
    const uint8_t *base;
    size_t size;
    bool mapped; /* base is our mmap (unmap at close) */
    char *path;
    uint32_t version;
    size_t alignment;
    uint64_t data_offset; /* start of the data section */
    int64_t n_kv;
    vt_gguf_kv *kvs;
    int64_t n_tensors;
    vt_gguf_tensor *tensors;
    hash_index kv_index;
    hash_index tensor_index;
    /* opened for listing (vt_gguf_open_listing): a tensor whose data lies
     * outside the file gets data NULL and the first such message goes in
     * missing, rather than failing the open */
    bool listing;
    char missing[512];
};

/* ---- reading cursor ---- */

typedef struct cursor {
    const uint8_t *base;
    size_t size;
    size_t off;
    vt_error *err;
    char ctx[200]; /* what is being read, for truncation messages */
} cursor;

static size_t cursor_left(const cursor *c) { return c->size - c->off; }

static vt_status need(cursor *c, size_t n) {
    if (n <= cursor_left(c)) return VT_OK;
    return vt_fail(c->err, VT_ERR_FORMAT,
                   "gguf: truncated at offset %zu while reading %s (needs %zu bytes, file has %zu left)", c->off,
                   c->ctx, n, cursor_left(c));
}

static uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static vt_status read_uint(cursor *c, size_t n, uint64_t *out) {
    vt_status st = need(c, n);
    if (st) return st;
    *out = load_le(c->base + c->off, n);
    c->off += n;
    return VT_OK;
}

static vt_status read_u32(cursor *c, uint32_t *out) {
    uint64_t v = 0;
    vt_status st = read_uint(c, 4, &v);
    *out = (uint32_t)v;
    return st;
}

static vt_status read_u64(cursor *c, uint64_t *out) { return read_uint(c, 8, out); }

/* A string; its bytes stay in the mapping. */
static vt_status read_str(cursor *c, vt_gguf_str *out) {
    size_t at = c->off;
    uint64_t len = 0;
    vt_status st = read_u64(c, &len);
    if (st) return st;
    if (len > GGUF_MAX_STRING)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: string length %llu at offset %zu while reading %s exceeds the limit of %u bytes",
                       (unsigned long long)len, at, c->ctx, GGUF_MAX_STRING);
    st = need(c, (size_t)len);
    if (st) return st;
    out->len = len;
    out->data = (const char *)(c->base + c->off);
    c->off += (size_t)len;
    return VT_OK;
}

/* Print a gguf string for a message (truncated, non-printables as '?'). */
static const char *str_for_msg(vt_gguf_str s, char *buf, size_t size) {
    size_t n = s.len < size - 1 ? (size_t)s.len : size - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s.data[i];
        buf[i] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    buf[n] = '\0';
    return buf;
}

/* ---- value types ---- */

static const char *const type_names[VT_GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool",  "string", "array", "uint64", "int64", "float64",
};

const char *vt_gguf_type_name(vt_gguf_type t) {
    if ((unsigned)t >= VT_GGUF_TYPE_COUNT) return "?";
    return type_names[t];
}

size_t vt_gguf_scalar_size(vt_gguf_type t) {
    switch (t) {
    case VT_GGUF_UINT8:
    case VT_GGUF_INT8:
    case VT_GGUF_BOOL: return 1;
    case VT_GGUF_UINT16:
    case VT_GGUF_INT16: return 2;
    case VT_GGUF_UINT32:
    case VT_GGUF_INT32:
    case VT_GGUF_FLOAT32: return 4;
    case VT_GGUF_UINT64:
    case VT_GGUF_INT64:
    case VT_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static bool type_is_signed(vt_gguf_type t) {
    return t == VT_GGUF_INT8 || t == VT_GGUF_INT16 || t == VT_GGUF_INT32 || t == VT_GGUF_INT64;
}

static bool type_is_unsigned(vt_gguf_type t) {
    return t == VT_GGUF_UINT8 || t == VT_GGUF_UINT16 || t == VT_GGUF_UINT32 || t == VT_GGUF_UINT64;
}

/* Decode one little-endian scalar of type t at p into a value. */
static void decode_scalar(vt_gguf_type t, const uint8_t *p, vt_gguf_value *v) {
    size_t n = vt_gguf_scalar_size(t);
    uint64_t raw = load_le(p, n);
    v->type = t;
    if (type_is_unsigned(t)) {
        v->v.u64 = raw;
    } else if (type_is_signed(t)) {
        unsigned shift = (unsigned)(64 - 8 * n);
        /* sign-extend through the top bits (arithmetic shift of a signed value) */
        v->v.i64 = shift ? (int64_t)(raw << shift) >> shift : (int64_t)raw;
    } else if (t == VT_GGUF_FLOAT32) {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, sizeof f);
        v->v.f64 = f;
    } else if (t == VT_GGUF_FLOAT64) {
        memcpy(&v->v.f64, &raw, sizeof raw);
    } else { /* BOOL */
        v->v.b = raw != 0;
    }
}

static void free_value(vt_gguf_value *v) {
    if (v->type != VT_GGUF_ARRAY || !v->v.arr.items) return;
    if (v->v.arr.type == VT_GGUF_ARRAY)
        for (uint64_t i = 0; i < v->v.arr.n; i++) free_value(&v->v.arr.items[i]);
    free(v->v.arr.items);
    v->v.arr.items = NULL;
}

static vt_status read_value(cursor *c, vt_gguf_type type, int depth, vt_gguf_value *out);

/* An array body (element type, count, elements) at nesting depth `depth`. */
static vt_status read_array(cursor *c, int depth, vt_gguf_array *arr) {
    size_t at = c->off;
    uint32_t elem_type = 0;
    uint64_t n = 0;
    vt_status st = read_u32(c, &elem_type);
    if (st) return st;
    if (elem_type >= VT_GGUF_TYPE_COUNT)
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: unknown array element type %u at offset %zu while reading %s",
                       elem_type, at, c->ctx);
    if (elem_type == VT_GGUF_ARRAY && depth + 1 >= GGUF_MAX_ARRAY_DEPTH)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: arrays nested deeper than %d levels at offset %zu while reading %s",
                       GGUF_MAX_ARRAY_DEPTH, at, c->ctx);
    st = read_u64(c, &n);
    if (st) return st;
    arr->type = (vt_gguf_type)elem_type;
    arr->n = n;
    arr->data = c->base + c->off;
    arr->items = NULL;

    /* Smallest encoding of one element bounds n by the bytes left. */
    size_t elem_min = vt_gguf_scalar_size(arr->type);
    if (arr->type == VT_GGUF_STRING) elem_min = 8;
    if (arr->type == VT_GGUF_ARRAY) elem_min = 12;
    if (n > cursor_left(c) / elem_min)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: array of %llu %s at offset %zu while reading %s cannot fit in the %zu bytes left "
                       "(truncated, or a lying length)",
                       (unsigned long long)n, vt_gguf_type_name(arr->type), at, c->ctx, cursor_left(c));

    if (elem_min == vt_gguf_scalar_size(arr->type)) { /* packed scalars: stay in the mapping */
        if (arr->type == VT_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (c->base[c->off + i] > 1)
                    return vt_fail(c->err, VT_ERR_FORMAT,
                                   "gguf: bool element %llu at offset %zu while reading %s is %u (not 0 or 1)",
                                   (unsigned long long)i, c->off + (size_t)i, c->ctx, c->base[c->off + i]);
        c->off += (size_t)n * elem_min;
        return VT_OK;
    }
    if (n == 0) return VT_OK;
    arr->items = calloc((size_t)n, sizeof *arr->items);
    if (!arr->items)
        return vt_fail(c->err, VT_ERR_NOMEM, "gguf: out of memory for %llu array items while reading %s",
                       (unsigned long long)n, c->ctx);
    for (uint64_t i = 0; i < n; i++) {
        st = read_value(c, arr->type, depth + 1, &arr->items[i]);
        if (st) {
            /* free what was read so far (items past i are zeroed: type UINT8, nothing to free) */
            for (uint64_t j = 0; j <= i; j++) free_value(&arr->items[j]);
            free(arr->items);
            arr->items = NULL;
            return st;
        }
    }
    return VT_OK;
}

static vt_status read_value(cursor *c, vt_gguf_type type, int depth, vt_gguf_value *out) {
    out->type = type;
    if (type == VT_GGUF_STRING) return read_str(c, &out->v.str);
    if (type == VT_GGUF_ARRAY) {
        out->v.arr.items = NULL;
        return read_array(c, depth, &out->v.arr);
    }
    size_t n = vt_gguf_scalar_size(type);
    size_t at = c->off;
    vt_status st = need(c, n);
    if (st) return st;
    if (type == VT_GGUF_BOOL && c->base[at] > 1)
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: bool at offset %zu while reading %s is %u (not 0 or 1)", at,
                       c->ctx, c->base[at]);
    decode_scalar(type, c->base + at, out);
    c->off += n;
    return VT_OK;
}

/* ---- hash index over names (FNV-1a, open addressing) ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static vt_status hash_init(hash_index *h, int64_t n) {
    uint32_t cap = 16;
    while ((int64_t)cap < 2 * n) cap <<= 1;
    h->slots = calloc(cap, sizeof *h->slots);
    h->mask = cap - 1;
    return h->slots ? VT_OK : VT_ERR_NOMEM;
}

typedef bool (*name_eq_fn)(const vt_gguf *g, uint32_t index, const char *name, size_t len);

static bool kv_name_eq(const vt_gguf *g, uint32_t i, const char *name, size_t len) {
    return g->kvs[i].key.len == len && memcmp(g->kvs[i].key.data, name, len) == 0;
}

static bool tensor_name_eq(const vt_gguf *g, uint32_t i, const char *name, size_t len) {
    return strlen(g->tensors[i].name) == len && memcmp(g->tensors[i].name, name, len) == 0;
}

/* Index of the entry named `name`, or -1. With insert >= 0 and no match, insert it. */
static int64_t hash_lookup(const vt_gguf *g, const hash_index *h, name_eq_fn eq, const char *name, size_t len,
                           int64_t insert) {
    if (!h->slots) return -1;
    uint32_t pos = (uint32_t)hash_bytes(name, len) & h->mask;
    for (;;) {
        uint32_t s = h->slots[pos];
        if (s == 0) {
            if (insert >= 0) h->slots[pos] = (uint32_t)insert + 1;
            return -1;
        }
        if (eq(g, s - 1, name, len)) return s - 1;
        pos = (pos + 1) & h->mask;
    }
}

/* ---- header, metadata, tensor table ---- */

static vt_status parse_header(vt_gguf *g, cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
    snprintf(c->ctx, sizeof c->ctx, "the magic");
    vt_status st = need(c, 4);
    if (st) return st;
    if (memcmp(c->base, "GGUF", 4) != 0) {
        char shown[8];
        vt_gguf_str s = {4, (const char *)c->base};
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: bad magic '%s' (bytes %02x %02x %02x %02x) at offset 0: not a GGUF file",
                       str_for_msg(s, shown, sizeof shown), c->base[0], c->base[1], c->base[2], c->base[3]);
    }
    c->off = 4;
    snprintf(c->ctx, sizeof c->ctx, "the version");
    if ((st = read_u32(c, &g->version))) return st;
    if (g->version == 1)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: version 1 is not supported (v1 used 32-bit counts; only versions 2 and 3 are read)");
    if (g->version != 2 && g->version != 3) {
        uint32_t swapped = __builtin_bswap32(g->version);
        if (swapped == 2 || swapped == 3)
            return vt_fail(c->err, VT_ERR_FORMAT,
                           "gguf: big-endian GGUF (version %u byte-swapped) is not supported", swapped);
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: unsupported version %u at offset 4 (only 2 and 3 are read)",
                       g->version);
    }
    snprintf(c->ctx, sizeof c->ctx, "the tensor count");
    if ((st = read_u64(c, n_tensors))) return st;
    snprintf(c->ctx, sizeof c->ctx, "the metadata count");
    if ((st = read_u64(c, n_kv))) return st;
    if (*n_tensors > GGUF_MAX_TENSORS)
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: tensor count %llu exceeds the limit of %u",
                       (unsigned long long)*n_tensors, GGUF_MAX_TENSORS);
    if (*n_kv > GGUF_MAX_KV)
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: metadata count %llu exceeds the limit of %u",
                       (unsigned long long)*n_kv, GGUF_MAX_KV);
    if (*n_kv > cursor_left(c) / GGUF_MIN_KV_BYTES)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: metadata count %llu cannot fit in the %zu bytes left after the header (truncated, or a "
                       "lying count)",
                       (unsigned long long)*n_kv, cursor_left(c));
    return VT_OK;
}

static vt_status parse_kvs(vt_gguf *g, cursor *c, uint64_t n_kv) {
    g->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
    if (!g->kvs || hash_init(&g->kv_index, (int64_t)n_kv))
        return vt_fail(c->err, VT_ERR_NOMEM, "gguf: out of memory for %llu metadata entries",
                       (unsigned long long)n_kv);
    char keybuf[96];
    for (uint64_t i = 0; i < n_kv; i++) {
        vt_gguf_kv *kv = &g->kvs[i];
        kv->offset = c->off;
        snprintf(c->ctx, sizeof c->ctx, "the key of metadata entry %llu", (unsigned long long)i);
        vt_status st = read_str(c, &kv->key);
        if (st) return st;
        if (kv->key.len == 0)
            return vt_fail(c->err, VT_ERR_FORMAT, "gguf: metadata entry %llu at offset %llu has an empty key",
                           (unsigned long long)i, (unsigned long long)kv->offset);
        str_for_msg(kv->key, keybuf, sizeof keybuf);
        if (hash_lookup(g, &g->kv_index, kv_name_eq, kv->key.data, (size_t)kv->key.len, (int64_t)i) >= 0)
            return vt_fail(c->err, VT_ERR_FORMAT, "gguf: duplicate key '%s' at offset %llu", keybuf,
                           (unsigned long long)kv->offset);
        g->n_kv = (int64_t)i + 1; /* counted now so close() frees its value on error */
        snprintf(c->ctx, sizeof c->ctx, "the type of key '%s'", keybuf);
        size_t type_at = c->off;
        uint32_t type = 0;
        if ((st = read_u32(c, &type))) return st;
        if (type >= VT_GGUF_TYPE_COUNT)
            return vt_fail(c->err, VT_ERR_FORMAT, "gguf: key '%s' has unknown value type %u at offset %zu", keybuf,
                           type, type_at);
        snprintf(c->ctx, sizeof c->ctx, "the value of key '%s'", keybuf);
        if ((st = read_value(c, (vt_gguf_type)type, 0, &kv->value))) return st;
    }
    return VT_OK;
}

static vt_status parse_alignment(vt_gguf *g, vt_error *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const vt_gguf_kv *kv = vt_gguf_find(g, "general.alignment");
    if (!kv) return VT_OK;
    uint64_t a = 0;
    if (type_is_unsigned(kv->value.type)) {
        a = kv->value.v.u64;
    } else if (type_is_signed(kv->value.type) && kv->value.v.i64 > 0) {
        a = (uint64_t)kv->value.v.i64;
    } else if (!type_is_signed(kv->value.type)) {
        return vt_fail(err, VT_ERR_FORMAT, "gguf: general.alignment has type %s, expected an integer",
                       vt_gguf_type_name(kv->value.type));
    }
    if (a == 0 || (a & (a - 1)) != 0 || a > GGUF_MAX_ALIGNMENT)
        return vt_fail(err, VT_ERR_FORMAT,
                       "gguf: general.alignment %lld is not a power of two between 1 and %u",
                       type_is_signed(kv->value.type) ? (long long)kv->value.v.i64 : (long long)a,
                       GGUF_MAX_ALIGNMENT);
    g->alignment = (size_t)a;
    return VT_OK;
}

/* Read one tensor info entry; checks that need only the entry itself. */
static vt_status parse_tensor_info(vt_gguf *g, cursor *c, uint64_t i, vt_gguf_tensor *t) {
    size_t at = c->off;
    vt_gguf_str name;
    snprintf(c->ctx, sizeof c->ctx, "the name of tensor %llu", (unsigned long long)i);
    vt_status st = read_str(c, &name);
    if (st) return st;
    if (name.len == 0 || name.len > GGUF_MAX_TENSOR_NAME)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: tensor %llu at offset %zu has a name of %llu bytes (must be 1..%d)",
                       (unsigned long long)i, at, (unsigned long long)name.len, GGUF_MAX_TENSOR_NAME);
    if (memchr(name.data, '\0', (size_t)name.len))
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: tensor %llu at offset %zu has a NUL byte in its name",
                       (unsigned long long)i, at);
    memcpy(t->name, name.data, (size_t)name.len);
    t->name[name.len] = '\0';

    snprintf(c->ctx, sizeof c->ctx, "the dimensions of tensor '%s'", t->name);
    uint32_t ndim = 0;
    if ((st = read_u32(c, &ndim))) return st;
    if (ndim < 1 || ndim > 4)
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: tensor '%s' has ndim %u (must be 1..4)", t->name, ndim);
    t->ndim = (int32_t)ndim;
    uint64_t nelem = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < ndim; d++) {
        uint64_t ne = 0;
        if ((st = read_u64(c, &ne))) return st;
        if (ne == 0)
            return vt_fail(c->err, VT_ERR_FORMAT, "gguf: tensor '%s' has dimension %u of size 0 (empty tensors are "
                           "refused)", t->name, d);
        if (ne > (uint64_t)INT64_MAX || nelem > (uint64_t)INT64_MAX / ne)
            return vt_fail(c->err, VT_ERR_FORMAT,
                           "gguf: tensor '%s' has dimensions whose element count overflows (dimension %u is %llu)",
                           t->name, d, (unsigned long long)ne);
        nelem *= ne;
        t->ne[d] = (int64_t)ne;
    }
    snprintf(c->ctx, sizeof c->ctx, "the type of tensor '%s'", t->name);
    uint32_t dtype = 0;
    if ((st = read_u32(c, &dtype))) return st;
    if (dtype > INT32_MAX || !vt_dtype_is_valid((int32_t)dtype))
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: tensor '%s' has unknown or unsupported type %u", t->name,
                       dtype);
    t->dtype = (int32_t)dtype;
    int64_t block = vt_dtype_block_length(t->dtype);
    if (block <= 0 || t->ne[0] % block != 0)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: tensor '%s' of type %s has rows of %lld elements, not a multiple of its block length "
                       "%lld",
                       t->name, vt_dtype_name(t->dtype), (long long)t->ne[0], (long long)block);
    /* nbytes = rows * row size; every step checked against size_t overflow */
    size_t row = vt_row_size(t->dtype, t->ne[0]);
    uint64_t rows = nelem / (uint64_t)t->ne[0];
    if (row == 0 || rows > SIZE_MAX / row)
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: tensor '%s' has a byte size that overflows", t->name);
    t->nbytes = row * (size_t)rows;
    snprintf(c->ctx, sizeof c->ctx, "the offset of tensor '%s'", t->name);
    if ((st = read_u64(c, &t->offset))) return st;
    if (t->offset % g->alignment != 0)
        return vt_fail(c->err, VT_ERR_FORMAT, "gguf: tensor '%s' has offset %llu, not a multiple of the alignment %zu",
                       t->name, (unsigned long long)t->offset, g->alignment);
    return VT_OK;
}

typedef struct tensor_span {
    uint64_t begin, end;
    int64_t index;
} tensor_span;

static int by_begin(const void *a, const void *b) {
    const tensor_span *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* No two tensors share bytes: each is read as its own dtype and shape, so
 * bytes two of them claimed would be one tensor's data read as another's
 * (and one prepared layout of them serve both). */
static vt_status check_no_overlap(const vt_gguf *g, vt_error *err) {
    if (g->n_tensors < 2) return VT_OK;
    tensor_span *s = malloc((size_t)g->n_tensors * sizeof *s);
    if (!s) return vt_fail(err, VT_ERR_NOMEM, "gguf: out of memory checking the tensors' data");
    for (int64_t i = 0; i < g->n_tensors; i++)
        s[i] = (tensor_span){g->tensors[i].offset, g->tensors[i].offset + g->tensors[i].nbytes, i};
    qsort(s, (size_t)g->n_tensors, sizeof *s, by_begin);
    vt_status st = VT_OK;
    for (int64_t i = 1; i < g->n_tensors && st == VT_OK; i++)
        if (s[i].begin < s[i - 1].end)
            st = vt_fail(err, VT_ERR_FORMAT,
                         "gguf: tensors '%s' and '%s' share data bytes (%llu..%llu and %llu..%llu of the data section)",
                         g->tensors[s[i - 1].index].name, g->tensors[s[i].index].name,
                         (unsigned long long)s[i - 1].begin, (unsigned long long)s[i - 1].end,
                         (unsigned long long)s[i].begin, (unsigned long long)s[i].end);
    free(s);
    return st;
}

/* Where the last tensor's data ends (UINT64_MAX past the representable):
 * a file shorter than that was cut off, which its error says. Reckoned only
 * for that error, not on every open. */
static uint64_t tensors_end(const vt_gguf *g) {
    uint64_t end = g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const vt_gguf_tensor *t = &g->tensors[i];
        const uint64_t at = t->offset <= UINT64_MAX - g->data_offset ? g->data_offset + t->offset : UINT64_MAX;
        const uint64_t e = t->nbytes <= UINT64_MAX - at ? at + t->nbytes : UINT64_MAX;
        if (e > end) end = e;
    }
    return end;
}

static vt_status parse_tensors(vt_gguf *g, cursor *c, uint64_t n_tensors) {
    if (n_tensors > cursor_left(c) / GGUF_MIN_TENSOR_BYTES)
        return vt_fail(c->err, VT_ERR_FORMAT,
                       "gguf: tensor count %llu cannot fit in the %zu bytes left at offset %zu (truncated, or a lying "
                       "count)",
                       (unsigned long long)n_tensors, cursor_left(c), c->off);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors || hash_init(&g->tensor_index, (int64_t)n_tensors))
        return vt_fail(c->err, VT_ERR_NOMEM, "gguf: out of memory for %llu tensors", (unsigned long long)n_tensors);
    for (uint64_t i = 0; i < n_tensors; i++) {
        vt_gguf_tensor *t = &g->tensors[i];
        vt_status st = parse_tensor_info(g, c, i, t);
        if (st) return st;
        g->n_tensors = (int64_t)i + 1;
        if (hash_lookup(g, &g->tensor_index, tensor_name_eq, t->name, strlen(t->name), (int64_t)i) >= 0)
            return vt_fail(c->err, VT_ERR_FORMAT, "gguf: duplicate tensor name '%s' (tensor %llu)", t->name,
                           (unsigned long long)i);
    }
    /* The data section starts at the next multiple of the alignment. */
    uint64_t end = c->off;
    g->data_offset = (end + g->alignment - 1) / g->alignment * g->alignment;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        vt_gguf_tensor *t = &g->tensors[i];
        uint64_t size = g->size;
        bool inside = g->data_offset <= size && t->offset <= size - g->data_offset &&
                      t->nbytes <= size - g->data_offset - t->offset;
        if (!inside && g->listing && g->missing[0]) { /* a listing names its first missing tensor only */
            t->data = NULL;
            continue;
        }
        if (!inside) {
            char cut[128] = "";
            const uint64_t data_end = tensors_end(g); /* a scan of every tensor: once, for the message */
            if (data_end != UINT64_MAX && data_end > size)
                snprintf(cut, sizeof cut, "; the tensors end at byte %llu, %llu bytes past the file's end: truncated?",
                         (unsigned long long)data_end, (unsigned long long)(data_end - size));
            vt_error outside = {0};
            if (t->offset <= UINT64_MAX - g->data_offset)
                vt_fail(&outside, VT_ERR_FORMAT,
                        "gguf: tensor '%s': data [%llu, %llu + %zu) lies outside the file (size %zu; data section "
                        "at %llu)%s",
                        t->name, (unsigned long long)(g->data_offset + t->offset),
                        (unsigned long long)(g->data_offset + t->offset), t->nbytes, g->size,
                        (unsigned long long)g->data_offset, cut);
            else
                vt_fail(&outside, VT_ERR_FORMAT,
                        "gguf: tensor '%s': data at offset %llu of the data section lies outside the file (size %zu)",
                        t->name, (unsigned long long)t->offset, g->size);
            if (!g->listing) return vt_fail(c->err, outside.code, "%s", outside.msg);
            snprintf(g->missing, sizeof g->missing, "%s", outside.msg);
            t->data = NULL;
            continue;
        }
        t->data = g->base + g->data_offset + t->offset;
    }
    return check_no_overlap(g, c->err);
}

static vt_status parse(vt_gguf *g, vt_error *err) {
    cursor c = {.base = g->base, .size = g->size, .off = 0, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    vt_status st = parse_header(g, &c, &n_tensors, &n_kv);
    if (!st) st = parse_kvs(g, &c, n_kv);
    if (!st) st = parse_alignment(g, err);
    if (!st) st = parse_tensors(g, &c, n_tensors);
    return st;
}

/* ---- open / close ---- */

static vt_status open_common(vt_gguf *g, vt_gguf **out, vt_error *err) {
    vt_status st = parse(g, err);
    if (st) {
        vt_gguf_close(g);
        return st;
    }
    *out = g;
    return VT_OK;
}

static vt_status open_memory(const void *data, size_t size, bool listing, vt_gguf **out, vt_error *err) {
    if (!out || (!data && size)) return vt_fail(err, VT_ERR_INVALID, "gguf: open_memory: NULL argument");
    *out = NULL;
    vt_gguf *g = calloc(1, sizeof *g);
    if (!g) return vt_fail(err, VT_ERR_NOMEM, "gguf: out of memory");
    static const uint8_t empty[1];
    g->base = data ? data : empty;
    g->size = size;
    g->listing = listing;
    return open_common(g, out, err);
}

vt_status vt_gguf_open_memory(const void *data, size_t size, vt_gguf **out, vt_error *err) {
    return open_memory(data, size, false, out, err);
}

/* What a listing open found missing, into the caller's buffer. */
static void copy_missing(const vt_gguf *g, const char *prefix, char *missing, size_t missing_size) {
    if (missing && missing_size && g->missing[0]) snprintf(missing, missing_size, "%s%s", prefix, g->missing);
}

vt_status vt_gguf_open_memory_listing(const void *data, size_t size, vt_gguf **out, char *missing, size_t missing_size,
                                      vt_error *err) {
    if (missing && missing_size) missing[0] = '\0';
    const vt_status st = open_memory(data, size, true, out, err);
    if (st == VT_OK) copy_missing(*out, "", missing, missing_size);
    return st;
}

static vt_status open_path(const char *path, bool listing, vt_gguf **out, vt_error *err) {
    if (!path || !out) return vt_fail(err, VT_ERR_INVALID, "gguf: open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return vt_fail(err, VT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return vt_fail(err, VT_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) { /* errno says nothing here: fstat succeeded */
        close(fd);
        return vt_fail(err, VT_ERR_IO, "%s: not a regular file (%s)", path,
                       S_ISDIR(sb.st_mode) ? "a directory" : "a device, pipe or socket");
    }
    vt_gguf *g = calloc(1, sizeof *g);
    char *path_copy = strdup(path);
    if (!g || !path_copy) {
        close(fd);
        free(g);
        free(path_copy);
        return vt_fail(err, VT_ERR_NOMEM, "gguf: out of memory");
    }
    g->path = path_copy;
    g->listing = listing;
    g->size = (size_t)sb.st_size;
    static const uint8_t empty[1];
    g->base = empty; /* an empty file: parse reports the truncated magic */
    if (g->size > 0) {
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            vt_gguf_close(g);
            return vt_fail(err, VT_ERR_IO, "%s: mmap of %lld bytes failed: %s", path, (long long)sb.st_size,
                           strerror(e));
        }
        g->base = m;
        g->mapped = true;
    }
    close(fd);
    vt_status st = open_common(g, out, err);
    if (st) vt_error_prefix(err, "%s: ", path);
    return st;
}

vt_status vt_gguf_open(const char *path, vt_gguf **out, vt_error *err) { return open_path(path, false, out, err); }

vt_status vt_gguf_open_listing(const char *path, vt_gguf **out, char *missing, size_t missing_size, vt_error *err) {
    if (missing && missing_size) missing[0] = '\0';
    const vt_status st = open_path(path, true, out, err);
    if (st == VT_OK) {
        char prefix[1100];
        snprintf(prefix, sizeof prefix, "%s: ", path);
        copy_missing(*out, prefix, missing, missing_size);
    }
    return st;
}

void vt_gguf_close(vt_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) free_value(&g->kvs[i].value);
    free(g->kvs);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->path);
    free(g);
}

/* ---- accessors ---- */

uint32_t vt_gguf_version(const vt_gguf *g) { return g->version; }
size_t vt_gguf_alignment(const vt_gguf *g) { return g->alignment; }
uint64_t vt_gguf_data_offset(const vt_gguf *g) { return g->data_offset; }
const char *vt_gguf_path(const vt_gguf *g) { return g->path ? g->path : "<memory>"; }
size_t vt_gguf_file_size(const vt_gguf *g) { return g->size; }

const void *vt_gguf_mapping(const vt_gguf *g, size_t *size) {
    if (size) *size = g->mapped ? g->size : 0;
    return g->mapped ? g->base : NULL;
}

size_t vt_gguf_release_pages(const vt_gguf *g, const void *data, size_t size) {
    if (!g || !g->mapped || !data || size == 0) return 0;
    const uintptr_t base = (uintptr_t)g->base, start = (uintptr_t)data;
    if (start < base || start - base > g->size || size > g->size - (start - base)) return 0;
    const long page_size = sysconf(_SC_PAGESIZE);
    if (page_size <= 0) return 0;
    const uintptr_t page = (uintptr_t)page_size;
    /* Only whole pages: the neighbours' bytes sharing a boundary page stay. */
    const uintptr_t first = (start + page - 1) / page * page, end = (start + size) / page * page;
    if (end <= first) return 0;
    /* Advice, not a requirement: on refusal the pages simply stay resident. */
    if (madvise((void *)first, end - first, MADV_DONTNEED) != 0) return 0;
    return end - first;
}
int64_t vt_gguf_n_kv(const vt_gguf *g) { return g->n_kv; }

const vt_gguf_kv *vt_gguf_kv_at(const vt_gguf *g, int64_t i) {
    return (i >= 0 && i < g->n_kv) ? &g->kvs[i] : NULL;
}

const vt_gguf_kv *vt_gguf_find(const vt_gguf *g, const char *key) {
    if (!key) return NULL;
    int64_t i = hash_lookup(g, &g->kv_index, kv_name_eq, key, strlen(key), -1);
    return i >= 0 ? &g->kvs[i] : NULL;
}

int64_t vt_gguf_n_tensors(const vt_gguf *g) { return g->n_tensors; }

const vt_gguf_tensor *vt_gguf_tensor_at(const vt_gguf *g, int64_t i) {
    return (i >= 0 && i < g->n_tensors) ? &g->tensors[i] : NULL;
}

const vt_gguf_tensor *vt_gguf_find_tensor(const vt_gguf *g, const char *name) {
    if (!name) return NULL;
    int64_t i = hash_lookup(g, &g->tensor_index, tensor_name_eq, name, strlen(name), -1);
    return i >= 0 ? &g->tensors[i] : NULL;
}

bool vt_gguf_str_eq(vt_gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.data, c, n) == 0;
}

/* The entry of key with a type mismatch / absence reported the typed-get way. */
static const vt_gguf_kv *find_for_get(const vt_gguf *g, const char *key, vt_error *err, vt_status *st) {
    const vt_gguf_kv *kv = vt_gguf_find(g, key);
    *st = kv ? VT_OK : vt_fail(err, VT_ERR_FORMAT, "gguf: key '%s' is absent", key);
    return kv;
}

static vt_status wrong_type(vt_error *err, const vt_gguf_kv *kv, const char *key, const char *expected) {
    return vt_fail(err, VT_ERR_FORMAT, "gguf: key '%s' has type %s, expected %s", key,
                   vt_gguf_type_name(kv->value.type), expected);
}

/* An integer value converted to [lo, hi], or VT_ERR_FORMAT naming the key. */
static vt_status get_int_in(const vt_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out, vt_error *err) {
    vt_status st;
    const vt_gguf_kv *kv = find_for_get(g, key, err, &st);
    if (!kv) return st;
    const vt_gguf_value *v = &kv->value;
    if (type_is_unsigned(v->type)) {
        if (v->v.u64 > (uint64_t)hi)
            return vt_fail(err, VT_ERR_FORMAT, "gguf: key '%s' value %llu is out of range [%lld, %lld]", key,
                           (unsigned long long)v->v.u64, (long long)lo, (long long)hi);
        *out = (int64_t)v->v.u64;
        return VT_OK;
    }
    if (type_is_signed(v->type)) {
        if (v->v.i64 < lo || v->v.i64 > hi)
            return vt_fail(err, VT_ERR_FORMAT, "gguf: key '%s' value %lld is out of range [%lld, %lld]", key,
                           (long long)v->v.i64, (long long)lo, (long long)hi);
        *out = v->v.i64;
        return VT_OK;
    }
    return wrong_type(err, kv, key, "an integer");
}

vt_status vt_gguf_get_u32(const vt_gguf *g, const char *key, uint32_t *out, vt_error *err) {
    int64_t v = 0;
    vt_status st = get_int_in(g, key, 0, UINT32_MAX, &v, err);
    if (!st) *out = (uint32_t)v;
    return st;
}

vt_status vt_gguf_get_i32(const vt_gguf *g, const char *key, int32_t *out, vt_error *err) {
    int64_t v = 0;
    vt_status st = get_int_in(g, key, INT32_MIN, INT32_MAX, &v, err);
    if (!st) *out = (int32_t)v;
    return st;
}

vt_status vt_gguf_get_f32(const vt_gguf *g, const char *key, float *out, vt_error *err) {
    vt_status st;
    const vt_gguf_kv *kv = find_for_get(g, key, err, &st);
    if (!kv) return st;
    if (kv->value.type != VT_GGUF_FLOAT32 && kv->value.type != VT_GGUF_FLOAT64)
        return wrong_type(err, kv, key, "float32 or float64");
    double d = kv->value.v.f64;
    if (isfinite(d) && fabs(d) > FLT_MAX)
        return vt_fail(err, VT_ERR_FORMAT, "gguf: key '%s' value %g does not fit in a float32", key, d);
    *out = (float)d;
    return VT_OK;
}

vt_status vt_gguf_get_bool(const vt_gguf *g, const char *key, bool *out, vt_error *err) {
    vt_status st;
    const vt_gguf_kv *kv = find_for_get(g, key, err, &st);
    if (!kv) return st;
    if (kv->value.type != VT_GGUF_BOOL) return wrong_type(err, kv, key, "bool");
    *out = kv->value.v.b;
    return VT_OK;
}

vt_status vt_gguf_get_str(const vt_gguf *g, const char *key, vt_gguf_str *out, vt_error *err) {
    vt_status st;
    const vt_gguf_kv *kv = find_for_get(g, key, err, &st);
    if (!kv) return st;
    if (kv->value.type != VT_GGUF_STRING) return wrong_type(err, kv, key, "string");
    *out = kv->value.v.str;
    return VT_OK;
}

vt_status vt_gguf_get_arr(const vt_gguf *g, const char *key, int elem_type, const vt_gguf_array **out,
                          vt_error *err) {
    vt_status st;
    const vt_gguf_kv *kv = find_for_get(g, key, err, &st);
    if (!kv) return st;
    if (kv->value.type != VT_GGUF_ARRAY) return wrong_type(err, kv, key, "array");
    if (elem_type >= 0 && kv->value.v.arr.type != (vt_gguf_type)elem_type)
        return vt_fail(err, VT_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected an array of %s", key,
                       vt_gguf_type_name(kv->value.v.arr.type), vt_gguf_type_name((vt_gguf_type)elem_type));
    *out = &kv->value.v.arr;
    return VT_OK;
}

static vt_gguf_value arr_elem(const vt_gguf_array *a, uint64_t i) {
    vt_gguf_value v = {0};
    size_t n = vt_gguf_scalar_size(a->type);
    if (n == 0 || i >= a->n) return v; /* not a scalar array: 0 */
    decode_scalar(a->type, (const uint8_t *)a->data + i * n, &v);
    return v;
}

double vt_gguf_arr_f64(const vt_gguf_array *a, uint64_t i) {
    vt_gguf_value v = arr_elem(a, i);
    if (type_is_unsigned(v.type)) return (double)v.v.u64;
    if (type_is_signed(v.type)) return (double)v.v.i64;
    if (v.type == VT_GGUF_BOOL) return v.v.b;
    return v.v.f64;
}

int64_t vt_gguf_arr_i64(const vt_gguf_array *a, uint64_t i) {
    vt_gguf_value v = arr_elem(a, i);
    if (type_is_unsigned(v.type)) return (int64_t)v.v.u64;
    if (type_is_signed(v.type)) return v.v.i64;
    if (v.type == VT_GGUF_BOOL) return v.v.b;
    /* floats: truncate toward zero; NaN and out-of-range values (UB to cast) become 0 */
    if (!(v.v.f64 > -9.2e18 && v.v.f64 < 9.2e18)) return 0;
    return (int64_t)v.v.f64;
}
