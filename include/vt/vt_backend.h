/* vt_backend.h — the op-dispatch ABI: what a compute backend exports, and what
 * the runtime hands it.
 *
 * A backend is a shared object named libvt-backend-NAME.so that exports
 *
 *   const vt_backend *vt_backend_entry(void);                       (required)
 *   int vt_backend_probe(char *reason, size_t reason_size);          (optional)
 *
 * Loading, in order (the runtime refuses the file with a one-line reason at the
 * first step that fails, and every other backend keeps working):
 *   1. dlopen(RTLD_NOW | RTLD_LOCAL). Libraries are never unloaded.
 *   2. vt_backend_probe, if exported: must be side-effect free and compiled
 *      without special instruction sets (no AVX2 in the probe's translation
 *      unit, no static constructors that use them). Returns a score, 0 = "this
 *      machine cannot run me", with the reason written to `reason`. Among
 *      the loaded backends the highest score is the default backend (ties:
 *      discovery order); in-tree: simd 100, onednn 50, reference 10; a
 *      backend without a probe scores 1.
 *   3. vt_backend_entry() returns a pointer to a static, const table that
 *      lives as long as the library. abi_major must equal VT_ABI_MAJOR,
 *      abi_minor must be <= the runtime's VT_ABI_MINOR, struct_size must be at
 *      least the size of the table at that minor, name must be non-empty and
 *      init, shutdown and supports non-NULL.
 *   4. init(host, config, &ctx, err, err_size) must return VT_OK.
 *
 * Threading: the runtime calls init, shutdown, supports and the ops from one
 * thread at a time (never concurrently on one ctx). Inside an op a backend may
 * use host->parallel_for to spread work over the runtime's threads; it must
 * not start threads of its own unless a library it uses insists (OpenMP: set
 * it to host->n_threads).
 *
 * Memory: every vt_tensor an op receives points into memory the runtime owns,
 * valid only during the call. dst never aliases a src. All tensors are
 * contiguous (nb[] follow from ne[] and the dtype), rows of quantized tensors
 * are whole blocks. Memory a backend allocates (host->alloc or its own) is the
 * backend's to free, at the latest in shutdown.
 *
 * Compatibility policy (also in docs/PLUGINS.md):
 *   - a minor bump may append fields to vt_backend, vt_host, vt_node and
 *     vt_backend_config, append op kinds and dtypes, add operand conventions
 *     for new ops, and widen an existing op's convention to a dtype it did not
 *     allow. Old plugins keep working: the runtime reads only the fields their
 *     struct_size covers, treats missing op pointers as NULL, and offers a
 *     node using a widened convention only to a plugin that reads it (from
 *     1.5, one that sets its bit in vt_backend.conventions; before, one built
 *     at a minor that already had the convention): others never see it (it
 *     runs on another backend), so rebuilding a plugin changes nothing it is
 *     handed.
 *
 * Minors: 1.0 the first release; 1.1 adds the Q8_0 KV cache to ATTENTION
 * and RESHAPE_AND_CACHE (below). A 1.0 plugin is never offered a Q8_0 cache.
 * 1.2 adds the weight-prepare hook (prepare_weight / release_weight at the
 * end of vt_backend, vt_node.prepared; see "Prepared weights" below). The
 * runtime never reads those fields of a 1.0 or 1.1 table: such a plugin
 * prepares nothing and runs on the file's weights, as before. 1.3 adds
 * isa, what instruction set the kernels run at (never read from an older
 * table: such a backend does not say). 1.4 adds the mixture-of-experts ops
 * MOE_ROUTE, MOE_MATMUL and MOE_COMBINE (their pointers appended to
 * vt_backend, vt_moe_params in vt_node.params); a plugin of an earlier minor
 * is never offered them and runs every other node as before. 1.4 also
 * appends vt_host.parallel_for_on: the pool of the host's own engine,
 * passed explicitly instead of through the calling thread. 1.5 makes a
 * widened convention opt-in (vt_backend.conventions): a plugin rebuilt
 * against newer headers is offered a dtype an existing op's convention
 * gained only if it says it reads it, so a rebuild alone changes nothing.
 * 1.6 adds tiers, the instruction-set tiers a backend can run at on this
 * machine as options it takes, so `vt backends --test` runs each (never read
 * from an older table: such a backend is tested as configured). 1.7 adds
 * prepare_flags (VT_PREPARE_SHARED: a backend may be offered, and copy for
 * its own nodes, weights other backends read too) and vt_weight_offer.shared
 * (never read from an older table: such a backend is offered only the
 * weights its nodes alone read, as before). 1.8 widens ROPE to a third
 * operand, the frequency factors of Llama 3.1's RoPE scaling
 * (VT_CONVENTION_ROPE_FACTORS; a table of an earlier minor, or one that
 * leaves the bit 0, is never offered such a node).
 *   - a major bump is needed to remove or reorder anything, change a field's
 *     type or meaning, or change an existing op's operand convention.
 */
