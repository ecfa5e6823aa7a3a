/* step_gate.c — test backend that lets a test hold the engine at the start
 * of a forward step, so that "a request is still running" is a certainty the
 * test creates, not a race it hopes to win on a machine of unknown speed.
 *
 * Every op runs on the reference (forward_to_reference.h), with the
 * reference's supports(). The token-embedding lookup, the first node of
 * every forward, is where the gate sits: it is recognized as a GET_ROWS
 * reading the same table as the very first GET_ROWS this backend ran (the
 * plan runs token_embd before anything else, and the table is a weight at a
 * fixed address; the other GET_ROWS, output_rows, reads the arena).
 *
 * The gate is a folder named by VT_TEST_STEP_GATE (no variable: no gate):
 *   reached  written by the plugin, the number of forwards that have begun
 *            (it is written before the forward waits);
 *   allow    written by the test: forward n may run only once allow >= n.
 *            No file: every forward runs.
 * So a test holds the engine before the next forward by writing the current
 * `reached` into `allow`, lets k more forwards through by adding k, and
 * opens the gate by removing the file. A forward held for more than 120 s
 * fails (the engine reports a failed step) rather than hang a broken test.
 *
 * The load can be held too: while the file hold-init exists, the backend's
 * init (part of loading the model) writes init-reached (1) and waits, so a
 * test makes "the server is still loading" certain (120 s at most, then
 * init fails). */
#include <errno.h>
#include <stdatomic.h>
#include <time.h>

#define PLUGIN_NAME "step_gate"
#define FWD_SUPPORTS_AS_REFERENCE
#define FWD_GET_ROWS gated_get_rows
#define FWD_INIT gated_init
#include <unistd.h>

#include "forward_to_reference.h"
#include "../gate_file.h"

#define GATE_LIMIT_SECONDS 120

static const void *_Atomic embedding_table;
static atomic_long forwards_begun;

/* Forward n waits here until dir/allow is gone or at least n. */
static vt_status pass_gate(const fwd_ctx *c, const char *dir, long n) {
    if (!gate_write_number(dir, "reached", n)) {
        c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "cannot write %s/reached: %s", dir, strerror(errno));
        return VT_ERR_BACKEND;
    }
    struct timespec pause = {0, 1000000}; /* 1 ms */
    for (long waited = 0; waited < GATE_LIMIT_SECONDS * 1000L; waited++) {
        long allow = gate_read_number(dir, "allow");
        if (allow < 0 || allow >= n) return VT_OK;
        nanosleep(&pause, NULL);
    }
    c->host->log(VT_LOG_ERROR, PLUGIN_NAME, "forward %ld held for more than %d s: failing it", n, GATE_LIMIT_SECONDS);
    return VT_ERR_BACKEND;
}

static vt_status gated_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                             size_t err_size) {
    const char *dir = getenv("VT_TEST_STEP_GATE");
    char hold[4200];
    snprintf(hold, sizeof hold, "%s/hold-init", dir ? dir : "");
    if (dir && *dir && access(hold, F_OK) == 0) {
        gate_write_number(dir, "init-reached", 1);
        struct timespec pause = {0, 1000000}; /* 1 ms */
        long waited = 0;
        while (access(hold, F_OK) == 0 && waited++ < GATE_LIMIT_SECONDS * 1000L) nanosleep(&pause, NULL);
        if (access(hold, F_OK) == 0) {
            snprintf(err, err_size, "init held for more than %d s", GATE_LIMIT_SECONDS);
            return VT_ERR_BACKEND;
        }
    }
    return fwd_init(host, config, ctx, err, err_size);
}

static vt_status gated_get_rows(void *ctx, const vt_node *node) {
    const fwd_ctx *c = ctx;
    vt_status st = fwd_enforce(ctx, node, "get_rows");
    if (st != VT_OK) return st;
    const void *expected = NULL;
    atomic_compare_exchange_strong(&embedding_table, &expected, node->src[0].data);
    const char *dir = getenv("VT_TEST_STEP_GATE");
    if (dir && *dir && node->src[0].data == atomic_load(&embedding_table)) {
        st = pass_gate(c, dir, atomic_fetch_add(&forwards_begun, 1) + 1);
        if (st != VT_OK) return st;
    }
    return c->ref->get_rows(c->ref_ctx, node);
}

FWD_BACKEND("test plugin: reference ops, with a gate a test holds before each forward (VT_TEST_STEP_GATE)")
