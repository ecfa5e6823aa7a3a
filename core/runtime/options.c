/* options.c — every runtime knob: defaults, ini file, environment, CLI.
 *
 * One table (option_specs) names each knob, its ini section/key and how its
 * string form is validated; the ini handler, the environment and the CLI all
 * go through set_option() so a value is checked the same way whatever its
 * origin. vt_options_load() works on a copy and commits only on success, so a
 * failed load leaves the caller's options as they were.
 *
 * Environment variables (read by vt_options_load, after the ini file):
 *   VT_CONFIG           ini file to read when no path is passed ("" = none)
 *   VT_BACKEND          runtime.backend
 *   VT_THREADS          runtime.threads
 *   VT_CTX_SIZE         kv_cache.ctx_size
 *   VT_KV_CACHE_F32     "1" = kv_cache.dtype f32, "0" = no effect
 *   VT_KV_CACHE_DTYPE   kv_cache.dtype (ranks above VT_KV_CACHE_F32)
 *   VT_CHECK_PLAN       "1" = re-offer every node as executed on a plan's
 *                       first run, "0" = don't (not a knob: no ini key)
 * A variable that is set is validated even when empty: "VT_THREADS=" is an
 * error, not a silent default (VT_CONFIG excepted, as options.h says). */
#include "options.h"
#include "sampling_rules.h"
#include "usable_cpus.h"
#include "vt/vt.h"

#include <errno.h>
#include <stdarg.h>
#include <ini.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- ranges ------------------------------------------------------------ */

#define THREADS_MAX 1024
#define BATCH_SIZE_MAX 65536
#define MAX_SEQS_MAX 256
/* The scheduler's queue array holds max_waiting pointers; 1 Mi keeps it small. */
#define MAX_WAITING_MAX (1 << 20)
/* 16 Mi tokens: far beyond any model we load, small enough that block
 * counts and byte sizes derived from it cannot overflow int64. */
#define CTX_SIZE_MAX (INT64_C(1) << 24)
#define BLOCK_SIZE_MAX 256
/* Values longer than this are shortened (with "...") inside error messages
 * so the reason after them still fits in a vt_error. */
#define SHOWN_VALUE_MAX 80

/* ---- the knobs ---------------------------------------------------------- */

typedef enum option_id {
    OPT_BACKEND,
    OPT_FALLBACK,
    OPT_THREADS,
    OPT_BATCH_SIZE,
    OPT_MAX_SEQS,
    OPT_TOKEN_BUDGET,
    OPT_PREFILL_CHUNK,
    OPT_MAX_WAITING,
    OPT_KV_CACHE_DTYPE,
    OPT_CTX_SIZE,
    OPT_BLOCK_SIZE,
    OPT_PREFIX_CACHE,
    OPT_PREFIX_CACHE_BLOCKS,
    OPT_BACKEND_PATH,
    OPT_TEMP,
    OPT_TOP_K,
    OPT_TOP_P,
    OPT_MIN_P,
    OPT_SEED,
    OPT_COUNT
} option_id;

_Static_assert(OPT_COUNT == VT_OPTIONS_KEY_COUNT, "options.h's key count must match option_specs");

/* Ids OPT_COUNT.. are the declared layer's keys, in its order. */
#define MAX_KEYS (OPT_COUNT + VT_OPTIONS_LAYER_KEYS_MAX)

typedef struct option_spec {
    const char *key;     /* "section.name", the vt_options_set name */
    const char *section; /* ini section */
    const char *name;    /* ini key */
    const char *accepted; /* the tail of "accepted values are ..." */
} option_spec;

static const option_spec option_specs[OPT_COUNT] = {
    [OPT_BACKEND] = {"runtime.backend", "runtime", "backend",
                     "backend names of 1 to 63 characters from a-z, 0-9, _ and -, auto (placement by measured cost), or empty "
                     "for automatic"},
    [OPT_FALLBACK] = {"runtime.fallback", "runtime", "fallback",
                      "backend names of 1 to 63 characters from a-z, 0-9, _ and -, none, or empty for automatic"},
    [OPT_THREADS] = {"runtime.threads", "runtime", "threads", "integers 1..1024"},
    [OPT_BATCH_SIZE] = {"runtime.batch_size", "runtime", "batch_size", "integers 1..65536"},
    [OPT_MAX_SEQS] = {"runtime.max_seqs", "runtime", "max_seqs", "integers 1..256"},
    [OPT_TOKEN_BUDGET] = {"runtime.token_budget", "runtime", "token_budget",
                          "0 (the batch size) or integers 1..65536"},
    [OPT_PREFILL_CHUNK] = {"runtime.prefill_chunk", "runtime", "prefill_chunk",
                           "0 (automatic: prompt tokens taking about one decode step's time) or integers 1..65536"},
    [OPT_MAX_WAITING] = {"runtime.max_waiting", "runtime", "max_waiting", "integers 1..1048576"},
    [OPT_KV_CACHE_DTYPE] = {"kv_cache.dtype", "kv_cache", "dtype", "f32, f16, bf16, q8_0"},
    [OPT_CTX_SIZE] = {"kv_cache.ctx_size", "kv_cache", "ctx_size",
                      "0 (automatic: the smaller of the model's context length and 4096) or integers 1..16777216"},
    [OPT_BLOCK_SIZE] = {"kv_cache.block_size", "kv_cache", "block_size", "powers of two 1..256"},
    [OPT_PREFIX_CACHE] = {"kv_cache.prefix_cache", "kv_cache", "prefix_cache",
                          "1 or 0 (1 = requests share the KV blocks of a common prompt beginning)"},
    [OPT_PREFIX_CACHE_BLOCKS] = {"kv_cache.prefix_cache_blocks", "kv_cache", "prefix_cache_blocks",
                                 "0 (no limit: cached blocks stay until their room is needed) or integers "
                                 "1..16777216 (at most that many blocks no request holds stay cached)"},
    [OPT_BACKEND_PATH] = {"backends.path", "backends", "path",
                          "colon-separated folders, at most 1023 characters in all"},
    /* accepted: NULL = the sampling rule's (sampling_rules.c) */
    [OPT_TEMP] = {"sampling.temp", "sampling", "temp", NULL},
    [OPT_TOP_K] = {"sampling.top_k", "sampling", "top_k", NULL},
    [OPT_TOP_P] = {"sampling.top_p", "sampling", "top_p", NULL},
    [OPT_MIN_P] = {"sampling.min_p", "sampling", "min_p", NULL},
    [OPT_SEED] = {"sampling.seed", "sampling", "seed",
                  "-1 (a fresh random seed for each run and request) or integers 0..9223372036854775807"},
};

