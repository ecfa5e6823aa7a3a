/* kv_forward.h — the shared half of the KV-negotiation test backends
 * (kv_bf16_only.c, kv_no_convert.c): a backend that runs every op on the real
 * reference backend and differs from it only in what its supports() accepts.
 *
 * Forwarding to the reference (rather than writing kernels) keeps the plugins
 * honest: whatever they accept is computed by the oracle, so a forward through
 * them must agree with --backend reference, and the only thing under test is
 * the negotiation their narrower supports() forces on the plan builder.
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

/* One forwarding function per op: fwd_matmul, fwd_attention, ... */
#define FWD_OP(op)                                                     \
    __attribute__((unused)) static vt_status fwd_##op(void *ctx, const vt_node *node) { \
        const fwd_ctx *c = ctx;                                        \
        return c->ref->op(c->ref_ctx, node);                           \
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

#endif
