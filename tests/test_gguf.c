/* test_gguf.c — the GGUF writer and reader: round trips of every metadata
 * type and tensor dtype, v2 files, the fixture models (tests/data), the writer's own
 * refusals, and a table of corrupted files that must each fail with
 * VT_ERR_FORMAT and a message naming what is wrong. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_model_writer.h"
#include "quant.h"
#include "util.h"

/* ---- helpers ---- */

/* Deterministic bytes for tensor i (so a round trip can compare every byte). */
static uint8_t pattern_byte(int tensor, size_t i) { return (uint8_t)(i * 31u + (unsigned)tensor * 7u + (i >> 8)); }

static vt_status write_pattern(vt_gguf_writer *w, int tensor, size_t nbytes, size_t chunk) {
    uint8_t buf[4096];
    size_t done = 0;
    while (done < nbytes) {
        size_t k = nbytes - done < chunk ? nbytes - done : chunk;
        if (k > sizeof buf) k = sizeof buf;
        for (size_t i = 0; i < k; i++) buf[i] = pattern_byte(tensor, done + i);
        vt_status st = vt_gguf_writer_write_data(w, buf, k);
        if (st) return st;
        done += k;
    }
    return VT_OK;
}

static size_t tensor_bytes(int32_t dtype, int ndim, const int64_t *ne) {
    size_t rows = 1;
    for (int d = 1; d < ndim; d++) rows *= (size_t)ne[d];
    return vt_row_size(dtype, ne[0]) * rows;
}

/* ---- round trip of every metadata type and dtype ---- */

typedef struct tensor_spec {
    const char *name;
    int32_t dtype;
    int ndim;
    int64_t ne[4];
} tensor_spec;

static const tensor_spec roundtrip_tensors[] = {
    {"t.f32", VT_F32, 1, {5}},
    {"t.f16", VT_F16, 2, {3, 7}},
    {"t.bf16", VT_BF16, 3, {2, 3, 4}},
    {"t.q8_0", VT_Q8_0, 2, {64, 3}},
    {"t.q4_0", VT_Q4_0, 4, {32, 2, 2, 2}},
    {"t.q4_k", VT_Q4_K, 2, {256, 2}},
    {"t.q5_k", VT_Q5_K, 2, {512, 1}},
    {"t.q6_k", VT_Q6_K, 2, {256, 3}},
    {"t.i32", VT_I32, 1, {9}},
    {"t.i64", VT_I64, 2, {2, 2}},
};
#define N_RT_TENSORS (sizeof roundtrip_tensors / sizeof roundtrip_tensors[0])

static const char *const rt_strings[] = {"<unk>", "", "h\xc3\xa9llo", "\xe2\x96\x81the"};

/* Write the round-trip file: every scalar type, arrays of every scalar type,
 * an array of strings, arrays of arrays (of ints and of strings), and one
 * tensor of every dtype. Data is written in `chunk`-byte pieces. */
static vt_status write_roundtrip(const char *path, size_t chunk, vt_error *err) {
    vt_gguf_writer *w = NULL;
    vt_status st = vt_gguf_writer_create(path, &w, err);
    if (st) return st;
    vt_gguf_writer_set_str(w, "general.architecture", "llama");
    vt_gguf_writer_set_u32(w, "k.u32", 4000000000u);
    vt_gguf_writer_set_i32(w, "k.i32", -123456);
    vt_gguf_writer_set_u64(w, "k.u64", 0x123456789abcdefull);
    vt_gguf_writer_set_f32(w, "k.f32", 1.5e-6f);
    vt_gguf_writer_set_bool(w, "k.bool", true);
    vt_gguf_writer_set_str(w, "k.str", "hello world");
    /* the types without a dedicated setter go through set_value */
    vt_gguf_value v = {.type = VT_GGUF_UINT8, .v.u64 = 200};
    vt_gguf_writer_set_value(w, "k.u8", &v);
    v = (vt_gguf_value){.type = VT_GGUF_INT8, .v.i64 = -100};
    vt_gguf_writer_set_value(w, "k.i8", &v);
    v = (vt_gguf_value){.type = VT_GGUF_UINT16, .v.u64 = 65535};
    vt_gguf_writer_set_value(w, "k.u16", &v);
    v = (vt_gguf_value){.type = VT_GGUF_INT16, .v.i64 = -32768};
    vt_gguf_writer_set_value(w, "k.i16", &v);
    v = (vt_gguf_value){.type = VT_GGUF_INT64, .v.i64 = INT64_MIN + 5};
    vt_gguf_writer_set_value(w, "k.i64", &v);
    v = (vt_gguf_value){.type = VT_GGUF_FLOAT64, .v.f64 = 3.141592653589793};
    vt_gguf_writer_set_value(w, "k.f64", &v);

    const float scores[4] = {0.0f, -1.25f, 3.5f, -1e30f};
    vt_gguf_writer_set_arr(w, "a.f32", VT_GGUF_FLOAT32, scores, 4);
    const int32_t ints[3] = {-1, 0, 2147483647};
    vt_gguf_writer_set_arr(w, "a.i32", VT_GGUF_INT32, ints, 3);
    const uint8_t bytes[5] = {0, 1, 2, 254, 255};
    vt_gguf_writer_set_arr(w, "a.u8", VT_GGUF_UINT8, bytes, 5);
    const int16_t shorts[2] = {-2, 300};
    vt_gguf_writer_set_arr(w, "a.i16", VT_GGUF_INT16, shorts, 2);
    const uint64_t longs[2] = {0, UINT64_MAX};
    vt_gguf_writer_set_arr(w, "a.u64", VT_GGUF_UINT64, longs, 2);
    const double doubles[2] = {-0.5, 1e300};
    vt_gguf_writer_set_arr(w, "a.f64", VT_GGUF_FLOAT64, doubles, 2);
    const uint8_t bools[3] = {1, 0, 1};
    vt_gguf_writer_set_arr(w, "a.bool", VT_GGUF_BOOL, bools, 3);
    vt_gguf_writer_set_arr(w, "a.empty", VT_GGUF_UINT32, NULL, 0);
    vt_gguf_writer_set_str_arr(w, "a.str", rt_strings, 4);

    /* [[1, 2, 3], [], [7]] and [["a", "bc"], ["def"]] */
    const int32_t inner0[3] = {1, 2, 3}, inner2[1] = {7};
    vt_gguf_value rows[3] = {
        {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_INT32, .n = 3, .data = inner0}},
        {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_INT32, .n = 0, .data = NULL}},
        {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_INT32, .n = 1, .data = inner2}},
    };
    v = (vt_gguf_value){.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_ARRAY, .n = 3, .items = rows}};
    vt_gguf_writer_set_value(w, "a.nested", &v);
    vt_gguf_value s0[2] = {{.type = VT_GGUF_STRING, .v.str = {1, "a"}}, {.type = VT_GGUF_STRING, .v.str = {2, "bc"}}};
    vt_gguf_value s1[1] = {{.type = VT_GGUF_STRING, .v.str = {3, "def"}}};
    vt_gguf_value srows[2] = {
        {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_STRING, .n = 2, .items = s0}},
        {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_STRING, .n = 1, .items = s1}},
    };
    v = (vt_gguf_value){.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_ARRAY, .n = 2, .items = srows}};
    st = vt_gguf_writer_set_value(w, "a.nested_str", &v);

    for (size_t i = 0; !st && i < N_RT_TENSORS; i++) {
        const tensor_spec *t = &roundtrip_tensors[i];
        st = vt_gguf_writer_add_tensor(w, t->name, t->dtype, t->ndim, t->ne);
    }
    for (size_t i = 0; !st && i < N_RT_TENSORS; i++) {
        const tensor_spec *t = &roundtrip_tensors[i];
        st = write_pattern(w, (int)i, tensor_bytes(t->dtype, t->ndim, t->ne), chunk);
    }
    if (st) {
        vt_fail(err, st, "%s", vt_gguf_writer_error(w));
        vt_gguf_writer_abort(w);
        return st;
    }
    return vt_gguf_writer_finish(w, err);
}

