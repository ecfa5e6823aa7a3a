/* vocab.c — the vocabulary: token texts, types and scores, BPE merges, read
 * from the GGUF's tokenizer.* arrays, and the lookups the encoders use (text
 * to id, merge rank). It calls nothing else of the tokenizer, so the
 * encoders (tokenizer_spm.c, tokenizer_bpe.c), the special-token rules and
 * the dispatch in tokenizer.c all depend on it and not on each other's
 * callers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab.h"

/* ---- small helpers ------------------------------------------------------ */

bool vt_id_list_push(vt_id_list *l, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        int32_t *ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids) return false;
        l->ids = ids;
        l->cap = cap;
    }
    l->ids[l->n++] = id;
    return true;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n) c *= 2;
    return c;
}

static bool index_init(vt_str_index *ix, uint64_t n_entries) {
    uint32_t cap = pow2_at_least(n_entries * 2);
    ix->slots = calloc(cap, sizeof *ix->slots);
    ix->mask = cap - 1;
    return ix->slots != NULL;
}

int32_t vt_vocab_find(const vt_tokenizer *t, const char *s, size_t len) {
    uint64_t h = vt_fnv1a(VT_FNV_OFFSET, s, len);
    for (uint32_t i = (uint32_t)h & t->by_text.mask;; i = (i + 1) & t->by_text.mask) {
        uint32_t slot = t->by_text.slots[i];
        if (!slot) return -1;
        const vt_token_data *d = &t->tokens[slot - 1];
        if (d->len == len && memcmp(d->text, s, len) == 0) return (int32_t)(slot - 1);
    }
}

static uint64_t merge_hash(const char *left, size_t left_len, const char *right, size_t right_len) {
    uint64_t h = vt_fnv1a(VT_FNV_OFFSET, left, left_len);
    h = vt_fnv1a(h ^ 0x9E3779B97F4A7C15ull, "\x1f", 1); /* separate the halves so ("ab","c") != ("a","bc") */
    return vt_fnv1a(h, right, right_len);
}

int32_t vt_vocab_merge_rank(const vt_tokenizer *t, const char *left, size_t left_len, const char *right,
                            size_t right_len) {
    if (!t->merge_index.slots) return -1;
    uint64_t h = merge_hash(left, left_len, right, right_len);
    for (uint32_t i = (uint32_t)h & t->merge_index.mask;; i = (i + 1) & t->merge_index.mask) {
        uint32_t slot = t->merge_index.slots[i];
        if (!slot) return -1;
        const vt_bpe_merge *m = &t->merges[slot - 1];
        if (m->first_len == left_len && m->second_len == right_len && memcmp(m->text, left, left_len) == 0 &&
            memcmp(m->text + left_len + 1, right, right_len) == 0)
            return (int32_t)(slot - 1);
    }
}

/* ---- loading ------------------------------------------------------------ */

/* llama.cpp's LLAMA_TOKEN_TYPE_* -> attribute. */
static uint32_t attr_from_type(int64_t type) {
    switch (type) {
    case 1: return VT_TOKEN_ATTR_NORMAL;
    case 2: return VT_TOKEN_ATTR_UNKNOWN;
    case 3: return VT_TOKEN_ATTR_CONTROL;
    case 4: return VT_TOKEN_ATTR_USER_DEFINED;
    case 5: return VT_TOKEN_ATTR_UNUSED;
    case 6: return VT_TOKEN_ATTR_BYTE;
    default: return VT_TOKEN_ATTR_UNDEFINED;
    }
}

/* A token id key: absent leaves *id; a value outside the vocab is ignored, as
 * llama.cpp does ("bad special token ... using default id"). */
