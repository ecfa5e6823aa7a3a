/* simd_vec.h — small AVX2/FMA/F16C helpers shared by the kernel files.
 * Only translation units built with -mavx2 -mfma -mf16c include this. */
#ifndef VT_SIMD_VEC_H
#define VT_SIMD_VEC_H

#include <immintrin.h>
#include <stdint.h>

#include "vt/vt_quant.h"
#include "vt/vt_types.h"

#define SIMD_INLINE static inline __attribute__((always_inline))

/* A 32-byte aligned local (aligned AVX loads and stores of f32 tiles). */
#define SIMD_ALIGNED _Alignas(32)

/* Fully unroll the small constant-trip loops over tile rows and sub-blocks:
 * only then can the compiler keep arrays of accumulators in registers
 * (GCC otherwise spills them to the stack every iteration). */
#define SIMD_UNROLL _Pragma("GCC unroll 8")

/* Pin a vector to a register at this point of the computation: stops the
 * compiler from re-associating an accumulation chain across unrolled
 * iterations (it would keep every partial product live at once and spill). */
#define SIMD_KEEP(v) __asm__("" : "+x"(v))

/* CALL(n) with n the constant 1..8 equal to R (8 for anything larger): a
 * tile inlined once per row count keeps its accumulators in registers. */
#define SIMD_WITH_CONST_R8(R, CALL)                                                                              \
    switch (R) {                                                                                                  \
    case 1: CALL(1); break;                                                                                       \
    case 2: CALL(2); break;                                                                                       \
    case 3: CALL(3); break;                                                                                       \
    case 4: CALL(4); break;                                                                                       \
    case 5: CALL(5); break;                                                                                       \
    case 6: CALL(6); break;                                                                                       \
    case 7: CALL(7); break;                                                                                       \
    default: CALL(8); break;                                                                                      \
    }

/* Sum of the 8 lanes. */
SIMD_INLINE float simd_hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* simd_hsum_ps of a, b, c and d as lanes 0..3: the same additions of the
 * same pairs (each half's lanes i and i + 4, then lanes 0 + 2 and 1 + 3,
 * then those two), so every lane is bit-identical to simd_hsum_ps of its
 * vector, in about half the instructions of four separate sums. */
SIMD_INLINE __m128 simd_hsum4_ps(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
    const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
    /* per 128-bit half (a and c below, b and d above): lanes 0 + 2 and 1 + 3 */
    const __m256 pairs = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                       _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 sums = _mm256_hadd_ps(pairs, pairs); /* below: a c a c, above: b d b d */
    return _mm_unpacklo_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1));
}

