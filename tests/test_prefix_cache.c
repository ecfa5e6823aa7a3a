/* test_prefix_cache.c — automatic prefix caching (kv_cache.h): the pool's
 * chain keys, reference counts, eviction order and reclaim-before-refuse on
 * a bare pool; and through the real engine path, that a cache hit gives
 * logits bit-identical to computing the same prompt, on reference and simd,
 * every KV dtype, alone, inside a running batch, and after eviction; and the
 * scheduler's tokens with the cache on equal those with it off. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "engine_fixture.h"
#include "explain_parse.h"
#include "host.h"
#include "kv_cache.h"
#include "sampler.h"
#include "scheduler.h"
#include "threadpool.h"
#include "util.h"
#include "vt/vt_dtype.h"

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

/* ---- the pool alone ---- */

/* A sequence of n tokens stored (reserved and committed) into seq. */
static vt_status store(vt_kv_cache *c, vt_kv_seq *seq, const int32_t *tokens, int64_t n) {
    vt_status st = vt_kv_seq_reserve(c, seq, n, NULL);
    if (st == VT_OK) vt_kv_seq_commit(c, seq, tokens, n);
    return st;
}

static void test_chain_and_refcounts(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 64, &c, NULL), VT_OK); /* 16 blocks of 4 */
    int32_t a[14], b[14];
    for (int i = 0; i < 14; i++) a[i] = b[i] = 100 + i;
    b[5] = 7; /* b differs from a in its second block */
    vt_kv_seq s1 = {0}, s2 = {0}, s3 = {0};
    CU_ASSERT_EQUAL(store(c, &s1, a, 14), VT_OK); /* 3 full blocks filed, a partial one */
    CU_ASSERT_EQUAL(c->n_filed, 3);
    int32_t evictable = -1;
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 14, &evictable, NULL), 12);
    CU_ASSERT_EQUAL(evictable, 0); /* s1 holds them */
    /* one token is left to compute: 2 blocks, and 3 positions of the third copied */
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 12, &evictable, NULL), 11);
    CU_ASSERT_EQUAL(evictable, 1); /* the block to copy them into (s1 holds the one they come from) */
    /* the chain breaks at b's 6th token: a's second block gives its first position */
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, b, 14, &evictable, NULL), 5);
    /* a chain is matched whole from the start: a's second block alone is no hit */
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a + 4, 10, &evictable, NULL), 0);
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &s2, a, 14), 12);
    CU_ASSERT_EQUAL(s2.n_tokens, 12);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(s2.block_table[i], s1.block_table[i]);
        CU_ASSERT_EQUAL(c->blocks[s1.block_table[i]].ref, 2);
    }
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &s3, b, 14), 5);
    CU_ASSERT_EQUAL(c->blocks[s1.block_table[0]].ref, 3);
    CU_ASSERT_EQUAL(c->blocks[s1.block_table[1]].ref, 2); /* copied from, not shared */
    /* s3 goes on with its own blocks from its first difference */
    CU_ASSERT_NOT_EQUAL(s3.block_table[1], s1.block_table[1]);
    CU_ASSERT_EQUAL(c->tokens[s3.block_table[1] * 4], b[4]);
    CU_ASSERT_EQUAL(store(c, &s3, b + 5, 9), VT_OK);
    const int32_t free_before = vt_kv_cache_available(c);
    vt_kv_seq_release(c, &s1);
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), free_before + 1); /* only its partial block was its alone */
    vt_kv_seq_release(c, &s2);
    vt_kv_seq_release(c, &s3);
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), c->num_blocks); /* every block free or evictable */
    CU_ASSERT(c->n_evictable > 0);
    vt_kv_seq s4 = {0};
    /* filed blocks outlive their sequences, and so does s1's partial block
     * (tokens 12-13), as a tail: the first of its two positions is taken
     * (one token is left to compute), copied into a block of s4's own */
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &s4, a, 14), 13);
    CU_ASSERT_EQUAL(s4.n_blocks, 4);
    CU_ASSERT_EQUAL(c->blocks[s4.block_table[3]].ref, 1);
    CU_ASSERT_FALSE(c->blocks[s4.block_table[3]].filed);
    vt_kv_seq_release(c, &s4);
    vt_kv_cache_free(c);
}

/* Evictable blocks go least recently used first, a sequence's last blocks
 * before its first; a full pool evicts rather than refuses; and a block
 * reused for other content no longer matches as anyone's parent. */
static void test_eviction_order_and_reclaim(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 32, &c, NULL), VT_OK); /* 8 blocks */
    int32_t a[9], b[9], d[33];
    for (int i = 0; i < 9; i++) a[i] = 1 + i, b[i] = 50 + i;
    for (int i = 0; i < 33; i++) d[i] = 200 + i;
    vt_kv_seq sa = {0}, sb = {0}, sd = {0};
    CU_ASSERT_EQUAL(store(c, &sa, a, 9), VT_OK); /* 2 full + 1 partial */
    CU_ASSERT_EQUAL(store(c, &sb, b, 9), VT_OK);
    vt_kv_seq_release(c, &sa); /* a's blocks evictable first (older) */
    vt_kv_seq_release(c, &sb);
    CU_ASSERT_EQUAL(c->n_evictable, 6); /* the partial blocks too, as tails */
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), 8);
    int32_t ev;
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 10, &ev, NULL), 9); /* 2 blocks and a's tail */
    CU_ASSERT_EQUAL(ev, 2 + 1); /* both blocks evictable, and the block the tail is copied into */
    /* 4 blocks: the 2 free ones, then the oldest evictable, a's tail and a's second block */
    CU_ASSERT_EQUAL(store(c, &sd, d, 16), VT_OK);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 10, &ev, NULL), 4); /* a keeps its first block */
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, b, 10, &ev, NULL), 9);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, b, 9, &ev, NULL), 8); /* one token is left to compute */
    /* the whole pool for one sequence: every evictable block is reclaimed, nothing refused */
    vt_kv_seq_release(c, &sd);
    vt_kv_seq big = {0};
    CU_ASSERT_EQUAL(store(c, &big, d, 32), VT_OK);
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), 0);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 9, &ev, NULL), 0);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, b, 9, &ev, NULL), 0);
    vt_kv_seq one = {0};
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &one, 1, NULL), VT_ERR_CONTEXT_FULL); /* only then is it full */
    vt_kv_seq_release(c, &big);
    /* caching off: nothing filed, nothing shared */
    vt_kv_cache_set_prefix_cache(c, false);
    CU_ASSERT_EQUAL(c->n_filed, 0);
    vt_kv_seq x = {0};
    CU_ASSERT_EQUAL(store(c, &x, a, 9), VT_OK);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 9, &ev, NULL), 0);
    vt_kv_seq_release(c, &x);
    CU_ASSERT_EQUAL(c->free_list != NULL && c->n_free == c->num_blocks, true);
    vt_kv_cache_free(c);
}

