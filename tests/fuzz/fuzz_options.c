/* fuzz_options.c — libFuzzer target for the option levers: ini file,
 * environment, vt_options_set and the CLI's argv parsing.
 *
 * Input layout: byte 0 is a set of flags (bit 0: load the ini, bit 1: export
 * the environment assignments, bit 2: parse the argv entries, bit 3: call
 * vt_options_set for the key=value assignments); the rest is split at 0xFF
 * bytes (never valid UTF-8, so text seeds stay readable). Part 0 is the ini
 * file's text, verbatim (NUL bytes and over-long lines included). Each later
 * part is one "NAME=VALUE" assignment or one argv entry: parts starting with
 * "VT_" go to the environment, parts starting with '-' are argv entries, the
 * others are vt_options_set keys.
 *
 * What must hold for every input, besides "no crash, no leak, no UB":
 *  - every refusal carries a message;
 *  - a refused load, set or flag leaves the options byte for byte as they
 *    were (the no-partial-state promise of options.h);
 *  - after any accepted change every knob is in its documented range, and
 *    its printed value (vt_options_value) is accepted back by vt_options_set
 *    and prints the same (what `vt config` shows can be pasted into an ini).
 *
 * The harness never lets the input name a file to open: VT_CONFIG and
 * --config are dropped and replaced by the harness's own temporary ini, so a
 * path like /dev/stdin cannot stall the fuzzer. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "options.h"
#include "serve_options.h"
#include "vt/vt_types.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SEPARATOR 0xFF
#define MAX_PARTS 32

enum { FLAG_INI = 1, FLAG_ENV = 2, FLAG_ARGV = 4, FLAG_SET = 8 };

/* The variables options.c reads (VT_CONFIG is the harness's to set). */
static const char *const env_vars[] = {"VT_BACKEND", "VT_THREADS", "VT_CTX_SIZE", "VT_KV_CACHE_F32",
                                       "VT_KV_CACHE_DTYPE"};
#define N_ENV_VARS (sizeof env_vars / sizeof env_vars[0])

static void fail_check(const char *what) {
    fprintf(stderr, "fuzz_options: invariant broken: %s\n", what);
    abort();
}

#define CHECK(cond)                                  \
    do {                                             \
        if (!(cond)) fail_check(#cond);              \
    } while (0)

/* One temporary ini file per process, rewritten for every input. */
static char temp_path[64];

static void remove_temp_file(void) { unlink(temp_path); }

static const char *ini_path(void) {
    char *path = temp_path;
    if (!path[0]) {
        snprintf(path, sizeof temp_path, "/tmp/vt-fuzz-options-XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0) fail_check("mkstemp");
        close(fd);
        atexit(remove_temp_file); /* libFuzzer ends with exit() when its time is up */
    }
    return path;
}

static void write_ini(const uint8_t *text, size_t len) {
    FILE *f = fopen(ini_path(), "wb");
    if (!f) fail_check("cannot write the temporary ini");
    if (len) fwrite(text, 1, len, f);
    fclose(f);
}

static void clear_env(void) {
    unsetenv("VT_CONFIG");
    for (size_t i = 0; i < N_ENV_VARS; i++) unsetenv(env_vars[i]);
}

/* Every knob inside its documented range (options.h). */
static void check_ranges(const vt_options *o) {
    CHECK(o->threads >= 1 && o->threads <= 1024);
    CHECK(o->batch_size >= 1 && o->batch_size <= 65536);
    CHECK(o->kv_cache_dtype == VT_F32 || o->kv_cache_dtype == VT_F16 || o->kv_cache_dtype == VT_BF16);
    CHECK(o->ctx_size >= 0 && o->ctx_size <= (INT64_C(1) << 24));
    CHECK(o->block_size >= 1 && o->block_size <= 256 && (o->block_size & (o->block_size - 1)) == 0);
    CHECK(o->temp >= 0 && o->temp == o->temp);
    CHECK(o->top_k >= -1);
    CHECK(o->top_p >= 0 && o->top_p <= 1);
    const vt_serve_options *s = vt_serve_options_of(o);
    CHECK(s->port >= 0 && s->port <= 65535);
    CHECK(s->body_limit >= 1024 && s->body_limit <= (INT64_C(1) << 30));
    CHECK(s->timeout >= 0 && s->timeout <= 1e7);
    CHECK(s->shutdown_grace >= 0 && s->shutdown_grace <= 1e7);
    CHECK(o->min_p >= 0 && o->min_p <= 1);
    CHECK(memchr(o->backend, 0, sizeof o->backend) && memchr(o->fallback, 0, sizeof o->fallback));
    CHECK(memchr(o->backend_path, 0, sizeof o->backend_path) && memchr(o->config_path, 0, sizeof o->config_path));
    CHECK(strcmp(vt_options_source(o, "kv_cache.dtype"), o->kv_cache_dtype_source) == 0);
}

/* Every printed value is accepted back and prints the same. */
static void check_round_trip(const vt_options *o) {
    for (int i = 0; i < vt_options_key_count(); i++) {
        const char *key = vt_options_key(i);
        char value[1100], again[1100];
        vt_error err = {0};
        CHECK(vt_options_value(o, key, value, sizeof value, &err) == VT_OK);
        vt_options copy = *o;
        if (vt_options_set(&copy, key, value, "cli", &err) != VT_OK) {
            fprintf(stderr, "fuzz_options: %s = '%s' printed but refused: %s\n", key, value, err.msg);
            abort();
        }
        CHECK(vt_options_value(&copy, key, again, sizeof again, &err) == VT_OK);
        CHECK(strcmp(value, again) == 0);
    }
}

/* A refusal: message present and the options untouched. */
static void check_refusal(const vt_options *before, const vt_options *after, const vt_error *err) {
    CHECK(err->msg[0] != '\0');
    CHECK(strlen(err->msg) < sizeof err->msg);
    CHECK(memcmp(before, after, sizeof *before) == 0);
}

/* Parts [1, n) as NUL-terminated strings (a part with a NUL inside ends there,
 * as it would in argv or the environment). */
typedef struct parts {
    char *text[MAX_PARTS];
    int n;
} parts;

static void split(const uint8_t *data, size_t size, parts *p, const uint8_t **ini, size_t *ini_len) {
    p->n = 0;
    const uint8_t *end = data + size, *cut = memchr(data, SEPARATOR, size);
    *ini = data;
    *ini_len = cut ? (size_t)(cut - data) : size;
    const uint8_t *s = cut ? cut + 1 : end;
    while (s < end && p->n < MAX_PARTS) {
        const uint8_t *next = memchr(s, SEPARATOR, (size_t)(end - s));
        size_t len = next ? (size_t)(next - s) : (size_t)(end - s);
        char *t = malloc(len + 1);
        if (!t) fail_check("malloc");
        memcpy(t, s, len);
        t[len] = '\0';
        p->text[p->n++] = t;
        s = next ? next + 1 : end;
    }
}

static void free_parts(parts *p) {
    for (int i = 0; i < p->n; i++) free(p->text[i]);
}

static void apply_sets(vt_options *o, const parts *p) {
    for (int i = 0; i < p->n; i++) {
        const char *a = p->text[i];
        if (a[0] == '-' || strncmp(a, "VT_", 3) == 0) continue;
        const char *eq = strchr(a, '=');
        if (!eq) continue;
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - a) < 127 ? (int)(eq - a) : 127, a);
        vt_options before = *o;
        vt_error err = {0};
        if (vt_options_set(o, key, eq + 1, "cli", &err) != VT_OK) {
            check_refusal(&before, o, &err);
        } else {
            CHECK(strcmp(vt_options_source(o, key), "cli") == 0);
            check_ranges(o);
        }
    }
}

