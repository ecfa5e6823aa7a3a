/* op_conformance.c — judging one op case: thresholds per op and dtype, the
 * NMSE, and the two runs (with timing for --perf). */
#include "op_conformance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quant.h"

/* ---- thresholds ---------------------------------------------------------
 *
 * Inputs are uniform in [-1, 1) (op_cases.c), so the figures below are the
 * NMSE of the rounding a correct backend may do, with a margin of 10x to 30x.
 * A real bug is far above all of them: a wrong or missing block of a row of
 * K <= 9 blocks, a wrong row or head, a swapped rope pair give 1e-2 to 1. */

/* f32 arithmetic in another order than the reference's double: each output
 * is a sum or a product chain of at most a few thousand terms, relative error
 * ~ sqrt(terms) * 2^-24 ~ 1e-6 at the very worst, NMSE ~ 1e-12. */
#define F32_FLOOR 1e-10

/* One unit in the last place on every element: the most two correct
 * implementations differ by after rounding their nearly equal f32 results to
 * a narrow output dtype. An ulp is at most 2^-10 (f16: 10 stored mantissa
 * bits) or 2^-7 (bf16) of the value, so NMSE <= (2^-10)^2 or (2^-7)^2. */
static double output_rounding(int32_t dtype) {
    if (dtype == VT_F16) return 0x1p-20;
    if (dtype == VT_BF16) return 0x1p-14;
    return 0.0;
}

/* Rounding an operand to dtype before a dot product (as GGML's f16 and bf16
 * paths round activations or queries to the weights' or cache's dtype): a
 * relative error uniform within half an ulp, 2^-11 (f16) or 2^-8 (bf16), so
 * NMSE ~ (2^-11)^2 / 3 = 8e-8 or (2^-8)^2 / 3 = 5e-6; allowed 1e-6 and 5e-5. */
static double operand_rounding(int32_t dtype) {
    if (dtype == VT_F16) return 1e-6;
    if (dtype == VT_BF16) return 5e-5;
    return F32_FLOOR;
}

/* 3 / (127^2 * 12): 8-bit rounding of inputs uniform in [-1, 1) (below). */
#define UNIFORM_ACTIVATION_ROUNDING 1.55e-5

double vt_matmul_threshold_for_input(int32_t out_dtype, double activation_rounding) {
    /* 30x the activations' own rounding, and never below 5e-4 (30x that of
     * uniform inputs): a model's activations have heavier tails than
     * uniform ones (a swiglu output's block max is many times its RMS), so
     * the same correct kernel rounds them more. */
    const double allowed = 30.0 * activation_rounding;
    return (allowed > 5e-4 ? allowed : 5e-4) + output_rounding(out_dtype);
}

