/* kv_cache.h — paged KV cache (vLLM's model), with automatic prefix caching.
 *
 * Per layer, K and V stores of [num_blocks][block_size][n_kv_heads][head_dim]
 * in the cache dtype (Q8_0: each head's row as head_dim / 32 blocks). A
 * sequence has a block table (logical -> physical block); token t of a
 * sequence lives at slot table[t / block_size] * block_size + t %
 * block_size. Running out of blocks is VT_ERR_CONTEXT_FULL with the numbers
 * in the message, never a crash.
 *
 * Prefix caching: every block a sequence fills is filed under a chain key
 * (its parent block's key and its own token ids) with the tokens it holds.
 * A new sequence takes the longest run of filed blocks matching its prompt
 * (vt_kv_seq_attach_prefix) instead of computing it; blocks are shared by
 * reference count, only full blocks are shared, and a sequence's last,
 * partial block is always its own. A filed block whose sequences all ended
 * stays filed, evictable, least recently used first out, and is reclaimed
 * before the pool reports itself full. A hit is confirmed against the
 * stored tokens and the parent block, never the key alone.
 *
 * Partial matches: the partial last block of a sequence that ended is
 * filed too, as a tail following its parent block (a chat's next turn
 * resends the whole previous turn, whose last tokens sit in such a block),
 * and every full block is also filed as following its parent. A sequence
 * that matched the full blocks before takes the first positions of the
 * following block its next tokens begin with the longest way (a tail, or a
 * full block they leave part way) by copying them into a block of its own,
 * which it goes on writing: never by sharing. Tails are evicted before the
 * blocks of their sequence. */
#ifndef VT_CORE_KV_CACHE_H
#define VT_CORE_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "vt/vt_backend.h"

/* One physical block's bookkeeping. */
typedef struct vt_kv_block {
    int32_t ref;         /* sequences holding it */
    bool filed;          /* in the prefix index: full, its tokens known */
    uint32_t gen;        /* bumped each time the block is taken for new content */
    int32_t parent;      /* filed: the block before it in its chain, -1 for a first block */
    uint32_t parent_gen; /* the parent's gen when this block was filed */
    uint64_t key;        /* filed: its chain key (a tail: its continuation key) */
    uint64_t continuation; /* filed full: its key among the blocks following its parent (filed under both) */
    int32_t n_tail;      /* filed as a tail: the positions holding K/V (a released sequence's partial last
                            block); 0 for a full block */
    int32_t lru_prev, lru_next; /* filed with ref 0: the evictable list, oldest first */
} vt_kv_block;

typedef struct vt_kv_cache {
    int32_t dtype;      /* VT_F32, VT_F16, VT_BF16 or VT_Q8_0 (blocks along head_dim) */
    int32_t n_layer;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t block_size;
    int32_t num_blocks;
    size_t block_bytes; /* bytes of one block of one layer's K (or V) */
    void **k;           /* [n_layer] -> [num_blocks][block_size][n_kv_heads][head_dim] */
    void **v;
    int32_t *free_list; /* stack of blocks holding nothing */
    int32_t n_free;
    const vt_host *host; /* allocator */
    /* prefix caching */
    bool prefix_cache;    /* file full blocks and share them (vt_kv_cache_set_prefix_cache) */
    vt_kv_block *blocks;  /* [num_blocks] */
    int32_t *tokens;      /* [num_blocks][block_size]: the token ids each block holds */
    struct vt_kv_block_index *index;
    int32_t lru_head, lru_tail; /* evictable blocks (filed, ref 0), oldest first; -1 = none */
    int32_t n_evictable;
    int32_t max_evictable; /* the most evictable blocks kept (vt_kv_cache_set_cache_budget); -1 = no limit */
    int32_t n_filed;
} vt_kv_cache;

typedef struct vt_kv_seq {
    int32_t *block_table; /* [cap] physical block of each logical block */
    uint64_t *keys;       /* [cap] chain key of each full block */
    int32_t n_blocks;
    int32_t cap;
    int64_t n_tokens;     /* tokens stored so far */
} vt_kv_seq;

/* Whether a cache of dtype can hold a model's heads of head_dim values (a
 * quantized dtype's blocks must tile each head): VT_ERR_UNSUPPORTED naming
 * both when not, VT_ERR_INVALID for a dtype no cache takes. */
vt_status vt_kv_cache_check_dtype(int32_t dtype, int32_t head_dim, vt_error *err);
/* ctx_tokens: capacity in tokens (rounded up to whole blocks). */
vt_status vt_kv_cache_create(const vt_host *host, int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim,
                             int32_t block_size, int64_t ctx_tokens, vt_kv_cache **out, vt_error *err);
