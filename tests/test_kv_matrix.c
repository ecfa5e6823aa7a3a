/* test_kv_matrix.c — every built backend x KV-cache dtype (f32, f16, bf16, q8_0) x
 * architecture (llama, qwen3) x weights (F32, Q8_0, Q4_K_M), end to end
 * through the real engine: GGUF file -> backends -> negotiated plans ->
 * prefill of PREFILL tokens -> DECODE single-token decode steps.
 *
 * Each cell
 *   - completes (engine built, every eval VT_OK, the plan check on);
 *   - agrees with the reference backend at the same KV-cache dtype on all
 *     PREFILL + DECODE rows of logits within tolerance(backend, cache dtype),
 *     a bound below the logit shift a store of the wrong dtype causes (shown
 *     live, and by a deliberately wrong plugin), and has the same argmax
 *     wherever the reference's top-1/top-2 gap exceeds twice that bound;
 *   - stores k/v of every layer into that layer's cache of the dtype asked
 *     for, k and v in a dtype that keeps its precision;
 *   - shows in its plans that the chosen backend runs matmul, attention and
 *     reshape_and_cache itself wherever its supports() accepts them, and at
 *     least the nodes it is known to take (expected_claims), so a backend that
 *     declines its own core ops and lets the reference do the work fails.
 * The models are tiny (256 wide, 2 layers, vocabulary 300) so the 72 cells
 * run in seconds, also under ASan. Decode steps are teacher-forced with fixed
 * tokens, so every cell sees the same inputs whatever it predicts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "plan_exec.h"
#include "quant.h"
#include "sampler.h"
#include "synth.h"
#include "util.h"

#define PREFILL 20
#define DECODE 8
#define ROWS (PREFILL + DECODE)
#define N_VOCAB 300
#define MAX_BACKENDS 16

static const char *const archs[] = {"llama", "qwen3"};
static const char *const weight_types[] = {"f32", "q8_0", "q4_k_m"};
static const int32_t cache_dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};
#define N_ARCH 2
#define N_WEIGHTS 3
#define N_CACHE 4

static char model_paths[N_ARCH][N_WEIGHTS][1024];
static char backends[MAX_BACKENDS][64];
static int n_backends;

/* 256 wide so Q4_K (256-element blocks) really is Q4_K on every matrix. */
static int synth_models(void) {
    for (int a = 0; a < N_ARCH; a++)
        for (int w = 0; w < N_WEIGHTS; w++) {
            vt_synth_params p = {0};
            p.arch = archs[a];
            p.n_embd = 256;
            p.n_layer = 2;
            p.n_head = 4;
            p.n_head_kv = 2;
            p.head_dim = 64;
            p.n_ff = 512;
            p.n_vocab = N_VOCAB;
            p.n_ctx = 256;
            p.type = weight_types[w];
            p.seed = 1000u + (uint64_t)(a * N_WEIGHTS + w);
            char name[64];
            snprintf(name, sizeof name, "matrix-%s-%s.gguf", archs[a], weight_types[w]);
            vt_test_tmpfile(model_paths[a][w], sizeof model_paths[a][w], name);
            vt_error err = {0};
            if (vt_synth_write(&p, model_paths[a][w], &err) != VT_OK) {
                fprintf(stderr, "synth %s: %s\n", name, err.msg);
                return 1;
            }
        }
    return 0;
}

/* The backends that are built and load, as the engine's registry sees them. */
static int list_backends(void) {
    vt_fixture f;
    if (vt_fixture_open(&f, model_paths[0][0], "reference", VT_F32, false) != VT_OK) return 1;
    for (int i = 0; i < vt_registry_count(f.engine->registry) && n_backends < MAX_BACKENDS; i++) {
        const vt_backend_entry *b = vt_registry_at(f.engine->registry, i);
        if (b->state == VT_BACKEND_LOADED) snprintf(backends[n_backends++], sizeof backends[0], "%s", b->name);
    }
    vt_fixture_close(&f);
    printf("backends under test:");
    for (int i = 0; i < n_backends; i++) printf(" %s", backends[i]);
    printf("\n");
    return 0;
}

static int suite_init(void) { return synth_models() || list_backends(); }

/* The fixed token stream: PREFILL prompt tokens, then DECODE teacher-forced ones. */
static int32_t token_at(int i) { return (int32_t)((i * 37 + 11) % N_VOCAB); }

