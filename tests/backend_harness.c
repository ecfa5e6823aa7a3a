/* backend_harness.c — nodes with owned buffers, run on any backend by name,
 * and elementwise comparison of their outputs (see backend_harness.h). */
#include "backend_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "op_cases.h"
#include "quant.h"
#include "threadpool.h"

struct vt_harness {
    vt_threadpool *pool;
    const vt_host *host;
    vt_registry *registry;
};

/* Builders abort on misuse: a test with a broken fixture must not go on. */
static void die(const char *fmt, const char *detail) {
    fprintf(stderr, "backend_harness: ");
    fprintf(stderr, fmt, detail);
    fprintf(stderr, "\n");
    abort();
}

static void *xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) die("%s", "out of memory");
    return p;
}

/* ------------------------------------------------------------------------ */
/* Backends                                                                   */

vt_harness *vt_harness_open(int n_threads) { return vt_harness_open_with(n_threads, NULL); }

vt_harness *vt_harness_open_with(int n_threads, const char *backend_options) {
    vt_error err = {0};
    vt_harness *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    if (vt_threadpool_create(n_threads, &h->pool, &err) != VT_OK) {
        fprintf(stderr, "backend_harness: %s\n", err.msg);
        free(h);
        return NULL;
    }
    h->host = vt_host_get(h->pool);
    if (vt_registry_create(h->host, NULL, backend_options, &h->registry, &err) != VT_OK) {
        fprintf(stderr, "backend_harness: %s\n", err.msg);
        vt_host_get(NULL);
        vt_threadpool_destroy(h->pool);
        free(h);
        return NULL;
    }
    /* A refused backend explains a later "absent" better than silence. */
    for (int i = 0; i < vt_registry_count(h->registry); i++) {
        const vt_backend_entry *e = vt_registry_at(h->registry, i);
        if (e->state == VT_BACKEND_REFUSED)
            fprintf(stderr, "backend_harness: backend %s (%s) refused: %s\n", e->name, e->path, e->reason);
    }
    return h;
}

void vt_harness_close(vt_harness *h) {
    if (!h) return;
    vt_registry_destroy(h->registry);
    vt_host_get(NULL); /* the host table must not keep pointing at the pool */
    vt_threadpool_destroy(h->pool);
    free(h);
}

const vt_host *vt_harness_host(const vt_harness *h) { return h->host; }

void vt_harness_activate(const vt_harness *h) { vt_host_use(h->pool); }

const vt_backend_entry *vt_harness_backend(const vt_harness *h, const char *name) {
    return vt_registry_find(h->registry, name);
}

const char *vt_harness_refusal(const vt_harness *h, const char *name) {
    for (int i = 0; i < vt_registry_count(h->registry); i++) {
        const vt_backend_entry *e = vt_registry_at(h->registry, i);
        if (strcmp(e->name, name) == 0 && e->state == VT_BACKEND_REFUSED) return e->reason;
    }
    return NULL;
}

bool vt_harness_accepts(const vt_harness *h, const char *name, const vt_node *node) {
    const vt_backend_entry *b = vt_harness_backend(h, name);
    if (!b) return false;
    /* supports() sees what the builder would show it: shapes, no data. */
    vt_node query = *node;
    for (int i = 0; i < VT_MAX_SRC; i++) query.src[i].data = NULL;
    query.dst.data = NULL;
    return vt_backend_accepts(b, &query);
}

vt_status vt_harness_run(const vt_harness *h, const char *name, const vt_node *node) {
    const vt_backend_entry *b = vt_harness_backend(h, name);
    if (!b) {
        fprintf(stderr, "backend_harness: backend %s is not loaded\n", name);
        return VT_ERR_UNSUPPORTED;
    }
    if (!vt_harness_accepts(h, name, node)) {
        fprintf(stderr, "backend_harness: backend %s declines the %s node\n", name, vt_op_name(node->op));
        return VT_ERR_UNSUPPORTED;
    }
    vt_harness_activate(h); /* ops run on this harness's threads, whichever harness was opened last */
    return vt_backend_run(b, node);
}

/* ------------------------------------------------------------------------ */
/* Nodes                                                                      */

