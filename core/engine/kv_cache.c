/* kv_cache.c — block pool, free list, block tables, and the filed blocks
 * of prefix caching (kv_cache.h). */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "kv_block_index.h"
#include "quant.h"

/* ---- chain keys ---- */

/* The key of a block holding tokens[0..bs) after a block keyed parent_key
 * (0x9e37... for the first block of a sequence): a 64-bit mix of both. Only
 * a candidate: hits are confirmed against the tokens themselves. */
#define FIRST_BLOCK_PARENT_KEY 0x9e3779b97f4a7c15ull
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t chain_key(uint64_t parent_key, const int32_t *tokens, int32_t bs) {
    uint64_t h = mix64(parent_key);
    for (int32_t i = 0; i < bs; i++) h = mix64(h ^ (uint64_t)(uint32_t)tokens[i]);
    return h;
}
/* The key a block following the block keyed parent_key and beginning with
 * token `first` is also filed under (a tail only under it): a lookup that
 * matched the blocks before reaches the blocks continuing them knowing only
 * those and its next token, and compares each one's tokens with its own,
 * position by position. The first token spreads a parent's many children
 * (every sequence's first block, the conversations after one system
 * prompt) over the table instead of one probe run. */
static uint64_t continuation_key(uint64_t parent_key, int32_t first) {
    return mix64(mix64(parent_key ^ 0x5851f42d4c957f2dull) ^ (uint64_t)(uint32_t)first);
}

/* ---- the evictable list (filed blocks nobody holds), oldest first ---- */

static void lru_append(vt_kv_cache *c, int32_t b) {
    vt_kv_block *k = &c->blocks[b];
    k->lru_prev = c->lru_tail;
    k->lru_next = -1;
    if (c->lru_tail >= 0) c->blocks[c->lru_tail].lru_next = b;
    else c->lru_head = b;
    c->lru_tail = b;
    c->n_evictable++;
}

static void lru_unlink(vt_kv_cache *c, int32_t b) {
    vt_kv_block *k = &c->blocks[b];
    if (k->lru_prev >= 0) c->blocks[k->lru_prev].lru_next = k->lru_next;
    else c->lru_head = k->lru_next;
    if (k->lru_next >= 0) c->blocks[k->lru_next].lru_prev = k->lru_prev;
    else c->lru_tail = k->lru_prev;
    k->lru_prev = k->lru_next = -1;
    c->n_evictable--;
}

static void unfile(vt_kv_cache *c, int32_t b) {
    vt_kv_block *k = &c->blocks[b];
    if (!k->filed) return;
    vt_kv_block_index_remove(c->index, k->key, b);
    if (!k->n_tail) vt_kv_block_index_remove(c->index, k->continuation, b);
    k->filed = false;
    k->n_tail = 0;
    c->n_filed--;
}

/* A block for new content: a free one, else the oldest evictable one. */
static int32_t take_block(vt_kv_cache *c) {
    int32_t b;
    if (c->n_free > 0) {
        b = c->free_list[--c->n_free];
    } else {
        b = c->lru_head; /* the caller checked vt_kv_cache_available */
        lru_unlink(c, b);
        unfile(c, b);
    }
    vt_kv_block *k = &c->blocks[b];
    k->ref = 1;
    k->gen++;
    return b;
}

/* Block to's first m positions (K and V of every layer, and the tokens)
 * become block from's. */
static void copy_positions(vt_kv_cache *c, int32_t from, int32_t to, int64_t m) {
    const size_t bytes = (size_t)m * (c->block_bytes / (size_t)c->block_size);
    for (int32_t l = 0; l < c->n_layer; l++) {
        memcpy((char *)c->k[l] + (size_t)to * c->block_bytes, (const char *)c->k[l] + (size_t)from * c->block_bytes,
               bytes);
        memcpy((char *)c->v[l] + (size_t)to * c->block_bytes, (const char *)c->v[l] + (size_t)from * c->block_bytes,
               bytes);
    }
    memcpy(c->tokens + (size_t)to * (size_t)c->block_size, c->tokens + (size_t)from * (size_t)c->block_size,
           (size_t)m * sizeof *c->tokens);
}

