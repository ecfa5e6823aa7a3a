/* engine.c — wiring: options -> thread pool -> backends -> KV cache -> plans. */
#include "engine_internal.h"

#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "calibration_cache.h"
#include "plan_exec.h"
#include "quant.h"
#include "usable_cpus.h"

/* `--backend auto`: not a backend's name but the placement by measured cost. */
static bool is_auto(const vt_options *o) { return strcmp(o->backend, "auto") == 0; }

/* No fallback because runtime.fallback names the preferred backend (a
 * backend cannot take the nodes it declines itself): said where the
 * missing fallback shows, as it is easy to set by mistake. */
static bool fallback_is_self(const vt_engine *e) {
    const vt_backend_entry *pb = e->preferred >= 0 ? vt_registry_at(e->registry, e->preferred) : NULL;
    return e->fallback < 0 && pb && e->opt.fallback[0] && strcmp(e->opt.fallback, pb->name) == 0;
}

static int32_t find_loaded(const vt_registry *r, const char *name) {
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (b->state == VT_BACKEND_LOADED && strcmp(b->name, name) == 0) return i;
    }
    return -1;
}

/* Why a named backend is not usable, for the error message, and the status
 * that says it: a backend of that name that was refused is a backend
 * failure, a name no backend has is a bad argument. */
static vt_status describe_missing(const vt_registry *r, const char *name, char *buf, size_t size) {
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (strcmp(b->name, name) == 0 && b->state == VT_BACKEND_REFUSED) {
            snprintf(buf, size, "backend '%.60s' was refused (%.200s): %.200s", name, b->path, b->reason);
            return VT_ERR_BACKEND;
        }
    }
    int n = snprintf(buf, size, "no backend named '%s' was found; loaded:", name);
    for (int i = 0; i < vt_registry_count(r) && n > 0 && (size_t)n < size; i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (b->state == VT_BACKEND_LOADED) n += snprintf(buf + n, size - (size_t)n, " %s", b->name);
    }
    return VT_ERR_INVALID;
}

/* The loaded backend with the highest probe score other than `except` (-1:
 * none excluded), or -1 if there is none. Ties keep discovery order. The
 * one ranking picks the default backend and, after it, the default fallback. */
static int32_t best_loaded(const vt_registry *r, int32_t except) {
    int32_t best = -1;
    for (int i = 0; i < vt_registry_count(r); i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (i == except || b->state != VT_BACKEND_LOADED) continue;
        if (best < 0 || b->score > vt_registry_at(r, best)->score) best = i;
    }
    return best;
}

/* How a backend option was set, as the user wrote it: "--backend-option
 * onednn.foo=1", "--backends onednn:foo=1" (an entry's own options),
 * "FILE:3: [backend.onednn] foo = 1", "setting
 * backend.onednn.foo=1" (the embedding API). line: "NAME.key=value". */
static void backend_option_origin(const vt_options *o, const char *line, int len, char *buf, size_t size) {
    const char *eq = memchr(line, '=', (size_t)len), *dot = memchr(line, '.', (size_t)len);
    char key[160], src[VT_SOURCE_SIZE];
    const int key_len = eq ? (int)(eq - line) : len;
    snprintf(key, sizeof key, "%.*s", key_len, line);
    const char *source = vt_options_backend_option_source(o, key, src, sizeof src);
    if (source && strncmp(source, "ini ", 4) == 0 && dot && eq)
        snprintf(buf, size, "%s:%s: [backend.%.*s] %.*s = %.*s", o->config_path, source + 4, (int)(dot - line), line,
                 (int)(eq - dot - 1), dot + 1, len - key_len - 1, eq + 1);
    else if (source && strcmp(source, "cli") == 0) snprintf(buf, size, "--backend-option %.*s", len, line);
    else if (source && strcmp(source, "backends") == 0 && dot)
        snprintf(buf, size, "--backends %.*s:%.*s", (int)(dot - line), line, len - (int)(dot - line) - 1, dot + 1);
    else if (source && strcmp(source, "api") == 0) snprintf(buf, size, "setting backend.%.*s", len, line);
    else snprintf(buf, size, "backend option %.*s", len, line);
}

/* Every [backend.NAME] / --backend-option names a backend that was found,
 * and a backend whose init refused its options stops the run here: an option
 * that is silently dropped, or that silently drops its backend from the plan,
 * would leave the user believing it applies. */
static vt_status check_backend_options(const vt_options *opt, const vt_registry *r, vt_error *err) {
    const char *lines = opt->backend_options;
    for (const char *line = lines; *line;) {
        const char *end = strchr(line, '\n');
        const int len = (int)(end ? (size_t)(end - line) : strlen(line));
        const char *dot = memchr(line, '.', (size_t)len);
        const int name_len = dot ? (int)(dot - line) : len;
        const vt_backend_entry *found = NULL;
        for (int i = 0; i < vt_registry_count(r) && !found; i++) {
            const vt_backend_entry *b = vt_registry_at(r, i);
            if ((int)strlen(b->name) == name_len && strncmp(b->name, line, (size_t)name_len) == 0 &&
                b->state != VT_BACKEND_SHADOWED)
                found = b;
        }
        char origin[1400];
        if (!found || (found->state == VT_BACKEND_REFUSED && found->refused_by_init))
            backend_option_origin(opt, line, len, origin, sizeof origin);
        if (!found) {
            char names[256];
            int n = snprintf(names, sizeof names, "found:");
            for (int i = 0; i < vt_registry_count(r) && n > 0 && (size_t)n < sizeof names; i++)
                n += snprintf(names + n, sizeof names - (size_t)n, " %s", vt_registry_at(r, i)->name);
            return vt_fail(err, VT_ERR_INVALID, "%s: no backend named '%.*s' (%s)", origin, name_len, line, names);
        }
        if (found->state == VT_BACKEND_REFUSED && found->refused_by_init)
            return vt_fail(err, VT_ERR_BACKEND, "%s: backend %s refused its options: %s", origin, found->name,
                           found->reason);
        line += len + (end ? 1 : 0);
    }
    return VT_OK;
}