void vt_kv_cache_free(vt_kv_cache *c);
int64_t vt_kv_cache_capacity(const vt_kv_cache *c); /* tokens */
size_t vt_kv_cache_bytes(const vt_kv_cache *c);
/* Bytes one token takes in a cache of `dtype` over all layers, K and V
 * (0 if head_dim is not whole blocks of the dtype). */
size_t vt_kv_cache_bytes_per_token(int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim);

/* Blocks a reservation can take: free ones and evictable filed ones. */
int32_t vt_kv_cache_available(const vt_kv_cache *c);
/* Turn prefix caching on or off (off: nothing is filed or shared; blocks
 * already filed are dropped). */
void vt_kv_cache_set_prefix_cache(vt_kv_cache *c, bool on);
/* At most max_blocks blocks that no sequence holds stay filed (the least
 * recently used beyond that are freed at once); -1 (the default) keeps them
 * until their room is needed. */
void vt_kv_cache_set_cache_budget(vt_kv_cache *c, int32_t max_blocks);

/* Make room for n_new more tokens of seq (allocating blocks, evicting the
 * least recently used filed blocks when no free one is left). On failure the
 * sequence is unchanged. */
vt_status vt_kv_seq_reserve(vt_kv_cache *c, vt_kv_seq *seq, int64_t n_new, vt_error *err);
/* Record that tokens[0..n) were stored at seq's next positions (already
 * reserved and written): seq grows by n, and each block they fill is filed. */
void vt_kv_seq_commit(vt_kv_cache *c, vt_kv_seq *seq, const int32_t *tokens, int64_t n);
/* seq (empty) starts with the longest run of filed blocks matching the first
 * tokens of tokens[0..n), then the longest matching beginning of a tail of
 * the last of them (copied: it needs a block besides the tail, which is
 * left out when none is available), leaving at least one token to compute
 * (its logits are wanted). Returns the tokens taken (0 with prefix caching
 * off); seq then holds them. */
int64_t vt_kv_seq_attach_prefix(vt_kv_cache *c, vt_kv_seq *seq, const int32_t *tokens, int64_t n);
/* Tokens vt_kv_seq_attach_prefix would take, and how many available blocks
 * taking them uses up: the evictable filed blocks it would hold, and with a
 * partial match the block its positions are copied into; nothing changes.
 * marked (NULL, or num_blocks bytes): evictable blocks marked there are not
 * counted (an earlier attach of the same prediction holds them already),
 * and those counted now are marked. */
int64_t vt_kv_cache_match_prefix(const vt_kv_cache *c, const int32_t *tokens, int64_t n, int32_t *taken,
                                 uint8_t *marked);

/* Slots of tokens [start, start + n) of seq (already reserved). */
void vt_kv_seq_slots(const vt_kv_cache *c, const vt_kv_seq *seq, int64_t start, int64_t n, int64_t *slots);
/* dst (empty) continues from where src is: it shares src's full blocks and
 * gets its own copy of the partial last one, so the two then diverge.
 * VT_ERR_CONTEXT_FULL (dst unchanged) when the pool lacks the block. */
vt_status vt_kv_seq_fork(vt_kv_cache *c, const vt_kv_seq *src, vt_kv_seq *dst, vt_error *err);
/* Return the blocks a reservation took beyond what the sequence's n_tokens
 * need (undoing a vt_kv_seq_reserve whose tokens were never stored). */
void vt_kv_seq_trim(vt_kv_cache *c, vt_kv_seq *seq);
/* Take seq back to its first n tokens (n <= its n_tokens), undoing stored
 * tokens: the blocks past them are given back, and a partial last block the
 * sequence will write again becomes its own alone, no longer filed under
 * the tokens it held (or shared with another holder: a copy of its first
 * positions then takes its place). False when that copy found no block (the
 * sequence is then released: empty, holding nothing) or n is out of range
 * (nothing done). */
bool vt_kv_seq_truncate(vt_kv_cache *c, vt_kv_seq *seq, int64_t n);
/* Give the sequence's blocks back and reset it: filed blocks nobody else
 * holds become evictable (its last blocks first, so a shared beginning is
 * evicted last), the others free. */
void vt_kv_seq_release(vt_kv_cache *c, vt_kv_seq *seq);

/* Tensor descriptor of layer l's K or V store. */
vt_tensor vt_kv_cache_tensor(const vt_kv_cache *c, int layer, int is_v);

#endif
