/* quant_k.c — f32 -> Q4_K, Q5_K and Q6_K super-blocks (256 values).
 *
 * These follow ggml's reference quantizers (quantize_row_q4_K_ref, _q5_K_ref,
 * _q6_K_ref: what llama-quantize runs without an importance matrix) step for
 * step: the same searches, the same float expressions in the same order, and
 * ggml's nearest_int rounding. Any reordering of a sum changes which candidate
 * scale wins on some blocks, and so the bytes. */
#include <math.h>
#include <stdbool.h>

#include "quant_blocks.h"

/* ggml treats a group whose largest magnitude is below this as all zero. */
#define GROUP_MAX_EPS 1e-15f

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- Q4_K / Q5_K: asymmetric sub-blocks of 32, x ~ scale * L - min ---- */

/* Fit x[n] ~ scale * L[i] - the_min with L in 0..nmax, minimising the weighted
 * squared error: start from the min/max fit, then try nstep+1 scales around
 * nmax / (max - min) (steps of rdelta from rmin), each with a closed-form
 * least-squares scale and min for its rounding, and keep the best.
 * The min is never positive (a sub-block of all-positive values keeps 0 as
 * its lowest level). Returns the scale; *the_min receives -min (>= 0).
 * (ggml's make_qkx2_quants with use_mad = false.) */
