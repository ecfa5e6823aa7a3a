/* attention.c — causal GQA attention of query tokens against one layer's
 * paged KV cache (F32, F16, BF16, or Q8_0 through kv_q8_0.c's kernels),
 * with an online softmax in f32.
 *
 * One work item is (up to QUERY_TOKENS tokens, kv head): the G = H / KVH
 * query heads of each token that share the kv head are processed together,
 * so each cached k and v row is read (and widened, for 16-bit caches) once
 * per item and used by every query of the item (each masked to its own
 * causal limit). Positions are taken in chunks of CHUNK: the chunk's 16-bit
 * k and v rows are widened once, each query's scores are computed 4
 * positions per pass over the query, the running max / sum / accumulator
 * are rescaled once per chunk (not once per position), the exponentials
 * computed 8 at a time, and the weighted v rows summed into the accumulator
 * in register slices (loaded and stored once per chunk, not once per row).
 * A Q8_0 cache is not widened to rows: the queries are quantized once per
 * item to 16-bit blocks for integer dot products with the k blocks, and the
 * v blocks are widened in registers, two queries at a time (kv_q8_0.c). Rows
 * are prefetched a chunk ahead (see prefetch_row). */
#include <math.h>
#include <string.h>

#include "simd.h"
#include "simd_vec.h"
#include "vt/vt_dtype.h"

#define CHUNK 16

typedef struct attention_task {
    const float *q;        /* [T][H][D] */
    const void *k_cache;   /* [B][BS][KVH][D] of k_dtype */
    const void *v_cache;   /* [B][BS][KVH][D] of v_dtype */
    int32_t k_dtype, v_dtype;
    const int32_t *tables; /* [n_seqs][max_blocks] */
    const int32_t *pos;    /* [T] */
    const int32_t *seq;    /* [T] */
    float *out;            /* [T][H][D] */
    int64_t D, H, KVH, BS, max_blocks, T;
    float scale;
    float *scratch;        /* per thread: scratch_floats */
    size_t scratch_floats;
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

/* Start loading cached row (slot, kv head) of `bytes` bytes into L1. A work
 * item reads one kv head's rows, KVH rows apart, so each 4 KiB page holds
 * only a few of them and the hardware prefetchers, which stop at page
 * edges, leave most rows to be waited for. */
static void prefetch_row(const void *cache, size_t bytes, int64_t slot, int64_t kvh, int64_t KVH) {
    const char *row = (const char *)cache + (size_t)(slot * KVH + kvh) * bytes;
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(row + off, _MM_HINT_T0);
    _mm_prefetch(row + bytes - 1, _MM_HINT_T0);
}

/* Cached Q8_0 row (slot, kv head): its blocks, and their scales as f32 into
 * d [D / 32]. */
static const vt_block_q8_0 *cache_row_q8_0(const void *cache, int64_t slot, int64_t kvh, int64_t KVH, int64_t nb,
                                           float *d) {
    const vt_block_q8_0 *row = (const vt_block_q8_0 *)cache + (slot * KVH + kvh) * nb;
    for (int64_t b = 0; b < nb; b++) d[b] = _cvtsh_ss(row[b].d);
    return row;
}

/* out[i] = q . k_i for the 4 rows k[0..3], n values each: one load of each
 * q slice serves the 4 rows, and one horizontal reduction the 4 sums. */
SIMD_INLINE void dot4_f32(const float *q, const float *const k[4], int64_t n, float out[4]) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        s0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[0] + i), s0);
        s1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[1] + i), s1);
        s2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[2] + i), s2);
        s3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k[3] + i), s3);
    }
    /* [s0 s0 s1 s1 | ..] then [s0 s1 s2 s3 | s0 s1 s2 s3], halves added */
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) out[r] += q[i] * k[r][i];
}

