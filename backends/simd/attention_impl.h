/* attention_impl.h — causal GQA attention of query tokens against one layer's
 * paged KV cache (F32, F16, BF16, or Q8_0 through kv_q8_0.c's kernels),
 * with an online softmax in f32.
 *
 * Every query's positions are cut into spans of SPAN positions at fixed
 * offsets (0, SPAN, 2 SPAN, ...): each span gets its own softmax state
 * (max, sum, accumulator), and the spans' states are merged in span order.
 * The cut depends on positions only, so a query computes the same numbers
 * whichever path and whatever batch it is in (batch invariance, tested bit
 * for bit), while a decode token's spans can run on different threads.
 *
 * Three kinds of work item share the per-chunk kernels (the score kernels,
 * chunk_softmax, the accumulation kernels) and the merge (merge_state):
 *   - prefill (a run of several tokens of one sequence): (up to
 *     MAX_TILE_TOKENS tokens, kv head); the G = H / KVH query heads of each
 *     token that share the kv head are processed together, so each cached k
 *     and v row is read (and widened, for 16-bit caches) once per item and
 *     used by every query of the item; the item walks its spans in order,
 *     merging as it goes;
 *   - decode (a token alone of its sequence in the call): (token, span, kv
 *     heads group, usually all kv heads): the cache holds a position's kv
 *     heads side by side, so an item's rows are whole contiguous ranges;
 *     16-bit rows are read in address order, a few positions of every kv
 *     head at a time (attend_heads; one kv head's rows down a chunk are a
 *     walk with a KVH-row stride, which bound a decode of many sequences),
 *     all rows prefetched a chunk ahead. Each item leaves its span's
 *     state in a shared buffer; the last item of a token to finish merges
 *     them;
 *   - shared decode (a span whose blocks several decode tokens' tables
 *     hold alike, all of it seen by each: a prompt beginning the prefix
 *     cache gave their sequences): (span, up to QUERY_TOKENS such tokens,
 *     kv heads group), each kv head's rows widened once for every token's
 *     queries as in prefill, each token's span state left as its own
 *     decode item would leave it (share_decode_spans,
 *     shared_decode_item).
 * Positions are taken in chunks of CHUNK: in prefill and shared decode the
 * chunk's 16-bit k and v rows are widened once (decode reads them in place,
 * widening in registers for two queries at a time: the same numbers, see
 * load8), each
 * query's scores are computed 4 positions per pass over the query, the
 * running max / sum / accumulator are rescaled once per
 * chunk (not once per position; on the AVX-512 tier for 16 queries that
 * see a whole chunk at once, transposed: chunk_softmax16x16), the
 * exponentials computed 8 at a time, and
 * the weighted v rows summed into the accumulator in register slices
 * (loaded and stored once per chunk, not once per row). A Q8_0 cache's
 * queries are quantized once per item to 16-bit blocks; a chunk's k blocks
 * are transposed once for integer scores with the positions in lanes, and
 * its v blocks widened once to f32 rows weighted per block
 * (kv_q8_0_chunk.h). A BF16 cache, in the build for CPUs with AVX-512
 * BF16 (attention_avx512_bf16.c), is multiplied in bf16 instead
 * (kv_bf16_chunk.h): each query rounded to bf16 once per item, a chunk's k
 * rows transposed by value pairs and its v rows interleaved by position
 * pairs once, and every item kind, decode too, through attend_chunk_bf16.
 * Rows are prefetched a chunk ahead (prefetch_row, prefetch_range). */
#ifndef SIMD_ATTENTION_ENTRY
#error "define SIMD_ATTENTION_ENTRY (the tier's entry point) before including attention_impl.h"
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kv_bf16_chunk.h"
#include "kv_q8_0_chunk.h"
#include "simd.h"
#include "simd_vec.h"
#include "vt/vt_dtype.h"

#define CHUNK 16
_Static_assert(CHUNK == Q8_CHUNK, "a Q8_0 chunk is transposed into one register's lanes");

/* Positions per span (a multiple of CHUNK). Fixed: the spans decide how a
 * query's softmax is summed, so they must not depend on the call. Long
 * enough that merging (D values and two exponentials per query per span)
 * stays small against a span's work: at 64 it was about a seventh of a
 * long prefill's attention, and 128 took 5-7% less time in prefill and
 * 3-12% less in decode at 1,560 positions (simd_attention_bench, AVX-512
 * EPYC, 2 threads; a lone sequence of ~400 positions, whose 4 spans share
 * the threads unevenly, 13% more); short enough that a sequence of a few
 * hundred positions still gives every thread spans (and kv head groups) to
 * work on, and that a shared prompt beginning is read once for every
 * sequence over most of its length. */
#define SPAN 128

typedef struct attention_task {
    const float *q;        /* [T][H][D] */
    const void *k_cache;   /* [B][BS][KVH][D] of k_dtype */
    const void *v_cache;   /* [B][BS][KVH][D] of v_dtype */
    int32_t k_dtype, v_dtype;
    /* BF16 k and v in bf16 dot products (kv_bf16_chunk.h): the tier build
     * with AVX-512 BF16 only */
    bool bf16_dot;
    const int32_t *tables; /* [n_seqs][max_blocks] */
    const int32_t *pos;    /* [T] */
    const int32_t *seq;    /* [T] */
    float *out;            /* [T][H][D] */
    int64_t D, H, KVH, BS, max_blocks, T;
    float scale;
    float *scratch;        /* per thread: scratch_floats */
    size_t scratch_floats;
    /* tokens computed by decode items: is_decode[T]; decode token i is
     * dec_tok[i], its spans' states start at part dec_part[i] */
    const uint8_t *is_decode;
    const int32_t *dec_tok;
    const int64_t *dec_part;
    const int32_t *item_dec, *item_span, *item_group; /* per decode item */
    /* a decode item shared by several tokens (share_decode_spans):
     * item_members[item] indexes members (decode token indices, ascending),
     * item_n_members[item] of them; -1 and 1 for a token's own item */
    const int32_t *item_members, *item_n_members, *members;
    int64_t prefill_items, groups;
    int64_t tile_tokens; /* query tokens per prefill item (prefill_tile_tokens) */
    float *part_acc, *part_max, *part_sum; /* [part][H][D], [part][H], [part][H] */
    _Atomic int32_t *pending; /* [decode token][group] items not yet done */
} attention_task;

/* Pointer to cached row (slot, kv head) widened to f32: the cache itself when
 * it is F32, else converted into buf [D]. Not for Q8_0. */
static const float *cache_row(const void *cache, int32_t dtype, int64_t slot, int64_t kvh, int64_t KVH, int64_t D,
                              float *buf) {
    const int64_t index = (slot * KVH + kvh) * D;
    if (dtype == VT_F32) return (const float *)cache + index;
    simd_load_row(dtype, (const uint8_t *)cache + (size_t)index * 2, buf, D);
    return buf;
}

/* Start loading cached row (slot, kv head) of `bytes` bytes into L2. A work
 * item reads one kv head's rows, KVH rows apart, so each 4 KiB page holds
 * only a few of them and the hardware prefetchers, which stop at page
 * edges, leave most rows to be waited for. L2, not L1: a chunk's k and v
 * rows are a hundred or more cache lines, more misses than L1 keeps in
 * flight, and the rows are read once (widened, or by a decode walk) a chunk
 * later, when L2 answers within a few cycles (measured on an AMD EPYC with
 * AVX-512: a prefill chunk's attention 6% faster with the rows in L3, 12%
 * from DRAM). */
static void prefetch_row(const void *cache, size_t bytes, int64_t slot, int64_t kvh, int64_t KVH) {
    const char *row = (const char *)cache + (size_t)(slot * KVH + kvh) * bytes;
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T1);
    _mm_prefetch(row + bytes - 1, _MM_HINT_T1);
}

/* Start loading the rows of kv heads [kv0, kv1) at cache slot `slot`,
 * `bytes` each: one contiguous range. */
static void prefetch_range(const void *cache, size_t bytes, int64_t slot, int64_t kv0, int64_t kv1, int64_t KVH) {
    const char *first = (const char *)cache + (size_t)(slot * KVH + kv0) * bytes;
    const size_t n = (size_t)(kv1 - kv0) * bytes;
    for (size_t off = 0; off < n; off += 64) _mm_prefetch(first + off, _MM_HINT_T0);
    _mm_prefetch(first + n - 1, _MM_HINT_T0);
}

/* Cached Q8_0 row (slot, kv head): its blocks, and their scales as f32 into
 * d[b * stride] for the row's D / 32 blocks b. */
static const vt_block_q8_0 *cache_row_q8_0(const void *cache, int64_t slot, int64_t kvh, int64_t KVH, int64_t nb,
                                           float *d, int64_t stride) {
    const vt_block_q8_0 *row = (const vt_block_q8_0 *)cache + (slot * KVH + kvh) * nb;
    for (int64_t b = 0; b < nb; b++) d[b * stride] = _cvtsh_ss(row[b].d);
    return row;
}

/* The kernels read cached rows in the cache's dtype: F32 as they are, F16
 * or BF16 widened 8 values at a time in registers as they are used (exact,
 * so the numbers are those of widening the rows first). Decode, whose rows
 * serve only the G queries of a kv head, reads 16-bit rows in place;
 * prefill and shared decode, whose rows serve up to MAX_TILE_TOKENS * G
 * queries, widen them once and pass VT_F32. dtype is a constant at every
 * call, so each use compiles to one of the three loads. */
SIMD_INLINE __m256 load8(int32_t dtype, const void *row, int64_t i) {
    if (dtype == VT_F32) return _mm256_loadu_ps((const float *)row + i);
    const uint16_t *p = (const uint16_t *)row + i;
    return dtype == VT_F16 ? simd_load8_f16(p) : simd_load8_bf16(p);
}

SIMD_INLINE float load1(int32_t dtype, const void *row, int64_t i) {
    if (dtype == VT_F32) return ((const float *)row)[i];
    const uint16_t h = ((const uint16_t *)row)[i];
    return dtype == VT_F16 ? vt_fp16_to_f32(h) : vt_bf16_to_f32(h);
}

/* out[r] = q . k_r for the 4 rows k[0..3], n values each: one load of each
 * q slice serves the 4 rows, and one horizontal reduction the 4 sums. */
SIMD_INLINE void dot4(int32_t dtype, const float *q, const void *const k[4], int64_t n, float out[4]) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        s0 = _mm256_fmadd_ps(qv, load8(dtype, k[0], i), s0);
        s1 = _mm256_fmadd_ps(qv, load8(dtype, k[1], i), s1);
        s2 = _mm256_fmadd_ps(qv, load8(dtype, k[2], i), s2);
        s3 = _mm256_fmadd_ps(qv, load8(dtype, k[3], i), s3);
    }
    /* [s0 s0 s1 s1 | ..] then [s0 s1 s2 s3 | s0 s1 s2 s3], halves added */
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) out[r] += q[i] * load1(dtype, k[r], i);
}

