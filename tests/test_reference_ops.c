/* test_reference_ops.c — the reference backend on small cases whose answers
 * are worked out by hand in the comments, plus the checks its supports()
 * applies to nodes that break the operand conventions of vt_backend.h.
 *
 * Tolerances: the reference accumulates in double and rounds once to f32, so
 * a hand-computed value v it is compared with (itself a double rounded to
 * f32, or an exact small number) agrees to within a couple of f32 ulps:
 * 1e-6 * max(1, |v|) below is ~8 ulps, loose enough for the libm's last-bit
 * differences in exp/cos/sin/pow, tight enough that any wrong term shows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"
#include "host.h"
#include "quant.h"
#include "util.h"
#include "vt/vt_quant.h"

static vt_harness *harness;
static const char *const REF = "reference";

static int suite_init(void) {
    harness = vt_harness_open(2);
    if (!harness) return 1;
    if (!vt_harness_backend(harness, REF)) {
        fprintf(stderr, "the reference backend is not loaded (was libvt-backend-reference.so built?)\n");
        return 1;
    }
    return 0;
}

static int suite_cleanup(void) {
    vt_harness_close(harness);
    harness = NULL;
    return 0;
}

#define TOL(v) (1e-6 * fmax(1.0, fabs((double)(v))))
#define NE(...) ((const int64_t[]){__VA_ARGS__})

static const int32_t FLOATS[] = {VT_F32, VT_F16, VT_BF16};
static const int32_t WEIGHTS[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Run on the reference and return dst as f32 (caller frees), NULL on failure. */
static float *run_ref(vt_node *node) {
    vt_status st = vt_harness_run(harness, REF, node);
    CU_ASSERT_EQUAL(st, VT_OK);
    return st == VT_OK ? vt_harness_to_f32(&node->dst) : NULL;
}

static void assert_values(const float *got, const double *want, int n) {
    if (!got) return;
    for (int i = 0; i < n; i++) {
        if (fabs(got[i] - want[i]) > TOL(want[i])) printf("\n  [%d] got %.9g want %.9g", i, got[i], want[i]);
        VT_ASSERT_NEAR(got[i], want[i], TOL(want[i]));
    }
}

/* ======================================================================== */
/* matmul                                                                    */

static vt_node matmul_node(int32_t w_dtype, int64_t K, int64_t N, int64_t M, int32_t y_dtype, uint64_t seed) {
    vt_node n = vt_harness_node(VT_OP_MATMUL, M == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, vt_harness_weight(w_dtype, K, N, seed));
    vt_harness_set_src(&n, 1, vt_harness_random(VT_F32, 2, NE(K, M), seed + 1, -1.0f, 1.0f));
    n.dst = vt_harness_zeros(y_dtype, 2, NE(N, M));
    return n;
}

/* W = [[1 2 3], [4 5 6]] (N=2 rows of K=3), X = [[1 0 -1], [0.5 1 2]] (M=2):
 *   Y[0] = [1*1 + 2*0 + 3*-1, 4*1 + 5*0 + 6*-1]       = [-2, -2]
 *   Y[1] = [0.5 + 2 + 6,      2 + 5 + 12]             = [8.5, 19]
 * Every value is exact in f16 and bf16 too, so all dst dtypes agree. */
static void test_matmul_2x3_by_hand(void) {
    const float w[] = {1, 2, 3, 4, 5, 6}, x[] = {1, 0, -1, 0.5f, 1, 2};
    const double want[] = {-2, -2, 8.5, 19};
    for (int d = 0; d < COUNT(FLOATS); d++) {
        vt_node n = vt_harness_node(VT_OP_MATMUL, VT_PHASE_PREFILL);
        vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 2, NE(3, 2), w));
        vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 2, NE(3, 2), x));
        n.dst = vt_harness_zeros(FLOATS[d], 2, NE(2, 2));
        float *y = run_ref(&n);
        assert_values(y, want, 4);
        free(y);
        vt_harness_node_free(&n);
    }
}

/* W = [1], X = [1/3]: Y = 1/3, stored to f16 with round to nearest even is
 * 0x3555 (0.333251953), to bf16 0x3EAB (f32 0x3EAAAAAB, low half 0xAAAB
 * rounds up). */
static void test_matmul_narrow_dst_rounds_to_nearest_even(void) {
    const float one = 1.0f, third = 1.0f / 3.0f;
    const int32_t dtypes[] = {VT_F16, VT_BF16};
    const uint16_t want[] = {0x3555, 0x3EAB};
    for (int d = 0; d < 2; d++) {
        vt_node n = vt_harness_node(VT_OP_MATMUL, VT_PHASE_DECODE);
        vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 2, NE(1, 1), &one));
        vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 2, NE(1, 1), &third));
        n.dst = vt_harness_zeros(dtypes[d], 2, NE(1, 1));
        CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_OK);
        CU_ASSERT_EQUAL(*(uint16_t *)n.dst.data, want[d]);
        vt_harness_node_free(&n);
    }
}

/* For every weight dtype: Y equals the weights dequantized by vt_to_f32 and
 * dotted with X here, in double. Both sum the same products, so the only
 * difference allowed is the final f32 rounding: 1e-6 of sum |w x|. */
static void test_matmul_every_weight_dtype_equals_dequantize_then_dot(void) {
    const int64_t K = 512, N = 7, M = 3;
    for (int d = 0; d < COUNT(WEIGHTS); d++) {
        vt_node n = matmul_node(WEIGHTS[d], K, N, M, VT_F32, 100 + (uint64_t)d);
        float *w = vt_harness_to_f32(&n.src[0]); /* [N][K] */
        const float *x = n.src[1].data;          /* [M][K] */
        float *y = run_ref(&n);                  /* [M][N] */
        for (int64_t m = 0; y && m < M; m++) {
            for (int64_t j = 0; j < N; j++) {
                double want = 0.0, magnitude = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    want += (double)w[j * K + k] * (double)x[m * K + k];
                    magnitude += fabs((double)w[j * K + k] * (double)x[m * K + k]);
                }
                if (fabs(y[m * N + j] - want) > 1e-6 * magnitude)
                    printf("\n  %s: Y[%lld][%lld] = %.9g, want %.9g", vt_dtype_name(WEIGHTS[d]), (long long)m,
                           (long long)j, y[m * N + j], want);
                CU_ASSERT(fabs(y[m * N + j] - want) <= 1e-6 * magnitude);
            }
        }
        free(w);
        free(y);
        vt_harness_node_free(&n);
    }
}

/* The quantized weights are not all zero (or the test above proves little):
 * a Q4_K matmul of random data must produce values of order sqrt(K)/3. */
static void test_matmul_quantized_output_is_not_trivial(void) {
    vt_node n = matmul_node(VT_Q4_K, 256, 4, 2, VT_F32, 7);
    float *y = run_ref(&n);
    double sum_sq = 0.0;
    for (int i = 0; y && i < 8; i++) sum_sq += (double)y[i] * y[i];
    CU_ASSERT(sum_sq > 1.0);
    free(y);
    vt_harness_node_free(&n);
}

/* An allocation failure inside an op is VT_ERR_NOMEM, not a crash. */
static void test_matmul_out_of_memory_fails_cleanly(void) {
    vt_node n = matmul_node(VT_Q8_0, 64, 4, 2, VT_F32, 9);
    vt_host_fail_alloc_after(1);
    vt_status st = vt_harness_run(harness, REF, &n);
    vt_host_fail_alloc_after(0);
    CU_ASSERT_EQUAL(st, VT_ERR_NOMEM);
    vt_harness_node_free(&n);
}

/* ======================================================================== */
/* rms_norm                                                                  */

/* x = [3, 4]: mean(x^2) = (9 + 16) / 2 = 12.5, rms = sqrt(12.5) = 3.5355339;
 * w = [1, 2]: y = [3 / 3.5355339, 2 * 4 / 3.5355339] = [0.84852814, 2.2627417].
 * Row [6, 8] is the same row scaled, so the same result (scale invariance).
 * Row [1, 1] with eps = 3 would be 1/sqrt(1 + 3) = 0.5: checked separately. */
static void test_rms_norm_by_hand(void) {
    const float x[] = {3, 4, 6, 8}, w[] = {1, 2};
    const double want[] = {0.848528137423857, 2.262741699796952, 0.848528137423857, 2.262741699796952};
    for (int d = 0; d < COUNT(FLOATS); d++) {
        vt_node n = vt_harness_node(VT_OP_RMS_NORM, VT_PHASE_PREFILL);
        vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 2, NE(2, 2), x));
        vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 1, NE(2), w));
        n.dst = vt_harness_zeros(FLOATS[d], 2, NE(2, 2));
        n.params.rms_norm.eps = 0.0f;
        float *y = run_ref(&n);
        if (FLOATS[d] == VT_F32) {
            assert_values(y, want, 4);
        } else {
            /* narrow dst: the f32 result rounded once more */
            for (int i = 0; y && i < 4; i++) {
                float f32 = (float)want[i];
                float narrow = FLOATS[d] == VT_F16 ? vt_fp16_to_f32(vt_f32_to_fp16(f32)) : vt_bf16_to_f32(vt_f32_to_bf16(f32));
                CU_ASSERT_EQUAL(y[i], narrow);
            }
        }
        free(y);
        vt_harness_node_free(&n);
    }
}

