/* matmul_q6_k.c — dot kernel for Q6_K weights against 8-bit activation
 * blocks of 256 with bsums.
 *
 * A Q6_K super-block is 16 sub-blocks of 16, w = d sc_s (q - 32) with 6-bit q
 * and int8 sc_s. So
 *   w . x = d dx (sum_s sc_s (q_s . xq_s) - 32 sum_s sc_s sum(xq_s))
 * q is 0..63 (unsigned, so vpmaddubsw applies; pair sums <= 2 * 63 * 127),
 * and the -32 offset costs one vpmaddwd of the scales with the bsums.
 *
 * Value layout per half (128 values) n: ql[64n..], qh[32n..]; for l < 32,
 * value l = low nibble of ql[l] | bits 0-1 of qh[l] << 4, value 32+l = low
 * nibble of ql[32+l] | bits 2-3, value 64+l = high nibble of ql[l] | bits
 * 4-5, value 96+l = high nibble of ql[32+l] | bits 6-7. */
#include "simd.h"
#include "simd_vec.h"

/* Broadcast int16 lane j in the low 128 bits and lane j+1 in the high:
 * a 32-byte run of values covers two sub-blocks of 16, and vpmaddubsw
 * leaves the first in the low half of the register. */
SIMD_INLINE __m256i scale_pair_mask(int j) {
    const short a = (short)((2 * j) | ((2 * j + 1) << 8));
    const short c = (short)((2 * j + 2) | ((2 * j + 3) << 8));
    return _mm256_setr_epi16(a, a, a, a, a, a, a, a, c, c, c, c, c, c, c, c);
}

/* The 128 values of half n of a block as bytes 0..63, in 4 runs of 32. */
SIMD_INLINE void unpack_half(const vt_block_q6_k *wb, int n, __m256i v[4]) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const uint8_t *ql = wb->ql + 64 * n;
    const __m256i ql0 = _mm256_loadu_si256((const __m256i *)ql);
    const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * n));
    v[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4),
                           _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
    v[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4),
                           _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
    v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                           _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
    v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                           _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8((char)0xC0)), 2));
}

/* out[j * R + r] = weight row j . activation row m0 + r (see simd_dot_fn). */
SIMD_INLINE void dot_tile(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R,
                          float *out) {
    const int64_t K = x->K, nb = K / 256;
    __m256 acc[SIMD_MAX_WROWS][SIMD_MAX_ROWS];
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[j][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const vt_block_q6_k *wb[SIMD_MAX_WROWS];
        __m128i sc8[SIMD_MAX_WROWS];
        __m256i sumi[SIMD_MAX_WROWS][SIMD_MAX_ROWS];
        SIMD_UNROLL
        for (int j = 0; j < NW; j++) {
            wb[j] = (const vt_block_q6_k *)((const uint8_t *)w + (size_t)j * w_stride) + b;
            simd_prefetch_ahead(wb[j], (int)sizeof(vt_block_q6_k));
            sc8[j] = _mm_loadu_si128((const __m128i *)wb[j]->scales);
            const __m256i scales_all = _mm256_cvtepi8_epi16(sc8[j]); /* 16 int16 */
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                /* start from -32 sum_s sc_s bsum_s */
                const int16_t *bs = x->bsums + (m0 + r) * (K / 16) + b * 16;
                const __m256i off = _mm256_madd_epi16(scales_all, _mm256_loadu_si256((const __m256i *)bs));
                sumi[j][r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
            }
        }
        SIMD_UNROLL
        for (int n = 0; n < 2; n++) {
            SIMD_UNROLL
            for (int j = 0; j < NW; j++) {
                __m256i v[4];
                unpack_half(wb[j], n, v);
                /* scales of this half's 8 sub-blocks in both 128-bit lanes */
                const __m256i sc =
                    _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(n ? _mm_srli_si128(sc8[j], 8) : sc8[j]));
                SIMD_UNROLL
                for (int k = 0; k < 4; k++) {
                    const __m256i sck = _mm256_shuffle_epi8(sc, scale_pair_mask(2 * k));
                    SIMD_UNROLL
                    for (int r = 0; r < R; r++) {
                        const int8_t *xq = x->qs + (m0 + r) * K + b * 256 + 128 * n + 32 * k;
                        const __m256i xv = _mm256_loadu_si256((const __m256i *)xq);
                        sumi[j][r] =
                            _mm256_add_epi32(sumi[j][r], _mm256_madd_epi16(_mm256_maddubs_epi16(v[k], xv), sck));
                        SIMD_KEEP(sumi[j][r]);
                    }
                }
            }
        }
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const float dx = x->d[(m0 + r) * nb + b];
            SIMD_UNROLL
            for (int j = 0; j < NW; j++)
                acc[j][r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(wb[j]->d) * dx), _mm256_cvtepi32_ps(sumi[j][r]),
                                            acc[j][r]);
        }
    }
    SIMD_UNROLL
    for (int j = 0; j < NW; j++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) out[j * R + r] = simd_hsum_ps(acc[j][r]);
}

