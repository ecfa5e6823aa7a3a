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

/* Add a suite with its tests; NULL-terminated arrays of {name, fn} are CUnit's CU_TestInfo. */
void vt_test_add_suite(const char *name, CU_InitializeFunc init, CU_CleanupFunc cleanup, CU_TestInfo *tests);
/* Run all suites; exit status for main(). */
int vt_test_run(void);

/* ../shared (models, goldens) or NULL when absent; prints one "SKIP: ... (why)"
 * line the first time it is absent for `what`. */
const char *vt_test_shared_dir(const char *what);
/* A fresh temporary directory for this process (removed at exit). */
const char *vt_test_tmpdir(void);
/* tmpdir + "/" + name into buf. */
const char *vt_test_tmpfile(char *buf, size_t size, const char *name);
/* Read a whole file (NUL-terminated, malloc'ed); NULL on failure. */
char *vt_test_read_file(const char *path, size_t *size);

/* Run a shell command, capturing stdout and stderr (each malloc'ed, may be NULL
 * pointers if not wanted). Returns the exit status (or -1). */
int vt_test_run_cmd(const char *cmd, char **out, char **err);

/* Assert |a - b| <= tol with a readable failure. */
#define VT_ASSERT_NEAR(a, b, tol) CU_ASSERT_DOUBLE_EQUAL((a), (b), (tol))

#endif
