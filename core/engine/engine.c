/* engine.c — wiring: options -> thread pool -> backends -> KV cache -> plans. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "quant.h"

static int32_t find_loaded(const vt_registry *r, const char *name) {
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (b->state == VT_BACKEND_LOADED && strcmp(b->name, name) == 0) return i;
    }
    return -1;
}

/* Why a named backend is not usable, for the error message. */
static void describe_missing(const vt_registry *r, const char *name, char *buf, size_t size) {
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (strcmp(b->name, name) == 0 && b->state == VT_BACKEND_REFUSED) {
            snprintf(buf, size, "backend '%.60s' was refused (%.200s): %.200s", name, b->path, b->reason);
            return;
        }
    }
    int n = snprintf(buf, size, "no backend named '%s' was found; loaded:", name);
    for (int i = 0; i < vt_registry_count(r) && n > 0 && (size_t)n < size; i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (b->state == VT_BACKEND_LOADED) n += snprintf(buf + n, size - (size_t)n, " %s", b->name);
    }
}

static vt_status choose_backends(vt_engine *e, vt_error *err) {
    const vt_registry *r = e->registry;
    char why[512];
    if (e->opt.backend[0]) {
        e->preferred = find_loaded(r, e->opt.backend);
        if (e->preferred < 0) {
            describe_missing(r, e->opt.backend, why, sizeof why);
            return vt_fail(err, VT_ERR_BACKEND, "--backend %s: %s", e->opt.backend, why);
        }
    } else {
        /* The highest probe score wins; ties keep discovery order. */
        e->preferred = -1;
        for (int i = 0; i < vt_registry_count(r); i++) {
            const vt_backend_entry *b = vt_registry_at(r, i);
            if (b->state != VT_BACKEND_LOADED) continue;
            if (e->preferred < 0 || b->score > vt_registry_at(r, e->preferred)->score) e->preferred = i;
        }
        if (e->preferred < 0) {
            /* say why the ones that exist were refused (e.g. out of memory in their init) */
            int n = snprintf(why, sizeof why, "no backend loaded (see `vt backends`)");
            for (int i = 0; i < vt_registry_count(r) && n > 0 && (size_t)n < sizeof why; i++) {
                const vt_backend_entry *b = vt_registry_at(r, i);
                if (b->state == VT_BACKEND_REFUSED)
                    n += snprintf(why + n, sizeof why - (size_t)n, "; %.60s was refused: %.200s", b->name, b->reason);
            }
            return vt_fail(err, VT_ERR_BACKEND, "%s", why);
        }
    }
    e->fallback = -1;
    if (strcmp(e->opt.fallback, "none") != 0) {
        e->fallback = find_loaded(r, e->opt.fallback);
        if (e->fallback < 0) {
            describe_missing(r, e->opt.fallback, why, sizeof why);
            return vt_fail(err, VT_ERR_BACKEND, "fallback %s: %s", e->opt.fallback, why);
        }
        if (e->fallback == e->preferred) e->fallback = -1;
    }
    return VT_OK;
}

/* The KV-cache dtype asked for is a promise about precision: when no
 * allowed backend could deliver k/v at it, and the plans round them to a
 * narrower dtype before the store, say so once (--explain marks each store). */
static void warn_inexact_kv(const vt_engine *e) {
    int32_t first_prefill, first_decode;
    int n_prefill = vt_plan_inexact_stores(e->prefill, &first_prefill);
    int n_decode = vt_plan_inexact_stores(e->decode, &first_decode);
    if (n_prefill + n_decode == 0) return;
    const vt_plan *p = n_prefill ? e->prefill : e->decode;
    const vt_plan_node *n = &p->nodes[n_prefill ? first_prefill : first_decode];
    const int32_t kv = vt_plan_value_tensor(p, n->src[0], -1, -1, false).dtype;
    const vt_backend_entry *b = vt_registry_at(e->registry, n->backend);
    const char *cache = vt_dtype_name(e->kv->dtype);
    vt_log(VT_LOG_WARN, "core",
           "%s KV cache requested, but node %s on backend '%s' stores k/v already rounded to %s (and %d more stores "
           "like it, marked in --explain): no allowed backend brings k/v to a store at %s precision. Fix: %s",
           cache, n->label, b ? b->name : "?", vt_dtype_name(kv), n_prefill + n_decode - 1, cache,
           e->fallback < 0 ? "allow a fallback backend (--fallback reference)"
                           : "choose another --backend or --fallback");
}