/* ---- the layer above the library ----------------------------------------
 * Declared once at start-up (vt_options_declare_layer); its keys follow the
 * library's in one id space, so every path below handles both alike. */

static const vt_option_layer *layer;
static char layer_keys[VT_OPTIONS_LAYER_KEYS_MAX][128]; /* "section.name" */

static int key_count(void) { return OPT_COUNT + (layer ? layer->n_keys : 0); }

static bool is_layer_key(int id) { return id >= OPT_COUNT; }

static const char *key_of(int id) { return is_layer_key(id) ? layer_keys[id - OPT_COUNT] : option_specs[id].key; }

static const char *section_of(int id) { return is_layer_key(id) ? layer->section : option_specs[id].section; }

static const char *name_of(int id) { return is_layer_key(id) ? layer->names[id - OPT_COUNT] : option_specs[id].name; }

static int find_option(const char *key) {
    for (int i = 0; i < key_count(); i++)
        if (strcmp(key_of(i), key) == 0) return i;
    return -1;
}

static int find_ini_option(const char *section, const char *name) {
    for (int i = 0; i < key_count(); i++)
        if (strcmp(section_of(i), section) == 0 && strcmp(name_of(i), name) == 0) return i;
    return -1;
}

/* "[runtime], [kv_cache], ..., [backend.NAME]": every section in key order. */
static void list_sections(char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < key_count() && used < size; i++) {
        if (i > 0 && strcmp(section_of(i), section_of(i - 1)) == 0) continue;
        int n = snprintf(buf + used, size - used, "[%s], ", section_of(i));
        if (n < 0) return;
        used += (size_t)n;
    }
    if (used < size) snprintf(buf + used, size - used, "[backend.NAME]");
}

static bool is_section_name(const char *s) {
    if (!s || !*s || strlen(s) > 63) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_')) return false;
    return true;
}

vt_status vt_options_declare_layer(const vt_option_layer *l, vt_error *err) {
    if (!l) {
        layer = NULL;
        return VT_OK;
    }
    if (!is_section_name(l->section) || strcmp(l->section, "backend") == 0 || l->n_keys < 1 ||
        l->n_keys > VT_OPTIONS_LAYER_KEYS_MAX || l->values_size > VT_OPTIONS_LAYER_BYTES || !l->names ||
        !l->accepted || !l->defaults || !l->store || !l->show)
        return vt_fail(err, VT_ERR_INVALID, "option layer [%s]: a section of [a-z0-9_], 1..%d keys, values of at "
                       "most %d bytes and every function are required",
                       l->section ? l->section : "(null)", VT_OPTIONS_LAYER_KEYS_MAX, VT_OPTIONS_LAYER_BYTES);
    for (int i = 0; i < OPT_COUNT; i++)
        if (strcmp(option_specs[i].section, l->section) == 0)
            return vt_fail(err, VT_ERR_INVALID, "option layer [%s]: the library has that section", l->section);
    for (int k = 0; k < l->n_keys; k++) {
        if (!is_section_name(l->names[k]) || !l->accepted[k])
            return vt_fail(err, VT_ERR_INVALID, "option layer [%s]: key %d needs a name of [a-z0-9_] and its "
                           "accepted values", l->section, k);
        snprintf(layer_keys[k], sizeof layer_keys[k], "%s.%s", l->section, l->names[k]);
    }
    layer = l;
    return VT_OK;
}

void *vt_options_layer_values(vt_options *o) { return layer ? o->layer_values : NULL; }

const void *vt_options_layer_values_of(const vt_options *o) { return layer ? o->layer_values : NULL; }

/* "backend.NAME": a backend's own section (see vt_options_set_backend_option). */
static bool is_backend_section(const char *section, size_t len) {
    static const char prefix[] = "backend.";
    if (len <= sizeof prefix - 1 || len - (sizeof prefix - 1) > 63 || strncmp(section, prefix, sizeof prefix - 1) != 0)
        return false;
    for (size_t i = sizeof prefix - 1; i < len; i++) {
        char ch = section[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-')) return false;
    }
    return true;
}

static bool is_known_section(const char *section, size_t len) {
    if (is_backend_section(section, len)) return true;
    for (int i = 0; i < key_count(); i++)
        if (strlen(section_of(i)) == len && strncmp(section_of(i), section, len) == 0) return true;
    return false;
}

/* "backend, fallback, threads, batch_size" for a section, into buf. */
static void list_section_keys(const char *section, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < key_count() && used < size; i++) {
        if (strcmp(section_of(i), section) != 0) continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", name_of(i));
        if (n < 0) break;
        used += (size_t)n;
    }
}