#ifndef VT_BACKEND_H
#define VT_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "vt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VT_ABI_MAJOR 1
#define VT_ABI_MINOR 8

/* Maximum number of source operands of one node. */
#define VT_MAX_SRC 6

/* ------------------------------------------------------------------------ */
/* Op parameters                                                              */

typedef struct vt_rms_norm_params {
    float eps; /* added to mean(x^2) before the square root */
} vt_rms_norm_params;

typedef struct vt_rope_params {
    int32_t n_rot;    /* rotate the first n_rot values of each head (even) */
    int32_t mode;     /* a vt_rope_mode */
    float freq_base;  /* theta_i = pos * freq_scale * freq_base^(-2i/n_rot) */
    float freq_scale; /* 1 / linear scaling factor; 1.0 = none */
} vt_rope_params;

typedef struct vt_attention_params {
    float scale;                /* multiplies q.k, usually 1/sqrt(head_dim) */
    int32_t block_size;         /* tokens per cache block */
    int32_t n_seqs;             /* rows of the block table */
    int32_t max_blocks_per_seq; /* columns of the block table */
} vt_attention_params;

/* 1.4 */
typedef struct vt_moe_params {
    int32_t n_used;     /* experts chosen per token (MOE_ROUTE: dst.ne[0]) */
    int32_t norm_top_k; /* MOE_COMBINE: 1 = the chosen experts' probabilities
                         * renormalized to sum 1 (qwen3moe, mixtral); 0 = their
                         * softmax probabilities over all experts as they are */
} vt_moe_params;

