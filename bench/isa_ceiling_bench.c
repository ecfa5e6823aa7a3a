/* isa_ceiling_bench.c — what this CPU's multiply-add instructions can do at
 * most, the ceiling the kernels' figures are read against (not a test).
 *
 * Each instruction the simd tiers build on runs in a loop of independent
 * accumulator chains, registers only (no loads, nothing to wait for but the
 * instruction itself): enough chains to cover its latency at the issue rate
 * of any current core, so the loop runs at the instruction's throughput.
 * Reported: G operations a second (a multiply-add counts 2, as GFLOP/s
 * counts it), on 1 thread and on T threads (each its own loop), median of
 * the repetitions. An instruction the CPU lacks is named and skipped.
 *
 *   isa_ceiling_bench [-t threads] [-r reps]
 *
 * A kernel's G ops/s (simd_matmul_bench prints 2 M N K / time) over the
 * ceiling of the instruction it is built on says how much of the machine
 * it uses, on this CPU, this minute: run both in the same minutes on a
 * shared machine.
 *
 * Build: cmake target isa_ceiling_bench (bench/CMakeLists.txt). The file
 * takes no ISA flags: each loop is compiled for its own instructions
 * (target attributes) and runs only where the CPU reports them. */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

/* Independent chains per loop: latency 4-6 cycles at up to 2 issued a
 * cycle needs 8-12 in flight. */
#define CHAINS 12
/* Iterations of a loop per timed call. */
#define ITERS 20000000L

/* The loop bodies: CHAINS accumulators a0..a11, each starting from its own
 * value INIT(i) (equal chains would be merged into one by the compiler),
 * updated by STEP(a). The empty asm keeps the operands opaque, so the
 * compiler cannot fold the loop into a closed form. */
#define ACCS(T, INIT) T a0 = INIT(0), a1 = INIT(1), a2 = INIT(2), a3 = INIT(3), a4 = INIT(4), a5 = INIT(5), \
                        a6 = INIT(6), a7 = INIT(7), a8 = INIT(8), a9 = INIT(9), a10 = INIT(10), a11 = INIT(11)
#define STEPS(STEP) STEP(a0); STEP(a1); STEP(a2); STEP(a3); STEP(a4); STEP(a5); \
                    STEP(a6); STEP(a7); STEP(a8); STEP(a9); STEP(a10); STEP(a11)
#define SINK(F) F(a0, F(a1, F(a2, F(a3, F(a4, F(a5, F(a6, F(a7, F(a8, F(a9, F(a10, a11)))))))))))

static volatile float sink_f;
static volatile int sink_i;

/* One timed loop: accumulators of type T, from INIT(i), each updated by
 * STEP(a) from x and y (of type X), which the empty asm makes opaque every
 * iteration; at the end the accumulators summed by ADD and kept by KEEP(s)
 * (so none of it is dead code). Compiled for its own instructions only. */
#define CEILING_LOOP(name, isa, T, X, X_INIT, Y_INIT, INIT, STEP, ADD, KEEP) \
    __attribute__((target(isa))) static void name(long n) {                 \
        X x = X_INIT, y = Y_INIT;                                             \
        ACCS(T, INIT);                                                        \
        for (long k = 0; k < n; k++) {                                        \
            STEPS(STEP);                                                      \
            __asm__ volatile("" : "+v"(x), "+v"(y));                          \
        }                                                                     \
        const T s = SINK(ADD);                                                \
        KEEP(s);                                                              \
    }

#define KEEP_YMM_F(s) sink_f = _mm256_cvtss_f32(s)
#define KEEP_ZMM_F(s) sink_f = _mm512_reduce_add_ps(s)
#define KEEP_YMM_I(s) sink_i = _mm256_extract_epi32(s, 0)
#define KEEP_ZMM_I(s) sink_i = _mm512_reduce_add_epi32(s)

