/* simd_attention_bench.c — a quick speed check of a backend's ATTENTION at a
 * long context (not a test): the qwen3-0.6B shape (head dim 128, 16 query
 * heads, 8 kv heads, blocks of 16 positions), T query tokens at the last
 * positions of an N-position context, per KV-cache dtype, median of the
 * repetitions. Reports wall and process CPU time per call and the cache
 * bytes read per call / wall time.
 *
 *   simd_attention_bench [-t threads] [-d f16|q8_0|...] [-n context] [-T tokens] [-S seqs] [-P shared]
 *                        [-D decodes] [-L layers] [-r reps] [-o OPTIONS]
 *                        [LIB.so [LIB2.so]]
 *
 * -o: backend options for both libraries, as the engine passes them
 * ("isa=avx2" runs the AVX2 tier on a CPU that has a higher one).
 * -S: S sequences in one call, each with its own blocks and T tokens at the
 * end of its N positions (-S 8 -T 1 is a decode step of 8 sequences, the
 * batched-decode case; the bytes read are S times one sequence's).
 * -D N: the first N of the S sequences bring one token each (decodes,
 * first in the call, as a scheduler plans them) and the others T each: a
 * serving step where a prompt chunk shares the call with decodes.
 * -P N: the sequences' first N positions (whole blocks of them) are the same
 * blocks, as a prompt beginning the prefix cache gave every sequence; the
 * bytes reported are still S times one sequence's, so GB/s over the shared
 * part is what S separate reads would need.
 *
 * With two libraries (an old and a new build) the calls alternate between
 * them, the same layers in the same minutes, and each gets its own median:
 * on a shared machine whose speed drifts, runs taken one after the other
 * differ by more than the change being measured.
 *
 * Beside it, the read floor measured in the same run: a layer's cache bytes
 * (its K and V) summed by a plain AVX2 loop on the same threads, one such
 * read after each attention call, so "attention at X% of the floor"
 * compares like with like on a machine whose bandwidth varies by the minute.
 *
 * One cache per layer of the model (28), cycled through call by call, so
 * every call reads its cache from DRAM as a decode step's 28 attention calls
 * do (one layer's 8 MiB would sit in L3 and overstate the speed); fewer
 * layers (at least 4) when 28 would exceed 512 MiB, still far above L3.
 * -L N cycles through N layer caches instead (capped the same way): -L 2
 * at -S 8 -n 160 keeps the ~10 MB of both in L3, which measures the kernel
 * apart from DRAM (the read floor then reads the other layer, also in L3).
 * The "x28 layers" figure stays the model's 28 calls whatever -L is.
 *
 * Build: cmake target simd_attention_bench (bench/CMakeLists.txt), or
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Icore bench/simd_attention_bench.c \
 *      -Lbuild/lib -lvt -ldl -lm -Wl,-rpath,$PWD/build/lib -o build/simd_attention_bench
 *   build/bin/simd_attention_bench -d q8_0 build/lib/vt/libvt-backend-simd.so */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
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

#define MAX_LAYERS 28
#define MAX_CACHE_BYTES ((size_t)512 << 20)
#define HEAD_DIM 128
#define HEADS 16
#define KV_HEADS 8
#define BLOCK 16

static vt_tensor tensor(void *data, int32_t dtype, int ndim, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    vt_tensor t = {.data = data, .dtype = dtype, .ndim = ndim, .ne = {ne0, ne1, ne2, ne3}};
    t.nb[0] = vt_dtype_block_bytes(dtype) / (size_t)vt_dtype_block_length(dtype);
    t.nb[1] = vt_row_size(dtype, ne0);
    t.nb[2] = t.nb[1] * (size_t)ne1;
    t.nb[3] = t.nb[2] * (size_t)ne2;
    return t;
}

/* The read floor: a range of the caches split over the threads, each
 * thread summing its share 128 bytes per step (four independent 64-bit
 * lane sums, so the loop is bound by loads, not by an add chain). */
typedef struct read_task {
    const uint8_t *base;
    size_t bytes_per_item;
    uint64_t sums[64]; /* per thread, so the loop is not optimised away */
} read_task;

__attribute__((target("avx2"))) static void read_items(void *arg, int64_t begin, int64_t end, int thread) {
    read_task *t = arg;
    const __m256i *p = (const __m256i *)(const void *)(t->base + (size_t)begin * t->bytes_per_item);
    const size_t n = (size_t)(end - begin) * t->bytes_per_item / sizeof(__m256i);
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a = _mm256_add_epi64(a, _mm256_load_si256(p + i));
        b = _mm256_add_epi64(b, _mm256_load_si256(p + i + 1));
        c = _mm256_add_epi64(c, _mm256_load_si256(p + i + 2));
        d = _mm256_add_epi64(d, _mm256_load_si256(p + i + 3));
    }
    for (; i < n; i++) a = _mm256_add_epi64(a, _mm256_load_si256(p + i));
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    t->sums[thread & 63] += (uint64_t)_mm256_extract_epi64(s, 0) + (uint64_t)_mm256_extract_epi64(s, 3);
}

