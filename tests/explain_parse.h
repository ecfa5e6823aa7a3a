/* explain_parse.h — read `vt run/eval --explain` (or --dry-run) output back
 * into data, so tests assert on the negotiated plan the CLI printed.
 *
 * The lines it reads (core/engine/plan_exec.c, core/engine/engine.c):
 *   "  prefill   12 blk.0.rope_k   op=rope   backend=simd   in=f32,i32 out=f16"
 *   "plan prefill: 410 nodes, up to 512 tokens per call, 3.1 MiB of activations"
 *   "backend: simd (fallback: reference); backend from cli; fallback from ..."
 *   "kv-cache dtype: f16 (from env VT_KV_CACHE_F32); 4096 tokens in 256 blocks of 16, ..."
 *   "prepared weights: simd 12.5 MiB (14 tensors)" */
#ifndef VT_TEST_EXPLAIN_PARSE_H
#define VT_TEST_EXPLAIN_PARSE_H

#include <stdbool.h>

typedef struct vt_explain_node {
    char phase[16];   /* "prefill" | "decode" */
    int index;        /* node index in its plan */
    char label[64];   /* "blk.0.rope_k" */
    char op[32];      /* "rope" */
    char backend[64]; /* "simd" */
    char in[160];     /* "f32,i32" */
    char out[16];     /* "f16", or "-" for none */
} vt_explain_node;

typedef struct vt_explain {
    vt_explain_node *nodes;
    int n;
    char backend[64], fallback[64]; /* from "backend: X (fallback: Y)" */
    /* where they came from: "cli", "ini 2", "env VT_BACKEND", "the highest probe score", ... ("" if not said) */
    char backend_source[96], fallback_source[96];
    char kv_dtype[16];  /* from "kv-cache dtype: D (from S)" */
    char kv_source[64]; /* "cli", "env VT_KV_CACHE_F32", "ini 3", "default" */
    long long kv_tokens; /* "; T tokens in B blocks of S": the cache's capacity, blocks, block size (0 if not said) */
    int kv_blocks, kv_block_size;
    long long prefill_max_tokens, decode_max_tokens; /* "plan P: N nodes, up to T tokens per call" (0 if absent) */
    /* "prefix cache: on (kv_cache.prefix_cache from S)", "off (kv_cache.prefix_cache = 0 from S)", or
     * "off: the prefill and decode plans compute ..." (prefix_cache_source "" and plans_differ) */
    bool prefix_cache_seen, prefix_cache_on, prefix_cache_plans_differ;
    char prefix_cache_source[64];
    /* "prepared weights: none" or "B X MiB (N tensors), ...": the first backend's */
    bool prepared_seen;
    char prepared_backend[64]; /* "" for none */
    double prepared_mib;
    int prepared_tensors;
} vt_explain;

/* Parse text (stderr of the CLI). False when no plan line or no kv-cache line
 * was found. Free with vt_explain_free either way. */
bool vt_explain_parse(const char *text, vt_explain *x);
void vt_explain_free(vt_explain *x);

/* Nodes matching every non-NULL field (exact string match; `in` matches the
 * whole input list). */
int vt_explain_count(const vt_explain *x, const char *phase, const char *op, const char *backend, const char *in,
                     const char *out);
/* First node with this phase and label, or NULL. */
const vt_explain_node *vt_explain_find(const vt_explain *x, const char *phase, const char *label);
/* The i-th input dtype of a node ("f32"), into buf; false if there is none. */
bool vt_explain_input(const vt_explain_node *n, int i, char *buf, int size);

#endif
