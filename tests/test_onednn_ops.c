/* test_onednn_ops.c — the onednn backend against the reference backend.
 *
 * onednn implements MATMUL only (everything else is NULL and falls back per
 * node). Every weight dtype vt loads is multiplied by both backends on the
 * same data and compared element by element, over shapes that hit the tiling
 * edges: N smaller than a tile, N not a multiple of the tile (a tail tile),
 * many tiles (tile_kib=16), K of one block, M = 1, 16, 17, 33, 128; and a
 * row's bits whatever M (batch invariance). Weight tiles go through host->to_f32, whose paths are
 * compared bit for bit in test_quant.c. supports() is checked for what it must
 * accept and decline.
 *
 * Both backends load through tests/backend_harness.h (the registry of the
 * build tree); extra instances with options are made with the table's own
 * init. The comparison is per element against |x_m|_2 |w_n|_2 (an upper
 * bound of sum_k |x||w|, the scale of the rounding error), which the
 * harness's whole-tensor diff does not give. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"
#include "host.h"
#include "quant.h"
#include "util.h"

/* Under ASan, the runner's sanitizer defaults (tests/runner/asan_defaults.c)
 * keep gcc 12's LeakSanitizer from crashing at exit on oneDNN's threads. */

/* ------------------------------------------------------------------------ */
/* Fixture                                                                    */

static vt_harness *harness;
static const vt_host *host;
static const vt_backend_entry *onednn, *reference;

static int suite_init(void) {
    harness = vt_harness_open(2);
    if (!harness) return 1;
    host = vt_harness_host(harness);
    onednn = vt_harness_backend(harness, "onednn");
    reference = vt_harness_backend(harness, "reference");
    if (!onednn || !reference) {
        fprintf(stderr, "onednn or reference backend not loaded (built? see `vt backends`)\n");
        return 1;
    }
    return 0;
}

static void sweep_free(void);

static int suite_cleanup(void) {
    sweep_free();
    vt_harness_close(harness);
    return 0;
}

/* An extra onednn instance with options; NULL (and a failed assert) on error. */
static void *onednn_instance(const char *options) {
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = host->n_threads, .options = options};
    void *ctx = NULL;
    char err[256] = "";
    vt_status st = onednn->table->init(host, &config, &ctx, err, sizeof err);
    CU_ASSERT_EQUAL(st, VT_OK);
    if (st != VT_OK) fprintf(stderr, "onednn init(%s): %s\n", options, err);
    return st == VT_OK ? ctx : NULL;
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                    */

static vt_tensor tensor2(void *data, int32_t dtype, int64_t ne0, int64_t ne1) {
    size_t row = vt_row_size(dtype, ne0);
    vt_tensor t = {.data = data, .dtype = dtype, .ndim = 2, .ne = {ne0, ne1, 1, 1}};
    t.nb[0] = vt_dtype_block_bytes(dtype) / (size_t)vt_dtype_block_length(dtype);
    t.nb[1] = row;
    t.nb[2] = t.nb[3] = row * (size_t)ne1;
    return t;
}

static vt_node matmul_node(int phase, void *w, int32_t w_dtype, void *x, void *y, int32_t y_dtype, int64_t k,
                           int64_t n, int64_t m) {
    vt_node node = {.struct_size = sizeof(vt_node), .op = VT_OP_MATMUL, .phase = phase, .n_src = 2};
    node.src[0] = tensor2(w, w_dtype, k, n);
    node.src[1] = tensor2(x, VT_F32, k, m);
    node.dst = tensor2(y, y_dtype, n, m);
    return node;
}

/* Uniform in [-1, 1) from a fixed-seed LCG. */
static float next_uniform(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

static const int32_t weight_dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};
#define N_WEIGHT_DTYPES (sizeof(weight_dtypes) / sizeof(weight_dtypes[0]))

/* ------------------------------------------------------------------------ */
/* The differential check                                                     */

/* Guard floats after each output, to catch a tile written past Y's end. */
#define GUARD 16
#define GUARD_VALUE 12345.0f

/* One {K, N} weight of a dtype times {K, M} activations, with what onednn
 * must reproduce: the reference backend's Y and, per element, the scale of
 * the rounding error, |x_m|_2 |w_n|_2 (Cauchy-Schwarz: an upper bound of
 * sum_k |x||w| that costs O((M + N) K) instead of a second O(M N K) product;
 * for these uniform values it is ~4/3 of the sum). Preparing a case
 * (quantizing, the reference run) costs far more than one onednn call, so the
 * shape sweep prepares each case once and every onednn instance (default,
 * small tiles, OpenMP) is checked against it. */
typedef struct matmul_case {
    int32_t dtype;
    int64_t k, n, m;
    uint8_t *w;   /* [N] rows of vt_row_size(dtype, K) bytes; shared by the M cases of one sweep weight */
    bool owns_w;
    float *x;     /* [M][K] */
    float *y_ref; /* [M][N] the reference backend's result */
    float *mag;   /* [M][N] |x_m|_2 |w_n|_2 of the quantized values, >= sum_k |x[m][k]| |w[n][k]| */
} matmul_case;

/* w (row_bytes x n) from uniform values; w_norm[n] gets the 2-norms of the
 * rows both backends actually multiply: the quantized values (w_f32 [N][K] is
 * scratch). */
static uint8_t *make_weight(int32_t dtype, int64_t k, int64_t n, uint64_t *seed, float *w_f32, double *w_norm) {
    size_t row_bytes = vt_row_size(dtype, k);
    uint8_t *w = malloc(row_bytes * (size_t)n);
    CU_ASSERT_FATAL(w != NULL);
    for (int64_t i = 0; i < k * n; i++) w_f32[i] = next_uniform(seed);
    for (int64_t r = 0; r < n; r++)
        CU_ASSERT_FATAL(vt_from_f32(dtype, w_f32 + r * k, w + (size_t)r * row_bytes, k) == VT_OK);
    CU_ASSERT_FATAL(vt_to_f32(dtype, w, w_f32, k * n) == VT_OK);
    for (int64_t r = 0; r < n; r++) {
        double sq = 0;
        for (int64_t i = 0; i < k; i++) sq += (double)w_f32[r * k + i] * w_f32[r * k + i];
        w_norm[r] = sqrt(sq);
    }
    return w;
}

/* Fill c's activations, reference result and magnitudes for weight w
 * (w_norm: the 2-norms of its rows, [N]). */
