/* compare_trace.c — `vt compare --trace`: the reference engine runs the
 * prompt and a greedy continuation once per backend while plan_trace runs
 * that backend's nodes on the reference's inputs; this file builds the
 * engines and prints what the trace found. */
#include "compare_trace.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json_out.h"
#include "plan_trace.h"
#include "quant.h"

static const char *phase_name(vt_phase ph) { return ph == VT_PHASE_DECODE ? "decode" : "prefill"; }

static void format_error(char *buf, size_t size, double x) {
    if (isnan(x)) snprintf(buf, size, "-");
    else if (isinf(x)) snprintf(buf, size, "inf");
    else if (x == 0.0) snprintf(buf, size, "0");
    else snprintf(buf, size, "%.2e", x);
}

/* The one line per backend: where it first diverges, or that it does not
 * (with the node that came closest to its threshold). */
static void print_verdict(const char *name, const vt_trace *t) {
    char e[32], th[32];
    const int first = vt_trace_first_divergence(t);
    if (first >= 0) {
        const vt_trace_node *n = vt_trace_at(t, first);
        format_error(e, sizeof e, vt_trace_error(n));
        format_error(th, sizeof th, n->threshold);
        printf("first divergence: %s at %s (%s %s, %s): error %s > threshold %s%s%s\n", name, n->label,
               vt_op_name(n->op), n->dtypes, phase_name(n->phase), e, th, n->note[0] ? "; " : "", n->note);
        return;
    }
    int compared = 0, worst = -1;
    double worst_ratio = -1;
    for (int i = 0; i < vt_trace_count(t); i++) {
        const vt_trace_node *n = vt_trace_at(t, i);
        if (!n->calls) continue;
        compared++;
        const double ratio = n->threshold > 0 ? vt_trace_error(n) / n->threshold : 0;
        if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
    }
    printf("no divergence: %s (%d nodes compared", name, compared);
    if (worst >= 0 && worst_ratio > 0) {
        const vt_trace_node *n = vt_trace_at(t, worst);
        format_error(e, sizeof e, vt_trace_error(n));
        format_error(th, sizeof th, n->threshold);
        printf("; closest to its threshold: %s (%s %s, %s): error %s, threshold %s", n->label, vt_op_name(n->op),
               n->dtypes, phase_name(n->phase), e, th);
    }
    printf(")\n");
}

static void print_nodes(const char *name, const vt_trace *t) {
    printf("%s:\n  %-7s %4s %-24s %-17s %-10s %-10s %5s %9s %9s %9s  %s\n", name, "phase", "node", "label", "op",
           "dtypes", "ran on", "calls", "max|d|", "error", "threshold", "verdict");
    for (int i = 0; i < vt_trace_count(t); i++) {
        const vt_trace_node *n = vt_trace_at(t, i);
        char mx[32], e[32], th[32];
        format_error(mx, sizeof mx, n->calls ? n->acc.max_abs : NAN);
        format_error(e, sizeof e, vt_trace_error(n));
        format_error(th, sizeof th, n->threshold);
        const char *verdict = !n->calls ? "-" : vt_trace_within(n) ? "ok" : "DIVERGES";
        printf("  %-7s %4d %-24s %-17s %-10s %-10s %5lld %9s %9s %9s  %s%s%s\n", phase_name(n->phase), n->index,
               n->label, vt_op_name(n->op), n->dtypes, n->backend, (long long)n->calls, mx, e, th, verdict,
               n->note[0] ? ": " : "", n->note);
    }
}

static void json_node_fields(const vt_trace_node *n) {
    printf("\"label\": ");
    vt_json_string(stdout, n->label);
    printf(", \"op\": ");
    vt_json_string(stdout, vt_op_name(n->op));
    printf(", \"dtypes\": ");
    vt_json_string(stdout, n->dtypes);
    printf(", \"phase\": ");
    vt_json_string(stdout, phase_name(n->phase));
    printf(", \"error\": ");
    vt_json_number(stdout, vt_trace_error(n));
    printf(", \"threshold\": ");
    vt_json_number(stdout, n->threshold);
}