#define FMA_YMM(a) a = _mm256_fmadd_ps(x, y, a)
CEILING_LOOP(fma_ymm, "avx2,fma", __m256, __m256, _mm256_set1_ps(1.0f), _mm256_set1_ps(1e-9f), _mm256_set1_ps, FMA_YMM,
             _mm256_add_ps, KEEP_YMM_F)

#define FMA_ZMM(a) a = _mm512_fmadd_ps(x, y, a)
CEILING_LOOP(fma_zmm, "avx512f", __m512, __m512, _mm512_set1_ps(1.0f), _mm512_set1_ps(1e-9f), _mm512_set1_ps, FMA_ZMM,
             _mm512_add_ps, KEEP_ZMM_F)

/* The AVX2 tier's 8-bit dot product: u8 x s8 pairs to i16 (vpmaddubsw),
 * i16 pairs to i32 (vpmaddwd), added (vpaddd): 32 multiply-adds per three
 * instructions. The products do not involve the accumulators, so the
 * chains need inputs of their own (equal ones would be computed once):
 * MADDUBS_CHAINS pairs of input and accumulator, which with the shared
 * operand and the ones fill AVX2's 16 registers; only the vpaddd carries
 * from one iteration to the next, so that many chains cover its latency. */
#define MADDUBS_CHAINS 6
__attribute__((target("avx2"))) static void maddubs_ymm(long n) {
    __m256i x0 = _mm256_set1_epi8(1), x1 = _mm256_set1_epi8(2), x2 = _mm256_set1_epi8(3), x3 = _mm256_set1_epi8(4),
            x4 = _mm256_set1_epi8(5), x5 = _mm256_set1_epi8(6), y = _mm256_set1_epi8(7);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
    for (long k = 0; k < n; k++) {
#define MADDUBS(a, x) a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), ones))
        MADDUBS(a0, x0); MADDUBS(a1, x1); MADDUBS(a2, x2); MADDUBS(a3, x3); MADDUBS(a4, x4); MADDUBS(a5, x5);
        __asm__ volatile("" : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), "+v"(y));
    }
    const __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3)),
                                       _mm256_add_epi32(a4, a5));
    KEEP_YMM_I(s);
}

#define DPBUSD_YMM(a) a = _mm256_dpbusd_epi32(a, x, y)
CEILING_LOOP(dpbusd_ymm, "avx512f,avx512vl,avx512vnni", __m256i, __m256i, _mm256_set1_epi8(1), _mm256_set1_epi8(2),
             _mm256_set1_epi32, DPBUSD_YMM, _mm256_add_epi32, KEEP_YMM_I)

#define DPBUSD_ZMM(a) a = _mm512_dpbusd_epi32(a, x, y)
CEILING_LOOP(dpbusd_zmm, "avx512f,avx512vnni", __m512i, __m512i, _mm512_set1_epi8(1), _mm512_set1_epi8(2),
             _mm512_set1_epi32, DPBUSD_ZMM, _mm512_add_epi32, KEEP_ZMM_I)

#define DPBF16_ZMM(a) a = _mm512_dpbf16_ps(a, x, y)
CEILING_LOOP(dpbf16_zmm, "avx512f,avx512bf16", __m512, __m512bh, (__m512bh)_mm512_set1_epi32(0x3f803f80),
             (__m512bh)_mm512_set1_epi32(0x30003000), _mm512_set1_ps, DPBF16_ZMM, _mm512_add_ps, KEEP_ZMM_F)

typedef struct ceiling {
    const char *name;     /* the instruction(s) */
    const char *what;     /* what one counts */
    const char *needs;    /* the cpu features, as __builtin_cpu_supports names them, comma-separated */
    double ops_per_iter;  /* operations (a multiply-add counts 2) per iteration of its loop */
    void (*loop)(long);
} ceiling;