static void prepare_case(matmul_case *c, int32_t dtype, int64_t k, int64_t n, int64_t m, uint8_t *w, bool owns_w,
                         const double *w_norm, uint64_t *seed) {
    *c = (matmul_case){.dtype = dtype, .k = k, .n = n, .m = m, .w = w, .owns_w = owns_w};
    c->x = malloc(sizeof(float) * (size_t)(k * m));
    c->y_ref = malloc(sizeof(float) * (size_t)(n * m));
    c->mag = malloc(sizeof(float) * (size_t)(n * m));
    CU_ASSERT_FATAL(c->x && c->y_ref && c->mag);
    for (int64_t i = 0; i < k * m; i++) c->x[i] = next_uniform(seed);
    vt_node node = matmul_node(VT_PHASE_PREFILL, w, dtype, c->x, c->y_ref, VT_F32, k, n, m);
    CU_ASSERT_FATAL(vt_backend_accepts(reference, &node));
    CU_ASSERT_EQUAL_FATAL(vt_backend_run(reference, &node), VT_OK);
    for (int64_t mi = 0; mi < m; mi++) {
        double sq = 0;
        for (int64_t ki = 0; ki < k; ki++) sq += (double)c->x[mi * k + ki] * c->x[mi * k + ki];
        for (int64_t ni = 0; ni < n; ni++) c->mag[mi * n + ni] = (float)(sqrt(sq) * w_norm[ni]);
    }
}

static void free_case(matmul_case *c) {
    if (c->owns_w) free(c->w);
    free(c->x);
    free(c->y_ref);
    free(c->mag);
    memset(c, 0, sizeof *c);
}

/* Whether instance ctx multiplies weights of dtype in bf16: it says so in
 * its isa line (precision=auto picks bf16 where oneDNN runs it in hardware;
 * F32 and F16 weights stay f32 either way). */
static bool multiplies_in_bf16(void *ctx, int32_t dtype) {
    const char *isa = onednn->table->isa(ctx);
    return vt_isa_line_multiplies_bf16(isa) && dtype != VT_F32 && dtype != VT_F16;
}

/* Run case c on onednn (ctx) and compare with the reference; returns the
 * number of elements outside tolerance plus guard floats overwritten (and
 * asserts). */
