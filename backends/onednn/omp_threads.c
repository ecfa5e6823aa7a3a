/* omp_threads.c — setting the thread count of the OpenMP runtime oneDNN uses.
 *
 * Debian's oneDNN 2.6 is built with OpenMP threading and has no
 * dnnl_set_num_threads, so its parallelism is OpenMP's: omp_set_num_threads
 * sets the team size for parallel regions started by the calling thread. We
 * do not compile with -fopenmp (clang would bring its own libomp next to
 * oneDNN's libgomp); instead we look the function up in the runtime oneDNN
 * already pulled in. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "onednn.h"

typedef void (*omp_set_num_threads_fn)(int);

/* Looked up once per process: engines opened on several threads each init
 * the backend, and pool threads read it while another engine initialises. */
static _Atomic(omp_set_num_threads_fn) set_num_threads;
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static void look_up_omp(void) {
    /* RTLD_NOLOAD: only a runtime that is already mapped (libdnnl's DT_NEEDED). */
    static const char *const runtimes[] = {"libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so"};
    omp_set_num_threads_fn fn = NULL;
    for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]) && !fn; i++) {
        void *lib = dlopen(runtimes[i], RTLD_NOW | RTLD_NOLOAD);
        if (!lib) continue;
        /* POSIX allows converting dlsym's result to a function pointer. */
        *(void **)&fn = dlsym(lib, "omp_set_num_threads");
        /* The handle only bumped a reference count; the library stays mapped
         * through libdnnl, so the symbol stays valid. */
        dlclose(lib);
    }
    atomic_store_explicit(&set_num_threads, fn, memory_order_release);
}

bool onednn_omp_bind(void) {
    pthread_once(&bind_once, look_up_omp);
    return atomic_load_explicit(&set_num_threads, memory_order_acquire) != NULL;
}

void onednn_omp_set_threads(int n) {
    omp_set_num_threads_fn fn = atomic_load_explicit(&set_num_threads, memory_order_acquire);
    if (fn) fn(n < 1 ? 1 : n);
}
