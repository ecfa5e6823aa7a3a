/* weight_prep.c — offering weights to backends' prepare hooks (ABI 1.2) and
 * keeping what they return for the engine's life. See weight_prep.h and the
 * "Prepared weights" rules in vt_backend.h. */
#include "weight_prep.h"

#include "clock.h"
#include "host.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_exec.h"
#include "quant.h"

/* One tensor offered to one backend, and what it made of it. */
typedef struct prepared_copy {
    int32_t backend;      /* registry index */
    const void *original; /* the file's bytes: the key, with backend */
    char name[48];
    vt_tensor tensor;
    uint32_t ops, phases;
    bool shared; /* nodes of other backends read the tensor too (a VT_PREPARE_SHARED offer) */
    void *data;  /* the copy, NULL = declined */
    size_t bytes;
} prepared_copy;

/* One weight tensor of the plans and who reads it: the census the layout
 * choice is made from. */
typedef struct weight_readers {
    const void *original; /* the file's bytes */
    size_t bytes;
    int32_t backend;      /* registry index of the first node reading it */
    bool several;         /* nodes of another backend read it too */
    bool read_plain;      /* some node reads it other than as a weight operand (through a
                           * view, say): no copy can serve that node */
} weight_readers;

struct vt_weight_prep {
    const vt_registry *registry;
    prepared_copy *copies;
    int32_t n, cap;
    size_t released_bytes; /* of the file's mapping: tensors only prepared copies read */
    int released_tensors;
    weight_readers *tensors; /* every weight tensor any node reads */
    int32_t n_tensors, cap_tensors;
    size_t shared_bytes; /* tensors nodes of several backends read: kept in the file's layout */
    int shared_tensors;
    bool *shared_by; /* per registry index: its nodes read a shared tensor */
};

/* items (n used of *cap, each size bytes) with room for one more: itself,
 * or moved to twice its room (first when empty); NULL when out of memory
 * (items and *cap unchanged). */
static void *grow_for_one(void *items, int32_t n, int32_t *cap, size_t size, int32_t first) {
    if (n < *cap) return items;
    const int32_t want = *cap ? *cap * 2 : first;
    void *grown = realloc(items, (size_t)want * size);
    if (grown) *cap = want;
    return grown;
}

static bool has_hook(const vt_registry *r, int32_t backend) {
    const vt_backend_entry *e = vt_registry_at(r, backend);
    return e && e->state == VT_BACKEND_LOADED && e->table && e->table->prepare_weight;
}

/* Whether the backend asked to be offered weights other backends read too
 * (ABI 1.7; an older table's prepare_flags reads as 0). */
static bool prepares_shared(const vt_registry *r, int32_t backend) {
    const vt_backend_entry *e = vt_registry_at(r, backend);
    return has_hook(r, backend) && (e->table->prepare_flags & VT_PREPARE_SHARED);
}

static prepared_copy *find_copy(vt_weight_prep *w, int32_t backend, const void *original) {
    for (int32_t i = 0; i < w->n; i++)
        if (w->copies[i].backend == backend && w->copies[i].original == original) return &w->copies[i];
    return NULL;
}

/* The weight value a node's operand s reads directly, or -1 (an activation,
 * or a weight reached through a reshaping view, which is never offered). */
static int32_t weight_operand(const vt_plan *p, const vt_plan_node *n, int s) {
    if (!vt_is_weight_operand(n->op, s) || s >= n->n_src || n->src[s] < 0) return -1;
    return p->values[n->src[s]].kind == VT_VAL_WEIGHT ? n->src[s] : -1;
}

/* The value whose memory v is: v itself, or the value a chain of views shows. */
static int32_t root_value(const vt_plan *p, int32_t v) {
    for (int hops = 0; v >= 0 && p->values[v].kind == VT_VAL_VIEW && hops < p->n_values; hops++) v = p->values[v].base;
    return v;
}

static weight_readers *find_readers(const vt_weight_prep *w, const void *original) {
    for (int32_t i = 0; i < w->n_tensors; i++)
        if (w->tensors[i].original == original) return &w->tensors[i];
    return NULL;
}

/* Calls visit for every source s of every node n of plans that reads a
 * weight (v: the weight value, views resolved) until it returns nonzero,
 * which the walk then returns; 0 after the last. */