static void test_rms_norm_adds_eps_inside_the_root(void) {
    const float x[] = {1, 1}, w[] = {1, 3};
    const double want[] = {0.5, 1.5}; /* 1 / sqrt(mean(1, 1) + 3) = 1/2, times w */
    vt_node n = vt_harness_node(VT_OP_RMS_NORM, VT_PHASE_DECODE);
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 2, NE(2, 1), x));
    vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 1, NE(2), w));
    n.dst = vt_harness_zeros(VT_F32, 2, NE(2, 1));
    n.params.rms_norm.eps = 3.0f;
    float *y = run_ref(&n);
    assert_values(y, want, 2);
    free(y);
    vt_harness_node_free(&n);
}

/* Qwen3's QK-norm: rms_norm over each head of a {D, heads, T} view. */
static void test_rms_norm_per_head_view(void) {
    const float x[] = {3, 4, 0, 2, 6, 8, -5, 0}; /* {D=2, heads=2, T=2} */
    const float w[] = {1, 1};
    /* [3,4] -> [0.6,0.8]*sqrt2; [0,2] -> [0, sqrt2]; [6,8] as [3,4]; [-5,0] -> [-sqrt2, 0] */
    const double s = sqrt(2.0);
    const double want[] = {0.6 * s, 0.8 * s, 0, s, 0.6 * s, 0.8 * s, -s, 0};
    vt_node n = vt_harness_node(VT_OP_RMS_NORM, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 3, NE(2, 2, 2), x));
    vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 1, NE(2), w));
    n.dst = vt_harness_zeros(VT_F32, 3, NE(2, 2, 2));
    float *y = run_ref(&n);
    assert_values(y, want, 8);
    free(y);
    vt_harness_node_free(&n);
}

/* ======================================================================== */
/* rope                                                                      */

static vt_node rope_node(int32_t mode, int32_t n_rot, int64_t D, int64_t heads, int64_t T, const float *x,
                         const int32_t *pos, int32_t dst_dtype) {
    vt_node n = vt_harness_node(VT_OP_ROPE, T == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 3, NE(D, heads, T), x));
    vt_harness_set_src(&n, 1, vt_harness_i32(T, pos));
    n.dst = vt_harness_zeros(dst_dtype, 3, NE(D, heads, T));
    n.params.rope = (vt_rope_params){.n_rot = n_rot, .mode = mode, .freq_base = 10000.0f, .freq_scale = 1.0f};
    return n;
}

/* D = n_rot = 4, base 10000, pos 1: theta_0 = 1 * 10000^0 = 1 rad,
 * theta_1 = 10000^(-2/4) = 0.01 rad. x = [1, 0, 0, 1]:
 *   NORM pairs (0,1), (2,3): (1,0) by 1 rad -> (cos 1, sin 1);
 *        (0,1) by 0.01 -> (-sin 0.01, cos 0.01)
 *        y = [0.54030231, 0.84147098, -0.00999983, 0.99995000]
 *   NEOX pairs (0,2), (1,3): (x0,x2) = (1,0) by 1 rad -> y0 = cos 1, y2 = sin 1;
 *        (x1,x3) = (0,1) by 0.01 -> y1 = -sin 0.01, y3 = cos 0.01
 *        y = [0.54030231, -0.00999983, 0.84147098, 0.99995000] */
static void test_rope_norm_and_neox_at_position_1(void) {
    const float x[] = {1, 0, 0, 1};
    const int32_t pos[] = {1};
    const double norm[] = {cos(1.0), sin(1.0), -sin(0.01), cos(0.01)};
    const double neox[] = {cos(1.0), -sin(0.01), sin(1.0), cos(0.01)};
    vt_node n = rope_node(VT_ROPE_NORM, 4, 4, 1, 1, x, pos, VT_F32);
    float *y = run_ref(&n);
    assert_values(y, norm, 4);
    free(y);
    vt_harness_node_free(&n);
    n = rope_node(VT_ROPE_NEOX, 4, 4, 1, 1, x, pos, VT_F32);
    y = run_ref(&n);
    assert_values(y, neox, 4);
    free(y);
    vt_harness_node_free(&n);
}

/* Position 0 rotates by 0 (identity); dims at and past n_rot are copied;
 * every head of a token uses that token's position. X {D=6, heads=2, T=2},
 * n_rot = 2, positions [0, 1]: token 0 unchanged; in token 1 each head's pair
 * (0,1) turns by theta_0 = 1 rad and values 2..5 stay. */
static void test_rope_copies_past_n_rot_and_uses_each_tokens_position(void) {
    const float x[] = {1, 2, 3, 4, 5, 6, -1, 0, 7, 8, 9, 10, /* token 0 */
                       1, 0, 3, 4, 5, 6, 0, -2, 7, 8, 9, 10 /* token 1 */};
    const int32_t pos[] = {0, 1};
    const double c = cos(1.0), s = sin(1.0);
    const double want[] = {1, 2, 3, 4, 5, 6, -1, 0, 7, 8, 9, 10,
                           c, s, 3, 4, 5, 6, /* (0,-2) by 1 rad = (2 sin 1, -2 cos 1) */ 2 * s, -2 * c, 7, 8, 9, 10};
    for (int mode = 0; mode <= 2; mode += 2) { /* with n_rot = 2 both pairings are the pair (0,1) */
        vt_node n = rope_node(mode, 2, 6, 2, 2, x, pos, VT_F32);
        float *y = run_ref(&n);
        assert_values(y, want, 24);
        free(y);
        vt_harness_node_free(&n);
    }
}

/* freq_scale multiplies the angle: pos 2 at scale 0.5 turns pair 0 by 1 rad,
 * and a bf16 dst stores the f32 result rounded to bf16. */
static void test_rope_freq_scale_and_narrow_dst(void) {
    const float x[] = {1, 0};
    const int32_t pos[] = {2};
    vt_node n = rope_node(VT_ROPE_NEOX, 2, 2, 1, 1, x, pos, VT_BF16);
    n.params.rope.freq_scale = 0.5f;
    float *y = run_ref(&n);
    if (y) {
        CU_ASSERT_EQUAL(y[0], vt_bf16_to_f32(vt_f32_to_bf16((float)cos(1.0))));
        CU_ASSERT_EQUAL(y[1], vt_bf16_to_f32(vt_f32_to_bf16((float)sin(1.0))));
    }
    free(y);
    vt_harness_node_free(&n);
}

/* ======================================================================== */
/* swiglu, add                                                               */

/* silu(g) = g / (1 + e^-g): silu(0) = 0, silu(1) = 0.7310586,
 * silu(-1) = -0.2689414, silu(20) = 20 - 4.1e-8, silu(-20) = -4.1223e-8. */
static void test_swiglu_by_hand(void) {
    const float gate[] = {0, 1, -1, 20, -20, 2}, up[] = {2, 2, 2, 1, 1, -1};
    const double e = exp(1.0);
    const double want[] = {0, 2 / (1 + 1 / e), -2 / (1 + e), 20 / (1 + exp(-20.0)), -20 / (1 + exp(20.0)),
                           -2 / (1 + exp(-2.0))};
    vt_node n = vt_harness_node(VT_OP_SWIGLU, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 2, NE(3, 2), gate));
    vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 2, NE(3, 2), up));
    n.dst = vt_harness_zeros(VT_F32, 2, NE(3, 2));
    float *y = run_ref(&n);
    assert_values(y, want, 6);
    /* the tiny silu(-20) is not flushed to zero: relative accuracy too */
    if (y) CU_ASSERT(fabs(y[4] - want[4]) <= 1e-6 * fabs(want[4]));
    free(y);
    vt_harness_node_free(&n);
}

/* A = [[1 2 3], [4 5 6]]; B one row [10 20 30] broadcast: [[11 22 33], [14 25 36]];
 * B full [[0.5 0 -3], [1 1 1]]: [[1.5 2 0], [5 6 7]]. */