/* How the user set a knob, as they wrote it: "--backend simd",
 * "VT_BACKEND=simd", "FILE:12: [runtime] backend = simd", "settings
 * runtime.backend=simd" (the embedding API), so an error names its origin. */
static void setting_origin(const vt_options *o, const char *key, const char *flag, const char *value, char *buf,
                           size_t size) {
    const char *src = vt_options_source(o, key);
    const char *dot = strchr(key, '.');
    if (src && strncmp(src, "env ", 4) == 0) snprintf(buf, size, "%s=%s", src + 4, value);
    else if (src && strncmp(src, "ini ", 4) == 0)
        snprintf(buf, size, "%s:%s: [%.*s] %s = %s", o->config_path, src + 4, dot ? (int)(dot - key) : 0, key,
                 dot ? dot + 1 : key, value);
    else if (src && strcmp(src, "cli") == 0) snprintf(buf, size, "%s %s", flag, value);
    else if (!src || strcmp(src, "default") == 0) snprintf(buf, size, "%s %s", flag + 2, value); /* set by a command */
    else snprintf(buf, size, "%s=%s (from %s)", key, value, src);
}

int32_t vt_engine_default_backend(const vt_registry *r) { return best_loaded(r, -1); }

int32_t vt_engine_default_fallback(const vt_registry *r, int32_t preferred) { return best_loaded(r, preferred); }

/* runtime.backend and runtime.fallback resolved against the backends found:
 * *preferred and *fallback get their indices (-1: no fallback). */
static vt_status choose_backends(const vt_options *opt, const vt_registry *r, int32_t *preferred, int32_t *fallback,
                                 vt_error *err) {
    char why[1024], origin[1200];
    if (opt->backend[0] && !is_auto(opt)) {
        *preferred = find_loaded(r, opt->backend);
        if (*preferred < 0) {
            const vt_status why_st = describe_missing(r, opt->backend, why, sizeof why);
            setting_origin(opt, "runtime.backend", "--backend", opt->backend, origin, sizeof origin);
            return vt_fail(err, why_st, "%s: %s", origin, why);
        }
    } else {
        *preferred = best_loaded(r, -1);
        if (*preferred < 0) {
            /* say why the ones that exist were refused (e.g. out of memory in their init) */
            int n = snprintf(why, sizeof why, "no backend loaded (see `vt backends`)");
            for (int i = 0; i < vt_registry_count(r) && n > 0 && (size_t)n < sizeof why; i++) {
                const vt_backend_entry *b = vt_registry_at(r, i);
                if (b->state == VT_BACKEND_REFUSED)
                    n += snprintf(why + n, sizeof why - (size_t)n, "; %.60s was refused: %.200s", b->name, b->reason);
            }
            /* none found at all (a libvt copied without its lib/vt folder):
             * where it looked, and how to point it elsewhere */
            if (vt_registry_count(r) == 0 && n > 0 && (size_t)n + 2 < sizeof why) {
                n += snprintf(why + n, sizeof why - (size_t)n, "; ");
                vt_registry_describe_search(r, why + n, sizeof why - (size_t)n);
            }
            return vt_fail(err, VT_ERR_BACKEND, "%s", why);
        }
    }
    *fallback = -1;
    if (opt->fallback[0] == '\0') {
        /* automatic: the next in the ranking (none when only one is loaded) */
        *fallback = best_loaded(r, *preferred);
    } else if (strcmp(opt->fallback, "none") != 0) {
        *fallback = find_loaded(r, opt->fallback);
        if (*fallback < 0) {
            const vt_status why_st = describe_missing(r, opt->fallback, why, sizeof why);
            setting_origin(opt, "runtime.fallback", "--fallback", opt->fallback, origin, sizeof origin);
            return vt_fail(err, why_st, "%s: %s", origin, why);
        }
        if (*fallback == *preferred) *fallback = -1;
    }
    return VT_OK;
}

vt_status vt_engine_resolve_backends(const vt_options *opt, const vt_registry *r, bool none_loaded_ok,
                                     int32_t *preferred, int32_t *fallback, vt_error *err) {
    *preferred = *fallback = -1;
    vt_status st = check_backend_options(opt, r, err);
    if (st != VT_OK) return st;
    const bool automatic = !opt->backend[0] || is_auto(opt);
    if (none_loaded_ok && automatic && best_loaded(r, -1) < 0) return VT_OK;
    return choose_backends(opt, r, preferred, fallback, err);
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
           "like it, marked where the plan is explained): no allowed backend brings k/v to a store at %s precision. Fix: %s",
           cache, n->label, b ? b->name : "?", vt_dtype_name(kv), n_prefill + n_decode - 1, cache,
           e->fallback < 0 ? "allow a fallback backend (runtime.fallback = reference)"
                           : "choose another runtime.backend or runtime.fallback");
}

/* Positions past the trained context are allowed (RoPE computes them) but
 * the model has never seen them, so its text degrades there: said once for
 * each context and trained context in a row, however many engines a command
 * creates for one model (bench, compare), and again for a program's next
 * model that is asked past its own. */