static void check_roundtrip(const vt_gguf *g) {
    vt_error err = {0};
    CU_ASSERT_EQUAL(vt_gguf_n_kv(g), 24);
    CU_ASSERT_EQUAL(vt_gguf_alignment(g), 32);
    /* order is kept */
    CU_ASSERT(vt_gguf_str_eq(vt_gguf_kv_at(g, 0)->key, "general.architecture"));
    CU_ASSERT(vt_gguf_str_eq(vt_gguf_kv_at(g, 23)->key, "a.nested_str"));

    uint32_t u32 = 0;
    int32_t i32 = 0;
    float f = 0;
    bool b = false;
    vt_gguf_str s = {0};
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "k.u32", &u32, &err), VT_OK);
    CU_ASSERT_EQUAL(u32, 4000000000u);
    CU_ASSERT_EQUAL(vt_gguf_get_i32(g, "k.i32", &i32, &err), VT_OK);
    CU_ASSERT_EQUAL(i32, -123456);
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.u64")->value.v.u64, 0x123456789abcdefull);
    CU_ASSERT_EQUAL(vt_gguf_get_f32(g, "k.f32", &f, &err), VT_OK);
    CU_ASSERT_EQUAL(f, 1.5e-6f);
    CU_ASSERT_EQUAL(vt_gguf_get_bool(g, "k.bool", &b, &err), VT_OK);
    CU_ASSERT(b);
    CU_ASSERT_EQUAL(vt_gguf_get_str(g, "k.str", &s, &err), VT_OK);
    CU_ASSERT(vt_gguf_str_eq(s, "hello world"));
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.u8")->value.type, VT_GGUF_UINT8);
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.u8")->value.v.u64, 200);
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.i8")->value.v.i64, -100);
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.u16")->value.v.u64, 65535);
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.i16")->value.v.i64, -32768);
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.i64")->value.v.i64, INT64_MIN + 5);
    CU_ASSERT_EQUAL(vt_gguf_find(g, "k.f64")->value.v.f64, 3.141592653589793);
    /* small integer types widen through the typed gets */
    CU_ASSERT_EQUAL(vt_gguf_get_i32(g, "k.i8", &i32, &err), VT_OK);
    CU_ASSERT_EQUAL(i32, -100);
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "k.u16", &u32, &err), VT_OK);
    CU_ASSERT_EQUAL(u32, 65535);
    CU_ASSERT_EQUAL(vt_gguf_get_f32(g, "k.f64", &f, &err), VT_OK);
    CU_ASSERT_EQUAL(f, (float)3.141592653589793);

    const vt_gguf_array *a = NULL;
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.f32", VT_GGUF_FLOAT32, &a, &err), VT_OK);
    CU_ASSERT_EQUAL(a->n, 4);
    CU_ASSERT_EQUAL(vt_gguf_arr_f64(a, 1), -1.25);
    CU_ASSERT_EQUAL(vt_gguf_arr_f64(a, 3), (double)-1e30f);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.i32", VT_GGUF_INT32, &a, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(a, 0), -1);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(a, 2), 2147483647);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.u8", -1, &a, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(a, 4), 255);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.i16", VT_GGUF_INT16, &a, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(a, 0), -2);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(a, 1), 300);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.u64", VT_GGUF_UINT64, &a, &err), VT_OK);
    CU_ASSERT_EQUAL((uint64_t)vt_gguf_arr_i64(a, 1), UINT64_MAX);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.f64", VT_GGUF_FLOAT64, &a, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_arr_f64(a, 1), 1e300);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.bool", VT_GGUF_BOOL, &a, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(a, 0), 1);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(a, 1), 0);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.empty", VT_GGUF_UINT32, &a, &err), VT_OK);
    CU_ASSERT_EQUAL(a->n, 0);

    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.str", VT_GGUF_STRING, &a, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, 4);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(a->items[i].type, VT_GGUF_STRING);
        CU_ASSERT(vt_gguf_str_eq(a->items[i].v.str, rt_strings[i]));
    }

    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.nested", VT_GGUF_ARRAY, &a, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, 3);
    CU_ASSERT_EQUAL(a->items[0].v.arr.type, VT_GGUF_INT32);
    CU_ASSERT_EQUAL(a->items[0].v.arr.n, 3);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(&a->items[0].v.arr, 2), 3);
    CU_ASSERT_EQUAL(a->items[1].v.arr.n, 0);
    CU_ASSERT_EQUAL(vt_gguf_arr_i64(&a->items[2].v.arr, 0), 7);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.nested_str", VT_GGUF_ARRAY, &a, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(a->n, 2);
    CU_ASSERT_EQUAL_FATAL(a->items[0].v.arr.n, 2);
    CU_ASSERT(vt_gguf_str_eq(a->items[0].v.arr.items[1].v.str, "bc"));
    CU_ASSERT(vt_gguf_str_eq(a->items[1].v.arr.items[0].v.str, "def"));

    CU_ASSERT_EQUAL_FATAL(vt_gguf_n_tensors(g), (int64_t)N_RT_TENSORS);
    for (size_t i = 0; i < N_RT_TENSORS; i++) {
        const tensor_spec *spec = &roundtrip_tensors[i];
        const vt_gguf_tensor *t = vt_gguf_find_tensor(g, spec->name);
        CU_ASSERT_PTR_EQUAL_FATAL(t, vt_gguf_tensor_at(g, (int64_t)i));
        CU_ASSERT_STRING_EQUAL(t->name, spec->name);
        CU_ASSERT_EQUAL(t->dtype, spec->dtype);
        CU_ASSERT_EQUAL(t->ndim, spec->ndim);
        for (int d = 0; d < 4; d++) CU_ASSERT_EQUAL(t->ne[d], d < spec->ndim ? spec->ne[d] : 1);
        CU_ASSERT_EQUAL(t->offset % 32, 0);
        CU_ASSERT_EQUAL(((const uint8_t *)t->data - (const uint8_t *)vt_gguf_tensor_at(g, 0)->data) % 32, 0);
        size_t n = tensor_bytes(spec->dtype, spec->ndim, spec->ne);
        CU_ASSERT_EQUAL_FATAL(t->nbytes, n);
        size_t bad = 0;
        for (size_t k = 0; k < n; k++) bad += ((const uint8_t *)t->data)[k] != pattern_byte((int)i, k);
        CU_ASSERT_EQUAL(bad, 0);
    }
    CU_ASSERT_PTR_NULL(vt_gguf_find_tensor(g, "t.absent"));
    CU_ASSERT_PTR_NULL(vt_gguf_find(g, "k.absent"));
}

