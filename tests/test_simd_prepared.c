/* test_simd_prepared.c — simd's prepared weight layouts (ABI 1.2 hook)
 * against the reference backend and against themselves.
 *
 * Each case goes through the hook as the engine does: the weight is offered
 * to simd's prepare_weight, the node runs with src[0].data = the copy and
 * bit 0 of node->prepared set, and the copy is released. Checked:
 *   - MATMUL on the copy vs the reference on the file's bytes, element by
 *     element within a bound derived per element (as in test_simd_ops.c):
 *     N not a multiple of the 8 interleaved rows, M = 1..17 and 128 (decode's
 *     paired groups, the few-rows tiles, prefill tiles and their
 *     remainders), K from one block to 3072, f32/f16/bf16 outputs;
 *   - batch invariance: each row of an M-row product on the copy equals, bit
 *     for bit, the same row run alone (M = 1, decode's kernel);
 *   - GET_ROWS on a prepared table (a tied embedding is read by both ops)
 *     equals the reference's dequantization bit for bit;
 *   - what simd declines (dtypes without a layout, rms_norm weights, a
 *     table only get_rows reads) comes back with no copy, so those ops keep
 *     reading the file's bytes. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"
#include "quant.h"
#include "util.h"

static vt_harness *harness;
static const vt_backend_entry *simd;

/* The weight dtypes simd keeps in a layout of its own. */
static const int32_t prepared_dtypes[] = {VT_Q6_K};

static int suite_init(void) {
    harness = vt_harness_open(2);
    return harness && vt_harness_backend(harness, "reference") ? 0 : 1;
}

static int suite_cleanup(void) {
    vt_harness_close(harness);
    return 0;
}

static int simd_available(void) {
    simd = vt_harness_backend(harness, "simd");
    if (simd) return 1;
    if (vt_test_simd_expected()) CU_FAIL("simd backend not loaded on a CPU with AVX2/FMA/F16C");
    return 0;
}

/* Offer node's src[0] to simd's hook as op `op` reads it; on a copy, point
 * the node at it and set bit 0. Returns the copy (NULL if declined) and
 * keeps the file's bytes in *file for restore_weight. */
static void *prepare_weight(vt_node *node, uint32_t ops, void **file) {
    vt_weight_offer offer = {.struct_size = sizeof offer,
                             .name = "test.weight",
                             .tensor = node->src[0],
                             .ops = ops,
                             .phases = (1u << VT_PHASE_PREFILL) | (1u << VT_PHASE_DECODE)};
    vt_prepared_weight out = {0};
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(simd->table->prepare_weight(simd->ctx, &offer, &out, err, sizeof err), VT_OK);
    *file = node->src[0].data;
    if (out.data) {
        CU_ASSERT(out.bytes > 0);
        node->src[0].data = out.data;
        node->prepared |= 1u;
    }
    return out.data;
}

static void restore_weight(vt_node *node, void *copy, void *file) {
    if (copy) simd->table->release_weight(simd->ctx, copy);
    node->src[0].data = file;
    node->prepared = 0;
}

/* One unit in the last place of f16/bf16 at |v| (0 for f32). */
static double narrow_ulp(int32_t dtype, double v) {
    if (dtype != VT_F16 && dtype != VT_BF16) return 0.0;
    const int mant_bits = dtype == VT_F16 ? 10 : 7, min_exp = dtype == VT_F16 ? -14 : -126;
    int e;
    frexp(fabs(v), &e);
    if (e - 1 < min_exp) e = min_exp + 1;
    return ldexp(1.0, e - 1 - mant_bits);
}

/* MATMUL W {K, N} x X {K, M} -> Y of y_dtype on simd's copy vs the
 * reference on the file's bytes. Bound of element (m, n), A = sum |w||x|:
 * f32 rounding, at most (K / 256 + 8) roundings of relative FLT_EPSILON of
 * A (one conversion and one fma per block of 256, exact integer sums
 * inside; 8 for the reference's rounding of each dequantized weight), plus
 * the activation quantization to 8 bits, half a step per value:
 * sum over blocks of sum |w| * max|x| / 254; plus one ulp of y_dtype. */
