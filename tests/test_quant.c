/* test_quant.c — dtype facts, exact dequantization, fp16/bf16 conversions,
 * quantizer error bounds, and byte identity with llama.cpp's quantizer. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "util.h"
#include "vt/vt_quant.h"

/* ------------------------------------------------------------------ */
/* dtype facts                                                         */
/* ------------------------------------------------------------------ */

static void test_dtype_names_round_trip(void) {
    static const struct {
        int32_t dtype;
        const char *name;
        int64_t block_length;
        size_t block_bytes;
    } facts[] = {
        {VT_F32, "f32", 1, 4},       {VT_F16, "f16", 1, 2},         {VT_BF16, "bf16", 1, 2},
        {VT_Q8_0, "q8_0", 32, 34},   {VT_Q4_0, "q4_0", 32, 18},     {VT_Q4_K, "q4_k", 256, 144},
        {VT_Q5_K, "q5_k", 256, 176}, {VT_Q6_K, "q6_k", 256, 210},   {VT_I32, "i32", 1, 4},
        {VT_I64, "i64", 1, 8},
    };
    for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
        CU_ASSERT_TRUE(vt_dtype_is_valid(facts[i].dtype));
        CU_ASSERT_STRING_EQUAL(vt_dtype_name(facts[i].dtype), facts[i].name);
        CU_ASSERT_EQUAL(vt_dtype_from_name(facts[i].name), facts[i].dtype);
        CU_ASSERT_EQUAL(vt_dtype_block_length(facts[i].dtype), facts[i].block_length);
        CU_ASSERT_EQUAL(vt_dtype_block_bytes(facts[i].dtype), facts[i].block_bytes);
    }
    CU_ASSERT_EQUAL(vt_dtype_from_name("Q4_K"), VT_Q4_K); /* case-insensitive */
    CU_ASSERT_EQUAL(vt_dtype_from_name("BF16"), VT_BF16);
    CU_ASSERT_EQUAL(vt_dtype_from_name("q5_0"), -1);
    CU_ASSERT_EQUAL(vt_dtype_from_name(""), -1);
    CU_ASSERT_EQUAL(vt_dtype_from_name(NULL), -1);
}

static void test_dtype_classes(void) {
    CU_ASSERT_TRUE(vt_dtype_is_float(VT_F32));
    CU_ASSERT_TRUE(vt_dtype_is_float(VT_F16));
    CU_ASSERT_TRUE(vt_dtype_is_float(VT_BF16));
    CU_ASSERT_FALSE(vt_dtype_is_float(VT_Q8_0));
    CU_ASSERT_FALSE(vt_dtype_is_float(VT_I32));
    CU_ASSERT_TRUE(vt_dtype_is_weight(VT_Q6_K));
    CU_ASSERT_TRUE(vt_dtype_is_weight(VT_F16));
    CU_ASSERT_FALSE(vt_dtype_is_weight(VT_I64));
    /* ids GGML defines but vt does not accept, and out-of-range ids */
    const int32_t invalid[] = {-1, 3, 6, 7, 9, 10, 11, 15, 16, 25, 28, 29, VT_DTYPE_COUNT, 1000};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        CU_ASSERT_FALSE(vt_dtype_is_valid(invalid[i]));
        CU_ASSERT_FALSE(vt_dtype_is_weight(invalid[i]));
        CU_ASSERT_FALSE(vt_dtype_is_float(invalid[i]));
        CU_ASSERT_STRING_EQUAL(vt_dtype_name(invalid[i]), "?");
        CU_ASSERT_EQUAL(vt_dtype_block_length(invalid[i]), 0);
        CU_ASSERT_EQUAL(vt_dtype_block_bytes(invalid[i]), 0);
        CU_ASSERT_EQUAL(vt_row_size(invalid[i], 256), 0);
    }
}

static void test_row_size(void) {
    CU_ASSERT_EQUAL(vt_row_size(VT_F32, 7), 28);
    CU_ASSERT_EQUAL(vt_row_size(VT_I64, 3), 24);
    CU_ASSERT_EQUAL(vt_row_size(VT_Q8_0, 64), 68);
    CU_ASSERT_EQUAL(vt_row_size(VT_Q4_0, 4096), 128 * 18);
    CU_ASSERT_EQUAL(vt_row_size(VT_Q4_K, 512), 288);
    CU_ASSERT_EQUAL(vt_row_size(VT_Q6_K, 768), 630);
    CU_ASSERT_EQUAL(vt_row_size(VT_Q5_K, 0), 0);
    /* partial blocks and negative counts are not rows */
    CU_ASSERT_EQUAL(vt_row_size(VT_Q8_0, 33), 0);
    CU_ASSERT_EQUAL(vt_row_size(VT_Q4_K, 128), 0);
    CU_ASSERT_EQUAL(vt_row_size(VT_F32, -1), 0);
}

static void test_conversion_rejects_bad_arguments(void) {
    float f[256] = {0};
    unsigned char buf[1024] = {0};
    CU_ASSERT_EQUAL(vt_to_f32(VT_Q8_0, buf, f, 31), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_to_f32(VT_Q4_K, buf, f, 32), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_to_f32(5, buf, f, 32), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_to_f32(VT_F32, buf, f, -4), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_to_f32(VT_F32, NULL, f, 4), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_from_f32(VT_Q6_K, f, buf, 100), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_from_f32(-3, f, buf, 4), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_from_f32(VT_F16, f, NULL, 4), VT_ERR_INVALID);
    CU_ASSERT_EQUAL(vt_to_f32(VT_Q4_K, buf, f, 0), VT_OK); /* nothing to do is fine */
}

/* ------------------------------------------------------------------ */
/* (a) dequantization of hand-built blocks                             */
/* ------------------------------------------------------------------ */

/* fp16 bit patterns of small exact values */
#define H_0_25 0x3400
#define H_0_5 0x3800
#define H_1 0x3C00
#define H_2 0x4000

