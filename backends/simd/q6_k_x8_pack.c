/* q6_k_x8_pack.c — the file's Q6_K rows to and from the 8-row interleaved
 * layout of q6_k_x8.h: the repacking run once per tensor at engine creation
 * (prepare.c spreads the groups of rows over the threads) and the single-row
 * decoding get_rows uses on a prepared embedding table. */
#include <string.h>

#include "q6_k_x8.h"
#include "simd_vec.h"
#include "vt/vt_quant.h"

/* Write row r of record o from the file's block b. The file keeps, per
 * half h of 128 values and l < 32, value 32 k + l as the low nibble of
 * ql[l] (k = 0) or ql[32 + l] (k = 1), the high nibble of ql[l] (k = 2) or
 * ql[32 + l] (k = 3), with bits 2k..2k+1 of qh[l] above it. Unpacked 32 at
 * a time (one register: sub-blocks 2c and 2c+1 in its two 128-bit lanes),
 * the fourth run of 4 values of each sub-block is copied over the other
 * three (pshufb) and its bits 2k..2k+1 moved to bits 6-7 of run k; run k's
 * 4 bytes of each sub-block are then the 32-bit word the record keeps for
 * row r. */
static void pack_row(const vt_block_q6_k *b, q6_k_x8 *o, int r) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), top2 = _mm256_set1_epi8((char)0xC0);
    const __m256i fourth = _mm256_setr_epi8(12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14,
                                            15, 12, 13, 14, 15, 12, 13, 14, 15, 12, 13, 14, 15);
    o->d[r] = vt_fp16_to_f32(b->d);
    for (int s = 0; s < 16; s++) o->scales[s][r] = b->scales[s];
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        __m256i v[4];
        v[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
        v[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
        v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
        v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                               _mm256_srli_epi16(_mm256_and_si256(qh, top2), 2));
        for (int c = 0; c < 4; c++) {
            const int s = 8 * h + 2 * c; /* sub-blocks s (low lane) and s + 1 (high lane) */
            const __m256i t = _mm256_shuffle_epi8(v[c], fourth);
            for (int k = 0; k < 3; k++) {
                /* bits 2k..2k+1 of the fourth run to bits 6-7 (16-bit shift:
                 * what crosses from the lower byte is masked off) */
                const __m256i hi = _mm256_and_si256(
                    k == 0 ? _mm256_slli_epi16(t, 6) : k == 1 ? _mm256_slli_epi16(t, 4) : _mm256_slli_epi16(t, 2), top2);
                SIMD_ALIGNED uint32_t words[8];
                _mm256_store_si256((__m256i *)words, _mm256_or_si256(v[c], hi));
                memcpy(&o->qs[s][k][4 * r], &words[k], 4);
                memcpy(&o->qs[s + 1][k][4 * r], &words[4 + k], 4);
            }
        }
    }
}

size_t simd_q6_k_prepared_size(int64_t K, int64_t N) {
    return (size_t)simd_q6_k_prepared_units(N) * (size_t)(K / 256) * sizeof(q6_k_x8);
}

int64_t simd_q6_k_prepared_units(int64_t N) { return (N + Q6K_X8_ROWS - 1) / Q6K_X8_ROWS; }

void simd_q6_k_prepare(const void *src, int64_t K, int64_t N, void *dst, int64_t u0, int64_t u1) {
    const int64_t nb = K / 256;
    for (int64_t g = u0; g < u1; g++) {
        q6_k_x8 *out = (q6_k_x8 *)dst + g * nb;
        if ((g + 1) * Q6K_X8_ROWS > N) memset(out, 0, (size_t)nb * sizeof *out); /* padding rows stay zero */
        for (int64_t b = 0; b < nb; b++)
            for (int r = 0; r < Q6K_X8_ROWS && g * Q6K_X8_ROWS + r < N; r++)
                pack_row((const vt_block_q6_k *)src + (g * Q6K_X8_ROWS + r) * nb + b, out + b, r);
    }
}

void simd_q6_k_prepared_row(const void *copy, int64_t K, int64_t N, int64_t n, float *dst) {
    (void)N;
    const q6_k_x8 *w = copy;
    const int64_t nb = K / 256;
    const int r = (int)(n % Q6K_X8_ROWS);
    const q6_k_x8 *g = w + (n / Q6K_X8_ROWS) * nb;
    for (int64_t b = 0; b < nb; b++) {
        const q6_k_x8 *o = g + b;
        float *y = dst + b * 256;
        for (int s = 0; s < 16; s++) {
            /* the host's order: d * scale first, then times (q - 32) */
            const float ds = o->d[r] * (float)o->scales[s][r];
            for (int j = 0; j < 4; j++) {
                const uint8_t *p0 = &o->qs[s][0][4 * r + j], *p1 = &o->qs[s][1][4 * r + j],
                              *p2 = &o->qs[s][2][4 * r + j];
                const int top = (*p0 >> 6) | ((*p1 >> 6) << 2) | ((*p2 >> 6) << 4);
                y[16 * s + j] = ds * (float)((*p0 & 63) - 32);
                y[16 * s + 4 + j] = ds * (float)((*p1 & 63) - 32);
                y[16 * s + 8 + j] = ds * (float)((*p2 & 63) - 32);
                y[16 * s + 12 + j] = ds * (float)(top - 32);
            }
        }
    }
}
