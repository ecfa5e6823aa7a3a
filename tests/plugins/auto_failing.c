/* auto_failing.c — a backend that accepts every node the reference does and
 * then fails every matmul with VT_ERR_INTERNAL: --backend auto must leave it
 * out with a warning naming it, and the engine still start. */
#define PLUGIN_NAME "auto_failing"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_MATMUL failing_matmul
#include "forward_to_reference.h"

static vt_status failing_matmul(void *ctx, const vt_node *node) {
    (void)ctx, (void)node;
    return VT_ERR_INTERNAL;
}

FWD_BACKEND("test plugin: accepts what the reference does, fails every matmul")
