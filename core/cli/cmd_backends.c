/* cmd_backends.c — `vt backends`: what loaded from where, what was refused
 * and why, and each backend's op x dtype capability matrix (asked through
 * supports() with representative nodes, prefill and decode); --check judges
 * one plugin file by loading it, --test runs a backend's ops against the
 * reference (backends_test.c). */
#include <stdio.h>
#include <string.h>

#include "backends_test.h"
#include "capabilities.h"
#include "cli.h"
#include "engine.h"
#include "host.h"
#include "quant.h"
#include "registry.h"
#include "threadpool.h"

static void print_matrix(const vt_backend_entry *b) {
    printf("    %-18s", "op \\ dtype");
    for (int d = 0; d < VT_CAP_N_DTYPES; d++) printf(" %-5s", vt_dtype_name(vt_cap_dtypes[d]));
    printf("   (P = prefill, D = decode, - = declined, blank = not applicable)\n");
    for (int op = 0; op < VT_OP_COUNT; op++) {
        printf("    %-18s", vt_op_name(op));
        for (int d = 0; d < VT_CAP_N_DTYPES; d++) {
            int m = vt_capability(b, op, vt_cap_dtypes[d]);
            const char *cell = m == 3 ? "PD" : m == 1 ? "P" : m == 2 ? "D" : m < 0 ? "" : "-";
            printf(" %-5s", cell);
        }
        printf("\n");
    }
}

/* mark: "" or what the run would use this backend as ("default backend"). */
static void print_entry(const vt_backend_entry *b, bool matrix, const char *mark) {
    static const char *const states[] = {"loaded", "refused", "shadowed"};
    printf("%-12s %-8s %s", b->name, states[b->state], b->path);
    /* The score ranks the loaded backends: the highest is the default backend. */
    if (b->state == VT_BACKEND_LOADED) printf("  (ABI %u.%u)  score %d", b->abi_major, b->abi_minor, b->score);
    if (mark[0]) printf("  <- %s", mark);
    printf("\n");
    if (b->state != VT_BACKEND_LOADED) printf("    reason: %s\n", b->reason);
    else if (b->table->description) printf("    %s\n", b->table->description);
    if (b->state == VT_BACKEND_LOADED) {
        char isa[VT_BACKEND_ISA_MAX];
        printf("    runs at: %s\n", vt_backend_isa(b, isa, sizeof isa));
    }
    if (matrix && b->state == VT_BACKEND_LOADED) print_matrix(b);
}

static void help(FILE *f) {
    fprintf(f, "usage: vt backends [--check FILE] [--brief] [--backend-path DIRS]\n"
               "       vt backends --test NAME|FILE [--ops LIST] [--dtypes LIST] [--seed S] [--perf] [--json] [-t N]\n"
               "                       [--backend-option NAME.key=value]\n"
               "       vt backends --calibrate -m MODEL [-t N] [-b N]\n\n"
               "List every backend found (VT_BACKEND_PATH, then [backends] path, then the install's lib/vt),\n"
               "loaded (with its probe score: the highest is the default backend), refused (with the reason) or\n"
               "shadowed, and each loaded backend's op x dtype matrix.\n"
               "--check FILE validates one plugin file without running a model (exit 0 if it loads, 1 if it is\n"
               "refused, printing why).\n"
               "--test NAME|FILE runs every op x dtype x phase the backend accepts on generated cases (odd shapes,\n"
               "M = 1 and M > 1, tokens across cache blocks, GQA 1/2/4/8, several sequences, every KV dtype) and\n"
               "on `reference`, and judges each by its normalized mean squared error against a threshold per op and\n"
               "dtype. One line per case, a summary per op with what the backend declined; exit 0 when every case\n"
               "is OK, 1 on any FAIL, 2 when the backend does not load. Each op family runs in a child process:\n"
               "a crash is that case's FAIL (with the signal) and the run goes on. A backend that lists\n"
               "instruction-set tiers (simd on an AVX-512 CPU: isa=avx512, isa=avx2) runs the battery at each;\n"
               "--backend-option NAME.key=value for it tests it as configured instead.\n"
               "  --ops LIST      op families to run (default all): matmul, attention, reshape_and_cache,\n"
               "                  rms_norm, rope, swiglu, add, get_rows, convert, moe_route, moe_matmul,\n"
               "                  moe_combine\n"
               "  --dtypes LIST   dtypes of each op's axis (the matrix's): f32, f16, bf16, q8_0, q4_0, q4_k,\n"
               "                  q5_k, q6_k (default all)\n"
               "  --seed S        seed of the generated inputs (default 1)\n"
               "  --perf          also time each case on the backend: median time, GFLOP/s or GB/s\n"
               "  --json          one JSON document: backend, cases, n_ok, n_failed, declined\n"
               "--calibrate -m MODEL times every shape class of MODEL's plans on every candidate backend again (what\n"
               "--backend auto places by), replaces the calibration cache and prints each class's times and winner.\n");
}