/* A budget of cached blocks: beyond it, the least recently used unheld
 * blocks are freed at once (a sequence's last blocks first, so the shared
 * beginnings stay); held blocks never count against it; lowering it trims
 * at once, and the engine takes it from kv_cache.prefix_cache_blocks. */
static void test_cache_budget(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 64, &c, NULL), VT_OK); /* 16 blocks of 4 */
    vt_kv_cache_set_cache_budget(c, 3);
    int32_t a[17], b[17];
    for (int i = 0; i < 17; i++) a[i] = 1 + i, b[i] = 60 + i;
    vt_kv_seq sa = {0}, sb = {0};
    CU_ASSERT_EQUAL(store(c, &sa, a, 17), VT_OK); /* 4 full blocks filed, held: the budget does not apply */
    CU_ASSERT_EQUAL(c->n_filed, 4);
    vt_kv_seq_release(c, &sa);
    CU_ASSERT_EQUAL(c->n_evictable, 3); /* its last full block went first */
    CU_ASSERT_EQUAL(c->n_filed, 3);
    int32_t ev;
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 17, &ev, NULL), 12);
    CU_ASSERT_EQUAL(store(c, &sb, b, 17), VT_OK);
    vt_kv_seq_release(c, &sb); /* b's blocks are newer: a's go */
    CU_ASSERT_EQUAL(c->n_evictable, 3);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, a, 17, &ev, NULL), 0);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, b, 17, &ev, NULL), 12);
    vt_kv_cache_set_cache_budget(c, 1);
    CU_ASSERT_EQUAL(c->n_evictable, 1);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, b, 17, &ev, NULL), 4);
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), c->num_blocks);
    vt_kv_cache_free(c);

    /* through the engine: the option reaches the pool */
    vt_options o;
    vt_fixture_options(&o, "reference", VT_F32);
    vt_error err = {0};
    CU_ASSERT_EQUAL(vt_options_set(&o, "kv_cache.prefix_cache_blocks", "5", "cli", &err), VT_OK);
    vt_model *m = NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/qwen3-tiny-f32.gguf", VT_TEST_DATA_DIR);
    CU_ASSERT_EQUAL_FATAL(vt_model_load(path, &m, &err), VT_OK);
    vt_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_engine_create(&o, m, false, &e, &err), VT_OK);
    CU_ASSERT_EQUAL(e->kv->max_evictable, 5);
    vt_engine_free(e);
    vt_model_free(m);
}

/* A fork shares the full blocks and copies the partial one. */
static void test_fork_shares_full_blocks(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 2, 1, 8, 4, 32, &c, NULL), VT_OK);
    int32_t a[6] = {1, 2, 3, 4, 5, 6};
    vt_kv_seq src = {0}, dst = {0};
    CU_ASSERT_EQUAL(store(c, &src, a, 6), VT_OK);
    float *k1 = (float *)c->k[1] + (size_t)src.block_table[1] * c->block_bytes / sizeof(float);
    k1[3] = 42.0f; /* something in the partial block's layer-1 K */
    CU_ASSERT_EQUAL(vt_kv_seq_fork(c, &src, &dst, NULL), VT_OK);
    CU_ASSERT_EQUAL(dst.n_tokens, 6);
    CU_ASSERT_EQUAL(dst.block_table[0], src.block_table[0]);
    CU_ASSERT_NOT_EQUAL(dst.block_table[1], src.block_table[1]);
    CU_ASSERT_EQUAL(((float *)c->k[1] + (size_t)dst.block_table[1] * c->block_bytes / sizeof(float))[3], 42.0f);
    CU_ASSERT_EQUAL(c->blocks[src.block_table[0]].ref, 2);
    vt_kv_seq_release(c, &src);
    vt_kv_seq_release(c, &dst);
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), c->num_blocks);
    vt_kv_cache_free(c);
}

/* Partial matches: a sequence's partial last block is filed as a tail
 * when it ends; a prompt taking the blocks before it copies the positions
 * of the tail, or of a full block, that its next tokens begin with (K and V
 * of every layer, bit for bit, and the tokens) into a block of its own; a
 * tail the same as one filed is not filed twice; no copy when the pool
 * lacks a block for it; evicted tails match nothing. */