static void test_add_full_and_broadcast(void) {
    const float a[] = {1, 2, 3, 4, 5, 6}, row[] = {10, 20, 30}, full[] = {0.5f, 0, -3, 1, 1, 1};
    const double want_row[] = {11, 22, 33, 14, 25, 36}, want_full[] = {1.5, 2, 0, 5, 6, 7};
    for (int d = 0; d < COUNT(FLOATS); d++) {
        for (int broadcast = 0; broadcast < 2; broadcast++) {
            vt_node n = vt_harness_node(VT_OP_ADD, VT_PHASE_PREFILL);
            vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 2, NE(3, 2), a));
            vt_harness_set_src(&n, 1, broadcast ? vt_harness_from_f32(VT_F32, 2, NE(3, 1), row)
                                                : vt_harness_from_f32(VT_F32, 2, NE(3, 2), full));
            n.dst = vt_harness_zeros(FLOATS[d], 2, NE(3, 2));
            float *y = run_ref(&n);
            assert_values(y, broadcast ? want_row : want_full, 6);
            free(y);
            vt_harness_node_free(&n);
        }
    }
}

/* ======================================================================== */
/* get_rows                                                                  */

/* F32 table rows r0 = [1 2], r1 = [3 4], r2 = [5 6]; ids [2 0 2] -> [5 6 1 2 5 6]. */
static void test_get_rows_f32_by_hand(void) {
    const float table[] = {1, 2, 3, 4, 5, 6};
    const int32_t ids[] = {2, 0, 2};
    const double want[] = {5, 6, 1, 2, 5, 6};
    vt_node n = vt_harness_node(VT_OP_GET_ROWS, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 2, NE(2, 3), table));
    vt_harness_set_src(&n, 1, vt_harness_i32(3, ids));
    n.dst = vt_harness_zeros(VT_F32, 2, NE(2, 3));
    float *y = run_ref(&n);
    assert_values(y, want, 6);
    free(y);
    vt_harness_node_free(&n);
}

/* A Q8_0 table built byte by byte: row 0 is one block with d = 0.5 (fp16
 * 0x3800) and q_i = i - 16, so value i is (i - 16) / 2; row 1 has d = 2
 * (0x4000) and q_i = i % 3 - 1, so value i is 2 * (i % 3 - 1). */
static void test_get_rows_q8_0_hand_built_block(void) {
    vt_block_q8_0 blocks[2];
    blocks[0].d = 0x3800;
    blocks[1].d = 0x4000;
    for (int i = 0; i < 32; i++) {
        blocks[0].qs[i] = (int8_t)(i - 16);
        blocks[1].qs[i] = (int8_t)(i % 3 - 1);
    }
    vt_node n = vt_harness_node(VT_OP_GET_ROWS, VT_PHASE_PREFILL);
    vt_tensor table = vt_harness_zeros(VT_Q8_0, 2, NE(32, 2));
    memcpy(table.data, blocks, sizeof blocks);
    vt_harness_set_src(&n, 0, table);
    vt_harness_set_src(&n, 1, vt_harness_i32(2, (const int32_t[]){1, 0}));
    n.dst = vt_harness_zeros(VT_F32, 2, NE(32, 2));
    double want[64];
    for (int i = 0; i < 32; i++) {
        want[i] = 2.0 * (i % 3 - 1);   /* output row 0 = table row 1 */
        want[32 + i] = (i - 16) / 2.0; /* output row 1 = table row 0 */
    }
    float *y = run_ref(&n);
    assert_values(y, want, 64);
    free(y);
    vt_harness_node_free(&n);
}

/* For every quantized table: each output row equals the table row
 * dequantized by vt_to_f32, bit for bit (the same exact dequantization). */
static void test_get_rows_quantized_equals_dequantized_row(void) {
    const int64_t D = 512, V = 5;
    const int32_t ids[] = {4, 0, 2, 4};
    for (int d = 0; d < COUNT(WEIGHTS); d++) {
        vt_node n = vt_harness_node(VT_OP_GET_ROWS, VT_PHASE_PREFILL);
        vt_harness_set_src(&n, 0, vt_harness_weight(WEIGHTS[d], D, V, 50 + (uint64_t)d));
        vt_harness_set_src(&n, 1, vt_harness_i32(4, ids));
        n.dst = vt_harness_zeros(VT_F32, 2, NE(D, 4));
        float *table = vt_harness_to_f32(&n.src[0]);
        float *y = run_ref(&n);
        for (int i = 0; y && i < 4; i++) {
            CU_ASSERT_EQUAL(memcmp(y + i * D, table + ids[i] * D, (size_t)D * sizeof(float)), 0);
        }
        free(table);
        free(y);
        vt_harness_node_free(&n);
    }
}

/* An id outside the table is an error from the op (supports() sees no data). */
static void test_get_rows_id_out_of_range_is_an_error(void) {
    vt_node n = vt_harness_node(VT_OP_GET_ROWS, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, vt_harness_weight(VT_F32, 4, 3, 1));
    vt_harness_set_src(&n, 1, vt_harness_i32(2, (const int32_t[]){1, 3}));
    n.dst = vt_harness_zeros(VT_F32, 2, NE(4, 2));
    CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_ERR_INVALID);
    vt_harness_node_free(&n);
}

/* ======================================================================== */
/* convert                                                                   */

/* Values chosen to exercise rounding, overflow and subnormals:
 * 1/3 (rounds in both half types), 65504 (f16 max), 70000 (f16 inf),
 * 3e38 (bf16 finite, f16 inf), 1e-6 (f16 subnormal), -2.5 (exact). */
static const float convert_values[] = {1.0f, 1.0f / 3.0f, -2.5f, 65504.0f, 70000.0f, 3.0e38f, 1.0e-6f, 0.0f};
#define N_CONVERT 8

/* What a value of src dtype (already stored) becomes in dst dtype: widen
 * exactly, narrow with round to nearest even (vt_quant.h's scalar code). */
static uint32_t expected_bits(int32_t dtype, float value) {
    switch (dtype) {
    case VT_F16: return vt_f32_to_fp16(value);
    case VT_BF16: return vt_f32_to_bf16(value);
    default: return vt_f32_bits(value);
    }
}

static float stored_value(int32_t dtype, float value) {
    switch (dtype) {
    case VT_F16: return vt_fp16_to_f32(vt_f32_to_fp16(value));
    case VT_BF16: return vt_bf16_to_f32(vt_f32_to_bf16(value));
    default: return value;
    }
}

static uint32_t element_bits(const vt_tensor *t, int i) {
    if (t->dtype == VT_F32) return ((const uint32_t *)t->data)[i];
    return ((const uint16_t *)t->data)[i];
}

static void test_convert_every_float_pair(void) {
    for (int s = 0; s < COUNT(FLOATS); s++) {
        for (int d = 0; d < COUNT(FLOATS); d++) {
            vt_node n = vt_harness_node(VT_OP_CONVERT, VT_PHASE_PREFILL);
            vt_harness_set_src(&n, 0, vt_harness_from_f32(FLOATS[s], 2, NE(4, 2), convert_values));
            n.dst = vt_harness_zeros(FLOATS[d], 2, NE(4, 2));
            CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_OK);
            for (int i = 0; i < N_CONVERT; i++) {
                uint32_t want = expected_bits(FLOATS[d], stored_value(FLOATS[s], convert_values[i]));
                if (element_bits(&n.dst, i) != want)
                    printf("\n  %s -> %s [%d]: got 0x%x want 0x%x", vt_dtype_name(FLOATS[s]), vt_dtype_name(FLOATS[d]), i,
                           element_bits(&n.dst, i), want);
                CU_ASSERT_EQUAL(element_bits(&n.dst, i), want);
            }
            vt_harness_node_free(&n);
        }
    }
}

/* A few conversions checked against bit patterns worked out by hand:
 * f32 1/3 = 0x3EAAAAAB -> f16 0x3555, bf16 0x3EAB; 1.0 -> 0x3C00, 0x3F80;
 * 70000 -> f16 +inf 0x7C00; f16 0x3555 = 0.333251953 -> bf16 0x3EAB
 * (f32 0x3EAAA000, low half 0xA000 > 0x8000 rounds up). */
static void test_convert_known_bit_patterns(void) {
    const float values[] = {1.0f / 3.0f, 1.0f, 70000.0f};
    vt_node n = vt_harness_node(VT_OP_CONVERT, VT_PHASE_DECODE);
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 1, NE(3), values));
    n.dst = vt_harness_zeros(VT_F16, 1, NE(3));
    CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_OK);
    const uint16_t *h = n.dst.data;
    CU_ASSERT_EQUAL(h[0], 0x3555);
    CU_ASSERT_EQUAL(h[1], 0x3C00);
    CU_ASSERT_EQUAL(h[2], 0x7C00);

    vt_node to_bf16 = vt_harness_node(VT_OP_CONVERT, VT_PHASE_DECODE);
    vt_tensor f16 = vt_harness_zeros(VT_F16, 1, NE(3)); /* f16 -> bf16 */
    memcpy(f16.data, n.dst.data, vt_harness_nbytes(&f16));
    vt_harness_set_src(&to_bf16, 0, f16);
    to_bf16.dst = vt_harness_zeros(VT_BF16, 1, NE(3));
    CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &to_bf16), VT_OK);
    const uint16_t *b = to_bf16.dst.data;
    CU_ASSERT_EQUAL(b[0], 0x3EAB);
    CU_ASSERT_EQUAL(b[1], 0x3F80);
    CU_ASSERT_EQUAL(b[2], 0x7F80); /* f16 inf stays inf */
    vt_harness_node_free(&to_bf16);
    vt_harness_node_free(&n);
}