/* ------------------------------------------------------------------------ */
/* A node: one op call, fully typed. supports() receives it with every data
 * pointer NULL; an op receives it with data set and the token dimension at
 * its actual size (never above what supports() saw). With the runtime's plan
 * check on (VT_CHECK_PLAN), supports() is also asked, on a plan's first run,
 * about each node exactly as it is about to run (data NULL, the token
 * dimension at the call's size): it must accept it there too.
 *
 * Operand conventions (D = head dim, H = query heads, KVH = kv heads,
 * T = tokens in this call, B = cache blocks, BS = block size):
 *
 * MATMUL            src0 W {K, N} F32|F16|BF16|Q8_0|Q4_0|Q4_K|Q5_K|Q6_K
 *                   src1 X {K, M} F32
 *                   dst  Y {N, M} F32|F16|BF16     Y[m][n] = sum_k X[m][k] W[n][k]
 * ATTENTION         src0 Q {D, H, T} F32
 *                   src1 K cache {D, KVH, BS, B}, src2 V cache, same,
 *                   F32|F16|BF16, or (1.1) Q8_0
 *                   src3 block tables I32 {max_blocks_per_seq, n_seqs}
 *                   src4 positions I32 {T}: position of each query token
 *                   src5 sequence index I32 {T}: its row in the block table
 *                   dst  O {D, H, T} F32
 *                   Token t attends to positions 0..positions[t] of its
 *                   sequence (causal); query head h uses kv head
 *                   h / (H / KVH). Position p lives at slot
 *                   table[p / BS] * BS + p % BS. Scores are scaled by
 *                   params.attention.scale; softmax in f32 or better.
 * RESHAPE_AND_CACHE src0 K {D, KVH, T}, src1 V {D, KVH, T}: F32|F16|BF16
 *                   src2 K cache, src3 V cache {D, KVH, BS, B} (written):
 *                   F32|F16|BF16, or (1.1) Q8_0 laid out as for ATTENTION
 *                   src4 slot mapping I64 {T}; a negative slot is skipped
 *                   dst  unused (ndim 0, data NULL)
 *                   When K/V and the cache differ in dtype the op converts
 *                   on store (a backend may decline that in supports()); a
 *                   Q8_0 cache is quantized on store, each block of 32 as
 *                   host->from_f32 does it (d = amax / 127 stored as f16,
 *                   q = round(x / d) half away from zero; from f16/bf16 k/v
 *                   through f32), so every backend writes the same bytes.
 * RMS_NORM          src0 X {D, R} F32, src1 weight {D} F32
 *                   dst  {D, R} F32|F16|BF16
 * ROPE              src0 X {D, heads, T} F32, src1 positions I32 {T},
 *                   (1.8) optional src2 frequency factors F32 {n_rot / 2}:
 *                   pair i's angle pos * freq_scale * freq_base^(-2i/n_rot)
 *                   is divided by src2[i] (llama.cpp's rope_freqs)
 *                   dst  same shape, F32|F16|BF16
 * SWIGLU            src0 gate {F, M} F32, src1 up {F, M} F32
 *                   dst  {F, M} F32: silu(gate) * up
 * ADD               src0 A {N, M} F32, src1 B {N, M} or {N, 1} F32
 *                   dst  {N, M} F32|F16|BF16
 * GET_ROWS          src0 table {D, V} any dtype MATMUL accepts, or F32
 *                   src1 ids I32 {M}
 *                   dst  {D, M} F32
 * CONVERT           src0 X F32|F16|BF16, dst same shape F32|F16|BF16
 *
 * Mixture of experts (1.4; NE = experts, U = experts used per token):
 * MOE_ROUTE         src0 router logits {NE, T} F32
 *                   dst  ids {U, T} I32: for each token the U experts with
 *                   the largest logits, largest first, ties to the lower
 *                   index (softmax is monotonic, so these are the U most
 *                   probable). U = params.moe.n_used <= NE.
 * MOE_MATMUL        src0 W {K, N, NE}, any dtype MATMUL accepts: expert e's
 *                   matrix is rows [e*N, (e+1)*N) of a {K, N*NE} matrix
 *                   src1 X {K, T} F32, 2-D (each token's row feeds all
 *                   its experts) or {K, U, T}, 3-D (row u feeds its u-th
 *                   expert)
 *                   src2 ids {U, T} I32, each in [0, NE)
 *                   dst  Y {N, U, T} F32:
 *                   Y[t][u][n] = sum_k X[t](u)[k] W[ids[t][u]][n][k]
 *                   A token's rows must not depend on the other tokens of
 *                   the call (group them by expert, but compute each row
 *                   as MATMUL would).
 * MOE_COMBINE       src0 Y {N, U, T} F32, src1 ids {U, T} I32,
 *                   src2 router logits {NE, T} F32
 *                   dst  {N, T} F32: sum over u in order of
 *                   w[t][u] * Y[t][u], where p = softmax(logits[t]) and
 *                   w[t][u] = p[ids[t][u]], divided by the sum of the U
 *                   chosen p when params.moe.norm_top_k is 1. The U
 *                   experts' weights come from their logits alone when
 *                   norm_top_k is 1: exp(l_u - l_max) / sum exp(l_j - l_max).
 */
