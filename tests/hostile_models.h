/* hostile_models.h — small model files for the limit, OOM and no-partial-state
 * tests: a valid tiny model and variants that lie (hyperparameters that
 * disagree with the tensors, an unknown dtype, a truncated file, a vocab
 * without BOS, a KV cache too big for any machine). All written with vt's own
 * synthesizer and GGUF writer; the lying copies with tests/gguf_model_writer.h. */
#ifndef VT_TEST_HOSTILE_MODELS_H
#define VT_TEST_HOSTILE_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* The tiny model's shape: qwen3, 64 wide, 1 layer, 2 heads of 32, 1 KV head,
 * vocab 300 (built-in SPM vocabulary, with BOS), context 256, f32. */
#define HM_N_HEAD 2
#define HM_HEAD_DIM 32
#define HM_N_EMBD 64
#define HM_N_VOCAB 300

/* The tiny model; vocab_from: GGUF whose tokenizer is copied (NULL = built-in).
 * head_dim > 0 overrides the tiny model's (attention.key_length). */
vt_status hm_write_tiny(const char *path, const char *vocab_from, int32_t head_dim, vt_error *err);

/* A vocab-only GGUF: byte-level BPE (qwen2 pre-tokenizer), 256 byte tokens and
 * one merge, no BOS added (as qwen2's vocab). */
vt_status hm_write_bpe_vocab(const char *path, vt_error *err);

/* Number of lines in s (a last line without '\n' counts). */
int hm_count_lines(const char *s);

#endif
