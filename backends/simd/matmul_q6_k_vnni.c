/* matmul_q6_k_vnni.c — Q6_K decode pairs on the file's layout, AVX-512
 * VNNI tier (see matmul_q4_k_vnni.c for when simd reads a weight in the
 * file's layout).
 *
 * As there, the two weight rows of matmul.c's decode pair sit side by side
 * in one 512-bit register (row 0 in lanes 0-7, row 1 in lanes 8-15), each
 * 32-value run of 6-bit values against its activation run broadcast to both
 * halves. vpdpbusd sums 4 byte products per int32 lane (|sum| <= 4 * 63 *
 * 128 < 2^15, so its low 16 bits are the whole signed value), and vpdpwssd
 * multiplies it by its 16-value sub-block's scale held as (scale, 0) in the
 * lane's two int16s. Lane l of a row's sum holds exactly what lane l of the
 * AVX2 kernel's vpmaddubsw + vpmaddwd sum holds (matmul_q6_k.c: bytes
 * 4l..4l+3 of each run times their scale, after the same -32 offset from
 * the activation sums), and the float finish is its operations lane for
 * lane, so both tiers give the same bits (test_simd_tiers). The same pair
 * serves a few sequences decoding together (up to 4 activation rows, as the
 * AVX2 pair tile); the other tiles (the odd row, prefill) are the AVX2
 * kernel's. */
#include <immintrin.h>

#include "simd.h"
#include "simd_vec.h"
#include "pair_zmm.h"

/* Two 32-byte loads, row 0's in the low half and row 1's in the high. */
SIMD_INLINE __m512i load_pair(const uint8_t *p0, const uint8_t *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p0)),
                              _mm256_loadu_si256((const __m256i *)p1), 1);
}

/* Shuffle mask, per 128-bit lane, moving int16 scale s (0..7 of the lane)
 * into the low half of every 32-bit lane and zeroing the high half; lanes 0
 * and 2 take scale 2k, lanes 1 and 3 scale 2k + 1 (a run's two
 * sub-blocks of 16, for row 0 and row 1). */
SIMD_INLINE __m512i run_scale_mask(int k) {
    const int a = (int)(0x80800000u | (unsigned)((4 * k + 1) << 8) | (unsigned)(4 * k));
    const int c = (int)(0x80800000u | (unsigned)((4 * k + 3) << 8) | (unsigned)(4 * k + 2));
    return _mm512_setr_epi32(a, a, a, a, c, c, c, c, a, a, a, a, c, c, c, c);
}

/* out[j * R + r] = weight row j (of 2, w_stride bytes apart) . activation
 * row m0 + r, for r < R (1..8): decode and a few sequences decoding
 * together. Each unpacked run and its scales serve all R activation rows. */
SIMD_INLINE void pair_rows(const void *w, size_t w_stride, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const vt_block_q6_k *w0 = (const vt_block_q6_k *)w;
    const vt_block_q6_k *w1 = (const vt_block_q6_k *)((const uint8_t *)w + w_stride);
    __m512 acc[SIMD_PAIR_ZMM_ROWS];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const vt_block_q6_k *b0 = w0 + b, *b1 = w1 + b;
        simd_prefetch_ahead(b0, (int)sizeof(vt_block_q6_k));
        simd_prefetch_ahead(b1, (int)sizeof(vt_block_q6_k));
        /* both rows' 16 scales as int16: row 0 in 128-bit lanes 0-1, row 1 in 2-3 */
        const __m512i sc16 = _mm512_cvtepi8_epi16(
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)b0->scales)),
                                    _mm_loadu_si128((const __m128i *)b1->scales), 1));
        const int8_t *xb = x->qs + m0 * K + b * 256;
        __m512i sumi[SIMD_PAIR_ZMM_ROWS];
        SIMD_UNROLL
        for (int r = 0; r < R; r++) { /* start from -32 sum_s sc_s bsum_s, as the AVX2 kernel */
            const __m512i bs =
                _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->bsums + (m0 + r) * (K / 16) + b * 16)));
            sumi[r] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_madd_epi16(sc16, bs), 5));
        }
        SIMD_UNROLL
        for (int n = 0; n < 2; n++) {
            /* this half's scales: row 0's 128-bit lane n twice, then row 1's */
            const __m512i sc = n ? _mm512_shuffle_i64x2(sc16, sc16, 0xF5) : _mm512_shuffle_i64x2(sc16, sc16, 0xA0);
            const __m512i ql_a = load_pair(b0->ql + 64 * n, b1->ql + 64 * n);
            const __m512i ql_b = load_pair(b0->ql + 64 * n + 32, b1->ql + 64 * n + 32);
            const __m512i qh = load_pair(b0->qh + 32 * n, b1->qh + 32 * n);
            __m512i v[4];
            v[0] = _mm512_or_si512(_mm512_and_si512(ql_a, low4),
                                   _mm512_slli_epi16(_mm512_and_si512(qh, _mm512_set1_epi8(0x03)), 4));
            v[1] = _mm512_or_si512(_mm512_and_si512(ql_b, low4),
                                   _mm512_slli_epi16(_mm512_and_si512(qh, _mm512_set1_epi8(0x0C)), 2));
            v[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql_a, 4), low4),
                                   _mm512_and_si512(qh, _mm512_set1_epi8(0x30)));
            v[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql_b, 4), low4),
                                   _mm512_srli_epi16(_mm512_and_si512(qh, _mm512_set1_epi8((char)0xC0)), 2));
            SIMD_UNROLL
            for (int k = 0; k < 4; k++) {
                const __m512i sck = _mm512_shuffle_epi8(sc, run_scale_mask(k));
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const __m512i xv =
                        _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb + r * K + 128 * n + 32 * k)));
                    sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_dpbusd_epi32(_mm512_setzero_si512(), v[k], xv), sck);
                }
            }
        }
        const __m512 d = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(_cvtsh_ss(b0->d))),
                                                             _mm256_castps_pd(_mm256_set1_ps(_cvtsh_ss(b1->d))), 1));
        SIMD_UNROLL
        for (int r = 0; r < R; r++)
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x->d[(m0 + r) * nb + b])),
                                     _mm512_cvtepi32_ps(sumi[r]), acc[r]);
    }
    simd_pair_sums(acc, R, out);
}

SIMD_DEFINE_PAIR_DOT(simd_dot_q6_k_vnni, pair_rows, simd_dot_q6_k)
