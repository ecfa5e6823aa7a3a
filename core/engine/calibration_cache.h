/* calibration_cache.h — the per-machine file that keeps `--backend auto`'s
 * measured times, so only the first engine on a machine pays for timing.
 *
 * It lives in the cache folder ($XDG_CACHE_HOME/vt, else ~/.cache/vt) as
 * calibration-<hash of the key>.txt. The key is what makes a time valid: the
 * CPU model, the thread count, the vt version and every timed backend's file
 * (path, size, modification time), ABI version and whether it exports the
 * weight-prepare hook (ABI 1.2): a preparing backend is timed on its own
 * copies of the weights, and ABI 1.2 has no layout tag to key by, so the
 * layout is pinned by the file (its code) and the hook's presence. The file repeats its key and ends with a
 * checksum of everything above it; a file whose checksum or key does not
 * match is reported and measured again, never trusted. The shape class of
 * each time is the class key itself (auto_costs.h). */
#ifndef VT_CORE_CALIBRATION_CACHE_H
#define VT_CORE_CALIBRATION_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "auto_costs.h"
#include "error.h"
#include "registry.h"

/* The key of the candidates of c at this thread count, as text lines. */
void vt_calibration_key(const vt_registry *r, const vt_auto_costs *c, int threads, char *key, size_t size);

/* The cache folder's file for key; VT_ERR_INVALID when there is no cache
 * folder (neither XDG_CACHE_HOME nor HOME). */
vt_status vt_calibration_path(const char *key, char *path, size_t size, vt_error *err);

/* FNV-1a over n bytes: the file's checksum and the hash in its name. */
uint64_t vt_calibration_checksum(const char *text, size_t n);

typedef enum vt_calibration_read {
    VT_CALIBRATION_MISSING = 0, /* no file: nothing read */
    VT_CALIBRATION_READ = 1,    /* times merged into c */
    VT_CALIBRATION_CORRUPT = 2, /* checksum or syntax: why says which; nothing read */
    VT_CALIBRATION_STALE = 3    /* another key: why names the line; nothing read */
} vt_calibration_read;

/* Merge the times of the file at path into c (backends by name; classes are
 * added). */
vt_calibration_read vt_calibration_load(const char *path, const char *key, const vt_registry *r, vt_auto_costs *c,
                                        char *why, size_t why_size);

/* Write every measured time of c with key, atomically (a temporary file
 * renamed), creating the folder; times another engine saved under the same
 * key meanwhile are kept where c has none (the file's lock, path.lock,
 * makes the read and the replacement one step). */
vt_status vt_calibration_save(const char *path, const char *key, const vt_registry *r, const vt_auto_costs *c,
                              vt_error *err);

#endif
