/* kv_cache.c — block pool, free list and block tables. */
#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "quant.h"

vt_status vt_kv_cache_create(const vt_host *host, int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim,
                             int32_t block_size, int64_t ctx_tokens, vt_kv_cache **out, vt_error *err) {
    *out = NULL;
    if (!vt_dtype_is_kv_cache(dtype))
        return vt_fail(err, VT_ERR_INVALID, "KV cache dtype %s: accepted values are f32, f16, bf16, q8_0",
                       vt_dtype_name(dtype));
    if (block_size < 1 || ctx_tokens < 1 || n_layer < 1 || n_kv_heads < 1 || head_dim < 1)
        return vt_fail(err, VT_ERR_INVALID, "KV cache: bad geometry (ctx %lld, block size %d)", (long long)ctx_tokens,
                       block_size);
    /* A quantized cache's blocks run along one head's values: a block across
     * two heads would mix their scales. */
    if (head_dim % vt_dtype_block_length(dtype) != 0)
        return vt_fail(err, VT_ERR_UNSUPPORTED,
                       "KV cache dtype %s stores blocks of %lld values along the head dimension, but the model's "
                       "head_dim is %d (not a multiple of %lld); use --kv-cache-dtype f16",
                       vt_dtype_name(dtype), (long long)vt_dtype_block_length(dtype), head_dim,
                       (long long)vt_dtype_block_length(dtype));
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
    if (!c->k || !c->v || !c->free_list) goto nomem;
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
                   "lower -c/--ctx-size",
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
    free(c);
}

int64_t vt_kv_cache_capacity(const vt_kv_cache *c) { return (int64_t)c->num_blocks * c->block_size; }

size_t vt_kv_cache_bytes(const vt_kv_cache *c) { return 2 * c->block_bytes * (size_t)c->num_blocks * (size_t)c->n_layer; }

size_t vt_kv_cache_bytes_per_token(int32_t dtype, int32_t n_layer, int32_t n_kv_heads, int32_t head_dim) {
    return 2 * (size_t)n_layer * (size_t)n_kv_heads * vt_row_size(dtype, head_dim);
}

vt_status vt_kv_seq_reserve(vt_kv_cache *c, vt_kv_seq *seq, int64_t n_new, vt_error *err) {
    int64_t need_tokens = seq->n_tokens + n_new;
    int64_t need_blocks = (need_tokens + c->block_size - 1) / c->block_size;
    int64_t extra = need_blocks - seq->n_blocks;
    if (extra <= 0) return VT_OK;
    if (extra > c->n_free)
        return vt_fail(err, VT_ERR_CONTEXT_FULL,
                       "context full: %lld tokens need %lld KV blocks of %d but only %lld of %d are free "
                       "(KV cache holds %lld tokens; raise -c/--ctx-size)",
                       (long long)need_tokens, (long long)need_blocks, c->block_size,
                       (long long)(seq->n_blocks + c->n_free), c->num_blocks, (long long)vt_kv_cache_capacity(c));
    if (need_blocks > seq->cap) {
        int32_t cap = seq->cap ? seq->cap : 8;
        while (cap < need_blocks) cap *= 2;
        int32_t *t = realloc(seq->block_table, (size_t)cap * sizeof *t);
        if (!t) return vt_fail(err, VT_ERR_NOMEM, "out of memory for a block table");
        seq->block_table = t;
        seq->cap = cap;
    }
    for (int64_t i = 0; i < extra; i++) seq->block_table[seq->n_blocks++] = c->free_list[--c->n_free];
    return VT_OK;
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
    vt_status st = vt_kv_seq_reserve(c, dst, src->n_tokens, err);
    if (st != VT_OK) return st;
    const int64_t used = (src->n_tokens + c->block_size - 1) / c->block_size;
    for (int32_t l = 0; l < c->n_layer; l++)
        for (int64_t b = 0; b < used; b++) {
            const size_t from = (size_t)src->block_table[b] * c->block_bytes, to = (size_t)dst->block_table[b] * c->block_bytes;
            memcpy((char *)c->k[l] + to, (const char *)c->k[l] + from, c->block_bytes);
            memcpy((char *)c->v[l] + to, (const char *)c->v[l] + from, c->block_bytes);
        }
    dst->n_tokens = src->n_tokens;
    return VT_OK;
}

void vt_kv_seq_trim(vt_kv_cache *c, vt_kv_seq *seq) {
    const int64_t keep = (seq->n_tokens + c->block_size - 1) / c->block_size;
    while (seq->n_blocks > keep) c->free_list[c->n_free++] = seq->block_table[--seq->n_blocks];
}

void vt_kv_seq_release(vt_kv_cache *c, vt_kv_seq *seq) {
    for (int32_t i = seq->n_blocks - 1; i >= 0; i--) c->free_list[c->n_free++] = seq->block_table[i];
    free(seq->block_table);
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