/* q . row, n values. */
SIMD_INLINE float dot1(int32_t dtype, const float *q, const void *row, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(dtype, row, i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8(dtype, row, i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(dtype, row, i), s0);
    float s = simd_hsum_ps(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += q[i] * load1(dtype, row, i);
    return s;
}

/* y += sum_i p[i] v[i], for i < len, n values: y is loaded and stored once
 * per 64-value slice (8 registers) instead of once per row. */
SIMD_INLINE void accumulate(int32_t dtype, float *y, const float *p, const void *const *v, int64_t len, int64_t n) {
    int64_t d = 0;
    for (; d + 64 <= n; d += 64) {
        __m256 a[8];
        SIMD_UNROLL
        for (int u = 0; u < 8; u++) a[u] = _mm256_loadu_ps(y + d + 8 * u);
        for (int64_t i = 0; i < len; i++) {
            const __m256 pv = _mm256_set1_ps(p[i]);
            SIMD_UNROLL
            for (int u = 0; u < 8; u++) a[u] = _mm256_fmadd_ps(pv, load8(dtype, v[i], d + 8 * u), a[u]);
        }
        SIMD_UNROLL
        for (int u = 0; u < 8; u++) _mm256_storeu_ps(y + d + 8 * u, a[u]);
    }
    for (; d + 8 <= n; d += 8) {
        __m256 a = _mm256_loadu_ps(y + d);
        for (int64_t i = 0; i < len; i++) a = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), load8(dtype, v[i], d), a);
        _mm256_storeu_ps(y + d, a);
    }
    for (; d < n; d++)
        for (int64_t i = 0; i < len; i++) y[d] += p[i] * load1(dtype, v[i], d);
}

/* dot4 for two queries at once: each k slice loaded (and widened) once
 * serves both, 6 loads for 8 multiply-adds instead of 10; per query the
 * same operations in the same order as dot4. */
SIMD_INLINE void dot4x2(int32_t dtype, const float *q0, const float *q1, const void *const k[4], int64_t n,
                        float out0[4], float out1[4]) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(q0 + i), y = _mm256_loadu_ps(q1 + i);
        __m256 kv = load8(dtype, k[0], i);
        a0 = _mm256_fmadd_ps(x, kv, a0), b0 = _mm256_fmadd_ps(y, kv, b0);
        kv = load8(dtype, k[1], i);
        a1 = _mm256_fmadd_ps(x, kv, a1), b1 = _mm256_fmadd_ps(y, kv, b1);
        kv = load8(dtype, k[2], i);
        a2 = _mm256_fmadd_ps(x, kv, a2), b2 = _mm256_fmadd_ps(y, kv, b2);
        kv = load8(dtype, k[3], i);
        a3 = _mm256_fmadd_ps(x, kv, a3), b3 = _mm256_fmadd_ps(y, kv, b3);
    }
    const __m256 ha = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m256 hb = _mm256_hadd_ps(_mm256_hadd_ps(b0, b1), _mm256_hadd_ps(b2, b3));
    _mm_storeu_ps(out0, _mm_add_ps(_mm256_castps256_ps128(ha), _mm256_extractf128_ps(ha, 1)));
    _mm_storeu_ps(out1, _mm_add_ps(_mm256_castps256_ps128(hb), _mm256_extractf128_ps(hb, 1)));
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) {
            const float w = load1(dtype, k[r], i);
            out0[r] += q0[i] * w;
            out1[r] += q1[i] * w;
        }
}

/* accumulate for two outputs at once, each v slice loaded (and widened)
 * once for both; per output value the same operations in the same order. */
SIMD_INLINE void accumulate2(int32_t dtype, float *y0, const float *p0, float *y1, const float *p1,
                             const void *const *v, int64_t len, int64_t n) {
    int64_t d = 0;
    for (; d + 32 <= n; d += 32) {
        __m256 a[4], b[4];
        SIMD_UNROLL
        for (int u = 0; u < 4; u++) a[u] = _mm256_loadu_ps(y0 + d + 8 * u), b[u] = _mm256_loadu_ps(y1 + d + 8 * u);
        for (int64_t i = 0; i < len; i++) {
            const __m256 pa = _mm256_set1_ps(p0[i]), pb = _mm256_set1_ps(p1[i]);
            SIMD_UNROLL
            for (int u = 0; u < 4; u++) {
                const __m256 x = load8(dtype, v[i], d + 8 * u);
                a[u] = _mm256_fmadd_ps(pa, x, a[u]);
                b[u] = _mm256_fmadd_ps(pb, x, b[u]);
            }
        }
        SIMD_UNROLL
        for (int u = 0; u < 4; u++) _mm256_storeu_ps(y0 + d + 8 * u, a[u]), _mm256_storeu_ps(y1 + d + 8 * u, b[u]);
    }
    for (; d + 8 <= n; d += 8) {
        __m256 a = _mm256_loadu_ps(y0 + d), b = _mm256_loadu_ps(y1 + d);
        for (int64_t i = 0; i < len; i++) {
            const __m256 x = load8(dtype, v[i], d);
            a = _mm256_fmadd_ps(_mm256_set1_ps(p0[i]), x, a);
            b = _mm256_fmadd_ps(_mm256_set1_ps(p1[i]), x, b);
        }
        _mm256_storeu_ps(y0 + d, a), _mm256_storeu_ps(y1 + d, b);
    }
    for (; d < n; d++)
        for (int64_t i = 0; i < len; i++) {
            const float w = load1(dtype, v[i], d);
            y0[d] += p0[i] * w;
            y1[d] += p1[i] * w;
        }
}

#if defined(__AVX512VL__)
/* With AVX-512VL's 32 vector registers, four queries share each k and v
 * load (16 accumulators, 4 query slices and the loaded row stay in
 * registers; with 16 registers they would spill). Per query the operations
 * and their order are dot4's and accumulate's, so the tiers agree
 * bit for bit. */
#define QUERIES_PER_LOAD 4

SIMD_INLINE void dot4x4(int32_t dtype, const float *const q[4], const void *const k[4], int64_t n, float *const out[4]) {
    __m256 a[4][4];
    SIMD_UNROLL
    for (int j = 0; j < 4; j++)
        SIMD_UNROLL
        for (int r = 0; r < 4; r++) a[j][r] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x[4];
        SIMD_UNROLL
        for (int j = 0; j < 4; j++) x[j] = _mm256_loadu_ps(q[j] + i);
        SIMD_UNROLL
        for (int r = 0; r < 4; r++) {
            const __m256 kv = load8(dtype, k[r], i);
            SIMD_UNROLL
            for (int j = 0; j < 4; j++) a[j][r] = _mm256_fmadd_ps(x[j], kv, a[j][r]);
        }
    }
    SIMD_UNROLL
    for (int j = 0; j < 4; j++) {
        const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a[j][0], a[j][1]), _mm256_hadd_ps(a[j][2], a[j][3]));
        _mm_storeu_ps(out[j], _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    }
    for (; i < n; i++)
        for (int j = 0; j < 4; j++)
            for (int r = 0; r < 4; r++) out[j][r] += q[j][i] * load1(dtype, k[r], i);
}

/* 256-bit hadd in each half of a 512-bit register: per 128-bit block
 * [a0 + a1, a2 + a3, b0 + b1, b2 + b3], the sums _mm256_hadd_ps forms. */
SIMD_INLINE __m512 hadd_halves(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

/* dot4x4 for 8 rows at once: rows r (lanes 0-7) and r + 4 (lanes 8-15)
 * side by side in one 512-bit register, each query slice broadcast to both
 * halves; every row's score is dot4x4's, operation for operation (the same
 * 8-lane sums, the same hadd tree per half, the same last addition). */
SIMD_INLINE void dot4x8(const float *const q[4], const void *const k[8], int64_t n, float *const out[4]) {
    __m512 a[4][4];
    SIMD_UNROLL
    for (int j = 0; j < 4; j++)
        SIMD_UNROLL
        for (int r = 0; r < 4; r++) a[j][r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512 x[4];
        SIMD_UNROLL
        for (int j = 0; j < 4; j++) x[j] = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)(q[j] + i))));
        SIMD_UNROLL
        for (int r = 0; r < 4; r++) {
            const __m512 kv = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd((const double *)((const float *)k[r] + i))),
                                                                  _mm256_loadu_pd((const double *)((const float *)k[r + 4] + i)), 1));
            SIMD_UNROLL
            for (int j = 0; j < 4; j++) a[j][r] = _mm512_fmadd_ps(x[j], kv, a[j][r]);
        }
    }
    SIMD_UNROLL
    for (int j = 0; j < 4; j++) {
        const __m512 h = hadd_halves(hadd_halves(a[j][0], a[j][1]), hadd_halves(a[j][2], a[j][3]));
        /* block 0 + block 1: rows 0-3; block 2 + block 3: rows 4-7 */
        const __m512 s = _mm512_add_ps(h, _mm512_shuffle_f32x4(h, h, _MM_SHUFFLE(2, 3, 0, 1)));
        _mm_storeu_ps(out[j], _mm512_castps512_ps128(s));
        _mm_storeu_ps(out[j] + 4, _mm512_extractf32x4_ps(s, 2));
    }
    for (; i < n; i++)
        for (int j = 0; j < 4; j++)
            for (int r = 0; r < 8; r++) out[j][r] += q[j][i] * ((const float *)k[r])[i];
}

SIMD_INLINE void accumulate4(int32_t dtype, float *const y[4], const float *const p[4], const void *const *v,
                             int64_t len, int64_t n) {
    int64_t d = 0;
    if (dtype == VT_F32) /* 16 lanes per register: lane for lane the 8-lane slices' operations */
        for (; d + 64 <= n; d += 64) {
            __m512 a[4][4];
            SIMD_UNROLL
            for (int j = 0; j < 4; j++)
                SIMD_UNROLL
                for (int u = 0; u < 4; u++) a[j][u] = _mm512_loadu_ps(y[j] + d + 16 * u);
            for (int64_t i = 0; i < len; i++) {
                __m512 w[4];
                SIMD_UNROLL
                for (int j = 0; j < 4; j++) w[j] = _mm512_set1_ps(p[j][i]);
                SIMD_UNROLL
                for (int u = 0; u < 4; u++) {
                    const __m512 x = _mm512_loadu_ps((const float *)v[i] + d + 16 * u);
                    SIMD_UNROLL
                    for (int j = 0; j < 4; j++) a[j][u] = _mm512_fmadd_ps(w[j], x, a[j][u]);
                }
            }
            SIMD_UNROLL
            for (int j = 0; j < 4; j++)
                SIMD_UNROLL
                for (int u = 0; u < 4; u++) _mm512_storeu_ps(y[j] + d + 16 * u, a[j][u]);
        }
    for (; d + 32 <= n; d += 32) {
        __m256 a[4][4];
        SIMD_UNROLL
        for (int j = 0; j < 4; j++)
            SIMD_UNROLL
            for (int u = 0; u < 4; u++) a[j][u] = _mm256_loadu_ps(y[j] + d + 8 * u);
        for (int64_t i = 0; i < len; i++) {
            __m256 w[4];
            SIMD_UNROLL
            for (int j = 0; j < 4; j++) w[j] = _mm256_set1_ps(p[j][i]);
            SIMD_UNROLL
            for (int u = 0; u < 4; u++) {
                const __m256 x = load8(dtype, v[i], d + 8 * u);
                SIMD_UNROLL
                for (int j = 0; j < 4; j++) a[j][u] = _mm256_fmadd_ps(w[j], x, a[j][u]);
            }
        }
        SIMD_UNROLL
        for (int j = 0; j < 4; j++)
            SIMD_UNROLL
            for (int u = 0; u < 4; u++) _mm256_storeu_ps(y[j] + d + 8 * u, a[j][u]);
    }
    for (; d + 8 <= n; d += 8) {
        __m256 a[4];
        for (int j = 0; j < 4; j++) a[j] = _mm256_loadu_ps(y[j] + d);
        for (int64_t i = 0; i < len; i++) {
            const __m256 x = load8(dtype, v[i], d);
            for (int j = 0; j < 4; j++) a[j] = _mm256_fmadd_ps(_mm256_set1_ps(p[j][i]), x, a[j]);
        }
        for (int j = 0; j < 4; j++) _mm256_storeu_ps(y[j] + d, a[j]);
    }
    for (; d < n; d++)
        for (int64_t i = 0; i < len; i++)
            for (int j = 0; j < 4; j++) y[j][d] += p[j][i] * load1(dtype, v[i], d);
}
#else
#define QUERIES_PER_LOAD 2
#endif

