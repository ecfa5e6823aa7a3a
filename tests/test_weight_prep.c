/* test_weight_prep.c — the weight-prepare hook of ABI 1.2, end to end.
 *
 * The test plugin prep_reversed (tests/plugins/prep_reversed.c) keeps every
 * matmul weight byte-reversed and its matmul refuses a weight not marked
 * prepared, so each claim below fails loudly when the runtime gets it wrong:
 *   - in process: its matmul fails on the file's bytes (a missed hook is
 *     caught), runs on the copy the hook returned, and rms_norm weights are
 *     declined;
 *   - a forward through it (prefill and decode, plan check on) gives the
 *     reference's tokens, so every node read the prepared copy;
 *   - --explain and vt bench --json account the copies: exactly the model's
 *     matmul weights, their bytes to the byte;
 *   - a failing hook refuses the engine naming backend, tensor and reason
 *     (under ASan the copies made before it must be freed: a leak fails);
 *   - vt backends --test runs its cases through the hook;
 *   - an ABI 1.0 plugin keeps loading and running, preparing nothing;
 *   - the memory rule: the file's pages of a tensor only prepared copies
 *     read leave this process's resident set at engine creation (measured
 *     in /proc/self/pagemap), and the forward still equals the reference's;
 *   - one layout per weight: a tensor nodes of two backends read is offered
 *     to neither (prep_reversed sharing the tied embedding with the
 *     fallback; --backend onednn, whose prefill matmuls and simd's decode
 *     ones read every matmul weight), its file pages stay, --explain and
 *     vt bench --json count it, and onednn's tokens and logits are those of
 *     simd decoding from its own copies. */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "explain_parse.h"
#include "host.h"
#include "json_mini.h"
#include "model.h"
#include "plan_exec.h"
#include "registry.h"
#include "threadpool.h"
#include "util.h"
#include "vt/vt_dtype.h"

#define PLUGIN VT_TEST_PLUGIN_DIR "/libvt-backend-prep_reversed.so"
static const char *model_path;

static size_t tensor_bytes(const vt_gguf_tensor *t) {
    return vt_row_size(t->dtype, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

/* The model's matmul weights in plan order: each layer's seven, then the
 * output matrix (which may be the token embedding itself). At most cap. */
static int matmul_tensors(const vt_model *m, const vt_gguf_tensor **out, int cap) {
    int n = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const vt_layer_weights *w = &m->layers[il];
        const vt_gguf_tensor *layer[7] = {w->wq, w->wk, w->wv, w->wo, w->ffn_gate, w->ffn_up, w->ffn_down};
        for (int k = 0; k < 7 && n < cap; k++) out[n++] = layer[k];
    }
    if (n < cap) out[n++] = m->output;
    return n;
}

/* The model's distinct matmul weights: how many and their bytes. */
static void matmul_weights(int *count, size_t *bytes) {
    vt_model *m = NULL;
    vt_error err = {0};
    *count = 0;
    *bytes = 0;
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &m, &err), VT_OK);
    const vt_gguf_tensor *all[512], *seen[512];
    const int n_all = matmul_tensors(m, all, 512);
    int n = 0;
    for (int i = 0; i < n_all; i++) {
        bool dup = false;
        for (int j = 0; j < n; j++) dup = dup || seen[j]->data == all[i]->data;
        if (dup) continue;
        seen[n++] = all[i];
        *bytes += tensor_bytes(all[i]);
    }
    *count = n;
    vt_model_free(m);
}

/* ---- in process ---- */