/* What `vt backends` was asked. */
typedef struct backends_opts {
    vt_cli_common c;
    const char *check; /* NULL: list every backend found */
    const char *test;  /* --test NAME|FILE */
    const char *ops, *dtypes;
    int64_t seed;
    bool seed_given;
    bool perf, json;
    bool calibrate;
    bool matrix;
    bool help;
} backends_opts;

static vt_arg_result backends_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    backends_opts *o = opts;
    const char *a = argv[*i];
    /* "--test --help" (or -h) asks for the help, not for a backend of that name */
    if ((strcmp(a, "--check") == 0 || strcmp(a, "--test") == 0) && *i + 1 < argc &&
        (strcmp(argv[*i + 1], "--help") == 0 || strcmp(argv[*i + 1], "-h") == 0)) {
        o->help = true;
        ++*i;
        return VT_ARG_TAKEN;
    }
    if (strcmp(a, "--check") == 0) return vt_cli_text_arg(argc, argv, i, &o->check, err);
    if (strcmp(a, "--test") == 0) return vt_cli_text_arg(argc, argv, i, &o->test, err);
    if (strcmp(a, "--ops") == 0) return vt_cli_text_arg(argc, argv, i, &o->ops, err);
    if (strcmp(a, "--dtypes") == 0) return vt_cli_text_arg(argc, argv, i, &o->dtypes, err);
    if (strcmp(a, "--seed") == 0) {
        o->seed_given = true;
        return vt_cli_int_arg(argc, argv, i, "--seed", 0, INT64_MAX, &o->seed, err);
    }
    if (strcmp(a, "--perf") == 0) o->perf = true;
    else if (strcmp(a, "--json") == 0) o->json = true;
    else if (strcmp(a, "--calibrate") == 0) o->calibrate = true;
    else if (strcmp(a, "--brief") == 0) o->matrix = false;
    else return VT_ARG_NOT_MINE;
    return VT_ARG_TAKEN;
}

static vt_status parse_backends(int argc, char **argv, backends_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {.name = "backends", .own = backends_arg, .help = help};
    *o = (backends_opts){.matrix = true, .seed = 1};
    return vt_cli_parse(&parser, &o->c, o, &o->help, argc, argv, err);
}

/* --test's flags only with --test, and not with --check; the lists checked
 * against the valid names before anything loads. */
static vt_status validate_backends(const backends_opts *o, vt_backends_test_request *req, vt_error *err) {
    if (o->test && o->check) return vt_fail(err, VT_ERR_INVALID, "backends: give --check FILE or --test NAME|FILE, not both");
    if (o->calibrate && (o->test || o->check))
        return vt_fail(err, VT_ERR_INVALID, "backends: --calibrate goes without --check and --test");
    /* engine flags it has nowhere to apply: refused, not ignored */
    if (o->c.special || o->c.dry_run || o->c.explain)
        return vt_fail(err, VT_ERR_INVALID, "backends: %s applies to a run, not to vt backends",
                       o->c.special ? "--special" : o->c.dry_run ? "--dry-run" : "--explain");
    if (o->c.model_path && !o->calibrate)
        return vt_fail(err, VT_ERR_INVALID, "backends: -m goes with --calibrate (vt backends lists and tests backends, not models)");
    if (!o->matrix && (o->test || o->calibrate))
        return vt_fail(err, VT_ERR_INVALID, "backends: --brief shortens the list; it does not go with --%s",
                       o->test ? "test" : "calibrate");
    if (!o->test) {
        if (o->ops || o->dtypes || o->perf || o->json || o->seed_given)
            return vt_fail(err, VT_ERR_INVALID, "backends: --ops, --dtypes, --seed, --perf and --json go with --test");
        return VT_OK;
    }
    *req = (vt_backends_test_request){
        .target = o->test,
        .backend_path = o->c.opt.backend_path[0] ? o->c.opt.backend_path : NULL,
        .backend_options = o->c.opt.backend_options,
        .threads = o->c.opt.threads,
        .seed = (uint64_t)o->seed,
        .perf = o->perf,
        .json = o->json,
    };
    return vt_backends_test_select(req, o->ops, o->dtypes, err);
}

