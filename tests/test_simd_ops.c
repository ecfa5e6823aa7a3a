/* test_simd_ops.c — the simd backend against the reference backend, op by
 * op and dtype by dtype, on shapes chosen to hit the kernels' edges: N not a
 * multiple of 8 (and odd, for decode's pairs of weight rows), K of one block,
 * M = 1, 2, 3, 5, 7, 17 (prefill kernels take activation rows 8 at a time,
 * float-weight ones 4 at a time: with the M = 6 of the narrow-dst test these
 * cover tiles of every height), GQA ratios 1/2/4/8, sequences crossing cache
 * blocks, non-contiguous block tables, head dims with scalar tails.
 *
 * Both backends load through core/runtime/registry.h from the build tree (the test
 * harness). Each comparison is element by element with a bound derived for
 * that element (see the tolerance helpers), not one loose global epsilon.
 * Every node is first checked against simd's supports() in the phase it
 * runs in: the plan for --backend simd must place no node elsewhere. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"
#include "host.h"
#include "op_cases.h"
#include "quant.h"
#include "util.h"
#include "vt/vt_cpu.h"

static vt_harness *harness;

/* VT_TEST_SIMD_ISA=avx2 (ctest's test_simd_ops_avx2) runs every case on
 * simd's avx2 tier: on a CPU with a higher tier, test_simd_ops alone would
 * never hold the avx2 kernels to reference element by element. */
static const char *forced_isa(void) {
    const char *v = getenv("VT_TEST_SIMD_ISA");
    return v && *v ? v : NULL;
}

static int suite_init(void) {
    char options[64] = "";
    if (forced_isa()) snprintf(options, sizeof options, "simd.isa=%s\n", forced_isa());
    harness = vt_harness_open_with(2, options[0] ? options : NULL);
    if (!harness) return 1;
    if (!vt_harness_backend(harness, "reference")) {
        fprintf(stderr, "test_simd_ops: the reference backend is not loaded\n");
        return 1;
    }
    return 0;
}

static int suite_cleanup(void) {
    vt_harness_close(harness);
    return 0;
}

/* The simd backend must be loaded wherever it is built and the CPU has
 * AVX2/FMA/F16C (asked of cpuid in tests/util.c, independently of the
 * backend's own probe); elsewhere the test is skipped. */
static int simd_available(void) {
    /* forced to avx2 where that is the CPU's own tier: test_simd_ops runs it */
    const char *missing = vt_test_simd_avx512_missing();
    if (forced_isa() && strcmp(forced_isa(), "avx2") == 0 && missing && vt_test_simd_expected()) {
        char why[160];
        snprintf(why, sizeof why, "simd's avx2 tier is this CPU's own (it lacks %s): test_simd_ops runs it", missing);
        vt_test_skip(why);
        return 0;
    }
    const vt_backend_entry *simd = vt_harness_backend(harness, "simd");
    if (simd && forced_isa()) {
        char isa[VT_BACKEND_ISA_MAX];
        CU_ASSERT_STRING_EQUAL(vt_backend_isa(simd, isa, sizeof isa), forced_isa()); /* the tier asked for runs */
    }
    if (simd) return 1;
    if (vt_test_simd_expected()) CU_FAIL("simd backend not loaded on a CPU with AVX2/FMA/F16C");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Running and comparing                                                      */

static const int32_t float_dtypes[] = {VT_F32, VT_F16, VT_BF16};
static const int32_t weight_dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};

/* One unit in the last place of a narrow output dtype at magnitude |v|
 * (0 for f32): simd and reference may round f32 results that differ in their
 * last bits to neighbouring values of a narrower dtype, one ulp apart. */
static double narrow_ulp(int32_t dtype, double v) {
    if (dtype != VT_F16 && dtype != VT_BF16) return 0.0;
    const int mant_bits = dtype == VT_F16 ? 10 : 7, min_exp = dtype == VT_F16 ? -14 : -126;
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    if (e - 1 < min_exp) e = min_exp + 1; /* subnormals: fixed spacing */
    return ldexp(1.0, e - 1 - mant_bits);
}

typedef struct outputs {
    float *simd, *ref; /* the op's output(s) as f32, concatenated for two outputs */
    int64_t n;
    vt_status simd_status, ref_status;
} outputs;

/* The weight dtypes simd's prepare hook must take (a MATMUL-only 2-D weight
 * of whole blocks). */
static int simd_prepares(int32_t dtype) {
    return dtype == VT_Q4_K || dtype == VT_Q5_K || dtype == VT_Q6_K || dtype == VT_Q4_0 || dtype == VT_Q8_0;
}

/* When set, run_both gives simd its matmul weight as an engine does: offered
 * to simd's prepare hook first, run on the copy with the prepared bit set,
 * released after (a dtype simd declines runs on the file's bytes). */
static int via_hook;

/* Offer node->src[0] to simd's prepare hook as the engine offers a matmul
 * weight; on a copy, point the node at it and set the bit. Returns the copy
 * (NULL: declined) and keeps the file's pointer in *file_data. */
static void *prepare_src0(vt_node *node, void **file_data) {
    const vt_backend_entry *simd = vt_harness_backend(harness, "simd");
    vt_weight_offer offer = {.struct_size = sizeof offer, .name = "test.matmul.src0", .tensor = node->src[0],
                             .ops = 1u << node->op,
                             .phases = (1u << VT_PHASE_PREFILL) | (1u << VT_PHASE_DECODE)};
    vt_prepared_weight out = {0};
    char why[256] = "";
    CU_ASSERT_EQUAL_FATAL(vt_backend_prepare_weight(simd, &offer, &out, why, sizeof why), VT_OK);
    *file_data = node->src[0].data;
    if (out.data) {
        CU_ASSERT(out.bytes >= vt_harness_nbytes(&node->src[0]));
        node->src[0].data = out.data;
        node->prepared = 1u;
    }
    return out.data;
}

static void release_src0(vt_node *node, void *copy, void *file_data) {
    if (copy) vt_backend_release_weight(vt_harness_backend(harness, "simd"), copy);
    node->src[0].data = file_data;
    node->prepared = 0;
}

/* Run copies of node on simd and reference; fetch every output as f32. */
static outputs run_both(const vt_node *node) {
    outputs o = {0};
    CU_ASSERT(vt_harness_accepts(harness, "simd", node));
    vt_node a = vt_harness_node_copy(node), b = vt_harness_node_copy(node);
    void *file_data = NULL, *copy = NULL;
    const bool offered = via_hook && (a.op == VT_OP_MATMUL || a.op == VT_OP_MOE_MATMUL);
    if (offered) {
        copy = prepare_src0(&a, &file_data);
        /* the dtypes simd lays out for itself: a decline is a regression */
        if (simd_prepares(a.src[0].dtype)) CU_ASSERT_PTR_NOT_NULL(copy);
    }
    o.simd_status = vt_harness_run(harness, "simd", &a);
    if (offered) release_src0(&a, copy, file_data);
    o.ref_status = vt_harness_run(harness, "reference", &b);
    CU_ASSERT_EQUAL(o.simd_status, VT_OK);
    CU_ASSERT_EQUAL(o.ref_status, VT_OK);
    vt_tensor *oa[2], *ob[2];
    int n_out = vt_op_case_outputs(&a, oa);
    vt_op_case_outputs(&b, ob);
    for (int i = 0; i < n_out; i++) o.n += vt_harness_nelements(oa[i]);
    o.simd = malloc((size_t)o.n * sizeof(float));
    o.ref = malloc((size_t)o.n * sizeof(float));
    int64_t at = 0;
    for (int i = 0; i < n_out; i++) {
        float *fa = vt_harness_to_f32(oa[i]), *fb = vt_harness_to_f32(ob[i]);
        int64_t n = vt_harness_nelements(oa[i]);
        memcpy(o.simd + at, fa, (size_t)n * sizeof(float));
        memcpy(o.ref + at, fb, (size_t)n * sizeof(float));
        free(fa);
        free(fb);
        at += n;
    }
    vt_harness_node_free(&a);
    vt_harness_node_free(&b);
    return o;
}

static void outputs_free(outputs *o) {
    free(o->simd);
    free(o->ref);
}

/* Assert |simd[i] - ref[i]| <= tol[i] for every element (tol NULL: exact,
 * scalar_tol used for all when >= 0). Prints the worst offender. */
static void expect_close(const char *what, const outputs *o, const double *tol, double scalar_tol) {
    int64_t bad = 0, worst = -1;
    double worst_ratio = 0.0;
    for (int64_t i = 0; i < o->n; i++) {
        const double t = tol ? tol[i] : scalar_tol;
        const double diff = fabs((double)o->simd[i] - (double)o->ref[i]);
        if (!(diff <= t)) {
            bad++;
            const double ratio = t > 0 ? diff / t : INFINITY;
            if (worst < 0 || ratio > worst_ratio || isnan(diff)) worst = i, worst_ratio = ratio;
        }
    }
    if (getenv("VT_TEST_VERBOSE")) { /* how close to its bound each comparison runs */
        double r = 0.0;
        for (int64_t i = 0; i < o->n; i++) {
            const double t = tol ? tol[i] : scalar_tol, diff = fabs((double)o->simd[i] - (double)o->ref[i]);
            if (t > 0 && diff / t > r) r = diff / t;
        }
        printf("\n  %s: max error / tolerance = %.3g", what, r);
    }
    if (bad) {
        printf("\n  %s: %lld of %lld elements out of tolerance; worst [%lld] simd %.9g ref %.9g tol %.3g\n", what,
               (long long)bad, (long long)o->n, (long long)worst, (double)o->simd[worst], (double)o->ref[worst],
               tol ? tol[worst] : scalar_tol);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* ------------------------------------------------------------------------ */
/* MATMUL                                                                     */

/* Activation block length simd quantizes to for a weight dtype (0: f32). */
static int64_t act_block(int32_t w_dtype) {
    switch (w_dtype) {
    case VT_Q8_0: case VT_Q4_0: return 32;
    case VT_Q4_K: case VT_Q5_K: case VT_Q6_K: return 256;
    default: return 0;
    }
}

/* Move activations onto simd's 8-bit grid: per block, d = max|x| / 127 and
 * x = d * round(x / d), with d at f16 precision for the blocks of 32 (simd
 * keeps a Q8_0 activation block's scale as f16, as the format stores it).
 * Quantizing such values again reproduces the same integers and (to an ulp)
 * the same d, so simd and reference then multiply the same numbers and differ
 * only by float rounding: this makes the comparison tight enough to catch a
 * wrong scale on a single sub-block. */
static void snap_to_grid(float *x, int64_t K, int64_t M, int64_t block) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < K; b += block) {
            float *xb = x + m * K + b, amax = 0.0f;
            for (int64_t i = 0; i < block; i++) amax = fmaxf(amax, fabsf(xb[i]));
            float d = amax / 127.0f;
            if (block == 32) d = vt_fp16_to_f32(vt_f32_to_fp16(d));
            for (int64_t i = 0; i < block; i++) xb[i] = d > 0 ? d * nearbyintf(xb[i] / d) : 0.0f;
        }
}

/* Whether simd multiplies BF16 weights in bf16 here (its avx512 tier on a
 * CPU with AVX-512 BF16; its isa line says so). */
static bool simd_bf16_matmul(void) {
    char isa[VT_BACKEND_ISA_MAX];
    const vt_backend_entry *simd = vt_harness_backend(harness, "simd");
    return simd && vt_isa_line_multiplies_bf16(vt_backend_isa(simd, isa, sizeof isa));
}

