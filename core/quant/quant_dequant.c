/* quant_dequant.c — quantized blocks -> f32, exactly as GGML defines them.
 *
 * Each value is computed in f32 with ggml's operation order (scale products
 * first, then times the quant, then minus the min), so a row dequantized here
 * equals ggml's dequantize_row_* bit for bit. Layouts: include/vt/vt_quant.h.
 *
 * A caller's row may start at any byte address, so blocks are read through
 * byte pointers to their fields (offsetof) and the fp16 scales with memcpy,
 * never through a block pointer that could be misaligned. */
#include <stddef.h>

#include "quant_blocks.h"

/* src[nb] blocks of 32, dst[nb * 32]: y = d * q */
void vt_dequant_q8_0(const unsigned char *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(vt_block_q8_0)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q8_0, d));
        const int8_t *qs = (const int8_t *)(src + offsetof(vt_block_q8_0, qs));
        float *y = dst + b * VT_QK8_0;
        for (int j = 0; j < VT_QK8_0; j++) y[j] = (float)qs[j] * d;
    }
}

/* src[nb] blocks of 32, dst[nb * 32]: y = d * (q - 8); low nibbles are the first half */
void vt_dequant_q4_0(const unsigned char *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(vt_block_q4_0)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q4_0, d));
        const uint8_t *qs = src + offsetof(vt_block_q4_0, qs);
        float *y = dst + b * VT_QK4_0;
        for (int j = 0; j < VT_QK4_0 / 2; j++) {
            const int lo = (qs[j] & 0x0F) - 8;
            const int hi = (qs[j] >> 4) - 8;
            y[j] = (float)lo * d;
            y[j + VT_QK4_0 / 2] = (float)hi * d;
        }
    }
}

/* src[nb] super-blocks of 256, dst[nb * 256]: y = (d * sc) * q - (dmin * m) per sub-block of 32 */
void vt_dequant_q4_k(const unsigned char *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(vt_block_q4_k)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q4_k, d));
        const float dmin = vt_fp16_at(src + offsetof(vt_block_q4_k, dmin));
        const uint8_t *scales = src + offsetof(vt_block_q4_k, scales);
        float *y = dst + b * VT_QK_K;
        const uint8_t *q = src + offsetof(vt_block_q4_k, qs);
        /* Each 32 bytes of qs hold two sub-blocks: 2i in the low nibbles, 2i+1 in the high. */
        for (int pair = 0; pair < VT_QK_K / 64; pair++) {
            uint8_t sc, m;
            vt_get_scale_min_k4(2 * pair, scales, &sc, &m);
            const float d_lo = d * sc, m_lo = dmin * m;
            vt_get_scale_min_k4(2 * pair + 1, scales, &sc, &m);
            const float d_hi = d * sc, m_hi = dmin * m;
            for (int l = 0; l < 32; l++) y[l] = d_lo * (float)(q[l] & 0x0F) - m_lo;
            for (int l = 0; l < 32; l++) y[32 + l] = d_hi * (float)(q[l] >> 4) - m_hi;
            y += 64;
            q += 32;
        }
    }
}

/* src[nb] super-blocks of 256, dst[nb * 256]: as Q4_K with a fifth bit from qh */
void vt_dequant_q5_k(const unsigned char *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(vt_block_q5_k)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q5_k, d));
        const float dmin = vt_fp16_at(src + offsetof(vt_block_q5_k, dmin));
        const uint8_t *scales = src + offsetof(vt_block_q5_k, scales);
        const uint8_t *qh = src + offsetof(vt_block_q5_k, qh);
        float *y = dst + b * VT_QK_K;
        const uint8_t *ql = src + offsetof(vt_block_q5_k, qs);
        for (int pair = 0; pair < VT_QK_K / 64; pair++) {
            uint8_t sc, m;
            vt_get_scale_min_k4(2 * pair, scales, &sc, &m);
            const float d_lo = d * sc, m_lo = dmin * m;
            vt_get_scale_min_k4(2 * pair + 1, scales, &sc, &m);
            const float d_hi = d * sc, m_hi = dmin * m;
            /* bit j of qh[l] is the high bit of value l of sub-block j */
            const uint8_t bit_lo = (uint8_t)(1u << (2 * pair));
            const uint8_t bit_hi = (uint8_t)(1u << (2 * pair + 1));
            for (int l = 0; l < 32; l++) {
                const int q = (ql[l] & 0x0F) + ((qh[l] & bit_lo) ? 16 : 0);
                y[l] = d_lo * (float)q - m_lo;
            }
            for (int l = 0; l < 32; l++) {
                const int q = (ql[l] >> 4) + ((qh[l] & bit_hi) ? 16 : 0);
                y[32 + l] = d_hi * (float)q - m_hi;
            }
            y += 64;
            ql += 32;
        }
    }
}

/* src[nb] super-blocks of 256, dst[nb * 256]: y = (d * scale[s]) * (q - 32), 16 scales of 16 values.
 * Per half (128 values): ql[0..63] and qh[0..31]; value l + 32k (k = 0..3, l < 32) takes
 * the low nibble (k even) or high nibble (k odd) of ql[l + 32 * (k & 1)], and bits 2k..2k+1 of qh[l]. */
void vt_dequant_q6_k(const unsigned char *src, float *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++, src += sizeof(vt_block_q6_k)) {
        const float d = vt_fp16_at(src + offsetof(vt_block_q6_k, d));
        float *y = dst + b * VT_QK_K;
        const uint8_t *ql = src + offsetof(vt_block_q6_k, ql);
        const uint8_t *qh = src + offsetof(vt_block_q6_k, qh);
        const int8_t *sc = (const int8_t *)(src + offsetof(vt_block_q6_k, scales));
        for (int half = 0; half < 2; half++) {
            for (int l = 0; l < 32; l++) {
                const int s = l / 16;
                const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[s + 0] * (float)q1;
                y[l + 32] = d * (float)sc[s + 2] * (float)q2;
                y[l + 64] = d * (float)sc[s + 4] * (float)q3;
                y[l + 96] = d * (float)sc[s + 6] * (float)q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}
