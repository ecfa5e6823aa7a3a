/* bad_nonsense_caps.c — supports() says yes to everything, even ops and
 * dtypes that do not exist. Its init allocates through the host, so a runtime
 * that refuses it without calling shutdown leaks (LeakSanitizer catches it). */
#include "plugin_stubs.h"

static const vt_host *host_of_ctx;

static vt_status alloc_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                            size_t err_size) {
    (void)config, (void)err, (void)err_size;
    host_of_ctx = host;
    *ctx = host->alloc(64, 64);
    return *ctx ? VT_OK : VT_ERR_NOMEM;
}

static void free_shutdown(void *ctx) { host_of_ctx->free(ctx); }

static int says_yes(void *ctx, const vt_node *node) {
    (void)ctx, (void)node;
    return 1;
}

static const vt_backend table = STUB_TABLE(STUB_MAJOR, STUB_MINOR, STUB_SIZE, "bad_nonsense_caps", alloc_init, free_shutdown, says_yes);

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &table; }
