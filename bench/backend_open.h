/* backend_open.h — how the backend kernel benchmarks (simd_matmul_bench,
 * simd_attention_bench) load the backend they time: a thread pool of their
 * own, the .so at a path given on the command line (so one bench binary can
 * compare an old and a new build), its entry point and init; a second .so
 * can be loaded on the same pool to alternate the two call by call. */
#ifndef VT_BENCH_BACKEND_OPEN_H
#define VT_BENCH_BACKEND_OPEN_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

#include "host.h"
#include "threadpool.h"
#include "vt/vt_backend.h"

/* Load the backend in `lib` and initialise it on `host` (n_threads of it)
 * with `options` ("key=value,...", as --backend-option gives a backend; ""
 * for none); on failure print why and return false. The library stays
 * loaded for the process's lifetime; the caller shuts the backend down. */
static inline bool bench_load_backend(const char *lib, const char *options, const vt_host *host, int n_threads,
                                      const vt_backend **backend, void **ctx) {
    void *so = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!so) {
        fprintf(stderr, "%s\n", dlerror());
        return false;
    }
    vt_backend_entry_fn entry = (vt_backend_entry_fn)dlsym(so, VT_BACKEND_ENTRY_SYMBOL);
    *backend = entry ? entry() : NULL;
    *ctx = NULL;
    char msg[256] = "";
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = n_threads, .options = options};
    if (!*backend || (*backend)->init(host, &config, ctx, msg, sizeof msg) != VT_OK) {
        fprintf(stderr, "cannot load %s: %s\n", lib, msg);
        return false;
    }
    return true;
}

/* Create a pool of n_threads and initialise the backend in `lib` on it; on
 * failure print why and return false. The caller shuts the backend down and
 * destroys the pool. */
static inline bool bench_open_backend(const char *lib, const char *options, int n_threads, vt_threadpool **pool,
                                      const vt_host **host, const vt_backend **backend, void **ctx) {
    vt_error err;
    if (vt_threadpool_create(n_threads, pool, &err) != VT_OK) {
        fprintf(stderr, "thread pool: %s\n", err.msg);
        return false;
    }
    *host = vt_host_get(*pool);
    return bench_load_backend(lib, options, *host, n_threads, backend, ctx);
}

#endif