static float fit_scale_min(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                           uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        const int l = vt_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)clamp_int(l, 0, nmax);
        const float diff = scale * L[i] + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    for (int step = 0; step <= nstep; step++) {
        iscale = (rmin + rdelta * step + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(vt_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                const float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; i++) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Store the 6-bit scale ls and min lm of sub-block j (0..7) into the 12-byte
 * packing that vt_get_scale_min_k4 reads: j < 4 in the low 6 bits of bytes j
 * and j+4; j >= 4 as nibbles in byte j+4 with the top 2 bits in the spare top
 * bits of bytes j-4 (scale) and j (min). */
static void pack_scale_min_k4(int j, uint8_t ls, uint8_t lm, uint8_t *scales) {
    if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
        scales[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* One super-block x[256] -> 6-bit scales/mins, fp16 d/dmin, and levels
 * L[256] in 0..nmax (15 for Q4_K, 31 for Q5_K), shared by both formats. */
static void quantize_scale_min_superblock(const float *x, int nmax, float rmin, int nstep, uint8_t scales[12],
                                          vt_fp16_t *d_out, vt_fp16_t *dmin_out, uint8_t L[VT_QK_K]) {
    float sub_scales[VT_QK_K / 32];
    float sub_mins[VT_QK_K / 32];
    float weights[32];
    uint8_t Laux[32];
    float max_scale = 0; /* the min is subtracted, so scales are >= 0 */
    float max_min = 0;
    for (int j = 0; j < VT_QK_K / 32; j++) {
        const float *xs = x + 32 * j;
        /* weight each value by the sub-block's rms plus its own magnitude */
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(xs[l]);
        sub_scales[j] = fit_scale_min(32, nmax, xs, weights, L + 32 * j, &sub_mins[j], Laux, rmin, 0.1f, nstep);
        if (sub_scales[j] > max_scale) max_scale = sub_scales[j];
        if (sub_mins[j] > max_min) max_min = sub_mins[j];
    }

    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, VT_K_SCALE_SIZE);
    for (int j = 0; j < VT_QK_K / 32; j++) {
        /* uint8_t wrap-around then cap, as ggml (a negative scale becomes 63) */
        uint8_t ls = (uint8_t)vt_nearest_int(inv_scale * sub_scales[j]);
        uint8_t lm = (uint8_t)vt_nearest_int(inv_min * sub_mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        pack_scale_min_k4(j, ls, lm, scales);
    }
    *d_out = vt_f32_to_fp16(max_scale / 63.f);
    *dmin_out = vt_f32_to_fp16(max_min / 63.f);

    /* Re-round every value against the scales as they will be decoded. */
    const float d_all = vt_fp16_to_f32(*d_out);
    const float dmin_all = vt_fp16_to_f32(*dmin_out);
    for (int j = 0; j < VT_QK_K / 32; j++) {
        uint8_t sc, m;
        vt_get_scale_min_k4(j, scales, &sc, &m);
        const float d = d_all * sc;
        if (!d) continue; /* keep the levels of the fit */
        const float dm = dmin_all * m;
        for (int l = 0; l < 32; l++) L[32 * j + l] = (uint8_t)clamp_int(vt_nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

/* src[nb * 256] -> dst[nb] */
void vt_quant_q4_k(const float *src, vt_block_q4_k *dst, int64_t nb) {
    uint8_t L[VT_QK_K];
    for (int64_t b = 0; b < nb; b++) {
        vt_block_q4_k *y = &dst[b];
        quantize_scale_min_superblock(src + b * VT_QK_K, 15, -1.f, 20, y->scales, &y->d, &y->dmin, L);
        /* 32 bytes per 64 values: sub-block 2i in low nibbles, 2i+1 in high */
        for (int j = 0; j < VT_QK_K; j += 64)
            for (int l = 0; l < 32; l++) y->qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* src[nb * 256] -> dst[nb] */
void vt_quant_q5_k(const float *src, vt_block_q5_k *dst, int64_t nb) {
    uint8_t L[VT_QK_K];
    for (int64_t b = 0; b < nb; b++) {
        vt_block_q5_k *y = &dst[b];
        quantize_scale_min_superblock(src + b * VT_QK_K, 31, -0.5f, 15, y->scales, &y->d, &y->dmin, L);
        memset(y->qh, 0, sizeof y->qh);
        for (int j = 0; j < VT_QK_K; j += 64) {
            const int sub = j / 32; /* sub-blocks sub (low nibbles) and sub+1 (high) */
            for (int l = 0; l < 32; l++) {
                const int lo = L[j + l], hi = L[j + l + 32];
                y->qh[l] |= (uint8_t)(((lo >> 4) << sub) | ((hi >> 4) << (sub + 1)));
                y->qs[j / 2 + l] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
            }
        }
    }
}

/* ---- Q6_K: symmetric sub-blocks of 16, x ~ scale * (L - 32) ---- */

/* Fit x[n] ~ scale * l with l in -nmax..nmax-1 (stored as L = l + nmax),
 * weighting each value by x^2: round at nmax / max, then try 18 nearby
 * inverse scales and keep the one with the best weighted least-squares fit.
 * max is the value of largest magnitude, so it lands on -nmax.
 * (ggml's make_qx_quants with rmse_type = 1 and no importance weights.) */
static float fit_symmetric_scale(int n, int nmax, const float *x, int8_t *L) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(vt_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; step++) {
        if (step == 0) continue;
        iscale = -(nmax + 0.1f * step) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(vt_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        /* sumlx^2 / suml2 is the error reduction of the fitted scale; compare without dividing */
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_int(vt_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* src[nb * 256] -> dst[nb] */
void vt_quant_q6_k(const float *src, vt_block_q6_k *dst, int64_t nb) {
    int8_t L[VT_QK_K];
    float scales[VT_QK_K / 16];
    for (int64_t b = 0; b < nb; b++) {
        const float *x = src + b * VT_QK_K;
        vt_block_q6_k *y = &dst[b];
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int s = 0; s < VT_QK_K / 16; s++) {
            scales[s] = fit_symmetric_scale(16, 32, x + 16 * s, L + 16 * s);
            const float abs_scale = fabsf(scales[s]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scales[s];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, sizeof *y);
            continue;
        }
        /* the scale of largest magnitude maps to -128, the others into -128..127 */
        const float iscale = -128.f / max_scale;
        y->d = vt_f32_to_fp16(1 / iscale);
        for (int s = 0; s < VT_QK_K / 16; s++) {
            const int q = vt_nearest_int(iscale * scales[s]);
            y->scales[s] = (int8_t)(q < 127 ? q : 127);
        }
        /* Re-round every value against the scales as they will be decoded. */
        const float d_all = vt_fp16_to_f32(y->d);
        for (int s = 0; s < VT_QK_K / 16; s++) {
            const float d = d_all * y->scales[s];
            if (!d) continue; /* keep the levels of the fit */
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = (int8_t)(clamp_int(vt_nearest_int(x[16 * s + l] / d), -32, 31) + 32);
        }
        /* Per 128 values: value l + 32k (k = 0..3) goes to the low (k even) or high
         * (k odd) nibble of ql[l + 32 * (k & 1)], and its top 2 bits to bits 2k of qh[l]. */
        for (int half = 0; half < 2; half++) {
            const int8_t *Lh = L + 128 * half;
            uint8_t *ql = y->ql + 64 * half;
            uint8_t *qh = y->qh + 32 * half;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                  ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}