vt_node vt_harness_node(int32_t op, int32_t phase) {
    vt_node n;
    memset(&n, 0, sizeof n);
    n.struct_size = sizeof n;
    n.op = op;
    n.phase = phase;
    return n;
}

void vt_harness_set_src(vt_node *node, int i, vt_tensor t) {
    if (i < 0 || i >= VT_MAX_SRC) die("%s", "source index out of range");
    node->src[i] = t;
    if (node->n_src < i + 1) node->n_src = i + 1;
}

static vt_tensor tensor_copy(const vt_tensor *t) {
    vt_tensor c = *t;
    if (t->data && t->ndim > 0) {
        size_t bytes = vt_harness_nbytes(t);
        c.data = xmalloc(bytes);
        memcpy(c.data, t->data, bytes);
    }
    return c;
}

vt_node vt_harness_node_copy(const vt_node *node) {
    vt_node c = *node;
    for (int i = 0; i < node->n_src && i < VT_MAX_SRC; i++) c.src[i] = tensor_copy(&node->src[i]);
    c.dst = tensor_copy(&node->dst);
    return c;
}

void vt_harness_node_free(vt_node *node) {
    for (int i = 0; i < VT_MAX_SRC; i++) vt_harness_tensor_free(&node->src[i]);
    vt_harness_tensor_free(&node->dst);
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                    */

int64_t vt_harness_nelements(const vt_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->ne[i];
    return t->ndim > 0 ? n : 0;
}

size_t vt_harness_nbytes(const vt_tensor *t) {
    if (t->ndim <= 0) return 0;
    return vt_row_size(t->dtype, t->ne[0]) * (size_t)(vt_harness_nelements(t) / t->ne[0]);
}

/* A contiguous descriptor (no data yet). */
static vt_tensor describe(int32_t dtype, int ndim, const int64_t *ne) {
    if (!vt_dtype_is_valid(dtype)) die("invalid dtype %s", vt_dtype_name(dtype));
    if (ndim < 1 || ndim > VT_MAX_DIMS) die("%s", "ndim outside 1..4");
    vt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = ndim;
    for (int i = 0; i < VT_MAX_DIMS; i++) t.ne[i] = i < ndim ? ne[i] : 1;
    for (int i = 0; i < ndim; i++)
        if (t.ne[i] < 1) die("%s", "a dimension is < 1");
    size_t row = vt_row_size(dtype, t.ne[0]);
    if (row == 0) die("ne[0] is not whole %s blocks", vt_dtype_name(dtype));
    t.nb[0] = vt_dtype_block_bytes(dtype); /* as the core's plans set it: element size, or block bytes */
    t.nb[1] = row;
    for (int i = 2; i < VT_MAX_DIMS; i++) t.nb[i] = t.nb[i - 1] * (size_t)t.ne[i - 1];
    return t;
}

vt_tensor vt_harness_zeros(int32_t dtype, int ndim, const int64_t *ne) {
    vt_tensor t = describe(dtype, ndim, ne);
    size_t bytes = vt_harness_nbytes(&t);
    t.data = xmalloc(bytes);
    memset(t.data, 0, bytes);
    return t;
}

vt_tensor vt_harness_from_f32(int32_t dtype, int ndim, const int64_t *ne, const float *values) {
    vt_tensor t = vt_harness_zeros(dtype, ndim, ne);
    if (vt_from_f32(dtype, values, t.data, vt_harness_nelements(&t)) != VT_OK)
        die("cannot store f32 values as %s", vt_dtype_name(dtype));
    return t;
}

vt_tensor vt_harness_random(int32_t dtype, int ndim, const int64_t *ne, uint64_t seed, float lo, float hi) {
    vt_tensor shape = describe(dtype, ndim, ne);
    int64_t n = vt_harness_nelements(&shape);
    float *values = xmalloc((size_t)n * sizeof(float));
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i++) values[i] = vt_harness_rand_f32(&state, lo, hi);
    vt_tensor t = vt_harness_from_f32(dtype, ndim, ne, values);
    free(values);
    return t;
}

vt_tensor vt_harness_weight(int32_t dtype, int64_t K, int64_t N, uint64_t seed) {
    return vt_harness_random(dtype, 2, (const int64_t[]){K, N}, seed, -1.0f, 1.0f);
}

