/* omp_threads.c — setting the thread count of the OpenMP runtime oneDNN uses.
 *
 * Debian's oneDNN 2.6 is built with OpenMP threading and has no
 * dnnl_set_num_threads, so its parallelism is OpenMP's: omp_set_num_threads
 * sets the team size for parallel regions started by the calling thread. We
 * do not compile with -fopenmp (clang would bring its own libomp next to
 * oneDNN's libgomp); instead we look the function up in the runtime oneDNN
 * already pulled in. */
#include <dlfcn.h>
#include <stddef.h>

#include "onednn.h"

typedef void (*omp_set_num_threads_fn)(int);

static omp_set_num_threads_fn set_num_threads;

bool onednn_omp_bind(void) {
    /* RTLD_NOLOAD: only a runtime that is already mapped (libdnnl's DT_NEEDED). */
    static const char *const runtimes[] = {"libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so"};
    for (size_t i = 0; i < sizeof(runtimes) / sizeof(runtimes[0]) && !set_num_threads; i++) {
        void *lib = dlopen(runtimes[i], RTLD_NOW | RTLD_NOLOAD);
        if (!lib) continue;
        /* POSIX allows converting dlsym's result to a function pointer. */
        *(void **)&set_num_threads = dlsym(lib, "omp_set_num_threads");
        /* The handle only bumped a reference count; the library stays mapped
         * through libdnnl, so the symbol stays valid. */
        dlclose(lib);
    }
    return set_num_threads != NULL;
}

void onednn_omp_set_threads(int n) {
    if (set_num_threads) set_num_threads(n < 1 ? 1 : n);
}
