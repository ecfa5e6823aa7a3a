/* test_backend_options.c — a backend's own options ([backend.NAME] in the
 * ini, --backend-option NAME.key=value) reach its init as config->options,
 * change what it accepts (the plan shows it), and a bad one, or one for a
 * backend that does not exist, stops engine creation with an error naming the
 * backend and the option. Uses onednn's documented options (decode=0|1): those
 * cases are skipped when onednn is not built. */
#include <stdlib.h>
#include <string.h>

#include "api_options.h"
#include "engine_fixture.h"
#include "synth.h"
#include "util.h"

static char model_path[1024];

static int write_model(void) {
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    vt_error err = {0};
    if (vt_synth_shape(&p, "tiny", &err) != VT_OK) return 1;
    p.type = "q4_k_m";
    vt_test_tmpfile(model_path, sizeof model_path, "opts.gguf");
    return vt_synth_write(&p, model_path, &err) == VT_OK ? 0 : 1;
}

static void test_ini_and_cli_collect_per_backend_lines(void) {
    vt_options o;
    vt_error err = {0};
    vt_options_defaults(&o);
    char ini[1024];
    FILE *f = fopen(vt_test_tmpfile(ini, sizeof ini, "b.ini"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("[kv_cache]\ndtype = f32\n[backend.onednn]\ndecode = 1\ntile_kib = 256\n[backend.my-plugin]\nmode = fast\n", f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(vt_options_load(&o, ini, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(o.backend_options, "onednn.decode=1\nonednn.tile_kib=256\nmy-plugin.mode=fast\n");
    CU_ASSERT_EQUAL(vt_options_set_backend_option(&o, "onednn.precision", "f32", &err), VT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(o.backend_options, "onednn.precision=f32\n"));
    /* A later value of the same NAME.key replaces the earlier one: the
     * command line over the ini, and the backend never sees a key twice. */
    CU_ASSERT_EQUAL(vt_options_set_backend_option(&o, "onednn.decode", "0", &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(o.backend_options,
                           "onednn.tile_kib=256\nmy-plugin.mode=fast\nonednn.precision=f32\nonednn.decode=0\n");
    /* The public settings take backend options as backend.NAME.key=value. */
    const char *settings[] = {"backend.my-plugin.mode=slow", "backend.other.k=v", NULL};
    vt_session_options so = {sizeof so, ini, settings, false};
    vt_options api;
    CU_ASSERT_EQUAL(vt_api_options(&so, &api, NULL, &err), VT_OK);
    CU_ASSERT_STRING_EQUAL(api.backend_options, "onednn.decode=1\nonednn.tile_kib=256\nmy-plugin.mode=slow\nother.k=v\n");
    /* each remembers where it was set, for the errors that name it */
    char src[64];
    CU_ASSERT_STRING_EQUAL(vt_options_backend_option_source(&api, "onednn.tile_kib", src, sizeof src), "ini 5");
    CU_ASSERT_STRING_EQUAL(vt_options_backend_option_source(&api, "my-plugin.mode", src, sizeof src), "api");
    CU_ASSERT_STRING_EQUAL(vt_options_backend_option_source(&o, "onednn.precision", src, sizeof src), "cli");
    CU_ASSERT_PTR_NULL(vt_options_backend_option_source(&o, "onednn.nothing", src, sizeof src));
    const char *bad[] = {"backend.Other.k=v", NULL};
    so.settings = bad;
    CU_ASSERT_EQUAL(vt_api_options(&so, &api, NULL, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "backend.Other.k=v"));
    /* Values that would break the "key=value,..." string are refused. */
    CU_ASSERT_EQUAL(vt_options_set_backend_option(&o, "onednn.x", "a,b", &err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_options_set_backend_option(&o, "onednn", "1", &err), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_options_set_backend_option(&o, "One.x", "1", &err), VT_ERR_INVALID);
    /* A bad [backend.NAME] line names the file and line. */
    f = fopen(ini, "w");
    fputs("[backend.onednn]\ndecode = 1\nbad key = 2\n", f);
    fclose(f);
    vt_options_defaults(&o);
    CU_ASSERT_EQUAL(vt_options_load(&o, ini, &err), VT_ERR_INVALID); /* a key no backend option can have */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ":3:"));
    CU_ASSERT_STRING_EQUAL(o.backend_options, ""); /* a failed load changes nothing */
}

/* onednn is built (else the test is skipped) and then it must load. */
static bool onednn_loads(void) {
    if (!vt_test_onednn_expected()) return false;
    vt_fixture f;
    if (vt_fixture_open(&f, model_path, "onednn", VT_F16, false) != VT_OK) {
        CU_FAIL("the onednn backend is built but does not load");
        return false;
    }
    vt_fixture_close(&f);
    return true;
}

/* Count decode-plan matmul nodes on the preferred backend. */
static int decode_matmuls_on_preferred(const vt_engine *e) {
    int n = 0;
    for (int32_t i = 0; i < e->decode->n_nodes; i++)
        n += e->decode->nodes[i].op == VT_OP_MATMUL && e->decode->nodes[i].backend == e->preferred;
    return n;
}

static void test_an_option_changes_the_plan(void) {
    if (!onednn_loads()) return;
    vt_fixture plain, opted;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&plain, model_path, "onednn", VT_F16, false), VT_OK);
    vt_options o;
    vt_fixture_options(&o, "onednn", VT_F16);
    CU_ASSERT_EQUAL_FATAL(vt_options_set_backend_option(&o, "onednn.decode", "1", NULL), VT_OK);
    memset(&opted, 0, sizeof opted);
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &opted.model, &opted.err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&o, opted.model, false, &opted.engine, &opted.err), VT_OK);
    /* onednn declines decode matmuls by default (measured slower) and takes them with decode=1 */
    CU_ASSERT_EQUAL(decode_matmuls_on_preferred(plain.engine), 0);
    CU_ASSERT_EQUAL(decode_matmuls_on_preferred(opted.engine), 7 * plain.model->hp.n_layer + 1);
    int32_t ids[4] = {1, 20, 30, 40}, next = 7;
    CU_ASSERT_EQUAL(vt_engine_eval(opted.engine, ids, 4, false, &opted.err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_eval(opted.engine, &next, 1, true, &opted.err), VT_OK);
    vt_fixture_close(&plain);
    vt_fixture_close(&opted);
}

/* An option a backend refuses stops engine creation whichever backend is
 * preferred (left to the backend alone it would only drop that backend from
 * the plan, silently), naming the backend, the option and its reason. */
static void test_a_bad_option_stops_the_engine(void) {
    if (!onednn_loads()) return;
    vt_options o;
    vt_fixture_options(&o, "reference", VT_F16);
    CU_ASSERT_EQUAL_FATAL(vt_options_set_backend_option(&o, "onednn.frob", "1", NULL), VT_OK);
    vt_fixture f;
    memset(&f, 0, sizeof f);
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &f.model, &f.err), VT_OK);
    CU_ASSERT_EQUAL(vt_engine_create(&o, f.model, false, &f.engine, &f.err), VT_ERR_BACKEND);
    CU_ASSERT_PTR_NULL(f.engine);
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "backend onednn refused its options"));
    CU_ASSERT_PTR_NOT_NULL(strstr(f.err.msg, "--backend-option onednn.frob=1"));
    vt_fixture_close(&f);
}

