/* bf16_row_avx512.c — the SDK's vt_bf16_row.h included by a file built with
 * the tests' ordinary flags (its function carries its own target), for
 * test_bf16_row, which calls it only where the CPU runs AVX-512. x86-64
 * only (tests/CMakeLists.txt). */
#include "vt/vt_bf16_row.h"

void vt_test_f32_to_bf16_row(const float *src, vt_bf16_t *dst, int64_t n) { vt_f32_to_bf16_row_avx512(src, dst, n); }
