/* backend_set.c — see backend_set.h. */
#include "backend_set.h"

#include <stdio.h>
#include <string.h>

#include "host.h"
#include "registry.h"
#include "threadpool.h"

vt_status vt_cli_loaded_backends(const vt_options *opt, vt_backend_set *out, vt_error *err) {
    memset(out, 0, sizeof *out);
    /* A one-thread pool is enough to initialise backends and read their names;
     * the engines create their own pools afterwards (and make theirs current). */
    vt_threadpool *pool = NULL;
    vt_registry *r = NULL;
    vt_status st = vt_threadpool_create(1, &pool, err);
    if (st == VT_OK)
        st = vt_registry_create(vt_host_get(pool), opt->backend_path[0] ? opt->backend_path : NULL, opt->backend_options,
                                &r, err);
    /* Highest probe score first (ties in discovery order): the default
     * backend leads, so a list of them all compares against it first. */
    int scores[VT_CLI_MAX_BACKENDS];
    for (int i = 0; st == VT_OK && i < vt_registry_count(r) && out->n < VT_CLI_MAX_BACKENDS; i++) {
        const vt_backend_entry *b = vt_registry_at(r, i);
        if (b->state == VT_BACKEND_REFUSED && out->n_refused < VT_CLI_MAX_BACKENDS)
            snprintf(out->refused[out->n_refused++], sizeof out->refused[0], "%s", b->name);
        if (b->state != VT_BACKEND_LOADED) continue;
        int at = out->n++;
        for (; at > 0 && scores[at - 1] < b->score; at--) {
            scores[at] = scores[at - 1];
            memcpy(out->names[at], out->names[at - 1], sizeof out->names[0]);
        }
        scores[at] = b->score;
        snprintf(out->names[at], sizeof out->names[0], "%s", b->name);
    }
    vt_registry_destroy(r);
    vt_host_release_pool(pool);
    vt_threadpool_destroy(pool);
    if (st == VT_OK && out->n == 0) st = vt_fail(err, VT_ERR_BACKEND, "no backend loaded (see `vt backends`)");
    return st;
}

static int index_of(const vt_backend_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return i;
    return -1;
}

/* The entry NAME with these options, or -1. */
static int index_of_entry(const vt_backend_set *s, const char *name, const char *options) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0 && strcmp(s->options[i], options) == 0) return i;
    return -1;
}

static void list_names(const vt_backend_set *s, char *buf, size_t size) {
    buf[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < s->n && used < size; i++) {
        int k = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", s->names[i]);
        if (k < 0) break;
        used += (size_t)k;
    }
}

/* Occurrences of entry i (name and options) among the first i entries of s. */
static int occurrences(const vt_backend_set *s, int i) {
    int k = 0;
    for (int j = 0; j < i; j++) k += strcmp(s->names[j], s->names[i]) == 0 && strcmp(s->options[j], s->options[i]) == 0;
    return k;
}