SIMD_INLINE float dot_f32(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = simd_hsum_ps(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y += sum_i p[i] v[i], for i < len, n values: y is loaded and stored once
 * per 64-value slice (8 registers) instead of once per row. */
SIMD_INLINE void accumulate_rows(float *y, const float *p, const float *const *v, int64_t len, int64_t n) {
    int64_t d = 0;
    for (; d + 64 <= n; d += 64) {
        __m256 a[8];
        SIMD_UNROLL
        for (int u = 0; u < 8; u++) a[u] = _mm256_loadu_ps(y + d + 8 * u);
        for (int64_t i = 0; i < len; i++) {
            const __m256 pv = _mm256_set1_ps(p[i]);
            SIMD_UNROLL
            for (int u = 0; u < 8; u++) a[u] = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v[i] + d + 8 * u), a[u]);
        }
        SIMD_UNROLL
        for (int u = 0; u < 8; u++) _mm256_storeu_ps(y + d + 8 * u, a[u]);
    }
    for (; d + 8 <= n; d += 8) {
        __m256 a = _mm256_loadu_ps(y + d);
        for (int64_t i = 0; i < len; i++) a = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), _mm256_loadu_ps(v[i] + d), a);
        _mm256_storeu_ps(y + d, a);
    }
    for (; d < n; d++)
        for (int64_t i = 0; i < len; i++) y[d] += p[i] * v[i][d];
}

