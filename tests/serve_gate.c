/* serve_gate.c — see serve_gate.h. */
#include "serve_gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gate_file.h"
#include "util.h"

bool serve_gate_init(serve_gate *g, const char *name) {
    vt_test_tmpfile(g->dir, sizeof g->dir, name);
    return mkdir(g->dir, 0755) == 0;
}

long serve_gate_reached(const serve_gate *g) {
    long n = gate_read_number(g->dir, "reached");
    return n < 0 ? 0 : n;
}

void serve_gate_allow(const serve_gate *g, long n) { gate_write_number(g->dir, "allow", n); }

void serve_gate_hold(const serve_gate *g) { serve_gate_allow(g, serve_gate_reached(g)); }

void serve_gate_open(const serve_gate *g) {
    char path[600];
    snprintf(path, sizeof path, "%s/allow", g->dir);
    unlink(path);
}

bool serve_gate_wait_reached(const serve_gate *g, long n, double seconds) {
    double end = serve_now() + seconds;
    while (serve_gate_reached(g) < n && serve_now() < end) serve_sleep_ms(5);
    return serve_gate_reached(g) >= n;
}

/* serve_start or serve_spawn on the step_gate backend with gate g. */
static bool start_gated(bool (*start)(serve_server *, const char *, const char *, const char *const *), serve_server *s,
                        const serve_gate *g, const char *model, const char *log_name, const char *const *extra) {
    const char *argv[40] = {"--backend", "step_gate"};
    int n = 2;
    for (; *extra && n < 38; extra++) argv[n++] = *extra;
    argv[n] = NULL;
    /* The child inherits them; nothing else in this runner loads backends. */
    setenv("VT_BACKEND_PATH", VT_TEST_PLUGIN_DIR, 1);
    setenv("VT_TEST_STEP_GATE", g->dir, 1);
    bool ok = start(s, model, log_name, argv);
    unsetenv("VT_TEST_STEP_GATE");
    unsetenv("VT_BACKEND_PATH");
    return ok;
}

bool serve_start_gated(serve_server *s, const serve_gate *g, const char *model, const char *log_name,
                       const char *const *extra) {
    return start_gated(serve_start, s, g, model, log_name, extra);
}

bool serve_spawn_gated(serve_server *s, const serve_gate *g, const char *model, const char *log_name,
                       const char *const *extra) {
    return start_gated(serve_spawn, s, g, model, log_name, extra);
}

void serve_gate_hold_load(const serve_gate *g) { gate_write_number(g->dir, "hold-init", 1); }

void serve_gate_release_load(const serve_gate *g) {
    char path[600];
    snprintf(path, sizeof path, "%s/hold-init", g->dir);
    unlink(path);
}

bool serve_gate_wait_load_held(const serve_gate *g, double seconds) {
    double end = serve_now() + seconds;
    while (gate_read_number(g->dir, "init-reached") < 1 && serve_now() < end) serve_sleep_ms(5);
    return gate_read_number(g->dir, "init-reached") >= 1;
}
