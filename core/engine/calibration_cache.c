/* calibration_cache.c — reading and writing `--backend auto`'s measured
 * times (see calibration_cache.h for what the file is and why). */
#include "calibration_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calibrate.h"
#include "host.h"
#include "machine.h"
#include "vt/vt.h"

#define MAGIC "vt-calibration 1\n"
#define END_KEY "end-key\n"

uint64_t vt_calibration_checksum(const char *text, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)text[i];
        h *= 1099511628211ull;
    }
    return h;
}

void vt_calibration_key(const vt_registry *r, const vt_auto_costs *c, int threads, char *key, size_t size) {
    vt_machine m;
    vt_machine_describe(&m);
    const char *cpu = m.cpu;
    /* the timing rule is part of the key: times taken by an older rule
     * (close calls decided by one timing; a class timed on its first node as
     * negotiated rather than as keyed) are measured again */
    int n = snprintf(key, size,
                     "cpu %s\nthreads %d\nvt %s\ntiming close calls within %.2fx: %d more rounds, one run each from %.0f ms\n"
                     "classes timed as keyed: output dtype before negotiation\n",
                     cpu, threads, vt_version(), VT_AUTO_CLOSE, VT_AUTO_RETIME_ROUNDS, VT_AUTO_LONG_RUN * 1e3);
    for (int i = 0; i < vt_registry_count(r) && i < VT_AUTO_MAX_BACKENDS && n > 0 && (size_t)n < size; i++) {
        if (!c->candidate[i]) continue;
        const vt_backend_entry *b = vt_registry_at(r, i);
        struct stat st;
        long long bytes = -1, mtime = -1;
        if (stat(b->path, &st) == 0) bytes = (long long)st.st_size, mtime = (long long)st.st_mtime;
        /* abi and prepares: whether its times were taken on weights it
         * prepared (calibration offers them through the hook as the engine
         * does); the layout it picks is a function of its code, which the
         * file's identity already pins, since ABI 1.2 names no layout. */
        const bool prepares = b->table && b->table->prepare_weight;
        n += snprintf(key + n, size - (size_t)n, "backend %s %s %lld %lld abi %u.%u prepares %s\n", b->name, b->path,
                      bytes, mtime, b->abi_major, b->abi_minor, prepares ? "yes" : "no");
    }
    /* the backends' options: a backend's times hold for the configuration
     * they were taken in (onednn.precision=int8 against its default: its
     * matmuls 12x apart), so another configuration is measured again */
    const char *options = vt_registry_options(r);
    if (n > 0 && (size_t)n < size) n += snprintf(key + n, size - (size_t)n, "options %zu\n%s", strlen(options), options);
}

vt_status vt_calibration_path(const char *key, char *path, size_t size, vt_error *err) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    const unsigned long long h = (unsigned long long)vt_calibration_checksum(key, strlen(key));
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(path, size, "%s/vt/calibration-%016llx.txt", xdg, h);
    else if (home && home[0]) n = snprintf(path, size, "%s/.cache/vt/calibration-%016llx.txt", home, h);
    else return vt_fail(err, VT_ERR_INVALID, "calibration cache: neither XDG_CACHE_HOME nor HOME is set");
    if (n < 0 || (size_t)n >= size) return vt_fail(err, VT_ERR_INVALID, "calibration cache: path too long");
    return VT_OK;
}

