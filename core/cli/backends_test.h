/* backends_test.h — `vt backends --test NAME|FILE`: a backend's ops against
 * the reference on the generated case battery (core/tools/op_cases.h), one
 * forked child per op family so a crashing op is one failed case. */
#ifndef VT_CLI_BACKENDS_TEST_H
#define VT_CLI_BACKENDS_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "vt/vt_types.h"

typedef struct vt_backends_test_request {
    const char *target;          /* a backend NAME, or a FILE (a path: it contains '/') */
    const char *backend_path;    /* extra search folders, NULL = none */
    const char *backend_options; /* "NAME.key=value\n" lines, NULL = none */
    int32_t threads;
    bool ops[VT_OP_COUNT];       /* which op families run */
    bool dtypes[VT_DTYPE_COUNT]; /* which dtypes of each op's axis run */
    uint64_t seed;
    bool perf, json;
} vt_backends_test_request;

/* --ops LIST / --dtypes LIST (comma-separated; NULL = all) into the request;
 * an unknown name is VT_ERR_INVALID with the valid ones listed. */
vt_status vt_backends_test_select(vt_backends_test_request *req, const char *ops, const char *dtypes, vt_error *err);

/* Run the battery and print it. *exit_code: 0 every case OK, 1 any FAIL,
 * 2 the backend does not load (the reason printed as --check does), or
 * declined every case selected (nothing was judged). An
 * error only for what stops the tool itself (fork, pipe, memory). */
vt_status vt_backends_test_run(const vt_backends_test_request *req, int *exit_code, vt_error *err);

#endif