/* Largest of the 8 lanes. */
SIMD_INLINE float simd_hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 f16 -> 8 f32 (exact). */
SIMD_INLINE __m256 simd_load8_f16(const vt_fp16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* 8 bf16 -> 8 f32 (exact: bf16 is the upper half of an f32). */
SIMD_INLINE __m256 simd_load8_bf16(const vt_bf16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* 8 f32 -> 8 f16, round to nearest even (F16C handles subnormals, overflow to inf). */
SIMD_INLINE void simd_store8_f16(vt_fp16_t *p, __m256 v) {
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* 8 f32 -> 8 bf16, round to nearest even, NaN kept quiet: the same rule as
 * vt_f32_to_bf16, lane by lane. */
SIMD_INLINE void simd_store8_bf16(vt_bf16_t *p, __m256 v) {
    __m256i x = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    __m256i r = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    /* pack the 8 32-bit lanes (each < 2^16) into 8 16-bit values, in order */
    __m256i packed = _mm256_packus_epi32(r, r);
    packed = _mm256_permute4x64_epi64(packed, 0x08); /* qwords 0 and 2 */
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(packed));
}

/* e^x for 8 lanes, relative error below 2e-7 (about 2 ulp) over the range
 * where e^x is a normal f32; below -87.3 the result is 0, above 88.7 it
 * saturates near FLT_MAX.
 * Method: x = n ln2 + r with n integer and |r| <= ln2/2 (ln2 split in a
 * high and a low part so r is exact), e^r by its Taylor series to degree 7
 * (truncation error < r^8/8! < 4e-9), times 2^n built in the exponent bits. */
SIMD_INLINE __m256 simd_exp_ps(__m256 x) {
    const __m256 lo_clamp = _mm256_set1_ps(-87.3365f);
    const __m256 hi_clamp = _mm256_set1_ps(88.7228f);
    __m256 below = _mm256_cmp_ps(x, lo_clamp, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, lo_clamp), hi_clamp);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* n in [-126, 128]: 2^n as exponent bits; n = 128 (x near the top) is
     * split as 2^127 * 2 so the exponent never overflows. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i top = _mm256_cmpgt_epi32(ni, _mm256_set1_epi32(127));
    ni = _mm256_sub_epi32(ni, _mm256_and_si256(top, _mm256_set1_epi32(1)));
    __m256 scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    __m256 result = _mm256_mul_ps(p, scale);
    result = _mm256_blendv_ps(result, _mm256_add_ps(result, result), _mm256_castsi256_ps(top));
    return _mm256_andnot_ps(below, result);
}

#if defined(__AVX512F__)
/* simd_exp_ps on 16 lanes: each lane's operations are simd_exp_ps's, so
 * the bits are too (the AVX-512 tier's kernels use it where the AVX2 tier
 * uses two simd_exp_ps). */
SIMD_INLINE __m512 simd_exp16_ps(__m512 x) {
    const __m512 lo_clamp = _mm512_set1_ps(-87.3365f);
    const __m512 hi_clamp = _mm512_set1_ps(88.7228f);
    const __mmask16 below = _mm512_cmp_ps_mask(x, lo_clamp, _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo_clamp), hi_clamp);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i ni = _mm512_cvtps_epi32(n);
    const __mmask16 top = _mm512_cmpgt_epi32_mask(ni, _mm512_set1_epi32(127));
    ni = _mm512_mask_sub_epi32(ni, top, ni, _mm512_set1_epi32(1));
    const __m512 scale = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(127)), 23));
    __m512 result = _mm512_mul_ps(p, scale);
    result = _mm512_mask_add_ps(result, top, result, result);
    return _mm512_maskz_mov_ps((__mmask16)~below, result);
}

/* The 8-lane halves of v added: lane i + lane i + 8. */
SIMD_INLINE __m256 simd_fold16_ps(__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* r[i] <- column i of the 16 x 16 block whose rows were r[0..15]. */
SIMD_INLINE void simd_transpose16x16_ps(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) { /* per 128-bit block k: pairs of rows, 32 bits at a time */
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int g = 0; g < 4; g++) { /* u[4g + c], block k: rows 4g..4g+3 of column 4k + c */
        const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]),
                      c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
        u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int c = 0; c < 4; c++) { /* column 4k + c: block k of u[c], u[4 + c], u[8 + c], u[12 + c] */
        const __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        const __m512 y0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44),
                     y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(x0, y0, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(x1, y1, 0xDD);
    }
}
#endif

/* Store 8 f32 as elements i..i+7 of a row of dtype F32, F16 or BF16. */
SIMD_INLINE void simd_store8(int32_t dtype, void *dst, int64_t i, __m256 v) {
    if (dtype == VT_F32)
        _mm256_storeu_ps((float *)dst + i, v);
    else if (dtype == VT_F16)
        simd_store8_f16((vt_fp16_t *)dst + i, v);
    else
        simd_store8_bf16((vt_bf16_t *)dst + i, v);
}

/* Store one f32 as element i of a row of dtype F32, F16 or BF16. */
SIMD_INLINE void simd_store1(int32_t dtype, void *dst, int64_t i, float v) {
    if (dtype == VT_F32)
        ((float *)dst)[i] = v;
    else if (dtype == VT_F16)
        ((vt_fp16_t *)dst)[i] = vt_f32_to_fp16(v);
    else
        ((vt_bf16_t *)dst)[i] = vt_f32_to_bf16(v);
}

/* How far ahead of the block being multiplied the kernels prefetch weights.
 * Decode streams weights from DRAM once; the hardware prefetcher alone left
 * the first line of nearly every block a miss (the kernels stalled on their
 * first load of each block), so the kernels ask for the lines ~4 KiB ahead
 * themselves (2 and 4 KiB measured alike, both far better than none). Past
 * the end of a row this reaches into the next rows, which the same thread
 * multiplies next; prefetches never fault. */
#ifndef SIMD_PREFETCH_BYTES /* overridable for A/B measurements */
#define SIMD_PREFETCH_BYTES 4096
#endif

