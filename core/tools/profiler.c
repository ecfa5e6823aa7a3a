/* profiler.c — libffi closures over the op-dispatch tables (see profiler.h).
 *
 * Every op has the signature vt_op_fn, but nothing here depends on that: one
 * ffi_cif describes it, each (backend table, op) gets a closure whose handler
 * forwards its argument array untouched with ffi_call. Growing the ABI by an
 * op only grows VT_OP_COUNT. */
#include "profiler.h"

#include <ffi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capabilities.h"

/* One wrapped op pointer of one backend table. */
typedef struct op_slot {
    struct vt_profiler *owner;
    const char *backend; /* the backend's name (lives as long as its library) */
    int op;
    vt_op_fn original;
    ffi_closure *closure;
    vt_profile_stat stats[VT_PROFILER_MAX_SECTIONS];
} op_slot;

/* A backend table and its wrapped copy. */
typedef struct wrapped_table {
    const vt_backend *original;
    vt_backend copy;
    op_slot *slots[VT_OP_COUNT]; /* NULL where the op pointer is NULL */
    struct wrapped_table *next;
} wrapped_table;

struct vt_profiler {
    ffi_cif cif;                   /* vt_status (*)(void *ctx, const vt_node *node) */
    ffi_type *arg_types[2];
    wrapped_table *tables;
    char sections[VT_PROFILER_MAX_SECTIONS][64];
    int n_sections;
    int current;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The closure body: time the original call. `ret` is sized by libffi for the
 * cif's return type, so it is handed on as is. */
static void on_op_call(ffi_cif *cif, void *ret, void **args, void *user) {
    op_slot *s = user;
    uint64_t t0 = now_ns();
    ffi_call(cif, FFI_FN(s->original), ret, args);
    vt_profile_stat *st = &s->stats[s->owner->current];
    st->ns += now_ns() - t0;
    st->calls++;
}

vt_status vt_profiler_create(vt_profiler **out, vt_error *err) {
    *out = NULL;
    vt_profiler *p = calloc(1, sizeof *p);
    if (!p) return vt_fail(err, VT_ERR_NOMEM, "profiler: out of memory");
    p->arg_types[0] = &ffi_type_pointer; /* void *ctx */
    p->arg_types[1] = &ffi_type_pointer; /* const vt_node *node */
    /* vt_status is an enum: an int at the ABI level */
    if (ffi_prep_cif(&p->cif, FFI_DEFAULT_ABI, 2, &ffi_type_sint, p->arg_types) != FFI_OK) {
        free(p);
        return vt_fail(err, VT_ERR_INTERNAL, "profiler: ffi_prep_cif failed for the op signature");
    }
    snprintf(p->sections[0], sizeof p->sections[0], "all");
    p->n_sections = 1;
    *out = p;
    return VT_OK;
}

void vt_profiler_free(vt_profiler *p) {
    if (!p) return;
    for (wrapped_table *t = p->tables, *next; t; t = next) {
        next = t->next;
        for (int op = 0; op < VT_OP_COUNT; op++) {
            if (!t->slots[op]) continue;
            ffi_closure_free(t->slots[op]->closure);
            free(t->slots[op]);
        }
        free(t);
    }
    free(p);
}

/* A copy of `original` whose op pointers are closures; NULL on failure. */
static wrapped_table *wrap_table(vt_profiler *p, const vt_backend *original) {
    wrapped_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->original = original;
    t->copy = *original; /* the registry's full-size copy: every field readable */
    for (int op = 0; op < VT_OP_COUNT; op++) {
        vt_op_fn fn = vt_backend_op(original, op);
        if (!fn) continue;
        op_slot *s = calloc(1, sizeof *s);
        void *code = NULL;
        if (s) s->closure = ffi_closure_alloc(sizeof(ffi_closure), &code);
        if (!s || !s->closure ||
            ffi_prep_closure_loc(s->closure, &p->cif, on_op_call, s, code) != FFI_OK) {
            if (s && s->closure) ffi_closure_free(s->closure);
            free(s);
            for (int k = 0; k < op; k++) {
                if (!t->slots[k]) continue;
                ffi_closure_free(t->slots[k]->closure);
                free(t->slots[k]);
            }
            free(t);
            return NULL;
        }
        s->owner = p;
        s->backend = original->name;
        s->op = op;
        s->original = fn;
        t->slots[op] = s;
        /* ISO C has no cast from void * to a function pointer; copy the bits. */
        memcpy(vt_backend_op_field(&t->copy, op), &code, sizeof code);
    }
    return t;
}

static const vt_backend *wrap_entry(void *user, const vt_backend_entry *entry) {
    vt_profiler *p = user;
    for (wrapped_table *t = p->tables; t; t = t->next)
        if (t->original == entry->table || &t->copy == entry->table) return &t->copy;
    wrapped_table *t = wrap_table(p, entry->table);
    if (!t) return NULL;
    t->next = p->tables;
    p->tables = t;
    return &t->copy;
}

vt_status vt_profiler_attach(vt_profiler *p, vt_registry *r, vt_error *err) {
    vt_status st = vt_registry_wrap_tables(r, wrap_entry, p, err);
    if (st != VT_OK) vt_error_prefix(err, "profiler: ");
    return st;
}

static int find_section(const vt_profiler *p, const char *name) {
    for (int i = 0; i < p->n_sections; i++)
        if (strcmp(p->sections[i], name) == 0) return i;
    return -1;
}

vt_status vt_profiler_section(vt_profiler *p, const char *section, vt_error *err) {
    int i = find_section(p, section);
    if (i < 0) {
        if (p->n_sections == VT_PROFILER_MAX_SECTIONS)
            return vt_fail(err, VT_ERR_INVALID, "profiler: more than %d sections", VT_PROFILER_MAX_SECTIONS);
        i = p->n_sections++;
        snprintf(p->sections[i], sizeof p->sections[i], "%s", section);
    }
    p->current = i;
    return VT_OK;
}

vt_profile_stat vt_profiler_get(const vt_profiler *p, const char *section, const char *backend, int op) {
    vt_profile_stat sum = {0, 0};
    int sec = find_section(p, section);
    if (sec < 0 || op < 0 || op >= VT_OP_COUNT) return sum;
    for (const wrapped_table *t = p->tables; t; t = t->next) {
        const op_slot *s = t->slots[op];
        if (!s || strcmp(s->backend, backend) != 0) continue;
        sum.calls += s->stats[sec].calls;
        sum.ns += s->stats[sec].ns;
    }
    return sum;
}

/* One printed line. */
typedef struct profile_row {
    const char *backend;
    int op;
    vt_profile_stat stat;
} profile_row;

static int by_time_desc(const void *a, const void *b) {
    uint64_t x = ((const profile_row *)a)->stat.ns, y = ((const profile_row *)b)->stat.ns;
    return (x < y) - (x > y);
}

void vt_profiler_print(const vt_profiler *p, FILE *f) {
    int n_slots = 0;
    for (const wrapped_table *t = p->tables; t; t = t->next)
        for (int op = 0; op < VT_OP_COUNT; op++) n_slots += t->slots[op] != NULL;
    profile_row *rows = calloc((size_t)(n_slots ? n_slots : 1), sizeof *rows);
    if (!rows) return;
    for (int sec = 0; sec < p->n_sections; sec++) {
        int n = 0;
        uint64_t total = 0, calls = 0;
        for (const wrapped_table *t = p->tables; t; t = t->next)
            for (int op = 0; op < VT_OP_COUNT; op++) {
                const op_slot *s = t->slots[op];
                if (!s || !s->stats[sec].calls) continue;
                rows[n++] = (profile_row){s->backend, op, s->stats[sec]};
                total += s->stats[sec].ns;
                calls += s->stats[sec].calls;
            }
        if (n == 0) continue;
        qsort(rows, (size_t)n, sizeof *rows, by_time_desc);
        fprintf(f, "profile [%s]: %llu op calls, %.3f ms in ops\n", p->sections[sec], (unsigned long long)calls,
                (double)total * 1e-6);
        fprintf(f, "  %-12s %-18s %10s %12s %10s %7s\n", "backend", "op", "calls", "time ms", "us/call", "share");
        for (int i = 0; i < n; i++) {
            const vt_profile_stat *st = &rows[i].stat;
            fprintf(f, "  %-12s %-18s %10llu %12.3f %10.2f %6.1f%%\n", rows[i].backend, vt_op_name(rows[i].op),
                    (unsigned long long)st->calls, (double)st->ns * 1e-6, (double)st->ns * 1e-3 / (double)st->calls,
                    total ? 100.0 * (double)st->ns / (double)total : 0.0);
        }
    }
    free(rows);
}
