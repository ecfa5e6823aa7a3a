/* matmul_q4_k_vnni.c — Q4_K decode pairs on the file's layout, AVX-512
 * VNNI tier: weights read as the GGUF file stores them, which is what simd
 * decodes when another backend reads the same weight and it therefore stays
 * unprepared (--backend onednn: onednn's prefill and simd's decode share
 * it), or when it was never offered to the prepare hook.
 *
 * The two weight rows of matmul.c's decode pair sit side by side in one
 * 512-bit register (row 0 in lanes 0-7, row 1 in lanes 8-15), each 32-byte
 * run of a block's 4-bit values against its activation run broadcast to
 * both halves. vpdpbusd sums 4 byte products per int32 lane, and vpdpwssd
 * multiplies that sum (|sum| <= 4 * 15 * 128, so its low 16 bits are the
 * whole signed value) by the sub-block's scale held as (scale, 0) in the
 * lane's two int16s. Lane l of a row's sum thus holds the products of bytes
 * 4l..4l+3 of each sub-block times its scale: the same exact integers as
 * the AVX2 kernel's vpmaddubsw + vpmaddwd lanes (matmul_q4_k.c), and the
 * float finish below is its operations lane for lane, so both tiers give
 * the same bits (test_simd_tiers). The same pair serves a few sequences
 * decoding together (up to 8 activation rows); the
 * other tiles (the odd row, prefill) are the AVX2 kernel's. */
#include <immintrin.h>
#include <string.h>

#include "simd.h"
#include "simd_vec.h"
#include "pair_zmm.h"

/* Shuffle mask zero-extending byte k of each 128-bit lane into every
 * 32-bit lane: a sub-block's scale as the int16 pair (scale, 0). */
SIMD_INLINE __m512i scale_dword_mask(int k) { return _mm512_set1_epi32((int)(0x80808000u | (unsigned)k)); }

/* out[j * R + r] = weight row j (of 2, w_stride bytes apart) . activation
 * row m0 + r, for r < R (1..8): decode and a few sequences decoding
 * together. Each decoded run of 4-bit values and its scales serve all R
 * activation rows. */
SIMD_INLINE void pair_rows(const void *w, size_t w_stride, const simd_act *x, int64_t m0, int R, float *out) {
    const int64_t K = x->K, nb = K / 256;
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i d_lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m512i dmin_lanes = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
    const vt_block_q4_k *w0 = (const vt_block_q4_k *)w;
    const vt_block_q4_k *w1 = (const vt_block_q4_k *)((const uint8_t *)w + w_stride);
    __m512 acc[SIMD_PAIR_ZMM_ROWS];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        simd_prefetch_ahead(w0 + b, (int)sizeof(vt_block_q4_k));
        simd_prefetch_ahead(w1 + b, (int)sizeof(vt_block_q4_k));
        /* [sc0..sc7, m0..m7] of row 0 in 128-bit lanes 0 and 1, of row 1 in 2 and 3 */
        const __m256i sm = simd_unpack_k4_scales_pair(w0[b].scales, w1[b].scales);
        const __m512i sm4 = _mm512_shuffle_i64x2(_mm512_castsi256_si512(sm), _mm512_castsi256_si512(sm), 0x50);
        const int8_t *xb = x->qs + m0 * K + b * 256;
        __m512i sumi[SIMD_PAIR_ZMM_ROWS];
        SIMD_UNROLL
        for (int r = 0; r < R; r++) sumi[r] = _mm512_setzero_si512();
        SIMD_UNROLL
        for (int i = 0; i < 4; i++) { /* sub-blocks 2i (low nibbles) and 2i+1 (high) */
            const __m512i q =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(w0[b].qs + 32 * i))),
                                   _mm256_loadu_si256((const __m256i *)(w1[b].qs + 32 * i)), 1);
            const __m512i lo = _mm512_and_si512(q, low4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
            const __m512i sc_lo = _mm512_shuffle_epi8(sm4, scale_dword_mask(2 * i));
            const __m512i sc_hi = _mm512_shuffle_epi8(sm4, scale_dword_mask(2 * i + 1));
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const __m512i xl = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb + r * K + 64 * i)));
                const __m512i xh =
                    _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb + r * K + 64 * i + 32)));
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xl), sc_lo);
                sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, xh), sc_hi);
            }
        }
        uint32_t dm0, dm1; /* d0, dmin0, d1, dmin1 in one conversion */
        memcpy(&dm0, &w0[b].d, sizeof dm0);
        memcpy(&dm1, &w1[b].d, sizeof dm1);
        const __m512 dm =
            _mm512_castps128_ps512(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)dm0), (int)dm1, 1)));
        /* dmin m_j as floats (the minimums are bytes 8-15 of each row's lane), row 0 then row 1 */
        const __m512 mins = _mm512_mul_ps(
            _mm512_permutexvar_ps(dmin_lanes, dm),
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(_mm256_permute4x64_epi64(sm, 0x0D)))));
        const __m512 d = _mm512_permutexvar_ps(d_lanes, dm);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const __m512 ms = _mm512_castpd_ps(
                _mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(x->msums + (m0 + r) * (K / 32) + b * 8))));
            /* matmul_q4_k.c's operations, lane for lane: minimums first, then the scaled sum */
            acc[r] = _mm512_fnmadd_ps(mins, ms, acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x->d[(m0 + r) * nb + b])),
                                     _mm512_cvtepi32_ps(sumi[r]), acc[r]);
        }
    }
    simd_pair_sums(acc, R, out);
}

SIMD_DEFINE_PAIR_DOT(simd_dot_q4_k_vnni, pair_rows, simd_dot_q4_k)