static int backend_by_name(const vt_registry *r, const char *name) {
    for (int i = 0; i < vt_registry_count(r) && i < VT_AUTO_MAX_BACKENDS; i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (b->state == VT_BACKEND_LOADED && strcmp(b->name, name) == 0) return i;
    }
    return -1;
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *grown = realloc(buf, cap * 2 + 1);
        if (!grown) free(buf);
        buf = grown;
        cap *= 2;
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* One "class KEY\tNAME=SECONDS\t..." line into c. False on bad syntax. */
static bool parse_class(char *line, const vt_registry *r, vt_auto_costs *c) {
    char *tab = strchr(line, '\t');
    if (strncmp(line, "class ", 6) != 0 || !tab) return false;
    *tab = '\0';
    int k = vt_auto_costs_class(c, line + 6);
    if (k < 0) return false;
    for (char *field = tab + 1; field && *field;) {
        char *next = strchr(field, '\t');
        if (next) *next++ = '\0';
        char *eq = strchr(field, '=');
        if (!eq) return false;
        *eq = '\0';
        double v;
        if (strcmp(eq + 1, "declined") == 0) {
            v = VT_COST_DECLINED;
        } else {
            char *end;
            v = strtod(eq + 1, &end);
            if (end == eq + 1 || *end || !(v >= 0)) return false;
        }
        const int b = backend_by_name(r, field);
        /* a backend no longer a candidate keeps no say */
        if (b >= 0 && c->candidate[b] && c->classes[k].seconds[b] == VT_COST_UNMEASURED) {
            c->classes[k].seconds[b] = v;
            c->from_cache++;
        }
        field = next;
    }
    return true;
}

vt_calibration_read vt_calibration_load(const char *path, const char *key, const vt_registry *r, vt_auto_costs *c,
                                        char *why, size_t why_size) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { /* a directory reads as nothing, not as a corrupt file */
        snprintf(why, why_size, "not a regular file");
        return VT_CALIBRATION_CORRUPT;
    }
    size_t len = 0;
    char *text = read_all(path, &len);
    if (!text) return VT_CALIBRATION_MISSING;
    vt_calibration_read result = VT_CALIBRATION_CORRUPT;
    /* the checksum line is the last one; it covers every byte before it */
    char *sum = len ? strstr(text, "\nchecksum ") : NULL;
    if (!sum || strlen(text) != len) {
        snprintf(why, why_size, "no checksum line");
        goto done;
    }
    sum++;
    unsigned long long want = 0;
    if (sscanf(sum, "checksum %16llx", &want) != 1 ||
        want != (unsigned long long)vt_calibration_checksum(text, (size_t)(sum - text))) {
        snprintf(why, why_size, "checksum mismatch");
        goto done;
    }
    *sum = '\0';
    const size_t magic = strlen(MAGIC), key_len = strlen(key);
    if (strncmp(text, MAGIC, magic) != 0) {
        snprintf(why, why_size, "not a calibration file");
        goto done;
    }
    char *end_key = strstr(text + magic, END_KEY);
    if (!end_key) {
        snprintf(why, why_size, "no end of key");
        goto done;
    }
    if ((size_t)(end_key - (text + magic)) != key_len || strncmp(text + magic, key, key_len) != 0) {
        /* name the first line that differs */
        const char *a = text + magic, *b = key;
        while (*a && *a == *b && a < end_key) a++, b++;
        while (a > text + magic && a[-1] != '\n') a--;
        int line = (int)strcspn(a, "\n");
        snprintf(why, why_size, "recorded for another machine or setup ('%.*s')", line > 120 ? 120 : line, a);
        result = VT_CALIBRATION_STALE;
        goto done;
    }
    vt_auto_costs scratch = *c; /* nothing is merged unless every line parses */
    scratch.classes = NULL;
    scratch.n = scratch.cap = 0;
    scratch.from_cache = 0;
    for (int k = 0; k < c->n; k++) {
        int j = vt_auto_costs_class(&scratch, c->classes[k].key);
        if (j >= 0) scratch.classes[j] = c->classes[k];
    }
    bool ok = true;
    for (char *line = end_key + strlen(END_KEY); ok && *line;) {
        char *nl = strchr(line, '\n');
        if (!nl) ok = false;
        else {
            *nl = '\0';
            ok = parse_class(line, r, &scratch);
            line = nl + 1;
        }
    }
    if (!ok) {
        vt_auto_costs_free(&scratch);
        snprintf(why, why_size, "a line does not parse");
        goto done;
    }
    vt_auto_costs_free(c);
    c->classes = scratch.classes;
    c->n = scratch.n;
    c->cap = scratch.cap;
    c->from_cache += scratch.from_cache;
    result = VT_CALIBRATION_READ;
done:
    free(text);
    return result;
}

/* mkdir -p of path's folder. */
static vt_status make_parent(const char *path, vt_error *err) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return VT_OK;
    *slash = '\0';
    for (char *s = dir + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        const char was = *s;
        *s = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return vt_fail(err, VT_ERR_IO, "calibration cache: cannot create %s: %s", dir, strerror(errno));
        *s = was;
        if (!was) break;
    }
    return VT_OK;
}

static vt_status write_file(const char *path, const char *key, const vt_registry *r, const vt_auto_costs *c,
                            vt_error *err);

/* Engines that open at once (several processes, or threads of one) each
 * time some classes: a save takes the file's lock, reads what the others
 * saved under the same key, keeps it for every class and backend this
 * engine did not time, and replaces the file while still holding the lock,
 * so no writer's times are lost to a later one. */
/* How long a save waits for another engine's save to finish. */
#define LOCK_WAIT_SECONDS 10

/* The cache's lock, held (an fd to close), or -1: a folder whose file
 * system has no flock (some network mounts), a lock file that cannot be
 * opened, or a holder that does not let go. The save goes on without it,
 * as atomic as ever, only not merged under the lock. */
static int take_lock(const char *path) {
    char lock_path[1100];
    snprintf(lock_path, sizeof lock_path, "%s.lock", path);
    /* write access where it can be had (NFS's flock needs it); read-only
     * opens another user's lock file in a shared cache folder */
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) (void)fchmod(fd, 0644); /* others may share the folder, whatever the umask */
    else fd = open(lock_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        vt_log(VT_LOG_DEBUG, "core", "calibration cache: cannot open %s (%s): saving without the lock", lock_path,
               strerror(errno));
        return -1;
    }
    int why = 0;
    for (int waited_ms = 0;; waited_ms += 10) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        why = errno;
        if ((why != EWOULDBLOCK && why != EINTR) || waited_ms >= LOCK_WAIT_SECONDS * 1000) break;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    /* a holder stuck past the wait is worth a warning; a file system
     * without flock (ENOLCK, EOPNOTSUPP) is how the folder is */
    vt_log(why == EWOULDBLOCK ? VT_LOG_WARN : VT_LOG_DEBUG, "core",
           "calibration cache: cannot lock %s (%s): saving without the lock", lock_path,
           why == EWOULDBLOCK ? "another engine held it too long" : strerror(why));
    close(fd);
    return -1;
}