/* How far simd's w . x (K values; w of w_dtype widened to f32, the row of
 * output element (m, n); x the activation row m) may be from reference's;
 * snapped: x already on its 8-bit grid. With A = sum_k |w_nk| |x_mk|:
 *  - float rounding: the kernels sum in f32, per block (integer dot products
 *    are exact) or per 8-lane FMA step (float weights), then across blocks:
 *    at most (steps + 8) roundings of relative size FLT_EPSILON, each bounded
 *    by A; the reference also rounds each dequantized weight once to f32
 *    (GGML's dequantization, d*sc*q - dmin*m, can lose 2 ulp of the larger
 *    term), covered by the 8 extra steps.
 *  - activation quantization (quantized weights, raw activations only): each
 *    x_mk moves by at most half a step, max|x of its block| / 254, so the
 *    product moves by at most E = sum_k |w_nk| amax(block of x_mk) / 254.
 *    For blocks of 32 the scale is then rounded to f16 (relative 2^-11), which
 *    moves each dequantized x_mk by at most (|x_mk| + amax/254) 2^-11: a
 *    further (A + E) 2^-11. This worst case is rigorous; the typical error is
 *    ~sqrt(K) smaller.
 *  - BF16 weights multiplied in bf16 (simd_bf16_matmul): each x_mk is
 *    rounded to 8 significant bits, |error| <= 2^-8 |x_mk|, so E = A 2^-8;
 *    the products are exact and each lane adds two per step (K / 16 steps
 *    and a 16-lane sum). With grid activations (already bf16 values) E = 0:
 *    then the check is as tight as for the FMA kernels.
 *  - the output dtype's rounding: one ulp (see narrow_ulp). */
static double dot_tolerance(int32_t w_dtype, const float *w, const float *x, int64_t K, int snapped) {
    const int64_t block = act_block(w_dtype);
    const bool in_bf16 = w_dtype == VT_BF16 && simd_bf16_matmul();
    const double steps = block ? (double)(K / block) : in_bf16 ? (double)K / 16.0 + 16.0 : (double)K / 8.0;
    double A = 0.0, E = 0.0;
    for (int64_t k = 0; k < K; k++) A += fabs((double)w[k] * x[k]);
    if (block && !snapped)
        for (int64_t b = 0; b < K; b += block) {
            double amax = 0.0, wsum = 0.0;
            for (int64_t i = 0; i < block; i++) {
                amax = fmax(amax, fabs((double)x[b + i]));
                wsum += fabs((double)w[b + i]);
            }
            E += wsum * amax / 254.0;
        }
    if (block == 32 && !snapped) E += (A + E) / 2048.0;
    if (in_bf16 && !snapped) E += A / 256.0;
    return (steps + 8.0) * FLT_EPSILON * A + E;
}

/* Run one matmul and check every output element: within dot_tolerance and
 * one ulp of the output dtype (narrow_ulp). */
static void check_matmul(int32_t w_dtype, int32_t y_dtype, int64_t K, int64_t N, int64_t M, int phase, int snapped,
                         uint64_t seed) {
    char what[160];
    snprintf(what, sizeof what, "matmul %s->%s K=%lld N=%lld M=%lld %s%s", vt_dtype_name(w_dtype),
             vt_dtype_name(y_dtype), (long long)K, (long long)N, (long long)M, phase ? "decode" : "prefill",
             snapped ? " (grid activations)" : "");
    vt_node node = vt_harness_node(VT_OP_MATMUL, phase);
    vt_harness_set_src(&node, 0, vt_harness_weight(w_dtype, K, N, seed));
    vt_tensor x = vt_harness_random(VT_F32, 2, (const int64_t[]){K, M}, seed + 1, -1.0f, 1.0f);
    const int64_t block = act_block(w_dtype);
    const bool in_bf16 = w_dtype == VT_BF16 && simd_bf16_matmul();
    float *xf = x.data;
    if (M > 2) /* a row whose first block is all zero: d = 0 must give exact zeros */
        for (int64_t i = 0; i < (block ? block : 8) && i < K; i++) xf[2 * K + i] = 0.0f;
    if (snapped && block) snap_to_grid(xf, K, M, block);
    if (snapped && in_bf16)
        for (int64_t i = 0; i < K * M; i++) xf[i] = vt_bf16_to_f32(vt_f32_to_bf16(xf[i]));
    vt_harness_set_src(&node, 1, x);
    node.dst = vt_harness_zeros(y_dtype, 2, (const int64_t[]){N, M});

    float *w = vt_harness_to_f32(&node.src[0]);
    double *tol = malloc((size_t)(N * M) * sizeof(double));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) tol[m * N + n] = dot_tolerance(w_dtype, w + n * K, xf + m * K, K, snapped);
    outputs o = run_both(&node);
    for (int64_t i = 0; i < N * M; i++) tol[i] += narrow_ulp(y_dtype, fmax(fabs(o.ref[i]), fabs(o.simd[i])));
    if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close(what, &o, tol, 0);
    outputs_free(&o);
    free(tol);
    free(w);
    vt_harness_node_free(&node);
}

/* Batch invariance: a row's product does not depend on the other rows of
 * its call. The engine's batched decode runs M = (sequences) rows through the
 * tiles M > 1 takes, a sequence alone runs M = 1 through decode's paired-row
 * kernel. For the quantized dtypes each row's activation is quantized on its
 * own and both kernels sum a row's blocks (exact integer dot products) in the
 * same order; for F32/F16/BF16 weights every tile sums each output's f32
 * products in one order (matmul_float.c). So the results are equal bit for
 * bit — what makes a sequence's tokens independent of what shares its step.
 * Every weight dtype, several M (the few-sequence pair tiles up to
 * SIMD_SMALL_M = 4, or SIMD_PAIR_ZMM_ROWS = 8 for the avx512 tier's Q4_K and
 * Q6_K on the file's layout, prefill tiles beyond, every remainder of their
 * row groups), an odd N (a row left over from the pairs), K with a tail past the
 * 8-lane steps for the float dtypes. */
static void test_matmul_rows_independent_of_m(void) {
    if (!simd_available()) return;
    const vt_backend_entry *simd = vt_harness_backend(harness, "simd");
    static const int64_t Ms[] = {2, 3, 4, 5, 6, 7, 8, 13, 16, 17};
    const int64_t N = 37;
    uint64_t seed = 9000;
    int checked = 0, differing = 0;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++) {
        const int32_t wt = weight_dtypes[d];
        const int64_t K = vt_dtype_is_float(wt) ? 515 : 512;
        for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
            const int64_t M = Ms[mi];
            vt_node all = vt_harness_node(VT_OP_MATMUL, VT_PHASE_DECODE);
            vt_harness_set_src(&all, 0, vt_harness_weight(wt, K, N, seed++));
            vt_harness_set_src(&all, 1, vt_harness_random(VT_F32, 2, (const int64_t[]){K, M}, seed++, -1.0f, 1.0f));
            all.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, M});
            CU_ASSERT_EQUAL_FATAL(simd->table->matmul(simd->ctx, &all), VT_OK);
            for (int64_t m = 0; m < M; m++) {
                vt_node one = vt_harness_node(VT_OP_MATMUL, VT_PHASE_DECODE);
                vt_harness_set_src(&one, 0, all.src[0]);
                vt_tensor row = vt_harness_from_f32(VT_F32, 2, (const int64_t[]){K, 1}, (const float *)all.src[1].data + m * K);
                vt_harness_set_src(&one, 1, row);
                one.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, 1});
                CU_ASSERT_EQUAL_FATAL(simd->table->matmul(simd->ctx, &one), VT_OK);
                const float *alone = one.dst.data, *batched = (const float *)all.dst.data + m * N;
                if (memcmp(alone, batched, (size_t)N * sizeof(float)) != 0) {
                    printf("\n  %s M=%lld: row %lld differs from the same row alone", vt_dtype_name(wt), (long long)M,
                           (long long)m);
                    differing++;
                }
                checked++;
                one.src[0] = (vt_tensor){0}; /* owned by `all` */
                vt_harness_node_free(&one);
            }
            vt_harness_node_free(&all);
        }
    }
    printf("\n  %d rows of batched matmuls compared with each row alone, %d differ", checked, differing);
    CU_ASSERT(checked > 0);
    CU_ASSERT_EQUAL(differing, 0);
}

static int64_t min_k(int32_t w_dtype) {
    const int64_t b = act_block(w_dtype);
    return b ? b : 8;
}

/* Every weight dtype, K of one block, N below and across the 8-row lane
 * width and the kernels' tiles, every activation-row remainder. */
static void test_matmul_small_shapes(void) {
    if (!simd_available()) return;
    static const int64_t Ms[] = {1, 2, 3, 5, 7, 17};
    static const int64_t Ns[] = {1, 7, 37};
    uint64_t seed = 100;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++) {
        const int32_t wt = weight_dtypes[d];
        for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
                const int phase = Ms[mi] == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL;
                check_matmul(wt, VT_F32, min_k(wt), Ns[ni], Ms[mi], phase, 1, seed++);
                check_matmul(wt, VT_F32, min_k(wt), Ns[ni], Ms[mi], phase, 0, seed++);
            }
    }
}

/* Several blocks per row, more rows than one L1 tile, all weight dtypes,
 * with the activation grid (tight) and raw activations (quantization bound). */
static void test_matmul_multi_block(void) {
    if (!simd_available()) return;
    uint64_t seed = 500;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++) {
        const int32_t wt = weight_dtypes[d];
        check_matmul(wt, VT_F32, 1024, 67, 1, VT_PHASE_DECODE, 1, seed++);
        check_matmul(wt, VT_F32, 1024, 67, 1, VT_PHASE_DECODE, 0, seed++);
        check_matmul(wt, VT_F32, 768, 131, 5, VT_PHASE_PREFILL, 1, seed++);
        check_matmul(wt, VT_F32, 512, 300, 17, VT_PHASE_PREFILL, 0, seed++);
        /* decode of many rows: chunks of 126 rows shared out between the
         * threads, each read as two half-chunk streams, the last chunk (119
         * rows) with an odd row out */
        check_matmul(wt, VT_F32, 256, 1001, 1, VT_PHASE_DECODE, 0, seed++);
    }
    /* float weights of a K that is not a multiple of 8 (scalar tails) */
    for (size_t d = 0; d < 3; d++) {
        check_matmul(float_dtypes[d], VT_F32, 37, 9, 3, VT_PHASE_PREFILL, 0, seed++);
        check_matmul(float_dtypes[d], VT_F32, 1, 5, 1, VT_PHASE_DECODE, 0, seed++);
    }
}

/* dst F16 and BF16 (the KV-cache negotiation may ask matmul to emit them). */
static void test_matmul_narrow_dst(void) {
    if (!simd_available()) return;
    uint64_t seed = 900;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++)
        for (int y = 1; y < 3; y++) {
            check_matmul(weight_dtypes[d], float_dtypes[y], 512, 19, 1, VT_PHASE_DECODE, 1, seed++);
            check_matmul(weight_dtypes[d], float_dtypes[y], 512, 19, 6, VT_PHASE_PREFILL, 1, seed++);
        }
}

/* The prepared path (ABI 1.2 hook): every weight dtype through the hook as
 * the engine runs it (those simd declines run as before), against the
 * reference with the same derived tolerance: N below, across and not a
 * multiple of the 8-row groups, every M from 1 to 17 and 128 (decode's
 * paired groups, the few-row tiles, prefill tiles with every remainder),
 * K of 1 to 12 blocks, f32/f16/bf16 outputs. */