SIMD_INLINE void scale_row(float *y, float c, int64_t n) {
    const __m256 cv = _mm256_set1_ps(c);
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_set1_ps(c), _mm512_loadu_ps(y + i)));
#endif
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(cv, _mm256_loadu_ps(y + i)));
    if (n % 8 != 0)
        for (; i < n; i++) y[i] *= c;
}

/* Query tokens per work item in prefill (at least; prefill_tile_tokens
 * takes up to MAX_TILE_TOKENS) and in shared decode: their G heads each,
 * so every k and v row read (and widened) once serves up to that many
 * tokens' G queries. At 4 the widening of the 16-bit rows took about a
 * fifth of a long prefill's attention. Which queries share an item never
 * changes a query's numbers. */
#define QUERY_TOKENS 16
#define MAX_TILE_TOKENS 64
/* The most queries a longer tile may hold: the gain was measured at G = 2
 * (128 queries an item); an item's scratch grows by two rows of D floats a
 * query, so with many query heads per kv head (G of 8 or more) tiles stay
 * at 16 tokens, as before. */
#define MAX_TILE_QUERIES 128

/* Query tokens per prefill item for a call of T tokens (G queries each):
 * doubled from QUERY_TOKENS, while shorter than T and within
 * MAX_TILE_QUERIES, as long as every thread still gets at least 4 items (kv heads x
 * tiles; claimed one by one, so the later, costlier tiles even out). A
 * longer tile reads and widens each chunk's rows once for more queries and
 * walks the spans fewer times: on the AVX-512 machine an f16 cache's
 * prefill attention took 7-16% less time at 64 tokens than at 16
 * (simd_attention_bench, T 64 and 512 at 1,360-1,600 positions). */
static int64_t prefill_tile_tokens(int64_t T, int64_t KVH, int64_t G, int n_threads) {
    int64_t tile = QUERY_TOKENS;
    while (tile < MAX_TILE_TOKENS && tile < T && 2 * tile * G <= MAX_TILE_QUERIES &&
           (T + 2 * tile - 1) / (2 * tile) * KVH >= 4 * (int64_t)n_threads)
        tile *= 2;
    return tile;
}

/* The cached rows of one chunk (positions p0 .. p0 + len - 1) of one kv
 * head: f32 rows (the cache itself or widened into scratch). A Q8_0 k is
 * the chunk transposed instead (kv_q8_0_chunk.h); a Q8_0 v, its integers
 * widened to f32 rows, is weighted per block. A BF16 cache in bf16 dot
 * products is the chunk's k transposed by value pairs and its v interleaved
 * by position pairs (kv_bf16_chunk.h). (A decode item reads other 16-bit
 * rows in place: attend_heads.) */
typedef struct chunk_rows {
    int64_t p0, len;
    const void *k[CHUNK], *v[CHUNK]; /* f32 rows */
    const vt_block_q8_0 *kb[CHUNK], *vb[CHUNK];
    /* bf16 dot: k transposed by value pairs, v interleaved by position
     * pairs ([D / 2][CHUNK] and [CHUNK / 2][D] words, 8 D of the 16 D floats
     * kbuf and vbuf hold per head); k[] and v[] then point at the cache's
     * bf16 rows */
    const uint32_t *kt_bf16, *vi_bf16;
    const float *kd, *vd; /* Q8_0 block scales, [nb][CHUNK]: 0 past len */
    bool v_widened;       /* Q8_0 v: v[] holds the rows widened to f32 (else only vb[]) */
    const int32_t *kt;    /* Q8_0 k: the chunk transposed (q8_0_transpose_chunk) */
} chunk_rows;

/* The queries of one kv head an item attends with, and their softmax state
 * for the current span. Query j belongs to token j / G (of the item's
 * tokens) and is head kvh * G + j % G of it. */
typedef struct query_set {
    int64_t n;
    const float *q;          /* query j at q + (j / G) * q_token_stride + (j % G) * D */
    int64_t q_token_stride;
    const int16_t *qs;       /* Q8_0 k: quantized queries [n][D] */
    const float *qd;         /* and their block scales [n][nb] */
    const uint16_t *qb;      /* bf16 dot: the queries rounded to bf16 [n][D] */
    const int64_t *limit;    /* [n / G] positions each token sees */
    float *acc, *run_max, *run_sum; /* [n][D], [n], [n] */
} query_set;

/* Per-thread scratch, in floats from its start: every array at a
 * SIMD_ALIGN boundary. nq is the most queries an item holds at once. */
typedef struct attend_layout {
    size_t acc, span_acc, kbuf, vbuf, scores, run_max, run_sum, span_max, span_sum, count, kd, vd, qd, qs, rows, weights,
        total;
} attend_layout;

static int64_t most_queries(int64_t G, int64_t H, int64_t tile) { return tile * G > H ? tile * G : H; }

/* tile: the call's tokens per prefill item (at least QUERY_TOKENS, which
 * a shared decode item holds at most) */
static attend_layout attend_scratch_layout(int64_t G, int64_t H, int64_t D, int64_t tile) {
    const size_t nq = (size_t)most_queries(G, H, tile), nb = (size_t)(D / VT_QK8_0), f = sizeof(float);
    const size_t heads = (size_t)(H / G); /* a decode chunk's rows: every kv head */
    const size_t sizes[] = {nq * (size_t)D, nq * (size_t)D, heads * CHUNK * (size_t)D, heads * CHUNK * (size_t)D,
                            nq * CHUNK, nq, nq, nq, nq, nq /* int64 counts: 2 floats each */ * 2,
                            /* qs: int16 (a Q8_0 cache's queries, or bf16 ones) */
                            heads * CHUNK * nb, heads * CHUNK * nb, nq * nb, nq * (size_t)D / 2,
                            heads * sizeof(chunk_rows) / f + 1, nq * nb * CHUNK};
    enum { N = sizeof sizes / sizeof *sizes };
    size_t at[N], off = 0;
    for (int i = 0; i < N; i++) at[i] = off, off += simd_align_up(sizes[i] * f) / f;
    return (attend_layout){at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7], at[8], at[9], at[10], at[11],
                           at[12], at[13], at[14], at[15], off};
}

/* Widen (or point at) the rows of positions [p0, p0 + len) of kv heads
 * [kv0, kv1) into r[kvh - kv0], kv head kvh's rows at (kvh - kv0) CHUNK D
 * in kbuf / vbuf (CHUNK nb in kd / vd); for bf16 dot products, transpose k
 * and interleave v there instead (kv_bf16_chunk.h). Position by position,
 * each one's kv heads in turn: the order of the cache, so the rows of
 * several heads are read as one sequential stream. */
static void load_chunk(const attention_task *t, const int32_t *table, int64_t kv0, int64_t kv1, int64_t p0,
                       int64_t len, float *kbuf, float *vbuf, float *kd, float *vd, bool widen_q8_v, chunk_rows *r) {
    const int64_t D = t->D, KVH = t->KVH, BS = t->BS, nb = D / VT_QK8_0;
#if defined(__AVX512BF16__)
    if (t->bf16_dot) {
        for (int64_t i = 0; i < len; i++) {
            const int64_t p = p0 + i, slot = (int64_t)table[p / BS] * BS + p % BS;
            for (int64_t h = 0; h < kv1 - kv0; h++) {
                const int64_t row = (slot * KVH + kv0 + h) * D;
                r[h].k[i] = (const uint16_t *)t->k_cache + row, r[h].v[i] = (const uint16_t *)t->v_cache + row;
            }
        }
        for (int64_t h = 0; h < kv1 - kv0; h++) {
            uint32_t *kt = (uint32_t *)(void *)(kbuf + h * CHUNK * D);
            uint32_t *vi = (uint32_t *)(void *)(vbuf + h * CHUNK * D);
            r[h].p0 = p0, r[h].len = len;
            bf16_transpose_chunk(r[h].k, len, D, kt);
            bf16_interleave_chunk(r[h].v, len, D, vi);
            r[h].kt_bf16 = kt, r[h].vi_bf16 = vi;
        }
        return;
    }
#endif
    for (int64_t h = 0; h < kv1 - kv0; h++) {
        r[h].p0 = p0, r[h].len = len, r[h].kd = kd + h * CHUNK * nb, r[h].vd = vd + h * CHUNK * nb;
        r[h].v_widened = widen_q8_v;
        if (t->k_dtype == VT_Q8_0 || t->v_dtype == VT_Q8_0) /* scales past len: 0, so those scores are 0 */
            for (int64_t b = 0; b < nb; b++)
                for (int64_t i = len; i < CHUNK; i++) kd[(h * nb + b) * CHUNK + i] = vd[(h * nb + b) * CHUNK + i] = 0.0f;
    }
    for (int64_t i = 0; i < len; i++) {
        const int64_t p = p0 + i;
        const int64_t slot = (int64_t)table[p / BS] * BS + p % BS;
        for (int64_t h = 0; h < kv1 - kv0; h++) {
            const int64_t kvh = kv0 + h;
            if (t->k_dtype == VT_Q8_0)
                r[h].kb[i] = cache_row_q8_0(t->k_cache, slot, kvh, KVH, nb, kd + h * CHUNK * nb + i, CHUNK);
            else
                r[h].k[i] = cache_row(t->k_cache, t->k_dtype, slot, kvh, KVH, D, kbuf + (h * CHUNK + i) * D);
        }
        for (int64_t h = 0; h < kv1 - kv0; h++) {
            const int64_t kvh = kv0 + h;
            if (t->v_dtype == VT_Q8_0) {
                r[h].vb[i] = cache_row_q8_0(t->v_cache, slot, kvh, KVH, nb, vd + h * CHUNK * nb + i, CHUNK);
                if (widen_q8_v) {
                    float *row = vbuf + (h * CHUNK + i) * D;
                    q8_0_widen_row(r[h].vb[i], nb, row);
                    r[h].v[i] = row;
                }
            } else {
                r[h].v[i] = cache_row(t->v_cache, t->v_dtype, slot, kvh, KVH, D, vbuf + (h * CHUNK + i) * D);
            }
        }
    }
    if (t->k_dtype == VT_Q8_0) /* kbuf holds no f32 rows then: the transposed chunk */
        for (int64_t h = 0; h < kv1 - kv0; h++) {
            int32_t *kt = (int32_t *)(void *)(kbuf + h * CHUNK * D);
            q8_0_transpose_chunk(r[h].kb, len, nb, kt);
            r[h].kt = kt;
        }
}