#ifndef SIMD_PREFETCH_HINT /* overridable for A/B measurements */
#define SIMD_PREFETCH_HINT _MM_HINT_T0
#endif

/* Prefetch the cache lines of a block of `bytes` bytes, SIMD_PREFETCH_BYTES ahead of p. */
SIMD_INLINE void simd_prefetch_ahead(const void *p, int bytes) {
    const char *a = (const char *)p + SIMD_PREFETCH_BYTES;
    for (int off = 0; off < bytes; off += 64) _mm_prefetch(a + off, SIMD_PREFETCH_HINT);
}

/* As simd_prefetch_ahead, into L2 only: for weights streamed against
 * several activation rows (a few sequences decoding together), whose L1
 * holds those rows (8 x K bytes, 24 KiB at K = 3072); weights pulled into
 * L1 ahead of use evict them (measured at 8 rows: Q4_K, weights from DRAM,
 * ~1/3 less time into L2 than into L1). Also decode's on the AVX-512
 * tier's prepared Q4_K and Q5_K tiles (k4_tile.h says why). */
SIMD_INLINE void simd_prefetch_ahead_l2(const void *p, int bytes) {
    const char *a = (const char *)p + SIMD_PREFETCH_BYTES;
    for (int off = 0; off < bytes; off += 64) _mm_prefetch(a + off, _MM_HINT_T1);
}

/* The 8 six-bit scales and 8 six-bit mins of a Q4_K / Q5_K block as 16
 * int16: scales in lanes 0-7, mins in lanes 8-15, in sub-block order.
 * Layout (vt_get_scale_min_k4), bytes s0..s11: sc0-3 = low 6 bits of s0-3,
 * m0-3 = low 6 bits of s4-7; sc4-7 = low nibble of s8-11 | top 2 bits of
 * s0-3 << 4; m4-7 = high nibble of s8-11 | top 2 bits of s4-7 << 4.
 * Done with byte shuffles (10 vector ops instead of ~25 scalar and insert
 * ops). Reads 16 bytes from `scales`: the 4 past the field are the block's
 * quants, never used. */
SIMD_INLINE __m256i simd_unpack_k4_scales(const uint8_t *scales) {
    const __m128i v = _mm_loadu_si128((const __m128i *)scales);
    /* [s0-3 | s8-11 | s4-7 | s8-11] */
    const __m128i a = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    /* low bits: s & 63, s8-11 & 15, s4-7 & 63, s8-11 >> 4 (16-bit shift, masked) */
    const __m128i low = _mm_and_si128(_mm_blend_epi32(a, _mm_srli_epi16(a, 4), 0x8),
                                      _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    /* top bits of sc4-7 / m4-7: bits 6-7 of s0-3 / s4-7 moved to bits 4-5 */
    const __m128i b = _mm_shuffle_epi8(v, _mm_setr_epi8(-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128, 4,
                                                         5, 6, 7));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30));
    return _mm256_cvtepu8_epi16(_mm_or_si128(low, high));
}

/* The scales and mins of two Q4_K / Q5_K blocks as bytes, one block per
 * 128-bit lane: lane j = [sc0..sc7, m0..m7] of block j (the same shuffles as
 * simd_unpack_k4_scales, both blocks at once). Reads 16 bytes from each. */
SIMD_INLINE __m256i simd_unpack_k4_scales_pair(const uint8_t *scales0, const uint8_t *scales1) {
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)scales0)),
                                              _mm_loadu_si128((const __m128i *)scales1), 1);
    const __m256i a = _mm256_shuffle_epi8(v, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1,
                                                              2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m256i low = _mm256_and_si256(_mm256_blend_epi32(a, _mm256_srli_epi16(a, 4), 0x88),
                                         _mm256_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15,
                                                          63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    const __m256i b = _mm256_shuffle_epi8(v, _mm256_setr_epi8(-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128,
                                                              4, 5, 6, 7, -128, -128, -128, -128, 0, 1, 2, 3, -128,
                                                              -128, -128, -128, 4, 5, 6, 7));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi16(b, 2), _mm256_set1_epi8(0x30));
    return _mm256_or_si256(low, high);
}

