/* matmul_q4_k.c — dot kernel for Q4_K weights against activations quantized
 * to 8-bit blocks of 256 with their sums per 32 (msums, see simd_act).
 *
 * A Q4_K super-block of 256 values is 8 sub-blocks of 32, w = d sc_j q - dmin m_j
 * with 4-bit q and 6-bit sc_j, m_j. So
 *   w . x = d dx sum_j sc_j (q_j . xq_j) - dmin dx sum_j m_j sum(xq_j)
 * The first sum runs in integers (vpmaddubsw: unsigned 4-bit q times signed
 * 8-bit x, pair sums <= 2 * 15 * 127, then vpmaddwd with the scales); the
 * second needs only the activation sub-block sums, which quantization
 * recorded. */
#include <string.h>

#include "simd.h"
#include "simd_vec.h"

/* Shuffle mask broadcasting int16 lane j of each 128-bit half to its 8 lanes. */
SIMD_INLINE __m256i scale_mask(int j) {
    return _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8)));
}

/* out[j * R + r] = weight row j . activation row m0 + r (see simd_dot_fn).
 * Uses x->msums (see simd_act). */
SIMD_INLINE void dot_tile(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R,
                          float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[SIMD_MAX_WROWS][SIMD_MAX_ROWS];
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[j][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        float dx[SIMD_MAX_ROWS], d[SIMD_MAX_WROWS];
        SIMD_UNROLL
        for (int r = 0; r < R; r++) dx[r] = x->d[(m0 + r) * nb + b];
        const vt_block_q4_k *wb[SIMD_MAX_WROWS];
        __m256i scales[SIMD_MAX_WROWS], sumi[SIMD_MAX_WROWS][SIMD_MAX_ROWS];
        SIMD_UNROLL
        for (int j = 0; j < NW; j++) {
            wb[j] = (const vt_block_q4_k *)((const uint8_t *)w + (size_t)j * w_stride) + b;
            simd_prefetch_ahead(wb[j], (int)sizeof(vt_block_q4_k));
            const __m256i sm = simd_unpack_k4_scales(wb[j]->scales);
            scales[j] = _mm256_permute4x64_epi64(sm, 0x44); /* scales in both 128-bit lanes */
            /* dmin m_j as 8 floats, against msums = dx sum(x_j): the
             * minimums' part of every row is then one FMA */
            float dm[4]; /* d and dmin, adjacent f16s, in one conversion */
            uint32_t dm16;
            memcpy(&dm16, &wb[j]->d, sizeof dm16);
            _mm_storeu_ps(dm, _mm_cvtph_ps(_mm_cvtsi32_si128((int)dm16)));
            const __m256 mins = _mm256_mul_ps(_mm256_set1_ps(dm[1]),
                                              _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(sm, 1))));
            d[j] = dm[0];
            /* the minimums' part first: dmin dx sum_j m_j sum(x_j) */
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                acc[j][r] = _mm256_fnmadd_ps(mins, _mm256_loadu_ps(x->msums + (m0 + r) * (K / 32) + b * 8), acc[j][r]);
                sumi[j][r] = _mm256_setzero_si256();
            }
        }
        SIMD_UNROLL
        for (int i = 0; i < 4; i++) { /* sub-blocks 2i (low nibbles) and 2i+1 (high) */
            __m256i xl[SIMD_MAX_ROWS], xh[SIMD_MAX_ROWS];
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const int8_t *xq = x->qs + (m0 + r) * K + b * 256 + 64 * i;
                xl[r] = _mm256_loadu_si256((const __m256i *)xq);
                xh[r] = _mm256_loadu_si256((const __m256i *)(xq + 32));
            }
            SIMD_UNROLL
            for (int j = 0; j < NW; j++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(wb[j]->qs + 32 * i));
                const __m256i lo = _mm256_and_si256(q, low4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                const __m256i sc_lo = _mm256_shuffle_epi8(scales[j], scale_mask(2 * i));
                const __m256i sc_hi = _mm256_shuffle_epi8(scales[j], scale_mask(2 * i + 1));
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl[r]), sc_lo);
                    const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh[r]), sc_hi);
                    sumi[j][r] = _mm256_add_epi32(sumi[j][r], _mm256_add_epi32(pl, ph));
                    SIMD_KEEP(sumi[j][r]);
                }
            }
        }
        SIMD_UNROLL
        for (int j = 0; j < NW; j++)
            SIMD_UNROLL
            for (int r = 0; r < R; r++)
                acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(d[j] * dx[r]), _mm256_cvtepi32_ps(sumi[j][r]), acc[j][r]);
    }
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) out[j * R + r] = simd_hsum_ps(acc[j][r]);
}

