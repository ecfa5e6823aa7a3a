/* capabilities.c — a backend's op x dtype matrix from supports() queries.
 *
 * The node asked about is the first of the op's generated cases
 * (op_cases.c) at that dtype and phase: the op's shapes and parameters are
 * written once, with its cases, so an op added to VT_OP_LIST and given cases
 * shows in `vt backends` without a word here. */
#include "capabilities.h"

#include "op_cases.h"

const int32_t vt_cap_dtypes[VT_CAP_N_DTYPES] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};

/* Seed of the probe's data: supports() reads shapes and dtypes, never values. */
#define PROBE_SEED 1

/* 1 if b accepts (op, dtype, phase)'s representative node, 0 if not, -1 if
 * the dtype is not on the op's axis (or its case cannot be built). */
static int accepts(const vt_backend_entry *b, int op, int32_t dtype, vt_phase phase) {
    if (vt_op_case_count(op, dtype, phase) == 0) return -1;
    vt_op_case c;
    vt_error err = {0};
    if (vt_op_case_build(op, dtype, phase, 0, PROBE_SEED, &c, &err) != VT_OK) {
        vt_op_case_free(&c);
        return -1;
    }
    const int yes = vt_backend_accepts(b, &c.node) ? 1 : 0;
    vt_op_case_free(&c);
    return yes;
}

int vt_capability(const vt_backend_entry *b, int op, int32_t dtype) {
    const int prefill = accepts(b, op, dtype, VT_PHASE_PREFILL);
    if (prefill < 0) return -1;
    const int decode = accepts(b, op, dtype, VT_PHASE_DECODE);
    return prefill | (decode > 0 ? 2 : 0);
}