static void test_dequant_plain_types(void) {
    const vt_fp16_t h[4] = {H_1, 0xC000 /* -2 */, 0x0001 /* 2^-24 */, 0x7C00 /* inf */};
    float f[4];
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_F16, h, f, 4), VT_OK);
    CU_ASSERT_EQUAL(f[0], 1.0f);
    CU_ASSERT_EQUAL(f[1], -2.0f);
    CU_ASSERT_EQUAL(f[2], ldexpf(1.0f, -24));
    CU_ASSERT_TRUE(isinf(f[3]) && f[3] > 0);

    const vt_bf16_t b[3] = {0x3F80 /* 1 */, 0xC2C8 /* -100 */, 0x0001 /* 2^-133 */};
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_BF16, b, f, 3), VT_OK);
    CU_ASSERT_EQUAL(f[0], 1.0f);
    CU_ASSERT_EQUAL(f[1], -100.0f);
    CU_ASSERT_EQUAL(f[2], ldexpf(1.0f, -133));

    const int32_t i32[3] = {-7, 0, 16777216};
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_I32, i32, f, 3), VT_OK);
    CU_ASSERT_EQUAL(f[0], -7.0f);
    CU_ASSERT_EQUAL(f[1], 0.0f);
    CU_ASSERT_EQUAL(f[2], 16777216.0f);
    const int64_t i64[2] = {-5, (int64_t)1 << 40};
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_I64, i64, f, 2), VT_OK);
    CU_ASSERT_EQUAL(f[0], -5.0f);
    CU_ASSERT_EQUAL(f[1], ldexpf(1.0f, 40));

    /* f32 -> i32/i64 truncates like a C cast and saturates */
    const float src[4] = {2.75f, -2.75f, 1e20f, NAN};
    int32_t o32[4];
    CU_ASSERT_EQUAL_FATAL(vt_from_f32(VT_I32, src, o32, 4), VT_OK);
    CU_ASSERT_EQUAL(o32[0], 2);
    CU_ASSERT_EQUAL(o32[1], -2);
    CU_ASSERT_EQUAL(o32[2], 2147483520); /* largest float below 2^31 */
    CU_ASSERT_EQUAL(o32[3], 0);
}

static void test_dequant_q8_0(void) {
    vt_block_q8_0 blk[2];
    memset(blk, 0, sizeof blk);
    blk[0].d = H_0_5;
    blk[0].qs[0] = 3;
    blk[0].qs[31] = -128;
    blk[1].d = 0xB800; /* -0.5 */
    blk[1].qs[5] = 127;
    float y[64];
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_Q8_0, blk, y, 64), VT_OK);
    CU_ASSERT_EQUAL(y[0], 1.5f);    /* 0.5 * 3 */
    CU_ASSERT_EQUAL(y[1], 0.0f);    /* 0.5 * 0 */
    CU_ASSERT_EQUAL(y[31], -64.0f); /* 0.5 * -128 */
    CU_ASSERT_EQUAL(y[37], -63.5f); /* -0.5 * 127 */
}

static void test_dequant_q4_0(void) {
    vt_block_q4_0 blk;
    memset(&blk, 0x88, sizeof blk); /* every quant 8: value 0 */
    blk.d = H_2;
    blk.qs[0] = 0xF3;  /* value 0 low nibble 3, value 16 high nibble 15 */
    blk.qs[15] = 0x80; /* value 15 low nibble 0, value 31 high nibble 8 */
    float y[32];
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_Q4_0, &blk, y, 32), VT_OK);
    CU_ASSERT_EQUAL(y[0], -10.0f);  /* 2 * (3 - 8) */
    CU_ASSERT_EQUAL(y[16], 14.0f);  /* 2 * (15 - 8) */
    CU_ASSERT_EQUAL(y[15], -16.0f); /* 2 * (0 - 8) */
    CU_ASSERT_EQUAL(y[31], 0.0f);   /* 2 * (8 - 8) */
    CU_ASSERT_EQUAL(y[7], 0.0f);
}

/* Scales shared by the Q4_K and Q5_K blocks below (d = 1, dmin = 0.5):
 *   sub-block 0: sc = scales[0] & 63 = 5, m = scales[4] & 63 = 3
 *   sub-block 1: sc = scales[1] & 63 = 7, m = scales[5] & 63 = 1
 *   sub-block 5: sc = (scales[9] & 15) | (scales[1] >> 6) << 4 = 10 | 16 = 26,
 *                m  = (scales[9] >> 4) | (scales[5] >> 6) << 4 = 2 | 32 = 34
 *   sub-block 4: scales[8] = 0 and the top bits of scales[0], scales[4] are 0: sc = m = 0 */
static void fill_k4_scales(uint8_t s[12]) {
    memset(s, 0, 12);
    s[0] = 5;
    s[4] = 3;
    s[1] = (1 << 6) | 7;
    s[5] = (2 << 6) | 1;
    s[9] = 0x2A;
}

static void test_dequant_q4_k(void) {
    vt_block_q4_k blk;
    memset(&blk, 0, sizeof blk);
    blk.d = H_1;
    blk.dmin = H_0_5;
    fill_k4_scales(blk.scales);
    blk.qs[0] = 0x0C;      /* sub-block 0 value 0: 12; sub-block 1 value 0: 0 */
    blk.qs[64 + 3] = 0x90; /* sub-block 4 value 3: 0; sub-block 5 value 3: 9 */
    float y[256];
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_Q4_K, &blk, y, 256), VT_OK);
    CU_ASSERT_EQUAL(y[0], 58.5f);       /* 1*5*12 - 0.5*3 */
    CU_ASSERT_EQUAL(y[1], -1.5f);       /* 1*5*0 - 0.5*3 */
    CU_ASSERT_EQUAL(y[32], -0.5f);      /* 1*7*0 - 0.5*1 */
    CU_ASSERT_EQUAL(y[128 + 3], 0.0f);  /* sub-block 4: 0*0 - 0.5*0 */
    CU_ASSERT_EQUAL(y[160 + 3], 217.0f); /* 1*26*9 - 0.5*34 */
    CU_ASSERT_EQUAL(y[160 + 4], -17.0f); /* 1*26*0 - 0.5*34 */
}

