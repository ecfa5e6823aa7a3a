/* rope.c — rotary position embedding, pairs rotated by theta_i = pos *
 * freq_scale * freq_base^(-2i/n_rot) / f[i], i < n_rot/2 (f: the node's
 * frequency factors, src2, when it has them; else 1):
 *   NORM (llama): pairs (2i, 2i+1);  NEOX (qwen): pairs (i, i + n_rot/2).
 * (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos); values past n_rot are copied.
 * The angles are computed once per token, in double (the rounding of a long
 * product of powers would otherwise grow with the position), into cos/sin
 * tables that every head of the token is rotated with, 8 values at a time.
 * The tables stay in the context: the next call with the same positions and
 * frequencies (every layer's q and k of one step) reuses them, the same
 * values it would compute. */
#include <math.h>

#include "simd.h"
#include "simd_vec.h"

#include <string.h>

typedef struct rope_task {
    const float *x;      /* [T][heads][D] */
    const int32_t *pos;  /* [T] */
    void *y;             /* [T][heads][D] of y_dtype */
    int32_t y_dtype;
    int64_t D, heads;
    vt_rope_params p;
    const double *freq;  /* [n_rot / 2]: freq_base^(-2i/n_rot) / f[i], the same for every token */
    float *cos_sin;      /* [T][2 * n_rot]: each token's cos_t, then its sin_t */
} rope_task;

/* The tables of tokens [begin, end):
 * NORM: cos_t[2i] = cos_t[2i+1] = cos theta_i, sin_t[2i] = -sin, sin_t[2i+1] = +sin
 * NEOX: cos_t[i] = cos theta_i, sin_t[i] = sin theta_i (i < half) */
static void fill_tables(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const rope_task *t = arg;
    const int64_t n_rot = t->p.n_rot, half = n_rot / 2;
    const int neox = t->p.mode == VT_ROPE_NEOX;
    for (int64_t tok = begin; tok < end; tok++) {
        float *cos_t = t->cos_sin + tok * 2 * n_rot, *sin_t = cos_t + n_rot;
        const double pos = (double)t->pos[tok] * (double)t->p.freq_scale;
        for (int64_t i = 0; i < half; i++) {
            const double theta = pos * t->freq[i];
            double sd, cd;
            sincos(theta, &sd, &cd);
            const float c = (float)cd, s = (float)sd;
            if (neox) {
                cos_t[i] = c, sin_t[i] = s;
            } else {
                cos_t[2 * i] = cos_t[2 * i + 1] = c;
                sin_t[2 * i] = -s, sin_t[2 * i + 1] = s;
            }
        }
    }
}