static void test_partial_blocks(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F16, 3, 2, 32, 4, 40, &c, NULL), VT_OK); /* 10 blocks of 4 */
    const size_t row = c->block_bytes / 4;
    int32_t a[7] = {1, 2, 3, 4, 5, 6, 7}, q[8] = {1, 2, 3, 4, 5, 6, 9, 9};
    vt_kv_seq sa = {0}, sq = {0}, sr = {0};
    CU_ASSERT_EQUAL(store(c, &sa, a, 7), VT_OK); /* a full block and 3 positions */
    for (int32_t l = 0; l < 3; l++) /* a pattern in the partial block's three rows, per layer, K and V */
        for (size_t i = 0; i < 3 * row; i++) {
            ((unsigned char *)c->k[l])[(size_t)sa.block_table[1] * c->block_bytes + i] = (unsigned char)(i * 7 + l);
            ((unsigned char *)c->v[l])[(size_t)sa.block_table[1] * c->block_bytes + i] = (unsigned char)(i * 5 + l);
        }
    const int32_t tail = sa.block_table[1];
    vt_kv_seq_release(c, &sa);
    CU_ASSERT_TRUE(c->blocks[tail].filed);
    CU_ASSERT_EQUAL(c->blocks[tail].n_tail, 3);
    CU_ASSERT_EQUAL(c->n_filed, 2);
    int32_t taken;
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, q, 8, &taken, NULL), 6); /* q leaves a at its 7th token */
    CU_ASSERT_EQUAL(taken, 1 + 1);
    const int32_t available = vt_kv_cache_available(c);
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &sq, q, 8), 6);
    CU_ASSERT_EQUAL(available - vt_kv_cache_available(c), taken); /* what the match said it would use */
    CU_ASSERT_EQUAL(sq.n_blocks, 2);
    const int32_t copy = sq.block_table[1];
    CU_ASSERT_NOT_EQUAL(copy, tail);
    for (int32_t l = 0; l < 3; l++) {
        CU_ASSERT_EQUAL(memcmp((char *)c->k[l] + (size_t)copy * c->block_bytes,
                               (char *)c->k[l] + (size_t)tail * c->block_bytes, 2 * row), 0);
        CU_ASSERT_EQUAL(memcmp((char *)c->v[l] + (size_t)copy * c->block_bytes,
                               (char *)c->v[l] + (size_t)tail * c->block_bytes, 2 * row), 0);
    }
    CU_ASSERT_TRUE(c->blocks[tail].filed); /* the tail stays, unheld */
    CU_ASSERT_EQUAL(c->blocks[tail].ref, 0);
    /* sq goes on writing its copy; when it fills, it is filed as a full block */
    CU_ASSERT_EQUAL(store(c, &sq, q + 6, 2), VT_OK);
    CU_ASSERT_TRUE(c->blocks[copy].filed);
    CU_ASSERT_EQUAL(c->blocks[copy].n_tail, 0);
    vt_kv_seq_release(c, &sq);
    /* the same 7 tokens again: a's tail is not filed a second time */
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &sr, a, 7), 6); /* 4 + 2 of the tail (one left to compute) */
    CU_ASSERT_EQUAL(store(c, &sr, a + 6, 1), VT_OK);
    const int32_t filed_before = c->n_filed;
    vt_kv_seq_release(c, &sr);
    CU_ASSERT_EQUAL(c->n_filed, filed_before);
    /* a sequence shorter than a block: its tail follows no block */
    int32_t b[3] = {40, 41, 42}, bb[4] = {40, 41, 42, 43};
    vt_kv_seq sb = {0}, sbb = {0};
    CU_ASSERT_EQUAL(store(c, &sb, b, 3), VT_OK);
    vt_kv_seq_release(c, &sb);
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &sbb, bb, 4), 3);
    vt_kv_seq_release(c, &sbb);
    vt_kv_cache_set_cache_budget(c, 0); /* everything unheld freed: nothing left to match */
    CU_ASSERT_EQUAL(c->n_filed, 0);
    vt_kv_cache_set_cache_budget(c, -1);
    /* no block to copy into besides the tail itself: the full blocks only */
    vt_kv_seq s0 = {0}, hog = {0};
    CU_ASSERT_EQUAL(store(c, &s0, a, 7), VT_OK);
    vt_kv_seq_release(c, &s0); /* its two blocks evictable, the others free */
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &hog, 4 * (c->num_blocks - 2), NULL), VT_OK); /* the free ones */
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), 2);
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, q, 8, &taken, NULL), 4);
    CU_ASSERT_EQUAL(taken, 1);
    vt_kv_seq_trim(c, &hog); /* nothing stored: every block free again */
    CU_ASSERT_EQUAL(vt_kv_cache_match_prefix(c, q, 8, &taken, NULL), 6);
    vt_kv_seq_release(c, &hog);
    /* the tail copied from is the least recently used block and none is
     * free: the copy goes to the next evictable one, not onto the tail */
    vt_kv_cache_set_cache_budget(c, 0);
    vt_kv_cache_set_cache_budget(c, -1);
    int32_t other[3] = {70, 71, 72};
    vt_kv_seq sa2 = {0}, so = {0}, hog2 = {0}, sq2 = {0};
    CU_ASSERT_EQUAL(store(c, &sa2, a, 7), VT_OK);
    CU_ASSERT_EQUAL(store(c, &so, other, 3), VT_OK);
    const int32_t a_tail = sa2.block_table[1], o_tail = so.block_table[0];
    vt_kv_seq_release(c, &sa2); /* evictable, oldest first: a's tail, a's first block */
    vt_kv_seq_release(c, &so);  /* then the other's tail */
    CU_ASSERT_EQUAL(c->lru_head, a_tail);
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &hog2, 4 * c->n_free, NULL), VT_OK);
    CU_ASSERT_EQUAL(c->n_free, 0);
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &sq2, q, 8), 6);
    CU_ASSERT_EQUAL(sq2.block_table[1], o_tail); /* the other's tail was evicted for the copy */
    CU_ASSERT_TRUE(c->blocks[a_tail].filed);
    CU_ASSERT_EQUAL(c->blocks[a_tail].n_tail, 3);
    CU_ASSERT_EQUAL(c->tokens[(size_t)o_tail * 4 + 1], a[5]);
    vt_kv_seq_release(c, &sq2);
    vt_kv_seq_release(c, &hog2);
    /* every available block taken: the tail and its parent are reused, unfiled */
    vt_kv_seq s1 = {0}, s2 = {0}, s3 = {0};
    CU_ASSERT_EQUAL(store(c, &s1, a, 7), VT_OK);
    const int32_t parent = s1.block_table[0], last = s1.block_table[1];
    vt_kv_seq_release(c, &s1);
    CU_ASSERT_EQUAL(vt_kv_seq_reserve(c, &s2, 4 * vt_kv_cache_available(c), NULL), VT_OK);
    CU_ASSERT_FALSE(c->blocks[parent].filed);
    CU_ASSERT_FALSE(c->blocks[last].filed);
    CU_ASSERT_EQUAL(c->blocks[last].n_tail, 0);
    vt_kv_seq_release(c, &s2); /* nothing committed: all free */
    CU_ASSERT_EQUAL(vt_kv_seq_attach_prefix(c, &s3, a, 7), 0);
    vt_kv_seq_release(c, &s3);
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), c->num_blocks);
    vt_kv_cache_free(c);
}

/* A sequence that fills a block with the same tokens after the same parent
 * as a filed one holds the filed one and gives its own back: the same
 * request sent again keeps one copy of its blocks in the pool, not one per
 * request (which would push out everything else cached). */
static void test_same_block_kept_once(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 32, &c, NULL), VT_OK); /* 8 blocks of 4 */
    int32_t a[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    vt_kv_seq s1 = {0}, s2 = {0};
    CU_ASSERT_EQUAL(store(c, &s1, a, 9), VT_OK); /* 2 full blocks filed, 1 partial */
    CU_ASSERT_EQUAL(c->n_filed, 2);
    const int32_t available = vt_kv_cache_available(c);
    CU_ASSERT_EQUAL(store(c, &s2, a, 9), VT_OK); /* computed again, not attached */
    CU_ASSERT_EQUAL(c->n_filed, 2);
    CU_ASSERT_EQUAL(s2.block_table[0], s1.block_table[0]);
    CU_ASSERT_EQUAL(s2.block_table[1], s1.block_table[1]);
    CU_ASSERT_NOT_EQUAL(s2.block_table[2], s1.block_table[2]); /* partial blocks stay each its own */
    CU_ASSERT_EQUAL(c->blocks[s1.block_table[1]].ref, 2);
    CU_ASSERT_EQUAL(available - vt_kv_cache_available(c), 1); /* only s2's partial block is its own */
    vt_kv_seq_release(c, &s1);
    vt_kv_seq_release(c, &s2);
    CU_ASSERT_EQUAL(c->n_filed, 3); /* the two blocks and one tail */
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), c->num_blocks);
    vt_kv_cache_free(c);
}

