/* onednn_matmul_bench.c — a quick speed check of MATMUL on backend .so files
 * (not a test): K x N weights of one dtype, M activation rows, median of
 * repetitions, GFLOP/s = 2*M*N*K / time.
 *
 *   onednn_matmul_bench [-t threads] [-k K] [-n N] [-m M,M,...] [-d dtype] [-r reps]
 *                       LIB.so[:options] ...
 *   onednn_matmul_bench --to-f32 [-k K] [-n N] [-r reps]
 *
 * --to-f32 times the core's row conversion instead (what host->to_f32 costs
 * the onednn backend per prefill matmul): for every weight dtype, the K x N
 * weights converted one tile at a time (onednn's default 384 KiB tile) into
 * one reused buffer on one thread, through the scalar and the AVX2 path.
 *
 * e.g. onednn_matmul_bench -m 128,1 build/lib/vt/libvt-backend-onednn.so:precision=f32
 *      build/lib/vt/libvt-backend-reference.so
 * Nodes are built with phase PREFILL so a backend that declines decode still
 * runs M=1 here (that is the measurement the decline is based on).
 *
 * Built with the project (bench/CMakeLists.txt: build/bin/onednn_matmul_bench);
 * it links the core statically for the thread pool, host table, quantizers
 * and the two to_f32 paths, which libvt.so does not export. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "host.h"
#include "quant.h"
#include "threadpool.h"
#include "vt/vt_backend.h"

typedef struct loaded {
    const char *label;
    const vt_backend *table;
    void *ctx;
} loaded;

static int load(const char *spec, const vt_host *host, int n_threads, loaded *out) {
    static char path[1024];
    snprintf(path, sizeof path, "%s", spec);
    char *colon = strchr(path, ':');
    const char *options = "";
    if (colon) {
        *colon = '\0';
        options = colon + 1;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    vt_backend_entry_fn entry;
    *(void **)&entry = dlsym(lib, VT_BACKEND_ENTRY_SYMBOL);
    if (!entry) {
        fprintf(stderr, "%s: no entry\n", path);
        return -1;
    }
    out->table = entry();
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = n_threads, .options = options};
    char err[256] = "";
    if (out->table->init(host, &config, &out->ctx, err, sizeof err) != VT_OK) {
        fprintf(stderr, "%s: init failed: %s\n", path, err);
        return -1;
    }
    out->label = spec;
    return 0;
}

/* Median milliseconds to convert w (n rows of k of dtype) to f32 through one
 * path, tile_rows rows per call into tile. 0 when the path cannot run here. */
static double time_to_f32(vt_to_f32_path path, int32_t dtype, const uint8_t *w, int64_t k, int64_t n,
                          int64_t tile_rows, float *tile, int reps) {
    size_t row_bytes = vt_row_size(dtype, k);
    double times[64];
    int runs = reps < 64 ? reps : 64;
    for (int r = -1; r < runs; r++) { /* r = -1: warm-up */
        double t0 = now_s();
        for (int64_t n0 = 0; n0 < n; n0 += tile_rows) {
            int64_t nt = n - n0 < tile_rows ? n - n0 : tile_rows;
            if (vt_to_f32_with(path, dtype, w + (size_t)n0 * row_bytes, tile, nt * k) != VT_OK) return 0;
        }
        if (r >= 0) times[r] = now_s() - t0;
    }
    qsort(times, (size_t)runs, sizeof(double), cmp_double);
    return times[runs / 2] * 1e3;
}

static int bench_to_f32(int64_t k, int64_t n, int reps) {
    int64_t tile_rows = 384 * 1024 / (k * (int64_t)sizeof(float)) / 16 * 16;
    if (tile_rows < 16) tile_rows = 16;
    if (tile_rows > n) tile_rows = n;
    float *tile = malloc((size_t)(tile_rows * k) * sizeof(float));
    float *row = malloc((size_t)k * sizeof(float));
    uint8_t *w = malloc(vt_row_size(VT_F32, k) * (size_t)n); /* the widest weight row */
    if (!tile || !row || !w) return 1;
    printf("to_f32 K=%lld N=%lld, tiles of %lld rows, 1 thread, reps=%d (median ms; GB/s of f32 written)\n",
           (long long)k, (long long)n, (long long)tile_rows, reps);
    static const int32_t dtypes[] = {VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        int32_t dtype = dtypes[d];
        size_t row_bytes = vt_row_size(dtype, k);
        uint64_t seed = 42;
        for (int64_t r = 0; r < n; r++) {
            for (int64_t i = 0; i < k; i++) row[i] = next_uniform(&seed);
            vt_from_f32(dtype, row, w + (size_t)r * row_bytes, k);
        }
        double scalar = time_to_f32(VT_TO_F32_SCALAR, dtype, w, k, n, tile_rows, tile, reps);
        double avx2 = time_to_f32(VT_TO_F32_AVX2, dtype, w, k, n, tile_rows, tile, reps);
        double gb = (double)(k * n) * sizeof(float) * 1e-9;
        printf("  %-5s scalar %7.3f ms %6.2f GB/s", vt_dtype_name(dtype), scalar, gb / scalar * 1e3);
        if (avx2 > 0) printf("   avx2 %7.3f ms %6.2f GB/s   x%.2f\n", avx2, gb / avx2 * 1e3, scalar / avx2);
        else printf("   avx2: not on this CPU\n");
    }
    free(tile);
    free(row);
    free(w);
    return 0;
}

