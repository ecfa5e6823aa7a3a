/* onednn_backend.c — the onednn backend's entry table: probe, init, shutdown,
 * supports.
 *
 * Options ([backend.onednn] in the ini, "key=value,..."):
 *   threading=tiles       how tiles use the cores: vt's threads over weight
 *                         tiles (the only mode; omp is refused, see matmul.c)
 *   tile_kib=N            dequantized tile budget per thread (default 384)
 *   decode=0|1            accept MATMUL in the decode phase (default 0)
 *   precision=auto|f32|bf16|int8  what the matmuls multiply in (default auto:
 *                         bf16 where oneDNN runs it in hardware, else f32;
 *                         int8: quantized weights prepared as int8, see
 *                         int8_weight.c, the rest as auto)
 *   int8_max_mib=N        what int8's prepared weights may keep resident
 *                         (default 0: no bound)
 * Weight tiles are always converted by host->to_f32, which picks the core's
 * fastest path for the CPU itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onednn.h"
#include "vt/vt_backend_options.h"

/* Zen3's L2 is 512 KiB per core; leaving room for the activation panel and
 * the gemm's packing buffers. Measured in bench/onednn_matmul_bench.c. */
#define ONEDNN_DEFAULT_TILE_KIB 384

static int onednn_supports(void *opaque, const vt_node *node) {
    const onednn_ctx *ctx = opaque;
    switch (node->op) {
    case VT_OP_MATMUL:
        return onednn_matmul_supports(ctx, node);
    default:
        return 0;
    }
}

/* Parse "key=value,..." into ctx. Unknown keys and bad values are errors so a
 * typo in the ini does not silently change nothing. */
static bool set_option(void *opaque, const char *key, const char *value, char *err, size_t err_size) {
    onednn_ctx *ctx = opaque;
    char *end = NULL;
    if (strcmp(key, "threading") == 0 && strcmp(value, "tiles") == 0) {
        /* the only mode */
    } else if (strcmp(key, "threading") == 0 && strcmp(value, "omp") == 0) {
        snprintf(err, err_size,
                 "threading=omp is not offered: oneDNN's threads split a call's rows by its size, so a "
                 "sequence's results would depend on the others in its step; threading=tiles is the only mode");
        return false;
    } else if (strcmp(key, "tile_kib") == 0) {
        long kib = strtol(value, &end, 10);
        if (!*value || *end || kib < 16 || kib > 65536) {
            snprintf(err, err_size, "tile_kib=%s: expected 16..65536", value);
            return false;
        }
        ctx->tile_bytes = (size_t)kib * 1024;
    } else if (strcmp(key, "decode") == 0 && (strcmp(value, "0") == 0 || strcmp(value, "1") == 0)) {
        ctx->decode_matmul = value[0] == '1';
    } else if (strcmp(key, "precision") == 0 && strcmp(value, "auto") == 0) {
        ctx->precision_option = -1;
    } else if (strcmp(key, "precision") == 0 && strcmp(value, "f32") == 0) {
        ctx->precision_option = ONEDNN_PRECISION_F32;
    } else if (strcmp(key, "precision") == 0 && strcmp(value, "bf16") == 0) {
        ctx->precision_option = ONEDNN_PRECISION_BF16;
    } else if (strcmp(key, "precision") == 0 && strcmp(value, "int8") == 0) {
        ctx->precision_option = ONEDNN_PRECISION_INT8;
    } else if (strcmp(key, "int8_max_mib") == 0) {
        long long mib = strtoll(value, &end, 10);
        if (!*value || *end || mib < 0 || mib > (1LL << 30)) {
            snprintf(err, err_size, "int8_max_mib=%s: expected 0 (no bound) .. %lld", value, 1LL << 30);
            return false;
        }
        ctx->int8_max_bytes = (size_t)mib << 20;
    } else {
        snprintf(err, err_size,
                 "unknown option or value '%s=%s' (threading=tiles, tile_kib=N, decode=0|1, "
                 "precision=auto|f32|bf16|int8, int8_max_mib=N)",
                 key, value);
        return false;
    }
    return true;
}

static bool parse_options(onednn_ctx *ctx, const char *options, char *err, size_t err_size) {
    return vt_backend_options_each(options, "", set_option, ctx, err, err_size);
}