static void test_matmul_prepared(void) {
    if (!simd_available()) return;
    via_hook = 1;
    uint64_t seed = 7000;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++) {
        const int32_t wt = weight_dtypes[d];
        for (int64_t M = 1; M <= 17; M++) {
            const int phase = M == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL;
            check_matmul(wt, VT_F32, min_k(wt), M % 2 ? 37 : 7, M, phase, 1, seed++);
            check_matmul(wt, VT_F32, 256 * (1 + M % 3), 19, M, phase, 0, seed++);
        }
        if (act_block(wt) == 32) {
            /* K a multiple of 32 but not of 256, odd N across the 8-row
             * groups: decode, a few rows, prefill */
            check_matmul(wt, VT_F32, 96, 67, 1, VT_PHASE_DECODE, 0, seed++);
            check_matmul(wt, VT_F32, 800, 1001, 1, VT_PHASE_DECODE, 0, seed++);
            check_matmul(wt, VT_F32, 800, 61, 8, VT_PHASE_DECODE, 0, seed++);
            check_matmul(wt, VT_F32, 1056, 131, 128, VT_PHASE_PREFILL, 0, seed++);
            check_matmul(wt, VT_F32, 3072, 67, 128, VT_PHASE_PREFILL, 1, seed++);
            for (int y = 1; y < 3; y++) {
                check_matmul(wt, float_dtypes[y], 160, 19, 1, VT_PHASE_DECODE, 1, seed++);
                check_matmul(wt, float_dtypes[y], 160, 45, 128, VT_PHASE_PREFILL, 1, seed++);
            }
        }
        if (act_block(wt) != 256) continue; /* the K-quants at the model's shapes */
        check_matmul(wt, VT_F32, 3072, 67, 128, VT_PHASE_PREFILL, 0, seed++);
        check_matmul(wt, VT_F32, 1024, 300, 128, VT_PHASE_PREFILL, 1, seed++);
        check_matmul(wt, VT_F32, 3072, 131, 1, VT_PHASE_DECODE, 0, seed++);
        check_matmul(wt, VT_F32, 256, 1001, 1, VT_PHASE_DECODE, 0, seed++);
        check_matmul(wt, VT_F32, 512, 1001, 8, VT_PHASE_DECODE, 0, seed++);
        for (int y = 1; y < 3; y++) {
            check_matmul(wt, float_dtypes[y], 512, 19, 1, VT_PHASE_DECODE, 1, seed++);
            check_matmul(wt, float_dtypes[y], 512, 21, 6, VT_PHASE_PREFILL, 1, seed++);
            check_matmul(wt, float_dtypes[y], 768, 45, 128, VT_PHASE_PREFILL, 1, seed++);
        }
    }
    via_hook = 0;
}

/* ------------------------------------------------------------------------ */
/* MOE_MATMUL, MOE_ROUTE, MOE_COMBINE                                         */

/* The [U][T] expert ids tensor of ids (U per token, T tokens). */
static vt_tensor expert_ids(const int32_t *ids, int64_t U, int64_t T) {
    vt_tensor id = vt_harness_i32(U * T, ids);
    id.ndim = 2;
    id.ne[0] = U, id.ne[1] = T;
    id.nb[1] = (size_t)U * sizeof(int32_t);
    id.nb[2] = id.nb[3] = id.nb[1] * (size_t)T;
    return id;
}

/* MOE_MATMUL on a stack of NE experts (K x N each), U of them per token, T
 * tokens, against reference: each output (token, slot, n) is expert
 * ids[t][u]'s row n times the token's activation row (shared, or the slot's
 * own: per_expert), so it has check_matmul's bound (dot_tolerance) for that
 * weight row and activation row. Expert 0 serves every token but every
 * fifth, which takes expert NE - 1, so at T >= 11 one expert has more rows
 * than the few-row tiles take; the rest are distinct random experts.
 * prepared: the stack offered to simd's prepare hook as the engine offers
 * an expert stack (a decline of the dtypes simd lays out is a failure). */
static void check_moe_matmul(int32_t w_dtype, int64_t K, int64_t N, int64_t NE, int64_t U, int64_t T, int per_expert,
                             int prepared, int snapped, uint64_t seed) {
    char what[200];
    snprintf(what, sizeof what, "moe_matmul %s K=%lld N=%lld NE=%lld U=%lld T=%lld X %s, %s%s", vt_dtype_name(w_dtype),
             (long long)K, (long long)N, (long long)NE, (long long)U, (long long)T,
             per_expert ? "per expert" : "shared", prepared ? "prepared" : "file layout",
             snapped ? " (grid activations)" : "");
    vt_node node = vt_harness_node(VT_OP_MOE_MATMUL, T == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
    vt_tensor w = vt_harness_weight(w_dtype, K, N * NE, seed); /* NE stacked K x N experts */
    w.ndim = 3;
    w.ne[1] = N, w.ne[2] = NE;
    w.nb[2] = w.nb[1] * (size_t)N;
    w.nb[3] = w.nb[2] * (size_t)NE;
    vt_harness_set_src(&node, 0, w);
    const int64_t rows = per_expert ? U * T : T;
    vt_tensor x = per_expert ? vt_harness_random(VT_F32, 3, (const int64_t[]){K, U, T}, seed + 1, -1.0f, 1.0f)
                             : vt_harness_random(VT_F32, 2, (const int64_t[]){K, T}, seed + 1, -1.0f, 1.0f);
    float *xf = x.data;
    if (snapped && act_block(w_dtype)) snap_to_grid(xf, K, rows, act_block(w_dtype));
    if (snapped && w_dtype == VT_BF16 && simd_bf16_matmul())
        for (int64_t i = 0; i < K * rows; i++) xf[i] = vt_bf16_to_f32(vt_f32_to_bf16(xf[i]));
    vt_harness_set_src(&node, 1, x);
    int32_t *ids = malloc((size_t)(U * T) * sizeof *ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    uint64_t rng = seed + 2;
    for (int64_t t = 0; t < T; t++) {
        ids[t * U] = t % 5 == 4 ? (int32_t)NE - 1 : 0;
        for (int64_t u = 1; u < U; u++) {
            bool taken = true;
            while (taken) {
                ids[t * U + u] = (int32_t)(vt_harness_rand_u64(&rng) % (uint64_t)NE);
                taken = false;
                for (int64_t j = 0; j < u; j++) taken = taken || ids[t * U + j] == ids[t * U + u];
            }
        }
    }
    vt_harness_set_src(&node, 2, expert_ids(ids, U, T));
    node.dst = vt_harness_zeros(VT_F32, 3, (const int64_t[]){N, U, T});

    float *wf = vt_harness_to_f32(&node.src[0]);
    double *tol = malloc((size_t)(N * U * T) * sizeof(double));
    CU_ASSERT_FATAL(wf && tol);
    for (int64_t t = 0; t < T; t++)
        for (int64_t u = 0; u < U; u++)
            for (int64_t n = 0; n < N; n++)
                tol[(t * U + u) * N + n] = dot_tolerance(w_dtype, wf + (ids[t * U + u] * N + n) * K,
                                                         xf + (per_expert ? t * U + u : t) * K, K, snapped);
    via_hook = prepared;
    outputs o = run_both(&node);
    via_hook = 0;
    if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close(what, &o, tol, 0);
    outputs_free(&o);
    free(tol);
    free(wf);
    free(ids);
    vt_harness_node_free(&node);
}

/* Every weight dtype, prepared and on the file's layout, activations shared
 * and per expert; decode (T = 1), a few tokens, and prefill with one expert
 * past the few-row tiles; K of several blocks (and past 4096, where the
 * avx512 tier's file-layout kernels change tiles), N with a tail after the
 * row groups. The engine's qwen3moe forward goes through these kernels; the
 * battery of `vt backends --test` holds them only to an error-energy bound. */
static void test_moe_matmul(void) {
    if (!simd_available()) return;
    uint64_t seed = 7600;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++) {
        const int32_t wt = weight_dtypes[d];
        const int64_t K = act_block(wt) == 256 ? 768 : act_block(wt) == 32 ? 800 : 515;
        for (int prepared = 0; prepared < 2; prepared++)
            for (int per_expert = 0; per_expert < 2; per_expert++) {
                check_moe_matmul(wt, K, 37, 6, 2, 1, per_expert, prepared, 0, seed++);
                check_moe_matmul(wt, K, 45, 8, 3, 4, per_expert, prepared, 1, seed++);
                check_moe_matmul(wt, K, 19, 5, 2, 11, per_expert, prepared, per_expert, seed++);
            }
        const int64_t long_k = act_block(wt) == 256 ? 4352 : act_block(wt) == 32 ? 4128 : 4099;
        /* activations on their grid: the bound is then float rounding
         * alone, which a block lost past 4096 would exceed */
        check_moe_matmul(wt, long_k, 13, 4, 2, 9, 0, 0, 1, seed++);
        check_moe_matmul(wt, long_k, 13, 4, 2, 9, 0, 1, 1, seed++);
    }
}

/* Router logits [NE][T] with ties (every fourth value repeats the one
 * before it, and one pair is +0 and -0): MOE_ROUTE's lower-index rule
 * decides them. */
static vt_tensor router_logits(int64_t NE, int64_t T, uint64_t seed) {
    vt_tensor l = vt_harness_random(VT_F32, 2, (const int64_t[]){NE, T}, seed, -4.0f, 4.0f);
    float *v = l.data;
    for (int64_t i = 3; i < NE * T; i += 4) v[i] = v[i - 1];
    if (NE >= 6) v[4] = 0.0f, v[5] = -0.0f;
    return l;
}

/* MOE_ROUTE: each token's U experts, ids equal to reference's (an integer
 * choice: no tolerance), qwen3moe's 128 experts and 8 used among others. */
static void test_moe_route(void) {
    if (!simd_available()) return;
    static const int64_t shapes[][3] = {{128, 8, 1}, {128, 8, 19}, {8, 2, 7}, {6, 4, 3}, {60, 4, 33}};
    uint64_t seed = 7700;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int64_t NE = shapes[i][0], U = shapes[i][1], T = shapes[i][2];
        vt_node node = vt_harness_node(VT_OP_MOE_ROUTE, T == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
        node.params.moe.n_used = (int32_t)U;
        vt_harness_set_src(&node, 0, router_logits(NE, T, seed++));
        node.dst = vt_harness_zeros(VT_I32, 2, (const int64_t[]){U, T});
        char what[96];
        snprintf(what, sizeof what, "moe_route NE=%lld U=%lld T=%lld", (long long)NE, (long long)U, (long long)T);
        outputs o = run_both(&node);
        if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close(what, &o, NULL, 0);
        outputs_free(&o);
        vt_harness_node_free(&node);
    }
}

/* MOE_COMBINE: out[t][n] = sum_u w_u y[t][u][n], the weights a softmax of
 * the chosen (norm_top_k) or of all router logits. Reference weighs in
 * double; simd rounds each w_u to f32 (relative 2^-24) and sums U products
 * with f32 FMAs in u order, each rounding at most 2^-24 of a partial sum,
 * and every partial sum is at most sum_u w_u |y_u| <= max_u |y_u[n]| (the
 * weights sum to at most 1); reference's result is rounded to f32 once
 * more. So |simd - reference| <= (U + 2) FLT_EPSILON max_u |y[t][u][n]|. */
static void test_moe_combine(void) {
    if (!simd_available()) return;
    static const int64_t shapes[][4] = {{1001, 128, 8, 1}, {67, 128, 8, 19}, {37, 8, 2, 7}, {19, 6, 4, 3}};
    uint64_t seed = 7800;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int norm = 0; norm < 2; norm++) {
            const int64_t N = shapes[i][0], NE = shapes[i][1], U = shapes[i][2], T = shapes[i][3];
            vt_node node = vt_harness_node(VT_OP_MOE_COMBINE, T == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
            node.params.moe.n_used = (int32_t)U;
            node.params.moe.norm_top_k = norm;
            vt_tensor y = vt_harness_random(VT_F32, 3, (const int64_t[]){N, U, T}, seed++, -3.0f, 3.0f);
            int32_t *ids = malloc((size_t)(U * T) * sizeof *ids);
            CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
            for (int64_t t = 0; t < T; t++)
                for (int64_t u = 0; u < U; u++) ids[t * U + u] = (int32_t)((t * 7 + u * (NE / U + 1)) % NE);
            vt_tensor id = expert_ids(ids, U, T);
            double *tol = malloc((size_t)(N * T) * sizeof(double));
            CU_ASSERT_PTR_NOT_NULL_FATAL(tol);
            const float *yv = y.data;
            for (int64_t t = 0; t < T; t++)
                for (int64_t n = 0; n < N; n++) {
                    double m = 0.0;
                    for (int64_t u = 0; u < U; u++) m = fmax(m, fabs((double)yv[(t * U + u) * N + n]));
                    tol[t * N + n] = (double)(U + 2) * FLT_EPSILON * m;
                }
            vt_harness_set_src(&node, 0, y);
            vt_harness_set_src(&node, 1, id);
            vt_harness_set_src(&node, 2, router_logits(NE, T, seed++));
            node.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, T});
            char what[112];
            snprintf(what, sizeof what, "moe_combine N=%lld NE=%lld U=%lld T=%lld %s", (long long)N, (long long)NE,
                     (long long)U, (long long)T, norm ? "renormalized" : "softmax");
            outputs o = run_both(&node);
            if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close(what, &o, tol, 0);
            outputs_free(&o);
            free(tol);
            free(ids);
            vt_harness_node_free(&node);
        }
}

