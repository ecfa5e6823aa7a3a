/* test_simd_tiers.c — simd's instruction-set tiers against each other.
 *
 * A tier above AVX2 replaces some kernels with its own (backends/simd/
 * simd.h); each such kernel sums the same exact integers as the AVX2 one
 * and shares its float finish (k4_tile.h, q6_k_x8_tile.h,
 * q4_0_q8_0_tile.h), or runs the same float
 * operations in the same order (attention), so the tiers must agree bit for
 * bit: the tolerance is zero, and whatever test_simd_ops proves of one tier
 * against the reference (it runs the best tier the CPU has) holds for the
 * other. Checked here op by op through the prepare hook, as an engine runs
 * it — N across and not a multiple of the 8-row groups, every M from 1 to
 * 17 and 128 (decode's paired groups, the few-row tiles, prefill tiles),
 * K of 1 to 12 blocks (of 32 too for Q8_0 and Q4_0), f32/f16/bf16
 * outputs — and end to end: a greedy run of the real engine path gives the
 * same tokens at --backend-option simd.isa=avx2 and at the best tier.
 *
 * Runs only where the CPU and OS have the AVX-512 VNNI tier; elsewhere the
 * runner is skipped, naming what is missing (the isa option itself, and its
 * refusal of a tier the CPU lacks, are tested in test_simd_ops on every
 * AVX2 machine). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_harness.h"
#include "op_cases.h"
#include "util.h"
#include "vt/vt_cpu.h"
#include "vt/vt_dtype.h"

static vt_harness *best, *avx2;

static int suite_init(void) {
    best = vt_harness_open(2);
    avx2 = vt_harness_open_with(2, "simd.isa=avx2\n");
    return best && avx2 ? 0 : 1;
}

static int suite_cleanup(void) {
    vt_harness_close(avx2);
    vt_harness_close(best);
    return 0;
}

/* Both simd instances, or a skip naming what the CPU lacks. */
static bool tiers_available(void) {
    const char *missing = vt_test_simd_avx512_missing();
    if (missing) {
        char why[160];
        snprintf(why, sizeof why, "simd's avx512 tier cannot run here: the CPU lacks %s", missing);
        vt_test_skip(why);
        return false;
    }
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_harness_backend(best, "simd"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(vt_harness_backend(avx2, "simd"));
    return true;
}

static void test_each_instance_runs_its_tier(void) {
    if (!tiers_available()) return;
    char isa[VT_BACKEND_ISA_MAX];
    CU_ASSERT_STRING_EQUAL(vt_backend_isa(vt_harness_backend(best, "simd"), isa, sizeof isa),
                           vt_test_simd_avx512_isa());
    CU_ASSERT_STRING_EQUAL(vt_backend_isa(vt_harness_backend(avx2, "simd"), isa, sizeof isa), "avx2");
}

/* node's matmul (MATMUL, or MOE_MATMUL on a stack of experts) on h's
 * simd, through its prepare hook as an engine runs it, or on the file's
 * layout (as simd reads a weight another backend's nodes read too); the
 * output as f32 (malloc'ed). */
static float *matmul_in(vt_harness *h, const vt_node *node, bool prepared) {
    const vt_backend_entry *simd = vt_harness_backend(h, "simd");
    vt_node n = vt_harness_node_copy(node);
    if (!prepared) {
        CU_ASSERT_EQUAL(vt_harness_run(h, "simd", &n), VT_OK);
        float *y = vt_harness_to_f32(&n.dst);
        vt_harness_node_free(&n);
        return y;
    }
    vt_weight_offer offer = {.struct_size = sizeof offer, .name = "test.tiers.src0", .tensor = n.src[0],
                             .ops = 1u << node->op, .phases = (1u << VT_PHASE_PREFILL) | (1u << VT_PHASE_DECODE)};
    vt_prepared_weight out = {0};
    char why[256] = "";
    CU_ASSERT_EQUAL_FATAL(vt_backend_prepare_weight(simd, &offer, &out, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out.data); /* the dtypes tested are ones simd prepares */
    void *file_data = n.src[0].data;
    n.src[0].data = out.data;
    n.prepared = 1u;
    CU_ASSERT_EQUAL(vt_harness_run(h, "simd", &n), VT_OK);
    vt_backend_release_weight(simd, out.data);
    n.src[0].data = file_data;
    n.prepared = 0;
    float *y = vt_harness_to_f32(&n.dst);
    vt_harness_node_free(&n);
    return y;
}

static float *matmul_on(vt_harness *h, const vt_node *node) { return matmul_in(h, node, true); }

/* One matmul of K x N weights of wtype by M rows into y_dtype on both
 * tiers, on prepared weights or the file's layout: the outputs' bits must
 * be equal. */
static void check_same_bits_in(int32_t wtype, int64_t K, int64_t N, int64_t M, int32_t y_dtype, uint64_t seed,
                               bool prepared) {
    vt_node node = vt_harness_node(VT_OP_MATMUL, M == 1 ? VT_PHASE_DECODE : VT_PHASE_PREFILL);
    vt_harness_set_src(&node, 0, vt_harness_weight(wtype, K, N, seed));
    vt_harness_set_src(&node, 1, vt_harness_random(VT_F32, 2, (const int64_t[]){K, M}, seed + 1, -2.0f, 2.0f));
    node.dst = vt_harness_zeros(y_dtype, 2, (const int64_t[]){N, M});
    float *a = matmul_in(best, &node, prepared), *b = matmul_in(avx2, &node, prepared);
    CU_ASSERT_FATAL(a && b);
    int64_t differing = 0;
    for (int64_t i = 0; i < N * M; i++) differing += memcmp(&a[i], &b[i], sizeof *a) != 0;
    if (differing)
        fprintf(stderr, "test_simd_tiers: %s%s K=%lld N=%lld M=%lld %s: %lld of %lld outputs differ\n",
                vt_dtype_name(wtype), prepared ? "" : " (file layout)", (long long)K, (long long)N, (long long)M,
                vt_dtype_name(y_dtype),
                (long long)differing, (long long)(N * M));
    CU_ASSERT_EQUAL(differing, 0);
    free(a);
    free(b);
    vt_harness_node_free(&node);
}

static void check_same_bits_of(int32_t wtype, int64_t K, int64_t N, int64_t M, int32_t y_dtype, uint64_t seed) {
    check_same_bits_in(wtype, K, N, M, y_dtype, seed, true);
}

/* The shapes each prepared dtype's matmul is compared over. */
static void check_shapes(int32_t wtype, uint64_t seed) {
    for (int64_t M = 1; M <= 17; M++) {
        check_same_bits_of(wtype, 256, M % 2 ? 37 : 7, M, VT_F32, seed += 2);
        check_same_bits_of(wtype, 256 * (1 + M % 3), 19, M, VT_F32, seed += 2);
    }
    check_same_bits_of(wtype, 3072, 67, 128, VT_F32, seed += 2);
    check_same_bits_of(wtype, 1024, 300, 128, VT_F32, seed += 2);
    check_same_bits_of(wtype, 3072, 131, 1, VT_F32, seed += 2);
    check_same_bits_of(wtype, 256, 1001, 1, VT_F32, seed += 2);
    check_same_bits_of(wtype, 512, 1001, 8, VT_F32, seed += 2);
    check_same_bits_of(wtype, 256 * 12, 45, 5, VT_F32, seed += 2);
    static const int32_t narrow[] = {VT_F16, VT_BF16};
    for (int i = 0; i < 2; i++) {
        check_same_bits_of(wtype, 512, 19, 1, narrow[i], seed += 2);
        check_same_bits_of(wtype, 512, 21, 6, narrow[i], seed += 2);
        check_same_bits_of(wtype, 768, 45, 128, narrow[i], seed += 2);
    }
}

static void test_q4_k_matmul_same_bits(void) {
    if (tiers_available()) check_shapes(VT_Q4_K, 31000);
}

/* Q5_K's two-group tile: the fifth bits of every quarter, and an odd
 * group left over for the one-group tile. */
static void test_q5_k_matmul_same_bits(void) {
    if (tiers_available()) check_shapes(VT_Q5_K, 32000);
}

static void test_q6_k_matmul_same_bits(void) {
    if (tiers_available()) check_shapes(VT_Q6_K, 33000);
}

/* A weight in the file's layout (read by nodes of several backends, so
 * offered to no prepare hook): the avx512 tier's decode pairs of Q4_K and
 * Q6_K (matmul_q4_k_vnni.c, matmul_q6_k_vnni.c, 1 to 8 activation rows)
 * against the AVX2 kernels (its pair tiles to 4 rows, its L2 tiles beyond),
 * decode (M = 1: the pairs, an odd row out, 1 to 12 blocks), and M = 9 and
 * 128, whose tiles both tiers share. */
static void check_file_layout(int32_t wtype, uint64_t seed) {
    for (int64_t M = 1; M <= 9; M++) check_same_bits_in(wtype, 256 * (1 + M % 3), M % 2 ? 37 : 8, M, VT_F32, seed += 2, false);
    for (int64_t blocks = 1; blocks <= 12; blocks++)
        check_same_bits_in(wtype, 256 * blocks, 2 * blocks + blocks % 2, 1, VT_F32, seed += 2, false);
    check_same_bits_in(wtype, 3072, 1001, 1, VT_F32, seed += 2, false);
    check_same_bits_in(wtype, 1024, 300, 128, VT_F32, seed += 2, false);
    check_same_bits_in(wtype, 512, 19, 1, VT_F16, seed += 2, false);
    check_same_bits_in(wtype, 512, 21, 1, VT_BF16, seed += 2, false);
}

static void test_q4_k_file_layout_same_bits(void) {
    if (tiers_available()) check_file_layout(VT_Q4_K, 36000);
}

static void test_q6_k_file_layout_same_bits(void) {
    if (tiers_available()) check_file_layout(VT_Q6_K, 37000);
}

/* Blocks of 32: also K not a multiple of 256, down to one block. */
static void check_shapes_32(int32_t wtype, uint64_t seed) {
    check_shapes(wtype, seed);
    seed += 1000;
    for (int64_t M = 1; M <= 17; M++) check_same_bits_of(wtype, 32 * (1 + 2 * (M % 5)), 13, M, VT_F32, seed += 2);
    check_same_bits_of(wtype, 32 * 37, 67, 128, VT_F32, seed += 2);
    check_same_bits_of(wtype, 32 * 37, 131, 1, VT_F32, seed += 2);
}

static void test_q8_0_matmul_same_bits(void) {
    if (tiers_available()) check_shapes_32(VT_Q8_0, 34000);
}

static void test_q4_0_matmul_same_bits(void) {
    if (tiers_available()) check_shapes_32(VT_Q4_0, 35000);
}

/* The mixture-of-experts matmul on both tiers, every case `vt backends
 * --test` builds (tokens choosing 2 to 4 of 5 to 8 experts, prefill and
 * decode, activations shared or per expert): all experts are walked in one
 * pass through the same tiles, so the bits must match. */
static void test_moe_matmul_same_bits(void) {
    if (!tiers_available()) return;
    static const int32_t dtypes[] = {VT_Q4_K, VT_Q5_K, VT_Q6_K, VT_Q8_0, VT_Q4_0};
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++)
        for (int phase = VT_PHASE_PREFILL; phase <= VT_PHASE_DECODE; phase++) {
            const int n = vt_op_case_count(VT_OP_MOE_MATMUL, dtypes[d], (vt_phase)phase);
            CU_ASSERT(n > 0);
            for (int i = 0; i < n; i++) {
                vt_op_case c;
                vt_error err = {0};
                CU_ASSERT_EQUAL_FATAL(vt_op_case_build(VT_OP_MOE_MATMUL, dtypes[d], (vt_phase)phase, i, 36000, &c, &err),
                                      VT_OK);
                float *a = matmul_on(best, &c.node), *b = matmul_on(avx2, &c.node);
                CU_ASSERT_FATAL(a && b);
                const int64_t count = vt_harness_nelements(&c.node.dst);
                int64_t differing = 0;
                for (int64_t k = 0; k < count; k++) differing += memcmp(&a[k], &b[k], sizeof *a) != 0;
                if (differing)
                    fprintf(stderr, "test_simd_tiers: moe_matmul %s %s case %d: %lld of %lld outputs differ\n",
                            vt_dtype_name(dtypes[d]), phase == VT_PHASE_PREFILL ? "prefill" : "decode", i,
                            (long long)differing, (long long)count);
                CU_ASSERT_EQUAL(differing, 0);
                free(a);
                free(b);
                vt_op_case_free(&c);
            }
        }
}

/* Whether the best tier attends over BF16 caches in bf16 (its isa line says
 * so: AVX-512 BF16, kv_bf16_chunk.h, for head dims that are multiples of
 * 64). Those rounds are its own numbers, not the AVX2 tier's: test_simd_ops
 * holds them to reference's within their derived bound and checks their
 * batch invariance on every path. */
static bool best_attends_bf16(int32_t kv_dtype, int64_t D) {
    char isa[VT_BACKEND_ISA_MAX];
    const vt_backend_entry *simd = vt_harness_backend(best, "simd");
    return simd && vt_test_simd_attends_in_bf16(vt_backend_isa(simd, isa, sizeof isa), kv_dtype, D);
}

/* One attention call on both tiers: the outputs' bits must be equal (but
 * for best_attends_bf16). tables: the sequences' block tables, or NULL for
 * the harness's. */
static int attended_in_bf16; /* cases best_attends_bf16 left to test_simd_ops */

static void check_attention_same_bits(const vt_harness_attn_case *c, int32_t kv_dtype, const int32_t *pos,
                                      const int32_t *seq, int phase, uint64_t seed, const int32_t *tables) {
    if (best_attends_bf16(kv_dtype, c->D)) {
        attended_in_bf16++;
        return;
    }
    vt_node node = vt_harness_attention_node(c, kv_dtype, pos, seq, phase, seed);
    if (tables) {
        vt_harness_tensor_free(&node.src[3]);
        vt_harness_set_src(&node, 3, vt_harness_block_tables(c->n_seqs, c->max_blocks, tables));
    }
    vt_node other = vt_harness_node_copy(&node);
    CU_ASSERT_EQUAL_FATAL(vt_harness_run(best, "simd", &node), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_harness_run(avx2, "simd", &other), VT_OK);
    const int64_t n = c->D * c->H * c->T;
    int64_t differing = 0;
    for (int64_t i = 0; i < n; i++)
        differing += memcmp((const float *)node.dst.data + i, (const float *)other.dst.data + i, sizeof(float)) != 0;
    if (differing)
        fprintf(stderr, "test_simd_tiers: attention %s D=%lld H=%lld KVH=%lld T=%lld: %lld of %lld outputs differ\n",
                vt_dtype_name(kv_dtype), (long long)c->D, (long long)c->H, (long long)c->KVH, (long long)c->T,
                (long long)differing, (long long)n);
    CU_ASSERT_EQUAL(differing, 0);
    vt_harness_node_free(&other);
    vt_harness_node_free(&node);
}

/* The avx512 tier's attention lets four queries share each row it loads;
 * per query it runs the AVX2 tier's operations in their order. Every cache
 * dtype; query groups of 1, 2 and 8 heads per kv head (so a group of four
 * queries spans one to four tokens, or a quarter of a token's heads); a
 * prompt whose causal diagonal cuts through groups; a head dim with a
 * scalar tail; a continuation chunk; decodes of several sequences, over
 * their own blocks and over shared ones; Q8_0 rows of 1 and 8 blocks. */
static void test_attention_same_bits(void) {
    if (!tiers_available()) return;
    static const int32_t dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};
    static const int64_t heads[][2] = {{8, 8}, {16, 8}, {32, 4}};
    int32_t pos[70], seq[70];
    uint64_t seed = 32000;
    for (int k = 0; k < 4; k++)
        for (int h = 0; h < 3; h++) {
            /* a prompt's second part, 70..139: its run crosses a span edge (128) */
            const vt_harness_attn_case prompt = {.D = 128, .H = heads[h][0], .KVH = heads[h][1], .BS = 16,
                                                 .n_blocks = 11, .n_seqs = 1, .max_blocks = 9, .T = 70};
            for (int t = 0; t < 70; t++) pos[t] = 70 + t, seq[t] = 0;
            check_attention_same_bits(&prompt, dtypes[k], pos, seq, VT_PHASE_PREFILL, seed++, NULL);
            const vt_harness_attn_case tail = {.D = dtypes[k] == VT_Q8_0 ? 96 : 40, .H = heads[h][0],
                                               .KVH = heads[h][1], .BS = 5, .n_blocks = 17, .n_seqs = 2,
                                               .max_blocks = 12, .T = 23};
            for (int t = 0; t < 23; t++) pos[t] = 30 + t, seq[t] = 1;
            check_attention_same_bits(&tail, dtypes[k], pos, seq, VT_PHASE_PREFILL, seed++, NULL);
            const vt_harness_attn_case decode = {.D = 128, .H = heads[h][0], .KVH = heads[h][1], .BS = 16,
                                                 .n_blocks = 23, .n_seqs = 3, .max_blocks = 7, .T = 3};
            const int32_t dpos[] = {5, 64, 100}, dseq[] = {2, 0, 1};
            check_attention_same_bits(&decode, dtypes[k], dpos, dseq, VT_PHASE_DECODE, seed++, NULL);
            /* eighteen sequences decoding over 16 blocks they share (two
             * spans read once for groups of up to 16 tokens), two over
             * their own */
            enum { SEQS = 20, MAX_BLOCKS = 20, SHARED = 16 };
            int32_t tables[SEQS * MAX_BLOCKS], spos[SEQS], sseq[SEQS];
            for (int s = 0; s < SEQS; s++) {
                for (int b = 0; b < MAX_BLOCKS; b++)
                    tables[s * MAX_BLOCKS + b] = s < 18 && b < SHARED ? b : SHARED + s * MAX_BLOCKS + b;
                spos[s] = 256 + (s * 13) % 60, sseq[s] = s;
            }
            const vt_harness_attn_case shared = {.D = 128, .H = heads[h][0], .KVH = heads[h][1], .BS = 16,
                                                 .n_blocks = SHARED + SEQS * MAX_BLOCKS, .n_seqs = SEQS,
                                                 .max_blocks = MAX_BLOCKS, .T = SEQS};
            check_attention_same_bits(&shared, dtypes[k], spos, sseq, VT_PHASE_DECODE, seed++, tables);
            /* blocks of 48 (one straddles two spans), a head dim with a
             * scalar tail, 3 sequences sharing 200 positions: few spans, so
             * the kv heads are split between items too */
            int32_t otables[3 * 8];
            for (int s = 0; s < 3; s++)
                for (int b = 0; b < 8; b++) otables[s * 8 + b] = b < 5 ? b : 5 + s * 8 + b;
            const int32_t opos[] = {127, 63, 130}, oseq[] = {1, 2, 0};
            const vt_harness_attn_case odd = {.D = dtypes[k] == VT_Q8_0 ? 96 : 40, .H = heads[h][0],
                                              .KVH = heads[h][1], .BS = 48, .n_blocks = 5 + 3 * 8, .n_seqs = 3,
                                              .max_blocks = 8, .T = 3};
            check_attention_same_bits(&odd, dtypes[k], opos, oseq, VT_PHASE_DECODE, seed++, otables);
        }
    /* a Q8_0 cache's smallest and a large head dim (1 and 8 blocks a row):
     * a prompt, and decodes */
    for (int d = 0; d < 2; d++) {
        const int64_t D = d ? 256 : 32;
        const vt_harness_attn_case prompt = {.D = D, .H = 8, .KVH = 4, .BS = 16, .n_blocks = 11, .n_seqs = 1,
                                             .max_blocks = 9, .T = 70};
        for (int t = 0; t < 70; t++) pos[t] = 70 + t, seq[t] = 0;
        check_attention_same_bits(&prompt, VT_Q8_0, pos, seq, VT_PHASE_PREFILL, seed++, NULL);
        const vt_harness_attn_case decode = {.D = D, .H = 8, .KVH = 4, .BS = 16, .n_blocks = 23, .n_seqs = 3,
                                             .max_blocks = 7, .T = 3};
        const int32_t dpos[] = {5, 64, 100}, dseq[] = {2, 0, 1};
        check_attention_same_bits(&decode, VT_Q8_0, dpos, dseq, VT_PHASE_DECODE, seed++, NULL);
    }
    if (attended_in_bf16)
        printf("\n  %d BF16-cache cases the avx512 tier attends in bf16 here: held to reference in test_simd_ops, "
               "not to the avx2 tier's bits\n",
               attended_in_bf16);
}

