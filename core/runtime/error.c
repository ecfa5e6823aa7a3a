/* error.c — status messages with context. */
#include "error.h"

#include <stdio.h>
#include <string.h>

vt_status vt_failv(vt_error *err, vt_status code, const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

vt_status vt_fail(vt_error *err, vt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vt_failv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

vt_status vt_error_prefix(vt_error *err, const char *fmt, ...) {
    if (!err) return VT_OK;
    char prefix[VT_ERROR_MSG_SIZE], old[VT_ERROR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n >= sizeof err->msg) n = sizeof err->msg - 1;
    memcpy(err->msg, prefix, n);
    size_t rest = strnlen(old, sizeof old);
    if (rest > sizeof err->msg - 1 - n) rest = sizeof err->msg - 1 - n;
    memcpy(err->msg + n, old, rest);
    err->msg[n + rest] = '\0';
    return err->code;
}

void vt_error_clear(vt_error *err) {
    if (!err) return;
    err->code = VT_OK;
    err->msg[0] = '\0';
}

const char *vt_status_name(vt_status code) {
    switch (code) {
    case VT_OK: return "ok";
    case VT_ERR_INVALID: return "invalid argument";
    case VT_ERR_NOMEM: return "out of memory";
    case VT_ERR_IO: return "i/o error";
    case VT_ERR_FORMAT: return "malformed input";
    case VT_ERR_UNSUPPORTED: return "unsupported";
    case VT_ERR_BACKEND: return "backend error";
    case VT_ERR_CONTEXT_FULL: return "context full";
    case VT_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