double vt_activation_rounding(const float *x, int64_t n, int64_t block, double *diff2, double *ref2) {
    for (int64_t b0 = 0; b0 < n; b0 += block) {
        const int64_t end = b0 + block < n ? b0 + block : n;
        float amax = 0.0f;
        for (int64_t i = b0; i < end; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        const double step = amax / 127.0;
        for (int64_t i = b0; i < end; i++) {
            const double q = step > 0 ? nearbyint(x[i] / step) * step : 0.0;
            *diff2 += (q - x[i]) * (q - x[i]);
            *ref2 += (double)x[i] * x[i];
        }
    }
    return *ref2 > 0 ? *diff2 / *ref2 : 0.0;
}

double vt_op_threshold(const vt_op_case *c) { return vt_op_threshold_for(c->op, c->axis_dtype, c->out_dtype); }

double vt_op_threshold_for(int op, int32_t axis_dtype, int32_t out_dtype) {
    switch (op) {
    case VT_OP_MOE_ROUTE: /* a choice among logits, no arithmetic: the same ids or a bug */
        return 0.0;
    case VT_OP_MOE_MATMUL: /* each row is a matmul row: the same rounding */
    case VT_OP_MATMUL:
        if (vt_dtype_is_float(axis_dtype)) return operand_rounding(axis_dtype) + output_rounding(out_dtype);
        /* Quantized weights: a backend may quantize each block of activations
         * to 8 bits (GGML's q8_0/q8_K, simd's integer dot products). The step
         * is amax/127, the error uniform within half of it, variance
         * (amax/127)^2 / 12 against E[x^2] = amax^2 / 3: NMSE = 3 / (127^2 * 12)
         * = 1.6e-5, which the sums over K carry unchanged to the outputs (the
         * errors are independent). A q8_0 activation block's scale stored as
         * f16 adds (2^-11)^2, nothing. Allowed: 30x. */
        return vt_matmul_threshold_for_input(out_dtype, UNIFORM_ACTIVATION_ROUNDING);
    case VT_OP_ATTENTION:
        /* Scores, softmax and the weighted sum in f32 against double, with a
         * vector exp (relative 1e-7): ~1e-12. A backend may round Q or the
         * probabilities to the cache's dtype to use narrow dot products. */
        /* A Q8_0 cache: its values (int8 times an f16 scale) are exact in
         * f32, but a backend may quantize Q to 8-bit blocks too for integer
         * dot products (GGML's q8_0 x q8_0): NMSE 1.6e-5 as for quantized
         * matmul above, allowed 30x. */
        if (axis_dtype == VT_Q8_0) return 5e-4;
        return axis_dtype == VT_F32 ? 1e-8 : operand_rounding(axis_dtype);
    case VT_OP_RESHAPE_AND_CACHE:
    case VT_OP_CONVERT:
        /* A copy, or one rounding to nearest even (how host->from_f32 and the
         * reference round, and what every other backend then reads back from
         * the cache): the result is defined bit for bit. */
        return 0.0;
    case VT_OP_ROPE:
        /* GGML computes the angle pos * theta_i in f32: at positions up to
         * 4096 its rounding is up to 2^-12 absolute, which moves cos and sin
         * by as much on the fastest pairs: NMSE ~ (2^-12)^2 = 6e-8. */
        return 1e-6 + output_rounding(out_dtype);
    case VT_OP_GET_ROWS: /* dequantization in another order (FMA or not): an ulp of f32 */
    case VT_OP_RMS_NORM:
    case VT_OP_SWIGLU:   /* silu through a vector exp: relative 1e-7 */
    case VT_OP_ADD:
    default: return F32_FLOOR + output_rounding(out_dtype);
    }
}

/* ---- comparing ----------------------------------------------------------- */

void vt_nmse_add(vt_nmse_acc *a, const float *got, const float *ref, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) {
            /* the same non-finite value on both sides is agreement */
            if (!(got[i] == ref[i] || (isnan(got[i]) && isnan(ref[i])))) a->nonfinite = true;
            continue;
        }
        const double d = (double)got[i] - (double)ref[i];
        a->diff2 += d * d;
        a->ref2 += (double)ref[i] * (double)ref[i];
        if (fabs(d) > a->max_abs) a->max_abs = fabs(d);
    }
}

double vt_nmse_value(const vt_nmse_acc *a) {
    if (a->nonfinite) return INFINITY;
    if (a->ref2 == 0.0) return a->diff2 == 0.0 ? 0.0 : INFINITY;
    return a->diff2 / a->ref2;
}

double vt_nmse(const float *got, const float *ref, int64_t n) {
    vt_nmse_acc a = {0};
    vt_nmse_add(&a, got, ref, n);
    return vt_nmse_value(&a);
}

