/* token_trie.c — the vocabulary's token texts as a byte trie, built once per
 * vocabulary: tokens sharing a prefix share its nodes, so a mask decides a
 * prefix once for every token that starts with it. */
#include <stdlib.h>
#include <string.h>

#include "token_trie.h"

typedef struct item {
    const uint8_t *bytes;
    uint32_t len;
    int32_t id;
} item;

static int compare_items(const void *pa, const void *pb) {
    const item *a = pa, *b = pb;
    uint32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->bytes, b->bytes, n);
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Node `node` holds items[lo..hi), which share their first depth bytes. */
static void build(vt_token_trie *t, const item *items, uint32_t node, uint32_t lo, uint32_t hi, uint32_t depth) {
    uint32_t m = lo;
    while (m < hi && items[m].len == depth) m++; /* the tokens that end here sort first */
    t->nodes[node].tok_begin = lo;
    t->nodes[node].n_tok = m - lo;
    uint32_t groups = 0;
    for (uint32_t i = m; i < hi; i++)
        if (i == m || items[i].bytes[depth] != items[i - 1].bytes[depth]) groups++;
    const uint32_t first = t->n_nodes;
    t->nodes[node].child_begin = first;
    t->nodes[node].n_children = groups;
    t->n_nodes += groups;
    uint32_t child = first;
    for (uint32_t i = m; i < hi;) {
        uint32_t j = i + 1;
        while (j < hi && items[j].bytes[depth] == items[i].bytes[depth]) j++;
        t->nodes[child].byte = items[i].bytes[depth];
        build(t, items, child, i, j, depth + 1);
        child++;
        i = j;
    }
}

vt_status vt_token_trie_build(int32_t n_vocab, vt_token_bytes_fn token_bytes, void *user, vt_token_trie **out,
                              vt_error *err) {
    *out = NULL;
    if (n_vocab < 1 || !token_bytes) return vt_fail(err, VT_ERR_INVALID, "token trie: no vocabulary");
    vt_token_trie *t = calloc(1, sizeof *t);
    item *items = calloc((size_t)n_vocab, sizeof *items);
    uint8_t *text = NULL;
    size_t n_text = 0, cap_text = 0;
    char buf[256];
    uint32_t n_items = 0;
    if (!t || !items) goto nomem;
    t->n_vocab = n_vocab;
    for (int32_t id = 0; id < n_vocab; id++) {
        int32_t n = token_bytes(user, id, buf, sizeof buf);
        if (n <= 0) continue;
        if (n_text + (size_t)n > cap_text) {
            size_t cap = cap_text ? cap_text : 1 << 16;
            while (cap < n_text + (size_t)n) cap *= 2;
            uint8_t *grown = realloc(text, cap);
            if (!grown) goto nomem;
            text = grown;
            cap_text = cap;
        }
        if ((size_t)n > sizeof buf) {
            if (token_bytes(user, id, (char *)text + n_text, (size_t)n) != n) continue;
        } else {
            memcpy(text + n_text, buf, (size_t)n);
        }
        items[n_items++] = (item){(const uint8_t *)(uintptr_t)n_text, (uint32_t)n, id}; /* offset until text stops moving */
        n_text += (size_t)n;
        if ((uint32_t)n > t->max_len) t->max_len = (uint32_t)n;
    }
    for (uint32_t i = 0; i < n_items; i++) items[i].bytes = text + (uintptr_t)items[i].bytes;
    qsort(items, n_items, sizeof *items, compare_items);
    /* at most one node per byte, plus the root */
    t->nodes = calloc(n_text + 1, sizeof *t->nodes);
    t->ids = malloc((n_items ? n_items : 1) * sizeof *t->ids);
    if (!t->nodes || !t->ids) goto nomem;
    for (uint32_t i = 0; i < n_items; i++) t->ids[i] = items[i].id;
    t->n_nodes = 1;
    build(t, items, 0, 0, n_items, 0);
    vt_trie_node *shrunk = realloc(t->nodes, t->n_nodes * sizeof *t->nodes);
    if (shrunk) t->nodes = shrunk;
    free(items);
    free(text);
    *out = t;
    return VT_OK;
nomem:
    free(items);
    free(text);
    vt_token_trie_free(t);
    return vt_fail(err, VT_ERR_NOMEM, "token trie: out of memory for %d tokens", n_vocab);
}

void vt_token_trie_free(vt_token_trie *t) {
    if (!t) return;
    free(t->nodes);
    free(t->ids);
    free(t);
}

int32_t vt_token_trie_n_vocab(const vt_token_trie *t) { return t->n_vocab; }
int64_t vt_token_trie_n_nodes(const vt_token_trie *t) { return t->n_nodes; }