static void warn_ctx_past_training(const vt_options *opt, const vt_hparams *hp) {
    static _Atomic uint64_t warned; /* the last pair said, ctx_size << 32 | n_ctx_train */
    if (opt->ctx_size <= 0 || hp->n_ctx_train <= 0 || opt->ctx_size <= hp->n_ctx_train) return;
    const uint64_t pair = (uint64_t)opt->ctx_size << 32 | ((uint64_t)hp->n_ctx_train & 0xffffffffu);
    if (atomic_exchange(&warned, pair) == pair) return;
    vt_log(VT_LOG_WARN, "core",
           "context size %lld (from %s) is larger than the model's trained context of %lld tokens: positions past "
           "it may give poor text",
           (long long)opt->ctx_size, vt_options_source(opt, "kv_cache.ctx_size"), (long long)hp->n_ctx_train);
}

/* Do both plans compute every node they share on the same backend with the
 * same dtypes? Then a token's K/V are the same whichever plan computed them
 * (the backends keep a row's result independent of the call's size), and a
 * cached block is exactly what computing it again would give. Where they
 * differ (onednn's prefill matmuls beside simd's decode, or --backend auto
 * placing the phases apart), prefix caching stays off: a hit could change
 * the output. */
static bool plans_agree(const vt_engine *e) {
    for (int32_t i = 0; i < e->prefill->n_nodes; i++) {
        const vt_plan_node *a = &e->prefill->nodes[i];
        for (int32_t j = 0; j < e->decode->n_nodes; j++) {
            const vt_plan_node *b = &e->decode->nodes[j];
            if (strcmp(a->label, b->label) != 0) continue;
            if (a->backend != b->backend) return false;
            for (int s = 0; s < a->n_src && s < b->n_src; s++)
                if (a->proto.src[s].dtype != b->proto.src[s].dtype) return false;
            if (a->proto.dst.dtype != b->proto.dst.dtype) return false;
            break;
        }
    }
    return true;
}

static vt_status build_plans(vt_engine *e, vt_error *err) {
    vt_plan_config pc = {.model = e->model,
                         .kv = e->kv,
                         .registry = e->registry,
                         .host = e->host,
                         .preferred = e->preferred,
                         .fallback = e->fallback,
                         .fallback_is_self = fallback_is_self(e),
                         .check_plan = e->opt.check_plan,
                         .costs = e->costs};
    const int64_t batch = e->opt.batch_size < e->ctx_size ? e->opt.batch_size : e->ctx_size;
    const vt_plan_shape prefill = {VT_PHASE_PREFILL, batch, e->max_seqs, e->all_logits};
    const vt_plan_shape decode = {VT_PHASE_DECODE, 0, e->max_seqs, e->all_logits};
    vt_status st = vt_plan_build(&pc, &prefill, &e->prefill, err);
    if (st == VT_OK) st = vt_plan_build(&pc, &decode, &e->decode, err);
    return st;
}

/* --backend auto: the plans were built with the times the calibration cache
 * had (classes without one placed as plain negotiation would); time what is
 * missing on the nodes of those plans, keep it in the cache, and build the
 * plans again by the full table. */
static vt_status place_by_cost(vt_engine *e, vt_error *err) {
    vt_auto_costs *c = e->costs;
    vt_host_use(e->pool);
    vt_plan *plans[2] = {e->prefill, e->decode};
    if (c->recalibrate) /* the plans' classes anew; other models' classes stay in the cache */
        for (int pi = 0; pi < 2; pi++)
            for (int32_t i = 0; i < plans[pi]->n_nodes; i++) {
                const int k = plans[pi]->nodes[i].cost_class;
                for (int b = 0; k >= 0 && b < VT_AUTO_MAX_BACKENDS; b++) c->classes[k].seconds[b] = VT_COST_UNMEASURED;
            }
    vt_status st = vt_auto_calibrate(plans, 2, e->kv, c, err);
    if (st != VT_OK || c->measured == 0) {
        c->cache_hit = st == VT_OK && c->from_cache > 0;
        return st;
    }
    char key[8192];
    vt_error save_err;
    vt_calibration_key(e->registry, c, e->host->n_threads, key, sizeof key);
    if (c->cache_path[0] && vt_calibration_save(c->cache_path, key, e->registry, c, &save_err) != VT_OK)
        vt_log(VT_LOG_WARN, "core", "runtime.backend = auto: %s (calibration is redone next time)", save_err.msg);
    vt_plan_free(e->prefill);
    vt_plan_free(e->decode);
    e->prefill = e->decode = NULL;
    return build_plans(e, err);
}

/* --backend auto: the candidates (every loaded backend but the reference,
 * the slow oracle that takes only what nobody else accepts) and the times
 * the calibration cache holds for them. */
static vt_status start_auto(vt_engine *e, bool recalibrate, vt_error *err) {
    /* The cost tables hold VT_AUTO_MAX_BACKENDS registry entries, refused
     * and shadowed files included: a loaded backend past them could be
     * neither timed nor placed (its index would run off the tables). */
    for (int i = VT_AUTO_MAX_BACKENDS; i < vt_registry_count(e->registry); i++) {
        const vt_backend_entry *b = vt_registry_at(e->registry, i);
        if (b->state == VT_BACKEND_LOADED)
            return vt_fail(err, VT_ERR_BACKEND,
                           "runtime.backend = auto places among the first %d backend files found, and '%s' is file "
                           "%d (%s): remove the refused or shadowed files before it (see `vt backends`), or name a "
                           "backend",
                           VT_AUTO_MAX_BACKENDS, b->name, i + 1, b->path);
    }
    vt_auto_costs *c = calloc(1, sizeof *c);
    if (!c) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    vt_auto_costs_init(c);
    e->costs = c;
    const int n = vt_registry_count(e->registry);
    for (int i = 0; i < n && i < VT_AUTO_MAX_BACKENDS; i++) {
        const vt_backend_entry *b = vt_registry_at(e->registry, i);
        c->candidate[i] = b->state == VT_BACKEND_LOADED && strcmp(b->name, "reference") != 0;
    }
    c->n_backends = n;
    char key[8192], why[256];
    vt_error path_err;
    vt_calibration_key(e->registry, c, e->host->n_threads, key, sizeof key);
    if (vt_calibration_path(key, c->cache_path, sizeof c->cache_path, &path_err) != VT_OK) {
        vt_log(VT_LOG_WARN, "core", "runtime.backend = auto: %s: calibration is not kept", path_err.msg);
        c->cache_path[0] = '\0';
        return VT_OK;
    }
    c->recalibrate = recalibrate;
    const vt_calibration_read got = vt_calibration_load(c->cache_path, key, e->registry, c, why, sizeof why);
    c->cache_read = (int)got;
    if (got == VT_CALIBRATION_CORRUPT || got == VT_CALIBRATION_STALE)
        vt_log(VT_LOG_WARN, "core", "runtime.backend = auto: calibration cache %s is %s (%s): measuring again", c->cache_path,
               got == VT_CALIBRATION_CORRUPT ? "corrupt" : "stale", why);
    return VT_OK;
}

