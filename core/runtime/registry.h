/* registry.h — discovering, validating and initialising backends.
 *
 * Discovery order, first match of a name wins and later files of the same name
 * are recorded as shadowed: the folders of VT_BACKEND_PATH (colon-separated),
 * then `[backends] path` from the ini (extra_path), then <dir of libvt.so>/vt
 * (the install's lib/vt, and build/lib/vt in the build tree). Files are named
 * libvt-backend-NAME.so. A file that fails any check (see vt_backend.h) is
 * recorded as refused with a one-line reason; the others still load.
 * Libraries are never dlclose'd. */
#ifndef VT_CORE_REGISTRY_H
#define VT_CORE_REGISTRY_H

#include <stdbool.h>

#include "error.h"
#include "vt/vt_backend.h"

typedef enum vt_backend_state {
    VT_BACKEND_LOADED = 0,
    VT_BACKEND_REFUSED = 1,  /* failed a check; reason says which */
    VT_BACKEND_SHADOWED = 2  /* same name found earlier in the search order */
} vt_backend_state;

typedef struct vt_backend_entry {
    char name[64];
    char path[1024];
    vt_backend_state state;
    char reason[256];         /* refused/shadowed: why (one line) */
    const vt_backend *table;  /* loaded: the backend's table */
    void *ctx;                /* loaded: its init context */
    uint32_t abi_major, abi_minor;
    int score;                /* loaded: its probe's score (1 without a probe); ranks the default backend */
    bool refused_by_init;     /* refused: its init failed (the one step that reads its options) */
    vt_status init_status;    /* refused_by_init: what init returned (VT_ERR_NOMEM: it ran out of memory) */
    char *owned_options;      /* a checked file's options (vt_registry_check_file); NULL in a registry */
} vt_backend_entry;

typedef struct vt_registry vt_registry;

/* Scan and load every backend. extra_path may be NULL. backend_options_ini:
 * "NAME.key=value\n" lines (vt_options.backend_options; NULL = none); backend
 * NAME gets its keys as config->options "key=value,...". Never fails because of
 * a bad backend (those are recorded as refused); fails only on NOMEM. */
vt_status vt_registry_create(const vt_host *host, const char *extra_path, const char *backend_options_ini,
                             vt_registry **out, vt_error *err);
void vt_registry_destroy(vt_registry *r);

/* Check one file without keeping it (vt backends --check, --test FILE): VT_OK
 * and its entry, or the refusal reason in err. backend_options_ini as
 * vt_registry_create's: the file's backend gets its keys (NULL = none). On
 * VT_OK the entry is LOADED with a live ctx (so supports() can be asked)
 * until vt_registry_release_checked(). */
vt_status vt_registry_check_file(const vt_host *host, const char *path, const char *backend_options_ini,
                                 vt_backend_entry *entry, vt_error *err);
/* The backend name a file libvt-backend-NAME.so holds; false when its name is not of that form. */
bool vt_registry_file_backend_name(const char *path, char *name, size_t size);
/* End what vt_registry_check_file started (the backend's shutdown); safe on a
 * refused entry and twice. */
void vt_registry_release_checked(vt_backend_entry *entry);

int vt_registry_count(const vt_registry *r);                 /* all entries, refused and shadowed too */
/* The folder of the backends installed with this vt (where its own
 * reference, simd and onednn are), into out [size]; "" when unknown. */
void vt_registry_installed_folder(char *out, size_t size);
/* The folders it looked in (VT_BACKEND_PATH's, [backends] path's, the
 * install's), in order, whether they held a backend or not. */
int vt_registry_n_folders(const vt_registry *r);
const char *vt_registry_folder(const vt_registry *r, int i);
/* Where it looked when it found no backend at all, into out [size]: the
 * folders searched, the install's folder when it does not exist, how to
 * name another. Returns snprintf's count. */
int vt_registry_describe_search(const vt_registry *r, char *out, size_t size);
const vt_backend_entry *vt_registry_at(const vt_registry *r, int i);
/* A loaded backend by name, or NULL. */
const vt_backend_entry *vt_registry_find(const vt_registry *r, const char *name);

/* Substitute every loaded backend's table with wrap(user, entry)'s result,
 * for tools that interpose on the op pointers (the --profile profiler). The
 * replacement must keep init/shutdown/supports, forward every op to the
 * original and live as long as the registry. A NULL result stops with
 * VT_ERR_NOMEM; entries already substituted keep their replacement. */
typedef const vt_backend *(*vt_table_wrap_fn)(void *user, const vt_backend_entry *entry);
vt_status vt_registry_wrap_tables(vt_registry *r, vt_table_wrap_fn wrap, void *user, vt_error *err);

/* Ask a loaded backend whether it runs node (its op pointer non-NULL and
 * supports() says yes). */
bool vt_backend_accepts(const vt_backend_entry *b, const vt_node *node);
/* Why the runtime never asks b about node (an op of a later minor than b's
 * table; a widened convention b does not read: its VT_CONVENTION_* name), or
 * NULL when it asks. */
const char *vt_backend_not_offered(const vt_backend_entry *b, const vt_node *node);
/* Offer one weight to b's prepare_weight (1.2): VT_OK with out->data NULL
 * when b declines or has no hook; an error with b's one-line reason in why.
 * A copy goes back through vt_backend_release_weight, before b's shutdown. */
vt_status vt_backend_prepare_weight(const vt_backend_entry *b, const vt_weight_offer *offer, vt_prepared_weight *out,
                                    char *why, size_t why_size);
void vt_backend_release_weight(const vt_backend_entry *b, void *data);
/* The instruction set b's kernels run at (1.3's isa), as one printable
 * line in buf; "not reported" when b does not say. Returns buf. Callers give
 * it VT_BACKEND_ISA_MAX bytes: a longer line is cut there. */
#define VT_BACKEND_ISA_MAX 256
/* The backends' options the registry was created with ("NAME.key=value\n"
 * lines, vt_options.backend_options), "" for none. */
const char *vt_registry_options(const vt_registry *r);
/* Whether an isa line says its backend multiplies in bf16 ("bf16 matmul":
 * onednn in bf16, simd's BF16 weights on its bf16 tier), which sets the
 * bound vt compare and the tests hold its results to. */
bool vt_isa_line_multiplies_bf16(const char *isa_line);
/* Whether an isa line says its backend's attention over a BF16 cache
 * multiplies in bf16 ("bf16 attention": simd's bf16 tier rounds queries
 * and softmax weights to bf16 there), the bound vt compare and the tests
 * then hold bf16-cache results to. */
bool vt_isa_line_attends_bf16(const char *isa_line);
/* Whether a backend's isa line says it multiplies some weights in int8
 * (onednn's precision=int8: "int8 matmul"), the other rounding vt compare
 * and the tests state a bound for. */
bool vt_isa_line_multiplies_int8(const char *isa_line);
const char *vt_backend_isa(const vt_backend_entry *b, char *buf, size_t size);
/* The instruction-set tiers b runs at here (1.6's tiers), best first, as
 * option assignments ("isa=avx2"): up to max of them into out (pointers
 * into b's strings, valid while b is loaded). Returns how many; 0 when b
 * does not list any. Entries that are not one key=value word are dropped. */
int vt_backend_tiers(const vt_backend_entry *b, const char **out, int max);
/* Run node on b (asserts the op pointer is non-NULL). */
vt_status vt_backend_run(const vt_backend_entry *b, const vt_node *node);

#endif
