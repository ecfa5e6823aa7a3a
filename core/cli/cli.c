/* cli.c — common flags and helpers of the vt subcommands. */
#include "cli.h"

#include "clock.h"
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The running command's options once parsed (its flags over the
 * environment over the ini file; NULL before): vt_cli_error names where a
 * setting its message names was set, when not on the command line. They
 * live in the command's own frame, where its error is printed too. */
static const vt_options *error_options;

vt_status vt_cli_init(vt_cli_common *c, int argc, char **argv, vt_error *err) {
    memset(c, 0, sizeof *c);
    vt_options_defaults(&c->opt);
    const char *config = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc) return vt_fail(err, VT_ERR_INVALID, "--config needs a value");
            config = argv[i + 1];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            config = argv[i] + 9;
        }
    }
    vt_status st = vt_options_load(&c->opt, config, err);
    /* the config file is one of the command's arguments: one that cannot be
     * read is a bad argument, as one that does not parse is */
    if (st == VT_ERR_IO) st = err->code = VT_ERR_INVALID;
    return st;
}

const char *vt_cli_value(int argc, char **argv, int *i, vt_error *err) {
    const char *eq = strchr(argv[*i], '=');
    if (argv[*i][0] == '-' && argv[*i][1] == '-' && eq) return eq + 1;
    if (*i + 1 >= argc) {
        vt_fail(err, VT_ERR_INVALID, "%s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

/* Does argv[i] name flag `name` (also as --name=value)? */
static bool is_flag(const char *arg, const char *name) {
    size_t n = strlen(name);
    return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || (arg[n] == '=' && name[1] == '-'));
}

/* The engine options a flag sets: the flag, its short alias, the option's
 * key (the ini key, what the library's messages name). */
static const struct {
    const char *flag, *alias, *key;
} knobs[] = {
    {"--backend", NULL, "runtime.backend"},      {"--fallback", NULL, "runtime.fallback"},
    {"--threads", "-t", "runtime.threads"},      {"--batch-size", "-b", "runtime.batch_size"},
    {"--max-seqs", NULL, "runtime.max_seqs"},    {"--token-budget", NULL, "runtime.token_budget"},
    {"--prefill-chunk", NULL, "runtime.prefill_chunk"},
    {"--max-waiting", NULL, "runtime.max_waiting"},
    {"--kv-cache-dtype", NULL, "kv_cache.dtype"}, {"--ctx-size", "-c", "kv_cache.ctx_size"},
    {"--block-size", NULL, "kv_cache.block_size"}, {"--prefix-cache", NULL, "kv_cache.prefix_cache"},
    {"--prefix-cache-blocks", NULL, "kv_cache.prefix_cache_blocks"},
    {"--backend-path", NULL, "backends.path"},
    {"--temp", NULL, "sampling.temp"},           {"--top-k", NULL, "sampling.top_k"},
    {"--top-p", NULL, "sampling.top_p"},         {"--min-p", NULL, "sampling.min_p"},
    {"--seed", NULL, "sampling.seed"},
};

/* The sampling knob argv entry `a` names, or NULL. */
static const char *sampling_flag(const char *a) {
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++)
        if (strncmp(knobs[k].key, "sampling.", 9) == 0 && is_flag(a, knobs[k].flag)) return knobs[k].flag;
    return NULL;
}

vt_arg_result vt_cli_common_arg(vt_cli_common *c, int argc, char **argv, int *i, vt_error *err) {
    const char *a = argv[*i];
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++) {
        if (!is_flag(a, knobs[k].flag) && !(knobs[k].alias && strcmp(a, knobs[k].alias) == 0)) continue;
        const char *v = vt_cli_value(argc, argv, i, err);
        if (!v) return VT_ARG_ERROR;
        if (vt_options_set(&c->opt, knobs[k].key, v, "cli", err) != VT_OK) {
            vt_error_prefix(err, "%s: ", knobs[k].flag);
            return VT_ARG_ERROR;
        }
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--no-prefix-cache") == 0) {
        if (vt_options_set(&c->opt, "kv_cache.prefix_cache", "0", "cli", err) != VT_OK) return VT_ARG_ERROR;
        return VT_ARG_TAKEN;
    }
    if (is_flag(a, "--backend-option")) { /* NAME.key=value, repeatable */
        const char *v = vt_cli_value(argc, argv, i, err);
        const char *eq = v ? strchr(v, '=') : NULL;
        char key[160];
        if (!v) return VT_ARG_ERROR;
        if (!eq || (size_t)(eq - v) >= sizeof key) {
            vt_fail(err, VT_ERR_INVALID, "--backend-option %s: expected NAME.key=value", v);
            return VT_ARG_ERROR;
        }
        memcpy(key, v, (size_t)(eq - v));
        key[eq - v] = '\0';
        if (vt_options_set_backend_option(&c->opt, key, eq + 1, err) != VT_OK) {
            vt_error_prefix(err, "--backend-option: ");
            return VT_ARG_ERROR;
        }
        return VT_ARG_TAKEN;
    }
    if (is_flag(a, "--model") || strcmp(a, "-m") == 0)
        return vt_cli_text_arg_once(argc, argv, i, &c->model_path, "-m/--model", "model", err);
    if (is_flag(a, "--config")) { /* applied in vt_cli_init */
        return vt_cli_value(argc, argv, i, err) ? VT_ARG_TAKEN : VT_ARG_ERROR;
    }
    if (strcmp(a, "--explain") == 0) {
        c->explain = true;
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--special") == 0) {
        c->special = true;
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--dry-run") == 0) {
        c->explain = c->dry_run = true;
        return VT_ARG_TAKEN;
    }
    return VT_ARG_NOT_MINE;
}

