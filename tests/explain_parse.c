/* explain_parse.c — see explain_parse.h. */
#include "explain_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_node_line(const char *line, vt_explain_node *n) {
    memset(n, 0, sizeof *n);
    /* Widths follow the struct sizes (one less for the NUL). */
    int got = sscanf(line, " %15s %d %63s op=%31s backend=%63s in=%159s out=%15s", n->phase, &n->index, n->label, n->op,
                     n->backend, n->in, n->out);
    return got == 7 && (strcmp(n->phase, "prefill") == 0 || strcmp(n->phase, "decode") == 0);
}

bool vt_explain_parse(const char *text, vt_explain *x) {
    memset(x, 0, sizeof *x);
    if (!text) return false;
    int cap = 0;
    bool kv_seen = false;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
        vt_explain_node node;
        if (strncmp(buf, "  ", 2) == 0 && parse_node_line(buf, &node)) {
            if (x->n == cap) {
                cap = cap ? cap * 2 : 256;
                vt_explain_node *grown = realloc(x->nodes, (size_t)cap * sizeof *grown);
                if (!grown) return false;
                x->nodes = grown;
            }
            x->nodes[x->n++] = node;
        } else if (strncmp(buf, "plan ", 5) == 0) {
            char phase[16];
            int n_nodes;
            long long max_tokens;
            if (sscanf(buf, "plan %15[a-z]: %d nodes, up to %lld tokens per call", phase, &n_nodes, &max_tokens) == 3)
                *(strcmp(phase, "decode") == 0 ? &x->decode_max_tokens : &x->prefill_max_tokens) = max_tokens;
        } else if (strncmp(buf, "backend: ", 9) == 0) {
            sscanf(buf, "backend: %63s (fallback: %63[^)]); backend from %95[^;]; fallback from %95[^\n]", x->backend,
                   x->fallback, x->backend_source, x->fallback_source);
        } else if (strncmp(buf, "prefix cache: ", 14) == 0) {
            x->prefix_cache_seen = true;
            x->prefix_cache_on = strncmp(buf + 14, "on", 2) == 0;
            x->prefix_cache_plans_differ = strncmp(buf + 14, "off: the prefill and decode plans", 33) == 0;
            const char *from = strstr(buf, " from ");
            if (from && !x->prefix_cache_plans_differ)
                sscanf(from + 6, "%63[^)]", x->prefix_cache_source);
        } else if (strncmp(buf, "prepared weights: ", 18) == 0) {
            x->prepared_seen = true;
            if (strcmp(buf + 18, "none") != 0)
                sscanf(buf + 18, "%63s %lf MiB (%d tensors)", x->prepared_backend, &x->prepared_mib,
                       &x->prepared_tensors);
        } else if (strncmp(buf, "kv-cache dtype: ", 16) == 0) {
            kv_seen = sscanf(buf, "kv-cache dtype: %15s (from %63[^)]); %lld tokens in %d blocks of %d", x->kv_dtype,
                             x->kv_source, &x->kv_tokens, &x->kv_blocks, &x->kv_block_size) >= 2;
        }
        line += len + (end ? 1 : 0);
    }
    return x->n > 0 && kv_seen;
}

void vt_explain_free(vt_explain *x) {
    free(x->nodes);
    x->nodes = NULL;
    x->n = 0;
}

static bool matches(const char *want, const char *have) { return !want || strcmp(want, have) == 0; }

int vt_explain_count(const vt_explain *x, const char *phase, const char *op, const char *backend, const char *in,
                     const char *out) {
    int count = 0;
    for (int i = 0; i < x->n; i++) {
        const vt_explain_node *n = &x->nodes[i];
        if (matches(phase, n->phase) && matches(op, n->op) && matches(backend, n->backend) && matches(in, n->in) &&
            matches(out, n->out))
            count++;
    }
    return count;
}

const vt_explain_node *vt_explain_find(const vt_explain *x, const char *phase, const char *label) {
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->nodes[i].phase, phase) == 0 && strcmp(x->nodes[i].label, label) == 0) return &x->nodes[i];
    return NULL;
}

bool vt_explain_input(const vt_explain_node *n, int i, char *buf, int size) {
    const char *p = n->in;
    for (int k = 0; k < i; k++) {
        p = strchr(p, ',');
        if (!p) return false;
        p++;
    }
    int len = (int)strcspn(p, ",");
    if (len == 0) return false;
    snprintf(buf, (size_t)size, "%.*s", len, p);
    return true;
}
