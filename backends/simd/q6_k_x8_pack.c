/* q6_k_x8_pack.c — the file's Q6_K rows to and from the 8-row interleaved
 * layout of q6_k_x8.h: the repacking run once per tensor at engine creation
 * (prepare.c spreads the groups of rows over the threads) and the single-row
 * decoding get_rows uses on a prepared embedding table. */
#include <string.h>

#include "q6_k_x8.h"
#include "vt/vt_quant.h"

/* The 256 unsigned 6-bit values of a file block, in order. Per half n of
 * 128 values and l < 32: value l = low nibble of ql[l] | bits 0-1 of qh[l],
 * 32 + l = low nibble of ql[32 + l] | bits 2-3, 64 + l = high nibble of
 * ql[l] | bits 4-5, 96 + l = high nibble of ql[32 + l] | bits 6-7. */
static void unpack_block(const vt_block_q6_k *b, uint8_t q[256]) {
    for (int n = 0; n < 2; n++) {
        const uint8_t *ql = b->ql + 64 * n, *qh = b->qh + 32 * n;
        uint8_t *o = q + 128 * n;
        for (int l = 0; l < 32; l++) {
            o[l] = (uint8_t)((ql[l] & 0xF) | ((qh[l] & 0x03) << 4));
            o[32 + l] = (uint8_t)((ql[32 + l] & 0xF) | ((qh[l] & 0x0C) << 2));
            o[64 + l] = (uint8_t)((ql[l] >> 4) | (qh[l] & 0x30));
            o[96 + l] = (uint8_t)((ql[32 + l] >> 4) | ((qh[l] & 0xC0) >> 2));
        }
    }
}

size_t simd_q6_k_prepared_size(int64_t K, int64_t N) {
    return (size_t)simd_q6_k_prepared_units(N) * (size_t)(K / 256) * sizeof(q6_k_x8);
}

int64_t simd_q6_k_prepared_units(int64_t N) { return (N + Q6K_X8_ROWS - 1) / Q6K_X8_ROWS; }

void simd_q6_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 256;
    uint8_t q[256];
    for (int64_t g = u0; g < u1; g++) {
        q6_k_x8 *out = (q6_k_x8 *)dst + g * nb;
        memset(out, 0, (size_t)nb * sizeof *out);
        for (int r = 0; r < Q6K_X8_ROWS; r++) {
            const int64_t n = g * Q6K_X8_ROWS + r;
            if (n >= N) break; /* padding rows stay zero */
            const vt_block_q6_k *row = (const vt_block_q6_k *)src + n * nb;
            for (int64_t b = 0; b < nb; b++) {
                unpack_block(row + b, q);
                q6_k_x8 *o = out + b;
                o->d[r] = vt_fp16_to_f32(row[b].d);
                for (int s = 0; s < 16; s++) {
                    o->scales[s][r] = row[b].scales[s];
                    const uint8_t *v = q + 16 * s;
                    for (int j = 0; j < 4; j++) {
                        const uint8_t top = v[12 + j];
                        for (int k = 0; k < 3; k++)
                            o->qs[s][k][4 * r + j] = (uint8_t)(v[4 * k + j] | (((top >> (2 * k)) & 3) << 6));
                    }
                }
            }
        }
    }
}

void simd_q6_k_prepared_row(const void *copy, int64_t K, int64_t N, int64_t n, float *dst) {
    (void)N;
    const q6_k_x8 *w = copy;
    const int64_t nb = K / 256;
    const int r = (int)(n % Q6K_X8_ROWS);
    const q6_k_x8 *g = w + (n / Q6K_X8_ROWS) * nb;
    for (int64_t b = 0; b < nb; b++) {
        const q6_k_x8 *o = g + b;
        float *y = dst + b * 256;
        for (int s = 0; s < 16; s++) {
            /* the host's order: d * scale first, then times (q - 32) */
            const float ds = o->d[r] * (float)o->scales[s][r];
            for (int j = 0; j < 4; j++) {
                const uint8_t *p0 = &o->qs[s][0][4 * r + j], *p1 = &o->qs[s][1][4 * r + j],
                              *p2 = &o->qs[s][2][4 * r + j];
                const int top = (*p0 >> 6) | ((*p1 >> 6) << 2) | ((*p2 >> 6) << 4);
                y[16 * s + j] = ds * (float)((*p0 & 63) - 32);
                y[16 * s + 4 + j] = ds * (float)((*p1 & 63) - 32);
                y[16 * s + 8 + j] = ds * (float)((*p2 & 63) - 32);
                y[16 * s + 12 + j] = ds * (float)(top - 32);
            }
        }
    }
}