vt_status vt_cli_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out, vt_error *err) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !*s || *end || v < lo || v > hi)
        return vt_fail(err, VT_ERR_INVALID, "%s %s: expected an integer in %lld..%lld", flag, s, (long long)lo,
                       (long long)hi);
    *out = v;
    return VT_OK;
}

vt_status vt_cli_float(const char *flag, const char *s, double lo, double hi, double *out, vt_error *err) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !*s || *end || !isfinite(v) || v < lo || v > hi)
        return vt_fail(err, VT_ERR_INVALID, "%s %s: expected a number in %g..%g", flag, s, lo, hi);
    *out = v;
    return VT_OK;
}

vt_arg_result vt_cli_setting_arg(vt_options *opt, const char *key, int argc, char **argv, int *i, vt_error *err) {
    const char *flag = argv[*i], *v = vt_cli_value(argc, argv, i, err);
    if (!v) return VT_ARG_ERROR;
    if (vt_options_set(opt, key, v, "cli", err) != VT_OK) {
        vt_error_prefix(err, "%s: ", flag);
        return VT_ARG_ERROR;
    }
    return VT_ARG_TAKEN;
}

vt_arg_result vt_cli_text_arg(int argc, char **argv, int *i, const char **out, vt_error *err) {
    *out = vt_cli_value(argc, argv, i, err);
    return *out ? VT_ARG_TAKEN : VT_ARG_ERROR;
}

vt_arg_result vt_cli_text_arg_once(int argc, char **argv, int *i, const char **out, const char *flags,
                                   const char *what, vt_error *err) {
    if (*out) {
        vt_fail(err, VT_ERR_INVALID, "%s given twice: give one %s (the first was '%s')", flags, what, *out);
        return VT_ARG_ERROR;
    }
    return vt_cli_text_arg(argc, argv, i, out, err);
}

vt_arg_result vt_cli_int_arg(int argc, char **argv, int *i, const char *flag, int64_t lo, int64_t hi, int64_t *out,
                             vt_error *err) {
    const char *v = vt_cli_value(argc, argv, i, err);
    return v && vt_cli_int(flag, v, lo, hi, out, err) == VT_OK ? VT_ARG_TAKEN : VT_ARG_ERROR;
}

