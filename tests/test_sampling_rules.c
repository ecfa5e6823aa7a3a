/* test_sampling_rules.c — every entry point of a sampling setting applies
 * the one rule of core/runtime/sampling_rules.c: the ini/CLI options, the
 * vt_batch API (and its public checker), the scheduler behind it, and the
 * server's JSON parser; and `vt run --help` shows the table's defaults
 * (conf/vt.ini's are checked in test_options). */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "sampling_rules.h"
#include "util.h"
#include "vt/vt.h"
#if VT_TEST_LINKS_SERVE
#include "serve_request.h"
#endif

/* Values on both sides of every edge of every rule, with the verdict the
 * rule gives (judged as stored: a float, or an int32 for top_k). */
typedef struct probe {
    vt_sampling_knob knob;
    double value;
    bool accepted;
} probe;

static const probe probes[] = {
    {VT_KNOB_TEMPERATURE, 0, true},          {VT_KNOB_TEMPERATURE, -1e-9, false},
    {VT_KNOB_TEMPERATURE, 1e6, true},        {VT_KNOB_TEMPERATURE, 2e6, false},
    {VT_KNOB_TEMPERATURE, 3e38, false},      {VT_KNOB_TOP_K, 0, true},
    {VT_KNOB_TOP_K, -1, true},               {VT_KNOB_TOP_K, -2, false},
    {VT_KNOB_TOP_K, 2147483647.0, true},
    {VT_KNOB_TOP_K, 2147483648.0, false},    {VT_KNOB_TOP_P, 1, true},
    {VT_KNOB_TOP_P, 0, true},                {VT_KNOB_TOP_P, -1e-300, true}, /* -0 as a float */
    {VT_KNOB_TOP_P, -1e-30, false},          {VT_KNOB_TOP_P, 1.5, false},
    {VT_KNOB_MIN_P, 0, true},                {VT_KNOB_MIN_P, 1, true},
    {VT_KNOB_MIN_P, -0.01, false},           {VT_KNOB_MIN_P, 1.01, false},
    {VT_KNOB_PRESENCE_PENALTY, -2, true},    {VT_KNOB_PRESENCE_PENALTY, 2, true},
    {VT_KNOB_PRESENCE_PENALTY, 2.5, false},  {VT_KNOB_FREQUENCY_PENALTY, -2.5, false},
    {VT_KNOB_FREQUENCY_PENALTY, 0, true},
};
#define N_PROBES (sizeof probes / sizeof *probes)

static void test_public_checker_is_the_rule(void) {
    for (size_t i = 0; i < N_PROBES; i++) {
        const vt_sampling_rule *r = vt_sampling_rule_of(probes[i].knob);
        const char *accepted = NULL;
        const bool ok = vt_sampling_field_ok(r->api_name, probes[i].value, &accepted);
        if (ok != probes[i].accepted) printf("\n  %s = %g: %d, want %d", r->api_name, probes[i].value, ok, probes[i].accepted);
        CU_ASSERT_EQUAL(ok, probes[i].accepted);
        CU_ASSERT_EQUAL(vt_sampling_accepts(probes[i].knob, probes[i].value), probes[i].accepted);
        CU_ASSERT_PTR_NOT_NULL(accepted);
        if (accepted) CU_ASSERT_STRING_EQUAL(accepted, r->accepted);
    }
    const char *accepted = "x";
    CU_ASSERT_FALSE(vt_sampling_field_ok("temp", 0, &accepted)); /* the ini's name, not a request field */
    CU_ASSERT_PTR_NULL(accepted);
    CU_ASSERT_FALSE(vt_sampling_field_ok(NULL, 0, NULL));
}

/* The options (ini, env, CLI) take the rule's verdict, and a refusal quotes
 * what the rule accepts. */
static void test_options_follow_the_rule(void) {
    for (size_t i = 0; i < N_PROBES; i++) {
        const vt_sampling_rule *r = vt_sampling_rule_of(probes[i].knob);
        if (!r->ini_key) continue;
        vt_options o;
        vt_options_defaults(&o);
        char key[64], value[64];
        snprintf(key, sizeof key, "sampling.%s", r->ini_key);
        snprintf(value, sizeof value, r->integer ? "%.0f" : "%.17g", probes[i].value);
        vt_error err = {0};
        const vt_status st = vt_options_set(&o, key, value, "cli", &err);
        CU_ASSERT_EQUAL(st, probes[i].accepted ? VT_OK : VT_ERR_INVALID);
        if (st != VT_OK) CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, r->accepted));
    }
}

