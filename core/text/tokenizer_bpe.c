/* tokenizer_bpe.c — byte-level BPE (tokenizer.ggml.model "gpt2") as llama.cpp
 * runs it for the qwen2 pre-tokenizer:
 *
 *   1. decode the fragment to codepoints (invalid bytes become U+FFFD);
 *   2. split it into pre-tokens with the qwen2 regex
 *        (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
 *        |[^\r\n\p{L}\p{N}]?\p{L}+ |\p{N} | ?[^\s\p{L}\p{N}]+[\r\n]*
 *        |\s*[\r\n]+ |\s+(?!\S) |\s+
 *      implemented as a hand-written scanner with the alternatives tried in
 *      order, as an ECMAScript engine would;
 *   3. map every byte of a pre-token to its GPT-2 "byte-level" character;
 *   4. merge adjacent symbols by lowest merge rank (ties: leftmost) with a
 *      priority queue; ranks come from a hash map keyed by the pair.
 *
 * llama.cpp runs this regex through std::regex on a "collapsed" copy of the
 * text where each non-ASCII codepoint stands for its class: White_Space ->
 * \s, letters -> \p{L}, numbers -> \p{N}, anything else -> neither. ASCII keeps
 * its own identity, so in ASCII \s is exactly " \t\n\v\f\r". klass() below
 * reproduces that classification. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_props.h"
#include "unicode_utf8.h"

/* ---- GPT-2 byte <-> character mapping ------------------------------------ */

/* Printable Latin-1 bytes map to themselves; the other 68 bytes (0x00-0x20,
 * 0x7F-0xA0, 0xAD) map in order to U+0100.. U+0143. */
static uint32_t byte_to_cpt(uint8_t b) {
    if (b <= 0x20) return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0) return 0x121u + (b - 0x7Fu);
    if (b == 0xAD) return 0x143u;
    return b;
}

static int cpt_to_byte(uint32_t c) {
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c >= 0x100 && c <= 0x120) return (int)(c - 0x100);
    if (c >= 0x121 && c <= 0x142) return (int)(c - 0x121 + 0x7F);
    if (c == 0x143) return 0xAD;
    return -1;
}

size_t vt_bpe_decode_text(const char *text, size_t len, char *buf, size_t cap) {
    size_t n = 0;
#define PUT(ch)                              \
    do {                                     \
        if (n < cap) buf[n] = (char)(ch);    \
        n++;                                 \
    } while (0)
    for (size_t off = 0; off < len;) {
        size_t used;
        uint32_t c = vt_utf8_decode(text + off, len - off, &used);
        off += used;
        int b = cpt_to_byte(c);
        if (b >= 0) {
            PUT(b);
            continue;
        }
        /* llama.cpp's llama_decode_text: "[UNK_BYTE_0x" + hex of the char + whole text + "]" */
        static const char head[] = "[UNK_BYTE_0x", hex[] = "0123456789abcdef";
        for (const char *h = head; *h; h++) PUT(*h);
        char u[4];
        size_t un = vt_utf8_encode(c, u);
        for (size_t i = 0; i < un; i++) {
            PUT(hex[(uint8_t)u[i] >> 4]);
            PUT(hex[(uint8_t)u[i] & 15]);
        }
        for (size_t i = 0; i < len; i++) PUT(text[i]);
        PUT(']');
    }
#undef PUT
    return n;
}

bool vt_bpe_pre_configure(vt_tokenizer *t, const char *name, size_t len) {
    /* The names llama.cpp maps to these two regexes, with the flags it sets for
     * each (clean_up_tokenization_spaces; llama3's ignore_merges and add_bos). */
    static const struct {
        const char *name;
        vt_bpe_pre pre;
        bool clean_spaces, llama3_flags;
    } known[] = {
        {"qwen2", VT_BPE_PRE_QWEN2, false, false},       {"deepseek-r1-qwen", VT_BPE_PRE_QWEN2, false, false},
        {"megrez", VT_BPE_PRE_QWEN2, true, false},       {"stablelm2", VT_BPE_PRE_QWEN2, true, false},
        {"hunyuan", VT_BPE_PRE_QWEN2, false, false},     {"solar-open", VT_BPE_PRE_QWEN2, false, false},
        {"grok-2", VT_BPE_PRE_QWEN2, false, false},      {"kormo", VT_BPE_PRE_QWEN2, false, false},
        {"f2llmv2", VT_BPE_PRE_QWEN2, false, false},     {"llama3", VT_BPE_PRE_LLAMA3, true, true},
        {"llama-v3", VT_BPE_PRE_LLAMA3, true, true},     {"llama-bpe", VT_BPE_PRE_LLAMA3, true, true},
        {"falcon3", VT_BPE_PRE_LLAMA3, true, true},      {"dbrx", VT_BPE_PRE_LLAMA3, true, false},
        {"smaug-bpe", VT_BPE_PRE_LLAMA3, true, false},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strlen(known[i].name) == len && memcmp(known[i].name, name, len) == 0) {
            t->pre = known[i].pre;
            t->clean_spaces = known[i].clean_spaces;
            if (known[i].llama3_flags) t->ignore_merges = t->add_bos = true;
            return true;
        }
    }
    return false;
}