vt_status vt_cli_parse_ids(const char *what, const char *s, int32_t **ids, size_t *n, vt_error *err) {
    size_t cap = 16, count = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
    const char *p = s;
    while (*p) {
        char *end = NULL;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            free(v);
            return vt_fail(err, VT_ERR_INVALID, "%s '%s': expected comma-separated non-negative ids", what, s);
        }
        if (count == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                return vt_fail(err, VT_ERR_NOMEM, "out of memory");
            }
            v = nv;
        }
        v[count++] = (int32_t)x;
        p = *end ? end + 1 : end;
    }
    *ids = v;
    *n = count;
    return VT_OK;
}

vt_arg_result vt_cli_prompt_arg(int argc, char **argv, int *i, vt_cli_prompt *p, vt_error *err) {
    const char *a = argv[*i];
    const char **slot = strcmp(a, "-p") == 0 || strcmp(a, "--prompt") == 0 ? &p->text
                        : strcmp(a, "-f") == 0 || strcmp(a, "--file") == 0 ? &p->file
                        : strcmp(a, "--tokens") == 0                          ? &p->ids
                                                                              : NULL;
    if (!slot) return VT_ARG_NOT_MINE;
    return vt_cli_text_arg_once(argc, argv, i, slot,
                                slot == &p->text ? "-p/--prompt" : slot == &p->file ? "-f/--file" : "--tokens",
                                "prompt", err);
}

/* Longest option name compared; longer ones are not typos of any of vt's. */
#define NEAREST_MAX 48

/* Restricted Damerau-Levenshtein distance of a[0..n) and b[0..m), both at
 * most NEAREST_MAX long. */
