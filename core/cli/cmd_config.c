/* cmd_config.c — `vt config`: every knob's resolved value and where it came
 * from (cli, env VAR, ini LINE, default), after the same resolution the
 * engine commands do. */
#include <string.h>

#include "cli.h"

int vt_cmd_config(int argc, char **argv) {
    vt_error err = {0};
    vt_cli_common c;
    if (vt_cli_init(&c, argc, argv, &err) != VT_OK) return vt_cli_error(&err);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: vt config [--config FILE] [any engine flag]\n\n"
                   "Print every knob's value and its source after resolving command line > environment >\n"
                   "ini file > default, exactly as vt run would. The last line is the plan check, set only by\n"
                   "the environment: VT_CHECK_PLAN=1 makes the first run of each plan re-offer every node,\n"
                   "as executed, to its backend and fail naming a node it declines (default: on in Debug\n"
                   "and sanitizer builds, off in Release; 0 turns it off).\n");
            return 0;
        }
        vt_arg_result r = vt_cli_common_arg(&c, argc, argv, &i, &err);
        if (r == VT_ARG_ERROR) return vt_cli_error(&err);
        if (r == VT_ARG_NOT_MINE) {
            vt_fail(&err, VT_ERR_INVALID, "config: unknown option '%s'", argv[i]);
            return vt_cli_error(&err);
        }
    }
    if (c.opt.config_path[0]) printf("config file: %s\n", c.opt.config_path);
    for (int i = 0; i < VT_OPTIONS_KEY_COUNT; i++) {
        const char *key = vt_options_key(i);
        char value[1100];
        if (vt_options_value(&c.opt, key, value, sizeof value, &err) != VT_OK) return vt_cli_error(&err);
        printf("%-20s = %-12s (%s)\n", key, value, vt_options_source(&c.opt, key));
    }
    printf("%-20s = %-12s (%s)\n", "VT_CHECK_PLAN", c.opt.check_plan ? "1" : "0", c.opt.check_plan_source);
    return 0;
}