static void test_dequant_q5_k(void) {
    vt_block_q5_k blk;
    memset(&blk, 0, sizeof blk);
    blk.d = H_1;
    blk.dmin = H_0_5;
    fill_k4_scales(blk.scales);
    blk.qs[0] = 0x0C;
    blk.qs[64 + 3] = 0x90;
    blk.qh[0] = 1 << 0;  /* sub-block 0 value 0 gets +16 */
    blk.qh[3] = 1 << 5;  /* sub-block 5 value 3 gets +16 */
    blk.qh[7] = 1 << 1;  /* sub-block 1 value 7 gets +16 */
    float y[256];
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_Q5_K, &blk, y, 256), VT_OK);
    CU_ASSERT_EQUAL(y[0], 138.5f);       /* 1*5*(12+16) - 0.5*3 */
    CU_ASSERT_EQUAL(y[1], -1.5f);        /* 1*5*0 - 0.5*3 */
    CU_ASSERT_EQUAL(y[32 + 7], 111.5f);  /* 1*7*16 - 0.5*1 */
    CU_ASSERT_EQUAL(y[32], -0.5f);       /* 1*7*0 - 0.5*1 */
    CU_ASSERT_EQUAL(y[160 + 3], 633.0f); /* 1*26*(9+16) - 0.5*34 */
    CU_ASSERT_EQUAL(y[128 + 3], 0.0f);   /* sub-block 4 has sc = m = 0 */
}

static void test_dequant_q6_k(void) {
    vt_block_q6_k blk;
    memset(&blk, 0, sizeof blk);
    blk.d = H_0_25;
    /* value i: half h = i / 128, r = i % 128, k = r / 32, l = r % 32; scale index 8h + l/16 + 2k */
    blk.scales[0] = -3;
    blk.ql[0] = 0x05; /* value 0: low nibble of ql[0] = 5 */
    blk.qh[0] = 0x02; /* and bits 0-1 of qh[0] = 2: q = 5 | 2 << 4 = 37 */
    blk.scales[5] = -128;
    blk.ql[16] = 0x30; /* value 80 (k = 2, l = 16): high nibble of ql[16] = 3, qh bits 4-5 = 0: q = 3 */
    blk.scales[11] = 7;
    blk.ql[64 + 32 + 17] = 0x0F; /* value 177 (h = 1, k = 1, l = 17): low nibble of ql[113] = 15 */
    blk.qh[32 + 17] = 3 << 2;    /* bits 2-3 of qh[49] = 3: q = 15 | 3 << 4 = 63 */
    blk.scales[1] = 2;           /* value 16 (k = 0, l = 16): q = 0 */
    float y[256];
    CU_ASSERT_EQUAL_FATAL(vt_to_f32(VT_Q6_K, &blk, y, 256), VT_OK);
    CU_ASSERT_EQUAL(y[0], -3.75f);  /* 0.25 * -3 * (37 - 32) */
    CU_ASSERT_EQUAL(y[80], 928.0f); /* 0.25 * -128 * (3 - 32) */
    CU_ASSERT_EQUAL(y[177], 54.25f); /* 0.25 * 7 * (63 - 32) */
    CU_ASSERT_EQUAL(y[16], -16.0f);  /* 0.25 * 2 * (0 - 32) */
    CU_ASSERT_EQUAL(y[200], 0.0f);   /* scale 0 */
}

/* ------------------------------------------------------------------ */
/* (a') the AVX2 path of vt_to_f32 against the portable one            */
/* ------------------------------------------------------------------ */

/* Both paths convert the same bytes into buffers pre-filled with a sentinel;
 * the results, and the sentinel floats past the row, must be byte-equal. Rows
 * are odd numbers of whole blocks (so the 8-wide loops of F16/BF16 have
 * tails) at source addresses 0..3 bytes past an aligned one, written to a
 * destination that is aligned or one float off. Returns the cases that differ. */
#define PATH_GUARD 9
static int compare_paths(int32_t dtype, const unsigned char *bytes, int64_t n, const char *what) {
    const size_t row = vt_row_size(dtype, n);
    unsigned char *src = malloc(row + 3);
    float *out[2] = {malloc((size_t)(n + PATH_GUARD + 1) * sizeof(float)),
                     malloc((size_t)(n + PATH_GUARD + 1) * sizeof(float))};
    CU_ASSERT_FATAL(src && out[0] && out[1]);
    int bad = 0;
    for (int offset = 0; offset < 4; offset++) {
        memcpy(src + offset, bytes, row);
        float *dst[2];
        for (int p = 0; p < 2; p++) {
            dst[p] = out[p] + (offset & 1);
            memset(dst[p], 0xA5, (size_t)(n + PATH_GUARD) * sizeof(float));
        }
        CU_ASSERT_EQUAL(vt_to_f32_with(VT_TO_F32_SCALAR, dtype, src + offset, dst[0], n), VT_OK);
        CU_ASSERT_EQUAL(vt_to_f32_with(VT_TO_F32_AVX2, dtype, src + offset, dst[1], n), VT_OK);
        const bool same = memcmp(dst[0], dst[1], (size_t)(n + PATH_GUARD) * sizeof(float)) == 0;
        bool guard_kept = true;
        for (size_t i = 0; i < PATH_GUARD * sizeof(float); i++)
            guard_kept = guard_kept && ((const unsigned char *)(dst[1] + n))[i] == 0xA5;
        if (!same || !guard_kept) {
            if (!bad)
                fprintf(stderr, "\n  %s, %s, n=%lld, source offset %d: %s", vt_dtype_name(dtype), what,
                        (long long)n, offset, same ? "wrote past the row" : "avx2 differs from scalar");
            bad++;
        }
    }
    free(src);
    free(out[0]);
    free(out[1]);
    return bad;
}