/* Engines that open at once (several processes, or threads of one) each
 * time some classes: a save takes the file's lock, reads what the others
 * saved under the same key, keeps it for every class and backend this
 * engine did not time, and replaces the file while still holding the lock,
 * so no writer's times are lost to a later one. */
vt_status vt_calibration_save(const char *path, const char *key, const vt_registry *r, const vt_auto_costs *c,
                              vt_error *err) {
    vt_status st = make_parent(path, err);
    if (st != VT_OK) return st;
    const int lock = take_lock(path);
    vt_auto_costs merged = *c;
    /* a backend that failed this calibration keeps no times, neither its
     * own nor the file's: the next engine times it again */
    for (int b = 0; b < VT_AUTO_MAX_BACKENDS; b++)
        if (c->failed[b]) merged.candidate[b] = false;
    merged.classes = c->n ? malloc((size_t)c->n * sizeof *c->classes) : NULL;
    if (c->n && !merged.classes) st = vt_fail(err, VT_ERR_NOMEM, "out of memory writing the calibration cache");
    if (st == VT_OK) {
        if (c->n) memcpy(merged.classes, c->classes, (size_t)c->n * sizeof *c->classes);
        merged.cap = c->n;
        char why[256];
        /* stale, corrupt or missing: nothing to keep, the file is replaced */
        (void)vt_calibration_load(path, key, r, &merged, why, sizeof why);
        st = write_file(path, key, r, &merged, err);
    }
    vt_auto_costs_free(&merged);
    if (lock >= 0) close(lock); /* releases the lock */
    return st;
}

static vt_status write_file(const char *path, const char *key, const vt_registry *r, const vt_auto_costs *c,
                            vt_error *err) {
    size_t cap = 4096 + strlen(key), n = 0;
    char *text = malloc(cap);
    if (!text) return vt_fail(err, VT_ERR_NOMEM, "out of memory writing the calibration cache");
    n = (size_t)snprintf(text, cap, "%s%s%s", MAGIC, key, END_KEY);
    for (int k = 0; k < c->n && text; k++) {
        char line[VT_AUTO_KEY_SIZE + VT_AUTO_MAX_BACKENDS * 96];
        int m = snprintf(line, sizeof line, "class %s", c->classes[k].key);
        int fields = 0;
        for (int b = 0; b < vt_registry_count(r) && b < VT_AUTO_MAX_BACKENDS; b++) {
            const double s = c->classes[k].seconds[b];
            if (!c->candidate[b] || s == VT_COST_UNMEASURED || m < 0 || (size_t)m >= sizeof line) continue;
            const char *name = vt_registry_at(r, b)->name;
            if (s == VT_COST_DECLINED) m += snprintf(line + m, sizeof line - (size_t)m, "\t%s=declined", name);
            else m += snprintf(line + m, sizeof line - (size_t)m, "\t%s=%.9g", name, s);
            fields++;
        }
        if (!fields || m < 0 || (size_t)m + 1 >= sizeof line) continue;
        if (n + (size_t)m + 2 > cap) {
            cap = (cap + (size_t)m + 2) * 2;
            char *grown = realloc(text, cap);
            if (!grown) free(text);
            text = grown;
            if (!text) break;
        }
        n += (size_t)snprintf(text + n, cap - n, "%s\n", line);
    }
    if (!text) return vt_fail(err, VT_ERR_NOMEM, "out of memory writing the calibration cache");
    const unsigned long long sum = (unsigned long long)vt_calibration_checksum(text, n);
    vt_status st = VT_OK;
    /* a temporary file of its own (engines of one process, or of several,
     * may save at once), renamed over the cache whole */
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    const int fd = mkstemp(tmp);
    /* mkstemp makes it 0600; the cache it replaces was made as any file
     * (others may read it: a shared XDG_CACHE_HOME, a service account) */
    if (fd >= 0) (void)fchmod(fd, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f) {
        close(fd);
        remove(tmp);
    }
    if (st == VT_OK && !f) st = vt_fail(err, VT_ERR_IO, "calibration cache: cannot write %s: %s", tmp, strerror(errno));
    if (f) {
        bool ok = fwrite(text, 1, n, f) == n && fprintf(f, "checksum %016llx\n", sum) > 0;
        ok = fclose(f) == 0 && ok;
        if (!ok || rename(tmp, path) != 0) {
            st = vt_fail(err, VT_ERR_IO, "calibration cache: cannot write %s: %s", path, strerror(errno));
            remove(tmp);
        }
    }
    free(text);
    return st;
}