vt_status vt_engine_create(const vt_options *opt, vt_model *model, bool all_logits, vt_engine **out, vt_error *err) {
    const vt_engine_shape shape = {all_logits, 1, false};
    return vt_engine_create_shaped(opt, model, &shape, out, err);
}

vt_status vt_engine_create_shaped(const vt_options *opt, vt_model *model, const vt_engine_shape *shape,
                                  vt_engine **out, vt_error *err) {
    *out = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (shape->max_seqs < 1 || shape->max_seqs > 4096)
        return vt_fail(err, VT_ERR_INVALID, "engine: %d sequences per step (accepted: 1..4096)", shape->max_seqs);
    const bool all_logits = shape->all_logits;
    vt_engine *e = calloc(1, sizeof *e);
    if (!e) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    e->opt = *opt;
    e->model = model;
    e->all_logits = all_logits;
    e->max_seqs = shape->max_seqs;
    e->seqs = calloc((size_t)e->max_seqs, sizeof *e->seqs);
    e->step_rows = malloc((size_t)e->max_seqs * sizeof *e->step_rows);
    if (!e->seqs || !e->step_rows) {
        vt_engine_free(e);
        return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    }
    /* legal (a test of oversubscription, say), but every step then waits for
     * the threads not running; said once a process (vt compare and vt bench
     * open an engine per backend) */
    static atomic_bool threads_warned;
    const int32_t usable = vt_usable_cpus();
    if (opt->threads > usable && !atomic_exchange(&threads_warned, true))
        vt_log(VT_LOG_WARN, "core",
               "runtime.threads = %d (%s) on %d CPU%s this process may use: the threads beyond them wait for each "
               "other every step, which is slower, not faster (the default is %d)",
               (int)opt->threads, vt_options_source(opt, "runtime.threads"), (int)usable, usable == 1 ? "" : "s",
               (int)usable);
    vt_status st = vt_threadpool_create(opt->threads, &e->pool, err);
    if (st == VT_OK) {
        vt_host_init(&e->host_table, e->pool);
        e->host = &e->host_table;
        st = vt_registry_create(e->host, opt->backend_path[0] ? opt->backend_path : NULL, opt->backend_options,
                                &e->registry, err);
    }
    if (st == VT_OK) st = vt_engine_resolve_backends(opt, e->registry, false, &e->preferred, &e->fallback, err);
    if (st == VT_OK && is_auto(opt)) st = start_auto(e, shape->recalibrate, err);
    if (st == VT_OK) {
        const vt_hparams *hp = &model->hp;
        e->ctx_size = opt->ctx_size > 0 ? opt->ctx_size : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
        st = vt_kv_cache_create(e->host, opt->kv_cache_dtype, hp->n_layer, hp->n_head_kv, hp->head_dim,
                                opt->block_size, e->ctx_size, &e->kv, err);
    }
    if (st == VT_OK) st = build_plans(e, err);
    if (st == VT_OK && e->costs) st = place_by_cost(e, err);
    if (st == VT_OK) {
        /* Backends prepare on this thread and may use the engine's pool. */
        vt_host_use(e->pool);
        vt_plan *const plans[2] = {e->prefill, e->decode};
        st = vt_weight_prep_run(e->registry, plans, 2, model->gguf, &e->prepared, err);
    }
    if (st == VT_OK) warn_inexact_kv(e);
    if (st == VT_OK) e->plans_agree = plans_agree(e);
    if (st == VT_OK) vt_kv_cache_set_prefix_cache(e->kv, opt->prefix_cache && e->plans_agree);
    if (st == VT_OK && opt->prefix_cache_blocks > 0) vt_kv_cache_set_cache_budget(e->kv, opt->prefix_cache_blocks);
    if (st == VT_OK) {
        e->logits_cap = e->prefill->max_outputs > e->decode->max_outputs ? e->prefill->max_outputs
                                                                          : e->decode->max_outputs;
        e->logits = malloc((size_t)e->logits_cap * (size_t)model->hp.n_vocab * sizeof(float));
        if (!e->logits) st = vt_fail(err, VT_ERR_NOMEM, "out of memory for logits");
    }
    if (st != VT_OK) {
        vt_engine_free(e);
        return st;
    }
    warn_ctx_past_training(opt, &model->hp); /* only for an engine that will run: a refusal is its one line */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    e->create_seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    *out = e;
    return VT_OK;
}

