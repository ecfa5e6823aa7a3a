/* q6_k_x8_tile.h — MATMUL on Q6_K weights prepared in the 8-row
 * interleaved layout (q6_k_x8.h): the kernels and their work split,
 * compiled once per instruction-set tier: matmul_q6_k_x8.c includes it
 * with AVX2 flags, matmul_q6_k_x8_vnni.c with AVX-512 VNNI flags. The tiers
 * differ only in how a record's integer sums are formed (record_rows and
 * record_pair_rows below); the sums are the same exact integers and the
 * float steps are shared, so the tiers agree bit for bit.
 *
 * Activations are 8-bit blocks of 256 with hsums (simd_act), quantized once
 * per matmul. Per record (8 weight rows, 256 values) and activation row the
 * integer sum
 *   sum_s sc_s ((q_s - 32) . x_s)
 * is exact in the 8 int32 lanes (lane = weight row): 4 values of every row
 * per register against 4 broadcast activation bytes. The AVX2 tier
 * multiplies them with vpmaddubsw (q is 0..63 unsigned) and adds the -32
 * offset in int16 before the vpmaddwd that applies the sub-block scale and
 * widens to int32 (see record_rows): one vpmaddwd per sub-block and row, no
 * separate offset sums; the VNNI tier's vpdpbusd sums into int32 at once
 * (see record_vnni). Then once
 * per record, in f32, acc = fma(float(isum), d * dx, acc) lane by lane, and
 * the 8 lanes are the 8 rows' results: no horizontal sums.
 *
 * Batch invariance: that float sequence (one fma per record, records in
 * order, from 0) is the same in every kernel below, whatever the number of
 * activation rows or the pairing of groups, so a (weight row, activation
 * row) result does not depend on M, the tile or the thread split.
 *
 * Work split, in groups of 8 weight rows handed out in chunks
 * (simd_dynamic_for):
 *   - M = 1 (decode, bound by memory bandwidth): a thread's chunk is read as
 *     two sequential streams, group g of its first half with group g of its
 *     second, so the hardware prefetchers keep more lines in flight;
 *   - M = 2..8 (sequences decoding together): the same two streams read
 *     together, the pair of groups against all M rows at once (one read of
 *     the weights per step): each block of the two is consumed in the same
 *     loop, so both streams are in flight at once (reading one group after
 *     the other leaves the memory idle half the time) and each activation
 *     broadcast feeds both groups;
 *   - M > 8 (prefill): up to 128 rows on the AVX-512 VNNI tier, the same two
 *     streams, each pair against the rows 8 at a time while it stays in L1/L2
 *     (X8_STREAMED); beyond, and on AVX2, L2 tiles of groups, each reused for every block of 8
 *     activation rows (8 x K bytes, 24 KiB at K = 3072, what stays in L1). */
#ifndef VT_SIMD_Q6_K_X8_TILE_H
#define VT_SIMD_Q6_K_X8_TILE_H

#include <immintrin.h>
#include <string.h>

#include "prepared_groups.h"
#include "q6_k_x8.h"
#include "simd_vec.h"

/* The AVX-512 VNNI tier's build (matmul_q6_k_x8_vnni.c), which the entry
 * points of matmul_q6_k_x8.c pick when ctx->isa says so. */
vt_status simd_q6_k_prepared_matmul_vnni(simd_ctx *ctx, const vt_node *node);
extern const simd_group_layout simd_q6k_layout_vnni;

/* 4 activation bytes in every 32-bit lane. */
SIMD_INLINE __m256i broadcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* The 4 runs of sub-block s (8 rows x 4 values each, unsigned 6-bit). */
SIMD_INLINE void unpack_sub(const q6_k_x8 *o, int s, __m256i w[4]) {
    const __m256i low6 = _mm256_set1_epi8(0x3F);
    const __m256i p0 = _mm256_load_si256((const __m256i *)o->qs[s][0]);
    const __m256i p1 = _mm256_load_si256((const __m256i *)o->qs[s][1]);
    const __m256i p2 = _mm256_load_si256((const __m256i *)o->qs[s][2]);
    w[0] = _mm256_and_si256(p0, low6);
    w[1] = _mm256_and_si256(p1, low6);
    w[2] = _mm256_and_si256(p2, low6);
    /* bits 6-7 of the three bytes are bits 0-1, 2-3, 4-5 of the fourth value
     * (16-bit shifts: what crosses from the next byte is masked off) */
    w[3] = _mm256_or_si256(
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(p0, 6), _mm256_set1_epi8(0x03)),
                        _mm256_and_si256(_mm256_srli_epi16(p1, 4), _mm256_set1_epi8(0x0C))),
        _mm256_and_si256(_mm256_srli_epi16(p2, 2), _mm256_set1_epi8(0x30)));
}