static void test_matmul_reads_only_the_prepared_copy(void) {
    vt_threadpool *pool = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_threadpool_create(1, &pool, &err), VT_OK);
    const vt_host *host = vt_host_get(pool);
    vt_backend_entry e;
    if (vt_registry_check_file(host, PLUGIN, NULL, &e, &err) != VT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        CU_FAIL_FATAL("prep_reversed does not load");
    }
    enum { K = 64, N = 5, M = 3 };
    float w[N * K], x[M * K], y[M * N], want[M * N];
    for (int i = 0; i < N * K; i++) w[i] = (float)((i * 37) % 17 - 8) / 8.0f;
    for (int i = 0; i < M * K; i++) x[i] = (float)((i * 11) % 13 - 6) / 4.0f;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)x[m * K + k] * w[n * K + k];
            want[m * N + n] = (float)s;
        }
    const vt_tensor wt = {w, VT_F32, 2, {K, N, 1, 1}, {4, 4 * K, 4 * K * N, 4 * K * N}};
    vt_node node = {.struct_size = sizeof(vt_node), .op = VT_OP_MATMUL, .phase = VT_PHASE_PREFILL, .n_src = 2};
    node.src[0] = wt;
    node.src[1] = (vt_tensor){x, VT_F32, 2, {K, M, 1, 1}, {4, 4 * K, 4 * K * M, 4 * K * M}};
    node.dst = (vt_tensor){y, VT_F32, 2, {N, M, 1, 1}, {4, 4 * N, 4 * N * M, 4 * N * M}};

    /* a weight it was never offered (one the engine keeps in the file's
     * layout): the file's bytes, not marked, computed as they are */
    memset(y, 0, sizeof y);
    CU_ASSERT_EQUAL(vt_backend_run(&e, &node), VT_OK);
    float max_diff = 0;
    for (int i = 0; i < M * N; i++) max_diff = fmaxf(max_diff, fabsf(y[i] - want[i]));
    CU_ASSERT(max_diff < 1e-4f);

    const vt_weight_offer offer = {sizeof offer, "w", wt, 1u << VT_OP_MATMUL, 1u << VT_PHASE_PREFILL, 0};
    vt_prepared_weight got;
    char why[200];
    CU_ASSERT_EQUAL_FATAL(vt_backend_prepare_weight(&e, &offer, &got, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got.data);
    CU_ASSERT_EQUAL(got.bytes, sizeof w);
    CU_ASSERT_EQUAL(memcmp(got.data, w, sizeof w) != 0, 1); /* its own layout, not a plain copy */
    /* once prepared, the file's bytes unmarked are refused (a copy not wired shows) */
    CU_ASSERT_EQUAL(vt_backend_run(&e, &node), VT_ERR_INVALID);
    node.src[0].data = got.data;
    node.prepared = 1u;
    memset(y, 0, sizeof y);
    CU_ASSERT_EQUAL(vt_backend_run(&e, &node), VT_OK);
    max_diff = 0;
    for (int i = 0; i < M * N; i++) max_diff = fmaxf(max_diff, fabsf(y[i] - want[i]));
    CU_ASSERT(max_diff < 1e-4f);
    vt_backend_release_weight(&e, got.data);

    /* an rms_norm-only weight is declined: no copy, no bytes */
    const vt_tensor norm = {w, VT_F32, 1, {K, 1, 1, 1}, {4, 4 * K, 4 * K, 4 * K}};
    const vt_weight_offer norm_offer = {sizeof norm_offer, "norm", norm, 1u << VT_OP_RMS_NORM, 1u << VT_PHASE_DECODE,
                                        0};
    CU_ASSERT_EQUAL(vt_backend_prepare_weight(&e, &norm_offer, &got, why, sizeof why), VT_OK);
    CU_ASSERT_PTR_NULL(got.data);
    CU_ASSERT_EQUAL(got.bytes, 0);
    vt_registry_release_checked(&e);
    vt_threadpool_destroy(pool);
}

/* ---- through the CLI ---- */

static const char *const prompt = "1,17,42,99,5,250,3,77,128,64,8,200";

static void test_forward_reads_prepared_copies_and_equals_reference(void) {
    char *ref = NULL, *got = NULL, *err = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_test_run_vt_checked(&ref, NULL, "run -m '%s' --tokens %s -n 6 --temp 0 --ids --backend reference "
                                 "--fallback none", model_path, prompt), 0);
    int rc = vt_test_run_vt_checked(&got, &err, "run -m '%s' --tokens %s -n 6 --temp 0 --ids --backend prep_reversed "
                    "--fallback none --explain", model_path, prompt);
    if (rc != 0) fprintf(stderr, "%s\n", err ? err : "");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(got, ref); /* prefill and decode both read the copies, lossless */
    int count;
    size_t bytes;
    matmul_weights(&count, &bytes);
    vt_explain x;
    CU_ASSERT(vt_explain_parse(err, &x));
    CU_ASSERT(x.prepared_seen);
    CU_ASSERT_STRING_EQUAL(x.prepared_backend, "prep_reversed");
    CU_ASSERT_EQUAL(x.prepared_tensors, count);
    VT_ASSERT_NEAR(x.prepared_mib, (double)bytes / (1024.0 * 1024.0), 0.05); /* printed to 0.1 MiB */
    vt_explain_free(&x);
    free(ref), free(got), free(err);
}

static void test_bench_accounts_prepared_bytes(void) {
    char *out = NULL, *err = NULL, msg[200] = "";
    int rc = vt_test_run_vt_checked(&out, &err, "bench -m '%s' --backends prep_reversed --fallback none -p 4 -n 2 -r 1 --json "
                    "--membw-mib 0", model_path);
    if (rc != 0) fprintf(stderr, "%s\n", err ? err : "");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    json_value doc;
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n >= 1);
    int count;
    size_t bytes;
    matmul_weights(&count, &bytes);
    for (size_t i = 0; i < results->n; i++) {
        const json_value *pb = json_get(&results->items[i], "prepared_weight_bytes");
        const json_value *cs = json_get(&results->items[i], "create_seconds");
        CU_ASSERT_FATAL(pb && pb->type == JSON_NUMBER && cs && cs->type == JSON_NUMBER);
        CU_ASSERT_EQUAL((size_t)pb->number, bytes);
        CU_ASSERT(cs->number > 0.0);
    }
    json_free(&doc);
    free(out), free(err);
}

static void test_failing_hook_refuses_the_engine(void) {
    static const char *const setups[] = {"--fallback none", "--fallback reference"};
    for (size_t i = 0; i < sizeof setups / sizeof *setups; i++) {
        char *out = NULL, *err = NULL;
        /* the hook fails on the second layer's ffn_up, after earlier copies were made */
        setenv("VT_TEST_PREP_FAIL", "blk.1.ffn_up.weight", 1);
        int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 2 --temp 0 --ids --backend prep_reversed %s", model_path,
                    prompt, setups[i]);
        unsetenv("VT_TEST_PREP_FAIL");
        CU_ASSERT_EQUAL(rc, 5); /* the CLI's exit code for VT_ERR_BACKEND (core/cli/cli.c) */
        CU_ASSERT(!out || !out[0]); /* no token: the engine never started */
        /* under ASan a copy made before the failure and never released is a leak report */
        CU_ASSERT_PTR_NULL(err ? strstr(err, "Sanitizer") : NULL);
        const char *want[] = {"backend 'prep_reversed' failed to prepare weight blk.1.ffn_up.weight",
                              "injected failure for blk.1.ffn_up.weight"};
        for (int k = 0; k < 2; k++) {
            if (!err || !strstr(err, want[k])) fprintf(stderr, "wanted \"%s\" in:\n%s\n", want[k], err ? err : "");
            CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, want[k]) : NULL);
        }
        free(out), free(err);
    }
}