void vt_engine_free(vt_engine *e) {
    if (!e) return;
    vt_plan_free(e->prefill);
    vt_plan_free(e->decode);
    if (e->costs) vt_auto_costs_free(e->costs);
    free(e->costs);
    vt_weight_prep_free(e->prepared); /* before the backends' shutdown */
    if (e->kv && e->seqs)
        for (int32_t s = 0; s < e->max_seqs; s++) vt_kv_seq_release(e->kv, &e->seqs[s]);
    vt_kv_cache_free(e->kv);
    free(e->seqs);
    free(e->step_rows);
    vt_registry_destroy(e->registry);
    vt_host_release_pool(e->pool); /* this thread must not run ops on a freed pool */
    vt_threadpool_destroy(e->pool);
    free(e->logits);
    free(e);
}

/* Token ids in the vocabulary, or an error naming the first that is not. */
static vt_status check_tokens(const vt_engine *e, const int32_t *tokens, int64_t n, const char *what, vt_error *err) {
    const int32_t V = e->model->hp.n_vocab;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return vt_fail(err, VT_ERR_INVALID, "token id %d at index %lld%s is outside the vocabulary (0..%d)",
                           tokens[i], (long long)i, what, V - 1);
    return VT_OK;
}

/* Room for rows of logits. */
static vt_status ensure_logits(vt_engine *e, int64_t rows, vt_error *err) {
    if (rows <= e->logits_cap) return VT_OK;
    float *grown = realloc(e->logits, (size_t)rows * (size_t)e->model->hp.n_vocab * sizeof(float));
    if (!grown) return vt_fail(err, VT_ERR_NOMEM, "out of memory for %lld rows of logits", (long long)rows);
    e->logits = grown;
    e->logits_cap = rows;
    return VT_OK;
}

/* A forward's logits are finite: a NaN or an infinity there comes from a
 * backend's kernel (a sampler would draw from it without a word, and a
 * greedy pick of it is arbitrary), so the step fails saying so. One pass
 * over the rows, small beside the forward that wrote them. */
static vt_status check_finite(const float *logits, int64_t rows, int32_t n_vocab, vt_error *err) {
    const int64_t n = rows * n_vocab;
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i += 4096) {
        const int64_t end = i + 4096 < n ? i + 4096 : n;
        bool any = false;
        for (int64_t k = i; k < end; k++) any |= !isfinite(logits[k]);
        if (any)
            for (int64_t k = i; k < end && bad < 0; k++)
                if (!isfinite(logits[k])) bad = k;
    }
    if (bad < 0) return VT_OK;
    return vt_fail(err, VT_ERR_BACKEND,
                   "the forward wrote a non-finite logit (%g for token id %lld of row %lld): a backend produced NaN or "
                   "infinity; `vt compare --trace --backends NAME` names the first node that diverges",
                   (double)logits[bad], (long long)(bad % n_vocab), (long long)(bad / n_vocab));
}

/* One run of `plan` over entries whose blocks are reserved: tokens in entry
 * order at their sequences' next positions, each entry's last row giving its
 * logits when it asks for them (a plan without row selection computes every
 * row). Logits go to the engine's rows from row_base on; *rows gets how
 * many; entry i is the step's entry index[i] (NULL: i) for
 * vt_engine_step_logits. Sequences are not advanced: the caller does that
 * when the run succeeded. */
static vt_status run_entries(vt_engine *e, vt_plan *plan, const vt_step_entry *entries, const int32_t *index,
                             int32_t n_entries, int64_t total, int64_t row_base, int64_t *rows, vt_error *err) {
    float *logits = e->logits + row_base * e->model->hp.n_vocab;
    vt_status st = VT_OK;
    const int32_t **tables = malloc((size_t)n_entries * sizeof *tables);
    int32_t *table_len = malloc((size_t)n_entries * sizeof *table_len);
    int32_t *tokens = malloc((size_t)total * sizeof *tokens), *positions = malloc((size_t)total * sizeof *positions);
    int32_t *seq_idx = malloc((size_t)total * sizeof *seq_idx), *out_rows = malloc((size_t)total * sizeof *out_rows);
    int64_t *slots = malloc((size_t)total * sizeof *slots);
    if (!tables || !table_len || !tokens || !positions || !seq_idx || !out_rows || !slots) {
        st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
        goto done;
    }
    const bool select = plan->v_out_rows >= 0;
    int64_t t = 0, n_out = 0;
    for (int32_t i = 0; i < n_entries; i++) {
        const vt_step_entry *en = &entries[i];
        const vt_kv_seq *sq = &e->seqs[en->seq];
        tables[i] = sq->block_table;
        table_len[i] = sq->n_blocks;
        vt_kv_seq_slots(e->kv, sq, sq->n_tokens, en->n_tokens, slots + t);
        for (int64_t k = 0; k < en->n_tokens; k++, t++) {
            tokens[t] = en->tokens[k];
            positions[t] = (int32_t)(sq->n_tokens + k);
            seq_idx[t] = i;
        }
        const int32_t step_entry = index ? index[i] : i;
        e->step_rows[step_entry] = -1;
        if (en->logits) {
            e->step_rows[step_entry] = (int32_t)(row_base + (select ? n_out : t - 1));
            out_rows[n_out++] = (int32_t)(t - 1);
        }
    }
    if (select && n_out == 0) out_rows[n_out++] = (int32_t)(total - 1); /* one row at least; nobody reads it */
    vt_plan_call call = {tokens, total, positions, seq_idx, slots, tables, table_len, n_entries,
                         select ? out_rows : NULL, select ? n_out : total, logits};
    st = vt_plan_run(plan, &call, err);
    if (st == VT_OK) *rows = select ? n_out : total;
    if (st == VT_OK) st = check_finite(logits, *rows, e->model->hp.n_vocab, err);
done:
    free(tables), free(table_len), free(tokens), free(positions), free(seq_idx), free(out_rows), free(slots);
    return st;
}