static int check_case(void *ctx, const matmul_case *c) {
    const int64_t n = c->n, m = c->m;
    float *y = malloc(sizeof(float) * (size_t)(n * m + GUARD));
    CU_ASSERT_FATAL(y != NULL);
    for (int64_t i = 0; i < n * m + GUARD; i++) y[i] = GUARD_VALUE;
    vt_node node = matmul_node(VT_PHASE_PREFILL, c->w, c->dtype, c->x, y, VT_F32, c->k, n, m);
    CU_ASSERT_FATAL(onednn->table->supports(ctx, &node) == 1);
    CU_ASSERT_EQUAL_FATAL(onednn->table->matmul(ctx, &node), VT_OK);

    /* Tolerance. The reference sums in double and rounds once; oneDNN sums in
     * f32 with FMA in blocks. The classical bound of an f32 dot product is
     * K * u * sum|x||w| (u = 2^-24 ~ 6e-8), the typical error ~ sqrt(K) * u
     * times that sum. 1e-5 * sum|x||w| is ~ 170 u: above the worst case for
     * K <= 128 and above the typical error for every K here by > 20x, while a
     * wrong tile, a shifted row or a dropped block is off by O(|x||w|) of a
     * whole block, i.e. > 1e-2 of the sum. mag bounds the sum from above by at
     * most ~4/3 here (uniform values), which changes none of this. Observed
     * worst here: 2.0e-7 of mag.
     * In bf16 both operands are first rounded to 8 significant bits, each
     * within 2^-9 of itself, so each product is within (2 * 2^-9 + 2^-18)
     * of |x||w| and the sum within 2^-8 (3.9e-3) of sum|x||w| <= mag, plus
     * the f32 summation above: 4e-3 * mag. The rounding errors are
     * independent, so the typical error is ~ 2^-9 * mag / sqrt(K) or less
     * (observed worst: 7.5e-5 of mag at K = 1024), while a wrong tile, row
     * or block is still off by O(|x||w|) of a whole block. */
    const double tolerance = multiplies_in_bf16(ctx, c->dtype) ? 4e-3 : 1e-5;
    int bad = 0;
    for (int64_t i = 0; i < n * m; i++) {
        double got = y[i], want = c->y_ref[i], mag = c->mag[i];
        if (!(fabs(got - want) <= tolerance * mag + 1e-30)) {
            if (bad < 3)
                fprintf(stderr, "\n  %s K=%lld N=%lld M=%lld: y[%lld][%lld] = %.9g, reference %.9g (|x||w| %.3g)",
                        vt_dtype_name(c->dtype), (long long)c->k, (long long)n, (long long)m, (long long)(i / n),
                        (long long)(i % n), got, want, mag);
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    int overrun = 0;
    for (int i = 0; i < GUARD; i++) overrun += y[n * m + i] != GUARD_VALUE;
    CU_ASSERT_EQUAL(overrun, 0);
    /* batch invariance: a row alone gives the bits it got among the others
     * (the first, a middle and the last: a call's last rows are where
     * oneDNN's kernels change) */
    int moved = 0;
    float *y1 = malloc(sizeof(float) * (size_t)n);
    CU_ASSERT_FATAL(y1 != NULL);
    const int64_t rows[3] = {0, m / 2, m - 1};
    for (int i = 0; i < 3 && m > 1; i++) {
        const int64_t row = rows[i];
        vt_node one = matmul_node(VT_PHASE_PREFILL, c->w, c->dtype, c->x + row * c->k, y1, VT_F32, c->k, n, 1);
        CU_ASSERT_EQUAL_FATAL(onednn->table->matmul(ctx, &one), VT_OK);
        if (memcmp(y1, y + row * n, sizeof(float) * (size_t)n) != 0) {
            fprintf(stderr, "\n  %s K=%lld N=%lld M=%lld: row %lld alone gives other bits", vt_dtype_name(c->dtype),
                    (long long)c->k, (long long)n, (long long)m, (long long)row);
            moved++;
        }
    }
    CU_ASSERT_EQUAL(moved, 0);
    free(y1);
    free(y);
    return bad + overrun + moved;
}

/* A one-off case: prepare, check on ctx, free. */
static int compare_matmul(void *ctx, int32_t dtype, int64_t k, int64_t n, int64_t m, uint64_t seed) {
    float *w_f32 = malloc(sizeof(float) * (size_t)(k * n));
    double *w_norm = malloc(sizeof(double) * (size_t)n);
    CU_ASSERT_FATAL(w_f32 && w_norm);
    uint8_t *w = make_weight(dtype, k, n, &seed, w_f32, w_norm);
    matmul_case c;
    prepare_case(&c, dtype, k, n, m, w, true, w_norm, &seed);
    free(w_f32);
    free(w_norm);
    int bad = check_case(ctx, &c);
    free_case(&c);
    return bad;
}

/* The shape sweep: every weight dtype over shapes at the tiling edges.
 * K: one block (for plain types a short odd row instead of K = 1, which is
 * also tried), and several blocks. N: below a tile, a tile plus a 1-row tail,
 * and several tiles with a tail (tile rows are multiples of 16). M: 1, 16,
 * 17, 33, 128. Prepared on first use, freed by suite_cleanup. */
#define SWEEP_KS 3
#define SWEEP_NS 3
#define SWEEP_MS 5
static const int64_t sweep_ns[SWEEP_NS] = {5, 17, 300};
static const int64_t sweep_ms[SWEEP_MS] = {1, 16, 17, 33, 128};
static matmul_case sweep[N_WEIGHT_DTYPES][SWEEP_KS][SWEEP_NS][SWEEP_MS];
static bool sweep_ready;

static void sweep_prepare(void) {
    if (sweep_ready) return;
    sweep_free(); /* what an earlier, failed preparation left */
    for (size_t d = 0; d < N_WEIGHT_DTYPES; d++) {
        int32_t dtype = weight_dtypes[d];
        int64_t block = vt_dtype_block_length(dtype);
        int64_t ks[SWEEP_KS] = {block > 1 ? block : 7, block > 1 ? 3 * block : 1, 512};
        uint64_t seed = 1000 + (uint64_t)d;
        for (size_t ki = 0; ki < SWEEP_KS; ki++) {
            for (size_t ni = 0; ni < SWEEP_NS; ni++) {
                int64_t k = ks[ki], n = sweep_ns[ni];
                float *w_f32 = malloc(sizeof(float) * (size_t)(k * n));
                double *w_norm = malloc(sizeof(double) * (size_t)n);
                CU_ASSERT_FATAL(w_f32 && w_norm);
                uint8_t *w = make_weight(dtype, k, n, &seed, w_f32, w_norm);
                for (size_t mi = 0; mi < SWEEP_MS; mi++)
                    prepare_case(&sweep[d][ki][ni][mi], dtype, k, n, sweep_ms[mi], w, mi == 0, w_norm, &seed);
                free(w_f32);
                free(w_norm);
            }
        }
    }
    sweep_ready = true;
}

static void sweep_free(void) {
    for (size_t d = 0; d < N_WEIGHT_DTYPES; d++)
        for (size_t ki = 0; ki < SWEEP_KS; ki++)
            for (size_t ni = 0; ni < SWEEP_NS; ni++)
                for (size_t mi = SWEEP_MS; mi-- > 0;) free_case(&sweep[d][ki][ni][mi]); /* mi 0 owns w: last */
    sweep_ready = false;
}

/* The sweep on one instance. The variants (other options) skip M = 16 and
 * 128: M only changes the primitive's run-time dimension, which the default
 * instance covers. */
static void matmul_all_dtypes(void *ctx, bool every_m) {
    sweep_prepare();
    for (size_t d = 0; d < N_WEIGHT_DTYPES; d++)
        for (size_t ki = 0; ki < SWEEP_KS; ki++)
            for (size_t ni = 0; ni < SWEEP_NS; ni++)
                for (size_t mi = 0; mi < SWEEP_MS; mi++) {
                    int64_t m = sweep_ms[mi];
                    if (!every_m && (m == 16 || m == 128)) continue;
                    if (check_case(ctx, &sweep[d][ki][ni][mi])) return; /* one report per instance */
                }
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                      */

static void test_matmul_matches_reference_every_dtype(void) { matmul_all_dtypes(onednn->ctx, true); }

/* The sweep on an extra instance with options (VT_OK from its init asked). */
static void sweep_instance(const char *options) {
    void *ctx = onednn_instance(options);
    if (!ctx) return;
    matmul_all_dtypes(ctx, false);
    onednn->table->shutdown(ctx);
}

/* Tiles of 16 rows (16 KiB budget): many tiles, runs of tiles per thread. */
static void test_matmul_many_small_tiles(void) { sweep_instance("tile_kib=16"); }

/* A layer-sized case: K=1024, N=3072 (a qwen3-0.6B ffn), M=33. */
static void test_matmul_model_sized(void) {
    compare_matmul(onednn->ctx, VT_Q4_K, 1024, 3072, 33, 7);
    compare_matmul(onednn->ctx, VT_Q6_K, 1024, 1000, 17, 8);
}

/* Repeated calls with changing M reuse the cached primitives (runtime M) and
 * stay correct. */
static void test_matmul_repeated_shapes(void) {
    for (int rep = 0; rep < 3; rep++) {
        compare_matmul(onednn->ctx, VT_Q8_0, 256, 200, 128, 50 + (uint64_t)rep);
        compare_matmul(onednn->ctx, VT_Q8_0, 256, 200, 3, 60 + (uint64_t)rep);
    }
}

/* What supports() accepts and declines: it must be exact. */
static void test_supports_is_exact(void) {
    void *ctx = onednn->ctx;
    int (*supports)(void *, const vt_node *) = onednn->table->supports;
    for (size_t d = 0; d < N_WEIGHT_DTYPES; d++) {
        int32_t dt = weight_dtypes[d];
        int64_t k = 256;
        vt_node node = matmul_node(VT_PHASE_PREFILL, NULL, dt, NULL, NULL, VT_F32, k, 64, 128);
        CU_ASSERT_EQUAL(supports(ctx, &node), 1);
        /* F16/BF16 results: declined, the runtime inserts a convert. */
        node.dst = tensor2(NULL, VT_F16, 64, 128);
        CU_ASSERT_EQUAL(supports(ctx, &node), 0);
        node.dst = tensor2(NULL, VT_BF16, 64, 128);
        CU_ASSERT_EQUAL(supports(ctx, &node), 0);
        /* Decode is declined (measured slower, see matmul.c). */
        node = matmul_node(VT_PHASE_DECODE, NULL, dt, NULL, NULL, VT_F32, k, 64, 1);
        CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    }
    /* Activations must be F32. */
    vt_node node = matmul_node(VT_PHASE_PREFILL, NULL, VT_Q4_K, NULL, NULL, VT_F32, 256, 64, 8);
    node.src[1] = tensor2(NULL, VT_F16, 256, 8);
    CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    /* Non-weight dtypes as weights. */
    node = matmul_node(VT_PHASE_PREFILL, NULL, VT_I32, NULL, NULL, VT_F32, 256, 64, 8);
    CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    /* Mismatched shapes: X's K, Y's N, Y's M. */
    node = matmul_node(VT_PHASE_PREFILL, NULL, VT_Q8_0, NULL, NULL, VT_F32, 256, 64, 8);
    node.src[1].ne[0] = 224;
    CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    node = matmul_node(VT_PHASE_PREFILL, NULL, VT_Q8_0, NULL, NULL, VT_F32, 256, 64, 8);
    node.dst.ne[0] = 63;
    CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    node = matmul_node(VT_PHASE_PREFILL, NULL, VT_Q8_0, NULL, NULL, VT_F32, 256, 64, 8);
    node.dst.ne[1] = 9;
    CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    /* A batch dimension is not part of the convention. */
    node = matmul_node(VT_PHASE_PREFILL, NULL, VT_F32, NULL, NULL, VT_F32, 256, 64, 8);
    node.src[0].ndim = 3;
    node.src[0].ne[2] = 2;
    CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    /* Wrong operand count. */
    node = matmul_node(VT_PHASE_PREFILL, NULL, VT_F32, NULL, NULL, VT_F32, 256, 64, 8);
    node.n_src = 3;
    CU_ASSERT_EQUAL(supports(ctx, &node), 0);
    /* Only MATMUL is implemented; the rest are NULL (runtime falls back). */
    for (int op = 0; op < VT_OP_COUNT; op++)
        CU_ASSERT_EQUAL(vt_backend_op(onednn->table, op) != NULL, op == VT_OP_MATMUL);
}

/* precision=f32: every dtype in f32, on every machine (the default where
 * the CPU has no bf16 in hardware). */
static void test_matmul_precision_f32(void) {
    void *ctx = onednn_instance("precision=f32");
    if (!ctx) return;
    CU_ASSERT_PTR_NOT_NULL(strstr(onednn->table->isa(ctx), "(f32 matmul "));
    matmul_all_dtypes(ctx, false);
    compare_matmul(ctx, VT_Q4_K, 1024, 3072, 33, 7);
    onednn->table->shutdown(ctx);
}

/* precision=bf16 where oneDNN runs bf16 in hardware (AVX-512 BF16, AMX):
 * quantized and BF16 weights multiply in bf16, within the bf16 bound;
 * elsewhere init refuses it, naming what oneDNN
 * found, and the bf16 checks are skipped. */
static void test_matmul_precision_bf16(void) {
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = host->n_threads, .options = "precision=bf16"};
    void *ctx = NULL;
    char err[256] = "";
    const vt_status st = onednn->table->init(host, &config, &ctx, err, sizeof err);
    if (st == VT_ERR_UNSUPPORTED) {
        CU_ASSERT_PTR_NULL(ctx);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "instruction-set limit is"));
        char why[320];
        snprintf(why, sizeof why, "onednn's bf16 matmul cannot run here: %s", err);
        vt_test_skip(why);
        return;
    }
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(onednn->table->isa(ctx), "(bf16 matmul "));
    CU_ASSERT(multiplies_in_bf16(ctx, VT_Q4_K) && multiplies_in_bf16(ctx, VT_BF16));
    CU_ASSERT(!multiplies_in_bf16(ctx, VT_F16) && !multiplies_in_bf16(ctx, VT_F32));
    matmul_all_dtypes(ctx, false);
    compare_matmul(ctx, VT_Q4_K, 1024, 3072, 33, 7);
    compare_matmul(ctx, VT_BF16, 1024, 600, 17, 9);
    onednn->table->shutdown(ctx);
}

