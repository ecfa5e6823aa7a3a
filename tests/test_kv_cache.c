/* test_kv_cache.c — the paged KV cache's bookkeeping: block tables, slot
 * mapping, the free list, and clear errors when it is full or too large. */
#include <stdint.h>
#include <string.h>

#include "host.h"
#include "kv_cache.h"
#include "threadpool.h"
#include "util.h"

static vt_threadpool *pool;
static const vt_host *host;

static int setup(void) {
    if (vt_threadpool_create(1, &pool, NULL) != VT_OK) return 1;
    host = vt_host_get(pool);
    return 0;
}

static int teardown(void) {
    vt_host_get(NULL);
    vt_threadpool_destroy(pool);
    return 0;
}

static void test_geometry_and_tensor_layout(void) {
    vt_kv_cache *c = NULL;
    vt_error err = {0};
    /* 100 tokens in blocks of 16 -> 7 blocks (112 tokens). */
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F16, 3, 2, 64, 16, 100, &c, &err), VT_OK);
    CU_ASSERT_EQUAL(c->num_blocks, 7);
    CU_ASSERT_EQUAL(vt_kv_cache_capacity(c), 112);
    CU_ASSERT_EQUAL(c->block_bytes, (size_t)16 * 2 * 64 * 2);
    CU_ASSERT_EQUAL(vt_kv_cache_bytes(c), 2 * c->block_bytes * 7 * 3);
    vt_tensor t = vt_kv_cache_tensor(c, 2, 1);
    CU_ASSERT_PTR_EQUAL(t.data, c->v[2]);
    CU_ASSERT_EQUAL(t.dtype, VT_F16);
    CU_ASSERT(t.ne[0] == 64 && t.ne[1] == 2 && t.ne[2] == 16 && t.ne[3] == 7);
    CU_ASSERT(t.nb[0] == 2 && t.nb[1] == 128 && t.nb[2] == 256 && t.nb[3] == 4096);
    vt_kv_cache_free(c);
}

static void test_slots_follow_the_block_table(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 32, &c, NULL), VT_OK);
    vt_kv_cache_set_prefix_cache(c, false); /* released blocks go back free, none kept cached */
    vt_kv_seq a = {0}, b = {0};
    /* Interleave two sequences so their blocks are not contiguous. */
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &a, 3, NULL), VT_OK); /* a: block 0 */
    a.n_tokens = 3;
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &b, 5, NULL), VT_OK); /* b: blocks 1, 2 */
    b.n_tokens = 5;
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &a, 3, NULL), VT_OK); /* a grows into block 3 */
    CU_ASSERT_EQUAL(a.n_blocks, 2);
    CU_ASSERT_EQUAL(b.n_blocks, 2);
    int64_t slots[6];
    vt_kv_seq_slots(c, &a, 0, 6, slots);
    /* token t -> table[t / 4] * 4 + t % 4, table = {0, 3} */
    const int64_t want[6] = {0, 1, 2, 3, 12, 13};
    CU_ASSERT_EQUAL(memcmp(slots, want, sizeof want), 0);
    CU_ASSERT_EQUAL(a.block_table[0], 0);
    CU_ASSERT_EQUAL(a.block_table[1], 3);
    CU_ASSERT_EQUAL(c->n_free, 4);
    vt_kv_seq_release(c, &b);
    CU_ASSERT_EQUAL(c->n_free, 6);
    CU_ASSERT_EQUAL(b.n_blocks, 0);
    vt_kv_seq_release(c, &a);
    CU_ASSERT_EQUAL(c->n_free, 8);
    vt_kv_cache_free(c);
}

static void test_full_cache_is_a_clear_error(void) {
    vt_kv_cache *c = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_BF16, 2, 2, 16, 16, 16, &c, &err), VT_OK);
    vt_kv_seq s = {0};
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &s, 16, &err), VT_OK);
    s.n_tokens = 16;
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &s, 1, &err), VT_ERR_CONTEXT_FULL);
    VT_ASSERT_ERROR(err, VT_ERR_CONTEXT_FULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "kv_cache.ctx_size"));
    CU_ASSERT_EQUAL(s.n_blocks, 1); /* unchanged on failure */
    vt_kv_seq_release(c, &s);
    vt_kv_cache_free(c);
}