static void onednn_shutdown(void *opaque) {
    onednn_ctx *ctx = opaque;
    if (!ctx) return;
    onednn_matmul_cache_free(ctx);
    onednn_int8_cache_free(ctx);
    if (ctx->workers) {
        for (int i = 0; i < ctx->n_threads; i++) {
            onednn_worker *w = &ctx->workers[i];
            if (w->stream) dnnl_stream_destroy(w->stream);
            ctx->host->free(w->tile);
            ctx->host->free(w->tile16);
            ctx->host->free(w->scratch);
            ctx->host->free(w->tile_y);
        }
        free(ctx->workers);
    }
    ctx->host->free(ctx->x16);
    ctx->host->free(ctx->pad_x);
    ctx->host->free(ctx->x8);
    ctx->host->free(ctx->x_scale);
    ctx->host->free(ctx->y32);
    if (ctx->engine) dnnl_engine_destroy(ctx->engine);
    free(ctx);
}

static vt_status onednn_init(const vt_host *host, const vt_backend_config *config, void **out, char *err,
                             size_t err_size) {
    *out = NULL;
    onednn_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return VT_ERR_NOMEM;
    ctx->host = host;
    ctx->n_threads = host->n_threads > 0 ? host->n_threads : 1;
    ctx->tile_bytes = (size_t)ONEDNN_DEFAULT_TILE_KIB * 1024;
    ctx->precision_option = -1;
    if (!parse_options(ctx, config ? config->options : NULL, err, err_size)) {
        free(ctx);
        return VT_ERR_INVALID;
    }
    if (!onednn_omp_bind())
        host->log(VT_LOG_INFO, ONEDNN_NAME, "no OpenMP runtime loaded: oneDNN runs single-threaded");
    onednn_omp_set_threads(ctx->n_threads);

    if (dnnl_engine_create(&ctx->engine, dnnl_cpu, 0) != dnnl_success) {
        snprintf(err, err_size, "dnnl_engine_create(cpu) failed");
        onednn_shutdown(ctx);
        return VT_ERR_BACKEND;
    }
    ctx->workers = calloc((size_t)ctx->n_threads, sizeof(*ctx->workers));
    if (!ctx->workers) {
        onednn_shutdown(ctx);
        return VT_ERR_NOMEM;
    }
    for (int i = 0; i < ctx->n_threads; i++) {
        if (dnnl_stream_create(&ctx->workers[i].stream, ctx->engine, dnnl_stream_default_flags) != dnnl_success) {
            snprintf(err, err_size, "dnnl_stream_create failed");
            onednn_shutdown(ctx);
            return VT_ERR_BACKEND;
        }
    }

    onednn_caps_query(ctx->engine, &ctx->caps);
    /* bf16 where the CPU multiplies it in hardware (3.3x f32 per matmul at
     * M = 128 on AVX-512 BF16); elsewhere oneDNN emulates it, slower than f32
     * (both measured in README.md). */
    if (ctx->precision_option == ONEDNN_PRECISION_BF16 && !ctx->caps.bf16_native) {
        snprintf(err, err_size,
                 "precision=bf16: oneDNN has no bf16 matmul in hardware here (its instruction-set limit is %s; "
                 "bf16 needs avx512_core_bf16 or avx512_core_amx)",
                 ctx->caps.isa_name);
        onednn_shutdown(ctx);
        return VT_ERR_UNSUPPORTED;
    }
    if (ctx->precision_option == ONEDNN_PRECISION_INT8 && !ctx->caps.matmul_s8) {
        snprintf(err, err_size,
                 "precision=int8: oneDNN has no int8 matmul here (its instruction-set limit is %s; exact integer "
                 "products need avx512_core_vnni, avx2_vnni or AMX)",
                 ctx->caps.isa_name);
        onednn_shutdown(ctx);
        return VT_ERR_UNSUPPORTED;
    }
    const onednn_precision automatic = ctx->caps.bf16_native ? ONEDNN_PRECISION_BF16 : ONEDNN_PRECISION_F32;
    ctx->precision = ctx->precision_option >= 0 ? (onednn_precision)ctx->precision_option : automatic;
    ctx->tile_precision = ctx->precision == ONEDNN_PRECISION_INT8 ? automatic : ctx->precision;
    const bool bf16 = ctx->tile_precision == ONEDNN_PRECISION_BF16;
    const char *f32_impl = ctx->caps.matmul_f32 ? ctx->caps.matmul_f32_impl : "unavailable";
    /* within ctx->isa's 256 bytes (all the runtime reads; oneDNN's names are shorter
     * than these bounds: "brg:avx512_core_amx_bf16" is the longest) */
    if (ctx->precision == ONEDNN_PRECISION_INT8 && bf16)
        snprintf(ctx->isa, sizeof ctx->isa,
                 "%.31s (int8 matmul %.24s on its copies; unprepared weights: bf16 matmul %.24s, f32/f16 weights "
                 "f32 %.24s)",
                 ctx->caps.isa_name, ctx->caps.matmul_s8_impl, ctx->caps.matmul_bf16_impl, f32_impl);
    else if (ctx->precision == ONEDNN_PRECISION_INT8)
        snprintf(ctx->isa, sizeof ctx->isa, "%.31s (int8 matmul %.24s on its copies; unprepared weights: f32 %.24s)",
                 ctx->caps.isa_name, ctx->caps.matmul_s8_impl, f32_impl);
    else if (bf16)
        snprintf(ctx->isa, sizeof ctx->isa, "%.31s (bf16 matmul %.24s; f32/f16 weights: f32 %.24s)",
                 ctx->caps.isa_name, ctx->caps.matmul_bf16_impl, f32_impl);
    else
        snprintf(ctx->isa, sizeof ctx->isa, "%.31s (f32 matmul %.24s)", ctx->caps.isa_name, f32_impl);
    const dnnl_version_t *v = dnnl_version();
    host->log(VT_LOG_INFO, ONEDNN_NAME,
              "oneDNN %d.%d.%d: f32 matmul %s (%s), bf16 %s%s, f16 %s; precision=%s tile=%zu KiB",
              v->major, v->minor, v->patch, ctx->caps.matmul_f32 ? "yes" : "no", ctx->caps.matmul_f32_impl,
              ctx->caps.matmul_bf16 ? "yes" : "no", ctx->caps.bf16_native ? " (in hardware)" : "",
              ctx->caps.matmul_f16 ? "yes" : "no",
              ctx->precision == ONEDNN_PRECISION_INT8 ? "int8" : bf16 ? "bf16" : "f32", ctx->tile_bytes / 1024);
    if (ctx->int8_max_bytes && ctx->precision != ONEDNN_PRECISION_INT8)
        host->log(VT_LOG_WARN, ONEDNN_NAME, "int8_max_mib=%zu has nothing to bound: precision is %s, not int8",
                  ctx->int8_max_bytes >> 20, bf16 ? "bf16" : "f32");
    /* Without f32 matmul supports() declines everything; that is a working
     * (if useless) backend, not an init failure. */
    if (!ctx->caps.matmul_f32)
        host->log(VT_LOG_WARN, ONEDNN_NAME, "oneDNN has no f32 matmul here: every op is declined");
    *out = ctx;
    return VT_OK;
}

static const char *onednn_isa(void *opaque) {
    const onednn_ctx *ctx = opaque;
    return ctx->isa;
}

static const vt_backend onednn_backend = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = ONEDNN_NAME,
    .description = "oneDNN matmul in prefill: f32 or bf16 (in hardware) over dequantized weight tiles, or int8 on copies when asked",
    .init = onednn_init,
    .shutdown = onednn_shutdown,
    .supports = onednn_supports,
    .matmul = onednn_matmul,
    .prepare_weight = onednn_prepare_weight,
    .release_weight = onednn_release_weight,
    .isa = onednn_isa,
    .conventions = 0, /* no attention or store here */
    /* precision=int8's copies serve the prefill matmuls while the fallback
     * decodes from the file (int8_weight.c); other precisions decline */
    .prepare_flags = VT_PREPARE_SHARED,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &onednn_backend; }

/* oneDNN dispatches at run time (reference code below SSE4.1, JIT above), so
 * any x86-64 or other CPU can run it; nothing to refuse. Score 50: above
 * reference (10), below simd (100), which wins decode and quantized prefill. */
VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    if (reason && reason_size) reason[0] = '\0';
    return 50;
}
