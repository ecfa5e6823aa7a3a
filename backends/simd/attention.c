/* attention.c — causal GQA attention of query tokens against one layer's
 * paged KV cache (F32, F16, BF16, or Q8_0 widened by kv_q8_0.c), with an
 * online softmax in f32.
 *
 * One work item is (up to QUERY_TOKENS tokens, kv head): the G = H / KVH
 * query heads of each token that share the kv head are processed together,
 * so each cached k and v row is loaded and widened to f32 once and used by
 * every query of the item (each masked to its own causal limit). Positions
 * are taken in chunks of CHUNK: the chunk's k and v rows are widened once,
 * each query's scores are computed 4 positions per pass over the query,
 * the running max / sum / accumulator are rescaled once per chunk (not once
 * per position), the exponentials computed 8 at a time, and the weighted v
 * rows summed into the accumulator in register slices (loaded and stored
 * once per chunk, not once per row). */
#include <math.h>
#include <string.h>

#include "simd.h"
#include "simd_vec.h"

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
 * it is F32, else converted into buf [D]. */
static const float *cache_row(const void *cache, int32_t dtype, int64_t slot, int64_t kvh, int64_t KVH, int64_t D,
                              float *buf) {
    const int64_t index = (slot * KVH + kvh) * D;
    if (dtype == VT_F32) return (const float *)cache + index;
    if (dtype == VT_Q8_0) return simd_q8_0_cache_row(cache, slot * KVH + kvh, D, buf);
    simd_load_row(dtype, (const uint8_t *)cache + (size_t)index * 2, buf, D);
    return buf;
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

/* Floats of per-thread scratch attend_run needs. */
static size_t attend_scratch_floats(int64_t G, int64_t D) {
    const int64_t nq = QUERY_TOKENS * G;
    return simd_align_up((size_t)(nq * D + 2 * CHUNK * D + nq * CHUNK + 2 * nq) * sizeof(float)) / sizeof(float);
}

/* Queries [t0, t1) (one sequence) x the G heads of kv head kvh. Per chunk of
 * CHUNK positions the k and v rows are widened once (into kbuf / vbuf; F32
 * caches are read in place), then every query's scores are computed 4
 * positions at a time and its accumulator updated with all the chunk's
 * rows in one pass. */
static void attend_run(const attention_task *t, int64_t t0, int64_t t1, int64_t kvh, float *s) {
    const int64_t D = t->D, H = t->H, KVH = t->KVH, BS = t->BS, G = H / KVH;
    const int64_t nq = (t1 - t0) * G; /* query vectors, token-major */
    float *acc = s;                                     /* [nq][D] */
    float *kbuf = acc + QUERY_TOKENS * G * D;           /* [CHUNK][D] */
    float *vbuf = kbuf + CHUNK * D;                     /* [CHUNK][D] */
    float *scores = vbuf + CHUNK * D;                   /* [nq][CHUNK] */
    float *run_max = scores + QUERY_TOKENS * G * CHUNK; /* [nq] */
    float *run_sum = run_max + QUERY_TOKENS * G;        /* [nq] */
    const float *krow[CHUNK], *vrow[CHUNK];
    int64_t limit[QUERY_TOKENS]; /* positions each token sees */
    int64_t n_pos = 0;
    for (int64_t tok = t0; tok < t1; tok++) {
        limit[tok - t0] = (int64_t)t->pos[tok] + 1;
        n_pos = limit[tok - t0] > n_pos ? limit[tok - t0] : n_pos;
    }
    const int32_t *table = t->tables + (int64_t)t->seq[t0] * t->max_blocks;
    memset(acc, 0, (size_t)(nq * D) * sizeof(float));
    for (int64_t j = 0; j < nq; j++) run_max[j] = -INFINITY, run_sum[j] = 0.0f;

    for (int64_t p0 = 0; p0 < n_pos; p0 += CHUNK) {
        const int64_t len = n_pos - p0 < CHUNK ? n_pos - p0 : CHUNK;
        for (int64_t i = 0; i < len; i++) {
            const int64_t p = p0 + i;
            const int64_t slot = (int64_t)table[p / BS] * BS + p % BS;
            krow[i] = cache_row(t->k_cache, t->k_dtype, slot, kvh, KVH, D, kbuf + i * D);
            vrow[i] = cache_row(t->v_cache, t->v_dtype, slot, kvh, KVH, D, vbuf + i * D);
        }
        for (int64_t j = 0; j < nq; j++) {
            const int64_t lim = limit[j / G] - p0; /* positions of the chunk this query sees */
            if (lim <= 0) continue;                /* its context ended before the chunk */
            const int64_t n = lim < len ? lim : len;
            const int64_t tok = t0 + j / G;
            const float *q = t->q + (tok * H + kvh * G + j % G) * D;
            float *sj = scores + j * CHUNK;
            int64_t i = 0;
            for (; i + 4 <= n; i += 4) dot4_f32(q, krow + i, D, sj + i);
            for (; i < n; i++) sj[i] = dot_f32(q, krow[i], D);
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
            accumulate_rows(acc + j * D, sj, vrow, n, D);
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

    t.scratch_floats = attend_scratch_floats(t.H / t.KVH, t.D);
    t.scratch = simd_scratch(ctx, t.scratch_floats * sizeof(float) * (size_t)ctx->n_threads);
    if (!t.scratch) return VT_ERR_NOMEM;
    const int64_t items = (T + QUERY_TOKENS - 1) / QUERY_TOKENS * t.KVH;
    if (items == 1)
        attention_items(&t, 0, 1, 0);
    else
        simd_dynamic_for(ctx, items, 1, attention_items, &t); /* later tokens cost more: claimed one by one */
    return VT_OK;
}