/* xorshift64: deterministic, so failures reproduce. */
static uint64_t xorshift64(uint64_t *state) {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static uint64_t path_rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_bits(void) { return xorshift64(&path_rng); }

/* Every dtype, odd numbers of blocks, two kinds of content: random bytes
 * (every scale pattern, subnormal, infinite and NaN fp16 scales and F16
 * values among them, so NaN payloads must match too) and quantized rows of
 * magnitudes 2^-24 .. 2^15 (the scales real files hold, down to f16
 * subnormals). */
static void test_dequant_avx2_bit_identical(void) {
    if (vt_to_f32_best_path() != VT_TO_F32_AVX2) {
        unsigned char zero[256] = {0};
        float f[256];
        CU_ASSERT_EQUAL(vt_to_f32_with(VT_TO_F32_AVX2, VT_Q4_K, zero, f, 256), VT_ERR_UNSUPPORTED);
        vt_test_skip("this CPU lacks AVX2/F16C: vt_to_f32 runs the portable path only");
        return;
    }
    static const int64_t block_counts[] = {1, 3, 5, 7, 9, 17, 33};
    const int64_t max_n = 33 * VT_QK_K;
    unsigned char *bytes = malloc((size_t)max_n * sizeof(int64_t)); /* no dtype takes more per value */
    float *x = malloc((size_t)max_n * sizeof *x);
    CU_ASSERT_FATAL(bytes && x);
    int dtypes_seen = 0, bad = 0;
    for (int32_t dtype = 0; dtype < VT_DTYPE_COUNT; dtype++) {
        if (!vt_dtype_is_valid(dtype)) continue;
        dtypes_seen++;
        for (size_t c = 0; c < sizeof block_counts / sizeof block_counts[0]; c++) {
            const int64_t n = block_counts[c] * vt_dtype_block_length(dtype);
            const size_t row = vt_row_size(dtype, n);
            for (size_t i = 0; i < row; i++) bytes[i] = (unsigned char)(next_bits() >> 56);
            bad += compare_paths(dtype, bytes, n, "random bytes");
            if (dtype == VT_I32 || dtype == VT_I64) continue; /* no quantizer input to speak of */
            for (int64_t i = 0; i < n; i++) {
                const int scale = (int)(i / 32 % 40) - 24;
                x[i] = ldexpf((float)((double)(next_bits() >> 11) / 9007199254740992.0 - 0.5), scale);
            }
            CU_ASSERT_EQUAL_FATAL(vt_from_f32(dtype, x, bytes, n), VT_OK);
            bad += compare_paths(dtype, bytes, n, "quantized values");
        }
    }
    CU_ASSERT_EQUAL(dtypes_seen, 10);
    CU_ASSERT_EQUAL(bad, 0);

    /* Every F16 and BF16 pattern, in runs of 8 that mix infinities and
     * signalling NaNs with ordinary values. */
    vt_fp16_t *all = malloc(65536 * sizeof *all);
    CU_ASSERT_FATAL(all != NULL);
    for (uint32_t h = 0; h < 65536; h++) all[h] = (vt_fp16_t)(h * 40503u); /* odd multiplier: a permutation */
    CU_ASSERT_EQUAL(compare_paths(VT_F16, (const unsigned char *)all, 65536, "every pattern"), 0);
    CU_ASSERT_EQUAL(compare_paths(VT_BF16, (const unsigned char *)all, 65536, "every pattern"), 0);
    free(all);
    free(bytes);
    free(x);
}

/* vt_to_f32 (host->to_f32) runs the best path, and rejects what every path rejects. */
static void test_to_f32_runs_best_path(void) {
    vt_block_q4_k blk[3];
    for (size_t i = 0; i < sizeof blk; i++) ((unsigned char *)blk)[i] = (unsigned char)(i * 7 + 1);
    float a[768], b[768];
    CU_ASSERT_EQUAL(vt_to_f32(VT_Q4_K, blk, a, 768), VT_OK);
    CU_ASSERT_EQUAL(vt_to_f32_with(vt_to_f32_best_path(), VT_Q4_K, blk, b, 768), VT_OK);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    for (int p = VT_TO_F32_SCALAR; p <= VT_TO_F32_AVX2; p++) {
        if (p == VT_TO_F32_AVX2 && vt_to_f32_best_path() != VT_TO_F32_AVX2) continue;
        CU_ASSERT_EQUAL(vt_to_f32_with((vt_to_f32_path)p, VT_Q4_K, blk, a, 255), VT_ERR_INVALID);
        CU_ASSERT_EQUAL(vt_to_f32_with((vt_to_f32_path)p, VT_F16, NULL, a, 8), VT_ERR_INVALID);
        CU_ASSERT_EQUAL(vt_to_f32_with((vt_to_f32_path)p, VT_Q8_0, NULL, NULL, 0), VT_OK);
    }
    CU_ASSERT_EQUAL(vt_to_f32_with((vt_to_f32_path)7, VT_Q4_K, blk, a, 256), VT_ERR_INVALID);
}

/* ------------------------------------------------------------------ */
/* (b) fp16 / bf16 scalar conversions                                  */
/* ------------------------------------------------------------------ */

/* The IEEE binary16 value of h, computed independently of vt_quant.h. */
static double fp16_value(uint16_t h) {
    const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v;
    if (exp == 0) v = ldexp(mant, -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

static void test_fp16_every_pattern_round_trips(void) {
    int bad_value = 0, bad_trip = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = vt_fp16_to_f32((vt_fp16_t)h);
        const double want = fp16_value((uint16_t)h);
        const vt_fp16_t back = vt_f32_to_fp16(f);
        if (isnan(want)) {
            /* NaN stays NaN (any payload), with its sign */
            if (!isnan(f)) bad_value++;
            if ((back & 0x7C00) != 0x7C00 || (back & 0x3FF) == 0 || (back & 0x8000) != (h & 0x8000)) bad_trip++;
            continue;
        }
        if ((double)f != want || !signbit(f) != !signbit(want)) bad_value++; /* signbit is any non-zero */
        if (back != h) bad_trip++;
    }
    CU_ASSERT_EQUAL(bad_value, 0);
    CU_ASSERT_EQUAL(bad_trip, 0);

    /* the row API agrees with the scalar helpers */
    vt_fp16_t *all = malloc(65536 * sizeof *all), *again = malloc(65536 * sizeof *again);
    float *f = malloc(65536 * sizeof *f);
    CU_ASSERT_FATAL(all && again && f);
    for (uint32_t h = 0; h < 65536; h++) all[h] = (vt_fp16_t)h;
    CU_ASSERT_EQUAL(vt_to_f32(VT_F16, all, f, 65536), VT_OK);
    CU_ASSERT_EQUAL(vt_from_f32(VT_F16, f, again, 65536), VT_OK);
    int mismatches = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        if (!is_nan && again[h] != h) mismatches++;
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    free(all);
    free(again);
    free(f);
}

static void test_fp16_rounding(void) {
    /* ties go to the even neighbour */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(1.0f + ldexpf(1, -11)), 0x3C00);     /* between 0x3C00 and 0x3C01 */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(1.0f + 3 * ldexpf(1, -11)), 0x3C02); /* between 0x3C01 and 0x3C02 */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(-(1.0f + 3 * ldexpf(1, -11))), 0xBC02);
    /* just off a tie goes to the nearer one */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)), 0x3C01);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(1.0f + 3 * ldexpf(1, -11) - ldexpf(1, -20)), 0x3C01);
    /* a tie that carries into the exponent: 2047.5 is between 2047 (0x67FF) and 2048 (0x6800) */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(2047.5f), 0x6800);

    /* overflow: 65504 is the largest finite, 65520 (its tie with 2^16) rounds to inf */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(65504.0f), 0x7BFF);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(65519.996f), 0x7BFF);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(65520.0f), 0x7C00);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(1e10f), 0x7C00);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(-1e10f), 0xFC00);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(FLT_MAX), 0x7C00);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(INFINITY), 0x7C00);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(-INFINITY), 0xFC00);
    const vt_fp16_t nan = vt_f32_to_fp16(NAN);
    CU_ASSERT((nan & 0x7C00) == 0x7C00 && (nan & 0x3FF) != 0);

    /* subnormals: steps of 2^-24, ties to even, sign kept */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(ldexpf(1, -24)), 0x0001);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(ldexpf(1, -25)), 0x0000);     /* tie between 0 and 1 */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(3 * ldexpf(1, -25)), 0x0002); /* tie between 1 and 2 */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(ldexpf(1, -25) * 1.0001f), 0x0001);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(ldexpf(1, -26)), 0x0000);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(-ldexpf(1, -24)), 0x8001);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(1023 * ldexpf(1, -24)), 0x03FF);                 /* largest subnormal */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(ldexpf(1, -14) - ldexpf(1, -25)), 0x0400);       /* tie up to the smallest normal */
    CU_ASSERT_EQUAL(vt_f32_to_fp16(ldexpf(1, -14)), 0x0400);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(-0.0f), 0x8000);
    CU_ASSERT_EQUAL(vt_f32_to_fp16(FLT_MIN), 0x0000);
}

