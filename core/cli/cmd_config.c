/* cmd_config.c — `vt config`: every knob's resolved value and where it came
 * from (cli, env VAR, ini LINE, default), after the same resolution the
 * engine commands do. */
#include <string.h>

#include "cli.h"
#include "host.h"
#include "registry.h"
#include "threadpool.h"

static void help(void) {
    printf("usage: vt config [--config FILE] [any engine flag]\n\n"
           "Print every knob's value and its source after resolving command line > environment >\n"
           "ini file > default, exactly as vt run would. The last line is the plan check, set only by\n"
           "the environment: VT_CHECK_PLAN=1 makes the first run of each plan re-offer every node,\n"
           "as executed, to its backend and fail naming a node it declines (default: on in Debug\n"
           "and sanitizer builds, off in Release; 0 turns it off).\n");
}

/* What `vt config` was asked: only engine flags, resolved as they are read. */
typedef struct config_opts {
    vt_cli_common c;
    bool help;
} config_opts;

static vt_status parse_config(int argc, char **argv, config_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {.name = "config"};
    return vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
}

/* The loaded backend named `name`, or -1. */
static int32_t loaded_named(const vt_registry *r, const char *name) {
    for (int i = 0; i < vt_registry_count(r); i++)
        if (vt_registry_at(r, i)->state == VT_BACKEND_LOADED && strcmp(vt_registry_at(r, i)->name, name) == 0)
            return i;
    return -1;
}

/* Which backend and fallback a run with these options would take, from the
 * backends found here (the same search and ranking an engine uses), into
 * backend/fallback ("" when there is none to name). */
static void resolve_backends(const vt_options *opt, char *backend, char *fallback, size_t size) {
    backend[0] = fallback[0] = '\0';
    vt_threadpool *pool = NULL;
    vt_registry *r = NULL;
    vt_error ignored;
    if (vt_threadpool_create(1, &pool, &ignored) == VT_OK &&
        vt_registry_create(vt_host_get(pool), opt->backend_path[0] ? opt->backend_path : NULL, NULL, &r,
                           &ignored) == VT_OK) {
        int32_t preferred = opt->backend[0] ? loaded_named(r, opt->backend) : vt_engine_default_backend(r);
        int32_t fb = opt->fallback[0] ? -1 : vt_engine_default_fallback(r, preferred);
        if (preferred >= 0) snprintf(backend, size, "%s", vt_registry_at(r, preferred)->name);
        if (fb >= 0) snprintf(fallback, size, "%s", vt_registry_at(r, fb)->name);
    }
    vt_registry_destroy(r);
    vt_host_release_pool(pool);
    vt_threadpool_destroy(pool);
}

/* Print every knob, its value and where it came from. */
static vt_status run_config(const config_opts *o, vt_error *err) {
    const vt_options *opt = &o->c.opt;
    char backend[64], fallback[64];
    resolve_backends(opt, backend, fallback, sizeof backend);
    if (opt->config_path[0]) printf("config file: %s\n", opt->config_path);
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
        if (automatic)
            printf("%-20s = %-12s (%s: %s: %s here)\n", key, value, vt_options_source(opt, key), automatic,
                   resolved[0] ? resolved : "none");
        else
            printf("%-20s = %-12s (%s)\n", key, value, vt_options_source(opt, key));
    }
    printf("%-20s = %-12s (%s)\n", "VT_CHECK_PLAN", opt->check_plan ? "1" : "0", opt->check_plan_source);
    return VT_OK;
}

/* config has no rules across its flags: each value is checked as it is set. */
int vt_cmd_config(int argc, char **argv) {
    vt_error err = {0};
    config_opts o;
    vt_status st = parse_config(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help();
        return 0;
    }
    if (st == VT_OK) st = run_config(&o, &err);
    return vt_cli_exit(st, &err);
}