/* A query's running max raised to new_max: its sum and accumulator
 * rescaled by exp(old - new) once (nothing to rescale before its first
 * chunk). */
SIMD_INLINE void raise_max(float new_max, float *run_max, float *run_sum, float *acc, int64_t D) {
    if (new_max > *run_max && *run_max != -INFINITY) {
        const float c = expf(*run_max - new_max);
        *run_sum *= c;
        scale_row(acc, c, D);
    }
    *run_max = new_max;
}

#if defined(__AVX512F__)
/* Whole chunks of Q queries (Q a constant at each call), each in one
 * 512-bit register: lane for lane the 8-lane path of chunk_softmax, the
 * max of the two halves and the sum of their exponentials folded as it
 * folds its two registers. Several queries' short dependency chains
 * (scale, max, exponentials, sum) then run side by side. s[q] and acc[q]
 * are query q's scores and accumulator, run_max[q] and run_sum[q] its
 * state. */
SIMD_INLINE void chunk_softmax16(float *const *s, int Q, float scale, float *run_max, float *run_sum, float *const *acc,
                                 int64_t D) {
    __m512 x[4];
    float new_max[4];
    SIMD_UNROLL
    for (int q = 0; q < Q; q++) {
        x[q] = _mm512_mul_ps(_mm512_loadu_ps(s[q]), _mm512_set1_ps(scale));
        const float cmax = simd_hmax_ps(_mm256_max_ps(_mm512_castps512_ps256(x[q]),
                                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x[q]), 1))));
        new_max[q] = cmax > run_max[q] ? cmax : run_max[q];
    }
    for (int q = 0; q < Q; q++) raise_max(new_max[q], run_max + q, run_sum + q, acc[q], D);
    SIMD_UNROLL
    for (int q = 0; q < Q; q++) {
        const __m512 e = simd_exp16_ps(_mm512_sub_ps(x[q], _mm512_set1_ps(new_max[q])));
        _mm512_storeu_ps(s[q], e);
        run_sum[q] += simd_hsum_ps(simd_fold16_ps(e));
    }
}


/* chunk_softmax16 for 16 queries at once, each with a whole chunk: the
 * scores transposed so that a register holds one position of every query,
 * and then every step is a vertical operation on 16 queries instead of a
 * horizontal one within each: the same multiplications, the same max (a
 * max does not depend on its order), the same exponentials lane for lane,
 * and the running sums added in simd_hsum_ps(simd_fold16_ps(e))'s tree
 * (positions l + (l + 8), then i + (i + 4), then 0 + 2 and 1 + 3, then those
 * two), so each query's numbers are chunk_softmax16's bit for bit.
 * s[q], acc[q]: query q's scores (CHUNK of them) and accumulator;
 * run_max/run_sum: the 16 queries' states, side by side. */
_Static_assert(CHUNK == 16, "chunk_softmax16x16 holds a chunk in one register per query");

SIMD_INLINE void chunk_softmax16x16(float *const *s, float scale, float *run_max, float *run_sum, float *const *acc,
                                    int64_t D) {
    __m512 x[CHUNK];
    for (int q = 0; q < 16; q++) x[q] = _mm512_loadu_ps(s[q]);
    simd_transpose16x16_ps(x); /* x[p]: position p of each query */
    const __m512 sc = _mm512_set1_ps(scale);
    for (int p = 0; p < CHUNK; p++) x[p] = _mm512_mul_ps(x[p], sc);
    /* the max in chunk_softmax16's tree and operand order (positions l and
     * l + 8, then i and i + 4, then 0 and 2, 1 and 3, then those two): a
     * max's order does not matter for numbers, but for a NaN score it
     * decides which values survive, and every path must agree on that too */
    __m512 m[8];
    for (int l = 0; l < 8; l++) m[l] = _mm512_max_ps(x[l], x[l + 8]);
    for (int i = 0; i < 4; i++) m[i] = _mm512_max_ps(m[i], m[i + 4]);
    const __m512 cmax = _mm512_max_ps(_mm512_max_ps(m[0], m[2]), _mm512_max_ps(m[1], m[3]));
    const __m512 old_max = _mm512_loadu_ps(run_max);
    const __m512 new_max = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(cmax, old_max, _CMP_GT_OQ), old_max, cmax);
    /* the queries whose max rose rescale their state (raise_max's test and operations) */
    __mmask16 rose = _mm512_cmp_ps_mask(new_max, old_max, _CMP_GT_OQ) &
                     _mm512_cmp_ps_mask(old_max, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ);
    if (rose) {
        float nm[16];
        _mm512_storeu_ps(nm, new_max);
        for (int q = 0; q < 16; q++)
            if (rose & (1u << q)) {
                const float c = expf(run_max[q] - nm[q]);
                run_sum[q] *= c;
                scale_row(acc[q], c, D);
            }
    }
    _mm512_storeu_ps(run_max, new_max);
    for (int p = 0; p < CHUNK; p++) x[p] = simd_exp16_ps(_mm512_sub_ps(x[p], new_max));
    __m512 f[8];
    for (int l = 0; l < 8; l++) f[l] = _mm512_add_ps(x[l], x[l + 8]);
    for (int i = 0; i < 4; i++) f[i] = _mm512_add_ps(f[i], f[i + 4]);
    const __m512 total = _mm512_add_ps(_mm512_add_ps(f[0], f[2]), _mm512_add_ps(f[1], f[3]));
    _mm512_storeu_ps(run_sum, _mm512_add_ps(_mm512_loadu_ps(run_sum), total));
    simd_transpose16x16_ps(x); /* back: x[q] is query q's weights */
    for (int q = 0; q < 16; q++) _mm512_storeu_ps(s[q], x[q]);
}
#endif

/* One query's n scores of a chunk (sj [CHUNK]) into softmax weights:
 * scaled, the running max raised to the chunk's (the running sum and
 * accumulator rescaled once if it rose), exponentials 8 at a time, added to
 * the running sum. Every item kind calls this, so a query's weights do not
 * depend on the path. A whole chunk is scaled and its max taken 8 at a time:
 * the same products and the same max as one by one. */
static void chunk_softmax(float *sj, int64_t n, float scale, float *run_max, float *run_sum, float *acc, int64_t D) {
#if defined(__AVX512F__)
    if (n == CHUNK) {
        chunk_softmax16(&sj, 1, scale, run_max, run_sum, &acc, D);
        return;
    }
#endif
    float cmax;
    if (n == CHUNK) {
        const __m256 sv = _mm256_set1_ps(scale);
        const __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(sj), sv), x1 = _mm256_mul_ps(_mm256_loadu_ps(sj + 8), sv);
        _mm256_storeu_ps(sj, x0);
        _mm256_storeu_ps(sj + 8, x1);
        cmax = simd_hmax_ps(_mm256_max_ps(x0, x1));
    } else {
        int64_t i;
        for (i = 0; i < n; i++) sj[i] *= scale;
        for (; i < CHUNK; i++) sj[i] = -INFINITY; /* exp -> 0 */
        cmax = sj[0];
        for (i = 1; i < n; i++) cmax = sj[i] > cmax ? sj[i] : cmax;
    }
    raise_max(cmax > *run_max ? cmax : *run_max, run_max, run_sum, acc, D);
    const __m256 m = _mm256_set1_ps(*run_max);
    const __m256 e0 = simd_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj), m));
    const __m256 e1 = simd_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj + 8), m));
    _mm256_storeu_ps(sj, e0);
    _mm256_storeu_ps(sj + 8, e1);
    *run_sum += simd_hsum_ps(_mm256_add_ps(e0, e1));
}

#if QUERIES_PER_LOAD == 4
/* Queries j .. j + n - 1 of qs: each one's vector, its scores' row (from sj,
 * query j's) and its accumulator. */
SIMD_INLINE void query_slots(const query_set *qs, int64_t j, int n, int64_t G, int64_t D, float *sj, float *acc,
                             const float **q, float **s, float **y) {
    for (int u = 0; u < n; u++) {
        const int64_t ju = j + u;
        q[u] = qs->q + (ju / G) * qs->q_token_stride + (ju % G) * D;
        s[u] = sj + u * CHUNK;
        y[u] = acc + ju * D;
    }
}
#endif

/* Whether queries j .. j + k - 1 all exist and see n positions of the
 * chunk: the groups the softmax and the accumulation take together. */
SIMD_INLINE bool counts_equal(const int64_t *count, int64_t j, int64_t k, int64_t nq, int64_t n) {
    if (j + k > nq) return false;
    for (int64_t u = 0; u < k; u++)
        if (count[j + u] != n) return false;
    return true;
}

#if defined(__AVX512BF16__)
/* attend_chunk for a BF16 cache in bf16 dot products (kv_bf16_chunk.h):
 * every query's scores from the transposed chunk, BF16_QUERIES a pass; the
 * softmax as for every cache (chunk_softmax's numbers); the weights rounded
 * to bf16 pairs; the weighted v rows added for groups of up to four queries
 * that see the same positions. A query's numbers depend only on the query,
 * the rows it sees and the chunk's position. */
static void attend_chunk_bf16(const attention_task *t, const query_set *qs, const chunk_rows *r, float *scores,
                              float *weights, int64_t *count) {
    const int64_t D = t->D, nq = qs->n;
    float *acc = qs->acc, *run_max = qs->run_max, *run_sum = qs->run_sum;
    /* [nq][CHUNK / 2] words: within the nq nb CHUNK floats of weights, nb = D / 32 >= 2 here */
    uint32_t *pairs = (uint32_t *)(void *)weights;
    /* from the first query that sees the chunk on (usually only the first
     * few see none of it: a prefill run's tokens in position order; a later
     * query whose count is 0 gets scores it does not use) */
    int64_t j0 = 0;
    while (j0 < nq && count[j0] == 0) j0++;
    _Static_assert(CHUNK == 16, "a query's scores are one register of 16 positions");
    bf16_chunk_scores(nq - j0, qs->qb + j0 * D, D, r->kt_bf16, scores + j0 * CHUNK);
    for (int64_t j = 0; j < nq; j++) {
        const int64_t n = count[j];
        if (n == 0) continue;
        float *sj = scores + j * CHUNK;
#if defined(__AVX512F__)
        if (n == CHUNK && counts_equal(count, j, 16, nq, CHUNK)) { /* chunk_softmax16x16: chunk_softmax16's numbers */
            float *s16[16], *y16[16];
            for (int u = 0; u < 16; u++) s16[u] = sj + u * CHUNK, y16[u] = acc + (j + u) * D;
            chunk_softmax16x16(s16, t->scale, run_max + j, run_sum + j, y16, D);
            for (int u = 0; u < 16; u++) bf16_weight_pairs(s16[u], pairs + (j + u) * (CHUNK / 2));
            j += 15;
            continue;
        }
        if (n == CHUNK && counts_equal(count, j, 4, nq, CHUNK)) {
            float *s4[4] = {sj, sj + CHUNK, sj + 2 * CHUNK, sj + 3 * CHUNK};
            float *y4[4] = {acc + j * D, acc + (j + 1) * D, acc + (j + 2) * D, acc + (j + 3) * D};
            chunk_softmax16(s4, 4, t->scale, run_max + j, run_sum + j, y4, D);
            for (int u = 0; u < 4; u++) bf16_weight_pairs(s4[u], pairs + (j + u) * (CHUNK / 2));
            j += 3;
            continue;
        }
#endif
        chunk_softmax(sj, n, t->scale, run_max + j, run_sum + j, acc + j * D, D);
        bf16_weight_pairs(sj, pairs + j * (CHUNK / 2));
    }
    for (int64_t j = 0; j < nq;) {
        const int64_t n = count[j];
        if (n == 0) {
            j++;
            continue;
        }
        int g = 1;
        while (g < 4 && counts_equal(count, j + g, 1, nq, n)) g++;
        float *y[4];
        const uint32_t *w[4];
        for (int u = 0; u < g; u++) y[u] = acc + (j + u) * D, w[u] = pairs + (j + u) * (CHUNK / 2);
        const uint16_t *last = n & 1 ? (const uint16_t *)r->v[n - 1] : NULL;
        switch (g) {
        case 4: bf16_accumulate_q(4, y, w, r->vi_bf16, last, n, D); break;
        case 3: bf16_accumulate_q(3, y, w, r->vi_bf16, last, n, D); break;
        case 2: bf16_accumulate_q(2, y, w, r->vi_bf16, last, n, D); break;
        default: bf16_accumulate_q(1, y, w, r->vi_bf16, last, n, D); break;
        }
        j += g;
    }
}
#endif