/* K of position p of seq: a hash of its token prefix (what a forward
 * computes from), written where the pool keeps it. */
static uint32_t prefix_hash(const int32_t *t, int64_t n) {
    uint32_t h = 2166136261u;
    for (int64_t i = 0; i < n; i++) h = (h ^ (uint32_t)t[i]) * 16777619u;
    return h | 1;
}
static void compute(vt_kv_cache *c, vt_kv_seq *seq, const int32_t *all, int64_t from, int64_t n) {
    for (int64_t p = from; p < from + n; p++) {
        int64_t slot;
        vt_kv_seq_slots(c, seq, p, 1, &slot);
        ((uint32_t *)c->k[0])[slot * 8] = prefix_hash(all, p + 1); /* 8 floats a row */
    }
}

/* vt_engine_eval's undoing of a prompt whose later chunk failed: the
 * earlier chunk filled (and filed) a block, or found it filed already and
 * took that one; truncating back leaves no block filed under tokens it will
 * no longer hold, and no block another sequence holds written on. */
static void test_undoing_stored_tokens(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 64, &c, NULL), VT_OK); /* 16 blocks of 4 */
    const int32_t x[8] = {7, 1, 2, 3, 4, 5, 6, 8}, y[8] = {7, 9, 2, 3, 4, 5, 6, 8};
    for (int shared = 0; shared < 2; shared++) {
        vt_kv_seq other = {0}, s = {0};
        if (shared) { /* another sequence holds x's first block, filed */
            CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &other, 5, NULL), VT_OK);
            compute(c, &other, x, 0, 5);
            vt_kv_seq_commit(c, &other, x, 5);
        }
        CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &s, 1, NULL), VT_OK);
        compute(c, &s, x, 0, 1);
        vt_kv_seq_commit(c, &s, x, 1);
        /* an eval of x's next 7 tokens: the first chunk of 3 is stored, the next fails */
        CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &s, 7, NULL), VT_OK);
        compute(c, &s, x, 1, 3);
        vt_kv_seq_commit(c, &s, x + 1, 3);
        CU_ASSERT_EQUAL(c->blocks[s.block_table[0]].filed, true);
        if (shared) CU_ASSERT_EQUAL(s.block_table[0], other.block_table[0]);
        vt_kv_seq_truncate(c, &s, 1);
        CU_ASSERT_EQUAL(s.n_tokens, 1);
        CU_ASSERT_EQUAL(s.n_blocks, 1);
        CU_ASSERT_FALSE(c->blocks[s.block_table[0]].filed);
        CU_ASSERT_EQUAL(c->blocks[s.block_table[0]].ref, 1);
        CU_ASSERT_EQUAL(c->tokens[s.block_table[0] * 4], 7); /* its first position kept */
        if (shared) {
            CU_ASSERT_NOT_EQUAL(s.block_table[0], other.block_table[0]);
            CU_ASSERT_EQUAL(c->blocks[other.block_table[0]].ref, 1);
        }
        /* the next eval stores y, which differs from x at position 1 */
        CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &s, 7, NULL), VT_OK);
        compute(c, &s, y, 1, 7);
        vt_kv_seq_commit(c, &s, y + 1, 7);
        vt_kv_seq_release(c, &s);
        if (shared) { /* other's block still holds x's tokens and K */
            CU_ASSERT_EQUAL(memcmp(c->tokens + other.block_table[0] * 4, x, 4 * sizeof *x), 0);
            int64_t slot;
            vt_kv_seq_slots(c, &other, 3, 1, &slot);
            CU_ASSERT_EQUAL(((uint32_t *)c->k[0])[slot * 8], prefix_hash(x, 4));
        }
        /* whatever a new sequence takes for x or y holds K computed from its own prefix */
        for (int which = 0; which < 2; which++) {
            const int32_t *t = which ? y : x;
            vt_kv_seq n = {0};
            const int64_t hit = vt_kv_seq_attach_prefix(c, &n, t, 8);
            for (int64_t p = 0; p < hit; p++) {
                int64_t slot;
                vt_kv_seq_slots(c, &n, p, 1, &slot);
                CU_ASSERT_EQUAL(((uint32_t *)c->k[0])[slot * 8], prefix_hash(t, p + 1));
            }
            vt_kv_seq_release(c, &n);
        }
        vt_kv_seq_release(c, &other);
    }
    vt_kv_cache_free(c);
}

/* The undoing above copies the shared block's first positions into the
 * block its own went back as; should no block be free for that copy, the
 * sequence is released (false) rather than left to write into a block
 * another sequence holds, and that one's tokens and K stay as they were. */
static void test_truncate_without_a_free_block_releases(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 64, &c, NULL), VT_OK); /* 16 blocks of 4 */
    const int32_t x[8] = {7, 1, 2, 3, 4, 5, 6, 8};
    vt_kv_seq other = {0}, s = {0}, filler = {0};
    CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &other, 5, NULL), VT_OK);
    compute(c, &other, x, 0, 5);
    vt_kv_seq_commit(c, &other, x, 5);
    CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &s, 4, NULL), VT_OK);
    compute(c, &s, x, 0, 4);
    vt_kv_seq_commit(c, &s, x, 4); /* its one block is other's, filed; its own went back */
    CU_ASSERT_EQUAL_FATAL(s.block_table[0], other.block_table[0]);
    const int64_t left = vt_kv_cache_available(c);
    CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &filler, left * 4, NULL), VT_OK);
    CU_ASSERT_EQUAL(vt_kv_cache_available(c), 0);
    CU_ASSERT_FALSE(vt_kv_seq_truncate(c, &s, 1));
    CU_ASSERT_EQUAL(s.n_tokens, 0);
    CU_ASSERT_EQUAL(s.n_blocks, 0);
    CU_ASSERT_EQUAL(c->blocks[other.block_table[0]].ref, 1);
    CU_ASSERT_EQUAL(memcmp(c->tokens + other.block_table[0] * 4, x, 4 * sizeof *x), 0);
    int64_t slot;
    vt_kv_seq_slots(c, &other, 3, 1, &slot);
    CU_ASSERT_EQUAL(((uint32_t *)c->k[0])[slot * 8], prefix_hash(x, 4));
    vt_kv_seq_release(c, &filler);
    vt_kv_seq_release(c, &other);
    vt_kv_cache_free(c);
}