/* Sub-block s's scales as int16 pairs (sc_r, sc_r) in lane r, the operand
 * of the vpmaddwd that sums a row's two vpmaddubsw results. */
SIMD_INLINE __m256i sub_scales(const q6_k_x8 *o, int s) {
    const __m128i sc = _mm_loadl_epi64((const __m128i *)o->scales[s]);
    return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(sc, sc));
}

/* Prefetch the record SIMD_PREFETCH_BYTES ahead, two lines per sub-block:
 * into L1, or into L2 (l2) when several activation rows share the weights
 * (sequences decoding together, a streamed prompt: their activations own
 * L1, see simd_prefetch_ahead_l2). */
SIMD_INLINE void prefetch_sub(const q6_k_x8 *o, int s, int l2) {
    const char *a = (const char *)o + SIMD_PREFETCH_BYTES + 128 * s;
    if (l2) {
        _mm_prefetch(a, _MM_HINT_T1);
        _mm_prefetch(a + 64, _MM_HINT_T1);
    } else {
        _mm_prefetch(a, SIMD_PREFETCH_HINT);
        _mm_prefetch(a + 64, SIMD_PREFETCH_HINT);
    }
}

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
/* AVX-512 VNNI tier. Per sub-block, the 4 runs are taken two at a time in
 * 512-bit registers whose 64-bit lane i holds row i's 4 values of one run
 * and then its 4 of the next (the interleave is done on the weights, once
 * per group and sub-block, by a permute); an activation row's 8 bytes for
 * those two runs are then one plain 64-bit broadcast, and one vpdpbusd sums
 * 4 products of q (unsigned, 0..63) and x into each 32-bit lane. The -32
 * offset enters as the start of each lane pair's chain: the two int32 lanes
 * of row i start at the activation's two hsums of the sub-block, whose sum
 * is -32 times the sum of its 16 values. So a lane pair ends on
 * (q - 32) . x over the sub-block, the scale multiplies both lanes
 * (vpmulld), and the pairs are added once per record: the same exact int32
 * as the AVX2 tier's, whose vpmaddwd forms sc (t_lo + t_hi) of the same
 * integers (|.| < 2^31 throughout: 16 x 128 x 16 x 32 x 128 < 2^30). */

/* Runs (0, 1) and (2, 3) of sub-block s, as above. */
SIMD_INLINE void unpack_sub_zmm(const q6_k_x8 *o, int s, __m512i w[2]) {
    /* lane 2i from the first run's lane i, lane 2i + 1 from the second's */
    const __m512i pairs = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m256i r[4];
    unpack_sub(o, s, r);
    w[0] = _mm512_permutex2var_epi32(_mm512_castsi256_si512(r[0]), pairs, _mm512_castsi256_si512(r[1]));
    w[1] = _mm512_permutex2var_epi32(_mm512_castsi256_si512(r[2]), pairs, _mm512_castsi256_si512(r[3]));
}

/* Sub-block s's scales in both 32-bit lanes of each row. */
SIMD_INLINE __m512i sub_scales_zmm(const q6_k_x8 *o, int s) {
    const __m128i sc = _mm_loadl_epi64((const __m128i *)o->scales[s]);
    return _mm512_cvtepi8_epi32(_mm_unpacklo_epi8(sc, sc));
}

SIMD_INLINE __m512i broadcast8(const void *p) {
    int64_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi64(v);
}

/* isum[g][r] = the integer sum of record o[g] (g < NG, block b) against
 * activation row m0 + r (r < R); l2 as in prefetch_sub. */
