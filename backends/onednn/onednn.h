/* onednn.h — the onednn backend's private state, shared by its files.
 *
 * The backend runs MATMUL through oneDNN's matmul primitive, in f32, or in
 * bf16 where the CPU multiplies bf16 in hardware. GGUF weights (quantized
 * with per-block scales oneDNN cannot express, or F16/BF16) are dequantized
 * tile by tile (a few hundred output rows x K) into a per-thread buffer
 * (rounded to bf16 for the bf16 matmul) and multiplied right away, so no
 * converted copy of the model ever exists.
 *
 * precision=int8, asked for by the user, is the exception: every quantized
 * weight its prefill matmuls read is prepared once (int8_weight.c) as int8
 * rows with one scale per row, in oneDNN's own blocked layout, and those
 * matmuls run oneDNN's integer kernels (VNNI, or AMX where the CPU has it)
 * on activations quantized per row (matmul_int8.c). Decode stays with the
 * fallback on the file's layout, which is smaller to stream (unless
 * decode=1 asks for onednn's decode too): the copy sits beside the file
 * (ABI 1.7's VT_PREPARE_SHARED), bounded by int8_max_mib. */
#ifndef VT_ONEDNN_H
#define VT_ONEDNN_H

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vt/vt_backend.h"

#define ONEDNN_NAME "onednn"

/* The isa line's room: what the runtime reads of it (VT_BACKEND_ISA_MAX). */
#define VT_ONEDNN_ISA_SIZE 256

/* The number format the matmuls multiply in. */
typedef enum onednn_precision {
    ONEDNN_PRECISION_F32 = 0,  /* weights and activations as f32 */
    /* quantized and BF16 weights and the activations in bf16, products summed
     * in f32; F32 and F16 weights stay f32 (rounding them would lose bits the
     * file holds, while a quantized weight's own step is coarser than bf16's
     * and simd already rounds activations for them to 8 bits) */
    ONEDNN_PRECISION_BF16 = 1,
    /* quantized weights prepared as int8 rows with a scale each, activations
     * quantized to int8 per row, products summed exactly in int32 (see
     * matmul_int8.c); weights not prepared (F32/F16/BF16, or read by other
     * backends too) run as under auto */
    ONEDNN_PRECISION_INT8 = 2,
} onednn_precision;

/* What init found oneDNN can do on this machine (primitive descriptors were
 * actually created, not assumed). */
typedef struct onednn_caps {
    bool matmul_f32;  /* f32 x f32 -> f32, runtime M */
    bool matmul_bf16; /* bf16 x bf16 -> f32 (unimplemented on AVX2 in 2.6) */
    bool matmul_f16;  /* f16 x f16 -> f32 (unimplemented on AVX2 in 2.6) */
    /* bf16 in hardware: oneDNN's instruction-set limit is AVX-512 with BF16
     * or AMX (elsewhere a bf16 matmul, if implemented, is emulated and slower
     * than f32) */
    bool bf16_native;
    char matmul_f32_impl[64];  /* oneDNN's implementation name, e.g. "gemm:jit" */
    char matmul_bf16_impl[64]; /* e.g. "brg:avx512_core_bf16" */
    bool matmul_s8;            /* u8 x s8 -> s32 with oneDNN's own weight layout */
    char matmul_s8_impl[64];   /* e.g. "brg:avx512_core_vnni", "brg:avx512_core_amx_int8" */
    char isa_name[32];         /* oneDNN's instruction-set limit on this CPU */
} onednn_caps;

/* One cached matmul primitive: Y[M][ld] (columns 0..n_tile, f32) = X[M][K] x
 * Wt, Wt being n_tile weight rows of K values (oneDNN's "ba" layout), X and
 * Wt both of the entry's precision, M given at execution, one OpenMP thread.
 * Keyed by (precision, k, n_tile, ld_dst). */
typedef struct onednn_matmul_entry {
    onednn_precision precision;
    int64_t k;
    int64_t n_tile;
    int64_t ld_dst;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t scratch_md; /* user-managed scratchpad the primitive needs */
    size_t scratch_bytes;
} onednn_matmul_entry;

/* Per-thread resources: oneDNN streams are not shared between threads, and
 * the scratchpad is user-managed so concurrent executions never share one. */
