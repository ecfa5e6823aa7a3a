/* prepare.c — simd's weight-prepare hook (ABI 1.2): which weight dtypes it
 * copies into a layout of its own kernels at engine creation, and the copy's
 * life. The table maps a dtype to its layout's size, its preparation (split
 * over the runtime's threads: repacking must not slow engine creation) and
 * the matmul driver that reads it; each layout lives in its own file
 * (matmul_<dtype>_prepared.c). A dtype without an entry, and a weight read by
 * anything but MATMUL, is declined: its nodes run on the file's bytes exactly
 * as before. GET_ROWS too is served from the copy where the layout decodes
 * single rows (row_to_f32): a tied embedding, the output matmul's weight
 * and the token table at once, then needs no second resident copy. A stack
 * of experts read by MOE_MATMUL is prepared expert by expert into slices of
 * one copy (moe_matmul.c reads expert e's slice as a prepared matrix). */
#include <stdio.h>
#include <string.h>

#include "simd.h"

/* Layouts, one per file. */
size_t simd_q4_k_prepared_size(int64_t K, int64_t N);
int64_t simd_q4_k_prepared_units(int64_t N);
void simd_q4_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1);
vt_status simd_q4_k_prepared_matmul(simd_ctx *ctx, const vt_node *node);
const struct simd_group_layout *simd_q4_k_group_layout(const simd_ctx *ctx);
size_t simd_q6_k_prepared_size(int64_t K, int64_t N);
int64_t simd_q6_k_prepared_units(int64_t N);
void simd_q6_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1);
vt_status simd_q6_k_prepared_matmul(simd_ctx *ctx, const vt_node *node);
void simd_q6_k_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst);
const struct simd_group_layout *simd_q6_k_group_layout(const simd_ctx *ctx);
size_t simd_q5_k_prepared_size(int64_t K, int64_t N);
int64_t simd_q5_k_prepared_units(int64_t N);
void simd_q5_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1);
vt_status simd_q5_k_prepared_matmul(simd_ctx *ctx, const vt_node *node);
const struct simd_group_layout *simd_q5_k_group_layout(const simd_ctx *ctx);
size_t simd_q4_0_prepared_size(int64_t K, int64_t N);
int64_t simd_q4_0_prepared_units(int64_t N);
void simd_q4_0_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1);
vt_status simd_q4_0_prepared_matmul(simd_ctx *ctx, const vt_node *node);
const struct simd_group_layout *simd_q4_0_group_layout(const simd_ctx *ctx);
void simd_q4_0_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst);
size_t simd_q8_0_prepared_size(int64_t K, int64_t N);
int64_t simd_q8_0_prepared_units(int64_t N);
void simd_q8_0_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1);
vt_status simd_q8_0_prepared_matmul(simd_ctx *ctx, const vt_node *node);
const struct simd_group_layout *simd_q8_0_group_layout(const simd_ctx *ctx);
void simd_q8_0_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst);

static const simd_prepared_format formats[] = {
    {VT_Q4_K, simd_q4_k_prepared_size, simd_q4_k_prepared_units, simd_q4_k_prepare, simd_q4_k_prepared_matmul, NULL,
     simd_q4_k_group_layout},
    {VT_Q5_K, simd_q5_k_prepared_size, simd_q5_k_prepared_units, simd_q5_k_prepare, simd_q5_k_prepared_matmul, NULL,
     simd_q5_k_group_layout},
    {VT_Q6_K, simd_q6_k_prepared_size, simd_q6_k_prepared_units, simd_q6_k_prepare, simd_q6_k_prepared_matmul,
     simd_q6_k_prepared_row, simd_q6_k_group_layout},
    {VT_Q4_0, simd_q4_0_prepared_size, simd_q4_0_prepared_units, simd_q4_0_prepare, simd_q4_0_prepared_matmul,
     simd_q4_0_prepared_row, simd_q4_0_group_layout},
    {VT_Q8_0, simd_q8_0_prepared_size, simd_q8_0_prepared_units, simd_q8_0_prepare, simd_q8_0_prepared_matmul,
     simd_q8_0_prepared_row, simd_q8_0_group_layout},
};

const simd_prepared_format *simd_prepared_format_of(int32_t dtype) {
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (formats[i].dtype == dtype) return &formats[i];
    return NULL;
}

typedef struct prepare_task {
    const simd_prepared_format *f;
    const void *src;
    int64_t K, N;
    void *dst;
} prepare_task;

static void prepare_units(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const prepare_task *t = arg;
    t->f->prepare(t->src, t->K, t->N, t->dst, begin, end);
}

/* A weight read by MATMUL (and, where the layout decodes rows, GET_ROWS) is
 * one {K, N} matrix; a stack of experts {K, N, NE} read by MOE_MATMUL alone
 * is NE of them, each prepared into its own slice. Anything else is
 * declined. Returns the number of matrices, 0 to decline. */
static int64_t matrices_to_prepare(const simd_prepared_format *f, const vt_weight_offer *offer) {
    const vt_tensor *w = &offer->tensor;
    if (!f || w->ne[3] != 1) return 0;
    const uint32_t matrix_readers = (1u << VT_OP_MATMUL) | (f->row_to_f32 ? 1u << VT_OP_GET_ROWS : 0u);
    if ((offer->ops & (1u << VT_OP_MATMUL)) && !(offer->ops & ~matrix_readers) && w->ne[2] == 1) return 1;
    if (offer->ops == (1u << VT_OP_MOE_MATMUL)) return w->ne[2];
    return 0;
}

vt_status simd_prepare_weight(void *opaque, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                              size_t err_size) {
    simd_ctx *ctx = opaque;
    const vt_tensor *w = &offer->tensor;
    const simd_prepared_format *f = simd_prepared_format_of(w->dtype);
    const int64_t n_matrices = matrices_to_prepare(f, offer);
    if (n_matrices < 1) return VT_OK; /* declined */
    const int64_t K = w->ne[0], N = w->ne[1];
    if (K <= 0 || N <= 0 || K % ctx->host->block_length(w->dtype) != 0) return VT_OK;
    const size_t slice = n_matrices == 1 ? f->size(K, N) : simd_expert_slice_bytes(f, K, N);
    const size_t bytes = slice * (size_t)n_matrices;
    void *copy = ctx->host->alloc(bytes, SIMD_ALIGN);
    if (!copy) {
        snprintf(err, err_size, "out of memory allocating %zu bytes for the prepared copy", bytes);
        return VT_ERR_NOMEM;
    }
    const size_t src_matrix_bytes = ctx->host->row_size(w->dtype, K) * (size_t)N;
    for (int64_t e = 0; e < n_matrices; e++) {
        prepare_task t = {f, (const char *)w->data + (size_t)e * src_matrix_bytes, K, N, (char *)copy + (size_t)e * slice};
        vt_host_parallel_for(ctx->host, f->units(N), 1, prepare_units, &t);
    }
    out->data = copy;
    out->bytes = bytes;
    return VT_OK;
}

void simd_release_weight(void *opaque, void *data) {
    simd_ctx *ctx = opaque;
    ctx->host->free(data);
}