static int edit_distance(const char *a, size_t n, const char *b, size_t m) {
    int d[NEAREST_MAX + 1][NEAREST_MAX + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            const int change = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            const int drop = d[i - 1][j] + 1, add = d[i][j - 1] + 1;
            int best = change < drop ? change : drop;
            if (add < best) best = add;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* Edits from typed[0..n) to cand[0..m) when few enough for a typo (at most
 * 2, and fewer than half of typed's letters, so a short word is not matched
 * to anything), else TYPO_NONE. */
#define TYPO_NONE 3
static int typo_distance(const char *typed, size_t n, const char *cand, size_t m) {
    if (m > NEAREST_MAX) return TYPO_NONE;
    const int dist = edit_distance(typed, n, cand, m);
    return dist < TYPO_NONE && 2 * (size_t)dist < n ? dist : TYPO_NONE;
}

const char *vt_cli_nearest_option(const char *typed, const char *text, char *out, size_t size) {
    if (strncmp(typed, "--", 2) != 0) return NULL;
    const char *name = typed + 2;
    const size_t n = strcspn(name, "=");
    if (n == 0 || n > NEAREST_MAX) return NULL;
    int best = TYPO_NONE;
    /* A word cut short: the one option that begins with what was typed
     * (--ctx for --ctx-size; before a typo's match, so --api-key-f is
     * --api-key-file, not --api-key); else the typo's match; else a word
     * run on: the longest option of 4 letters or more that what was typed
     * begins with (--temperature, --temprature for --temp). */
    const char *only_longer = NULL, *begun = NULL;
    size_t only_m = 0, begun_m = 0;
    bool several_longer = false;
    for (const char *at = strstr(text, "--"); at; at = strstr(at + 2, "--")) {
        const char *cand = at + 2;
        const size_t m = strspn(cand, "abcdefghijklmnopqrstuvwxyz0123456789-");
        /* an option starts with a letter, after a blank or an opening mark */
        const bool starts = at == text || strchr(" \t\n([|,/`", at[-1]);
        if (!starts || m == 0 || !(cand[0] >= 'a' && cand[0] <= 'z')) continue;
        const int dist = typo_distance(name, n, cand, m);
        if (dist < best) {
            best = dist;
            snprintf(out, size, "--%.*s", (int)m, cand);
        }
        if (n >= 3 && m > n && m <= NEAREST_MAX && strncmp(cand, name, n) == 0) {
            several_longer |= only_longer && (only_m != m || strncmp(only_longer, cand, m) != 0);
            only_longer = cand, only_m = m;
        }
        if (m >= 4 && n > m && strncmp(name, cand, m) == 0 && m > begun_m) begun = cand, begun_m = m;
    }
    if (only_longer && !several_longer) snprintf(out, size, "--%.*s", (int)only_m, only_longer);
    else if (best < TYPO_NONE) return out;
    else if (begun) snprintf(out, size, "--%.*s", (int)begun_m, begun);
    else return NULL;
    return out;
}

const char *vt_cli_nearest_word(const char *typed, const char *const *words, size_t n_words) {
    const size_t n = strlen(typed);
    if (n == 0 || n > NEAREST_MAX) return NULL;
    const char *nearest = NULL;
    int best = TYPO_NONE;
    for (size_t i = 0; i < n_words; i++) {
        const int dist = typo_distance(typed, n, words[i], strlen(words[i]));
        if (dist < best) best = dist, nearest = words[i];
    }
    return nearest;
}

/* Whether help text shows option followed by a value's name in capitals
 * ("--prompt TEXT", "--top-k K") anywhere. */
static bool option_takes_value(const char *text, const char *option) {
    const size_t n = strlen(option);
    for (const char *at = strstr(text, option); at; at = strstr(at + n, option))
        if ((at[n] == ' ' || at[n] == '=') && at[n + 1] >= 'A' && at[n + 1] <= 'Z') return true;
    return false;
}

/* The "; did you mean --OPTION?" of an unknown option, or "": matched to
 * the options the command's help lists and, for a command that takes the
 * engine flags (engine), to those too (vt config's help names them only as
 * "any engine flag"). */
static void did_you_mean(const vt_cli_parser *p, bool engine, const char *typed, char *out, size_t size) {
    out[0] = '\0';
    char *text = NULL, nearest[NEAREST_MAX + 3];
    size_t len = 0;
    FILE *f = p->help ? open_memstream(&text, &len) : NULL;
    if (!f) return;
    p->help(f);
    for (size_t k = 0; engine && k < sizeof knobs / sizeof *knobs; k++)
        if (p->samples || strncmp(knobs[k].key, "sampling.", 9) != 0) fprintf(f, " %s", knobs[k].flag);
    if (fclose(f) != 0) {
        free(text);
        return;
    }
    /* "-p=16", "-np=4": a short option the help lists ("  -p, --prompt
     * TEXT", "-np N"), its value joined by '=' as only a long option's may be */
    const char *eq = strchr(typed, '=');
    if (typed[0] == '-' && typed[1] != '-' && eq && eq > typed + 1 && (size_t)(eq - typed) < NEAREST_MAX) {
        const size_t n = (size_t)(eq - typed);
        char shortopt[NEAREST_MAX];
        memcpy(shortopt, typed, n);
        shortopt[n] = '\0';
        for (const char *at = strstr(text, shortopt); at; at = strstr(at + n, shortopt))
            if ((at == text || at[-1] == ' ' || at[-1] == '(') && (at[n] == ',' || at[n] == ' ' || at[n] == ')')) {
                snprintf(out, size, "; give %s its value as the next argument (%s %s)", shortopt, shortopt, eq + 1);
                break;
            }
        free(text);
        return;
    }
    if (vt_cli_nearest_option(typed, text, nearest, sizeof nearest)) {
        /* the option itself with "=value": one that takes a value had it
         * taken apart in its place (joined_value), so this one takes none
         * ("--json=1") */
        const size_t n = strcspn(typed, "=");
        if (strlen(nearest) == n && strncmp(nearest, typed, n) == 0)
            snprintf(out, size, "; %s takes no value", nearest);
        else
            snprintf(out, size, "; did you mean %s?", nearest);
    }
    free(text);
}

/* Whether arg, in an option's place, is "--name=value" with a --name the
 * command's help shows taking a value ("--prompt TEXT", "--port N"): then
 * name gets "--name", and the option takes its value from after the '='
 * as GNU getopt does. Only an option's place is looked at: a value (the
 * text after -p, say) is never taken apart. *text: the help, printed on
 * first need (the caller frees it). A flag that takes no value keeps its
 * "=value" and is refused naming that (did_you_mean). */
static bool joined_value(const vt_cli_parser *p, const char *arg, char **text, char *name, size_t size) {
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, "--", 2) != 0 || !eq || eq == arg + 2 || (size_t)(eq - arg) >= size || !p->help) return false;
    if (!*text) {
        size_t len = 0;
        FILE *f = open_memstream(text, &len);
        if (!f) return false;
        p->help(f);
        if (fclose(f) != 0) {
            free(*text);
            *text = NULL;
            return false;
        }
    }
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = '\0';
    return option_takes_value(*text, name);
}

