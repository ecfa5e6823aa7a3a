/* engine_fixture.c — the real engine path, opened from tests. */
#include "engine_fixture.h"

#include <string.h>

#include "quant.h"

void vt_fixture_options(vt_options *o, const char *backend, int32_t kv_dtype) {
    vt_options_defaults(o);
    snprintf(o->backend, sizeof o->backend, "%s", backend ? backend : "");
    /* Named, not the ranking's choice: the tolerances of the tests built on
     * the fixture (golden, KV matrix) were measured with the exact oracle
     * running what the preferred backend declines, whatever else is loaded. */
    snprintf(o->fallback, sizeof o->fallback, "reference");
    o->kv_cache_dtype = kv_dtype;
    snprintf(o->kv_cache_dtype_source, sizeof o->kv_cache_dtype_source, "test");
    o->threads = 2;
    /* Every test forward re-offers its nodes as executed, in Release too. */
    o->check_plan = true;
}

vt_status vt_fixture_open(vt_fixture *f, const char *path, const char *backend, int32_t kv_dtype, bool all_logits) {
    memset(f, 0, sizeof *f);
    vt_options o;
    vt_fixture_options(&o, backend, kv_dtype);
    vt_status st = vt_model_load(path, &f->model, &f->err);
    if (st == VT_OK) st = vt_engine_create(&o, f->model, all_logits, &f->engine, &f->err);
    if (st != VT_OK) {
        fprintf(stderr, "fixture %s on %s (kv %s): %s\n", path, backend ? backend : "default", vt_dtype_name(kv_dtype),
                f->err.msg);
        vt_fixture_close(f);
        f->err.code = st;
    }
    return st;
}

void vt_fixture_close(vt_fixture *f) {
    vt_engine_free(f->engine);
    vt_model_free(f->model);
    f->engine = NULL;
    f->model = NULL;
}
