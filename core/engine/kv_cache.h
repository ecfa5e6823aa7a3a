/* kv_cache.h — paged KV cache (vLLM's model).
 *
 * Per layer, K and V stores of [num_blocks][block_size][n_kv_heads][head_dim]
 * in the cache dtype (Q8_0: each head's row as head_dim / 32 blocks). A sequence owns a block table (logical -> physical
 * block) filled from a free list; token t of a sequence lives at slot
 * table[t / block_size] * block_size + t % block_size. Running out of blocks
 * is VT_ERR_CONTEXT_FULL with the numbers in the message, never a crash. */
#ifndef VT_CORE_KV_CACHE_H
#define VT_CORE_KV_CACHE_H

#include <stdint.h>

#include "error.h"
#include "vt/vt_backend.h"

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
    int32_t *free_list; /* stack of free physical blocks */
    int32_t n_free;
    const vt_host *host; /* allocator */
} vt_kv_cache;

typedef struct vt_kv_seq {
    int32_t *block_table; /* [cap] physical block of each logical block */
    int32_t n_blocks;
    int32_t cap;
    int64_t n_tokens;     /* tokens stored so far */
} vt_kv_seq;

/* ctx_tokens: capacity in tokens (rounded up to whole blocks). */
vt_status vt_kv_cache_create(const vt_host *host, int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim,
                             int32_t block_size, int64_t ctx_tokens, vt_kv_cache **out, vt_error *err);
void vt_kv_cache_free(vt_kv_cache *c);
int64_t vt_kv_cache_capacity(const vt_kv_cache *c); /* tokens */
size_t vt_kv_cache_bytes(const vt_kv_cache *c);
/* Bytes one token takes in a cache of `dtype` over all layers, K and V
 * (0 if head_dim is not whole blocks of the dtype). */
size_t vt_kv_cache_bytes_per_token(int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim);

/* Make room for n_new more tokens of seq (allocating blocks). On failure the
 * sequence is unchanged. */
vt_status vt_kv_seq_reserve(vt_kv_cache *c, vt_kv_seq *seq, int64_t n_new, vt_error *err);
/* Slots of tokens [start, start + n) of seq (already reserved). */
void vt_kv_seq_slots(const vt_kv_cache *c, const vt_kv_seq *seq, int64_t start, int64_t n, int64_t *slots);
/* dst (empty) becomes a copy of src: its own blocks holding the same K and V
 * of every layer for src's tokens (a full copy; blocks are not shared).
 * VT_ERR_CONTEXT_FULL (dst unchanged) when the pool lacks the blocks. */
vt_status vt_kv_seq_fork(vt_kv_cache *c, const vt_kv_seq *src, vt_kv_seq *dst, vt_error *err);
/* Return the blocks a reservation took beyond what the sequence's n_tokens
 * need (undoing a vt_kv_seq_reserve whose tokens were never stored). */
void vt_kv_seq_trim(vt_kv_cache *c, vt_kv_seq *seq);
/* Return the sequence's blocks to the free list and reset it. */
void vt_kv_seq_release(vt_kv_cache *c, vt_kv_seq *seq);

/* Tensor descriptor of layer l's K or V store. */
vt_tensor vt_kv_cache_tensor(const vt_kv_cache *c, int layer, int is_v);

#endif
