/* util.c — CUnit runner with a truthful exit status, and file helpers. */
#include "util.h"

#include "registry.h"
#include "vt/vt_cpu.h"
#include "vt/vt_dtype.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static bool registry_ready;
static unsigned tests_skipped; /* vt_test_skip() calls */

static void ensure_registry(void) {
    if (registry_ready) return;
    if (CU_initialize_registry() != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: cannot initialize registry\n");
        exit(2);
    }
    registry_ready = true;
}

void vt_test_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc cleanup, CU_TestInfo *tests) {
    ensure_registry();
    CU_pSuite s = CU_add_suite(name, init, cleanup);
    if (!s) {
        fprintf(stderr, "CUnit: cannot add suite %s\n", name);
        exit(2);
    }
    for (CU_TestInfo *t = tests; t && t->pName; t++) {
        if (!CU_add_test(s, t->pName, t->pTestFunc)) {
            fprintf(stderr, "CUnit: cannot add test %s\n", t->pName);
            exit(2);
        }
    }
}

int vt_test_run(void) {
    ensure_registry();
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    /* Read the counts before CU_cleanup_registry() resets them. */
    unsigned tests_failed = CU_get_number_of_tests_failed();
    unsigned suites_failed = CU_get_number_of_suites_failed();
    unsigned asserts_failed = CU_get_number_of_failures();
    unsigned tests_run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (tests_failed || suites_failed || asserts_failed) {
        fprintf(stderr, "FAILED: %u tests, %u suites failed\n", tests_failed, suites_failed);
        return 1;
    }
    if (tests_run == 0) {
        fprintf(stderr, "FAILED: no test ran\n");
        return 1;
    }
    if (tests_skipped) {
        /* 77 = ctest's SKIP_RETURN_CODE: the runner did not run all it has. */
        printf("SKIPPED: %u of %u tests skipped for a hardware or build fact\n", tests_skipped, tests_run);
        return 77;
    }
    return 0;
}

const char *vt_test_data_dir(const char *what) {
    static char path[4096];
    static bool checked, present;
    if (!checked) {
        const char *env = getenv("VT_TEST_DATA_DIR");
        snprintf(path, sizeof path, "%s", env && *env ? env : VT_TEST_DATA_DIR);
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/PROVENANCE.md", path);
        present = access(probe, R_OK) == 0;
        checked = true;
    }
    if (!present) {
        printf("\nMISSING: %s: the test data folder %s is absent or incomplete\n", what ? what : "test data", path);
        CU_FAIL("the committed test data (tests/data) is missing");
        return NULL;
    }
    return path;
}


void vt_test_skip(const char *why) {
    printf("\nSKIP: %s\n", why);
    tests_skipped++;
}

bool vt_test_simd_expected(void) {
#if VT_TEST_HAVE_SIMD
    if (vt_cpu_has_avx2_fma_f16c()) return true;
    vt_test_skip("this CPU lacks AVX2/FMA/F16C, which the simd backend needs");
#else
    vt_test_skip("the simd backend is not built (not x86-64, or VT_BUILD_SIMD=OFF)");
#endif
    return false;
}

bool vt_test_onednn_expected(void) {
#if VT_TEST_HAVE_ONEDNN
    return true;
#else
    vt_test_skip("the onednn backend is not built (no libdnnl-dev at configure time)");
    return false;
#endif
}

static char tmpdir[256];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void remove_tmpdir(void) {
    if (tmpdir[0] && !getenv("VT_TEST_KEEP_TMP")) nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *vt_test_tmpdir(void) {
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/vt-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

const char *vt_test_tmpfile(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", vt_test_tmpdir(), name);
    return buf;
}

const char *vt_test_write_tmpfile(char *buf, size_t size, const char *name, const char *text) {
    FILE *f = fopen(vt_test_tmpfile(buf, size, name), "w");
    if (!f) return NULL;
    const bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? buf : NULL;
}

const char *vt_test_write_cut_file(char *buf, size_t size, const char *name, const char *src, size_t n) {
    size_t len = 0;
    char *bytes = vt_test_read_file(src, &len);
    if (!bytes) return NULL;
    if (n > len) n = len;
    FILE *f = fopen(vt_test_tmpfile(buf, size, name), "wb");
    const bool ok = f && fwrite(bytes, 1, n, f) == n;
    free(bytes);
    return f && fclose(f) == 0 && ok ? buf : NULL;
}

char *vt_test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (size) *size = (size_t)n;
    }
    return buf;
}

int vt_test_run_cmd(const char *cmd, char **out, char **err) {
    char out_path[512], err_path[512], full[8192];
    static int counter;
    snprintf(out_path, sizeof out_path, "%s/cmd%d.out", vt_test_tmpdir(), counter);
    snprintf(err_path, sizeof err_path, "%s/cmd%d.err", vt_test_tmpdir(), counter++);
    snprintf(full, sizeof full, "(%s) >'%s' 2>'%s' </dev/null", cmd, out_path, err_path);
    int rc = system(full);
    if (out) *out = vt_test_read_file(out_path, NULL);
    if (err) *err = vt_test_read_file(err_path, NULL);
    if (rc == -1) return -1;
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

int vt_test_run_vt_checked(char **out, char **err, const char *fmt, ...) {
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd,
             "env -u VT_KV_CACHE_DTYPE -u VT_KV_CACHE_F32 -u VT_CONFIG -u VT_BACKEND -u VT_CTX_SIZE "
             "VT_CHECK_PLAN=1 VT_BACKEND_PATH='%s' '%s' %s",
             VT_TEST_PLUGIN_DIR, VT_CLI_PATH, args);
    return vt_test_run_cmd(cmd, out, err);
}

const char *vt_test_simd_avx512_missing(void) {
    const vt_cpu_features f = vt_cpu_detect();
    return !vt_test_simd_expected()                   ? "AVX2/FMA/F16C"
           : !f.os_saves_zmm                          ? "the OS's AVX-512 state (XCR0 bits 5-7)"
           : !f.avx512f || !f.avx512bw || !f.avx512vl ? "AVX-512 F/BW/VL"
           : !f.avx512_vnni                           ? "AVX-512 VNNI"
                                                      : NULL;
}

bool vt_test_simd_attends_in_bf16(const char *isa_line, int32_t kv_dtype, int64_t D) {
    return kv_dtype == VT_BF16 && D % 64 == 0 && vt_isa_line_attends_bf16(isa_line);
}

const char *vt_test_simd_avx512_isa(void) {
    return vt_cpu_detect().avx512_bf16
               ? "avx512_vnni (prepared q4_k, q5_k, q6_k, q8_0, q4_0 matmul; file-layout q4_k, q6_k decode; attention; "
                 "avx512_bf16: bf16 weights in bf16 matmul, bf16 caches in bf16 attention; the rest avx2)"
               : "avx512_vnni (prepared q4_k, q5_k, q6_k, q8_0, q4_0 matmul; file-layout q4_k, q6_k decode; attention; "
                 "the rest avx2)";
}