/* decode=1 accepts decode nodes, and M=1 is computed right, every weight
 * dtype (K = 768: whole blocks of 32 and 256; N past the 64-row blocks with
 * a tail). */
static void test_decode_option(void) {
    void *ctx = onednn_instance("decode=1");
    if (!ctx) return;
    vt_node node = matmul_node(VT_PHASE_DECODE, NULL, VT_Q4_K, NULL, NULL, VT_F32, 256, 64, 1);
    CU_ASSERT_EQUAL(onednn->table->supports(ctx, &node), 1);
    compare_matmul(ctx, VT_Q4_K, 256, 300, 1, 99);
    for (size_t d = 0; d < N_WEIGHT_DTYPES; d++) compare_matmul(ctx, weight_dtypes[d], 768, 131, 1, 100 + d);
    onednn->table->shutdown(ctx);
}

/* ------------------------------------------------------------------------ */
/* precision=int8                                                            */

/* An int8 instance, or NULL with the skip said where oneDNN has no integer
 * matmul that is not its reference kernel (init refuses, naming its limit). */
static void *int8_instance(const char *options) {
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = host->n_threads, .options = options};
    void *ctx = NULL;
    char err[256] = "";
    const vt_status st = onednn->table->init(host, &config, &ctx, err, sizeof err);
    if (st == VT_ERR_UNSUPPORTED) {
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "no int8 matmul here"));
        char why[320];
        snprintf(why, sizeof why, "onednn's int8 matmul cannot run here: %s", err);
        vt_test_skip(why);
        return NULL;
    }
    CU_ASSERT_EQUAL(st, VT_OK);
    if (st != VT_OK) fprintf(stderr, "onednn init(%s): %s\n", options, err);
    return st == VT_OK ? ctx : NULL;
}

/* The offer the engine makes for a prefill matmul weight its fallback
 * decodes from too. */
static vt_weight_offer matmul_offer(vt_tensor t) {
    return (vt_weight_offer){.struct_size = sizeof(vt_weight_offer), .name = "test.int8.w", .tensor = t,
                             .ops = 1u << VT_OP_MATMUL, .phases = 1u << VT_PHASE_PREFILL, .shared = 1};
}

/* ctx's int8 copy of the K x N weight w (offered as the engine offers a
 * shared prefill weight); fails the test if it makes none. */
