/* tokenizer_decode.c — token ids back to bytes, as llama.cpp's
 * token_to_piece and detokenize do it. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* Bounded writer: counts every byte, stores what fits, and drops up to `strip`
 * leading spaces (llama.cpp's lstrip). */
typedef struct writer {
    char *buf;
    size_t cap, n;
    int strip;
} writer;

static void put(writer *w, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (w->n == 0 && w->strip > 0 && s[i] == ' ') {
            w->strip--;
            continue;
        }
        w->strip = 0;
        if (w->n < w->cap) w->buf[w->n] = s[i];
        w->n++;
    }
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* llama.cpp's token_to_piece: the bytes of one token. */
static void token_piece(const vt_tokenizer *t, int32_t id, bool special, writer *w) {
    const vt_token_data *d = &t->tokens[id];
    if (!special && (d->attr & (VT_TOKEN_ATTR_UNKNOWN | VT_TOKEN_ATTR_CONTROL))) return;
    if (d->attr & (VT_TOKEN_ATTR_UNKNOWN | VT_TOKEN_ATTR_CONTROL | VT_TOKEN_ATTR_USER_DEFINED)) {
        put(w, d->text, d->len);
    } else if (d->attr & VT_TOKEN_ATTR_NORMAL) {
        if (t->type == VT_VOCAB_SPM) {
            for (uint32_t i = 0; i < d->len; i++) {
                if (i + 3 <= d->len && memcmp(d->text + i, "\xe2\x96\x81", 3) == 0) {
                    put(w, " ", 1);
                    i += 2;
                } else {
                    put(w, d->text + i, 1);
                }
            }
        } else {
            char small[256];
            size_t n = vt_bpe_decode_text(d->text, d->len, small, sizeof small);
            if (n <= sizeof small) {
                put(w, small, n);
            } else {
                char *big = malloc(n);
                if (big) {
                    vt_bpe_decode_text(d->text, d->len, big, n);
                    put(w, big, n);
                    free(big);
                }
            }
        }
    } else if (d->attr & VT_TOKEN_ATTR_BYTE) {
        /* "<0xNN>": the two characters after "<0x" */
        int hi = d->len >= 5 ? hex_digit(d->text[3]) : -1, lo = d->len >= 5 ? hex_digit(d->text[4]) : -1;
        char byte = (char)(hi < 0 ? 0 : lo < 0 ? hi : hi * 16 + lo);
        put(w, &byte, 1);
    }
}

int32_t vt_token_to_bytes(const vt_tokenizer *t, int32_t id, bool render_special, char *buf, size_t cap) {
    if (!t || id < 0 || id >= t->n_vocab) return -1;
    writer w = {buf, buf ? cap : 0, 0, 0};
    token_piece(t, id, render_special, &w);
    return w.n > INT32_MAX ? INT32_MAX : (int32_t)w.n;
}

/* clean_up_tokenization_spaces, as llama.cpp's detokenize does it in place. */
static size_t clean_spaces(char *text, size_t total) {
    size_t total1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total1; ++i) { /* " ?", " !", " .", " ," lose the space */
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    size_t total2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total2; ++i) { /* " ' " -> "'" */
        char x = text[i];
        if (x == '\'' && i + 1 < total2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t total3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < total3; ++i) { /* " 's", " 'm", " 're", " 've" lose the space */
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < total3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (i + 2 < total3) {
                char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

vt_status vt_detokenize(const vt_tokenizer *t, const int32_t *ids, size_t n_ids, bool render_special, char **text,
                        size_t *len, vt_error *err) {
    if (!t || !text || !len || (n_ids && !ids)) return vt_fail(err, VT_ERR_INVALID, "detokenize: NULL argument");
    *text = NULL;
    *len = 0;
    size_t cap = 64, n = 0;
    char *buf = malloc(cap);
    if (!buf) return vt_fail(err, VT_ERR_NOMEM, "detokenize: out of memory");
    bool remove_space = t->add_space_prefix; /* only the first token loses a leading space */
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            free(buf);
            return vt_fail(err, VT_ERR_INVALID, "detokenize: token %zu is id %d, outside the vocab of %d", i, ids[i],
                           t->n_vocab);
        }
        writer w = {buf + n, cap - n - 1, 0, remove_space ? 1 : 0};
        token_piece(t, ids[i], render_special, &w);
        if (w.n > cap - n - 1) {
            while (cap - n - 1 < w.n) cap *= 2;
            char *bigger = realloc(buf, cap);
            if (!bigger) {
                free(buf);
                return vt_fail(err, VT_ERR_NOMEM, "detokenize: out of memory");
            }
            buf = bigger;
            w = (writer){buf + n, cap - n - 1, 0, remove_space ? 1 : 0};
            token_piece(t, ids[i], render_special, &w);
        }
        n += w.n;
        remove_space = false;
    }
    if (t->clean_spaces) n = clean_spaces(buf, n);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return VT_OK;
}