typedef struct vt_node {
    uint32_t struct_size; /* sizeof(vt_node) of the runtime that built it */
    int32_t op;           /* a vt_op */
    int32_t phase;        /* a vt_phase: the shape class of the plan */
    int32_t n_src;
    vt_tensor src[VT_MAX_SRC];
    vt_tensor dst;
    union {
        vt_rms_norm_params rms_norm;
        vt_rope_params rope;
        vt_attention_params attention;
        vt_moe_params moe; /* 1.4 */
        uint8_t reserved[64]; /* fixes the union's size for the ABI */
    } params;
    /* 1.2: bit s set = src[s].data is the prepared copy this backend's
     * prepare_weight returned for that weight (dtype, ne and nb still
     * describe the file's tensor); clear = the file's own bytes. Always 0
     * in supports() queries: acceptance must not depend on preparation. */
    uint32_t prepared;
} vt_node;

/* An op implementation. Returns VT_OK or an error; on error it may describe
 * the failure through host->log. Must not fail for a node that supports()
 * accepted, except for VT_ERR_NOMEM. */
typedef vt_status (*vt_op_fn)(void *ctx, const vt_node *node);

/* ------------------------------------------------------------------------ */
/* Host services, handed to init. Valid until shutdown returns.             */

/* vt_log_level: vt_types.h (a program on libvt names the levels too). */

/* A range task: process items [begin, end). `thread` is 0..n_threads-1. */
typedef void (*vt_range_fn)(void *arg, int64_t begin, int64_t end, int thread);

typedef struct vt_host {
    uint32_t struct_size; /* sizeof(vt_host) of the runtime */
    uint32_t abi_major;
    uint32_t abi_minor;
    int32_t n_threads; /* threads parallel_for uses, including the caller */

    /* printf-style message tagged with the backend's name. Thread-safe. */
    void (*log)(int level, const char *backend, const char *fmt, ...);
    /* Aligned allocation (alignment a power of two, >= sizeof(void*)).
     * Returns NULL on failure: the backend must then fail with VT_ERR_NOMEM.
     * Tests inject failures here. free(NULL) is a no-op. */
    void *(*alloc)(size_t size, size_t alignment);
    void (*free)(void *ptr);
    /* Split [0, n) into chunks of at least `grain` items and run fn on them
     * over the runtime's threads; returns when all are done. The 1.0 entry:
     * it runs on the pool of the engine the calling thread last drove, so
     * call it only from the thread the runtime called you on. From 1.4 use
     * parallel_for_on (vt_host_parallel_for below picks it when there).
     * Not reentrant: do not call it from inside a task. */
    void (*parallel_for)(int64_t n, int64_t grain, vt_range_fn fn, void *arg);
    /* Row conversion between any dtype of vt_types.h and f32. n is a count of
     * elements and must be a multiple of the dtype's block length. from_f32
     * quantizes (round to nearest even for F16/BF16). */
    vt_status (*to_f32)(int32_t dtype, const void *src, float *dst, int64_t n);
    vt_status (*from_f32)(int32_t dtype, const float *src, void *dst, int64_t n);
    /* Bytes of n elements (0 if the dtype is unknown or n not whole blocks),
     * elements per block (1 for plain types), and a name ("q4_k"). */
    size_t (*row_size)(int32_t dtype, int64_t n);
    int64_t (*block_length)(int32_t dtype);
    const char *(*dtype_name)(int32_t dtype);

    /* 1.4: parallel_for on the pool of the engine this table belongs to
     * (the host your init received; each engine has its own), whatever
     * thread calls it. Pass the table back as self. Not reentrant. */
    void (*parallel_for_on)(const struct vt_host *self, int64_t n, int64_t grain, vt_range_fn fn, void *arg);
    /* 1.4: the runtime's own context behind parallel_for_on (its engine's
     * pool). Opaque: never read or change it. */
    void *runtime_ctx;
} vt_host;

/* parallel_for on host's own pool where the runtime offers that (1.4),
 * else through the 1.0 entry. */
