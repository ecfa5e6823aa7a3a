/* crash_report.c — one line on stderr when vt dies of a fatal signal while a
 * backend runs a node: which backend, which node. A fault in a backend
 * plugin otherwise ends a run with nothing but the shell's "Segmentation
 * fault". The signal then goes on to whatever handled it before (the
 * default action, or a sanitizer's report), so the exit status and any
 * core dump are what they would have been. */
#include "crash_report.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "plan_exec.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define N_FATAL (sizeof fatal_signals / sizeof *fatal_signals)
static struct sigaction previous[N_FATAL];

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "a fatal signal";
    }
}

/* write(2) only: the rest of stdio is not safe in a signal handler. */
static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        const ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

static void on_fatal_signal(int sig, siginfo_t *info, void *context) {
    const char *backend, *label, *op;
    if (vt_plan_running_node(&backend, &label, &op)) {
        put("vt: crashed (");
        put(signal_name(sig));
        put(") while backend '");
        put(backend);
        put("' ran node ");
        put(label);
        put(" (");
        put(op);
        put("): `vt backends --test ");
        put(backend);
        put("` runs each of its ops alone, a crash as that case's FAIL\n");
    }
    size_t k = 0;
    while (k < N_FATAL && fatal_signals[k] != sig) k++;
    if (k == N_FATAL) return;
    /* as it would have gone: the handler before this one, or the default
     * action (the signal is blocked until this returns, then delivered) */
    sigaction(sig, &previous[k], NULL);
    if (previous[k].sa_flags & SA_SIGINFO) {
        if (previous[k].sa_sigaction) previous[k].sa_sigaction(sig, info, context);
    } else if (previous[k].sa_handler == SIG_DFL) {
        raise(sig);
    } else if (previous[k].sa_handler != SIG_IGN) {
        previous[k].sa_handler(sig);
    }
}

void vt_cli_install_crash_report(void) {
    for (size_t k = 0; k < N_FATAL; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        if (sigaction(fatal_signals[k], &sa, &previous[k]) != 0) previous[k].sa_handler = SIG_DFL;
    }
}