static void check_prepared_matmul(int32_t w_dtype, int32_t y_dtype, int64_t K, int64_t N, int64_t M, uint64_t seed) {
    vt_node node = vt_harness_node(VT_OP_MATMUL, M == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
    vt_harness_set_src(&node, 0, vt_harness_weight(w_dtype, K, N, seed));
    vt_harness_set_src(&node, 1, vt_harness_random(VT_F32, 2, (const int64_t[]){K, M}, seed + 1, -1.0f, 1.0f));
    float *xf = node.src[1].data;
    if (M > 2) /* a row whose first block is all zero: d = 0 must give exact zeros */
        for (int64_t i = 0; i < 256; i++) xf[2 * K + i] = 0.0f;
    node.dst = vt_harness_zeros(y_dtype, 2, (const int64_t[]){N, M});
    vt_node ref = vt_harness_node_copy(&node);
    CU_ASSERT_EQUAL(vt_harness_run(harness, "reference", &ref), VT_OK);

    void *file, *copy = prepare_weight(&node, 1u << VT_OP_MATMUL, &file);
    CU_ASSERT_PTR_NOT_NULL(copy);
    CU_ASSERT_EQUAL(simd->table->matmul(simd->ctx, &node), VT_OK);
    restore_weight(&node, copy, file);

    float *w = vt_harness_to_f32(&node.src[0]), *ys = vt_harness_to_f32(&node.dst), *yr = vt_harness_to_f32(&ref.dst);
    int64_t bad = 0;
    double worst = 0.0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double A = 0.0, E = 0.0;
            for (int64_t b = 0; b < K; b += 256) {
                double amax = 0.0, wsum = 0.0;
                for (int64_t i = b; i < b + 256; i++) {
                    const double wv = fabs((double)w[n * K + i]), xv = fabs((double)xf[m * K + i]);
                    A += wv * xv;
                    amax = fmax(amax, xv);
                    wsum += wv;
                }
                E += wsum * amax / 254.0;
            }
            const double s = ys[m * N + n], r = yr[m * N + n];
            const double tol = ((double)(K / 256) + 8.0) * FLT_EPSILON * A + E + narrow_ulp(y_dtype, fmax(fabs(s), fabs(r)));
            if (!(fabs(s - r) <= tol)) {
                bad++;
                worst = fmax(worst, fabs(s - r) / tol);
            }
        }
    if (bad)
        printf("\n  %s->%s K=%lld N=%lld M=%lld: %lld of %lld outside the bound (worst %.2fx)", vt_dtype_name(w_dtype),
               vt_dtype_name(y_dtype), (long long)K, (long long)N, (long long)M, (long long)bad, (long long)(N * M),
               worst);
    CU_ASSERT_EQUAL(bad, 0);
    free(w);
    free(ys);
    free(yr);
    vt_harness_node_free(&ref);
    vt_harness_node_free(&node);
}

static void test_matmul_against_reference(void) {
    if (!simd_available()) return;
    static const int64_t Ns[] = {1, 7, 9, 37, 64};
    static const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 128};
    static const int64_t Ks[] = {256, 1024, 3072};
    static const int32_t ys[] = {VT_F32, VT_F16, VT_BF16};
    uint64_t seed = 500;
    for (size_t d = 0; d < sizeof prepared_dtypes / sizeof *prepared_dtypes; d++)
        for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
            for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
                for (size_t m = 0; m < sizeof Ms / sizeof *Ms; m++) {
                    /* every output dtype on a few shapes, f32 on all */
                    const size_t n_y = (n == 3 && (m == 0 || m == 6 || m == 10)) ? 3 : 1;
                    for (size_t y = 0; y < n_y; y++)
                        check_prepared_matmul(prepared_dtypes[d], ys[y], Ks[k], Ns[n], Ms[m], seed += 2);
                }
}

/* Each row of an M-row product on the copy equals that row alone (M = 1). */
static void test_rows_independent_of_m(void) {
    if (!simd_available()) return;
    /* past each walk's threshold too: 33 (Q8_0 / Q4_0 stream_rows), 129 (Q6_K) */
    static const int64_t Ms[] = {2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 33, 128, 129};
    /* 5 full groups of 8 and a tail of 5 (6 groups: decode's two streams
     * pair every group), then 6 and a tail (7 groups: one group is left
     * without a partner and takes the single-group tile) */
    static const int64_t Ns[] = {45, 53};
    const int64_t K = 1024;
    uint64_t seed = 7000;
    int checked = 0, differing = 0;
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
    for (size_t d = 0; d < sizeof prepared_dtypes / sizeof *prepared_dtypes; d++)
        for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++) {
            const int64_t M = Ms[mi], N = Ns[ni];
            vt_node all = vt_harness_node(VT_OP_MATMUL, VT_PHASE_DECODE);
            vt_harness_set_src(&all, 0, vt_harness_weight(prepared_dtypes[d], K, N, seed++));
            vt_harness_set_src(&all, 1, vt_harness_random(VT_F32, 2, (const int64_t[]){K, M}, seed++, -1.0f, 1.0f));
            all.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, M});
            void *file, *copy = prepare_weight(&all, 1u << VT_OP_MATMUL, &file);
            CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
            CU_ASSERT_EQUAL_FATAL(simd->table->matmul(simd->ctx, &all), VT_OK);
            for (int64_t m = 0; m < M; m++) {
                vt_node one = vt_harness_node(VT_OP_MATMUL, VT_PHASE_DECODE);
                vt_harness_set_src(&one, 0, all.src[0]);
                one.prepared = 1;
                vt_harness_set_src(&one, 1, vt_harness_from_f32(VT_F32, 2, (const int64_t[]){K, 1},
                                                                (const float *)all.src[1].data + m * K));
                one.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){N, 1});
                CU_ASSERT_EQUAL_FATAL(simd->table->matmul(simd->ctx, &one), VT_OK);
                if (memcmp(one.dst.data, (const float *)all.dst.data + m * N, (size_t)N * sizeof(float)) != 0) {
                    printf("\n  %s N=%lld M=%lld: row %lld differs from the same row alone",
                           vt_dtype_name(prepared_dtypes[d]), (long long)N, (long long)M, (long long)m);
                    differing++;
                }
                checked++;
                one.src[0] = (vt_tensor){0}; /* the copy belongs to `all` */
                vt_harness_node_free(&one);
            }
            restore_weight(&all, copy, file);
            vt_harness_node_free(&all);
        }
    printf("\n  %d rows compared with the same row alone, %d differ", checked, differing);
    CU_ASSERT(checked > 0);
    CU_ASSERT_EQUAL(differing, 0);
}

