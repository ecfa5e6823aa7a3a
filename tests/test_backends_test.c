/* test_backends_test.c — `vt backends --test`, end to end: the shipped
 * backends pass their whole default battery, a backend wrong for one dtype of
 * one op fails exactly there, a crashing op is that case's FAIL and the run
 * goes on, bad lists and unloadable plugins are refused with the reason.
 *
 * The command runs as a subprocess (VT_CLI_PATH); the case generator it uses
 * (core/tools/op_cases.h) is also checked here in-process: deterministic in
 * its seed, and every case it makes follows the operand conventions (the
 * reference accepts it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"
#include "json_mini.h"
#include "op_cases.h"
#include "op_conformance.h"
#include "util.h"
#include "vt/vt_cpu.h"

#define BUG_Q6K_PLUGIN VT_TEST_PLUGIN_DIR "/libvt-backend-bug_matmul_q6_k.so"
#define CRASH_PLUGIN VT_TEST_PLUGIN_DIR "/libvt-backend-bug_rope_decode_crash.so"
#define BAD_ABI_PLUGIN VT_TEST_PLUGIN_DIR "/libvt-backend-bad_abi_major.so"
#define OPTIONS_PLUGIN VT_TEST_PLUGIN_DIR "/libvt-backend-options_probe.so"
#define NAN_PLUGIN VT_TEST_PLUGIN_DIR "/libvt-backend-bug_rms_norm_nan.so"
#define WIDE_PLUGIN VT_TEST_PLUGIN_DIR "/libvt-backend-bug_rms_norm_wide.so"

/* `vt ARGS`: exit status, stdout and stderr (caller frees). */
static int run_vt(const char *args, char **out, char **err) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", VT_CLI_PATH, args);
    return vt_test_run_cmd(cmd, out, err);
}

/* `vt backends --test ARGS --json`: its document in doc and its exit status. */
static int run_test_json(const char *args, json_value *doc) {
    char cmdargs[2048], *out = NULL, *err = NULL, msg[256] = "";
    snprintf(cmdargs, sizeof cmdargs, "backends --test %s --json", args);
    const int rc = run_vt(cmdargs, &out, &err);
    memset(doc, 0, sizeof *doc);
    const bool parsed = out && json_parse(out, strlen(out), doc, msg, sizeof msg);
    if (!parsed) fprintf(stderr, "vt %s: exit %d, no JSON (%s)\nstdout: %s\nstderr: %s\n", cmdargs, rc, msg,
                         out ? out : "", err ? err : "");
    CU_ASSERT_FATAL(parsed);
    free(out);
    free(err);
    return rc;
}

static const char *str(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL_FATAL(v->type, JSON_STRING);
    return v->str;
}

static double num(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    return v->type == JSON_NUMBER ? v->number : NAN;
}

static bool is_true(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    return v->type == JSON_BOOL && v->boolean;
}