/* One chunk for every query of qs: each query's scores against the rows it
 * sees (up to its limit), then its running state rescaled once and the
 * weighted v rows added. A query's numbers depend only on the query, the
 * rows and the chunk's position (whether it is processed in a group of
 * four, a pair or alone, and which queries share the group): every item
 * kind calls this for every chunk. */
static void attend_chunk(const attention_task *t, const query_set *qs, const chunk_rows *r, float *scores,
                         float *weights, int64_t *count) {
    const int64_t D = t->D, G = t->H / t->KVH, nb = D / VT_QK8_0, nq = qs->n, len = r->len;
    const int k_q8 = t->k_dtype == VT_Q8_0, v_q8 = t->v_dtype == VT_Q8_0;
    float *acc = qs->acc, *run_max = qs->run_max, *run_sum = qs->run_sum;
    for (int64_t j = 0; j < nq; j++) { /* positions of the chunk each query sees (0: its context ended before) */
        const int64_t lim = qs->limit[j / G] - r->p0;
        count[j] = lim <= 0 ? 0 : lim < len ? lim : len;
    }
#if defined(__AVX512BF16__)
    if (t->bf16_dot) {
        attend_chunk_bf16(t, qs, r, scores, weights, count);
        return;
    }
#endif
    if (k_q8) /* every query's scores first: each load of the transposed chunk serves a group of queries */
        for (int64_t j = 0; j < nq;) {
            const int16_t *qv[Q8_QUERIES];
            const float *dv[Q8_QUERIES];
            float *ov[Q8_QUERIES];
            int g = 0;
            for (; j < nq && g < Q8_QUERIES; j++)
                if (count[j] > 0) qv[g] = qs->qs + j * D, dv[g] = qs->qd + j * nb, ov[g] = scores + j * CHUNK, g++;
            if (g == Q8_QUERIES) q8_0_chunk_scores_q(Q8_QUERIES, qv, dv, r->kt, r->kd, nb, ov);
            else
                for (int u = 0; u < g; u++) q8_0_chunk_scores_q(1, qv + u, dv + u, r->kt, r->kd, nb, ov + u);
        }
    for (int64_t j = 0; j < nq; j++) {
        const int64_t n = count[j];
        if (n == 0) continue;
        float *sj = scores + j * CHUNK;
        int64_t i = 0;
#if QUERIES_PER_LOAD == 4
        /* 16 queries each seeing the whole chunk: scores by quads, one
         * softmax for the 16, weighted rows by quads */
        if (!k_q8 && !v_q8 && n == CHUNK && counts_equal(count, j, 16, nq, CHUNK)) {
            const float *q16[16];
            float *s16[16], *y16[16];
            query_slots(qs, j, 16, G, D, sj, acc, q16, s16, y16);
            for (int u = 0; u < 16; u += 4)
                for (int64_t r0 = 0; r0 < CHUNK; r0 += 8) {
                    float *const o4[4] = {s16[u] + r0, s16[u + 1] + r0, s16[u + 2] + r0, s16[u + 3] + r0};
                    dot4x8(q16 + u, r->k + r0, D, o4);
                }
            chunk_softmax16x16(s16, t->scale, run_max + j, run_sum + j, y16, D);
            for (int u = 0; u < 16; u += 4) accumulate4(VT_F32, y16 + u, (const float *const *)(s16 + u), r->v, n, D);
            j += 15;
            continue;
        }
        if (!k_q8 && !v_q8 && counts_equal(count, j, 4, nq, n)) {
            const float *q4[4];
            float *s4[4], *y4[4];
            query_slots(qs, j, 4, G, D, sj, acc, q4, s4, y4);
            for (; i + 8 <= n; i += 8) {
                float *const o4[4] = {s4[0] + i, s4[1] + i, s4[2] + i, s4[3] + i};
                dot4x8(q4, r->k + i, D, o4);
            }
            for (; i + 4 <= n; i += 4) {
                float *const o4[4] = {s4[0] + i, s4[1] + i, s4[2] + i, s4[3] + i};
                dot4x4(VT_F32, q4, r->k + i, D, o4);
            }
            for (; i < n; i++)
                for (int u = 0; u < 4; u++) s4[u][i] = dot1(VT_F32, q4[u], r->k[i], D);
            if (n == CHUNK) chunk_softmax16(s4, 4, t->scale, run_max + j, run_sum + j, y4, D);
            else
                for (int u = 0; u < 4; u++) chunk_softmax(s4[u], n, t->scale, run_max + j + u, run_sum + j + u, y4[u], D);
            accumulate4(VT_F32, y4, (const float *const *)s4, r->v, n, D);
            j += 3;
            continue;
        }
#endif
        if (!k_q8 && !v_q8 && counts_equal(count, j, 2, nq, n)) { /* a pair seeing the same rows */
            const int64_t j1 = j + 1;
            const float *q0 = qs->q + (j / G) * qs->q_token_stride + (j % G) * D;
            const float *q1 = qs->q + (j1 / G) * qs->q_token_stride + (j1 % G) * D;
            float *s1 = sj + CHUNK;
            for (; i + 4 <= n; i += 4) dot4x2(VT_F32, q0, q1, r->k + i, D, sj + i, s1 + i);
            for (; i < n; i++) sj[i] = dot1(VT_F32, q0, r->k[i], D), s1[i] = dot1(VT_F32, q1, r->k[i], D);
            chunk_softmax(sj, n, t->scale, run_max + j, run_sum + j, acc + j * D, D);
            chunk_softmax(s1, n, t->scale, run_max + j1, run_sum + j1, acc + j1 * D, D);
            accumulate2(VT_F32, acc + j * D, sj, acc + j1 * D, s1, r->v, n, D);
            j++;
            continue;
        }
        if (!k_q8) {
            const float *q = qs->q + (j / G) * qs->q_token_stride + (j % G) * D;
            for (; i + 4 <= n; i += 4) dot4(VT_F32, q, r->k + i, D, sj + i);
            for (; i < n; i++) sj[i] = dot1(VT_F32, q, r->k[i], D);
        }
        chunk_softmax(sj, n, t->scale, run_max + j, run_sum + j, acc + j * D, D);
        if (!v_q8) accumulate(VT_F32, acc + j * D, sj, r->v, n, D);
    }
    if (v_q8) { /* each query's weights per block, then queries in groups over the rows all of them see */
        for (int64_t j = 0; j < nq; j++)
            if (count[j] > 0) q8_0_block_weights(scores + j * CHUNK, r->vd, nb, weights + j * nb * CHUNK);
        for (int64_t j = 0; j < nq;) {
            float *yv[Q8_QUERIES];
            const float *wv[Q8_QUERIES];
            int64_t n[Q8_QUERIES], all = CHUNK;
            int g = 0;
            for (; j < nq && g < Q8_QUERIES; j++)
                if (count[j] > 0) {
                    yv[g] = acc + j * D, wv[g] = weights + j * nb * CHUNK, n[g] = count[j];
                    all = n[g] < all ? n[g] : all;
                    g++;
                }
            const void *const *rows = r->v_widened ? r->v : NULL;
            if (g == Q8_QUERIES) q8_0_accumulate_q(Q8_QUERIES, yv, wv, rows, r->vb, 0, all, nb);
            else
                for (int u = 0; u < g; u++) q8_0_accumulate_q(1, yv + u, wv + u, rows, r->vb, 0, all, nb);
            for (int u = 0; u < g; u++) /* the rows only some of the group see */
                if (n[u] > all) q8_0_accumulate_q(1, yv + u, wv + u, rows, r->vb, all, n[u], nb);
        }
    }
}

/* Positions per step of attend_heads' walk: a step's rows of every kv head
 * are WALK whole cache rows (WALK x 2 KiB at the qwen3-0.6B shape), read
 * together, so the reads of a chunk go through its block forwards. */
#define WALK 8

/* A decode chunk of 16-bit k and v rows (both F16 or BF16, but not a BF16
 * cache in bf16 dot products), for the G
 * queries of each kv head [kv0, kv1) of one token: every query sees all
 * len positions. The numbers are attend_chunk's, query by query: the same
 * kernels on the same rows in the same groups of 4 (scores) and the same
 * order of rows (accumulation, whose stores and reloads between steps are
 * exact). What differs is the walk: attend_chunk takes one kv head's rows,
 * a row every KVH, down the whole chunk; here each step takes WALK
 * positions of every kv head, a contiguous range, so the cache is read as
 * one forward stream instead of KVH strided ones.
 * k, v: position i's row of kv head kv0; kv head kvh's is D values further
 * per head. acc, run_max, run_sum: the token's states, indexed by query
 * head; scores: [(kv1 - kv0) G][CHUNK]. */