vt_status vt_cli_backend_set(const vt_options *opt, const char *spec, unsigned flags, vt_backend_set *out,
                             vt_error *err) {
    const bool skip_reference_by_default = flags & VT_BACKEND_SET_SKIP_REFERENCE;
    const bool put_reference_first = flags & VT_BACKEND_SET_REFERENCE_FIRST;
    const bool keep_repeats = flags & VT_BACKEND_SET_KEEP_REPEATS;
    vt_backend_set loaded;
    vt_status st = vt_cli_loaded_backends(opt, &loaded, err);
    if (st != VT_OK) return st;
    memset(out, 0, sizeof *out);
    if (!spec || strcmp(spec, "all") == 0) {
        for (int i = 0; i < loaded.n; i++) {
            bool skip = !spec && skip_reference_by_default && loaded.n > 1 && !strcmp(loaded.names[i], "reference");
            if (!skip) memcpy(out->names[out->n++], loaded.names[i], sizeof out->names[0]);
        }
    } else {
        const char *p = spec;
        while (*p) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            char name[64], options[sizeof out->options[0]] = "";
            const char *colon = memchr(p, ':', len);
            size_t name_len = colon ? (size_t)(colon - p) : len;
            if (name_len == 0 || name_len >= sizeof name)
                return vt_fail(err, VT_ERR_INVALID, "--backends '%s': expected NAME[:key=value...][,NAME...] or all",
                               spec);
            memcpy(name, p, name_len);
            name[name_len] = '\0';
            if (colon) {
                size_t opt_len = len - name_len - 1;
                if (opt_len >= sizeof options)
                    return vt_fail(err, VT_ERR_INVALID, "--backends: the options of '%s' are too long", name);
                memcpy(options, colon + 1, opt_len);
                options[opt_len] = '\0';
                /* every item key=value: a typo is an error here, not a backend refusing later */
                for (const char *item = options; *item;) {
                    const char *end = strchr(item, ':');
                    size_t n = end ? (size_t)(end - item) : strlen(item);
                    const char *eq = memchr(item, '=', n);
                    if (!eq || eq == item)
                        return vt_fail(err, VT_ERR_INVALID,
                                       "--backends: '%.*s' after %s: is not key=value (NAME:key=value[:key=value...])",
                                       (int)n, item, name);
                    item = end ? end + 1 : item + n;
                }
                if (strcmp(name, "auto") == 0)
                    return vt_fail(err, VT_ERR_INVALID, "--backends: auto takes no options (give them to the backends: "
                                                        "--backend-option NAME.key=value)");
            }
            /* auto is the placement by measured cost over the loaded ones */
            if (strcmp(name, "auto") != 0 && index_of(&loaded, name) < 0) {
                char names[512];
                list_names(&loaded, names, sizeof names);
                bool was_refused = false; /* a backend that failed, or a name no backend has (a bad argument) */
                for (int k = 0; k < loaded.n_refused && !was_refused; k++) was_refused = strcmp(loaded.refused[k], name) == 0;
                return vt_fail(err, was_refused ? VT_ERR_BACKEND : VT_ERR_INVALID,
                               "--backends: '%s' is %s (loaded: %s; see `vt backends`)", name,
                               was_refused ? "refused" : "not a backend found here", names);
            }
            if (keep_repeats || index_of_entry(out, name, options) < 0) {
                if (out->n == VT_CLI_MAX_BACKENDS)
                    return vt_fail(err, VT_ERR_INVALID, "--backends: at most %d entries", VT_CLI_MAX_BACKENDS);
                memcpy(out->names[out->n], name, name_len + 1);
                memcpy(out->options[out->n++], options, sizeof options);
            } else { /* its results would be the first's, bit for bit */
                fprintf(stderr, "vt: --backends lists %s%s%s again; it runs once\n", name, options[0] ? ":" : "",
                        options);
            }
            p = comma ? comma + 1 : p + len;
        }
    }
    if (put_reference_first) {
        int at = index_of(out, "reference");
        if (at < 0 && index_of(&loaded, "reference") < 0)
            return vt_fail(err, VT_ERR_BACKEND, "the reference backend is not loaded: it is the baseline of the "
                                                "comparison (see `vt backends`)");
        if (at < 0) {
            if (out->n == VT_CLI_MAX_BACKENDS) out->n--;
            at = out->n++;
            snprintf(out->names[at], sizeof out->names[0], "reference");
        }
        char first[64], first_options[sizeof out->options[0]];
        memcpy(first, out->names[at], sizeof first);
        memcpy(first_options, out->options[at], sizeof first_options);
        memmove(out->names[1], out->names[0], (size_t)at * sizeof out->names[0]);
        memmove(out->options[1], out->options[0], (size_t)at * sizeof out->options[0]);
        memcpy(out->names[0], first, sizeof first);
        memcpy(out->options[0], first_options, sizeof first_options);
    }
    if (out->n == 0) return vt_fail(err, VT_ERR_INVALID, "--backends: no backend selected");
    for (int i = 0; i < out->n; i++) {
        const int k = occurrences(out, i) + 1;
        char entry[sizeof out->names[0] + sizeof out->options[0]]; /* names[i] and labels[i] do not overlap, but
                                                                      gcc's -Wrestrict cannot tell */
        snprintf(entry, sizeof entry, "%.63s%s%.127s", out->names[i], out->options[i][0] ? ":" : "", out->options[i]);
        if (k == 1) snprintf(out->labels[i], sizeof out->labels[0], "%s", entry);
        else snprintf(out->labels[i], sizeof out->labels[0], "%s#%d", entry, k);
    }
    /* The labels name the results: two alike would make two entries' rows
     * indistinguishable (an option value may itself end in "#2"). */
    for (int i = 0; i < out->n; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(out->labels[i], out->labels[j]) == 0)
                return vt_fail(err, VT_ERR_INVALID,
                               "--backends: entries %d (%s%s%s) and %d (%s%s%s) would both be labelled '%s'; "
                               "change one of them",
                               j + 1, out->names[j], out->options[j][0] ? ":" : "", out->options[j], i + 1,
                               out->names[i], out->options[i][0] ? ":" : "", out->options[i], out->labels[i]);
    return VT_OK;
}
