/* test_bf16_row.c — vt_bf16_row.h, the SDK's f32-to-bf16 rows that simd's
 * and onednn's bf16 matmuls round their activations with: bit for bit
 * vt_f32_to_bf16 on every kind of value (ties either way, the largest
 * finite values rounding up to infinity, subnormals, infinities, NaNs
 * quiet and signalling with payloads, and a million random bit patterns),
 * at every length around the 16-value steps, writing nothing past n. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "vt/vt_cpu.h"
#include "vt/vt_quant.h"

void vt_test_f32_to_bf16_row(const float *src, vt_bf16_t *dst, int64_t n); /* bf16_row_avx512.c */

static bool avx512_here(void) {
    const vt_cpu_features f = vt_cpu_detect();
    if (f.avx512f && f.os_saves_zmm) return true;
    vt_test_skip("the CPU or OS lacks AVX-512 F (the row conversion's instructions)");
    return false;
}

/* Convert bits[0..n) and compare each value with vt_f32_to_bf16; the
 * guard values after n must stay. Returns the mismatches. */
static int64_t check(const uint32_t *bits, int64_t n) {
    float *src = calloc((size_t)(n + 1), sizeof *src);
    vt_bf16_t *dst = malloc((size_t)(n + 8) * sizeof *dst);
    for (int64_t i = 0; i < n; i++) src[i] = vt_f32_from_bits(bits[i]);
    for (int64_t i = 0; i < n + 8; i++) dst[i] = 0xBEEF;
    vt_test_f32_to_bf16_row(src, dst, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (dst[i] != vt_f32_to_bf16(src[i])) {
            if (bad++ < 5)
                printf("\n  0x%08x: row gives 0x%04x, vt_f32_to_bf16 0x%04x", bits[i], dst[i], vt_f32_to_bf16(src[i]));
        }
    for (int64_t i = n; i < n + 8; i++) bad += dst[i] != 0xBEEF;
    free(src);
    free(dst);
    return bad;
}

static void test_special_values(void) {
    if (!avx512_here()) return;
    static const uint32_t special[] = {
        0x00000000, 0x80000000,                         /* zeros */
        0x3F800000, 0xBF800000,                         /* +-1 */
        0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, /* ties to even (down, up), just below and above */
        0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0xFF7FFFFF, /* the largest finite: up to infinity, or not */
        0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x807FFFFF, /* subnormals */
        0x7F800000, 0xFF800000,                         /* infinities */
        0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, /* quiet and signalling NaNs */
        0x7FBFFFFF, 0x7F80FFFF, 0x7FFFFFFF, 0xFFFFFFFF, /* NaN payloads, low bits only and every bit */
    };
    const int64_t n = (int64_t)(sizeof special / sizeof *special);
    CU_ASSERT_EQUAL(check(special, n), 0);
}

static void test_random_patterns_every_length(void) {
    if (!avx512_here()) return;
    const int64_t n = 1 << 20;
    uint32_t *bits = malloc((size_t)n * sizeof *bits);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        bits[i] = (uint32_t)(s >> 11);
    }
    CU_ASSERT_EQUAL(check(bits, n), 0);
    for (int64_t len = 0; len <= 40; len++) CU_ASSERT_EQUAL(check(bits + len, len), 0); /* tails of every length */
    free(bits);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"special values as vt_f32_to_bf16 rounds them", test_special_values},
        {"a million random bit patterns; every length 0-40", test_random_patterns_every_length},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("vt_bf16_row.h", NULL, NULL, tests);
    return vt_test_run();
}