SIMD_INLINE void attend_heads_d(const attention_task *t, int64_t D, int32_t kt, int32_t vt, int64_t tok, int64_t kv0,
                                int64_t kv1, const uint16_t *const *k, const uint16_t *const *v, int64_t len,
                                float *acc, float *run_max, float *run_sum, float *scores) {
    const int64_t H = t->H, G = H / t->KVH;
    const float *q = t->q + tok * H * D;
    const void *rows[WALK > 4 ? WALK : 4];
    int64_t i = 0;
    for (; i + 4 <= len; i += 4) /* scores: 4 rows of every head per step */
        for (int64_t kvh = kv0; kvh < kv1; kvh++) {
            for (int u = 0; u < 4; u++) rows[u] = k[i + u] + (kvh - kv0) * D;
            for (int64_t h = kvh * G; h < (kvh + 1) * G;) {
                float *sh = scores + (h - kv0 * G) * CHUNK + i;
                if (h + 1 < (kvh + 1) * G) {
                    dot4x2(kt, q + h * D, q + (h + 1) * D, rows, D, sh, sh + CHUNK);
                    h += 2;
                } else {
                    dot4(kt, q + h * D, rows, D, sh);
                    h += 1;
                }
            }
        }
    for (; i < len; i++)
        for (int64_t kvh = kv0; kvh < kv1; kvh++)
            for (int64_t h = kvh * G; h < (kvh + 1) * G; h++)
                scores[(h - kv0 * G) * CHUNK + i] = dot1(kt, q + h * D, k[i] + (kvh - kv0) * D, D);
    for (int64_t h = kv0 * G; h < kv1 * G; h++)
        chunk_softmax(scores + (h - kv0 * G) * CHUNK, len, t->scale, run_max + h, run_sum + h, acc + h * D, D);
    for (int64_t i0 = 0; i0 < len; i0 += WALK) { /* weighted v rows: WALK rows of every head per step */
        const int64_t n = len - i0 < WALK ? len - i0 : WALK;
        for (int64_t kvh = kv0; kvh < kv1; kvh++) {
            for (int64_t u = 0; u < n; u++) rows[u] = v[i0 + u] + (kvh - kv0) * D;
            for (int64_t h = kvh * G; h < (kvh + 1) * G;) {
                const float *ph = scores + (h - kv0 * G) * CHUNK + i0;
                if (h + 1 < (kvh + 1) * G) {
                    if (n == WALK) /* a whole step: a constant row count, unrolled without a test per row */
                        accumulate2(vt, acc + h * D, ph, acc + (h + 1) * D, ph + CHUNK, rows, WALK, D);
                    else
                        accumulate2(vt, acc + h * D, ph, acc + (h + 1) * D, ph + CHUNK, rows, n, D);
                    h += 2;
                } else {
                    accumulate(vt, acc + h * D, ph, rows, n, D);
                    h += 1;
                }
            }
        }
    }
}

/* attend_heads_d with the head dimension a constant where it is the usual
 * 128: the row loops get a known trip count and the per-call work around
 * them (offsets, tails, chunk_softmax's call and constants) folds away,
 * about 9% of a decode's instructions at the qwen3-0.6B shape; and with the
 * cache dtype a constant for the default f16 cache, so each row load is one
 * conversion with no test of the dtype in the loop (a 15% slower decode
 * attention without it, measured). The operations and their order are the
 * same (test_simd_ops checks decode against prefill at 128 too). */
static void attend_heads(const attention_task *t, int64_t tok, int64_t kv0, int64_t kv1, const uint16_t *const *k,
                         const uint16_t *const *v, int64_t len, float *acc, float *run_max, float *run_sum,
                         float *scores) {
    const int32_t kt = t->k_dtype, vt = t->v_dtype;
    if (t->D == 128 && kt == VT_F16 && vt == VT_F16)
        attend_heads_d(t, 128, VT_F16, VT_F16, tok, kv0, kv1, k, v, len, acc, run_max, run_sum, scores);
    else if (t->D == 128)
        attend_heads_d(t, 128, kt, vt, tok, kv0, kv1, k, v, len, acc, run_max, run_sum, scores);
    else
        attend_heads_d(t, t->D, kt, vt, tok, kv0, kv1, k, v, len, acc, run_max, run_sum, scores);
}

/* Query q (D values) rounded to bf16 for the bf16 dot path (qb: D values),
 * once per item whatever the context length. */
SIMD_INLINE void round_query(const attention_task *t, const float *q, uint16_t *qb) {
#if defined(__AVX512BF16__)
    vt_f32_to_bf16_row_avx512(q, (vt_bf16_t *)qb, t->D);
#else
    (void)t, (void)q, (void)qb;
#endif
}

/* A fresh span state for n queries. */
static void reset_state(float *acc, float *run_max, float *run_sum, int64_t n, int64_t D) {
    memset(acc, 0, (size_t)(n * D) * sizeof(float));
    for (int64_t j = 0; j < n; j++) run_max[j] = -INFINITY, run_sum[j] = 0.0f;
}

/* State (M, S, A) <- itself merged with a later span's (m, s, a): both
 * rescaled to the larger max. Spans are merged one at a time in span order,
 * by every item kind, through this one function. */
static void merge_state(float *M, float *S, float *A, float m, float s, const float *a, int64_t D) {
    const float top = m > *M ? m : *M;
    const float c_old = expf(*M - top), c_new = expf(m - top);
    *S = *S * c_old + s * c_new;
    *M = top;
    const __m256 vo = _mm256_set1_ps(c_old), vn = _mm256_set1_ps(c_new);
    int64_t d = 0;
    for (; d + 8 <= D; d += 8)
        _mm256_storeu_ps(A + d, _mm256_fmadd_ps(_mm256_loadu_ps(a + d), vn, _mm256_mul_ps(_mm256_loadu_ps(A + d), vo)));
    for (; d < D; d++) A[d] = fmaf(a[d], c_new, A[d] * c_old);
}

/* out = A / S (out may be A). */
static void finish_query(float *out, const float *A, float S, int64_t D) {
    const float inv = 1.0f / S;
    for (int64_t d = 0; d < D; d++) out[d] = A[d] * inv;
}

/* Prefill item part: queries of tokens [t0, t1) (one sequence) x the G
 * heads of kv head kvh, all spans in order. */
static void attend_run(const attention_task *t, int64_t t0, int64_t t1, int64_t kvh, float *s) {
    const int64_t D = t->D, H = t->H, KVH = t->KVH, BS = t->BS, G = H / KVH, nb = D / VT_QK8_0;
    const int64_t nq = (t1 - t0) * G; /* query vectors, token-major */
    const attend_layout L = attend_scratch_layout(G, H, D, t->tile_tokens);
    const size_t k_row_bytes = vt_row_size(t->k_dtype, D), v_row_bytes = vt_row_size(t->v_dtype, D);
    float *acc = s + L.acc, *span_acc = s + L.span_acc; /* [nq][D]: merged spans, current span */
    float *run_max = s + L.run_max, *run_sum = s + L.run_sum, *span_max = s + L.span_max, *span_sum = s + L.span_sum;
    int16_t *qsq = (int16_t *)(void *)(s + L.qs);
    int64_t limit[MAX_TILE_TOKENS]; /* positions each token sees */
    int64_t n_pos = 0;
    for (int64_t tok = t0; tok < t1; tok++) {
        limit[tok - t0] = (int64_t)t->pos[tok] + 1;
        n_pos = limit[tok - t0] > n_pos ? limit[tok - t0] : n_pos;
    }
    const int32_t *table = t->tables + (int64_t)t->seq[t0] * t->max_blocks;
    query_set qs = {.n = nq, .q = t->q + (t0 * H + kvh * G) * D, .q_token_stride = H * D, .qs = qsq,
                    .qd = s + L.qd, .qb = (const uint16_t *)qsq, .limit = limit};
    if (t->k_dtype == VT_Q8_0) /* each query once per item, whatever the context length */
        for (int64_t j = 0; j < nq; j++)
            simd_q8_0_quantize_query(qs.q + (j / G) * qs.q_token_stride + (j % G) * D, qsq + j * D,
                                     s + L.qd + j * nb, D);
    if (t->bf16_dot)
        for (int64_t j = 0; j < nq; j++)
            round_query(t, qs.q + (j / G) * qs.q_token_stride + (j % G) * D, (uint16_t *)qsq + j * D);
    chunk_rows *rows = (chunk_rows *)(void *)(s + L.rows);
    for (int64_t sp0 = 0; sp0 < n_pos; sp0 += SPAN) {
        /* the first span's state is the merged state; later ones merge into it */
        qs.acc = sp0 == 0 ? acc : span_acc;
        qs.run_max = sp0 == 0 ? run_max : span_max;
        qs.run_sum = sp0 == 0 ? run_sum : span_sum;
        reset_state(qs.acc, qs.run_max, qs.run_sum, nq, D);
        const int64_t sp1 = sp0 + SPAN < n_pos ? sp0 + SPAN : n_pos;
        for (int64_t p0 = sp0; p0 < sp1; p0 += CHUNK) {
            const int64_t len = sp1 - p0 < CHUNK ? sp1 - p0 : CHUNK;
            for (int64_t p = p0 + CHUNK; p < p0 + 2 * CHUNK && p < n_pos; p++) { /* the next chunk's rows */
                const int64_t slot = (int64_t)table[p / BS] * BS + p % BS;
                prefetch_row(t->k_cache, k_row_bytes, slot, kvh, KVH);
                prefetch_row(t->v_cache, v_row_bytes, slot, kvh, KVH);
            }
            load_chunk(t, table, kvh, kvh + 1, p0, len, s + L.kbuf, s + L.vbuf, s + L.kd, s + L.vd, true, rows);
            attend_chunk(t, &qs, rows, s + L.scores, s + L.weights, (int64_t *)(void *)(s + L.count));
        }
        if (sp0 > 0)
            for (int64_t j = 0; j < nq; j++)
                if (limit[j / G] > sp0) /* a query whose context ended before the span has nothing to merge */
                    merge_state(run_max + j, run_sum + j, acc + j * D, span_max[j], span_sum[j], span_acc + j * D, D);
    }
    for (int64_t j = 0; j < nq; j++)
        finish_query(t->out + ((t0 + j / G) * H + kvh * G + j % G) * D, acc + j * D, run_sum[j], D);
}

/* Items: (tile of tile_tokens tokens, kv head); a tile's tokens are taken
 * in runs of one sequence (they share a block table); decode tokens are
 * left to decode items. */
static void prefill_item(const attention_task *t, int64_t item, float *s) {
    const int64_t tile = item / t->KVH, kvh = item % t->KVH, n = t->tile_tokens;
    const int64_t first = tile * n, last = first + n < t->T ? first + n : t->T;
    for (int64_t t0 = first; t0 < last;) {
        int64_t t1 = t0 + 1;
        while (t1 < last && t->seq[t1] == t->seq[t0]) t1++;
        if (!t->is_decode[t0]) attend_run(t, t0, t1, kvh, s);
        t0 = t1;
    }
}

/* The merged spans of the query heads of kv heads [kv0, kv1) of decode
 * token i, into the output. */
static void merge_decode(const attention_task *t, int64_t i, int64_t kv0, int64_t kv1) {
    const int64_t D = t->D, H = t->H, G = H / t->KVH, tok = t->dec_tok[i];
    const int64_t n_spans = ((int64_t)t->pos[tok] + SPAN) / SPAN, part = t->dec_part[i];
    for (int64_t h = kv0 * G; h < kv1 * G; h++) {
        float *o = t->out + (tok * H + h) * D;
        float M = t->part_max[part * H + h], S = t->part_sum[part * H + h];
        memcpy(o, t->part_acc + (part * H + h) * D, (size_t)D * sizeof(float));
        for (int64_t sp = 1; sp < n_spans; sp++) {
            const int64_t at = (part + sp) * H + h;
            merge_state(&M, &S, o, t->part_max[at], t->part_sum[at], t->part_acc + at * D, D);
        }
        finish_query(o, o, S, D);
    }
}