static void test_roundtrip_all_types(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "roundtrip.gguf");
    vt_error err = {0};
    /* 7-byte chunks: every tensor gets many partial writes and some writes cross tensors */
    vt_status st = write_roundtrip(path, 7, &err);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    vt_gguf *g = NULL;
    st = vt_gguf_open(path, &g, &err);
    if (st) fprintf(stderr, "open: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(st, VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_version(g), 3);
    CU_ASSERT_STRING_EQUAL(vt_gguf_path(g), path);
    check_roundtrip(g);
    vt_gguf_close(g);
}

/* Big chunks that span several tensors produce the same bytes as tiny ones. */
static void test_chunking_does_not_matter(void) {
    char p1[512], p2[512];
    vt_test_tmpfile(p1, sizeof p1, "chunk1.gguf");
    vt_test_tmpfile(p2, sizeof p2, "chunk4096.gguf");
    CU_ASSERT_EQUAL_FATAL(write_roundtrip(p1, 1, NULL), VT_OK);
    CU_ASSERT_EQUAL_FATAL(write_roundtrip(p2, 4096, NULL), VT_OK);
    size_t n1 = 0, n2 = 0;
    char *a = vt_test_read_file(p1, &n1), *b = vt_test_read_file(p2, &n2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(n1, n2);
    CU_ASSERT(n1 == n2 && memcmp(a, b, n1) == 0);
    CU_ASSERT_EQUAL(n1 % 32, 0); /* the last tensor is padded too */
    free(a);
    free(b);
}

static void test_open_memory_and_v2(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "v2.gguf");
    CU_ASSERT_EQUAL_FATAL(write_roundtrip(path, 1000, NULL), VT_OK);
    size_t n = 0;
    uint8_t *buf = (uint8_t *)vt_test_read_file(path, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    vt_error err = {0};
    vt_gguf *g = NULL;
    /* v2 has v3's layout for little-endian files: only the version field differs */
    gmw_put_le(buf + 4, 2, 4);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open_memory(buf, n, &g, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_version(g), 2);
    CU_ASSERT_STRING_EQUAL(vt_gguf_path(g), "<memory>");
    CU_ASSERT_EQUAL(vt_gguf_file_size(g), n);
    check_roundtrip(g);
    vt_gguf_close(g);
    free(buf);
}

/* Typed gets: absent keys leave the output alone; wrong types and values out of range name the key. */
static void test_typed_get_errors(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "typed.gguf");
    CU_ASSERT_EQUAL_FATAL(write_roundtrip(path, 4096, NULL), VT_OK);
    vt_gguf *g = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(path, &g, &err), VT_OK);
    uint32_t u32 = 77;
    int32_t i32 = 0;
    float f = 0;
    bool b = false;
    vt_gguf_str s = {0};
    const vt_gguf_array *a = NULL;
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "no.such.key", &u32, &err), VT_ERR_FORMAT); /* absent */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'no.such.key' is absent"));
    CU_ASSERT_EQUAL(u32, 77);
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "k.i32", &u32, &err), VT_ERR_FORMAT); /* negative */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "k.i32"));
    CU_ASSERT_EQUAL(u32, 77);
    CU_ASSERT_EQUAL(vt_gguf_get_i32(g, "k.u32", &i32, &err), VT_ERR_FORMAT); /* 4e9 > INT32_MAX */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "out of range"));
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "k.u64", &u32, &err), VT_ERR_FORMAT);
    CU_ASSERT_EQUAL(vt_gguf_get_u32(g, "k.str", &u32, &err), VT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "string"));
    CU_ASSERT_EQUAL(vt_gguf_get_f32(g, "k.u32", &f, &err), VT_ERR_FORMAT);
    CU_ASSERT_EQUAL(vt_gguf_get_bool(g, "k.u8", &b, &err), VT_ERR_FORMAT);
    CU_ASSERT_EQUAL(vt_gguf_get_str(g, "k.bool", &s, &err), VT_ERR_FORMAT);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "k.str", -1, &a, &err), VT_ERR_FORMAT);
    CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "a.str", VT_GGUF_INT32, &a, &err), VT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "array of string"));
    vt_gguf_close(g);
}

/* ---- writer refusals ---- */