/* ======================================================================== */
/* reshape_and_cache                                                         */

/* D = 2, KVH = 2, BS = 2, B = 3: 6 slots of 4 values. T = 3 tokens with
 * k_t = [10t, 10t+1, 10t+2, 10t+3] (v_t = -k_t) and slot mapping [5, -1, 0]:
 * token 0 lands in slot 5 (block 2, offset 1), token 1 is padding, token 2
 * lands in slot 0. Slots 1..4 keep their previous bytes. All values are small
 * integers, exact in every float dtype, so every k dtype x cache dtype pair
 * gives the same numbers. */
static void test_reshape_and_cache_slots_and_padding(void) {
    float k[12], v[12];
    for (int i = 0; i < 12; i++) {
        k[i] = (float)(10 * (i / 4) + i % 4);
        v[i] = -k[i];
    }
    const int64_t slots[] = {5, -1, 0};
    for (int s = 0; s < COUNT(FLOATS); s++) {
        for (int d = 0; d < COUNT(FLOATS); d++) {
            vt_node n = vt_harness_node(VT_OP_RESHAPE_AND_CACHE, VT_PHASE_PREFILL);
            vt_harness_set_src(&n, 0, vt_harness_from_f32(FLOATS[s], 3, NE(2, 2, 3), k));
            vt_harness_set_src(&n, 1, vt_harness_from_f32(FLOATS[s], 3, NE(2, 2, 3), v));
            vt_harness_set_src(&n, 2, vt_harness_cache(FLOATS[d], 2, 2, 2, 3, 1));
            vt_harness_set_src(&n, 3, vt_harness_cache(FLOATS[d], 2, 2, 2, 3, 2));
            vt_harness_set_src(&n, 4, vt_harness_i64(3, slots));
            vt_node before = vt_harness_node_copy(&n);
            CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_OK);
            size_t slot_bytes = vt_row_size(FLOATS[d], 4);
            for (int c = 2; c <= 3; c++) {
                float *cache = vt_harness_to_f32(&n.src[c]); /* [6 slots][4] */
                const float *src = c == 2 ? k : v;
                for (int i = 0; i < 4; i++) {
                    CU_ASSERT_EQUAL(cache[5 * 4 + i], src[0 * 4 + i]); /* token 0 -> slot 5 */
                    CU_ASSERT_EQUAL(cache[0 * 4 + i], src[2 * 4 + i]); /* token 2 -> slot 0 */
                }
                CU_ASSERT_EQUAL(memcmp((char *)n.src[c].data + slot_bytes, (char *)before.src[c].data + slot_bytes,
                                       4 * slot_bytes), 0); /* slots 1..4 untouched */
                free(cache);
            }
            vt_harness_node_free(&before);
            vt_harness_node_free(&n);
        }
    }
}

/* Converting on store rounds like the scalar conversion: f32 1/3 into an
 * f16 cache is 0x3555, into bf16 0x3EAB; an f16 k into an f32 cache widens exactly. */
static void test_reshape_and_cache_converts_on_store(void) {
    const float k[] = {1.0f / 3.0f, 0.1f}, v[] = {-1.0f / 3.0f, 0.7f};
    const int32_t caches[] = {VT_F16, VT_BF16};
    for (int d = 0; d < 2; d++) {
        vt_node n = vt_harness_node(VT_OP_RESHAPE_AND_CACHE, VT_PHASE_DECODE);
        vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 3, NE(2, 1, 1), k));
        vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 3, NE(2, 1, 1), v));
        vt_harness_set_src(&n, 2, vt_harness_cache(caches[d], 2, 1, 4, 1, 3));
        vt_harness_set_src(&n, 3, vt_harness_cache(caches[d], 2, 1, 4, 1, 4));
        vt_harness_set_src(&n, 4, vt_harness_i64(1, (const int64_t[]){2}));
        CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_OK);
        const uint16_t *kc = n.src[2].data, *vc = n.src[3].data;
        for (int i = 0; i < 2; i++) {
            CU_ASSERT_EQUAL(kc[2 * 2 + i], (uint16_t)expected_bits(caches[d], k[i]));
            CU_ASSERT_EQUAL(vc[2 * 2 + i], (uint16_t)expected_bits(caches[d], v[i]));
        }
        if (caches[d] == VT_F16) CU_ASSERT_EQUAL(kc[4], 0x3555);
        if (caches[d] == VT_BF16) CU_ASSERT_EQUAL(kc[4], 0x3EAB);
        vt_harness_node_free(&n);
    }
}

/* A slot past the cache is an error and nothing is written, not even the
 * tokens before it. */
static void test_reshape_and_cache_slot_out_of_range_writes_nothing(void) {
    const float k[] = {1, 2, 3, 4}, v[] = {5, 6, 7, 8};
    vt_node n = vt_harness_node(VT_OP_RESHAPE_AND_CACHE, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 3, NE(2, 1, 2), k));
    vt_harness_set_src(&n, 1, vt_harness_from_f32(VT_F32, 3, NE(2, 1, 2), v));
    vt_harness_set_src(&n, 2, vt_harness_cache(VT_F32, 2, 1, 2, 2, 5));
    vt_harness_set_src(&n, 3, vt_harness_cache(VT_F32, 2, 1, 2, 2, 6));
    vt_harness_set_src(&n, 4, vt_harness_i64(2, (const int64_t[]){0, 4})); /* 4 slots: 0..3 */
    vt_node before = vt_harness_node_copy(&n);
    CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(memcmp(n.src[2].data, before.src[2].data, vt_harness_nbytes(&n.src[2])), 0);
    CU_ASSERT_EQUAL(memcmp(n.src[3].data, before.src[3].data, vt_harness_nbytes(&n.src[3])), 0);
    vt_harness_node_free(&before);
    vt_harness_node_free(&n);
}

/* ======================================================================== */
/* attention                                                                 */

/* Write one {D} row of a cache {D, KVH, BS, B} at slot, kv head g. */
static void cache_put(vt_tensor *cache, int64_t slot, int64_t g, const float *row) {
    const int64_t D = cache->ne[0], KVH = cache->ne[1];
    size_t bytes = vt_row_size(cache->dtype, D);
    CU_ASSERT_EQUAL_FATAL(vt_from_f32(cache->dtype, row, (char *)cache->data + (size_t)(slot * KVH + g) * bytes, D), VT_OK);
}

