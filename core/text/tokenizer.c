/* tokenizer.c — vocabulary loading from GGUF metadata, special-token
 * splitting and encode dispatch (SPM / BPE). Special-token attributes live in
 * tokenizer_special.c, decoding in tokenizer_decode.c.
 *
 * The behaviour follows llama.cpp's llama_vocab (load, tokenize,
 * token_to_piece, detokenize) so token ids match it exactly; the comments
 * name the llama.cpp rule each step reproduces. */
#include "tokenizer.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

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
static vt_status read_token_id(const vt_gguf *g, const char *key, int32_t n_vocab, int32_t *id, vt_error *err) {
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

static vt_status read_bool(const vt_gguf *g, const char *key, bool *out, vt_error *err) {
    if (!vt_gguf_find(g, key)) return VT_OK; /* absent: keep the default */
    return vt_gguf_get_bool(g, key, out, err);
}

static vt_status load_merges(vt_tokenizer *t, const vt_gguf *g, vt_error *err) {
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

static vt_status load_tokens(vt_tokenizer *t, const vt_gguf *g, vt_error *err) {
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

vt_status vt_tokenizer_load(const vt_gguf *g, vt_tokenizer **out, vt_error *err) {
    if (!g || !out) return vt_fail(err, VT_ERR_INVALID, "tokenizer: NULL argument");
    *out = NULL;
    vt_gguf_str model = {0, NULL}, pre = {0, NULL};
    if (!vt_gguf_find(g, "tokenizer.ggml.model"))
        return vt_fail(err, VT_ERR_FORMAT, "tokenizer: %s has no tokenizer.ggml.model", vt_gguf_path(g));
    vt_status st = vt_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (st != VT_OK) return st;
    if (vt_gguf_find(g, "tokenizer.ggml.pre")) {
        st = vt_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
        if (st != VT_OK) return st;
    }

    vt_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return vt_fail(err, VT_ERR_NOMEM, "tokenizer: out of memory");
    int32_t fim[6] = {-1, -1, -1, -1, -1, -1};

    if (vt_gguf_str_eq(model, "llama")) {
        t->type = VT_VOCAB_SPM;
        t->bos = 1, t->eos = 2, t->unk = 0; /* llama.cpp's SPM defaults */
        t->add_space_prefix = true;
        t->add_bos = true;
    } else if (vt_gguf_str_eq(model, "gpt2")) {
        t->type = VT_VOCAB_BPE;
        t->bos = 11, t->eos = 11, t->unk = -1; /* llama.cpp's BPE defaults */
        t->clean_spaces = true;
        if (!pre.data || !vt_bpe_pre_configure(t, pre.data, (size_t)pre.len)) {
            st = vt_fail(err, VT_ERR_UNSUPPORTED,
                         "tokenizer: BPE pre-tokenizer '%.*s' is not supported (have: qwen2, llama3 and their aliases)",
                         pre.data ? (int)(pre.len > 64 ? 64 : pre.len) : 6, pre.data ? pre.data : "(none)");
            goto fail;
        }
    } else {
        st = vt_fail(err, VT_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%.*s' is not supported (have: llama, gpt2)",
                     (int)(model.len > 64 ? 64 : model.len), model.data);
        goto fail;
    }
    t->eot = t->eom = -1;

    if ((st = read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err)) != VT_OK) goto fail;
    if ((st = load_tokens(t, g, err)) != VT_OK) goto fail;
    if (t->type == VT_VOCAB_BPE && (st = load_merges(t, g, err)) != VT_OK) goto fail;

    /* Defaults outside the vocab are dropped, then the GGUF's ids override. */
    int32_t *ids[] = {&t->bos, &t->eos, &t->unk};
    for (int i = 0; i < 3; i++)
        if (*ids[i] >= t->n_vocab) *ids[i] = -1;
    static const char *const fim_keys[6][2] = {
        {"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"},
        {"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"},
        {"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"},
        {"tokenizer.ggml.fim_pad_token_id", NULL},
        {"tokenizer.ggml.fim_rep_token_id", NULL},
        {"tokenizer.ggml.fim_sep_token_id", NULL},
    };
    if ((st = read_token_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err)) != VT_OK ||
        (st = read_token_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err)) != VT_OK ||
        (st = read_token_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot, err)) != VT_OK ||
        (st = read_token_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom, err)) != VT_OK ||
        (st = read_token_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err)) != VT_OK)
        goto fail;
    for (int k = 0; k < 6; k++)
        for (int j = 0; j < 2; j++)
            if (fim_keys[k][j] && (st = read_token_id(g, fim_keys[k][j], t->n_vocab, &fim[k], err)) != VT_OK)
                goto fail;
    if ((st = read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err)) != VT_OK ||
        (st = read_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err)) != VT_OK)
        goto fail;
    if (t->add_bos && t->bos < 0) {
        st = vt_fail(err, VT_ERR_FORMAT, "tokenizer: add_bos_token is true but there is no BOS token");
        goto fail;
    }

    if ((st = vt_special_apply_heuristics(t, fim, err)) != VT_OK) goto fail;
    if ((st = vt_special_build_list(t, err)) != VT_OK) goto fail;
    vt_special_apply_name_attrs(t, g);

    if (t->type == VT_VOCAB_SPM) t->spm_chunk_at_spaces = vt_spm_spaces_bound_merges(t);
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = vt_vocab_find(t, hex, 6);
        if (id < 0) {
            char raw = (char)b;
            id = vt_vocab_find(t, &raw, 1);
        }
        t->byte_token[b] = id;
    }
    *out = t;
    return VT_OK;