SIMD_INLINE void scale_row(float *y, float c, int64_t n) {
    const __m256 cv = _mm256_set1_ps(c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(cv, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= c;
}

/* Query tokens per work item in prefill: their G heads each, so every k and
 * v row read (and widened) once serves up to QUERY_TOKENS * G queries. */
#define QUERY_TOKENS 4

/* Per-thread scratch of attend_run, in floats from its start: every array
 * at a SIMD_ALIGN boundary. */
typedef struct attend_layout {
    size_t acc, kbuf, vbuf, scores, run_max, run_sum, count, kd, vd, qd, qs, total;
} attend_layout;

static attend_layout attend_scratch_layout(int64_t G, int64_t D) {
    const size_t nq = (size_t)(QUERY_TOKENS * G), nb = (size_t)(D / VT_QK8_0), f = sizeof(float);
    const size_t sizes[] = {nq * (size_t)D, CHUNK * (size_t)D, CHUNK * (size_t)D, nq * CHUNK, nq, nq,
                            nq /* int64 counts: 2 floats each */ * 2, CHUNK * nb, CHUNK * nb, nq * nb,
                            nq * (size_t)D / 2 /* int16 */};
    size_t at[11], off = 0;
    for (int i = 0; i < 11; i++) at[i] = off, off += simd_align_up(sizes[i] * f) / f;
    return (attend_layout){at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7], at[8], at[9], at[10], off};
}

/* Queries [t0, t1) (one sequence) x the G heads of kv head kvh. Per chunk of
 * CHUNK positions the k and v rows are widened once (into kbuf / vbuf; F32
 * caches are read in place; Q8_0 caches only their block scales), then
 * every query's scores are computed 4 positions at a time and its
 * accumulator updated with all the chunk's rows in one pass. */
static void attend_run(const attention_task *t, int64_t t0, int64_t t1, int64_t kvh, float *s) {
    const int64_t D = t->D, H = t->H, KVH = t->KVH, BS = t->BS, G = H / KVH, nb = D / VT_QK8_0;
    const int64_t nq = (t1 - t0) * G; /* query vectors, token-major */
    const attend_layout L = attend_scratch_layout(G, D);
    const int k_q8 = t->k_dtype == VT_Q8_0, v_q8 = t->v_dtype == VT_Q8_0;
    const size_t k_row_bytes = vt_row_size(t->k_dtype, D), v_row_bytes = vt_row_size(t->v_dtype, D);
    float *acc = s + L.acc;         /* [nq][D] */
    float *kbuf = s + L.kbuf;       /* [CHUNK][D] */
    float *vbuf = s + L.vbuf;       /* [CHUNK][D] */
    float *scores = s + L.scores;   /* [nq][CHUNK] */
    float *run_max = s + L.run_max; /* [nq] */
    float *run_sum = s + L.run_sum; /* [nq] */
    int64_t *count = (int64_t *)(void *)(s + L.count); /* [nq] positions of the chunk each query sees */
    float *kd = s + L.kd, *vd = s + L.vd;               /* [CHUNK][nb] Q8_0 block scales */
    float *qd = s + L.qd;                               /* [nq][nb] quantized queries' scales */
    int16_t *qs = (int16_t *)(void *)(s + L.qs);        /* [nq][D] quantized queries */
    const float *krow[CHUNK], *vrow[CHUNK];
    const vt_block_q8_0 *kblk[CHUNK], *vblk[CHUNK];
    int64_t limit[QUERY_TOKENS]; /* positions each token sees */
    int64_t n_pos = 0;
    for (int64_t tok = t0; tok < t1; tok++) {
        limit[tok - t0] = (int64_t)t->pos[tok] + 1;
        n_pos = limit[tok - t0] > n_pos ? limit[tok - t0] : n_pos;
    }
    const int32_t *table = t->tables + (int64_t)t->seq[t0] * t->max_blocks;
    memset(acc, 0, (size_t)(nq * D) * sizeof(float));
    for (int64_t j = 0; j < nq; j++) run_max[j] = -INFINITY, run_sum[j] = 0.0f;
    if (k_q8) /* each query once per item, whatever the context length */
        for (int64_t j = 0; j < nq; j++)
            simd_q8_0_quantize_query(t->q + ((t0 + j / G) * H + kvh * G + j % G) * D, qs + j * D, qd + j * nb, D);

    for (int64_t p0 = 0; p0 < n_pos; p0 += CHUNK) {
        const int64_t len = n_pos - p0 < CHUNK ? n_pos - p0 : CHUNK;
        for (int64_t p = p0 + CHUNK; p < p0 + CHUNK + len && p < n_pos; p++) { /* the next chunk's rows */
            const int64_t slot = (int64_t)table[p / BS] * BS + p % BS;
            prefetch_row(t->k_cache, k_row_bytes, slot, kvh, KVH);
            prefetch_row(t->v_cache, v_row_bytes, slot, kvh, KVH);
        }
        for (int64_t i = 0; i < len; i++) {
            const int64_t p = p0 + i;
            const int64_t slot = (int64_t)table[p / BS] * BS + p % BS;
            if (k_q8)
                kblk[i] = cache_row_q8_0(t->k_cache, slot, kvh, KVH, nb, kd + i * nb);
            else
                krow[i] = cache_row(t->k_cache, t->k_dtype, slot, kvh, KVH, D, kbuf + i * D);
            if (v_q8)
                vblk[i] = cache_row_q8_0(t->v_cache, slot, kvh, KVH, nb, vd + i * nb);
            else
                vrow[i] = cache_row(t->v_cache, t->v_dtype, slot, kvh, KVH, D, vbuf + i * D);
        }
        for (int64_t j = 0; j < nq; j++) {
            const int64_t lim = limit[j / G] - p0; /* positions of the chunk this query sees */
            count[j] = 0;
            if (lim <= 0) continue; /* its context ended before the chunk */
            const int64_t n = lim < len ? lim : len;
            count[j] = n;
            float *sj = scores + j * CHUNK;
            int64_t i = 0;
            if (k_q8) {
                simd_q8_0_scores(qs + j * D, qd + j * nb, kblk, kd, nb, n, sj);
            } else {
                const int64_t tok = t0 + j / G;
                const float *q = t->q + (tok * H + kvh * G + j % G) * D;
                for (; i + 4 <= n; i += 4) dot4_f32(q, krow + i, D, sj + i);
                for (; i < n; i++) sj[i] = dot_f32(q, krow[i], D);
            }
            for (i = 0; i < n; i++) sj[i] *= t->scale;
            for (; i < CHUNK; i++) sj[i] = -INFINITY; /* exp -> 0 */
            float cmax = sj[0];
            for (i = 1; i < n; i++) cmax = sj[i] > cmax ? sj[i] : cmax;
            const float new_max = cmax > run_max[j] ? cmax : run_max[j];
            if (new_max > run_max[j] && run_max[j] != -INFINITY) {
                const float c = expf(run_max[j] - new_max);
                run_sum[j] *= c;
                scale_row(acc + j * D, c, D);
            }
            run_max[j] = new_max;
            const __m256 m = _mm256_set1_ps(new_max);
            const __m256 e0 = simd_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj), m));
            const __m256 e1 = simd_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(sj + 8), m));
            _mm256_storeu_ps(sj, e0);
            _mm256_storeu_ps(sj + 8, e1);
            run_sum[j] += simd_hsum_ps(_mm256_add_ps(e0, e1));
            if (!v_q8) accumulate_rows(acc + j * D, sj, vrow, n, D);
        }
        if (v_q8) /* queries in pairs over the rows both see, then the longer alone */
            for (int64_t j = 0; j < nq;) {
                while (j < nq && count[j] == 0) j++;
                if (j == nq) break;
                int64_t k = j + 1;
                while (k < nq && count[k] == 0) k++;
                if (k == nq) {
                    simd_q8_0_accumulate(acc + j * D, scores + j * CHUNK, NULL, NULL, vblk, vd, nb, count[j]);
                    break;
                }
                const int64_t both = count[j] < count[k] ? count[j] : count[k];
                simd_q8_0_accumulate(acc + j * D, scores + j * CHUNK, acc + k * D, scores + k * CHUNK, vblk, vd, nb,
                                     both);
                const int64_t longer = count[j] > both ? j : k;
                if (count[longer] > both)
                    simd_q8_0_accumulate(acc + longer * D, scores + longer * CHUNK + both, NULL, NULL, vblk + both,
                                         vd + both * nb, nb, count[longer] - both);
                j = k + 1;
            }
    }
    for (int64_t j = 0; j < nq; j++) {
        const int64_t tok = t0 + j / G;
        float *o = t->out + (tok * H + kvh * G + j % G) * D;
        const float inv = 1.0f / run_sum[j];
        for (int64_t d = 0; d < D; d++) o[d] = acc[j * D + d] * inv;
    }
}