SIMD_INLINE void record_vnni(const q6_k_x8 *const *o, int NG, const simd_act *x, int64_t m0, int R, int64_t b,
                             int l2, __m256i (*isum)[SIMD_MAX_ROWS]) {
    const int64_t K = x->K;
    const int8_t *xb = x->qs + m0 * K + b * 256;
    const int16_t *hb = x->hsums + m0 * (K / 8) + b * 32;
    /* the record's hsums widened to int32, each sub-block's pair one
     * 64-bit broadcast away */
    _Alignas(64) int32_t h32[SIMD_MAX_ROWS][32];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        const int16_t *h = hb + r * (K / 8);
        _mm512_store_si512((void *)h32[r], _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)h)));
        _mm512_store_si512((void *)(h32[r] + 16), _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(h + 16))));
    }
    __m512i acc[2][SIMD_MAX_ROWS];
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[g][r] = _mm512_setzero_si512();
    for (int s = 0; s < 16; s++) {
        __m512i w[2][2], sc[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            prefetch_sub(o[g], s, l2);
            unpack_sub_zmm(o[g], s, w[g]);
            sc[g] = sub_scales_zmm(o[g], s);
        }
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const int8_t *xs = xb + r * K + 16 * s;
            const __m512i x01 = broadcast8(xs), x23 = broadcast8(xs + 8), h = broadcast8(h32[r] + 2 * s);
            SIMD_UNROLL
            for (int g = 0; g < NG; g++) {
                const __m512i t = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(h, w[g][0], x01), w[g][1], x23);
                acc[g][r] = _mm512_add_epi32(acc[g][r], _mm512_mullo_epi32(t, sc[g]));
            }
        }
    }
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++)
            isum[g][r] = _mm512_cvtepi64_epi32(_mm512_add_epi32(acc[g][r], _mm512_srli_epi64(acc[g][r], 32)));
}

/* One activation row (decode) in 256-bit registers: per sub-block, the 4
 * runs' vpdpbusd chained from the sub-block's offset, -32 times the sum of
 * its 16 activation values (the sum of its two hsums), then its scale. */
SIMD_INLINE __m256i record_vnni_row(const q6_k_x8 *o, const simd_act *x, int64_t m0, int64_t b, int l2) {
    const int64_t K = x->K;
    const int8_t *xb = x->qs + m0 * K + b * 256;
    const int16_t *hb = x->hsums + m0 * (K / 8) + b * 32;
    _Alignas(64) int32_t off[16];
    _mm512_store_si512((void *)off, _mm512_madd_epi16(_mm512_loadu_si512((const void *)hb), _mm512_set1_epi16(1)));
    __m256i acc = _mm256_setzero_si256();
    for (int s = 0; s < 16; s++) {
        prefetch_sub(o, s, l2);
        __m256i w[4];
        unpack_sub(o, s, w);
        const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)o->scales[s]));
        const int8_t *xs = xb + 16 * s;
        __m256i t = _mm256_set1_epi32(off[s]);
        t = _mm256_dpbusd_epi32(t, w[0], broadcast4(xs));
        t = _mm256_dpbusd_epi32(t, w[1], broadcast4(xs + 4));
        t = _mm256_dpbusd_epi32(t, w[2], broadcast4(xs + 8));
        t = _mm256_dpbusd_epi32(t, w[3], broadcast4(xs + 12));
        acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(t, sc));
    }
    return acc;
}

/* One row takes the 256-bit kernel: decode, bound by memory, measured
 * faster so than in 512-bit registers, and faster than AVX2 (the output
 * matmul K=1024 N=151936 M=1, simd_matmul_bench -P -t 2: 2331 us against
 * 4079 us in 512-bit registers and 2713 us on AVX2); more rows take the
 * 512-bit one. The integer sums are the same in both. */
SIMD_INLINE void record_rows(const q6_k_x8 *o, const simd_act *x, int64_t m0, int R, int64_t b, int l2,
                             __m256i *isum) {
    if (R == 1) {
        isum[0] = record_vnni_row(o, x, m0, b, l2);
        return;
    }
    const q6_k_x8 *g[1] = {o};
    record_vnni(g, 1, x, m0, R, b, l2, (__m256i(*)[SIMD_MAX_ROWS])isum);
}

