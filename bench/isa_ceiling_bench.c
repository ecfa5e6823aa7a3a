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
/* Inner iterations per timed call (each CHAINS instructions). */
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

__attribute__((target("avx2,fma"))) static void fma_ymm(long n) {
    __m256 x = _mm256_set1_ps(1.0f), y = _mm256_set1_ps(1e-9f);
    ACCS(__m256, _mm256_set1_ps);
    for (long k = 0; k < n; k++) {
#define FMA_YMM(a) a = _mm256_fmadd_ps(x, y, a)
        STEPS(FMA_YMM);
        __asm__ volatile("" : "+x"(x), "+x"(y));
    }
    const __m256 s = SINK(_mm256_add_ps);
    sink_f = _mm256_cvtss_f32(s);
}

__attribute__((target("avx512f"))) static void fma_zmm(long n) {
    __m512 x = _mm512_set1_ps(1.0f), y = _mm512_set1_ps(1e-9f);
    ACCS(__m512, _mm512_set1_ps);
    for (long k = 0; k < n; k++) {
#define FMA_ZMM(a) a = _mm512_fmadd_ps(x, y, a)
        STEPS(FMA_ZMM);
        __asm__ volatile("" : "+v"(x), "+v"(y));
    }
    const __m512 s = SINK(_mm512_add_ps);
    sink_f = _mm512_reduce_add_ps(s);
}

/* The AVX2 tier's 8-bit dot product: u8 x s8 pairs to i16 (vpmaddubsw),
 * i16 pairs to i32 (vpmaddwd), added (vpaddd): 32 multiply-adds per three
 * instructions. */
__attribute__((target("avx2"))) static void maddubs_ymm(long n) {
    __m256i x = _mm256_set1_epi8(1), y = _mm256_set1_epi8(2);
    const __m256i ones = _mm256_set1_epi16(1);
    ACCS(__m256i, _mm256_set1_epi32);
    for (long k = 0; k < n; k++) {
#define MADDUBS_YMM(a) a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), ones))
        STEPS(MADDUBS_YMM);
        __asm__ volatile("" : "+x"(x), "+x"(y));
    }
    const __m256i s = SINK(_mm256_add_epi32);
    sink_i = _mm256_extract_epi32(s, 0);
}

__attribute__((target("avx512f,avx512vl,avx512vnni"))) static void dpbusd_ymm(long n) {
    __m256i x = _mm256_set1_epi8(1), y = _mm256_set1_epi8(2);
    ACCS(__m256i, _mm256_set1_epi32);
    for (long k = 0; k < n; k++) {
#define DPBUSD_YMM(a) a = _mm256_dpbusd_epi32(a, x, y)
        STEPS(DPBUSD_YMM);
        __asm__ volatile("" : "+v"(x), "+v"(y));
    }
    const __m256i s = SINK(_mm256_add_epi32);
    sink_i = _mm256_extract_epi32(s, 0);
}

__attribute__((target("avx512f,avx512vnni"))) static void dpbusd_zmm(long n) {
    __m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(2);
    ACCS(__m512i, _mm512_set1_epi32);
    for (long k = 0; k < n; k++) {
#define DPBUSD_ZMM(a) a = _mm512_dpbusd_epi32(a, x, y)
        STEPS(DPBUSD_ZMM);
        __asm__ volatile("" : "+v"(x), "+v"(y));
    }
    const __m512i s = SINK(_mm512_add_epi32);
    sink_i = _mm512_reduce_add_epi32(s);
}

__attribute__((target("avx512f,avx512bf16"))) static void dpbf16_zmm(long n) {
    __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x30003000);
    ACCS(__m512, _mm512_set1_ps);
    for (long k = 0; k < n; k++) {
#define DPBF16_ZMM(a) a = _mm512_dpbf16_ps(a, x, y)
        STEPS(DPBF16_ZMM);
        __asm__ volatile("" : "+v"(x), "+v"(y));
    }
    const __m512 s = SINK(_mm512_add_ps);
    sink_f = _mm512_reduce_add_ps(s);
}

typedef struct ceiling {
    const char *name;     /* the instruction(s) */
    const char *what;     /* what one counts */
    const char *needs;    /* the cpu features, as __builtin_cpu_supports names them, comma-separated */
    double ops_per_instr; /* operations (multiply-add = 2) per timed instruction (or sequence) */
    void (*loop)(long);
} ceiling;

static const ceiling CEILINGS[] = {
    {"vfmadd231ps ymm", "f32 FMA, 8 lanes", "avx2,fma", 16, fma_ymm},
    {"vfmadd231ps zmm", "f32 FMA, 16 lanes", "avx512f", 32, fma_zmm},
    {"vpmaddubsw+vpmaddwd+vpaddd ymm", "int8, the AVX2 tier's", "avx2", 64, maddubs_ymm},
    {"vpdpbusd ymm", "int8, 32 per instruction", "avx512vl,avx512vnni", 64, dpbusd_ymm},
    {"vpdpbusd zmm", "int8, 64 per instruction", "avx512f,avx512vnni", 128, dpbusd_zmm},
    {"vdpbf16ps zmm", "bf16 pairs, 32 per instruction", "avx512f,avx512bf16", 64, dpbf16_zmm},
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
    return (double)threads * (double)ITERS * CHAINS * c->ops_per_instr / dt * 1e-9;
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
    printf("register-only loops of %d independent chains, median of %d; G ops/s (a multiply-add counts 2)\n", CHAINS,
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