static void test_bf16_every_pattern_and_rounding(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = vt_bf16_to_f32((vt_bf16_t)h);
        const vt_bf16_t back = vt_f32_to_bf16(f);
        const bool is_nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F);
        if (is_nan) {
            if (!isnan(f) || (back & 0x7F80) != 0x7F80 || (back & 0x7F) == 0 || (back & 0x8000) != (h & 0x8000)) bad++;
        } else if (back != h || vt_f32_bits(f) != h << 16) {
            bad++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(vt_f32_to_bf16(1.0f + ldexpf(1, -8)), 0x3F80);     /* tie: to even */
    CU_ASSERT_EQUAL(vt_f32_to_bf16(1.0f + 3 * ldexpf(1, -8)), 0x3F82); /* tie: to even */
    CU_ASSERT_EQUAL(vt_f32_to_bf16(1.0f + ldexpf(1, -8) + ldexpf(1, -20)), 0x3F81);
    CU_ASSERT_EQUAL(vt_f32_to_bf16(FLT_MAX), 0x7F80); /* rounds past the largest finite bf16 */
    CU_ASSERT_EQUAL(vt_f32_to_bf16(-INFINITY), 0xFF80);
    CU_ASSERT_EQUAL(vt_f32_to_bf16(1.5f * ldexpf(1, -133)), 0x0002); /* subnormal tie between 0x0001 and 0x0002 */
    CU_ASSERT_EQUAL(vt_f32_to_bf16(ldexpf(1, -134)), 0x0000);        /* tie between 0 and 0x0001 */
    const vt_bf16_t nan = vt_f32_to_bf16(vt_f32_from_bits(0x7F800001u)); /* signalling NaN, payload only in low bits */
    CU_ASSERT((nan & 0x7F80) == 0x7F80 && (nan & 0x7F) != 0);
}

/* ------------------------------------------------------------------ */
/* (c) quantize -> dequantize error bounds                             */
/* ------------------------------------------------------------------ */

/* fp16 rounding error of a stored scale s: half an ulp, relative 2^-11 for
 * normal values, absolute 2^-25 (half the smallest subnormal) below 2^-14. */
static double fp16_error(double s) { return fmax(fabs(s) * ldexp(1, -11), ldexp(1, -25)); }

