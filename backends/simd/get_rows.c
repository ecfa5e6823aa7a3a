/* get_rows.c — embedding lookup: dst row i = f32(table row ids[i]). Float
 * tables are widened here; quantized tables go through the host's exact
 * dequantizer (a lookup reads M rows, so it is never the bottleneck), or,
 * for a table simd prepared (a tied embedding, also the output matmul's
 * weight), through its layout's row decoder, which gives the same values. */
#include "simd.h"

vt_status simd_get_rows(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_host *host = ctx->host;
    const vt_tensor *table = &node->src[0], *ids = &node->src[1];
    const int64_t D = table->ne[0], V = table->ne[1];
    int64_t M = 1;
    for (int i = 0; i < ids->ndim; i++) M *= ids->ne[i];
    const int32_t *id = ids->data;
    float *dst = node->dst.data;
    const size_t row_bytes = host->row_size(table->dtype, D); /* rows are contiguous */
    if (row_bytes == 0) return VT_ERR_INVALID;
    const simd_prepared_format *prepared = NULL;
    if (node->prepared & 1u) {
        prepared = simd_prepared_format_of(table->dtype);
        if (!prepared || !prepared->row_to_f32) return VT_ERR_INVALID;
    }
    for (int64_t i = 0; i < M; i++) {
        if (id[i] < 0 || id[i] >= V) return VT_ERR_INVALID;
        if (prepared) { /* simd's own layout of the table (prepare.c) */
            prepared->row_to_f32(table->data, D, V, id[i], dst + i * D);
            continue;
        }
        const uint8_t *row = (const uint8_t *)table->data + (size_t)id[i] * row_bytes;
        if (simd_float_size(table->dtype)) {
            simd_load_row(table->dtype, row, dst + i * D, D);
        } else {
            vt_status st = host->to_f32(table->dtype, row, dst + i * D, D);
            if (st != VT_OK) return st;
        }
    }
    return VT_OK;
}