SIMD_INLINE void record_pair_rows(const q6_k_x8 *o0, const q6_k_x8 *o1, const simd_act *x, int64_t m0, int R,
                                  int64_t b, __m256i isum[2][SIMD_MAX_ROWS]) {
    const q6_k_x8 *g[2] = {o0, o1};
    record_vnni(g, 2, x, m0, R, b, 1, isum);
}
#else
/* isum[r] = the integer sum of record o (block b) against activation row
 * m0 + r, r < R; l2: prefetch into L2 (see prefetch_sub). Per sub-block s and row, the 4 vpmaddubsw results (each
 * int16 half of a row's lane: 2 products q x) and the activation's hsums
 * (-32 times the sum of the half's 8 activation values) add in int16 to
 * (q - 32) . x over the half's 8 values: |.| <= 8 x 32 x 127 = 32512, so
 * although q . x alone may pass 2^15, the wrapping adds end on the exact
 * value (vpmaddubsw itself cannot saturate: 2 x 63 x 127). The sub-block
 * scale is applied by the vpmaddwd that sums the two halves into int32. */
SIMD_INLINE void record_rows(const q6_k_x8 *o, const simd_act *x, int64_t m0, int R, int64_t b, int l2,
                             __m256i *isum) {
    const int64_t K = x->K;
    SIMD_UNROLL
    for (int r = 0; r < R; r++) isum[r] = _mm256_setzero_si256();
    const int8_t *xb = x->qs + m0 * K + b * 256;
    const int16_t *hb = x->hsums + m0 * (K / 8) + b * 32;
    for (int s = 0; s < 16; s++) {
        prefetch_sub(o, s, l2);
        __m256i w[4];
        unpack_sub(o, s, w);
        const __m256i sc = sub_scales(o, s);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const int8_t *xs = xb + r * K + 16 * s;
            const __m256i t01 = _mm256_add_epi16(_mm256_maddubs_epi16(w[0], broadcast4(xs)),
                                                 _mm256_maddubs_epi16(w[1], broadcast4(xs + 4)));
            const __m256i t23 = _mm256_add_epi16(_mm256_maddubs_epi16(w[2], broadcast4(xs + 8)),
                                                 _mm256_maddubs_epi16(w[3], broadcast4(xs + 12)));
            const __m256i off = broadcast4((const int8_t *)(hb + r * (K / 8) + 2 * s));
            const __m256i t = _mm256_add_epi16(_mm256_add_epi16(t01, t23), off);
            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(t, sc));
            SIMD_KEEP(isum[r]);
        }
    }
}

/* One activation row against sub-block s of two groups (weights w0, w1,
 * scales sc0, sc1): isum0 += the row's scaled sum with group 0, isum1 with
 * group 1, each broadcast activation load feeding both groups' vpmaddubsw.
 * The same integers as record_rows' (int16 adds wrap, so their order is
 * free). In asm because the compiler, short of registers for two groups'
 * weights, spilled them inside this loop: here 8 weights + 4 temporaries
 * stay in registers, the sums and scales are memory operands (loads and
 * stores use other ports than the multiplies). */
