/* cmd_info.c — `vt info MODEL`: metadata and tensor table of a GGUF file. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "model.h"
#include "quant.h"

static void print_value(const vt_gguf_value *v) {
    switch (v->type) {
    case VT_GGUF_UINT8: case VT_GGUF_UINT16: case VT_GGUF_UINT32: case VT_GGUF_UINT64:
        printf("%llu", (unsigned long long)v->v.u64);
        break;
    case VT_GGUF_INT8: case VT_GGUF_INT16: case VT_GGUF_INT32: case VT_GGUF_INT64:
        printf("%lld", (long long)v->v.i64);
        break;
    case VT_GGUF_FLOAT32: case VT_GGUF_FLOAT64: printf("%g", v->v.f64); break;
    case VT_GGUF_BOOL: printf("%s", v->v.b ? "true" : "false"); break;
    case VT_GGUF_STRING: {
        uint64_t len = v->v.str.len > 80 ? 80 : v->v.str.len;
        printf("\"");
        for (uint64_t i = 0; i < len; i++) {
            unsigned char ch = (unsigned char)v->v.str.data[i];
            if (ch == '"' || ch == '\\') printf("\\%c", ch);
            else if (ch < 0x20) printf("\\x%02x", ch);
            else putchar(ch);
        }
        printf("\"%s", len < v->v.str.len ? "..." : "");
        break;
    }
    case VT_GGUF_ARRAY: {
        const vt_gguf_array *a = &v->v.arr;
        printf("[%s x %llu]", vt_gguf_type_name(a->type), (unsigned long long)a->n);
        uint64_t show = a->n < 5 ? a->n : 5;
        printf(" ");
        for (uint64_t i = 0; i < show; i++) {
            if (i) printf(", ");
            if (a->items) print_value(&a->items[i]);
            else if (a->type == VT_GGUF_FLOAT32 || a->type == VT_GGUF_FLOAT64) printf("%g", vt_gguf_arr_f64(a, i));
            else if (a->type == VT_GGUF_BOOL) printf("%s", vt_gguf_arr_i64(a, i) ? "true" : "false");
            else printf("%lld", (long long)vt_gguf_arr_i64(a, i));
        }
        if (show < a->n) printf(", ...");
        break;
    }
    default: printf("?"); break;
    }
}

/* llama.cpp's general.file_type values (its llama_ftype enum, the names
 * llama-quantize takes): what the file's weights mostly are. */