/* The reference, which has no options, refuses any; simd refuses a key it
 * does not take (it takes isa); an option for a backend that does not exist
 * is an error naming it: none of them is silently ignored. */
static void test_options_no_backend_takes_are_refused(void) {
    vt_fixture f;
    memset(&f, 0, sizeof f);
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &f.model, &f.err), VT_OK);
    const char *keys[] = {"reference.foo", "nobackend.foo", "simd.foo"};
    const size_t n_keys = vt_test_simd_expected() ? 3 : 2;
    for (size_t k = 0; k < n_keys; k++) {
        vt_options o;
        vt_fixture_options(&o, "reference", VT_F16);
        CU_ASSERT_EQUAL_FATAL(vt_options_set_backend_option(&o, keys[k], "1", NULL), VT_OK);
        vt_error err = {0};
        vt_engine *e = NULL;
        vt_status st = vt_engine_create(&o, f.model, false, &e, &err);
        /* a backend that refused at init, or an option naming no backend (a bad argument) */
        CU_ASSERT_EQUAL(st, k == 1 ? VT_ERR_INVALID : VT_ERR_BACKEND);
        VT_ASSERT_ERROR(err, st);
        CU_ASSERT_PTR_NULL(e);
        /* the refusal names the option as the user wrote it */
        char want[64];
        snprintf(want, sizeof want, "--backend-option %s=1", keys[k]);
        if (!strstr(err.msg, want)) printf("\n  %s: %s", keys[k], err.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, k == 1 ? "no backend named 'nobackend'" : "refused its options"));
        vt_engine_free(e);
    }
    vt_fixture_close(&f);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"[backend.NAME] and --backend-option collect per-backend lines", test_ini_and_cli_collect_per_backend_lines},
        {"onednn decode=1 moves decode matmuls onto onednn", test_an_option_changes_the_plan},
        {"an option onednn refuses stops the engine, naming both", test_a_bad_option_stops_the_engine},
        {"options reference or simd do not take, or for no backend, are refused", test_options_no_backend_takes_are_refused},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("backend options", write_model, NULL, tests);
    return vt_test_run();
}