/* The verdict on one plugin file, on stdout; *refused when it does not load
 * (the answer of --check, not an error of the command). */
static void check_file(const backends_opts *o, const vt_host *host, bool *refused) {
    vt_backend_entry entry = {0};
    vt_error why = {0};
    if (vt_registry_check_file(host, o->check, o->c.opt.backend_options, &entry, &why) != VT_OK) {
        printf("%s: refused: %s\n", o->check, entry.reason[0] ? entry.reason : why.msg);
        *refused = true;
        return;
    }
    printf("%s: ok\n", o->check);
    print_entry(&entry, o->matrix, "");
    vt_registry_release_checked(&entry);
}

/* The backend options given (--backend-option, the ini), judged as a run
 * judges them: one for a backend not found is a bad argument (exit 2), one
 * its backend refuses is that backend's refusal (exit 5). --test and the
 * list load the backends with them too, so an option was otherwise taken
 * and, for a backend other than the one tested, ignored. */
static vt_status check_backend_options(const backends_opts *o, vt_error *err) {
    if (!o->c.opt.backend_options[0]) return VT_OK;
    vt_options opt = o->c.opt;
    /* --test FILE: that file's backend takes its options when it loads
     * (refusing them is its refusal), wherever it lies; the rest are judged
     * against the search path */
    char name[64];
    if (o->test && strchr(o->test, '/') && vt_registry_file_backend_name(o->test, name, sizeof name)) {
        const size_t n = strlen(name);
        size_t used = 0;
        for (const char *line = o->c.opt.backend_options; *line;) {
            const char *end = strchr(line, '\n');
            const size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
            if (!(strncmp(line, name, n) == 0 && line[n] == '.')) {
                memcpy(opt.backend_options + used, line, len);
                used += len;
            }
            line += len;
        }
        opt.backend_options[used] = '\0';
        if (!used) return VT_OK;
    }
    vt_threadpool *pool = NULL;
    vt_registry *r = NULL;
    int32_t preferred = -1, fallback = -1;
    vt_status st = vt_threadpool_create(1, &pool, err);
    if (st == VT_OK)
        st = vt_registry_create(vt_host_get(pool), opt.backend_path[0] ? opt.backend_path : NULL,
                                opt.backend_options, &r, err);
    opt.backend[0] = opt.fallback[0] = '\0'; /* only the options are judged here */
    if (st == VT_OK) st = vt_engine_resolve_backends(&opt, r, true, &preferred, &fallback, err);
    vt_registry_destroy(r);
    vt_host_release_pool(pool);
    vt_threadpool_destroy(pool);
    return st;
}