/* ---- strict parsing ----------------------------------------------------- */

/* Decimal integer, optional leading '-', nothing else: no spaces, no '+', no
 * hex, no trailing junk, no overflow. */
static bool parse_int64(const char *s, int64_t *out) {
    const char *digits = s[0] == '-' ? s + 1 : s;
    if (*digits < '0' || *digits > '9') return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end != '\0') return false;
    *out = v;
    return true;
}

static bool parse_int_range(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    int64_t v;
    if (!parse_int64(s, &v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool vt_options_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) { return parse_int_range(s, lo, hi, out); }

/* Unsigned 64-bit: strtoull would accept "-1" and wrap it, so digits only. */
static bool parse_u64(const char *s, uint64_t *out) {
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end != '\0') return false;
    *out = v;
    return true;
}

/* A finite number; the caller checks the range. Leading spaces rejected
 * (strtod would skip them) so every origin parses alike. */
static bool parse_finite(const char *s, double *out) {
    if (*s == '\0' || *s == ' ' || *s == '\t' || *s == '\n') return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno == ERANGE || *end != '\0' || !isfinite(v)) return false;
    *out = v;
    return true;
}

bool vt_options_parse_number(const char *s, double *out) { return parse_finite(s, out); }

static bool is_backend_name(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 63) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    }
    return true;
}

static bool parse_dtype(const char *s, int32_t *out) {
    if (strcmp(s, "f32") == 0) *out = VT_F32;
    else if (strcmp(s, "f16") == 0) *out = VT_F16;
    else if (strcmp(s, "bf16") == 0) *out = VT_BF16;
    else if (strcmp(s, "q8_0") == 0) *out = VT_Q8_0;
    else return false;
    return true;
}

static const char *dtype_name(int32_t dtype) {
    switch (dtype) {
    case VT_F32: return "f32";
    case VT_F16: return "f16";
    case VT_BF16: return "bf16";
    case VT_Q8_0: return "q8_0";
    default: return "?";
    }
}

/* Validate `value` for knob `id` and store it in o; false leaves o untouched. */
static bool store_value(vt_options *o, int id, const char *value) {
    if (is_layer_key(id)) return layer->store(o->layer_values, id - OPT_COUNT, value);
    int64_t i64;
    uint64_t u64;
    double d;
    switch ((option_id)id) {
    case OPT_BACKEND:
        if (value[0] != '\0' && !is_backend_name(value)) return false;
        snprintf(o->backend, sizeof o->backend, "%s", value);
        return true;
    case OPT_FALLBACK:
        if (value[0] != '\0' && !is_backend_name(value)) return false; /* "none" is a valid name too */
        snprintf(o->fallback, sizeof o->fallback, "%s", value);
        return true;
    case OPT_THREADS:
        if (!parse_int_range(value, 1, THREADS_MAX, &i64)) return false;
        o->threads = (int32_t)i64;
        return true;
    case OPT_BATCH_SIZE:
        if (!parse_int_range(value, 1, BATCH_SIZE_MAX, &i64)) return false;
        o->batch_size = (int32_t)i64;
        return true;
    case OPT_MAX_SEQS:
        if (!parse_int_range(value, 1, MAX_SEQS_MAX, &i64)) return false;
        o->max_seqs = (int32_t)i64;
        return true;
    case OPT_TOKEN_BUDGET:
        if (!parse_int_range(value, 0, BATCH_SIZE_MAX, &i64)) return false;
        o->token_budget = (int32_t)i64;
        return true;
    case OPT_PREFILL_CHUNK:
        if (!parse_int_range(value, 0, BATCH_SIZE_MAX, &i64)) return false;
        o->prefill_chunk = (int32_t)i64;
        return true;
    case OPT_MAX_WAITING:
        if (!parse_int_range(value, 1, MAX_WAITING_MAX, &i64)) return false;
        o->max_waiting = (int32_t)i64;
        return true;
    case OPT_KV_CACHE_DTYPE: return parse_dtype(value, &o->kv_cache_dtype);
    case OPT_CTX_SIZE:
        if (!parse_int_range(value, 0, CTX_SIZE_MAX, &i64)) return false;
        o->ctx_size = i64;
        return true;
    case OPT_BLOCK_SIZE:
        if (!parse_int_range(value, 1, BLOCK_SIZE_MAX, &i64) || (i64 & (i64 - 1)) != 0) return false;
        o->block_size = (int32_t)i64;
        return true;
    case OPT_PREFIX_CACHE:
        if (strcmp(value, "1") != 0 && strcmp(value, "0") != 0) return false;
        o->prefix_cache = value[0] == '1';
        return true;
    case OPT_PREFIX_CACHE_BLOCKS:
        if (!parse_int_range(value, 0, 16777216, &i64)) return false;
        o->prefix_cache_blocks = (int32_t)i64;
        return true;
    case OPT_BACKEND_PATH:
        if (strlen(value) >= sizeof o->backend_path) return false;
        snprintf(o->backend_path, sizeof o->backend_path, "%s", value);
        return true;
    case OPT_TEMP:
        if (!parse_finite(value, &d) || !vt_sampling_accepts(VT_KNOB_TEMPERATURE, d)) return false;
        o->temp = (float)d;
        return true;
    case OPT_TOP_K:
        if (!parse_int_range(value, INT32_MIN, INT32_MAX, &i64) || !vt_sampling_accepts(VT_KNOB_TOP_K, (double)i64))
            return false;
        o->top_k = (int32_t)i64;
        return true;
    case OPT_TOP_P:
        if (!parse_finite(value, &d) || !vt_sampling_accepts(VT_KNOB_TOP_P, d)) return false;
        o->top_p = (float)d;
        return true;
    case OPT_MIN_P:
        if (!parse_finite(value, &d) || !vt_sampling_accepts(VT_KNOB_MIN_P, d)) return false;
        o->min_p = (float)d;
        return true;
    case OPT_SEED:
        if (strcmp(value, "-1") == 0) {
            o->seed_random = true;
            o->seed = 0;
            return true;
        }
        if (!parse_u64(value, &u64) || u64 > (uint64_t)VT_SEED_MAX) return false;
        o->seed = u64;
        o->seed_random = false;
        return true;
    case OPT_COUNT: break;
    }
    return false;
}

