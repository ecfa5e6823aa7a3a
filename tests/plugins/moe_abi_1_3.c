/* moe_abi_1_3.c — test backend built as ABI 1.3 (abi_minor 3, the 1.3 table
 * size), before the mixture-of-experts ops existed, forwarding every op it
 * has to the reference. A 1.3 plugin has never heard of moe_route, moe_matmul
 * or moe_combine: the runtime must never ask its supports() about them (what
 * a 1.3 supports() would make of an op number it does not know is anyone's
 * guess), so being asked aborts the process. With it preferred, a qwen3moe
 * model runs its MoE nodes on the fallback and everything else here
 * (tests/test_moe.c). */
#define PLUGIN_NAME "moe_abi_1_3"
#define FWD_ABI_MINOR 3
#define FWD_STRUCT_SIZE VT_BACKEND_SIZE_1_3
#include "forward_to_reference.h"

static int plugin_supports(void *ctx, const vt_node *node) {
    if (node->op == VT_OP_MOE_ROUTE || node->op == VT_OP_MOE_MATMUL || node->op == VT_OP_MOE_COMBINE) {
        fprintf(stderr, PLUGIN_NAME ": offered op %d, which ABI 1.3 does not have\n", (int)node->op);
        abort();
    }
    return fwd_reference_supports(ctx, node);
}

FWD_BACKEND("test plugin: built as ABI 1.3, before the MoE ops; aborts if offered one")
