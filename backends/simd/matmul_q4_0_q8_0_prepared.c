/* matmul_q4_0_q8_0_prepared.c — Q4_0 and Q8_0 weights (blocks of 32, one
 * f16 scale each) in simd's own layout, made once at engine creation (see
 * prepare.c), and the matmul that reads it. The two share the layout's
 * shape, the tiles and the drivers; only the inner product of a 4-value
 * column differs, so they live in one file.
 *
 * Why a layout: in the file's layout one 32-byte activation load feeds one
 * weight row, every block ends in its own int -> float conversion and FMA
 * per row, and a decode row ends in a horizontal sum. Here the rows are
 * interleaved in groups of 8 per block: a 4-byte activation broadcast feeds
 * 8 weight rows in one vpmaddubsw, the 8 32-bit lanes of the result are the
 * 8 rows, and one conversion + FMA per block serves the 8 rows. The 8 rows'
 * scales are stored together (one f16 -> f32 conversion for 8). The bytes per
 * row are the file's: Q4_0 144 bytes per 8 rows and block (18 per row, as the
 * file), Q8_0 272 (34 per row, as the file), so decode, which streams the
 * weights once, reads no more than before.
 *
 * The products, per block of 32 and 8 rows:
 *   Q4_0 (w = d (q - 8), q in 0..15): vpmaddubsw of the unsigned nibbles
 *        against the signed activations, 8 of them summed in int16
 *        (8 * 2 * 15 * 127 = 30480 < 2^15), then sumi = sum q x - 8 sum x,
 *        the activation block's sum coming with the activations (isums).
 *   Q8_0 (signed w): vpmaddubsw wants one unsigned operand, so the weights'
 *        signs move onto the activations, |w| * sign(w) x (|w| <= 128,
 *        |x| <= 127: a pair sum 2 * 128 * 127 = 32512 fits int16, two do
 *        not, so each is widened to int32 at once).
 * Then, per (weight row, activation row), in every tile (decode, a few rows,
 * prefill) the same operations in the same order, so a row's result never
 * depends on M or on which tile ran it (batch invariance):
 *   per block b: acc = acc + (dw * dx) * float(sumi)     (one FMA)
 *   result = acc after the last block. */
#include <string.h>

#include "prepared_groups.h"
#include "simd.h"
#include "simd_vec.h"

#define GROUP 8 /* weight rows interleaved per group */

/* One block of 32 values of GROUP rows. */
typedef struct q4_0_gblock {
    vt_fp16_t d[GROUP];
    uint8_t qs[4][GROUP * 4]; /* [h][row * 4 + t]: low nibble value 4h + t, high nibble value 16 + 4h + t */
} q4_0_gblock;

typedef struct q8_0_gblock {
    vt_fp16_t d[GROUP];
    int8_t qs[8][GROUP * 4]; /* [h][row * 4 + t]: value 4h + t */
} q8_0_gblock;

_Static_assert(sizeof(q4_0_gblock) == GROUP * sizeof(vt_block_q4_0), "prepared q4_0 keeps the file's bytes per row");
_Static_assert(sizeof(q8_0_gblock) == GROUP * sizeof(vt_block_q8_0), "prepared q8_0 keeps the file's bytes per row");

static int64_t n_groups(int64_t N) { return (N + GROUP - 1) / GROUP; }

size_t simd_q4_0_prepared_size(int64_t K, int64_t N) { return (size_t)(n_groups(N) * (K / 32)) * sizeof(q4_0_gblock); }
size_t simd_q8_0_prepared_size(int64_t K, int64_t N) { return (size_t)(n_groups(N) * (K / 32)) * sizeof(q8_0_gblock); }

int64_t simd_q4_0_prepared_units(int64_t N) { return n_groups(N); }
int64_t simd_q8_0_prepared_units(int64_t N) { return n_groups(N); }

void simd_q4_0_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 32;
    const vt_block_q4_0 *rows = src;
    q4_0_gblock *out = dst;
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            q4_0_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: d = 0, so their products are 0 */
            for (int r = 0; r < GROUP; r++) {
                const int64_t n = g * GROUP + r;
                if (n >= N) break;
                const vt_block_q4_0 *blk = &rows[n * nb + b];
                o->d[r] = blk->d;
                /* the file's byte l holds value l (low nibble) and 16 + l
                 * (high): the same pairing, 4 bytes per h */
                for (int h = 0; h < 4; h++) memcpy(&o->qs[h][r * 4], blk->qs + 4 * h, 4);
            }
        }
}