static void test_absurd_sizes_fail_cleanly(void) {
    vt_kv_cache *c = NULL;
    vt_error err = {0};
    /* 2^40 tokens: refused before any allocation. */
    CU_ASSERT_EQUAL(vt_kv_cache_create(host, VT_F32, 32, 8, 128, 16, (int64_t)1 << 40, &c, &err), VT_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT(strlen(err.msg) > 0);
    /* Allocation failure injected through the host allocator: an error, no leak. */
    vt_host_fail_alloc_after(3);
    CU_ASSERT_EQUAL(vt_kv_cache_create(host, VT_F16, 4, 2, 64, 16, 256, &c, &err), VT_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(c);
    VT_ASSERT_ERROR(err, VT_ERR_NOMEM);
    vt_host_fail_alloc_after(0);
    /* Not a KV-cache dtype (a weight type other than q8_0). */
    CU_ASSERT_EQUAL(vt_kv_cache_create(host, VT_Q4_K, 1, 1, 256, 16, 16, &c, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "f32, f16, bf16, q8_0"));
    /* q8_0 blocks run along the head dimension: head_dim 48 is refused with the numbers. */
    CU_ASSERT_EQUAL(vt_kv_cache_create(host, VT_Q8_0, 2, 2, 48, 16, 64, &c, &err), VT_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "head_dim is 48 (not a multiple of 32)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "q8_0"));
}

/* A q8_0 cache: each head's row of 64 values is 2 blocks of 34 bytes, the
 * tensors describe that, and a token costs 2 x layers x heads x 68 bytes
 * against f16's 2 x layers x heads x 128. */
static void test_q8_0_geometry(void) {
    vt_kv_cache *c = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_Q8_0, 3, 2, 64, 16, 64, &c, &err), VT_OK);
    CU_ASSERT_EQUAL(c->block_bytes, (size_t)16 * 2 * 2 * 34);
    vt_tensor t = vt_kv_cache_tensor(c, 2, 1);
    CU_ASSERT_EQUAL(t.dtype, VT_Q8_0);
    CU_ASSERT_EQUAL(t.nb[0], 34u);
    CU_ASSERT_EQUAL(t.nb[1], 68u);
    CU_ASSERT_EQUAL(t.nb[2], 136u);
    CU_ASSERT_EQUAL(t.nb[3], (size_t)136 * 16);
    CU_ASSERT_EQUAL(vt_kv_cache_bytes(c), (size_t)2 * 3 * 4 * c->block_bytes);
    vt_kv_cache_free(c);
    CU_ASSERT_EQUAL(vt_kv_cache_bytes_per_token(VT_Q8_0, 3, 2, 64), (size_t)2 * 3 * 2 * 68);
    CU_ASSERT_EQUAL(vt_kv_cache_bytes_per_token(VT_F16, 3, 2, 64), (size_t)2 * 3 * 2 * 128);
    CU_ASSERT_EQUAL(vt_kv_cache_bytes_per_token(VT_F32, 3, 2, 64), (size_t)2 * 3 * 2 * 256);
    /* qwen3-27B's shape (the example): 216 KiB per token at f16, 114.75 KiB at q8_0 */
    CU_ASSERT_EQUAL(vt_kv_cache_bytes_per_token(VT_F16, 54, 8, 128), (size_t)216 * 1024);
    CU_ASSERT_EQUAL(vt_kv_cache_bytes_per_token(VT_Q8_0, 54, 8, 128), (size_t)117504);
}

int main(void) {
    CU_TestInfo tests[] = {
        {"geometry and the cache tensor's layout", test_geometry_and_tensor_layout},
        {"q8_0: blocks along head_dim, layout, bytes per token of every dtype", test_q8_0_geometry},
        {"slots follow non-contiguous block tables; release refills the free list",
         test_slots_follow_the_block_table},
        {"a full cache is VT_ERR_CONTEXT_FULL and leaves the sequence unchanged", test_full_cache_is_a_clear_error},
        {"absurd sizes and injected allocation failures are errors", test_absurd_sizes_fail_cleanly},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("kv cache", setup, teardown, tests);
    return vt_test_run();
}
