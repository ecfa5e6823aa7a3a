/* backend_harness.h — build op nodes with owned buffers and run them on any
 * loaded backend by name, so a differential test of a backend is a few lines:
 *
 *   vt_harness *h = vt_harness_open(2);                     // registry of the build tree
 *   vt_node n = vt_harness_node(VT_OP_MATMUL, VT_PHASE_PREFILL);
 *   vt_harness_set_src(&n, 0, vt_harness_weight(VT_Q4_K, K, N, 1));          // W {K, N}
 *   vt_harness_set_src(&n, 1, vt_harness_random(VT_F32, 2, (int64_t[]){K, M}, 2, -1, 1));
 *   n.dst = vt_harness_zeros(VT_F32, 2, (int64_t[]){N, M});
 *   vt_harness_diff d;
 *   CU_ASSERT_EQUAL(vt_harness_compare(h, "simd", "reference", &n, &d), VT_OK);
 *   CU_ASSERT(d.max_abs <= 1e-4 * d.ref_max_abs);           // justify the tolerance
 *   vt_harness_node_free(&n);
 *   vt_harness_close(h);
 *
 * Every tensor builder returns a contiguous vt_tensor (nb[] set from ne[])
 * whose data the caller owns (malloc'ed; vt_harness_tensor_free or
 * vt_harness_node_free release it). Random data comes from a seeded PRNG, so
 * a failure reproduces. Builders abort the test program on out-of-memory or
 * an invalid dtype/shape: they are for tests, not for recoverable errors. */
#ifndef VT_TEST_BACKEND_HARNESS_H
#define VT_TEST_BACKEND_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "registry.h"
#include "vt/vt_backend.h"

typedef struct vt_harness vt_harness;

/* ---- backends ---- */

/* A thread pool of n_threads, its host table and the registry of every backend
 * found (VT_BACKEND_PATH, then the build tree's lib/vt). NULL with a message on
 * stderr if the registry cannot be created. */
vt_harness *vt_harness_open(int n_threads);
/* The same with backend options, "NAME.key=value\n" lines as the ini's
 * [backend.NAME] sections give them (NULL: none). */
vt_harness *vt_harness_open_with(int n_threads, const char *backend_options);
void vt_harness_close(vt_harness *h);
const vt_host *vt_harness_host(const vt_harness *h);
/* Make h's thread pool the one ops called on this thread run on (the last
 * harness opened or run has it; a test calling a backend's op directly
 * after using another harness says which). */
void vt_harness_activate(const vt_harness *h);
/* The loaded backend NAME, or NULL (not built, refused, or absent). */
const vt_backend_entry *vt_harness_backend(const vt_harness *h, const char *name);
/* Why backend NAME was refused (its registry entry's reason), or NULL when
 * it loaded or was not found. */
const char *vt_harness_refusal(const vt_harness *h, const char *name);
/* Whether backend NAME is loaded, implements node->op and its supports() says
 * yes. The node's data pointers are hidden from supports() as the ABI says. */
bool vt_harness_accepts(const vt_harness *h, const char *name, const vt_node *node);
/* Run node in place on backend NAME. VT_ERR_UNSUPPORTED (with a message on
 * stderr) when the backend is absent or does not accept the node; otherwise
 * the op's own status. */
vt_status vt_harness_run(const vt_harness *h, const char *name, const vt_node *node);

/* ---- nodes ---- */

/* An empty node of op and phase: struct_size set, no sources, dst unused. */
vt_node vt_harness_node(int32_t op, int32_t phase);
/* src[i] = t, and n_src grows to cover i. */
void vt_harness_set_src(vt_node *node, int i, vt_tensor t);
/* A deep copy: every source and dst gets its own buffer with the same bytes. */
vt_node vt_harness_node_copy(const vt_node *node);
/* Free the data of every source and of dst. */
void vt_harness_node_free(vt_node *node);

/* ---- tensors ---- */

/* Zero-filled tensor of any dtype; ne[0] must be whole blocks. */
vt_tensor vt_harness_zeros(int32_t dtype, int ndim, const int64_t *ne);
/* Values uniform in [lo, hi) from PRNG seed, stored in dtype (F32/F16/BF16
 * round to nearest even; quant types go through the GGML reference
 * quantizer vt_from_f32). */