static const char *file_type_name(int64_t t) {
    static const char *const names[] = {
        [0] = "F32",      [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",    [8] = "Q5_0",
        [9] = "Q5_1",     [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S",
        [15] = "Q4_K_M",  [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",   [19] = "IQ2_XXS", [20] = "IQ2_XS",
        [21] = "Q2_K_S",  [22] = "IQ3_XS", [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S",
        [27] = "IQ3_M",   [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS", [31] = "IQ1_M",  [32] = "BF16",
    };
    return t >= 0 && t < (int64_t)(sizeof names / sizeof *names) && names[t] ? names[t] : NULL;
}

/* An integer metadata value, or -1 when absent or not an integer. */
static int64_t meta_int(const vt_gguf *g, const char *key) {
    const vt_gguf_kv *kv = vt_gguf_find(g, key);
    if (!kv) return -1;
    switch (kv->value.type) {
    case VT_GGUF_UINT8: case VT_GGUF_UINT16: case VT_GGUF_UINT32: case VT_GGUF_UINT64:
        return kv->value.v.u64 > INT64_MAX ? -1 : (int64_t)kv->value.v.u64;
    case VT_GGUF_INT8: case VT_GGUF_INT16: case VT_GGUF_INT32: case VT_GGUF_INT64: return kv->value.v.i64;
    default: return -1;
    }
}

/* A string metadata value (at most size-1 bytes, control bytes as '?'), or "". */
static const char *meta_str(const vt_gguf *g, const char *key, char *buf, size_t size) {
    const vt_gguf_kv *kv = vt_gguf_find(g, key);
    buf[0] = '\0';
    if (!kv || kv->value.type != VT_GGUF_STRING) return buf;
    size_t n = kv->value.v.str.len < size - 1 ? kv->value.v.str.len : size - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)kv->value.v.str.data[i];
        buf[i] = ch < 0x20 ? '?' : (char)ch;
    }
    buf[n] = '\0';
    return buf;
}

/* Parameters in expert stacks (the *_exps tensors of a mixture of experts). */
static int64_t expert_params(const vt_gguf *g) {
    int64_t n = 0;
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        if (strstr(t->name, "_exps.")) n += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    return n;
}

static void print_params(int64_t params) {
    if (params >= 10000) printf("%.2f M", (double)params / 1e6);
    else printf("%lld", (long long)params);
}

/* The architecture's own integer key "<arch>.<suffix>", or -1. */
static int64_t arch_int(const vt_gguf *g, const char *arch, const char *suffix) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return meta_int(g, key);
}

/* One paragraph before the tables: what a reader looks for first. */
static void print_summary(const vt_gguf *g, int64_t params) {
    char arch[64], name[128], tok_model[32];
    meta_str(g, "general.architecture", arch, sizeof arch);
    meta_str(g, "general.name", name, sizeof name);
    meta_str(g, "tokenizer.ggml.model", tok_model, sizeof tok_model);
    const int64_t layers = arch_int(g, arch, "block_count");
    const int64_t width = arch_int(g, arch, "embedding_length");
    const int64_t ctx = arch_int(g, arch, "context_length");
    const int64_t n_expert = arch_int(g, arch, "expert_count");
    const int64_t n_used = arch_int(g, arch, "expert_used_count");
    const int64_t ff_exp = arch_int(g, arch, "expert_feed_forward_length");
    const bool moe = n_expert > 0 && n_used > 0 && n_used <= n_expert;
    const int64_t ftype = meta_int(g, "general.file_type");
    const vt_gguf_kv *tokens = vt_gguf_find(g, "tokenizer.ggml.tokens");
    const bool has_template = vt_gguf_find(g, "tokenizer.chat_template") != NULL;
    printf("summary: %s model", arch[0] ? arch : "an unnamed architecture's");
    if (name[0]) printf(" \"%s\"", name);
    if (layers >= 0) printf(", %lld layers", (long long)layers);
    if (width >= 0) printf(", %lld wide", (long long)width);
    if (moe) {
        printf(", mixture of %lld experts, %lld used per token", (long long)n_expert, (long long)n_used);
        if (ff_exp > 0) printf(", expert FFN %lld", (long long)ff_exp);
    }
    printf(", ");
    print_params(params);
    printf(" parameters");
    if (moe) { /* a token reads n_used of each stack's n_expert experts */
        const int64_t exps = expert_params(g);
        printf(" (");
        print_params(params - exps + exps / n_expert * n_used);
        printf(" active per token)");
    }
    if (ftype >= 0) {
        const char *ft = file_type_name(ftype);
        printf("; weights %s (file type %lld)", ft ? ft : "of an unknown file type", (long long)ftype);
    }
    if (ctx >= 0) printf("; trained context %lld tokens", (long long)ctx);
    if (tokens && tokens->value.type == VT_GGUF_ARRAY)
        printf("; vocabulary %llu tokens%s%s%s", (unsigned long long)tokens->value.v.arr.n, tok_model[0] ? " (" : "",
               tok_model, tok_model[0] ? " tokenizer)" : "");
    else printf("; no vocabulary (pass --tokens to run it)");
    printf("; %s.\n", has_template ? "a chat template"
                                   : "no chat template (vt chat and vt serve's chat need --chat-template NAME or "
                                     "--chat-template-file PATH)");
}

/* What `vt info` was asked. */
typedef struct info_opts {
    const char *path;
    bool help;
} info_opts;

static vt_arg_result info_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    info_opts *o = opts;
    const char *a = argv[*i];
    if ((strcmp(a, "-m") == 0 && *i + 1 < argc) || (a[0] != '-' && !o->path)) {
        if (o->path && strcmp(a, "-m") == 0) { /* the last would win, and the first be ignored without a word */
            vt_fail(err, VT_ERR_INVALID, "info: two files ('%s', then another): give one", o->path);
            return VT_ARG_ERROR;
        }
        o->path = a[0] == '-' ? argv[++*i] : a;
        return VT_ARG_TAKEN;
    }
    return VT_ARG_NOT_MINE;
}

static vt_status parse_info(int argc, char **argv, info_opts *o, vt_error *err) {
    static const vt_cli_parser parser = {.name = "info", .operands = true, .see_help = true, .own = info_arg};
    *o = (info_opts){0};
    vt_status st = vt_cli_parse(&parser, NULL, o, &o->help, argc, argv, err);
    if (st == VT_OK && !o->help && !o->path) st = vt_fail(err, VT_ERR_INVALID, "info: give a GGUF file");
    return st;
}

/* Print the header, the metadata and the tensor table. */
static vt_status run_info(const info_opts *o, vt_error *err) {
    const char *path = o->path;
    vt_gguf *g = NULL;
    /* a file cut short whose header and tensor table are whole is shown as
     * it is (what a partial download holds), the data it lacks named */
    char missing[768];
    if (vt_cli_given_file(path, err) != VT_OK || vt_gguf_open_listing(path, &g, missing, sizeof missing, err) != VT_OK)
        return err->code;
    int64_t params = 0;
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    printf("file: %s\n", path);
    print_summary(g, params);
    /* The summary reads the metadata; whether vt can run the file is what
     * loading it says (every tensor's shape against the hyperparameters),
     * so a file that would be refused says so here, with the reason. */
    vt_model *m = NULL;
    vt_error why = {0};
    if (missing[0]) printf("vt cannot run it: %s\n", missing);
    else if (vt_model_load(path, &m, &why) != VT_OK) printf("vt cannot run it: %s\n", why.msg);
    else if (!m->tokenizer)
        printf("vt runs it from token ids only (--tokens): its tokenizer cannot be used: %s\n", m->tokenizer_error);
    else printf("vt runs it: yes\n");
    vt_model_free(m);
    printf("version: %u, alignment %zu, %lld metadata keys, %lld tensors, %zu bytes\n\nmetadata:\n",
           vt_gguf_version(g), vt_gguf_alignment(g), (long long)vt_gguf_n_kv(g), (long long)vt_gguf_n_tensors(g),
           vt_gguf_file_size(g));
    for (int64_t i = 0; i < vt_gguf_n_kv(g); i++) {
        const vt_gguf_kv *kv = vt_gguf_kv_at(g, i);
        printf("  %.*s = ", (int)kv->key.len, kv->key.data);
        print_value(&kv->value);
        if (vt_gguf_str_eq(kv->key, "general.file_type")) {
            const char *ft = file_type_name(meta_int(g, "general.file_type"));
            if (ft) printf(" (%s)", ft);
        }
        printf("\n");
    }
    /* the table's offsets as the file stores them, which the reader's
     * messages (absolute bytes) can be matched against by this start */
    printf("\ntensors (offsets from the data section, which starts at byte %llu):\n",
           (unsigned long long)vt_gguf_data_offset(g));
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        char shape[96];
        int n = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->ndim; d++) n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        printf("  %-36s %-5s %-22s %12zu bytes at %llu%s\n", t->name, vt_dtype_name(t->dtype), shape, t->nbytes,
               (unsigned long long)t->offset, t->data ? "" : " (past the file's end)");
    }
    printf("\n%lld parameters\n", (long long)params);
    vt_gguf_close(g);
    /* shown, but still a damaged file: the status says so to a script */
    return missing[0] ? vt_fail(err, VT_ERR_FORMAT, "%s", missing) : VT_OK;
}

/* info has no rules across its arguments: the file is checked by opening it. */
int vt_cmd_info(int argc, char **argv) {
    vt_error err = {0};
    info_opts o;
    vt_status st = parse_info(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        printf("usage: vt info MODEL\n\n"
               "Print a one-paragraph summary of a GGUF file (architecture, size, experts and active\n"
               "parameters of a mixture of experts, weight type, trained context, vocabulary, chat\n"
               "template), then its version, metadata (arrays abbreviated) and\n"
               "tensor table.\n");
        return 0;
    }
    if (st == VT_OK) st = run_info(&o, &err);
    return vt_cli_exit(st, &err);
}