static void test_backends_test_goes_through_the_hook(void) {
    char *out = NULL, *err = NULL, msg[200] = "";
    int rc = vt_test_run_vt_checked(&out, &err, "backends --test '%s' --ops matmul,get_rows,rms_norm --json", PLUGIN);
    CU_ASSERT_EQUAL(rc, 0);
    json_value doc;
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    const json_value *cases = json_get(&doc, "cases");
    CU_ASSERT_FATAL(cases && cases->type == JSON_ARRAY && cases->n > 10);
    size_t matmuls = 0;
    for (size_t i = 0; i < cases->n; i++) {
        const json_value *ok = json_get(&cases->items[i], "ok"), *op = json_get(&cases->items[i], "op");
        CU_ASSERT(ok && ok->type == JSON_BOOL && ok->boolean);
        if (op && op->type == JSON_STRING && strcmp(op->str, "matmul") == 0) matmuls++;
    }
    CU_ASSERT(matmuls > 0); /* its matmul runs only on prepared weights: these passed through the hook */
    json_free(&doc);
    free(out), free(err);
}

static void test_abi_1_0_plugin_prepares_nothing_and_runs(void) {
    char *ref = NULL, *got = NULL, *err = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_test_run_vt_checked(&ref, NULL, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend reference "
                                 "--fallback none", model_path, prompt), 0);
    CU_ASSERT_EQUAL_FATAL(vt_test_run_vt_checked(&got, &err, "run -m '%s' --tokens %s -n 4 --temp 0 --ids --backend kv_abi_1_0 "
                                 "--fallback none --explain", model_path, prompt), 0);
    CU_ASSERT_STRING_EQUAL(got, ref);
    vt_explain x;
    CU_ASSERT(vt_explain_parse(err, &x));
    CU_ASSERT(x.prepared_seen);
    CU_ASSERT_STRING_EQUAL(x.prepared_backend, ""); /* none */
    vt_explain_free(&x);
    free(ref), free(got), free(err);
}

/* ---- the memory rule: released originals ---- */

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* The whole pages inside [data, data + size): what release may drop. */
static void interior_pages(const void *data, size_t size, uintptr_t *first, uintptr_t *end) {
    const uintptr_t p = page_size(), a = (uintptr_t)data;
    *first = (a + p - 1) / p * p;
    *end = (a + size) / p * p;
    if (*end < *first) *end = *first;
}

/* Pages of [first, end) (page-aligned) mapped in this process's page table:
 * its resident set there, whatever the page cache holds. -1 if pagemap
 * cannot be read. */
static long present_pages(uintptr_t first, uintptr_t end) {
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) return -1;
    long present = 0;
    for (uintptr_t a = first; a < end; a += page_size()) {
        uint64_t entry = 0;
        if (pread(fd, &entry, sizeof entry, (off_t)(a / page_size() * sizeof entry)) != (ssize_t)sizeof entry) {
            present = -1;
            break;
        }
        present += (long)(entry >> 63); /* bit 63: page present */
    }
    close(fd);
    return present;
}

/* Read one byte of every page of the mapping: all of it resident, as after
 * a forward on a backend that reads the file's bytes. */
static void touch_mapping(const vt_gguf *g) {
    size_t size;
    const volatile unsigned char *base = vt_gguf_mapping(g, &size);
    unsigned sum = 0;
    for (size_t off = 0; off < size; off += page_size()) sum += base[off];
    (void)sum;
}

/* Prefill of the prompt's ids on e: the last position's logits (malloc'ed). */
static float *prefill_logits(vt_engine *e) {
    static const int32_t ids[] = {1, 17, 42, 99, 5, 250, 3, 77};
    vt_error err = {0};
    if (vt_engine_eval(e, ids, 8, false, &err) != VT_OK) {
        fprintf(stderr, "eval: %s\n", err.msg);
        return NULL;
    }
    const size_t n = (size_t)e->model->hp.n_vocab;
    float *out = malloc(n * sizeof *out);
    if (out) memcpy(out, vt_engine_logits(e, 0), n * sizeof *out);
    return out;
}

/* The value whose memory v is: v itself or the value a chain of views shows. */
static int32_t root_of(const vt_plan *p, int32_t v) {
    for (int hops = 0; v >= 0 && p->values[v].kind == VT_VAL_VIEW && hops < p->n_values; hops++) v = p->values[v].base;
    return v;
}

/* One resident layout per weight, read off e's plans: no tensor is read
 * through a prepared copy by one node and as the file's bytes (or through
 * another backend's copy) by another. Returns the number of distinct weight
 * tensors nodes of more than one backend read; *n_prepared the number of
 * distinct tensors read through a copy. */