/* The real engine path: greedy tokens of a Q4_K_M model at both tiers. */
static void test_engine_same_tokens(void) {
    if (!tiers_available()) return;
    const char *dir = vt_test_data_dir("test models");
    if (!dir) return;
    char *out[2] = {NULL, NULL};
    static const char *const tiers[2] = {"", "--backend-option simd.isa=avx2"};
    for (int t = 0; t < 2; t++) {
        int rc = vt_test_run_vt_checked(&out[t], NULL,
                                        "run -m '%s/models/qwen3-tiny-q4_k_m.gguf' --backend simd --tokens 1,2,3,4,5 "
                                        "-n 24 --temp 0 --ignore-eos -c 64 --ids %s",
                                        dir, tiers[t]);
        CU_ASSERT_EQUAL(rc, 0);
    }
    CU_ASSERT_FATAL(out[0] && out[1]);
    CU_ASSERT(strlen(out[0]) > 0);
    CU_ASSERT_STRING_EQUAL(out[0], out[1]);
    free(out[0]);
    free(out[1]);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"each simd instance reports the tier it runs", test_each_instance_runs_its_tier},
        {"Q4_K matmul: the avx512 and avx2 tiers agree bit for bit", test_q4_k_matmul_same_bits},
        {"Q5_K matmul: the avx512 and avx2 tiers agree bit for bit", test_q5_k_matmul_same_bits},
        {"Q6_K matmul: the avx512 and avx2 tiers agree bit for bit", test_q6_k_matmul_same_bits},
        {"Q4_K matmul on the file's layout: the tiers agree bit for bit", test_q4_k_file_layout_same_bits},
        {"Q6_K matmul on the file's layout: the tiers agree bit for bit", test_q6_k_file_layout_same_bits},
        {"Q8_0 matmul: the avx512 and avx2 tiers agree bit for bit", test_q8_0_matmul_same_bits},
        {"Q4_0 matmul: the avx512 and avx2 tiers agree bit for bit", test_q4_0_matmul_same_bits},
        {"MoE matmul: the avx512 and avx2 tiers agree bit for bit", test_moe_matmul_same_bits},
        {"attention: the avx512 and avx2 tiers agree bit for bit", test_attention_same_bits},
        {"greedy tokens through the engine are the same at both tiers", test_engine_same_tokens},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("simd_tiers", suite_init, suite_cleanup, tests);
    return vt_test_run();
}
