/* capabilities.h — a backend's op x dtype matrix, asked through supports()
 * with one representative node per (op, dtype, phase). What `vt backends`
 * prints, and what tests read to check a backend claims what it runs. */
#ifndef VT_CORE_CAPABILITIES_H
#define VT_CORE_CAPABILITIES_H

#include "registry.h"

#define VT_CAP_N_DTYPES 8
extern const int32_t vt_cap_dtypes[VT_CAP_N_DTYPES]; /* f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k */

/* Representative node of (op, dtype, phase), the dtype standing for the
 * op's dtype axis: the weight (matmul, get_rows), the cache (attention,
 * reshape_and_cache) or the output (the rest). Returns 0 if that dtype does
 * not apply to the op. */
int vt_cap_node(int op, int32_t dtype, vt_phase phase, vt_node *out);

/* Bit 0: accepted in prefill, bit 1: in decode; -1 if the dtype does not
 * apply to the op. */
int vt_capability(const vt_backend_entry *b, int op, int32_t dtype);

#endif