static int check_one_layout(const vt_engine *e, int *n_prepared) {
    enum { CAP = 1024 };
    static struct {
        const void *data;
        int32_t backend;
        bool several, copy, file;
        const void *copy_data;
    } seen[CAP];
    int n = 0;
    const vt_plan *plans[2] = {e->prefill, e->decode};
    for (int k = 0; k < 2; k++) {
        const vt_plan *p = plans[k];
        for (int32_t i = 0; i < p->n_nodes; i++) {
            const vt_plan_node *node = &p->nodes[i];
            for (int s = 0; s < node->n_src; s++) {
                const int32_t v = root_of(p, node->src[s]);
                if (v < 0 || p->values[v].kind != VT_VAL_WEIGHT) continue;
                int t = 0;
                while (t < n && seen[t].data != p->values[v].data) t++;
                if (t == n) {
                    CU_ASSERT_FATAL(n < CAP);
                    seen[n].data = p->values[v].data;
                    seen[n].backend = node->backend;
                    seen[n].several = seen[n].copy = seen[n].file = false;
                    seen[n++].copy_data = NULL;
                }
                seen[t].several = seen[t].several || seen[t].backend != node->backend;
                if (node->prepared[s]) {
                    /* two different copies of one tensor are two layouts too */
                    CU_ASSERT(!seen[t].copy || seen[t].copy_data == node->prepared[s]);
                    seen[t].copy = true;
                    seen[t].copy_data = node->prepared[s];
                } else {
                    seen[t].file = true;
                }
            }
        }
    }
    int shared = 0, prepared = 0;
    for (int t = 0; t < n; t++) {
        if (seen[t].copy && seen[t].file)
            fprintf(stderr, "a weight at %p is read both through a prepared copy and as the file's bytes\n",
                    seen[t].data);
        CU_ASSERT(!(seen[t].copy && seen[t].file));
        CU_ASSERT(!(seen[t].copy && seen[t].several)); /* a copy serves one backend only */
        shared += seen[t].several;
        prepared += seen[t].copy;
    }
    if (n_prepared) *n_prepared = prepared;
    return shared;
}

/* Build a prep_reversed engine on a fully resident mapping (fallback
 * reference; with decline_get_rows the embedding lookup runs there, on the
 * file's bytes) and check, tensor by tensor, which pages left the resident
 * set; then that the forward equals the reference's on the same mapping. */
static void check_release(bool decline_get_rows) {
    vt_model *m = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &m, &err), VT_OK);
    CU_ASSERT_PTR_EQUAL_FATAL(m->output, m->tok_embd); /* the test needs a tied embedding */
    size_t map_size;
    const void *map = vt_gguf_mapping(m->gguf, &map_size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(map);
    uintptr_t map_first, map_end;
    interior_pages(map, map_size, &map_first, &map_end);
    touch_mapping(m->gguf);
    const long before = present_pages(map_first, map_end);
    if (before < 0) {
        vt_model_free(m);
        CU_FAIL_FATAL("/proc/self/pagemap is not readable");
    }
    CU_ASSERT_EQUAL(before, (long)((map_end - map_first) / page_size()));

    vt_options o;
    vt_fixture_options(&o, "prep_reversed", VT_F32);
    snprintf(o.backend_path, sizeof o.backend_path, "%s", VT_TEST_PLUGIN_DIR);
    if (decline_get_rows) setenv("VT_TEST_PREP_DECLINE_GET_ROWS", "1", 1);
    vt_engine *e = NULL;
    vt_status st = vt_engine_create(&o, m, false, &e, &err);
    if (st != VT_OK) fprintf(stderr, "engine: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    const long after = present_pages(map_first, map_end);

    /* One layout per weight. With get_rows on the fallback the tied
     * embedding is read by nodes of two backends: not offered, so
     * prep_reversed's output matmul reads the file's bytes of it too. */
    int n_prepared, n_shared;
    CU_ASSERT_EQUAL(check_one_layout(e, &n_prepared), decline_get_rows ? 1 : 0);
    const size_t shared = vt_weight_prep_shared(e->prepared, &n_shared);
    CU_ASSERT_EQUAL(n_shared, decline_get_rows ? 1 : 0);
    CU_ASSERT_EQUAL(shared, decline_get_rows ? tensor_bytes(m->tok_embd) : 0);
    int n_copies;
    const int32_t self = e->prefill->nodes[e->prefill->n_nodes - 1].backend; /* the output matmul's */
    vt_weight_prep_bytes(e->prepared, self, &n_copies);
    CU_ASSERT_EQUAL(n_copies, n_prepared);
    for (int32_t i = 0; i < e->prefill->n_nodes; i++)
        if (e->prefill->nodes[i].op == VT_OP_MATMUL && e->prefill->values[e->prefill->nodes[i].src[0]].data == m->tok_embd->data)
            CU_ASSERT_EQUAL(e->prefill->nodes[i].prepared[0] == NULL, decline_get_rows);

    /* Every matmul weight: its interior pages gone, unless it is the
     * embedding and get_rows reads it on the fallback (the file's layout,
     * the only one). */
    size_t want_released = 0;
    int checked = 0;
    const vt_gguf_tensor *all[512];
    const int n_all = matmul_tensors(m, all, 512);
    for (int i = 0; i < n_all; i++) {
        const vt_gguf_tensor *t = all[i];
        uintptr_t first, end;
        interior_pages(t->data, tensor_bytes(t), &first, &end);
        const long pages = (long)((end - first) / page_size()), resident = present_pages(first, end);
        const bool kept = decline_get_rows && t == m->tok_embd;
        if (resident != (kept ? pages : 0))
            fprintf(stderr, "%s: %ld of %ld interior pages resident, wanted %s\n", t->name, resident, pages,
                    kept ? "all" : "none");
        CU_ASSERT_EQUAL(resident, kept ? pages : 0);
        if (!kept) want_released += (size_t)(end - first);
        checked++;
    }
    CU_ASSERT(checked > 10);
    CU_ASSERT(want_released > 0);
    /* The accounting is what left the resident set, to the page. */
    int n_released;
    CU_ASSERT_EQUAL(vt_weight_prep_released(e->prepared, &n_released), want_released);
    CU_ASSERT_EQUAL(before - after, (long)(want_released / page_size()));
    if (decline_get_rows) { /* the embedding lookup did move to the fallback */
        bool on_reference = false;
        for (int32_t i = 0; i < e->prefill->n_nodes; i++)
            if (e->prefill->nodes[i].op == VT_OP_GET_ROWS)
                on_reference = strcmp(vt_registry_at(e->registry, e->prefill->nodes[i].backend)->name, "reference") == 0;
        CU_ASSERT(on_reference);
    }

    /* Outputs stay right: the same logits as the reference on the same
     * mapping (a second engine in the process: whatever it reads of the
     * released pages faults back in from the file). */
    float *got = prefill_logits(e);
    vt_engine_free(e);
    unsetenv("VT_TEST_PREP_DECLINE_GET_ROWS");
    vt_engine *ref = NULL;
    vt_fixture_options(&o, "reference", VT_F32);
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&o, m, false, &ref, &err), VT_OK);
    float *want = prefill_logits(ref);
    CU_ASSERT_FATAL(got && want);
    int differ = 0;
    for (int32_t i = 0; i < m->hp.n_vocab; i++) differ += got[i] != want[i];
    CU_ASSERT_EQUAL(differ, 0); /* lossless copies, the reference's own kernels */
    free(got), free(want);
    vt_engine_free(ref);
    vt_model_free(m);
}