static vt_status parse_args(const vt_cli_parser *p, vt_cli_common *c, void *opts, bool *help, int argc, char **argv,
                            vt_error *err);

vt_status vt_cli_parse(const vt_cli_parser *p, vt_cli_common *c, void *opts, bool *help, int argc, char **argv,
                       vt_error *err) {
    error_options = NULL; /* until these are parsed */
    return parse_args(p, c, opts, help, argc, argv, err);
}

static vt_status parse_args(const vt_cli_parser *p, vt_cli_common *c, void *opts, bool *help, int argc, char **argv,
                            vt_error *err) {
    *help = false;
    if (c && vt_cli_init(c, argc, argv, err) != VT_OK) return err->code;
    char *text = NULL; /* the help, for joined_value */
    vt_status st = VT_OK;
    for (int i = 1; i < argc; i++) {
        /* "--name=value": the handlers see "--name" and "value" */
        char name[NEAREST_MAX + 3], *pair[3] = {name, NULL, NULL};
        const bool joined = joined_value(p, argv[i], &text, name, sizeof name);
        if (joined) pair[1] = strchr(argv[i], '=') + 1;
        char **args = joined ? pair : argv;
        int n = joined ? 2 : argc, at = joined ? 0 : i;
        const char *a = args[at];
        /* the command's own flags first: eval's --top-k is the report size,
         * not the sampling filter of the same name */
        vt_arg_result r = p->own ? p->own(opts, n, args, &at, err) : VT_ARG_NOT_MINE;
        if (r == VT_ARG_NOT_MINE && p->several_backends && is_flag(a, "--backend")) {
            st = vt_fail(err, VT_ERR_INVALID, "%s runs several backends: use --backends NAME[,NAME...] or all", p->name);
            break;
        }
        /* a command that never samples refuses the sampling flags rather
         * than take them and change nothing */
        if (r == VT_ARG_NOT_MINE && c && !p->samples && sampling_flag(a)) {
            st = vt_fail(err, VT_ERR_INVALID, "%s: vt %s does not sample; %s is for vt run, vt chat and vt serve",
                         sampling_flag(a), p->name, sampling_flag(a));
            break;
        }
        if (r == VT_ARG_NOT_MINE && c) r = vt_cli_common_arg(c, n, args, &at, err);
        if (r == VT_ARG_ERROR) {
            st = err->code;
            break;
        }
        if (r == VT_ARG_TAKEN && joined && at != 1) { /* a flag the help showed with a value took none */
            st = vt_fail(err, VT_ERR_INVALID, "%s: %s takes no value", p->name, name);
            break;
        }
        if (r == VT_ARG_TAKEN) {
            if (!joined) i = at;
            continue;
        }
        a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = true;
            break;
        }
        char hint[2 * NEAREST_MAX + 64];
        did_you_mean(p, c != NULL, a, hint, sizeof hint);
        st = vt_fail(err, VT_ERR_INVALID, "%s: %s '%s'%s%s%s%s", p->name,
                     a[0] != '-' || strcmp(a, "-") == 0 ? "unexpected argument" : "unknown option", a, hint,
                     p->see_help ? " (see vt " : "", p->see_help ? p->name : "", p->see_help ? " --help)" : "");
        break;
    }
    free(text);
    if (st == VT_OK && c) error_options = &c->opt;
    return st;
}

/* path names a readable file: a regular one, or with pipes a pipe too. */
static vt_status given(const char *path, bool pipes, vt_error *err) {
    struct stat st;
    /* an unset variable expanded into the command line (-m $MODEL) */
    if (!path[0]) return vt_fail(err, VT_ERR_INVALID, "the file name is empty");
    if (stat(path, &st) != 0) return vt_fail(err, VT_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) && !(pipes && S_ISFIFO(st.st_mode)))
        return vt_fail(err, VT_ERR_INVALID, "%s: not a regular file%s", path, pipes ? " or a pipe" : "");
    if (access(path, R_OK) != 0) return vt_fail(err, VT_ERR_INVALID, "%s: cannot open: %s", path, strerror(errno));
    return VT_OK;
}

