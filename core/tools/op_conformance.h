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
/* The same by op and dtypes: axis_dtype is the dtype on the op's axis (the
 * weight's for matmul and get_rows, the cache's for attention and
 * reshape_and_cache, the output's for the rest), out_dtype what it writes.
 * vt compare --trace judges a model's nodes by it. */
double vt_op_threshold_for(int op, int32_t axis_dtype, int32_t out_dtype);
/* A quantized matmul's threshold given the NMSE its activations take from
 * being rounded to 8 bits per block (vt_activation_rounding): the fixed one
 * above is this at inputs uniform in [-1, 1). */
double vt_matmul_threshold_for_input(int32_t out_dtype, double activation_rounding);
/* Round x (n floats) to 8 bits per block of `block` (scale amax/127, as
 * GGML's q8_0/q8_K and simd do) and add the squared error and the squared
 * values to *diff2 and *ref2; returns *diff2 / *ref2 so far. */
double vt_activation_rounding(const float *x, int64_t n, int64_t block, double *diff2, double *ref2);

/* NMSE over several outputs (or calls): sums of squared differences and of
 * squared reference values, and the largest |got - ref| on the way. */
typedef struct vt_nmse_acc {
    double diff2, ref2;
    double max_abs;
    bool nonfinite; /* a non-finite value on one side only */
} vt_nmse_acc;
void vt_nmse_add(vt_nmse_acc *a, const float *got, const float *ref, int64_t n);
/* INFINITY with a one-sided non-finite value, or a difference against an
 * all-zero reference; 0 when both are all zero. */
double vt_nmse_value(const vt_nmse_acc *a);

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
