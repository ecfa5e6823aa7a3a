/* asan_defaults.c — compiled into every test runner (tests/CMakeLists.txt).
 *
 * Under AddressSanitizer, gcc 12's LeakSanitizer can crash at exit ("Tracer
 * caught signal 11") scanning the dynamic TLS that oneDNN's OpenMP runtime
 * (libgomp) gave a thread; a runner that loads the onednn backend in its
 * own process (test_onednn_ops, test_batch's onednn cases, ...) meets it now
 * and then. Not intercepting __tls_get_addr avoids it, and leak checking
 * still runs. The `vt` program does the same (core/cli/main.c). Options
 * given in ASAN_OPTIONS at run time still apply on top of these. */
#if defined(__SANITIZE_ADDRESS__)
#define VT_RUNNER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VT_RUNNER_ASAN 1
#endif
#endif

#ifdef VT_RUNNER_ASAN
/* Weak: a runner that needs other defaults defines its own (test_oom.c),
 * keeping this one in its list. */
__attribute__((weak)) const char *__asan_default_options(void);
__attribute__((weak)) const char *__asan_default_options(void) { return "intercept_tls_get_addr=0"; }
#else
/* ISO C wants a translation unit to declare something. */
typedef int vt_runner_asan_defaults_unused;
#endif