static vt_node attention_node(int64_t D, int64_t H, int64_t T, const float *q, vt_tensor kc, vt_tensor vc,
                              int32_t n_seqs, int32_t max_blocks, const int32_t *tables, const int32_t *positions,
                              const int32_t *seqs, float scale) {
    vt_node n = vt_harness_node(VT_OP_ATTENTION, T == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
    int32_t BS = (int32_t)kc.ne[2];
    vt_harness_set_src(&n, 0, vt_harness_from_f32(VT_F32, 3, NE(D, H, T), q));
    vt_harness_set_src(&n, 1, kc);
    vt_harness_set_src(&n, 2, vc);
    vt_harness_set_src(&n, 3, vt_harness_block_tables(n_seqs, max_blocks, tables));
    vt_harness_set_src(&n, 4, vt_harness_i32(T, positions));
    vt_harness_set_src(&n, 5, vt_harness_i32(T, seqs));
    n.dst = vt_harness_zeros(VT_F32, 3, NE(D, H, T));
    n.params.attention = (vt_attention_params){.scale = scale, .block_size = BS, .n_seqs = n_seqs,
                                               .max_blocks_per_seq = max_blocks};
    return n;
}

/* D = 2, one head, one block of BS = 2: k0 = [1 0], k1 = [0 1], v0 = [4 0],
 * v1 = [0 8]. Token 0 at position 0 sees only k0: out = v0 = [4 0].
 * Token 1 at position 1 with q = [ln 3, 0], scale 1: scores [ln 3, 0],
 * softmax [3/4, 1/4], out = 3/4 [4 0] + 1/4 [0 8] = [3 2].
 * The same with q = [2 ln 3, 0] at scale 0.5. Cache values are exact in every
 * dtype, so F32, F16 and BF16 caches agree. */
static void test_attention_two_positions_by_hand(void) {
    const float ln3 = (float)log(3.0);
    const float k0[] = {1, 0}, k1[] = {0, 1}, v0[] = {4, 0}, v1[] = {0, 8};
    const int32_t table[] = {0}, positions[] = {0, 1}, seqs[] = {0, 0};
    const double want[] = {4, 0, 3, 2};
    for (int d = 0; d < COUNT(FLOATS); d++) {
        for (int halved = 0; halved < 2; halved++) {
            const float q[] = {halved ? 2 * ln3 : ln3, 0, halved ? 2 * ln3 : ln3, 0};
            vt_tensor kc = vt_harness_cache(FLOATS[d], 2, 1, 2, 1, 1), vc = vt_harness_cache(FLOATS[d], 2, 1, 2, 1, 2);
            cache_put(&kc, 0, 0, k0);
            cache_put(&kc, 1, 0, k1);
            cache_put(&vc, 0, 0, v0);
            cache_put(&vc, 1, 0, v1);
            vt_node n = attention_node(2, 1, 2, q, kc, vc, 1, 1, table, positions, seqs, halved ? 0.5f : 1.0f);
            float *o = run_ref(&n);
            assert_values(o, want, 4);
            free(o);
            vt_harness_node_free(&n);
        }
    }
}

/* Softmax subtracts the maximum: scores [1000, 999] (q = [1000 999],
 * k0 = [1 0], k1 = [0 1]) would overflow exp() otherwise. The weights are
 * [1, e^-1] / (1 + e^-1) = [0.7310586, 0.2689414]; with v0 = [1 0],
 * v1 = [0 1] that is the output. */
static void test_attention_softmax_is_stable_for_large_scores(void) {
    const float q[] = {1000, 999}, k0[] = {1, 0}, k1[] = {0, 1};
    const int32_t table[] = {0}, positions[] = {1}, seqs[] = {0};
    const double w0 = 1.0 / (1.0 + exp(-1.0));
    const double want[] = {w0, 1.0 - w0};
    vt_tensor kc = vt_harness_cache(VT_F32, 2, 1, 2, 1, 1), vc = vt_harness_cache(VT_F32, 2, 1, 2, 1, 2);
    cache_put(&kc, 0, 0, k0);
    cache_put(&kc, 1, 0, k1);
    cache_put(&vc, 0, 0, k0);
    cache_put(&vc, 1, 0, k1);
    vt_node n = attention_node(2, 1, 1, q, kc, vc, 1, 1, table, positions, seqs, 1.0f);
    float *o = run_ref(&n);
    assert_values(o, want, 2);
    free(o);
    vt_harness_node_free(&n);
}

/* GQA: H = 4 query heads over KVH = 2 kv heads, so heads 0,1 read kv head 0
 * and heads 2,3 kv head 1. One token at position 1 (2 positions), BS = 2.
 * Both kv heads: k0 = [1 0], k1 = [0 1]. kv 0: v0 = [4 0], v1 = [0 8];
 * kv 1: v0 = [0 -4], v1 = [8 0].
 *   head 0, q = [ln3 0]: weights [3/4 1/4] -> [3 2]
 *   head 1, q = [0 0]:   weights [1/2 1/2] -> [2 4]
 *   head 2, q = [ln3 0]: weights [3/4 1/4] -> 3/4 [0 -4] + 1/4 [8 0] = [2 -3]
 *   head 3, q = [0 ln3]: weights [1/4 3/4] -> 1/4 [0 -4] + 3/4 [8 0] = [6 -1] */
static void test_attention_gqa_head_mapping(void) {
    const float ln3 = (float)log(3.0);
    const float q[] = {ln3, 0, 0, 0, ln3, 0, 0, ln3};
    const float k0[] = {1, 0}, k1[] = {0, 1};
    const float v00[] = {4, 0}, v01[] = {0, 8}, v10[] = {0, -4}, v11[] = {8, 0};
    const int32_t table[] = {0}, positions[] = {1}, seqs[] = {0};
    const double want[] = {3, 2, 2, 4, 2, -3, 6, -1};
    for (int d = 0; d < COUNT(FLOATS); d++) {
        vt_tensor kc = vt_harness_cache(FLOATS[d], 2, 2, 2, 1, 1), vc = vt_harness_cache(FLOATS[d], 2, 2, 2, 1, 2);
        for (int g = 0; g < 2; g++) {
            cache_put(&kc, 0, g, k0);
            cache_put(&kc, 1, g, k1);
        }
        cache_put(&vc, 0, 0, v00);
        cache_put(&vc, 1, 0, v01);
        cache_put(&vc, 0, 1, v10);
        cache_put(&vc, 1, 1, v11);
        vt_node n = attention_node(2, 4, 1, q, kc, vc, 1, 1, table, positions, seqs, 1.0f);
        float *o = run_ref(&n);
        assert_values(o, want, 8);
        free(o);
        vt_harness_node_free(&n);
    }
}

/* Block tables with non-contiguous blocks and two sequences in one call.
 * BS = 2, B = 4 (slots 0..7); seq 0's table is [3 1]: positions 0,1,2 live in
 * slots 6, 7, 2. Seq 1's table is [0 2]: positions 0,1 in slots 0, 1.
 * Every other slot holds k = v = [100 100], which would swamp any result
 * that read it.
 *   token 0: seq 0 at position 2, q = [ln2 0]; k = [0 0], [0 0], [1 0] ->
 *            scores [0 0 ln2], weights [1 1 2]/4; v = [1 0], [2 0], [6 3] ->
 *            out = ([1 0] + [2 0] + 2 [6 3]) / 4 = [3.75 1.5]
 *   token 1: seq 1 at position 1, q = [0 0]: uniform over v = [10 20],
 *            [30 40] -> out = [20 30] */
static void test_attention_block_table_and_two_sequences(void) {
    const float ln2 = (float)log(2.0);
    const float q[] = {ln2, 0, 0, 0};
    const int32_t tables[] = {3, 1, /* seq 1 */ 0, 2}, positions[] = {2, 1}, seqs[] = {0, 1};
    const float junk[] = {100, 100}, zero[] = {0, 0}, unit[] = {1, 0};
    const double want[] = {3.75, 1.5, 20, 30};
    for (int d = 0; d < COUNT(FLOATS); d++) {
        vt_tensor kc = vt_harness_cache(FLOATS[d], 2, 1, 2, 4, 1), vc = vt_harness_cache(FLOATS[d], 2, 1, 2, 4, 2);
        for (int slot = 0; slot < 8; slot++) {
            cache_put(&kc, slot, 0, junk);
            cache_put(&vc, slot, 0, junk);
        }
        cache_put(&kc, 6, 0, zero);
        cache_put(&kc, 7, 0, zero);
        cache_put(&kc, 2, 0, unit);
        cache_put(&vc, 6, 0, (const float[]){1, 0});
        cache_put(&vc, 7, 0, (const float[]){2, 0});
        cache_put(&vc, 2, 0, (const float[]){6, 3});
        cache_put(&kc, 0, 0, zero);
        cache_put(&kc, 1, 0, zero);
        cache_put(&vc, 0, 0, (const float[]){10, 20});
        cache_put(&vc, 1, 0, (const float[]){30, 40});
        vt_node n = attention_node(2, 1, 2, q, kc, vc, 2, 2, tables, positions, seqs, 1.0f);
        float *o = run_ref(&n);
        assert_values(o, want, 4);
        free(o);
        vt_harness_node_free(&n);
    }
}

/* Properties on random data: (1) when every v row of a kv head is the same
 * vector c, the output is c whatever q and k are (the weights sum to 1);
 * (2) causality: changing the cache at positions after a token's position
 * leaves its output bit-identical. D = 8, H = 4, KVH = 2, BS = 4, T = 5. */
static void test_attention_weights_sum_to_one_and_are_causal(void) {
    const int64_t D = 8, H = 4, KVH = 2, BS = 4, B = 3, T = 5;
    const int32_t table[] = {2, 0, 1}, positions[] = {0, 3, 4, 7, 9}, seqs[] = {0, 0, 0, 0, 0};
    uint64_t rng = 77;
    float q[8 * 4 * 5];
    for (int i = 0; i < (int)(D * H * T); i++) q[i] = vt_harness_rand_f32(&rng, -2, 2);
    vt_tensor kc = vt_harness_cache(VT_F32, D, KVH, BS, B, 11), vc = vt_harness_cache(VT_F32, D, KVH, BS, B, 12);
    float c[2][8];
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < D; i++) c[g][i] = (float)(g * 10 + i) * 0.25f;
    for (int slot = 0; slot < BS * B; slot++)
        for (int g = 0; g < 2; g++) cache_put(&vc, slot, g, c[g]);
    vt_node n = attention_node(D, H, T, q, kc, vc, 1, 3, table, positions, seqs, 0.35f);
    float *o = run_ref(&n);
    for (int t = 0; o && t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < D; i++) VT_ASSERT_NEAR(o[(t * H + h) * D + i], c[h / 2][i], TOL(c[h / 2][i]));

    /* causality: now random v; token 1 (position 3) reads logical block 0
     * only (slots of physical block 2). Scramble physical blocks 0 and 1. */
    vt_node first = vt_harness_node_copy(&n);
    vt_harness_tensor_free(&first.src[2]);
    first.src[2] = vt_harness_cache(VT_F32, D, KVH, BS, B, 13);
    vt_node second = vt_harness_node_copy(&first);
    CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &first), VT_OK);
    for (int cache = 1; cache <= 2; cache++) {
        size_t block_bytes = vt_harness_nbytes(&second.src[cache]) / (size_t)B;
        memset(second.src[cache].data, 0x3F, 2 * block_bytes); /* blocks 0 and 1 */
    }
    CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &second), VT_OK);
    const float *a = first.dst.data, *b = second.dst.data;
    CU_ASSERT_EQUAL(memcmp(a, b, (size_t)(2 * H * D) * sizeof(float)), 0); /* tokens 0 and 1 */
    CU_ASSERT_NOT_EQUAL(memcmp(a + 2 * H * D, b + 2 * H * D, (size_t)(H * D) * sizeof(float)), 0); /* token 2 reads block 0 */
    free(o);
    vt_harness_node_free(&first);
    vt_harness_node_free(&second);
    vt_harness_node_free(&n);
}