/* Items: (tile of QUERY_TOKENS tokens, kv head); a tile's tokens are taken
 * in runs of one sequence (they share a block table). */
static void attention_items(void *arg, int64_t begin, int64_t end, int thread) {
    const attention_task *t = arg;
    const int64_t T = t->T;
    float *s = t->scratch + (size_t)thread * t->scratch_floats;
    for (int64_t item = begin; item < end; item++) {
        const int64_t tile = item / t->KVH, kvh = item % t->KVH;
        const int64_t first = tile * QUERY_TOKENS, last = first + QUERY_TOKENS < T ? first + QUERY_TOKENS : T;
        for (int64_t t0 = first; t0 < last;) {
            int64_t t1 = t0 + 1;
            while (t1 < last && t->seq[t1] == t->seq[t0]) t1++;
            attend_run(t, t0, t1, kvh, s);
            t0 = t1;
        }
    }
}

vt_status simd_attention(void *opaque, const vt_node *node) {
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
    t.scratch_floats = attend_scratch_layout(t.H / t.KVH, t.D).total;
    t.scratch = simd_scratch(ctx, t.scratch_floats * sizeof(float) * (size_t)ctx->n_threads);
    if (!t.scratch) return VT_ERR_NOMEM;
    const int64_t items = (T + QUERY_TOKENS - 1) / QUERY_TOKENS * t.KVH;
    if (items == 1)
        attention_items(&t, 0, 1, 0);
    else
        simd_dynamic_for(ctx, items, 1, attention_items, &t); /* later tokens cost more: claimed one by one */
    return VT_OK;
}