/* out[r] = weight row w . activation row m0 + r, for r < R (2..8): prefill.
 * As in matmul_q4_k.c: 8 integer accumulators in registers, the f32 ones in
 * memory (touched once per block), and each decoded 32-value run used for
 * all R rows before the next is decoded. */
SIMD_INLINE void prefill_tile(const void *w, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    SIMD_ALIGNED float acc[SIMD_MAX_ROWS][8];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) _mm256_store_ps(acc[r], _mm256_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        const vt_block_q6_k *wb = (const vt_block_q6_k *)w + b;
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)wb->scales);
        __m256i sumi[SIMD_MAX_ROWS];
        {
            const __m256i scales_all = _mm256_cvtepi8_epi16(sc8); /* 16 int16 */
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                /* start from -32 sum_s sc_s bsum_s */
                const int16_t *bs = x->bsums + (m0 + r) * (K / 16) + b * 16;
                const __m256i off = _mm256_madd_epi16(scales_all, _mm256_loadu_si256((const __m256i *)bs));
                sumi[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
            }
        }
        const int8_t *xb = x->qs + m0 * K + b * 256;
        SIMD_UNROLL
        for (int n = 0; n < 2; n++) {
            __m256i v[4];
            unpack_half(wb, n, v);
            const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(n ? _mm_srli_si128(sc8, 8) : sc8));
            SIMD_UNROLL
            for (int k = 0; k < 4; k++) {
                const __m256i sck = _mm256_shuffle_epi8(sc, scale_pair_mask(2 * k));
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb + r * K + 128 * n + 32 * k));
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v[k], xv), sck));
                    SIMD_KEEP(sumi[r]);
                }
            }
        }
        const float d = _cvtsh_ss(wb->d);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const float dx = x->d[(m0 + r) * nb + b];
            __m256 a = _mm256_load_ps(acc[r]);
            a = _mm256_fmadd_ps(_mm256_set1_ps(d * dx), _mm256_cvtepi32_ps(sumi[r]), a);
            _mm256_store_ps(acc[r], a);
        }
        /* keep acc in memory: no promotion of all R of them to registers */
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int r = 0; r < R; r++) out[r] = simd_hsum_ps(_mm256_load_ps(acc[r]));
}

static SIMD_DEFINE_DOT_PREFILL(dot_single_rows, dot_tile, prefill_tile)

/* Run k (0..3) of half n of a block: the values unpack_half puts in v[k]. */
SIMD_INLINE __m256i unpack_run(const vt_block_q6_k *wb, int n, int k) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i ql = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * n + 32 * (k % 2)));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * n));
    switch (k) {
    case 0: return _mm256_or_si256(_mm256_and_si256(ql, low4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
    case 1: return _mm256_or_si256(_mm256_and_si256(ql, low4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
    case 2: return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), low4), _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
    default:
        return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql, 4), low4),
                               _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8((char)0xC0)), 2));
    }
}

/* out[j * R + r] = weight row j . activation row m0 + r, for j < 2 and r < R
 * (2..4): a few sequences decoding together. Each run of 32 values of each
 * weight row is unpacked once and used for all R activation rows, and each
 * activation load for both weight rows: the 2 x R integer accumulators, the
 * two runs and their scales fill 13 of the 16 registers; the f32
 * accumulators live in memory (as in prefill_tile). Per row the integer sums
 * are exact and the float operations those of dot_tile, in its order, so
 * each row's result is the one it gets alone. */