/* The isa option: avx2 runs on every machine simd loads on, avx512 where
 * the CPU and OS have AVX-512 F/BW/VL and VNNI and is refused elsewhere
 * with what is missing, anything else is refused with what it takes; a
 * refused instance leaves the others loaded (each registry here is its own). */
static void test_isa_option(void) {
    if (!simd_available()) return;
    const vt_cpu_features f = vt_cpu_detect();
    const bool vnni = f.os_saves_zmm && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni;
    static const struct {
        const char *options;
        int tier; /* 0: refused, 1: avx2, 2: avx512 where the CPU has it */
        const char *why;
    } cases[] = {
        {"simd.isa=avx2\n", 1, NULL},
        {"simd.isa=auto\n", 2, NULL},
        {"simd.isa=avx512\n", 2, "cannot run here"},
        {"simd.isa=sse4\n", 0, "isa=sse4: expected auto, avx2 or avx512"},
        {"simd.frob=1\n", 0, "unknown option 'frob'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vt_harness *h = vt_harness_open_with(2, cases[i].options);
        CU_ASSERT_PTR_NOT_NULL_FATAL(h);
        const vt_backend_entry *simd = vt_harness_backend(h, "simd");
        const bool loads = cases[i].tier == 1 || (cases[i].tier == 2 && (vnni || !cases[i].why));
        CU_ASSERT_EQUAL(simd != NULL, loads);
        CU_ASSERT_PTR_NOT_NULL(vt_harness_backend(h, "reference"));
        char isa[VT_BACKEND_ISA_MAX];
        if (simd)
            CU_ASSERT_STRING_EQUAL(vt_backend_isa(simd, isa, sizeof isa),
                                   cases[i].tier == 2 && vnni ? vt_test_simd_avx512_isa() : "avx2");
        if (!loads) {
            const char *reason = vt_harness_refusal(h, "simd");
            CU_ASSERT(reason && strstr(reason, cases[i].why));
        }
        vt_harness_close(h);
    }
    vt_harness_activate(harness); /* closing h left no pool for direct op calls */
}

/* Batch invariance on the prepared path: a row's product is bit-identical
 * whether it runs alone (decode's paired groups), with a few rows (the
 * streamed tiles), or in a prompt, streamed or in L2 tiles depending on the
 * tier and dtype: 33 rows pass Q8_0's and Q4_0's stream_rows on the
 * AVX-512 VNNI tier, 129 Q6_K's 128 (prepared_groups.c, q6_k_x8_tile.h).
 * One prepared copy serves every call, as in an engine. */
static void test_matmul_prepared_rows_independent_of_m(void) {
    if (!simd_available()) return;
    const vt_backend_entry *simd = vt_harness_backend(harness, "simd");
    static const int64_t Ms[] = {2, 3, 4, 5, 8, 9, 13, 17, 33, 128, 129};
    /* 6 groups of 8 rows (the last a tail of 5) and 7: with an odd count one
     * group has no partner in decode's two streams and takes the
     * single-group tile */
    static const int64_t Ns[] = {45, 53};
    uint64_t seed = 8000;
    int checked = 0, differing = 0, prepared = 0;
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++) {
        const int64_t N = Ns[ni];
        const int32_t wt = weight_dtypes[d];
        if (!act_block(wt)) continue;
        const int64_t K = act_block(wt) == 32 ? 800 : 768; /* blocks of 32: K not a multiple of 256 */
        vt_node all = vt_harness_node(VT_OP_MATMUL, VT_PHASE_DECODE);
        vt_harness_set_src(&all, 0, vt_harness_weight(wt, K, N, seed++));
        void *file_data = NULL, *copy = prepare_src0(&all, &file_data);
        prepared += copy != NULL;
        /* the activation rows every M takes its first rows of, each row's
         * product alone computed once */
        enum { MAX_M = 129 };
        vt_tensor x = vt_harness_random(VT_F32, 2, (const int64_t[]){K, MAX_M}, seed++, -1.0f, 1.0f);
        float *alone = malloc((size_t)(MAX_M * N) * sizeof *alone);
        CU_ASSERT_PTR_NOT_NULL_FATAL(alone);
        all.n_src = 2;
        for (int64_t m = 0; m < MAX_M; m++) {
            all.phase = VT_PHASE_DECODE;
            all.src[1] = vt_harness_from_f32(VT_F32, 2, (const int64_t[]){K, 1}, (const float *)x.data + m * K);
            all.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, 1});
            CU_ASSERT_EQUAL_FATAL(simd->table->matmul(simd->ctx, &all), VT_OK);
            memcpy(alone + m * N, all.dst.data, (size_t)N * sizeof(float));
            vt_harness_tensor_free(&all.src[1]);
            vt_harness_tensor_free(&all.dst);
        }
        for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
            const int64_t M = Ms[mi];
            CU_ASSERT_FATAL(M <= MAX_M);
            all.phase = M > 8 ? VT_PHASE_PREFILL : VT_PHASE_DECODE;
            all.src[1] = vt_harness_from_f32(VT_F32, 2, (const int64_t[]){K, M}, (const float *)x.data);
            all.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, M});
            CU_ASSERT_EQUAL_FATAL(simd->table->matmul(simd->ctx, &all), VT_OK);
            for (int64_t m = 0; m < M; m++) {
                if (memcmp(alone + m * N, (const float *)all.dst.data + m * N, (size_t)N * sizeof(float)) != 0) {
                    printf("\n  prepared %s N=%lld M=%lld: row %lld differs from the same row alone", vt_dtype_name(wt),
                           (long long)N, (long long)M, (long long)m);
                    differing++;
                }
                checked++;
            }
            vt_harness_tensor_free(&all.src[1]);
            vt_harness_tensor_free(&all.dst);
        }
        free(alone);
        vt_harness_tensor_free(&x);
        release_src0(&all, copy, file_data);
        vt_harness_node_free(&all);
    }
    printf("\n  %d rows of prepared batched matmuls compared with each row alone, %d differ", checked, differing);
    CU_ASSERT(prepared >= 10); /* Q4_K, Q5_K, Q6_K, Q4_0, Q8_0 at both N */
    CU_ASSERT(checked > 0);
    CU_ASSERT_EQUAL(differing, 0);
}

/* ------------------------------------------------------------------------ */
/* ATTENTION                                                                  */

/* Every dtype attention reads a cache in. */
static const int32_t cache_dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};

typedef vt_harness_attn_case attn_case;

static vt_node attention_node(const attn_case *c, int32_t kv_dtype, const int32_t *pos, const int32_t *seq,
                              int phase, uint64_t seed) {
    return vt_harness_attention_node(c, kv_dtype, pos, seq, phase, seed);
}

/* Build and check one attention call, tokens' positions given per case.
 *
 * Tolerance: q, k, v are in [-1, 1) (Q8_0 cache values up to 1 + 2^-11, its
 * f16 scale's rounding). simd scores are f32 dot products of D terms (error
 * <= D eps |q||k| <= D eps, times scale) against the reference's double;
 * softmax weights then move by at most 2 * that relative error plus the
 * vector exp's 2e-7; the output, a convex combination of v rows (|v| <= 1),
 * moves by at most that relative amount, plus f32 rounding of the running
 * sums over n positions (n eps).
 *
 * A Q8_0 cache: simd quantizes each query to 16-bit blocks of 32 (scale
 * d = amax / 32767 in f32) for integer dot products with the cached int8
 * blocks; every other operation is as above. So each case runs twice:
 *  - q moved onto that grid first (snap_query): simd quantizing it again
 *    gets the same integers and the same d to an ulp, so simd and reference
 *    multiply the same numbers and the float tolerance above holds; this is
 *    the check that catches a wrong block, scale or row;
 *  - q raw: each q value moves by at most half a step, amax_b / 65534 for
 *    its block b, so a score moves by at most
 *    E = scale * sum_b (amax_b / 65534) * sum_{i in b} |k_i| <= scale * sum_b amax_b * 32 / 65534 * (1 + 2^-11),
 *    its softmax weights relatively by at most e^{2E} - 1, and the output
 *    (|v| <= 1 + 2^-11) by at most that much more: a rigorous bound, with E
 *    taken per case from the largest over its queries (D = 128: E <= 1.8e-4,
 *    tolerance ~3.6e-4; the typical error is ~sqrt(D) smaller).
 *
 * A BF16 cache where simd attends in bf16 (its avx512 tier with AVX-512
 * BF16, kv_bf16_chunk.h): each query is rounded to bf16 and so is each
 * softmax weight before it multiplies a v row. A weight's relative error
 * is at most 2^-8, so the output, sum_i w_i v_i / sum_i p_i with
 * |w_i - p_i| <= 2^-8 p_i and |v| <= 1, moves by at most 2^-8 more; the
 * products are exact and each lane adds two per step, one rounding each
 * as the FMA path's. Each case runs twice again:
 *  - q on the bf16 grid (snap_query_bf16): the rounding of q is exact, and
 *    only the weights' 2^-8 is added: the check that catches a wrong pair,
 *    lane or row;
 *  - q raw: each q value moves by at most 2^-8 |q|, a score by at most
 *    E = scale * 2^-8 * sum |q| (|k| <= 1), the weights relatively by at
 *    most e^{2E} - 1 (typically E ~ 0.022 at D = 128, |q| averaging 1/2;
 *    at most ~0.044). */
static void snap_query_bf16(float *q, int64_t n_values) {
    for (int64_t i = 0; i < n_values; i++) q[i] = vt_bf16_to_f32(vt_f32_to_bf16(q[i]));
}

/* Whether simd attends over a kv_dtype cache at head dim D in bf16 here. */
static bool simd_bf16_attention(int32_t kv_dtype, int64_t D) {
    char isa[VT_BACKEND_ISA_MAX];
    const vt_backend_entry *simd = vt_harness_backend(harness, "simd");
    return simd && vt_test_simd_attends_in_bf16(vt_backend_isa(simd, isa, sizeof isa), kv_dtype, D);
}

static void snap_query(float *q, int64_t n_values) {
    for (int64_t b = 0; b < n_values; b += 32) {
        float amax = 0.0f;
        for (int64_t i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(q[b + i]));
        const float d = amax / 32767.0f;
        for (int64_t i = 0; i < 32; i++) q[b + i] = d > 0 ? d * nearbyintf(q[b + i] / d) : 0.0f;
    }
}

/* check_attention with the sequences' block tables given ([n_seqs][max_blocks];
 * NULL: the harness's, every block a sequence's own). */
static void check_attention_tables(const attn_case *c, int32_t kv_dtype, const int32_t *pos, const int32_t *seq,
                                   int phase, uint64_t seed, const int32_t *tables);

static void check_attention(const attn_case *c, int32_t kv_dtype, const int32_t *pos, const int32_t *seq,
                            int phase, uint64_t seed) {
    check_attention_tables(c, kv_dtype, pos, seq, phase, seed, NULL);
}

/* The harness's attention node with tables replacing its block tables. */
static vt_node attention_node_tables(const attn_case *c, int32_t kv_dtype, const int32_t *pos, const int32_t *seq,
                                     int phase, uint64_t seed, const int32_t *tables) {
    vt_node node = attention_node(c, kv_dtype, pos, seq, phase, seed);
    if (tables) {
        vt_harness_tensor_free(&node.src[3]);
        vt_harness_set_src(&node, 3, vt_harness_block_tables(c->n_seqs, c->max_blocks, tables));
    }
    return node;
}