/* Free the oldest evictable blocks beyond the budget. */
static void trim_to_budget(vt_kv_cache *c) {
    while (c->max_evictable >= 0 && c->n_evictable > c->max_evictable) {
        const int32_t b = c->lru_head;
        lru_unlink(c, b);
        unfile(c, b);
        c->free_list[c->n_free++] = b;
    }
}

/* One holder fewer: at none, filed blocks wait on the evictable list, others are free. */
static void give_back(vt_kv_cache *c, int32_t b) {
    vt_kv_block *k = &c->blocks[b];
    if (--k->ref > 0) return;
    if (k->filed) {
        lru_append(c, b);
        trim_to_budget(c);
    } else {
        c->free_list[c->n_free++] = b;
    }
}

int32_t vt_kv_cache_available(const vt_kv_cache *c) { return c->n_free + c->n_evictable; }

void vt_kv_cache_set_cache_budget(vt_kv_cache *c, int32_t max_blocks) {
    c->max_evictable = max_blocks < 0 ? -1 : max_blocks;
    trim_to_budget(c);
}

void vt_kv_cache_set_prefix_cache(vt_kv_cache *c, bool on) {
    c->prefix_cache = on;
    if (on) return;
    while (c->lru_head >= 0) { /* evictable filed blocks become free */
        const int32_t b = c->lru_head;
        lru_unlink(c, b);
        unfile(c, b);
        c->free_list[c->n_free++] = b;
    }
    for (int32_t b = 0; b < c->num_blocks; b++) unfile(c, b); /* held ones stay with their sequences */
}

vt_status vt_kv_cache_check_dtype(int32_t dtype, int32_t head_dim, vt_error *err) {
    if (!vt_dtype_is_kv_cache(dtype))
        return vt_fail(err, VT_ERR_INVALID, "KV cache dtype %s: accepted values are f32, f16, bf16, q8_0",
                       vt_dtype_name(dtype));
    /* A quantized cache's blocks run along one head's values: a block across
     * two heads would mix their scales. */
    if (head_dim < 1 || head_dim % vt_dtype_block_length(dtype) != 0)
        return vt_fail(err, VT_ERR_UNSUPPORTED,
                       "KV cache dtype %s stores blocks of %lld values along the head dimension, but the model's "
                       "head_dim is %d (not a multiple of %lld); use kv_cache.dtype = f16",
                       vt_dtype_name(dtype), (long long)vt_dtype_block_length(dtype), head_dim,
                       (long long)vt_dtype_block_length(dtype));
    return VT_OK;
}