static void test_release_when_every_reader_is_prepared(void) { check_release(false); }
static void test_keep_when_an_unprepared_node_reads(void) { check_release(true); }

static void test_explain_and_bench_report_released_bytes(void) {
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 2 --temp 0 --ids --backend prep_reversed "
                                                "--fallback none --explain", model_path, prompt);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "originals released: ") : NULL);
    free(out), free(err);
    char msg[200] = "";
    rc = vt_test_run_vt_checked(&out, &err, "bench -m '%s' --backends prep_reversed --fallback none -p 4 -n 2 -r 1 "
                                            "--json --membw-mib 0", model_path);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    json_value doc;
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n >= 1);
    const json_value *rel = json_get(&results->items[0], "released_original_bytes");
    const json_value *rss = json_get(&doc, "peak_rss_bytes");
    CU_ASSERT_FATAL(rel && rel->type == JSON_NUMBER && rss && rss->type == JSON_NUMBER);
    int count;
    size_t bytes;
    matmul_weights(&count, &bytes);
    /* whole pages of the matmul weights: at most their bytes, most of them */
    CU_ASSERT(rel->number > 0.5 * (double)bytes && rel->number <= (double)bytes);
    CU_ASSERT(rss->number > (double)bytes); /* the process holds at least the copies */
    json_free(&doc);
    free(out), free(err);
}

/* prep_reversed sharing the tied embedding with the fallback (get_rows
 * declined): --explain says one layout was kept for it, and vt bench --json
 * counts it, to the byte. */
static void test_shared_weight_stated(void) {
    vt_model *m = NULL;
    vt_error verr = {0};
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &m, &verr), VT_OK);
    const size_t embd_bytes = tensor_bytes(m->tok_embd);
    vt_model_free(m);
    setenv("VT_TEST_PREP_DECLINE_GET_ROWS", "1", 1);
    char *out = NULL, *err = NULL;
    int rc = vt_test_run_vt_checked(&out, &err, "run -m '%s' --tokens %s -n 2 --temp 0 --ids --backend prep_reversed "
                                                "--fallback reference --explain", model_path, prompt);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "shared weights: ") : NULL);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "(1 tensors) read by nodes of ") : NULL);
    free(out), free(err);
    char msg[200] = "";
    rc = vt_test_run_vt_checked(&out, &err, "bench -m '%s' --backends prep_reversed --fallback reference -p 4 -n 2 "
                                            "-r 1 --json --membw-mib 0", model_path);
    unsetenv("VT_TEST_PREP_DECLINE_GET_ROWS");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    json_value doc;
    CU_ASSERT_FATAL(out && json_parse(out, strlen(out), &doc, msg, sizeof msg));
    const json_value *results = json_get(&doc, "results");
    CU_ASSERT_FATAL(results && results->type == JSON_ARRAY && results->n >= 1);
    const json_value *n = json_get(&results->items[0], "shared_weight_tensors");
    const json_value *bytes = json_get(&results->items[0], "shared_weight_bytes");
    CU_ASSERT_FATAL(n && n->type == JSON_NUMBER && bytes && bytes->type == JSON_NUMBER);
    CU_ASSERT_EQUAL(n->number, 1);
    CU_ASSERT_EQUAL(bytes->number, (double)embd_bytes);
    json_free(&doc);
    free(out), free(err);
}

/* --backend auto times a node on the layout it will run on: on
 * prep_reversed with get_rows declined, the tied embedding's output matmul
 * can never have all its readers there, so calibration times it on the
 * file's bytes (no copy offered), while a layer's matmul weight is timed on
 * the copy. */