static void test_writer_refusals(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "refused.gguf");
    vt_error err = {0};
    vt_gguf_writer *w = NULL;
    const int64_t ne[2] = {32, 2};

    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_set_u32(w, "a", 1), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_set_u32(w, "a", 2), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt_gguf_writer_error(w), "duplicate key 'a'"));
    CU_ASSERT_EQUAL(vt_gguf_writer_finish(w, &err), VT_ERR_INVALID); /* the error sticks */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "duplicate key"));
    CU_ASSERT_PTR_NULL(fopen(path, "rb")); /* no half-made file left */

    struct {
        int32_t dtype;
        int ndim;
        int64_t ne0;
        const char *name;
        const char *words;
    } bad_tensors[] = {
        {VT_Q8_0, 2, 33, "x", "whole blocks"},
        {3 /* Q4_1: not a vt dtype */, 2, 32, "x", "invalid dtype"},
        {VT_F32, 0, 32, "x", "ndim 0"},
        {VT_F32, 5, 32, "x", "ndim 5"},
        {VT_F32, 2, 0, "x", "dimension 0"},
        {VT_F32, 2, 32, "", "name"},
        {VT_F32, 2, 32, "a_name_that_is_longer_than_the_sixty_three_bytes_llama_cpp_allows", "name"},
    };
    for (size_t i = 0; i < sizeof bad_tensors / sizeof bad_tensors[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
        int64_t shape[5] = {bad_tensors[i].ne0, 2, 1, 1, 1};
        CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, bad_tensors[i].name, bad_tensors[i].dtype, bad_tensors[i].ndim,
                                                  shape),
                        VT_ERR_INVALID);
        CU_ASSERT_PTR_NOT_NULL(strstr(vt_gguf_writer_error(w), bad_tensors[i].words));
        vt_gguf_writer_abort(w);
    }

    /* duplicate tensor, too much data, too little data, metadata after data */
    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "t", VT_Q8_0, 2, ne), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "t", VT_Q8_0, 2, ne), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt_gguf_writer_error(w), "duplicate tensor name 't'"));
    vt_gguf_writer_abort(w);

    uint8_t data[100] = {0};
    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "t", VT_Q8_0, 2, ne), VT_OK); /* 2 blocks: 68 bytes */
    CU_ASSERT_EQUAL(vt_gguf_writer_write_data(w, data, 68), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_write_data(w, data, 1), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt_gguf_writer_error(w), "past the last declared tensor"));
    vt_gguf_writer_abort(w);

    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "t", VT_Q8_0, 2, ne), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "u", VT_F32, 1, ne), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_write_data(w, data, 50), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_set_u32(w, "late", 1), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(vt_gguf_writer_error(w), "after tensor data started"));
    vt_gguf_writer_abort(w);

    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "t", VT_Q8_0, 2, ne), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "u", VT_F32, 1, ne), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_write_data(w, data, 50), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_finish(w, &err), VT_ERR_INVALID);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "tensor 't' got 50 of its 68 bytes"));
    CU_ASSERT_PTR_NULL(fopen(path, "rb"));

    CU_ASSERT_EQUAL(vt_gguf_writer_create("/nonexistent-dir/x.gguf", &w, &err), VT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent-dir/x.gguf"));
}

/* Offsets past 4 GiB (registered with VT_TEST_LARGE=1: writes a 4.1 GiB file). The
 * writer streams it in 64 MiB chunks and holds none of it. */
static void test_file_over_4gib(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "large.gguf");
    vt_gguf_writer *w = NULL;
    vt_error err = {0};
    const int64_t big_ne[2] = {1 << 20, 1025}; /* f32: 4 GiB + 4 MiB */
    const int64_t small_ne[1] = {64};
    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "big", VT_F32, 2, big_ne), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_writer_add_tensor(w, "after", VT_F32, 1, small_ne), VT_OK);
    size_t chunk = 64u << 20, big_bytes = (size_t)big_ne[0] * (size_t)big_ne[1] * 4;
    uint8_t *zeros = calloc(1, chunk);
    CU_ASSERT_PTR_NOT_NULL_FATAL(zeros);
    for (size_t done = 0; done < big_bytes; done += chunk)
        vt_gguf_writer_write_data(w, zeros, big_bytes - done < chunk ? big_bytes - done : chunk);
    free(zeros);
    CU_ASSERT_EQUAL(write_pattern(w, 1, 256, 256), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_finish(w, &err), VT_OK);
    vt_gguf *g = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(path, &g, &err), VT_OK);
    const vt_gguf_tensor *t = vt_gguf_find_tensor(g, "after");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(t->offset > UINT32_MAX);
    CU_ASSERT_EQUAL(vt_gguf_find_tensor(g, "big")->nbytes, big_bytes);
    size_t bad = 0;
    for (size_t k = 0; k < 256; k++) bad += ((const uint8_t *)t->data)[k] != pattern_byte(1, k);
    CU_ASSERT_EQUAL(bad, 0);
    vt_gguf_close(g);
    remove(path);
}

/* A file with only metadata (a vocabulary file) is valid, and so is an empty one of both. */
static void test_no_tensors(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "empty.gguf");
    vt_gguf_writer *w = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_create(path, &w, &err), VT_OK);
    CU_ASSERT_EQUAL_FATAL(vt_gguf_writer_finish(w, &err), VT_OK);
    vt_gguf *g = NULL;
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open(path, &g, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_n_kv(g), 0);
    CU_ASSERT_EQUAL(vt_gguf_n_tensors(g), 0);
    CU_ASSERT_PTR_NULL(vt_gguf_tensor_at(g, 0));
    CU_ASSERT_PTR_NULL(vt_gguf_kv_at(g, 0));
    vt_gguf_close(g);
}

static void test_open_io_errors(void) {
    vt_gguf *g = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL(vt_gguf_open("/nonexistent/model.gguf", &g, &err), VT_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/model.gguf"));
    CU_ASSERT_PTR_NULL(g);
    CU_ASSERT_EQUAL(vt_gguf_open(vt_test_tmpdir(), &g, &err), VT_ERR_IO); /* a directory */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a regular file (a directory)"));
    CU_ASSERT_PTR_NULL(strstr(err.msg, "No such file")); /* no errno left over from before */
    char path[512];
    vt_test_tmpfile(path, sizeof path, "zero.gguf");
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_EQUAL(vt_gguf_open(path, &g, &err), VT_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "truncated at offset 0 while reading the magic"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, path)); /* open() names the file */
}