static void rope_tokens(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread;
    const rope_task *t = arg;
    const int64_t D = t->D, n_rot = t->p.n_rot, half = n_rot / 2;
    const size_t ys = simd_float_size(t->y_dtype);
    const int neox = t->p.mode == VT_ROPE_NEOX;
    for (int64_t tok = begin; tok < end; tok++) {
        const float *cos_t = t->cos_sin + tok * 2 * n_rot, *sin_t = cos_t + n_rot;
        for (int64_t h = 0; h < t->heads; h++) {
            const float *x = t->x + (tok * t->heads + h) * D;
            void *y = (uint8_t *)t->y + (size_t)((tok * t->heads + h) * D) * ys;
            int64_t i = 0;
            if (neox) {
                for (; i + 8 <= half; i += 8) {
                    const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + half);
                    const __m256 c = _mm256_loadu_ps(cos_t + i), s = _mm256_loadu_ps(sin_t + i);
                    simd_store8(t->y_dtype, y, i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
                    simd_store8(t->y_dtype, y, i + half, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
                }
                for (; i < half; i++) {
                    const float x0 = x[i], x1 = x[i + half];
                    simd_store1(t->y_dtype, y, i, x0 * cos_t[i] - x1 * sin_t[i]);
                    simd_store1(t->y_dtype, y, i + half, x0 * sin_t[i] + x1 * cos_t[i]);
                }
            } else {
                for (; i + 8 <= n_rot; i += 8) {
                    const __m256 v = _mm256_loadu_ps(x + i);
                    const __m256 swapped = _mm256_permute_ps(v, 0xB1); /* (x1, x0) per pair */
                    simd_store8(t->y_dtype, y, i,
                                _mm256_fmadd_ps(v, _mm256_loadu_ps(cos_t + i),
                                                _mm256_mul_ps(swapped, _mm256_loadu_ps(sin_t + i))));
                }
                for (; i < n_rot; i += 2) {
                    const float x0 = x[i], x1 = x[i + 1];
                    simd_store1(t->y_dtype, y, i, x0 * cos_t[i] + x1 * sin_t[i]);
                    simd_store1(t->y_dtype, y, i + 1, x1 * cos_t[i + 1] + x0 * sin_t[i + 1]);
                }
            }
            for (i = n_rot; i < D; i++) simd_store1(t->y_dtype, y, i, x[i]);
        }
    }
}

void simd_rope_tables_free(simd_ctx *ctx) {
    simd_rope_tables *r = &ctx->rope;
    ctx->host->free(r->pos);
    ctx->host->free(r->factors);
    ctx->host->free(r->cos_sin);
    memset(r, 0, sizeof *r);
}

/* Whether the cached tables are this call's: same positions, frequencies
 * and layout (factors compared by value: a test may reuse an address). */
static bool tables_match(const simd_rope_tables *r, const vt_rope_params *p, const int32_t *pos, int64_t T,
                         const float *factors) {
    return r->valid && r->n_tokens == T && r->n_rot == p->n_rot && r->mode == p->mode &&
           r->freq_base == p->freq_base && r->freq_scale == p->freq_scale && r->has_factors == (factors != NULL) &&
           (!factors || memcmp(r->factors, factors, (size_t)(p->n_rot / 2) * sizeof *factors) == 0) &&
           memcmp(r->pos, pos, (size_t)T * sizeof *pos) == 0;
}

/* Room in ctx->rope for T tokens of n_rot; false (tables dropped) when the
 * host cannot allocate it. */
static bool reserve_tables(simd_ctx *ctx, int64_t T, int64_t n_rot) {
    simd_rope_tables *r = &ctx->rope;
    if (T <= r->cap_tokens && n_rot <= r->cap_rot) return true;
    const int64_t cap_t = T > r->cap_tokens ? T : r->cap_tokens, cap_r = n_rot > r->cap_rot ? n_rot : r->cap_rot;
    simd_rope_tables_free(ctx);
    r->pos = ctx->host->alloc((size_t)cap_t * sizeof *r->pos, SIMD_ALIGN);
    r->factors = ctx->host->alloc((size_t)cap_r / 2 * sizeof *r->factors + sizeof(float), SIMD_ALIGN);
    r->cos_sin = ctx->host->alloc((size_t)cap_t * 2 * (size_t)cap_r * sizeof *r->cos_sin, SIMD_ALIGN);
    if (!r->pos || !r->factors || !r->cos_sin) {
        simd_rope_tables_free(ctx);
        return false;
    }
    r->cap_tokens = cap_t, r->cap_rot = cap_r;
    return true;
}

vt_status simd_rope(void *opaque, const vt_node *node) {
    simd_ctx *ctx = opaque;
    const vt_tensor *x = &node->src[0];
    rope_task t = {x->data, node->src[1].data, node->dst.data, node->dst.dtype, x->ne[0], x->ne[1],
                   node->params.rope, NULL, NULL};
    const int64_t T = x->ne[2];
    if (t.p.n_rot <= 0 || t.p.n_rot % 2 || t.p.n_rot > t.D) return VT_ERR_INVALID;
    if (T <= 0) return VT_OK;
    const int64_t half = t.p.n_rot / 2;
    const float *factors = node->n_src > 2 ? node->src[2].data : NULL;
    simd_rope_tables *r = &ctx->rope;
    if (!tables_match(r, &t.p, t.pos, T, factors)) {
        r->valid = false;
        if (!reserve_tables(ctx, T, t.p.n_rot)) return VT_ERR_NOMEM;
        double *freq = simd_scratch(ctx, (size_t)half * sizeof(double));
        if (!freq) return VT_ERR_NOMEM;
        /* once per call, not once per token (a pow per pair and token was
         * most of prefill's rope time); the same doubles, so the same angles */
        for (int64_t i = 0; i < half; i++) {
            freq[i] = pow((double)t.p.freq_base, -2.0 * (double)i / (double)t.p.n_rot);
            if (factors) freq[i] /= (double)factors[i];
        }
        t.freq = freq;
        t.cos_sin = r->cos_sin;
        if (T == 1)
            fill_tables(&t, 0, 1, 0);
        else
            vt_host_parallel_for(ctx->host, T, 1, fill_tables, &t);
        memcpy(r->pos, t.pos, (size_t)T * sizeof *r->pos);
        if (factors) memcpy(r->factors, factors, (size_t)half * sizeof *factors);
        r->n_tokens = T, r->n_rot = t.p.n_rot, r->mode = t.p.mode;
        r->freq_base = t.p.freq_base, r->freq_scale = t.p.freq_scale, r->has_factors = factors != NULL;
        r->valid = true;
    }
    t.cos_sin = r->cos_sin;
    if (T == 1)
        rope_tokens(&t, 0, 1, 0);
    else
        vt_host_parallel_for(ctx->host, T, 1, rope_tokens, &t);
    return VT_OK;
}
