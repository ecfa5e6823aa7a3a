/* options.h — every runtime knob, resolved once with a recorded source.
 *
 * Precedence, highest first: command line > environment > ini file named by
 * --config / VT_CONFIG > built-in default. The KV-cache dtype has two
 * environment levers: VT_KV_CACHE_DTYPE=f32|f16|bf16|q8_0, and VT_KV_CACHE_F32=1
 * (alias for f32; "0" or unset = no effect) which ranks below it.
 * An invalid value anywhere is an error naming the variable or the ini line
 * and the accepted values — never a silent default. */
#ifndef VT_CORE_OPTIONS_H
#define VT_CORE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Where a value came from, for --explain: "cli", "env VT_KV_CACHE_DTYPE",
 * "env VT_KV_CACHE_F32", "ini LINE" (e.g. "ini 12", with the file in
 * config_path), "default". */
#define VT_SOURCE_SIZE 64

/* Number of the library's own knobs; vt_options_key(i) names them in the
 * order below, then a declared layer's (vt_options_key_count in all). */
#define VT_OPTIONS_KEY_COUNT 19

/* The knobs of a program above the library (an HTTP server's own section),
 * which the library itself knows nothing of. The program declares them once,
 * with vt_options_declare_layer, before any options are made: the ini file,
 * vt_options_set, vt_options_source, vt_options_key and vt_options_value then
 * treat them as the library's own, and their values travel inside vt_options
 * (vt_options_layer_values), so a copy or a refused load behaves as for any
 * knob. Without a declaration the section is unknown, as any other. */
#define VT_OPTIONS_LAYER_KEYS_MAX 16
#define VT_OPTIONS_LAYER_BYTES 8192

typedef struct vt_option_layer {
    const char *section;         /* its ini section; its keys are "section.name" */
    const char *const *names;    /* [n_keys] ini keys in the section, [a-z0-9_]+ */
    const char *const *accepted; /* [n_keys] the tail of "accepted values are ..." */
    int n_keys;                  /* 1..VT_OPTIONS_LAYER_KEYS_MAX */
    size_t values_size;          /* the layer's values, at most VT_OPTIONS_LAYER_BYTES */
    void (*defaults)(void *values);
    /* Validate value for key k and store it: false = refused, values untouched. */
    bool (*store)(void *values, int k, const char *value);
    /* Key k's value as store would accept it, into buf. */
    void (*show)(const void *values, int k, char *buf, size_t size);
} vt_option_layer;

typedef struct vt_options {
    /* [runtime] */
    char backend[64];        /* preferred backend; "" (default) = the loaded one with the highest probe score */
    char fallback[64];       /* backend for nodes the preferred one declines; "none" = refuse; "" (default) =
                                the highest-scoring loaded backend other than the preferred one */
    int32_t threads;         /* 1..1024; default = vt_usable_cpus() (capped at 1024) */
    int32_t batch_size;      /* max tokens per prefill call, 1..65536; default 512 */
    int32_t max_seqs;        /* sequences per step of a batch (vt_batch), 1..256; default 1 */
    int32_t token_budget;    /* tokens per scheduler step, 0..65536; 0 (default) = the batch size */
    int32_t prefill_chunk;   /* prompt tokens in a step that also decodes, 0..65536; 0 (default) = automatic */
    int32_t max_waiting;     /* requests queued before vt_batch_add refuses, 1..1048576; default 256 */
    /* [kv_cache] */
    int32_t kv_cache_dtype;  /* VT_F32, VT_F16 or VT_BF16; default VT_F16 */
    char kv_cache_dtype_source[VT_SOURCE_SIZE];
    int64_t ctx_size;        /* tokens, 0..1<<24; 0 = min(model context length, 4096) */
    int32_t block_size;      /* tokens per KV block, a power of two 1..256; default 16 */
    bool prefix_cache;       /* share the KV blocks of common prompt beginnings; default on */
    int32_t prefix_cache_blocks; /* at most that many unheld blocks stay cached; 0 (default) = no limit */
    /* [backends] */
    char backend_path[1024]; /* extra colon-separated search folders; "" = none */
    /* [sampling] */
    float temp;              /* 0 = greedy; default 0.8 */
    int32_t top_k;           /* 0 or -1 = off; default 40 */
    float top_p;             /* 1 = off; default 0.95 */
    float min_p;             /* 0 = off; default 0.05 */
    uint64_t seed;           /* the fixed seed when !seed_random */
    bool seed_random;        /* default true ("-1"): each run or request draws a fresh seed (vt_seed_draw) */
    /* [backend.NAME] key = value sections and --backend-option NAME.key=value:
     * "NAME.key=value\n" lines, handed to backend NAME's init as
     * config->options "key=value,key=value" (the registry splits them). */
    char backend_options[1024];
    /* "NAME.key\tSOURCE\n" for each of them ("cli", "backends", "ini LINE", "api"), so
     * an error about one names where it was set. */
    char backend_option_sources[1024];
    /* the ini file read, if any */
    char config_path[1024];
    /* The plan check (core/plan.h, vt_plan_run): the first run of each plan
     * re-offers every node, as executed, to its backend. Not an ini key:
     * default on in builds with assertions (Debug, sanitizers), off in
     * Release; the environment switch VT_CHECK_PLAN=1|0 overrides it.
     * check_plan_source is "default" or "env VT_CHECK_PLAN". */
    bool check_plan;
    char check_plan_source[VT_SOURCE_SIZE];
    /* The declared layer's values (vt_options_layer_values). */
    _Alignas(16) unsigned char layer_values[VT_OPTIONS_LAYER_BYTES];
    /* sources of every key, the library's in the order above then the
     * layer's, for `vt config`/--explain (index i belongs to
     * vt_options_key(i)); kv_cache_dtype_source mirrors the kv_cache.dtype
     * entry. Read them through vt_options_source(). */
    char source[VT_OPTIONS_KEY_COUNT + VT_OPTIONS_LAYER_KEYS_MAX][VT_SOURCE_SIZE];
} vt_options;

