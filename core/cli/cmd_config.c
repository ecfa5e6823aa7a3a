/* cmd_config.c — `vt config`: every knob's resolved value and where it came
 * from (cli, env VAR, ini FILE:LINE, default), after the same resolution the
 * engine commands do. */
#include <stdlib.h>
#include <string.h>

#include "chat_source.h"
#include "cli.h"
#include "host.h"
#include "registry.h"
#include "scheduler.h"
#include "serve_options.h"
#include "threadpool.h"

static void help(FILE *f) {
    fprintf(f, "usage: vt config [--config FILE] [any engine or sampling flag] [vt serve's --host HOST,\n"
               "                 --port N, --chat-template NAME, --chat-template-file FILE, --model-alias NAME,\n"
               "                 --body-limit BYTES, --timeout SECONDS, --shutdown-grace SECONDS,\n"
               "                 --cors-origin ORIGIN, --parallel N]\n\n"
               "Print every knob's value and its source after resolving command line > environment >\n"
               "ini file > default, exactly as vt run would: backend options are listed as backend.NAME.key,\n"
               "and a backend, fallback, backend option or token budget a run would refuse, or a chat\n"
               "template setting vt serve would, is refused here with the same message and exit status\n"
               "(without a model: limits a model sets, such as a token budget past its context, are\n"
               "checked when a run opens it). The last lines are what only the environment sets:\n"
               "VT_BACKEND_PATH (backend folders searched before backends.path), VT_LOG (the log level),\n"
               "and the plan check: VT_CHECK_PLAN=1 makes the first run of each plan re-offer every node,\n"
               "as executed, to its backend and fail naming a node it declines (default: on in Debug\n"
               "and sanitizer builds, off in Release; 0 turns it off).\n");
}

/* What `vt config` was asked: only engine flags, resolved as they are read. */
typedef struct config_opts {
    vt_cli_common c;
    bool help;
} config_opts;

/* vt serve's [server] flags, as vt serve sets them: what a serve command
 * line resolves to, shown here. */
static vt_arg_result config_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    config_opts *o = opts;
    const char *key = vt_serve_option_of_flag(argv[*i]);
    return key ? vt_cli_setting_arg(&o->c.opt, key, argc, argv, i, err) : VT_ARG_NOT_MINE;
}

static vt_status parse_config(int argc, char **argv, config_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {.name = "config", .samples = true, .own = config_arg, .help = help};
    const vt_status st = vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
    if (st != VT_OK) return st;
    vt_chat_template_settle(&o->c.opt); /* as vt serve and vt chat settle them */
    return vt_chat_template_check(&o->c.opt, err);
}

/* Which backend and fallback a run with these options would take, from the
 * backends found here with the options given to them (the same search,
 * checks and ranking an engine makes: a backend, fallback or backend option
 * a run would refuse is refused here), into backend/fallback ("" when there
 * is none to name). */
static vt_status resolve_backends(const vt_options *opt, char *backend, char *fallback, size_t size, vt_error *err) {
    backend[0] = fallback[0] = '\0';
    vt_threadpool *pool = NULL;
    vt_registry *r = NULL;
    int32_t preferred = -1, fb = -1;
    vt_status st = vt_threadpool_create(1, &pool, err);
    if (st == VT_OK)
        st = vt_registry_create(vt_host_get(pool), opt->backend_path[0] ? opt->backend_path : NULL,
                                opt->backend_options, &r, err);
    if (st == VT_OK) st = vt_engine_resolve_backends(opt, r, true, &preferred, &fb, err);
    if (st == VT_OK && preferred >= 0) snprintf(backend, size, "%s", vt_registry_at(r, preferred)->name);
    if (st == VT_OK && fb >= 0) snprintf(fallback, size, "%s", vt_registry_at(r, fb)->name);
    vt_registry_destroy(r);
    vt_host_release_pool(pool);
    vt_threadpool_destroy(pool);
    return st;
}

/* A source as vt config shows it: "ini LINE" (what the options record, the
 * file said once above) as "ini FILE:LINE", the way an ini error names it,
 * so each line says which file set it. */
static const char *shown_source(const vt_options *opt, const char *source, char *buf, size_t size) {
    if (strncmp(source, "ini ", 4) != 0) return source;
    char where[VT_SOURCE_SIZE + sizeof opt->config_path];
    snprintf(buf, size, "ini %s", vt_options_where(opt, source, where, sizeof where));
    return buf;
}

/* Every backend option (backend.NAME.key = value), with its source. */
static void print_backend_options(const vt_options *opt, int w) {
    for (const char *line = opt->backend_options; *line;) {
        const char *end = strchr(line, '\n');
        const int len = (int)(end ? (size_t)(end - line) : strlen(line));
        const char *eq = memchr(line, '=', (size_t)len);
        char key[160], src[VT_SOURCE_SIZE], shown[VT_SOURCE_SIZE + sizeof opt->config_path];
        const int key_len = eq ? (int)(eq - line) : len;
        snprintf(key, sizeof key, "%.*s", key_len, line);
        const char *source = vt_options_backend_option_source(opt, key, src, sizeof src);
        char name[200];
        snprintf(name, sizeof name, "backend.%s", key);
        printf("%-*s = %-12.*s (%s)\n", w, name, eq ? len - key_len - 1 : 0, eq ? eq + 1 : "",
               source ? shown_source(opt, source, shown, sizeof shown) : "?");
        line += len + (end ? 1 : 0);
    }
}