/* Shuffle mask zero-extending byte k of each 128-bit lane to all 16 int16s. */
SIMD_INLINE __m256i byte_scale_mask(int k) { return _mm256_set1_epi16((short)(k | 0x8000)); }

/* out[0..1] = weight rows 0 and 1 . activation row m0: decode. The scale
 * and minimum unpacking, the f16 conversions and the activation loads are
 * shared by the two rows (one 256-bit pass for both blocks' scales), so a
 * block costs ~25% fewer instructions than two rows of dot_tile; decode is
 * close to compute-bound on this machine (one core multiplies Q4_K at
 * about the rate one core can read it from memory). */
SIMD_INLINE void decode_pair(const void *w, size_t w_stride, const simd_act *x, int64_t m0, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const vt_block_q4_k *w0 = (const vt_block_q4_k *)w;
    const vt_block_q4_k *w1 = (const vt_block_q4_k *)((const uint8_t *)w + w_stride);
    const int8_t *xq = x->qs + m0 * K;
    const float *xd = x->d + m0 * nb, *xm = x->msums + m0 * (K / 32);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        simd_prefetch_ahead(w0 + b, (int)sizeof(vt_block_q4_k));
        simd_prefetch_ahead(w1 + b, (int)sizeof(vt_block_q4_k));
        const __m256i sm = simd_unpack_k4_scales_pair(w0[b].scales, w1[b].scales);
        const __m256i sc0 = _mm256_permute4x64_epi64(sm, 0x44), sc1 = _mm256_permute4x64_epi64(sm, 0xEE);
        __m256i sumi0 = _mm256_setzero_si256(), sumi1 = _mm256_setzero_si256();
        SIMD_UNROLL
        for (int i = 0; i < 4; i++) { /* sub-blocks 2i (low nibbles) and 2i+1 (high) */
            const __m256i xl = _mm256_loadu_si256((const __m256i *)(xq + b * 256 + 64 * i));
            const __m256i xh = _mm256_loadu_si256((const __m256i *)(xq + b * 256 + 64 * i + 32));
            const __m256i q0 = _mm256_loadu_si256((const __m256i *)(w0[b].qs + 32 * i));
            const __m256i q1 = _mm256_loadu_si256((const __m256i *)(w1[b].qs + 32 * i));
            const __m256i p0l = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q0, low4), xl),
                                                  _mm256_shuffle_epi8(sc0, byte_scale_mask(2 * i)));
            const __m256i p0h = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q0, 4), low4), xh),
                                                  _mm256_shuffle_epi8(sc0, byte_scale_mask(2 * i + 1)));
            const __m256i p1l = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q1, low4), xl),
                                                  _mm256_shuffle_epi8(sc1, byte_scale_mask(2 * i)));
            const __m256i p1h = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q1, 4), low4), xh),
                                                  _mm256_shuffle_epi8(sc1, byte_scale_mask(2 * i + 1)));
            sumi0 = _mm256_add_epi32(sumi0, _mm256_add_epi32(p0l, p0h));
            sumi1 = _mm256_add_epi32(sumi1, _mm256_add_epi32(p1l, p1h));
            SIMD_KEEP(sumi0);
            SIMD_KEEP(sumi1);
        }
        /* d0, dmin0, d1, dmin1 in one conversion */
        uint32_t dm0, dm1;
        memcpy(&dm0, &w0[b].d, sizeof dm0);
        memcpy(&dm1, &w1[b].d, sizeof dm1);
        const __m128 dm = _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)dm0), (int)dm1, 1));
        const __m256 dx = _mm256_set1_ps(xd[b]);
        const __m256 ms = _mm256_loadu_ps(xm + b * 8); /* dx sum(x_j) per sub-block */
        /* minimums: dmin m_j as floats, per row */
        const __m256 mins0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(_mm256_castsi256_si128(sm), 8)));
        const __m256 mins1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(_mm256_extracti128_si256(sm, 1), 8)));
        /* the same operations in the same order as dot_tile (identical results) */
        acc0 = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dm)), mins0), ms, acc0);
        acc1 = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(dm), _mm256_set1_epi32(3)), mins1),
                                ms, acc1);
        acc0 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(_mm_cvtss_f32(dm)), dx), _mm256_cvtepi32_ps(sumi0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehl_ps(dm, dm)), dx), _mm256_cvtepi32_ps(sumi1),
                               acc1);
    }
    out[0] = simd_hsum_ps(acc0);
    out[1] = simd_hsum_ps(acc1);
}