void simd_q8_0_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 32;
    const vt_block_q8_0 *rows = src;
    q8_0_gblock *out = dst;
    for (int64_t g = u0; g < u1; g++)
        for (int64_t b = 0; b < nb; b++) {
            q8_0_gblock *o = &out[g * nb + b];
            memset(o, 0, sizeof *o); /* rows past N: zero weights, d = 0 */
            for (int r = 0; r < GROUP; r++) {
                const int64_t n = g * GROUP + r;
                if (n >= N) break;
                const vt_block_q8_0 *blk = &rows[n * nb + b];
                o->d[r] = blk->d;
                for (int h = 0; h < 8; h++) memcpy(&o->qs[h][r * 4], blk->qs + 4 * h, 4);
            }
        }
}

/* Row n of a prepared copy as K f32, equal bit for bit to the host's
 * dequantization of the file's row (q * d, (q - 8) * d): GET_ROWS on a
 * prepared table, a tied embedding read by the output matmul too. */
void simd_q4_0_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst) {
    (void)N;
    const int64_t nb = K / 32;
    const q4_0_gblock *g = (const q4_0_gblock *)w + (n / GROUP) * nb;
    const int r = (int)(n % GROUP);
    for (int64_t b = 0; b < nb; b++) {
        const float d = vt_fp16_to_f32(g[b].d[r]);
        for (int h = 0; h < 4; h++)
            for (int t = 0; t < 4; t++) {
                const uint8_t q = g[b].qs[h][r * 4 + t];
                dst[b * 32 + 4 * h + t] = (float)((q & 0x0F) - 8) * d;
                dst[b * 32 + 16 + 4 * h + t] = (float)((q >> 4) - 8) * d;
            }
    }
}

void simd_q8_0_prepared_row(const void *w, int64_t K, int64_t N, int64_t n, float *dst) {
    (void)N;
    const int64_t nb = K / 32;
    const q8_0_gblock *g = (const q8_0_gblock *)w + (n / GROUP) * nb;
    const int r = (int)(n % GROUP);
    for (int64_t b = 0; b < nb; b++) {
        const float d = vt_fp16_to_f32(g[b].d[r]);
        for (int h = 0; h < 8; h++)
            for (int t = 0; t < 4; t++) dst[b * 32 + 4 * h + t] = (float)g[b].qs[h][r * 4 + t] * d;
    }
}

/* The 4 activation bytes at p, in every 32-bit lane. */
SIMD_INLINE __m256i broadcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* res[g * R + r] lane i = weight row i of group wg[g] . activation row m0 + r,
 * for g < NG, r < R (NG, R and q8 constants at each call site). `stream`:
 * the groups come from memory once (decode), so prefetch ahead. */