/* ---- qwen2 pre-tokenizer --------------------------------------------------- */

enum { K_LETTER, K_NUMBER, K_SPACE, K_OTHER };

static uint8_t klass(uint32_t c) {
    if (c < 0x80) {
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return K_LETTER;
        if (c >= '0' && c <= '9') return K_NUMBER;
        if (c == ' ' || (c >= '\t' && c <= '\r')) return K_SPACE;
        return K_OTHER;
    }
    uint8_t f = vt_unicode_flags(c);
    if (f & VT_UFLAG_WHITESPACE) return K_SPACE;
    if (f & VT_UFLAG_LETTER) return K_LETTER;
    if (f & VT_UFLAG_NUMBER) return K_NUMBER;
    return K_OTHER;
}

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* The whitespace alternatives both pre-tokenizers end with, at a K_SPACE
 * codepoint p: \s*[\r\n]+ ends after the run's last \r or \n; else
 * \s+(?!\S) leaves the run's last space to the next word, and \s+ takes a
 * lone space or a run that ends the text. */
static size_t whitespace_match(const uint32_t *cp, const uint8_t *k, size_t p, size_t end) {
    size_t run_end = p, last_newline = 0;
    while (run_end < end && k[run_end] == K_SPACE) {
        if (cp[run_end] == '\r' || cp[run_end] == '\n') last_newline = run_end + 1;
        run_end++;
    }
    if (last_newline) return last_newline - p;
    if (run_end < end && run_end - p >= 2) return run_end - 1 - p;
    return run_end - p;
}