int main(int argc, char **argv) {
    int threads = 2, reps = 7;
    int64_t k = 1024, n = 3072;
    const char *m_list = "128,1", *dtype_name = "q4_k";
    bool to_f32 = false;
    int argi = 1;
    if (argi < argc && !strcmp(argv[argi], "--to-f32")) {
        to_f32 = true;
        argi++;
    }
    for (; argi + 1 < argc && argv[argi][0] == '-'; argi += 2) {
        const char *opt = argv[argi], *val = argv[argi + 1];
        if (!strcmp(opt, "-t")) threads = atoi(val);
        else if (!strcmp(opt, "-k")) k = atoll(val);
        else if (!strcmp(opt, "-n")) n = atoll(val);
        else if (!strcmp(opt, "-m")) m_list = val;
        else if (!strcmp(opt, "-d")) dtype_name = val;
        else if (!strcmp(opt, "-r")) reps = atoi(val);
        else break;
    }
    int32_t dtype = vt_dtype_from_name(dtype_name);
    if (to_f32 && argi == argc && k > 0 && k % VT_QK_K == 0 && n > 0 && reps >= 1) return bench_to_f32(k, n, reps);
    if (to_f32 || argi >= argc || dtype < 0 || threads < 1 || reps < 1) {
        fprintf(stderr,
                "usage: %s [-t threads] [-k K] [-n N] [-m M,...] [-d dtype] [-r reps] LIB.so[:opts] ...\n"
                "       %s --to-f32 [-k K (a multiple of 256)] [-n N] [-r reps]\n",
                argv[0], argv[0]);
        return 2;
    }

    vt_threadpool *pool = NULL;
    vt_error err;
    if (vt_threadpool_create(threads, &pool, &err) != VT_OK) return 1;
    const vt_host *host = vt_host_get(pool);

    /* Weights: random f32 quantized to dtype. */
    size_t row_bytes = vt_row_size(dtype, k);
    uint8_t *w = malloc(row_bytes * (size_t)n);
    float *row = malloc((size_t)k * sizeof(float));
    uint64_t seed = 42;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t i = 0; i < k; i++) row[i] = next_uniform(&seed);
        vt_from_f32(dtype, row, w + (size_t)r * row_bytes, k);
    }

    loaded backends[8];
    int n_backends = 0;
    for (; argi < argc && n_backends < 8; argi++)
        if (load(argv[argi], host, threads, &backends[n_backends]) == 0) n_backends++;

    printf("K=%lld N=%lld dtype=%s threads=%d reps=%d (median)\n", (long long)k, (long long)n, dtype_name,
           threads, reps);
    char list[256];
    snprintf(list, sizeof list, "%s", m_list);
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int64_t m = atoll(tok);
        float *x = malloc((size_t)(k * m) * sizeof(float));
        float *y = malloc((size_t)(n * m) * sizeof(float));
        for (int64_t i = 0; i < k * m; i++) x[i] = next_uniform(&seed);
        vt_node node = {.struct_size = sizeof node, .op = VT_OP_MATMUL, .phase = VT_PHASE_PREFILL, .n_src = 2};
        node.src[0] = (vt_tensor){w, dtype, 2, {k, n, 1, 1}, {0, row_bytes, row_bytes * (size_t)n, row_bytes * (size_t)n}};
        node.src[1] = (vt_tensor){x, VT_F32, 2, {k, m, 1, 1}, {4, (size_t)k * 4, (size_t)(k * m) * 4, (size_t)(k * m) * 4}};
        node.dst = (vt_tensor){y, VT_F32, 2, {n, m, 1, 1}, {4, (size_t)n * 4, (size_t)(n * m) * 4, (size_t)(n * m) * 4}};
        for (int b = 0; b < n_backends; b++) {
            loaded *l = &backends[b];
            if (!l->table->matmul || !l->table->supports(l->ctx, &node)) {
                printf("  M=%-4lld %-60s declined\n", (long long)m, l->label);
                continue;
            }
            double times[64], cpu[64];
            int runs = reps < 64 ? reps : 64;
            l->table->matmul(l->ctx, &node); /* warm-up: primitive creation, buffers */
            for (int r = 0; r < runs; r++) {
                double t0 = now_s(), c0 = cpu_s();
                vt_status st = l->table->matmul(l->ctx, &node);
                times[r] = now_s() - t0;
                cpu[r] = cpu_s() - c0;
                if (st != VT_OK) fprintf(stderr, "%s: matmul failed (%d)\n", l->label, st);
            }
            qsort(times, (size_t)runs, sizeof(double), cmp_double);
            qsort(cpu, (size_t)runs, sizeof(double), cmp_double);
            double med = times[runs / 2];
            double gflops = 2.0 * (double)m * (double)n * (double)k / med * 1e-9;
            double gbs = (double)row_bytes * (double)n / med * 1e-9;
            /* The best run too: on a shared machine it is the closer estimate of uncontended speed. */
            double best_gflops = 2.0 * (double)m * (double)n * (double)k / times[0] * 1e-9;
            printf("  M=%-4lld %-56s %8.3f ms %7.2f GFLOP/s (best %7.2f) %6.2f GB/s  cpu %8.3f ms\n",
                   (long long)m, l->label, med * 1e3, gflops, best_gflops, gbs, cpu[runs / 2] * 1e3);
        }
        free(x);
        free(y);
    }
    for (int b = 0; b < n_backends; b++) backends[b].table->shutdown(backends[b].ctx);
    free(w);
    free(row);
    vt_threadpool_destroy(pool);
    return 0;
}