vt_status vt_engine_eval(vt_engine *e, const int32_t *tokens, int64_t n, bool use_decode, vt_error *err) {
    if (n < 1) return vt_fail(err, VT_ERR_INVALID, "nothing to evaluate: zero tokens");
    vt_status st = check_tokens(e, tokens, n, "", err);
    if (st != VT_OK) return st;
    /* This thread's ops run on this engine's pool (the thread may drive
     * other engines in between). */
    vt_host_use(e->pool);
    vt_kv_seq *seq = &e->seqs[0];
    const int64_t start = seq->n_tokens;
    /* With all_logits every token gets a row: each call writes its rows in place. */
    const int64_t rows = e->all_logits ? n : 1;
    if ((st = ensure_logits(e, rows, err)) != VT_OK) return st;
    if ((st = vt_kv_seq_reserve(e->kv, seq, n, err)) != VT_OK) return st;
    vt_plan *plan = use_decode ? e->decode : e->prefill;
    for (int64_t done = 0; done < n && st == VT_OK;) {
        /* decode: one token per call, as a decode step of one sequence is */
        const int64_t most = use_decode ? 1 : plan->max_tokens;
        const int64_t chunk = n - done < most ? n - done : most;
        const vt_step_entry entry = {0, tokens + done, chunk, true, use_decode};
        int64_t ignored;
        st = run_entries(e, plan, &entry, NULL, 1, chunk, e->all_logits ? done : 0, &ignored, err);
        if (st == VT_OK) vt_kv_seq_commit(e->kv, seq, tokens + done, chunk); /* the next chunk's positions follow */
        done += chunk;
    }
    if (st != VT_OK) {
        /* the sequence keeps its old length and blocks (the earlier chunks
         * stored tokens: a block they filled and filed is unfiled or copied;
         * the copy always finds the block the filed one freed, and should it
         * not, the sequence is emptied rather than left writing into a
         * block others hold, and the error says so) */
        if (!vt_kv_seq_truncate(e->kv, seq, start))
            vt_error_prefix(err, "the sequence was reset (no KV block to keep its last %lld tokens): ",
                            (long long)(start % e->kv->block_size));
        return st;
    }
    e->logits_rows = rows;
    return VT_OK;
}

const float *vt_engine_logits(const vt_engine *e, int64_t row) {
    if (row < 0 || row >= e->logits_rows) return NULL;
    return e->logits + row * e->model->hp.n_vocab;
}

int64_t vt_engine_n_past(const vt_engine *e) { return e->seqs[0].n_tokens; }

void vt_engine_reset(vt_engine *e) {
    vt_kv_seq_release(e->kv, &e->seqs[0]);
    e->logits_rows = 0; /* the last eval's rows are no longer the sequence's */
}

/* The entries of one forward of a step: those of one kind when the plans
 * disagree, else all; and the plan that runs them. */
typedef struct step_group {
    vt_plan *plan;
    const vt_step_entry *entries;
    const int32_t *index; /* each one's entry index in the step; NULL: the step's own order */
    int32_t n;
    int64_t total; /* tokens */
} step_group;

/* Rows of logits a group's run writes: the entries that ask (one at least),
 * or every token for a plan without row selection. */
static int64_t group_rows(const step_group *g) {
    int64_t asking = 0;
    for (int32_t i = 0; i < g->n; i++) asking += g->entries[i].logits;
    return g->plan->v_out_rows >= 0 ? (asking ? asking : 1) : g->total;
}

bool vt_engine_plans_agree(const vt_engine *e) { return e->plans_agree; }