SIMD_INLINE void pair_tile(const void *w, size_t w_stride, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const vt_block_q6_k *w0 = (const vt_block_q6_k *)w;
    const vt_block_q6_k *w1 = (const vt_block_q6_k *)((const uint8_t *)w + w_stride);
    SIMD_ALIGNED float acc[2][4][8];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        _mm256_store_ps(acc[0][r], _mm256_setzero_ps());
        _mm256_store_ps(acc[1][r], _mm256_setzero_ps());
    }
    for (int64_t b = 0; b < nb; b++) {
        const vt_block_q6_k *b0 = w0 + b, *b1 = w1 + b;
        simd_prefetch_ahead(b0, (int)sizeof(vt_block_q6_k));
        simd_prefetch_ahead(b1, (int)sizeof(vt_block_q6_k));
        const __m128i sc80 = _mm_loadu_si128((const __m128i *)b0->scales);
        const __m128i sc81 = _mm_loadu_si128((const __m128i *)b1->scales);
        __m256i sumi0[4], sumi1[4];
        {
            const __m256i all0 = _mm256_cvtepi8_epi16(sc80), all1 = _mm256_cvtepi8_epi16(sc81);
            SIMD_UNROLL
            for (int r = 0; r < R; r++) { /* start from -32 sum_s sc_s bsum_s */
                const __m256i bs = _mm256_loadu_si256((const __m256i *)(x->bsums + (m0 + r) * (K / 16) + b * 16));
                sumi0[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(all0, bs), 5));
                sumi1[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(all1, bs), 5));
            }
        }
        const int8_t *xb = x->qs + m0 * K + b * 256;
        SIMD_UNROLL
        for (int n = 0; n < 2; n++) {
            const __m256i sc0 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(n ? _mm_srli_si128(sc80, 8) : sc80));
            const __m256i sc1 = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(n ? _mm_srli_si128(sc81, 8) : sc81));
            SIMD_UNROLL
            for (int k = 0; k < 4; k++) {
                const __m256i v0 = unpack_run(b0, n, k), v1 = unpack_run(b1, n, k);
                const __m256i s0 = _mm256_shuffle_epi8(sc0, scale_pair_mask(2 * k));
                const __m256i s1 = _mm256_shuffle_epi8(sc1, scale_pair_mask(2 * k));
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const __m256i xv = _mm256_loadu_si256((const __m256i *)(xb + r * K + 128 * n + 32 * k));
                    sumi0[r] = _mm256_add_epi32(sumi0[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v0, xv), s0));
                    sumi1[r] = _mm256_add_epi32(sumi1[r], _mm256_madd_epi16(_mm256_maddubs_epi16(v1, xv), s1));
                    SIMD_KEEP(sumi0[r]);
                    SIMD_KEEP(sumi1[r]);
                }
            }
        }
        const float d0 = _cvtsh_ss(b0->d), d1 = _cvtsh_ss(b1->d);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const float dx = x->d[(m0 + r) * nb + b];
            _mm256_store_ps(acc[0][r], _mm256_fmadd_ps(_mm256_set1_ps(d0 * dx), _mm256_cvtepi32_ps(sumi0[r]),
                                                       _mm256_load_ps(acc[0][r])));
            _mm256_store_ps(acc[1][r], _mm256_fmadd_ps(_mm256_set1_ps(d1 * dx), _mm256_cvtepi32_ps(sumi1[r]),
                                                       _mm256_load_ps(acc[1][r])));
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

void simd_dot_q6_k(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {
    if (NW != 2 || R < 2 || R > 4) { /* beyond 4 rows, prefill_tile's 8 accumulators per row */
        dot_single_rows(w, w_stride, NW, x, m0, R, out);
        return;
    }
    switch (R) {
    case 2: pair_tile(w, w_stride, x, m0, 2, out); break;
    case 3: pair_tile(w, w_stride, x, m0, 3, out); break;
    default: pair_tile(w, w_stride, x, m0, 4, out); break;
    }
}