/* Check the one file, or list every backend found. */
static vt_status run_backends(const backends_opts *o, bool *refused, vt_error *err) {
    vt_threadpool *pool = NULL;
    vt_status st = vt_threadpool_create(1, &pool, err);
    if (st != VT_OK) return st;
    const vt_host *host = vt_host_get(pool);
    if (o->check) {
        check_file(o, host, refused);
    } else {
        vt_registry *r = NULL;
        st = vt_registry_create(host, o->c.opt.backend_path[0] ? o->c.opt.backend_path : NULL, o->c.opt.backend_options,
                                &r, err);
        /* The backend a run would prefer: the one named (--backend, VT_BACKEND,
         * the ini) when it loaded, else the highest probe score. */
        const char *named = o->c.opt.backend;
        int32_t preferred = st == VT_OK ? vt_engine_default_backend(r) : -1;
        char mark[160];
        snprintf(mark, sizeof mark, "default backend (highest score)");
        for (int i = 0; st == VT_OK && named[0] && strcmp(named, "auto") != 0 && i < vt_registry_count(r); i++)
            if (vt_registry_at(r, i)->state == VT_BACKEND_LOADED && strcmp(vt_registry_at(r, i)->name, named) == 0) {
                preferred = i;
                snprintf(mark, sizeof mark, "preferred backend (from %s)",
                         vt_options_source(&o->c.opt, "runtime.backend"));
            }
        for (int i = 0; st == VT_OK && i < vt_registry_count(r); i++)
            print_entry(vt_registry_at(r, i), o->matrix, i == preferred ? mark : "");
        if (st == VT_OK && vt_registry_count(r) == 0) { /* nothing a run could use: say where it looked */
            char where[1024];
            vt_registry_describe_search(r, where, sizeof where);
            st = vt_fail(err, VT_ERR_BACKEND, "no backends found: %s", where);
        }
        vt_registry_destroy(r);
    }
    vt_threadpool_destroy(pool);
    return st;
}

/* --calibrate: an auto engine for the model, every class timed anew; then
 * the table it placed by. */
static vt_status run_calibrate(const backends_opts *o, vt_error *err) {
    vt_status st = vt_cli_require_model(o->c.model_path, err);
    vt_model *model = NULL;
    vt_engine *e = NULL;
    if (st == VT_OK) st = vt_model_load(o->c.model_path, &model, err);
    vt_options opt = o->c.opt;
    snprintf(opt.backend, sizeof opt.backend, "auto");
    const vt_engine_shape shape = {false, 1, true};
    if (st == VT_OK) st = vt_engine_create_shaped(&opt, model, &shape, &e, err);
    if (st == VT_OK) {
        const vt_auto_costs *c = vt_engine_costs(e);
        printf("calibrated %d shape classes (%d times, %d more for close calls) in %.2f s on %d threads; cache: %s\n",
               vt_engine_n_classes(e), c->measured, c->retimed, c->calibration_seconds, vt_engine_host(e)->n_threads,
               c->cache_path[0] ? c->cache_path : "none");
        for (int k = 0; k < c->n; k++) {
            if (!vt_engine_uses_class(e, k)) continue; /* another model's, kept in the cache */
            const int best = vt_auto_costs_best(c, k, vt_engine_preferred(e));
            printf("  %-52s", c->classes[k].key);
            for (int b = 0; b < c->n_backends && b < VT_AUTO_MAX_BACKENDS; b++) {
                if (!c->candidate[b]) continue;
                const double s = c->classes[k].seconds[b];
                const char *name = vt_registry_at(vt_engine_registry(e), b)->name;
                if (c->failed[b]) printf("  %s=failed", name);
                else if (s >= 0) printf("  %s%s=%.3fms", name, b == best ? "*" : "", s * 1e3);
                else printf("  %s=%s", name, s == VT_COST_DECLINED ? "declined" : "-");
            }
            printf("\n");
        }
    }
    vt_engine_free(e);
    vt_model_free(model);
    return st;
}

/* --check's file is judged by loading it; --test runs the op battery. */
int vt_cmd_backends(int argc, char **argv) {
    vt_error err = {0};
    backends_opts o;
    bool refused = false;
    vt_status st = parse_backends(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        help(stdout);
        return 0;
    }
    vt_backends_test_request req;
    if (st == VT_OK) st = validate_backends(&o, &req, &err);
    if (st == VT_OK && !o.check) st = check_backend_options(&o, &err);
    if (st == VT_OK && o.test) {
        int code = 0;
        st = vt_backends_test_run(&req, &code, &err);
        return st == VT_OK ? code : vt_cli_error(&err);
    }
    if (st == VT_OK && o.calibrate) st = run_calibrate(&o, &err);
    else if (st == VT_OK) st = run_backends(&o, &refused, &err);
    if (st != VT_OK) return vt_cli_error(&err);
    return refused ? 1 : 0;
}