static vt_prepared_weight prepare_int8(void *ctx, void *w, int32_t dtype, int64_t k, int64_t n) {
    vt_weight_offer offer = matmul_offer(tensor2(w, dtype, k, n));
    vt_prepared_weight got = {0};
    char why[256] = "";
    CU_ASSERT_EQUAL_FATAL(onednn->table->prepare_weight(ctx, &offer, &got, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got.data);
    return got;
}

/* y (M x N) = x (M x K) times the prepared copy, as a prefill node reads it. */
static void run_prepared(void *ctx, void *copy, int32_t dtype, const float *x, float *y, int64_t k, int64_t n,
                         int64_t m) {
    vt_node node = matmul_node(VT_PHASE_PREFILL, copy, dtype, (void *)x, y, VT_F32, k, n, m);
    node.prepared = 1u;
    CU_ASSERT_FATAL(onednn->table->supports(ctx, &node) == 1);
    CU_ASSERT_EQUAL_FATAL(onednn->table->matmul(ctx, &node), VT_OK);
}

static const int32_t int8_dtypes[] = {VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};

/* One weight prepared as int8 against the reference at every M of ms:
 * within the rounding bound per element, and each row's result the same
 * bits whatever the other rows of the call (M = 1 calls row by row).
 *
 * The bound. Row m of x is rounded to sx qx with sx = max|x_m| / 127, each
 * value within sx / 2; row n of w to sw qw likewise (sw = max|w_n| / 127).
 * The integer sum of qx qw is exact, so
 *   |y - x . w| <= (sx / 2) sum|w| + (sw / 2) sum|x| + K sx sw / 4
 * plus the float steps: the int32 sum converted (2^-24 relative) and two
 * multiplies, and the reference's own rounding, all within 1e-5 sum|x||w|.
 * A wrong slice, row or block is off by O(|x||w|) of a block, far above. */
static int check_int8_weight(void *ctx, int32_t dtype, int64_t k, int64_t n, const int64_t *ms, int n_ms,
                             uint64_t seed) {
    float *w_f32 = malloc(sizeof(float) * (size_t)(k * n));
    double *w_norm = malloc(sizeof(double) * (size_t)n);
    CU_ASSERT_FATAL(w_f32 && w_norm);
    uint8_t *w = make_weight(dtype, k, n, &seed, w_f32, w_norm);
    const vt_prepared_weight got = prepare_int8(ctx, w, dtype, k, n);
    CU_ASSERT(got.bytes >= (size_t)(k * n)); /* a byte per weight, and the scales */
    double *w_abs = calloc((size_t)n, sizeof(double)), *sw = calloc((size_t)n, sizeof(double));
    CU_ASSERT_FATAL(w_abs && sw);
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < k; i++) {
            const double a = fabs(w_f32[r * k + i]);
            w_abs[r] += a;
            sw[r] = fmax(sw[r], a / 127.0);
        }
    int bad = 0;
    for (int mi = 0; mi < n_ms; mi++) {
        const int64_t m = ms[mi];
        matmul_case c;
        prepare_case(&c, dtype, k, n, m, w, false, w_norm, &seed);
        float *y = malloc(sizeof(float) * (size_t)(n * m + GUARD)), *y1 = malloc(sizeof(float) * (size_t)n);
        CU_ASSERT_FATAL(y && y1);
        for (int64_t i = 0; i < n * m + GUARD; i++) y[i] = GUARD_VALUE;
        run_prepared(ctx, got.data, dtype, c.x, y, k, n, m);
        for (int64_t row = 0; row < m; row++) {
            double x_abs = 0, sx = 0;
            for (int64_t i = 0; i < k; i++) {
                x_abs += fabs(c.x[row * k + i]);
                sx = fmax(sx, fabs(c.x[row * k + i]) / 127.0);
            }
            for (int64_t j = 0; j < n; j++) {
                const double got_v = y[row * n + j], want = c.y_ref[row * n + j];
                const double bound = sx / 2 * w_abs[j] + sw[j] / 2 * x_abs + (double)k * sx * sw[j] / 4 +
                                     1e-5 * c.mag[row * n + j];
                if (!(fabs(got_v - want) <= bound)) {
                    if (bad < 3)
                        fprintf(stderr, "\n  int8 %s K=%lld N=%lld M=%lld: y[%lld][%lld] = %.9g, reference %.9g, bound %.3g",
                                vt_dtype_name(dtype), (long long)k, (long long)n, (long long)m, (long long)row,
                                (long long)j, got_v, want, bound);
                    bad++;
                }
            }
            /* the same row alone: the same bits */
            run_prepared(ctx, got.data, dtype, c.x + row * k, y1, k, n, 1);
            if (memcmp(y1, y + row * n, sizeof(float) * (size_t)n) != 0) bad++;
        }
        int overrun = 0;
        for (int i = 0; i < GUARD; i++) overrun += y[n * m + i] != GUARD_VALUE;
        CU_ASSERT_EQUAL(overrun, 0);
        bad += overrun;
        free(y), free(y1);
        free_case(&c);
    }
    CU_ASSERT_EQUAL(bad, 0);
    onednn->table->release_weight(ctx, got.data);
    free(w_abs), free(sw), free(w_f32), free(w_norm), free(w);
    return bad;
}

/* Every quantized dtype, at shapes around oneDNN's 64-row blocks and the
 * per-thread slices (N = 5: one short slice; 130: two slices with a tail;
 * 300), K of one block and several, M from decode's 1 to a prefill's 128. */
static void test_int8_matches_reference(void) {
    void *ctx = int8_instance("precision=int8");
    if (!ctx) return;
    CU_ASSERT_PTR_NOT_NULL(strstr(onednn->table->isa(ctx), "(int8 matmul "));
    CU_ASSERT(vt_isa_line_multiplies_int8(onednn->table->isa(ctx)));
    static const int64_t ms[] = {1, 2, 16, 17, 33, 128};
    static const int64_t ks[] = {256, 1024}, ns[] = {5, 130, 300};
    uint64_t seed = 11;
    for (size_t d = 0; d < sizeof int8_dtypes / sizeof *int8_dtypes; d++)
        for (size_t ki = 0; ki < 2; ki++)
            for (size_t ni = 0; ni < 3; ni++)
                if (check_int8_weight(ctx, int8_dtypes[d], ks[ki], ns[ni], ms, 6, seed++)) {
                    onednn->table->shutdown(ctx);
                    return; /* one report */
                }
    check_int8_weight(ctx, VT_Q4_K, 1024, 3072, ms + 3, 2, 99); /* a qwen3-0.6B ffn */
    /* blocks of 32 with K not a multiple of 256: one row of three blocks,
     * 25, and 129 */
    static const int64_t ks32[] = {96, 800, 4128};
    for (size_t ki = 0; ki < 3; ki++)
        if (check_int8_weight(ctx, VT_Q8_0, ks32[ki], 37, ms, 6, 200 + ki) ||
            check_int8_weight(ctx, VT_Q4_0, ks32[ki], 37, ms, 6, 210 + ki))
            break; /* one report */
    onednn->table->shutdown(ctx);
}

/* On the int8 grid the int8 path is exact: Q8_0 weights whose every block
 * holds a +-127 under one scale d (so the row's int8 values are the file's
 * own, scale d), activation rows whose values are sx times integers with
 * a +-127 (their own int8 values, scale sx), and the result is
 * sx d sum qx qw up to float rounding. Whatever the bound above allows
 * (the zero point's row sums, a slice's offset, a scale applied to the
 * wrong row), an error of one unit of sx d shows here. Values all
 * positive, so a sum of the weights that is wrong does not cancel. */
