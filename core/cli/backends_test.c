/* backends_test.c — `vt backends --test`: every generated case of every op
 * family the user selected, on the backend and on the reference.
 *
 * A backend op that crashes cannot be caught in-process, so each op family
 * runs in a forked child: the child loads both backends itself (the parent
 * never dlopens anything: thread pools and OpenMP runtimes do not survive a
 * fork), announces each case before running it and sends its verdict through
 * a pipe. When the child dies, the case it announced last is that case's
 * FAIL, with the signal, and a new child resumes at the next case. A case
 * that runs longer than CASE_TIMEOUT_S is killed the same way (SIGALRM). */
#include "backends_test.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host.h"
#include "quant.h"
#include "json_out.h"
#include "op_cases.h"
#include "op_conformance.h"
#include "registry.h"
#include "threadpool.h"

#define CASE_TIMEOUT_S 120

/* ---- selecting ----------------------------------------------------------- */

static const int32_t all_dtypes[] = {VT_F32, VT_F16, VT_BF16, VT_Q8_0, VT_Q4_0, VT_Q4_K, VT_Q5_K, VT_Q6_K};
#define N_ALL_DTYPES ((int)(sizeof all_dtypes / sizeof *all_dtypes))

/* Each comma-separated name of list through lookup into selected[]; the
 * error lists the valid names. */
static vt_status select_names(const char *flag, const char *list, int (*lookup)(const char *), bool *selected,
                              const char *valid, vt_error *err) {
    char name[32];
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 || len >= sizeof name)
            return vt_fail(err, VT_ERR_INVALID, "%s: '%.*s' is not a name (valid: %s)", flag, (int)len, p, valid);
        memcpy(name, p, len);
        name[len] = '\0';
        const int id = lookup(name);
        if (id < 0) return vt_fail(err, VT_ERR_INVALID, "%s: unknown name '%s' (valid: %s)", flag, name, valid);
        selected[id] = true;
        if (!end) return VT_OK;
        p = end + 1;
    }
}

static int dtype_lookup(const char *name) {
    for (int i = 0; i < N_ALL_DTYPES; i++)
        if (strcmp(name, vt_dtype_name(all_dtypes[i])) == 0) return all_dtypes[i];
    return -1;
}

vt_status vt_backends_test_select(vt_backends_test_request *req, const char *ops, const char *dtypes, vt_error *err) {
    char valid_ops[256] = "", valid_dtypes[128] = "";
    for (int op = 0; op < VT_OP_COUNT; op++)
        snprintf(valid_ops + strlen(valid_ops), sizeof valid_ops - strlen(valid_ops), "%s%s", op ? ", " : "",
                 vt_op_name(op));
    for (int i = 0; i < N_ALL_DTYPES; i++)
        snprintf(valid_dtypes + strlen(valid_dtypes), sizeof valid_dtypes - strlen(valid_dtypes), "%s%s",
                 i ? ", " : "", vt_dtype_name(all_dtypes[i]));
    memset(req->ops, 0, sizeof req->ops);
    memset(req->dtypes, 0, sizeof req->dtypes);
    if (ops) {
        vt_status st = select_names("--ops", ops, vt_op_from_name, req->ops, valid_ops, err);
        if (st != VT_OK) return st;
    } else {
        for (int op = 0; op < VT_OP_COUNT; op++) req->ops[op] = true;
    }
    if (dtypes) return select_names("--dtypes", dtypes, dtype_lookup, req->dtypes, valid_dtypes, err);
    for (int i = 0; i < N_ALL_DTYPES; i++) req->dtypes[all_dtypes[i]] = true;
    return VT_OK;
}

/* ---- what a child sends --------------------------------------------------- */

typedef enum record_kind {
    REC_LOADED = 0,   /* both backends loaded; name = the backend's, implemented = op pointer present */
    REC_REFUSED = 1,  /* the backend did not load: note = the reason */
    REC_BEGIN = 2,    /* about to run case `index` */
    REC_RESULT = 3,   /* its verdict */
    REC_SKIPPED = 4,  /* the reference does not run it either: not a case of this op */
    REC_DONE = 5,
    REC_ERROR = 6     /* the child could not go on (memory): note says why */
} record_kind;