vt_status vt_kv_cache_create(const vt_host *host, int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim,
                             int32_t block_size, int64_t ctx_tokens, vt_kv_cache **out, vt_error *err) {
    *out = NULL;
    if (block_size < 1 || ctx_tokens < 1 || n_layer < 1 || n_kv_heads < 1 || head_dim < 1)
        return vt_fail(err, VT_ERR_INVALID, "KV cache: bad geometry (ctx %lld, block size %d)", (long long)ctx_tokens,
                       block_size);
    const vt_status checked = vt_kv_cache_check_dtype(dtype, head_dim, err);
    if (checked != VT_OK) return checked;
    int64_t num_blocks = (ctx_tokens + block_size - 1) / block_size;
    if (num_blocks > INT32_MAX / 2)
        return vt_fail(err, VT_ERR_NOMEM, "KV cache of %lld tokens is too large", (long long)ctx_tokens);
    size_t row = (size_t)n_kv_heads * vt_row_size(dtype, head_dim);
    size_t block_bytes = row * (size_t)block_size;
    if (block_bytes / (size_t)block_size != row || (size_t)num_blocks > SIZE_MAX / 4 / block_bytes)
        return vt_fail(err, VT_ERR_NOMEM, "KV cache of %lld tokens overflows the address space",
                       (long long)ctx_tokens);
    size_t layer_bytes = block_bytes * (size_t)num_blocks;

    vt_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return vt_fail(err, VT_ERR_NOMEM, "out of memory for the KV cache");
    c->dtype = dtype;
    c->n_layer = n_layer;
    c->n_kv_heads = n_kv_heads;
    c->head_dim = head_dim;
    c->block_size = block_size;
    c->num_blocks = (int32_t)num_blocks;
    c->block_bytes = block_bytes;
    c->host = host;
    c->k = calloc((size_t)n_layer, sizeof *c->k);
    c->v = calloc((size_t)n_layer, sizeof *c->v);
    c->free_list = malloc((size_t)num_blocks * sizeof *c->free_list);
    c->blocks = calloc((size_t)num_blocks, sizeof *c->blocks);
    c->tokens = malloc((size_t)num_blocks * (size_t)block_size * sizeof *c->tokens);
    c->index = calloc(1, sizeof *c->index);
    if (!c->k || !c->v || !c->free_list || !c->blocks || !c->tokens || !c->index ||
        !vt_kv_block_index_init(c->index, 2 * c->num_blocks)) /* a full block: under two keys */
        goto nomem;
    for (int32_t b = 0; b < c->num_blocks; b++) c->blocks[b].lru_prev = c->blocks[b].lru_next = -1;
    c->lru_head = c->lru_tail = -1;
    c->max_evictable = -1;
    c->prefix_cache = true;
    for (int l = 0; l < n_layer; l++) {
        c->k[l] = host->alloc(layer_bytes, 64);
        c->v[l] = host->alloc(layer_bytes, 64);
        if (!c->k[l] || !c->v[l]) goto nomem;
    }
    /* Pop order 0, 1, 2...: blocks of a fresh sequence are contiguous (easier to read in a debugger). */
    for (int32_t i = 0; i < c->num_blocks; i++) c->free_list[i] = c->num_blocks - 1 - i;
    c->n_free = c->num_blocks;
    *out = c;
    return VT_OK;
nomem:
    vt_kv_cache_free(c);
    return vt_fail(err, VT_ERR_NOMEM,
                   "out of memory allocating the KV cache: %lld tokens x %d layers x 2 x %zu bytes per token (%.1f MiB); "
                   "lower kv_cache.ctx_size",
                   (long long)ctx_tokens, n_layer, row, 2.0 * (double)layer_bytes * n_layer / (1024.0 * 1024.0));
}

void vt_kv_cache_free(vt_kv_cache *c) {
    if (!c) return;
    for (int l = 0; l < c->n_layer; l++) {
        if (c->k) c->host->free(c->k[l]);
        if (c->v) c->host->free(c->v[l]);
    }
    free(c->k);
    free(c->v);
    free(c->free_list);
    free(c->blocks);
    free(c->tokens);
    if (c->index) vt_kv_block_index_free(c->index);
    free(c->index);
    free(c);
}

int64_t vt_kv_cache_capacity(const vt_kv_cache *c) { return (int64_t)c->num_blocks * c->block_size; }

size_t vt_kv_cache_bytes(const vt_kv_cache *c) { return 2 * c->block_bytes * (size_t)c->num_blocks * (size_t)c->n_layer; }

size_t vt_kv_cache_bytes_per_token(int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim) {
    return 2 * (size_t)n_layer * (size_t)n_kv_heads * vt_row_size(dtype, head_dim);
}

/* seq's table (and keys) with room for n_blocks. */
static bool seq_room(vt_kv_seq *seq, int64_t n_blocks) {
    if (n_blocks <= seq->cap) return true;
    int32_t cap = seq->cap ? seq->cap : 8;
    while (cap < n_blocks) cap *= 2;
    int32_t *t = realloc(seq->block_table, (size_t)cap * sizeof *t);
    if (!t) return false;
    seq->block_table = t;
    uint64_t *k = realloc(seq->keys, (size_t)cap * sizeof *k);
    if (!k) return false;
    seq->keys = k;
    seq->cap = cap;
    return true;
}