static const json_value *array(const json_value *obj, const char *key) {
    const json_value *v = json_get(obj, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_EQUAL_FATAL(v->type, JSON_ARRAY);
    return v;
}

/* A document's cases agree with its counts, and every OK case is under its
 * threshold with a finite error. Returns the number of cases. */
static size_t check_consistent(const json_value *doc) {
    const json_value *cases = array(doc, "cases");
    size_t ok = 0, failed = 0;
    for (size_t i = 0; i < cases->n; i++) {
        const json_value *c = &cases->items[i];
        if (is_true(c, "ok")) {
            ok++;
            CU_ASSERT(isfinite(num(c, "error")));
            CU_ASSERT(num(c, "error") <= num(c, "threshold"));
        } else {
            failed++;
        }
        const char *phase = str(c, "phase");
        CU_ASSERT(strcmp(phase, "prefill") == 0 || strcmp(phase, "decode") == 0);
        CU_ASSERT(str(c, "shape")[0] != '\0');
    }
    CU_ASSERT_EQUAL(num(doc, "n_ok"), (double)ok);
    CU_ASSERT_EQUAL(num(doc, "n_failed"), (double)failed);
    return cases->n;
}

/* The whole default battery on simd, in the build this runs in. */
static void test_simd_passes(void) {
    if (!vt_test_simd_expected()) return;
    json_value doc;
    CU_ASSERT_EQUAL(run_test_json("simd", &doc), 0);
    CU_ASSERT_STRING_EQUAL(str(&doc, "backend"), "simd");
    const size_t n = check_consistent(&doc);
    CU_ASSERT_EQUAL(num(&doc, "n_failed"), 0);
    /* simd implements every op for every dtype: nothing declined, and every
     * op family has cases */
    CU_ASSERT_EQUAL(array(&doc, "declined")->n, 0);
    bool seen[VT_OP_COUNT] = {0};
    const json_value *cases = array(&doc, "cases");
    for (size_t i = 0; i < cases->n; i++) {
        const int op = vt_op_from_name(str(&cases->items[i], "op"));
        CU_ASSERT_FATAL(op >= 0);
        seen[op] = true;
    }
    for (int op = 0; op < VT_OP_COUNT; op++) CU_ASSERT(seen[op]);
    printf("\n  simd: %zu cases, all OK", n);
    json_free(&doc);
}

/* simd lists its instruction-set tiers (ABI 1.6): --test runs the battery
 * at each, every case naming its tier, both tiers' cases alike; a tier
 * the caller chose with --backend-option is tested alone. On a CPU with
 * one tier there is nothing to choose and the document has no tiers. */
static void test_simd_every_tier(void) {
    if (!vt_test_simd_expected()) return;
    const vt_cpu_features f = vt_cpu_detect();
    const bool vnni = f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni && f.os_saves_zmm;
    json_value doc;
    CU_ASSERT_EQUAL(run_test_json("simd --ops matmul,rms_norm --dtypes q4_k,f32", &doc), 0);
    check_consistent(&doc);
    const json_value *tiers = json_get(&doc, "tiers");
    if (!vnni) {
        CU_ASSERT_PTR_NULL(tiers);
        json_free(&doc);
        return;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(tiers);
    CU_ASSERT_EQUAL_FATAL(tiers->n, 2);
    CU_ASSERT_STRING_EQUAL(tiers->items[0].str, "isa=avx512");
    CU_ASSERT_STRING_EQUAL(tiers->items[1].str, "isa=avx2");
    const json_value *cases = array(&doc, "cases");
    size_t per_tier[2] = {0, 0};
    for (size_t i = 0; i < cases->n; i++) {
        const char *t = str(&cases->items[i], "tier");
        CU_ASSERT(strcmp(t, "isa=avx512") == 0 || strcmp(t, "isa=avx2") == 0);
        per_tier[strcmp(t, "isa=avx2") == 0]++;
    }
    CU_ASSERT(per_tier[0] > 0);
    CU_ASSERT_EQUAL(per_tier[0], per_tier[1]);
    json_free(&doc);

    CU_ASSERT_EQUAL(run_test_json("simd --ops rms_norm --backend-option simd.isa=avx2", &doc), 0);
    CU_ASSERT_PTR_NULL(json_get(&doc, "tiers"));
    CU_ASSERT(array(&doc, "cases")->n > 0);
    json_free(&doc);
}

/* onednn runs prefill matmul to f32 and declines the rest: its cases are
 * exactly those, all OK, and the rest is listed as declined. */
static void test_onednn_passes(void) {
    if (!vt_test_onednn_expected()) return;
    json_value doc;
    CU_ASSERT_EQUAL(run_test_json("onednn", &doc), 0);
    CU_ASSERT_STRING_EQUAL(str(&doc, "backend"), "onednn");
    const size_t n = check_consistent(&doc);
    CU_ASSERT(n > 0);
    CU_ASSERT_EQUAL(num(&doc, "n_failed"), 0);
    const json_value *cases = array(&doc, "cases");
    for (size_t i = 0; i < cases->n; i++) {
        CU_ASSERT_STRING_EQUAL(str(&cases->items[i], "op"), "matmul");
        CU_ASSERT_STRING_EQUAL(str(&cases->items[i], "phase"), "prefill");
    }
    const json_value *declined = array(&doc, "declined");
    bool attention = false, decode_matmul = false;
    for (size_t i = 0; i < declined->n; i++) {
        attention |= strcmp(str(&declined->items[i], "op"), "attention") == 0;
        decode_matmul |= strcmp(str(&declined->items[i], "op"), "matmul") == 0 &&
                         strcmp(str(&declined->items[i], "phase"), "decode") == 0;
    }
    CU_ASSERT(attention);
    CU_ASSERT(decode_matmul);
    json_free(&doc);
}

/* The plugin that drops the last block of each Q6_K row: every matmul q6_k
 * case fails (whatever the output dtype and phase), everything else passes. */
static void test_faulty_plugin_named(void) {
    json_value doc;
    CU_ASSERT_EQUAL(run_test_json("'" BUG_Q6K_PLUGIN "'", &doc), 1);
    CU_ASSERT_STRING_EQUAL(str(&doc, "backend"), "bug_matmul_q6_k");
    check_consistent(&doc);
    const json_value *cases = array(&doc, "cases");
    int q6k = 0, failed = 0;
    for (size_t i = 0; i < cases->n; i++) {
        const json_value *c = &cases->items[i];
        const bool is_q6k = strcmp(str(c, "op"), "matmul") == 0 && strncmp(str(c, "dtypes"), "q6_k->", 6) == 0;
        q6k += is_q6k;
        if (!is_true(c, "ok")) {
            failed++;
            CU_ASSERT(is_q6k);
            CU_ASSERT(num(c, "error") > 100 * num(c, "threshold")); /* far out, not marginal */
        } else {
            CU_ASSERT(!is_q6k);
        }
    }
    CU_ASSERT(q6k > 0);
    CU_ASSERT_EQUAL(failed, q6k);
    CU_ASSERT_EQUAL(array(&doc, "declined")->n, 0);
    json_free(&doc);

    /* the text report names the op and dtype on the FAIL lines and in the summary */
    char *out = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test '" BUG_Q6K_PLUGIN "' --ops matmul --dtypes q6_k,q4_k", &out, NULL), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nmatmul: 9 OK, 9 FAIL\n"));
    int fail_lines = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "  ", 2) != 0 || !strstr(line, " FAIL")) continue; /* case lines are indented */
        CU_ASSERT(strncmp(line, "  matmul            q6_k->", 26) == 0);
        fail_lines++;
    }
    CU_ASSERT_EQUAL(fail_lines, 9);
    free(out);
}