/* dot_tile, with the two-row decode tile taken by decode_pair. */
SIMD_INLINE void decode_tile(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    if (NW == 2 && R == 1)
        decode_pair(w, w_stride, x, m0, out);
    else
        dot_tile(w, w_stride, NW, x, m0, R, out);
}

/* out[r] = weight row w . activation row m0 + r, for r < R (2..8): prefill.
 * The 8 integer accumulators (one per activation row) and the decoded
 * sub-block with its scale take 10 of the 16 vector registers; the f32
 * accumulators, touched once per block, live in memory (held in registers
 * too, as dot_tile does, they were 16 more and everything spilled, inside
 * the inner loop). Each decoded 32-value sub-block is used for all R rows
 * before the next is decoded. */
SIMD_INLINE void prefill_tile(const void *w, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    SIMD_ALIGNED float acc[SIMD_MAX_ROWS][8];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) _mm256_store_ps(acc[r], _mm256_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        const vt_block_q4_k *wb = (const vt_block_q4_k *)w + b;
        const __m256i sm = simd_unpack_k4_scales(wb->scales);
        const __m256i scales = _mm256_permute4x64_epi64(sm, 0x44); /* scales in both 128-bit lanes */
        __m256i sumi[SIMD_MAX_ROWS];
        SIMD_UNROLL
        for (int r = 0; r < R; r++) sumi[r] = _mm256_setzero_si256();
        const int8_t *xb = x->qs + m0 * K + b * 256;
        SIMD_UNROLL
        for (int k = 0; k < 8; k++) { /* sub-block k: low (k even) or high nibbles of qs[32 (k/2)..] */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(wb->qs + 32 * (k / 2)));
            const __m256i v = _mm256_and_si256(k % 2 ? _mm256_srli_epi16(q, 4) : q, low4);
            const __m256i sc = _mm256_shuffle_epi8(scales, scale_mask(k));
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb + r * K + 32 * k));
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v, xv), sc));
                SIMD_KEEP(sumi[r]);
            }
        }
        float dm[4]; /* d and dmin, adjacent f16s, in one conversion */
        uint32_t dm16;
        memcpy(&dm16, &wb->d, sizeof dm16);
        _mm_storeu_ps(dm, _mm_cvtph_ps(_mm_cvtsi32_si128((int)dm16)));
        /* dmin m_j as 8 floats, against msums = dx sum(x_j) */
        const __m256 mins =
            _mm256_mul_ps(_mm256_set1_ps(dm[1]), _mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(sm, 1))));
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const float dx = x->d[(m0 + r) * nb + b];
            __m256 a = _mm256_load_ps(acc[r]); /* minimums first, as dot_tile (identical results) */
            a = _mm256_fnmadd_ps(mins, _mm256_loadu_ps(x->msums + (m0 + r) * (K / 32) + b * 8), a);
            a = _mm256_fmadd_ps(_mm256_set1_ps(dm[0] * dx), _mm256_cvtepi32_ps(sumi[r]), a);
            _mm256_store_ps(acc[r], a);
        }
        /* keep acc in memory: no promotion of all R of them to registers */
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int r = 0; r < R; r++) out[r] = simd_hsum_ps(_mm256_load_ps(acc[r]));
}

static SIMD_DEFINE_DOT_PREFILL(dot_single_rows, decode_tile, prefill_tile)

/* out[j * R + r] = weight row j . activation row m0 + r, for j < 2 and r < R
 * (2..4): a few sequences decoding together. As decode_pair, the two rows'
 * scales, minimums and f16s are unpacked in one pass; each decoded 32-value
 * sub-block of each row is used for all R activation rows, and each
 * activation load for both weight rows. The 2 x R integer accumulators, the
 * two decoded sub-blocks and their scales fill 14 of the 16 registers; the
 * f32 accumulators, touched once per block, live in memory (as in
 * prefill_tile). Per row the float operations are those of dot_tile, in its
 * order, so each row's result is the one it gets alone. */
