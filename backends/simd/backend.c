/* backend.c — the simd backend's entry table, init/shutdown and supports().
 * Built without AVX flags (it runs before and besides the kernels); the op
 * pointers lead into the AVX2 translation units, which the runtime only calls
 * after vt_backend_probe said this CPU has what they need. */
#include <stdio.h>
#include <string.h>

#include "simd.h"
#include "vt/vt_backend_options.h"
#include "vt/vt_check.h"
#include "vt/vt_cpu.h"

void *simd_scratch(simd_ctx *ctx, size_t size) {
    if (size <= ctx->scratch_size) return ctx->scratch;
    ctx->host->free(ctx->scratch);
    ctx->scratch = NULL;
    ctx->scratch_size = 0;
    /* grow geometrically so a prefill of slightly more tokens does not reallocate */
    size_t want = simd_align_up(size + size / 4);
    ctx->scratch = ctx->host->alloc(want, SIMD_ALIGN);
    if (!ctx->scratch) return NULL;
    ctx->scratch_size = want;
    return ctx->scratch;
}

/* Why the AVX-512 VNNI tier cannot run here, or NULL when it can. */
static const char *avx512_vnni_missing(void) {
    const vt_cpu_features f = vt_cpu_detect();
    if (!f.os_saves_zmm) return "the CPU or OS lacks AVX-512 state (XCR0 bits 5-7)";
    if (!f.avx512f || !f.avx512bw || !f.avx512vl) return "the CPU lacks AVX-512 F/BW/VL";
    if (!f.avx512_vnni) return "the CPU lacks AVX-512 VNNI";
    return NULL;
}

/* config->options: "isa=auto|avx2|avx512" (auto: the best tier the CPU
 * and OS run; a tier asked for that cannot run here is an error naming what
 * is missing). Any other key is an error: a setting is never ignored. */
static bool set_option(void *opaque, const char *key, const char *value, char *err, size_t err_size) {
    simd_ctx *ctx = opaque;
    if (strcmp(key, "isa") != 0) {
        snprintf(err, err_size, "simd: unknown option '%.64s' (simd takes isa=auto|avx2|avx512)", key);
        return false;
    }
    if (strcmp(value, "avx2") == 0) {
        ctx->isa = SIMD_ISA_AVX2;
    } else if (strcmp(value, "avx512") == 0) {
        const char *missing = avx512_vnni_missing();
        if (missing) {
            snprintf(err, err_size, "simd: isa=avx512 cannot run here: %s", missing);
            return false;
        }
        ctx->isa = SIMD_ISA_AVX512_VNNI;
    } else if (strcmp(value, "auto") != 0) {
        snprintf(err, err_size, "simd: isa=%.64s: expected auto, avx2 or avx512", value);
        return false;
    }
    return true;
}

static bool parse_options(simd_ctx *ctx, const char *options, char *err, size_t err_size) {
    ctx->isa = avx512_vnni_missing() ? SIMD_ISA_AVX2 : SIMD_ISA_AVX512_VNNI;
    if (!vt_backend_options_each(options, "simd: ", set_option, ctx, err, err_size)) return false;
    /* BF16 weights in bf16: part of the avx512 tier where the CPU has it */
    ctx->bf16_dot = ctx->isa == SIMD_ISA_AVX512_VNNI && vt_cpu_detect().avx512_bf16;
    return true;
}

static vt_status simd_init(const vt_host *host, const vt_backend_config *config, void **out, char *err,
                           size_t err_size) {
    *out = NULL;
    if (!host || !host->alloc || !host->free || !host->parallel_for) {
        snprintf(err, err_size, "simd: host table lacks alloc/free/parallel_for");
        return VT_ERR_INVALID;
    }
    simd_ctx *ctx = host->alloc(sizeof *ctx, SIMD_ALIGN);
    if (!ctx) {
        snprintf(err, err_size, "simd: out of memory allocating the context");
        return VT_ERR_NOMEM;
    }
    memset(ctx, 0, sizeof *ctx);
    if (!parse_options(ctx, config ? config->options : NULL, err, err_size)) {
        host->free(ctx);
        return VT_ERR_INVALID;
    }
    ctx->host = host;
    ctx->n_threads = host->n_threads > 0 ? host->n_threads : (config && config->n_threads > 0 ? config->n_threads : 1);
    *out = ctx;
    return VT_OK;
}