SIMD_INLINE void pair_row(const __m256i w0[4], const __m256i w1[4], const __m256i *sc0, const __m256i *sc1,
                          const int8_t *xs, const int16_t *hs, __m256i *isum0, __m256i *isum1) {
    __m256i x4, t0, t1, u;
    __asm__("vpbroadcastd (%[xs]), %[x]\n\t"
            "vpmaddubsw %[x], %[a0], %[t0]\n\t"
            "vpmaddubsw %[x], %[b0], %[t1]\n\t"
            "vpbroadcastd 4(%[xs]), %[x]\n\t"
            "vpmaddubsw %[x], %[a1], %[u]\n\t"
            "vpaddw %[u], %[t0], %[t0]\n\t"
            "vpmaddubsw %[x], %[b1], %[u]\n\t"
            "vpaddw %[u], %[t1], %[t1]\n\t"
            "vpbroadcastd 8(%[xs]), %[x]\n\t"
            "vpmaddubsw %[x], %[a2], %[u]\n\t"
            "vpaddw %[u], %[t0], %[t0]\n\t"
            "vpmaddubsw %[x], %[b2], %[u]\n\t"
            "vpaddw %[u], %[t1], %[t1]\n\t"
            "vpbroadcastd 12(%[xs]), %[x]\n\t"
            "vpmaddubsw %[x], %[a3], %[u]\n\t"
            "vpaddw %[u], %[t0], %[t0]\n\t"
            "vpmaddubsw %[x], %[b3], %[u]\n\t"
            "vpaddw %[u], %[t1], %[t1]\n\t"
            "vpbroadcastd (%[hs]), %[x]\n\t"
            "vpaddw %[x], %[t0], %[t0]\n\t"
            "vpaddw %[x], %[t1], %[t1]\n\t"
            "vpmaddwd %[sc0], %[t0], %[t0]\n\t"
            "vpmaddwd %[sc1], %[t1], %[t1]\n\t"
            "vpaddd %[i0], %[t0], %[t0]\n\t"
            "vpaddd %[i1], %[t1], %[t1]\n\t"
            "vmovdqa %[t0], %[i0]\n\t"
            "vmovdqa %[t1], %[i1]"
            : [x] "=&x"(x4), [t0] "=&x"(t0), [t1] "=&x"(t1), [u] "=&x"(u), [i0] "+m"(*isum0), [i1] "+m"(*isum1)
            : [xs] "r"(xs), [hs] "r"(hs), [a0] "x"(w0[0]), [a1] "x"(w0[1]), [a2] "x"(w0[2]), [a3] "x"(w0[3]),
              [b0] "x"(w1[0]), [b1] "x"(w1[1]), [b2] "x"(w1[2]), [b3] "x"(w1[3]), [sc0] "m"(*sc0), [sc1] "m"(*sc1),
              "m"(*(const int8_t(*)[16])xs), "m"(*(const int16_t(*)[2])hs));
}

/* record_rows for two groups' records o0, o1 (block b) and activation rows
 * m0 .. m0+R-1, added into isum[0][r] and isum[1][r]. */
SIMD_INLINE void record_pair_rows(const q6_k_x8 *o0, const q6_k_x8 *o1, const simd_act *x, int64_t m0, int R,
                                  int64_t b, __m256i isum[2][SIMD_MAX_ROWS]) {
    const int64_t K = x->K;
    const int8_t *xb = x->qs + m0 * K + b * 256;
    const int16_t *hb = x->hsums + m0 * (K / 8) + b * 32;
    SIMD_ALIGNED __m256i sc[2];
    for (int s = 0; s < 16; s++) {
        prefetch_sub(o0, s, 1);
        prefetch_sub(o1, s, 1);
        __m256i w0[4], w1[4];
        unpack_sub(o0, s, w0);
        unpack_sub(o1, s, w1);
        sc[0] = sub_scales(o0, s);
        sc[1] = sub_scales(o1, s);
        SIMD_UNROLL
        for (int r = 0; r < R; r++)
            pair_row(w0, w1, &sc[0], &sc[1], xb + r * K + 16 * s, hb + r * (K / 8) + 2 * s, &isum[0][r], &isum[1][r]);
    }
}

#endif

/* The one float step per record: acc += float(isum) * (d * dx). */
SIMD_INLINE __m256 record_fma(const q6_k_x8 *o, float dx, __m256i isum, __m256 acc) {
    const __m256 dd = _mm256_mul_ps(_mm256_load_ps(o->d), _mm256_set1_ps(dx));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc);
}

/* out[8 r + j] = row j of group g . activation row m0 + r, r < R (1..8);
 * few: a few rows decoding together (the group streamed once for all). */
SIMD_INLINE void group_tile(const q6_k_x8 *g, const simd_act *x, int64_t m0, int R, int few, float *out) {
    const int64_t nb = x->K / 256;
    SIMD_ALIGNED float acc[SIMD_MAX_ROWS][8];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) _mm256_store_ps(acc[r], _mm256_setzero_ps());
    for (int64_t b = 0; b < nb; b++) {
        __m256i isum[SIMD_MAX_ROWS];
        record_rows(g + b, x, m0, R, b, few && R > 1, isum);
        SIMD_UNROLL
        for (int r = 0; r < R; r++)
            _mm256_store_ps(acc[r], record_fma(g + b, x->d[(m0 + r) * nb + b], isum[r], _mm256_load_ps(acc[r])));
        /* keep acc in memory: the integer sums need the registers */
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int r = 0; r < R; r++) _mm256_storeu_ps(out + 8 * r, _mm256_load_ps(acc[r]));
}