/* Truncating into a block that a later block was filed under (a first
 * chunk filled two blocks, the second chunk failed): the block is written
 * again with other tokens, so what was filed as its child no longer
 * continues it, whatever the chain keys say: the parent's generation moved
 * on, and the child's parent check (parent block and its generation)
 * refuses it without relying on the 64-bit key. */
static void test_truncate_orphans_children(void) {
    vt_kv_cache *c = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_kv_cache_create(host, VT_F32, 1, 1, 8, 4, 64, &c, NULL), VT_OK); /* 16 blocks of 4 */
    const int32_t x[10] = {7, 1, 2, 3, 4, 5, 6, 8, 9, 9}, y[10] = {7, 9, 2, 3, 4, 5, 6, 8, 9, 9};
    vt_kv_seq s = {0};
    CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &s, 1, NULL), VT_OK);
    compute(c, &s, x, 0, 1);
    vt_kv_seq_commit(c, &s, x, 1);
    CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &s, 9, NULL), VT_OK);
    compute(c, &s, x, 1, 8);
    vt_kv_seq_commit(c, &s, x + 1, 8); /* blocks 0 and 1 full and filed, 1 under 0 */
    const int32_t b0 = s.block_table[0], b1 = s.block_table[1];
    CU_ASSERT_FATAL(c->blocks[b0].filed && c->blocks[b1].filed);
    CU_ASSERT_EQUAL(c->blocks[b1].parent, b0);
    vt_kv_seq_truncate(c, &s, 1);
    CU_ASSERT_EQUAL(s.block_table[0], b0); /* ours alone: written again in place */
    const bool still_continues = c->blocks[b1].filed && c->blocks[b1].parent == b0 &&
                                 c->blocks[b1].parent_gen == c->blocks[b0].gen;
    CU_ASSERT_FALSE(still_continues);
    CU_ASSERT_EQUAL_FATAL(vt_kv_seq_reserve(c, &s, 3, NULL), VT_OK);
    compute(c, &s, y, 1, 3);
    vt_kv_seq_commit(c, &s, y + 1, 3); /* block 0 now holds y's first 4 tokens, filed */
    vt_kv_seq n = {0};
    const int64_t hit = vt_kv_seq_attach_prefix(c, &n, y, 10);
    CU_ASSERT_EQUAL(hit, 4); /* y's first block, and nothing of x's second */
    for (int64_t p = 0; p < hit; p++) {
        int64_t slot;
        vt_kv_seq_slots(c, &n, p, 1, &slot);
        CU_ASSERT_EQUAL(((uint32_t *)c->k[0])[slot * 8], prefix_hash(y, p + 1));
    }
    vt_kv_seq_release(c, &n);
    vt_kv_seq_release(c, &s);
    vt_kv_cache_free(c);
}

/* ---- through the engine ---- */

#define PROMPT_LEN 40 /* two full blocks of 16 and a partial one */

static void prompt_tokens(int32_t *p, int n, int32_t salt) {
    for (int i = 0; i < n; i++) p[i] = 1 + (int32_t)((i * 37 + salt * 11) % 500);
}

/* An engine of `seqs` sequences on backend with the KV dtype. */
static bool open_engine(vt_fixture *f, const char *model, const char *backend, int32_t kv, int seqs) {
    memset(f, 0, sizeof *f);
    vt_options o;
    vt_fixture_options(&o, backend, kv);
    if (vt_model_load(model, &f->model, &f->err) != VT_OK) return false;
    const vt_engine_shape shape = {.all_logits = false, .max_seqs = seqs};
    return vt_engine_create_shaped(&o, f->model, &shape, &f->engine, &f->err) == VT_OK;
}

/* Run one step of entries and copy entry `want`'s logits into out. */
static bool step(vt_engine *e, const vt_step_entry *entries, int n, int want, float *out) {
    vt_error err = {0};
    if (vt_engine_step(e, entries, n, &err) != VT_OK) {
        printf("\n  step: %s", err.msg);
        return false;
    }
    const float *l = vt_engine_step_logits(e, want);
    if (!l) return false;
    memcpy(out, l, (size_t)e->model->hp.n_vocab * sizeof *out);
    return true;
}

/* The same prompt's last logits: computed, then with its first 39 tokens
 * from the cache (32 in shared blocks, 7 copied; alone, beside a decoding
 * sequence, and after the cache was evicted) are the same bits; then 8
 * greedy decode steps agree too. And a prompt leaving p inside its third
 * block (4 positions copied, 4 tokens computed) gives the bits it gives
 * computed whole. */