/* argv: "run", the '-' parts (their values are the next part whatever it is,
 * as on a real command line), plus "--config TMP" when the ini is on. */
static void parse_argv(const parts *p, bool with_config) {
    char *argv[MAX_PARTS + 4];
    int argc = 0;
    argv[argc++] = "run";
    if (with_config) {
        argv[argc++] = "--config";
        argv[argc++] = (char *)ini_path();
    }
    for (int i = 0; i < p->n; i++) {
        const char *a = p->text[i];
        if (strncmp(a, "VT_", 3) == 0) continue;
        if (strncmp(a, "--config", 8) == 0) continue; /* only the harness names files */
        argv[argc++] = p->text[i];
    }
    argv[argc] = NULL;
    vt_cli_common c;
    vt_error err = {0};
    if (vt_cli_init(&c, argc, argv, &err) != VT_OK) {
        CHECK(err.msg[0] != '\0');
        return;
    }
    check_ranges(&c.opt);
    for (int i = 1; i < argc; i++) {
        vt_options before = c.opt;
        int at = i;
        vt_arg_result r = vt_cli_common_arg(&c, argc, argv, &i, &err);
        CHECK(i >= at && i < argc);
        if (r == VT_ARG_ERROR) {
            check_refusal(&before, &c.opt, &err);
            vt_error_clear(&err);
        } else if (r == VT_ARG_TAKEN) {
            check_ranges(&c.opt);
        }
    }
    check_round_trip(&c.opt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bool layer_declared; /* vt serve's [server] knobs, as the vt program has them */
    if (!layer_declared && vt_serve_options_declare(NULL) != VT_OK) fail_check("declaring the [server] layer");
    layer_declared = true;
    if (size == 0) return 0;
    unsigned flags = data[0];
    parts p;
    const uint8_t *ini;
    size_t ini_len;
    split(data + 1, size - 1, &p, &ini, &ini_len);
    clear_env();
    if (flags & FLAG_INI) write_ini(ini, ini_len);
    if (flags & FLAG_ENV) {
        for (int i = 0; i < p.n; i++) {
            const char *a = p.text[i];
            const char *eq = strchr(a, '=');
            if (strncmp(a, "VT_", 3) != 0 || !eq) continue;
            for (size_t k = 0; k < N_ENV_VARS; k++)
                if ((size_t)(eq - a) == strlen(env_vars[k]) && strncmp(a, env_vars[k], (size_t)(eq - a)) == 0)
                    setenv(env_vars[k], eq + 1, 1);
        }
    }

    vt_options o;
    vt_options_defaults(&o);
    check_ranges(&o);
    vt_options before = o;
    vt_error err = {0};
    vt_status st = vt_options_load(&o, (flags & FLAG_INI) ? ini_path() : NULL, &err);
    if (st != VT_OK) {
        check_refusal(&before, &o, &err);
    } else {
        check_ranges(&o);
        check_round_trip(&o);
    }
    if (flags & FLAG_SET) {
        apply_sets(&o, &p);
        check_round_trip(&o);
    }
    if (flags & FLAG_ARGV) parse_argv(&p, (flags & FLAG_INI) != 0);

    clear_env();
    free_parts(&p);
    return 0;
}