vt_status vt_engine_create(const vt_options *opt, vt_model *model, bool all_logits, vt_engine **out, vt_error *err) {
    *out = NULL;
    vt_engine *e = calloc(1, sizeof *e);
    if (!e) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    e->opt = *opt;
    e->model = model;
    e->all_logits = all_logits;
    vt_status st = vt_threadpool_create(opt->threads, &e->pool, err);
    if (st == VT_OK) {
        e->host = vt_host_get(e->pool);
        st = vt_registry_create(e->host, opt->backend_path[0] ? opt->backend_path : NULL, opt->backend_options,
                                &e->registry, err);
    }
    if (st == VT_OK) st = choose_backends(e, err);
    if (st == VT_OK) {
        const vt_hparams *hp = &model->hp;
        e->ctx_size = opt->ctx_size > 0 ? opt->ctx_size : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
        st = vt_kv_cache_create(e->host, opt->kv_cache_dtype, hp->n_layer, hp->n_head_kv, hp->head_dim,
                                opt->block_size, e->ctx_size, &e->kv, err);
    }
    if (st == VT_OK) {
        vt_plan_config pc = {model, e->kv, e->registry, e->host, e->preferred, e->fallback, opt->check_plan};
        int64_t batch = opt->batch_size < e->ctx_size ? opt->batch_size : e->ctx_size;
        st = vt_plan_build(&pc, VT_PHASE_PREFILL, batch, all_logits, &e->prefill, err);
        if (st == VT_OK) st = vt_plan_build(&pc, VT_PHASE_DECODE, 1, all_logits, &e->decode, err);
    }
    if (st == VT_OK) warn_inexact_kv(e);
    if (st == VT_OK) {
        e->logits_cap = all_logits ? e->prefill->max_tokens : 1;
        e->logits = malloc((size_t)e->logits_cap * (size_t)model->hp.n_vocab * sizeof(float));
        if (!e->logits) st = vt_fail(err, VT_ERR_NOMEM, "out of memory for logits");
    }
    if (st != VT_OK) {
        vt_engine_free(e);
        return st;
    }
    *out = e;
    return VT_OK;
}

void vt_engine_free(vt_engine *e) {
    if (!e) return;
    vt_plan_free(e->prefill);
    vt_plan_free(e->decode);
    if (e->kv) vt_kv_seq_release(e->kv, &e->seq);
    vt_kv_cache_free(e->kv);
    vt_registry_destroy(e->registry);
    vt_host_release_pool(e->pool); /* another engine may still call host->parallel_for */
    vt_threadpool_destroy(e->pool);
    free(e->logits);
    free(e);
}

vt_status vt_engine_eval(vt_engine *e, const int32_t *tokens, int64_t n, bool use_decode, vt_error *err) {
    if (n < 1) return vt_fail(err, VT_ERR_INVALID, "nothing to evaluate: zero tokens");
    const int32_t V = e->model->hp.n_vocab;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return vt_fail(err, VT_ERR_INVALID, "token id %d at index %lld is outside the vocabulary (0..%d)",
                           tokens[i], (long long)i, V - 1);
    /* The host has one current pool: make it this engine's (another engine
     * built or freed since may have replaced or cleared it). */
    vt_host_get(e->pool);
    int64_t start = e->seq.n_tokens;
    vt_status st = vt_kv_seq_reserve(e->kv, &e->seq, n, err);
    if (st != VT_OK) return st;
    int64_t *slots = malloc((size_t)n * sizeof *slots);
    if (!slots) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    vt_kv_seq_slots(e->kv, &e->seq, start, n, slots);
    vt_plan *plan = use_decode ? e->decode : e->prefill;
    /* With all_logits every token gets a row: each call writes its rows in place. */
    int64_t rows = e->all_logits ? n : 1;
    if (rows > e->logits_cap) {
        float *grown = realloc(e->logits, (size_t)rows * (size_t)V * sizeof(float));
        if (!grown) {
            free(slots);
            return vt_fail(err, VT_ERR_NOMEM, "out of memory for %lld rows of logits", (long long)rows);
        }
        e->logits = grown;
        e->logits_cap = rows;
    }
    for (int64_t done = 0; done < n && st == VT_OK;) {
        int64_t chunk = n - done < plan->max_tokens ? n - done : plan->max_tokens;
        float *out = e->all_logits ? e->logits + done * V : e->logits;
        vt_plan_call call = {tokens + done, chunk, start + done, slots + done, e->seq.block_table, e->seq.n_blocks,
                             out};
        st = vt_plan_run(plan, &call, err);
        done += chunk;
    }
    free(slots);
    if (st != VT_OK) return st; /* the sequence keeps its old length; stale slots get rewritten */
    e->seq.n_tokens = start + n;
    e->logits_rows = rows;
    return VT_OK;
}

const float *vt_engine_logits(const vt_engine *e, int64_t row) {
    if (row < 0 || row >= e->logits_rows) return NULL;
    return e->logits + row * e->model->hp.n_vocab;
}

int64_t vt_engine_n_past(const vt_engine *e) { return e->seq.n_tokens; }

void vt_engine_reset(vt_engine *e) { vt_kv_seq_release(e->kv, &e->seq); }

void vt_engine_explain(const vt_engine *e, FILE *f) {
    vt_plan_explain(e->prefill, f);
    vt_plan_explain(e->decode, f);
    const vt_backend_entry *pb = vt_registry_at(e->registry, e->preferred);
    const vt_backend_entry *fb = e->fallback >= 0 ? vt_registry_at(e->registry, e->fallback) : NULL;
    fprintf(f, "backend: %s (fallback: %s)\n", pb->name, fb ? fb->name : "none");
    fprintf(f, "kv-cache dtype: %s (from %s); %lld tokens in %d blocks of %d, %.1f MiB\n",
            vt_dtype_name(e->kv->dtype), e->opt.kv_cache_dtype_source, (long long)vt_kv_cache_capacity(e->kv),
            e->kv->num_blocks, e->kv->block_size, (double)vt_kv_cache_bytes(e->kv) / (1024.0 * 1024.0));
}