/* Groups g0 and g1 (decode's two streams) against activation rows
 * m0 .. m0+R-1 (R 1..8), out0/out1 as group_tile's out. */
SIMD_INLINE void group_pair_tile(const q6_k_x8 *g0, const q6_k_x8 *g1, const simd_act *x, int64_t m0, int R,
                                 float *out0, float *out1) {
    const int64_t nb = x->K / 256;
    SIMD_ALIGNED float acc[2][SIMD_MAX_ROWS][8];
    SIMD_ALIGNED __m256i isum[2][SIMD_MAX_ROWS];
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        _mm256_store_ps(acc[0][r], _mm256_setzero_ps());
        _mm256_store_ps(acc[1][r], _mm256_setzero_ps());
    }
    for (int64_t b = 0; b < nb; b++) {
        SIMD_UNROLL
        for (int r = 0; r < R; r++) isum[0][r] = isum[1][r] = _mm256_setzero_si256();
        record_pair_rows(g0 + b, g1 + b, x, m0, R, b, isum);
        SIMD_UNROLL
        for (int r = 0; r < R; r++) {
            const float dx = x->d[(m0 + r) * nb + b];
            _mm256_store_ps(acc[0][r], record_fma(g0 + b, dx, isum[0][r], _mm256_load_ps(acc[0][r])));
            _mm256_store_ps(acc[1][r], record_fma(g1 + b, dx, isum[1][r], _mm256_load_ps(acc[1][r])));
        }
        __asm__ volatile("" ::: "memory");
    }
    SIMD_UNROLL
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(out0 + 8 * r, _mm256_load_ps(acc[0][r]));
        _mm256_storeu_ps(out1 + 8 * r, _mm256_load_ps(acc[1][r]));
    }
}

static void run_pair_tile(const q6_k_x8 *g0, const q6_k_x8 *g1, const simd_act *x, int64_t m0, int R, float *out0,
                          float *out1) {
#define PAIR_TILE_R(n) group_pair_tile(g0, g1, x, m0, n, out0, out1)
    SIMD_WITH_CONST_R8(R, PAIR_TILE_R)
#undef PAIR_TILE_R
}

/* Decode: groups g0 and g1 (two streams) against activation row 0. */
SIMD_INLINE void group_pair_decode(const q6_k_x8 *g0, const q6_k_x8 *g1, const simd_act *x, float *out0, float *out1) {
    const int64_t nb = x->K / 256;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i i0, i1;
        record_rows(g0 + b, x, 0, 1, b, 0, &i0);
        record_rows(g1 + b, x, 0, 1, b, 0, &i1);
        acc0 = record_fma(g0 + b, x->d[b], i0, acc0);
        acc1 = record_fma(g1 + b, x->d[b], i1, acc1);
    }
    _mm256_storeu_ps(out0, acc0);
    _mm256_storeu_ps(out1, acc1);
}

static void run_tile(const q6_k_x8 *g, const simd_act *x, int64_t m0, int R, int few, float *out) {
#define TILE_R(n) group_tile(g, x, m0, n, few, out)
    SIMD_WITH_CONST_R8(R, TILE_R)
#undef TILE_R
}

typedef struct x8_task {
    const q6_k_x8 *w; /* G groups of nb records */
    int64_t nb, N, M;
    int64_t tile_groups; /* groups per L2 tile (prefill) */
    simd_act act;
    void *y; /* [M][N] of y_dtype */
    int32_t y_dtype;
} x8_task;

/* Store out[8 r + j] as y[m0 + r][8 g + j] for the group's valid rows. */
static void store_group(const x8_task *t, int64_t g, int64_t m0, int R, const float *out) {
    const int64_t n0 = g * Q6K_X8_ROWS;
    const int valid = t->N - n0 < Q6K_X8_ROWS ? (int)(t->N - n0) : Q6K_X8_ROWS;
    for (int r = 0; r < R; r++) {
        const int64_t at = (m0 + r) * t->N + n0;
        if (valid == Q6K_X8_ROWS)
            simd_store8(t->y_dtype, t->y, at, _mm256_loadu_ps(out + 8 * r));
        else
            for (int j = 0; j < valid; j++) simd_store1(t->y_dtype, t->y, at + j, out[8 * r + j]);
    }
}