/* One fixed-size message, smaller than PIPE_BUF so a write is atomic. */
typedef struct record {
    int32_t kind;
    int32_t index;
    int32_t op, phase, implemented;
    int32_t tier; /* index into collected.tiers; set by the parent */
    char name[64];
    char dtypes[32];
    char shape[96];
    vt_op_result result;
    double flops, bytes;
    char message[1600]; /* REC_REFUSED, REC_ERROR: why */
} record;

_Static_assert(sizeof(record) < 4096, "a record must fit one atomic pipe write (PIPE_BUF)");

static void send_record(int fd, const record *r) {
    const char *p = (const char *)r;
    size_t left = sizeof *r;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) _exit(3); /* the parent is gone: nothing to report to */
        p += w;
        left -= (size_t)w;
    }
}

/* Read one whole record; false at end of stream. */
static bool read_record(int fd, record *r) {
    char *p = (char *)r;
    size_t got = 0;
    while (got < sizeof *r) {
        ssize_t n = read(fd, p + got, sizeof *r - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        got += (size_t)n;
    }
    return true;
}

/* ---- the child ----------------------------------------------------------- */

/* Is path vt's own reference (the file installed beside its other
 * backends)? Another file of that name found earlier in the search path
 * would be the oracle every case is judged against. True when vt's own
 * folder is unknown or holds no reference: there is no other to prefer.
 * vt's own folder is left in folder [folder_size] ("" when unknown). */
static bool is_installed_reference(const char *path, char *folder, size_t folder_size) {
    char own[PATH_MAX + 64];
    vt_registry_installed_folder(folder, folder_size);
    if (!folder[0]) return true;
    snprintf(own, sizeof own, "%s/libvt-backend-reference.so", folder);
    struct stat a, b;
    if (stat(own, &b) != 0) return true;
    return stat(path, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Load the reference and the backend under test. false with the reason in
 * why when the backend does not load. */
static bool load_backends(const vt_backends_test_request *req, const vt_host *host, vt_registry **reg,
                          vt_backend_entry *file_entry, const vt_backend_entry **backend,
                          const vt_backend_entry **reference, char *why, size_t why_size) {
    vt_error err = {0};
    if (vt_registry_create(host, req->backend_path, req->backend_options, reg, &err) != VT_OK) {
        snprintf(why, why_size, "%.500s", err.msg);
        return false;
    }
    *reference = vt_registry_find(*reg, "reference");
    if (!*reference) {
        snprintf(why, why_size, "the reference backend is not loaded (see vt backends): nothing to compare with");
        return false;
    }
    char folder[PATH_MAX];
    if (!is_installed_reference((*reference)->path, folder, sizeof folder)) {
        snprintf(why, why_size,
                 "the backend named 'reference' found first is %.400s, not vt's own (%.400s/libvt-backend-reference.so), "
                 "which every case is judged against: take that file out of VT_BACKEND_PATH or --backend-path",
                 (*reference)->path, folder);
        return false;
    }
    if (strchr(req->target, '/')) {
        if (vt_registry_check_file(host, req->target, req->backend_options, file_entry, &err) != VT_OK) {
            snprintf(why, why_size, "%.1000s: refused: %.500s", req->target,
                     file_entry->reason[0] ? file_entry->reason : err.msg);
            return false;
        }
        *backend = file_entry;
        return true;
    }
    *backend = vt_registry_find(*reg, req->target);
    if (*backend) return true;
    for (int i = 0; i < vt_registry_count(*reg); i++) {
        const vt_backend_entry *e = vt_registry_at(*reg, i);
        if (strcmp(e->name, req->target) == 0 && e->state == VT_BACKEND_REFUSED) {
            snprintf(why, why_size, "%.1000s: refused: %.255s", e->path, e->reason);
            return false;
        }
    }
    snprintf(why, why_size, "no backend named '%s' found (see vt backends; a plugin file is given by its path)",
             req->target);
    return false;
}

/* Run op's cases from index `start` on, reporting to fd; never returns. */
static void child_main(const vt_backends_test_request *req, int op, int start, int fd) {
    vt_threadpool *pool = NULL;
    vt_error err = {0};
    record rec;
    memset(&rec, 0, sizeof rec);
    if (vt_threadpool_create(req->threads, &pool, &err) != VT_OK) {
        rec.kind = REC_ERROR;
        snprintf(rec.message, sizeof rec.message, "%.500s", err.msg);
        send_record(fd, &rec);
        _exit(1);
    }
    const vt_host *host = vt_host_get(pool);
    vt_registry *reg = NULL;
    vt_backend_entry file_entry;
    memset(&file_entry, 0, sizeof file_entry);
    const vt_backend_entry *backend = NULL, *reference = NULL;
    if (!load_backends(req, host, &reg, &file_entry, &backend, &reference, rec.message, sizeof rec.message)) {
        rec.kind = REC_REFUSED;
        send_record(fd, &rec);
        _exit(0);
    }
    rec.kind = REC_LOADED;
    rec.op = op;
    rec.implemented = vt_backend_op(backend->table, op) != NULL;
    snprintf(rec.name, sizeof rec.name, "%s", backend->name);
    send_record(fd, &rec);

    int32_t axis[8];
    const int n_axis = vt_op_case_axis(op, axis, 8);
    int index = 0;
    for (int a = 0; a < n_axis; a++) {
        for (int phase = VT_PHASE_PREFILL; phase <= VT_PHASE_DECODE; phase++) {
            const int count = req->dtypes[axis[a]] ? vt_op_case_count(op, axis[a], (vt_phase)phase) : 0;
            for (int i = 0; i < count; i++, index++) {
                if (index < start) continue;
                vt_op_case c;
                if (vt_op_case_build(op, axis[a], (vt_phase)phase, i, req->seed, &c, &err) != VT_OK) {
                    memset(&rec, 0, sizeof rec);
                    rec.kind = REC_ERROR;
                    snprintf(rec.message, sizeof rec.message, "%.500s", err.msg);
                    send_record(fd, &rec);
                    _exit(1);
                }
                memset(&rec, 0, sizeof rec);
                rec.index = index;
                rec.op = op;
                rec.phase = phase;
                snprintf(rec.dtypes, sizeof rec.dtypes, "%s", c.dtypes);
                snprintf(rec.shape, sizeof rec.shape, "%s", c.shape);
                rec.flops = c.flops;
                rec.bytes = c.bytes;
                /* a combination the convention does not have (swiglu writing
                 * f16): the reference declines it too, so it is no case */
                if (!vt_op_case_accepted(reference, &c)) {
                    rec.kind = REC_SKIPPED;
                    send_record(fd, &rec);
                    vt_op_case_free(&c);
                    continue;
                }
                rec.kind = REC_BEGIN;
                rec.result.threshold = vt_op_threshold(&c); /* what a crash report shows */
                send_record(fd, &rec);
                alarm(CASE_TIMEOUT_S);
                vt_status st = vt_op_case_judge(backend, reference, &c, req->perf, &rec.result, &err);
                alarm(0);
                vt_op_case_free(&c);
                if (st != VT_OK) {
                    rec.kind = REC_ERROR;
                    snprintf(rec.message, sizeof rec.message, "%.500s", err.msg);
                    send_record(fd, &rec);
                    _exit(1);
                }
                rec.kind = REC_RESULT;
                send_record(fd, &rec);
            }
        }
    }
    memset(&rec, 0, sizeof rec);
    rec.kind = REC_DONE;
    send_record(fd, &rec);
    vt_registry_release_checked(&file_entry);
    vt_registry_destroy(reg);
    vt_host_release_pool(pool);
    vt_threadpool_destroy(pool);
    _exit(0);
}

/* ---- the parent: running children, collecting, printing ------------------ */

#define MAX_TIERS 8

typedef struct collected {
    record *cases; /* REC_RESULT records, and crashed cases turned into FAILs */
    int n, cap;
    int n_ok, n_failed, n_declined;
    char backend_name[64];
    /* the backend's instruction-set tiers run one after another (1.6's
     * tiers), or none: the backend as configured */
    char tiers[MAX_TIERS][72];
    int n_tiers, tier;
    char tier_owner[64]; /* the name the tiers' options go under */
    char refusal[1600];  /* why the target does not load ("" when it does) */
} collected;

static bool collect(collected *all, const record *r) {
    if (all->n == all->cap) {
        int cap = all->cap ? all->cap * 2 : 256;
        record *grown = realloc(all->cases, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        all->cases = grown;
        all->cap = cap;
    }
    all->cases[all->n] = *r;
    all->cases[all->n++].tier = all->tier;
    if (r->result.verdict == VT_OP_CASE_OK) all->n_ok++;
    else if (r->result.verdict == VT_OP_CASE_FAIL) all->n_failed++;
    else all->n_declined++;
    return true;
}

static const char *phase_name(int phase) { return phase == VT_PHASE_DECODE ? "decode" : "prefill"; }

/* "2.41 GFLOP/s" or "3.10 GB/s" of one timed case. */
static void format_rate(const record *r, char *buf, size_t size) {
    const double s = r->result.seconds;
    if (!(s > 0)) snprintf(buf, size, "-");
    else if (r->flops > 0) snprintf(buf, size, "%.2f GFLOP/s", r->flops / s * 1e-9);
    else snprintf(buf, size, "%.2f GB/s", r->bytes / s * 1e-9);
}

static void print_case(const vt_backends_test_request *req, const record *r) {
    if (r->result.verdict == VT_OP_CASE_DECLINED) return; /* listed per op, after its cases */
    char err[32];
    if (isnan(r->result.error)) snprintf(err, sizeof err, "-");
    else snprintf(err, sizeof err, "%.2e", r->result.error);
    printf("  %-17s %-11s %-7s %-36s nmse %-9s <= %.1e  %s", vt_op_name(r->op), r->dtypes, phase_name(r->phase),
           r->shape, err, r->result.threshold, r->result.verdict == VT_OP_CASE_OK ? "OK" : "FAIL");
    if (req->perf && r->result.seconds > 0) {
        char rate[32];
        format_rate(r, rate, sizeof rate);
        printf("  %9.1f us  %s", r->result.seconds * 1e6, rate);
    }
    if (r->result.note[0]) printf("  (%s)", r->result.note);
    printf("\n");
}

/* Per op: counts, and what was declined per phase (every case of the
 * phase, or each dtypes combination once). */
static void print_op_summary(const collected *all, int first, int op, bool implemented) {
    int ok = 0, failed = 0;
    for (int i = first; i < all->n; i++) {
        ok += all->cases[i].result.verdict == VT_OP_CASE_OK;
        failed += all->cases[i].result.verdict == VT_OP_CASE_FAIL;
    }
    printf("%s: %d OK, %d FAIL", vt_op_name(op), ok, failed);
    if (!implemented) {
        printf("; not implemented (every case declined)\n");
        return;
    }
    const char *sep = "; declined:";
    for (int phase = VT_PHASE_PREFILL; phase <= VT_PHASE_DECODE; phase++) {
        int in_phase = 0, declined = 0;
        for (int i = first; i < all->n; i++) {
            if (all->cases[i].phase != phase) continue;
            in_phase++;
            declined += all->cases[i].result.verdict == VT_OP_CASE_DECLINED;
        }
        if (!declined) continue;
        printf("%s %s", sep, phase_name(phase));
        sep = ",";
        if (declined == in_phase) {
            printf(" (every case)");
            continue;
        }
        /* declined by supports(), or never offered: a run of entries with
         * one reason ends with it, "(not offered: VT_CONVENTION_...)" */
        const char *note = "";
        for (int i = first; i < all->n; i++) {
            const record *r = &all->cases[i];
            if (r->phase != phase || r->result.verdict != VT_OP_CASE_DECLINED) continue;
            bool seen = false;
            for (int j = first; j < i && !seen; j++)
                seen = all->cases[j].result.verdict == VT_OP_CASE_DECLINED && all->cases[j].phase == phase &&
                       strcmp(all->cases[j].dtypes, r->dtypes) == 0;
            if (seen) continue;
            if (strcmp(note, r->result.note) != 0 && note[0]) printf(" (%s)", note);
            note = r->result.note;
            printf(" %s", r->dtypes);
        }
        if (note[0]) printf(" (%s)", note);
    }
    printf("\n");
}

static void print_json(const vt_backends_test_request *req, const collected *all) {
    printf("{\"backend\": ");
    vt_json_string(stdout, all->backend_name);
    printf(", \"seed\": %llu, \"cases\": [", (unsigned long long)req->seed);
    int k = 0;
    for (int i = 0; i < all->n; i++) {
        const record *r = &all->cases[i];
        if (r->result.verdict == VT_OP_CASE_DECLINED) continue;
        printf("%s{\"op\": \"%s\", \"dtypes\": ", k++ ? ", " : "", vt_op_name(r->op));
        vt_json_string(stdout, r->dtypes);
        if (all->n_tiers > 0) {
            printf(", \"tier\": ");
            vt_json_string(stdout, all->tiers[r->tier]);
        }
        printf(", \"phase\": \"%s\", \"shape\": ", phase_name(r->phase));
        vt_json_string(stdout, r->shape);
        printf(", \"error\": ");
        vt_json_number(stdout, r->result.error);
        printf(", \"threshold\": ");
        vt_json_number(stdout, r->result.threshold);
        printf(", \"ok\": %s", r->result.verdict == VT_OP_CASE_OK ? "true" : "false");
        if (r->result.note[0]) {
            printf(", \"note\": ");
            vt_json_string(stdout, r->result.note);
        }
        if (req->perf && r->result.seconds > 0) {
            printf(", \"seconds\": ");
            vt_json_number(stdout, r->result.seconds);
            if (r->flops > 0) printf(", \"gflops\": ");
            else printf(", \"gbytes_per_s\": ");
            vt_json_number(stdout, (r->flops > 0 ? r->flops : r->bytes) / r->result.seconds * 1e-9);
        }
        printf("}");
    }
    printf("], \"n_ok\": %d, \"n_failed\": %d, ", all->n_ok, all->n_failed);
    if (all->n_tiers > 0) {
        printf("\"tiers\": [");
        for (int t = 0; t < all->n_tiers; t++) {
            printf("%s", t ? ", " : "");
            vt_json_string(stdout, all->tiers[t]);
        }
        printf("], ");
    }
    printf("\"declined\": [");
    k = 0;
    for (int i = 0; i < all->n; i++) {
        const record *r = &all->cases[i];
        if (r->result.verdict != VT_OP_CASE_DECLINED) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = all->cases[j].result.verdict == VT_OP_CASE_DECLINED && all->cases[j].op == r->op &&
                   all->cases[j].phase == r->phase && strcmp(all->cases[j].dtypes, r->dtypes) == 0;
        if (seen) continue;
        printf("%s{\"op\": \"%s\", \"dtypes\": ", k++ ? ", " : "", vt_op_name(r->op));
        vt_json_string(stdout, r->dtypes);
        printf(", \"phase\": \"%s\"", phase_name(r->phase));
        if (r->result.note[0]) {
            printf(", \"note\": ");
            vt_json_string(stdout, r->result.note);
        }
        printf("}");
    }
    printf("]}\n");
}

/* "signal 11 (Segmentation fault)", or how the child ended otherwise. */
static void describe_end(int status, char *buf, size_t size) {
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        if (sig == SIGALRM) snprintf(buf, size, "killed after %d s (signal %d, SIGALRM)", CASE_TIMEOUT_S, sig);
        else snprintf(buf, size, "crashed: signal %d (%s)", sig, strsignal(sig));
    } else {
        snprintf(buf, size, "the test process exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

/* One op family: children until every case has a verdict. *refused: the
 * backend did not load (the reason printed). */
static vt_status run_family(const vt_backends_test_request *req, int op, collected *all, bool *refused,
                            bool *implemented, vt_error *err) {
    int start = 0;
    for (;;) {
        int fds[2];
        if (pipe(fds) != 0) return vt_fail(err, VT_ERR_IO, "backends --test: pipe: %s", strerror(errno));
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid < 0) {
            close(fds[0]);
            close(fds[1]);
            return vt_fail(err, VT_ERR_IO, "backends --test: fork: %s", strerror(errno));
        }
        if (pid == 0) {
            /* A crash must end the child by its signal, so the parent can
             * name it: the default action, not a handler inherited or
             * installed by a sanitizer's runtime (which would exit(1)). */
            static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
            for (size_t k = 0; k < sizeof fatal / sizeof *fatal; k++) signal(fatal[k], SIG_DFL);
            close(fds[0]);
            child_main(req, op, start, fds[1]);
        }
        close(fds[1]);
        record rec, pending;
        bool have_pending = false, done = false;
        char child_error[600] = "";
        while (read_record(fds[0], &rec)) {
            switch (rec.kind) {
            case REC_REFUSED:
                if (!req->json) printf("%s\n", rec.message);
                else fprintf(stderr, "vt: %s\n", rec.message);
                *refused = true;
                break;
            case REC_LOADED:
                snprintf(all->backend_name, sizeof all->backend_name, "%s", rec.name);
                *implemented = rec.implemented != 0;
                break;
            case REC_BEGIN:
                pending = rec;
                have_pending = true;
                break;
            case REC_RESULT:
                have_pending = false;
                start = rec.index + 1;
                if (!collect(all, &rec)) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
                if (!req->json) print_case(req, &rec);
                break;
            case REC_SKIPPED: start = rec.index + 1; break;
            case REC_DONE: done = true; break;
            default: snprintf(child_error, sizeof child_error, "%.500s", rec.message); break;
            }
        }
        close(fds[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        if (done || *refused) return VT_OK;
        if (child_error[0]) return vt_fail(err, VT_ERR_NOMEM, "backends --test %s: %s", vt_op_name(op), child_error);
        if (!have_pending) {
            char how[160];
            describe_end(status, how, sizeof how);
            return vt_fail(err, VT_ERR_BACKEND, "backends --test %s: %s before its first case", vt_op_name(op), how);
        }
        /* the announced case killed its process: its FAIL, and on with the next */
        pending.kind = REC_RESULT;
        pending.result.verdict = VT_OP_CASE_FAIL;
        pending.result.error = INFINITY;
        describe_end(status, pending.result.note, sizeof pending.result.note);
        if (!collect(all, &pending)) return vt_fail(err, VT_ERR_NOMEM, "out of memory");
        if (!req->json) print_case(req, &pending);
        start = pending.index + 1;
    }
}

/* The tiers the target lists (1.6), into all->tiers; none when it lists
 * fewer than two, does not load (why into all->refusal), or the caller
 * already gave it options (it is tested as configured). */
static void find_tiers(const vt_backends_test_request *req, collected *all) {
    all->n_tiers = 0;
    vt_threadpool *pool = NULL;
    vt_error err = {0};
    if (vt_threadpool_create(1, &pool, &err) != VT_OK) return;
    const vt_host *host = vt_host_get(pool);
    vt_registry *reg = NULL;
    vt_backend_entry file_entry;
    memset(&file_entry, 0, sizeof file_entry);
    const vt_backend_entry *backend = NULL, *reference = NULL;
    char why[1600];
    if (!load_backends(req, host, &reg, &file_entry, &backend, &reference, why, sizeof why)) {
        snprintf(all->refusal, sizeof all->refusal, "%s", why);
    } else {
        char prefix[80];
        snprintf(prefix, sizeof prefix, "%s.", backend->name);
        const char *o = req->backend_options;
        bool configured = false;
        for (; o && *o && !configured; o = strchr(o, '\n') ? strchr(o, '\n') + 1 : "")
            configured = strncmp(o, prefix, strlen(prefix)) == 0;
        const char *tiers[MAX_TIERS];
        const int n = configured ? 0 : vt_backend_tiers(backend, tiers, MAX_TIERS);
        if (n >= 2) {
            for (int t = 0; t < n; t++) snprintf(all->tiers[t], sizeof all->tiers[t], "%s", tiers[t]);
            snprintf(all->tier_owner, sizeof all->tier_owner, "%s", backend->name);
            all->n_tiers = n;
        }
    }
    vt_registry_release_checked(&file_entry);
    vt_registry_destroy(reg);
    vt_host_release_pool(pool);
    vt_threadpool_destroy(pool);
}

vt_status vt_backends_test_run(const vt_backends_test_request *req, int *exit_code, vt_error *err) {
    collected all;
    memset(&all, 0, sizeof all);
    vt_status st = VT_OK;
    bool refused = false;
    find_tiers(req, &all);
    if (all.refusal[0]) { /* nothing can run: the one error line, before any report */
        /* a file's refusal begins with its path already */
        const size_t n = strlen(req->target);
        if (strncmp(all.refusal, req->target, n) == 0 && all.refusal[n] == ':')
            fprintf(stderr, "vt: backends --test %s\n", all.refusal);
        else
            fprintf(stderr, "vt: backends --test %s: %s\n", req->target, all.refusal);
        *exit_code = 2;
        return VT_OK;
    }
    if (!req->json) printf("vt backends --test %s (seed %llu)\n", req->target, (unsigned long long)req->seed);
    /* each tier runs the whole battery, selected by its option after the
     * caller's ones */
    for (all.tier = 0; all.tier < (all.n_tiers ? all.n_tiers : 1) && st == VT_OK && !refused; all.tier++) {
        vt_backends_test_request tier_req = *req;
        char *options = NULL;
        if (all.n_tiers) {
            const char *given = req->backend_options ? req->backend_options : "";
            const size_t size = strlen(given) + sizeof all.tier_owner + sizeof all.tiers[0] + 4;
            options = malloc(size);
            if (!options) {
                st = vt_fail(err, VT_ERR_NOMEM, "out of memory");
                break;
            }
            snprintf(options, size, "%s%s.%s\n", given, all.tier_owner, all.tiers[all.tier]);
            tier_req.backend_options = options;
            if (!req->json) printf("tier %s\n", all.tiers[all.tier]);
        }
        for (int op = 0; op < VT_OP_COUNT && st == VT_OK && !refused; op++) {
            if (!tier_req.ops[op]) continue;
            const int first = all.n;
            bool implemented = true;
            st = run_family(&tier_req, op, &all, &refused, &implemented, err);
            if (st == VT_OK && !refused && !req->json) print_op_summary(&all, first, op, implemented);
        }
        free(options);
    }
    if (st == VT_OK && !refused && all.n_ok + all.n_failed + all.n_declined == 0) {
        /* a filter that selects nothing tests nothing: not a pass */
        fprintf(stderr, "vt: backends --test %s: no case of the battery has the ops and dtypes asked for, so "
                        "nothing was tested (without --ops and --dtypes it runs and lists every case)\n",
                req->target);
        *exit_code = 2;
        free(all.cases);
        return VT_OK;
    }
    if (st == VT_OK && !refused) {
        if (req->json) print_json(req, &all);
        else if (all.n_tiers)
            printf("%s: %d OK, %d FAIL, %d declined over %d tiers\n", all.backend_name, all.n_ok, all.n_failed,
                   all.n_declined, all.n_tiers);
        else
            printf("%s: %d OK, %d FAIL, %d declined\n", all.backend_name, all.n_ok, all.n_failed, all.n_declined);
    }
    /* every case selected declined: nothing was judged, not a pass (a CI
     * check of one op would read 0 as the op working) */
    const bool judged_none = st == VT_OK && !refused && all.n_ok + all.n_failed == 0;
    if (judged_none)
        fprintf(stderr, "vt: backends --test %s: the backend declined every case selected, so nothing was tested\n",
                req->target);
    *exit_code = refused || judged_none ? 2 : all.n_failed ? 1 : 0;
    free(all.cases);
    return st;
}