static void record_source(vt_options *o, int id, const char *source) {
    snprintf(o->source[id], sizeof o->source[id], "%s", source);
    if (id == OPT_KV_CACHE_DTYPE)
        snprintf(o->kv_cache_dtype_source, sizeof o->kv_cache_dtype_source, "%s", source);
}

/* The value as shown in a message: long ones shortened so the reason fits. */
static void shown_value(const char *value, char *buf, size_t size) {
    if (strlen(value) > SHOWN_VALUE_MAX) snprintf(buf, size, "%.*s...", SHOWN_VALUE_MAX, value);
    else snprintf(buf, size, "%s", value);
}

/* What option id accepts, in words: its spec's, or its sampling rule's. */
static const char *option_accepted(int id) {
    switch (id) {
    case OPT_TEMP: return vt_sampling_rule_of(VT_KNOB_TEMPERATURE)->accepted;
    case OPT_TOP_K: return vt_sampling_rule_of(VT_KNOB_TOP_K)->accepted;
    case OPT_TOP_P: return vt_sampling_rule_of(VT_KNOB_TOP_P)->accepted;
    case OPT_MIN_P: return vt_sampling_rule_of(VT_KNOB_MIN_P)->accepted;
    default: return is_layer_key(id) ? layer->accepted[id - OPT_COUNT] : option_specs[id].accepted;
    }
}

/* Validate + store + record, with an error that says where the value came
 * from: "VT_X=v", "FILE:LINE: [section] name = v" or "section.name = v". */
static vt_status set_option(vt_options *o, int id, const char *value, const char *source, vt_error *err) {
    if (store_value(o, id, value)) {
        record_source(o, id, source);
        return VT_OK;
    }
    const char *accepted = option_accepted(id);
    char shown[SHOWN_VALUE_MAX + 4];
    shown_value(value, shown, sizeof shown);
    if (strncmp(source, "env ", 4) == 0)
        return vt_fail(err, VT_ERR_INVALID, "%s=%s: accepted values are %s", source + 4, shown, accepted);
    if (strncmp(source, "ini ", 4) == 0)
        return vt_fail(err, VT_ERR_INVALID, "%s:%s: [%s] %s = %s: accepted values are %s", o->config_path,
                       source + 4, section_of(id), name_of(id), shown, accepted);
    return vt_fail(err, VT_ERR_INVALID, "%s = %s: accepted values are %s", key_of(id), shown, accepted);
}

/* ---- public: defaults, set, source, value ------------------------------- */

static int32_t default_threads(void) {
    const int32_t n = vt_usable_cpus();
    return n > THREADS_MAX ? THREADS_MAX : n;
}

void vt_options_defaults(vt_options *o) {
    memset(o, 0, sizeof *o);
    o->backend[0] = '\0';
    o->fallback[0] = '\0';
    o->threads = default_threads();
    o->batch_size = 512;
    o->max_seqs = 1;
    o->token_budget = 0;
    o->prefill_chunk = 0;
    o->max_waiting = 256;
    o->kv_cache_dtype = VT_F16;
    o->ctx_size = 0;
    o->block_size = 16;
    o->prefix_cache = true;
    o->prefix_cache_blocks = 0;
    o->backend_path[0] = '\0';
    o->temp = (float)vt_sampling_rule_of(VT_KNOB_TEMPERATURE)->preset;
    o->top_k = (int32_t)vt_sampling_rule_of(VT_KNOB_TOP_K)->preset;
    o->top_p = (float)vt_sampling_rule_of(VT_KNOB_TOP_P)->preset;
    o->min_p = (float)vt_sampling_rule_of(VT_KNOB_MIN_P)->preset;
    o->seed = 0;
    o->seed_random = true; /* sampled text differs run to run unless a seed is given */
    o->config_path[0] = '\0';
#ifdef NDEBUG
    o->check_plan = false; /* Release: the switch costs nothing when off */
#else
    o->check_plan = true;  /* builds with assertions check every plan they run */
#endif
    snprintf(o->check_plan_source, sizeof o->check_plan_source, "default");
    if (layer) layer->defaults(o->layer_values);
    for (int i = 0; i < key_count(); i++) record_source(o, i, "default");
}