/* Run a cell; logits [ROWS][N_VOCAB] into out. False (with a message) on
 * error. plugin_dir: also search there for backends (NULL = the built ones). */
static bool run_cell(const char *path, const char *backend, int32_t cache, const char *plugin_dir, float *out,
                     vt_fixture *f) {
    memset(f, 0, sizeof *f);
    vt_options o;
    vt_fixture_options(&o, backend, cache);
    if (plugin_dir) snprintf(o.backend_path, sizeof o.backend_path, "%s", plugin_dir);
    /* onednn in f32 (its default where the CPU has no bf16 in hardware):
     * these cells tell cache dtypes apart by logit shifts of 2e-3 and less,
     * which bf16 matmuls (onednn's default elsewhere, tested in test_golden)
     * would hide, as 8-bit activations do for quantized simd below. */
    if (strcmp(backend, "onednn") == 0) snprintf(o.backend_options, sizeof o.backend_options, "onednn.precision=f32\n");
    if (vt_model_load(path, &f->model, &f->err) != VT_OK ||
        vt_engine_create(&o, f->model, true, &f->engine, &f->err) != VT_OK)
        goto fail;
    int32_t prompt[PREFILL];
    for (int i = 0; i < PREFILL; i++) prompt[i] = token_at(i);
    if (vt_engine_eval(f->engine, prompt, PREFILL, false, &f->err) != VT_OK) goto fail;
    for (int i = 0; i < PREFILL; i++) memcpy(out + (size_t)i * N_VOCAB, vt_engine_logits(f->engine, i), N_VOCAB * sizeof *out);
    for (int s = 0; s < DECODE; s++) {
        int32_t t = token_at(PREFILL + s);
        if (vt_engine_eval(f->engine, &t, 1, true, &f->err) != VT_OK) goto fail;
        memcpy(out + (size_t)(PREFILL + s) * N_VOCAB, vt_engine_logits(f->engine, 0), N_VOCAB * sizeof *out);
    }
    return true;
fail:
    printf("\n%s on %s, %s cache: %s\n", path, backend, vt_dtype_name(cache), f->err.msg);
    vt_fixture_close(f);
    return false;
}

