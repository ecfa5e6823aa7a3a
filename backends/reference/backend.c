/* backend.c — the reference backend's entry table: init, shutdown, supports,
 * the exported vt_backend_entry, and the per-thread scratch the ops share.
 *
 * The reference is the runtime's catch-all: it implements every op for every
 * dtype the operand conventions of vt_backend.h allow, and supports() says yes
 * exactly to the nodes that follow those conventions. Its probe accepts every
 * CPU (plain C) with the lowest in-tree score: it is the default only where
 * nothing faster loaded. */
#include <stdio.h>
#include <string.h>

#include "reference.h"

/* ---- per-thread scratch ---- */

bool ref_scratch_alloc(const ref_ctx *c, size_t bytes_per_thread, ref_scratch *s) {
    s->stride = (bytes_per_thread + 63) & ~(size_t)63;
    if (s->stride == 0) s->stride = 64;
    s->base = c->host->alloc(s->stride * (size_t)c->n_threads, 64);
    if (!s->base) c->host->log(VT_LOG_ERROR, REF_NAME, "out of memory for %zu bytes of scratch", s->stride * (size_t)c->n_threads);
    return s->base != NULL;
}

void *ref_scratch_slice(const ref_scratch *s, int thread) { return s->base + s->stride * (size_t)thread; }

void ref_scratch_free(const ref_ctx *c, ref_scratch *s) {
    c->host->free(s->base);
    s->base = NULL;
}

void ref_parallel(const ref_ctx *c, int64_t n, int64_t grain, vt_range_fn fn, void *arg) {
    if (n <= 0) return;
    vt_host_parallel_for(c->host, n, grain < 1 ? 1 : grain, fn, arg);
}

/* ---- the table ---- */

/* The host fields the reference calls; all exist since ABI 1.0. */
#define REF_HOST_SIZE_NEEDED (offsetof(vt_host, dtype_name) + sizeof(((vt_host *)0)->dtype_name))

static vt_status ref_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                          size_t err_size) {
    *ctx = NULL;
    /* The reference has no options: one given is a typo or meant for another
     * backend, and refusing says so instead of ignoring it. */
    if (config && config->options && config->options[0]) {
        snprintf(err, err_size, "unknown option '%s' (the reference backend has no options)", config->options);
        return VT_ERR_INVALID;
    }
    if (!host || host->struct_size < REF_HOST_SIZE_NEEDED || !host->log || !host->alloc || !host->free ||
        !host->parallel_for || !host->to_f32 || !host->from_f32 || !host->row_size || !host->block_length ||
        !host->dtype_name) {
        snprintf(err, err_size, "host table is incomplete (struct_size %u, want >= %zu)",
                 host ? host->struct_size : 0u, (size_t)REF_HOST_SIZE_NEEDED);
        return VT_ERR_BACKEND;
    }
    if (host->n_threads < 1) {
        snprintf(err, err_size, "host reports %d threads", (int)host->n_threads);
        return VT_ERR_BACKEND;
    }
    ref_ctx *c = host->alloc(sizeof *c, 64);
    if (!c) {
        snprintf(err, err_size, "out of memory for the backend state");
        return VT_ERR_NOMEM;
    }
    c->host = host;
    c->n_threads = host->n_threads;
    *ctx = c;
    return VT_OK;
}

static void ref_shutdown(void *ctx) {
    ref_ctx *c = ctx;
    if (c) c->host->free(c);
}

static int ref_supports(void *ctx, const vt_node *node) {
    (void)ctx;
    return vt_check_convention(node, NULL, 0) ? 1 : 0; /* exactly the conventions of vt_backend.h */
}

/* Plain C, no intrinsics: whatever the compiler makes of it for baseline x86-64. */
static const char *ref_isa(void *ctx) {
    (void)ctx;
    return "scalar";
}

static const vt_backend reference_backend = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = REF_NAME,
    .description = "plain C oracle: every op and dtype, double accumulation",
    .init = ref_init,
    .shutdown = ref_shutdown,
    .supports = ref_supports,
#define REF_OP_ENTRY_(ID, name, n_src, weight_src, since_minor, params) .name = ref_##name,
    VT_OP_LIST(REF_OP_ENTRY_)
#undef REF_OP_ENTRY_
    .isa = ref_isa,
    /* attention and the store read and write Q8_0 caches; rope reads frequency factors */
    .conventions = VT_CONVENTION_KV_Q8_0 | VT_CONVENTION_ROPE_FACTORS,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &reference_backend; }

/* In-tree probe scores rank the default backend: simd 100, onednn 50,
 * reference 10 (a plugin without a probe ranks 1). */
VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    if (reason && reason_size) snprintf(reason, reason_size, "portable C, runs on every CPU");
    return 10;
}
