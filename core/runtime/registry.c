/* registry.c — finding, checking and initialising backend shared objects.
 *
 * Every file named libvt-backend-NAME.so in the search folders becomes one
 * entry: loaded, refused (with the first check it failed, in the order of
 * vt_backend.h) or shadowed (an earlier folder had the same NAME). A bad
 * backend never stops the others from loading. */
#include "registry.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf_check.h"
#include "host.h"

#define FILE_PREFIX "libvt-backend-"
#define FILE_SUFFIX ".so"
#define BAD_NAME_REASON "file name '%s' does not give a backend name of [a-z0-9_-], up to 63 characters"

struct vt_registry {
    const vt_host *host;
    vt_backend_config config; /* handed to every init; outlives the backends */
    vt_backend_entry *entries;
    int count, capacity;
    char **folders_seen; /* realpaths of scanned folders, to scan each once */
    int n_folders;
    char install_missing[PATH_MAX]; /* the install's folder looked for and absent, or "" */
    const char *all_options; /* "NAME.key=value\n" lines (vt_options.backend_options), or NULL */
    char **option_strings;   /* per loaded backend "key=value,..." handed to init; freed at destroy */
    int n_option_strings;
};

/* Backend `name`'s options out of "NAME.key=value\n" lines (all, not
 * NULL), as "key=value,...", malloc'ed; NULL when out of memory. */
static char *options_of(const char *all, const char *name) {
    size_t name_len = strlen(name), used = 0;
    char *out = malloc(strlen(all) + 1);
    if (!out) return NULL;
    out[0] = '\0';
    for (const char *line = all; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > name_len + 1 && strncmp(line, name, name_len) == 0 && line[name_len] == '.') {
            if (used) out[used++] = ',';
            memcpy(out + used, line + name_len + 1, len - name_len - 1);
            used += len - name_len - 1;
            out[used] = '\0';
        }
        line += len + (end ? 1 : 0);
    }
    return out;
}

/* options_of, kept by the registry (a backend may keep config->options). */
static const char *options_for(vt_registry *r, const char *name) {
    if (!r->all_options || !*r->all_options) return "";
    char *out = options_of(r->all_options, name);
    char **list = out ? realloc(r->option_strings, (size_t)(r->n_option_strings + 1) * sizeof *list) : NULL;
    if (!list) {
        free(out);
        return NULL; /* the caller refuses the backend: running it without its options would be wrong */
    }
    r->option_strings = list;
    r->option_strings[r->n_option_strings++] = out;
    return out;
}

/* ------------------------------------------------------------------------ */
/* Table copies                                                               */

/* A backend's table copied into a zeroed, full-size vt_backend, so the runtime
 * can read every field it knows without reading past what the plugin built.
 * Copies live as long as the libraries (for the whole process), one per
 * exported table, on a list reachable from here. */
typedef struct table_copy {
    const vt_backend *original;
    vt_backend copy;
    struct table_copy *next;
} table_copy;

static table_copy *table_copies;
static pthread_mutex_t table_copies_lock = PTHREAD_MUTEX_INITIALIZER;

/* The table as it was at each ABI minor 1.<minor> (vt_backend.h). */
static size_t table_size_at_minor(uint32_t minor) { return VT_BACKEND_SIZE_AT_MINOR(minor); }