typedef struct onednn_worker {
    dnnl_stream_t stream;
    float *tile;        /* [tile_capacity] dequantized weight rows */
    size_t tile_capacity;
    uint16_t *tile16;   /* [tile16_capacity] the same rows rounded to bf16 (bf16 precision) */
    size_t tile16_capacity;
    void *scratch;      /* oneDNN scratchpad */
    size_t scratch_bytes;
    float *tile_y;      /* [tile_y_capacity] a padded call's results for one tile (matmul.c, call_rows) */
    size_t tile_y_capacity;
} onednn_worker;

typedef struct onednn_ctx {
    const vt_host *host;
    int n_threads;
    size_t tile_bytes;     /* target size of one dequantized tile (per thread) */
    bool decode_matmul;    /* accept MATMUL in VT_PHASE_DECODE (default no, see supports) */
    int precision_option;  /* -1 auto (the precision option's default), else an onednn_precision */
    onednn_precision precision; /* what the matmuls run at, chosen at init (see onednn_precision) */
    /* precision=int8 without prepared weights: what the tile path runs at */
    onednn_precision tile_precision;
    size_t int8_max_bytes;      /* int8_max_mib: what prepared weights may keep resident (0: no limit) */
    size_t int8_bytes;          /* what they keep now */
    bool int8_full_logged;      /* the warning that int8_max_mib was reached was given */
    bool int8_reference_logged; /* the warning that oneDNN offered only its reference int8 kernel was given */
    onednn_caps caps;
    char isa[VT_ONEDNN_ISA_SIZE]; /* what vt backends and vt bench print: the ISA limit and the matmuls running */
    uint16_t *x16;         /* [x16_capacity] a matmul's activations rounded to bf16 (bf16 precision) */
    size_t x16_capacity;
    /* a matmul's activations padded to a call's size (matmul.c, call_rows) */
    void *pad_x;           /* [pad_x_bytes] every row, then zero rows */
    size_t pad_x_bytes;
    dnnl_engine_t engine;
    onednn_worker *workers; /* [n_threads] */

    /* int8 matmuls (matmul_int8.c): the activations quantized per row, and
     * the integer products before their scales */
    uint8_t *x8;
    size_t x8_capacity;
    float *x_scale;
    size_t x_scale_capacity;
    int32_t *y32;
    size_t y32_capacity;
    struct onednn_int8_prim **int8_cache; /* primitives per (K, N, M), see matmul_int8.c */
    int int8_cache_count;
    int int8_cache_capacity;

    /* [cache_count] of cache_capacity; entries are allocated one by one so a
     * pointer handed out stays valid while the array grows. */
    onednn_matmul_entry **cache;
    int cache_count;
    int cache_capacity;
} onednn_ctx;

/* ---- matmul_cache.c (with the primitives): scratch buffers ---- */
/* *buf of at least n elements of `size` bytes (host->alloc, 64-byte
 * aligned), grown from *capacity; its contents are not kept. */
vt_status onednn_ensure_buffer(const vt_host *host, void **buf, size_t *capacity, size_t n, size_t size);

/* ---- omp_threads.c: the OpenMP runtime oneDNN uses ---- */
/* Bind omp_set_num_threads of the already loaded OpenMP runtime. false if
 * none is loaded (oneDNN then runs sequentially; nothing to set). */
bool onednn_omp_bind(void);
/* Threads oneDNN may use for calls made from the calling thread (OpenMP's
 * thread count is per calling thread). No-op when unbound. */
void onednn_omp_set_threads(int n);

/* ---- caps.c ---- */
/* Create probe primitive descriptors on engine and fill caps. */
void onednn_caps_query(dnnl_engine_t engine, onednn_caps *caps);

/* ---- matmul_cache.c ---- */
/* The primitive for (precision, k, n_tile, ld_dst), single-threaded,
 * creating it on first use; valid until onednn_matmul_cache_free. Call from the op's calling thread only (the cache
 * is not locked). NULL on failure (logged). */
const onednn_matmul_entry *onednn_matmul_get(onednn_ctx *ctx, onednn_precision precision, int64_t k, int64_t n_tile,
                                             int64_t ld_dst);
void onednn_matmul_cache_free(onednn_ctx *ctx);
/* Run a matmul primitive on the calling thread's worker: src x, weights w,
 * dst y under their descriptors, the worker's scratchpad when the
 * primitive needs one (scratch_bytes > 0); waits for it to finish. */