/* Declare the layer above the library (its table must outlive every use;
 * NULL: none). Once per process, before vt_options_defaults is first called:
 * options made earlier hold no values for it. VT_ERR_INVALID for a table
 * that breaks the limits above or names a section or key the library has. */
vt_status vt_options_declare_layer(const vt_option_layer *layer, vt_error *err);
/* The declared layer's values inside o (what its defaults and store wrote). */
void *vt_options_layer_values(vt_options *o);
const void *vt_options_layer_values_of(const vt_options *o);

/* Defaults (no files, no environment). */
void vt_options_defaults(vt_options *o);

/* Apply the ini file (path, or VT_CONFIG if path is NULL/empty; nothing if
 * neither), then the environment (VT_BACKEND, VT_THREADS, VT_KV_CACHE_DTYPE,
 * VT_KV_CACHE_F32, VT_CTX_SIZE, VT_CHECK_PLAN; VT_BACKEND_PATH is read by the
 * registry, not here). Call after vt_options_defaults and before applying CLI flags with
 * vt_options_set(..., "cli"). Unknown sections/keys in the ini are errors
 * naming the line. */
vt_status vt_options_load(vt_options *o, const char *config_path, vt_error *err);
/* vt_options_load, VT_CONFIG taken for a NULL or empty path only when
 * or_vt_config (libvt's "" is no file at all). */
vt_status vt_options_load_from(vt_options *o, const char *config_path, bool or_vt_config, vt_error *err);

/* Set one knob by its ini name ("kv_cache.dtype", "runtime.threads", ...)
 * from a string, recording `source` ("cli", "env X", "ini N"). Validates and
 * errors with the accepted values. Used by the ini handler, the environment
 * and the CLI alike so every path validates the same way. */
vt_status vt_options_set(vt_options *o, const char *key, const char *value, const char *source, vt_error *err);

/* A backend's own option, "NAME.key" = value (from [backend.NAME] or the
 * CLI's --backend-option). Names [a-z0-9_-]{1,63}; keys [a-z0-9_]{1,63};
 * values without ',', '=' or control characters. The backend validates it at
 * init (a bad one refuses the backend with its reason). */
vt_status vt_options_set_backend_option(vt_options *o, const char *name_dot_key, const char *value, vt_error *err);
/* The same, recording where it was set ("cli", "backends" for a --backends
 * entry's own options, "ini LINE", "api"); the
 * plain call records "cli". */
vt_status vt_options_set_backend_option_from(vt_options *o, const char *name_dot_key, const char *value,
                                             const char *source, vt_error *err);
/* Where NAME.key was set, into buf; NULL when unknown. */
const char *vt_options_backend_option_source(const vt_options *o, const char *name_dot_key, char *buf, size_t size);

/* Source of a knob ("default" if never set); NULL for an unknown key. */
const char *vt_options_source(const vt_options *o, const char *key);
/* A source for a message: an ini line ("ini 4") as "FILE:4" of o's config
 * file, any other as it is ("env VT_X", "cli"). */
const char *vt_options_where(const vt_options *o, const char *source, char *buf, size_t size);
/* A source's precedence: the command line (3) over the environment (2)
 * over the ini file (1) over the default and anything else (0). */
int vt_options_source_rank(const char *source);

/* The i-th knob's ini name ("runtime.backend", ...), i in
 * 0..vt_options_key_count()-1: the library's in declaration order, then the
 * declared layer's; NULL otherwise. */
const char *vt_options_key(int i);
int vt_options_key_count(void);

/* The knob's current value as vt_options_set would accept it ("f16", "512",
 * "0.8"), into buf. VT_ERR_INVALID for an unknown key. */
vt_status vt_options_value(const vt_options *o, const char *key, char *buf, size_t size, vt_error *err);

/* The strict parsing every knob gets, for a layer's store: a decimal
 * integer in lo..hi (no sign but '-', no spaces, no junk), a finite number
 * (no leading spaces); false refuses. And a number printed with the fewest
 * digits that read back as the same double. */
bool vt_options_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool vt_options_parse_number(const char *s, double *out);
void vt_options_show_number(char *buf, size_t size, double v);

/* A fresh seed from the system's entropy, in 0..2^32-1 so that it reads
 * back everywhere a seed is taken (command line, ini, a JSON request). */
uint64_t vt_seed_draw(void);

/* The seed a run uses: o->seed, or a fresh one when o->seed_random. */
uint64_t vt_options_run_seed(const vt_options *o);

#endif
