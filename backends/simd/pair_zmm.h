/* pair_zmm.h — what the avx512 tier's decode pairs on the file's layout
 * share (matmul_q4_k_vnni.c, matmul_q6_k_vnni.c): two weight rows side by
 * side in 512-bit registers, row 0 in lanes 0-7 and row 1 in lanes 8-15, so
 * each half is, lane for lane, the AVX2 kernel's 256-bit accumulator of that
 * row. Include after simd_vec.h, in AVX-512 translation units only. */
#ifndef VT_SIMD_PAIR_ZMM_H
#define VT_SIMD_PAIR_ZMM_H

#include <immintrin.h>

/* out[r] and out[R + r]: row 0's and row 1's sums of acc[r], each half
 * summed as the AVX2 kernels sum their accumulator (simd_hsum_ps). */
SIMD_INLINE void simd_pair_sums(const __m512 *acc, int R, float *out) {
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        out[r] = simd_hsum_ps(_mm512_castps512_ps256(acc[r]));
        out[R + r] = simd_hsum_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r]), 1)));
    }
}

/* The exported kernel `name` (simd_dot_fn): the pair tile(w, w_stride, x,
 * m0, R, out) with R a constant for two weight rows and 1 to 8 activation
 * rows (AVX-512's 32 registers hold the 2 x 8 accumulators), every other
 * tile the AVX2 kernel avx2_dot's (the same bits). */
_Static_assert(SIMD_PAIR_ZMM_ROWS == 8, "SIMD_DEFINE_PAIR_DOT's cases are rows 1 to 8");
#define SIMD_DEFINE_PAIR_DOT(name, tile, avx2_dot)                                                             \
    void name(const void *w, size_t w_stride, int NW, const simd_act *x, int64_t m0, int R, float *out) {      \
        if (NW != 2 || R > SIMD_PAIR_ZMM_ROWS) {                                                               \
            avx2_dot(w, w_stride, NW, x, m0, R, out);                                                          \
            return;                                                                                            \
        }                                                                                                      \
        switch (R) {                                                                                           \
        case 1: tile(w, w_stride, x, m0, 1, out); break;                                                       \
        case 2: tile(w, w_stride, x, m0, 2, out); break;                                                       \
        case 3: tile(w, w_stride, x, m0, 3, out); break;                                                       \
        case 4: tile(w, w_stride, x, m0, 4, out); break;                                                       \
        case 5: tile(w, w_stride, x, m0, 5, out); break;                                                       \
        case 6: tile(w, w_stride, x, m0, 6, out); break;                                                       \
        case 7: tile(w, w_stride, x, m0, 7, out); break;                                                       \
        default: tile(w, w_stride, x, m0, 8, out); break;                                                      \
        }                                                                                                      \
    }

#endif