/* ---- the fixture models (tests/data) ---- */

typedef struct model_expect {
    const char *file;
    const char *arch;
    int64_t n_tensors;
    uint64_t n_vocab;
    const char *tensor; /* a tensor and its dtype (the documented quant mix) */
    int32_t dtype;
} model_expect;

static const model_expect fixture_models[] = {
    {"models/aidreams260k-f32.gguf", "llama", 38, 512, "blk.0.attn_q.weight", VT_F32},
    {"models/aidreams260k-q4_0.gguf", "llama", 38, 512, "token_embd.weight", VT_Q8_0},
    {"models/aidreams260k-q8_0.gguf", "llama", 38, 512, "blk.3.ffn_down.weight", VT_F16},
    {"models/llama-2-tiny-random.gguf", "llama", 12, 32000, "token_embd.weight", -1},
    {"models/llama-gqa-tiny-f32.gguf", "llama", 21, 512, "output.weight", VT_F32},
    {"models/llama-gqa-tiny-q4_k_m.gguf", "llama", 21, 512, "token_embd.weight", VT_Q4_K},
    {"models/qwen2-tiny-f32.gguf", "qwen2", 26, 512, "blk.0.attn_q.bias", VT_F32},
    {"models/qwen2-tiny-q4_k_m.gguf", "qwen2", 26, 512, "blk.1.attn_v.weight", VT_Q6_K},
    {"models/qwen3-tiny-f32.gguf", "qwen3", 24, 512, "blk.0.attn_q_norm.weight", VT_F32},
    {"models/qwen3-tiny-f16.gguf", "qwen3", 24, 512, "blk.0.ffn_up.weight", VT_F16},
    {"models/qwen3-tiny-bf16.gguf", "qwen3", 24, 512, "blk.0.ffn_up.weight", VT_BF16},
    {"models/qwen3-tiny-q8_0.gguf", "qwen3", 24, 512, "blk.1.ffn_gate.weight", VT_Q8_0},
    {"models/qwen3-tiny-q4_0.gguf", "qwen3", 24, 512, "token_embd.weight", VT_Q6_K},
    {"models/qwen3-tiny-q4_k_m.gguf", "qwen3", 24, 512, "blk.1.ffn_down.weight", VT_Q6_K},
    {"models/qwen3-tiny-q5_k_m.gguf", "qwen3", 24, 512, "blk.0.ffn_down.weight", VT_Q5_K},
    {"models/qwen3-tiny-q6_k.gguf", "qwen3", 24, 512, "blk.0.attn_q.weight", VT_Q6_K},
    {"models/vocab/ggml-vocab-llama-spm.gguf", "llama", 0, 32000, NULL, -1},
    {"models/vocab/ggml-vocab-qwen2.gguf", "qwen2", 0, 151936, NULL, -1},
};

static void test_fixture_models(void) {
    const char *data = vt_test_data_dir("gguf reader on the fixture models");
    if (!data) return;
    for (size_t i = 0; i < sizeof fixture_models / sizeof fixture_models[0]; i++) {
        const model_expect *m = &fixture_models[i];
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", data, m->file);
        vt_gguf *g = NULL;
        vt_error err = {0};
        vt_status st = vt_gguf_open(path, &g, &err);
        if (st) fprintf(stderr, "\n%s\n", err.msg);
        CU_ASSERT_EQUAL(st, VT_OK);
        if (st) continue;
        vt_gguf_str arch = {0};
        CU_ASSERT_EQUAL(vt_gguf_get_str(g, "general.architecture", &arch, &err), VT_OK);
        CU_ASSERT(vt_gguf_str_eq(arch, m->arch));
        const vt_gguf_array *tokens = NULL;
        CU_ASSERT_EQUAL(vt_gguf_get_arr(g, "tokenizer.ggml.tokens", VT_GGUF_STRING, &tokens, &err), VT_OK);
        if (tokens) CU_ASSERT_EQUAL(tokens->n, m->n_vocab);
        CU_ASSERT_EQUAL(vt_gguf_n_tensors(g), m->n_tensors);
        if (m->n_tensors > 0) {
            char key[128];
            uint32_t n_layer = 0, n_embd = 0;
            snprintf(key, sizeof key, "%s.block_count", m->arch);
            CU_ASSERT_EQUAL(vt_gguf_get_u32(g, key, &n_layer, &err), VT_OK);
            snprintf(key, sizeof key, "%s.embedding_length", m->arch);
            CU_ASSERT_EQUAL(vt_gguf_get_u32(g, key, &n_embd, &err), VT_OK);
            const vt_gguf_tensor *emb = vt_gguf_find_tensor(g, "token_embd.weight");
            CU_ASSERT_PTR_NOT_NULL_FATAL(emb);
            CU_ASSERT_EQUAL(emb->ne[0], n_embd);
            CU_ASSERT_EQUAL((uint64_t)emb->ne[1], m->n_vocab);
            snprintf(key, sizeof key, "blk.%u.ffn_norm.weight", n_layer - 1);
            CU_ASSERT_PTR_NOT_NULL(vt_gguf_find_tensor(g, key));
            const vt_gguf_tensor *t = vt_gguf_find_tensor(g, m->tensor);
            CU_ASSERT_PTR_NOT_NULL(t);
            if (t && m->dtype >= 0) CU_ASSERT_EQUAL(t->dtype, m->dtype);
        }
        vt_gguf_close(g);
    }
}

/* Every .gguf in the fixture model folders opens (fixtures added later included). */
static void test_every_fixture_file_opens(void) {
    const char *data = vt_test_data_dir("gguf reader on every fixture model");
    if (!data) return;
    const char *dirs[2] = {"models", "models/vocab"};
    int opened = 0;
    for (int d = 0; d < 2; d++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", data, dirs[d]);
        DIR *dh = opendir(dir);
        if (!dh) continue;
        struct dirent *e;
        while ((e = readdir(dh))) {
            size_t n = strlen(e->d_name);
            if (n < 5 || strcmp(e->d_name + n - 5, ".gguf") != 0) continue;
            char path[2048];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            vt_gguf *g = NULL;
            vt_error err = {0};
            vt_status st = vt_gguf_open(path, &g, &err);
            if (st) fprintf(stderr, "\n%s\n", err.msg);
            CU_ASSERT_EQUAL(st, VT_OK);
            if (g) CU_ASSERT_PTR_NOT_NULL(vt_gguf_find(g, "general.architecture"));
            opened += st == VT_OK;
            vt_gguf_close(g);
        }
        closedir(dh);
    }
    CU_ASSERT(opened >= (int)(sizeof fixture_models / sizeof fixture_models[0]));
}

