/* example_backend.c — the smallest useful vt backend: one op (rms_norm, f32 in,
 * f32 out), every other op left NULL so the runtime runs those nodes on its
 * fallback backend (reference).
 *
 * Copy this folder to start your own backend; docs/PLUGINS.md walks through
 * building it against an installed vt, checking it, and comparing it with the
 * reference backend. Everything a backend may rely on is in the two public
 * headers below; nothing else of vt is visible to it, and it does not link
 * libvt: the runtime hands it every service it may use (logging, allocation,
 * the thread pool, dtype conversion) in the vt_host table at init.
 *
 * The shared object must be named libvt-backend-NAME.so, with NAME equal to
 * the table's `name` field ("example" here). */
#include <math.h>
#include <stdio.h>

#include <vt/vt_backend.h> /* includes vt/vt_types.h */
#include <vt/vt_check.h>   /* the operand conventions as checks */

#define EXAMPLE_NAME "example"

/* ------------------------------------------------------------------------ */
/* State                                                                      */

/* What init creates and every other call receives as `ctx`. A backend keeps
 * here whatever it needs between calls (a device handle, caches); this one
 * only needs the host table. */
typedef struct example_ctx {
    const vt_host *host; /* valid from init until shutdown returns */
} example_ctx;

/* The host fields this backend calls. struct_size tells how much of the table
 * the runtime built; a newer runtime may hand a longer table (fields are only
 * appended), never a shorter one than ABI 1.0's, but checking is cheap and
 * turns a mistake into a clear refusal instead of a crash. */
#define EXAMPLE_HOST_SIZE_NEEDED (offsetof(vt_host, parallel_for) + sizeof(((vt_host *)0)->parallel_for))

/* ------------------------------------------------------------------------ */
/* Probe: may this machine run the library at all?                            */

/* Optional. Called right after dlopen, before vt_backend_entry and before any
 * other code of the library runs. Must be side-effect free and must not use
 * instructions the CPU might lack (keep it in a translation unit compiled
 * without -mavx2 and friends; a SIMD backend checks cpuid here). Returns 0 to
 * be refused with `reason` as the explanation; > 0 to go on. Plain C runs
 * everywhere, so this one always says yes; it is here to show the shape. */
VT_BACKEND_EXPORT int vt_backend_probe(char *reason, size_t reason_size) {
    snprintf(reason, reason_size, "portable C, no special instructions");
    return 1;
}

/* ------------------------------------------------------------------------ */
/* init / shutdown                                                            */

/* Required. Create the state. On failure: return non-VT_OK and write a one-line
 * reason to err; the runtime refuses the backend ("init failed: <reason>") and
 * carries on with the others. `config->options` is this backend's
 * "key=value,..." string (may be ""); this backend has no options. */
static vt_status example_init(const vt_host *host, const vt_backend_config *config, void **ctx, char *err,
                              size_t err_size) {
    (void)config;
    *ctx = NULL;
    if (!host || host->struct_size < EXAMPLE_HOST_SIZE_NEEDED || !host->alloc || !host->free ||
        !host->parallel_for) {
        snprintf(err, err_size, "host table too old or incomplete");
        return VT_ERR_BACKEND;
    }
    /* Allocate through the host: tests inject allocation failures there, and
     * a NULL must turn into VT_ERR_NOMEM, never a crash. */
    example_ctx *c = host->alloc(sizeof *c, 64);
    if (!c) {
        snprintf(err, err_size, "out of memory");
        return VT_ERR_NOMEM;
    }
    c->host = host;
    *ctx = c;
    return VT_OK;
}

/* Required. Free everything init and the ops allocated. Called once, after
 * the last op; the host table is still valid during the call. */
static void example_shutdown(void *ctx) {
    example_ctx *c = ctx;
    if (c) c->host->free(c);
}

/* ------------------------------------------------------------------------ */
/* supports: the capability answer                                            */

/* Required. 1 if this backend runs `node` exactly, else 0. The runtime asks
 * while building its plans (data pointers NULL, the token dimension at its
 * largest), never for an op whose pointer below is NULL, and runs the node
 * elsewhere when the answer is 0. Say yes only to what the op really handles:
 * the runtime checks at load that nonsense (an unknown op or dtype) is
 * declined, and will not convert anything behind your back, so every dtype
 * you accept is a dtype your kernel must read or write. Cheap, no side effects.
 *
 * RMS_NORM operands (vt_backend.h): src0 X {D, R} f32, src1 weight {D} f32,
 * dst {D, R} f32|f16|bf16. This kernel writes f32 only. R may be spread over
 * dimensions 1..3 (Qwen3's per-head norm runs on {head_dim, heads, T}). */
static int example_supports(void *ctx, const vt_node *node) {
    (void)ctx;
    if (node->op != VT_OP_RMS_NORM) return 0; /* the only op with a pointer */
    /* The operand convention of rms_norm (source count, shapes, strides,
     * a finite eps), checked as every in-tree backend checks it. */
    if (!vt_check_convention(node, NULL, 0)) return 0;
    return node->dst.dtype == VT_F32; /* this kernel writes f32 only; same answer in prefill and decode */
}