vt_status vt_cli_given_file(const char *path, vt_error *err) { return given(path, false, err); }

vt_status vt_cli_given_stream(const char *path, vt_error *err) { return given(path, true, err); }

vt_status vt_cli_require_model(const char *path, vt_error *err) {
    if (path && !path[0]) return vt_fail(err, VT_ERR_INVALID, "-m: the model's file name is empty");
    return path ? vt_cli_given_file(path, err) : vt_fail(err, VT_ERR_INVALID, "no model: pass -m FILE");
}

vt_status vt_cli_first_failure(vt_status st, const vt_error *first, vt_error *err) {
    if (st != VT_OK || first->code == VT_OK) return st;
    *err = *first;
    return err->code;
}

vt_status vt_cli_engine_for_backend(const vt_cli_common *c, vt_model *model, const char *name, const char *options,
                                    const vt_engine_shape *shape, vt_engine **out, vt_error *err) {
    vt_options opt = c->opt;
    snprintf(opt.backend, sizeof opt.backend, "%.63s", name);
    char label[256];
    snprintf(label, sizeof label, "%s%s%s", name, options && *options ? ":" : "", options ? options : "");
    for (const char *item = options ? options : ""; *item;) {
        const char *end = strchr(item, ':'), *eq = strchr(item, '=');
        size_t n = end ? (size_t)(end - item) : strlen(item);
        char key[192], value[192];
        if (!eq || eq > item + n || (size_t)(eq - item) + strlen(name) + 2 > sizeof key || n >= sizeof value)
            return vt_fail(err, VT_ERR_INVALID, "backend %s: '%.*s' is not key=value", label, (int)n, item);
        snprintf(key, sizeof key, "%s.%.*s", name, (int)(eq - item), item);
        snprintf(value, sizeof value, "%.*s", (int)(n - (size_t)(eq - item) - 1), eq + 1);
        /* "backends": a refusal names --backends NAME:key=value, where it was written */
        vt_status st = vt_options_set_backend_option_from(&opt, key, value, "backends", err);
        if (st != VT_OK) return vt_error_prefix(err, "backend %s: ", label);
        item = end ? end + 1 : item + n;
    }
    vt_status st = vt_engine_create_shaped(&opt, model, shape, out, err);
    if (st != VT_OK) return vt_error_prefix(err, "backend %s: ", label);
    if (c->explain) {
        fprintf(stderr, "== %s ==\n", label);
        vt_engine_explain(*out, stderr);
    }
    return VT_OK;
}

double vt_cli_now(void) { return vt_now_seconds(); }

void vt_cli_common_help(FILE *f) { vt_cli_common_help_except(f, NULL); }

