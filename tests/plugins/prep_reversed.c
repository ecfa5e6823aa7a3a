/* prep_reversed.c — test backend for the weight-prepare hook (ABI 1.2).
 *
 * Every op runs on the real reference backend (forward_to_reference.h).
 * What it adds: prepare_weight keeps every weight a matmul reads as a
 * byte-reversed copy, and its matmul refuses the file's bytes of a tensor it
 * prepared (it remembers which): the copy must arrive, marked prepared
 * (vt_node.prepared). So a runtime that forgets to wire the copy, hands the
 * file's bytes with the bit set, or the copy without it, fails loudly or
 * computes garbage — while a correct one computes exactly what the
 * reference does (reversal is lossless and un-reversed before the
 * reference's kernel). A tensor it was never offered (the engine keeps a
 * weight that nodes of another backend read too in the file's layout) it
 * reads as the file's bytes. Weights read only by rms_norm are declined:
 * they must arrive as the file's bytes with the bit clear.
 *
 * VT_TEST_PREP_FAIL=NAME makes the offer of tensor NAME fail with a reason
 * ("*" = the first offer), to check that the engine is refused naming it
 * and that the copies made before are released (leak check under ASan).
 *
 * VT_TEST_PREP_DECLINE_GET_ROWS=1 makes supports() decline get_rows, so on a
 * model with tied embeddings the fallback reads token_embd while this
 * backend's output matmul reads it too: a tensor nodes of two backends read,
 * which the engine must not offer (one layout resident: the file's).
 *
 * VT_TEST_PREP_F32_ONLY=1 makes supports() decline a matmul writing
 * anything but f32, and its matmul refuse any weight that arrives as the
 * file's bytes: so --backend auto's calibration must offer it the weights
 * of matmuls negotiation made write f16 (it runs their classes as keyed,
 * writing f32), or timing them fails. */
#define PLUGIN_NAME "prep_reversed"
#define FWD_MATMUL prep_matmul
#define FWD_RMS_NORM prep_rms_norm
#define FWD_GET_ROWS prep_get_rows
#define FWD_PREPARE_WEIGHT prep_prepare
#define FWD_RELEASE_WEIGHT prep_release
#include "forward_to_reference.h"

#include <pthread.h>
#include <stdbool.h>

static bool f32_only(void) {
    const char *v = getenv("VT_TEST_PREP_F32_ONLY");
    return v && strcmp(v, "1") == 0;
}

static int plugin_supports(void *ctx, const vt_node *node) {
    const char *decline = getenv("VT_TEST_PREP_DECLINE_GET_ROWS");
    if (node->op == VT_OP_GET_ROWS && decline && strcmp(decline, "1") == 0) return 0;
    if (node->op == VT_OP_MATMUL && f32_only() && node->dst.dtype != VT_F32) return 0;
    return fwd_reference_supports(ctx, node);
}