/* Decode item: one span of one decode token over a group of kv heads, chunk
 * by chunk, each chunk's kv heads in turn (consecutive rows of the cache). */
static void decode_item(const attention_task *t, int64_t item, float *s) {
    const int64_t D = t->D, H = t->H, KVH = t->KVH, G = H / KVH, nb = D / VT_QK8_0;
    const int64_t i = t->item_dec[item], sp = t->item_span[item], g = t->item_group[item];
    const int64_t tok = t->dec_tok[i], kv0 = g * KVH / t->groups, kv1 = (g + 1) * KVH / t->groups;
    const attend_layout L = attend_scratch_layout(G, H, D, t->tile_tokens);
    const int64_t limit = (int64_t)t->pos[tok] + 1, sp0 = sp * SPAN, sp1 = sp0 + SPAN < limit ? sp0 + SPAN : limit;
    const int64_t part = t->dec_part[i] + sp;
    const int32_t *table = t->tables + (int64_t)t->seq[tok] * t->max_blocks;
    int16_t *qsq = (int16_t *)(void *)(s + L.qs);
    float *qd = s + L.qd;
    if (t->k_dtype == VT_Q8_0)
        for (int64_t h = kv0 * G; h < kv1 * G; h++)
            simd_q8_0_quantize_query(t->q + (tok * H + h) * D, qsq + h * D, qd + h * nb, D);
    if (t->bf16_dot)
        for (int64_t h = kv0 * G; h < kv1 * G; h++) round_query(t, t->q + (tok * H + h) * D, (uint16_t *)qsq + h * D);
    float *acc = t->part_acc + part * H * D, *run_max = t->part_max + part * H, *run_sum = t->part_sum + part * H;
    reset_state(acc + kv0 * G * D, run_max + kv0 * G, run_sum + kv0 * G, (kv1 - kv0) * G, D);
    /* The next chunk's rows are prefetched while this one is worked on: its
     * positions' heads [kv0, kv1), one contiguous range each. The 16-bit
     * rows attend_heads reads in address order too: a block's rows are a
     * forward stream, but only 2 KiB of it per 4 KiB page at the qwen3-0.6B
     * shape, and the hardware prefetchers stop at page edges. Measured on
     * an AVX-512 EPYC (simd_attention_bench -d f16 -T 1, alternated): 10-19%
     * faster from DRAM (1 to 8 sequences, 300 to 4,000 positions), 6%
     * slower when the whole cache sits in L3. */
    const size_t k_bytes = vt_row_size(t->k_dtype, D), v_bytes = vt_row_size(t->v_dtype, D);
    chunk_rows *rows = (chunk_rows *)(void *)(s + L.rows);
    /* bf16 dot products read load_chunk's pairs, as prefill does */
    const int narrow = !t->bf16_dot && (t->k_dtype == VT_F16 || t->k_dtype == VT_BF16) &&
                       (t->v_dtype == VT_F16 || t->v_dtype == VT_BF16);
    for (int64_t p0 = sp0; p0 < sp1; p0 += CHUNK) {
        const int64_t len = sp1 - p0 < CHUNK ? sp1 - p0 : CHUNK;
        for (int64_t p = p0 == sp0 ? sp0 : p0 + CHUNK; p < p0 + 2 * CHUNK && p < sp1; p++) {
            const int64_t slot = (int64_t)table[p / t->BS] * t->BS + p % t->BS;
            prefetch_range(t->k_cache, k_bytes, slot, kv0, kv1, KVH);
            prefetch_range(t->v_cache, v_bytes, slot, kv0, kv1, KVH);
        }
        if (narrow) { /* 16-bit rows read in place: each position's row of kv head kv0 */
            const uint16_t *k[CHUNK], *v[CHUNK];
            int64_t b = p0 / t->BS, off = p0 % t->BS;
            for (int64_t u = 0; u < len; u++) {
                const int64_t row = ((int64_t)table[b] * t->BS + off) * KVH + kv0;
                k[u] = (const uint16_t *)t->k_cache + row * D, v[u] = (const uint16_t *)t->v_cache + row * D;
                if (++off == t->BS) b++, off = 0;
            }
            attend_heads(t, tok, kv0, kv1, k, v, len, acc, run_max, run_sum, s + L.scores);
            continue;
        }
        /* a token's G queries a kv head: widening its q8_0 v rows into memory would cost more than it saves */
        load_chunk(t, table, kv0, kv1, p0, len, s + L.kbuf, s + L.vbuf, s + L.kd, s + L.vd, false, rows);
        for (int64_t kvh = kv0; kvh < kv1; kvh++) {
            const query_set qs = {.n = G, .q = t->q + (tok * H + kvh * G) * D, .q_token_stride = H * D,
                                  .qs = qsq + kvh * G * D, .qd = qd + kvh * G * nb,
                                  .qb = (const uint16_t *)qsq + kvh * G * D, .limit = &limit,
                                  .acc = acc + kvh * G * D, .run_max = run_max + kvh * G,
                                  .run_sum = run_sum + kvh * G};
            attend_chunk(t, &qs, rows + (kvh - kv0), s + L.scores, s + L.weights, (int64_t *)(void *)(s + L.count));
        }
    }
    /* the last of the token's items for these heads merges their spans: the
     * acquire-release count makes the other items' states visible to it */
    if (atomic_fetch_sub_explicit(&t->pending[i * t->groups + g], 1, memory_order_acq_rel) == 1)
        merge_decode(t, i, kv0, kv1);
}

/* Decode item shared by n decode tokens (of different sequences) whose
 * block tables hold the same blocks over the whole span sp: a beginning
 * taken from the prefix cache, such as one system prompt. Each kv head's
 * rows are read (and widened) once for the G heads of every token, as a
 * prefill item reads them for its tokens, instead of once per token. Every
 * token sees the whole span, and a query's numbers depend only on the
 * query, the rows and the positions, not on which queries attend_chunk
 * groups it with (with G = 3 a group of four straddles two tokens), so each
 * token's span state is the one its own item leaves: which sequences decode
 * together changes no token's numbers. The states are copied (exactly) to
 * each token's part buffers; then every member's count drops, and each
 * token whose count reached zero is merged. */
static void shared_decode_item(const attention_task *t, int64_t item, float *s) {
    const int64_t D = t->D, H = t->H, KVH = t->KVH, G = H / KVH, nb = D / VT_QK8_0;
    const int64_t sp = t->item_span[item], g = t->item_group[item];
    const int32_t *members = t->members + t->item_members[item];
    const int64_t n = t->item_n_members[item], nq = n * G;
    const int64_t kv0 = g * KVH / t->groups, kv1 = (g + 1) * KVH / t->groups;
    const attend_layout L = attend_scratch_layout(G, H, D, t->tile_tokens);
    const int64_t sp0 = sp * SPAN, sp1 = sp0 + SPAN;
    const int32_t *table = t->tables + (int64_t)t->seq[t->dec_tok[members[0]]] * t->max_blocks;
    const size_t k_row_bytes = vt_row_size(t->k_dtype, D), v_row_bytes = vt_row_size(t->v_dtype, D);
    float *q = s + L.span_acc, *acc = s + L.acc, *run_max = s + L.run_max, *run_sum = s + L.run_sum;
    int16_t *qsq = (int16_t *)(void *)(s + L.qs);
    chunk_rows *rows = (chunk_rows *)(void *)(s + L.rows);
    int64_t limit[QUERY_TOKENS];
    for (int64_t u = 0; u < n; u++) limit[u] = (int64_t)t->pos[t->dec_tok[members[u]]] + 1;
    for (int64_t kvh = kv0; kvh < kv1; kvh++) {
        /* the tokens' queries of this kv head side by side, query j of
         * token j / G, as a prefill item's */
        for (int64_t j = 0; j < nq; j++) {
            memcpy(q + j * D, t->q + ((int64_t)t->dec_tok[members[j / G]] * H + kvh * G + j % G) * D,
                   (size_t)D * sizeof(float));
            if (t->k_dtype == VT_Q8_0) simd_q8_0_quantize_query(q + j * D, qsq + j * D, s + L.qd + j * nb, D);
            if (t->bf16_dot) round_query(t, q + j * D, (uint16_t *)qsq + j * D);
        }
        const query_set qs = {.n = nq, .q = q, .q_token_stride = G * D, .qs = qsq, .qd = s + L.qd,
                              .qb = (const uint16_t *)qsq, .limit = limit,
                              .acc = acc, .run_max = run_max, .run_sum = run_sum};
        reset_state(acc, run_max, run_sum, nq, D);
        for (int64_t p0 = sp0; p0 < sp1; p0 += CHUNK) {
            for (int64_t p = p0 == sp0 ? sp0 : p0 + CHUNK; p < p0 + 2 * CHUNK && p < sp1; p++) {
                const int64_t slot = (int64_t)table[p / t->BS] * t->BS + p % t->BS;
                prefetch_row(t->k_cache, k_row_bytes, slot, kvh, KVH);
                prefetch_row(t->v_cache, v_row_bytes, slot, kvh, KVH);
            }
            load_chunk(t, table, kvh, kvh + 1, p0, CHUNK, s + L.kbuf, s + L.vbuf, s + L.kd, s + L.vd, true, rows);
            attend_chunk(t, &qs, rows, s + L.scores, s + L.weights, (int64_t *)(void *)(s + L.count));
        }
        for (int64_t j = 0; j < nq; j++) {
            const int64_t at = (t->dec_part[members[j / G]] + sp) * H + kvh * G + j % G;
            memcpy(t->part_acc + at * D, acc + j * D, (size_t)D * sizeof(float));
            t->part_max[at] = run_max[j];
            t->part_sum[at] = run_sum[j];
        }
    }
    /* every member's count first, so no member's merge on another thread
     * waits behind this item's merges */
    bool last[QUERY_TOKENS];
    for (int64_t u = 0; u < n; u++)
        last[u] = atomic_fetch_sub_explicit(&t->pending[members[u] * t->groups + g], 1, memory_order_acq_rel) == 1;
    for (int64_t u = 0; u < n; u++)
        if (last[u]) merge_decode(t, members[u], kv0, kv1);
}

