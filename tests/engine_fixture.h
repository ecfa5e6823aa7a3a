/* engine_fixture.h — open a model on the real engine path (model -> backends
 * -> negotiated plans) from a test, with explicit options. */
#ifndef VT_TEST_ENGINE_FIXTURE_H
#define VT_TEST_ENGINE_FIXTURE_H

#include <stdbool.h>

#include "engine_internal.h" /* tests inspect the engine's plans, cache and weights */

typedef struct vt_fixture {
    vt_model *model;
    vt_engine *engine;
    vt_error err;
} vt_fixture;

/* Load path and build an engine on `backend` (fallback reference) with the
 * given KV-cache dtype, 2 threads, the plan check on (VT_CHECK_PLAN), no
 * config file and no environment levers.
 * all_logits: every position's logits. Returns VT_OK or the error in f->err. */
vt_status vt_fixture_open(vt_fixture *f, const char *path, const char *backend, int32_t kv_dtype, bool all_logits);
void vt_fixture_close(vt_fixture *f);

/* Options as vt_fixture_open uses them, for tests that tweak more. */
void vt_fixture_options(vt_options *o, const char *backend, int32_t kv_dtype);

#endif
