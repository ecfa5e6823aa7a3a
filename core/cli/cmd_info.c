/* cmd_info.c — `vt info MODEL`: metadata and tensor table of a GGUF file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
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

/* What `vt info` was asked. */
typedef struct info_opts {
    const char *path;
    bool help;
} info_opts;

static vt_arg_result info_arg(void *opts, int argc, char **argv, int *i, vt_error *err) {
    (void)err;
    info_opts *o = opts;
    const char *a = argv[*i];
    if (strcmp(a, "-m") == 0 && *i + 1 < argc) o->path = argv[++*i];
    else if (a[0] != '-' && !o->path) o->path = a;
    else return VT_ARG_NOT_MINE;
    return VT_ARG_TAKEN;
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
    if (vt_gguf_open(path, &g, err) != VT_OK) return err->code;
    printf("file: %s\nversion: %u, alignment %zu, %lld metadata keys, %lld tensors, %zu bytes\n\nmetadata:\n", path,
           vt_gguf_version(g), vt_gguf_alignment(g), (long long)vt_gguf_n_kv(g), (long long)vt_gguf_n_tensors(g),
           vt_gguf_file_size(g));
    for (int64_t i = 0; i < vt_gguf_n_kv(g); i++) {
        const vt_gguf_kv *kv = vt_gguf_kv_at(g, i);
        printf("  %.*s = ", (int)kv->key.len, kv->key.data);
        print_value(&kv->value);
        printf("\n");
    }
    printf("\ntensors:\n");
    int64_t params = 0;
    for (int64_t i = 0; i < vt_gguf_n_tensors(g); i++) {
        const vt_gguf_tensor *t = vt_gguf_tensor_at(g, i);
        char shape[96];
        int n = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->ndim; d++) n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        printf("  %-36s %-5s %-22s %12zu bytes at %llu\n", t->name, vt_dtype_name(t->dtype), shape, t->nbytes,
               (unsigned long long)t->offset);
        params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    }
    printf("\n%lld parameters\n", (long long)params);
    vt_gguf_close(g);
    return VT_OK;
}

/* info has no rules across its arguments: the file is checked by opening it. */
int vt_cmd_info(int argc, char **argv) {
    vt_error err = {0};
    info_opts o;
    vt_status st = parse_info(argc, argv, &o, &err);
    if (st == VT_OK && o.help) {
        printf("usage: vt info MODEL\n\n"
               "Print a GGUF file's version, metadata (arrays abbreviated) and tensor table.\n");
        return 0;
    }
    if (st == VT_OK) st = run_info(&o, &err);
    return vt_cli_exit(st, &err);
}