static void print_json_backend(const char *name, const vt_trace *t, const char *failure, bool first_entry) {
    printf("%s{\"name\": ", first_entry ? "" : ", ");
    vt_json_string(stdout, name);
    if (failure) {
        printf(", \"error\": ");
        vt_json_string(stdout, failure);
        printf("}");
        return;
    }
    const int first = vt_trace_first_divergence(t);
    printf(", \"first_divergence\": ");
    if (first >= 0) {
        printf("{");
        json_node_fields(vt_trace_at(t, first));
        printf("}");
    } else {
        printf("null");
    }
    printf(", \"nodes\": [");
    for (int i = 0; i < vt_trace_count(t); i++) {
        const vt_trace_node *n = vt_trace_at(t, i);
        printf("%s{\"index\": %d, ", i ? ", " : "", n->index);
        json_node_fields(n);
        printf(", \"backend\": ");
        vt_json_string(stdout, n->backend);
        printf(", \"calls\": %lld, \"max_abs\": ", (long long)n->calls);
        vt_json_number(stdout, n->calls ? n->acc.max_abs : NAN);
        printf(", \"ok\": %s, \"note\": ", !n->calls ? "null" : vt_trace_within(n) ? "true" : "false");
        vt_json_string(stdout, n->note);
        printf("}");
    }
    printf("]}");
}

vt_status vt_compare_trace(const vt_compare_trace_job *job, bool *diverged, vt_error *err) {
    *diverged = false;
    const vt_engine_shape shape = {true, 1, false};
    vt_engine *ref = NULL;
    vt_status st = vt_cli_engine_for_backend(job->c, job->model, "reference", NULL, &shape, &ref, err);
    if (st != VT_OK) return st;
    if (job->json) {
        printf("{\"model\": ");
        vt_json_string(stdout, job->model_path);
        printf(", \"n_tokens\": %lld, \"decode_steps\": %lld, \"kv_cache_dtype\": ", (long long)job->n_prompt,
               (long long)job->n_decode);
        vt_json_string(stdout, vt_dtype_name(vt_engine_kv_dtype(ref)));
        printf(", \"backends\": [");
    } else {
        const vt_hparams *hp = &job->model->hp;
        printf("model: %s (%s, %d layers, %d wide, vocab %d)\n", job->model_path, hp->arch_name, hp->n_layer,
               hp->n_embd, hp->n_vocab);
        printf("trace: %lld prompt tokens (prefill), then %lld decode steps; kv cache %s; every node of each "
               "backend's plans run on the reference's inputs, its NMSE against its op's threshold\n\n",
               (long long)job->n_prompt, (long long)job->n_decode, vt_dtype_name(vt_engine_kv_dtype(ref)));
    }
    vt_error first_failure = {0};
    int entries = 0;
    for (int b = 0; b < job->set->n && st == VT_OK; b++) {
        const char *backend = job->set->names[b], *name = job->set->labels[b]; /* NAME[:options] as given */
        if (strcmp(backend, "reference") == 0 && !job->set->options[b][0]) continue;
        vt_engine *be = NULL;
        vt_trace *t = NULL;
        vt_error berr = {0};
        vt_status bst = vt_cli_engine_for_backend(job->c, job->model, backend, job->set->options[b], &shape, &be, &berr);
        if (bst == VT_OK) bst = vt_trace_create(ref, be, &t, &berr);
        if (bst == VT_OK && !job->c->dry_run) bst = vt_trace_run(t, job->prompt, job->n_prompt, job->n_decode, &berr);
        if (bst == VT_OK && job->c->dry_run) {
            /* nothing ran: the engines were built, which is what --dry-run checks */
        } else if (bst == VT_OK) {
            *diverged |= vt_trace_first_divergence(t) >= 0;
            if (job->json) {
                print_json_backend(name, t, NULL, entries++ == 0);
            } else {
                if (job->all) print_nodes(name, t);
                print_verdict(name, t);
                if (job->all) printf("\n");
            }
        } else {
            if (job->json) print_json_backend(name, NULL, berr.msg, entries++ == 0);
            else printf("error: %s: %s\n", name, berr.msg);
            if (first_failure.code == VT_OK) first_failure = berr;
        }
        fflush(stdout);
        vt_trace_free(t);
        vt_engine_free(be);
    }
    if (job->json) printf("]}\n");
    vt_engine_free(ref);
    return vt_cli_first_failure(st, &first_failure, err);
}