/* ------------------------------------------------------------------------ */
/* The op                                                                     */

/* What one parallel_for task needs; lives on the op's stack. */
typedef struct rms_norm_task {
    const float *x; /* [R][D] */
    const float *w; /* [D]    */
    float *y;       /* [R][D] */
    int64_t D;
    float eps;
} rms_norm_task;

/* Rows [begin, end): y = x / sqrt(mean(x^2) + eps) * w. Runs on the
 * runtime's threads; each row is written by exactly one task, so no locking.
 * The sum of squares is kept in float: the result differs from the reference
 * backend (which sums in double) by a few float roundings per row, which is
 * what `vt compare` is there to measure. */
static void rms_norm_rows(void *arg, int64_t begin, int64_t end, int thread) {
    (void)thread; /* 0..n_threads-1, for per-thread scratch; none needed here */
    const rms_norm_task *t = arg;
    for (int64_t r = begin; r < end; r++) {
        const float *x = t->x + r * t->D;
        float *y = t->y + r * t->D;
        float sum_sq = 0.0f;
        for (int64_t i = 0; i < t->D; i++) sum_sq += x[i] * x[i];
        const float scale = 1.0f / sqrtf(sum_sq / (float)t->D + t->eps);
        for (int64_t i = 0; i < t->D; i++) y[i] = x[i] * scale * t->w[i];
    }
}

/* An op: called only for nodes supports() accepted, with every data pointer
 * set to memory the runtime owns and that is valid for this call only (do not
 * keep pointers to it). The token dimension may be smaller than what
 * supports() saw, so derive sizes from the node, never from a cached plan.
 * Must not fail for an accepted node, except with VT_ERR_NOMEM. */
static vt_status example_rms_norm(void *ctx, const vt_node *node) {
    const example_ctx *c = ctx;
    const vt_tensor *x = &node->src[0];
    rms_norm_task task = {
        .x = x->data,
        .w = node->src[1].data,
        .y = node->dst.data,
        .D = x->ne[0],
        .eps = node->params.rms_norm.eps,
    };
    const int64_t rows = vt_tensor_elements(x) / task.D;
    /* Spread rows over the runtime's threads (the calling thread included).
     * A grain of 4 rows keeps tiny decode calls from paying for a hand-off.
     * Never start threads of your own. */
    vt_host_parallel_for(c->host, rows, 4, rms_norm_rows, &task);
    return VT_OK;
}

/* 1.3, optional: what the kernels run at, printed beside every figure
 * measured on this backend. Plain C here; a backend that picks kernels by
 * CPU at init returns what it picked. */
static const char *example_isa(void *ctx) {
    (void)ctx;
    return "scalar";
}

/* ------------------------------------------------------------------------ */
/* The exported table                                                         */

/* Static and const: the runtime keeps the pointer for the life of the process
 * (libraries are never unloaded). abi_major/abi_minor/struct_size record the
 * headers this file was compiled against; the runtime refuses another major
 * or a newer minor than its own, and reads only the fields struct_size covers,
 * so this binary keeps loading in later 1.x runtimes. */
static const vt_backend example_table = {
    .abi_major = VT_ABI_MAJOR,
    .abi_minor = VT_ABI_MINOR,
    .struct_size = sizeof(vt_backend),
    .name = EXAMPLE_NAME, /* must match the file name libvt-backend-example.so */
    .description = "example plugin: rms_norm f32 -> f32, everything else falls back",
    .init = example_init,
    .shutdown = example_shutdown,
    .supports = example_supports,
    /* One pointer per op. NULL = not implemented here: the runtime runs those
     * nodes on its fallback backend, and `--explain` shows which ran where. */
    .matmul = NULL,
    .attention = NULL,
    .reshape_and_cache = NULL,
    .rms_norm = example_rms_norm,
    .rope = NULL,
    .swiglu = NULL,
    .add = NULL,
    .get_rows = NULL,
    .convert = NULL,
    .prepare_weight = NULL, /* 1.2: this backend keeps no layout of its own */
    .release_weight = NULL,
    .isa = example_isa,
    /* 1.4: mixture of experts (qwen3moe). Not here: a MoE model's routing
     * and expert matmuls run on the fallback, like the ops above. */
    .moe_route = NULL,
    .moe_matmul = NULL,
    .moe_combine = NULL,
    /* 1.5: the widened conventions (VT_CONVENTION_*) this backend's ops
     * read, opted into one by one; none here (it runs no attention), so it
     * is never offered a node that uses one. */
    .conventions = 0,
};

/* Required. The one symbol the runtime looks up (besides the probe). The
 * library is built with hidden visibility, so only these two are exported. */
VT_BACKEND_EXPORT const vt_backend *vt_backend_entry(void) { return &example_table; }