vt_status vt_options_set(vt_options *o, const char *key, const char *value, const char *source, vt_error *err) {
    if (!o || !key || !value || !source) return vt_fail(err, VT_ERR_INVALID, "vt_options_set: NULL argument");
    int id = find_option(key);
    if (id < 0) {
        char keys[512];
        size_t used = 0;
        keys[0] = '\0';
        for (int i = 0; i < key_count() && used < sizeof keys; i++)
            used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", i ? ", " : "", key_of(i));
        return vt_fail(err, VT_ERR_INVALID, "unknown option '%s'; known options are %s", key, keys);
    }
    return set_option(o, id, value, source, err);
}

static bool option_chars(const char *s, bool value) {
    if (!*s || strlen(s) > 63) return false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (value ? (ch < 0x21 || ch == 0x7f || ch == ',' || ch == '=')
                  : !((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* Remove the lines of buf that start with "KEY" + sep. */
static void drop_lines(char *buf, const char *key, char sep) {
    size_t key_len = strlen(key);
    for (char *line = buf; *line;) {
        char *end = strchr(line, '\n');
        size_t line_len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, key, key_len) == 0 && line[key_len] == sep)
            memmove(line, line + line_len, strlen(line + line_len) + 1);
        else
            line += line_len;
    }
}

vt_status vt_options_set_backend_option(vt_options *o, const char *name_dot_key, const char *value, vt_error *err) {
    return vt_options_set_backend_option_from(o, name_dot_key, value, "cli", err);
}

vt_status vt_options_set_backend_option_from(vt_options *o, const char *name_dot_key, const char *value,
                                             const char *source, vt_error *err) {
    if (!o || !name_dot_key || !value || !source)
        return vt_fail(err, VT_ERR_INVALID, "backend option: NULL argument");
    const char *dot = strchr(name_dot_key, '.');
    char name[64];
    size_t len = dot ? (size_t)(dot - name_dot_key) : 0;
    if (!dot || len == 0 || len >= sizeof name)
        return vt_fail(err, VT_ERR_INVALID, "backend option '%s': expected NAME.key=value", name_dot_key);
    memcpy(name, name_dot_key, len);
    name[len] = '\0';
    if (!option_chars(name, false) || !option_chars(dot + 1, false) || !option_chars(value, true))
        return vt_fail(err, VT_ERR_INVALID,
                       "backend option %s = %s: names and keys are [a-z0-9_-], values have no spaces, ',' or '='",
                       name_dot_key, value);
    /* A later setting of the same NAME.key replaces the earlier one (the
     * command line over the ini, as for every knob), so the backend never
     * sees one key twice. */
    char lines[sizeof o->backend_options];
    memcpy(lines, o->backend_options, sizeof lines);
    drop_lines(lines, name_dot_key, '=');
    size_t used = strlen(lines);
    int n = snprintf(lines + used, sizeof lines - used, "%s=%s\n", name_dot_key, value);
    if (n < 0 || (size_t)n >= sizeof lines - used)
        return vt_fail(err, VT_ERR_INVALID, "backend options: more than %zu bytes in all",
                       sizeof o->backend_options - 1);
    memcpy(o->backend_options, lines, sizeof lines);
    /* Where it came from, for errors; a source that does not fit is only
     * left unnamed (the option itself is kept). */
    drop_lines(o->backend_option_sources, name_dot_key, '\t');
    used = strlen(o->backend_option_sources);
    n = snprintf(o->backend_option_sources + used, sizeof o->backend_option_sources - used, "%s\t%s\n",
                 name_dot_key, source);
    if (n < 0 || (size_t)n >= sizeof o->backend_option_sources - used) o->backend_option_sources[used] = '\0';
    return VT_OK;
}

const char *vt_options_backend_option_source(const vt_options *o, const char *name_dot_key, char *buf, size_t size) {
    size_t key_len = strlen(name_dot_key);
    for (const char *line = o->backend_option_sources; *line;) {
        const char *end = strchr(line, '\n');
        size_t line_len = end ? (size_t)(end - line) : strlen(line);
        if (strncmp(line, name_dot_key, key_len) == 0 && line[key_len] == '\t') {
            snprintf(buf, size, "%.*s", (int)(line_len - key_len - 1), line + key_len + 1);
            return buf;
        }
        line += line_len + (end ? 1 : 0);
    }
    return NULL;
}

const char *vt_options_source(const vt_options *o, const char *key) {
    int id = key ? find_option(key) : -1;
    if (!o || id < 0) return NULL;
    return o->source[id][0] ? o->source[id] : "default";
}

const char *vt_options_where(const vt_options *o, const char *source, char *buf, size_t size) {
    if (!source || strncmp(source, "ini ", 4) != 0 || !o->config_path[0]) return source;
    snprintf(buf, size, "%s:%s", o->config_path, source + 4);
    return buf;
}

int vt_options_source_rank(const char *source) {
    if (!source) return 0;
    if (strcmp(source, "cli") == 0) return 3;
    if (strncmp(source, "env ", 4) == 0) return 2;
    if (strncmp(source, "ini ", 4) == 0) return 1;
    return 0;
}

const char *vt_options_key(int i) { return i >= 0 && i < key_count() ? key_of(i) : NULL; }

int vt_options_key_count(void) { return key_count(); }

/* The fewest digits that read back as the same value through
 * vt_options_set (0.8, not 0.800000012): at most 9 for a float, 17 for a
 * double, which always round-trip. */
static void shortest_float(char *buf, size_t size, float v) {
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)v);
        if ((float)strtod(buf, NULL) == v) return; /* as vt_options_set reads it */
    }
}

void vt_options_show_number(char *buf, size_t size, double v) {
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) return;
    }
}