/* A rope that crashes in decode: each decode rope case is a FAIL naming
 * SIGSEGV, and the prefill rope cases and the next op family still run. */
static void test_crash_is_a_case_fail(void) {
    json_value doc;
    CU_ASSERT_EQUAL(run_test_json("'" CRASH_PLUGIN "' --ops rope,add", &doc), 1);
    check_consistent(&doc);
    const json_value *cases = array(&doc, "cases");
    int crashed = 0, add_ok = 0, rope_prefill_ok = 0;
    for (size_t i = 0; i < cases->n; i++) {
        const json_value *c = &cases->items[i];
        const bool rope = strcmp(str(c, "op"), "rope") == 0, decode = strcmp(str(c, "phase"), "decode") == 0;
        if (rope && decode) {
            CU_ASSERT(!is_true(c, "ok"));
            const json_value *note = json_get(c, "note");
            CU_ASSERT(note && note->type == JSON_STRING && strstr(note->str, "signal 11"));
            crashed++;
        } else {
            CU_ASSERT(is_true(c, "ok"));
            add_ok += !rope;
            rope_prefill_ok += rope;
        }
    }
    CU_ASSERT_EQUAL(crashed, vt_op_case_count(VT_OP_ROPE, VT_F32, VT_PHASE_DECODE) * 3);
    CU_ASSERT_EQUAL(rope_prefill_ok, vt_op_case_count(VT_OP_ROPE, VT_F32, VT_PHASE_PREFILL) * 3);
    CU_ASSERT(add_ok > 0);
    json_free(&doc);
}