static void test_calibration_times_the_layout_used(void) {
    vt_model *m = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &m, &err), VT_OK);
    vt_options o;
    vt_fixture_options(&o, "prep_reversed", VT_F32);
    snprintf(o.backend_path, sizeof o.backend_path, "%s", VT_TEST_PLUGIN_DIR);
    setenv("VT_TEST_PREP_DECLINE_GET_ROWS", "1", 1);
    vt_engine *e = NULL;
    vt_status st = vt_engine_create(&o, m, false, &e, &err);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    vt_plan *plans[2] = {e->prefill, e->decode};
    const vt_plan *p = e->prefill;
    int32_t output = -1, layer = -1;
    for (int32_t i = 0; i < p->n_nodes; i++) {
        if (p->nodes[i].op != VT_OP_MATMUL || p->values[p->nodes[i].src[0]].kind != VT_VAL_WEIGHT) continue;
        if (p->values[p->nodes[i].src[0]].data == m->tok_embd->data) output = i;
        else if (layer < 0) layer = i;
    }
    CU_ASSERT_FATAL(output >= 0 && layer >= 0);
    const int32_t prep = p->nodes[layer].backend;
    vt_timing_copies *kept = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_timing_copies_create(&kept, &err), VT_OK);
    vt_node node;
    vt_plan_node_at(p, output, p->run_tokens, p->run_outputs, &node);
    CU_ASSERT_EQUAL(vt_weight_prep_for_timing(kept, plans, 2, p, output, prep, &node, &err), VT_OK);
    CU_ASSERT_EQUAL(node.prepared, 0u);
    CU_ASSERT_PTR_EQUAL(node.src[0].data, m->tok_embd->data);
    vt_plan_node_at(p, layer, p->run_tokens, p->run_outputs, &node);
    CU_ASSERT_EQUAL(vt_weight_prep_for_timing(kept, plans, 2, p, layer, prep, &node, &err), VT_OK);
    CU_ASSERT_EQUAL(node.prepared, 1u);
    CU_ASSERT_PTR_NOT_EQUAL(node.src[0].data, p->values[p->nodes[layer].src[0]].data);
    vt_timing_copies_free(kept, e->registry);
    unsetenv("VT_TEST_PREP_DECLINE_GET_ROWS");
    vt_engine_free(e);
    vt_model_free(m);
}

/* Greedy generation of n tokens after the prompt ids on e (reset first):
 * the tokens in out, every step's logits appended to logits (n * n_vocab). */
static bool greedy(vt_engine *e, const int32_t *ids, int n_ids, int n, int32_t *out, float *logits) {
    vt_error err = {0};
    vt_engine_reset(e);
    const int64_t n_vocab = e->model->hp.n_vocab;
    if (vt_engine_eval(e, ids, n_ids, false, &err) != VT_OK) {
        fprintf(stderr, "prefill: %s\n", err.msg);
        return false;
    }
    for (int t = 0; t < n; t++) {
        const float *l = vt_engine_logits(e, 0);
        memcpy(logits + (size_t)t * (size_t)n_vocab, l, (size_t)n_vocab * sizeof *l);
        int32_t best = 0;
        for (int64_t j = 1; j < n_vocab; j++) best = l[j] > l[best] ? (int32_t)j : best;
        out[t] = best;
        if (vt_engine_eval(e, &best, 1, true, &err) != VT_OK) {
            fprintf(stderr, "decode: %s\n", err.msg);
            return false;
        }
    }
    return true;
}

/* --backend onednn --fallback simd on model m, with these backend options
 * ("NAME.key=value\n" lines), an f32 cache. */
static vt_status onednn_engine(vt_model *m, const char *backend_options, vt_engine **e, vt_error *err) {
    vt_options o;
    vt_fixture_options(&o, "onednn", VT_F32);
    snprintf(o.fallback, sizeof o.fallback, "simd");
    snprintf(o.backend_options, sizeof o.backend_options, "%s", backend_options);
    return vt_engine_create(&o, m, false, e, err);
}

/* --backend onednn, the real engine: onednn runs the prefill matmuls on the
 * file's layout and simd (the fallback) the decode ones, so every matmul
 * weight is read by two backends. Structurally, one layout per weight: no
 * tensor read both through a prepared copy and as the file's bytes, the
 * shared ones counted by the engine. And the tokens are what they were when
 * simd decoded from its own prepared copies: the same engine with the decode
 * matmuls pointed at copies simd prepares of them (the former placement)
 * generates the same greedy tokens. */
