/* cmd_backends.c — `vt backends`: what loaded from where, what was refused
 * and why, and each backend's op x dtype capability matrix (asked through
 * supports() with representative nodes, prefill and decode). */
#include <stdio.h>
#include <string.h>

#include "capabilities.h"
#include "cli.h"
#include "host.h"
#include "quant.h"
#include "registry.h"
#include "threadpool.h"

static void print_matrix(const vt_backend_entry *b) {
    printf("    %-18s", "op \\ dtype");
    for (int d = 0; d < VT_CAP_N_DTYPES; d++) printf(" %-5s", vt_dtype_name(vt_cap_dtypes[d]));
    printf("   (P = prefill, D = decode)\n");
    for (int op = 0; op < VT_OP_COUNT; op++) {
        printf("    %-18s", vt_cap_op_name(op));
        for (int d = 0; d < VT_CAP_N_DTYPES; d++) {
            int m = vt_capability(b, op, vt_cap_dtypes[d]);
            const char *cell = m == 3 ? "PD" : m == 1 ? "P" : m == 2 ? "D" : m < 0 ? "" : "-";
            printf(" %-5s", cell);
        }
        printf("\n");
    }
}

static void print_entry(const vt_backend_entry *b, bool matrix) {
    static const char *const states[] = {"loaded", "refused", "shadowed"};
    printf("%-12s %-8s %s", b->name, states[b->state], b->path);
    if (b->state == VT_BACKEND_LOADED) printf("  (ABI %u.%u)", b->abi_major, b->abi_minor);
    printf("\n");
    if (b->state != VT_BACKEND_LOADED) printf("    reason: %s\n", b->reason);
    else if (b->table->description) printf("    %s\n", b->table->description);
    if (matrix && b->state == VT_BACKEND_LOADED) print_matrix(b);
}

int vt_cmd_backends(int argc, char **argv) {
    vt_error err = {0};
    vt_cli_common c;
    if (vt_cli_init(&c, argc, argv, &err) != VT_OK) return vt_cli_error(&err);
    const char *check = NULL;
    bool matrix = true;
    for (int i = 1; i < argc; i++) {
        vt_arg_result r = vt_cli_common_arg(&c, argc, argv, &i, &err);
        if (r == VT_ARG_ERROR) return vt_cli_error(&err);
        if (r == VT_ARG_TAKEN) continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: vt backends [--check FILE] [--brief] [--backend-path DIRS]\n\n"
                   "List every backend found (VT_BACKEND_PATH, then [backends] path, then the install's lib/vt),\n"
                   "loaded, refused (with the reason) or shadowed, and each loaded backend's op x dtype matrix.\n"
                   "--check FILE validates one plugin file without running a model (exit 0 if it loads).\n");
            return 0;
        } else if (strcmp(argv[i], "--check") == 0) {
            if (!(check = vt_cli_value(argc, argv, &i, &err))) return vt_cli_error(&err);
        } else if (strcmp(argv[i], "--brief") == 0) {
            matrix = false;
        } else {
            fprintf(stderr, "vt: backends: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    vt_threadpool *pool = NULL;
    if (vt_threadpool_create(1, &pool, &err) != VT_OK) return vt_cli_error(&err);
    const vt_host *host = vt_host_get(pool);
    int rc = 0;
    if (check) {
        vt_backend_entry entry;
        if (vt_registry_check_file(host, check, &entry, &err) != VT_OK) {
            printf("%s: refused: %s\n", check, err.msg);
            rc = 1;
        } else {
            printf("%s: ok\n", check);
            print_entry(&entry, matrix);
            if (entry.table && entry.table->shutdown) entry.table->shutdown(entry.ctx);
        }
    } else {
        vt_registry *r = NULL;
        if (vt_registry_create(host, c.opt.backend_path[0] ? c.opt.backend_path : NULL, c.opt.backend_options, &r,
                               &err) != VT_OK) {
            vt_threadpool_destroy(pool);
            return vt_cli_error(&err);
        }
        for (int i = 0; i < vt_registry_count(r); i++) print_entry(vt_registry_at(r, i), matrix);
        if (vt_registry_count(r) == 0) printf("no backends found\n");
        vt_registry_destroy(r);
    }
    vt_threadpool_destroy(pool);
    return rc;
}