/* Length (in codepoints) of the pre-token starting at p; cp/k hold [0, end). */
static size_t qwen2_match(const uint32_t *cp, const uint8_t *k, size_t p, size_t end) {
    uint32_t c = cp[p];
    /* (?:'s|'t|'re|'ve|'m|'ll|'d), ASCII case-insensitive */
    if (c == '\'' && p + 1 < end) {
        uint32_t n1 = ascii_lower(cp[p + 1]);
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
        if (p + 2 < end) {
            uint32_t n2 = ascii_lower(cp[p + 2]);
            if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    size_t q = p;
    if (k[q] != K_LETTER && k[q] != K_NUMBER && c != '\r' && c != '\n' && q + 1 < end && k[q + 1] == K_LETTER) q++;
    if (k[q] == K_LETTER) {
        while (q < end && k[q] == K_LETTER) q++;
        return q - p;
    }
    /* \p{N} */
    if (k[p] == K_NUMBER) return 1;
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    q = p;
    if (c == ' ' && q + 1 < end && k[q + 1] == K_OTHER) q++;
    if (k[q] == K_OTHER) {
        while (q < end && k[q] == K_OTHER) q++;
        while (q < end && (cp[q] == '\r' || cp[q] == '\n')) q++;
        return q - p;
    }
    /* k[p] is K_SPACE here */
    return whitespace_match(cp, k, p, end);
}

/* llama.cpp runs the llama3 regex
 *   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * through a hand-written splitter over codepoint flags (no collapsing); this
 * follows that splitter. Its \s is White_Space also in ASCII, which equals
 * the collapsed \s, so klass() serves both. The contraction's letter is
 * lowercased with Unicode's map in llama.cpp, but no non-ASCII codepoint
 * lowercases to one of s t m d r e v l, so ASCII lowering is exact. */
static size_t llama3_match(const uint32_t *cp, const uint8_t *k, size_t p, size_t end) {
    uint32_t c = cp[p];
    if (c == '\'' && p + 1 < end) {
        uint32_t n1 = ascii_lower(cp[p + 1]);
        if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return 2;
        if (p + 2 < end) {
            uint32_t n2 = ascii_lower(cp[p + 2]);
            if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return 3;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (c != '\r' && c != '\n' && k[p] != K_NUMBER && (k[p] == K_LETTER || (p + 1 < end && k[p + 1] == K_LETTER))) {
        size_t q = p + 1;
        while (q < end && k[q] == K_LETTER) q++;
        return q - p;
    }
    /* \p{N}{1,3} */
    if (k[p] == K_NUMBER) {
        size_t q = p;
        while (q < end && k[q] == K_NUMBER && q - p < 3) q++;
        return q - p;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* (a lone trailing space also lands here, as in llama.cpp) */
    size_t q = p;
    if (c == ' ' && (q + 1 >= end || k[q + 1] == K_OTHER)) q++;
    if (q > p || k[p] == K_OTHER) {
        while (q < end && k[q] == K_OTHER) q++;
        while (q < end && (cp[q] == '\r' || cp[q] == '\n')) q++;
        return q - p;
    }
    return whitespace_match(cp, k, p, end);
}

/* ---- merges -------------------------------------------------------------- */

typedef struct symbol {
    int32_t prev, next;
    uint32_t off, n; /* bytes of the byte-level word; n == 0 once merged away */
} symbol;

typedef struct bigram {
    int32_t rank;
    int32_t left, right;
    uint32_t size;
} bigram;

/* a is popped before b: lower rank, then the leftmost pair. */
static bool before(const bigram *a, const bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

typedef struct bpe_session {
    const vt_tokenizer *t;
    char *word; /* the byte-level form of the current pre-token */
    size_t word_cap;
    symbol *sym;
    size_t sym_cap;
    bigram *heap;
    size_t heap_n, heap_cap;
} bpe_session;

static bool heap_push(bpe_session *s, bigram b) {
    if (s->heap_n == s->heap_cap) {
        size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
        bigram *v = realloc(s->heap, cap * sizeof *v);
        if (!v) return false;
        s->heap = v;
        s->heap_cap = cap;
    }
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&b, &s->heap[parent])) break;
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = b;
    return true;
}

static bigram heap_pop(bpe_session *s) {
    bigram top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        const bigram *cand = &last;
        if (l < s->heap_n && before(&s->heap[l], cand)) best = l, cand = &s->heap[l];
        if (r < s->heap_n && before(&s->heap[r], cand)) best = r;
        if (best == i) break;
        s->heap[i] = s->heap[best];
        i = best;
    }
    if (s->heap_n) s->heap[i] = last;
    return top;
}

static bool add_bigram(bpe_session *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    const symbol *l = &s->sym[left], *r = &s->sym[right];
    int32_t rank = vt_vocab_merge_rank(s->t, s->word + l->off, l->n, s->word + r->off, r->n);
    if (rank < 0) return true;
    return heap_push(s, (bigram){rank, left, right, l->n + r->n});
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(p, c * elem);
    if (q) *cap = c;
    return q;
}

/* BPE one pre-token (codepoints cp[0..n)) and append its ids. */
static bool encode_word(bpe_session *s, const uint32_t *cp, size_t n, vt_id_list *out) {
    /* byte-level form: every UTF-8 byte becomes one 1- or 2-byte character */
    char *w = grow(s->word, &s->word_cap, n * 8, 1);
    if (!w) return false;
    s->word = w;
    symbol *sym = grow(s->sym, &s->sym_cap, n * 4, sizeof *sym);
    if (!sym) return false;
    s->sym = sym;
    size_t wn = 0;
    int32_t n_sym = 0;
    for (size_t i = 0; i < n; i++) {
        char u[4];
        size_t un = vt_utf8_encode(cp[i], u);
        for (size_t j = 0; j < un; j++) {
            size_t cn = vt_utf8_encode(byte_to_cpt((uint8_t)u[j]), w + wn);
            sym[n_sym] = (symbol){n_sym - 1, n_sym + 1, (uint32_t)wn, (uint32_t)cn};
            n_sym++;
            wn += cn;
        }
    }
    sym[n_sym - 1].next = -1;

    if (s->t->ignore_merges) {
        int32_t id = vt_vocab_find(s->t, w, wn);
        if (id >= 0) return vt_id_list_push(out, id);
    }

    s->heap_n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if (!add_bigram(s, i - 1, i)) return false;
    while (s->heap_n) {
        bigram b = heap_pop(s);
        symbol *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!add_bigram(s, l->prev, b.left) || !add_bigram(s, b.left, l->next)) return false;
    }

    for (int32_t i = 0; i != -1; i = sym[i].next) {
        int32_t id = vt_vocab_find(s->t, w + sym[i].off, sym[i].n);
        if (id >= 0) {
            if (!vt_id_list_push(out, id)) return false;
            continue;
        }
        /* llama.cpp's fallback: each byte of the symbol as a one-byte token, if any */
        for (uint32_t j = 0; j < sym[i].n; j++) {
            int32_t bid = vt_vocab_find(s->t, w + sym[i].off + j, 1);
            if (bid >= 0 && !vt_id_list_push(out, bid)) return false;
        }
    }
    return true;
}

vt_status vt_bpe_encode(const vt_tokenizer *t, const char *text, size_t len, vt_id_list *out, vt_error *err) {
    if (len == 0) return VT_OK;
    uint32_t *cp = malloc(len * sizeof *cp);
    uint8_t *k = malloc(len);
    bpe_session s = {.t = t};
    vt_status st = VT_OK;
    if (!cp || !k) goto nomem;

    size_t n = 0;
    for (size_t off = 0; off < len;) {
        size_t used;
        cp[n] = vt_utf8_decode(text + off, len - off, &used);
        k[n] = klass(cp[n]);
        n++;
        off += used;
    }
    for (size_t p = 0; p < n;) {
        size_t m = t->pre == VT_BPE_PRE_LLAMA3 ? llama3_match(cp, k, p, n) : qwen2_match(cp, k, p, n);
        if (!encode_word(&s, cp + p, m, out)) goto nomem;
        p += m;
    }
    goto done;
nomem:
    st = vt_fail(err, VT_ERR_NOMEM, "tokenize: out of memory");
done:
    free(cp);
    free(k);
    free(s.word);
    free(s.sym);
    free(s.heap);
    return st;
}