static const ceiling CEILINGS[] = {
    {"vfmadd231ps ymm", "f32 FMA, 8 lanes", "avx2,fma", CHAINS * 16, fma_ymm},
    {"vfmadd231ps zmm", "f32 FMA, 16 lanes", "avx512f", CHAINS * 32, fma_zmm},
    {"vpmaddubsw+vpmaddwd+vpaddd ymm", "int8, the AVX2 tier's", "avx2", MADDUBS_CHAINS * 64, maddubs_ymm},
    {"vpdpbusd ymm", "int8, 32 per instruction", "avx512vl,avx512vnni", CHAINS * 64, dpbusd_ymm},
    {"vpdpbusd zmm", "int8, 64 per instruction", "avx512f,avx512vnni", CHAINS * 128, dpbusd_zmm},
    {"vdpbf16ps zmm", "bf16 pairs, 32 per instruction", "avx512f,avx512bf16", CHAINS * 64, dpbf16_zmm},
};

/* The first feature of needs the CPU lacks, or NULL. */
static const char *missing_feature(const char *needs, char *buf, size_t size) {
    snprintf(buf, size, "%s", needs);
    for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        int has = 0;
        /* __builtin_cpu_supports takes a string literal only */
        if (!strcmp(f, "avx2")) has = __builtin_cpu_supports("avx2");
        else if (!strcmp(f, "fma")) has = __builtin_cpu_supports("fma");
        else if (!strcmp(f, "avx512f")) has = __builtin_cpu_supports("avx512f");
        else if (!strcmp(f, "avx512vl")) has = __builtin_cpu_supports("avx512vl");
        else if (!strcmp(f, "avx512vnni")) has = __builtin_cpu_supports("avx512vnni");
        else if (!strcmp(f, "avx512bf16")) has = __builtin_cpu_supports("avx512bf16");
        if (!has) return f;
    }
    return NULL;
}

typedef struct run_arg {
    void (*loop)(long);
    long n;
} run_arg;

static void *run_loop(void *p) {
    const run_arg *a = p;
    a->loop(a->n);
    return NULL;
}

/* G ops/s of `threads` copies of the loop at once: all start together,
 * the time is the last one's end. */
static double measure(const ceiling *c, int threads) {
    pthread_t tid[64];
    run_arg arg = {c->loop, ITERS};
    const double t0 = now_s();
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tid[i], NULL, run_loop, &arg) != 0) {
            fprintf(stderr, "isa_ceiling_bench: cannot start thread %d\n", i);
            exit(1);
        }
    for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    const double dt = now_s() - t0;
    return (double)threads * (double)ITERS * c->ops_per_iter / dt * 1e-9;
}

static double median_of(const ceiling *c, int threads, int reps) {
    double v[64];
    for (int r = 0; r < reps; r++) v[r] = measure(c, threads);
    qsort(v, (size_t)reps, sizeof v[0], cmp_double);
    return v[reps / 2];
}

int main(int argc, char **argv) {
    int threads = 2, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: isa_ceiling_bench [-t threads (1-64)] [-r reps (1-64)]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 64 || reps < 1 || reps > 64) {
        fprintf(stderr, "isa_ceiling_bench: -t and -r take 1 to 64\n");
        return 2;
    }
    __builtin_cpu_init();
    printf("register-only loops of %d independent chains (the AVX2 int8 triple: %d), median of %d; G ops/s (a multiply-add "
           "counts 2)\n", CHAINS, MADDUBS_CHAINS,
           reps);
    printf("%-32s %-32s %12s %12s\n", "instruction", "counts", "1 thread", threads == 1 ? "" : "all threads");
    for (size_t i = 0; i < sizeof CEILINGS / sizeof CEILINGS[0]; i++) {
        const ceiling *c = &CEILINGS[i];
        char buf[64];
        const char *lacks = missing_feature(c->needs, buf, sizeof buf);
        if (lacks) {
            printf("%-32s %-32s   (skipped: this CPU lacks %s)\n", c->name, c->what, lacks);
            continue;
        }
        const double one = median_of(c, 1, reps);
        if (threads == 1) printf("%-32s %-32s %12.0f\n", c->name, c->what, one);
        else printf("%-32s %-32s %12.0f %12.0f (%d threads)\n", c->name, c->what, one, median_of(c, threads, reps),
                    threads);
    }
    return 0;
}
