/* simd_matmul_bench.c — a quick speed check of the simd backend's MATMUL (not
 * a test): K x N weights of one dtype times M activation rows, median of the
 * repetitions, reported as GB/s of weights streamed (what bounds decode) and
 * GFLOP/s = 2 M N K / time (what bounds prefill).
 *
 *   simd_matmul_bench [-t threads] [-d dtype] [-r reps] [-m M] [-k K -n N] [-e NE:U] [-H] [-P] [-o OPTIONS] [LIB.so]
 *
 * Shapes: the qwen3-0.6B FFN matmuls, K=1024 N=3072 and K=3072 N=1024, at
 * M = 1 and M = 128. Also printed: the median process CPU time and
 * GFLOP per CPU-second, the kernels' own speed when the machine is shared. Weights are cycled through enough copies (>= 256 MiB)
 * that every decode call reads them from DRAM, as a real decode step does
 * (a single 1.7 MiB matrix would sit in L3 and overstate the bandwidth);
 * -H uses one copy instead: the kernels' speed with weights in cache.
 * -P offers every copy to the backend's prepare hook (ABI 1.2) first and
 * runs on what it returns, as an engine does (a declined dtype runs as is).
 * -o passes the backend its options (as --backend-option does), e.g.
 * `-o isa=avx2` to time one instruction-set tier of simd against another.
 * -e NE:U times MOE_MATMUL instead: NE experts of K x N, each of the M
 * tokens routed to U distinct experts drawn afresh every call (as a
 * mixture of experts' decode reads U experts' weights a token); GB/s then
 * counts the distinct experts' weights a call reads.
 *
 * Build (links libvt for the thread pool, host table and quantizers):
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Icore bench/simd_matmul_bench.c \
 *      -Lbuild/lib -lvt -ldl -lm -Wl,-rpath,$PWD/build/lib -o build/simd_matmul_bench
 *   build/simd_matmul_bench build/lib/vt/libvt-backend-simd.so */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_open.h"
#include "bench_util.h"
#include "host.h"
#include "quant.h"
#include "threadpool.h"
#include "vt/vt_backend.h"

static vt_tensor tensor3(void *data, int32_t dtype, int64_t ne0, int64_t ne1, int64_t ne2) {
    vt_tensor t = {.data = data, .dtype = dtype, .ndim = ne2 > 1 ? 3 : 2, .ne = {ne0, ne1, ne2, 1}};
    t.nb[0] = vt_dtype_block_bytes(dtype) / (size_t)vt_dtype_block_length(dtype);
    t.nb[1] = vt_row_size(dtype, ne0);
    t.nb[2] = t.nb[1] * (size_t)ne1;
    t.nb[3] = t.nb[2] * (size_t)ne2;
    return t;
}

static vt_tensor tensor2(void *data, int32_t dtype, int64_t ne0, int64_t ne1) {
    return tensor3(data, dtype, ne0, ne1, 1);
}

/* Each of the M tokens' U experts: distinct, drawn afresh (ids [M][U]).
 * Returns how many distinct experts the call reads. */
static int64_t draw_experts(int32_t *ids, int64_t M, int64_t U, int64_t NE, uint8_t *seen, uint64_t *state) {
    memset(seen, 0, (size_t)NE);
    int64_t distinct = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t u = 0; u < U; u++) {
            int32_t e;
            bool again;
            do { /* distinct within the token */
                *state = *state * 6364136223846793005ull + 1442695040888963407ull;
                e = (int32_t)((*state >> 33) % (uint64_t)NE);
                again = false;
                for (int64_t v = 0; v < u; v++) again |= ids[m * U + v] == e;
            } while (again);
            ids[m * U + u] = e;
            distinct += !seen[e];
            seen[e] = 1;
        }
    return distinct;
}

