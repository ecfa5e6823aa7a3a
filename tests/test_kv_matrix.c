/* test_kv_matrix.c — every built backend x KV-cache dtype (f32, f16, bf16) x
 * architecture (llama, qwen3) x weights (F32, Q8_0, Q4_K_M), end to end
 * through the real engine: GGUF file -> backends -> negotiated plans ->
 * prefill of PREFILL tokens -> DECODE single-token decode steps.
 *
 * Each cell
 *   - completes (engine built, every eval VT_OK);
 *   - agrees with the reference backend at an f32 cache on all PREFILL +
 *     DECODE rows of logits within tolerance(backend, cache dtype), and has
 *     the same argmax wherever the reference's top-1/top-2 gap exceeds twice
 *     that tolerance;
 *   - shows in its plans that the chosen backend runs matmul, attention and
 *     reshape_and_cache itself wherever its supports() accepts them, and at
 *     least the nodes it is known to take (expected_claims), so a backend that
 *     declines its own core ops and lets the reference do the work fails.
 * The models are tiny (256 wide, 2 layers, vocabulary 300) so the 54 cells
 * run in seconds, also under ASan. Decode steps are teacher-forced with fixed
 * tokens, so every cell sees the same inputs whatever it predicts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "plan_internal.h"
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
static const int32_t cache_dtypes[] = {VT_F32, VT_F16, VT_BF16};
#define N_ARCH 2
#define N_WEIGHTS 3
#define N_CACHE 3

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

/* Run a cell; logits [ROWS][N_VOCAB] into out. False (with a message) on error. */
static bool run_cell(const char *path, const char *backend, int32_t cache, float *out, vt_fixture *f) {
    if (vt_fixture_open(f, path, backend, cache, true) != VT_OK) return false;
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

/* Tolerance on |logit - reference logit| (the reference at an f32 cache).
 * Logits of these random models are small (max |logit| is printed; ~1).
 * Measured worst cells over the 6 models on this machine, and the bounds
 * (2.5-10x the measurement, so noise from other summation orders passes and
 * a real bug - a wrong k/v dtype, slot or kernel, which moves logits by
 * O(0.1..1) - does not):
 *   reference, f32 cache:  0 (the same code as the baseline)       -> 1e-6
 *   onednn, f32 cache:     1.1e-6 (f32 gemm vs double accumulation) -> 1e-5
 *   simd, f32 weights:     3.6e-7 (FMA on float weights)            -> 1e-5
 *   simd, Q8_0/Q4_K_M:     2.9e-2 (activations rounded to 8 bits for
 *                          the integer dot products; tests/golden's README
 *                          sees up to 0.095 on such models)         -> 0.1
 *   f16 cache adds:        3.7e-4 (11 significant bits)             -> 1e-3
 *   bf16 cache adds:       4.0e-3 (8 significant bits)              -> 1e-2 */
static double tolerance(const char *backend, int32_t cache, const char *weights) {
    double cache_term = cache == VT_F16 ? 1e-3 : cache == VT_BF16 ? 1e-2 : 0.0;
    if (strcmp(backend, "reference") == 0) return 1e-6 + cache_term;
    if (strcmp(backend, "onednn") == 0) return 1e-5 + cache_term;
    if (strcmp(backend, "simd") == 0 && strcmp(weights, "f32") == 0) return 1e-5 + cache_term;
    return 0.1 + cache_term; /* simd on quantized weights, and any backend not measured here */
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
            printf("\n%s %s: no %s node in the plan", cell, phase, vt_op_names[core_ops[k]]);
            violations++;
        }
        if (misplaced) {
            printf("\n%s %s: %d %s nodes placed against %s's claims", cell, phase, misplaced,
                   vt_op_names[core_ops[k]], pref->name);
            violations += misplaced;
        }
        if (floor && floor->ops[ph][k] && runs != nodes) {
            printf("\n%s %s: %s runs %d of %d %s nodes, expected all", cell, phase, pref->name, runs, nodes,
                   vt_op_names[core_ops[k]]);
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

/* Every store receives k/v in a dtype, from producers or converts that emit
 * exactly it, and writes the cache of the engine's dtype. */
static void check_kv_edges(const vt_engine *e, const vt_plan *p) {
    int stores = 0;
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const vt_plan_node *n = &p->nodes[i];
        if (n->op != VT_OP_RESHAPE_AND_CACHE) continue;
        stores++;
        vt_tensor k = vt_plan_value_tensor(p, n->src[0], -1, -1, false);
        vt_tensor v = vt_plan_value_tensor(p, n->src[1], -1, -1, false);
        vt_tensor kc = vt_plan_value_tensor(p, n->src[2], -1, -1, false);
        CU_ASSERT_EQUAL(kc.dtype, e->kv->dtype);
        CU_ASSERT_EQUAL(k.dtype, v.dtype);
    }
    CU_ASSERT_EQUAL(stores, e->model->hp.n_layer);
}

typedef struct worst {
    double diff; /* max |dlogit| / tolerance over the cells */
    char cell[128];
} worst;

static void test_matrix(void) {
    CU_ASSERT_FATAL(n_backends > 0);
    float *ref = malloc((size_t)ROWS * N_VOCAB * sizeof *ref), *got = malloc((size_t)ROWS * N_VOCAB * sizeof *got);
    CU_ASSERT_FATAL(ref && got);
    int cells = 0, argmax_checked = 0;
    double max_logit = 0;
    worst w = {0, ""};
    for (int a = 0; a < N_ARCH; a++)
        for (int wt = 0; wt < N_WEIGHTS; wt++) {
            const char *path = model_paths[a][wt];
            vt_fixture f;
            CU_ASSERT_FATAL(run_cell(path, "reference", VT_F32, ref, &f));
            vt_fixture_close(&f);
            for (size_t i = 0; i < (size_t)ROWS * N_VOCAB; i++) max_logit = fmax(max_logit, fabs(ref[i]));
            for (int b = 0; b < n_backends; b++)
                for (int c = 0; c < N_CACHE; c++) {
                    char cell[128];
                    snprintf(cell, sizeof cell, "%s/%s/%s cache/%s", backends[b], archs[a], vt_dtype_name(cache_dtypes[c]),
                             weight_types[wt]);
                    bool ok = run_cell(path, backends[b], cache_dtypes[c], got, &f);
                    CU_ASSERT(ok);
                    if (!ok) continue;
                    CU_ASSERT_STRING_EQUAL(vt_registry_at(f.engine->registry, f.engine->preferred)->name, backends[b]);
                    CU_ASSERT_EQUAL(f.engine->kv->dtype, cache_dtypes[c]);
                    int runs = 0;
                    CU_ASSERT_EQUAL(check_plan(f.engine, f.engine->prefill, cell, &runs), 0);
                    CU_ASSERT_EQUAL(check_plan(f.engine, f.engine->decode, cell, &runs), 0);
                    check_kv_edges(f.engine, f.engine->prefill);
                    check_kv_edges(f.engine, f.engine->decode);
                    double tol = tolerance(backends[b], cache_dtypes[c], weight_types[wt]), max_diff = 0;
                    int bad_argmax = 0;
                    for (int r = 0; r < ROWS; r++) {
                        const float *x = ref + (size_t)r * N_VOCAB, *y = got + (size_t)r * N_VOCAB;
                        double top1 = -INFINITY, top2 = -INFINITY;
                        for (int i = 0; i < N_VOCAB; i++) {
                            max_diff = fmax(max_diff, fabs((double)x[i] - y[i]));
                            if (x[i] > top1) {
                                top2 = top1;
                                top1 = x[i];
                            } else if (x[i] > top2) {
                                top2 = x[i];
                            }
                        }
                        if (top1 - top2 > 2 * tol) {
                            argmax_checked++;
                            bad_argmax += vt_argmax(x, N_VOCAB) != vt_argmax(y, N_VOCAB);
                        }
                    }
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
    printf("\nmax |logit| of the reference %.3g", max_logit);
    printf("\n%d cells; %d rows had a gap wide enough for an argmax check; worst |dlogit|/tol %.2f at %s\n", cells,
           argmax_checked, w.diff, w.cell);
    CU_ASSERT_EQUAL(cells, n_backends * N_ARCH * N_WEIGHTS * N_CACHE);
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

    vt_fixture_options(&o, "reference", VT_F32);
    snprintf(o.fallback, sizeof o.fallback, "simd");
    if (vt_engine_create(&o, m, false, &e, &err) != VT_OK) { /* simd not built here: use onednn as fallback */
        snprintf(o.fallback, sizeof o.fallback, "onednn");
        st = vt_engine_create(&o, m, false, &e, &err);
        if (st != VT_OK) {
            printf("\nSKIP: no second backend to move a node to (%s)\n", err.msg);
            vt_model_free(m);
            return;
        }
    }
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
        {"backend x kv dtype x arch x weights: completes, agrees with reference, runs what it claims", test_matrix},
        {"the plan check reports a backend that declines its core ops, and a misplaced node",
         test_plan_check_rejects_decliners},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("kv_matrix", suite_init, NULL, tests);
    return vt_test_run();
}