SIMD_INLINE void pair_tile(const void *w, size_t w_stride, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const vt_block_q4_k *w0 = (const vt_block_q4_k *)w;
    const vt_block_q4_k *w1 = (const vt_block_q4_k *)((const uint8_t *)w + w_stride);
    SIMD_ALIGNED float acc[2][4][8];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        _mm256_store_ps(acc[0][r], _mm256_setzero_ps());
        _mm256_store_ps(acc[1][r], _mm256_setzero_ps());
    }
    for (int64_t b = 0; b < nb; b++) {
        simd_prefetch_ahead(w0 + b, (int)sizeof(vt_block_q4_k));
        simd_prefetch_ahead(w1 + b, (int)sizeof(vt_block_q4_k));
        const __m256i sm = simd_unpack_k4_scales_pair(w0[b].scales, w1[b].scales);
        const __m256i sc0 = _mm256_permute4x64_epi64(sm, 0x44), sc1 = _mm256_permute4x64_epi64(sm, 0xEE);
        __m256i sumi0[4], sumi1[4];
        SIMD_UNROLL
        for (int r = 0; r < R; r++) sumi0[r] = sumi1[r] = _mm256_setzero_si256();
        const int8_t *xb = x->qs + m0 * K + b * 256;
        SIMD_UNROLL
        for (int k = 0; k < 8; k++) { /* sub-block k: low (k even) or high nibbles of qs[32 (k/2)..] */
            const __m256i q0 = _mm256_loadu_si256((const __m256i *)(w0[b].qs + 32 * (k / 2)));
            const __m256i q1 = _mm256_loadu_si256((const __m256i *)(w1[b].qs + 32 * (k / 2)));
            const __m256i v0 = _mm256_and_si256(k % 2 ? _mm256_srli_epi16(q0, 4) : q0, low4);
            const __m256i v1 = _mm256_and_si256(k % 2 ? _mm256_srli_epi16(q1, 4) : q1, low4);
            const __m256i s0 = _mm256_shuffle_epi8(sc0, byte_scale_mask(k));
            const __m256i s1 = _mm256_shuffle_epi8(sc1, byte_scale_mask(k));
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb + r * K + 32 * k));
                sumi0[r] = _mm256_add_epi32(sumi0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v0, xv), s0));
                sumi1[r] = _mm256_add_epi32(sumi1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v1, xv), s1));
                SIMD_KEEP(sumi0[r]);
                SIMD_KEEP(sumi1[r]);
            }
        }
        uint32_t dm0, dm1; /* d0, dmin0, d1, dmin1 in one conversion */
        memcpy(&dm0, &w0[b].d, sizeof dm0);
        memcpy(&dm1, &w1[b].d, sizeof dm1);
        SIMD_ALIGNED float dm[4];
        _mm_store_ps(dm, _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)dm0), (int)dm1, 1)));
        /* dmin m_j as 8 floats per weight row, against msums = dx sum(x_j) */
        const __m256 mins0 = _mm256_mul_ps(
            _mm256_set1_ps(dm[1]), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(_mm256_castsi256_si128(sm), 8))));
        const __m256 mins1 = _mm256_mul_ps(
            _mm256_set1_ps(dm[3]),
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(_mm256_extracti128_si256(sm, 1), 8))));
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const float dx = x->d[(m0 + r) * nb + b];
            const __m256 ms = _mm256_loadu_ps(x->msums + (m0 + r) * (K / 32) + b * 8);
            __m256 a0 = _mm256_load_ps(acc[0][r]), a1 = _mm256_load_ps(acc[1][r]);
            a0 = _mm256_fnmadd_ps(mins0, ms, a0); /* minimums first, as dot_tile (identical results) */
            a1 = _mm256_fnmadd_ps(mins1, ms, a1);
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(dm[0] * dx), _mm256_cvtepi32_ps(sumi0[r]), a0);
            a1 = _mm256_fmadd_ps(_mm256_set1_ps(dm[2] * dx), _mm256_cvtepi32_ps(sumi1[r]), a1);
            _mm256_store_ps(acc[0][r], a0);
            _mm256_store_ps(acc[1][r], a1);
        }
        /* keep acc in memory: no promotion of all 2 R of them to registers */
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        out[r] = simd_hsum_ps(_mm256_load_ps(acc[0][r]));
        out[R + r] = simd_hsum_ps(_mm256_load_ps(acc[1][r]));
    }
}

void simd_dot_q4_k(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    if (NW != 2 || R < 2 || R > 4) { /* beyond 4 rows, prefill_tile's 8 accumulators per row measured faster */
        dot_single_rows(w, w_stride, NW, x, m0, R, out);
        return;
    }
    switch (R) {
    case 2: pair_tile(w, w_stride, x, m0, 2, out); break;
    case 3: pair_tile(w, w_stride, x, m0, 3, out); break;
    default: pair_tile(w, w_stride, x, m0, 4, out); break;
    }
}