typedef int (*weight_source_fn)(void *arg, const vt_plan *p, const vt_plan_node *n, int s, int32_t v);
static int each_weight_source(vt_plan *const *plans, int n_plans, weight_source_fn visit, void *arg) {
    for (int k = 0; k < n_plans; k++) {
        const vt_plan *p = plans[k];
        for (int32_t i = 0; i < p->n_nodes; i++) {
            const vt_plan_node *n = &p->nodes[i];
            for (int s = 0; s < n->n_src; s++) {
                const int32_t v = root_value(p, n->src[s]);
                if (v < 0 || p->values[v].kind != VT_VAL_WEIGHT) continue;
                const int stop = visit(arg, p, n, s, v);
                if (stop) return stop;
            }
        }
    }
    return 0;
}

/* One reader of the census: its tensor's entry, added at the first. */
static int count_reader(void *arg, const vt_plan *p, const vt_plan_node *n, int s, int32_t v) {
    vt_weight_prep *w = arg;
    weight_readers *t = find_readers(w, p->values[v].data);
    if (!t) {
        weight_readers *room = grow_for_one(w->tensors, w->n_tensors, &w->cap_tensors, sizeof *room, 64);
        if (!room) return 1;
        w->tensors = room;
        t = &w->tensors[w->n_tensors++];
        const vt_tensor whole = vt_plan_value_tensor(p, v, -1, -1, false);
        *t = (weight_readers){p->values[v].data,
                              vt_row_size(whole.dtype, whole.ne[0]) * (size_t)(whole.ne[1] * whole.ne[2] * whole.ne[3]),
                              n->backend, false, false};
    }
    t->several = t->several || n->backend != t->backend;
    t->read_plain = t->read_plain || n->src[s] != v || !vt_is_weight_operand(n->op, s);
    return 0;
}

/* A reader of a shared tensor: its backend is one that shares. */
static int mark_sharer(void *arg, const vt_plan *p, const vt_plan_node *n, int s, int32_t v) {
    (void)s;
    vt_weight_prep *w = arg;
    const weight_readers *t = find_readers(w, p->values[v].data);
    if (t && t->several && n->backend >= 0 && n->backend < vt_registry_count(w->registry))
        w->shared_by[n->backend] = true;
    return 0;
}

/* The census: every weight tensor a node of plans reads (directly or
 * through a view), with the backends whose nodes read it. */
static vt_status count_readers(vt_weight_prep *w, vt_plan *const *plans, int n_plans, vt_error *err) {
    if (each_weight_source(plans, n_plans, count_reader, w))
        return vt_fail(err, VT_ERR_NOMEM, "out of memory listing the model's weights");
    for (int32_t i = 0; i < w->n_tensors; i++) {
        if (!w->tensors[i].several) continue;
        w->shared_tensors++;
        w->shared_bytes += w->tensors[i].bytes;
    }
    /* Which backends share them, for --explain: a second pass, as the
     * first reader's backend alone does not name them all. */
    w->shared_by = calloc((size_t)vt_registry_count(w->registry) + 1, sizeof *w->shared_by);
    if (!w->shared_by) return vt_fail(err, VT_ERR_NOMEM, "out of memory listing the model's weights");
    if (w->shared_tensors) each_weight_source(plans, n_plans, mark_sharer, w);
    return VT_OK;
}

/* The layout rule: is the tensor at original offered to backend for
 * preparation? If its readers are nodes of one backend, reading it
 * directly. A prepared copy serves only the backend that made it (backends
 * never see each other's layouts), so a tensor nodes of two backends read
 * would need the file's pages for the other one: the copy would stay
 * resident beside them, two layouts of one weight (twice the weights' bytes
 * resident: 32 GB for a 27B Q4_K_M). Such a tensor stays in the file's
 * layout, which every backend reads, and the backend that would have
 * prepared it runs on that: one resident copy whatever the placement;
 * unless that backend asked for such offers (VT_PREPARE_SHARED, a copy its
 * configuration asked for and bounds). Never a tensor some node reads other
 * than as a weight operand (through a view), which no copy can serve. */