static void check_attention_tables(const attn_case *c, int32_t kv_dtype, const int32_t *pos, const int32_t *seq,
                                   int phase, uint64_t seed, const int32_t *tables) {
    const bool in_bf16 = simd_bf16_attention(kv_dtype, c->D);
    for (int snapped = kv_dtype == VT_Q8_0 || in_bf16 ? 0 : 1; snapped < 2; snapped++) {
        char what[160];
        snprintf(what, sizeof what, "attention %s%s D=%lld H=%lld KVH=%lld BS=%lld T=%lld", vt_dtype_name(kv_dtype),
                 kv_dtype == VT_Q8_0 ? (snapped ? " (q on the 16-bit grid)" : " (q raw)")
                 : in_bf16           ? (snapped ? " (q on the bf16 grid)" : " (q raw, in bf16)")
                                     : "",
                 (long long)c->D,
                 (long long)c->H, (long long)c->KVH, (long long)c->BS, (long long)c->T);
        vt_node node = attention_node_tables(c, kv_dtype, pos, seq, phase, seed, tables);
        const float scale = node.params.attention.scale;
        float *q = node.src[0].data;
        double quant_err = 0.0; /* E above, the largest over the queries */
        if (kv_dtype == VT_Q8_0 && snapped) {
            snap_query(q, c->D * c->H * c->T);
        } else if (in_bf16 && snapped) {
            snap_query_bf16(q, c->D * c->H * c->T);
        } else if (in_bf16) {
            for (int64_t r = 0; r < c->H * c->T; r++) {
                double sum = 0.0;
                for (int64_t i = 0; i < c->D; i++) sum += fabs((double)q[r * c->D + i]);
                quant_err = fmax(quant_err, sum * 0x1p-8 * scale);
            }
        } else if (kv_dtype == VT_Q8_0) {
            for (int64_t r = 0; r < c->H * c->T; r++) {
                double e = 0.0;
                for (int64_t b = 0; b < c->D; b += 32) {
                    float amax = 0.0f;
                    for (int64_t i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(q[r * c->D + b + i]));
                    e += (double)amax / 65534.0 * 32.0 * (1.0 + 0x1p-11);
                }
                quant_err = fmax(quant_err, e * scale);
            }
        }
        int32_t max_pos = 0;
        for (int64_t t = 0; t < c->T; t++) max_pos = pos[t] > max_pos ? pos[t] : max_pos;
        const double score_err = (double)c->D * FLT_EPSILON * scale;
        const double tol = 2.0 * score_err + 2e-7 + (double)(max_pos + 1 + c->D) * FLT_EPSILON +
                           expm1(2.0 * quant_err) * (1.0 + 0x1p-11) + (in_bf16 ? 0x1p-8 : 0.0);
        outputs o = run_both(&node);
        if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close(what, &o, NULL, tol);
        outputs_free(&o);
        vt_harness_node_free(&node);
    }
}

static void test_attention_decode(void) {
    if (!simd_available()) return;
    static const int64_t ratios[] = {1, 2, 4, 8};
    uint64_t seed = 2000;
    for (size_t k = 0; k < 4; k++)
        for (size_t r = 0; r < 4; r++) {
            /* one sequence at positions crossing several blocks */
            attn_case c = {.D = 128, .H = 8, .KVH = 8 / ratios[r], .BS = 16, .n_blocks = 13, .n_seqs = 1,
                           .max_blocks = 8, .T = 1};
            const int32_t pos[] = {100}, seq[] = {0};
            check_attention(&c, cache_dtypes[k], pos, seq, VT_PHASE_DECODE, seed++);
            /* batched decode: three sequences at different lengths, one
             * inside its first block; every other ratio with a head dim off
             * the vector widths (52: three zmm or six ymm and a 4-wide
             * scalar tail; Q8_0 keeps whole blocks of 32) */
            attn_case b = {.D = r % 2 && cache_dtypes[k] != VT_Q8_0 ? 52 : 64, .H = 16, .KVH = 16 / ratios[r],
                           .BS = 16, .n_blocks = 17, .n_seqs = 3, .max_blocks = 5, .T = 3};
            const int32_t bpos[] = {3, 47, 79}, bseq[] = {2, 0, 1};
            check_attention(&b, cache_dtypes[k], bpos, bseq, VT_PHASE_DECODE, seed++);
        }
}

static void test_attention_prefill(void) {
    if (!simd_available()) return;
    static const int64_t ratios[] = {1, 2, 4, 8};
    uint64_t seed = 3000;
    int32_t pos[40], seq[40];
    for (size_t k = 0; k < 4; k++)
        for (size_t r = 0; r < 4; r++) {
            /* 37 tokens of one sequence from position 0 (causal inside the call) */
            attn_case c = {.D = 128, .H = 8, .KVH = 8 / ratios[r], .BS = 16, .n_blocks = 11, .n_seqs = 1,
                           .max_blocks = 3, .T = 37};
            for (int t = 0; t < 37; t++) pos[t] = t, seq[t] = 0;
            check_attention(&c, cache_dtypes[k], pos, seq, VT_PHASE_PREFILL, seed++);
            /* a continuation chunk at positions 20..39 with block size 5 and
             * head dims off the vector widths: 40 (two zmm and half of one,
             * five ymm) and 36 or 12 (a 4-wide rest after the 8- and 16-wide
             * loops, or only that rest: the scalar tails); for Q8_0, whose
             * head dim is whole blocks of 32, an odd number of blocks */
            const int64_t odd_dims[] = {40, r % 2 ? 12 : 36};
            for (size_t od = 0; od < (cache_dtypes[k] == VT_Q8_0 ? 1u : 2u); od++) {
                attn_case d = {.D = cache_dtypes[k] == VT_Q8_0 ? 96 : odd_dims[od], .H = 8, .KVH = 8 / ratios[r],
                               .BS = 5, .n_blocks = 12, .n_seqs = 2, .max_blocks = 8, .T = 20};
                for (int t = 0; t < 20; t++) pos[t] = 20 + t, seq[t] = 1;
                check_attention(&d, cache_dtypes[k], pos, seq, VT_PHASE_PREFILL, seed++);
            }
            /* two sequences in one call, switching inside a group of 4 query
             * tokens, positions not in order */
            attn_case e = {.D = 64, .H = 8, .KVH = 8 / ratios[r], .BS = 16, .n_blocks = 7, .n_seqs = 2,
                           .max_blocks = 3, .T = 7};
            const int32_t epos[] = {0, 1, 2, 40, 33, 34, 35}, eseq[] = {0, 0, 0, 1, 1, 1, 1};
            check_attention(&e, cache_dtypes[k], epos, eseq, VT_PHASE_PREFILL, seed++);
        }
}

/* Long contexts: simd cuts each query's positions into fixed spans (128
 * positions) with a softmax state each, merged afterwards, and computes a
 * token alone of its sequence span by span on several threads. Contexts
 * shorter than a span, exactly one, one more, and many; one sequence, and
 * eight sequences of different lengths decoding in one call. */
static void test_attention_spans(void) {
    if (!simd_available()) return;
    uint64_t seed = 3200;
    static const int32_t lengths[] = {1, 10, 127, 128, 129, 256, 257, 300};
    for (size_t k = 0; k < 4; k++) {
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            attn_case c = {.D = 128, .H = 16, .KVH = 8, .BS = 16, .n_blocks = 23, .n_seqs = 1, .max_blocks = 19,
                           .T = 1};
            const int32_t pos[] = {lengths[l] - 1}, seq[] = {0};
            check_attention(&c, cache_dtypes[k], pos, seq, VT_PHASE_DECODE, seed++);
        }
        attn_case b = {.D = 64, .H = 8, .KVH = 2, .BS = 16, .n_blocks = 163, .n_seqs = 8, .max_blocks = 20, .T = 8};
        const int32_t bpos[] = {299, 4, 63, 64, 127, 200, 128, 31}, bseq[] = {0, 1, 2, 3, 4, 5, 6, 7};
        check_attention(&b, cache_dtypes[k], bpos, bseq, VT_PHASE_DECODE, seed++);
        /* a prompt chunk crossing span edges beside decode tokens */
        attn_case m = {.D = 64, .H = 8, .KVH = 4, .BS = 16, .n_blocks = 41, .n_seqs = 3, .max_blocks = 13, .T = 12};
        const int32_t mpos[] = {150, 60, 61, 62, 63, 64, 65, 66, 127, 128, 129, 9},
                      mseq[] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2};
        check_attention(&m, cache_dtypes[k], mpos, mseq, VT_PHASE_PREFILL, seed++);
    }
}

/* Runs every token of `all` (a call of c.T tokens) again alone, in decode,
 * and counts the tokens whose output is not bit-identical. */
static int tokens_differing_alone(const attn_case *c, vt_node *all, const int32_t *pos, const int32_t *seq) {
    CU_ASSERT_EQUAL(vt_harness_run(harness, "simd", all), VT_OK);
    const size_t row = (size_t)(c->D * c->H) * sizeof(float);
    int differing = 0;
    for (int64_t t = 0; t < c->T; t++) {
        vt_node one = vt_harness_node_copy(all);
        one.phase = VT_PHASE_DECODE;
        /* q, positions, sequences and output of token t only; caches and tables as in the batch */
        vt_harness_tensor_free(&one.src[0]);
        vt_harness_tensor_free(&one.src[4]);
        vt_harness_tensor_free(&one.src[5]);
        vt_harness_tensor_free(&one.dst);
        vt_harness_set_src(&one, 0, vt_harness_from_f32(VT_F32, 3, (const int64_t[]){c->D, c->H, 1},
                                                        (const float *)all->src[0].data + t * c->D * c->H));
        vt_harness_set_src(&one, 4, vt_harness_i32(1, &pos[t]));
        vt_harness_set_src(&one, 5, vt_harness_i32(1, &seq[t]));
        one.dst = vt_harness_zeros(VT_F32, 3, (const int64_t[]){c->D, c->H, 1});
        CU_ASSERT_EQUAL(vt_harness_run(harness, "simd", &one), VT_OK);
        if (memcmp(one.dst.data, (const char *)all->dst.data + (size_t)t * row, row) != 0) {
            printf("\n  attention %s KVH=%lld: token %lld (position %d) alone differs from the batched call\n",
                   vt_dtype_name(all->src[1].dtype), (long long)c->KVH, (long long)t, (int)pos[t]);
            differing++;
        }
        vt_harness_node_free(&one);
    }
    return differing;
}

/* Batch invariance: a token's attention output does not depend on the other
 * tokens of the call (which sequences, how many, where its group of query
 * tokens starts, whether it is computed as part of a prompt run or alone of
 * its sequence). Each token of a mixed call (several sequences, prefill runs
 * and decode-like singles, positions at block and span edges) is run again
 * alone, in decode, and its output must be bit-identical. */
static void test_attention_rows_independent(void) {
    if (!simd_available()) return;
    static const int64_t ratios[] = {1, 2, 3, 8};
    uint64_t seed = 3500;
    for (size_t k = 0; k < 4; k++)
        for (size_t r = 0; r < 4; r++) {
            /* 24 query heads: G = 3 leaves one query of each token's heads unpaired */
            attn_case c = {.D = 64, .H = 24, .KVH = 24 / ratios[r], .BS = 16, .n_blocks = 11, .n_seqs = 3,
                           .max_blocks = 3, .T = 9};
            const int32_t pos[] = {15, 16, 17, 31, 32, 0, 47, 1, 33}, seq[] = {0, 0, 0, 1, 1, 2, 1, 2, 0};
            vt_node all = attention_node(&c, cache_dtypes[k], pos, seq, VT_PHASE_PREFILL, seed++);
            if (tokens_differing_alone(&c, &all, pos, seq)) CU_FAIL("attention output depends on the batch");
            vt_harness_node_free(&all);
            /* contexts of several spans: prompt runs crossing span edges
             * (128, 256) and single tokens of other sequences */
            attn_case l = {.D = 64, .H = 24, .KVH = 24 / ratios[r], .BS = 16, .n_blocks = 101, .n_seqs = 5,
                           .max_blocks = 20, .T = 16};
            const int32_t lpos[] = {62, 63, 64, 65, 66, 200, 126, 127, 128, 129, 64, 63, 255, 256, 257, 310},
                          lseq[] = {0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 3, 4, 0, 0, 0, 1};
            vt_node many = attention_node(&l, cache_dtypes[k], lpos, lseq, VT_PHASE_PREFILL, seed++);
            if (tokens_differing_alone(&l, &many, lpos, lseq)) CU_FAIL("attention output depends on the batch");
            vt_harness_node_free(&many);
        }
}