vt_status vt_vocab_read_token_id(const vt_gguf *g, const char *key, int32_t n_vocab, int32_t *id, vt_error *err) {
    const vt_gguf_kv *kv = vt_gguf_find(g, key);
    if (!kv) return VT_OK;
    int64_t v;
    switch (kv->value.type) {
    case VT_GGUF_UINT8:
    case VT_GGUF_UINT16:
    case VT_GGUF_UINT32:
    case VT_GGUF_UINT64:
        v = kv->value.v.u64 > (uint64_t)INT32_MAX ? -1 : (int64_t)kv->value.v.u64;
        break;
    case VT_GGUF_INT8:
    case VT_GGUF_INT16:
    case VT_GGUF_INT32:
    case VT_GGUF_INT64: v = kv->value.v.i64; break;
    default:
        return vt_fail(err, VT_ERR_FORMAT, "tokenizer: %s has type %s, expected an integer", key,
                       vt_gguf_type_name(kv->value.type));
    }
    if (v >= 0 && v < n_vocab) *id = (int32_t)v;
    return VT_OK;
}

vt_status vt_vocab_read_bool(const vt_gguf *g, const char *key, bool *out, vt_error *err) {
    if (!vt_gguf_find(g, key)) return VT_OK; /* absent: keep the default */
    return vt_gguf_get_bool(g, key, out, err);
}

vt_status vt_vocab_load_merges(vt_tokenizer *t, const vt_gguf *g, vt_error *err) {
    const vt_gguf_array *arr = NULL;
    if (!vt_gguf_find(g, "tokenizer.ggml.merges"))
        return vt_fail(err, VT_ERR_FORMAT, "tokenizer: gpt2 vocab without tokenizer.ggml.merges");
    vt_status st = vt_gguf_get_arr(g, "tokenizer.ggml.merges", VT_GGUF_STRING, &arr, err);
    if (st != VT_OK) return st;
    if (arr->n > INT32_MAX) return vt_fail(err, VT_ERR_FORMAT, "tokenizer: %llu merges", (unsigned long long)arr->n);
    size_t bytes = 0;
    for (uint64_t i = 0; i < arr->n; i++) bytes += arr->items[i].v.str.len + 1;
    t->merges = malloc((arr->n ? arr->n : 1) * sizeof *t->merges);
    t->merge_arena = malloc(bytes ? bytes : 1);
    if (!t->merges || !t->merge_arena || !index_init(&t->merge_index, arr->n))
        return vt_fail(err, VT_ERR_NOMEM, "tokenizer: out of memory for %llu merges", (unsigned long long)arr->n);
    char *p = t->merge_arena;
    for (uint64_t i = 0; i < arr->n; i++) {
        vt_gguf_str s = arr->items[i].v.str;
        memcpy(p, s.data, s.len);
        p[s.len] = '\0';
        /* llama.cpp splits at the first space after the first byte; a merge
         * without one can never match two non-empty symbols: skip it. */
        const char *space = s.len > 1 ? memchr(p + 1, ' ', s.len - 1) : NULL;
        vt_bpe_merge *m = &t->merges[i]; /* rank i = list position, kept even for skipped entries */
        m->text = p;
        m->first_len = m->second_len = 0;
        p += s.len + 1;
        if (!space || space == m->text + s.len - 1) continue;
        m->first_len = (uint32_t)(space - m->text);
        m->second_len = (uint32_t)(s.len - m->first_len - 1);
        uint64_t h = merge_hash(m->text, m->first_len, space + 1, m->second_len);
        uint32_t j = (uint32_t)h & t->merge_index.mask;
        bool duplicate = false;
        for (; t->merge_index.slots[j]; j = (j + 1) & t->merge_index.mask) {
            const vt_bpe_merge *o = &t->merges[t->merge_index.slots[j] - 1];
            if (o->first_len == m->first_len && o->second_len == m->second_len &&
                memcmp(o->text, m->text, s.len) == 0) {
                duplicate = true; /* the first (lowest rank) wins, as llama.cpp's emplace keeps it */
                break;
            }
        }
        if (!duplicate) t->merge_index.slots[j] = (uint32_t)i + 1;
    }
    t->n_merges = (uint32_t)arr->n;
    return VT_OK;
}