static inline void vt_host_parallel_for(const vt_host *host, int64_t n, int64_t grain, vt_range_fn fn, void *arg) {
    if (host->struct_size >= offsetof(vt_host, parallel_for_on) + sizeof host->parallel_for_on && host->parallel_for_on)
        host->parallel_for_on(host, n, grain, fn, arg);
    else
        host->parallel_for(n, grain, fn, arg);
}

typedef struct vt_backend_config {
    uint32_t struct_size;
    int32_t n_threads;   /* same as host->n_threads */
    const char *options; /* backend-specific "key=value,..." from the ini's [backend.NAME]; may be "" */
} vt_backend_config;

/* ------------------------------------------------------------------------ */
/* Prepared weights (1.2)
 *
 * A backend may keep its own copy of a weight in a layout of its choice
 * (rows interleaved for its GEMM, scales unpacked, ...) instead of reading
 * the file's layout on every call. At engine creation, after both plans
 * (prefill, decode) are negotiated, the runtime offers each backend that
 * exports prepare_weight every weight tensor its nodes will read through a
 * weight operand: MATMUL src0, GET_ROWS src0, RMS_NORM src1 (biases, reached
 * through reshaping views, are never offered). One offer per tensor and
 * backend, whatever number of nodes and phases read it; `ops` and `phases`
 * say which. The backend answers VT_OK with out->data NULL (declined: its
 * ops get the file's bytes, as before), VT_OK with a copy, or an error with
 * a one-line reason in err: the engine is then not created (every copy
 * already made is released first) and the error names the backend, the
 * tensor and the reason.
 *
 * Every node of that backend reading the tensor then gets src[s].data =
 * out->data and bit s of node->prepared set; dtype, ne and nb still describe
 * the file's tensor. Nodes of other backends, and any node the runtime runs
 * outside an engine (tools, conformance cases that do not go through the
 * hook), have the bit clear: an op must check the bit, never assume.
 *
 * One layout per weight: a tensor that nodes of more than one backend read
 * (a backend's prefill matmuls and its fallback's decode ones) is offered
 * to none of them, and all of them read the file's bytes. A copy would
 * serve only the backend that made it, so the file's pages would stay
 * resident beside it. A backend must therefore run every weight it accepts
 * on the file's layout too, unmarked.
 *
 * The one exception is asked for (1.7): a backend whose prepare_flags has
 * VT_PREPARE_SHARED is offered such a tensor too, with offer->shared = 1,
 * and its copy then serves its own nodes while the others read the file's
 * pages, which stay resident: two layouts of the weight. It is for a layout
 * that pays so much that a user would spend the memory on it (onednn's int8
 * prefill weights, asked for with its precision=int8 and bounded by its
 * int8_max_mib); a backend that sets the flag declines shared offers unless
 * its configuration asked, and --explain reports such copies apart.
 *
 * Calls: from the thread creating the engine, one offer at a time (never
 * concurrently with each other or with an op on the same ctx); the backend
 * may spread one preparation over the runtime's threads with
 * host->parallel_for. The copy is the backend's memory (host->alloc or its
 * own), read-only and unchanged from then on; release_weight(ctx, data) is
 * called exactly once per copy when the engine is freed, before shutdown.
 * `--backend auto` calibration (before the engine's offers) also offers the
 * weights of each node it times, with the same name, tensor, ops and phases
 * (every reader of the tensor, when the backend accepts them all; else the
 * tensor is not offered, as it will be shared), and releases each such
 * copy right after timing: a tensor may be offered more than once per
 * engine, one copy live at a time per timed node.
 * out->bytes is what the copy keeps resident; the runtime reports the sum
 * per backend ("prepared weights: X MiB" in --explain and vt bench). The
 * original stays mapped and valid while the engine lives (other backends
 * and unprepared nodes may read it). */

/* Which operand of an op is a weight: vt_is_weight_operand (vt_types.h). */