vt_tensor vt_harness_i32(int64_t n, const int32_t *values) {
    vt_tensor t = vt_harness_zeros(VT_I32, 1, &n);
    memcpy(t.data, values, (size_t)n * sizeof(int32_t));
    return t;
}

vt_tensor vt_harness_i64(int64_t n, const int64_t *values) {
    vt_tensor t = vt_harness_zeros(VT_I64, 1, &n);
    memcpy(t.data, values, (size_t)n * sizeof(int64_t));
    return t;
}

vt_tensor vt_harness_cache(int32_t dtype, int64_t D, int64_t KVH, int64_t BS, int64_t B, uint64_t seed) {
    if (!vt_dtype_is_float(dtype) && !(dtype == VT_Q8_0 && D % 32 == 0))
        die("cache dtype %s is not f32/f16/bf16, or q8_0 with D a multiple of 32", vt_dtype_name(dtype));
    return vt_harness_random(dtype, 4, (const int64_t[]){D, KVH, BS, B}, seed, -1.0f, 1.0f);
}

vt_tensor vt_harness_block_tables(int32_t n_seqs, int32_t max_blocks, const int32_t *blocks) {
    vt_tensor t = vt_harness_zeros(VT_I32, 2, (const int64_t[]){max_blocks, n_seqs});
    memcpy(t.data, blocks, (size_t)n_seqs * (size_t)max_blocks * sizeof(int32_t));
    return t;
}

vt_node vt_harness_attention_node(const vt_harness_attn_case *c, int32_t kv_dtype, const int32_t *pos,
                                  const int32_t *seq, int phase, uint64_t seed) {
    vt_node node = vt_harness_node(VT_OP_ATTENTION, phase);
    node.params.attention.scale = 1.0f / sqrtf((float)c->D);
    node.params.attention.block_size = (int32_t)c->BS;
    node.params.attention.n_seqs = c->n_seqs;
    node.params.attention.max_blocks_per_seq = c->max_blocks;
    int32_t *tables = malloc((size_t)(c->n_seqs * c->max_blocks) * sizeof(int32_t));
    for (int32_t s = 0; s < c->n_seqs; s++)
        for (int32_t b = 0; b < c->max_blocks; b++)
            tables[s * c->max_blocks + b] = (int32_t)((7 + 5 * (s * c->max_blocks + b)) % c->n_blocks);
    vt_harness_set_src(&node, 0, vt_harness_random(VT_F32, 3, (const int64_t[]){c->D, c->H, c->T}, seed, -1, 1));
    vt_harness_set_src(&node, 1, vt_harness_cache(kv_dtype, c->D, c->KVH, c->BS, c->n_blocks, seed + 1));
    vt_harness_set_src(&node, 2, vt_harness_cache(kv_dtype, c->D, c->KVH, c->BS, c->n_blocks, seed + 2));
    vt_harness_set_src(&node, 3, vt_harness_block_tables(c->n_seqs, c->max_blocks, tables));
    vt_harness_set_src(&node, 4, vt_harness_i32(c->T, pos));
    vt_harness_set_src(&node, 5, vt_harness_i32(c->T, seq));
    node.dst = vt_harness_zeros(VT_F32, 3, (const int64_t[]){c->D, c->H, c->T});
    free(tables);
    return node;
}

void vt_harness_tensor_free(vt_tensor *t) {
    free(t->data);
    t->data = NULL;
}

float *vt_harness_to_f32(const vt_tensor *t) {
    int64_t n = vt_harness_nelements(t);
    float *out = xmalloc((size_t)n * sizeof(float));
    if (t->dtype == VT_I32 || t->dtype == VT_I64) {
        for (int64_t i = 0; i < n; i++)
            out[i] = t->dtype == VT_I32 ? (float)((const int32_t *)t->data)[i] : (float)((const int64_t *)t->data)[i];
    } else if (vt_to_f32(t->dtype, t->data, out, n) != VT_OK) {
        die("cannot convert %s to f32", vt_dtype_name(t->dtype));
    }
    return out;
}