/* The exported kernel `name` of the simd_dot_fn contract, dispatching to the
 * always-inline tile(w, w_stride, NW, x, m0, R, out) with NW and R as
 * constants, so each supported tile compiles to its own register-resident
 * loop. Tiles of more than max_rows activation rows (a kernel whose
 * accumulators would not fit the 16 registers) and other requests outside
 * the supported tiles are split into ones inside. */
#define SIMD_TILE_CASE(tile, wj, w_stride, x, m0, R, out)                                           \
    switch (R) {                                                                                  \
    case 1: tile(wj, w_stride, 1, x, m0, 1, out); break;                                          \
    case 2: tile(wj, w_stride, 1, x, m0, 2, out); break;                                          \
    case 3: tile(wj, w_stride, 1, x, m0, 3, out); break;                                          \
    case 4: tile(wj, w_stride, 1, x, m0, 4, out); break;                                          \
    case 5: tile(wj, w_stride, 1, x, m0, 5, out); break;                                          \
    case 6: tile(wj, w_stride, 1, x, m0, 6, out); break;                                          \
    case 7: tile(wj, w_stride, 1, x, m0, 7, out); break;                                          \
    default: tile(wj, w_stride, 1, x, m0, 8, out); break;                                         \
    }

#define SIMD_DEFINE_DOT(name, tile, max_rows)                                                        \
    void name(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) { \
        if (NW == 2 && R == 1) {                                                                     \
            tile(w, w_stride, 2, x, m0, 1, out);                                                     \
            return;                                                                                  \
        }                                                                                            \
        for (int j = 0; j < NW; j++) {                                                               \
            const void *wj = (const uint8_t *)w + (size_t)j * w_stride;                              \
            for (int r0 = 0; r0 < R; r0 += (max_rows)) {                                             \
                const int rn = R - r0 < (max_rows) ? R - r0 : (max_rows);                            \
                SIMD_TILE_CASE(tile, wj, w_stride, x, m0 + r0, rn, out + j * R + r0)                 \
            }                                                                                        \
        }                                                                                            \
    }

/* As SIMD_DEFINE_DOT, with a second tile for prefill: decode_tile(w,
 * w_stride, NW, x, m0, R, out) serves one activation row (R = 1, NW = 1 or
 * 2), prefill_tile(w, x, m0, R, out) one weight row against 2..8 activation
 * rows (R a constant in each case). */
#define SIMD_PREFILL_CASE(tile, wj, x, m0, R, out)                                                 \
    switch (R) {                                                                                  \
    case 1: break;                                                                                \
    case 2: tile(wj, x, m0, 2, out); break;                                                       \
    case 3: tile(wj, x, m0, 3, out); break;                                                       \
    case 4: tile(wj, x, m0, 4, out); break;                                                       \
    case 5: tile(wj, x, m0, 5, out); break;                                                       \
    case 6: tile(wj, x, m0, 6, out); break;                                                       \
    case 7: tile(wj, x, m0, 7, out); break;                                                       \
    default: tile(wj, x, m0, 8, out); break;                                                      \
    }

#define SIMD_DEFINE_DOT_PREFILL(name, decode_tile, prefill_tile)                                     \
    void name(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) { \
        if (R == 1) {                                                                                \
            if (NW == 2)                                                                             \
                decode_tile(w, w_stride, 2, x, m0, 1, out);                                          \
            else                                                                                     \
                for (int j = 0; j < NW; j++)                                                         \
                    decode_tile((const uint8_t *)w + (size_t)j * w_stride, w_stride, 1, x, m0, 1, out + j); \
            return;                                                                                  \
        }                                                                                            \
        for (int j = 0; j < NW; j++) {                                                               \
            const void *wj = (const uint8_t *)w + (size_t)j * w_stride;                              \
            for (int r0 = 0; r0 < R; r0 += SIMD_MAX_ROWS) {                                          \
                const int rn = R - r0 < SIMD_MAX_ROWS ? R - r0 : SIMD_MAX_ROWS;                      \
                if (rn == 1)                                                                         \
                    decode_tile(wj, w_stride, 1, x, m0 + r0, 1, out + j * R + r0);                   \
                else                                                                                 \
                    SIMD_PREFILL_CASE(prefill_tile, wj, x, m0 + r0, rn, out + j * R + r0)            \
            }                                                                                        \
        }                                                                                            \
    }

#endif
