/* quant_legacy.c — f32 -> Q8_0 and Q4_0 blocks (one scale per 32 values).
 *
 * Same arithmetic, in the same order, as ggml's quantize_row_q8_0_ref and
 * quantize_row_q4_0_ref, so the bytes equal llama-quantize's. */
#include <math.h>

#include "quant_blocks.h"

/* Inputs whose scaled value is not finite (a block so tiny that 1/d
 * overflows, or NaN/inf in the data) give quant 0, as the C cast in ggml does
 * on x86 (cvttss2si yields 0x80000000, whose low byte is 0); avoiding the
 * cast also keeps such inputs free of undefined behaviour. */

/* src[nb * 32] -> dst[nb]: d = amax / 127, q = round(x / d) (half away from zero) */
void vt_quant_q8_0(const float *src, vt_block_q8_0 *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        const float *x = src + b * VT_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < VT_QK8_0; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        dst[b].d = vt_f32_to_fp16(d);
        for (int j = 0; j < VT_QK8_0; j++) {
            const float r = roundf(x[j] * id);
            /* |r| <= 127 for finite data (amax * id = 127 up to an ulp) */
            dst[b].qs[j] = (int8_t)(fabsf(r) <= 127.0f ? r : 0.0f);
        }
    }
}

/* src[nb * 32] -> dst[nb]: d = max / -8 where max is the value of largest magnitude
 * (so it maps to quant 0), q = min(15, trunc(x / d + 8.5)) */
void vt_quant_q4_0(const float *src, vt_block_q4_0 *dst, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        const float *x = src + b * VT_QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < VT_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        dst[b].d = vt_f32_to_fp16(d);
        for (int j = 0; j < VT_QK4_0 / 2; j++) {
            int q[2];
            for (int h = 0; h < 2; h++) {
                const float v = x[j + h * VT_QK4_0 / 2] * id + 8.5f;
                /* v is in (0, 17) for finite data: truncation then cap at 15 */
                q[h] = isfinite(v) && v > -1.0f ? (int)fminf(v, 15.0f) : 0;
            }
            dst[b].qs[j] = (uint8_t)(q[0] | (q[1] << 4));
        }
    }
}
