/* crash_report.h — naming the backend and node a fatal signal struck in. */
#ifndef VT_CLI_CRASH_REPORT_H
#define VT_CLI_CRASH_REPORT_H

/* Install handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that,
 * when a backend is running a node, print which, then hand the signal on
 * as before. Once, at the start of main. */
void vt_cli_install_crash_report(void);

#endif