typedef struct vt_weight_offer {
    uint32_t struct_size; /* sizeof(vt_weight_offer) of the runtime */
    const char *name;     /* the file's tensor name, "blk.0.attn_q.weight" */
    vt_tensor tensor;     /* dtype, shape and data of the file's tensor (read-only) */
    uint32_t ops;         /* bit (1u << vt_op) of every op that reads it on this backend */
    uint32_t phases;      /* bit (1u << vt_phase) of every phase whose plan reads it here */
    /* 1.7 (read only when struct_size covers it): 1 = nodes of other
     * backends read the tensor too (offered only under VT_PREPARE_SHARED):
     * a copy stays resident beside the file's pages they read */
    uint32_t shared;
} vt_weight_offer;

typedef struct vt_prepared_weight {
    void *data;   /* NULL = declined; else what the ops receive as the operand's data */
    size_t bytes; /* bytes the copy keeps resident, for accounting */
} vt_prepared_weight;

/* ------------------------------------------------------------------------ */
/* The table a backend exports. Fields are only appended.                    */

typedef struct vt_backend {
    uint32_t abi_major;   /* VT_ABI_MAJOR the backend was built against */
    uint32_t abi_minor;   /* VT_ABI_MINOR the backend was built against */
    uint32_t struct_size; /* sizeof(vt_backend) the backend was built with */
    const char *name;        /* short, [a-z0-9_-]+, matches the file name */
    const char *description; /* one line for `vt backends`; may be NULL */

    /* Required. Create the backend's state; *ctx is passed to every other
     * call. On failure return non-VT_OK and a reason in err. */
    vt_status (*init)(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                      size_t err_size);
    /* Required. Free everything init and the ops allocated. */
    void (*shutdown)(void *ctx);
    /* Required. 1 if the op pointer for node->op can run this node exactly
     * (op kind, every operand's dtype and shape, phase), else 0. Never called
     * for an op whose pointer is NULL. Must be cheap and side-effect free. */
    int (*supports)(void *ctx, const vt_node *node);

    /* One pointer per vt_op, in vt_op order. NULL = not implemented: the
     * runtime runs that node on another backend (reference at the latest). */
    vt_op_fn matmul;
    vt_op_fn attention;
    vt_op_fn reshape_and_cache;
    vt_op_fn rms_norm;
    vt_op_fn rope;
    vt_op_fn swiglu;
    vt_op_fn add;
    vt_op_fn get_rows;
    vt_op_fn convert;

    /* 1.2, optional as a pair (NULL, NULL = prepares nothing; one without
     * the other is refused at load). See "Prepared weights" above. `out`
     * arrives zeroed. */
    vt_status (*prepare_weight)(void *ctx, const vt_weight_offer *offer, vt_prepared_weight *out, char *err,
                                size_t err_size);
    void (*release_weight)(void *ctx, void *data);

    /* 1.3, optional (NULL = does not say). The instruction set this
     * backend's kernels run at in this process, with its configuration, as
     * one short lowercase word or two ("avx2", "avx512_vnni", "amx_int8",
     * "scalar"): what `vt backends` and `vt bench` print beside every figure,
     * so a measurement names what it measured. Called after init; the string
     * stays valid until shutdown. */
    const char *(*isa)(void *ctx);

    /* 1.4, optional like every op: mixture of experts (conventions above). */
    vt_op_fn moe_route;
    vt_op_fn moe_matmul;
    vt_op_fn moe_combine;

    /* 1.5: the widened conventions (VT_CONVENTION_*) this backend's ops
     * read. Nodes using one are offered only to a backend that sets its bit:
     * a table of 1.5 or later that leaves this 0 is never offered a Q8_0 KV
     * cache (nor, from 1.8, a ROPE with frequency factors), whatever its
     * supports() would say. A bit the table's own minor does not define
     * gets the plugin refused at load. Tables of 1.1 to 1.4 are
     * taken to read the conventions of their minor (what they were offered
     * then); a 1.0 table none. */
    uint64_t conventions;

    /* 1.6, optional (NULL = one way of running). The instruction-set tiers
     * this backend can run at in this process, best first, each as the
     * option assignment that selects it ("isa=avx512", "isa=avx2"): what
     * `vt backends --test` runs one after another, passing each as a
     * backend option. Only tiers this CPU and OS run; NULL-terminated,
     * valid until shutdown. A list of one (or NULL) means there is nothing
     * to choose. Called after init. */
    const char *const *(*tiers)(void *ctx);

    /* 1.7: VT_PREPARE_* bits (0 = none); see "Prepared weights". 64 bits
     * so the table ends without padding, as every minor's size says. */
    uint64_t prepare_flags;
} vt_backend;