/* ---- corrupted files ---- */

/* The base file the corruptions start from: small, with a string array, a
 * nested array, two keys of equal length and three tensors. */
static uint8_t *base_file;
static size_t base_size;
static uint8_t *deep_file; /* arrays nested 12 deep */
static size_t deep_size;

static int corrupt_suite_init(void) {
    char path[512];
    vt_test_tmpfile(path, sizeof path, "base.gguf");
    vt_gguf_writer *w = NULL;
    if (vt_gguf_writer_create(path, &w, NULL)) return 1;
    const char *tokens[3] = {"<unk>", "<s>", "</s>"};
    const int32_t inner[2] = {1, 2};
    vt_gguf_value row = {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_INT32, .n = 2, .data = inner}};
    vt_gguf_value nested = {.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_ARRAY, .n = 1, .items = &row}};
    vt_gguf_writer_set_str(w, "general.architecture", "llama");
    vt_gguf_writer_set_u32(w, "general.alignment", 32);
    vt_gguf_writer_set_u32(w, "test.countA", 7);
    vt_gguf_writer_set_u32(w, "test.countB", 8);
    vt_gguf_writer_set_bool(w, "test.flag", true);
    vt_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", tokens, 3);
    vt_gguf_writer_set_value(w, "test.nested", &nested);
    vt_gguf_writer_set_str(w, "general.name", "corruption base");
    const int64_t ne_a[2] = {8, 2}, ne_b[2] = {32, 2}, ne_c[1] = {4};
    vt_gguf_writer_add_tensor(w, "a.weight", VT_F32, 2, ne_a);
    vt_gguf_writer_add_tensor(w, "b.weight", VT_Q8_0, 2, ne_b);
    vt_gguf_writer_add_tensor(w, "c.weight", VT_I32, 1, ne_c);
    write_pattern(w, 0, 64, 64);
    write_pattern(w, 1, 68, 68);
    write_pattern(w, 2, 16, 16);
    if (vt_gguf_writer_finish(w, NULL)) return 1;
    base_file = (uint8_t *)vt_test_read_file(path, &base_size);

    /* [[[[...[1]...]]]]: 12 levels, over the reader's limit of 8 */
    vt_test_tmpfile(path, sizeof path, "deep.gguf");
    if (vt_gguf_writer_create(path, &w, NULL)) return 1;
    vt_gguf_value levels[12];
    const int32_t one = 1;
    levels[0] = (vt_gguf_value){.type = VT_GGUF_ARRAY, .v.arr = {.type = VT_GGUF_INT32, .n = 1, .data = &one}};
    for (int i = 1; i < 12; i++)
        levels[i] = (vt_gguf_value){.type = VT_GGUF_ARRAY,
                                    .v.arr = {.type = VT_GGUF_ARRAY, .n = 1, .items = &levels[i - 1]}};
    vt_gguf_writer_set_value(w, "test.deep", &levels[11]);
    if (vt_gguf_writer_finish(w, NULL)) return 1;
    deep_file = (uint8_t *)vt_test_read_file(path, &deep_size);
    return base_file && deep_file ? 0 : 1;
}

static int corrupt_suite_cleanup(void) {
    free(base_file);
    free(deep_file);
    return 0;
}

/* A named place in the base file (gmw_offset_of's names), or "tables_end",
 * the end of its tensor table (c.weight is the last tensor declared). */
static size_t locate(const char *where) {
    bool tables_end = strcmp(where, "tables_end") == 0;
    size_t at = gmw_offset_of(base_file, base_size, tables_end ? "off:c.weight" : where);
    if (at == SIZE_MAX) fprintf(stderr, "\nno place '%s' in the base file\n", where);
    CU_ASSERT_FATAL(at != SIZE_MAX);
    return tables_end ? at + 8 : at;
}

typedef enum corrupt_op { CUT, PUT8, PUT32, PUT64, DEEP } corrupt_op;

typedef struct corrupt_case {
    const char *what;
    corrupt_op op;
    const char *where; /* a place for locate() */
    long delta;        /* added to the place */
    uint64_t value;    /* the new value (PUT*); ignored for CUT */
    const char *words[2];
} corrupt_case;