/* max |a - b| over all ROWS x N_VOCAB logits. */
static double max_abs_diff(const float *a, const float *b) {
    double worst = 0;
    for (size_t i = 0; i < (size_t)ROWS * N_VOCAB; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst;
}

/* Bound on |logit - reference logit|, the reference running at the same
 * cache dtype, so a cell is held to its own kernels' error and nothing of
 * the cache's rounding is forgiven. Logits of these random models are small
 * (max |logit| 1.37). Measured worst cells over the 6 models on this machine
 * (Zen 3, 2 threads), and the bounds:
 *                        f32 cache        f16 cache        bf16 cache       q8_0 cache
 *   onednn               1.0e-6 -> 1e-5   9.3e-5 -> 2e-4   2.5e-4 -> 1e-3   3.3e-4 -> 2e-3
 *   simd, f32 weights    4.4e-7 -> 1e-5   2.7e-5 -> 1e-4   5.4e-5 -> 1e-3   5.3e-4 -> 2e-3
 *   simd, Q8_0/Q4_K_M    2.1e-2 -> 0.1    2.1e-2 -> 0.1    2.1e-2 -> 0.1    2.6e-2 -> 0.1
 *   reference kernels    0 -> 1e-6 (test plugins forwarding to the reference)
 * A q8_0 cache holds the same bytes on every backend when k/v agree (one
 * quantizer, vt_backend.h), so its cells differ from the reference only
 * where a k/v difference of ~1e-6 flips one int8 rounding (onednn's 3.3e-4);
 * its bound leaves room for a few such flips. simd's attention also rounds
 * each query to 16 bits per block of 32 for its integer dot products with
 * the cached int8 (kv_q8_0.c): its 5.3e-4 on qwen3, whose normed queries
 * make large scores (an 8-bit query moved the same cell by 7e-3, past the
 * shifts below, which is why it is 16).
 * onednn runs prefill matmul only, in f32 (precision=f32, run_cell) with
 * another summation order than the reference's double; its 1e-6 differences in k/v flip a few f16/bf16
 * roundings of the cache, hence the larger error at 16-bit caches. simd on
 * quantized weights rounds activations to 8 bits for its integer dot
 * products, as llama.cpp does.
 *
 * What a store of the wrong dtype costs: the reference's own logit shift
 * between cache dtypes, the smallest over the 6 models (printed by the test):
 *   f32 stored instead of f16    2.6e-4   > every f16 bound (2e-4 at most)
 *   bf16 stored instead of f16   2.3e-3
 *   f16 stored instead of f32    2.6e-4   > every f32 bound (1e-5)
 *   bf16 stored instead of f32   2.2e-3
 *   f32/f16 instead of bf16      2.2e-3   > every bf16 bound (1e-3)
 *   f32/f16/bf16 instead of q8_0 6.2e-3   > every q8_0 bound (2e-3)
 *   q8_0 instead of f32/f16/bf16 6.2e-3
 * and on the qwen3/f32 model of test_wrong_store_dtype_is_rejected: f32
 * instead of f16 4.2e-4, bf16 instead of f16 (kv_wrong_store) 2.9e-3, f16
 * instead of f32 (kv_wrong_store) 4.2e-4. Every bound except quantized
 * simd's is below the smallest shift, which the test asserts on the live
 * measurement, so a backend storing the wrong dtype fails its cell. Quantized
 * simd cells cannot see it: their 8-bit activations move logits 10-100x more
 * than any cache dtype does; their store is the same simd kernel that the
 * f32-weight cells hold to 1e-5..1e-3.
 *
 * simd's avx512 tier on a CPU with AVX-512 BF16 attends over a BF16 cache
 * in bf16 (kv_bf16_chunk.h: queries and softmax weights rounded to bf16,
 * its isa line's "bf16 attention"): measured 1.1e-3 (llama) and 2.8e-3
 * (qwen3) on the f32-weight cells, on an AMD EPYC with AVX-512 BF16, so
 * 1e-2. That bound cannot see a wrong store into a bf16 cache (2.2e-3); the
 * store there is the AVX2 tier's kernel, which the same cells hold to 1e-3
 * on a CPU without AVX-512 BF16 and test_simd_ops checks on every CPU. */
static bool simd_attends_bf16; /* set by the first simd cell (its isa line) */

static double tolerance(const char *backend, int32_t cache, const char *weights) {
    if (strcmp(backend, "simd") == 0 && cache == VT_BF16 && simd_attends_bf16)
        return strcmp(weights, "f32") != 0 ? 0.1 : 1e-2;
    if (strcmp(backend, "onednn") == 0) return cache == VT_F32 ? 1e-5 : cache == VT_F16 ? 2e-4 : cache == VT_BF16 ? 1e-3 : 2e-3;
    if (strcmp(backend, "simd") == 0)
        return strcmp(weights, "f32") != 0 ? 0.1 : cache == VT_F32 ? 1e-5 : cache == VT_F16 ? 1e-4 : cache == VT_BF16 ? 1e-3 : 2e-3;
    if (strcmp(backend, "reference") == 0 || strncmp(backend, "kv_", 3) == 0) return 1e-6;
    return 0.1; /* a backend not measured here */
}

/* Does a cell's bound see a store of the wrong dtype? (See tolerance().) */
static bool bound_sees_wrong_dtype(const char *backend, const char *weights, int32_t cache) {
    return !(strcmp(backend, "simd") == 0 && strcmp(weights, "f32") != 0) &&
           !(strcmp(backend, "simd") == 0 && cache == VT_BF16 && simd_attends_bf16) &&
           (strcmp(backend, "simd") == 0 || strcmp(backend, "onednn") == 0 || strcmp(backend, "reference") == 0 ||
            strncmp(backend, "kv_", 3) == 0);
}

/* A cell's logits against the reference's at the same cache dtype: within
 * tol everywhere, and the same argmax wherever the reference's top-1/top-2
 * gap exceeds twice tol. Returns the max |dlogit|; *bad_argmax and
 * *argmax_checked get the counts. */
static double compare_cell(const float *ref, const float *got, double tol, int *bad_argmax, int *argmax_checked) {
    *bad_argmax = 0;
    for (int r = 0; r < ROWS; r++) {
        const float *x = ref + (size_t)r * N_VOCAB, *y = got + (size_t)r * N_VOCAB;
        double top1 = -INFINITY, top2 = -INFINITY;
        for (int i = 0; i < N_VOCAB; i++) {
            if (x[i] > top1) {
                top2 = top1;
                top1 = x[i];
            } else if (x[i] > top2) {
                top2 = x[i];
            }
        }
        if (top1 - top2 > 2 * tol) {
            (*argmax_checked)++;
            *bad_argmax += vt_argmax(x, N_VOCAB) != vt_argmax(y, N_VOCAB);
        }
    }
    return max_abs_diff(ref, got);
}

/* Nodes of these ops a backend must run itself, by phase, beyond what its
 * supports() claims: the minimum that makes it a backend at all. onednn
 * implements matmul only and declines decode matmul by measurement (see
 * backends/onednn/matmul.c), so its floor is prefill matmul. */
typedef struct expected_claims {
    const char *backend;
    bool ops[2][3]; /* [prefill, decode][matmul, attention, reshape_and_cache] */
} expected_claims;
static const expected_claims floors[] = {
    {"reference", {{true, true, true}, {true, true, true}}},
    {"simd", {{true, true, true}, {true, true, true}}},
    {"onednn", {{true, false, false}, {false, false, false}}},
};
static const int32_t core_ops[3] = {VT_OP_MATMUL, VT_OP_ATTENTION, VT_OP_RESHAPE_AND_CACHE};

/* Check one plan: every core-op node the preferred backend accepts runs on
 * it, every node it declines runs on the fallback, and the floor is met.
 * Returns the number of violations (each printed); *runs gets the number of
 * core-op nodes the preferred backend runs. */
static int check_plan(const vt_engine *e, const vt_plan *p, const char *cell, int *runs_out) {
    const vt_backend_entry *pref = vt_registry_at(e->registry, e->preferred);
    const expected_claims *floor = NULL;
    for (size_t i = 0; i < sizeof floors / sizeof *floors; i++)
        if (strcmp(floors[i].backend, pref->name) == 0) floor = &floors[i];
    const int ph = p->phase == VT_PHASE_DECODE ? 1 : 0;
    const char *phase = ph ? "decode" : "prefill";
    int violations = 0, runs_total = 0;
    for (int k = 0; k < 3; k++) {
        int nodes = 0, runs = 0, misplaced = 0;
        for (int32_t i = 0; i < p->n_nodes; i++) {
            const vt_plan_node *n = &p->nodes[i];
            if (n->op != core_ops[k]) continue;
            /* The node exactly as negotiation offered it: data NULL, maximum shapes. */
            vt_node q = n->proto;
            for (int s = 0; s < n->n_src; s++) q.src[s] = vt_plan_value_tensor(p, n->src[s], -1, -1, false);
            if (n->dst >= 0) q.dst = vt_plan_value_tensor(p, n->dst, -1, -1, false);
            bool claims = vt_backend_accepts(pref, &q);
            bool on_pref = n->backend == e->preferred;
            nodes++;
            runs += on_pref;
            /* What it accepts it runs; what it declines runs on the fallback. */
            if (claims != on_pref || (!claims && (e->fallback < 0 || n->backend != e->fallback))) misplaced++;
        }
        if (nodes == 0) {
            printf("\n%s %s: no %s node in the plan", cell, phase, vt_op_name(core_ops[k]));
            violations++;
        }
        if (misplaced) {
            printf("\n%s %s: %d %s nodes placed against %s's claims", cell, phase, misplaced,
                   vt_op_name(core_ops[k]), pref->name);
            violations += misplaced;
        }
        if (floor && floor->ops[ph][k] && runs != nodes) {
            printf("\n%s %s: %s runs %d of %d %s nodes, expected all", cell, phase, pref->name, runs, nodes,
                   vt_op_name(core_ops[k]));
            violations++;
        }
        runs_total += runs;
    }
    /* A backend without a known floor must still run some core op itself. */
    if (!floor && ph == 0 && runs_total == 0) {
        printf("\n%s: %s runs no matmul, attention or reshape_and_cache node itself", cell, pref->name);
        violations++;
    }
    *runs_out += runs_total;
    return violations;
}

/* Every layer has one store; it writes that layer's cache, of the dtype the
 * cell asked for, and receives k and v in one dtype that keeps the cache's
 * precision (the cache dtype, or f32 which the store rounds once): the
 * built-in backends never need to narrow k/v. */
static void check_kv_edges(const vt_engine *e, const vt_plan *p, int32_t asked) {
    int stores = 0;
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        if (n->op != VT_OP_RESHAPE_AND_CACHE) continue;
        vt_tensor k = vt_plan_value_tensor(p, n->src[0], -1, -1, false);
        vt_tensor v = vt_plan_value_tensor(p, n->src[1], -1, -1, false);
        vt_tensor kc = vt_plan_value_tensor(p, n->src[2], -1, -1, true);
        vt_tensor vc = vt_plan_value_tensor(p, n->src[3], -1, -1, true);
        CU_ASSERT_EQUAL(kc.dtype, asked);
        CU_ASSERT_EQUAL(vc.dtype, asked);
        CU_ASSERT_PTR_EQUAL(kc.data, vt_kv_cache_tensor(e->kv, stores, 0).data);
        CU_ASSERT_PTR_EQUAL(vc.data, vt_kv_cache_tensor(e->kv, stores, 1).data);
        CU_ASSERT_EQUAL(k.dtype, v.dtype);
        CU_ASSERT(k.dtype == asked || k.dtype == VT_F32);
        stores++;
    }
    CU_ASSERT_EQUAL(stores, e->model->hp.n_layer);
}