int main(int argc, char **argv) {
    int n_threads = 2, reps = 10, max_layers = MAX_LAYERS;
    int64_t n_ctx = 2048, T = 1, S = 1, shared = 0, n_decodes = 0;
    int32_t dtype = VT_F16;
    const char *libs[2] = {"build/lib/vt/libvt-backend-simd.so", NULL}, *options = "";
    int n_libs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) n_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_ctx = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) T = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-S") && i + 1 < argc) S = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-L") && i + 1 < argc) max_layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-P") && i + 1 < argc) shared = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-D") && i + 1 < argc) n_decodes = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-d") && i + 1 < argc) dtype = vt_dtype_from_name(argv[++i]);
        else if (!strcmp(argv[i], "-o") && i + 1 < argc) options = argv[++i];
        else if (n_libs < 2) libs[n_libs++] = argv[i];
        else {
            fprintf(stderr, "at most two libraries\n");
            return 2;
        }
    }
    if (dtype < 0 || n_ctx < 1 || T < 1 || T > n_ctx || shared < 0 || shared > n_ctx - T || S < 1 || S > 1024 || reps < 1 || max_layers < 1 ||
        n_decodes < 0 || n_decodes > S) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    vt_threadpool *pool;
    const vt_host *host;
    const vt_backend *backends[2];
    void *ctxs[2];
    if (n_libs == 0) n_libs = 1;
    if (!bench_open_backend(libs[0], options, n_threads, &pool, &host, &backends[0], &ctxs[0])) return 1;
    if (n_libs == 2 && !bench_load_backend(libs[1], options, host, n_threads, &backends[1], &ctxs[1])) return 1;

    const int64_t seq_blocks = (n_ctx + BLOCK - 1) / BLOCK, n_blocks = S * seq_blocks, TS = n_decodes + T * (S - n_decodes);
    const size_t row = vt_row_size(dtype, HEAD_DIM * KV_HEADS), cache_bytes = row * (size_t)(n_blocks * BLOCK);
    int layers = (int)(MAX_CACHE_BYTES / (2 * cache_bytes));
    layers = layers < 4 ? 4 : layers;
    layers = layers > max_layers ? max_layers : layers;
    /* K and V of every layer; 64-byte aligned for the read floor's loads
     * (row and block sizes keep every block aligned too) */
    uint8_t *caches = aligned_alloc(64, (cache_bytes * 2 * (size_t)layers + 63) / 64 * 64);
    float *values = malloc((size_t)(HEAD_DIM * KV_HEADS) * sizeof(float));
    float *q = malloc((size_t)(HEAD_DIM * HEADS * TS) * sizeof(float)), *out = malloc((size_t)(HEAD_DIM * HEADS * TS) * sizeof(float));
    int32_t *table = malloc((size_t)n_blocks * sizeof(int32_t)), *pos = malloc((size_t)TS * sizeof(int32_t));
    int32_t *seq = calloc((size_t)TS, sizeof(int32_t));
    if (!caches || !values || !q || !out || !table || !pos || !seq) return 1;
    uint64_t state = 42;
    for (size_t r = 0; r < (size_t)(n_blocks * BLOCK) * 2 * (size_t)layers; r++) {
        for (int i = 0; i < HEAD_DIM * KV_HEADS; i++) values[i] = next_uniform(&state);
        if (vt_from_f32(dtype, values, caches + r * row, HEAD_DIM * KV_HEADS) != VT_OK) {
            fprintf(stderr, "cannot store a %s cache\n", vt_dtype_name(dtype));
            return 2;
        }
    }
    for (int64_t i = 0; i < HEAD_DIM * HEADS * TS; i++) q[i] = next_uniform(&state);
    /* sequence s owns blocks s, s + S, s + 2S, ...: interleaved as an engine's pool fills */
    for (int64_t s = 0; s < S; s++)
        for (int64_t i = 0; i < seq_blocks; i++)
            table[s * seq_blocks + i] = (int32_t)(i * S + ((i + 1) * BLOCK <= shared ? 0 : s));
    for (int64_t s = 0, at = 0; s < S; s++) {
        const int64_t n = s < n_decodes ? 1 : T;
        for (int64_t t = 0; t < n; t++, at++) pos[at] = (int32_t)(n_ctx - n + t), seq[at] = (int32_t)s;
    }

    vt_node node = {.struct_size = sizeof node, .op = VT_OP_ATTENTION,
                    .phase = T == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL, .n_src = 6};
    node.params.attention =
        (vt_attention_params){1.0f / sqrtf((float)HEAD_DIM), BLOCK, (int32_t)S, (int32_t)seq_blocks};
    node.src[0] = tensor(q, VT_F32, 3, HEAD_DIM, HEADS, TS, 1);
    node.src[1] = tensor(caches, dtype, 4, HEAD_DIM, KV_HEADS, BLOCK, n_blocks);
    node.src[2] = tensor(caches + cache_bytes, dtype, 4, HEAD_DIM, KV_HEADS, BLOCK, n_blocks);
    node.src[3] = tensor(table, VT_I32, 2, seq_blocks, S, 1, 1);
    node.src[4] = tensor(pos, VT_I32, 1, TS, 1, 1, 1);
    node.src[5] = tensor(seq, VT_I32, 1, TS, 1, 1, 1);
    node.dst = tensor(out, VT_F32, 3, HEAD_DIM, HEADS, TS, 1);
    for (int l = 0; l < n_libs; l++)
        if (!backends[l]->supports(ctxs[l], &node)) {
            printf("%s: attention at a %s cache declined\n", libs[l], vt_dtype_name(dtype));
            return 0;
        }
    /* The read floor (see read_items) runs call by call with attention, on
     * the layer half the cycle away (also out of cache), so both medians
     * come from the same minutes of a shared machine. */
    read_task rt = {.bytes_per_item = row * BLOCK};
    const int64_t read_items_per_call = 2 * n_blocks; /* a layer's K and V, one block of one sequence per item */
    const int n_calls = reps * layers; /* per library */
    double *tw[2], *tc[2];
    for (int l = 0; l < 2; l++) tw[l] = malloc((size_t)n_calls * sizeof(double)), tc[l] = malloc((size_t)n_calls * sizeof(double));
    double *tf = malloc((size_t)(n_libs * n_calls) * sizeof(double));
    if (!tw[0] || !tw[1] || !tc[0] || !tc[1] || !tf) return 1;
    /* call c: library c % n_libs on layer c % layers, the next layer each
     * call whichever library makes it, so no call finds the layer the call
     * before it read still in L3 */
    for (int c = -n_libs * layers; c < n_libs * n_calls; c++) {
        const int l = (c + n_libs * layers) % n_libs, r = c < 0 ? -1 : c / n_libs;
        const int layer = (c + n_libs * layers) % layers;
        node.src[1].data = caches + (size_t)(2 * layer) * cache_bytes;
        node.src[2].data = caches + (size_t)(2 * layer + 1) * cache_bytes;
        const double t0 = now_s(), c0 = cpu_s();
        if (backends[l]->attention(ctxs[l], &node) != VT_OK) {
            fprintf(stderr, "%s: attention failed\n", libs[l]);
            return 1;
        }
        if (r >= 0) tw[l][r] = now_s() - t0, tc[l][r] = cpu_s() - c0;
        rt.base = caches + (size_t)(2 * ((layer + layers / 2) % layers)) * cache_bytes;
        const double f0 = now_s();
        host->parallel_for(read_items_per_call, (read_items_per_call + n_threads - 1) / n_threads, read_items, &rt);
        if (r >= 0) tf[r * n_libs + l] = now_s() - f0;
    }
    qsort(tf, (size_t)(n_libs * n_calls), sizeof *tf, cmp_double);
    const double fmed = tf[n_libs * n_calls / 2], floor_gbs = 2.0 * (double)cache_bytes / fmed * 1e-9;
    for (int l = 0; l < n_libs; l++) {
        qsort(tw[l], (size_t)n_calls, sizeof *tw[l], cmp_double);
        qsort(tc[l], (size_t)n_calls, sizeof *tc[l], cmp_double);
        const double med = tw[l][n_calls / 2], cmed = tc[l][n_calls / 2];
        const double read_gbs = 2.0 * (double)row * (double)(n_ctx * S) / med * 1e-9;
        char decodes[32] = "";
        if (n_decodes > 0) snprintf(decodes, sizeof decodes, " (%lld decoding)", (long long)n_decodes);
        printf("%s %-5s ctx %lld T %lld S %lld%s L %d, %d threads: %8.1f us/call (cpu %8.1f us), %6.2f GB/s of cache, x%d "
               "layers = %.2f ms; read floor %6.2f GB/s: %3.0f%% of it\n",
               libs[l], vt_dtype_name(dtype), (long long)n_ctx, (long long)T, (long long)S, decodes, layers, n_threads, med * 1e6,
               cmed * 1e6, read_gbs, MAX_LAYERS, med * MAX_LAYERS * 1e3, floor_gbs, 100.0 * read_gbs / floor_gbs);
    }
    for (int l = 0; l < n_libs; l++) backends[l]->shutdown(ctxs[l]);
    vt_threadpool_destroy(pool);
    return 0;
}