static bool offered(const vt_weight_prep *w, const void *original, int32_t backend) {
    const weight_readers *t = find_readers(w, original);
    return t && !t->read_plain && (!t->several || prepares_shared(w->registry, backend));
}

/* The offers: one per (backend with the hook, tensor the layout rule
 * offers), with the union of the ops and phases that read it there. */
static vt_status collect(vt_weight_prep *w, vt_plan *const *plans, int n_plans, vt_error *err) {
    vt_status st = count_readers(w, plans, n_plans, err);
    if (st != VT_OK) return st;
    for (int k = 0; k < n_plans; k++) {
        const vt_plan *p = plans[k];
        for (int32_t i = 0; i < p->n_nodes; i++) {
            const vt_plan_node *n = &p->nodes[i];
            if (!has_hook(w->registry, n->backend)) continue;
            for (int s = 0; s < n->n_src; s++) {
                const int32_t v = weight_operand(p, n, s);
                if (v < 0 || !offered(w, p->values[v].data, n->backend)) continue;
                prepared_copy *c = find_copy(w, n->backend, p->values[v].data);
                if (!c) {
                    prepared_copy *room = grow_for_one(w->copies, w->n, &w->cap, sizeof *room, 64);
                    if (!room) return vt_fail(err, VT_ERR_NOMEM, "out of memory listing weights to prepare");
                    w->copies = room;
                    c = &w->copies[w->n++];
                    memset(c, 0, sizeof *c);
                    c->backend = n->backend;
                    c->original = p->values[v].data;
                    snprintf(c->name, sizeof c->name, "%s", p->values[v].name);
                    c->tensor = vt_plan_value_tensor(p, v, -1, -1, true);
                    c->shared = find_readers(w, c->original)->several;
                }
                c->ops |= 1u << n->op;
                c->phases |= 1u << p->phase;
            }
        }
    }
    return VT_OK;
}

/* One offer to e's hook; a failure becomes the engine's error naming the
 * backend, the tensor and the backend's reason. */
static vt_status offer_weight(const vt_backend_entry *e, const char *name, vt_tensor tensor, uint32_t ops,
                              uint32_t phases, bool shared, vt_prepared_weight *got, vt_error *err) {
    const vt_weight_offer offer = {sizeof offer, name, tensor, ops, phases, shared ? 1u : 0u};
    char why[256];
    const vt_status st = vt_backend_prepare_weight(e, &offer, got, why, sizeof why);
    if (st == VT_OK) return VT_OK;
    char shape[64];
    snprintf(shape, sizeof shape, "%s[%lld,%lld]", vt_dtype_name(tensor.dtype), (long long)tensor.ne[0],
             (long long)tensor.ne[1]);
    return vt_fail(err, VT_ERR_BACKEND, "backend '%s' failed to prepare weight %s %s: %s", e->name, name, shape, why);
}

/* Does any node of plans read the tensor at original other than through a
 * prepared copy: on a backend that made none (declined, or has no hook),
 * or through a view (never offered)? Judged once every offer of the tensor
 * was answered. */
typedef struct unprepared_query {
    vt_weight_prep *w;
    const void *original;
} unprepared_query;

static int reads_unprepared(void *arg, const vt_plan *p, const vt_plan_node *n, int s, int32_t v) {
    const unprepared_query *q = arg;
    if (p->values[v].data != q->original) return 0;
    const prepared_copy *c = weight_operand(p, n, s) >= 0 ? find_copy(q->w, n->backend, q->original) : NULL;
    return !c || !c->data || c->data == q->original;
}

static bool read_unprepared(vt_weight_prep *w, vt_plan *const *plans, int n_plans, const void *original) {
    unprepared_query q = {w, original};
    return each_weight_source(plans, n_plans, reads_unprepared, &q) != 0;
}

/* The memory rule, right after the last offer of copy i's tensor (so the
 * file's pages of one tensor at a time are resident beside the copies, not
 * the whole file): release them if only prepared copies read it. */