static void check_hits_exact(const char *model, const char *backend, int32_t kv) {
    vt_fixture f;
    if (!open_engine(&f, model, backend, kv, 3)) {
        printf("\n  %s on %s: %s", model, backend, f.err.msg);
        CU_FAIL("engine");
        vt_fixture_close(&f);
        return;
    }
    vt_engine *e = f.engine;
    CU_ASSERT_TRUE_FATAL(e->kv->prefix_cache); /* one backend for both plans: on */
    const int32_t V = f.model->hp.n_vocab;
    float *fresh = malloc((size_t)V * sizeof *fresh), *hit = malloc((size_t)V * sizeof *hit);
    int32_t p[PROMPT_LEN], other[PROMPT_LEN], q[PROMPT_LEN];
    prompt_tokens(p, PROMPT_LEN, 1);
    prompt_tokens(other, PROMPT_LEN, 2);
    memcpy(q, p, 36 * sizeof *q);
    prompt_tokens(q + 36, 4, 9);
    float *fresh_q = malloc((size_t)V * sizeof *fresh_q);
    vt_kv_cache_set_prefix_cache(e->kv, false); /* q computed whole, nothing filed */
    vt_step_entry eq = {2, q, PROMPT_LEN, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &eq, 1, 0, fresh_q));
    vt_engine_seq_release(e, 2);
    vt_kv_cache_set_prefix_cache(e->kv, true);
    /* computed whole */
    vt_step_entry en = {0, p, PROMPT_LEN, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &en, 1, 0, fresh));
    int32_t greedy_fresh[8], greedy_hit[8];
    int32_t tok = vt_argmax(fresh, V);
    for (int k = 0; k < 8; k++) {
        greedy_fresh[k] = tok;
        vt_step_entry d = {0, &tok, 1, true, true};
        float *l = hit; /* scratch */
        CU_ASSERT_TRUE_FATAL(step(e, &d, 1, 0, l));
        tok = vt_argmax(l, V);
    }
    vt_engine_seq_release(e, 0);
    /* a hit, alone: two full blocks, and of the third (p's last 8 tokens and
     * the 8 decoded) the 7 positions that leave one token to compute */
    CU_ASSERT_EQUAL(vt_engine_seq_attach_prefix(e, 1, p, PROMPT_LEN), PROMPT_LEN - 1);
    vt_step_entry rest = {1, p + PROMPT_LEN - 1, 1, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &rest, 1, 0, hit));
    CU_ASSERT_EQUAL(memcmp(fresh, hit, (size_t)V * sizeof *hit), 0);
    tok = vt_argmax(hit, V);
    for (int k = 0; k < 8; k++) {
        greedy_hit[k] = tok;
        vt_step_entry d = {1, &tok, 1, true, true};
        CU_ASSERT_TRUE_FATAL(step(e, &d, 1, 0, hit));
        tok = vt_argmax(hit, V);
    }
    CU_ASSERT_EQUAL(memcmp(greedy_fresh, greedy_hit, sizeof greedy_hit), 0);
    vt_engine_seq_release(e, 1);
    /* a hit in the middle of a running batch: sequence 0 decodes another
     * prompt in the same step as sequence 2 computes the rest of p */
    vt_step_entry o0 = {0, other, PROMPT_LEN, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &o0, 1, 0, hit));
    int32_t t0 = vt_argmax(hit, V);
    CU_ASSERT_EQUAL(vt_engine_seq_attach_prefix(e, 2, p, PROMPT_LEN), PROMPT_LEN - 1);
    const vt_step_entry both[2] = {{0, &t0, 1, true, true}, {2, p + PROMPT_LEN - 1, 1, true, false}};
    CU_ASSERT_TRUE_FATAL(step(e, both, 2, 1, hit));
    CU_ASSERT_EQUAL(memcmp(fresh, hit, (size_t)V * sizeof *hit), 0);
    vt_engine_seq_release(e, 0);
    vt_engine_seq_release(e, 2);
    CU_ASSERT_EQUAL(vt_engine_seq_attach_prefix(e, 1, q, PROMPT_LEN), 36);
    vt_step_entry q_rest = {1, q + 36, 4, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &q_rest, 1, 0, hit));
    CU_ASSERT_EQUAL(memcmp(fresh_q, hit, (size_t)V * sizeof *hit), 0);
    vt_engine_seq_release(e, 1);
    /* a copy from a tail: `other`'s 40 tokens end 8 into a block when its
     * sequence ends; `other` and 3 more take those 8 positions from it */
    int32_t o3[PROMPT_LEN + 3];
    memcpy(o3, other, sizeof other);
    prompt_tokens(o3 + PROMPT_LEN, 3, 10);
    vt_kv_cache_set_prefix_cache(e->kv, false); /* o3 computed whole, nothing filed */
    vt_step_entry eo = {2, o3, PROMPT_LEN + 3, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &eo, 1, 0, fresh_q));
    vt_engine_seq_release(e, 2);
    vt_kv_cache_set_prefix_cache(e->kv, true);
    vt_step_entry eo40 = {2, other, PROMPT_LEN, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &eo40, 1, 0, hit));
    vt_engine_seq_release(e, 2); /* its last block, 8 positions, filed as a tail */
    CU_ASSERT_EQUAL(vt_engine_seq_attach_prefix(e, 1, o3, PROMPT_LEN + 3), PROMPT_LEN);
    vt_step_entry o_rest = {1, o3 + PROMPT_LEN, 3, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &o_rest, 1, 0, hit));
    CU_ASSERT_EQUAL(memcmp(fresh_q, hit, (size_t)V * sizeof *hit), 0);
    vt_engine_seq_release(e, 1);
    free(fresh_q);
    /* after eviction: with the cache off every filed block is dropped, and
     * computing p again (a miss) still gives the same bits */
    vt_kv_cache_set_prefix_cache(e->kv, false);
    CU_ASSERT_EQUAL(vt_engine_seq_attach_prefix(e, 1, p, PROMPT_LEN), 0);
    vt_step_entry again = {1, p, PROMPT_LEN, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &again, 1, 0, hit));
    CU_ASSERT_EQUAL(memcmp(fresh, hit, (size_t)V * sizeof *hit), 0);
    free(fresh);
    free(hit);
    vt_fixture_close(&f);
}

/* A chat's next turn resends the previous answer: blocks its tokens filled
 * one decode step at a time are hits too, and bit for bit what computing
 * them as a prompt gives. A 21-token prompt and 45 greedy decode steps
 * (each feeds the token sampled last: positions 21..65 stored by decodes),
 * released; then that whole text and 5 more tokens take all 66 stored
 * positions from the cache, and the last logits of the 71 equal those of
 * the 71 computed with the cache off. */
static void check_decoded_hit(const char *model, const char *backend, int32_t kv) {
    vt_fixture f;
    if (!open_engine(&f, model, backend, kv, 2)) {
        printf("\n  %s on %s: %s", model, backend, f.err.msg);
        CU_FAIL("engine");
        vt_fixture_close(&f);
        return;
    }
    vt_engine *e = f.engine;
    CU_ASSERT_TRUE_FATAL(e->kv->prefix_cache);
    const int32_t V = f.model->hp.n_vocab;
    float *l = malloc((size_t)V * sizeof *l), *hit = malloc((size_t)V * sizeof *hit);
    int32_t all[80];
    int64_t n = 21;
    prompt_tokens(all, (int)n, 5);
    vt_step_entry prompt = {0, all, n, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &prompt, 1, 0, l));
    for (int k = 0; k < 45; k++) {
        all[n] = vt_argmax(l, V);
        vt_step_entry d = {0, all + n, 1, true, true};
        n++;
        CU_ASSERT_TRUE_FATAL(step(e, &d, 1, 0, l));
    }
    vt_engine_seq_release(e, 0); /* 66 positions stored */
    prompt_tokens(all + n, 5, 6);
    n += 5;
    const int64_t got = vt_engine_seq_attach_prefix(e, 1, all, n);
    CU_ASSERT_EQUAL(got, 66); /* every position the steps stored, 45 of them by decodes */
    vt_step_entry rest = {1, all + got, n - got, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &rest, 1, 0, hit));
    vt_engine_seq_release(e, 1);
    vt_kv_cache_set_prefix_cache(e->kv, false);
    vt_step_entry cold = {1, all, n, true, false};
    CU_ASSERT_TRUE_FATAL(step(e, &cold, 1, 0, l));
    CU_ASSERT_EQUAL(memcmp(l, hit, (size_t)V * sizeof *hit), 0);
    if (memcmp(l, hit, (size_t)V * sizeof *hit) != 0) printf("\n  %s %s kv %s: hit differs", model, backend, vt_dtype_name(kv));
    free(l);
    free(hit);
    vt_fixture_close(&f);
}