vt_status vt_vocab_load_tokens(vt_tokenizer *t, const vt_gguf *g, vt_error *err) {
    const vt_gguf_array *toks = NULL;
    if (!vt_gguf_find(g, "tokenizer.ggml.tokens"))
        return vt_fail(err, VT_ERR_FORMAT, "tokenizer: no tokenizer.ggml.tokens in %s", vt_gguf_path(g));
    vt_status st = vt_gguf_get_arr(g, "tokenizer.ggml.tokens", VT_GGUF_STRING, &toks, err);
    if (st != VT_OK) return st;
    if (toks->n == 0 || toks->n > INT32_MAX)
        return vt_fail(err, VT_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu entries",
                       (unsigned long long)toks->n);
    uint64_t n = toks->n;

    const vt_gguf_array *scores = NULL, *types = NULL;
    /* Optional keys: absent is fine, present must be well-formed. */
    if (vt_gguf_find(g, "tokenizer.ggml.scores")) {
        st = vt_gguf_get_arr(g, "tokenizer.ggml.scores", -1, &scores, err);
        if (st != VT_OK) return st;
        if (scores->type != VT_GGUF_FLOAT32 && scores->type != VT_GGUF_INT32)
            return vt_fail(err, VT_ERR_FORMAT, "tokenizer: tokenizer.ggml.scores has elements of type %s",
                           vt_gguf_type_name(scores->type));
        if (scores->n < n)
            return vt_fail(err, VT_ERR_FORMAT, "tokenizer: %llu scores for %llu tokens",
                           (unsigned long long)scores->n, (unsigned long long)n);
    }
    if (vt_gguf_find(g, "tokenizer.ggml.token_type")) {
        st = vt_gguf_get_arr(g, "tokenizer.ggml.token_type", VT_GGUF_INT32, &types, err);
        if (st != VT_OK) return st;
        if (types->n < n)
            return vt_fail(err, VT_ERR_FORMAT, "tokenizer: %llu token types for %llu tokens",
                           (unsigned long long)types->n, (unsigned long long)n);
    }

    size_t bytes = 0;
    for (uint64_t i = 0; i < n; i++) bytes += toks->items[i].v.str.len + 1 + 24; /* room for "[EMPTY_i]" */
    t->n_vocab = (int32_t)n;
    t->tokens = calloc(n, sizeof *t->tokens);
    t->arena = malloc(bytes);
    if (!t->tokens || !t->arena || !index_init(&t->by_text, n))
        return vt_fail(err, VT_ERR_NOMEM, "tokenizer: out of memory for %llu tokens", (unsigned long long)n);

    char *p = t->arena;
    for (uint64_t i = 0; i < n; i++) {
        vt_gguf_str s = toks->items[i].v.str;
        vt_token_data *d = &t->tokens[i];
        if (s.len == 0) {
            /* llama.cpp renames empty tokens so they stay unique and unmatchable */
            d->len = (uint32_t)sprintf(p, "[EMPTY_%llu]", (unsigned long long)i);
        } else {
            memcpy(p, s.data, s.len);
            p[s.len] = '\0';
            d->len = (uint32_t)s.len;
        }
        d->text = p;
        p += d->len + 1;
        d->score = scores ? (float)vt_gguf_arr_f64(scores, i) : 0.0f;
        d->attr = types ? attr_from_type(vt_gguf_arr_i64(types, i)) : VT_TOKEN_ATTR_NORMAL;

        uint64_t h = vt_fnv1a(VT_FNV_OFFSET, d->text, d->len);
        uint32_t j = (uint32_t)h & t->by_text.mask;
        for (; t->by_text.slots[j]; j = (j + 1) & t->by_text.mask) {
            const vt_token_data *o = &t->tokens[t->by_text.slots[j] - 1];
            if (o->len == d->len && memcmp(o->text, d->text, d->len) == 0)
                return vt_fail(err, VT_ERR_FORMAT, "tokenizer: duplicate token '%.*s' has ids %u and %llu",
                               (int)(d->len > 64 ? 64 : d->len), d->text, t->by_text.slots[j] - 1,
                               (unsigned long long)i);
        }
        t->by_text.slots[j] = (uint32_t)i + 1;
    }
    return VT_OK;
}

