/* matmul_cache.c — matmul primitives, created once per shape class.
 *
 * Creating a primitive costs a tenth of a millisecond or more, far more than a small
 * tile's multiply, so each (precision, K, tile rows, dst row stride) class is
 * built once with M left to run time (DNNL_RUNTIME_DIM_VAL) and reused for
 * every call and every M. A model has a handful of weight shapes, so the cache
 * is a short array searched linearly. */
#include <stdlib.h>
#include <string.h>

#include "onednn.h"

/* Memory descriptors of the three operands; m may be DNNL_RUNTIME_DIM_VAL.
 * Source and weights are of the precision, the result f32. */
static bool operand_mds(onednn_precision precision, int64_t m, int64_t k, int64_t n_tile, int64_t ld_dst,
                        dnnl_memory_desc_t *src_md, dnnl_memory_desc_t *wei_md, dnnl_memory_desc_t *dst_md) {
    const dnnl_data_type_t in = precision == ONEDNN_PRECISION_BF16 ? dnnl_bf16 : dnnl_f32;
    dnnl_dims_t src_dims = {m, k}, src_strides = {k, 1};
    /* "ba": element (k, n) at n*K + k, i.e. weight rows as GGUF stores them. */
    dnnl_dims_t wei_dims = {k, n_tile}, wei_strides = {1, k};
    /* A column slice of Y: tile columns of rows that are ld_dst floats apart. */
    dnnl_dims_t dst_dims = {m, n_tile}, dst_strides = {ld_dst, 1};
    return dnnl_memory_desc_init_by_strides(src_md, 2, src_dims, in, src_strides) == dnnl_success &&
           dnnl_memory_desc_init_by_strides(wei_md, 2, wei_dims, in, wei_strides) == dnnl_success &&
           dnnl_memory_desc_init_by_strides(dst_md, 2, dst_dims, dnnl_f32, dst_strides) == dnnl_success;
}