vt_status vt_kv_seq_reserve(vt_kv_cache *c, vt_kv_seq *seq, int64_t n_new, vt_error *err) {
    int64_t need_tokens = seq->n_tokens + n_new;
    int64_t need_blocks = (need_tokens + c->block_size - 1) / c->block_size;
    int64_t extra = need_blocks - seq->n_blocks;
    if (extra <= 0) return VT_OK;
    if (extra > vt_kv_cache_available(c))
        return vt_fail(err, VT_ERR_CONTEXT_FULL,
                       "context full: %lld tokens need %lld KV blocks of %d; the sequence holds %lld and %lld of "
                       "the cache's %d are free (KV cache holds %lld tokens; raise kv_cache.ctx_size)",
                       (long long)need_tokens, (long long)need_blocks, c->block_size, (long long)seq->n_blocks,
                       (long long)vt_kv_cache_available(c), c->num_blocks, (long long)vt_kv_cache_capacity(c));
    if (!seq_room(seq, need_blocks)) return vt_fail(err, VT_ERR_NOMEM, "out of memory for a block table");
    for (int64_t i = 0; i < extra; i++) seq->block_table[seq->n_blocks++] = take_block(c);
    return VT_OK;
}

/* The filed block holding tokens[0..bs) after block `parent` (-1: first),
 * filed under key; -1 if none. */
static int32_t find_filed(const vt_kv_cache *c, uint64_t key, int32_t parent, const int32_t *tokens) {
    int64_t cursor = -1;
    for (int32_t b; (b = vt_kv_block_index_next(c->index, key, &cursor)) >= 0;) {
        const vt_kv_block *k = &c->blocks[b];
        if (k->n_tail || k->parent != parent || (parent >= 0 && k->parent_gen != c->blocks[parent].gen)) continue;
        if (memcmp(c->tokens + (size_t)b * (size_t)c->block_size, tokens, (size_t)c->block_size * sizeof *tokens) == 0)
            return b;
    }
    return -1;
}

void vt_kv_seq_commit(vt_kv_cache *c, vt_kv_seq *seq, const int32_t *tokens, int64_t n) {
    const int32_t bs = c->block_size;
    for (int64_t i = 0; i < n; i++) {
        const int64_t pos = seq->n_tokens++;
        const int64_t lb = pos / bs;
        const int32_t b = seq->block_table[lb];
        c->tokens[(size_t)b * (size_t)bs + (size_t)(pos % bs)] = tokens[i];
        if ((pos + 1) % bs != 0) continue;
        /* block lb is full: its key, and filed unless it is filed already (a
         * shared block) or caching is off */
        seq->keys[lb] = chain_key(lb ? seq->keys[lb - 1] : FIRST_BLOCK_PARENT_KEY, c->tokens + (size_t)b * (size_t)bs, bs);
        vt_kv_block *k = &c->blocks[b];
        if (!c->prefix_cache || k->filed) continue;
        /* A block with the same tokens after the same parent is filed
         * already (the same request sent again computes the same block):
         * its K/V are these bits too, so seq holds that one and gives its
         * own back, and the pool keeps one copy instead of one per request. */
        const int32_t same = find_filed(c, seq->keys[lb], lb ? seq->block_table[lb - 1] : -1,
                                        c->tokens + (size_t)b * (size_t)bs);
        if (same >= 0) {
            if (c->blocks[same].ref++ == 0) lru_unlink(c, same);
            seq->block_table[lb] = same;
            give_back(c, b);
            continue;
        }
        k->filed = true;
        k->key = seq->keys[lb];
        k->parent = lb ? seq->block_table[lb - 1] : -1;
        k->parent_gen = lb ? c->blocks[k->parent].gen : 0;
        k->continuation =
            continuation_key(lb ? seq->keys[lb - 1] : FIRST_BLOCK_PARENT_KEY, c->tokens[(size_t)b * (size_t)bs]);
        vt_kv_block_index_insert(c->index, k->key, b);
        vt_kv_block_index_insert(c->index, k->continuation, b);
        c->n_filed++;
    }
}