static void test_onednn_one_layout_same_tokens(void) {
    if (!vt_test_simd_expected() || !vt_test_onednn_expected()) return;
    vt_model *m = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &m, &err), VT_OK);
    vt_engine *e = NULL;
    vt_status st = onednn_engine(m, "", &e, &err);
    if (st != VT_OK) fprintf(stderr, "engine: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);

    int n_prepared, n_shared;
    const int shared = check_one_layout(e, &n_prepared);
    int count;
    size_t matmul_bytes;
    matmul_weights(&count, &matmul_bytes);
    CU_ASSERT_EQUAL(shared, count); /* every matmul weight: onednn in prefill, simd in decode */
    CU_ASSERT_EQUAL(vt_weight_prep_shared(e->prepared, &n_shared), matmul_bytes);
    CU_ASSERT_EQUAL(n_shared, count);
    CU_ASSERT_EQUAL(n_prepared, 0);
    CU_ASSERT_EQUAL(vt_weight_prep_total(e->prepared), 0);

    static const int32_t ids[] = {1, 17, 42, 99, 5, 250, 3, 77};
    enum { N = 8 };
    const size_t n_vocab = (size_t)m->hp.n_vocab;
    int32_t got[N], before[N];
    float *got_logits = malloc(N * n_vocab * sizeof(float)), *before_logits = malloc(N * n_vocab * sizeof(float));
    CU_ASSERT_FATAL(got_logits && before_logits);
    CU_ASSERT_FATAL(greedy(e, ids, 8, N, got, got_logits));

    /* The former placement: simd's decode matmuls on copies it prepares. */
    const vt_backend_entry *simd = NULL;
    for (int32_t b = 0; b < vt_registry_count(e->registry); b++)
        if (strcmp(vt_registry_at(e->registry, b)->name, "simd") == 0) simd = vt_registry_at(e->registry, b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(simd);
    vt_plan *d = e->decode;
    void *made[512];
    int n_made = 0;
    for (int32_t i = 0; i < d->n_nodes; i++) {
        vt_plan_node *node = &d->nodes[i];
        if (node->op != VT_OP_MATMUL || d->values[node->src[0]].kind != VT_VAL_WEIGHT) continue;
        CU_ASSERT_PTR_EQUAL(vt_registry_at(e->registry, node->backend), simd);
        const vt_weight_offer offer = {sizeof offer, d->values[node->src[0]].name,
                                       vt_plan_value_tensor(d, node->src[0], -1, -1, true), 1u << VT_OP_MATMUL,
                                       1u << VT_PHASE_DECODE, 0};
        vt_prepared_weight copy;
        char why[200];
        CU_ASSERT_EQUAL_FATAL(vt_backend_prepare_weight(simd, &offer, &copy, why, sizeof why), VT_OK);
        if (!copy.data) continue;
        CU_ASSERT_FATAL(n_made < 512);
        made[n_made++] = copy.data;
        node->prepared[0] = copy.data;
    }
    CU_ASSERT(n_made > 0); /* simd does prepare these: the comparison means something */
    CU_ASSERT_FATAL(greedy(e, ids, 8, N, before, before_logits));
    for (int32_t i = 0; i < d->n_nodes; i++)
        if (d->nodes[i].op == VT_OP_MATMUL) d->nodes[i].prepared[0] = NULL;
    for (int k = 0; k < n_made; k++) vt_backend_release_weight(simd, made[k]);

    CU_ASSERT_EQUAL(memcmp(got, before, sizeof got), 0);
    /* Not bit for bit: simd's two layouts sum a row's block products in
     * different orders (1e-7 apart), and where that moves an activation
     * across a rounding boundary of its 8-bit quantization, one quantum of
     * it shows in the logits of that step (measured: 0.026 of 1.13 at the
     * worst step, 3e-7 at the others). */
    float max_diff = 0, max_abs = 0;
    for (size_t j = 0; j < N * n_vocab; j++) {
        max_diff = fmaxf(max_diff, fabsf(got_logits[j] - before_logits[j]));
        max_abs = fmaxf(max_abs, fabsf(before_logits[j]));
    }
    if (max_diff > 0.05f * max_abs) fprintf(stderr, "logits differ by %g (largest |logit| %g)\n", max_diff, max_abs);
    CU_ASSERT(max_diff <= 0.05f * max_abs);
    free(got_logits), free(before_logits);
    vt_engine_free(e);
    vt_model_free(m);
}

/* --backend onednn with onednn.precision=int8, the real engine: onednn asks
 * for weights its fallback reads too (VT_PREPARE_SHARED), so every
 * quantized matmul weight gets an int8 copy its prefill matmuls read while
 * simd's decode matmuls read the file's bytes, which stay resident (no
 * original released); the copies are counted as prepared beside the file.
 * The logits stay within onednn's int8 bound of the reference engine's, and
 * a row's numbers never depend on the rows beside it: a prompt prefilled
 * in one call and in two gives its last token the same logits bit for bit. */
static void test_onednn_int8_copies_beside_file(void) {
    if (!vt_test_simd_expected() || !vt_test_onednn_expected()) return;
    vt_model *m = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_model_load(model_path, &m, &err), VT_OK);
    vt_engine *e = NULL;
    vt_status st = onednn_engine(m, "onednn.precision=int8\n", &e, &err);
    if (st != VT_OK && strstr(err.msg, "no int8 matmul here")) {
        char why[VT_ERROR_MSG_SIZE + 64];
        snprintf(why, sizeof why, "onednn's int8 matmul cannot run here: %s", err.msg);
        vt_test_skip(why);
        vt_model_free(m);
        return;
    }
    if (st != VT_OK) fprintf(stderr, "engine: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);

    int count, n_copies, n_released;
    size_t matmul_bytes;
    matmul_weights(&count, &matmul_bytes);
    int32_t onednn_index = -1;
    for (int32_t b = 0; b < vt_registry_count(e->registry); b++)
        if (strcmp(vt_registry_at(e->registry, b)->name, "onednn") == 0) onednn_index = b;
    CU_ASSERT_FATAL(onednn_index >= 0);
    const size_t copies = vt_weight_prep_bytes(e->prepared, onednn_index, &n_copies);
    CU_ASSERT_EQUAL(n_copies, count); /* every matmul weight of this file is quantized */
    CU_ASSERT(copies >= matmul_bytes); /* a byte per weight: more than the 4- and 6-bit file */
    CU_ASSERT_EQUAL(vt_weight_prep_released(e->prepared, &n_released), 0);
    CU_ASSERT_EQUAL(n_released, 0);
    int prefill_copies = 0, decode_file = 0;
    for (int k = 0; k < 2; k++) {
        const vt_plan *p = k == 0 ? e->prefill : e->decode;
        for (int32_t i = 0; i < p->n_nodes; i++) {
            const vt_plan_node *node = &p->nodes[i];
            if (node->op != VT_OP_MATMUL || p->values[node->src[0]].kind != VT_VAL_WEIGHT) continue;
            if (k == 0) prefill_copies += node->backend == onednn_index && node->prepared[0] != NULL;
            else decode_file += node->backend != onednn_index && node->prepared[0] == NULL;
        }
    }
    CU_ASSERT(prefill_copies >= count); /* every prefill matmul reads its copy */
    CU_ASSERT(decode_file >= count);    /* every decode matmul reads the file */
    char explain[4096] = "";
    FILE *f = fmemopen(explain, sizeof explain - 1, "w");
    CU_ASSERT_FATAL(f != NULL);
    vt_weight_prep_print(e->prepared, f);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(explain, "prepared beside the file: "));

    /* against the reference engine: the last prompt token's logits */
    static const int32_t ids[] = {1, 17, 42, 99, 5, 250, 3, 77};
    const size_t n_vocab = (size_t)m->hp.n_vocab;
    float *whole = malloc(n_vocab * sizeof(float)), *split = malloc(n_vocab * sizeof(float));
    float *exact = malloc(n_vocab * sizeof(float));
    CU_ASSERT_FATAL(whole && split && exact);
    vt_engine_reset(e);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, ids, 8, false, &err), VT_OK);
    memcpy(whole, vt_engine_logits(e, 0), n_vocab * sizeof(float));
    vt_engine_reset(e);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, ids, 3, false, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(e, ids + 3, 5, false, &err), VT_OK);
    memcpy(split, vt_engine_logits(e, 0), n_vocab * sizeof(float));
    CU_ASSERT_EQUAL(memcmp(whole, split, n_vocab * sizeof(float)), 0);

    vt_options r;
    vt_fixture_options(&r, "reference", VT_F32);
    vt_engine *ref = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&r, m, false, &ref, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(ref, ids, 8, false, &err), VT_OK);
    memcpy(exact, vt_engine_logits(ref, 0), n_vocab * sizeof(float));
    float max_diff = 0, scale = 1;
    for (size_t j = 0; j < n_vocab; j++) {
        max_diff = fmaxf(max_diff, fabsf(whole[j] - exact[j]));
        scale = fmaxf(scale, fabsf(exact[j]));
    }
    /* vt compare's stated bound for onednn in int8 (cmd_compare.c) */
    if (max_diff > 1e-1f * scale) fprintf(stderr, "int8 logits differ by %g (scale %g)\n", max_diff, scale);
    CU_ASSERT(max_diff <= 1e-1f * scale);
    CU_ASSERT(max_diff > 0); /* int8 rounding shows: the copies were read */
    free(whole), free(split), free(exact);
    vt_engine_free(ref);
    vt_engine_free(e);
    vt_model_free(m);
}