fail:
    vt_tokenizer_free(t);
    return st;
}

void vt_tokenizer_free(vt_tokenizer *t) {
    if (!t) return;
    free(t->tokens);
    free(t->arena);
    free(t->by_text.slots);
    free(t->eog);
    free(t->special);
    free(t->merges);
    free(t->merge_arena);
    free(t->merge_index.slots);
    free(t);
}

int32_t vt_tokenizer_n_vocab(const vt_tokenizer *t) { return t->n_vocab; }
int32_t vt_tokenizer_bos(const vt_tokenizer *t) { return t->bos; }
int32_t vt_tokenizer_eos(const vt_tokenizer *t) { return t->eos; }
bool vt_tokenizer_add_bos(const vt_tokenizer *t) { return t->add_bos; }

const char *vt_tokenizer_piece(const vt_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    return t->tokens[id].text;
}

/* ---- special-token splitting (llama.cpp's tokenizer_st_partition) -------- */

typedef struct fragment {
    int32_t token; /* a special token, or -1 for raw text */
    size_t off, len;
} fragment;

typedef struct fragment_list {
    fragment *v;
    size_t n, cap;
} fragment_list;

static bool frag_push(fragment_list *l, fragment f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fragment *v = realloc(l->v, cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = f;
    return true;
}

/* Split every raw fragment at each occurrence of every special token, longest
 * token first; CONTROL and UNKNOWN tokens only when parse_special. */
static vt_status partition(const vt_tokenizer *t, const char *text, size_t len, bool parse_special,
                           fragment_list *frags, vt_error *err) {
    fragment_list next = {0};
    if (len && !frag_push(frags, (fragment){-1, 0, len})) goto nomem;
    /* A token with a byte the text lacks cannot occur in it: one pass over the
     * text spares scanning it for each of the (often hundreds of) specials. */
    bool byte_present[256] = {false};
    for (size_t i = 0; i < len; i++) byte_present[(unsigned char)text[i]] = true;
    for (size_t si = 0; si < t->n_special; si++) {
        int32_t id = t->special[si];
        const vt_token_data *d = &t->tokens[id];
        if (!parse_special && (d->attr & (VT_TOKEN_ATTR_CONTROL | VT_TOKEN_ATTR_UNKNOWN))) continue;
        bool possible = d->len <= len;
        for (uint32_t i = 0; possible && i < d->len; i++) possible = byte_present[(unsigned char)d->text[i]];
        if (!possible) continue;
        bool any = false;
        for (size_t fi = 0; fi < frags->n && !any; fi++)
            any = frags->v[fi].token < 0 && frags->v[fi].len >= d->len &&
                  memmem(text + frags->v[fi].off, frags->v[fi].len, d->text, d->len);
        if (!any) continue;

        next.n = 0;
        for (size_t fi = 0; fi < frags->n; fi++) {
            fragment f = frags->v[fi];
            if (f.token >= 0) {
                if (!frag_push(&next, f)) goto nomem;
                continue;
            }
            size_t base = f.off, blen = f.len;
            for (;;) {
                const char *m = blen >= d->len ? memmem(text + base, blen, d->text, d->len) : NULL;
                if (!m) {
                    if (!frag_push(&next, (fragment){-1, base, blen})) goto nomem;
                    break;
                }
                size_t match = (size_t)(m - text);
                if (match > base) {
                    size_t left_len = match - base;
                    if (d->attr & VT_TOKEN_ATTR_LSTRIP)
                        while (left_len > 0 && isspace((unsigned char)text[base + left_len - 1])) left_len--;
                    if (left_len > 0 && !frag_push(&next, (fragment){-1, base, left_len})) goto nomem;
                }
                if (!frag_push(&next, (fragment){id, 0, 0})) goto nomem;
                size_t right = match + d->len, end = base + blen;
                if (right >= end) break;
                if (d->attr & VT_TOKEN_ATTR_RSTRIP)
                    while (right < end && isspace((unsigned char)text[right])) right++;
                if (right >= end) break;
                base = right;
                blen = end - right;
            }
        }
        fragment_list tmp = *frags;
        *frags = next;
        next = tmp;
    }
    free(next.v);
    return VT_OK;
nomem:
    free(next.v);
    return vt_fail(err, VT_ERR_NOMEM, "tokenize: out of memory");
}

/* ---- encode ------------------------------------------------------------- */

static vt_status spm_fragment(const vt_tokenizer *t, const char *text, size_t len, bool prefix_space,
                              vt_id_list *out, vt_error *err) {
    /* llama_escape_whitespace: " " -> U+2581 (3 bytes) */
    char *buf = malloc(3 * (len + 1));
    if (!buf) return vt_fail(err, VT_ERR_NOMEM, "tokenize: out of memory");
    size_t n = 0;
    if (prefix_space) {
        memcpy(buf, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            buf[n++] = text[i];
        }
    }
    vt_status st = vt_spm_encode(t, buf, n, out, err);
    free(buf);
    return st;
}

vt_status vt_tokenize(const vt_tokenizer *t, const char *text, size_t len, bool add_bos, bool parse_special,
                      int32_t **ids, size_t *n_ids, vt_error *err) {
    if (!t || !ids || !n_ids || (len && !text)) return vt_fail(err, VT_ERR_INVALID, "tokenize: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    fragment_list frags = {0};
    vt_id_list out = {0};
    vt_status st = partition(t, text, len, parse_special, &frags, err);
    if (st != VT_OK) goto done;

    if (add_bos && t->bos >= 0 && !vt_id_list_push(&out, t->bos)) goto nomem;
    bool prev_special = true; /* SPM: the first text fragment gets the space prefix */
    for (size_t i = 0; i < frags.n; i++) {
        fragment f = frags.v[i];
        if (f.token >= 0) {
            if (!vt_id_list_push(&out, f.token)) goto nomem;
            prev_special = true;
            continue;
        }
        if (t->type == VT_VOCAB_SPM)
            st = spm_fragment(t, text + f.off, f.len, t->add_space_prefix && prev_special, &out, err);
        else
            st = vt_bpe_encode(t, text + f.off, f.len, &out, err);
        if (st != VT_OK) goto done;
        prev_special = false;
    }
    *ids = out.ids;
    *n_ids = out.n;
    out.ids = NULL;
    if (!*ids) {
        *ids = malloc(sizeof **ids); /* a valid pointer even for zero tokens */
        if (!*ids) goto nomem;
    }
    st = VT_OK;
    goto done;
nomem:
    st = vt_fail(err, VT_ERR_NOMEM, "tokenize: out of memory");
done:
    free(frags.v);
    free(out.ids);
    return st;
}