static void release_original_if_unread(vt_weight_prep *w, vt_plan *const *plans, int n_plans, const vt_gguf *g,
                                       int32_t i) {
    const prepared_copy *c = &w->copies[i];
    for (int32_t j = i + 1; j < w->n; j++)
        if (w->copies[j].original == c->original) return; /* another backend's offer is still to come */
    if (!g || read_unprepared(w, plans, n_plans, c->original)) return;
    const vt_tensor *t = &c->tensor;
    const size_t bytes = vt_row_size(t->dtype, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    const size_t released = vt_gguf_release_pages(g, c->original, bytes);
    if (released == 0) return;
    w->released_bytes += released;
    w->released_tensors++;
}

static void release_all(vt_weight_prep *w) {
    /* Reverse order of preparation, like any teardown of things set up in sequence. */
    for (int32_t i = w->n - 1; i >= 0; i--) {
        prepared_copy *c = &w->copies[i];
        if (c->data) vt_backend_release_weight(vt_registry_at(w->registry, c->backend), c->data);
        c->data = NULL;
        c->bytes = 0;
    }
}

/* A weight's bytes: its outermost stride times its outermost extent. */
static size_t tensor_bytes(const vt_tensor *t) { return t->nb[t->ndim - 1] * (size_t)t->ne[t->ndim - 1]; }


/* A progress line for a preparation that takes long (a large model's
 * weights read from disk and repacked take tens of seconds): on a terminal
 * only, from its second second, at most ten times a second, erased when
 * done, as calibration's line. */
typedef struct prep_progress {
    bool on, shown;
    double t0, t_drawn;
    size_t done, total; /* bytes of the tensors offered, of all */
} prep_progress;

static void prep_progress_step(prep_progress *p, const char *backend, size_t bytes) {
    p->done += bytes;
    if (!p->on) return;
    const double now = vt_now_seconds();
    if (now - p->t0 < 1.0 || now - p->t_drawn < 0.1) return;
    p->t_drawn = now;
    p->shown = true;
    fprintf(stderr, "\r\033[Kpreparing weights (%s): %.0f of %.0f MiB", backend, (double)p->done / 1048576.0,
            (double)p->total / 1048576.0);
    fflush(stderr);
}

static void prep_progress_end(prep_progress *p) {
    if (!p->shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

vt_status vt_weight_prep_run(const vt_registry *r, vt_plan *const *plans, int n_plans, const vt_gguf *g,
                             vt_weight_prep **out, vt_error *err) {
    *out = NULL;
    vt_weight_prep *w = calloc(1, sizeof *w);
    if (!w) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    w->registry = r;
    vt_status st = collect(w, plans, n_plans, err);
    prep_progress bar = {.on = vt_progress_lines_on(), .t0 = vt_now_seconds()};
    for (int32_t i = 0; i < w->n; i++) bar.total += tensor_bytes(&w->copies[i].tensor);
    for (int32_t i = 0; i < w->n && st == VT_OK; i++) {
        prepared_copy *c = &w->copies[i];
        prep_progress_step(&bar, vt_registry_at(r, c->backend)->name, 0);
        vt_prepared_weight got;
        st = offer_weight(vt_registry_at(r, c->backend), c->name, c->tensor, c->ops, c->phases, c->shared, &got, err);
        if (st != VT_OK) break;
        c->data = got.data;
        c->bytes = got.bytes;
        release_original_if_unread(w, plans, n_plans, g, i);
        prep_progress_step(&bar, vt_registry_at(r, c->backend)->name, tensor_bytes(&c->tensor));
    }
    prep_progress_end(&bar);
    if (st != VT_OK) {
        vt_weight_prep_free(w); /* the engine does not start half-prepared */
        return st;
    }
    /* Every node of the backend reading a prepared tensor reads the copy. */
    for (int k = 0; k < n_plans; k++) {
        vt_plan *p = plans[k];
        for (int32_t i = 0; i < p->n_nodes; i++) {
            vt_plan_node *n = &p->nodes[i];
            for (int s = 0; s < n->n_src; s++) {
                const int32_t v = weight_operand(p, n, s);
                const prepared_copy *c = v >= 0 ? find_copy(w, n->backend, p->values[v].data) : NULL;
                n->prepared[s] = c ? c->data : NULL;
            }
        }
    }
    *out = w;
    return VT_OK;
}

/* A copy made for calibration: backend's answer to the offer of the tensor
 * at original (data NULL: declined). */
typedef struct timing_copy {
    int32_t backend;
    const void *original;
    void *data;
} timing_copy;

struct vt_timing_copies {
    timing_copy *copies;
    int32_t n, cap;
};

vt_status vt_timing_copies_create(vt_timing_copies **out, vt_error *err) {
    *out = calloc(1, sizeof **out);
    return *out ? VT_OK : vt_fail(err, VT_ERR_NOMEM, "out of memory for calibration's weight copies");
}

void vt_timing_copies_free(vt_timing_copies *kept, const vt_registry *r) {
    if (!kept) return;
    for (int32_t k = kept->n - 1; k >= 0; k--)
        if (kept->copies[k].data) vt_backend_release_weight(vt_registry_at(r, kept->copies[k].backend), kept->copies[k].data);
    free(kept->copies);
    free(kept);
}

static const timing_copy *find_timing_copy(const vt_timing_copies *kept, int32_t backend, const void *original) {
    for (int32_t k = 0; k < kept->n; k++)
        if (kept->copies[k].backend == backend && kept->copies[k].original == original) return &kept->copies[k];
    return NULL;
}

/* The offer vt_weight_prep_run makes backend for weight value v of p when
 * backend runs every reader of it that it accepts: its answer in *got. */
static vt_status offer_for_timing(vt_plan *const *plans, int n_plans, const vt_plan *p, const vt_plan_node *n,
                                  int32_t v, const vt_backend_entry *e, vt_prepared_weight *got, vt_error *err) {
    /* The offer the engine makes when backend runs every reader of the
     * tensor (the readers of both phases, as when it wins them): the same
     * ops and phases, so the same layout. If it cannot run them all, some
     * other backend will read the tensor whatever auto decides, so the
     * layout rule keeps it in the file's layout and the node is timed on
     * that (*got left empty, as a decline). */
    uint32_t ops = 1u << n->op, phases = 1u << p->phase;
    bool others = false; /* some reader stays another backend's (offered only under VT_PREPARE_SHARED) */
    const bool shares = e->table && (e->table->prepare_flags & VT_PREPARE_SHARED);
    memset(got, 0, sizeof *got);
    for (int k = 0; k < n_plans; k++)
        for (int32_t j = 0; j < plans[k]->n_nodes; j++) {
            const vt_plan_node *m = &plans[k]->nodes[j];
            for (int t = 0; t < m->n_src; t++) {
                const int32_t u = root_value(plans[k], m->src[t]);
                if (u < 0 || plans[k]->values[u].kind != VT_VAL_WEIGHT || plans[k]->values[u].data != p->values[v].data)
                    continue;
                if (u != m->src[t] || !vt_is_weight_operand(m->op, t)) return VT_OK; /* no copy could serve it */
                if (!vt_plan_node_keyed_accepted(plans[k], j, -1, -1, e)) {
                    if (!shares) return VT_OK;
                    others = true;
                    continue;
                }
                ops |= 1u << m->op;
                phases |= 1u << plans[k]->phase;
            }
        }
    return offer_weight(e, p->values[v].name, vt_plan_value_tensor(p, v, -1, -1, true), ops, phases, others, got,
                        err);
}

vt_status vt_weight_prep_for_timing(vt_timing_copies *kept, vt_plan *const *plans, int n_plans, const vt_plan *p,
                                    int32_t i, int32_t backend, vt_node *node, vt_error *err) {
    if (!has_hook(p->registry, backend)) return VT_OK;
    const vt_backend_entry *e = vt_registry_at(p->registry, backend);
    const vt_plan_node *n = &p->nodes[i];
    for (int s = 0; s < n->n_src; s++) {
        const int32_t v = weight_operand(p, n, s);
        if (v < 0) continue;
        const timing_copy *c = find_timing_copy(kept, backend, p->values[v].data);
        if (!c) {
            timing_copy *room = grow_for_one(kept->copies, kept->n, &kept->cap, sizeof *room, 32);
            if (!room) return vt_fail(err, VT_ERR_NOMEM, "out of memory for calibration's weight copies");
            kept->copies = room;
            vt_prepared_weight got = {0};
            vt_status st = offer_for_timing(plans, n_plans, p, n, v, e, &got, err);
            if (st != VT_OK) return st;
            kept->copies[kept->n] = (timing_copy){backend, p->values[v].data, got.data};
            c = &kept->copies[kept->n++];
        }
        if (c->data) {
            node->src[s].data = c->data;
            node->prepared |= 1u << s;
        }
    }
    return VT_OK;
}

void vt_weight_prep_free(vt_weight_prep *w) {
    if (!w) return;
    release_all(w);
    free(w->copies);
    free(w->tensors);
    free(w->shared_by);
    free(w);
}

size_t vt_weight_prep_released(const vt_weight_prep *w, int *n_tensors) {
    if (n_tensors) *n_tensors = w ? w->released_tensors : 0;
    return w ? w->released_bytes : 0;
}

size_t vt_weight_prep_shared(const vt_weight_prep *w, int *n_tensors) {
    if (n_tensors) *n_tensors = w ? w->shared_tensors : 0;
    return w ? w->shared_bytes : 0;
}

size_t vt_weight_prep_bytes(const vt_weight_prep *w, int32_t backend, int *n_tensors) {
    size_t bytes = 0;
    int n = 0;
    for (int32_t i = 0; w && i < w->n; i++) {
        if (w->copies[i].backend != backend || !w->copies[i].data) continue;
        bytes += w->copies[i].bytes;
        n++;
    }
    if (n_tensors) *n_tensors = n;
    return bytes;
}

size_t vt_weight_prep_total(const vt_weight_prep *w) {
    size_t bytes = 0;
    for (int32_t i = 0; w && i < w->n; i++) bytes += w->copies[i].data ? w->copies[i].bytes : 0;
    return bytes;
}

void vt_weight_prep_describe(const vt_weight_prep *w, char *buf, size_t size) {
    int len = 0, shown = 0;
    buf[0] = '\0';
    for (int32_t b = 0; w && b < vt_registry_count(w->registry) && len >= 0 && (size_t)len < size; b++) {
        if (!has_hook(w->registry, b)) continue;
        bool offered = false;
        for (int32_t i = 0; i < w->n && !offered; i++) offered = w->copies[i].backend == b;
        if (!offered) continue; /* loaded, but runs none of this engine's weights */
        int n;
        const size_t bytes = vt_weight_prep_bytes(w, b, &n);
        len += snprintf(buf + len, size - (size_t)len, "%s%s %.1f MiB (%d tensors)", shown++ ? ", " : "",
                        vt_registry_at(w->registry, b)->name, (double)bytes / (1024.0 * 1024.0), n);
    }
    if (!shown) snprintf(buf, size, "none");
}

void vt_weight_prep_print(const vt_weight_prep *w, FILE *f) {
    char line[1024];
    vt_weight_prep_describe(w, line, sizeof line);
    fprintf(f, "prepared weights: %s\n", line);
    int n;
    const size_t released = vt_weight_prep_released(w, &n);
    if (released)
        fprintf(f, "originals released: %.1f MiB of the file's mapping (%d tensors)\n",
                (double)released / (1024.0 * 1024.0), n);
    size_t beside = 0;
    int n_beside = 0;
    for (int32_t i = 0; i < w->n; i++)
        if (w->copies[i].shared && w->copies[i].data) beside += w->copies[i].bytes, n_beside++;
    if (n_beside)
        fprintf(f,
                "prepared beside the file: %.1f MiB (%d tensors) of the copies above are of weights other backends "
                "read in the file's layout, whose pages stay resident too (asked for by the backend's options)\n",
                (double)beside / (1024.0 * 1024.0), n_beside);
    const size_t shared = vt_weight_prep_shared(w, &n);
    if (!shared) return;
    char names[256];
    int len = 0, shown = 0;
    names[0] = '\0';
    for (int32_t b = 0; b < vt_registry_count(w->registry) && len >= 0 && (size_t)len < sizeof names; b++)
        if (w->shared_by[b])
            len += snprintf(names + len, sizeof names - (size_t)len, "%s%s", shown++ ? ", " : "",
                            vt_registry_at(w->registry, b)->name);
    fprintf(f,
            "shared weights: %.1f MiB (%d tensors) read by nodes of %s: kept in the file's layout, not prepared "
            "(a backend's copy serves only that backend, so the file's pages would stay resident beside it for the "
            "others: one resident layout per weight)%s\n",
            (double)shared / (1024.0 * 1024.0), n, names, n_beside ? ", except the copies above" : "");
}
