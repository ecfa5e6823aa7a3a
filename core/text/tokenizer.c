/* tokenizer.c — loading a tokenizer from GGUF metadata (the model type,
 * defaults and special ids; the vocabulary itself is vocab.c's), special-token
 * splitting and encode dispatch (SPM / BPE). Special-token attributes live in
 * tokenizer_special.c, decoding in tokenizer_decode.c. Dependencies run one
 * way: this file calls the encoders, and they and it call vocab.c.
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

    if ((st = vt_vocab_read_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err)) != VT_OK) goto fail;
    if ((st = vt_vocab_load_tokens(t, g, err)) != VT_OK) goto fail;
    if (t->type == VT_VOCAB_BPE && (st = vt_vocab_load_merges(t, g, err)) != VT_OK) goto fail;

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
    if ((st = vt_vocab_read_token_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err)) != VT_OK ||
        (st = vt_vocab_read_token_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err)) != VT_OK ||
        (st = vt_vocab_read_token_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot, err)) != VT_OK ||
        (st = vt_vocab_read_token_id(g, "tokenizer.ggml.eom_token_id", t->n_vocab, &t->eom, err)) != VT_OK ||
        (st = vt_vocab_read_token_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err)) != VT_OK)
        goto fail;
    for (int k = 0; k < 6; k++)
        for (int j = 0; j < 2; j++)
            if (fim_keys[k][j] && (st = vt_vocab_read_token_id(g, fim_keys[k][j], t->n_vocab, &fim[k], err)) != VT_OK)
                goto fail;
    if ((st = vt_vocab_read_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err)) != VT_OK ||
        (st = vt_vocab_read_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err)) != VT_OK)
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