int main(int argc, char **argv) {
    int n_threads = 2, reps = 30, hot = 0, prep = 0;
    int64_t only_m = 0, only_k = 0, only_n = 0, n_experts = 0, n_used = 0;
    int32_t dtype = VT_Q4_K;
    const char *lib = "build/lib/vt/libvt-backend-simd.so";
    const char *options = ""; /* -o: the backend's options, e.g. isa=avx2 */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-H")) hot = 1;
        else if (!strcmp(argv[i], "-P")) prep = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) options = argv[++i];
        else if (!strcmp(argv[i], "-m") && i + 1 < argc) only_m = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-k") && i + 1 < argc) only_k = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) only_n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) dtype = vt_dtype_from_name(argv[++i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc) {
            long long ne = 0, u = 0;
            if (sscanf(argv[++i], "%lld:%lld", &ne, &u) != 2 || ne < 1 || u < 1 || u > ne) {
                fprintf(stderr, "-e wants NE:U with 1 <= U <= NE\n");
                return 2;
            }
            n_experts = ne, n_used = u;
        }
        else lib = argv[i];
    }
    if (dtype < 0 || !vt_dtype_is_weight(dtype)) {
        fprintf(stderr, "unknown weight dtype\n");
        return 2;
    }
    vt_threadpool *pool;
    const vt_host *host;
    const vt_backend *b;
    void *ctx;
    if (!bench_open_backend(lib, options, n_threads, &pool, &host, &b, &ctx)) return 1;
    const bool moe = n_experts > 0;
    const int64_t NE = moe ? n_experts : 1;
    if (moe && (b->struct_size < VT_BACKEND_SIZE_1_4 || !b->moe_matmul)) {
        fprintf(stderr, "%s has no moe_matmul\n", lib);
        return 1;
    }
    static const int64_t shapes[][2] = {{1024, 3072}, {3072, 1024}};
    static const int64_t Ms[] = {1, 128};
    printf("%s, %s weights, %d threads, median of %d", lib, vt_dtype_name(dtype), n_threads, reps);
    if (moe) printf("; moe_matmul: %lld experts, %lld per token", (long long)NE, (long long)n_used);
    printf("\n");
    for (int s = 0; s < 2; s++) {
        const int64_t K = only_k ? only_k : shapes[s][0], N = only_n ? only_n : shapes[s][1];
        if ((only_k || only_n) && s) break;
        const size_t expert_bytes = vt_row_size(dtype, K) * (size_t)N, w_bytes = expert_bytes * (size_t)NE;
        const int copies = hot ? 1 : (int)((256u << 20) / w_bytes) + 1;
        uint8_t *w = malloc(w_bytes * (size_t)copies);
        float *row = malloc((size_t)K * sizeof(float));
        uint64_t state = 42;
        for (int64_t n = 0; n < N * NE; n++) {
            for (int64_t k = 0; k < K; k++) row[k] = next_uniform(&state);
            vt_from_f32(dtype, row, w + (size_t)n * vt_row_size(dtype, K), K);
        }
        for (int c = 1; c < copies; c++) memcpy(w + (size_t)c * w_bytes, w, w_bytes);
        /* -P: each copy's prepared form (NULL where the backend declines) */
        void **prepared = calloc((size_t)copies, sizeof *prepared);
        if (prep && b->struct_size >= VT_BACKEND_SIZE_1_2 && b->prepare_weight) {
            const double t0 = now_s();
            for (int c = 0; c < copies; c++) {
                vt_weight_offer offer = {.struct_size = sizeof offer, .name = "bench.weight",
                                         .tensor = tensor3(w + (size_t)c * w_bytes, dtype, K, N, NE),
                                         .ops = 1u << (moe ? VT_OP_MOE_MATMUL : VT_OP_MATMUL),
                                         .phases = (1u << VT_PHASE_PREFILL) | (1u << VT_PHASE_DECODE)};
                vt_prepared_weight out = {0};
                char msg[256] = "";
                if (b->prepare_weight(ctx, &offer, &out, msg, sizeof msg) != VT_OK) {
                    fprintf(stderr, "prepare_weight failed: %s\n", msg);
                    return 1;
                }
                prepared[c] = out.data;
            }
            printf("  K=%-5lld N=%-5lld prepared %d copies in %.3f s (%s)\n", (long long)K, (long long)N, copies,
                   now_s() - t0, prepared[0] ? "own layout" : "declined");
        }
        for (int mi = 0; mi < 2; mi++) {
            const int64_t M = only_m ? only_m : Ms[mi];
            if (only_m && mi) break;
            const int64_t U = moe ? n_used : 1;
            float *x = malloc((size_t)(K * M) * sizeof(float)), *y = malloc((size_t)(N * U * M) * sizeof(float));
            int32_t *ids = malloc((size_t)(U * M) * sizeof *ids);
            uint8_t *seen = malloc((size_t)NE);
            for (int64_t i = 0; i < K * M; i++) x[i] = next_uniform(&state);
            vt_node node = {.struct_size = sizeof node, .op = moe ? VT_OP_MOE_MATMUL : VT_OP_MATMUL,
                            .phase = M == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL, .n_src = moe ? 3 : 2};
            node.src[1] = tensor2(x, VT_F32, K, M);
            node.src[0] = tensor3(w, dtype, K, N, NE);
            if (moe) {
                node.src[2] = tensor2(ids, VT_I32, U, M);
                node.dst = tensor3(y, VT_F32, N, U, M);
                node.dst.ndim = 3;
                draw_experts(ids, M, U, NE, seen, &state);
            } else {
                node.dst = tensor2(y, VT_F32, N, M);
            }
            if (!b->supports(ctx, &node)) {
                printf("  K=%lld N=%lld M=%lld: declined\n", (long long)K, (long long)N, (long long)M);
                continue;
            }
            const int n_reps = M == 1 ? reps * 10 : reps;
            double *t = malloc((size_t)n_reps * sizeof(double)), *c = malloc((size_t)n_reps * sizeof(double));
            double bytes_read = 0; /* moe: the distinct experts' weights, summed over the timed calls */
            for (int r = -2; r < n_reps; r++) {
                const int wc = (r + 2) % copies;
                node.src[0].data = prepared[wc] ? prepared[wc] : w + (size_t)wc * w_bytes;
                node.prepared = prepared[wc] ? 1u : 0u;
                const int64_t distinct = moe ? draw_experts(ids, M, U, NE, seen, &state) : 1;
                const double t0 = now_s(), c0 = cpu_s();
                if ((moe ? b->moe_matmul : b->matmul)(ctx, &node) != VT_OK) {
                    fprintf(stderr, "matmul failed\n");
                    return 1;
                }
                if (r >= 0) t[r] = now_s() - t0, c[r] = cpu_s() - c0, bytes_read += (double)distinct * (double)expert_bytes;
            }
            /* bytes of one call: the dense matrix, or the mean over the calls of the experts read */
            const double call_bytes = bytes_read / n_reps;
            qsort(t, (size_t)n_reps, sizeof *t, cmp_double);
            qsort(c, (size_t)n_reps, sizeof *c, cmp_double);
            const double med = t[n_reps / 2], cmed = c[n_reps / 2], best = t[0];
            printf("  K=%-5lld N=%-5lld M=%-4lld %9.1f us  %6.2f GB/s  %7.1f GFLOP/s   (cpu %9.1f us: %7.1f GFLOP/cpu-s; best %9.1f us)\n",
                   (long long)K, (long long)N, (long long)M, med * 1e6, call_bytes / med * 1e-9,
                   2.0 * (double)(M * U * N * K) / med * 1e-9, cmed * 1e6, 2.0 * (double)(M * U * N * K) / cmed * 1e-9,
                   best * 1e6);
            free(ids);
            free(seen);
            free(t);
            free(c);
            free(x);
            free(y);
        }
        for (int c = 0; c < copies; c++)
            if (prepared[c]) b->release_weight(ctx, prepared[c]);
        free(prepared);
        free(w);
        free(row);
    }
    b->shutdown(ctx);
    vt_threadpool_destroy(pool);
    return 0;
}