/* vt_batch_add refuses exactly what the rule refuses, naming the field. */
static void test_batch_requests_follow_the_rule(void) {
    const char *dir = vt_test_data_dir("test models");
    if (!dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/aidreams260k-q8_0.gguf", dir);
    static const char *const settings[] = {"runtime.backend=reference", "runtime.threads=1", NULL};
    vt_session_options so = {.struct_size = sizeof so, .settings = settings};
    vt_batch *b = NULL;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(vt_batch_open(path, &so, &b, err, sizeof err), VT_OK);
    const int32_t prompt[] = {1, 5, 9};
    for (size_t i = 0; i < N_PROBES; i++) {
        vt_batch_request r;
        vt_batch_request_init(&r);
        r.ids = prompt;
        r.n_ids = 3;
        r.max_new_tokens = 1;
        const double v = probes[i].value;
        switch (probes[i].knob) {
        case VT_KNOB_TEMPERATURE: r.temperature = (float)v; break;
        case VT_KNOB_TOP_K:
            if (v > 2147483647.0 || v < -2147483648.0) continue; /* not an int32: no request can carry it */
            r.top_k = (int32_t)v;
            break;
        case VT_KNOB_TOP_P: r.top_p = (float)v; break;
        case VT_KNOB_MIN_P: r.min_p = (float)v; break;
        case VT_KNOB_PRESENCE_PENALTY: r.presence_penalty = (float)v; break;
        case VT_KNOB_FREQUENCY_PENALTY: r.frequency_penalty = (float)v; break;
        default: continue;
        }
        uint64_t id = 0;
        const vt_status st = vt_batch_add(b, &r, &id, err, sizeof err);
        CU_ASSERT_EQUAL(st, probes[i].accepted ? VT_OK : VT_ERR_INVALID);
        if (st == VT_OK) {
            CU_ASSERT_EQUAL(vt_batch_cancel(b, id, err, sizeof err), VT_OK);
            CU_ASSERT_EQUAL(vt_batch_remove(b, id, err, sizeof err), VT_OK);
        } else {
            char name[64];
            snprintf(name, sizeof name, "request.%s", vt_sampling_rule_of(probes[i].knob)->api_name);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, name));
        }
    }
    /* an API request's defaults leave every token untouched (greedy, filters off) */
    vt_batch_request r;
    vt_batch_request_init(&r);
    CU_ASSERT_EQUAL(r.temperature, 0.0f);
    CU_ASSERT_EQUAL(r.top_k, 0);
    CU_ASSERT_EQUAL(r.top_p, 1.0f);
    CU_ASSERT_EQUAL(r.min_p, 0.0f);
    vt_batch_close(b);
}

#if VT_TEST_LINKS_SERVE
/* The server's JSON parser: the same verdicts, a 400 naming the field. */
static void test_server_follows_the_rule(void) {
    for (size_t i = 0; i < N_PROBES; i++) {
        const vt_sampling_rule *r = vt_sampling_rule_of(probes[i].knob);
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\": \"hi\", \"%s\": %.17g}", r->api_name, probes[i].value);
        vt_serve_request req;
        vt_serve_error e;
        memset(&e, 0, sizeof e);
        const bool ok = vt_serve_parse_request(VT_SERVE_COMPLETION, body, strlen(body), NULL, &req, &e);
        CU_ASSERT_EQUAL(ok, probes[i].accepted);
        if (ok) vt_serve_request_free(&req);
        else {
            CU_ASSERT_EQUAL(e.status, 400);
            CU_ASSERT_STRING_EQUAL(e.param, r->api_name);
        }
    }
}
#endif

/* vt run --help quotes the table's defaults. */
static void test_help_shows_the_defaults(void) {
    char *out = NULL;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' run --help", VT_CLI_PATH);
    CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, &out, NULL), 0);
    char want[160];
    snprintf(want, sizeof want, "temperature, 0 = greedy (default %g)", vt_sampling_rule_of(VT_KNOB_TEMPERATURE)->preset);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want) : NULL);
    snprintf(want, sizeof want, "sampling filters (defaults %g, %g, %g)", vt_sampling_rule_of(VT_KNOB_TOP_K)->preset,
             vt_sampling_rule_of(VT_KNOB_TOP_P)->preset, vt_sampling_rule_of(VT_KNOB_MIN_P)->preset);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want) : NULL);
    free(out);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"vt_sampling_field_ok is the rule", test_public_checker_is_the_rule},
        {"options (ini, env, CLI) follow the rule", test_options_follow_the_rule},
        {"vt_batch_add follows the rule and names the field", test_batch_requests_follow_the_rule},
#if VT_TEST_LINKS_SERVE
        {"the server's parser follows the rule, a 400 naming the field", test_server_follows_the_rule},
#endif
        {"vt run --help shows the table's defaults", test_help_shows_the_defaults},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("sampling rules", NULL, NULL, tests);
    return vt_test_run();
}
