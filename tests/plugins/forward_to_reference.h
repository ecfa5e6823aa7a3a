/* forward_to_reference.h — the shared half of the test backends that wrap
 * the real reference backend (tests/plugins/kv_*.c, auto_*.c, bug_*.c,
 * prep_reversed.c): a backend that runs every op on the reference and differs
 * from it only in what its supports() accepts, or in the one op it replaces.
 *
 * Forwarding to the reference (rather than writing kernels) keeps the plugins
 * honest: whatever they accept is computed by the oracle, so a forward through
 * them must agree with --backend reference, and the only thing under test is
 * what the plugin changes (the negotiation a narrower supports() forces on
 * the plan builder, or the defect it plants in one op).
 *
 * Every op first asks the plugin's own supports() about the node it was
 * handed (data pointers cleared, as supports() sees nodes) and fails with
 * VT_ERR_INVALID, logging why, if it would decline it: the reference accepts
 * more, so without this a node the runtime changed after negotiation (another
 * rank, dtype or param) would run anyway and the mismatch go unseen.
 *
 * A plugin defines PLUGIN_NAME before including this header and then
 * `static int plugin_supports(void *ctx, const vt_node *node)`, or defines
 * FWD_SUPPORTS_AS_REFERENCE to accept exactly what the reference does. It
 * ends with FWD_BACKEND("description"): the table and entry point. To replace
 * an op or a table field it defines, before including this header, the
 * matching FWD_* name below (FWD_MATMUL my_matmul, FWD_ABI_MINOR 0, ...);
 * the macro is only expanded in FWD_BACKEND, after its function is defined.
 *
 * The reference library is found through VT_TEST_REFERENCE_SO when set, else
 * next to this plugin in the build tree: <build>/tests/plugins/this.so ->
 * <build>/lib/vt/libvt-backend-reference.so. It is dlopen'ed once and never
 * closed (the registry's rule for backend libraries). */
#ifndef VT_TEST_FORWARD_TO_REFERENCE_H
#define VT_TEST_FORWARD_TO_REFERENCE_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vt/vt_backend.h"

#ifndef PLUGIN_NAME
#error "define PLUGIN_NAME before including forward_to_reference.h"
#endif

/* What FWD_BACKEND puts in the table unless the plugin said otherwise. */
#ifndef FWD_ABI_MINOR
#define FWD_ABI_MINOR VT_ABI_MINOR
#endif
#ifndef FWD_STRUCT_SIZE
#define FWD_STRUCT_SIZE sizeof(vt_backend)
#endif
/* The reference reads every widened convention; a plugin may opt out. */
#ifndef FWD_CONVENTIONS
#define FWD_CONVENTIONS (VT_CONVENTION_KV_Q8_0 | VT_CONVENTION_ROPE_FACTORS)
#endif
#ifndef FWD_INIT
#define FWD_INIT fwd_init
#endif
#ifndef FWD_MATMUL
#define FWD_MATMUL fwd_matmul
#endif
#ifndef FWD_ATTENTION
#define FWD_ATTENTION fwd_attention
#endif
#ifndef FWD_RESHAPE_AND_CACHE
#define FWD_RESHAPE_AND_CACHE fwd_reshape_and_cache
#endif
#ifndef FWD_RMS_NORM
#define FWD_RMS_NORM fwd_rms_norm
#endif
#ifndef FWD_ROPE
#define FWD_ROPE fwd_rope
#endif
#ifndef FWD_GET_ROWS
#define FWD_GET_ROWS fwd_get_rows
#endif
#ifndef FWD_PREPARE_WEIGHT
#define FWD_PREPARE_WEIGHT NULL
#endif
#ifndef FWD_RELEASE_WEIGHT
#define FWD_RELEASE_WEIGHT NULL
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

#ifdef FWD_SUPPORTS_AS_REFERENCE
static int plugin_supports(void *ctx, const vt_node *node) { return fwd_reference_supports(ctx, node); }
#else
static int plugin_supports(void *ctx, const vt_node *node);
#endif

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
FWD_OP(moe_route)
FWD_OP(moe_matmul)
FWD_OP(moe_combine)
#undef FWD_OP

/* The plugin's table and entry point: every op forwarded but those the
 * plugin replaced through FWD_*, with the plugin's supports(). */
#define FWD_BACKEND(description_)                                                     \
    static const vt_backend table = {                                                 \
        .abi_major = VT_ABI_MAJOR,                                                    \
        .abi_minor = FWD_ABI_MINOR,                                                   \
        .struct_size = (uint32_t)(FWD_STRUCT_SIZE),                                   \
        .name = PLUGIN_NAME,                                                          \
        .description = description_,                                                  \
        .init = FWD_INIT,                                                             \
        .shutdown = fwd_shutdown,                                                     \
        .supports = plugin_supports,                                                  \
        .matmul = FWD_MATMUL,                                                         \
        .attention = FWD_ATTENTION,                                                   \
        .reshape_and_cache = FWD_RESHAPE_AND_CACHE,                                   \
        .rms_norm = FWD_RMS_NORM,                                                     \
        .rope = FWD_ROPE,                                                             \
        .swiglu = fwd_swiglu,                                                         \
        .add = fwd_add,                                                               \
        .get_rows = FWD_GET_ROWS,                                                     \
        .convert = fwd_convert,                                                       \
        .prepare_weight = FWD_PREPARE_WEIGHT,                                         \
        .release_weight = FWD_RELEASE_WEIGHT,                                         \
        .moe_route = fwd_moe_route,                                                   \
        .moe_matmul = fwd_moe_matmul,                                                 \
        .moe_combine = fwd_moe_combine,                                               \
        .conventions = FWD_CONVENTIONS,                                               \
    };                                                                                \
    VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }

#endif