static bool create_entry(onednn_ctx *ctx, onednn_matmul_entry *e) {
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    if (!operand_mds(e->precision, DNNL_RUNTIME_DIM_VAL, e->k, e->n_tile, e->ld_dst, &src_md, &wei_md, &dst_md)) return false;
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &src_md, &wei_md, NULL, &dst_md) != dnnl_success) return false;

    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return false;
    /* User scratchpad: two threads may run primitives at once;
     * the library-managed one can be shared between primitives. */
    bool ok = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;

    /* The primitive's internal threading is fixed at creation from the
     * calling thread's OpenMP thread count: one, as every call runs on one of
     * vt's threads (matmul.c says why oneDNN's own threads are not used). */
    onednn_omp_set_threads(1);
    dnnl_primitive_desc_t pd = NULL;
    ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, ctx->engine, NULL) == dnnl_success;
    dnnl_primitive_attr_destroy(attr);
    if (!ok) return false;

    const dnnl_memory_desc_t *scratch = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (scratch) {
        e->scratch_md = *scratch;
        e->scratch_bytes = dnnl_memory_desc_get_size(scratch);
    } else {
        memset(&e->scratch_md, 0, sizeof(e->scratch_md));
        e->scratch_bytes = 0;
    }
    ok = dnnl_primitive_create(&e->prim, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

const onednn_matmul_entry *onednn_matmul_get(onednn_ctx *ctx, onednn_precision precision, int64_t k, int64_t n_tile,
                                             int64_t ld_dst) {
    for (int i = 0; i < ctx->cache_count; i++) {
        const onednn_matmul_entry *e = ctx->cache[i];
        if (e->precision == precision && e->k == k && e->n_tile == n_tile && e->ld_dst == ld_dst) return e;
    }
    if (ctx->cache_count == ctx->cache_capacity) {
        int capacity = ctx->cache_capacity ? ctx->cache_capacity * 2 : 16;
        onednn_matmul_entry **grown = realloc(ctx->cache, (size_t)capacity * sizeof(*grown));
        if (!grown) return NULL;
        ctx->cache = grown;
        ctx->cache_capacity = capacity;
    }
    onednn_matmul_entry *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->precision = precision;
    e->k = k;
    e->n_tile = n_tile;
    e->ld_dst = ld_dst;
    if (!create_entry(ctx, e)) {
        ctx->host->log(VT_LOG_ERROR, ONEDNN_NAME, "cannot create %s matmul primitive K=%lld N=%lld ld=%lld",
                       precision == ONEDNN_PRECISION_BF16 ? "bf16" : "f32", (long long)k, (long long)n_tile,
                       (long long)ld_dst);
        free(e);
        return NULL;
    }
    ctx->cache[ctx->cache_count++] = e;
    ctx->host->log(VT_LOG_DEBUG, ONEDNN_NAME, "matmul primitive K=%lld N=%lld ld=%lld scratch=%zu", (long long)k,
                   (long long)n_tile, (long long)ld_dst, e->scratch_bytes);
    return e;
}

void onednn_matmul_cache_free(onednn_ctx *ctx) {
    for (int i = 0; i < ctx->cache_count; i++) {
        dnnl_primitive_destroy(ctx->cache[i]->prim);
        free(ctx->cache[i]);
    }
    free(ctx->cache);
    ctx->cache = NULL;
    ctx->cache_count = ctx->cache_capacity = 0;
}

vt_status onednn_execute(const onednn_ctx *ctx, dnnl_primitive_t prim, onednn_worker *worker,
                         const dnnl_memory_desc_t *src_md, const void *x, const dnnl_memory_desc_t *wei_md,
                         const void *w, const dnnl_memory_desc_t *dst_md, void *y,
                         const dnnl_memory_desc_t *scratch_md, size_t scratch_bytes) {
    dnnl_memory_t mem[4] = {NULL, NULL, NULL, NULL};
    /* oneDNN takes non-const handles but only reads src and weights. */
    bool ok = dnnl_memory_create(&mem[0], src_md, ctx->engine, (void *)x) == dnnl_success &&
              dnnl_memory_create(&mem[1], wei_md, ctx->engine, (void *)w) == dnnl_success &&
              dnnl_memory_create(&mem[2], dst_md, ctx->engine, y) == dnnl_success;
    int nargs = 3;
    if (ok && scratch_bytes) {
        ok = dnnl_memory_create(&mem[3], scratch_md, ctx->engine, worker->scratch) == dnnl_success;
        nargs = 4;
    }
    if (ok) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]},
                                   {DNNL_ARG_WEIGHTS, mem[1]},
                                   {DNNL_ARG_DST, mem[2]},
                                   {DNNL_ARG_SCRATCHPAD, mem[3]}};
        ok = dnnl_primitive_execute(prim, worker->stream, nargs, args) == dnnl_success &&
             dnnl_stream_wait(worker->stream) == dnnl_success;
    }
    for (int i = 0; i < 4; i++)
        if (mem[i]) dnnl_memory_destroy(mem[i]);
    return ok ? VT_OK : VT_ERR_BACKEND;
}

vt_status onednn_matmul_run(onednn_ctx *ctx, const onednn_matmul_entry *e, onednn_worker *worker, int64_t m,
                            const void *x, const void *w, float *dst) {
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    if (!operand_mds(e->precision, m, e->k, e->n_tile, e->ld_dst, &src_md, &wei_md, &dst_md)) return VT_ERR_BACKEND;
    return onednn_execute(ctx, e->prim, worker, &src_md, x, &wei_md, w, &dst_md, dst, &e->scratch_md,
                          e->scratch_bytes);
}

vt_status onednn_ensure_buffer(const vt_host *host, void **buf, size_t *capacity, size_t n, size_t size) {
    if (n <= *capacity) return VT_OK;
    host->free(*buf);
    *capacity = 0;
    *buf = host->alloc(n * size, 64);
    if (!*buf) return VT_ERR_NOMEM;
    *capacity = n;
    return VT_OK;
}
