/* cmd_version.c — `vt version` / `vt --version`: what this vt is and what it
 * can run here, the first thing to paste into a bug report: the version, the
 * backend ABI it speaks, the CPU features the vector kernels need, and every
 * backend found with its ABI and what it runs on. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "engine.h"
#include "host.h"
#include "machine.h"
#include "registry.h"
#include "threadpool.h"
#include "vt/vt.h"
#include "vt/vt_backend.h"
#include "vt/vt_cpu.h"

static void cpu_line(void) {
    const vt_cpu_features f = vt_cpu_detect();
    vt_machine m;
    vt_machine_describe(&m);
    printf("cpu: %s, %d cores; vector extensions: %s", m.cpu, m.cores, m.isa);
    if (f.missing) printf(" (the simd backend cannot run here: %s)", f.missing);
    printf("\n");
}

int vt_cmd_version(int argc, char **argv) {
    static const vt_cli_parser parser = {.name = "version", .see_help = true};
    vt_error err = {0};
    vt_cli_common c;
    bool help = false;
    /* Engine flags count (--backend-path, VT_BACKEND_PATH: where backends are looked for). */
    vt_status st = vt_cli_parse(&parser, &c, NULL, &help, argc, argv, &err);
    if (st == VT_OK && help) {
        printf("usage: vt version [--backend-path DIRS]   (also: vt --version)\n\n"
               "Print vt's version, the backend ABI it speaks, this CPU's vector features, and every\n"
               "backend found: loaded or refused, its ABI, its probe score and what it runs on.\n");
        return 0;
    }
    if (st != VT_OK) return vt_cli_exit(st, &err);
    printf("vt %s\nbackend ABI: %d.%d\n", vt_version(), VT_ABI_MAJOR, VT_ABI_MINOR);
    cpu_line();
    vt_threadpool *pool = NULL;
    vt_registry *r = NULL;
    st = vt_threadpool_create(1, &pool, &err);
    /* Options are left out: this lists what exists, not what a run's
     * options would make of it. */
    if (st == VT_OK)
        st = vt_registry_create(vt_host_get(pool), c.opt.backend_path[0] ? c.opt.backend_path : NULL, NULL, &r, &err);
    if (st == VT_OK) {
        const int32_t preferred = vt_engine_default_backend(r);
        printf("backends:\n");
        for (int i = 0; i < vt_registry_count(r); i++) {
            const vt_backend_entry *b = vt_registry_at(r, i);
            char isa[VT_BACKEND_ISA_MAX];
            if (b->state == VT_BACKEND_LOADED)
                printf("  %-10s ABI %u.%u, score %d%s, runs at %s: %s\n", b->name, b->abi_major, b->abi_minor,
                       b->score, i == preferred ? " (default)" : "", vt_backend_isa(b, isa, sizeof isa),
                       b->table->description ? b->table->description : "(no description)");
            else
                printf("  %-10s %s: %s\n", b->name, b->state == VT_BACKEND_REFUSED ? "refused" : "shadowed",
                       b->reason);
        }
        if (vt_registry_count(r) == 0) printf("  none found\n");
    }
    vt_registry_destroy(r);
    vt_host_release_pool(pool);
    vt_threadpool_destroy(pool);
    return vt_cli_exit(st, &err);
}