/* Whether M rows stream the groups (decode's two streams, each pair
 * against all the rows 8 at a time while it is in L1/L2) rather than walk
 * them in L2 tiles: up to 8 rows on both tiers, up to 128 on the AVX-512
 * VNNI tier, for the reason prepared_groups.c gives for its layouts
 * (a tile's first pass reads memory unprefetched). Measured on an AMD EPYC
 * with AVX-512 (simd_matmul_bench -P -t 2 -d q6_k, K = 1024, N = 3072 and
 * K = 3072, N = 1024, weights from DRAM): 156-163 -> 125-135 us at 9
 * rows, 206-231 -> 174-214 at 16, 667-697 -> 602-649 at 64, alike at 128;
 * at 512 rows the tiles were faster at K = 1024 (5.0 against 5.9 ms).
 * Not measured at larger K. The pair tile prefetches ahead on every pass
 * over the pair, the later ones finding the lines in cache (the shared
 * walk prefetches on the first pass only). A mixture of experts' Q6_K
 * experts go through the shared walk (Q6K_X8_LAYOUT below), not this one:
 * there one group at a time streams up to Q6K_X8_STREAM_ROWS rows. */
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define X8_STREAMED(M) ((M) <= 128)
#else
#define X8_STREAMED(M) ((M) <= SIMD_MAX_ROWS)
#endif

/* Groups [begin, end), all M activation rows. */
static void x8_groups(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const x8_task *t = arg;
    const int64_t nb = t->nb;
    float out[SIMD_MAX_ROWS * 8], out1[8];
    if (X8_STREAMED(t->M)) {
        const int64_t half = (end - begin) / 2;
        for (int64_t g = begin; g < begin + half; g++) {
            if (t->M == 1) {
                group_pair_decode(t->w + g * nb, t->w + (g + half) * nb, &t->act, out, out1);
                store_group(t, g, 0, 1, out);
                store_group(t, g + half, 0, 1, out1);
                continue;
            }
            for (int64_t m0 = 0; m0 < t->M; m0 += SIMD_MAX_ROWS) {
                const int R = (int)(t->M - m0 < SIMD_MAX_ROWS ? t->M - m0 : SIMD_MAX_ROWS);
                float out2[SIMD_MAX_ROWS * 8];
                run_pair_tile(t->w + g * nb, t->w + (g + half) * nb, &t->act, m0, R, out, out2);
                store_group(t, g, m0, R, out);
                store_group(t, g + half, m0, R, out2);
            }
        }
        if ((end - begin) % 2) /* the odd group out */
            for (int64_t m0 = 0; m0 < t->M; m0 += SIMD_MAX_ROWS) {
                const int R = (int)(t->M - m0 < SIMD_MAX_ROWS ? t->M - m0 : SIMD_MAX_ROWS);
                run_tile(t->w + (end - 1) * nb, &t->act, m0, R, 1, out);
                store_group(t, end - 1, m0, R, out);
            }
        return;
    }
    for (int64_t g0 = begin; g0 < end; g0 += t->tile_groups) {
        const int64_t g1 = g0 + t->tile_groups < end ? g0 + t->tile_groups : end;
        for (int64_t m0 = 0; m0 < t->M; m0 += SIMD_MAX_ROWS) {
            const int R = (int)(t->M - m0 < SIMD_MAX_ROWS ? t->M - m0 : SIMD_MAX_ROWS);
            for (int64_t g = g0; g < g1; g++) {
                run_tile(t->w + g * nb, &t->act, m0, R, 0, out);
                store_group(t, g, m0, R, out);
            }
        }
    }
}

