/* kv_forward.h — the shared half of the KV-negotiation test backends
 * (tests/plugins/kv_*.c): a backend that runs every op on the real reference
 * backend and differs from it only in what its supports() accepts.
 *
 * Forwarding to the reference (rather than writing kernels) keeps the plugins
 * honest: whatever they accept is computed by the oracle, so a forward through
 * them must agree with --backend reference, and the only thing under test is
 * the negotiation their narrower supports() forces on the plan builder.
 *
 * Every op first asks the plugin's own supports() about the node it was
 * handed (data pointers cleared, as supports() sees nodes) and fails with
 * VT_ERR_INVALID, logging why, if it would decline it: the reference accepts
 * more, so without this a node the runtime changed after negotiation (another
 * rank, dtype or param) would run anyway and the mismatch go unseen.
 *
 * A plugin defines PLUGIN_NAME before including this header and then
 * `static int plugin_supports(void *ctx, const vt_node *node)`.
 *
 * The reference library is found through VT_TEST_REFERENCE_SO when set, else
 * next to this plugin in the build tree: <build>/tests/plugins/this.so ->
 * <build>/lib/vt/libvt-backend-reference.so. It is dlopen'ed once and never
 * closed (the registry's rule for backend libraries). */
#ifndef VT_TEST_KV_FORWARD_H
#define VT_TEST_KV_FORWARD_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vt/vt_backend.h"

#ifndef PLUGIN_NAME
#error "define PLUGIN_NAME before including kv_forward.h"
#endif

typedef struct fwd_ctx {
    const vt_host *host;
    const vt_backend *ref; /* the reference backend's table */
    void *ref_ctx;         /* its init context */
} fwd_ctx;

/* Path of the reference backend library into buf; false if it cannot be told. */
static bool fwd_reference_path(char *buf, size_t size) {
    const char *env = getenv("VT_TEST_REFERENCE_SO");
    if (env && *env) return (size_t)snprintf(buf, size, "%s", env) < size;
    Dl_info info;
    if (!dladdr((void *)&fwd_reference_path, &info) || !info.dli_fname) return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) return false;
    int dir_len = (int)(slash - info.dli_fname);
    int n = snprintf(buf, size, "%.*s/../../lib/vt/libvt-backend-reference.so", dir_len, info.dli_fname);
    return n > 0 && (size_t)n < size;
}

static vt_status fwd_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                          size_t err_size) {
    *ctx = NULL;
    char path[4096];
    if (!fwd_reference_path(path, sizeof path)) {
        snprintf(err, err_size, "cannot locate the reference backend (set VT_TEST_REFERENCE_SO)");
        return VT_ERR_BACKEND;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, err_size, "cannot load the reference backend %s: %s", path, dlerror());
        return VT_ERR_BACKEND;
    }
    vt_backend_entry_fn entry = (vt_backend_entry_fn)dlsym(lib, VT_BACKEND_ENTRY_SYMBOL);
    const vt_backend *ref = entry ? entry() : NULL;
    if (!ref || ref->abi_major != VT_ABI_MAJOR || ref->struct_size < VT_BACKEND_SIZE_1_0) {
        snprintf(err, err_size, "%s is not a usable reference backend", path);
        return VT_ERR_BACKEND;
    }
    fwd_ctx *c = host->alloc(sizeof *c, 64);
    if (!c) {
        snprintf(err, err_size, "out of memory");
        return VT_ERR_NOMEM;
    }
    c->host = host;
    c->ref = ref;
    vt_status st = ref->init(host, config, &c->ref_ctx, err, err_size);
    if (st != VT_OK) {
        host->free(c);
        return st;
    }
    *ctx = c;
    return VT_OK;
}

static void fwd_shutdown(void *ctx) {
    fwd_ctx *c = ctx;
    if (!c) return;
    c->ref->shutdown(c->ref_ctx);
    c->host->free(c);
}

/* Would the reference run this node? (Everything these plugins accept must
 * also pass this: they only ever narrow the reference's answer.) */
static int fwd_reference_supports(const fwd_ctx *c, const vt_node *node) {
    vt_op_fn fn = vt_backend_op(c->ref, node->op);
    return fn && c->ref->supports(c->ref_ctx, node);
}

static int plugin_supports(void *ctx, const vt_node *node);

/* "f32[64,2,1]" for a log line. */
static void fwd_describe(const fwd_ctx *c, const vt_tensor *t, char *buf, size_t size) {
    int n = snprintf(buf, size, "%s[", c->host->dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && n > 0 && (size_t)n < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%lld", i ? "," : "", (long long)t->ne[i]);
    if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

/* Would this plugin accept the node it is asked to run? */
static vt_status fwd_enforce(void *ctx, const vt_node *node, const char *op) {
    const fwd_ctx *c = ctx;
    vt_node q = *node;
    for (int i = 0; i < VT_MAX_SRC; i++) q.src[i].data = NULL;
    q.dst.data = NULL;
    if (plugin_supports(ctx, &q)) return VT_OK;
    char shapes[512] = "";
    size_t len = 0;
    for (int i = 0; i < node->n_src && i < VT_MAX_SRC && len < sizeof shapes; i++) {
        char t[64];
        fwd_describe(c, &node->src[i], t, sizeof t);
        len += (size_t)snprintf(shapes + len, sizeof shapes - len, "%s%s", i ? ", " : "", t);
    }
    c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "%s(%s): asked to run a node its supports() declines", op, shapes);
    return VT_ERR_INVALID;
}

/* One forwarding function per op: fwd_matmul, fwd_attention, ... */
#define FWD_OP(op)                                                                      \
    __attribute__((unused)) static vt_status fwd_##op(void *ctx, const vt_node *node) { \
        const fwd_ctx *c = ctx;                                                         \
        vt_status st = fwd_enforce(ctx, node, #op);                                       \
        return st != VT_OK ? st : c->ref->op(c->ref_ctx, node);                         \
    }
FWD_OP(matmul)
FWD_OP(attention)
FWD_OP(reshape_and_cache)
FWD_OP(rms_norm)
FWD_OP(rope)
FWD_OP(swiglu)
FWD_OP(add)
FWD_OP(get_rows)
FWD_OP(convert)
#undef FWD_OP

/* The plugin's table and entry point: every op forwarded (the store through
 * store_fn, fwd_reshape_and_cache unless the plugin has its own), with the
 * plugin's supports(). */
#define FWD_BACKEND(description_, store_fn)                                          \
    static const vt_backend table = {                                                 \
        .abi_major = VT_ABI_MAJOR,                                                    \
        .abi_minor = VT_ABI_MINOR,                                                    \
        .struct_size = sizeof(vt_backend),                                            \
        .name = PLUGIN_NAME,                                                          \
        .description = description_,                                                  \
        .init = fwd_init,                                                             \
        .shutdown = fwd_shutdown,                                                     \
        .supports = plugin_supports,                                                  \
        .matmul = fwd_matmul,                                                         \
        .attention = fwd_attention,                                                   \
        .reshape_and_cache = store_fn,                                                \
        .rms_norm = fwd_rms_norm,                                                     \
        .rope = fwd_rope,                                                             \
        .swiglu = fwd_swiglu,                                                         \
        .add = fwd_add,                                                               \
        .get_rows = fwd_get_rows,                                                     \
        .convert = fwd_convert,                                                       \
    };                                                                                \
    VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }

#endif