/* Unknown names are refused before anything runs, with the valid ones listed. */
/* A backend named reference found before vt's own would be the oracle every
 * case is judged against (one declining every case "passed" them all):
 * refused, naming both files. */
static void test_shadowed_reference_is_refused(void) {
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test simd --ops add --backend-path '" VT_TEST_PLUGIN_DIR "/shadow'", &out, &err), 2);
    CU_ASSERT(err && strstr(err, "the backend named 'reference' found first is") &&
              strstr(err, "/shadow/libvt-backend-reference.so") && strstr(err, "not vt's own"));
    if (!err || !strstr(err, "not vt's own")) fprintf(stderr, "got: %s\n", err ? err : "(nothing)");
    free(out);
    free(err);
}

/* A kernel writing f32 into the f16 and bf16 outputs it accepted: each such
 * case fails saying it wrote past the end of dst (a guard after every
 * buffer), its f32 cases pass. */
static void test_write_past_dst_is_named(void) {
    char *out = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test '" WIDE_PLUGIN "' --ops rms_norm", &out, NULL), 1);
    CU_ASSERT(out && strstr(out, "f32->f16") && strstr(out, "FAIL  (wrote past the end of dst (f16, "));
    CU_ASSERT(out && strstr(out, "FAIL  (wrote past the end of dst (bf16, "));
    CU_ASSERT(out && strstr(out, "rms_norm: 4 OK, 8 FAIL"));
    if (!out || !strstr(out, "rms_norm: 4 OK, 8 FAIL")) fprintf(stderr, "got: %s\n", out ? out : "(nothing)");
    free(out);
}

/* A backend that declines every case selected was judged on nothing: exit
 * 2 saying so, not the 0 of a pass (good_minimal runs rms_norm alone); the
 * op it runs still passes. */
static void test_all_declined_tests_nothing(void) {
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test '" VT_TEST_PLUGIN_DIR "/libvt-backend-good_minimal.so' --ops add", &out, &err),
                    2);
    CU_ASSERT(out && strstr(out, "0 OK, 0 FAIL"));
    CU_ASSERT(err && strstr(err, "declined every case selected, so nothing was tested"));
    free(out);
    free(err);
    out = err = NULL;
    CU_ASSERT_EQUAL(
        run_vt("backends --test '" VT_TEST_PLUGIN_DIR "/libvt-backend-good_minimal.so' --ops rms_norm", &out, &err), 0);
    free(out);
    free(err);
}

/* --help after --test is the help, not a backend named --help */
static void test_help_after_test(void) {
    char *out = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test --help", &out, NULL), 0);
    CU_ASSERT(out && strstr(out, "usage: vt backends") && strstr(out, "--backend-option"));
    free(out);
}

static void test_unknown_op_or_dtype(void) {
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test reference --ops matmul,softmax", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "'softmax'"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(err, "matmul, attention, reshape_and_cache, rms_norm, rope, swiglu, add, get_rows, convert"));
    CU_ASSERT(!out || strstr(out, "OK") == NULL);
    free(out);
    free(err);
    CU_ASSERT_EQUAL(run_vt("backends --test reference --dtypes q4_k,q3_k", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "'q3_k'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k"));
    free(out);
    free(err);
    /* known names that select no case of the battery test nothing: not a pass */
    CU_ASSERT_EQUAL(run_vt("backends --test reference --ops swiglu --dtypes f16", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "nothing was tested"));
    free(out);
    free(err);
}