/* A NaN in the cache (a broken model's) makes every query's score at that
 * position NaN; which values a max keeps then depends on the order it takes
 * them in, so every path (16 queries' softmax at once, four, one, decode)
 * must take them in the same order: the outputs are still bit-identical
 * prefill against decode. Eight query heads on one kv head, so two tokens
 * make 16 queries. */
static void test_attention_nan_score_same_on_every_path(void);

/* A position a query does not see never reaches its sums, whatever the
 * cache holds there: in a prompt the rows after a token's position are
 * the later tokens' and are read with the chunk, and a BF16 cache's bf16
 * dot products take v rows in pairs of positions (kv_bf16_chunk.h), so a
 * token seeing an odd number of a chunk's positions must not multiply the
 * next row by its zero weight (0 x NaN is NaN). A NaN in v at position 9,
 * then in k at 9: the tokens at positions 0-8 are finite, and every token
 * alone (decode, where position 9 is not read) gives the batch's bits. */
static void test_attention_unseen_rows_stay_out(void) {
    if (!simd_available()) return;
    attn_case c = {.D = 64, .H = 8, .KVH = 1, .BS = 16, .n_blocks = 5, .n_seqs = 1, .max_blocks = 3, .T = 32};
    int32_t pos[32], seq[32];
    for (int t = 0; t < 32; t++) pos[t] = t, seq[t] = 0;
    for (int which = 1; which <= 2; which++) { /* src 1: k, src 2: v */
        vt_node all = attention_node(&c, VT_BF16, pos, seq, VT_PHASE_PREFILL, 4200 + (uint64_t)which);
        const int64_t block0 = 7 % c.n_blocks; /* the harness's table: sequence 0's first block */
        ((uint16_t *)all.src[which].data)[(block0 * c.BS + 9) * c.KVH * c.D + 5] = 0x7FC0; /* a bf16 NaN */
        CU_ASSERT_EQUAL(tokens_differing_alone(&c, &all, pos, seq), 0);
        const float *out = all.dst.data;
        int64_t not_finite = 0;
        for (int64_t i = 0; i < 9 * c.H * c.D; i++) not_finite += !isfinite(out[i]);
        if (not_finite) printf("\n  a NaN at position 9 of %s reached the tokens before it\n", which == 1 ? "k" : "v");
        CU_ASSERT_EQUAL(not_finite, 0);
        vt_harness_node_free(&all);
    }
}

static void test_attention_nan_score_same_on_every_path(void) {
    if (!simd_available()) return;
    attn_case c = {.D = 64, .H = 8, .KVH = 1, .BS = 16, .n_blocks = 5, .n_seqs = 1, .max_blocks = 3, .T = 32};
    int32_t pos[32], seq[32];
    for (int t = 0; t < 32; t++) pos[t] = t, seq[t] = 0;
    vt_node all = attention_node(&c, VT_F32, pos, seq, VT_PHASE_PREFILL, 4100);
    const int64_t block0 = 7 % c.n_blocks; /* the harness's table: sequence 0's first block */
    ((float *)all.src[1].data)[(block0 * c.BS + 8) * c.KVH * c.D + 5] = NAN;
    CU_ASSERT_EQUAL(tokens_differing_alone(&c, &all, pos, seq), 0);
    vt_harness_node_free(&all);
}

/* The same at head dim 128, which decode of 16-bit caches runs through a
 * copy of its kernels with the head dim a constant (attention.c,
 * attend_heads): those must compute a prompt run's numbers too. Query heads
 * per kv head 1, 2 (the qwen3-0.6B shape) and 3 (one query unpaired). */
static void test_attention_rows_independent_d128(void) {
    if (!simd_available()) return;
    static const int64_t kv_heads[] = {6, 3, 2};
    uint64_t seed = 3600;
    for (size_t k = 0; k < 4; k++)
        for (size_t r = 0; r < 3; r++) {
            attn_case c = {.D = 128, .H = 6, .KVH = kv_heads[r], .BS = 16, .n_blocks = 41, .n_seqs = 4,
                           .max_blocks = 10, .T = 12};
            const int32_t pos[] = {62, 63, 64, 65, 66, 150, 126, 127, 128, 129, 17, 30},
                          seq[] = {0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 3, 0};
            vt_node all = attention_node(&c, cache_dtypes[k], pos, seq, VT_PHASE_PREFILL, seed++);
            if (tokens_differing_alone(&c, &all, pos, seq)) CU_FAIL("attention output depends on the batch at D 128");
            vt_harness_node_free(&all);
        }
}

/* A call long enough for prefill tiles of 32 and 64 tokens (the simd
 * backend takes longer tiles while each of its 2 threads keeps 4 items:
 * 6 kv heads give 64, 2 give 32): tiles holding the end of one prompt run,
 * a decode token and the start of another, runs crossing span edges. Every
 * token against itself computed alone, bit for bit. */
static void test_attention_rows_independent_long_tiles(void) {
    if (!simd_available()) return;
    enum { T = 100 };
    int32_t pos[T], seq[T];
    for (int i = 0; i < 70; i++) pos[i] = 90 + i, seq[i] = 0;   /* 90..159: crosses 128 */
    pos[70] = 150, seq[70] = 1;                                  /* a decode token */
    for (int i = 71; i < T; i++) pos[i] = 100 + i - 71, seq[i] = 2; /* 100..128: crosses 128 */
    static const int64_t kv_heads[] = {6, 2};
    uint64_t seed = 3700;
    for (size_t k = 0; k < 4; k++)
        for (size_t r = 0; r < 2; r++) {
            attn_case c = {.D = 128, .H = 6, .KVH = kv_heads[r], .BS = 16, .n_blocks = 41, .n_seqs = 3,
                           .max_blocks = 10, .T = T};
            vt_node all = attention_node(&c, cache_dtypes[k], pos, seq, VT_PHASE_PREFILL, seed++);
            if (tokens_differing_alone(&c, &all, pos, seq)) CU_FAIL("attention output depends on the batch (long tiles)");
            vt_harness_node_free(&all);
        }
}

/* Sequences decoding over blocks they share (a prompt beginning the prefix
 * cache gave them all): simd reads such a span's rows once for every token
 * that sees all of it (shared_decode_item), in groups of at most 16 tokens.
 * Twenty sequences: the first n_share (18 or 7) share blocks 0-15
 * (positions 0-255, two spans), one of them (position 200) seeing only the
 * first span whole and, with 18, one (position 127) ending exactly at its
 * end; sequence 18 shares blocks 0-9 only, diverging inside the second
 * span; the rest share nothing. With 18 sharing, a span's group of 16
 * tokens and the rest give attend_chunk 32 and 6 queries a kv head at G = 2
 * (a quad and a pair); with 7, sequence 18 joins them over the first span
 * (8 tokens: 16 queries, the 16-query softmax) and 6 share the second (12
 * queries, three quads). Every output against reference, and every token
 * against itself computed alone. */
static void test_attention_shared_blocks(void) {
    if (!simd_available()) return;
    enum { SEQS = 20, MAX_BLOCKS = 20, SHARED = 16 };
    static const int64_t heads[][2] = {{16, 8}, {24, 8}, {8, 8}}; /* G = 2, 3, 1 */
    static const int32_t n_shares[] = {18, 7};
    uint64_t seed = 3700;
    for (size_t ns = 0; ns < sizeof n_shares / sizeof *n_shares; ns++) {
        int32_t tables[SEQS * MAX_BLOCKS], pos[SEQS], seq[SEQS];
        /* blocks a sequence does not share are its own, numbered on from SHARED: as few as
         * the call needs, since every token checked alone copies all of them */
        int32_t n_blocks = SHARED;
        for (int32_t s = 0; s < SEQS; s++) {
            for (int32_t b = 0; b < MAX_BLOCKS; b++) {
                const int shares = s < n_shares[ns] ? b < SHARED : s == 18 ? b < 10 : 0;
                tables[s * MAX_BLOCKS + b] = shares ? b : n_blocks++;
            }
            pos[s] = s == 3 ? 200 : s == 7 ? 127 : 256 + (s * 13) % 60;
            seq[s] = (s * 7) % SEQS; /* tokens not in sequence order */
        }
        /* token t is of sequence seq[t]: its position is pos[t]; the second
         * sharing (its groupings) at G = 2 on a 16-bit and the Q8_0 cache, whose
         * score and sum kernels group queries differently (the reference's
         * scalar attention under the sanitizers is most of this test's time) */
        for (size_t k = 0; k < 4; k++) {
            const bool second_sharing_dtype = cache_dtypes[k] == VT_F16 || cache_dtypes[k] == VT_Q8_0;
            const size_t n_heads = ns == 0 ? 3 : second_sharing_dtype ? 1 : 0;
            for (size_t h = 0; h < n_heads; h++) {
                attn_case c = {.D = 128, .H = heads[h][0], .KVH = heads[h][1], .BS = 16, .n_blocks = n_blocks,
                               .n_seqs = SEQS, .max_blocks = MAX_BLOCKS, .T = SEQS};
                check_attention_tables(&c, cache_dtypes[k], pos, seq, VT_PHASE_DECODE, seed, tables);
                vt_node all = attention_node_tables(&c, cache_dtypes[k], pos, seq, VT_PHASE_DECODE, seed++, tables);
                if (tokens_differing_alone(&c, &all, pos, seq))
                    CU_FAIL("attention over shared blocks depends on the batch");
                vt_harness_node_free(&all);
            }
        }
    }
    /* Odd shapes: blocks of 5 and of 48 positions (not dividing a span: a
     * block straddles two), a head dim with a scalar tail, 3 query heads a
     * kv head; three sequences sharing their first 200 positions, at 63
     * (inside the first span), 127 (exactly one span) and 130. So few spans
     * that the kv heads are split between items as well. */
    static const int64_t block_sizes[] = {5, 48};
    for (size_t k = 0; k < 4; k++)
        for (size_t b = 0; b < 2; b++) {
            enum { ODD_SEQS = 3, ODD_MAX_BLOCKS = 28 };
            const int64_t BS = block_sizes[b], shared = 200 / BS + 1;
            int32_t otables[ODD_SEQS * ODD_MAX_BLOCKS];
            const int32_t opos[] = {127, 63, 130}, oseq[] = {1, 2, 0};
            for (int32_t s = 0; s < ODD_SEQS; s++)
                for (int32_t i = 0; i < ODD_MAX_BLOCKS; i++)
                    otables[s * ODD_MAX_BLOCKS + i] = i < shared ? i : (int32_t)shared + s * ODD_MAX_BLOCKS + i;
            /* head dims off the vector widths (see the prefill case): 40, and
             * 20 (a 4-wide scalar tail) with the other block size; a BF16
             * cache's blocks of 5 at 64, a head dim its bf16 dot products
             * take where the CPU has them (kv_bf16_chunk.h) */
            const int64_t D = cache_dtypes[k] == VT_Q8_0 ? 96 : cache_dtypes[k] == VT_BF16 && !b ? 64 : b ? 20 : 40;
            attn_case c = {.D = D, .H = 6, .KVH = 2, .BS = BS,
                           .n_blocks = shared + ODD_SEQS * ODD_MAX_BLOCKS, .n_seqs = ODD_SEQS,
                           .max_blocks = ODD_MAX_BLOCKS, .T = ODD_SEQS};
            check_attention_tables(&c, cache_dtypes[k], opos, oseq, VT_PHASE_DECODE, seed, otables);
            vt_node all = attention_node_tables(&c, cache_dtypes[k], opos, oseq, VT_PHASE_DECODE, seed++, otables);
            if (tokens_differing_alone(&c, &all, opos, oseq))
                CU_FAIL("attention over shared blocks of odd shapes depends on the batch");
            vt_harness_node_free(&all);
        }
}