typedef struct worst {
    double diff; /* max |dlogit| / tolerance over the cells */
    char cell[128];
} worst;

static void test_matrix(void) {
    CU_ASSERT_FATAL(n_backends > 0);
    float *ref[N_CACHE], *got = malloc((size_t)ROWS * N_VOCAB * sizeof *got);
    for (int c = 0; c < N_CACHE; c++) ref[c] = malloc((size_t)ROWS * N_VOCAB * sizeof *ref[c]);
    for (int c = 0; c < N_CACHE; c++) CU_ASSERT_FATAL(ref[c] != NULL);
    CU_ASSERT_FATAL(got != NULL);
    int cells = 0, argmax_checked = 0;
    double max_logit = 0;
    /* [stored][asked]: the smallest, over the models, of the reference's logit shift when the cache holds
     * `stored` instead of `asked` */
    double wrong_shift[N_CACHE][N_CACHE];
    for (int i = 0; i < N_CACHE; i++)
        for (int j = 0; j < N_CACHE; j++) wrong_shift[i][j] = INFINITY;
    worst w = {0, ""};
    for (int a = 0; a < N_ARCH; a++)
        for (int wt = 0; wt < N_WEIGHTS; wt++) {
            const char *path = model_paths[a][wt];
            /* The reference at each cache dtype: the baselines, and the reference's own cells (plans, edges). */
            for (int c = 0; c < N_CACHE; c++) {
                vt_fixture f;
                CU_ASSERT_FATAL(run_cell(path, "reference", cache_dtypes[c], NULL, ref[c], &f));
                int runs = 0;
                char cell[128];
                snprintf(cell, sizeof cell, "reference/%s/%s cache/%s", archs[a], vt_dtype_name(cache_dtypes[c]),
                         weight_types[wt]);
                CU_ASSERT_EQUAL(check_plan(f.engine, f.engine->prefill, cell, &runs), 0);
                CU_ASSERT_EQUAL(check_plan(f.engine, f.engine->decode, cell, &runs), 0);
                check_kv_edges(f.engine, f.engine->prefill, cache_dtypes[c]);
                check_kv_edges(f.engine, f.engine->decode, cache_dtypes[c]);
                vt_fixture_close(&f);
                for (size_t i = 0; i < (size_t)ROWS * N_VOCAB; i++) max_logit = fmax(max_logit, fabs(ref[c][i]));
                cells++;
            }
            for (int i = 0; i < N_CACHE; i++)
                for (int j = 0; j < N_CACHE; j++)
                    if (i != j) wrong_shift[i][j] = fmin(wrong_shift[i][j], max_abs_diff(ref[i], ref[j]));
            for (int b = 0; b < n_backends; b++) {
                if (strcmp(backends[b], "reference") == 0) continue; /* the baseline itself */
                for (int c = 0; c < N_CACHE; c++) {
                    char cell[128];
                    snprintf(cell, sizeof cell, "%s/%s/%s cache/%s", backends[b], archs[a], vt_dtype_name(cache_dtypes[c]),
                             weight_types[wt]);
                    vt_fixture f;
                    bool ok = run_cell(path, backends[b], cache_dtypes[c], NULL, got, &f);
                    CU_ASSERT(ok);
                    if (!ok) continue;
                    CU_ASSERT_STRING_EQUAL(vt_registry_at(f.engine->registry, f.engine->preferred)->name, backends[b]);
                    CU_ASSERT_EQUAL(f.engine->kv->dtype, cache_dtypes[c]);
                    if (strcmp(backends[b], "simd") == 0) {
                        char isa[VT_BACKEND_ISA_MAX];
                        simd_attends_bf16 = vt_isa_line_attends_bf16(
                            vt_backend_isa(vt_registry_at(f.engine->registry, f.engine->preferred), isa, sizeof isa));
                    }
                    int runs = 0;
                    CU_ASSERT_EQUAL(check_plan(f.engine, f.engine->prefill, cell, &runs), 0);
                    CU_ASSERT_EQUAL(check_plan(f.engine, f.engine->decode, cell, &runs), 0);
                    check_kv_edges(f.engine, f.engine->prefill, cache_dtypes[c]);
                    check_kv_edges(f.engine, f.engine->decode, cache_dtypes[c]);
                    double tol = tolerance(backends[b], cache_dtypes[c], weight_types[wt]);
                    int bad_argmax = 0;
                    double max_diff = compare_cell(ref[c], got, tol, &bad_argmax, &argmax_checked);
                    printf("\n  %-36s max|dlogit| %.3g (tol %.3g), %d core-op nodes on %s", cell, max_diff, tol, runs,
                           backends[b]);
                    CU_ASSERT(max_diff <= tol);
                    CU_ASSERT_EQUAL(bad_argmax, 0);
                    if (max_diff / tol > w.diff) {
                        w.diff = max_diff / tol;
                        snprintf(w.cell, sizeof w.cell, "%s", cell);
                    }
                    vt_fixture_close(&f);
                    cells++;
                }
            }
        }
    printf("\nmax |logit| of the reference %.3g", max_logit);
    printf("\n%d cells; %d rows had a gap wide enough for an argmax check; worst |dlogit|/tol %.2f at %s", cells,
           argmax_checked, w.diff, w.cell);
    /* The bounds are tight enough to see a store of the wrong dtype: each is
     * below the smallest logit shift such a store causes (see tolerance()). */
    for (int asked = 0; asked < N_CACHE; asked++)
        for (int stored = 0; stored < N_CACHE; stored++) {
            if (stored == asked) continue;
            printf("\n%s stored instead of %s: reference logits move by >= %.3g", vt_dtype_name(cache_dtypes[stored]),
                   vt_dtype_name(cache_dtypes[asked]), wrong_shift[stored][asked]);
            for (int b = 0; b < n_backends; b++)
                for (int wt = 0; wt < N_WEIGHTS; wt++) {
                    if (!bound_sees_wrong_dtype(backends[b], weight_types[wt], cache_dtypes[asked])) continue;
                    double tol = tolerance(backends[b], cache_dtypes[asked], weight_types[wt]);
                    if (tol >= wrong_shift[stored][asked])
                        printf("\n  bound %.3g of %s/%s/%s cache cannot see it", tol, backends[b], weight_types[wt],
                               vt_dtype_name(cache_dtypes[asked]));
                    CU_ASSERT(tol < wrong_shift[stored][asked]);
                }
        }
    printf("\n");
    CU_ASSERT_EQUAL(cells, n_backends * N_ARCH * N_WEIGHTS * N_CACHE);
    for (int c = 0; c < N_CACHE; c++) free(ref[c]);
    free(got);
}