static void test_int8_exact_on_grid(void) {
    void *ctx = int8_instance("precision=int8");
    if (!ctx) return;
    const int64_t k = 256, n = 130, m = 17;
    const float d = 1.0f / 64, sx = 1.0f / 32;
    float *wf = malloc(sizeof(float) * (size_t)(k * n)), *x = malloc(sizeof(float) * (size_t)(k * m));
    float *y = malloc(sizeof(float) * (size_t)(n * m));
    const size_t row_bytes = vt_row_size(VT_Q8_0, k);
    uint8_t *w = malloc(row_bytes * (size_t)n);
    CU_ASSERT_FATAL(wf && x && y && w);
    uint64_t seed = 21;
    for (int64_t i = 0; i < k * n; i++) {
        const int q = i % 32 == 0 ? 127 : (int)((next_uniform(&seed) + 1.0f) * 63.5f);
        wf[i] = d * (float)q;
    }
    for (int64_t r = 0; r < n; r++) CU_ASSERT_FATAL(vt_from_f32(VT_Q8_0, wf + r * k, w + (size_t)r * row_bytes, k) == VT_OK);
    for (int64_t i = 0; i < k * m; i++) {
        const int q = i % k == 3 ? 127 : (int)((next_uniform(&seed) + 1.0f) * 63.5f);
        x[i] = sx * (float)q;
    }
    const vt_prepared_weight got = prepare_int8(ctx, w, VT_Q8_0, k, n);
    run_prepared(ctx, got.data, VT_Q8_0, x, y, k, n, m);
    int bad = 0;
    for (int64_t row = 0; row < m; row++)
        for (int64_t j = 0; j < n; j++) {
            double want = 0;
            for (int64_t i = 0; i < k; i++) want += (double)x[row * k + i] * wf[j * k + i];
            /* the int32 sum converted (2^-24) and two multiplies: 3 roundings */
            if (!(fabs(y[row * n + j] - want) <= 4e-7 * fabs(want))) {
                if (bad < 3) fprintf(stderr, "\n  grid y[%lld][%lld] = %.9g, exact %.9g", (long long)row, (long long)j, y[row * n + j], want);
                bad++;
            }
        }
    CU_ASSERT_EQUAL(bad, 0);
    onednn->table->release_weight(ctx, got.data);
    onednn->table->shutdown(ctx);
    free(wf), free(x), free(y), free(w);
}

/* The int8 path computes exactly what it specifies, bit for bit: each row
 * of weights and of activations rounded to q = lrintf(v * (127 / max|v|))
 * (to nearest, ties to even), the integer sum of qx qw, then
 * ((float)sum * (max|w| / 127)) * (max|x| / 127). Values off any grid, so a
 * float path (the tile path, or a sum in f32) gives other bits. */
static void test_int8_bits_as_specified(void) {
    void *ctx = int8_instance("precision=int8");
    if (!ctx) return;
    const int64_t k = 512, n = 200, m = 17;
    uint64_t seed = 31;
    float *w_f32 = malloc(sizeof(float) * (size_t)(k * n)), *x = malloc(sizeof(float) * (size_t)(k * m));
    double *w_norm = malloc(sizeof(double) * (size_t)n);
    float *y = malloc(sizeof(float) * (size_t)(n * m)), *want = malloc(sizeof(float) * (size_t)(n * m));
    int *qw = malloc(sizeof(int) * (size_t)(k * n)), *qx = malloc(sizeof(int) * (size_t)(k * m));
    float *sw = malloc(sizeof(float) * (size_t)n), *sx = malloc(sizeof(float) * (size_t)m);
    CU_ASSERT_FATAL(w_f32 && x && w_norm && y && want && qw && qx && sw && sx);
    uint8_t *w = make_weight(VT_Q4_K, k, n, &seed, w_f32, w_norm); /* w_f32: its values, dequantized */
    for (int64_t i = 0; i < k * m; i++) x[i] = next_uniform(&seed) * (1.0f + (float)(i % 7));
    /* the specification, row by row */
    const float *rows[2] = {w_f32, x};
    int *q[2] = {qw, qx};
    float *scale[2] = {sw, sx};
    const int64_t count[2] = {n, m};
    for (int side = 0; side < 2; side++)
        for (int64_t r = 0; r < count[side]; r++) {
            const float *v = rows[side] + r * k;
            float amax = 0;
            for (int64_t i = 0; i < k; i++) amax = fabsf(v[i]) > amax ? fabsf(v[i]) : amax;
            const float inv = 127.0f / amax;
            for (int64_t i = 0; i < k; i++) q[side][r * k + i] = (int)lrintf(v[i] * inv);
            scale[side][r] = amax / 127.0f;
        }
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++) {
            int32_t sum = 0;
            for (int64_t i = 0; i < k; i++) sum += qx[r * k + i] * qw[j * k + i];
            want[r * n + j] = (float)sum * sw[j] * sx[r];
        }
    const vt_prepared_weight got = prepare_int8(ctx, w, VT_Q4_K, k, n);
    run_prepared(ctx, got.data, VT_Q4_K, x, y, k, n, m);
    int differ = 0;
    for (int64_t i = 0; i < n * m; i++) differ += memcmp(&y[i], &want[i], sizeof(float)) != 0;
    if (differ) fprintf(stderr, "\n  %d of %lld results differ from the specification", differ, (long long)(n * m));
    CU_ASSERT_EQUAL(differ, 0);
    onednn->table->release_weight(ctx, got.data);
    onednn->table->shutdown(ctx);
    free(w_f32), free(x), free(w_norm), free(y), free(want), free(qw), free(qx), free(sw), free(sx), free(w);
}

/* Many prompt lengths: a primitive per (slice, M) is cached, and the cache
 * is emptied when it would pass its bound; a call never loses the
 * primitives it holds (a one-slice and a two-slice weight alternate over
 * 150 values of M, past the bound), and every result is still right. */
