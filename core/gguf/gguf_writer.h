/* gguf_writer.h — streaming GGUF v3 writer.
 *
 * Usage: create, add metadata, declare every tensor (name, dtype, shape), then
 * write the tensors' data in declaration order (each exactly its size). The
 * header and tensor table are written when the first tensor's data arrives
 * (or at finish), so a 16 GB model streams tensor by tensor without holding it
 * in memory. Strings are copied. */
#ifndef VT_CORE_GGUF_WRITER_H
#define VT_CORE_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"

typedef struct vt_gguf_writer vt_gguf_writer;

vt_status vt_gguf_writer_create(const char *path, vt_gguf_writer **out, vt_error *err);

vt_status vt_gguf_writer_set_u32(vt_gguf_writer *w, const char *key, uint32_t v);
vt_status vt_gguf_writer_set_i32(vt_gguf_writer *w, const char *key, int32_t v);
vt_status vt_gguf_writer_set_u64(vt_gguf_writer *w, const char *key, uint64_t v);
vt_status vt_gguf_writer_set_f32(vt_gguf_writer *w, const char *key, float v);
vt_status vt_gguf_writer_set_bool(vt_gguf_writer *w, const char *key, bool v);
vt_status vt_gguf_writer_set_str(vt_gguf_writer *w, const char *key, const char *v);
/* Array of scalars (type UINT8..FLOAT64 except STRING/ARRAY); data packed little-endian. */
vt_status vt_gguf_writer_set_arr(vt_gguf_writer *w, const char *key, vt_gguf_type type, const void *data,
                                 uint64_t n);
vt_status vt_gguf_writer_set_str_arr(vt_gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Any value as the reader represents it (all 13 types, nested arrays, arrays
 * of strings): copies a key from an open file, or builds nested arrays. */
vt_status vt_gguf_writer_set_value(vt_gguf_writer *w, const char *key, const vt_gguf_value *v);

/* Declare a tensor; ne in GGML order, ndim 1..4. */
vt_status vt_gguf_writer_add_tensor(vt_gguf_writer *w, const char *name, int32_t dtype, int ndim,
                                    const int64_t *ne);
/* Append bytes of the next tensor's data (may be called several times per
 * tensor; the writer pads between tensors). */
vt_status vt_gguf_writer_write_data(vt_gguf_writer *w, const void *data, size_t size);
/* Flush, check every declared tensor got all its bytes, close. Frees w. */
vt_status vt_gguf_writer_finish(vt_gguf_writer *w, vt_error *err);
/* Close and delete the file without finishing. Frees w. */
void vt_gguf_writer_abort(vt_gguf_writer *w);

/* Last error of the writer (set by any call that returned non-VT_OK). */
const char *vt_gguf_writer_error(const vt_gguf_writer *w);

#endif
