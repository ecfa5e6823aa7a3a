/* capabilities.h — a backend's op x dtype matrix, asked through supports()
 * with one representative node per (op, dtype, phase): the first of the
 * op's generated cases (op_cases.h). What `vt backends` prints. The dtype
 * stands for the op's dtype axis: the weight (matmul, get_rows, moe_matmul),
 * the cache (attention, reshape_and_cache) or the output (the rest). */
#ifndef VT_CORE_CAPABILITIES_H
#define VT_CORE_CAPABILITIES_H

#include "registry.h"

#define VT_CAP_N_DTYPES 8
extern const int32_t vt_cap_dtypes[VT_CAP_N_DTYPES]; /* f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k */

/* Bit 0: accepted in prefill, bit 1: in decode; -1 if the dtype does not
 * apply to the op. */
int vt_capability(const vt_backend_entry *b, int op, int32_t dtype);

#endif