/* Indices the node's shapes cannot vouch for are checked by the op:
 * a block outside the cache, a sequence outside the table, a position
 * past the table's row. */
static void test_attention_bad_indices_are_errors(void) {
    const float q[] = {1, 0};
    for (int which = 0; which < 3; which++) {
        const int32_t table[] = {which == 0 ? 5 : 0}; /* B = 1 */
        const int32_t positions[] = {which == 2 ? 2 : 1}, seqs[] = {which == 1 ? 1 : 0};
        vt_node n = attention_node(2, 1, 1, q, vt_harness_cache(VT_F16, 2, 1, 2, 1, 1),
                                   vt_harness_cache(VT_F16, 2, 1, 2, 1, 2), 1, 1, table, positions, seqs, 1.0f);
        CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &n), VT_ERR_INVALID);
        vt_harness_node_free(&n);
    }
}

/* Prefill and decode agree: T tokens of one sequence in one call give the
 * same bits as T calls of one token each (each call's token sees the same
 * cache positions, and the reference's arithmetic does not depend on T). */
static void test_attention_prefill_equals_token_by_token(void) {
    const int64_t D = 16, H = 4, KVH = 1, BS = 4, B = 2, T = 6;
    const int32_t table[] = {1, 0}, seqs[] = {0, 0, 0, 0, 0, 0};
    int32_t positions[6];
    for (int t = 0; t < T; t++) positions[t] = t + 1;
    vt_node all = vt_harness_node(VT_OP_ATTENTION, VT_PHASE_PREFILL);
    vt_harness_set_src(&all, 0, vt_harness_random(VT_F32, 3, NE(D, H, T), 5, -1, 1));
    vt_harness_set_src(&all, 1, vt_harness_cache(VT_BF16, D, KVH, BS, B, 6));
    vt_harness_set_src(&all, 2, vt_harness_cache(VT_BF16, D, KVH, BS, B, 7));
    vt_harness_set_src(&all, 3, vt_harness_block_tables(1, 2, table));
    vt_harness_set_src(&all, 4, vt_harness_i32(T, positions));
    vt_harness_set_src(&all, 5, vt_harness_i32(T, seqs));
    all.dst = vt_harness_zeros(VT_F32, 3, NE(D, H, T));
    all.params.attention = (vt_attention_params){.scale = 0.25f, .block_size = (int32_t)BS, .n_seqs = 1, .max_blocks_per_seq = 2};
    CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &all), VT_OK);
    for (int t = 0; t < T; t++) {
        vt_node one = vt_harness_node_copy(&all);
        one.phase = VT_PHASE_DECODE;
        one.src[0].ne[2] = 1, one.dst.ne[2] = 1, one.src[4].ne[0] = 1, one.src[5].ne[0] = 1;
        /* point at token t's rows (the copies own their buffers; keep the bases to free) */
        void *q_base = one.src[0].data, *o_base = one.dst.data, *p_base = one.src[4].data;
        one.src[0].data = (float *)q_base + t * H * D;
        one.dst.data = (float *)o_base + t * H * D;
        one.src[4].data = (int32_t *)p_base + t;
        CU_ASSERT_EQUAL(vt_harness_run(harness, REF, &one), VT_OK);
        CU_ASSERT_EQUAL(memcmp(one.dst.data, (float *)all.dst.data + t * H * D, (size_t)(H * D) * sizeof(float)), 0);
        one.src[0].data = q_base, one.dst.data = o_base, one.src[4].data = p_base;
        vt_harness_node_free(&one);
    }
    vt_harness_node_free(&all);
}

/* ======================================================================== */
/* the harness itself                                                        */

/* A backend compared with itself differs by exactly 0, for a single output
 * (matmul) and for the two caches reshape_and_cache writes. */
static void test_harness_compare_reference_with_itself(void) {
    vt_node m = matmul_node(VT_Q5_K, 256, 5, 3, VT_BF16, 21);
    vt_harness_diff d;
    CU_ASSERT_EQUAL(vt_harness_compare(harness, REF, REF, &m, &d), VT_OK);
    CU_ASSERT_EQUAL(d.count, 15);
    CU_ASSERT_EQUAL(d.max_abs, 0.0);
    CU_ASSERT(d.ref_max_abs > 0.0);
    /* the caller's node is untouched: its dst is still zero */
    float *y = vt_harness_to_f32(&m.dst);
    for (int i = 0; i < 15; i++) CU_ASSERT_EQUAL(y[i], 0.0f);
    free(y);
    vt_harness_node_free(&m);

    vt_node c = vt_harness_node(VT_OP_RESHAPE_AND_CACHE, VT_PHASE_PREFILL);
    vt_harness_set_src(&c, 0, vt_harness_random(VT_F32, 3, NE(4, 2, 3), 1, -1, 1));
    vt_harness_set_src(&c, 1, vt_harness_random(VT_F32, 3, NE(4, 2, 3), 2, -1, 1));
    vt_harness_set_src(&c, 2, vt_harness_cache(VT_F16, 4, 2, 2, 2, 3));
    vt_harness_set_src(&c, 3, vt_harness_cache(VT_F16, 4, 2, 2, 2, 4));
    vt_harness_set_src(&c, 4, vt_harness_i64(3, (const int64_t[]){3, 0, -1}));
    CU_ASSERT_EQUAL(vt_harness_compare(harness, REF, REF, &c, &d), VT_OK);
    CU_ASSERT_EQUAL(d.count, 2 * 4 * 2 * 2 * 2); /* both caches */
    CU_ASSERT_EQUAL(d.max_abs, 0.0);
    vt_harness_node_free(&c);

    /* an absent backend is reported, not crashed on */
    m = matmul_node(VT_F32, 4, 2, 1, VT_F32, 1);
    CU_ASSERT_EQUAL(vt_harness_compare(harness, "no-such-backend", REF, &m, &d), VT_ERR_UNSUPPORTED);
    vt_harness_node_free(&m);
}

/* tensor_diff on known values: a = [1, 2, 3.5, nan], b = [1, 2.5, 3, nan]:
 * max_abs 0.5 at index 1 (the first of the two 0.5s), max_rel 0.5/2.5 vs
 * 0.5/3 -> 0.2, ref max 3 (nan skipped, nan matches nan). An inf against a
 * finite value is a non-finite mismatch that makes max_abs infinite. */
static void test_harness_tensor_diff_known_values(void) {
    const float a[] = {1, 2, 3.5f, NAN}, b[] = {1, 2.5f, 3, NAN};
    vt_tensor ta = vt_harness_from_f32(VT_F32, 1, NE(4), a), tb = vt_harness_from_f32(VT_F16, 1, NE(4), b);
    vt_harness_diff d = vt_harness_tensor_diff(&ta, &tb);
    VT_ASSERT_NEAR(d.max_abs, 0.5, 0.0);
    VT_ASSERT_NEAR(d.max_rel, 0.2, 1e-12);
    VT_ASSERT_NEAR(d.ref_max_abs, 3.0, 0.0);
    CU_ASSERT_EQUAL(d.worst, 1);
    CU_ASSERT_EQUAL(d.nonfinite_mismatch, 0);
    ((float *)ta.data)[0] = INFINITY;
    d = vt_harness_tensor_diff(&ta, &tb);
    CU_ASSERT_EQUAL(d.nonfinite_mismatch, 1);
    CU_ASSERT(isinf(d.max_abs));
    vt_harness_tensor_free(&ta);
    vt_harness_tensor_free(&tb);
}

