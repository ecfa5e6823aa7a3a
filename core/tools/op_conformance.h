/* op_conformance.h — one generated op case (op_cases.h) run on a backend and
 * on the reference, judged by the normalized mean squared error of the
 * backend's output against the reference's:
 *
 *   NMSE = sum_i (y_i - r_i)^2 / sum_i r_i^2
 *
 * over every element the op writes. One number per case, independent of the
 * output's scale, small for rounding noise and large for a wrong block, row
 * or head; the threshold it must stay under is per op and dtype
 * (vt_op_threshold, each justified where it is defined). */
#ifndef VT_CORE_OP_CONFORMANCE_H
#define VT_CORE_OP_CONFORMANCE_H

#include <stdbool.h>

#include "op_cases.h"
#include "registry.h"

typedef enum vt_op_verdict {
    VT_OP_CASE_OK = 0,
    VT_OP_CASE_FAIL = 1,     /* error above threshold, a non-finite output, or the op failed */
    VT_OP_CASE_DECLINED = 2  /* the backend's supports() said no (or the op pointer is NULL) */
} vt_op_verdict;

typedef struct vt_op_result {
    vt_op_verdict verdict;
    double error;     /* NMSE; INFINITY when the outputs cannot be compared */
    double threshold;
    double seconds;   /* with perf: median time of one backend run */
    char note[160];   /* why a FAIL is not a plain error (op status, non-finite output) */
} vt_op_result;

/* The largest NMSE a correct backend may show on case c. */
double vt_op_threshold(const vt_op_case *c);

/* NMSE of got against ref, n elements. 0 when both are all zero; INFINITY
 * when any element is non-finite on one side and not the other. */
double vt_nmse(const float *got, const float *ref, int64_t n);

/* Whether backend b would run c's node as the engine offers it (op pointer
 * present, supports() yes with data pointers NULL). */
bool vt_op_case_accepted(const vt_backend_entry *b, const vt_op_case *c);

/* Run c on backend and on reference and judge it. perf: also time the
 * backend's run (repeated for at least ~50 ms, the median kept). VT_OK with
 * the verdict in r; an error only when memory for the comparison runs out. */
vt_status vt_op_case_judge(const vt_backend_entry *backend, const vt_backend_entry *reference, vt_op_case *c,
                           bool perf, vt_op_result *r, vt_error *err);

#endif