/* A table read by GET_ROWS and MATMUL (tied embedding), prepared once:
 * the rows simd reads from the copy are the reference's, bit for bit. */
static void test_get_rows_on_prepared_table(void) {
    if (!simd_available()) return;
    const int32_t ids[] = {0, 7, 8, 44, 3, 8, 21};
    const int64_t D = 768, V = 45, M = sizeof ids / sizeof *ids;
    for (size_t d = 0; d < sizeof prepared_dtypes / sizeof *prepared_dtypes; d++) {
        vt_node node = vt_harness_node(VT_OP_GET_ROWS, VT_PHASE_PREFILL);
        vt_harness_set_src(&node, 0, vt_harness_weight(prepared_dtypes[d], D, V, 31 + d));
        vt_harness_set_src(&node, 1, vt_harness_i32(M, ids));
        node.dst = vt_harness_zeros(VT_F32, 2, (const int64_t[]){D, M});
        vt_node ref = vt_harness_node_copy(&node);
        CU_ASSERT_EQUAL(vt_harness_run(harness, "reference", &ref), VT_OK);
        void *file, *copy = prepare_weight(&node, (1u << VT_OP_GET_ROWS) | (1u << VT_OP_MATMUL), &file);
        CU_ASSERT_PTR_NOT_NULL(copy);
        CU_ASSERT_EQUAL(simd->table->get_rows(simd->ctx, &node), VT_OK);
        restore_weight(&node, copy, file);
        CU_ASSERT_EQUAL(memcmp(node.dst.data, ref.dst.data, (size_t)(D * M) * sizeof(float)), 0);
        vt_harness_node_free(&ref);
        vt_harness_node_free(&node);
    }
}

/* No layout, no copy: F32 weights, a weight of a prepared dtype offered
 * for rms_norm, or read by get_rows alone. */
static void test_declines_what_it_does_not_lay_out(void) {
    if (!simd_available()) return;
    vt_node node = vt_harness_node(VT_OP_MATMUL, VT_PHASE_PREFILL);
    vt_harness_set_src(&node, 0, vt_harness_weight(VT_F32, 256, 8, 3));
    void *file, *copy = prepare_weight(&node, 1u << VT_OP_MATMUL, &file);
    CU_ASSERT_PTR_NULL(copy);
    CU_ASSERT_EQUAL(node.prepared, 0);
    CU_ASSERT_PTR_EQUAL(node.src[0].data, file);
    vt_harness_node_free(&node);

    vt_node norm = vt_harness_node(VT_OP_MATMUL, VT_PHASE_PREFILL);
    vt_harness_set_src(&norm, 0, vt_harness_weight(VT_Q6_K, 256, 8, 4));
    copy = prepare_weight(&norm, 1u << VT_OP_RMS_NORM, &file);
    CU_ASSERT_PTR_NULL(copy);
    /* a token table no matmul reads: a copy would only double it */
    copy = prepare_weight(&norm, 1u << VT_OP_GET_ROWS, &file);
    CU_ASSERT_PTR_NULL(copy);
    vt_harness_node_free(&norm);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"matmul on prepared weights vs reference: odd N, M 1..17 and 128, K 256..3072, f32/f16/bf16 out",
         test_matmul_against_reference},
        {"matmul on prepared weights: rows bit-identical whatever M (batch invariance)", test_rows_independent_of_m},
        {"get_rows on a prepared table equals the reference bit for bit", test_get_rows_on_prepared_table},
        {"dtypes and ops without a layout are declined", test_declines_what_it_does_not_lay_out},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("simd_prepared", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