/* Largest |x - y| the format allows for one block x[len] (len = the dtype's
 * block length), from the format's own construction:
 *  - Q8_0: d = amax/127, q = round(x/d): half a step, plus d's fp16 rounding
 *    times |q| <= 127.
 *  - Q4_0: d = max/-8 and q - 8 = round(x/d) clamped to 7, so the value
 *    -max (x/d = +8) is off by a whole step: |d|, plus |q - 8| <= 8 times
 *    d's fp16 rounding.
 *  - Q4_K / Q5_K: per sub-block of 32, the plain min/max quantizer has levels
 *    0..nmax over [min(x,0), max(x)], step (max - min(x,0)) / nmax. Values are
 *    re-rounded against the stored scale and min (half a stored step), and
 *    the weighted fit may shrink the covered range so an extreme is clipped
 *    (the search stretches the step by at most (nmax+rmin)/nmax, 14/15 for
 *    Q4_K): allow one step in all. Measured: <= 0.7 of it on N(0,1) data and
 *    on the qwen3-tiny weights. fp16 rounding of d and dmin only shows where
 *    nothing is re-rounded (scale 0: a constant sub-block decodes as
 *    -dmin*m): add 63 fp16 errors of dmin = max_min/63.
 *  - Q6_K: per sub-block of 16, symmetric levels -32..31 of amax/32: half a
 *    step of rounding, up to one step where the chosen scale (tried over
 *    nmax +- 0.9) clips the extreme; the 8-bit sub-block scales are rounded
 *    to 1/128 of the super-block's largest. Allow one step of amax/32 plus
 *    amax/128 (measured: <= 0.45 of it). */
static double block_error_bound(int32_t dtype, const float *x) {
    switch (dtype) {
    case VT_Q8_0: {
        double amax = 0;
        for (int i = 0; i < 32; i++) amax = fmax(amax, fabs(x[i]));
        const double d = amax / 127;
        return 0.5 * d + 127 * fp16_error(d) + 1e-30;
    }
    case VT_Q4_0: {
        double amax = 0;
        for (int i = 0; i < 32; i++) amax = fmax(amax, fabs(x[i]));
        const double d = amax / 8;
        return d + 8 * fp16_error(d) + 1e-30;
    }
    case VT_Q4_K:
    case VT_Q5_K: {
        const int nmax = dtype == VT_Q4_K ? 15 : 31;
        double worst = 0, max_min = 0;
        for (int s = 0; s < 8; s++) {
            double lo = 0, hi = -INFINITY;
            for (int i = 0; i < 32; i++) {
                lo = fmin(lo, x[32 * s + i]);
                hi = fmax(hi, x[32 * s + i]);
            }
            worst = fmax(worst, (hi - lo) / nmax);
            max_min = fmax(max_min, -lo);
        }
        return worst + 63 * fp16_error(max_min / 63) + 1e-30;
    }
    case VT_Q6_K: {
        double worst = 0, amax_all = 0;
        for (int s = 0; s < 16; s++) {
            double amax = 0;
            for (int i = 0; i < 16; i++) amax = fmax(amax, fabs(x[16 * s + i]));
            worst = fmax(worst, amax / 32);
            amax_all = fmax(amax_all, amax);
        }
        return worst + amax_all / 128 + 1e-30;
    }
    default: return 0;
    }
}

/* Count the elements of x[n] (whole blocks) whose round trip y exceeds the bound. */
static int64_t count_out_of_bound(int32_t dtype, const float *x, const float *y, int64_t n, double *worst_ratio) {
    const int64_t len = vt_dtype_block_length(dtype);
    int64_t bad = 0;
    for (int64_t b = 0; b < n / len; b++) {
        const double bound = block_error_bound(dtype, x + b * len);
        for (int64_t i = b * len; i < (b + 1) * len; i++) {
            const double err = fabs((double)x[i] - (double)y[i]);
            if (worst_ratio && err / bound > *worst_ratio) *worst_ratio = err / bound;
            if (!(err <= bound)) bad++;
        }
    }
    return bad;
}

/* Deterministic N(0, 1) samples (xorshift + Box-Muller), so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double uniform01(void) {
    return ((double)(xorshift64(&rng_state) >> 11) + 0.5) / 9007199254740992.0;
}
static float gaussian(void) { return (float)(sqrt(-2 * log(uniform01())) * cos(6.283185307179586 * uniform01())); }

static void round_trip(int32_t dtype, const float *x, int64_t n, double *worst_ratio, double *rel_rms) {
    void *q = malloc(vt_row_size(dtype, n));
    float *y = malloc((size_t)n * sizeof *y);
    CU_ASSERT_FATAL(q && y);
    CU_ASSERT_EQUAL(vt_from_f32(dtype, x, q, n), VT_OK);
    CU_ASSERT_EQUAL(vt_to_f32(dtype, q, y, n), VT_OK);
    CU_ASSERT_EQUAL(count_out_of_bound(dtype, x, y, n, worst_ratio), 0);
    double se = 0, sx = 0;
    for (int64_t i = 0; i < n; i++) {
        se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        sx += (double)x[i] * x[i];
    }
    *rel_rms = sx > 0 ? sqrt(se / sx) : 0;
    free(q);
    free(y);
}

static void test_quant_round_trip_error(void) {
    /* 64 super-blocks of N(0,1), with a few scaled blocks (1e-3, 1e3) and
     * one shifted block (all positive) so scale/min handling is exercised. */
    const int64_t n = 64 * 256;
    float *x = malloc((size_t)n * sizeof *x);
    CU_ASSERT_FATAL(x != NULL);
    for (int64_t i = 0; i < n; i++) x[i] = gaussian();
    for (int64_t i = 256; i < 512; i++) x[i] *= 1e-3f;
    for (int64_t i = 512; i < 768; i++) x[i] *= 1e3f;
    for (int64_t i = 768; i < 1024; i++) x[i] = fabsf(x[i]) + 2.0f;
    /* Expected relative RMS error on N(0,1) of a b-bit quantizer over about
     * +-2.5 sigma: step 5/(2^b - 1), RMS step/sqrt(12). Q8_0 (7 bits of
     * magnitude over amax ~ 2.1 sigma in 32 values): ~0.005; Q4_0 (~0.15);
     * Q4_K ~0.09; Q5_K ~0.045; Q6_K ~0.02. The limits below are about twice
     * these, so a broken search or packing (errors of whole steps) fails. */
    static const struct {
        int32_t dtype;
        double max_rel_rms;
    } cases[] = {{VT_Q8_0, 0.01}, {VT_Q4_0, 0.2}, {VT_Q4_K, 0.15}, {VT_Q5_K, 0.075}, {VT_Q6_K, 0.04}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double worst = 0, rel_rms = 0;
        round_trip(cases[c].dtype, x, n, &worst, &rel_rms);
        printf("\n    %s: worst error / bound %.3f, relative rms %.4f", vt_dtype_name(cases[c].dtype), worst, rel_rms);
        CU_ASSERT(rel_rms <= cases[c].max_rel_rms);
    }

    /* f16 / bf16: round to nearest, so relative error <= 2^-11 / 2^-8 (normal range) */
    float *y = malloc((size_t)n * sizeof *y);
    uint16_t *h = malloc((size_t)n * sizeof *h);
    CU_ASSERT_FATAL(y && h);
    const int32_t halves[2] = {VT_F16, VT_BF16};
    const double half_ulp[2] = {ldexp(1, -11), ldexp(1, -8)};
    for (int t = 0; t < 2; t++) {
        CU_ASSERT_EQUAL(vt_from_f32(halves[t], x, h, n), VT_OK);
        CU_ASSERT_EQUAL(vt_to_f32(halves[t], h, y, n), VT_OK);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            if (fabs(x[i]) < 1e-4) continue; /* f16 subnormals have absolute, not relative, error */
            if (fabs((double)x[i] - y[i]) > half_ulp[t] * fabs(x[i])) bad++;
        }
        CU_ASSERT_EQUAL(bad, 0);
    }
    free(h);
    free(y);
    free(x);
}