static void test_int8_many_lengths(void) {
    void *ctx = int8_instance("precision=int8");
    if (!ctx) return;
    const int64_t k = 256, n1 = 5, n2 = 300, m_max = 150;
    uint64_t seed = 41;
    float *w_f32 = malloc(sizeof(float) * (size_t)(k * n2));
    double *w_norm = malloc(sizeof(double) * (size_t)n2);
    float *x = malloc(sizeof(float) * (size_t)(k * m_max)), *y = malloc(sizeof(float) * (size_t)(n2 * m_max));
    float *y1 = malloc(sizeof(float) * (size_t)n2);
    CU_ASSERT_FATAL(w_f32 && w_norm && x && y && y1);
    uint8_t *w1 = make_weight(VT_Q8_0, k, n1, &seed, w_f32, w_norm), *w2 = make_weight(VT_Q8_0, k, n2, &seed, w_f32, w_norm);
    for (int64_t i = 0; i < k * m_max; i++) x[i] = next_uniform(&seed);
    const vt_prepared_weight g1 = prepare_int8(ctx, w1, VT_Q8_0, k, n1), g2 = prepare_int8(ctx, w2, VT_Q8_0, k, n2);
    int bad = 0;
    for (int64_t m = 1; m <= m_max; m++) {
        run_prepared(ctx, g1.data, VT_Q8_0, x, y, k, n1, m);
        run_prepared(ctx, g2.data, VT_Q8_0, x, y, k, n2, m);
        /* its last row equals that row alone (the M = 1 primitive, rebuilt or cached) */
        run_prepared(ctx, g2.data, VT_Q8_0, x + (m - 1) * k, y1, k, n2, 1);
        bad += memcmp(y1, y + (m - 1) * n2, sizeof(float) * (size_t)n2) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    onednn->table->release_weight(ctx, g1.data);
    onednn->table->release_weight(ctx, g2.data);
    onednn->table->shutdown(ctx);
    free(w_f32), free(w_norm), free(x), free(y), free(y1), free(w1), free(w2);
}

/* What precision=int8 prepares: quantized matmul weights only. F32, F16
 * and BF16 weights, weights no matmul reads, and every offer under the
 * other precisions are declined (no copy, no bytes), and a declined weight
 * multiplies on the tile path. Decode stays declined (the fallback
 * decodes from the file's smaller layout). */
static void test_int8_declines(void) {
    void *ctx = int8_instance("precision=int8");
    if (!ctx) return;
    const int64_t k = 256, n = 64;
    float *buf = calloc((size_t)(k * n), sizeof(float));
    CU_ASSERT_FATAL(buf != NULL);
    static const int32_t kept_float[] = {VT_F32, VT_F16, VT_BF16};
    char why[256];
    for (size_t i = 0; i < 3; i++) {
        vt_weight_offer offer = matmul_offer(tensor2(buf, kept_float[i], k, n));
        vt_prepared_weight got = {0};
        CU_ASSERT_EQUAL(onednn->table->prepare_weight(ctx, &offer, &got, why, sizeof why), VT_OK);
        CU_ASSERT_PTR_NULL(got.data);
        CU_ASSERT_EQUAL(got.bytes, 0);
    }
    vt_weight_offer norm = matmul_offer(tensor2(buf, VT_Q8_0, k, n));
    norm.ops = 1u << VT_OP_RMS_NORM;
    vt_prepared_weight got = {0};
    CU_ASSERT_EQUAL(onednn->table->prepare_weight(ctx, &norm, &got, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NULL(got.data);
    vt_node dec = matmul_node(VT_PHASE_DECODE, NULL, VT_Q4_K, NULL, NULL, VT_F32, k, n, 1);
    CU_ASSERT_EQUAL(onednn->table->supports(ctx, &dec), 0);
    compare_matmul(ctx, VT_Q4_K, 256, 300, 17, 5); /* unprepared: the tile path */
    onednn->table->shutdown(ctx);
    /* the default precision keeps no copies */
    vt_weight_offer q = matmul_offer(tensor2(buf, VT_Q8_0, k, n));
    memset(&got, 0, sizeof got);
    CU_ASSERT_EQUAL(onednn->table->prepare_weight(onednn->ctx, &q, &got, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NULL(got.data);
    free(buf);
}

/* int8_max_mib bounds what the copies keep: a weight past it is declined
 * (it runs on the file's bytes), a smaller one still fits. */
static void test_int8_budget(void) {
    void *ctx = int8_instance("precision=int8,int8_max_mib=1");
    if (!ctx) return;
    uint64_t seed = 3;
    const int64_t k = 1024, big_n = 1536, small_n = 64; /* 1.5 MiB of int8, then 64 KiB */
    float *w_f32 = malloc(sizeof(float) * (size_t)(k * big_n));
    double *w_norm = malloc(sizeof(double) * (size_t)big_n);
    CU_ASSERT_FATAL(w_f32 && w_norm);
    uint8_t *big = make_weight(VT_Q8_0, k, big_n, &seed, w_f32, w_norm);
    uint8_t *small = make_weight(VT_Q8_0, k, small_n, &seed, w_f32, w_norm);
    char why[256];
    vt_weight_offer offer = matmul_offer(tensor2(big, VT_Q8_0, k, big_n));
    vt_prepared_weight got = {0};
    CU_ASSERT_EQUAL(onednn->table->prepare_weight(ctx, &offer, &got, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NULL(got.data);
    offer = matmul_offer(tensor2(small, VT_Q8_0, k, small_n));
    CU_ASSERT_EQUAL(onednn->table->prepare_weight(ctx, &offer, &got, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NOT_NULL(got.data);
    if (got.data) onednn->table->release_weight(ctx, got.data);
    onednn->table->shutdown(ctx);
    free(big), free(small), free(w_f32), free(w_norm);
}

/* Bad options fail init with a reason; nothing leaks (ASan). */
static void test_bad_options_fail_init(void) {
    static const char *const bad[] = {"threading=tbb", "tile_kib=1", "tile_kib=abc", "colour=blue", "decode",
                                      "dequant=fast", "precision=f16", "precision=",  "int8_max_mib=-1",
                                      "int8_max_mib=1x", "int8_max_mib="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vt_backend_config config = {.struct_size = sizeof config, .n_threads = host->n_threads, .options = bad[i]};
        void *ctx = NULL;
        char err[256] = "";
        CU_ASSERT_EQUAL(onednn->table->init(host, &config, &ctx, err, sizeof err), VT_ERR_INVALID);
        CU_ASSERT_PTR_NULL(ctx);
        CU_ASSERT(err[0] != '\0');
    }
    /* oneDNN's own threading is refused saying why and what to use */
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = host->n_threads, .options = "threading=omp"};
    void *ctx = NULL;
    char err[256] = "";
    CU_ASSERT_EQUAL(onednn->table->init(host, &config, &ctx, err, sizeof err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NULL(ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "threading=tiles"));
}

/* A failed host allocation gives VT_ERR_NOMEM, and the next call succeeds. */
static void test_alloc_failure_is_nomem(void) {
    void *ctx = onednn_instance(""); /* fresh: no buffers allocated yet */
    if (!ctx) return;
    int64_t k = 256, n = 64, m = 4;
    size_t row_bytes = vt_row_size(VT_Q8_0, k);
    uint8_t *w = calloc((size_t)n, row_bytes);
    float *x = calloc((size_t)(k * m), sizeof(float));
    float *y = calloc((size_t)(n * m), sizeof(float));
    vt_node node = matmul_node(VT_PHASE_PREFILL, w, VT_Q8_0, x, y, VT_F32, k, n, m);
    vt_host_fail_alloc_after(1);
    CU_ASSERT_EQUAL(onednn->table->matmul(ctx, &node), VT_ERR_NOMEM);
    vt_host_fail_alloc_after(0);
    CU_ASSERT_EQUAL(onednn->table->matmul(ctx, &node), VT_OK);
    onednn->table->shutdown(ctx);
    free(w);
    free(x);
    free(y);
}


/* Every row of one set of activations gets the same bits whatever the
 * call's M (1..40, and sizes past oneDNN's M blocking) as in one call of
 * 600: which kernel oneDNN sums a row with depends on M, and matmul.c's
 * call sizes must hide that (batch invariance). The first failing M is
 * reported. */
static int rows_same_bits_every_m(void *ctx, int32_t dtype, int64_t k, int64_t n) {
    uint64_t seed = 5;
    float *w_f32 = malloc(sizeof(float) * (size_t)(k * n));
    double *w_norm = malloc(sizeof(double) * (size_t)n);
    CU_ASSERT_FATAL(w_f32 && w_norm);
    uint8_t *w = make_weight(dtype, k, n, &seed, w_f32, w_norm);
    enum { M_ALL = 600 };
    float *x = malloc(sizeof(float) * (size_t)(k * M_ALL)), *y_all = malloc(sizeof(float) * (size_t)(n * M_ALL)),
          *y = malloc(sizeof(float) * (size_t)(n * M_ALL));
    CU_ASSERT_FATAL(x && y_all && y);
    for (int64_t i = 0; i < k * M_ALL; i++) x[i] = next_uniform(&seed);
    vt_node node = matmul_node(VT_PHASE_PREFILL, w, dtype, x, y_all, VT_F32, k, n, M_ALL);
    CU_ASSERT_EQUAL_FATAL(onednn->table->matmul(ctx, &node), VT_OK);
    static const int64_t past_40[] = {61, 145, 151, 159, 173, 225, 257, 376, 558};
    int64_t first_bad = 0;
    for (int i = 0; i < 40 + (int)(sizeof past_40 / sizeof *past_40) && !first_bad; i++) {
        const int64_t m = i < 40 ? i + 1 : past_40[i - 40];
        node = matmul_node(VT_PHASE_PREFILL, w, dtype, x, y, VT_F32, k, n, m);
        CU_ASSERT_EQUAL_FATAL(onednn->table->matmul(ctx, &node), VT_OK);
        if (memcmp(y, y_all, sizeof(float) * (size_t)(n * m)) != 0) first_bad = m;
    }
    if (first_bad)
        fprintf(stderr, "\n  %s K=%lld N=%lld: rows of a call of M=%lld differ from the same rows at M=%d",
                vt_dtype_name(dtype), (long long)k, (long long)n, (long long)first_bad, M_ALL);
    CU_ASSERT_EQUAL(first_bad, 0);
    free(x), free(y_all), free(y), free(w), free(w_f32), free(w_norm);
    return first_bad != 0;
}

/* Run with ONEDNN_MAX_CPU_ISA=AVX2 (ctest's test_onednn_ops_avx2), the
 * backend runs oneDNN's AVX2 kernels: said so, or that run would repeat
 * the default one unnoticed. */
static void test_isa_limit_asked_for_runs(void) {
    const char *isa = onednn->table->isa(onednn->ctx);
    CU_ASSERT(strncmp(isa, "avx2 ", 5) == 0);
    if (strncmp(isa, "avx2 ", 5) != 0) printf("\n  isa line: %s", isa);
}

/* F32 weights (oneDNN's f32 gemm in place) and quantized ones (bf16 where
 * the CPU has it, else f32), on the default instance and precision=f32; an
 * odd short K too. */
static void test_rows_independent_of_m(void) {
    rows_same_bits_every_m(onednn->ctx, VT_F32, 7, 5);
    rows_same_bits_every_m(onednn->ctx, VT_F32, 1024, 128);
    rows_same_bits_every_m(onednn->ctx, VT_Q8_0, 1024, 256);
    void *f32 = onednn_instance("precision=f32");
    if (!f32) return;
    rows_same_bits_every_m(f32, VT_Q4_K, 1024, 256);
    onednn->table->shutdown(f32);
}

int main(void) {
    if (!vt_test_onednn_expected()) return 77; /* not built: every test here needs it */
    static CU_TestInfo tests[] = {
        {"supports() is exact", test_supports_is_exact},
        {"matmul matches reference, every weight dtype", test_matmul_matches_reference_every_dtype},
        {"matmul with many small tiles", test_matmul_many_small_tiles},
        {"matmul at a model's layer size", test_matmul_model_sized},
        {"matmul reuses cached primitives across M", test_matmul_repeated_shapes},
        {"a row's result does not depend on M (batch invariance)", test_rows_independent_of_m},
        {"precision=f32: every dtype in f32", test_matmul_precision_f32},
        {"precision=bf16: quantized and BF16 weights in bf16 where the CPU has it", test_matmul_precision_bf16},
        {"decode=1 accepts and computes M=1", test_decode_option},
        {"precision=int8: prepared quantized weights within the rounding bound, rows independent of M",
         test_int8_matches_reference},
        {"precision=int8: exact on the int8 grid", test_int8_exact_on_grid},
        {"precision=int8: the specified rounding and integer sums, bit for bit", test_int8_bits_as_specified},
        {"precision=int8: many prompt lengths past the primitive cache's bound", test_int8_many_lengths},
        {"precision=int8: float weights, non-matmul weights and decode declined", test_int8_declines},
        {"precision=int8: int8_max_mib bounds the copies", test_int8_budget},
        {"bad options fail init", test_bad_options_fail_init},
        {"alloc failure gives VT_ERR_NOMEM", test_alloc_failure_is_nomem},
        {"ONEDNN_MAX_CPU_ISA=AVX2 runs oneDNN's AVX2 kernels", test_isa_limit_asked_for_runs}, /* its run only */
        CU_TEST_INFO_NULL,
    };
    const char *limit = getenv("ONEDNN_MAX_CPU_ISA");
    if (!limit || strcmp(limit, "AVX2") != 0) { /* the default run: that case is not there */
        size_t n = sizeof tests / sizeof *tests;
        tests[n - 2] = tests[n - 1];
    }
    vt_test_add_suite("onednn ops", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