bool vt_op_case_accepted(const vt_backend_entry *b, const vt_op_case *c) {
    vt_node query = c->node;
    for (int i = 0; i < VT_MAX_SRC; i++) query.src[i].data = NULL;
    query.dst.data = NULL;
    return vt_backend_accepts(b, &query);
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median time of repeated runs: at least 3, until ~50 ms or 101 runs. The
 * outputs are rewritten each time with the same values. */
static vt_status time_runs(const vt_backend_entry *b, const vt_node *node, double *median) {
    double t[101];
    int n = 0;
    double start = now_seconds();
    while (n < 101 && (n < 3 || now_seconds() - start < 0.05)) {
        double t0 = now_seconds();
        vt_status st = vt_backend_run(b, node);
        if (st != VT_OK) return st;
        t[n++] = now_seconds() - t0;
    }
    qsort(t, (size_t)n, sizeof *t, compare_doubles);
    *median = t[n / 2];
    return VT_OK;
}

static void fail(vt_op_result *r, const char *fmt, const char *what) {
    r->verdict = VT_OP_CASE_FAIL;
    r->error = INFINITY;
    snprintf(r->note, sizeof r->note, fmt, what);
}

/* The case's node as an engine would hand it to the backend: each weight
 * operand offered to its prepare hook (ABI 1.2) and, where it returns a
 * copy, read from that copy with the node's prepared bit set. copies[s]
 * gets what must be released afterwards. False with r failed when the hook
 * fails. */
static bool prepare_weights(const vt_backend_entry *b, const vt_op_case *c, vt_node *node, void *copies[VT_MAX_SRC],
                            vt_op_result *r) {
    *node = c->node;
    node->prepared = 0;
    for (int s = 0; s < VT_MAX_SRC; s++) copies[s] = NULL;
    for (int s = 0; s < node->n_src && s < VT_MAX_SRC; s++) {
        if (!vt_is_weight_operand(node->op, s)) continue;
        char name[48]; /* "case." + the longest op name + ".src" + an int */
        snprintf(name, sizeof name, "case.%s.src%d", vt_op_name(node->op), s);
        const vt_weight_offer offer = {sizeof offer, name, node->src[s], 1u << node->op, 1u << node->phase, 0};
        vt_prepared_weight got;
        char why[200];
        if (vt_backend_prepare_weight(b, &offer, &got, why, sizeof why) != VT_OK) {
            r->verdict = VT_OP_CASE_FAIL;
            r->error = INFINITY;
            snprintf(r->note, sizeof r->note, "prepare_weight failed on src%d: %.100s", s, why);
            return false;
        }
        if (!got.data) continue;
        copies[s] = got.data;
        node->src[s].data = got.data;
        node->prepared |= 1u << s;
    }
    return true;
}

static void release_weights(const vt_backend_entry *b, void *copies[VT_MAX_SRC]) {
    for (int s = 0; s < VT_MAX_SRC; s++) vt_backend_release_weight(b, copies[s]);
}

vt_status vt_op_case_judge(const vt_backend_entry *backend, const vt_backend_entry *reference, vt_op_case *c,
                           bool perf, vt_op_result *r, vt_error *err) {
    memset(r, 0, sizeof *r);
    r->threshold = vt_op_threshold(c);
    r->error = NAN;
    if (!vt_op_case_accepted(backend, c)) {
        r->verdict = VT_OP_CASE_DECLINED;
        /* an op the backend implements, never asked about this node */
        const char *why = backend->table && vt_backend_op(backend->table, c->node.op)
                              ? vt_backend_not_offered(backend, &c->node)
                              : NULL;
        if (why) snprintf(r->note, sizeof r->note, "not offered: %s", why);
        return VT_OK;
    }
    vt_status st = vt_backend_run(reference, &c->ref_node);
    if (st != VT_OK) {
        fail(r, "the reference failed on this case (%s)", vt_status_name(st));
        return VT_OK;
    }
    vt_node node;
    void *copies[VT_MAX_SRC];
    if (!prepare_weights(backend, c, &node, copies, r)) return VT_OK;
    st = vt_backend_run(backend, &node);
    if (st != VT_OK) {
        release_weights(backend, copies);
        fail(r, "the op returned %s for a node its supports() accepted", vt_status_name(st));
        return VT_OK;
    }
    vt_tensor *outs[2], *ref_outs[2];
    const int n_out = vt_op_case_outputs(&c->node, outs);
    vt_op_case_outputs(&c->ref_node, ref_outs);
    for (int i = 0; i < n_out; i++)
        if (vt_op_case_overran(outs[i])) {
            release_weights(backend, copies);
            r->verdict = VT_OP_CASE_FAIL;
            r->error = INFINITY;
            snprintf(r->note, sizeof r->note, "wrote past the end of %s (%s, %zu bytes)",
                     n_out == 2 ? (i == 0 ? "the k cache" : "the v cache") : "dst", vt_dtype_name(outs[i]->dtype),
                     (size_t)(outs[i]->nb[3] * (size_t)outs[i]->ne[3]));
            return VT_OK;
        }
    vt_nmse_acc acc = {0};
    for (int i = 0; i < n_out; i++) {
        const int64_t n = outs[i]->ne[0] * outs[i]->ne[1] * outs[i]->ne[2] * outs[i]->ne[3];
        float *got = malloc((size_t)n * sizeof *got), *ref = malloc((size_t)n * sizeof *ref);
        if (!got || !ref) {
            free(got);
            free(ref);
            release_weights(backend, copies);
            return vt_fail(err, VT_ERR_NOMEM, "op case %s: out of memory", vt_op_name(c->op));
        }
        vt_to_f32(outs[i]->dtype, outs[i]->data, got, n);
        vt_to_f32(ref_outs[i]->dtype, ref_outs[i]->data, ref, n);
        vt_nmse_add(&acc, got, ref, n);
        free(got);
        free(ref);
    }
    r->error = vt_nmse_value(&acc);
    r->verdict = r->error <= r->threshold ? VT_OP_CASE_OK : VT_OP_CASE_FAIL;
    if (acc.nonfinite) snprintf(r->note, sizeof r->note, "non-finite output where the reference is finite");
    if (perf) {
        st = time_runs(backend, &node, &r->seconds);
        if (st != VT_OK) fail(r, "the op returned %s when run again", vt_status_name(st));
    }
    release_weights(backend, copies);
    return VT_OK;
}
