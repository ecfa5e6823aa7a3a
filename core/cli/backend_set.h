/* backend_set.h — which backends a multi-backend command (compare, bench)
 * runs: a --backends list checked against what actually loads. */
#ifndef VT_CLI_BACKEND_SET_H
#define VT_CLI_BACKEND_SET_H

#include <stdbool.h>

#include "error.h"
#include "options.h"

#define VT_CLI_MAX_BACKENDS 32

typedef struct vt_backend_set {
    char names[VT_CLI_MAX_BACKENDS][64];
    int n;
} vt_backend_set;

/* The loaded backends (same search as an engine: VT_BACKEND_PATH,
 * opt->backend_path, the install folder), in the registry's order. */
vt_status vt_cli_loaded_backends(const vt_options *opt, vt_backend_set *out, vt_error *err);

/* spec: "a,b,c" (each must be loaded, or be auto: --backend auto;
 * duplicates dropped), "all" (every
 * loaded backend), or NULL: every loaded one, minus "reference" when
 * skip_reference_by_default (it is the slow oracle) unless it is the only one.
 * With put_reference_first, reference is moved (or added, if loaded) to the
 * front: compare needs it as the baseline. */
vt_status vt_cli_backend_set(const vt_options *opt, const char *spec, bool skip_reference_by_default,
                             bool put_reference_first, vt_backend_set *out, vt_error *err);

#endif
