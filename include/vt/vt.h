/* vt.h — the runtime API for programs that embed vt (link libvt; pkg-config
 * vt, or find_package(vt) and vt::vt).
 *
 * A session is one model on the real engine path: the GGUF is mmapped,
 * backends are loaded, the KV cache is allocated and both plans (prefill,
 * decode) are negotiated when the session opens — a dtype disagreement is an
 * error from vt_session_open, never from an eval. Settings use the ini keys
 * of conf/vt.ini ("kv_cache.dtype=f32", "runtime.backend=simd", ...) and are
 * validated exactly as the command line's; the environment levers
 * (VT_KV_CACHE_DTYPE, ...) and a config file apply below them, as for `vt`.
 *
 * Errors: every call that can fail returns a vt_status and writes a one-line
 * message to err (err_size bytes, may be 0); vt_status_name() names a status.
 *
 * Threads: a session is used from one thread at a time; sessions are
 * independent but share the process's one thread pool binding, so open and
 * use them from one thread. The log functions may be called from any thread.
 *
 * libvt exports exactly the functions declared here (VT_API); the rest of the
 * library is hidden. */
#ifndef VT_H
#define VT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version: "MAJOR.MINOR.PATCH", and MAJOR*10000 + MINOR*100 + PATCH. */
VT_API const char *vt_version(void);
VT_API uint32_t vt_version_number(void);

/* "invalid argument", "out of memory", ... for a status code. */
VT_API const char *vt_status_name(vt_status code);

/* Log messages (the registry, backends through host->log, warnings such as a
 * narrowed KV cache) go to stderr as "vt[who] level: message" unless a
 * callback is set: then each message is handed to it whole, one line without
 * its newline, on whatever thread logged it. fn = NULL restores stderr.
 * Messages above the level are dropped before formatting (default
 * VT_LOG_WARN, or VT_LOG=debug|info|warn|error in the environment). */
typedef void (*vt_log_fn)(void *user, int level, const char *who, const char *message);
VT_API void vt_set_log_callback(vt_log_fn fn, void *user);
VT_API void vt_set_log_level(int level); /* a vt_log_level of vt_backend.h: 0 error .. 3 debug */

typedef struct vt_session vt_session;

typedef struct vt_session_options {
    uint32_t struct_size;          /* sizeof(vt_session_options) */
    const char *config_path;       /* ini file, or NULL (then VT_CONFIG, if set) */
    const char *const *settings;   /* "key=value" with ini keys, NULL-terminated; may be NULL */
    bool all_logits;               /* every evaluated token gets a row of logits, not only the last */
} vt_session_options;

/* Open model_path with the given options (NULL = defaults). */
VT_API vt_status vt_session_open(const char *model_path, const vt_session_options *options, vt_session **out, char *err,
                          size_t err_size);
VT_API void vt_session_close(vt_session *s);

VT_API int32_t vt_session_n_vocab(const vt_session *s);
/* Tokens evaluated so far (the sequence's length in the KV cache). */
VT_API int64_t vt_session_n_past(const vt_session *s);
/* Forget the sequence (the KV cache's blocks return to the free list). */
VT_API void vt_session_reset(vt_session *s);

/* Text -> ids with the model's tokenizer (BOS as the vocabulary says when
 * add_bos). *ids is malloc'ed: free() it. */
VT_API vt_status vt_session_tokenize(const vt_session *s, const char *text, size_t len, bool add_bos, int32_t **ids,
                              size_t *n_ids, char *err, size_t err_size);
/* The bytes token id renders to (may be part of a UTF-8 character); returns
 * the length (truncated to cap), or -1 for an id outside the vocabulary. */
VT_API int32_t vt_session_token_bytes(const vt_session *s, int32_t id, char *buf, size_t cap);

/* Append n tokens to the sequence and run them: one token through the decode
 * plan, more through the prefill plan. VT_ERR_CONTEXT_FULL leaves the
 * sequence as it was. */
VT_API vt_status vt_session_eval(vt_session *s, const int32_t *ids, size_t n, char *err, size_t err_size);
/* Logits of the last eval: row 0 is its last token, or with all_logits row i
 * is its i-th token. n_vocab floats, valid until the next eval; NULL if the
 * row does not exist. */
VT_API const float *vt_session_logits(const vt_session *s, int64_t row);

/* The negotiated plans, one line per node, and the KV-cache dtype with its
 * source (what `vt run --explain` prints). */
VT_API void vt_session_explain(const vt_session *s, FILE *f);

#ifdef __cplusplus
}
#endif
#endif /* VT_H */