/* The matrix check rejects a store of the wrong dtype:
 *   - kv_wrong_store (tests/plugins) runs the reference's kernels but rounds
 *     k/v through bf16 into an f16 cache and through f16 into an f32 one;
 *     into a bf16 cache it stores correctly (no float dtype is narrower) and
 *     must pass, so the check tells the two apart;
 *   - the reference with an f32 cache checked as if it were an f16 cell
 *     (what a lever that left the cache at f32 would give), against the f16
 *     bound of every backend whose bound should see it.
 * The plugin's cells are held to the bound a reference-kernel cell gets. */
static void test_wrong_store_dtype_is_rejected(void) {
    float *ref = malloc((size_t)ROWS * N_VOCAB * sizeof *ref), *got = malloc((size_t)ROWS * N_VOCAB * sizeof *got);
    CU_ASSERT_FATAL(ref && got);
    const char *path = model_paths[1][0]; /* qwen3, f32 weights */
    for (int c = 0; c < N_CACHE; c++) {
        if (!vt_dtype_is_float(cache_dtypes[c])) continue; /* the plugin's wrong stores are float ones */
        vt_fixture f;
        CU_ASSERT_FATAL(run_cell(path, "reference", cache_dtypes[c], NULL, ref, &f));
        vt_fixture_close(&f);
        CU_ASSERT_FATAL(run_cell(path, "kv_wrong_store", cache_dtypes[c], VT_TEST_PLUGIN_DIR, got, &f));
        check_kv_edges(f.engine, f.engine->prefill, cache_dtypes[c]); /* the plan looks right */
        check_kv_edges(f.engine, f.engine->decode, cache_dtypes[c]);
        vt_fixture_close(&f);
        double tol = tolerance("kv_wrong_store", cache_dtypes[c], "f32");
        int bad_argmax = 0, checked = 0;
        double diff = compare_cell(ref, got, tol, &bad_argmax, &checked);
        const bool wrong = cache_dtypes[c] != VT_BF16;
        printf("\n  kv_wrong_store, %s cache (%s): max|dlogit| %.3g vs bound %.3g", vt_dtype_name(cache_dtypes[c]),
               wrong ? "wrong store, must exceed" : "right store, must pass", diff, tol);
        CU_ASSERT(wrong ? diff > tol : diff <= tol);
    }
    vt_fixture f;
    CU_ASSERT_FATAL(run_cell(path, "reference", VT_F16, NULL, ref, &f));
    vt_fixture_close(&f);
    CU_ASSERT_FATAL(run_cell(path, "reference", VT_F32, NULL, got, &f));
    vt_fixture_close(&f);
    const char *const real[] = {"reference", "onednn", "simd"};
    for (size_t b = 0; b < sizeof real / sizeof *real; b++) {
        double tol = tolerance(real[b], VT_F16, "f32");
        int bad_argmax = 0, checked = 0;
        double diff = compare_cell(ref, got, tol, &bad_argmax, &checked);
        printf("\n  f32 stored for an f16 cache: max|dlogit| %.3g vs %s's f16 bound %.3g (must exceed)", diff, real[b],
               tol);
        CU_ASSERT(diff > tol);
    }
    printf("\n");
    free(ref);
    free(got);
}

