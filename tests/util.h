/* util.h — shared helpers for the CUnit runners.
 *
 * Each tests/test_*.c defines its suites and a main() that ends with
 * `return vt_test_run();`, which runs every registered suite and returns
 * non-zero when any test or suite set-up failed (CUnit's own runner returns 0
 * even then). */
#ifndef VT_TEST_UTIL_H
#define VT_TEST_UTIL_H

#include <CUnit/Basic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Add a suite with its tests; NULL-terminated arrays of {name, fn} are CUnit's CU_TestInfo. */
void vt_test_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc cleanup, CU_TestInfo *tests);
/* Run all suites; exit status for main(). */
int vt_test_run(void);

/* tests/data (the committed models and goldens; see tests/data/PROVENANCE.md).
 * Missing data is a failure, never a skip: when the folder is absent this
 * records a CUnit failure naming `what` and returns NULL. */
const char *vt_test_data_dir(const char *what);

/* Skips, for hardware or build facts only (no AVX2 on this CPU, oneDNN not
 * built). The current test returns after calling it; the runner then exits 77,
 * which ctest reports as skipped (SKIP_RETURN_CODE), unless something failed.
 * Missing data, a backend that is built but does not load, a refused engine:
 * those are failures. */
void vt_test_skip(const char *why);
/* The simd backend can run here: true when built and the CPU has AVX2/FMA/F16C.
 * False after vt_test_skip() otherwise. Whether it then actually loads is the
 * caller's assertion to make. */
bool vt_test_simd_expected(void);
/* What simd's isa entry reports for its avx512 tier on this CPU (the part
 * for BF16 weights only where it has AVX-512 BF16): the one place the tests
 * spell which ops that tier covers. */
const char *vt_test_simd_avx512_isa(void);
/* Whether simd, whose isa entry is isa_line, attends over a cache of
 * kv_dtype at head dim D in bf16 dot products (its isa line says "bf16
 * attention", and the products take head dims that are multiples of 64):
 * then its numbers are its own, held to reference's by a bound of their own,
 * not to the avx2 tier's bits. */
bool vt_test_simd_attends_in_bf16(const char *isa_line, int32_t kv_dtype, int64_t D);
/* What this CPU (or its OS) lacks for simd's avx512 tier, named for a skip;
 * NULL when the tier can run. */
const char *vt_test_simd_avx512_missing(void);
/* The onednn backend was built (VT_TEST_HAVE_ONEDNN); false after
 * vt_test_skip() otherwise. */
bool vt_test_onednn_expected(void);
/* A fresh temporary directory for this process (removed at exit). */
const char *vt_test_tmpdir(void);
/* tmpdir + "/" + name into buf. */
const char *vt_test_tmpfile(char *buf, size_t size, const char *name);
/* A file under the temporary directory holding text; its path in buf, or
 * NULL when it cannot be written. */
const char *vt_test_write_tmpfile(char *buf, size_t size, const char *name, const char *text);
/* Read a whole file (NUL-terminated, malloc'ed); NULL on failure. */
char *vt_test_read_file(const char *path, size_t *size);
/* A file under the temporary directory holding the first n bytes of src (a
 * download cut short), or all of it with n past its end; its path in buf,
 * or NULL when src cannot be read or the copy written. */
const char *vt_test_write_cut_file(char *buf, size_t size, const char *name, const char *src, size_t n);

/* Run a shell command, capturing stdout and stderr (each malloc'ed, may be NULL
 * pointers if not wanted). Returns the exit status (or -1). */
int vt_test_run_cmd(const char *cmd, char **out, char **err);

/* Run `vt ARGS` (printf-formatted) with the test plugins on the backend search
 * path, the plan check on (every forward re-offers its nodes as executed, in
 * Release too) and no other environment lever that could change the plan.
 * Output and status as vt_test_run_cmd. */
int vt_test_run_vt_checked(char **out, char **err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* err (a vt_error) records a failure with this status and some message: for
 * the tests whose point is the status, not the wording. */
#define VT_ASSERT_ERROR(err, status)                                                                                  \
    do {                                                                                                               \
        CU_ASSERT_EQUAL((err).code, (status));                                                                         \
        CU_ASSERT((err).msg[0] != '\0');                                                                               \
    } while (0)

/* Assert |a - b| <= tol with a readable failure. */
#define VT_ASSERT_NEAR(a, b, tol) CU_ASSERT_DOUBLE_EQUAL((a), (b), (tol))

#endif
