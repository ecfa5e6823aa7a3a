/* serve_gate.h — the test's side of the step_gate backend
 * (tests/plugins/step_gate.c): a `vt serve` started on it runs every op on
 * the reference, and waits before each forward until the test allows it.
 *
 * With it a test makes "this request is still running" (or "still
 * waiting") certain instead of likely: it holds the engine, sends what it
 * needs, observes the state, then lets the engine go. How fast the machine
 * generates no longer decides whether the event it tests (a time limit, a
 * drain, a client leaving) lands while the request runs. */
#ifndef VT_TEST_SERVE_GATE_H
#define VT_TEST_SERVE_GATE_H

#include <stdbool.h>

#include "serve_client.h"

typedef struct serve_gate {
    char dir[512];
} serve_gate;

/* A fresh gate folder under the test's temporary directory, open. */
bool serve_gate_init(serve_gate *g, const char *name);
/* Forwards begun so far (including one being held). */
long serve_gate_reached(const serve_gate *g);
/* Forwards up to number n may run; later ones wait. */
void serve_gate_allow(const serve_gate *g, long n);
/* Hold: no forward after the ones begun may start. */
void serve_gate_hold(const serve_gate *g);
/* Let every forward run. */
void serve_gate_open(const serve_gate *g);
/* Wait up to seconds until at least n forwards have begun. */
bool serve_gate_wait_reached(const serve_gate *g, long n, double seconds);
/* serve_start on the step_gate backend with this gate. */
bool serve_start_gated(serve_server *s, const serve_gate *g, const char *model, const char *log_name,
                       const char *const *extra);
/* Hold the next load in the backend's init (before serve_spawn_gated), let it
 * go, and wait up to seconds until a load is held there. */
void serve_gate_hold_load(const serve_gate *g);
void serve_gate_release_load(const serve_gate *g);
bool serve_gate_wait_load_held(const serve_gate *g, double seconds);
/* serve_spawn on the step_gate backend with this gate. */
bool serve_spawn_gated(serve_server *s, const serve_gate *g, const char *model, const char *log_name,
                       const char *const *extra);

#endif