/* A plugin file that does not load: exit 2 with the reason --check gives. */
static void test_refused_plugin(void) {
    char *out = NULL, *err = NULL, *check = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test '" BAD_ABI_PLUGIN "'", &out, &err), 2);
    CU_ASSERT_EQUAL(run_vt("backends --check '" BAD_ABI_PLUGIN "'", &check, NULL), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(check);
    const char *reason = "ABI major 2, runtime speaks 1";
    CU_ASSERT_PTR_NOT_NULL(strstr(check, reason));
    char *missing = NULL; /* a file that is not there is said to be missing, not misnamed */
    CU_ASSERT_EQUAL(run_vt("backends --check /nonexistent/libvt-backend-gone.so", &missing, NULL), 1);
    CU_ASSERT(missing && strstr(missing, "/nonexistent/libvt-backend-gone.so: refused: No such file or directory"));
    free(missing);
    /* one error line on stderr, as every command reports a refusal, and no report begun */
    CU_ASSERT(strncmp(err, "vt: backends --test ", 20) == 0 && strchr(err, '\n') == err + strlen(err) - 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, reason));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "refused"));
    CU_ASSERT(!out || !out[0]);
    free(out);
    free(err);
    free(check);
    out = err = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test no_such_backend", &out, &err), 2);
    CU_ASSERT(err && strstr(err, "vt: backends --test no_such_backend: no backend named 'no_such_backend'") != NULL);
    free(out);
    free(err);
}

/* A case the runtime never offers (a widened convention the table does not
 * read) is listed among the declined with why, not as if supports() said no:
 * kv_q8_0_not_opted leaves vt_backend.conventions 0, so no rope with
 * frequency factors (ABI 1.8) reaches it. */
static void test_not_offered_says_why(void) {
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test '" VT_TEST_PLUGIN_DIR "/libvt-backend-kv_q8_0_not_opted.so' --ops rope",
                           &out, &err),
                    0);
    CU_ASSERT(out && strstr(out, "f32+factors->f32"));
    CU_ASSERT(out && strstr(out, "(not offered: VT_CONVENTION_ROPE_FACTORS)"));
    CU_ASSERT(out && strstr(out, " 0 FAIL"));
    free(out), free(err);
}

/* A plugin file is loaded with the options given for its backend, by
 * --test (a tier's option reaches it the same way) and by --check, though it
 * is not on the search path: options_probe refuses to start when its options
 * say refuse=1, and its refusal is the answer; with refuse=0 it loads. */
static void test_a_file_gets_its_options(void) {
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --test '" OPTIONS_PLUGIN "' --backend-option options_probe.refuse=1", &out, &err), 2);
    CU_ASSERT(err && strstr(err, "refusing as asked by its options 'refuse=1'") != NULL);
    free(out), free(err);
    out = err = NULL;
    CU_ASSERT_EQUAL(run_vt("backends --check '" OPTIONS_PLUGIN "' --backend-option options_probe.refuse=1", &out, &err), 1);
    CU_ASSERT(out && strstr(out, "refused: init failed: options_probe: refusing as asked by its options 'refuse=1'"));
    free(out), free(err);
    out = err = NULL;
    /* refuse=0: it loads (and, running no op, declines every case: a run
     * that tested nothing) */
    CU_ASSERT_EQUAL(run_vt("backends --test '" OPTIONS_PLUGIN "' --ops rms_norm --backend-option options_probe.refuse=0",
                           &out, &err),
                    2);
    CU_ASSERT(out && strstr(out, "options_probe: 0 OK, 0 FAIL") != NULL);
    CU_ASSERT(err && strstr(err, "declined every case selected") && !strstr(err, "no backend named"));
    free(out), free(err);
}