vt_status vt_options_value(const vt_options *o, const char *key, char *buf, size_t size, vt_error *err) {
    int id = key ? find_option(key) : -1;
    if (!o || !buf || size == 0) return vt_fail(err, VT_ERR_INVALID, "vt_options_value: NULL argument");
    if (id < 0) return vt_fail(err, VT_ERR_INVALID, "unknown option '%s'", key ? key : "(null)");
    if (is_layer_key(id)) {
        layer->show(o->layer_values, id - OPT_COUNT, buf, size);
        return VT_OK;
    }
    switch ((option_id)id) {
    case OPT_BACKEND: snprintf(buf, size, "%s", o->backend); break;
    case OPT_FALLBACK: snprintf(buf, size, "%s", o->fallback); break;
    case OPT_THREADS: snprintf(buf, size, "%" PRId32, o->threads); break;
    case OPT_BATCH_SIZE: snprintf(buf, size, "%" PRId32, o->batch_size); break;
    case OPT_MAX_SEQS: snprintf(buf, size, "%" PRId32, o->max_seqs); break;
    case OPT_TOKEN_BUDGET: snprintf(buf, size, "%" PRId32, o->token_budget); break;
    case OPT_PREFILL_CHUNK: snprintf(buf, size, "%" PRId32, o->prefill_chunk); break;
    case OPT_MAX_WAITING: snprintf(buf, size, "%" PRId32, o->max_waiting); break;
    case OPT_KV_CACHE_DTYPE: snprintf(buf, size, "%s", dtype_name(o->kv_cache_dtype)); break;
    case OPT_CTX_SIZE: snprintf(buf, size, "%" PRId64, o->ctx_size); break;
    case OPT_BLOCK_SIZE: snprintf(buf, size, "%" PRId32, o->block_size); break;
    case OPT_PREFIX_CACHE: snprintf(buf, size, "%d", o->prefix_cache ? 1 : 0); break;
    case OPT_PREFIX_CACHE_BLOCKS: snprintf(buf, size, "%" PRId32, o->prefix_cache_blocks); break;
    case OPT_BACKEND_PATH: snprintf(buf, size, "%s", o->backend_path); break;
    case OPT_TEMP: shortest_float(buf, size, o->temp); break;
    case OPT_TOP_K: snprintf(buf, size, "%" PRId32, o->top_k); break;
    case OPT_TOP_P: shortest_float(buf, size, o->top_p); break;
    case OPT_MIN_P: shortest_float(buf, size, o->min_p); break;
    case OPT_SEED:
        if (o->seed_random) snprintf(buf, size, "-1");
        else snprintf(buf, size, "%" PRIu64, o->seed);
        break;
    case OPT_COUNT: break;
    }
    return VT_OK;
}

/* ---- the ini file --------------------------------------------------------
 *
 * Debian's inih passes no line number to the handler (it was built without
 * INI_HANDLER_LINENO), so we feed it through ini_parse_stream with our own
 * reader: inih asks for one line, parses it (calling the handler at most
 * once), then asks for the next, so the count of lines handed out is the line
 * the handler is looking at. The reader also
 *  - refuses lines that do not fit inih's buffer (ini_max_line, 200 by
 *    default), which inih would otherwise silently cut and parse the rest of
 *    as a new line;
 *  - refuses NUL bytes, which would end inih's string early;
 *  - checks [section] headers, because inih calls the handler only for keys
 *    and an unknown empty section would otherwise pass unnoticed.
 * The handler refuses continuation lines (inih's multi-line values: an
 * indented line after a key is appended to it, which hides typos). */

typedef struct ini_state {
    vt_options *work;   /* the copy being filled; config_path set */
    FILE *file;
    char *line;         /* our copy of the current raw line (read_line_bounded's buffer) */
    const char *text;   /* line without a UTF-8 BOM, which inih skips too */
    size_t line_cap;
    int lineno;         /* line handed out last */
    int key_line[MAX_KEYS]; /* where each key was set, for duplicates */
    bool failed;        /* the first error is recorded; stop reading */
    vt_status code;     /* its status (err may be NULL) */
    int failed_line;    /* and its line */
    vt_error *err;
} ini_state;

static const char *skip_blanks(const char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n' || *s == '\f' || *s == '\v') s++;
    return s;
}