static void test_quant_degenerate_blocks(void) {
    /* all zeros and constants must give finite, exact-or-bounded values, never NaN */
    float x[256], y[256];
    unsigned char q[256 * 4];
    const int32_t types[] = {VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        memset(x, 0, sizeof x);
        CU_ASSERT_EQUAL(vt_from_f32(types[t], x, q, 256), VT_OK);
        CU_ASSERT_EQUAL(vt_to_f32(types[t], q, y, 256), VT_OK);
        int nonzero = 0;
        for (int i = 0; i < 256; i++) nonzero += y[i] != 0.0f;
        CU_ASSERT_EQUAL(nonzero, 0);

        for (int i = 0; i < 256; i++) x[i] = -0.75f;
        CU_ASSERT_EQUAL(vt_from_f32(types[t], x, q, 256), VT_OK);
        CU_ASSERT_EQUAL(vt_to_f32(types[t], q, y, 256), VT_OK);
        CU_ASSERT_EQUAL(count_out_of_bound(types[t], x, y, 256, NULL), 0);

        /* a tiny block whose 1/d overflows float: quants fall to 0, no UB */
        for (int i = 0; i < 256; i++) x[i] = (i % 3 - 1) * 1e-38f;
        CU_ASSERT_EQUAL(vt_from_f32(types[t], x, q, 256), VT_OK);
        CU_ASSERT_EQUAL(vt_to_f32(types[t], q, y, 256), VT_OK);
        int non_finite = 0;
        for (int i = 0; i < 256; i++) non_finite += !isfinite(y[i]) || fabsf(y[i]) > 1e-30f;
        CU_ASSERT_EQUAL(non_finite, 0);
    }
}

/* ------------------------------------------------------------------ */
/* (d) byte identity with llama.cpp's quantizer on real GGUF files     */
/* ------------------------------------------------------------------ */

static vt_gguf *open_model(const char *name) {
    const char *data = vt_test_data_dir("llama.cpp-quantized model files");
    if (!data) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/models/%s", data, name);
    vt_gguf *g = NULL;
    vt_error err = {0};
    if (vt_gguf_open(path, &g, &err) != VT_OK) {
        printf("\n    cannot open %s: %s", path, err.msg);
        CU_FAIL("model file did not open");
        return NULL;
    }
    return g;
}

/* Quantize every non-f32 tensor of `file` from the same tensor of the f32
 * file and compare bytes; dequantize it and compare with the f32 original
 * within the format's bound. Returns the number of tensors of `want` checked. */
static int check_file_against_f32(const char *ref_file, const char *file, int32_t want) {
    vt_gguf *ref = open_model(ref_file);
    if (!ref) return -1;
    vt_gguf *g = open_model(file);
    if (!g) {
        vt_gguf_close(ref);
        return -1;
    }
    int checked = 0;
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        if (t->dtype != want) continue;
        const vt_gguf_tensor *src = vt_gguf_find_tensor(ref, t->name);
        CU_ASSERT_FATAL(src != NULL);
        CU_ASSERT_FATAL(src->dtype == VT_F32);
        int64_t n = 1;
        for (int d = 0; d < t->ndim; d++) n *= t->ne[d];
        const size_t bytes = vt_row_size(t->dtype, n);
        CU_ASSERT_EQUAL_FATAL(bytes, t->nbytes);
        float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        unsigned char *q = malloc(bytes);
        CU_ASSERT_FATAL(x && y && q);
        memcpy(x, src->data, (size_t)n * sizeof *x); /* the mapping need not be float-aligned for us */
        CU_ASSERT_EQUAL(vt_from_f32(t->dtype, x, q, n), VT_OK);
        const size_t block = vt_dtype_block_bytes(t->dtype);
        int64_t differing_blocks = 0, first = -1;
        for (size_t b = 0; b < bytes / block; b++) {
            if (memcmp(q + b * block, (const unsigned char *)t->data + b * block, block) != 0) {
                if (first < 0) first = (int64_t)b;
                differing_blocks++;
            }
        }
        if (differing_blocks)
            printf("\n    %s %s: %lld of %zu blocks differ from llama.cpp (first %lld)", file, t->name,
                   (long long)differing_blocks, bytes / block, (long long)first);
        CU_ASSERT_EQUAL(differing_blocks, 0);

        CU_ASSERT_EQUAL(vt_to_f32(t->dtype, t->data, y, n), VT_OK);
        if (vt_dtype_is_float(t->dtype)) {
            /* f16/bf16: half an ulp of the format, relative, for normal values */
            const double half_ulp = t->dtype == VT_F16 ? ldexp(1, -11) : ldexp(1, -8);
            int64_t bad = 0;
            for (int64_t k = 0; k < n; k++)
                if (fabs(x[k]) >= 1e-4 && fabs((double)x[k] - y[k]) > half_ulp * fabs(x[k])) bad++;
            CU_ASSERT_EQUAL(bad, 0);
        } else {
            CU_ASSERT_EQUAL(count_out_of_bound(t->dtype, x, y, n, NULL), 0);
        }
        free(x);
        free(y);
        free(q);
        checked++;
    }
    vt_gguf_close(g);
    vt_gguf_close(ref);
    return checked;
}