/* Print every knob, its value and where it came from. */
static vt_status run_config(const config_opts *o, vt_error *err) {
    const vt_options *opt = &o->c.opt;
    char backend[64], fallback[64];
    vt_status st = resolve_backends(opt, backend, fallback, sizeof backend, err);
    if (st != VT_OK) return st;
    if (opt->config_path[0]) printf("config file: %s\n", opt->config_path);
    int w = (int)strlen("VT_BACKEND_PATH"); /* the key column: the longest key's width */
    for (int i = 0; i < vt_options_key_count(); i++)
        if ((int)strlen(vt_options_key(i)) > w) w = (int)strlen(vt_options_key(i));
    for (const char *line = opt->backend_options; *line;) { /* backend.NAME.key */
        const size_t len = strcspn(line, "\n"), key_len = strcspn(line, "=\n");
        if ((int)(strlen("backend.") + key_len) > w) w = (int)(strlen("backend.") + key_len);
        line += len + (line[len] == '\n');
    }
    for (int i = 0; i < vt_options_key_count(); i++) {
        const char *key = vt_options_key(i);
        char value[1100];
        if (vt_options_value(opt, key, value, sizeof value, err) != VT_OK) return err->code;
        /* An empty backend or fallback is chosen when the engine opens, from
         * the backends' probe scores: say so rather than print a bare blank. */
        const char *automatic = NULL, *resolved = NULL;
        if (!value[0] && strcmp(key, "runtime.backend") == 0) {
            automatic = "the highest-scoring loaded backend";
            resolved = backend;
        }
        if (!value[0] && strcmp(key, "runtime.fallback") == 0) {
            automatic = "the highest-scoring loaded backend other than runtime.backend";
            resolved = fallback;
        }
        /* values that stand for a rule rather than a number */
        const char *meaning = strcmp(key, "kv_cache.ctx_size") == 0 && strcmp(value, "0") == 0
                                  ? "the model's context, at most 4096"
                              : strcmp(key, "sampling.seed") == 0 && strcmp(value, "-1") == 0
                                  ? "a random seed per run (per request in vt serve), printed so it can be replayed"
                              : strcmp(key, "kv_cache.prefix_cache_blocks") == 0 && strcmp(value, "0") == 0
                                  ? "no limit: cached blocks are kept until their room is needed"
                              : strcmp(key, "runtime.token_budget") == 0 && strcmp(value, "0") == 0
                                  ? "the batch size"
                              : strcmp(key, "runtime.prefill_chunk") == 0 && strcmp(value, "0") == 0
                                  ? "automatic"
                              /* vt serve sets its own when nothing else did */
                              : strcmp(key, "runtime.max_seqs") == 0 && strcmp(vt_options_source(opt, key), "default") == 0
                                  ? "vt serve's default is " VT_CLI_SERVE_MAX_SEQS
                                  : NULL;
        char shown[VT_SOURCE_SIZE + sizeof opt->config_path];
        const char *source = shown_source(opt, vt_options_source(opt, key), shown, sizeof shown);
        if (automatic)
            printf("%-*s = %-12s (%s: %s: %s here)\n", w, key, value, source, automatic,
                   resolved[0] ? resolved : "none");
        else if (meaning)
            printf("%-*s = %-12s (%s: %s)\n", w, key, value, source, meaning);
        else
            printf("%-*s = %-12s (%s)\n", w, key, value, source);
    }
    print_backend_options(opt, w);
    /* what only the environment sets (the CLI refused a bad VT_LOG before this) */
    const char *path = getenv("VT_BACKEND_PATH"), *log = getenv("VT_LOG");
    printf("%-*s = %-12s (%s)\n", w, "VT_BACKEND_PATH", path ? path : "",
           path && *path ? "env VT_BACKEND_PATH: searched before backends.path" : "not set");
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    const int level = vt_log_get_level();
    printf("%-*s = %-12s (%s)\n", w, "VT_LOG", level >= 0 && level <= 3 ? levels[level] : "?",
           log && *log ? "env VT_LOG" : "default");
    printf("%-*s = %-12s (%s)\n", w, "VT_CHECK_PLAN", opt->check_plan ? "1" : "0", opt->check_plan_source);
    return VT_OK;
}

/* The one rule across settings a run checks before any model is read: the
 * token budget within one forward (the batch size, and the context when it
 * is given; a context the model decides is checked when a run opens it). */
static vt_status check_token_budget(const vt_options *opt, vt_error *err) {
    const int64_t step_max = opt->ctx_size > 0 && opt->ctx_size < opt->batch_size ? opt->ctx_size : opt->batch_size;
    return vt_sched_check_token_budget(opt->token_budget, step_max, err);
}

/* Each value is checked as it is set; across them, the token budget. */
int vt_cmd_config(int argc, char **argv) {
    vt_error err = {0};
    config_opts o;
    vt_status st = parse_config(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    /* flags of a run that are not settings: nothing here to apply them to */
    if (st == VT_OK && (o.c.special || o.c.explain || o.c.dry_run || o.c.model_path))
        st = vt_fail(&err, VT_ERR_INVALID, "config: %s applies to a run; vt config prints settings",
                     o.c.special ? "--special" : o.c.explain ? "--explain" : o.c.dry_run ? "--dry-run" : "-m");
    if (st == VT_OK) st = check_token_budget(&o.c.opt, &err);
    if (st == VT_OK) st = run_config(&o, &err);
    return vt_cli_exit(st, &err);
}