/* ------------------------------------------------------------------------ */
/* RESHAPE_AND_CACHE                                                          */

/* Every source x cache dtype pair; slots scattered over blocks, one padding
 * slot (-1) that must leave the cache untouched. Conversions round to nearest
 * even in both backends, and a Q8_0 cache (head dim in whole blocks of 32) is
 * quantized by the host's from_f32 in both, so the caches must be identical. */
static void test_reshape_and_cache(void) {
    if (!simd_available()) return;
    const int64_t KVH = 2, BS = 4, B = 6, T = 7;
    const int64_t slots[] = {13, 0, -1, 23, 5, 6, 17};
    uint64_t seed = 4000;
    for (size_t s = 0; s < 3; s++)
        for (size_t c = 0; c < 4; c++)
            for (int phase = 0; phase < 2; phase++) {
                const int64_t t = phase == VT_PHASE_DECODE ? 1 : T, D = cache_dtypes[c] == VT_Q8_0 ? 64 : 24;
                vt_node node = vt_harness_node(VT_OP_RESHAPE_AND_CACHE, phase);
                vt_harness_set_src(&node, 0, vt_harness_random(float_dtypes[s], 3, (const int64_t[]){D, KVH, t}, seed++, -2, 2));
                vt_harness_set_src(&node, 1, vt_harness_random(float_dtypes[s], 3, (const int64_t[]){D, KVH, t}, seed++, -2, 2));
                vt_harness_set_src(&node, 2, vt_harness_cache(cache_dtypes[c], D, KVH, BS, B, seed++));
                vt_harness_set_src(&node, 3, vt_harness_cache(cache_dtypes[c], D, KVH, BS, B, seed++));
                vt_harness_set_src(&node, 4, vt_harness_i64(t, phase == VT_PHASE_DECODE ? slots + 3 : slots));
                outputs o = run_both(&node);
                if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("reshape_and_cache", &o, NULL, 0.0);
                outputs_free(&o);
                vt_harness_node_free(&node);
            }
}

/* ------------------------------------------------------------------------ */
/* RMS_NORM, ROPE, SWIGLU, ADD                                                */

/* Per-element tolerance rel * |ref| + one ulp of the output dtype + abs_floor. */
static double *relative_tol(const outputs *o, double rel, int32_t dtype, double abs_floor) {
    double *tol = malloc((size_t)o->n * sizeof(double));
    for (int64_t i = 0; i < o->n; i++)
        tol[i] = rel * fabs((double)o->ref[i]) + narrow_ulp(dtype, fmax(fabs(o->ref[i]), fabs(o->simd[i]))) + abs_floor;
    return tol;
}

/* simd sums squares in f32 over 16 lanes, then adds the lanes: relative error
 * of the sum <= (D/16 + 4) eps; the output (one sqrt, two products) adds a few
 * eps. Tolerance (D/16 + 8) eps relative, plus the output dtype's ulp. */
static void test_rms_norm(void) {
    if (!simd_available()) return;
    static const int64_t shapes[][2] = {{1024, 1}, {128, 17}, {37, 5}};
    uint64_t seed = 5000;
    for (size_t s = 0; s < 3; s++)
        for (size_t y = 0; y < 3; y++) {
            const int64_t D = shapes[s][0], R = shapes[s][1];
            vt_node node = vt_harness_node(VT_OP_RMS_NORM, R == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
            node.params.rms_norm.eps = 1e-6f;
            vt_harness_set_src(&node, 0, vt_harness_random(VT_F32, 2, (const int64_t[]){D, R}, seed++, -3, 3));
            vt_harness_set_src(&node, 1, vt_harness_random(VT_F32, 1, (const int64_t[]){D}, seed++, -2, 2));
            node.dst = vt_harness_zeros(float_dtypes[y], 2, (const int64_t[]){D, R});
            outputs o = run_both(&node);
            double *tol = relative_tol(&o, ((double)D / 16 + 8) * FLT_EPSILON, float_dtypes[y], 1e-30);
            if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("rms_norm", &o, tol, 0);
            free(tol);
            outputs_free(&o);
            vt_harness_node_free(&node);
        }
}

/* simd computes the angles in double like the reference, rounds cos/sin to
 * f32 and rotates in f32: each output is a0 c - b s with three roundings of
 * terms bounded by max|x| = 1, so |error| <= 4 eps (abs), plus the ulp. */
static void test_rope(void) {
    if (!simd_available()) return;
    static const struct { int64_t D, heads, T; int32_t n_rot, mode; } cases[] = {
        {128, 4, 3, 128, VT_ROPE_NEOX}, {128, 2, 5, 128, VT_ROPE_NORM}, {64, 3, 2, 32, VT_ROPE_NEOX},
        {64, 3, 2, 20, VT_ROPE_NORM},   {36, 2, 1, 36, VT_ROPE_NEOX},   {36, 2, 1, 34, VT_ROPE_NORM}};
    const int32_t positions[] = {0, 1, 4095, 77, 123456, 9}; /* T + 1 entries: cases start at 0 or 1 */
    uint64_t seed = 6000;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t y = 0; y < 3; y++) {
            vt_node node = vt_harness_node(VT_OP_ROPE, cases[c].T == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
            node.params.rope = (vt_rope_params){cases[c].n_rot, cases[c].mode, 1e6f, 1.0f};
            if (c == 1) node.params.rope.freq_base = 10000.0f, node.params.rope.freq_scale = 0.25f;
            vt_harness_set_src(&node, 0, vt_harness_random(VT_F32, 3, (const int64_t[]){cases[c].D, cases[c].heads, cases[c].T}, seed++, -1, 1));
            vt_harness_set_src(&node, 1, vt_harness_i32(cases[c].T, positions + (c % 2)));
            node.dst = vt_harness_zeros(float_dtypes[y], 3, (const int64_t[]){cases[c].D, cases[c].heads, cases[c].T});
            /* with Llama 3.1's frequency factors, 1 to 8 per pair (the same bound: the angles are exact to a double) */
            for (int with_factors = 0; with_factors < 2; with_factors++) {
                if (with_factors) {
                    node.n_src = 3;
                    vt_harness_set_src(&node, 2,
                                       vt_harness_random(VT_F32, 1, (const int64_t[]){cases[c].n_rot / 2}, seed++, 1, 8));
                }
                outputs o = run_both(&node);
                CU_ASSERT(o.simd_status == VT_OK && o.ref_status == VT_OK);
                double *tol = relative_tol(&o, 0.0, float_dtypes[y], 4 * FLT_EPSILON);
                if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("rope", &o, tol, 0);
                free(tol);
                outputs_free(&o);
            }
            vt_harness_node_free(&node);
        }
}

/* simd keeps the last call's cos/sin tables for the next call with the same
 * positions and frequencies (a step's q and k of every layer): a call with
 * other positions, factors or parameters (same counts) must not reuse them,
 * and one that reuses them, on other values and heads, rotates as fresh. */
static void test_rope_tables_follow_their_inputs(void) {
    if (!simd_available()) return;
    const int64_t D = 64, heads = 2, T = 4;
    vt_node node = vt_harness_node(VT_OP_ROPE, VT_PHASE_PREFILL);
    node.params.rope = (vt_rope_params){D, VT_ROPE_NEOX, 1e6f, 1.0f};
    vt_harness_set_src(&node, 0, vt_harness_random(VT_F32, 3, (const int64_t[]){D, heads, T}, 6100, -1, 1));
    const int32_t positions[] = {3, 4, 5, 6};
    vt_harness_set_src(&node, 1, vt_harness_i32(T, positions));
    node.n_src = 3;
    vt_harness_set_src(&node, 2, vt_harness_random(VT_F32, 1, (const int64_t[]){D / 2}, 6101, 1, 8));
    node.dst = vt_harness_zeros(VT_F32, 3, (const int64_t[]){D, heads, T});
    for (int step = 0; step < 6; step++) {
        int32_t *pos = node.src[1].data;
        float *factors = node.src[2].data;
        if (step == 1) pos[2] += 1000;       /* one position moved */
        if (step == 2) factors[5] *= 2.0f;   /* one factor changed */
        if (step == 3) node.params.rope.freq_scale = 0.5f;
        if (step == 4) node.params.rope.mode = VT_ROPE_NORM;
        if (step == 5) { /* the same angles as step 4 (reused) on other values, more heads: k after q */
            vt_harness_tensor_free(&node.src[0]);
            vt_harness_set_src(&node, 0, vt_harness_random(VT_F32, 3, (const int64_t[]){D, 2 * heads, T}, 6102, -1, 1));
            vt_harness_tensor_free(&node.dst);
            node.dst = vt_harness_zeros(VT_F32, 3, (const int64_t[]){D, 2 * heads, T});
        }
        outputs o = run_both(&node);
        double *tol = relative_tol(&o, 0.0, VT_F32, 4 * FLT_EPSILON);
        if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("rope after a change", &o, tol, 0);
        free(tol);
        outputs_free(&o);
    }
    vt_harness_node_free(&node);
}

/* silu(g) u with the vector exp (relative error <= 2e-7), one division and
 * two products: relative error <= 2e-7 + 4 eps; tolerance 1e-6 relative. Gates span [-30, 30] so both tails of the sigmoid
 * are exercised; 4099 elements leave a scalar tail. */
static void test_swiglu(void) {
    if (!simd_available()) return;
    static const int64_t shapes[][2] = {{3072, 1}, {4099, 3}};
    uint64_t seed = 7000;
    for (size_t s = 0; s < 2; s++)
        for (size_t y = 0; y < 1; y++) { /* the ABI's SWIGLU emits f32 only */
            const int64_t F = shapes[s][0], M = shapes[s][1];
            vt_node node = vt_harness_node(VT_OP_SWIGLU, M == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
            vt_harness_set_src(&node, 0, vt_harness_random(VT_F32, 2, (const int64_t[]){F, M}, seed++, -30, 30));
            vt_harness_set_src(&node, 1, vt_harness_random(VT_F32, 2, (const int64_t[]){F, M}, seed++, -2, 2));
            node.dst = vt_harness_zeros(float_dtypes[y], 2, (const int64_t[]){F, M});
            outputs o = run_both(&node);
            double *tol = relative_tol(&o, 1e-6, float_dtypes[y], 1e-30);
            if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("swiglu", &o, tol, 0);
            free(tol);
            outputs_free(&o);
            vt_harness_node_free(&node);
        }
}

/* One f32 addition per element, rounded once (then once more to the output
 * dtype) in both backends: results must be identical. */
static void test_add(void) {
    if (!simd_available()) return;
    uint64_t seed = 8000;
    for (size_t y = 0; y < 3; y++)
        for (int broadcast = 0; broadcast < 2; broadcast++) {
            const int64_t N = 1027, M = 5;
            vt_node node = vt_harness_node(VT_OP_ADD, VT_PHASE_PREFILL);
            vt_harness_set_src(&node, 0, vt_harness_random(VT_F32, 2, (const int64_t[]){N, M}, seed++, -4, 4));
            vt_harness_set_src(&node, 1, vt_harness_random(VT_F32, 2, (const int64_t[]){N, broadcast ? 1 : M}, seed++, -4, 4));
            node.dst = vt_harness_zeros(float_dtypes[y], 2, (const int64_t[]){N, M});
            outputs o = run_both(&node);
            if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("add", &o, NULL, 0.0);
            outputs_free(&o);
            vt_harness_node_free(&node);
        }
}

/* ------------------------------------------------------------------------ */
/* GET_ROWS, CONVERT                                                          */

/* Dequantization is exact in both (the same block formulas in f32; simd
 * uses the host's for quantized tables): identical rows expected. */
static void test_get_rows(void) {
    if (!simd_available()) return;
    const int32_t ids[] = {5, 0, 5, 12, 1};
    uint64_t seed = 9000;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++)
        for (int phase = 0; phase < 2; phase++) {
            const int64_t D = 512, V = 13, M = phase == VT_PHASE_DECODE ? 1 : 5;
            vt_node node = vt_harness_node(VT_OP_GET_ROWS, phase);
            vt_harness_set_src(&node, 0, vt_harness_weight(weight_dtypes[d], D, V, seed++));
            vt_harness_set_src(&node, 1, vt_harness_i32(M, ids + (phase == VT_PHASE_DECODE ? 3 : 0)));
            node.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){D, M});
            outputs o = run_both(&node);
            if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("get_rows", &o, NULL, 0.0);
            outputs_free(&o);
            vt_harness_node_free(&node);
        }
}