static void expect_checked_from(const char *ref_file, const char *file, int32_t dtype) {
    const int checked = check_file_against_f32(ref_file, file, dtype);
    if (checked < 0) return; /* already failed (file missing or unreadable) */
    printf("\n    %s: %d %s tensors compared", file, checked, vt_dtype_name(dtype));
    CU_ASSERT(checked > 0); /* the file really holds tensors of this type */
}

static void expect_checked(const char *file, int32_t dtype) { expect_checked_from("qwen3-tiny-f32.gguf", file, dtype); }

static void test_llama_q8_0(void) { expect_checked("qwen3-tiny-q8_0.gguf", VT_Q8_0); }
static void test_llama_q4_0(void) {
    expect_checked("qwen3-tiny-q4_0.gguf", VT_Q4_0);
    expect_checked("qwen3-tiny-q4_0.gguf", VT_Q6_K); /* llama-quantize's Q4_0 mix keeps output/embeddings in Q6_K */
}
static void test_llama_q4_k_m(void) {
    expect_checked("qwen3-tiny-q4_k_m.gguf", VT_Q4_K);
    expect_checked("qwen3-tiny-q4_k_m.gguf", VT_Q6_K);
}
static void test_llama_q5_k_m(void) {
    expect_checked("qwen3-tiny-q5_k_m.gguf", VT_Q5_K);
    expect_checked("qwen3-tiny-q5_k_m.gguf", VT_Q6_K);
}
static void test_llama_q6_k(void) { expect_checked("qwen3-tiny-q6_k.gguf", VT_Q6_K); }
/* Other architectures and shapes: llama with GQA, qwen2 (biases), and the
 * 260K-parameter llama whose rows (64 wide) force llama-quantize's fallbacks. */
static void test_llama_other_models(void) {
    expect_checked_from("llama-gqa-tiny-f32.gguf", "llama-gqa-tiny-q4_k_m.gguf", VT_Q4_K);
    expect_checked_from("llama-gqa-tiny-f32.gguf", "llama-gqa-tiny-q4_k_m.gguf", VT_Q6_K);
    expect_checked_from("qwen2-tiny-f32.gguf", "qwen2-tiny-q4_k_m.gguf", VT_Q4_K);
    expect_checked_from("qwen2-tiny-f32.gguf", "qwen2-tiny-q4_k_m.gguf", VT_Q6_K);
    expect_checked_from("aidreams260k-f32.gguf", "aidreams260k-q4_0.gguf", VT_Q4_0);
    expect_checked_from("aidreams260k-f32.gguf", "aidreams260k-q4_0.gguf", VT_Q8_0);
    expect_checked_from("aidreams260k-f32.gguf", "aidreams260k-q8_0.gguf", VT_Q8_0);
}
static void test_llama_f16_bf16(void) {
    expect_checked("qwen3-tiny-f16.gguf", VT_F16);
    expect_checked("qwen3-tiny-bf16.gguf", VT_BF16);
}

int main(void) {
    static CU_TestInfo facts[] = {
        {"dtype names, block lengths and sizes", test_dtype_names_round_trip},
        {"dtype classes reject unknown ids", test_dtype_classes},
        {"row size counts whole blocks only", test_row_size},
        {"conversions reject bad dtype, length or pointer", test_conversion_rejects_bad_arguments},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo dequant[] = {
        {"f16, bf16, i32, i64 to f32 and back", test_dequant_plain_types},
        {"q8_0 block values", test_dequant_q8_0},
        {"q4_0 block values and nibble order", test_dequant_q4_0},
        {"q4_k scale/min packing incl. sub-blocks 4..7", test_dequant_q4_k},
        {"q5_k fifth bit from qh", test_dequant_q5_k},
        {"q6_k layout and negative scales", test_dequant_q6_k},
        {"avx2 and scalar paths are bit-identical, every dtype", test_dequant_avx2_bit_identical},
        {"vt_to_f32 runs the best path", test_to_f32_runs_best_path},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo halves[] = {
        {"every fp16 pattern round-trips, values exact", test_fp16_every_pattern_round_trips},
        {"fp16 ties to even, overflow, subnormals", test_fp16_rounding},
        {"every bf16 pattern round-trips, ties to even", test_bf16_every_pattern_and_rounding},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo quantize[] = {
        {"round-trip error within each format's bound", test_quant_round_trip_error},
        {"zero, constant and tiny blocks", test_quant_degenerate_blocks},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo llama[] = {
        {"q8_0 bytes equal llama-quantize", test_llama_q8_0},
        {"q4_0 (+q6_k) bytes equal llama-quantize", test_llama_q4_0},
        {"q4_k_m: q4_k and q6_k bytes equal llama-quantize", test_llama_q4_k_m},
        {"q5_k_m: q5_k and q6_k bytes equal llama-quantize", test_llama_q5_k_m},
        {"q6_k bytes equal llama-quantize", test_llama_q6_k},
        {"f16 and bf16 files equal vt's rounding", test_llama_f16_bf16},
        {"llama-gqa, qwen2, aidreams260k files", test_llama_other_models},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("quant: dtype facts", NULL, NULL, facts);
    vt_test_add_suite("quant: dequantization", NULL, NULL, dequant);
    vt_test_add_suite("quant: fp16/bf16", NULL, NULL, halves);
    vt_test_add_suite("quant: quantizers", NULL, NULL, quantize);
    vt_test_add_suite("quant: llama.cpp byte identity", NULL, NULL, llama);
    return vt_test_run();
}