/* prepare_flags: offer this backend (with offer->shared = 1) also the
 * weights nodes of other backends read; its copy serves its own nodes. */
#define VT_PREPARE_SHARED (1ull << 0)

/* Widened conventions: a dtype a minor allowed an existing op to read or
 * write. One bit each, appended with the minor that widens. */
#define VT_CONVENTION_KV_Q8_0 (1ull << 0)        /* 1.1: ATTENTION reads, RESHAPE_AND_CACHE writes Q8_0 caches */
#define VT_CONVENTION_ROPE_FACTORS (1ull << 1) /* 1.8: ROPE reads frequency factors (src2) */

/* The table's size at each minor 1.<m>: the least struct_size a plugin of
 * that minor may declare, and all of its table the runtime reads. A new
 * minor is one line here, the end of the last field it appended (1.1 added
 * a convention, no field), and a name for its size below. X(arg, m, size). */
#define VT_BACKEND_MINORS(X, arg)                                                                                      \
    X(arg, 0, offsetof(vt_backend, convert) + sizeof(vt_op_fn))                                                        \
    X(arg, 1, offsetof(vt_backend, convert) + sizeof(vt_op_fn))                                                        \
    X(arg, 2, offsetof(vt_backend, release_weight) + sizeof(void (*)(void *, void *)))                                 \
    X(arg, 3, offsetof(vt_backend, isa) + sizeof(const char *(*)(void *)))                                             \
    X(arg, 4, offsetof(vt_backend, moe_combine) + sizeof(vt_op_fn))                                                    \
    X(arg, 5, offsetof(vt_backend, conventions) + sizeof(uint64_t))                                                    \
    X(arg, 6, offsetof(vt_backend, tiers) + sizeof(const char *const *(*)(void *)))                                    \
    X(arg, 7, offsetof(vt_backend, prepare_flags) + sizeof(uint64_t))                                                  \
    X(arg, 8, offsetof(vt_backend, prepare_flags) + sizeof(uint64_t))

#define VT_BACKEND_SIZE_IF_(minor, m, size) ((minor) == (m)) ? (size_t)(size):
/* The table's size at minor 1.<m> (0 past VT_ABI_MINOR); a constant
 * expression for a constant m. */
#define VT_BACKEND_SIZE_AT_MINOR(m) (VT_BACKEND_MINORS(VT_BACKEND_SIZE_IF_, m)(size_t)0)

/* The sizes by name, as earlier minors' plugins may use them. */
#define VT_BACKEND_SIZE_1_0 VT_BACKEND_SIZE_AT_MINOR(0)
#define VT_BACKEND_SIZE_1_1 VT_BACKEND_SIZE_AT_MINOR(1)
#define VT_BACKEND_SIZE_1_2 VT_BACKEND_SIZE_AT_MINOR(2)
#define VT_BACKEND_SIZE_1_3 VT_BACKEND_SIZE_AT_MINOR(3)
#define VT_BACKEND_SIZE_1_4 VT_BACKEND_SIZE_AT_MINOR(4)
#define VT_BACKEND_SIZE_1_5 VT_BACKEND_SIZE_AT_MINOR(5)
#define VT_BACKEND_SIZE_1_6 VT_BACKEND_SIZE_AT_MINOR(6)
#define VT_BACKEND_SIZE_1_7 VT_BACKEND_SIZE_AT_MINOR(7)
#define VT_BACKEND_SIZE_1_8 VT_BACKEND_SIZE_AT_MINOR(8)