vt_tensor vt_harness_random(int32_t dtype, int ndim, const int64_t *ne, uint64_t seed, float lo, float hi);
/* A weight matrix W {K, N} of dtype from random values in [-1, 1). */
vt_tensor vt_harness_weight(int32_t dtype, int64_t K, int64_t N, uint64_t seed);
/* Tensors holding the given values: any shape from f32 values (stored as
 * dtype, quantized for quant types), and 1-D index tensors i32 {n}, i64 {n}. */
vt_tensor vt_harness_from_f32(int32_t dtype, int ndim, const int64_t *ne, const float *values);
vt_tensor vt_harness_i32(int64_t n, const int32_t *values);
vt_tensor vt_harness_i64(int64_t n, const int64_t *values);
/* A paged cache {D, KVH, BS, B} of a float dtype, or Q8_0 (D a multiple of
 * 32), filled with random values in [-1, 1) from seed (so unwritten slots
 * are not silently zero). */
vt_tensor vt_harness_cache(int32_t dtype, int64_t D, int64_t KVH, int64_t BS, int64_t B, uint64_t seed);
/* Block tables I32 {max_blocks, n_seqs} from a row-major [n_seqs][max_blocks] array. */
vt_tensor vt_harness_block_tables(int32_t n_seqs, int32_t max_blocks, const int32_t *blocks);

/* An attention call's shape: head dim D, H query heads over KVH kv heads,
 * blocks of BS positions in a pool of n_blocks, n_seqs tables of max_blocks,
 * T query tokens. */
typedef struct vt_harness_attn_case {
    int64_t D, H, KVH, BS, n_blocks;
    int32_t n_seqs, max_blocks;
    int64_t T;
} vt_harness_attn_case;

/* An attention node of that shape with random q and caches in kv_dtype,
 * token t at position pos[t] of sequence seq[t]. Sequence s's logical block
 * b is physical block (7 + 5 (s max_blocks + b)) mod n_blocks: with n_blocks
 * coprime with 5, a scattered bijection (never contiguous). */
vt_node vt_harness_attention_node(const vt_harness_attn_case *c, int32_t kv_dtype, const int32_t *pos,
                                  const int32_t *seq, int phase, uint64_t seed);
void vt_harness_tensor_free(vt_tensor *t);

/* Elements of t (product of ne over ndim). */
int64_t vt_harness_nelements(const vt_tensor *t);
/* Bytes of t's data. */
size_t vt_harness_nbytes(const vt_tensor *t);
/* All of t as f32 (malloc'ed, caller frees), dequantizing any dtype. */
float *vt_harness_to_f32(const vt_tensor *t);

/* ---- comparing ---- */

typedef struct vt_harness_diff {
    double max_abs;     /* max |a - b| */
    double max_rel;     /* max |a - b| / max(|b|, rel_floor): b is the reference */
    double ref_max_abs; /* max |b|: lets a test bound the error relative to the output's scale */
    int64_t worst;      /* index of the element with the largest |a - b| */
    int64_t count;      /* elements compared */
    int64_t nonfinite_mismatch; /* elements where exactly one side is nan/inf, or the infs differ */
} vt_harness_diff;

/* Floor of max_rel's denominator: elements of the reference smaller than
 * this are compared relative to it, so near-zeros do not blow max_rel up. */
#define VT_HARNESS_REL_FLOOR 1e-6

/* Compare two tensors of the same shape elementwise as f32 (any dtypes). */
vt_harness_diff vt_harness_tensor_diff(const vt_tensor *a, const vt_tensor *b);


/* Run a deep copy of node on backend `name` and another on `ref_name`, then
 * diff every output (a is name's, b is ref_name's; for two outputs the
 * worse of each field). The caller's node is not modified. VT_OK only when
 * both runs succeeded. */
vt_status vt_harness_compare(const vt_harness *h, const char *name, const char *ref_name, const vt_node *node,
                             vt_harness_diff *diff);

/* Print a diff on one line (for test logs). */
void vt_harness_diff_print(const char *label, const vt_harness_diff *d);

/* ---- PRNG ---- */

/* splitmix64: a deterministic 64-bit stream from a seed. */
uint64_t vt_harness_rand_u64(uint64_t *state);
/* uniform in [lo, hi) */
float vt_harness_rand_f32(uint64_t *state, float lo, float hi);

#endif
