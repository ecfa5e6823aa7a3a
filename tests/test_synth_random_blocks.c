/* test_synth_random_blocks.c — vt_synth_params.random_blocks (the fast path
 * for 27B-scale benchmark models): same tensor table and types as the normal
 * mix, every block decodes to finite values within the documented bound, the
 * model runs through the engine, and the same seed gives the same file. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "gguf.h"
#include "quant.h"
#include "sampler.h"
#include "synth.h"
#include "util.h"

static vt_status write(const char *name, bool random, uint64_t seed, char *path, size_t size) {
    vt_synth_params p;
    memset(&p, 0, sizeof p);
    vt_error err = {0};
    vt_synth_shape(&p, "tiny", &err);
    p.type = "q4_k_m";
    p.n_layer = 3;
    p.seed = seed;
    p.random_blocks = random;
    vt_test_tmpfile(path, size, name);
    vt_status st = vt_synth_write(&p, path, &err);
    if (st != VT_OK) printf("\nsynth: %s\n", err.msg);
    return st;
}

static void test_same_tensors_bounded_values(void) {
    char normal[1024], fast[1024];
    CU_ASSERT_EQUAL_FATAL(write("normal.gguf", false, 5, normal, sizeof normal), VT_OK);
    CU_ASSERT_EQUAL_FATAL(write("fast.gguf", true, 5, fast, sizeof fast), VT_OK);
    vt_gguf *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(normal, &a, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(fast, &b, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_n_tensors(a), vt_gguf_n_tensors(b));
    int quantized = 0;
    for (int64_t i = 0; i < vt_gguf_n_tensors(a); i++) {
        const vt_gguf_tensor *ta = vt_gguf_tensor_at(a, i), *tb = vt_gguf_find_tensor(b, ta->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
        CU_ASSERT_EQUAL(ta->dtype, tb->dtype);
        CU_ASSERT_EQUAL(ta->nbytes, tb->nbytes);
        if (vt_dtype_block_length(tb->dtype) == 1) continue;
        quantized++;
        int64_t n = tb->ne[0] * tb->ne[1];
        float *v = malloc((size_t)n * sizeof *v);
        CU_ASSERT_EQUAL_FATAL(vt_to_f32(tb->dtype, tb->data, v, n), VT_OK);
        double max = 0, sum = 0;
        int64_t non_finite = 0;
        for (int64_t k = 0; k < n; k++) {
            non_finite += !isfinite(v[k]);
            max = fmax(max, fabs(v[k]));
            sum += v[k];
        }
        CU_ASSERT_EQUAL(non_finite, 0);
        /* synth.h: |w| within about 0.06 (fp16 rounding of the scales adds < 0.1%) */
        CU_ASSERT(max <= 0.0601);
        CU_ASSERT(max > 0.01); /* not all zeros */
        CU_ASSERT(fabs(sum / (double)n) < 0.01); /* centred */
        free(v);
    }
    CU_ASSERT(quantized >= 10);
    vt_gguf_close(a);
    vt_gguf_close(b);
}

static void test_runs_through_the_engine_and_is_deterministic(void) {
    char p1[1024], p2[1024];
    CU_ASSERT_EQUAL_FATAL(write("fast1.gguf", true, 9, p1, sizeof p1), VT_OK);
    CU_ASSERT_EQUAL_FATAL(write("fast2.gguf", true, 9, p2, sizeof p2), VT_OK);
    size_t n1 = 0, n2 = 0;
    char *f1 = vt_test_read_file(p1, &n1), *f2 = vt_test_read_file(p2, &n2);
    CU_ASSERT_FATAL(f1 && f2);
    CU_ASSERT(n1 == n2 && memcmp(f1, f2, n1) == 0);
    free(f1);
    free(f2);
    vt_fixture f;
    CU_ASSERT_EQUAL_FATAL(vt_fixture_open(&f, p1, "reference", VT_F16, false), VT_OK);
    int32_t ids[12] = {1, 5, 9, 300, 2, 7, 100, 50, 3, 4, 8, 6};
    CU_ASSERT_EQUAL_FATAL(vt_engine_eval(f.engine, ids, 12, false, &f.err), VT_OK);
    const float *lg = vt_engine_logits(f.engine, 0);
    int32_t non_finite = 0;
    for (int32_t i = 0; i < f.model->hp.n_vocab; i++) non_finite += !isfinite(lg[i]);
    CU_ASSERT_EQUAL(non_finite, 0);
    int32_t next = vt_argmax(lg, f.model->hp.n_vocab);
    CU_ASSERT_EQUAL(vt_engine_eval(f.engine, &next, 1, true, &f.err), VT_OK);
    vt_fixture_close(&f);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"random blocks: same tensor table and types, finite bounded centred values", test_same_tensors_bounded_values},
        {"random blocks: deterministic, runs prefill and decode", test_runs_through_the_engine_and_is_deterministic},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("synth random blocks", NULL, NULL, tests);
    return vt_test_run();
}