/* Each minor's table holds the one before it; the current minor's is the
 * whole table. */
VT_STATIC_ASSERT(VT_BACKEND_SIZE_1_1 >= VT_BACKEND_SIZE_1_0 && VT_BACKEND_SIZE_1_2 >= VT_BACKEND_SIZE_1_1 &&
                   VT_BACKEND_SIZE_1_3 >= VT_BACKEND_SIZE_1_2 && VT_BACKEND_SIZE_1_4 >= VT_BACKEND_SIZE_1_3 &&
                   VT_BACKEND_SIZE_1_5 >= VT_BACKEND_SIZE_1_4 && VT_BACKEND_SIZE_1_6 >= VT_BACKEND_SIZE_1_5 &&
                   VT_BACKEND_SIZE_1_7 >= VT_BACKEND_SIZE_1_6 && VT_BACKEND_SIZE_1_8 >= VT_BACKEND_SIZE_1_7,
               "each minor's table holds the one before it");
VT_STATIC_ASSERT(VT_BACKEND_SIZE_AT_MINOR(VT_ABI_MINOR) == sizeof(vt_backend),
               "the table of the current minor is the whole vt_backend: add its line to VT_BACKEND_MINORS");

/* Exported symbols' types, for dlsym. */
typedef const vt_backend *(*vt_backend_entry_fn)(void);
typedef int (*vt_backend_probe_fn)(char *reason, size_t reason_size);

#define VT_BACKEND_ENTRY_SYMBOL "vt_backend_entry"
#define VT_BACKEND_PROBE_SYMBOL "vt_backend_probe"

/* Mark the two exported symbols (backends are built with hidden visibility). */
#if defined(__GNUC__)
#define VT_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define VT_BACKEND_EXPORT
#endif

/* Where op `op`'s pointer lives in vt_backend (0 for an unknown op). A
 * switch, not pointer arithmetic from &matmul: the op fields are separate
 * members, and indexing across members is undefined behaviour in ISO C. */
static inline size_t vt_backend_op_offset(int op) {
    switch (op) {
#define VT_OP_OFFSET_(ID, name, n_src, weight_src, since_minor, params)                                               \
    case VT_OP_##ID: return offsetof(vt_backend, name);
        VT_OP_LIST(VT_OP_OFFSET_)
#undef VT_OP_OFFSET_
    default: return 0;
    }
}

/* Every op's pointer lies within the table of the minor it arrived in. */
#define VT_OP_IN_TABLE_(ID, name, n_src, weight_src, since_minor, params)                                             \
    VT_STATIC_ASSERT(offsetof(vt_backend, name) + sizeof(vt_op_fn) <=                                                    \
                       VT_BACKEND_SIZE_AT_MINOR(since_minor),                                                          \
                   "op " #name ": its pointer is past the table of ABI 1." #since_minor);
VT_OP_LIST(VT_OP_IN_TABLE_)
#undef VT_OP_IN_TABLE_
/* Op `op` of a table (NULL for an unknown op or one past what struct_size
 * covers). The member is reached from the table's start through its
 * offsetof, which ISO C defines, and read as bytes. */
static inline vt_op_fn vt_backend_op(const vt_backend *b, int op) {
    const size_t offset = vt_backend_op_offset(op);
    if (offset == 0 || offset + sizeof(vt_op_fn) > b->struct_size) return NULL;
    vt_op_fn fn;
    memcpy(&fn, (const char *)b + offset, sizeof fn);
    return fn;
}

/* The member holding op `op`'s pointer in a table the caller owns (NULL for
 * an unknown op): for runtimes that build wrapped copies of a table. */
static inline vt_op_fn *vt_backend_op_field(vt_backend *b, int op) {
    const size_t offset = vt_backend_op_offset(op);
    return offset ? (vt_op_fn *)(void *)((char *)b + offset) : NULL;
}

#ifdef __cplusplus
}
#endif
#endif /* VT_BACKEND_H */
