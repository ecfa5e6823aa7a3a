/* compare_trace.h — `vt compare --trace [--trace-all]`: per backend, the
 * first plan node whose own error (on the reference's inputs) exceeds its
 * op's threshold, and with --trace-all every node's error. */
#ifndef VT_CLI_COMPARE_TRACE_H
#define VT_CLI_COMPARE_TRACE_H

#include <stdbool.h>

#include "backend_set.h"
#include "cli.h"

typedef struct vt_compare_trace_job {
    const vt_cli_common *c;
    vt_model *model;
    const char *model_path;
    const int32_t *prompt;
    int64_t n_prompt;
    int64_t n_decode;           /* decode steps traced after the prompt */
    const vt_backend_set *set;  /* reference first; every other one is traced */
    bool all;                   /* --trace-all: every node's line */
    bool json;
} vt_compare_trace_job;

/* Trace every backend of the set but reference against it. *diverged: some
 * backend has a first divergence. A backend whose engine cannot be built is
 * reported in its place and the rest still run; the first such failure is
 * returned after all have run. */
vt_status vt_compare_trace(const vt_compare_trace_job *job, bool *diverged, vt_error *err);

#endif