/* The filed blocks holding the first whole blocks of tokens[0..n), at most
 * (n - 1) / block_size of them (one token is always left to compute): each
 * block and its chain key through visit, in order. Returns how many; *key
 * and *last get the last one's key and block (the first block's parent key
 * and -1 when none matched). */
typedef void (*filed_visit_fn)(vt_kv_cache *c, void *arg, int32_t block, uint64_t key);
static int64_t walk_filed(const vt_kv_cache *c, const int32_t *tokens, int64_t n, filed_visit_fn visit, void *arg,
                          uint64_t *key, int32_t *last) {
    *key = FIRST_BLOCK_PARENT_KEY;
    *last = -1;
    if (!c->prefix_cache || n < 2) return 0;
    const int32_t bs = c->block_size;
    int64_t lb = 0;
    for (; (lb + 1) * bs <= n - 1; lb++) {
        const uint64_t k = chain_key(*key, tokens + lb * bs, bs);
        const int32_t b = find_filed(c, k, *last, tokens + lb * bs);
        if (b < 0) break;
        visit((vt_kv_cache *)c, arg, b, k);
        *key = k;
        *last = b;
    }
    return lb;
}

/* The filed block following block `parent` (keyed parent_key; -1: a
 * sequence's first block), full or a tail, whose positions begin
 * tokens[0..max) the longest way, and in *m how many it gives; -1 when none
 * gives any. */
static int32_t best_continuation(const vt_kv_cache *c, uint64_t parent_key, int32_t parent, const int32_t *tokens,
                                 int64_t max, int64_t *m) {
    *m = 0;
    int32_t best = -1;
    int64_t cursor = -1;
    if (max < 1) return -1;
    const uint64_t key = continuation_key(parent_key, tokens[0]);
    for (int32_t b; (b = vt_kv_block_index_next(c->index, key, &cursor)) >= 0;) {
        const vt_kv_block *k = &c->blocks[b];
        if (k->parent != parent || (parent >= 0 && k->parent_gen != c->blocks[parent].gen)) continue;
        const int32_t *held = c->tokens + (size_t)b * (size_t)c->block_size;
        const int64_t valid = k->n_tail ? k->n_tail : c->block_size;
        int64_t same = 0;
        while (same < valid && same < max && held[same] == tokens[same]) same++;
        if (same > *m) *m = same, best = b;
    }
    return best;
}

/* The block whose first positions a sequence matching tokens[0..n) up to
 * its block `last` (keyed key, full_blocks of them) copies, and in *m how
 * many; -1 when none matches or the pool lacks the block to copy it into
 * (besides the block copied from, when that one is evictable: it must not
 * be the one evicted for the copy). taken_so_far: the available blocks the
 * full ones use up. */
static int32_t partial_match(const vt_kv_cache *c, const int32_t *tokens, int64_t n, int64_t full_blocks, uint64_t key,
                           int32_t last, int32_t taken_so_far, int64_t *m) {
    *m = 0;
    const int64_t start = full_blocks * c->block_size;
    if (!c->prefix_cache || n - 1 <= start) return -1;
    const int32_t from = best_continuation(c, key, last, tokens + start, n - 1 - start, m);
    if (from >= 0 && vt_kv_cache_available(c) - taken_so_far < (c->blocks[from].ref == 0 ? 2 : 1)) {
        *m = 0;
        return -1;
    }
    return from;
}

typedef struct evictable_count {
    int32_t n;
    uint8_t *marked; /* NULL, or blocks counted before: not again */
} evictable_count;

static void count_evictable(vt_kv_cache *c, void *arg, int32_t block, uint64_t key) {
    (void)key;
    evictable_count *count = arg;
    if (c->blocks[block].ref != 0) return;
    if (count->marked) {
        if (count->marked[block]) return;
        count->marked[block] = 1;
    }
    count->n++;
}

