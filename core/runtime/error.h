/* error.h — status + message with context, passed down every call chain.
 *
 * Functions that can fail take a `vt_error *err` (may be NULL) and return a
 * vt_status; on failure the message names what is wrong and where (file,
 * offset, key, tensor, op, backend, dtypes). */
#ifndef VT_CORE_ERROR_H
#define VT_CORE_ERROR_H

#include <stdarg.h>

#include "vt/vt_types.h"

#define VT_ERROR_MSG_SIZE 512

typedef struct vt_error {
    vt_status code;
    char msg[VT_ERROR_MSG_SIZE];
} vt_error;

/* Record code and a printf-style message in err (if not NULL); returns code. */
vt_status vt_fail(vt_error *err, vt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
vt_status vt_failv(vt_error *err, vt_status code, const char *fmt, va_list ap);

/* Prefix err's message with more context ("loading model X: " + old message). */
vt_status vt_error_prefix(vt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void vt_error_clear(vt_error *err);

/* "invalid argument", "out of memory", ... (public: include/vt/vt.h) */
VT_API const char *vt_status_name(vt_status code);

#endif