/* Bytes of a contiguous tensor. */
static size_t tensor_bytes(const fwd_ctx *c, const vt_tensor *t) {
    return c->host->row_size(t->dtype, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

static void reverse_bytes(unsigned char *dst, const unsigned char *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[n - 1 - i];
}

/* The tensors it holds a copy of, by the file's bytes: every engine of the
 * process (tests run several, some from two threads), hence the lock. */
enum { MAX_COPIES = 4096 };
typedef struct held_copy {
    const void *original;
    void *copy;
} held_copy;
static held_copy copies[MAX_COPIES];
static int n_copies;
static pthread_mutex_t copies_lock = PTHREAD_MUTEX_INITIALIZER;

static bool remember_copy(const void *original, void *copy) {
    pthread_mutex_lock(&copies_lock);
    const bool room = n_copies < MAX_COPIES;
    if (room) copies[n_copies++] = (held_copy){original, copy};
    pthread_mutex_unlock(&copies_lock);
    return room;
}

static void forget_copy(const void *copy) {
    pthread_mutex_lock(&copies_lock);
    for (int i = 0; i < n_copies; i++)
        if (copies[i].copy == copy) {
            copies[i] = copies[--n_copies];
            break;
        }
    pthread_mutex_unlock(&copies_lock);
}

static bool holds_copy_of(const void *original) {
    pthread_mutex_lock(&copies_lock);
    bool held = false;
    for (int i = 0; i < n_copies && !held; i++) held = copies[i].original == original;
    pthread_mutex_unlock(&copies_lock);
    return held;
}

static vt_status prep_prepare(void *ctx, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                              size_t err_size) {
    const fwd_ctx *c = ctx;
    const char *fail = getenv("VT_TEST_PREP_FAIL");
    if (fail && (strcmp(fail, "*") == 0 || strcmp(fail, offer->name) == 0)) {
        snprintf(err, err_size, "injected failure for %s (VT_TEST_PREP_FAIL)", offer->name);
        return VT_ERR_BACKEND;
    }
    if (!(offer->ops & (1u << VT_OP_MATMUL))) return VT_OK; /* declined: read as the file's bytes */
    const size_t n = tensor_bytes(c, &offer->tensor);
    unsigned char *copy = c->host->alloc(n ? n : 1, 64);
    if (!copy) {
        snprintf(err, err_size, "out of memory for %zu bytes", n);
        return VT_ERR_NOMEM;
    }
    reverse_bytes(copy, offer->tensor.data, n);
    if (!remember_copy(offer->tensor.data, copy)) {
        c->host->free(copy);
        snprintf(err, err_size, "more than %d copies at once", MAX_COPIES);
        return VT_ERR_NOMEM;
    }
    out->data = copy;
    out->bytes = n;
    return VT_OK;
}

static void prep_release(void *ctx, void *data) {
    const fwd_ctx *c = ctx;
    forget_copy(data);
    c->host->free(data);
}

/* Run `op` of the reference on node with every prepared operand turned
 * back into the file's layout (a temporary copy). `need_weight`: weight
 * operand src0 must be the copy if it holds one, or the op fails saying so. */
static vt_status run_unprepared(void *ctx, const vt_node *node, const char *op, bool need_weight) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, op);
    if (st != VT_OK) return st;
    if (need_weight && !(node->prepared & 1u) && f32_only()) {
        c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "%s: weight operand src0 arrived as the file's bytes "
                     "(VT_TEST_PREP_F32_ONLY: every matmul weight must have been offered)", op);
        return VT_ERR_INVALID;
    }
    if (need_weight && !(node->prepared & 1u) && holds_copy_of(node->src[0].data)) {
        c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "%s: weight operand src0 arrived as the file's bytes of a tensor it "
                     "prepared (the copy was not wired)", op);
        return VT_ERR_INVALID;
    }
    vt_node plain = *node;
    plain.prepared = 0;
    void *temps[VT_MAX_SRC] = {0};
    for (int s = 0; s < node->n_src && st == VT_OK; s++) {
        if (!(node->prepared & (1u << s))) continue;
        if (!vt_is_weight_operand(node->op, s)) {
            c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "%s: src%d marked prepared but is no weight operand", op, s);
            st = VT_ERR_INVALID;
            break;
        }
        const size_t n = tensor_bytes(c, &node->src[s]);
        temps[s] = c->host->alloc(n ? n : 1, 64);
        if (!temps[s]) {
            st = VT_ERR_NOMEM;
            break;
        }
        reverse_bytes(temps[s], node->src[s].data, n);
        plain.src[s].data = temps[s];
    }
    if (st == VT_OK) st = vt_backend_op(c->ref, node->op)(c->ref_ctx, &plain);
    for (int s = 0; s < VT_MAX_SRC; s++) c->host->free(temps[s]);
    return st;
}

static vt_status prep_matmul(void *ctx, const vt_node *node) { return run_unprepared(ctx, node, "matmul", true); }
static vt_status prep_get_rows(void *ctx, const vt_node *node) {
    return run_unprepared(ctx, node, "get_rows", false);
}
static vt_status prep_rms_norm(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    if (node->prepared) { /* declined at prepare time: must never arrive marked */
        c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "rms_norm: handed a weight marked prepared, which it declined");
        return VT_ERR_INVALID;
    }
    return fwd_rms_norm(ctx, node);
}

FWD_BACKEND("test plugin: keeps matmul weights byte-reversed through the prepare hook")