vt_status onednn_execute(const onednn_ctx *ctx, dnnl_primitive_t prim, onednn_worker *worker,
                         const dnnl_memory_desc_t *src_md, const void *x, const dnnl_memory_desc_t *wei_md,
                         const void *w, const dnnl_memory_desc_t *dst_md, void *y,
                         const dnnl_memory_desc_t *scratch_md, size_t scratch_bytes);
/* Run entry: dst[m][0..n_tile) (row stride ld_dst floats) = x[m][0..k) . w[n][0..k)
 * for m < M.  x: {k, M}; w: {k, n_tile} (rows of k), both f32 or both bf16
 * as the entry's precision; dst: {ld_dst, M} f32. */
vt_status onednn_matmul_run(onednn_ctx *ctx, const onednn_matmul_entry *e, onednn_worker *worker, int64_t m,
                            const void *x, const void *w, float *dst);

/* ---- int8_weight.c: prepared int8 weights (precision=int8) ---- */
/* One thread's share of a prepared weight: output rows [n0, n0 + n) (n a
 * multiple of 64 but maybe the last), in oneDNN's layout for a K x n
 * matrix. Each thread multiplies its own slices single-threaded, so no
 * OpenMP team competes with the runtime's threads for the cores. */
typedef struct onednn_int8_slice {
    int64_t n0, n;
    dnnl_memory_desc_t md;
    void *blocked;
} onednn_int8_slice;

#define ONEDNN_INT8_MAX_SLICES 64

typedef struct onednn_int8_weight {
    uint32_t magic;            /* ONEDNN_INT8_MAGIC: the op checks what it was handed */
    int64_t k, n;
    int n_slices;              /* <= ONEDNN_INT8_MAX_SLICES */
    onednn_int8_slice *slice;  /* [n_slices] */
    float *scale;              /* [n]: weight row i ~ scale[i] x its int8 values */
    int32_t *offset;           /* [n]: 128 x the sum of row i's int8 values (the activations' zero point) */
    size_t bytes;              /* resident: the slices, the scales and this */
} onednn_int8_weight;
#define ONEDNN_INT8_MAGIC 0x38746e69u /* "int8" */

/* Whether precision=int8 prepares weights of dtype (the quantized ones). */
bool onednn_int8_dtype(int32_t dtype);
/* oneDNN's u8 x s8 -> s32 matmul of m x k by k x n with the weights in the
 * layout it prefers ("any"), or NULL where it has none; the caller
 * destroys it. */
dnnl_primitive_desc_t onednn_int8_matmul_pd(dnnl_engine_t engine, int64_t m, int64_t k, int64_t n);
/* The memory descriptor oneDNN's int8 matmul wants its K x N weights in
 * (the same for every M on the CPUs measured; matmul_int8.c gives it
 * explicitly, so a primitive for any M reads the prepared bytes). */
bool onednn_int8_weights_md(onednn_ctx *ctx, int64_t k, int64_t n, dnnl_memory_desc_t *md);
vt_status onednn_prepare_weight(void *ctx, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                                size_t err_size);
void onednn_release_weight(void *ctx, void *data);

/* ---- int8_rows.c: row conversions around the integer matmul ---- */
/* q[k] = round(x[k] / scale) with scale = max|x| / 127 (round to nearest,
 * ties to even), stored as u8[k] = q[k] + 128 (oneDNN's fast integer
 * matmuls take unsigned activations); returns scale, 0 for a zero row
 * (whose q are 0), NaN for a row holding an infinity or a NaN. */
float onednn_quantize_row_u8(const float *x, uint8_t *u8, int64_t k);
/* As onednn_quantize_row_u8, the plain int8 values (the weights). */
float onednn_quantize_row_s8(const float *x, int8_t *q, int64_t k);
/* y[j] = ((float)(s[j] - offset[j]) * w_scale[j]) * x_scale, j < n. */
void onednn_scale_row(const int32_t *s, const int32_t *offset, const float *w_scale, float x_scale, float *y,
                      int64_t n);

/* ---- matmul_int8.c ---- */
vt_status onednn_matmul_int8(onednn_ctx *ctx, const onednn_int8_weight *w, const float *x, int64_t m, float *y);
void onednn_int8_cache_free(onednn_ctx *ctx);

/* ---- matmul.c ---- */
int onednn_matmul_supports(const onednn_ctx *ctx, const vt_node *node);
vt_status onednn_matmul(void *ctx, const vt_node *node);

#endif