static vt_status q6k_matmul(simd_ctx *ctx, const vt_node *node) {
    const vt_tensor *W = &node->src[0], *X = &node->src[1], *Y = &node->dst;
    const int64_t K = W->ne[0], N = W->ne[1], M = X->ne[1];
    if (W->dtype != VT_Q6_K || K % 256 != 0 || X->dtype != VT_F32) return VT_ERR_INVALID;
    if (M <= 0 || N <= 0) return VT_OK;
    simd_act act;
    memset(&act, 0, sizeof act);
    vt_status st = simd_quantize_activations(ctx, X, SIMD_ACT_Q8_K16H, &act);
    if (st != VT_OK) return st;

    x8_task t;
    memset(&t, 0, sizeof t);
    t.w = W->data;
    t.nb = K / 256;
    t.N = N;
    t.M = M;
    t.act = act;
    t.y = Y->data;
    t.y_dtype = Y->dtype;
    const int64_t groups = (N + Q6K_X8_ROWS - 1) / Q6K_X8_ROWS;
    /* ~64 KiB of weights per L2 tile in prefill; streamed (decode and
     * X8_STREAMED prompts) about 4 chunks per thread, whole pairs of
     * groups, so a thread that falls behind does not leave the other
     * waiting for up to half the op */
    const int64_t group_bytes = t.nb * (int64_t)sizeof(q6_k_x8);
    const int64_t tile = 65536 / group_bytes;
    t.tile_groups = tile < 1 ? 1 : tile;
    int64_t chunk = t.tile_groups;
    if (X8_STREAMED(M)) {
        chunk = groups / (4 * (int64_t)ctx->n_threads);
        chunk = chunk < 8 ? 8 : (chunk + 1) & ~(int64_t)1;
    }
    simd_dynamic_for(ctx, groups, chunk, x8_groups, &t);
    return VT_OK;
}

/* The layout's tiles for the shared group walk (prepared_groups.c), which
 * the experts of MOE_MATMUL use to walk all their groups in one pass (a
 * decode step's experts are too small for a pass each). The walk hands
 * pair_rows at most SIMD_GROUP_TILE_R rows, from row 0, and few_rows up to
 * SIMD_MAX_ROWS; every one of these runs the kernels above, whose float
 * sequence per (weight row, activation row) is the same, so a row's result
 * is the plain matmul's whatever walk reached it. */
static void walk_rows(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    SIMD_ALIGNED float out[SIMD_MAX_ROWS * 8];
    run_tile((const q6_k_x8 *)wg, &j->act, m0, R, stream, out);
    for (int r = 0; r < R; r++) res[r] = _mm256_load_ps(out + 8 * r);
}

static void walk_pair(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    SIMD_ALIGNED float out0[8], out1[8];
    group_pair_decode((const q6_k_x8 *)wg0, (const q6_k_x8 *)wg1, &j->act, out0, out1);
    res[0] = _mm256_load_ps(out0);
    res[1] = _mm256_load_ps(out1);
}

static void walk_pair_rows(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, int R, __m256 *res) {
    SIMD_ALIGNED float out0[SIMD_MAX_ROWS * 8], out1[SIMD_MAX_ROWS * 8];
    run_pair_tile((const q6_k_x8 *)wg0, (const q6_k_x8 *)wg1, &j->act, 0, R, out0, out1);
    for (int r = 0; r < R; r++) {
        res[r] = _mm256_load_ps(out0 + 8 * r);
        res[R + r] = _mm256_load_ps(out1 + 8 * r);
    }
}

/* The layout's entry in the shared walk (prepared_groups.h). */
/* The experts' rows streamed (each expert's group once against all its
 * rows) up to this many on the AVX-512 VNNI tier. Measured on an AMD EPYC
 * with AVX-512 (simd_matmul_bench -P -t 2 -d q6_k -e 128:8, 128 experts,
 * 8 a token, alternated): 256 tokens (16 rows an expert) 32-66 -> 23-33
 * ms a call, 512 (32 an expert) 198-310 -> 191-290 ms. */
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define Q6K_X8_STREAM_ROWS 32
#else
#define Q6K_X8_STREAM_ROWS 0
#endif
#define Q6K_X8_LAYOUT                                                                                             \
    {.act_kind = SIMD_ACT_Q8_K16H, .block_len = 256, .block_bytes = sizeof(q6_k_x8), .rows = walk_rows,           \
     .pair = walk_pair, .pair_rows = walk_pair_rows, .few_rows = SIMD_MAX_ROWS, .stream_rows = Q6K_X8_STREAM_ROWS}

#endif
