/* gate_file.h — the step gate's files (tests/plugins/step_gate.c, the
 * backend, and tests/serve_gate.c, the test's side): one number per file in
 * the gate's folder. Header-only so the plugin, which links nothing of the
 * tests, shares it. */
#ifndef VT_TEST_GATE_FILE_H
#define VT_TEST_GATE_FILE_H

#include <stdbool.h>
#include <stdio.h>

/* The number in dir/name, or -1 when there is no such file. */
static inline long gate_read_number(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

/* Replace dir/name by v (a rename, so a reader never sees half a number). */
static inline bool gate_write_number(const char *dir, const char *name, long v) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return false;
    bool ok = fprintf(f, "%ld\n", v) > 0;
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp, path) == 0;
}

#endif