/* A plugin crashing inside a run: vt names the backend and the node before
 * the signal takes its usual course (the process still dies of it). */
static void test_crash_in_a_run_names_the_node(void) {
    char *out = NULL, *err = NULL, args[2048];
    snprintf(args, sizeof args,
             "run -m '%s/models/qwen3-tiny-f32.gguf' -p Hello -n 4 -t 1 --backend bug_rope_decode_crash "
             "--fallback reference --backend-path '%s'",
             vt_test_data_dir("qwen3 tiny"), VT_TEST_PLUGIN_DIR);
    CU_ASSERT_NOT_EQUAL(run_vt(args, &out, &err), 0);
    CU_ASSERT(err && strstr(err, "vt: crashed (SIGSEGV) while backend 'bug_rope_decode_crash' ran node blk.") &&
              strstr(err, " (rope): `vt backends --test bug_rope_decode_crash`"));
    if (!err || !strstr(err, "vt: crashed (SIGSEGV)")) fprintf(stderr, "got: %s\n", err ? err : "(nothing)");
    free(out), free(err);
}

/* A plugin whose rms_norm writes NaN: --test fails exactly its rms_norm
 * cases, and a generation on it stops (exit 5) saying a backend wrote a
 * non-finite logit instead of printing what a sampler makes of NaN. */
static void test_nan_writing_plugin(void) {
    json_value doc;
    CU_ASSERT_EQUAL(run_test_json("'" NAN_PLUGIN "' --ops rms_norm,add --dtypes f32", &doc), 1);
    const json_value *cases = array(&doc, "cases");
    size_t failed_norm = 0, other_failed = 0;
    for (size_t i = 0; i < cases->n; i++) {
        const bool norm = strcmp(str(&cases->items[i], "op"), "rms_norm") == 0;
        if (!is_true(&cases->items[i], "ok")) {
            if (norm) failed_norm++;
            else other_failed++;
        }
    }
    CU_ASSERT(failed_norm > 0);
    CU_ASSERT_EQUAL(other_failed, 0);
    json_free(&doc);
    char *out = NULL, *err = NULL, args[2048];
    snprintf(args, sizeof args, "run -m '%s/models/qwen3-tiny-f32.gguf' -p Hello -n 8 -t 1 --backend bug_rms_norm_nan "
             "--backend-path '%s'", vt_test_data_dir("qwen3 tiny"), VT_TEST_PLUGIN_DIR);
    CU_ASSERT_EQUAL(run_vt(args, &out, &err), 5);
    CU_ASSERT(err && strstr(err, "the forward wrote a non-finite logit") != NULL);
    CU_ASSERT(out && strspn(out, "\n") == strlen(out)); /* nothing generated */
    free(out), free(err);
}

/* The generator: the same seed gives the same bytes, another seed others;
 * every case follows the conventions (the reference accepts it) except the
 * combinations the convention does not have, which are exactly swiglu with
 * a narrow output. */
