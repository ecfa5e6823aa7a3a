/* tokenizer_spm.c — SentencePiece-style encoding of one text fragment, as
 * llama.cpp's llm_tokenizer_spm does it:
 *
 *   1. split the (space-escaped) text into UTF-8 characters: one symbol each;
 *   2. repeatedly merge the adjacent pair whose concatenation is a vocab token
 *      with the highest score (ties: the leftmost pair), using a priority queue
 *      of candidate pairs and discarding entries made stale by earlier merges;
 *   3. emit each final symbol's token, or its bytes as <0xNN> tokens when the
 *      symbol is not in the vocab (a merged symbol always is: merges only
 *      happen into vocab tokens, so only single characters fall back).
 *
 * Step 2 runs chunk by chunk when the vocab allows it (spm_chunk_at_spaces):
 * merges in different chunks never meet, and within a chunk they happen in the
 * same order as in one global queue, so the result is identical; the queue
 * stays small instead of holding millions of candidates for a long text. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode_utf8.h"

typedef struct symbol {
    int32_t prev, next; /* neighbours in the live chain, -1 at the ends */
    uint32_t off, n;    /* bytes text[off .. off+n); n == 0 once merged away */
} symbol;

/* A candidate merge of symbol `left` with its right neighbour. The neighbour
 * is not stored: while the entry is current it is sym[left].next, and an entry
 * whose byte size no longer matches the pair's is stale (symbols only grow). */
typedef struct bigram {
    float score;
    int32_t left;
    uint32_t size;
} bigram;

/* A 4-ary heap: a megabyte of text queues millions of candidates, and four
 * children per node halve the depth (and the cache misses) of a binary heap. */
#define HEAP_ARITY 4

typedef struct bigram_heap {
    bigram *v;
    size_t n, cap;
} bigram_heap;

/* a is popped before b: higher score, then the leftmost pair. */
static bool before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static bool heap_push(bigram_heap *h, bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / HEAP_ARITY;
        if (!before(&b, &h->v[parent])) break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return true;
}

static bigram heap_pop(bigram_heap *h) {
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t first = HEAP_ARITY * i + 1, best = i;
        const bigram *cand = &last;
        for (size_t c = first; c < first + HEAP_ARITY && c < h->n; c++)
            if (before(&h->v[c], cand)) best = c, cand = &h->v[c];
        if (best == i) break;
        h->v[i] = h->v[best];
        i = best;
    }
    if (h->n) h->v[i] = last;
    return top;
}

#define SPACE "\xe2\x96\x81" /* U+2581 */

bool vt_spm_spaces_bound_merges(const vt_tokenizer *t) {
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const vt_token_data *d = &t->tokens[id];
        for (uint32_t j = 1; j + 3 <= d->len; j++)
            if (memcmp(d->text + j, SPACE, 3) == 0 && (j < 3 || memcmp(d->text + j - 3, SPACE, 3) != 0))
                return false;
    }
    return true;
}

typedef struct spm_session {
    const vt_tokenizer *t;
    const char *text;
    symbol *sym;
    bigram_heap queue;
} spm_session;

static bool try_add_bigram(spm_session *s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return true;
    uint32_t size = s->sym[left].n + s->sym[right].n;
    int32_t id = vt_vocab_find(s->t, s->text + s->sym[left].off, size);
    if (id < 0) return true;
    return heap_push(&s->queue, (bigram){s->t->tokens[id].score, left, size});
}

vt_status vt_spm_encode(const vt_tokenizer *t, const char *text, size_t len, vt_id_list *out, vt_error *err) {
    if (len == 0) return VT_OK;
    if (len > UINT32_MAX / 2) return vt_fail(err, VT_ERR_INVALID, "tokenize: fragment of %zu bytes is too long", len);
    spm_session s = {t, text, malloc(len * sizeof(symbol)), {0}};
    if (!s.sym) return vt_fail(err, VT_ERR_NOMEM, "tokenize: out of memory");
    vt_status st = VT_OK;

    int32_t n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t n = vt_utf8_seq_len((uint8_t)text[off]);
        if (n > len - off) n = len - off;
        s.sym[n_sym] = (symbol){n_sym - 1, off + n == len ? -1 : n_sym + 1, (uint32_t)off, (uint32_t)n};
        n_sym++;
        off += n;
    }
    for (int32_t chunk = 0; chunk < n_sym;) {
        /* The chunk ends before a symbol that is exactly U+2581 and follows one
         * that does not end in U+2581: a merge across would need a token with
         * U+2581 after other bytes, which the vocab was checked not to have. */
        int32_t end = chunk + 1;
        while (end < n_sym && t->spm_chunk_at_spaces &&
               !(s.sym[end].n == 3 && memcmp(text + s.sym[end].off, SPACE, 3) == 0 &&
                 !(s.sym[end].off >= 3 && memcmp(text + s.sym[end].off - 3, SPACE, 3) == 0)))
            end++;
        if (!t->spm_chunk_at_spaces) end = n_sym;
        for (int32_t i = chunk + 1; i < end; i++)
            if (!try_add_bigram(&s, i - 1, i)) goto nomem;
        while (s.queue.n) {
            bigram b = heap_pop(&s.queue);
            symbol *left = &s.sym[b.left];
            if (left->n == 0 || left->next < 0) continue; /* stale */
            symbol *right = &s.sym[left->next];
            if (right->n == 0 || left->n + right->n != b.size) continue; /* stale */
            left->n += right->n;
            right->n = 0;
            left->next = right->next;
            if (right->next >= 0) s.sym[right->next].prev = b.left;
            if (!try_add_bigram(&s, left->prev, b.left) || !try_add_bigram(&s, b.left, left->next)) goto nomem;
        }
        chunk = end;
    }

    for (int32_t i = 0; i != -1; i = s.sym[i].next) {
        const symbol *sy = &s.sym[i];
        int32_t id = vt_vocab_find(t, text + sy->off, sy->n);
        if (id >= 0) {
            if (!vt_id_list_push(out, id)) goto nomem;
            continue;
        }
        for (uint32_t j = 0; j < sy->n; j++) {
            uint8_t byte = (uint8_t)text[sy->off + j];
            if (t->byte_token[byte] < 0) {
                st = vt_fail(err, VT_ERR_UNSUPPORTED,
                             "tokenize: '%.*s' is not in the vocab and there is no byte token <0x%02X>", (int)sy->n,
                             text + sy->off, byte);
                goto done;
            }
            if (!vt_id_list_push(out, t->byte_token[byte])) goto nomem;
        }
    }
    goto done;
nomem:
    st = vt_fail(err, VT_ERR_NOMEM, "tokenize: out of memory");
done:
    free(s.sym);
    free(s.queue.v);
    return st;
}
