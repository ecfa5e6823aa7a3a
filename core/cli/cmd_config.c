/* cmd_config.c — `vt config`: every knob's resolved value and where it came
 * from (cli, env VAR, ini LINE, default), after the same resolution the
 * engine commands do. */
#include <string.h>

#include "cli.h"

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

/* Print every knob, its value and where it came from. */
static vt_status run_config(const config_opts *o, vt_error *err) {
    const vt_options *opt = &o->c.opt;
    if (opt->config_path[0]) printf("config file: %s\n", opt->config_path);
    for (int i = 0; i < VT_OPTIONS_KEY_COUNT; i++) {
        const char *key = vt_options_key(i);
        char value[1100];
        if (vt_options_value(opt, key, value, sizeof value, err) != VT_OK) return err->code;
        /* An empty backend or fallback is chosen when the engine opens, from
         * the backends' probe scores: say so rather than print a bare blank. */
        const char *automatic = NULL;
        if (!value[0] && strcmp(key, "runtime.backend") == 0) automatic = "the highest-scoring loaded backend";
        if (!value[0] && strcmp(key, "runtime.fallback") == 0)
            automatic = "the highest-scoring loaded backend other than runtime.backend";
        if (automatic)
            printf("%-20s = %-12s (%s: %s)\n", key, value, vt_options_source(opt, key), automatic);
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