int64_t vt_kv_cache_match_prefix(const vt_kv_cache *c, const int32_t *tokens, int64_t n, int32_t *taken,
                                 uint8_t *marked) {
    uint64_t key;
    int32_t last;
    evictable_count count = {0, marked};
    const int64_t full = walk_filed(c, tokens, n, count_evictable, &count, &key, &last);
    *taken = count.n;
    int64_t m = 0;
    if (partial_match(c, tokens, n, full, key, last, *taken, &m) >= 0) *taken += 1; /* the block copied into */
    return full * c->block_size + m;
}

/* seq (its table sized for the walk) holds one more filed block. */
static void take_filed(vt_kv_cache *c, void *arg, int32_t block, uint64_t key) {
    vt_kv_seq *seq = arg;
    if (c->blocks[block].ref++ == 0) lru_unlink(c, block);
    seq->block_table[seq->n_blocks] = block;
    seq->keys[seq->n_blocks++] = key;
    seq->n_tokens += c->block_size;
}

int64_t vt_kv_seq_attach_prefix(vt_kv_cache *c, vt_kv_seq *seq, const int32_t *tokens, int64_t n) {
    if (seq->n_tokens != 0 || seq->n_blocks != 0 || !c->prefix_cache) return 0;
    if (n < 2) return 0;
    if (!seq_room(seq, (n - 1) / c->block_size + 1)) return 0; /* no memory for the table: compute it all */
    uint64_t key;
    int32_t last;
    const int64_t full = walk_filed(c, tokens, n, take_filed, seq, &key, &last);
    int64_t m = 0;
    const int32_t from = partial_match(c, tokens, n, full, key, last, 0, &m);
    if (from >= 0) { /* its first m positions, copied into a block of seq's own */
        if (c->blocks[from].ref++ == 0) lru_unlink(c, from); /* not the block take_block evicts */
        const int32_t to = take_block(c);
        copy_positions(c, from, to, m);
        give_back(c, from); /* unheld: evictable again, as the most recently used */
        seq->block_table[seq->n_blocks++] = to;
        seq->n_tokens += m;
    }
    return seq->n_tokens;
}

void vt_kv_seq_slots(const vt_kv_cache *c, const vt_kv_seq *seq, int64_t start, int64_t n, int64_t *slots) {
    for (int64_t i = 0; i < n; i++) {
        int64_t t = start + i;
        slots[i] = (int64_t)seq->block_table[t / c->block_size] * c->block_size + t % c->block_size;
    }
}

vt_status vt_kv_seq_fork(vt_kv_cache *c, const vt_kv_seq *src, vt_kv_seq *dst, vt_error *err) {
    if (dst->n_tokens != 0 || dst->n_blocks != 0)
        return vt_fail(err, VT_ERR_INVALID, "fork: the destination sequence is not empty");
    const int32_t bs = c->block_size;
    const int64_t full = src->n_tokens / bs, tail = src->n_tokens % bs;
    if (tail && vt_kv_cache_available(c) < 1)
        return vt_fail(err, VT_ERR_CONTEXT_FULL, "fork: no free KV block for the copy of the last, partial block");
    if (!seq_room(dst, full + (tail > 0))) return vt_fail(err, VT_ERR_NOMEM, "out of memory for a block table");
    for (int64_t lb = 0; lb < full; lb++) { /* full blocks never change again: shared */
        c->blocks[src->block_table[lb]].ref++;
        dst->block_table[lb] = src->block_table[lb];
        dst->keys[lb] = src->keys[lb];
    }
    dst->n_blocks = (int32_t)full;
    if (tail) { /* the partial one is written on: each its own */
        const int32_t from = src->block_table[full], to = take_block(c);
        copy_positions(c, from, to, tail);
        dst->block_table[dst->n_blocks++] = to;
    }
    dst->n_tokens = src->n_tokens;
    return VT_OK;
}

void vt_kv_seq_trim(vt_kv_cache *c, vt_kv_seq *seq) {
    const int64_t keep = (seq->n_tokens + c->block_size - 1) / c->block_size;
    while (seq->n_blocks > keep) give_back(c, seq->block_table[--seq->n_blocks]);
}