/* The plan check bites: a backend that declines every core op (the test
 * plugin good_minimal runs rms_norm only), and a plan where one node the
 * preferred backend accepts was moved to the fallback, are both reported. */
static void test_plan_check_rejects_decliners(void) {
    vt_options o;
    vt_fixture_options(&o, "good_minimal", VT_F32);
    snprintf(o.backend_path, sizeof o.backend_path, "%s", VT_TEST_PLUGIN_DIR);
    vt_model *m = NULL;
    vt_engine *e = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_paths[1][2], &m, &err), VT_OK);
    vt_status st = vt_engine_create(&o, m, false, &e, &err);
    if (st != VT_OK) printf("\n%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    int runs = 0;
    CU_ASSERT(check_plan(e, e->prefill, "good_minimal (expected to fail)", &runs) > 0);
    CU_ASSERT_EQUAL(runs, 0);
    vt_engine_free(e);

    /* Any second backend that accepts matmul will do as the fallback: a test
     * plugin, so this runs whatever backends are built. */
    vt_fixture_options(&o, "reference", VT_F32);
    snprintf(o.fallback, sizeof o.fallback, "kv_widen_store");
    snprintf(o.backend_path, sizeof o.backend_path, "%s", VT_TEST_PLUGIN_DIR);
    st = vt_engine_create(&o, m, false, &e, &err);
    if (st != VT_OK) printf("\n%s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    runs = 0;
    CU_ASSERT_EQUAL(check_plan(e, e->decode, "reference", &runs), 0);
    for (int32_t i = 0; i < e->decode->n_nodes; i++)
        if (e->decode->nodes[i].op == VT_OP_MATMUL) {
            e->decode->nodes[i].backend = e->fallback; /* as a builder that ignored the claim would */
            break;
        }
    CU_ASSERT(check_plan(e, e->decode, "reference with a moved matmul (expected to fail)", &runs) > 0);
    vt_engine_free(e);
    vt_model_free(m);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"backend x kv dtype x arch x weights: completes, agrees with the reference at the same kv dtype, runs what "
         "it claims", test_matrix},
        {"a store of the wrong dtype fails the matrix check", test_wrong_store_dtype_is_rejected},
        {"the plan check reports a backend that declines its core ops, and a misplaced node",
         test_plan_check_rejects_decliners},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("kv_matrix", suite_init, NULL, tests);
    return vt_test_run();
}
