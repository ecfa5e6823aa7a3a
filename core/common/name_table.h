/* name_table.h — a table from names (byte strings, copied in) to numbers.
 *
 * Header-only (static inline), so the core (the grammar parser) and the
 * server (the JSON schema converter), which link no code of each other, both
 * use it.
 *
 * Open addressing, at most half full, so a lookup costs one hash and about
 * one comparison on average: for the parsers that meet thousands of names in
 * one input (a grammar's rules, a JSON schema's properties and references).
 * The names come from clients, so the hash is seeded per table from the
 * kernel's random bytes and mixed after FNV-1a: which names share slots
 * cannot be worked out ahead to make every lookup a long probe. */
#ifndef VT_COMMON_NAME_TABLE_H
#define VT_COMMON_NAME_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

typedef struct vt_name_slot {
    char *key; /* NULL: empty; else a NUL-terminated copy of len bytes */
    size_t len;
    long value;
} vt_name_slot;

typedef struct vt_name_table {
    vt_name_slot *slots;
    size_t cap, used; /* cap: 0 or a power of two */
    uint64_t seed;    /* drawn when the first slots are made */
} vt_name_table;

static inline uint64_t vt_name_hash(uint64_t seed, const char *key, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)key[i]) * 0x100000001b3ull;
    /* splitmix64's finish: every bit of h reaches the low bits a slot takes */
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static inline uint64_t vt_name_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) /* no entropy yet: still differs per run */
        s = (uint64_t)(uintptr_t)&s ^ ((uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull) ^ (uint64_t)getpid();
    return s;
}

/* key's slot, or the empty one where it would go; NULL for an empty table */
static inline vt_name_slot *vt_name_find(const vt_name_table *t, const char *key, size_t len) {
    if (!t->cap) return NULL;
    for (size_t i = vt_name_hash(t->seed, key, len) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        vt_name_slot *s = &t->slots[i];
        if (!s->key || (s->len == len && memcmp(s->key, key, len) == 0)) return s;
    }
}

/* Whether key[0..len) is in t; *value gets its number when it is. */
static inline bool vt_name_get(const vt_name_table *t, const char *key, size_t len, long *value) {
    const vt_name_slot *s = vt_name_find(t, key, len);
    if (!s || !s->key) return false;
    if (value) *value = s->value;
    return true;
}

/* Set key[0..len) (copied) to value; false when out of memory. */
static inline bool vt_name_set(vt_name_table *t, const char *key, size_t len, long value) {
    vt_name_slot *s = vt_name_find(t, key, len);
    if (s && s->key) {
        s->value = value;
        return true;
    }
    if (2 * (t->used + 1) > t->cap) {
        const size_t cap = t->cap ? 2 * t->cap : 64;
        vt_name_table bigger = {calloc(cap, sizeof(vt_name_slot)), cap, t->used, t->cap ? t->seed : vt_name_seed()};
        if (!bigger.slots) return false;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].key) *vt_name_find(&bigger, t->slots[i].key, t->slots[i].len) = t->slots[i];
        free(t->slots);
        *t = bigger;
        s = vt_name_find(t, key, len);
    }
    char *copy = malloc(len + 1);
    if (!copy) return false;
    memcpy(copy, key, len);
    copy[len] = '\0';
    *s = (vt_name_slot){copy, len, value};
    t->used++;
    return true;
}

static inline void vt_name_table_free(vt_name_table *t) {
    for (size_t i = 0; i < t->cap; i++) free(t->slots[i].key);
    free(t->slots);
    *t = (vt_name_table){0};
}

#endif