static void simd_shutdown(void *opaque) {
    simd_ctx *ctx = opaque;
    if (!ctx) return;
    const vt_host *host = ctx->host;
    simd_rope_tables_free(ctx);
    host->free(ctx->scratch);
    host->free(ctx);
}

/* ---- supports() ---------------------------------------------------------- */

/* simd's kernels cover every node the operand conventions allow (their
 * tiles handle any K in whole blocks, any N and M, every float dtype in and
 * out), so it accepts exactly the conventions, checked as strictly as the
 * reference checks them. */
static int simd_supports(void *ctx, const vt_node *node) {
    (void)ctx;
    return vt_check_convention(node, NULL, 0) ? 1 : 0;
}

/* The tier init chose; a higher tier has only some kernels of its own. Its
 * matmuls are those on the layouts prepare.c makes, and on a weight left in
 * the file's layout (one that nodes of several backends read) the decode
 * pairs of Q4_K and Q6_K (Q4_K_M's dtypes); with AVX-512 BF16, BF16
 * weights in bf16 (matmul_bf16_dp.c) and attention over BF16 caches in bf16
 * (kv_bf16_chunk.h); the rest are the avx2 kernels.
 * Callers read this into 256 bytes (the core's VT_BACKEND_ISA_MAX). */
static const char *simd_isa_name(void *opaque) {
    const simd_ctx *ctx = opaque;
    if (ctx->isa == SIMD_ISA_AVX2) return "avx2";
    return ctx->bf16_dot ? "avx512_vnni (prepared q4_k, q5_k, q6_k, q8_0, q4_0 matmul; file-layout q4_k, q6_k decode; "
                           "attention; avx512_bf16: bf16 weights in bf16 matmul, bf16 caches in bf16 attention; "
                           "the rest avx2)"
                         : "avx512_vnni (prepared q4_k, q5_k, q6_k, q8_0, q4_0 matmul; file-layout q4_k, q6_k decode; "
                           "attention; the rest avx2)";
}

/* Both tiers where the CPU and OS run the AVX-512 one, else AVX2 alone. */
static const char *const *simd_tiers(void *opaque) {
    (void)opaque;
    static const char *const both[] = {"isa=avx512", "isa=avx2", NULL};
    static const char *const avx2_only[] = {"isa=avx2", NULL};
    return avx512_vnni_missing() ? avx2_only : both;
}

static const vt_backend simd_backend = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = SIMD_BACKEND_NAME,
    .description = "AVX2/FMA/F16C kernels (an AVX-512 VNNI tier where the CPU has one): 8-bit integer dot "
                   "products for quantized weights",
    .init = simd_init,
    .shutdown = simd_shutdown,
    .supports = simd_supports,
    .matmul = simd_matmul,
    .attention = simd_attention,
    .reshape_and_cache = simd_reshape_and_cache,
    .rms_norm = simd_rms_norm,
    .rope = simd_rope,
    .swiglu = simd_swiglu,
    .add = simd_add,
    .get_rows = simd_get_rows,
    .convert = simd_convert,
    .moe_route = simd_moe_route,
    .moe_matmul = simd_moe_matmul,
    .moe_combine = simd_moe_combine,
    .prepare_weight = simd_prepare_weight,
    .release_weight = simd_release_weight,
    .isa = simd_isa_name,
    /* attention and the store read and write Q8_0 caches; rope reads frequency factors */
    .conventions = VT_CONVENTION_KV_Q8_0 | VT_CONVENTION_ROPE_FACTORS,
    .tiers = simd_tiers,
};

VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &simd_backend; }