/* The PRNG is deterministic per seed, differs across seeds, and stays in range. */
static void test_harness_random_is_seeded(void) {
    vt_tensor a = vt_harness_random(VT_F32, 1, NE(64), 42, -3, 5), b = vt_harness_random(VT_F32, 1, NE(64), 42, -3, 5);
    vt_tensor c = vt_harness_random(VT_F32, 1, NE(64), 43, -3, 5);
    CU_ASSERT_EQUAL(memcmp(a.data, b.data, 64 * sizeof(float)), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(a.data, c.data, 64 * sizeof(float)), 0);
    for (int i = 0; i < 64; i++) CU_ASSERT(((float *)a.data)[i] >= -3 && ((float *)a.data)[i] < 5);
    vt_harness_tensor_free(&a);
    vt_harness_tensor_free(&b);
    vt_harness_tensor_free(&c);
}

/* ======================================================================== */
/* supports()                                                                */

/* Shapes only: supports() sees no data. */
static vt_tensor shape(int32_t dtype, int ndim, const int64_t *ne) {
    vt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim;
    for (int i = 0; i < VT_MAX_DIMS; i++) t.ne[i] = i < ndim ? ne[i] : 1;
    return t;
}

static bool accepts(const vt_node *n) { return vt_harness_accepts(harness, REF, n); }

static vt_node q_matmul(void) {
    vt_node n = vt_harness_node(VT_OP_MATMUL, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, shape(VT_Q4_K, 2, NE(256, 8)));
    vt_harness_set_src(&n, 1, shape(VT_F32, 2, NE(256, 4)));
    n.dst = shape(VT_F32, 2, NE(8, 4));
    return n;
}

static vt_node q_attention(void) {
    vt_node n = vt_harness_node(VT_OP_ATTENTION, VT_PHASE_DECODE);
    vt_harness_set_src(&n, 0, shape(VT_F32, 3, NE(64, 8, 1)));
    vt_harness_set_src(&n, 1, shape(VT_F16, 4, NE(64, 2, 16, 10)));
    vt_harness_set_src(&n, 2, shape(VT_F16, 4, NE(64, 2, 16, 10)));
    vt_harness_set_src(&n, 3, shape(VT_I32, 2, NE(4, 1)));
    vt_harness_set_src(&n, 4, shape(VT_I32, 1, NE(1)));
    vt_harness_set_src(&n, 5, shape(VT_I32, 1, NE(1)));
    n.dst = shape(VT_F32, 3, NE(64, 8, 1));
    n.params.attention = (vt_attention_params){.scale = 0.125f, .block_size = 16, .n_seqs = 1, .max_blocks_per_seq = 4};
    return n;
}

static vt_node q_rope(void) {
    vt_node n = vt_harness_node(VT_OP_ROPE, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, shape(VT_F32, 3, NE(64, 8, 3)));
    vt_harness_set_src(&n, 1, shape(VT_I32, 1, NE(3)));
    n.dst = shape(VT_F16, 3, NE(64, 8, 3));
    n.params.rope = (vt_rope_params){.n_rot = 64, .mode = VT_ROPE_NEOX, .freq_base = 1e6f, .freq_scale = 1.0f};
    return n;
}

static vt_node q_cache(void) {
    vt_node n = vt_harness_node(VT_OP_RESHAPE_AND_CACHE, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, shape(VT_F32, 3, NE(64, 2, 5)));
    vt_harness_set_src(&n, 1, shape(VT_F32, 3, NE(64, 2, 5)));
    vt_harness_set_src(&n, 2, shape(VT_BF16, 4, NE(64, 2, 16, 10)));
    vt_harness_set_src(&n, 3, shape(VT_BF16, 4, NE(64, 2, 16, 10)));
    vt_harness_set_src(&n, 4, shape(VT_I64, 1, NE(5)));
    return n;
}

static void test_supports_accepts_conventional_nodes(void) {
    vt_node m = q_matmul(), a = q_attention(), r = q_rope(), c = q_cache();
    CU_ASSERT(accepts(&m));
    CU_ASSERT(accepts(&a));
    CU_ASSERT(accepts(&r));
    CU_ASSERT(accepts(&c));
    for (int d = 0; d < COUNT(WEIGHTS); d++) {
        m.src[0].dtype = WEIGHTS[d];
        CU_ASSERT(accepts(&m));
    }
    /* strides, when given, may be the contiguous ones */
    m = q_matmul();
    m.src[1].nb[0] = 4, m.src[1].nb[1] = 1024, m.src[1].nb[2] = 4096, m.src[1].nb[3] = 4096;
    CU_ASSERT(accepts(&m));
}

static void test_supports_rejects_bad_matmul(void) {
    vt_node n;
    n = q_matmul(), n.src[1].dtype = VT_F16; /* X must be f32 */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.src[0].dtype = VT_I32; /* not a weight dtype */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.src[0].dtype = 3; /* an id no dtype has */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.dst.dtype = VT_Q8_0; /* Y float only */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.src[1].ne[0] = 128; /* K mismatch */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.dst.ne[1] = 5; /* M mismatch */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.src[1] = shape(VT_F32, 3, NE(256, 2, 2)); /* X must be 2-D */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.src[0].ne[0] = 128, n.src[1].ne[0] = 128; /* Q4_K rows of half a block */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.n_src = 3;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.src[1].nb[1] = 2048; /* strided X */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_matmul(), n.src[1].ne[1] = 0;
    CU_ASSERT_FALSE(accepts(&n));
}

static void test_supports_rejects_bad_attention(void) {
    vt_node n;
    n = q_attention(), n.src[0].ne[1] = 3; /* 3 query heads over 2 kv heads */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.dst.ne[1] = 3, n.src[0].ne[1] = 3;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.params.attention.block_size = 32;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.params.attention.max_blocks_per_seq = 5;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.src[1].dtype = VT_Q4_0; /* caches are float or (ABI 1.1) q8_0 */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.src[1].dtype = VT_Q8_0, n.src[2].dtype = VT_Q8_0; /* a q8_0 cache, head dim 64 */
    CU_ASSERT_TRUE(accepts(&n));
    n = q_attention(), n.src[0].ne[0] = n.dst.ne[0] = 48; /* head dim 48: not whole q8_0 blocks */
    n.src[1].ne[0] = n.src[2].ne[0] = 48, n.src[1].dtype = n.src[2].dtype = VT_Q8_0;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.src[2].ne[3] = 9; /* K and V caches differ */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.src[1].ne[0] = 32, n.src[2].ne[0] = 32; /* head dim */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.src[4].dtype = VT_I64; /* positions are i32 */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.src[5].ne[0] = 2; /* one sequence index per token */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.dst.dtype = VT_F16; /* O is f32 */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.params.attention.scale = NAN;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_attention(), n.n_src = 5;
    CU_ASSERT_FALSE(accepts(&n));
}

static void test_supports_rejects_bad_rope(void) {
    vt_node n;
    n = q_rope(), n.params.rope.n_rot = 63; /* odd */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_rope(), n.params.rope.n_rot = 66; /* > D */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_rope(), n.params.rope.n_rot = 0;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_rope(), n.params.rope.mode = 1;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_rope(), n.params.rope.freq_base = 0.0f;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_rope(), n.src[1].ne[0] = 2; /* positions for 2 of 3 tokens */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_rope(), n.dst.ne[1] = 4;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_rope(), n.params.rope.n_rot = 32; /* partial rotation is fine */
    CU_ASSERT(accepts(&n));
}

static void test_supports_rejects_bad_cache_write(void) {
    vt_node n;
    n = q_cache(), n.src[4].dtype = VT_I32; /* slots are i64 */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_cache(), n.src[2].ne[1] = 4, n.src[3].ne[1] = 4; /* cache has other kv heads */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_cache(), n.src[4].ne[0] = 4;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_cache(), n.dst = shape(VT_F32, 1, NE(1)); /* dst is unused */
    CU_ASSERT_FALSE(accepts(&n));
    n = q_cache(), n.src[3].dtype = VT_Q4_0;
    CU_ASSERT_FALSE(accepts(&n));
    n = q_cache(), n.src[2].dtype = VT_F16; /* K and V caches may differ in dtype */
    CU_ASSERT(accepts(&n));
}