static const char *model_path(const char *name, char *buf, size_t size) {
    const char *dir = vt_test_data_dir("test models");
    snprintf(buf, size, "%s/models/%s.gguf", dir ? dir : ".", name);
    return buf;
}

static void test_hits_exact_reference(void) {
    char m[1024];
    model_path("qwen3-tiny-q4_k_m", m, sizeof m);
    const int32_t kvs[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};
    for (size_t i = 0; i < sizeof kvs / sizeof *kvs; i++) {
        check_hits_exact(m, "reference", kvs[i]);
        check_decoded_hit(m, "reference", kvs[i]);
    }
}

static void test_hits_exact_simd(void) {
    if (!vt_test_simd_expected()) return; /* it said why */
    char m[1024];
    const char *models[] = {"qwen3-tiny-q4_k_m", "qwen3-tiny-f16", "qwen3moe-tiny-q4_k_m"};
    const int32_t kvs[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0};
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++)
        for (size_t i = 0; i < sizeof kvs / sizeof *kvs; i++) {
            check_hits_exact(model_path(models[mi], m, sizeof m), "simd", kvs[i]);
            check_decoded_hit(model_path(models[mi], m, sizeof m), "simd", kvs[i]);
        }
}

/* The scheduler: a conversation's second turn (its first turn's prompt and
 * answer, then more) takes the shared beginning from the cache, and every
 * request's tokens, greedy and seeded, equal those with the cache off. */
static void run_turns(const char *backend, bool cache, int32_t out[3][12], int64_t cached[3]) {
    char m[1024];
    vt_fixture f;
    CU_ASSERT_TRUE_FATAL(open_engine(&f, model_path("qwen3-tiny-q4_k_m", m, sizeof m), backend, VT_F16, 2));
    vt_kv_cache_set_prefix_cache(f.engine->kv, cache);
    vt_sched *s = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_sched_create(f.engine, NULL, &s, &err), VT_OK);
    int32_t system[48], turn[80];
    prompt_tokens(system, 48, 3);
    memcpy(turn, system, sizeof system);
    prompt_tokens(turn + 48, 32, 4);
    const struct {
        const int32_t *prompt;
        int64_t n;
        float temp;
    } reqs[3] = {{system, 48, 0}, {turn, 80, 0}, {turn, 80, 0.8f}};
    for (int r = 0; r < 3; r++) {
        vt_sched_request q = {.prompt = reqs[r].prompt, .n_prompt = reqs[r].n, .max_new_tokens = 12,
                              .sampler = {reqs[r].temp, 0, 1.0f, 0.0f, 1234}};
        uint64_t id;
        CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q, &id, &err), VT_OK);
        vt_sched_output o = {0};
        int64_t got = 0;
        while (o.state != VT_SCHED_FINISHED) {
            CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, NULL, &err), VT_OK);
            CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, id, &o, &err), VT_OK);
            for (int64_t k = 0; k < o.n_tokens && got < 12; k++) out[r][got++] = o.tokens[k];
        }
        cached[r] = o.n_cached;
        CU_ASSERT_EQUAL(vt_sched_remove(s, id, &err), VT_OK);
    }
    vt_sched_free(s);
    vt_fixture_close(&f);
}

static void test_scheduler_same_tokens(void) {
    const char *backends[] = {"reference", "simd"};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !vt_test_simd_expected()) continue;
        int32_t on[3][12], off[3][12];
        int64_t cached_on[3], cached_off[3];
        run_turns(backends[b], true, on, cached_on);
        run_turns(backends[b], false, off, cached_off);
        CU_ASSERT_EQUAL(memcmp(on, off, sizeof on), 0);
        CU_ASSERT_EQUAL(cached_on[0], 0);
        CU_ASSERT_EQUAL(cached_on[1], 48); /* the system prompt's 3 blocks */
        /* the turn's 4 full blocks, and 15 positions of its fifth (the one
         * left computes the logits) that the second request left filed */
        CU_ASSERT_EQUAL(cached_on[2], 79);
        CU_ASSERT_EQUAL(cached_off[1], 0);
    }
}

/* Three requests queued together, one 144-token beginning and their own 8
 * tokens, in steps of at most 32 tokens: the first computes the beginning
 * over several steps while the others wait for its blocks instead of
 * computing them beside it, so the steps prefill 144 + 3 x 8 tokens in all,
 * the others take 144 tokens each from the cache, and the greedy tokens are
 * those of the same requests with the cache off. With the cache on, the
 * three then decode together over the same blocks for positions 0-143,
 * whose first span (0-127) simd's attention reads once for all three. */
static void run_together(const char *backend, bool cache, int32_t out[3][8], int64_t cached[3], int64_t *prefilled) {
    char m[1024];
    vt_fixture f;
    CU_ASSERT_TRUE_FATAL(open_engine(&f, model_path("qwen3-tiny-q4_k_m", m, sizeof m), backend, VT_F16, 3));
    vt_kv_cache_set_prefix_cache(f.engine->kv, cache);
    vt_sched *s = NULL;
    vt_error err = {0};
    const vt_sched_options so = {.max_waiting = 8, .token_budget = 32, .prefill_chunk = 0};
    CU_ASSERT_EQUAL_FATAL(vt_sched_create(f.engine, &so, &s, &err), VT_OK);
    enum { BEGINNING = 144, OWN = 8 };
    int32_t prompts[3][BEGINNING + OWN];
    uint64_t ids[3];
    for (int r = 0; r < 3; r++) {
        prompt_tokens(prompts[r], BEGINNING, 5);
        prompt_tokens(prompts[r] + BEGINNING, OWN, 6 + r);
        const vt_sched_request q = {.prompt = prompts[r], .n_prompt = BEGINNING + OWN, .max_new_tokens = 8,
                                    .sampler = {0, 0, 1.0f, 0.0f, 1}};
        CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q, &ids[r], &err), VT_OK);
    }
    int64_t got[3] = {0, 0, 0};
    *prefilled = 0;
    for (int finished = 0, guard = 0; finished < 3 && guard < 200; guard++) {
        vt_sched_step_info info;
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        *prefilled += info.n_prefill_tokens;
        finished = 0;
        for (int r = 0; r < 3; r++) {
            vt_sched_output o = {0};
            CU_ASSERT_EQUAL_FATAL(vt_sched_read(s, ids[r], &o, &err), VT_OK);
            for (int64_t k = 0; k < o.n_tokens && got[r] < 8; k++) out[r][got[r]++] = o.tokens[k];
            cached[r] = o.n_cached;
            finished += o.state == VT_SCHED_FINISHED;
        }
    }
    for (int r = 0; r < 3; r++) CU_ASSERT_EQUAL(got[r], 8);
    vt_sched_free(s);
    vt_fixture_close(&f);
}

