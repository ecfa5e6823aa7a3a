/* gguf.h — GGUF reader (versions 2 and 3): mmap, full metadata, tensor table.
 *
 * Everything is validated at open: every length and offset is bounds checked
 * against the file, so accessors never fail on a file that opened. A bad file
 * gets an error naming what is wrong and where (byte offset, key, tensor).
 * Strings point into the mapping and are NOT NUL-terminated: use len. */
#ifndef VT_CORE_GGUF_H
#define VT_CORE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef enum vt_gguf_type {
    VT_GGUF_UINT8 = 0,
    VT_GGUF_INT8 = 1,
    VT_GGUF_UINT16 = 2,
    VT_GGUF_INT16 = 3,
    VT_GGUF_UINT32 = 4,
    VT_GGUF_INT32 = 5,
    VT_GGUF_FLOAT32 = 6,
    VT_GGUF_BOOL = 7,
    VT_GGUF_STRING = 8,
    VT_GGUF_ARRAY = 9,
    VT_GGUF_UINT64 = 10,
    VT_GGUF_INT64 = 11,
    VT_GGUF_FLOAT64 = 12,
    VT_GGUF_TYPE_COUNT = 13
} vt_gguf_type;

typedef struct vt_gguf_str {
    uint64_t len;
    const char *data; /* into the mapping; not NUL-terminated */
} vt_gguf_str;

typedef struct vt_gguf_value vt_gguf_value;

typedef struct vt_gguf_array {
    vt_gguf_type type; /* element type */
    uint64_t n;
    /* Scalar elements: `data` points at n packed little-endian values in the
     * mapping (possibly unaligned: read with memcpy or the accessors below).
     * STRING and ARRAY elements: `items` holds n parsed values. */
    const void *data;
    vt_gguf_value *items;
} vt_gguf_array;

struct vt_gguf_value {
    vt_gguf_type type;
    union {
        uint64_t u64; /* UINT8..UINT64 (zero-extended) */
        int64_t i64;  /* INT8..INT64 (sign-extended) */
        double f64;   /* FLOAT32, FLOAT64 */
        bool b;
        vt_gguf_str str;
        vt_gguf_array arr;
    } v;
};

typedef struct vt_gguf_kv {
    vt_gguf_str key;
    vt_gguf_value value;
    uint64_t offset; /* file offset of the key, for error messages */
} vt_gguf_kv;

typedef struct vt_gguf_tensor {
    char name[128];       /* NUL-terminated copy (GGUF names are <= 64 bytes by convention) */
    int32_t dtype;        /* a valid vt_dtype (checked at open) */
    int32_t ndim;         /* 1..4 */
    int64_t ne[4];        /* GGML order, unused dims = 1 */
    uint64_t offset;      /* relative to the start of the data section */
    size_t nbytes;        /* size in the file */
    const void *data;     /* into the mapping */
} vt_gguf_tensor;

typedef struct vt_gguf vt_gguf;

/* Open and validate a file (read-only mmap). */
vt_status vt_gguf_open(const char *path, vt_gguf **out, vt_error *err);
/* vt_gguf_open for listing a file whose tensors' data may be missing (a
 * download cut short): the header, metadata and tensor table as they are,
 * a tensor whose data lies past the file's end with data NULL, and in
 * missing the first such tensor's message ("" when none), where vt_gguf_open
 * fails with it. For showing a file (vt info), never for running it. */
vt_status vt_gguf_open_listing(const char *path, vt_gguf **out, char *missing, size_t missing_size, vt_error *err);
/* The same over a buffer (fuzzing). */
vt_status vt_gguf_open_memory_listing(const void *data, size_t size, vt_gguf **out, char *missing, size_t missing_size,
                                      vt_error *err);
/* Validate a buffer the caller keeps alive until close (fuzzing, tests). */
vt_status vt_gguf_open_memory(const void *data, size_t size, vt_gguf **out, vt_error *err);
void vt_gguf_close(vt_gguf *g);

uint32_t vt_gguf_version(const vt_gguf *g);
size_t vt_gguf_alignment(const vt_gguf *g);
/* Where the data section starts in the file: tensor offsets count from it. */
uint64_t vt_gguf_data_offset(const vt_gguf *g);
const char *vt_gguf_path(const vt_gguf *g); /* "<memory>" for open_memory */
size_t vt_gguf_file_size(const vt_gguf *g);
/* Tell the kernel this process no longer needs the whole pages inside
 * [data, data + size) of the file's mapping (madvise MADV_DONTNEED on the
 * page-aligned interior): they leave the process's resident set, stay
 * valid, and fault back in from the file if anything reads them again. The
 * mapping is read-only, so no content is lost. Returns the bytes advised: 0
 * for a buffer from open_memory, a range outside the mapping, a range
 * holding no whole page, or a refused advice. */
size_t vt_gguf_release_pages(const vt_gguf *g, const void *data, size_t size);
/* The file's mapping (NULL, 0 for open_memory): where its residency is measured. */
const void *vt_gguf_mapping(const vt_gguf *g, size_t *size);

int64_t vt_gguf_n_kv(const vt_gguf *g);
const vt_gguf_kv *vt_gguf_kv_at(const vt_gguf *g, int64_t i);
/* The key's entry, or NULL. */
const vt_gguf_kv *vt_gguf_find(const vt_gguf *g, const char *key);

/* Typed lookups. Return VT_OK and set *out; VT_ERR_FORMAT (err names the
 * key) if the key is absent, has an incompatible type or its value does not
 * fit; *out is then unchanged. An optional key is asked with vt_gguf_find()
 * first: absence is never told apart by status. VT_ERR_INVALID only for NULL
 * arguments. */
vt_status vt_gguf_get_u32(const vt_gguf *g, const char *key, uint32_t *out, vt_error *err);
vt_status vt_gguf_get_i32(const vt_gguf *g, const char *key, int32_t *out, vt_error *err);
vt_status vt_gguf_get_f32(const vt_gguf *g, const char *key, float *out, vt_error *err);
vt_status vt_gguf_get_bool(const vt_gguf *g, const char *key, bool *out, vt_error *err);
vt_status vt_gguf_get_str(const vt_gguf *g, const char *key, vt_gguf_str *out, vt_error *err);
/* An array of the given element type (any type if elem_type < 0). */
vt_status vt_gguf_get_arr(const vt_gguf *g, const char *key, int elem_type, const vt_gguf_array **out,
                          vt_error *err);
/* Element i of a scalar array as f64 / i64 (no bounds check beyond assert). */
double vt_gguf_arr_f64(const vt_gguf_array *a, uint64_t i);
int64_t vt_gguf_arr_i64(const vt_gguf_array *a, uint64_t i);
/* Compare a gguf string with a C string. */
bool vt_gguf_str_eq(vt_gguf_str s, const char *c);

int64_t vt_gguf_n_tensors(const vt_gguf *g);
const vt_gguf_tensor *vt_gguf_tensor_at(const vt_gguf *g, int64_t i);
const vt_gguf_tensor *vt_gguf_find_tensor(const vt_gguf *g, const char *name);

const char *vt_gguf_type_name(vt_gguf_type t);
/* Bytes of one scalar element as stored in the file; 0 for STRING, ARRAY and unknown types. */
size_t vt_gguf_scalar_size(vt_gguf_type t);

#endif