/* ------------------------------------------------------------------------ */
/* Comparing                                                                  */

vt_harness_diff vt_harness_tensor_diff(const vt_tensor *a, const vt_tensor *b) {
    vt_harness_diff d = {0};
    int64_t n = vt_harness_nelements(a);
    bool same_shape = n == vt_harness_nelements(b);
    for (int i = 0; i < VT_MAX_DIMS && same_shape; i++)
        same_shape = (i < a->ndim ? a->ne[i] : 1) == (i < b->ndim ? b->ne[i] : 1);
    if (!same_shape) {
        fprintf(stderr, "backend_harness: diff of tensors of different shapes\n");
        d.max_abs = d.max_rel = INFINITY;
        return d;
    }
    float *fa = vt_harness_to_f32(a), *fb = vt_harness_to_f32(b);
    for (int64_t i = 0; i < n; i++) {
        double x = fa[i], y = fb[i];
        if (!isfinite(x) || !isfinite(y)) {
            /* nan matches nan, inf matches the same inf; anything else is a
             * mismatch no finite tolerance may excuse */
            bool match = (isnan(x) && isnan(y)) || (isinf(x) && x == y);
            if (!match) {
                d.nonfinite_mismatch++;
                d.max_abs = d.max_rel = INFINITY;
                d.worst = i;
            }
            continue;
        }
        double abs_diff = fabs(x - y);
        double rel = abs_diff / fmax(fabs(y), VT_HARNESS_REL_FLOOR);
        if (abs_diff > d.max_abs) {
            d.max_abs = abs_diff;
            d.worst = i;
        }
        if (rel > d.max_rel) d.max_rel = rel;
        if (fabs(y) > d.ref_max_abs) d.ref_max_abs = fabs(y);
    }
    d.count = n;
    free(fa);
    free(fb);
    return d;
}

static void merge_diff(vt_harness_diff *into, const vt_harness_diff *d) {
    if (d->max_abs > into->max_abs) {
        into->max_abs = d->max_abs;
        into->worst = d->worst;
    }
    into->max_rel = fmax(into->max_rel, d->max_rel);
    into->ref_max_abs = fmax(into->ref_max_abs, d->ref_max_abs);
    into->count += d->count;
    into->nonfinite_mismatch += d->nonfinite_mismatch;
}

vt_status vt_harness_compare(const vt_harness *h, const char *name, const char *ref_name, const vt_node *node,
                             vt_harness_diff *diff) {
    memset(diff, 0, sizeof *diff);
    vt_node a = vt_harness_node_copy(node), b = vt_harness_node_copy(node);
    vt_status st = vt_harness_run(h, name, &a);
    if (st != VT_OK) {
        fprintf(stderr, "backend_harness: %s failed: %s\n", name, vt_status_name(st));
    } else {
        st = vt_harness_run(h, ref_name, &b);
        if (st != VT_OK) fprintf(stderr, "backend_harness: %s failed: %s\n", ref_name, vt_status_name(st));
    }
    if (st == VT_OK) {
        vt_tensor *outs_a[2], *outs_b[2];
        int n = vt_op_case_outputs(&a, outs_a);
        vt_op_case_outputs(&b, outs_b);
        for (int i = 0; i < n; i++) {
            vt_harness_diff d = vt_harness_tensor_diff(outs_a[i], outs_b[i]);
            merge_diff(diff, &d);
        }
    }
    vt_harness_node_free(&a);
    vt_harness_node_free(&b);
    return st;
}

void vt_harness_diff_print(const char *label, const vt_harness_diff *d) {
    printf("  %s: max_abs %.3g max_rel %.3g (ref max %.3g, %lld values, worst at %lld, %lld non-finite mismatches)\n",
           label, d->max_abs, d->max_rel, d->ref_max_abs, (long long)d->count, (long long)d->worst,
           (long long)d->nonfinite_mismatch);
}

/* ------------------------------------------------------------------------ */
/* PRNG                                                                       */

uint64_t vt_harness_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float vt_harness_rand_f32(uint64_t *state, float lo, float hi) {
    /* 24 random bits: every value is an exact f32 in [0, 1) */
    float unit = (float)(vt_harness_rand_u64(state) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * unit;
}
