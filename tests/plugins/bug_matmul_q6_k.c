/* bug_matmul_q6_k.c — test backend that is right everywhere but one place:
 * matmul with Q6_K weights leaves out the last block of every weight row (the
 * off-by-one of a loop over blocks, `b < n_blocks - 1`). Every op runs on
 * the reference (forward_to_reference.h), with the reference's supports().
 *
 * `vt backends --test` must fail exactly the matmul q6_k cases and pass every
 * other case of every op (tests/test_backends_test.c). */
#define PLUGIN_NAME "bug_matmul_q6_k"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_MATMUL buggy_matmul
#include "forward_to_reference.h"

static vt_status buggy_matmul(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, "matmul");
    if (st != VT_OK || node->src[0].dtype != VT_Q6_K) return st != VT_OK ? st : c->ref->matmul(c->ref_ctx, node);
    /* The weights with the last block of each row zeroed: a Q6_K block whose
     * scale d is 0 contributes nothing, as if the loop had stopped one
     * block early. */
    const vt_tensor *w = &node->src[0];
    const size_t row = w->nb[1], block = c->host->row_size(VT_Q6_K, c->host->block_length(VT_Q6_K));
    const int64_t rows = w->ne[1];
    unsigned char *copy = c->host->alloc(row * (size_t)rows, 64);
    if (!copy) return VT_ERR_NOMEM;
    memcpy(copy, w->data, row * (size_t)rows);
    for (int64_t n = 0; n < rows; n++) memset(copy + (size_t)n * row + row - block, 0, block);
    vt_node bad = *node;
    bad.src[0].data = copy;
    st = c->ref->matmul(c->ref_ctx, &bad);
    c->host->free(copy);
    return st;
}

FWD_BACKEND("test plugin: reference ops, but matmul q6_k drops the last block of every weight row")
