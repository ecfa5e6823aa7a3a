/* kv_block_index.c — linear probing with backward-shift deletion (no
 * tombstones, so lookups stay short however many blocks come and go). */
#include "kv_block_index.h"

#include <stdlib.h>

static int64_t home(const vt_kv_block_index *ix, uint64_t key) {
    /* the key is already a hash; fold its high bits in for the low mask */
    return (int64_t)((key ^ (key >> 29)) & (uint64_t)(ix->cap - 1));
}

bool vt_kv_block_index_init(vt_kv_block_index *ix, int32_t n_entries) {
    ix->cap = 16;
    while (ix->cap < 2 * (int64_t)n_entries) ix->cap *= 2;
    ix->keys = malloc((size_t)ix->cap * sizeof *ix->keys);
    ix->blocks = malloc((size_t)ix->cap * sizeof *ix->blocks);
    if (!ix->keys || !ix->blocks) {
        vt_kv_block_index_free(ix);
        return false;
    }
    for (int64_t i = 0; i < ix->cap; i++) ix->blocks[i] = -1;
    return true;
}

void vt_kv_block_index_free(vt_kv_block_index *ix) {
    free(ix->keys);
    free(ix->blocks);
    ix->keys = NULL;
    ix->blocks = NULL;
    ix->cap = 0;
}

int32_t vt_kv_block_index_next(const vt_kv_block_index *ix, uint64_t key, int64_t *cursor) {
    if (!ix->blocks) return -1;
    const int64_t mask = ix->cap - 1;
    for (int64_t i = *cursor < 0 ? home(ix, key) : (*cursor + 1) & mask; ix->blocks[i] >= 0; i = (i + 1) & mask) {
        if (ix->keys[i] == key) {
            *cursor = i;
            return ix->blocks[i];
        }
    }
    return -1;
}

void vt_kv_block_index_insert(vt_kv_block_index *ix, uint64_t key, int32_t block) {
    const int64_t mask = ix->cap - 1;
    int64_t i = home(ix, key);
    while (ix->blocks[i] >= 0) i = (i + 1) & mask;
    ix->keys[i] = key;
    ix->blocks[i] = block;
}

void vt_kv_block_index_remove(vt_kv_block_index *ix, uint64_t key, int32_t block) {
    const int64_t mask = ix->cap - 1;
    int64_t i = home(ix, key);
    while (ix->blocks[i] >= 0 && !(ix->keys[i] == key && ix->blocks[i] == block)) i = (i + 1) & mask;
    if (ix->blocks[i] < 0) return;
    /* backward shift: move up every later entry of the run that may sit
     * at the hole (its home is not cyclically within (hole, its slot]) */
    int64_t hole = i;
    for (int64_t j = (i + 1) & mask; ix->blocks[j] >= 0; j = (j + 1) & mask) {
        const int64_t h = home(ix, ix->keys[j]);
        const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
        if (stays) continue;
        ix->keys[hole] = ix->keys[j];
        ix->blocks[hole] = ix->blocks[j];
        hole = j;
    }
    ix->blocks[hole] = -1;
}