vt_status vt_engine_step(vt_engine *e, const vt_step_entry *entries, int32_t n_entries, vt_error *err) {
    /* no entry has logits until this step gives them: a failed step's are
     * none, not the previous step's */
    for (int32_t i = 0; i < e->max_seqs; i++) e->step_rows[i] = -1;
    if (n_entries < 1 || n_entries > e->max_seqs)
        return vt_fail(err, VT_ERR_INVALID, "step: %d entries, the engine takes 1..%d sequences per step", n_entries,
                       e->max_seqs);
    int64_t total = 0;
    bool all_single = true;
    for (int32_t i = 0; i < n_entries; i++) {
        const vt_step_entry *en = &entries[i];
        if (en->seq < 0 || en->seq >= e->max_seqs)
            return vt_fail(err, VT_ERR_INVALID, "step: entry %d names sequence %d (engine has 0..%d)", i, en->seq,
                           e->max_seqs - 1);
        for (int32_t j = 0; j < i; j++)
            if (entries[j].seq == en->seq)
                return vt_fail(err, VT_ERR_INVALID, "step: sequence %d appears in entries %d and %d", en->seq, j, i);
        if (en->n_tokens < 1 || !en->tokens)
            return vt_fail(err, VT_ERR_INVALID, "step: entry %d (sequence %d) has no tokens", i, en->seq);
        char what[64];
        snprintf(what, sizeof what, " of entry %d", i);
        vt_status st = check_tokens(e, en->tokens, en->n_tokens, what, err);
        if (st != VT_OK) return st;
        total += en->n_tokens;
        all_single &= en->n_tokens == 1;
    }
    /* group 0: one forward of everything (plans agree), or the prompts'
     * entries through the prefill plan; group 1: the generated ones through
     * the decode plan */
    step_group g[2];
    int32_t n_groups = 1;
    vt_step_entry *sorted = NULL; /* plans apart: the prompts' entries, then the generated ones */
    int32_t *index = NULL;
    if (e->plans_agree) {
        g[0] = (step_group){all_single && n_entries <= e->decode->max_tokens ? e->decode : e->prefill, entries, NULL,
                            n_entries, total};
    } else {
        sorted = malloc((size_t)n_entries * sizeof *sorted);
        index = malloc((size_t)n_entries * sizeof *index);
        if (!sorted || !index) {
            free(sorted), free(index);
            return vt_fail(err, VT_ERR_NOMEM, "out of memory");
        }
        int32_t n_prompt = 0, at[2] = {0, 0};
        for (int32_t i = 0; i < n_entries; i++) n_prompt += !entries[i].generated;
        g[0] = (step_group){e->prefill, sorted, index, n_prompt, 0};
        g[1] = (step_group){e->decode, sorted + n_prompt, index + n_prompt, n_entries - n_prompt, 0};
        for (int32_t i = 0; i < n_entries; i++) {
            const int kind = entries[i].generated;
            const int32_t j = (kind ? n_prompt : 0) + at[kind]++;
            sorted[j] = entries[i];
            index[j] = i;
            g[kind].total += entries[i].n_tokens;
        }
        if (g[0].n == 0) g[0] = g[1];
        else n_groups = g[1].n > 0 ? 2 : 1;
    }
    vt_status st = VT_OK;
    for (int32_t k = 0; k < n_groups && st == VT_OK; k++)
        if (g[k].total > g[k].plan->max_tokens)
            st = vt_fail(err, VT_ERR_INVALID, "step: %lld %stokens, one step takes at most %lld (%s)",
                         (long long)g[k].total, e->plans_agree ? "" : g[k].plan == e->decode ? "generated " : "prompt ",
                         (long long)g[k].plan->max_tokens,
                         g[k].plan == e->decode ? "a generated token of each sequence" : "runtime.batch_size");
    if (st != VT_OK) {
        free(sorted), free(index);
        return st;
    }
    vt_host_use(e->pool);

    /* Blocks for every entry, or for none. */
    int32_t reserved = 0;
    for (; reserved < n_entries && st == VT_OK; reserved++)
        st = vt_kv_seq_reserve(e->kv, &e->seqs[entries[reserved].seq], entries[reserved].n_tokens, err);
    int64_t rows = 0;
    for (int32_t k = 0; k < n_groups; k++) rows += group_rows(&g[k]);
    if (st == VT_OK) st = ensure_logits(e, rows, err);
    /* The groups touch distinct sequences, and a run advances none: the
     * second sees the pool as the first left it. */
    for (int32_t k = 0, base = 0; k < n_groups && st == VT_OK; k++) {
        int64_t written = 0;
        st = run_entries(e, g[k].plan, g[k].entries, g[k].index, g[k].n, g[k].total, base, &written, err);
        base += (int32_t)written;
    }
    free(sorted), free(index);
    if (st != VT_OK) {
        /* the blocks reserved for this step back (reserved counts the entry
         * whose reservation failed too: trimming it gives nothing back), and
         * no entry's logits (a group that ran set some) */
        for (int32_t i = 0; i < reserved; i++) vt_kv_seq_trim(e->kv, &e->seqs[entries[i].seq]);
        for (int32_t i = 0; i < n_entries; i++) e->step_rows[i] = -1;
        return st;
    }
    for (int32_t i = 0; i < n_entries; i++)
        vt_kv_seq_commit(e->kv, &e->seqs[entries[i].seq], entries[i].tokens, entries[i].n_tokens);
    e->logits_rows = rows;
    return VT_OK;
}

const float *vt_engine_step_logits(const vt_engine *e, int32_t entry) {
    if (entry < 0 || entry >= e->max_seqs || e->step_rows[entry] < 0) return NULL;
    return e->logits + (int64_t)e->step_rows[entry] * e->model->hp.n_vocab;
}

int64_t vt_engine_seq_len(const vt_engine *e, int32_t seq) {
    return seq >= 0 && seq < e->max_seqs ? e->seqs[seq].n_tokens : 0;
}

void vt_engine_seq_release(vt_engine *e, int32_t seq) {
    if (seq >= 0 && seq < e->max_seqs) vt_kv_seq_release(e->kv, &e->seqs[seq]);
}

bool vt_engine_seq_truncate(vt_engine *e, int32_t seq, int64_t n) {
    if (seq < 0 || seq >= e->max_seqs || n < 0 || n > e->seqs[seq].n_tokens) return false;
    if (n < e->seqs[seq].n_tokens) { /* the last eval's or step's rows may be of tokens now gone */
        if (seq == 0) e->logits_rows = 0;
        for (int32_t i = 0; i < e->max_seqs; i++) e->step_rows[i] = -1;
    }
    return vt_kv_seq_truncate(e->kv, &e->seqs[seq], n);
}

vt_status vt_engine_seq_fork(vt_engine *e, int32_t src, int32_t dst, vt_error *err) {
    if (src < 0 || src >= e->max_seqs || dst < 0 || dst >= e->max_seqs || src == dst)
        return vt_fail(err, VT_ERR_INVALID, "fork: sequences %d -> %d (engine has 0..%d, and they must differ)", src,
                       dst, e->max_seqs - 1);
    return vt_kv_seq_fork(e->kv, &e->seqs[src], &e->seqs[dst], err);
}

int32_t vt_engine_free_blocks(const vt_engine *e) { return vt_kv_cache_available(e->kv); }

int64_t vt_engine_seq_attach_prefix(vt_engine *e, int32_t seq, const int32_t *tokens, int64_t n) {
    if (seq < 0 || seq >= e->max_seqs) return 0;
    return vt_kv_seq_attach_prefix(e->kv, &e->seqs[seq], tokens, n);
}

int64_t vt_engine_match_prefix(const vt_engine *e, const int32_t *tokens, int64_t n, int32_t *taken,
                               uint8_t *marked) {
    return vt_kv_cache_match_prefix(e->kv, tokens, n, taken, marked);
}

