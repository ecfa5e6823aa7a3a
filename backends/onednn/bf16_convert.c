/* bf16_convert.c — f32 rows to bf16 for the bf16 matmul path (the SDK's
 * vt_bf16_row.h, 16 values per AVX-512 step).
 *
 * Compiled with AVX-512 F and called only when the bf16 path runs, which
 * init chooses only where oneDNN's own CPU check found AVX-512 with BF16 (or
 * AMX), so the instructions exist and the OS saves their state. Rounding is
 * vt_f32_to_bf16's (to nearest, ties to even; a NaN stays a quiet NaN), in
 * integers, so the values match what every other part of vt calls bf16. */
#include "onednn.h"
#include "vt/vt_bf16_row.h"

void onednn_f32_to_bf16(const float *src, uint16_t *dst, int64_t n) { vt_f32_to_bf16_row_avx512(src, dst, n); }