static void test_generator(void) {
    vt_harness *h = vt_harness_open(1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    const vt_backend_entry *ref = vt_harness_backend(h, "reference");
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    int total = 0;
    for (int op = 0; op < VT_OP_COUNT; op++) {
        int32_t axis[8];
        const int n_axis = vt_op_case_axis(op, axis, 8);
        /* floats; the cache's dtypes (floats and q8_0); the weights'; f32 alone for routing */
        CU_ASSERT(n_axis == (op == VT_OP_MATMUL || op == VT_OP_GET_ROWS || op == VT_OP_MOE_MATMUL ? 8
                             : op == VT_OP_ATTENTION || op == VT_OP_RESHAPE_AND_CACHE          ? 4
                             : op == VT_OP_MOE_ROUTE || op == VT_OP_MOE_COMBINE                ? 1
                                                                                                : 3));
        for (int a = 0; a < n_axis; a++)
            for (int phase = 0; phase <= 1; phase++)
                for (int i = 0; i < vt_op_case_count(op, axis[a], (vt_phase)phase); i++, total++) {
                    vt_op_case c1, c2, c3;
                    vt_error err = {0};
                    CU_ASSERT_EQUAL_FATAL(vt_op_case_build(op, axis[a], (vt_phase)phase, i, 5, &c1, &err), VT_OK);
                    CU_ASSERT_EQUAL_FATAL(vt_op_case_build(op, axis[a], (vt_phase)phase, i, 5, &c2, &err), VT_OK);
                    CU_ASSERT_EQUAL_FATAL(vt_op_case_build(op, axis[a], (vt_phase)phase, i, 6, &c3, &err), VT_OK);
                    const bool narrow_swiglu = op == VT_OP_SWIGLU && axis[a] != VT_F32;
                    CU_ASSERT_EQUAL(vt_op_case_accepted(ref, &c1), !narrow_swiglu);
                    const size_t bytes = vt_harness_nbytes(&c1.node.src[0]);
                    CU_ASSERT(memcmp(c1.node.src[0].data, c2.node.src[0].data, bytes) == 0);
                    CU_ASSERT(memcmp(c1.node.src[0].data, c3.node.src[0].data, bytes) != 0);
                    CU_ASSERT_STRING_EQUAL(c1.shape, c2.shape);
                    vt_op_case_free(&c1);
                    vt_op_case_free(&c2);
                    vt_op_case_free(&c3);
                }
    }
    CU_ASSERT(total > 100);
    vt_harness_close(h);
}

/* NMSE itself: scale-free, zero for equal, infinite for a lone non-finite. */
static void test_nmse(void) {
    const float ref[4] = {1, -2, 3, 0}, same[4] = {1, -2, 3, 0}, off[4] = {1, -2, 3, 1};
    const float scaled_ref[4] = {10, -20, 30, 0}, scaled_off[4] = {10, -20, 30, 10};
    const float nan_out[4] = {1, -2, NAN, 0};
    CU_ASSERT_EQUAL(vt_nmse(same, ref, 4), 0.0);
    VT_ASSERT_NEAR(vt_nmse(off, ref, 4), 1.0 / 14.0, 1e-12);
    VT_ASSERT_NEAR(vt_nmse(scaled_off, scaled_ref, 4), 1.0 / 14.0, 1e-12);
    CU_ASSERT(isinf(vt_nmse(nan_out, ref, 4)));
}

int main(void) {
    CU_TestInfo tests[] = {
        {"simd passes its whole default battery", test_simd_passes},
        {"simd's battery runs at every tier it lists", test_simd_every_tier},
        {"onednn passes, declining what it does not run", test_onednn_passes},
        {"a plugin wrong for matmul q6_k fails exactly there", test_faulty_plugin_named},
        {"a crashing op is that case's FAIL, the run goes on", test_crash_is_a_case_fail},
        {"unknown op or dtype lists the valid ones", test_unknown_op_or_dtype},
        {"a reference shadowed by another file of its name is refused, naming both", test_shadowed_reference_is_refused},
        {"--test --help is the help", test_help_after_test},
        {"an op writing past the end of its output is named so", test_write_past_dst_is_named},
        {"a plugin crashing inside a run: vt names the backend and the node", test_crash_in_a_run_names_the_node},
        {"a plugin that does not load: exit 2 with the reason", test_refused_plugin},
        {"a case never offered is declined saying why", test_not_offered_says_why},
        {"every case declined tests nothing: exit 2", test_all_declined_tests_nothing},
        {"the case generator is deterministic and follows the conventions", test_generator},
        {"nmse", test_nmse},
        {"a plugin file gets its options (--test, --check)", test_a_file_gets_its_options},
        {"a plugin writing NaN: --test fails its op, a run stops saying so", test_nan_writing_plugin},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("backends --test", NULL, NULL, tests);
    return vt_test_run();
}