int32_t vt_engine_kv_blocks(const vt_engine *e) {
    return e->kv->num_blocks;
}

const vt_model *vt_engine_model(const vt_engine *e) { return e->model; }
int32_t vt_engine_max_seqs(const vt_engine *e) { return e->max_seqs; }
int64_t vt_engine_max_step_tokens(const vt_engine *e) { return e->prefill->max_tokens; }
int64_t vt_engine_ctx_size(const vt_engine *e) { return e->ctx_size; }
int32_t vt_engine_block_size(const vt_engine *e) { return e->kv->block_size; }
int32_t vt_engine_total_blocks(const vt_engine *e) { return e->kv->num_blocks; }
const vt_kv_cache *vt_engine_kv_cache(const vt_engine *e) { return e->kv; }
vt_registry *vt_engine_registry(const vt_engine *e) { return e->registry; }
int32_t vt_engine_preferred(const vt_engine *e) { return e->preferred; }
vt_plan *vt_engine_plan(const vt_engine *e, int phase) { return phase == VT_PHASE_DECODE ? e->decode : e->prefill; }
const vt_auto_costs *vt_engine_costs(const vt_engine *e) { return e->costs; }
const vt_host *vt_engine_host(const vt_engine *e) { return e->host; }
const vt_weight_prep *vt_engine_prepared(const vt_engine *e) { return e->prepared; }
int32_t vt_engine_kv_dtype(const vt_engine *e) { return e->kv->dtype; }
double vt_engine_create_seconds(const vt_engine *e) { return e->create_seconds; }

void vt_engine_parallel_for(vt_engine *e, int64_t n, int64_t grain, vt_range_fn fn, void *arg) {
    vt_threadpool_parallel_for(e->pool, n, grain, fn, arg);
}

bool vt_engine_uses_class(const vt_engine *e, int k) {
    const vt_plan *plans[2] = {e->prefill, e->decode};
    for (int pi = 0; pi < 2; pi++)
        for (int32_t i = 0; plans[pi] && i < plans[pi]->n_nodes; i++)
            if (plans[pi]->nodes[i].cost_class == k) return true;
    return false;
}

int vt_engine_n_classes(const vt_engine *e) {
    int n = 0;
    for (int k = 0; e->costs && k < e->costs->n; k++) n += vt_engine_uses_class(e, k);
    return n;
}

void vt_engine_explain(const vt_engine *e, FILE *f) {
    vt_plan_explain(e->prefill, f);
    vt_plan_explain(e->decode, f);
    const vt_backend_entry *pb = vt_registry_at(e->registry, e->preferred);
    const vt_backend_entry *fb = e->fallback >= 0 ? vt_registry_at(e->registry, e->fallback) : NULL;
    /* where each came from: an explicit choice names its source, the
     * automatic ones the ranking that picked them */
    if (e->costs) {
        const vt_auto_costs *c = e->costs;
        fprintf(f, "backend: auto (from %s): each node on the candidate with the lowest measured time of its shape "
                   "class; unmeasured: %s, then %s\n",
                vt_options_source(&e->opt, "runtime.backend"), pb->name, fb ? fb->name : "none");
        /* the cache also holds other models' classes: its totals are said as its own */
        fprintf(f, "auto: %d shape classes in these plans, %d times measured now (%d more for close calls) in %.2f s; "
                   "the calibration cache%s%s holds %d classes (%d times read from it)\n",
                vt_engine_n_classes(e), c->measured, c->retimed, c->calibration_seconds, c->cache_path[0] ? " " : "",
                c->cache_path, c->n, c->from_cache);
    } else {
        fprintf(f, "backend: %s (fallback: %s); backend from %s; fallback from %s\n", pb->name,
                fb                           ? fb->name
                : fallback_is_self(e)        ? "none: runtime.fallback names the backend itself"
                                             : "none",
                e->opt.backend[0] ? vt_options_source(&e->opt, "runtime.backend") : "the highest probe score",
                e->opt.fallback[0] ? vt_options_source(&e->opt, "runtime.fallback")
                                   : "the highest probe score after the preferred backend");
    }
    /* the files those names resolved to: a plugin of the same name earlier
     * on the search path shadows another (vt backends lists both) */
    fprintf(f, "backend files: %s %s", pb->name, pb->path);
    if (fb) fprintf(f, ", %s %s", fb->name, fb->path);
    fputc('\n', f);
    /* the pool is whole blocks; a sequence holds the context asked for */
    fprintf(f, "kv-cache dtype: %s (from %s); %lld tokens in %d blocks of %d, %.1f MiB; a sequence holds up to %lld "
               "(-c/--ctx-size)\n",
            vt_dtype_name(e->kv->dtype), e->opt.kv_cache_dtype_source, (long long)vt_kv_cache_capacity(e->kv),
            e->kv->num_blocks, e->kv->block_size, (double)vt_kv_cache_bytes(e->kv) / (1024.0 * 1024.0),
            (long long)e->ctx_size);
    if (e->kv->prefix_cache)
        fprintf(f, "prefix cache: on (kv_cache.prefix_cache from %s): prompts share the cached blocks of a common "
                   "beginning\n",
                vt_options_source(&e->opt, "kv_cache.prefix_cache"));
    else if (!e->opt.prefix_cache)
        fprintf(f, "prefix cache: off (kv_cache.prefix_cache = 0 from %s)\n",
                vt_options_source(&e->opt, "kv_cache.prefix_cache"));
    else
        fprintf(f, "prefix cache: off: the prefill and decode plans compute some node on different backends or "
                   "dtypes, so a cached block could differ from computing it again\n");
    vt_weight_prep_print(e->prepared, f);
}