bool vt_kv_seq_truncate(vt_kv_cache *c, vt_kv_seq *seq, int64_t n) {
    if (n < 0 || n > seq->n_tokens) return false;
    seq->n_tokens = n;
    vt_kv_seq_trim(c, seq);
    const int64_t lb = n / c->block_size, m = n % c->block_size;
    if (m == 0 || lb >= seq->n_blocks) return true;
    const int32_t b = seq->block_table[lb];
    if (c->blocks[b].ref == 1) { /* ours alone: its later positions are written again under another key */
        unfile(c, b);
        /* a new generation, as take_block gives: blocks filed as its
         * children describe contents it will no longer hold, and no lookup
         * matches them now; they stay filed (and counted) until they are the
         * least recently used and taken, as an evicted parent's children do */
        c->blocks[b].gen++;
        return true;
    }
    /* Shared: stored tokens filled it and it was the same as a filed block,
     * which seq took instead of its own (vt_kv_seq_commit); that own block
     * went back to the pool, so one is available for the copy. Should none
     * be, the sequence must not keep writing into a block others hold: it
     * is released, and the caller told. */
    if (vt_kv_cache_available(c) < 1) {
        vt_kv_seq_release(c, seq);
        return false;
    }
    const int32_t to = take_block(c);
    copy_positions(c, b, to, m);
    seq->block_table[lb] = to;
    give_back(c, b);
    return true;
}

/* File seq's partial last block as a tail of the block before it, unless
 * a block following that one already holds the same tokens or more. */
static void file_tail(vt_kv_cache *c, const vt_kv_seq *seq) {
    const int32_t bs = c->block_size;
    const int64_t lb = seq->n_tokens / bs;
    const int32_t n_tail = (int32_t)(seq->n_tokens % bs);
    if (!c->prefix_cache || n_tail == 0 || lb >= seq->n_blocks) return;
    const int32_t b = seq->block_table[lb];
    vt_kv_block *k = &c->blocks[b];
    if (k->ref != 1 || k->filed) return;
    const int32_t parent = lb ? seq->block_table[lb - 1] : -1;
    const uint64_t parent_key = lb ? seq->keys[lb - 1] : FIRST_BLOCK_PARENT_KEY;
    const int32_t *held = c->tokens + (size_t)b * (size_t)bs;
    int64_t same = 0;
    if (best_continuation(c, parent_key, parent, held, n_tail, &same) >= 0 && same == n_tail) return;
    k->filed = true;
    k->n_tail = n_tail;
    k->key = continuation_key(parent_key, held[0]);
    k->parent = parent;
    k->parent_gen = parent >= 0 ? c->blocks[parent].gen : 0;
    vt_kv_block_index_insert(c->index, k->key, b);
    c->n_filed++;
}

void vt_kv_seq_release(vt_kv_cache *c, vt_kv_seq *seq) {
    file_tail(c, seq);
    for (int32_t i = seq->n_blocks - 1; i >= 0; i--) give_back(c, seq->block_table[i]);
    free(seq->block_table);
    free(seq->keys);
    memset(seq, 0, sizeof *seq);
}

vt_tensor vt_kv_cache_tensor(const vt_kv_cache *c, int layer, int is_v) {
    vt_tensor t;
    memset(&t, 0, sizeof t);
    t.data = is_v ? c->v[layer] : c->k[layer];
    t.dtype = c->dtype;
    t.ndim = 4;
    t.ne[0] = c->head_dim;
    t.ne[1] = c->n_kv_heads;
    t.ne[2] = c->block_size;
    t.ne[3] = c->num_blocks;
    /* Quantized rows as everywhere in vt: nb[0] the block's bytes, nb[1] the row's. */
    t.nb[0] = vt_dtype_block_bytes(c->dtype);
    t.nb[1] = vt_row_size(c->dtype, c->head_dim);
    t.nb[2] = t.nb[1] * (size_t)c->n_kv_heads;
    t.nb[3] = t.nb[2] * (size_t)c->block_size;
    return t;
}
