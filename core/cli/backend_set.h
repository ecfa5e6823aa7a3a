/* backend_set.h — which backends a multi-backend command (compare, bench)
 * runs: a --backends list checked against what actually loads. */
#ifndef VT_CLI_BACKEND_SET_H
#define VT_CLI_BACKEND_SET_H

#include <stdbool.h>

#include "error.h"
#include "options.h"

#define VT_CLI_MAX_BACKENDS 32

typedef struct vt_backend_set {
    char names[VT_CLI_MAX_BACKENDS][64];  /* the backend each entry runs on */
    /* vt_cli_loaded_backends: the backends found but refused (a name given
     * to --backends that is here failed; one that is nowhere is a typo) */
    char refused[VT_CLI_MAX_BACKENDS][64];
    int n_refused;
    /* what its results are called: the entry as given (NAME or
     * NAME:key=value...) in full, with #K for the K-th occurrence of a
     * repeat; sized for the longest name and options, so no two entries
     * share a label */
    char labels[VT_CLI_MAX_BACKENDS][64 + 128 + 16];
    /* the entry's own backend options, "key=value:key=value" as given after
     * NAME: ("" for none); its engine gets them beside the run's options */
    char options[VT_CLI_MAX_BACKENDS][128];
    int n;
} vt_backend_set;

/* How vt_cli_backend_set reads a list. */
enum {
    /* no list given: every loaded backend but reference (the slow oracle),
     * unless it is the only one */
    VT_BACKEND_SET_SKIP_REFERENCE = 1 << 0,
    /* reference moved (or added, if loaded) to the front: compare needs it as
     * the baseline */
    VT_BACKEND_SET_REFERENCE_FIRST = 1 << 1,
    /* a name given twice is run twice (labelled NAME#2, ...): two engines of
     * one plan measure the noise floor of a benchmark run; without this flag
     * repeats are dropped */
    VT_BACKEND_SET_KEEP_REPEATS = 1 << 2,
};

/* The loaded backends (same search as an engine: VT_BACKEND_PATH,
 * opt->backend_path, the install folder), highest probe score first (the
 * default backend leads; ties keep the registry's order). */
vt_status vt_cli_loaded_backends(const vt_options *opt, vt_backend_set *out, vt_error *err);

/* spec: "a,b,c" (each must be loaded, or be auto: --backend auto), "all"
 * (every loaded backend), or NULL: every loaded one; flags: VT_BACKEND_SET_*.
 * An entry NAME:key=value[:key=value...] runs NAME with those backend
 * options (as --backend-option NAME.key=value would give them), so one run
 * can put two configurations of one backend side by side
 * ("simd,simd:isa=avx2"). */
vt_status vt_cli_backend_set(const vt_options *opt, const char *spec, unsigned flags, vt_backend_set *out,
                             vt_error *err);

#endif
