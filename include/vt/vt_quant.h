/* vt_quant.h — GGUF block layouts and scalar half-precision conversions.
 *
 * One definition shared by the core and every backend, in-tree or third-party.
 * Layouts are GGML's (ggml-common.h), byte for byte: GGUF files store these. */
#ifndef VT_QUANT_H
#define VT_QUANT_H

#include <stdint.h>
#include <string.h>

#include "vt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VT_QK8_0 32  /* values per Q8_0 block */
#define VT_QK4_0 32  /* values per Q4_0 block */
#define VT_QK_K 256  /* values per K-quant super-block */
#define VT_K_SCALE_SIZE 12

typedef uint16_t vt_fp16_t; /* IEEE binary16 bits */
typedef uint16_t vt_bf16_t; /* bfloat16 bits (upper half of a binary32) */

/* Q8_0: y = d * q */
typedef struct vt_block_q8_0 {
    vt_fp16_t d;
    int8_t qs[VT_QK8_0];
} vt_block_q8_0;

/* Q4_0: y = d * (q - 8); value j < 16 is the low nibble of qs[j], j >= 16 the high nibble of qs[j-16] */
typedef struct vt_block_q4_0 {
    vt_fp16_t d;
    uint8_t qs[VT_QK4_0 / 2];
} vt_block_q4_0;

/* Q4_K: 8 sub-blocks of 32; y = d * sc[j] * q - dmin * m[j], with 6-bit sc/m packed in scales[12]
 * (see vt_get_scale_min_k4). Sub-block 2i uses the low nibbles of qs[32i..32i+31], 2i+1 the high. */
typedef struct vt_block_q4_k {
    vt_fp16_t d;
    vt_fp16_t dmin;
    uint8_t scales[VT_K_SCALE_SIZE];
    uint8_t qs[VT_QK_K / 2];
} vt_block_q4_k;

/* Q5_K: as Q4_K plus a fifth bit: bit j of qh[l] is the high bit of value l of sub-block j. */
typedef struct vt_block_q5_k {
    vt_fp16_t d;
    vt_fp16_t dmin;
    uint8_t scales[VT_K_SCALE_SIZE];
    uint8_t qh[VT_QK_K / 8];
    uint8_t qs[VT_QK_K / 2];
} vt_block_q5_k;

/* Q6_K: 16 sub-blocks of 16 with int8 scales; y = d * scales[s] * (q - 32), q 6 bits from ql (low 4) and qh (high 2). */
typedef struct vt_block_q6_k {
    uint8_t ql[VT_QK_K / 2];
    uint8_t qh[VT_QK_K / 4];
    int8_t scales[VT_QK_K / 16];
    vt_fp16_t d;
} vt_block_q6_k;

VT_STATIC_ASSERT(sizeof(vt_block_q8_0) == 34, "q8_0 block is 34 bytes");
VT_STATIC_ASSERT(sizeof(vt_block_q4_0) == 18, "q4_0 block is 18 bytes");
VT_STATIC_ASSERT(sizeof(vt_block_q4_k) == 144, "q4_k block is 144 bytes");
VT_STATIC_ASSERT(sizeof(vt_block_q5_k) == 176, "q5_k block is 176 bytes");
VT_STATIC_ASSERT(sizeof(vt_block_q6_k) == 210, "q6_k block is 210 bytes");

/* The j-th (0..7) 6-bit scale and min of a Q4_K/Q5_K block. */
static inline void vt_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* ---- scalar conversions (exact; round to nearest even on narrowing) ---- */

static inline uint32_t vt_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float vt_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float vt_fp16_to_f32(vt_fp16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    if (exp == 0x1F) return vt_f32_from_bits(sign | 0x7F800000u | (mant << 13)); /* inf, nan */
    if (exp == 0) {
        if (mant == 0) return vt_f32_from_bits(sign);
        /* subnormal: mant * 2^-24 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return vt_f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

static inline vt_fp16_t vt_f32_to_fp16(float f) {
    uint32_t x = vt_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) /* inf or nan (keep nan quiet) */
        return (vt_fp16_t)(sign | 0x7C00 | (abs > 0x7F800000u ? 0x200 : 0));
    if (abs >= 0x477FF000u) return (vt_fp16_t)(sign | 0x7C00); /* rounds to >= 65520: inf */
    if (abs < 0x38800000u) {                                   /* below 2^-14: subnormal or zero */
        if (abs < 0x33000000u) return (vt_fp16_t)sign;          /* below half of 2^-24: zero */
        uint32_t e = abs >> 23;
        uint32_t m = (abs & 0x7FFFFF) | 0x800000;
        uint32_t shift = 126 - e; /* 14..24 */
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (vt_fp16_t)(sign | half);
    }
    uint32_t r = abs + 0xFFF + ((abs >> 13) & 1); /* round to nearest even at bit 13 */
    return (vt_fp16_t)(sign | ((r - 0x38000000u) >> 13));
}

static inline float vt_bf16_to_f32(vt_bf16_t h) { return vt_f32_from_bits((uint32_t)h << 16); }

static inline vt_bf16_t vt_f32_to_bf16(float f) {
    uint32_t x = vt_f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (vt_bf16_t)((x >> 16) | 0x40); /* quiet nan */
    x += 0x7FFF + ((x >> 16) & 1);
    return (vt_bf16_t)(x >> 16);
}

#ifdef __cplusplus
}
#endif
#endif /* VT_QUANT_H */