static const vt_backend *full_size_copy(const vt_backend *original) {
    pthread_mutex_lock(&table_copies_lock);
    table_copy *c = table_copies;
    while (c && c->original != original) c = c->next;
    if (!c && (c = calloc(1, sizeof *c)) != NULL) {
        c->original = original;
        /* Only the table as it was at the plugin's minor: fields of later
         * minors mean nothing in an older plugin's table, whatever bytes a
         * larger struct_size happens to cover (the rest stays zero: NULL). */
        size_t n = table_size_at_minor(original->abi_minor);
        memcpy(&c->copy, original, n);
        c->next = table_copies;
        table_copies = c;
    }
    pthread_mutex_unlock(&table_copies_lock);
    return c ? &c->copy : NULL;
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                     */

#define NONSENSE_DTYPE 99

/* snprintf that may truncate on purpose (entry fields are fixed-size summaries). */
static void format_into(char *dst, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void format_into(char *dst, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, size, fmt, ap);
    va_end(ap);
}

/* The VT_CONVENTION_* bits ABI 1.<minor> defines. */
static uint64_t conventions_defined_at(uint32_t minor) {
    return (minor >= 1 ? VT_CONVENTION_KV_Q8_0 : 0) | (minor >= 8 ? VT_CONVENTION_ROPE_FACTORS : 0);
}

static void refuse(vt_backend_entry *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void refuse(vt_backend_entry *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->reason, sizeof e->reason, fmt, ap);
    va_end(ap);
    /* One line, whatever dlerror or a plugin wrote. */
    for (char *c = e->reason; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    e->state = VT_BACKEND_REFUSED;
    e->table = NULL;
    e->ctx = NULL;
}

/* A node shaped like a real one for `op` but with every dtype `dtype`. */
static vt_node nonsense_node(int op, int32_t dtype) {
    vt_node node;
    memset(&node, 0, sizeof node);
    node.struct_size = sizeof node;
    node.op = op;
    node.phase = VT_PHASE_PREFILL;
    node.n_src = op >= 0 && op < VT_OP_COUNT ? vt_op_n_src(op) : 2;
    for (int i = 0; i <= VT_MAX_SRC; i++) {
        vt_tensor *t = i < VT_MAX_SRC ? &node.src[i] : &node.dst;
        t->dtype = dtype;
        t->ndim = 2;
        t->ne[0] = 64;
        t->ne[1] = t->ne[2] = t->ne[3] = 1;
        t->nb[0] = 4;
        t->nb[1] = t->nb[2] = t->nb[3] = 256;
    }
    return node;
}

/* A backend that says yes to an op or dtype that does not exist would say yes
 * to things it cannot run: refuse it before it gets any real node. Returns a
 * description of the first nonsense it accepted, or NULL. */
static const char *accepts_nonsense(const vt_backend *t, void *ctx, char *buf, size_t size) {
    vt_node node = nonsense_node(VT_OP_COUNT + 5, VT_F32);
    if (t->supports(ctx, &node)) {
        format_into(buf, size,
                    "supports() accepts op %d, which does not exist (ops are 0..%d): check node->op before "
                    "anything else",
                    VT_OP_COUNT + 5, VT_OP_COUNT - 1);
        return buf;
    }
    for (int op = 0; op < VT_OP_COUNT; op++) {
        if (!vt_backend_op(t, op)) continue; /* supports() is never asked about NULL ops */
        node = nonsense_node(op, NONSENSE_DTYPE);
        if (t->supports(ctx, &node)) {
            format_into(buf, size,
                        "supports() accepts %s with dtype %d, which does not exist: check every operand's dtype",
                        vt_op_name(op), NONSENSE_DTYPE);
            return buf;
        }
    }
    return NULL;
}

/* Run the checks of vt_backend.h on one file whose name part is `name`; fills
 * e (state LOADED with an initialised ctx, or REFUSED with a reason). */
static void load_file(const vt_host *host, const vt_backend_config *config, const char *path, const char *name,
                      vt_backend_entry *e) {
    memset(e, 0, sizeof *e);
    format_into(e->name, sizeof e->name, "%s", name);
    format_into(e->path, sizeof e->path, "%s", path);

    char cut[256];
    if (!vt_elf_fits_file(path, cut, sizeof cut)) { /* dlopen would map it and SIGBUS past its end */
        refuse(e, "not a loadable shared object: %s", cut);
        return;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* never closed: see vt_backend.h */
    if (!lib) {
        const char *why = dlerror();
        refuse(e, "not a loadable shared object: %s", why ? why : "dlopen failed");
        return;
    }
    vt_backend_entry_fn entry = (vt_backend_entry_fn)dlsym(lib, VT_BACKEND_ENTRY_SYMBOL);
    if (!entry) {
        refuse(e, "no %s symbol", VT_BACKEND_ENTRY_SYMBOL);
        return;
    }
    vt_backend_probe_fn probe = (vt_backend_probe_fn)dlsym(lib, VT_BACKEND_PROBE_SYMBOL);
    int score = 1; /* no probe: runs anywhere, ranks below every backend that claims more */
    if (probe) {
        char why[200] = "";
        score = probe(why, sizeof why);
        why[sizeof why - 1] = '\0';
        if (score <= 0) {
            refuse(e, "probe says this machine cannot run it: %s", why[0] ? why : "(no reason given)");
            return;
        }
    }
    const vt_backend *original = entry();
    if (!original) {
        refuse(e, "%s returned NULL", VT_BACKEND_ENTRY_SYMBOL);
        return;
    }
    /* The first three fields exist at every ABI version. */
    e->abi_major = original->abi_major;
    e->abi_minor = original->abi_minor;
    if (original->abi_major != VT_ABI_MAJOR) {
        refuse(e, "ABI major %u, runtime speaks %d", original->abi_major, VT_ABI_MAJOR);
        return;
    }
    if (original->abi_minor > VT_ABI_MINOR) {
        refuse(e, "ABI minor %u is newer than the runtime's %d", original->abi_minor, VT_ABI_MINOR);
        return;
    }
    size_t needed = table_size_at_minor(original->abi_minor);
    if (original->struct_size < needed) {
        refuse(e, "struct_size %u is smaller than the %d.%u table (%zu bytes)", original->struct_size, VT_ABI_MAJOR,
               original->abi_minor, needed);
        return;
    }
    const vt_backend *t = full_size_copy(original);
    if (!t) {
        refuse(e, "out of memory copying its table");
        return;
    }
    const char *missing = !t->name || !t->name[0] ? "name"
                          : !t->init              ? "init"
                          : !t->supports          ? "supports"
                          : !t->shutdown          ? "shutdown"
                                                  : NULL;
    if (missing) {
        refuse(e, "table has no %s", missing);
        return;
    }
    if (!t->prepare_weight != !t->release_weight) {
        refuse(e, "table has %s but no %s (they come as a pair)", t->prepare_weight ? "prepare_weight" : "release_weight",
               t->prepare_weight ? "release_weight" : "prepare_weight");
        return;
    }
    if (strcmp(t->name, name) != 0) {
        refuse(e, "name '%.64s' does not match file name '%s'", t->name, name);
        return;
    }
    /* a conventions bit its minor did not define says the table is not
     * what the plugin meant (the field is read from 1.5 on) */
    if (e->abi_minor >= 5 && (t->conventions & ~conventions_defined_at(e->abi_minor))) {
        refuse(e, "conventions has bits ABI 1.%u does not define: 0x%llx", e->abi_minor,
               (unsigned long long)(t->conventions & ~conventions_defined_at(e->abi_minor)));
        return;
    }
    void *ctx = NULL;
    char err[200] = "";
    vt_status st = t->init(host, config, &ctx, err, sizeof err);
    err[sizeof err - 1] = '\0';
    if (st != VT_OK) {
        refuse(e, "init failed: %s", err[0] ? err : vt_status_name(st));
        e->refused_by_init = true;
        e->init_status = st;
        return;
    }
    char why[200];
    if (accepts_nonsense(t, ctx, why, sizeof why)) {
        t->shutdown(ctx);
        refuse(e, "capability nonsense: %s", why);
        return;
    }
    e->state = VT_BACKEND_LOADED;
    e->score = score;
    e->table = t;
    e->ctx = ctx;
}

/* NAME from "libvt-backend-NAME.so" into name (size >= 64): 1 if the file
 * name has that form, 0 to ignore the file. A NAME outside [a-z0-9_-] or too
 * long yields -1 (the file is meant as a backend but cannot be one). */
static int name_from_file(const char *file, char *name, size_t size) {
    size_t len = strlen(file), pre = strlen(FILE_PREFIX), suf = strlen(FILE_SUFFIX);
    if (len <= pre + suf || strncmp(file, FILE_PREFIX, pre) != 0 || strcmp(file + len - suf, FILE_SUFFIX) != 0)
        return 0;
    size_t n = len - pre - suf;
    format_into(name, size, "%.*s", (int)n, file + pre);
    if (n >= size) return -1;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return -1;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Discovery                                                                  */

static vt_backend_entry *add_entry(vt_registry *r) {
    if (r->count == r->capacity) {
        int cap = r->capacity ? r->capacity * 2 : 8;
        vt_backend_entry *grown = realloc(r->entries, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        r->entries = grown;
        r->capacity = cap;
    }
    return &r->entries[r->count++];
}

static const vt_backend_entry *first_with_name(const vt_registry *r, const char *name) {
    for (int i = 0; i < r->count; i++)
        if (r->entries[i].state != VT_BACKEND_SHADOWED && strcmp(r->entries[i].name, name) == 0)
            return &r->entries[i];
    return NULL;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* True if folder was scanned already (the same folder named twice, or
 * VT_BACKEND_PATH naming the default folder); records it otherwise. */
static vt_status folder_seen(vt_registry *r, const char *folder, bool *seen) {
    char resolved[PATH_MAX];
    const char *key = realpath(folder, resolved) ? resolved : folder;
    for (int i = 0; i < r->n_folders; i++) {
        if (strcmp(r->folders_seen[i], key) == 0) {
            *seen = true;
            return VT_OK;
        }
    }
    char **grown = realloc(r->folders_seen, (size_t)(r->n_folders + 1) * sizeof *grown);
    if (!grown) return VT_ERR_NOMEM;
    r->folders_seen = grown;
    if (!(r->folders_seen[r->n_folders] = strdup(key))) return VT_ERR_NOMEM;
    r->n_folders++;
    *seen = false;
    return VT_OK;
}

/* A folder the user named (VT_BACKEND_PATH, --backend-path) that cannot be
 * opened is a likely typo: warned about once per process and folder, as
 * every engine's registry scans the same list. */
static void warn_missing_folder(const char *folder, int error) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char warned[8][256];
    static int n_warned;
    pthread_mutex_lock(&lock);
    bool before = false;
    for (int i = 0; i < n_warned && !before; i++) before = strcmp(warned[i], folder) == 0;
    if (!before && n_warned < 8) snprintf(warned[n_warned++], sizeof warned[0], "%s", folder);
    pthread_mutex_unlock(&lock);
    if (!before)
        vt_log(VT_LOG_WARN, "registry", "backend folder %s (VT_BACKEND_PATH or --backend-path) cannot be opened: %s",
               folder, strerror(error));
}

static vt_status scan_folder(vt_registry *r, const char *folder, bool named_by_user, vt_error *err) {
    bool seen;
    if (folder_seen(r, folder, &seen) != VT_OK) return vt_fail(err, VT_ERR_NOMEM, "registry: out of memory");
    if (seen) return VT_OK;
    DIR *dir = opendir(folder);
    if (!dir) {
        if (named_by_user) warn_missing_folder(folder, errno);
        else vt_log(VT_LOG_DEBUG, "registry", "skipping backend folder %s: cannot open it", folder);
        return VT_OK;
    }
    /* Sorted, so which of two same-named files wins does not depend on readdir. */
    char **files = NULL;
    size_t n = 0, cap = 0;
    vt_status st = VT_OK;
    struct dirent *d;
    char name[64];
    while ((d = readdir(dir)) != NULL) {
        if (name_from_file(d->d_name, name, sizeof name) == 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(files, cap * sizeof *grown);
            if (!grown) {
                st = VT_ERR_NOMEM;
                break;
            }
            files = grown;
        }
        if (!(files[n] = strdup(d->d_name))) {
            st = VT_ERR_NOMEM;
            break;
        }
        n++;
    }
    closedir(dir);
    if (st == VT_OK && n > 1) qsort(files, n, sizeof *files, compare_strings); /* files is NULL when n == 0 */

    for (size_t i = 0; i < n && st == VT_OK; i++) {
        char path[sizeof r->entries[0].path];
        int len = snprintf(path, sizeof path, "%s/%s", folder, files[i]);
        int kind = name_from_file(files[i], name, sizeof name);
        const vt_backend_entry *first = kind > 0 ? first_with_name(r, name) : NULL;
        char first_path[sizeof path];
        if (first) format_into(first_path, sizeof first_path, "%s", first->path); /* add_entry may move it */
        vt_backend_entry *e = add_entry(r);
        if (!e) {
            st = VT_ERR_NOMEM;
            break;
        }
        if (kind < 0 || len < 0 || (size_t)len >= sizeof path) {
            memset(e, 0, sizeof *e);
            format_into(e->name, sizeof e->name, "%s", name);
            format_into(e->path, sizeof e->path, "%s", path);
            if (kind < 0) refuse(e, BAD_NAME_REASON, files[i]);
            else refuse(e, "path of '%s' is too long", files[i]);
        } else if (first) {
            memset(e, 0, sizeof *e);
            format_into(e->name, sizeof e->name, "%s", name);
            format_into(e->path, sizeof e->path, "%s", path);
            e->state = VT_BACKEND_SHADOWED;
            format_into(e->reason, sizeof e->reason, "shadowed by %s", first_path);
        } else {
            vt_backend_config config = r->config;
            config.options = options_for(r, name);
            if (config.options) {
                load_file(r->host, &config, path, name, e);
            } else {
                memset(e, 0, sizeof *e);
                format_into(e->name, sizeof e->name, "%s", name);
                format_into(e->path, sizeof e->path, "%s", path);
                refuse(e, "out of memory passing its [backend.%s] options", name);
            }
        }
        if (e->state == VT_BACKEND_REFUSED)
            vt_log(VT_LOG_INFO, "registry", "refused backend %s: %s", e->path, e->reason);
        else if (e->state == VT_BACKEND_LOADED)
            vt_log(VT_LOG_DEBUG, "registry", "loaded backend %s from %s", e->name, e->path);
    }
    for (size_t i = 0; i < n; i++) free(files[i]);
    free(files);
    if (st != VT_OK) return vt_fail(err, st, "registry: out of memory scanning %s", folder);
    return VT_OK;
}

/* Scan each folder of a colon-separated list (empty items are skipped). */
static vt_status scan_path_list(vt_registry *r, const char *list, vt_error *err) {
    if (!list) return VT_OK;
    const char *p = list;
    while (*p) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len > 0) {
            char folder[PATH_MAX];
            if (len < sizeof folder) {
                memcpy(folder, p, len);
                folder[len] = '\0';
                vt_status st = scan_folder(r, folder, true, err);
                if (st != VT_OK) return st;
            } else {
                vt_log(VT_LOG_WARN, "registry", "skipping a backend folder name of %zu bytes", len);
            }
        }
        if (!colon) break;
        p = colon + 1;
    }
    return VT_OK;
}

/* The installed backends' folder: <dir of libvt.so>/vt when this code runs
 * inside libvt.so; when it is linked into a program (vt itself, the tests),
 * <program dir>/<bin to lib>/vt — the install's relative path first, then
 * ../lib (the build tree's layout). "" if the code's own path is unknown,
 * or if neither exists: then `missing` (may be NULL) gets the first, where
 * an installed vt keeps its backends. */
static void default_folder(char *out, size_t size, char *missing, size_t missing_size) {
    Dl_info info;
    out[0] = '\0';
    if (missing) missing[0] = '\0';
    if (!dladdr((void *)&vt_registry_create, &info) || !info.dli_fname) return;
    char resolved[PATH_MAX], program[PATH_MAX];
    const char *file = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
    const char *slash = strrchr(file, '/');
    if (strncmp(slash ? slash + 1 : file, "libvt.", 6) == 0) {
        format_into(out, size, "%.*s/%s", (int)(slash ? slash - file : 1), slash ? file : ".", VT_BACKEND_SUBDIR);
        return;
    }
    /* Linked into the program: for the main executable dladdr reports
     * argv[0], which is a bare name when the program was found through
     * PATH (resolved against the working directory, it would name some
     * other folder, or load whatever ../lib/vt holds there); then the
     * kernel's path of the executable. Not always: run through the dynamic
     * loader (ld.so vt ...) that path is the loader's, and argv[0] is the
     * program's. */
    const ssize_t n = strchr(info.dli_fname, '/') ? -1 : readlink("/proc/self/exe", program, sizeof program - 1);
    if (n > 0) {
        program[n] = '\0';
        file = program;
        slash = strrchr(file, '/');
    }
    const int dir_len = slash ? (int)(slash - file) : 1;
    const char *dir = slash ? file : ".";
    static const char *const bin_to_lib[] = {VT_BIN_TO_LIBDIR, "../lib"};
    for (size_t i = 0; i < sizeof bin_to_lib / sizeof *bin_to_lib; i++) {
        char candidate[PATH_MAX];
        format_into(candidate, sizeof candidate, "%.*s/%s/%s", dir_len, dir, bin_to_lib[i], VT_BACKEND_SUBDIR);
        if (i == 0 && missing) format_into(missing, missing_size, "%s", candidate);
        struct stat st;
        if (stat(candidate, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        format_into(out, size, "%s", realpath(candidate, resolved) ? resolved : candidate);
        if (missing) missing[0] = '\0';
        return;
    }
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                 */

vt_status vt_registry_create(const vt_host *host, const char *extra_path, const char *backend_options_ini,
                             vt_registry **out, vt_error *err) {
    *out = NULL;
    if (!host) return vt_fail(err, VT_ERR_INVALID, "registry: no host table");
    vt_registry *r = calloc(1, sizeof *r);
    if (!r) return vt_fail(err, VT_ERR_NOMEM, "registry: out of memory");
    r->host = host;
    r->config.struct_size = sizeof r->config;
    r->config.n_threads = host->n_threads;
    r->config.options = "";
    r->all_options = backend_options_ini;

    char folder[PATH_MAX];
    default_folder(folder, sizeof folder, r->install_missing, sizeof r->install_missing);
    vt_status st = scan_path_list(r, getenv("VT_BACKEND_PATH"), err);
    if (st == VT_OK) st = scan_path_list(r, extra_path, err);
    if (st == VT_OK && folder[0]) st = scan_folder(r, folder, false, err);
    if (st != VT_OK) {
        vt_registry_destroy(r);
        return st;
    }
    *out = r;
    return VT_OK;
}

void vt_registry_installed_folder(char *out, size_t size) { default_folder(out, size, NULL, 0); }

int vt_registry_describe_search(const vt_registry *r, char *out, size_t size) {
    int n = 0;
    if (r->n_folders == 0)
        n = snprintf(out, size, "no backend folder was searched");
    else
        n = snprintf(out, size, "no libvt-backend-*.so in");
    for (int i = 0; i < r->n_folders && n > 0 && (size_t)n < size; i++)
        n += snprintf(out + n, size - (size_t)n, "%s %.200s", i ? "," : "", r->folders_seen[i]);
    if (r->install_missing[0] && n > 0 && (size_t)n < size)
        n += snprintf(out + n, size - (size_t)n, "%s%.300s, where an installed vt keeps its backends, does not exist",
                      r->n_folders ? "; " : ": ", r->install_missing);
    if (n > 0 && (size_t)n < size)
        n += snprintf(out + n, size - (size_t)n, "; VT_BACKEND_PATH or [backends] path names another folder");
    return n;
}

int vt_registry_n_folders(const vt_registry *r) { return r->n_folders; }
const char *vt_registry_folder(const vt_registry *r, int i) { return i >= 0 && i < r->n_folders ? r->folders_seen[i] : ""; }

void vt_registry_destroy(vt_registry *r) {
    if (!r) return;
    /* Reverse load order, the usual teardown order for things set up in sequence. */
    for (int i = r->count - 1; i >= 0; i--) {
        vt_backend_entry *e = &r->entries[i];
        if (e->state == VT_BACKEND_LOADED && e->table) e->table->shutdown(e->ctx);
    }
    for (int i = 0; i < r->n_folders; i++) free(r->folders_seen[i]);
    for (int i = 0; i < r->n_option_strings; i++) free(r->option_strings[i]);
    free(r->option_strings);
    free(r->folders_seen);
    free(r->entries);
    free(r);
}

bool vt_registry_file_backend_name(const char *path, char *name, size_t size) {
    const char *slash = strrchr(path, '/');
    return name_from_file(slash ? slash + 1 : path, name, size) > 0;
}

vt_status vt_registry_check_file(const vt_host *host, const char *path, const char *backend_options_ini,
                                 vt_backend_entry *entry, vt_error *err) {
    if (!host || !path || !entry) return vt_fail(err, VT_ERR_INVALID, "registry: check_file needs host, path, entry");
    const char *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    char name[64];
    int kind = name_from_file(file, name, sizeof name);
    struct stat st;
    const int unreadable = stat(path, &st) != 0 ? errno : 0;
    if (unreadable || !S_ISREG(st.st_mode)) { /* say that first: the file's name is secondary */
        memset(entry, 0, sizeof *entry);
        format_into(entry->path, sizeof entry->path, "%s", path);
        refuse(entry, "%s", unreadable ? strerror(unreadable) : "not a regular file");
        return vt_fail(err, VT_ERR_BACKEND, "%s: %s", path, entry->reason);
    }
    if (kind <= 0) {
        memset(entry, 0, sizeof *entry);
        format_into(entry->path, sizeof entry->path, "%s", path);
        if (kind < 0) refuse(entry, BAD_NAME_REASON, file);
        else refuse(entry, "file name '%s' is not libvt-backend-NAME.so", file);
        return vt_fail(err, VT_ERR_BACKEND, "%s: %s", path, entry->reason);
    }
    /* its options, as a registry hands them (kept by the entry: a backend may keep them) */
    char *options = options_of(backend_options_ini ? backend_options_ini : "", name);
    if (!options) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    vt_backend_config config = {.struct_size = sizeof config, .n_threads = host->n_threads, .options = options};
    /* a bare file name is the file in this folder (dlopen would search the library path for it) */
    char here[PATH_MAX];
    if (!slash) format_into(here, sizeof here, "./%s", path);
    load_file(host, &config, slash ? path : here, name, entry);
    if (entry->state != VT_BACKEND_LOADED) {
        free(options);
        return vt_fail(err, VT_ERR_BACKEND, "%s: %s", path, entry->reason);
    }
    entry->owned_options = options;
    /* The ctx stays live so the caller can ask supports() (the capability
     * matrix of `vt backends --check`) until vt_registry_release_checked. */
    return VT_OK;
}

void vt_registry_release_checked(vt_backend_entry *entry) {
    if (!entry || entry->state != VT_BACKEND_LOADED || !entry->table) return;
    if (entry->table->shutdown) entry->table->shutdown(entry->ctx);
    free(entry->owned_options);
    entry->owned_options = NULL;
    entry->ctx = NULL;
    entry->state = VT_BACKEND_REFUSED;
    snprintf(entry->reason, sizeof entry->reason, "released after the check");
}

int vt_registry_count(const vt_registry *r) { return r ? r->count : 0; }

const vt_backend_entry *vt_registry_at(const vt_registry *r, int i) {
    if (!r || i < 0 || i >= r->count) return NULL;
    return &r->entries[i];
}

const vt_backend_entry *vt_registry_find(const vt_registry *r, const char *name) {
    if (!r || !name) return NULL;
    for (int i = 0; i < r->count; i++)
        if (r->entries[i].state == VT_BACKEND_LOADED && strcmp(r->entries[i].name, name) == 0) return &r->entries[i];
    return NULL;
}

vt_status vt_registry_wrap_tables(vt_registry *r, vt_table_wrap_fn wrap, void *user, vt_error *err) {
    if (!r || !wrap) return vt_fail(err, VT_ERR_INVALID, "registry: wrap_tables needs a registry and a wrapper");
    for (int i = 0; i < r->count; i++) {
        vt_backend_entry *e = &r->entries[i];
        if (e->state != VT_BACKEND_LOADED || !e->table) continue;
        const vt_backend *t = wrap(user, e);
        if (!t) return vt_fail(err, VT_ERR_NOMEM, "registry: wrapping the table of backend %s failed", e->name);
        e->table = t;
    }
    return VT_OK;
}

/* The widened conventions b reads (vt_backend.conventions): its own word
 * from 1.5 on; before, those of its minor, as it was offered them then. */
static uint64_t conventions_read(const vt_backend_entry *b) {
    if (b->abi_minor >= 5) return b->table->conventions & conventions_defined_at(b->abi_minor);
    return b->abi_minor >= 1 ? VT_CONVENTION_KV_Q8_0 : 0;
}

/* The widened convention the node uses that b does not read, by name, or
 * NULL. Then b is not asked (its supports() may check shapes only): the node
 * runs elsewhere. */
static const char *convention_not_read(const vt_backend_entry *b, const vt_node *node) {
    const uint64_t read = conventions_read(b);
    if (!(read & VT_CONVENTION_KV_Q8_0)) {
        const int first = node->op == VT_OP_ATTENTION ? 1 : node->op == VT_OP_RESHAPE_AND_CACHE ? 2 : -1;
        if (first >= 0 && node->n_src >= first + 2 &&
            (node->src[first].dtype == VT_Q8_0 || node->src[first + 1].dtype == VT_Q8_0))
            return "VT_CONVENTION_KV_Q8_0";
    }
    if (!(read & VT_CONVENTION_ROPE_FACTORS) && node->op == VT_OP_ROPE && node->n_src > 2)
        return "VT_CONVENTION_ROPE_FACTORS";
    return NULL;
}

const char *vt_backend_not_offered(const vt_backend_entry *b, const vt_node *node) {
    if (vt_op_since_minor(node->op) > (int)b->abi_minor) return "an op newer than the table's ABI minor";
    const char *convention = convention_not_read(b, node);
    if (convention) return b->abi_minor >= 5 ? convention : "a convention newer than the table's ABI minor";
    return NULL;
}

bool vt_backend_accepts(const vt_backend_entry *b, const vt_node *node) {
    if (!b || !node || b->state != VT_BACKEND_LOADED || !b->table) return false;
    if (!vt_backend_op(b->table, node->op)) return false;
    if (vt_backend_not_offered(b, node)) return false; /* never asked */
    return b->table->supports(b->ctx, node) != 0;
}

vt_status vt_backend_run(const vt_backend_entry *b, const vt_node *node) {
    vt_op_fn op = b && node && b->state == VT_BACKEND_LOADED && b->table ? vt_backend_op(b->table, node->op) : NULL;
    assert(op && "vt_backend_run on a backend that does not implement the op");
    if (!op) return VT_ERR_INTERNAL;
    return op(b->ctx, node);
}

vt_status vt_backend_prepare_weight(const vt_backend_entry *b, const vt_weight_offer *offer, vt_prepared_weight *out,
                                    char *why, size_t why_size) {
    memset(out, 0, sizeof *out);
    if (why_size) why[0] = '\0';
    if (!b || b->state != VT_BACKEND_LOADED || !b->table || !b->table->prepare_weight) return VT_OK;
    vt_status st = b->table->prepare_weight(b->ctx, offer, out, why, why_size);
    if (why_size) why[why_size - 1] = '\0';
    for (char *c = why; why_size && *c; c++) /* one line, whatever the plugin wrote */
        if (*c == '\n' || *c == '\r') *c = ' ';
    if (st != VT_OK) {
        if (out->data) { /* a failing hook keeps nothing: hand back what it returned anyway */
            b->table->release_weight(b->ctx, out->data);
            out->data = NULL;
        }
        if (why_size && !why[0]) snprintf(why, why_size, "%s (no reason given)", vt_status_name(st));
        out->bytes = 0;
        return st;
    }
    if (!out->data) out->bytes = 0;
    return VT_OK;
}

void vt_backend_release_weight(const vt_backend_entry *b, void *data) {
    if (b && data && b->table && b->table->release_weight) b->table->release_weight(b->ctx, data);
}

/* One key=value option word of printable characters, as a tier must be. */
static bool tier_word_ok(const char *t) {
    const char *eq = strchr(t, '=');
    if (!eq || eq == t || !eq[1] || strlen(t) > 64) return false;
    for (const char *c = t; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == '\n') return false;
    return true;
}

int vt_backend_tiers(const vt_backend_entry *b, const char **out, int max) {
    if (!b || b->state != VT_BACKEND_LOADED || !b->table || !b->table->tiers) return 0;
    const char *const *list = b->table->tiers(b->ctx);
    int n = 0;
    for (int i = 0; list && list[i] && n < max && i < 64; i++)
        if (tier_word_ok(list[i])) out[n++] = list[i];
    return n;
}

const char *vt_registry_options(const vt_registry *r) { return r && r->all_options ? r->all_options : ""; }

bool vt_isa_line_multiplies_bf16(const char *isa_line) { return strstr(isa_line, "bf16 matmul") != NULL; }

bool vt_isa_line_attends_bf16(const char *isa_line) { return strstr(isa_line, "bf16 attention") != NULL; }

bool vt_isa_line_multiplies_int8(const char *isa_line) { return strstr(isa_line, "int8 matmul") != NULL; }

const char *vt_backend_isa(const vt_backend_entry *b, char *buf, size_t size) {
    const char *isa = b && b->state == VT_BACKEND_LOADED && b->table && b->table->isa ? b->table->isa(b->ctx) : NULL;
    snprintf(buf, size, "%s", isa && *isa ? isa : "not reported");
    for (char *c = buf; *c; c++) /* one printable line, whatever the plugin returned */
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    return buf;
}