static const corrupt_case corrupt_cases[] = {
    /* truncation at every section boundary and inside each */
    {"empty", CUT, "magic", 0, 0, {"truncated at offset 0", "magic"}},
    {"cut in magic", CUT, "magic", 2, 0, {"truncated at offset 0", "magic"}},
    {"cut after magic", CUT, "version", 0, 0, {"truncated at offset 4", "version"}},
    {"cut in version", CUT, "version", 3, 0, {"truncated at offset 4", "needs 4 bytes, file has 3 left"}},
    {"cut before tensor count", CUT, "n_tensors", 0, 0, {"truncated", "tensor count"}},
    {"cut in tensor count", CUT, "n_tensors", 5, 0, {"truncated at offset 8", "tensor count"}},
    {"cut in metadata count", CUT, "n_kv", 7, 0, {"truncated at offset 16", "metadata count"}},
    {"cut after header", CUT, "n_kv", 8, 0, {"metadata count 8 cannot fit", "bytes left"}},
    {"cut in a key length", CUT, "key:general.name", 3, 0, {"truncated", "key of metadata entry 7"}},
    {"cut in a key", CUT, "key:general.name", 12, 0, {"truncated", "key of metadata entry 7"}},
    {"cut before a value type", CUT, "type:test.flag", 0, 0, {"truncated", "type of key 'test.flag'"}},
    {"cut in a scalar value", CUT, "val:test.countB", 2, 0, {"truncated", "value of key 'test.countB'"}},
    {"cut in a string value", CUT, "val:general.name", 10, 0, {"truncated", "value of key 'general.name'"}},
    {"cut in a string array", CUT, "val:tokenizer.ggml.tokens", 20, 0, {"truncated", "tokenizer.ggml.tokens"}},
    {"cut in a nested array", CUT, "val:test.nested", 30, 0, {"truncated", "value of key 'test.nested'"}},
    {"cut at the tensor table", CUT, "name:a.weight", 0, 0, {"tensor count 3 cannot fit", "bytes left"}},
    {"cut in a tensor name", CUT, "name:c.weight", 10, 0, {"truncated", "name of tensor 2"}},
    {"cut in ndim", CUT, "ndim:c.weight", 1, 0, {"truncated", "dimensions of tensor 'c.weight'"}},
    {"cut in the dims", CUT, "ne:c.weight", 4, 0, {"truncated", "dimensions of tensor 'c.weight'"}},
    {"cut in the dtype", CUT, "dtype:c.weight", 2, 0, {"truncated", "type of tensor 'c.weight'"}},
    {"cut in the offset", CUT, "off:c.weight", 7, 0, {"truncated", "offset of tensor 'c.weight'"}},
    /* b's data moved onto a's: one set of bytes read as two dtypes and shapes */
    {"two tensors on the same bytes", PUT64, "off:b.weight", 0, 0, {"share data bytes", "'a.weight' and 'b.weight'"}},
    {"cut after the tables", CUT, "tables_end", 0, 0, {"tensor 'a.weight': data", "outside the file"}},
    {"cut in the data", CUT, "data:b.weight", 40, 0, {"tensor 'b.weight': data", "past the file's end: truncated?"}},
    {"cut in the last tensor", CUT, "data:c.weight", 15, 0, {"tensor 'c.weight'", "outside the file"}},
    /* header */
    {"bad magic", PUT8, "magic", 0, 'X', {"bad magic", "not a GGUF file"}},
    {"version 1", PUT32, "version", 0, 1, {"version 1 is not supported", "32-bit counts"}},
    {"version 4", PUT32, "version", 0, 4, {"unsupported version 4", "only 2 and 3"}},
    {"big-endian", PUT32, "version", 0, 0x03000000u, {"big-endian", "not supported"}},
    {"huge tensor count", PUT64, "n_tensors", 0, 1ull << 40, {"tensor count 1099511627776", "exceeds the limit"}},
    {"huge metadata count", PUT64, "n_kv", 0, 1ull << 21, {"metadata count 2097152", "exceeds the limit"}},
    {"lying metadata count", PUT64, "n_kv", 0, 100000, {"metadata count 100000 cannot fit", "lying count"}},
    {"lying tensor count", PUT64, "n_tensors", 0, 100000, {"tensor count 100000 cannot fit", "lying count"}},
    {"too few metadata", PUT64, "n_kv", 0, 6, {"tensor 'test.nested'", "ndim 9"}},
    /* metadata */
    {"key length past the end", PUT64, "key:test.countA", 0, 1u << 23, {"truncated", "key of metadata entry 2"}},
    {"key length over the limit", PUT64, "key:test.countA", 0, 1ull << 40,
      {"string length 1099511627776", "exceeds the limit"}},
    {"empty key", PUT64, "key:test.countA", 0, 0, {"metadata entry 2", "empty key"}},
    {"duplicate key", PUT8, "key:test.countB", 8 + 10, 'A', {"duplicate key 'test.countA'", "offset"}},
    {"unknown value type", PUT32, "type:test.countA", 0, 13, {"key 'test.countA'", "unknown value type 13"}},
    {"bool not 0 or 1", PUT8, "val:test.flag", 0, 2, {"bool", "value of key 'test.flag'"}},
    {"string length lie", PUT64, "val:general.architecture", 0, 1u << 20,
      {"truncated", "value of key 'general.architecture'"}},
    {"array count lie", PUT64, "val:tokenizer.ggml.tokens", 4, 1ull << 40,
      {"array of 1099511627776 string", "lying length"}},
    {"array string length lie", PUT64, "val:tokenizer.ggml.tokens", 12, 1ull << 30,
      {"string length 1073741824", "tokenizer.ggml.tokens"}},
    {"unknown array element type", PUT32, "val:tokenizer.ggml.tokens", 0, 77,
      {"unknown array element type 77", "tokenizer.ggml.tokens"}},
    {"inner array count lie", PUT64, "val:test.nested", 16, 1000, {"array of 1000 int32", "test.nested"}},
    {"nested array depth bomb", DEEP, "magic", 0, 0, {"nested deeper than 8", "test.deep"}},
    {"alignment not a power of two", PUT32, "val:general.alignment", 0, 24, {"general.alignment 24", "power of two"}},
    {"alignment zero", PUT32, "val:general.alignment", 0, 0, {"general.alignment 0", "power of two"}},
    {"alignment not an integer", PUT32, "type:general.alignment", 0, VT_GGUF_FLOAT32,
      {"general.alignment", "expected an integer"}},
    /* tensor table */
    {"empty tensor name", PUT64, "name:b.weight", 0, 0, {"tensor 1", "name of 0 bytes"}},
    {"tensor name too long", PUT64, "name:b.weight", 0, 200, {"tensor 1", "name of 200 bytes"}},
    {"NUL in a tensor name", PUT8, "name:b.weight", 9, 0, {"tensor 1", "NUL byte"}},
    {"ndim 0", PUT32, "ndim:a.weight", 0, 0, {"tensor 'a.weight'", "ndim 0"}},
    {"ndim 5", PUT32, "ndim:a.weight", 0, 5, {"tensor 'a.weight'", "ndim 5"}},
    {"dimension 0", PUT64, "ne:a.weight", 8, 0, {"tensor 'a.weight'", "dimension 1 of size 0"}},
    {"dims product overflows", PUT64, "ne:a.weight", 8, 1ull << 60, {"tensor 'a.weight'", "element count overflows"}},
    {"dimension over int64", PUT64, "ne:c.weight", 0, UINT64_MAX, {"tensor 'c.weight'", "overflows"}},
    {"bytes overflow size_t", PUT64, "ne:a.weight", 8, 1ull << 59, {"tensor 'a.weight'", "byte size that overflows"}},
    /* 2^62 + 1 elements of 4 bytes: the row's bytes wrap to 4, which would fit the file */
    {"row bytes wrap to a small size", PUT64, "ne:c.weight", 0, (1ull << 62) + 1,
      {"tensor 'c.weight'", "byte size that overflows"}},
    {"unknown dtype", PUT32, "dtype:a.weight", 0, 99, {"tensor 'a.weight'", "unknown or unsupported type 99"}},
    {"unsupported ggml dtype", PUT32, "dtype:a.weight", 0, 3, {"tensor 'a.weight'", "type 3"}},
    {"row not whole blocks", PUT64, "ne:b.weight", 0, 48,
      {"tensor 'b.weight'", "not a multiple of its block length 32"}},
    {"misaligned offset", PUT64, "off:b.weight", 0, 68, {"tensor 'b.weight'", "not a multiple of the alignment 32"}},
    {"data outside the file", PUT64, "off:c.weight", 0, 1u << 20, {"tensor 'c.weight': data", "outside the file"}},
    {"offset near 2^64", PUT64, "off:c.weight", 0, UINT64_MAX - 31, {"tensor 'c.weight': data", "outside the file"}},
    {"tensor too big for the file", PUT64, "ne:a.weight", 8, 1000, {"tensor 'a.weight': data", "outside the file"}},
    {"duplicate tensor name", PUT8, "name:b.weight", 8, 'a', {"duplicate tensor name 'a.weight'", "tensor 1"}},
};