/* GET_ROWS on a prepared table (a tied embedding: the output matmul's weight
 * and the token table are one tensor, offered for both ops): where simd
 * takes the table, its rows equal the reference's dequantization bit for
 * bit; the 32-blocks with D a multiple of 32 but not of 256, every row of a
 * tail group included. */
static void test_get_rows_prepared(void) {
    if (!simd_available()) return;
    const vt_backend_entry *simd = vt_harness_backend(harness, "simd");
    const int32_t ids[] = {0, 7, 8, 44, 3, 40, 21};
    const int64_t V = 45, M = sizeof ids / sizeof *ids;
    int taken = 0;
    for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++) {
        const int32_t wt = weight_dtypes[d];
        if (!act_block(wt)) continue;
        const int64_t D = act_block(wt) == 32 ? 800 : 768;
        vt_node node = vt_harness_node(VT_OP_GET_ROWS, VT_PHASE_PREFILL);
        vt_harness_set_src(&node, 0, vt_harness_weight(wt, D, V, 9500 + d));
        vt_harness_set_src(&node, 1, vt_harness_i32(M, ids));
        node.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){D, M});
        vt_node ref = vt_harness_node_copy(&node);
        CU_ASSERT_EQUAL(vt_harness_run(harness, "reference", &ref), VT_OK);
        vt_weight_offer offer = {.struct_size = sizeof offer, .name = "test.token_embd", .tensor = node.src[0],
                                 .ops = (1u << VT_OP_MATMUL) | (1u << VT_OP_GET_ROWS),
                                 .phases = (1u << VT_PHASE_PREFILL) | (1u << VT_PHASE_DECODE)};
        vt_prepared_weight out = {0};
        char why[256] = "";
        CU_ASSERT_EQUAL_FATAL(vt_backend_prepare_weight(simd, &offer, &out, why, sizeof why), VT_OK);
        if (wt == VT_Q4_0 || wt == VT_Q8_0 || wt == VT_Q6_K) CU_ASSERT_PTR_NOT_NULL(out.data);
        if (out.data) {
            taken++;
            void *file = node.src[0].data;
            node.src[0].data = out.data;
            node.prepared = 1u;
            CU_ASSERT_EQUAL(simd->table->get_rows(simd->ctx, &node), VT_OK);
            vt_backend_release_weight(simd, out.data);
            node.src[0].data = file;
            node.prepared = 0;
            if (memcmp(node.dst.data, ref.dst.data, (size_t)(D * M) * sizeof(float)) != 0) {
                printf("\n  prepared %s table: rows differ from the reference", vt_dtype_name(wt));
                CU_FAIL("prepared get_rows differs");
            }
        }
        vt_harness_node_free(&ref);
        vt_harness_node_free(&node);
    }
    CU_ASSERT(taken >= 3);
}

/* Widening is exact and narrowing rounds to nearest even in both: identical.
 * Values span many binades, down into f16's subnormals. */
static void test_convert(void) {
    if (!simd_available()) return;
    uint64_t seed = 10000;
    for (size_t s = 0; s < 3; s++)
        for (size_t d = 0; d < 3; d++) {
            const int64_t n = 4096 + 13;
            vt_tensor x = vt_harness_random(VT_F32, 2, (const int64_t[]){n, 2}, seed++, -1, 1);
            float *xf = x.data;
            for (int64_t i = 0; i < 2 * n; i++) xf[i] = ldexpf(xf[i], (int)(i % 40) - 26);
            vt_node node = vt_harness_node(VT_OP_CONVERT, VT_PHASE_PREFILL);
            if (float_dtypes[s] == VT_F32) {
                vt_harness_set_src(&node, 0, x);
            } else {
                vt_harness_set_src(&node, 0, vt_harness_from_f32(float_dtypes[s], 2, (const int64_t[]){n, 2}, xf));
                vt_harness_tensor_free(&x);
            }
            node.dst = vt_harness_zeros(float_dtypes[d], 2, (const int64_t[]){n, 2});
            outputs o = run_both(&node);
            if (o.simd_status == VT_OK && o.ref_status == VT_OK) expect_close("convert", &o, NULL, 0.0);
            outputs_free(&o);
            vt_harness_node_free(&node);
        }
}

/* ------------------------------------------------------------------------ */
/* supports() and failure paths                                               */

/* The shapes of a qwen3-0.6B layer, in both phases, every dtype the plan may
 * ask for: simd must accept them all (else --backend simd would run nodes
 * elsewhere), and must decline what it cannot run. */
static void test_supports_model_shapes(void) {
    if (!simd_available()) return;
    const vt_backend_entry *b = vt_harness_backend(harness, "simd");
    for (int phase = 0; phase < 2; phase++) {
        const int64_t T = phase == VT_PHASE_DECODE ? 1 : 128;
        for (size_t d = 0; d < sizeof weight_dtypes / sizeof *weight_dtypes; d++)
            for (size_t y = 0; y < 3; y++) {
                vt_node n = {.struct_size = sizeof(vt_node), .op = VT_OP_MATMUL, .phase = phase, .n_src = 2};
                n.src[0] = (vt_tensor){.dtype = weight_dtypes[d], .ndim = 2, .ne = {1024, 3072, 1, 1}};
                n.src[1] = (vt_tensor){.dtype = VT_F32, .ndim = 2, .ne = {1024, T, 1, 1}};
                n.dst = (vt_tensor){.dtype = float_dtypes[y], .ndim = 2, .ne = {3072, T, 1, 1}};
                CU_ASSERT(vt_backend_accepts(b, &n));
                n.src[1].dtype = VT_F16; /* activations must be f32 */
                CU_ASSERT(!vt_backend_accepts(b, &n));
                n.src[1].dtype = VT_F32;
                n.src[0].ne[0] = 1000; /* K not whole blocks */
                if (act_block(weight_dtypes[d])) CU_ASSERT(!vt_backend_accepts(b, &n));
            }
        for (size_t k = 0; k < 3; k++) {
            vt_node n = {.struct_size = sizeof(vt_node), .op = VT_OP_ATTENTION, .phase = phase, .n_src = 6};
            n.params.attention = (vt_attention_params){0.088f, 16, 1, 256};
            n.src[0] = (vt_tensor){.dtype = VT_F32, .ndim = 3, .ne = {128, 16, T, 1}};
            n.src[1] = (vt_tensor){.dtype = float_dtypes[k], .ndim = 4, .ne = {128, 8, 16, 256}};
            n.src[2] = n.src[1];
            n.src[3] = (vt_tensor){.dtype = VT_I32, .ndim = 2, .ne = {256, 1, 1, 1}};
            n.src[4] = (vt_tensor){.dtype = VT_I32, .ndim = 1, .ne = {T, 1, 1, 1}};
            n.src[5] = n.src[4];
            n.dst = n.src[0];
            CU_ASSERT(vt_backend_accepts(b, &n));
            n.src[1].ne[1] = 3; /* 16 heads over 3 kv heads */
            n.src[2].ne[1] = 3;
            CU_ASSERT(!vt_backend_accepts(b, &n));
        }
    }
}

/* A scratch allocation the host refuses makes the op fail with NOMEM, and the
 * backend keeps working afterwards. */
static void test_matmul_nomem(void) {
    if (!simd_available()) return;
    /* activations (16 MiB quantized) larger than any scratch a test before
     * made the backend keep, so the op must grow it and the refusal bites */
    const int64_t K = 4096, N = 8, M = 4096;
    vt_node node = vt_harness_node(VT_OP_MATMUL, VT_PHASE_PREFILL);
    vt_harness_set_src(&node, 0, vt_harness_weight(VT_Q4_K, K, N, 77));
    vt_harness_set_src(&node, 1, vt_harness_random(VT_F32, 2, (const int64_t[]){K, M}, 78, -1, 1));
    node.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, M});
    vt_host_fail_alloc_after(1);
    CU_ASSERT_EQUAL(vt_harness_run(harness, "simd", &node), VT_ERR_NOMEM);
    vt_host_fail_alloc_after(0);
    CU_ASSERT_EQUAL(vt_harness_run(harness, "simd", &node), VT_OK);
    vt_harness_node_free(&node);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"the isa option: avx2 anywhere, avx512 where the CPU has it, else refused with why", test_isa_option},
        {"matmul, every weight dtype, small and odd shapes", test_matmul_small_shapes},
        {"matmul, several blocks per row, L1 tiles", test_matmul_multi_block},
        {"matmul emits f16 and bf16", test_matmul_narrow_dst},
        {"matmul rows bit-identical whatever M for every weight dtype (batch invariance)",
         test_matmul_rows_independent_of_m},
        {"matmul through the prepare hook, every weight dtype, M 1..17 and 128, odd N, every output dtype",
         test_matmul_prepared},
        {"prepared matmul rows bit-identical whatever M (batch invariance)", test_matmul_prepared_rows_independent_of_m},
        {"attention decode over paged caches, GQA 1/2/4/8", test_attention_decode},
        {"attention prefill, block crossings, odd head dim", test_attention_prefill},
        {"attention at contexts of one and many spans, 1 and 8 sequences", test_attention_spans},
        {"attention of a token bit-identical alone and in any batch (batch invariance)",
         test_attention_rows_independent},
        {"a NaN score: the same numbers prefill and decode", test_attention_nan_score_same_on_every_path},
        {"attention: a position a query does not see never reaches it (a NaN there, a BF16 cache's pairs)",
         test_attention_unseen_rows_stay_out},
        {"attention at head dim 128 bit-identical alone and in any batch (batch invariance)",
         test_attention_rows_independent_d128},
        {"attention in prefill tiles of 32 and 64 tokens bit-identical alone (batch invariance)",
         test_attention_rows_independent_long_tiles},
        {"attention of sequences decoding over shared blocks, against reference and each alone, bit for bit",
         test_attention_shared_blocks},
        {"reshape_and_cache converts on store, skips padding", test_reshape_and_cache},
        {"rms_norm", test_rms_norm},
        {"rope norm and neox, partial rotation, frequency factors", test_rope},
        {"rope's kept tables follow positions, factors and parameters changed in place",
         test_rope_tables_follow_their_inputs},
        {"swiglu", test_swiglu},
        {"add, same shape and broadcast row", test_add},
        {"get_rows, every table dtype", test_get_rows},
        {"get_rows on prepared tables equals the reference bit for bit", test_get_rows_prepared},
        {"convert, every dtype pair", test_convert},
        {"moe_matmul, every weight dtype, prepared and not, activations shared and per expert", test_moe_matmul},
        {"moe_route picks reference's experts, ties included", test_moe_route},
        {"moe_combine, softmax over all or the chosen experts", test_moe_combine},
        {"supports() accepts the model's nodes in both phases", test_supports_model_shapes},
        {"matmul fails with NOMEM when scratch cannot grow", test_matmul_nomem},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("simd_ops", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