void vt_cli_common_help_except(FILE *f, const char *const *skip) {
    static const char text[] =
        "  -m, --model FILE         GGUF model\n"
        "      --backend NAME|auto  preferred backend (default: the loaded one whose probe scores highest);\n"
        "                           auto: each node on the backend measured fastest for its shape class\n"
        "      --fallback NAME|none backend for nodes the preferred one declines (default: the\n"
        "                           highest-scoring loaded backend other than the preferred one)\n"
        "      --kv-cache-dtype D   f32, f16, bf16 or q8_0 (default f16; env VT_KV_CACHE_DTYPE, VT_KV_CACHE_F32=1)\n"
        "  -c, --ctx-size N         KV cache size in tokens (default min(model context, 4096))\n"
        "      --block-size N       tokens per KV block (default 16)\n"
        "      --no-prefix-cache    compute every prompt whole (default: a prompt's beginning already in the\n"
        "                           cache is taken from it; --prefix-cache 1|0, ini kv_cache.prefix_cache)\n"
        "      --prefix-cache-blocks N  at most N blocks no request holds stay cached (default 0: until\n"
        "                           their room is needed)\n"
        "  -b, --batch-size N       max tokens per prefill call (default 512)\n"
        "      --max-seqs N         sequences per step of a batch, 1..256 (default 1)\n"
        "      --token-budget N     tokens per scheduler step (default 0: the batch size)\n"
        "      --prefill-chunk N    prompt tokens in a step that also decodes (default 0: automatic, as many\n"
        "                           as take about one decode step's time, so decodes do not stall)\n"
        "      --max-waiting N      requests queued before a batch refuses more (default 256)\n"
        "  -t, --threads N          threads (default: the CPUs vt may use)\n"
        "      --backend-path DIRS  extra backend folders, colon-separated\n"
        "      --backend-option NAME.key=value   an option of backend NAME (repeatable; ini [backend.NAME])\n"
        "      --config FILE        ini file (default: VT_CONFIG; none)\n"
        "      --explain            print the negotiated plans to stderr, then run\n"
        "      --dry-run            build and print the plans, do not run\n"
        "      --special            match control tokens' text in the prompt (off by default)\n";
    /* One flag per entry: an entry whose flag is in skip is left out with
     * its continuation lines (those that start with blanks, not a flag). */
    bool skipped = false;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        const bool continuation = strspn(line, " ") > 8;
        if (!continuation) skipped = false;
        for (const char *const *k = skip; k && *k && !skipped && !continuation; k++) {
            const char *at = strstr(line, *k);
            size_t n = strlen(*k);
            skipped = at && at < line + len && (at[n] == ' ' || at[n] == ',') && (at == line || at[-1] == ' ');
        }
        if (!skipped) fwrite(line, 1, len, f);
        line += len;
    }
}

/* Does msg name option key as a word (not as the start of a longer key)? */
static bool names_key(const char *msg, const char *key) {
    const size_t n = strlen(key);
    for (const char *at = strstr(msg, key); at; at = strstr(at + 1, key)) {
        const char before = at == msg ? ' ' : at[-1], after = at[n];
        const bool word_before = !(before == '.' || before == '_' || (before >= 'a' && before <= 'z'));
        const bool word_after = !(after == '.' || after == '_' || (after >= 'a' && after <= 'z'));
        if (word_before && word_after) return true;
    }
    return false;
}

/* The library's messages name options by their key (kv_cache.dtype); on the
 * command line the user knows the flag, so each key the message names gets
 * its flag beside it, on the same line. */
int vt_cli_error(const vt_error *err) {
    const char *msg = err->msg[0] ? err->msg : vt_status_name(err->code);
    fprintf(stderr, "vt: %s", msg);
    int named = 0;
    for (size_t k = 0; k < sizeof knobs / sizeof *knobs; k++)
        if (names_key(msg, knobs[k].key))
            fprintf(stderr, "%s%s is %s", named++ ? ", " : " [flags: ", knobs[k].key, knobs[k].flag);
    if (named) fputc(']', stderr);
    /* and where each was set, when not by a flag: an ini line or a variable */
    for (size_t k = 0; error_options && k < sizeof knobs / sizeof *knobs; k++) {
        const char *source = vt_options_source(error_options, knobs[k].key);
        char value[128];
        if (!names_key(msg, knobs[k].key) || !source || !strcmp(source, "default") || !strcmp(source, "cli") ||
            vt_options_value(error_options, knobs[k].key, value, sizeof value, NULL) != VT_OK)
            continue;
        char where[VT_SOURCE_SIZE + sizeof error_options->config_path];
        fprintf(stderr, " (%s = %s from %s)", knobs[k].key, value,
                vt_options_where(error_options, source, where, sizeof where));
    }
    fputc('\n', stderr);
    switch (err->code) {
    case VT_OK: return 0;
    /* a file the command was given (model, template, grammar, config) that
     * does not parse is a bad argument too; one that cannot be opened is
     * said so before the library opens it (vt_cli_given_file) */
    case VT_ERR_INVALID:
    case VT_ERR_FORMAT: return 2;
    case VT_ERR_CONTEXT_FULL: return 3;
    case VT_ERR_UNSUPPORTED: return 4;
    case VT_ERR_BACKEND: return 5;
    case VT_ERR_NOMEM: return 6;
    default: return 1;
    }
}