static void test_supports_rejects_other_bad_nodes(void) {
    vt_node n = vt_harness_node(VT_OP_RMS_NORM, VT_PHASE_PREFILL);
    vt_harness_set_src(&n, 0, shape(VT_F32, 2, NE(64, 4)));
    vt_harness_set_src(&n, 1, shape(VT_F32, 1, NE(64)));
    n.dst = shape(VT_F32, 2, NE(64, 4));
    n.params.rms_norm.eps = 1e-6f;
    CU_ASSERT(accepts(&n));
    vt_node bad = n;
    bad.src[1].ne[0] = 32;
    CU_ASSERT_FALSE(accepts(&bad));
    bad = n, bad.params.rms_norm.eps = -1.0f;
    CU_ASSERT_FALSE(accepts(&bad));
    bad = n, bad.src[0].dtype = VT_BF16;
    CU_ASSERT_FALSE(accepts(&bad));

    vt_node s = vt_harness_node(VT_OP_SWIGLU, VT_PHASE_PREFILL);
    vt_harness_set_src(&s, 0, shape(VT_F32, 2, NE(64, 4)));
    vt_harness_set_src(&s, 1, shape(VT_F32, 2, NE(64, 4)));
    s.dst = shape(VT_F32, 2, NE(64, 4));
    CU_ASSERT(accepts(&s));
    bad = s, bad.dst.dtype = VT_F16; /* swiglu writes f32 only */
    CU_ASSERT_FALSE(accepts(&bad));
    bad = s, bad.src[1].ne[1] = 3;
    CU_ASSERT_FALSE(accepts(&bad));

    vt_node a = vt_harness_node(VT_OP_ADD, VT_PHASE_PREFILL);
    vt_harness_set_src(&a, 0, shape(VT_F32, 2, NE(64, 4)));
    vt_harness_set_src(&a, 1, shape(VT_F32, 2, NE(64, 1)));
    a.dst = shape(VT_BF16, 2, NE(64, 4));
    CU_ASSERT(accepts(&a));
    bad = a, bad.src[1].ne[1] = 2; /* neither one row nor all rows */
    CU_ASSERT_FALSE(accepts(&bad));

    vt_node g = vt_harness_node(VT_OP_GET_ROWS, VT_PHASE_PREFILL);
    vt_harness_set_src(&g, 0, shape(VT_Q6_K, 2, NE(256, 100)));
    vt_harness_set_src(&g, 1, shape(VT_I32, 1, NE(7)));
    g.dst = shape(VT_F32, 2, NE(256, 7));
    CU_ASSERT(accepts(&g));
    bad = g, bad.src[1].dtype = VT_I64;
    CU_ASSERT_FALSE(accepts(&bad));
    bad = g, bad.dst.dtype = VT_F16; /* get_rows writes f32 */
    CU_ASSERT_FALSE(accepts(&bad));

    vt_node c = vt_harness_node(VT_OP_CONVERT, VT_PHASE_PREFILL);
    vt_harness_set_src(&c, 0, shape(VT_F32, 3, NE(64, 2, 5)));
    c.dst = shape(VT_F16, 3, NE(64, 2, 5));
    CU_ASSERT(accepts(&c));
    bad = c, bad.dst.dtype = VT_Q8_0;
    CU_ASSERT_FALSE(accepts(&bad));
    bad = c, bad.dst.ne[2] = 4;
    CU_ASSERT_FALSE(accepts(&bad));

    bad = c, bad.op = VT_OP_COUNT; /* no such op */
    CU_ASSERT_FALSE(accepts(&bad));
    bad = c, bad.phase = 7;
    CU_ASSERT_FALSE(accepts(&bad));

    /* moe_matmul: X shared {K, T} or per expert {K, U, T}; a 2-D {K, U}
     * with T = 1 is neither (it would read as both) */
    vt_node m = vt_harness_node(VT_OP_MOE_MATMUL, VT_PHASE_DECODE);
    vt_harness_set_src(&m, 0, shape(VT_Q8_0, 3, NE(64, 32, 8)));
    vt_harness_set_src(&m, 1, shape(VT_F32, 3, NE(64, 2, 1)));
    vt_harness_set_src(&m, 2, shape(VT_I32, 2, NE(2, 1)));
    m.dst = shape(VT_F32, 3, NE(32, 2, 1));
    CU_ASSERT(accepts(&m)); /* per expert */
    bad = m, bad.src[1] = shape(VT_F32, 2, NE(64, 1));
    CU_ASSERT(accepts(&bad)); /* shared */
    bad = m, bad.src[1] = shape(VT_F32, 2, NE(64, 2));
    CU_ASSERT_FALSE(accepts(&bad));
}

/* An op handed a node that breaks the convention refuses it rather than
 * reading out of bounds, even when called without asking supports(). */
static void test_ops_validate_their_node(void) {
    vt_node n = matmul_node(VT_F32, 4, 2, 2, VT_F32, 3);
    n.dst.ne[0] = 3; /* Y claims more columns than W has rows (strides unset: a query-style node) */
    n.dst.nb[1] = n.dst.nb[2] = n.dst.nb[3] = 0;
    CU_ASSERT_EQUAL(vt_backend_run(vt_harness_backend(harness, REF), &n), VT_ERR_INVALID);
    vt_harness_node_free(&n);

    /* a well-shaped node without data (a supports() query run by mistake) */
    vt_node q = q_rope();
    CU_ASSERT(accepts(&q));
    CU_ASSERT_EQUAL(vt_backend_run(vt_harness_backend(harness, REF), &q), VT_ERR_INVALID);
}

int main(void) {
    CU_TestInfo matmul[] = {
        {"2x3 by hand, every dst dtype", test_matmul_2x3_by_hand},
        {"f16/bf16 dst rounds to nearest even", test_matmul_narrow_dst_rounds_to_nearest_even},
        {"every weight dtype equals dequantize-then-dot", test_matmul_every_weight_dtype_equals_dequantize_then_dot},
        {"quantized output is not trivial", test_matmul_quantized_output_is_not_trivial},
        {"out of memory fails cleanly", test_matmul_out_of_memory_fails_cleanly},
        CU_TEST_INFO_NULL,
    };
    CU_TestInfo elementwise[] = {
        {"rms_norm of [3 4] by hand", test_rms_norm_by_hand},
        {"rms_norm adds eps inside the root", test_rms_norm_adds_eps_inside_the_root},
        {"rms_norm per head of a 3-D view", test_rms_norm_per_head_view},
        {"rope norm and neox at position 1", test_rope_norm_and_neox_at_position_1},
        {"rope copies past n_rot, per-token positions", test_rope_copies_past_n_rot_and_uses_each_tokens_position},
        {"rope freq_scale and bf16 dst", test_rope_freq_scale_and_narrow_dst},
        {"swiglu by hand", test_swiglu_by_hand},
        {"add full and broadcast", test_add_full_and_broadcast},
        {"get_rows f32 by hand", test_get_rows_f32_by_hand},
        {"get_rows from a hand-built q8_0 block", test_get_rows_q8_0_hand_built_block},
        {"get_rows equals the dequantized row, every dtype", test_get_rows_quantized_equals_dequantized_row},
        {"get_rows id out of range is an error", test_get_rows_id_out_of_range_is_an_error},
        {"convert every float pair", test_convert_every_float_pair},
        {"convert known bit patterns", test_convert_known_bit_patterns},
        CU_TEST_INFO_NULL,
    };
    CU_TestInfo kv[] = {
        {"reshape_and_cache slots and padding, every dtype pair", test_reshape_and_cache_slots_and_padding},
        {"reshape_and_cache converts on store", test_reshape_and_cache_converts_on_store},
        {"reshape_and_cache bad slot writes nothing", test_reshape_and_cache_slot_out_of_range_writes_nothing},
        {"attention two positions by hand", test_attention_two_positions_by_hand},
        {"attention softmax stable for large scores", test_attention_softmax_is_stable_for_large_scores},
        {"attention gqa head mapping", test_attention_gqa_head_mapping},
        {"attention block table, two sequences", test_attention_block_table_and_two_sequences},
        {"attention weights sum to one, causal", test_attention_weights_sum_to_one_and_are_causal},
        {"attention bad indices are errors", test_attention_bad_indices_are_errors},
        {"attention prefill equals token by token", test_attention_prefill_equals_token_by_token},
        CU_TEST_INFO_NULL,
    };
    CU_TestInfo supports[] = {
        {"accepts conventional nodes", test_supports_accepts_conventional_nodes},
        {"rejects bad matmul", test_supports_rejects_bad_matmul},
        {"rejects bad attention", test_supports_rejects_bad_attention},
        {"rejects bad rope", test_supports_rejects_bad_rope},
        {"rejects bad reshape_and_cache", test_supports_rejects_bad_cache_write},
        {"rejects other bad nodes", test_supports_rejects_other_bad_nodes},
        {"ops validate their node", test_ops_validate_their_node},
        CU_TEST_INFO_NULL,
    };
    CU_TestInfo harness_tests[] = {
        {"compare the reference with itself", test_harness_compare_reference_with_itself},
        {"tensor_diff on known values", test_harness_tensor_diff_known_values},
        {"random tensors are seeded", test_harness_random_is_seeded},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("reference: matmul", suite_init, suite_cleanup, matmul);
    vt_test_add_suite("reference: elementwise, get_rows, convert", suite_init, suite_cleanup, elementwise);
    vt_test_add_suite("reference: kv cache and attention", suite_init, suite_cleanup, kv);
    vt_test_add_suite("reference: supports", suite_init, suite_cleanup, supports);
    vt_test_add_suite("backend harness", suite_init, suite_cleanup, harness_tests);
    return vt_test_run();
}