static void test_corrupted_files(void) {
    size_t n_cases = sizeof corrupt_cases / sizeof corrupt_cases[0];
    CU_ASSERT(n_cases >= 40);
    for (size_t i = 0; i < n_cases; i++) {
        const corrupt_case *c = &corrupt_cases[i];
        uint8_t *buf = malloc(base_size);
        CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
        memcpy(buf, base_file, base_size);
        size_t size = base_size;
        size_t at = locate(c->where) + (size_t)c->delta;
        switch (c->op) {
        case CUT: size = at; break;
        case PUT8: buf[at] = (uint8_t)c->value; break;
        case PUT32: gmw_put_le(buf + at, c->value, 4); break;
        case PUT64: gmw_put_le(buf + at, c->value, 8); break;
        case DEEP:
            free(buf);
            buf = malloc(deep_size);
            CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
            memcpy(buf, deep_file, deep_size);
            size = deep_size;
            break;
        }
        /* the buffer is exactly `size` bytes (ASan catches any read past it) */
        uint8_t *exact = malloc(size ? size : 1);
        memcpy(exact, buf, size);
        free(buf);
        vt_gguf *g = NULL;
        vt_error err = {0};
        vt_status st = vt_gguf_open_memory(exact, size, &g, &err);
        bool ok = st == VT_ERR_FORMAT && g == NULL && strstr(err.msg, c->words[0]) && strstr(err.msg, c->words[1]);
        if (!ok)
            fprintf(stderr, "\ncase '%s': status %d, message \"%s\" (expected \"%s\" and \"%s\")\n", c->what, (int)st,
                    err.msg, c->words[0], c->words[1]);
        CU_ASSERT(ok);
        if (getenv("VT_GGUF_SHOW_ERRORS")) printf("\n  %-30s %s", c->what, err.msg); /* to read them all */
        vt_gguf_close(g);
        free(exact);
    }
}

/* The base file itself opens, so every failure above is due to its mutation. */
static void test_base_file_is_valid(void) {
    vt_gguf *g = NULL;
    vt_error err = {0};
    CU_ASSERT_EQUAL_FATAL(vt_gguf_open_memory(base_file, base_size, &g, &err), VT_OK);
    CU_ASSERT_EQUAL(vt_gguf_n_tensors(g), 3);
    CU_ASSERT_EQUAL(vt_gguf_n_kv(g), 8);
    vt_gguf_close(g);
    /* and arrays nested up to the limit are fine: the deep file at 12 levels fails (above) */
}

/* Every truncation of the base file fails cleanly (or, for cuts inside the
 * final padding, opens), and never reads out of bounds. */
static void test_every_truncation(void) {
    size_t opened = 0;
    size_t last_data_end = locate("data:c.weight") + 16;
    for (size_t size = 0; size < base_size; size++) {
        uint8_t *exact = malloc(size ? size : 1);
        memcpy(exact, base_file, size);
        vt_gguf *g = NULL;
        vt_error err = {0};
        vt_status st = vt_gguf_open_memory(exact, size, &g, &err);
        if (size >= last_data_end) {
            CU_ASSERT_EQUAL(st, VT_OK); /* only padding was cut */
            opened++;
        } else {
            CU_ASSERT_EQUAL(st, VT_ERR_FORMAT);
            CU_ASSERT(strstr(err.msg, "truncated") || strstr(err.msg, "cannot fit") ||
                      strstr(err.msg, "outside the file") || strstr(err.msg, "name of 0 bytes"));
        }
        vt_gguf_close(g);
        free(exact);
    }
    CU_ASSERT_EQUAL(opened, base_size - last_data_end);
}

int main(void) {
    static CU_TestInfo roundtrip[] = {
        {"every metadata type and dtype round-trips", test_roundtrip_all_types},
        {"chunk sizes give identical files", test_chunking_does_not_matter},
        {"open_memory and version 2", test_open_memory_and_v2},
        {"typed gets check types and ranges", test_typed_get_errors},
        {"writer refusals", test_writer_refusals},
        {"file without tensors", test_no_tensors},
        {"open i/o errors", test_open_io_errors},
        CU_TEST_INFO_NULL,
    };
    /* Registered only on request: it writes 4.1 GiB to TMPDIR, more disk and
     * time than the default suite may take. Unregistered, it is neither run
     * nor counted. */
    static CU_TestInfo large[] = {
        {"offsets past 4 GiB", test_file_over_4gib},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo fixtures[] = {
        {"fixture models open with expected keys and tensors", test_fixture_models},
        {"every fixture .gguf opens", test_every_fixture_file_opens},
        CU_TEST_INFO_NULL,
    };
    static CU_TestInfo corrupt[] = {
        {"base file is valid", test_base_file_is_valid},
        {"table of corrupted files", test_corrupted_files},
        {"every truncation", test_every_truncation},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("gguf round trip", NULL, NULL, roundtrip);
    vt_test_add_suite("gguf fixture models", NULL, NULL, fixtures);
    const char *want_large = getenv("VT_TEST_LARGE");
    if (want_large && strcmp(want_large, "1") == 0) vt_test_add_suite("gguf past 4 GiB", NULL, NULL, large);
    vt_test_add_suite("gguf corrupted files", corrupt_suite_init, corrupt_suite_cleanup, corrupt);
    return vt_test_run();
}