int vt_cli_exit(vt_status st, const vt_error *err) {
    return st == VT_OK ? 0 : vt_cli_error(err);
}

vt_status vt_cli_open_engine(const vt_cli_common *c, bool all_logits, vt_model **model, vt_engine **engine,
                             vt_error *err) {
    *model = NULL;
    *engine = NULL;
    vt_status st = vt_cli_require_model(c->model_path, err);
    if (st == VT_OK) st = vt_model_load(c->model_path, model, err);
    if (st != VT_OK) return st;
    st = vt_engine_create(&c->opt, *model, all_logits, engine, err);
    if (st != VT_OK) {
        vt_model_free(*model);
        *model = NULL;
        return st;
    }
    if (c->explain) vt_engine_explain(*engine, stderr);
    return VT_OK;
}

char *vt_cli_read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            char *grown = realloc(buf, (cap *= 2) + 1);
            if (!grown) {
                free(buf);
                return NULL;
            }
            buf = grown;
        }
    }
    if (!buf || ferror(f)) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

vt_status vt_cli_prompt_check(const vt_cli_prompt *p, vt_error *err) {
    int given = (p->text != NULL) + (p->file != NULL) + (p->ids != NULL);
    if (given > 1)
        return vt_fail(err, VT_ERR_INVALID, "give one prompt: -p TEXT, -f FILE or --tokens IDS, not %s%s%s%s%s",
                       p->text ? "-p" : "", p->text && p->file ? " and " : "", p->file ? "-f" : "",
                       p->ids && (p->text || p->file) ? " and " : "", p->ids ? "--tokens" : "");
    return VT_OK;
}

vt_status vt_cli_prompt_text(const vt_cli_prompt *p, char **owned, const char **text, size_t *len, vt_error *err) {
    *owned = NULL;
    if (p->file || (p->text && strcmp(p->text, "-") == 0)) {
        /* read as a stream to its end, so a pipe does too: -f <(command) */
        if (p->file && vt_cli_given_stream(p->file, err) != VT_OK) return vt_error_prefix(err, "-f ");
        FILE *f = p->file ? fopen(p->file, "rb") : stdin;
        if (!f) return vt_fail(err, VT_ERR_INVALID, "-f %s: cannot open: %s", p->file, strerror(errno));
        *owned = vt_cli_read_all(f, len);
        int read_errno = errno;
        if (f != stdin) fclose(f);
        if (!*owned)
            return vt_fail(err, VT_ERR_IO, "%s%s: cannot read the prompt: %s", p->file ? "-f " : "-p -",
                           p->file ? p->file : " (stdin)", strerror(read_errno));
        *text = *owned;
        return VT_OK;
    }
    *text = p->text ? p->text : "";
    *len = strlen(*text);
    return VT_OK;
}

static vt_status prompt_tokens(const vt_model *m, const vt_cli_prompt *p, bool special, int32_t **tokens, size_t *n,
                               vt_error *err) {
    vt_status st = vt_cli_prompt_check(p, err);
    if (st != VT_OK) return st;
    if (p->ids) return vt_cli_parse_ids("--tokens", p->ids, tokens, n, err);
    if (!m->tokenizer)
        return vt_fail(err, VT_ERR_UNSUPPORTED, "this model's tokenizer cannot be used (%s); pass --tokens",
                       m->tokenizer_error);
    char *owned = NULL;
    const char *text = "";
    size_t len = 0;
    st = vt_cli_prompt_text(p, &owned, &text, &len, err);
    if (st == VT_OK)
        st = vt_tokenize(m->tokenizer, text, len, vt_tokenizer_add_bos(m->tokenizer), special, tokens, n, err);
    free(owned);
    return st;
}

vt_status vt_cli_prompt_tokens_for(const vt_cli_common *c, const vt_model *m, const vt_cli_prompt *p,
                                   int32_t **tokens, size_t *n, vt_error *err) {
    return prompt_tokens(m, p, c->special, tokens, n, err);
}
