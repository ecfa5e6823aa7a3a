/* kv_block_index.h — the KV pool's index of full blocks by content key
 * (automatic prefix caching): an open-addressing hash table from a block's
 * 64-bit chain key to its physical block. A key is only a candidate: the
 * pool confirms a hit against the block's stored tokens and its parent
 * before sharing it (kv_cache.c), so a colliding key can never hand out
 * another prompt's K/V. */
#ifndef VT_CORE_KV_BLOCK_INDEX_H
#define VT_CORE_KV_BLOCK_INDEX_H

#include <stdbool.h>
#include <stdint.h>

typedef struct vt_kv_block_index {
    uint64_t *keys;  /* [cap] */
    int32_t *blocks; /* [cap]: -1 = empty */
    int64_t cap;     /* a power of two, at least twice the entries it may hold */
} vt_kv_block_index;

/* Room for n_entries entries. False when out of memory. */
bool vt_kv_block_index_init(vt_kv_block_index *ix, int32_t n_entries);
void vt_kv_block_index_free(vt_kv_block_index *ix);
/* The blocks filed under key, one by one: *cursor starts at -1; returns the
 * next block with that key, or -1 when there are no more. */
int32_t vt_kv_block_index_next(const vt_kv_block_index *ix, uint64_t key, int64_t *cursor);
void vt_kv_block_index_insert(vt_kv_block_index *ix, uint64_t key, int32_t block);
/* Remove block's entry under key (present). */
void vt_kv_block_index_remove(vt_kv_block_index *ix, uint64_t key, int32_t block);

#endif
