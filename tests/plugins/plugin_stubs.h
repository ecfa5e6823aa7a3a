/* plugin_stubs.h — the do-nothing parts of the test-only backends.
 *
 * Each tests/plugins/bad_*.c is a backend that is wrong in exactly one way;
 * everything else about it comes from here, so the one defect is the whole
 * file. The stubs are correct: init succeeds, supports() accepts nothing,
 * rms_norm is declared but never reached. */
#ifndef VT_TEST_PLUGIN_STUBS_H
#define VT_TEST_PLUGIN_STUBS_H

#include "vt/vt_backend.h"

#define STUB_UNUSED __attribute__((unused))

STUB_UNUSED static vt_status stub_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                           size_t err_size) {
    (void)host, (void)config, (void)err, (void)err_size;
    *ctx = NULL;
    return VT_OK;
}

STUB_UNUSED static void stub_shutdown(void *ctx) { (void)ctx; }

STUB_UNUSED static int stub_supports(void *ctx, const vt_node *node) {
    (void)ctx, (void)node;
    return 0;
}

STUB_UNUSED static vt_status stub_rms_norm(void *ctx, const vt_node *node) {
    (void)ctx, (void)node;
    return VT_ERR_UNSUPPORTED;
}

/* A table with every field given (no designated initialiser is overridden,
 * which -Wextra would flag). STUB_* are the well-formed defaults. */
#define STUB_MAJOR VT_ABI_MAJOR
#define STUB_MINOR VT_ABI_MINOR
#define STUB_SIZE ((uint32_t)sizeof(vt_backend))
#define STUB_TABLE(major, minor, size, name_, init_, shutdown_, supports_)                                 \
    {                                                                                                      \
        .abi_major = (major), .abi_minor = (minor), .struct_size = (size), .name = (name_),                \
        .description = "test plugin", .init = (init_), .shutdown = (shutdown_), .supports = (supports_), \
        .rms_norm = stub_rms_norm                                                                          \
    }

#endif