SIMD_INLINE void tile(const void *const *wg, int NG, const simd_act *x, int64_t m0, int R, int q8, int stream,
                      __m256 *res) {
    const int64_t K = x->K, nb = K / 32;
    const size_t gbytes = q8 ? sizeof(q8_0_gblock) : sizeof(q4_0_gblock);
    const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    __m256 acc[2][4];
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) acc[g][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *w[2];
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            w[g] = (const uint8_t *)wg[g] + (size_t)b * gbytes;
            if (stream) simd_prefetch_ahead(w[g], (int)gbytes);
        }
        __m256i sumi[2][4];
        if (q8) {
            SIMD_UNROLL
            for (int g = 0; g < NG; g++)
                SIMD_UNROLL
                for (int r = 0; r < R; r++) sumi[g][r] = _mm256_setzero_si256();
            SIMD_UNROLL
            for (int h = 0; h < 8; h++) {
                __m256i p[2], a[2];
                SIMD_UNROLL
                for (int g = 0; g < NG; g++) {
                    p[g] = _mm256_loadu_si256((const __m256i *)((const q8_0_gblock *)w[g])->qs[h]);
                    a[g] = _mm256_sign_epi8(p[g], p[g]);
                }
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const __m256i xb = broadcast4(x->qs + (m0 + r) * K + b * 32 + 4 * h);
                    SIMD_UNROLL
                    for (int g = 0; g < NG; g++) {
                        const __m256i pr = _mm256_maddubs_epi16(a[g], _mm256_sign_epi8(xb, p[g]));
                        sumi[g][r] = _mm256_add_epi32(sumi[g][r], _mm256_madd_epi16(pr, ones));
                        SIMD_KEEP(sumi[g][r]);
                    }
                }
            }
        } else {
            __m256i s16[2][4];
            SIMD_UNROLL
            for (int g = 0; g < NG; g++)
                SIMD_UNROLL
                for (int r = 0; r < R; r++) s16[g][r] = _mm256_setzero_si256();
            SIMD_UNROLL
            for (int h = 0; h < 4; h++) {
                __m256i lo[2], hi[2];
                SIMD_UNROLL
                for (int g = 0; g < NG; g++) {
                    const __m256i p = _mm256_loadu_si256((const __m256i *)((const q4_0_gblock *)w[g])->qs[h]);
                    lo[g] = _mm256_and_si256(p, low4);
                    hi[g] = _mm256_and_si256(_mm256_srli_epi16(p, 4), low4);
                }
                SIMD_UNROLL
                for (int r = 0; r < R; r++) {
                    const int8_t *xq = x->qs + (m0 + r) * K + b * 32 + 4 * h;
                    const __m256i xl = broadcast4(xq), xh = broadcast4(xq + 16);
                    SIMD_UNROLL
                    for (int g = 0; g < NG; g++) {
                        s16[g][r] = _mm256_add_epi16(
                            s16[g][r], _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], xl), _mm256_maddubs_epi16(hi[g], xh)));
                        SIMD_KEEP(s16[g][r]);
                    }
                }
            }
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                /* 8 sum x of the activation block: the weights' offset of 8 */
                const __m256i off = _mm256_set1_epi32(8 * (int32_t)x->isums[(m0 + r) * nb + b]);
                SIMD_UNROLL
                for (int g = 0; g < NG; g++) sumi[g][r] = _mm256_sub_epi32(_mm256_madd_epi16(s16[g][r], ones), off);
            }
        }
        SIMD_UNROLL
        for (int g = 0; g < NG; g++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w[g])); /* d[] leads both blocks */
            SIMD_UNROLL
            for (int r = 0; r < R; r++) {
                const __m256 s = _mm256_mul_ps(dw, _mm256_set1_ps(x->d[(m0 + r) * nb + b]));
                acc[g][r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sumi[g][r]), acc[g][r]);
                SIMD_KEEP(acc[g][r]);
            }
        }
    }
    SIMD_UNROLL
    for (int g = 0; g < NG; g++)
        SIMD_UNROLL
        for (int r = 0; r < R; r++) res[g * R + r] = acc[g][r];
}

/* The layouts' tiles for the shared walk (prepared_groups.c); the switch
 * gives the inlined tile constant R and stream, q8 picks the layout. */
SIMD_INLINE void rows_of(const simd_group_job *j, int q8, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    const void *g[1] = {wg};
#define TILE_R(n) (stream ? tile(g, 1, &j->act, m0, n, q8, 1, res) : tile(g, 1, &j->act, m0, n, q8, 0, res))
    switch (R) {
    case 1: TILE_R(1); break;
    case 2: TILE_R(2); break;
    case 3: TILE_R(3); break;
    default: TILE_R(4); break;
    }
#undef TILE_R
}

static void rows_q4_0(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    rows_of(j, 0, wg, m0, R, stream, res);
}

static void rows_q8_0(const simd_group_job *j, const uint8_t *wg, int64_t m0, int R, int stream, __m256 *res) {
    rows_of(j, 1, wg, m0, R, stream, res);
}

static void pair_q4_0(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    const void *g[2] = {wg0, wg1};
    tile(g, 2, &j->act, 0, 1, 0, 1, res);
}

static void pair_q8_0(const simd_group_job *j, const uint8_t *wg0, const uint8_t *wg1, __m256 *res) {
    const void *g[2] = {wg0, wg1};
    tile(g, 2, &j->act, 0, 1, 1, 1, res);
}

/* Q4_0 needs each activation block's sum for its offset of 8 */
static const simd_group_layout q4_0_layout = {
    .act_kind = SIMD_ACT_Q8_0I, .block_len = 32, .block_bytes = sizeof(q4_0_gblock), .rows = rows_q4_0,
    .pair = pair_q4_0};
static const simd_group_layout q8_0_layout = {
    .act_kind = SIMD_ACT_Q8_0, .block_len = 32, .block_bytes = sizeof(q8_0_gblock), .rows = rows_q8_0,
    .pair = pair_q8_0};

vt_status simd_q4_0_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    return simd_group_matmul(ctx, node, &q4_0_layout);
}

const simd_group_layout *simd_q4_0_group_layout(const simd_ctx *ctx) {
    (void)ctx;
    return &q4_0_layout;
}

vt_status simd_q8_0_prepared_matmul(simd_ctx *ctx, const vt_node *node) {
    return simd_group_matmul(ctx, node, &q8_0_layout);
}

const simd_group_layout *simd_q8_0_group_layout(const simd_ctx *ctx) {
    (void)ctx;
    return &q8_0_layout;
}
