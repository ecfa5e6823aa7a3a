/* caps.c — asking oneDNN, at init, which matmuls it implements here.
 *
 * oneDNN's answer depends on the CPU (e.g. bf16/f16 matmul need AVX-512 or
 * AMX in 2.6), so supports() must not assume: we create a primitive
 * descriptor of each kind and record whether that succeeded, and oneDNN's
 * own instruction-set limit says whether bf16 runs in hardware. */
#include <stdio.h>
#include <string.h>

#include "onednn.h"

/* A probe shape: K=256, N=64, M given at run time, weights in "ba" layout
 * (rows of K, GGUF's layout), dst rows of N. */
static bool matmul_implemented(dnnl_engine_t engine, dnnl_data_type_t in_type, char *impl, size_t impl_size) {
    const int64_t k = 256, n = 64;
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    dnnl_dims_t src_dims = {DNNL_RUNTIME_DIM_VAL, k}, src_strides = {k, 1};
    dnnl_dims_t wei_dims = {k, n}, wei_strides = {1, k};
    dnnl_dims_t dst_dims = {DNNL_RUNTIME_DIM_VAL, n}, dst_strides = {n, 1};
    if (dnnl_memory_desc_init_by_strides(&src_md, 2, src_dims, in_type, src_strides) != dnnl_success) return false;
    if (dnnl_memory_desc_init_by_strides(&wei_md, 2, wei_dims, in_type, wei_strides) != dnnl_success) return false;
    if (dnnl_memory_desc_init_by_strides(&dst_md, 2, dst_dims, dnnl_f32, dst_strides) != dnnl_success) return false;
    dnnl_matmul_desc_t desc;
    if (dnnl_matmul_desc_init(&desc, &src_md, &wei_md, NULL, &dst_md) != dnnl_success) return false;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) != dnnl_success) return false;
    if (impl && impl_size) {
        const char *name = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name)
            snprintf(impl, impl_size, "%s", name);
    }
    dnnl_primitive_desc_destroy(pd);
    return true;
}

/* Whether oneDNN has an integer matmul here: u8 x s8 -> s32 with the
 * weights in whatever layout it prefers, at a fixed M (with a run-time M
 * oneDNN 2.6 falls back to its plain gemm, which never uses AMX). */
static bool matmul_s8_implemented(dnnl_engine_t engine, char *impl, size_t impl_size) {
    dnnl_primitive_desc_t pd = onednn_int8_matmul_pd(engine, 16, 256, 64);
    if (!pd) return false;
    const char *name = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name)
        snprintf(impl, impl_size, "%s", name);
    dnnl_primitive_desc_destroy(pd);
    /* its reference kernel is far slower than the tile path: not worth a copy */
    return strncmp(impl, "ref", 3) != 0;
}

/* oneDNN's name for the highest instruction set its JIT uses on this CPU. */
static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}

void onednn_caps_query(dnnl_engine_t engine, onednn_caps *caps) {
    memset(caps, 0, sizeof(*caps));
    caps->matmul_f32 = matmul_implemented(engine, dnnl_f32, caps->matmul_f32_impl, sizeof(caps->matmul_f32_impl));
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    snprintf(caps->isa_name, sizeof caps->isa_name, "%s", isa_name(isa));
    caps->matmul_bf16 = matmul_implemented(engine, dnnl_bf16, caps->matmul_bf16_impl, sizeof(caps->matmul_bf16_impl));
    caps->matmul_f16 = matmul_implemented(engine, dnnl_f16, NULL, 0);
    /* Integer products exact in int32 need VNNI (or AMX): without it oneDNN's
     * u8 x s8 kernels add pairs of byte products in saturating int16
     * (vpmaddubsw), which 255 x 127 x 2 overflows, so precision=int8 is
     * refused there rather than silently inexact. */
    const bool vnni = (isa & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni ||
                      (isa & dnnl_cpu_isa_avx2_vnni) == dnnl_cpu_isa_avx2_vnni;
    caps->matmul_s8 = vnni && matmul_s8_implemented(engine, caps->matmul_s8_impl, sizeof(caps->matmul_s8_impl));
    /* dnnl_cpu_isa_t values are bit masks in which each level contains the
     * bits of those below, so this is "at least AVX-512 with BF16". */
    caps->bf16_native = caps->matmul_bf16 && (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}
