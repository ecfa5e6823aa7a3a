/* synth_vocab.c — the built-in vocabulary of synthetic models (see synth_vocab.h). */
#include "synth_vocab.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's word-start marker */

/* Common English words (and the fixtures' story words). Each becomes
 * "▁word" and all its prefixes, most frequent first. */
static const char *const common_words[] = {
    "the", "of", "and", "to", "a", "in", "is", "was", "he", "for", "it", "with", "as", "his", "on", "be", "at",
    "by", "I", "had", "are", "but", "from", "or", "have", "an", "they", "which", "one", "you", "were", "her",
    "all", "she", "there", "would", "their", "we", "him", "been", "has", "when", "who", "will", "more", "no",
    "if", "out", "so", "said", "what", "up", "its", "about", "into", "than", "them", "can", "only", "other",
    "new", "some", "could", "time", "these", "two", "may", "then", "do", "first", "any", "my", "now", "such",
    "like", "our", "over", "man", "me", "even", "most", "made", "after", "also", "did", "many", "before", "must",
    "through", "back", "years", "where", "much", "your", "way", "well", "down", "should", "because", "each",
    "just", "those", "people", "how", "too", "little", "good", "very", "make", "world", "still", "own", "see",
    "work", "long", "get", "here", "between", "both", "life", "being", "under", "never", "day", "same",
    "another", "know", "while", "last", "might", "us", "great", "old", "year", "off", "come", "since",
    "against", "go", "came", "right", "used", "take", "three", "Once", "upon", "robot", "named", "found",
    "shiny", "red", "ball", "garden", "She", "wanted", "share", "friends", "rolled", "hill", "Hello", "The",
    "It", "He", "They", "happy", "play", "saw", "big", "friend", "mom", "help", "look", "away", "home", "tree",
};

typedef struct builder {
    int32_t n, cap;
    char **pieces;
} builder;

/* known_new: the caller guarantees s is not there yet (the placeholders,
 * which are most of a large vocabulary: skipping the scan keeps building a
 * 151936-token vocabulary linear instead of quadratic). */
static int add_piece_checked(builder *b, const char *s, size_t len, bool known_new) {
    for (int32_t i = 0; !known_new && i < b->n; i++)
        if (strlen(b->pieces[i]) == len && memcmp(b->pieces[i], s, len) == 0) return 0; /* already there */
    if (b->n == b->cap) return 0; /* full: n_vocab reached */
    char *p = malloc(len + 1);
    if (!p) return -1;
    memcpy(p, s, len);
    p[len] = '\0';
    b->pieces[b->n++] = p;
    return 0;
}

static int add_piece(builder *b, const char *s, size_t len) { return add_piece_checked(b, s, len, false); }

vt_status vt_synth_vocab_build(int32_t n_vocab, vt_synth_vocab *out, vt_error *err) {
    memset(out, 0, sizeof *out);
    if (n_vocab < VT_SYNTH_VOCAB_MIN)
        return vt_fail(err, VT_ERR_INVALID, "synth: n_vocab %d is below %d (3 special + 256 byte tokens)", n_vocab,
                       VT_SYNTH_VOCAB_MIN);
    builder b = {.n = 0, .cap = n_vocab, .pieces = calloc((size_t)n_vocab, sizeof(char *))};
    out->scores = calloc((size_t)n_vocab, sizeof *out->scores);
    out->types = calloc((size_t)n_vocab, sizeof *out->types);
    out->tokens = calloc((size_t)n_vocab, sizeof *out->tokens);
    int bad = !b.pieces || !out->scores || !out->types || !out->tokens;

    /* specials and bytes: fixed ids 0..258 */
    static const char *const specials[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; !bad && i < 3; i++) bad = add_piece(&b, specials[i], strlen(specials[i]));
    for (int i = 0; !bad && i < 256; i++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", i);
        bad = add_piece(&b, s, strlen(s));
    }
    int32_t first_normal = b.n;
    if (!bad) bad = add_piece(&b, SPM_SPACE, strlen(SPM_SPACE));
    for (int c = 0x21; !bad && c < 0x7f; c++) bad = add_piece(&b, &(char){(char)c}, 1);
    for (size_t w = 0; !bad && w < sizeof common_words / sizeof common_words[0]; w++) {
        char piece[64];
        int len = snprintf(piece, sizeof piece, SPM_SPACE "%s", common_words[w]);
        /* every prefix "▁w", "▁wo", ... so merges reach the whole word (the marker is 3 bytes) */
        for (int k = (int)strlen(SPM_SPACE) + 1; !bad && k <= len; k++) bad = add_piece(&b, piece, (size_t)k);
    }
    int32_t first_unused = b.n;
    for (int32_t i = b.n; !bad && i < n_vocab; i++) {
        char s[32];
        snprintf(s, sizeof s, "<unused_%d>", i - first_unused); /* no other piece starts with "<unused_" */
        bad = add_piece_checked(&b, s, strlen(s), true);
    }

    /* one text buffer for all strings */
    size_t total = 0;
    for (int32_t i = 0; !bad && i < b.n; i++) total += strlen(b.pieces[i]) + 1;
    if (!bad) bad = !(out->text = malloc(total ? total : 1));
    size_t at = 0;
    for (int32_t i = 0; !bad && i < b.n; i++) {
        size_t len = strlen(b.pieces[i]) + 1;
        memcpy(out->text + at, b.pieces[i], len);
        out->tokens[i] = out->text + at;
        at += len;
        if (i == 0) out->types[i] = VT_TOKEN_UNKNOWN;
        else if (i < 3) out->types[i] = VT_TOKEN_CONTROL;
        else if (i < first_normal) out->types[i] = VT_TOKEN_BYTE;
        else if (i < first_unused) out->types[i] = VT_TOKEN_NORMAL;
        else out->types[i] = VT_TOKEN_UNUSED;
        /* SentencePiece merges prefer the higher score: earlier (more frequent) pieces win */
        out->scores[i] = (i >= first_normal && i < first_unused) ? -(float)(i - first_normal) : 0.0f;
    }
    for (int32_t i = 0; b.pieces && i < b.n; i++) free(b.pieces[i]);
    free(b.pieces);
    out->n = bad ? 0 : n_vocab;
    if (bad || b.n != n_vocab) {
        vt_synth_vocab_free(out);
        return vt_fail(err, VT_ERR_NOMEM, "synth: out of memory building a %d-token vocabulary", n_vocab);
    }
    return VT_OK;
}

void vt_synth_vocab_free(vt_synth_vocab *v) {
    free(v->tokens);
    free(v->scores);
    free(v->types);
    free(v->text);
    memset(v, 0, sizeof *v);
}