static int compare_keys(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Decode tokens whose block tables hold the same blocks over a whole span
 * that each of them sees entirely (a prompt beginning the prefix cache gave
 * them all) are grouped, up to QUERY_TOKENS tokens a group, for one
 * shared_decode_item. Sequences share blocks from their first one on (the
 * prefix cache matches chains from the start; a fork shares its parent's
 * beginning), so two tokens sharing a span share every span before it: the
 * walk stops at the first span where no two tokens share, and costs a sort
 * of the decode tokens per shared span plus one for the span after. (Were
 * a later span shared alone, it would only be computed per token.)
 * role[part] (a decode token's span, dec_part): -1 the token's own decode
 * item, -2 a member of a group another token leads, or the index of the
 * group it leads: its members (ascending) at members[group_at[k]],
 * group_n[k] of them. keys: scratch [n_dec]. Returns the number of
 * groups. */
static int64_t share_decode_spans(const attention_task *t, int64_t n_dec, int64_t n_parts, int32_t *role,
                                  int32_t *members, int32_t *group_at, int32_t *group_n, int64_t *keys) {
    for (int64_t p = 0; p < n_parts; p++) role[p] = -1;
    int64_t max_spans = 0, n_groups = 0, n_members = 0;
    for (int64_t i = 0; i < n_dec; i++) {
        const int64_t spans = ((int64_t)t->pos[t->dec_tok[i]] + SPAN) / SPAN;
        max_spans = spans > max_spans ? spans : max_spans;
    }
    for (int64_t sp = 0; n_dec > 1 && sp < max_spans; sp++) {
        const int64_t sp1 = (sp + 1) * SPAN, b0 = sp * SPAN / t->BS, b1 = (sp1 - 1) / t->BS;
        int64_t n = 0;
        for (int64_t i = 0; i < n_dec; i++) {
            const int64_t tok = t->dec_tok[i];
            if ((int64_t)t->pos[tok] + 1 >= sp1) /* sees the whole span */
                keys[n++] = (int64_t)t->tables[(int64_t)t->seq[tok] * t->max_blocks + b0] << 32 | i;
        }
        if (n < 2) break;
        const int64_t groups_before = n_groups;
        qsort(keys, (size_t)n, sizeof *keys, compare_keys); /* by the span's first block, then token */
        for (int64_t a = 0, z; a < n; a = z) {
            for (z = a + 1; z < n && keys[z] >> 32 == keys[a] >> 32;) z++;
            for (int64_t x = a; x < z; x++) { /* the run's tokens that share every block of the span */
                const int64_t i = keys[x] & 0xffffffff;
                if (role[t->dec_part[i] + sp] != -1) continue;
                const int32_t *ti = t->tables + (int64_t)t->seq[t->dec_tok[i]] * t->max_blocks;
                const int64_t at = n_members;
                members[n_members++] = (int32_t)i;
                for (int64_t y = x + 1; y < z && n_members - at < QUERY_TOKENS; y++) {
                    const int64_t j = keys[y] & 0xffffffff;
                    const int32_t *tj = t->tables + (int64_t)t->seq[t->dec_tok[j]] * t->max_blocks;
                    if (role[t->dec_part[j] + sp] != -1 ||
                        memcmp(ti + b0, tj + b0, (size_t)(b1 - b0 + 1) * sizeof *ti) != 0)
                        continue;
                    members[n_members++] = (int32_t)j;
                    role[t->dec_part[j] + sp] = -2;
                }
                if (n_members - at == 1) { /* alone: its own item */
                    n_members = at;
                    continue;
                }
                role[t->dec_part[i] + sp] = (int32_t)n_groups;
                group_at[n_groups] = (int32_t)at;
                group_n[n_groups++] = (int32_t)(n_members - at);
            }
        }
        if (n_groups == groups_before) break; /* no two tokens share this span: nor any later one */
    }
    return n_groups;
}

static void attention_items(void *arg, int64_t begin, int64_t end, int thread) {
    const attention_task *t = arg;
    float *s = t->scratch + (size_t)thread * t->scratch_floats;
    for (int64_t item = begin; item < end; item++) {
        if (item < t->prefill_items)
            prefill_item(t, item, s);
        else if (t->item_members[item - t->prefill_items] >= 0)
            shared_decode_item(t, item - t->prefill_items, s);
        else
            decode_item(t, item - t->prefill_items, s);
    }
}

vt_status SIMD_ATTENTION_ENTRY(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_tensor *Q = &node->src[0], *Kc = &node->src[1], *Vc = &node->src[2];
    const vt_attention_params *p = &node->params.attention;
    attention_task t;
    memset(&t, 0, sizeof t);
    t.D = Q->ne[0];
    t.H = Q->ne[1];
    const int64_t T = Q->ne[2];
    t.T = T;
    t.KVH = Kc->ne[1];
    t.BS = p->block_size;
    t.max_blocks = p->max_blocks_per_seq;
    const int64_t n_blocks = Kc->ne[3];
    if (T <= 0) return VT_OK;
    if (t.KVH <= 0 || t.H % t.KVH != 0 || t.BS <= 0 || Kc->ne[2] != t.BS) return VT_ERR_INVALID;
    t.q = Q->data;
    t.k_cache = Kc->data;
    t.v_cache = Vc->data;
    t.k_dtype = Kc->dtype;
    t.v_dtype = Vc->dtype;
    t.tables = node->src[3].data;
    t.pos = node->src[4].data;
    t.seq = node->src[5].data;
    t.out = node->dst.data;
    t.scale = p->scale;
#if defined(__AVX512BF16__)
    t.bf16_dot = t.k_dtype == VT_BF16 && t.v_dtype == VT_BF16 && t.D % 64 == 0;
#endif

    /* every block a token will read must exist: checked once here so the
     * kernel indexes without bounds checks */
    for (int64_t tok = 0; tok < T; tok++) {
        const int32_t sq = t.seq[tok], pos = t.pos[tok];
        if (sq < 0 || sq >= p->n_seqs || pos < 0 || pos / t.BS >= t.max_blocks) return VT_ERR_INVALID;
        const int32_t *table = t.tables + (int64_t)sq * t.max_blocks;
        for (int64_t b = 0; b <= pos / t.BS; b++)
            if (table[b] < 0 || table[b] >= n_blocks) return VT_ERR_INVALID;
    }
    if ((t.k_dtype == VT_Q8_0 || t.v_dtype == VT_Q8_0) && t.D % VT_QK8_0 != 0) return VT_ERR_INVALID;

    /* decode tokens (runs of one token) and their spans */
    int64_t n_dec = 0, n_parts = 0;
    for (int64_t tok = 0; tok < T; tok++) {
        const int alone = (tok == 0 || t.seq[tok - 1] != t.seq[tok]) && (tok == T - 1 || t.seq[tok + 1] != t.seq[tok]);
        if (alone) n_dec++, n_parts += ((int64_t)t.pos[tok] + SPAN) / SPAN;
    }
    /* at most max(n_parts, 6 n_threads) decode items: below 2 n_threads
     * spans the kv heads are split in groups (see below), to fewer than
     * 4 n_threads items */
    const int64_t max_items = n_parts > 6 * (int64_t)ctx->n_threads ? n_parts : 6 * (int64_t)ctx->n_threads;

    t.tile_tokens = n_dec < T ? prefill_tile_tokens(T, t.KVH, t.H / t.KVH, ctx->n_threads) : QUERY_TOKENS;
    t.scratch_floats = attend_scratch_layout(t.H / t.KVH, t.H, t.D, t.tile_tokens).total;
    const size_t f = sizeof(float), i32 = sizeof(int32_t), per_threads = t.scratch_floats * f * (size_t)ctx->n_threads;
    const size_t sizes[] = {per_threads, (size_t)T, (size_t)n_dec * i32, (size_t)n_dec * sizeof(int64_t),
                            (size_t)max_items * 5 * i32, (size_t)(n_parts * t.H * t.D) * f,
                            (size_t)(n_parts * t.H) * f, (size_t)(n_parts * t.H) * f,
                            (size_t)(n_dec * t.KVH) * sizeof(_Atomic int32_t), (size_t)n_parts * 4 * i32,
                            (size_t)n_dec * sizeof(int64_t)};
    enum { N = sizeof sizes / sizeof *sizes };
    size_t at[N], total = 0;
    for (int i = 0; i < N; i++) at[i] = total, total += simd_align_up(sizes[i]);
    char *base = simd_scratch(ctx, total);
    if (!base) return VT_ERR_NOMEM;
    t.scratch = (float *)(void *)base;
    uint8_t *is_decode = (uint8_t *)(base + at[1]);
    int32_t *dec_tok = (int32_t *)(void *)(base + at[2]);
    int64_t *dec_part = (int64_t *)(void *)(base + at[3]);
    int32_t *item_dec = (int32_t *)(void *)(base + at[4]);
    t.part_acc = (float *)(void *)(base + at[5]);
    t.part_max = (float *)(void *)(base + at[6]);
    t.part_sum = (float *)(void *)(base + at[7]);
    t.pending = (_Atomic int32_t *)(void *)(base + at[8]);
    int32_t *role = (int32_t *)(void *)(base + at[9]), *members = role + n_parts, *group_at = members + n_parts,
            *group_n = group_at + n_parts;
    int64_t any_prefill = 0;
    for (int64_t tok = 0, i = 0, part = 0; tok < T; tok++) {
        const int alone = (tok == 0 || t.seq[tok - 1] != t.seq[tok]) && (tok == T - 1 || t.seq[tok + 1] != t.seq[tok]);
        is_decode[tok] = (uint8_t)alone;
        any_prefill |= !alone;
        if (!alone) continue;
        dec_tok[i] = (int32_t)tok, dec_part[i] = part;
        part += ((int64_t)t.pos[tok] + SPAN) / SPAN, i++;
    }
    t.dec_tok = dec_tok;
    t.dec_part = dec_part;
    const int64_t n_groups = share_decode_spans(&t, n_dec, n_parts, role, members, group_at, group_n,
                                                (int64_t *)(void *)(base + at[10]));
    int64_t n_item_spans = n_parts; /* a group's members' spans make one item span */
    for (int64_t k = 0; k < n_groups; k++) n_item_spans -= group_n[k] - 1;
    /* few spans (one short sequence): split the kv heads too, so every
     * thread gets work */
    t.groups = 1;
    while (n_item_spans * t.groups < 2 * (int64_t)ctx->n_threads && t.KVH % (t.groups * 2) == 0) t.groups *= 2;
    const int64_t dec_items = n_item_spans * t.groups;
    int32_t *item_span = item_dec + dec_items, *item_group = item_span + dec_items,
            *item_members = item_group + dec_items, *item_n_members = item_members + dec_items;
    for (int64_t i = 0, item = 0; i < n_dec; i++) {
        const int64_t spans = ((int64_t)t.pos[dec_tok[i]] + SPAN) / SPAN;
        for (int64_t g = 0; g < t.groups; g++) atomic_init(&t.pending[i * t.groups + g], (int32_t)spans);
        for (int64_t sp = 0; sp < spans; sp++) { /* items token by token, span by span: memory walked forwards */
            const int32_t r = role[dec_part[i] + sp];
            if (r == -2) continue; /* another token's shared item computes it */
            for (int64_t g = 0; g < t.groups; g++, item++) {
                item_dec[item] = (int32_t)i;
                item_span[item] = (int32_t)sp;
                item_group[item] = (int32_t)g;
                item_members[item] = r >= 0 ? group_at[r] : -1;
                item_n_members[item] = r >= 0 ? group_n[r] : 1;
            }
        }
    }
    t.is_decode = is_decode;
    t.item_dec = item_dec, t.item_span = item_span, t.item_group = item_group;
    t.item_members = item_members, t.item_n_members = item_n_members, t.members = members;
    t.prefill_items = any_prefill ? (T + t.tile_tokens - 1) / t.tile_tokens * t.KVH : 0;
    const int64_t items = t.prefill_items + dec_items;
    if (items == 1)
        attention_items(&t, 0, 1, 0);
    else
        simd_dynamic_for(ctx, items, 1, attention_items, &t); /* later tokens cost more: claimed one by one */
    return VT_OK;
}