static void test_shared_beginning_computed_once(void) {
    const char *backends[] = {"reference", "simd"};
    for (int b = 0; b < 2; b++) {
        if (b == 1 && !vt_test_simd_expected()) continue;
        int32_t on[3][8], off[3][8];
        int64_t cached_on[3], cached_off[3], prefilled_on = 0, prefilled_off = 0;
        run_together(backends[b], true, on, cached_on, &prefilled_on);
        run_together(backends[b], false, off, cached_off, &prefilled_off);
        CU_ASSERT_EQUAL(memcmp(on, off, sizeof on), 0);
        CU_ASSERT_EQUAL(cached_on[0], 0);
        CU_ASSERT_EQUAL(cached_on[1], 144);
        CU_ASSERT_EQUAL(cached_on[2], 144);
        CU_ASSERT_EQUAL(prefilled_on, 144 + 3 * 8);
        CU_ASSERT_EQUAL(prefilled_off, 3 * (144 + 8));
    }
}

/* vt_sched_n_admit_next (what vt serve publishes as running and waiting,
 * and checks a full queue by) predicts what the step starts: of three
 * requests queued together with one 99-token beginning not cached yet, and
 * budget for all three, only the first starts; the others wait for its
 * blocks, then start together. */
static void test_admission_prediction_with_blocks_in_flight(void) {
    char m[1024];
    vt_fixture f;
    CU_ASSERT_TRUE_FATAL(open_engine(&f, model_path("qwen3-tiny-q4_k_m", m, sizeof m), "reference", VT_F16, 4));
    vt_sched *s = NULL;
    vt_error err = {0};
    const vt_sched_options so = {.max_waiting = 8, .token_budget = 0, .prefill_chunk = 0};
    CU_ASSERT_EQUAL_FATAL(vt_sched_create(f.engine, &so, &s, &err), VT_OK);
    int32_t prompts[3][100];
    for (int r = 0; r < 3; r++) {
        prompt_tokens(prompts[r], 99, 5);
        prompt_tokens(prompts[r] + 99, 1, 6 + r);
        const vt_sched_request q = {.prompt = prompts[r], .n_prompt = 100, .max_new_tokens = 4,
                                    .sampler = {0, 0, 1.0f, 0.0f, 1}};
        uint64_t id;
        CU_ASSERT_EQUAL_FATAL(vt_sched_add(s, &q, &id, &err), VT_OK);
    }
    static const int32_t want[2] = {1, 2};
    for (int k = 0; k < 2; k++) {
        const int32_t predicted = vt_sched_n_admit_next(s);
        vt_sched_step_info info;
        CU_ASSERT_EQUAL_FATAL(vt_sched_step(s, &info, &err), VT_OK);
        CU_ASSERT_EQUAL(info.n_admitted, want[k]);
        CU_ASSERT_EQUAL(predicted, info.n_admitted);
    }
    vt_sched_free(s);
    vt_fixture_close(&f);
}

/* --explain says whether the cache is on, and why it is off: the setting,
 * or plans whose phases compute differently (onednn's prefill matmuls). */
static void test_explain_says_why(void) {
    char m[1024], cmd[2400], *err = NULL;
    model_path("qwen3-tiny-q4_k_m", m, sizeof m);
    static const struct {
        const char *flags;
        bool on, plans_differ, needs_onednn;
        const char *source;
    } cases[] = {
        {"--backend reference", true, false, false, "default"},
        {"--backend reference --no-prefix-cache", false, false, false, "cli"},
        {"--backend onednn", false, true, true, ""}, /* its prefill matmuls are not decode's */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].needs_onednn && !vt_test_onednn_expected()) return; /* it said why */
        snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -p hi -n 1 --explain %s", VT_CLI_PATH, m, cases[i].flags);
        CU_ASSERT_EQUAL(vt_test_run_cmd(cmd, NULL, &err), 0);
        vt_explain x;
        CU_ASSERT(vt_explain_parse(err, &x));
        CU_ASSERT(x.prefix_cache_seen);
        CU_ASSERT_EQUAL(x.prefix_cache_on, cases[i].on);
        CU_ASSERT_EQUAL(x.prefix_cache_plans_differ, cases[i].plans_differ);
        CU_ASSERT_STRING_EQUAL(x.prefix_cache_source, cases[i].source);
        vt_explain_free(&x);
        free(err);
        err = NULL;
    }
}

int main(void) {
    static CU_TestInfo pool_tests[] = {
        {"chain keys and reference counts", test_chain_and_refcounts},
        {"eviction order, reclaim before refusing, caching off", test_eviction_order_and_reclaim},
        {"a budget of cached blocks frees the least recently used beyond it", test_cache_budget},
        {"a fork shares full blocks, copies the partial one", test_fork_shares_full_blocks},
        {"partial matches copy the positions of a tail or a full block", test_partial_blocks},
        {"a block computed again is kept once", test_same_block_kept_once},
        {"undoing stored tokens files nothing stale, writes on nothing shared", test_undoing_stored_tokens},
        {"truncating into a block orphans the blocks filed under it", test_truncate_orphans_children},
        {"truncating into a shared block with no block free releases the sequence",
         test_truncate_without_a_free_block_releases},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo engine_tests[] = {
        {"hits are bit-identical: reference, every KV dtype", test_hits_exact_reference},
        {"hits are bit-identical: simd, every KV dtype, dense and MoE", test_hits_exact_simd},
        {"scheduler: the same tokens with the cache on and off", test_scheduler_same_tokens},
        {"scheduler: requests arriving together compute their shared beginning once",
         test_shared_beginning_computed_once},
        {"the admission prediction counts requests waiting for blocks in flight",
         test_admission_prediction_with_blocks_in_flight},
        {"--explain says whether it is on, and why not", test_explain_says_why},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("prefix cache: the pool", setup, teardown, pool_tests);
    vt_test_add_suite("prefix cache: the engine", NULL, NULL, engine_tests);
    return vt_test_run();
}