int main(void) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/models/qwen3-tiny-q4_k_m.gguf", VT_TEST_DATA_DIR);
    model_path = path;
    CU_TestInfo tests[] = {
        {"prep_reversed in process: refuses the file's bytes, runs on its copy, declines norm weights",
         test_matmul_reads_only_the_prepared_copy},
        {"a forward reads the prepared copies (prefill and decode): tokens equal the reference's",
         test_forward_reads_prepared_copies_and_equals_reference},
        {"vt bench --json: prepared bytes are the model's matmul weights exactly, creation timed",
         test_bench_accounts_prepared_bytes},
        {"a failing prepare hook refuses the engine naming backend, tensor and reason",
         test_failing_hook_refuses_the_engine},
        {"vt backends --test runs the plugin's cases through its hook", test_backends_test_goes_through_the_hook},
        {"an ABI 1.0 plugin loads, prepares nothing, runs as before", test_abi_1_0_plugin_prepares_nothing_and_runs},
        {"every reader prepared: the tensor's file pages leave the resident set, logits equal the reference's",
         test_release_when_every_reader_is_prepared},
        {"a tensor nodes of two backends read is not prepared: one layout, the file's pages kept",
         test_keep_when_an_unprepared_node_reads},
        {"--explain and vt bench --json report the released bytes and the peak RSS",
         test_explain_and_bench_report_released_bytes},
        {"a weight prep_reversed shares with the fallback: not prepared, stated in --explain and bench --json",
         test_shared_weight_stated},
        {"--backend auto's calibration times a weight that will be shared on the file's bytes",
         test_calibration_times_the_layout_used},
        {"--backend onednn: one layout per weight (none both prepared and read from the file), tokens as before",
         test_onednn_one_layout_same_tokens},
        {"--backend onednn, precision=int8: copies beside the file for prefill, within the int8 bound, rows independent",
         test_onednn_int8_copies_beside_file},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("weight_prep", NULL, NULL, tests);
    return vt_test_run();
}