static void fail_at(ini_state *st, vt_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_at(ini_state *st, vt_status code, const char *fmt, ...) {
    char why[VT_ERROR_MSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    st->code = vt_fail(st->err, code, "%s:%d: %s", st->work->config_path, st->lineno, why);
    st->failed = true;
    st->failed_line = st->lineno;
}

/* The refusal of an unknown section. [server] gets its own words: it is vt
 * serve's section of the shared ini file, so a program on libvt alone (which
 * has no server layer) meets it in a file written for vt. */
static void fail_unknown_section(ini_state *st, const char *name, size_t len) {
    char sections[512];
    list_sections(sections, sizeof sections);
    if (len == 6 && strncmp(name, "server", 6) == 0) {
        fail_at(st, VT_ERR_FORMAT,
                "section [server] holds vt serve's settings, which this program does not read (libvt alone has "
                "no server): give it a file without that section; known sections are %s",
                sections);
        return;
    }
    fail_at(st, VT_ERR_FORMAT, "unknown section [%.*s]; known sections are %s", (int)(len > 64 ? 64 : len), name,
            sections);
}

/* A "[name]" header on this raw line names a known section? Mirrors inih:
 * the name is everything between '[' and the first ']', unstripped. */
static void check_section_header(ini_state *st, const char *raw) {
    const char *start = skip_blanks(raw);
    if (*start != '[') return;
    const char *close = strchr(start + 1, ']');
    if (!close) return; /* inih reports it as a syntax error */
    size_t len = (size_t)(close - (start + 1));
    /* vt serve's section in a program without a server layer is refused at
     * its first key (on_ini_key), not at its header: the installed template
     * (conf/vt.ini) has the header with every key commented out */
    if (len == 6 && strncmp(start + 1, "server", 6) == 0) return;
    if (!is_known_section(start + 1, len)) fail_unknown_section(st, start + 1, len);
}

/* getline() that stores at most `limit` bytes of one line: a "config file"
 * that is one endless line (/dev/zero, a pipe) must not make us buffer it
 * all. Returns the bytes stored ('\n' included when it came within limit), -1
 * at end of file before any byte; *cut when the line went on past limit. */
static ssize_t read_line_bounded(ini_state *st, size_t limit, bool *cut) {
    *cut = false;
    if (st->line_cap < limit + 1) {
        char *grown = realloc(st->line, limit + 1);
        if (!grown) {
            fail_at(st, VT_ERR_NOMEM, "out of memory reading the config file");
            return -1;
        }
        st->line = grown;
        st->line_cap = limit + 1;
    }
    size_t n = 0;
    int c = EOF;
    while (n < limit && (c = getc(st->file)) != EOF) {
        st->line[n++] = (char)c;
        if (c == '\n') break;
    }
    st->line[n] = '\0';
    if (n == 0 && c == EOF) return -1;
    *cut = n == limit && c != '\n' && c != EOF;
    return (ssize_t)n;
}

static char *read_ini_line(char *buf, int size, void *stream) {
    ini_state *st = stream;
    if (st->failed) return NULL; /* end the parse at the first error */
    if (size < 4) return NULL;
    bool cut;
    ssize_t n = read_line_bounded(st, (size_t)size, &cut);
    if (n < 0) return NULL;
    st->lineno++;
    if (cut) {
        fail_at(st, VT_ERR_FORMAT, "line is longer than %d characters, the most a line may have", size - 3);
        return NULL;
    }
    if ((size_t)n != strlen(st->line)) {
        fail_at(st, VT_ERR_FORMAT, "line contains a NUL byte");
        return NULL;
    }
    size_t content = (size_t)n;
    while (content > 0 && (st->line[content - 1] == '\n' || st->line[content - 1] == '\r')) content--;
    /* inih needs room for '\r', '\n' and '\0' after the text (ini.h). */
    if (size < 4 || content > (size_t)size - 3 || (size_t)n + 1 > (size_t)size) {
        fail_at(st, VT_ERR_FORMAT, "line is %zu characters long, longer than %d characters, the most a line may have",
                content, size - 3);
        return NULL;
    }
    st->text = st->line;
    if (st->lineno == 1 && strncmp(st->line, "\xEF\xBB\xBF", 3) == 0) st->text += 3;
    check_section_header(st, st->text);
    if (st->failed) return NULL;
    memcpy(buf, st->line, (size_t)n + 1);
    return buf;
}

/* Was this handler call made for the raw line's own "name = value", or is
 * the line an indented continuation of the previous key? */
static bool is_key_line(const char *raw, const char *name, const char *value) {
    const char *s = skip_blanks(raw);
    size_t delim = strcspn(s, "=:");
    if (s[delim] == '\0') return false;
    size_t name_len = delim;
    while (name_len > 0 && (s[name_len - 1] == ' ' || s[name_len - 1] == '\t')) name_len--;
    if (name_len != strlen(name) || strncmp(s, name, name_len) != 0) return false;
    const char *v = skip_blanks(s + delim + 1);
    return strncmp(v, value, strlen(value)) == 0;
}

static int on_ini_key(void *user, const char *section, const char *name, const char *value) {
    ini_state *st = user;
    if (st->failed) return 0;
    if (!is_key_line(st->text, name, value)) {
        fail_at(st, VT_ERR_FORMAT,
                "indented line would continue the value of '%s' (multi-line values are not supported); "
                "remove the leading whitespace",
                name);
        return 0;
    }
    char sections[512];
    list_sections(sections, sizeof sections);
    if (section[0] == '\0') {
        fail_at(st, VT_ERR_FORMAT, "'%s' is outside any section; known sections are %s", name, sections);
        return 0;
    }
    if (is_backend_section(section, strlen(section))) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", section + 8, name);
        char source[VT_SOURCE_SIZE];
        snprintf(source, sizeof source, "ini %d", st->lineno);
        st->code = vt_options_set_backend_option_from(st->work, key, value, source, st->err);
        if (st->code != VT_OK) {
            vt_error_prefix(st->err, "%s:%d: ", st->work->config_path, st->lineno);
            st->failed = true;
            st->failed_line = st->lineno;
            return 0;
        }
        return 1;
    }
    int id = find_ini_option(section, name);
    if (id < 0) {
        char keys[256];
        list_section_keys(section, keys, sizeof keys);
        if (keys[0] == '\0')
            fail_unknown_section(st, section, strlen(section));
        else
            fail_at(st, VT_ERR_FORMAT, "unknown key '%s' in [%s]; known keys are %s", name, section, keys);
        return 0;
    }
    if (st->key_line[id]) {
        fail_at(st, VT_ERR_FORMAT, "[%s] %s is set again (first on line %d)", section, name, st->key_line[id]);
        return 0;
    }
    char source[VT_SOURCE_SIZE];
    snprintf(source, sizeof source, "ini %d", st->lineno);
    st->code = set_option(st->work, id, value, source, st->err);
    if (st->code != VT_OK) {
        st->failed = true;
        st->failed_line = st->lineno;
        return 0;
    }
    st->key_line[id] = st->lineno;
    return 1;
}

/* Read `path` into `work` (whose config_path becomes path). `origin` names
 * where the path came from for the open error ("VT_CONFIG=" or ""). */
static vt_status load_ini(vt_options *work, const char *path, const char *origin, vt_error *err) {
    if (strlen(path) >= sizeof work->config_path)
        return vt_fail(err, VT_ERR_INVALID, "%sconfig file path is longer than %zu characters", origin,
                       sizeof work->config_path - 1);
    snprintf(work->config_path, sizeof work->config_path, "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) return vt_fail(err, VT_ERR_IO, "%scannot open config file %s: %s", origin, path, strerror(errno));
    ini_state st = {.work = work, .file = f, .err = err};
    int rc = ini_parse_stream(read_ini_line, &st, on_ini_key, &st);
    int read_errno = ferror(f) ? errno : 0;
    free(st.line);
    fclose(f);
    /* inih keeps going after a syntax error, so our own first error may be
     * on a later line than the syntax error it returns: report the earlier. */
    bool syntax_first = rc > 0 && (!st.failed || rc < st.failed_line);
    if (st.failed && !syntax_first) return st.code;
    if (read_errno) return vt_fail(err, VT_ERR_IO, "reading config file %s failed: %s", path, strerror(read_errno));
    if (rc == -2) return vt_fail(err, VT_ERR_NOMEM, "parsing config file %s: out of memory", path);
    if (rc != 0)
        return vt_fail(err, VT_ERR_FORMAT, "%s:%d: expected 'key = value', a [section] header or a ; comment", path,
                       rc);
    return VT_OK;
}

/* ---- the environment ---------------------------------------------------- */

static vt_status apply_env(vt_options *work, vt_error *err) {
    static const struct {
        const char *var;
        option_id id;
    } plain[] = {
        {"VT_BACKEND", OPT_BACKEND},
        {"VT_THREADS", OPT_THREADS},
        {"VT_CTX_SIZE", OPT_CTX_SIZE},
    };
    char source[VT_SOURCE_SIZE];
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        const char *v = getenv(plain[i].var);
        if (!v) continue;
        snprintf(source, sizeof source, "env %s", plain[i].var);
        vt_status s = set_option(work, plain[i].id, v, source, err);
        if (s != VT_OK) return s;
    }
    /* The f32 alias first so VT_KV_CACHE_DTYPE, applied after it, wins. */
    const char *f32 = getenv("VT_KV_CACHE_F32");
    if (f32) {
        if (strcmp(f32, "1") == 0) {
            set_option(work, OPT_KV_CACHE_DTYPE, "f32", "env VT_KV_CACHE_F32", err);
        } else if (strcmp(f32, "0") != 0) {
            char shown[SHOWN_VALUE_MAX + 4];
            shown_value(f32, shown, sizeof shown);
            return vt_fail(err, VT_ERR_INVALID,
                           "VT_KV_CACHE_F32=%s: accepted values are 1 or 0 (1 = f32 KV cache, 0 = no effect)", shown);
        }
    }
    const char *check = getenv("VT_CHECK_PLAN");
    if (check) {
        if (strcmp(check, "1") != 0 && strcmp(check, "0") != 0) {
            char shown[SHOWN_VALUE_MAX + 4];
            shown_value(check, shown, sizeof shown);
            return vt_fail(err, VT_ERR_INVALID,
                           "VT_CHECK_PLAN=%s: accepted values are 1 or 0 (1 = re-offer every node to its backend on a "
                           "plan's first run, 0 = don't)", shown);
        }
        work->check_plan = check[0] == '1';
        snprintf(work->check_plan_source, sizeof work->check_plan_source, "env VT_CHECK_PLAN");
    }
    const char *dtype = getenv("VT_KV_CACHE_DTYPE");
    if (dtype) return set_option(work, OPT_KV_CACHE_DTYPE, dtype, "env VT_KV_CACHE_DTYPE", err);
    return VT_OK;
}

vt_status vt_options_load(vt_options *o, const char *config_path, vt_error *err) {
    return vt_options_load_from(o, config_path, true, err);
}

vt_status vt_options_load_from(vt_options *o, const char *config_path, bool or_vt_config, vt_error *err) {
    if (!o) return vt_fail(err, VT_ERR_INVALID, "vt_options_load: NULL options");
    vt_options work = *o;
    const char *origin = "";
    if ((!config_path || !*config_path) && or_vt_config) {
        config_path = getenv("VT_CONFIG");
        origin = "VT_CONFIG: ";
    }
    if (config_path && *config_path) {
        vt_status s = load_ini(&work, config_path, origin, err);
        if (s != VT_OK) return s;
    }
    vt_status s = apply_env(&work, err);
    if (s != VT_OK) return s;
    *o = work;
    return VT_OK;
}

/* ---- seeds --------------------------------------------------------------- */

uint64_t vt_seed_draw(void) {
    uint32_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v;
    /* No entropy pool yet (early boot): the clock and the process id still
     * differ from run to run, which is all a sampling seed needs. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return x & UINT32_MAX;
}

uint64_t vt_options_run_seed(const vt_options *o) { return o->seed_random ? vt_seed_draw() : o->seed; }
