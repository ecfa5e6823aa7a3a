/* tokenizer_golden.c — see tokenizer_golden.h. */
#include "tokenizer_golden.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_mini.h"
#include "util.h"

bool golden_vocab_open(const char *data_dir, const char *rel, golden_vocab *v) {
    char path[4096];
    if (strncmp(rel, "shared/", 7) == 0) rel += 7;
    snprintf(path, sizeof path, "%s/%s", data_dir, rel);
    vt_error err = {0};
    v->g = NULL;
    v->t = NULL;
    if (vt_gguf_open(path, &v->g, &err) != VT_OK) {
        printf("\n  cannot open %s: %s\n", path, err.msg);
        return false;
    }
    if (vt_tokenizer_load(v->g, &v->t, &err) != VT_OK) {
        printf("\n  cannot load the tokenizer of %s: %s\n", path, err.msg);
        vt_gguf_close(v->g);
        v->g = NULL;
        return false;
    }
    return true;
}

void golden_vocab_close(golden_vocab *v) {
    vt_tokenizer_free(v->t);
    vt_gguf_close(v->g);
    v->t = NULL;
    v->g = NULL;
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    printf("    %s [", label);
    for (size_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
    printf("]\n");
}

static bool check_detok(const vt_tokenizer *t, const int32_t *ids, size_t n, bool special, const char *want,
                        size_t want_len, const char *name) {
    char *text = NULL;
    size_t len = 0;
    vt_error err = {0};
    if (vt_detokenize(t, ids, n, special, &text, &len, &err) != VT_OK) {
        printf("\n  %s: detokenize failed: %s\n", name, err.msg);
        return false;
    }
    bool ok = len == want_len && memcmp(text, want, len) == 0;
    if (!ok)
        printf("\n  %s: detok%s mismatch: got '%.*s' (%zu bytes), want '%.*s' (%zu bytes)\n", name,
               special ? "_special" : "", (int)len, text, len, (int)want_len, want, want_len);
    free(text);
    return ok;
}

static bool run_record(const vt_tokenizer *t, const json_value *rec, golden_counts *c) {
    const json_value *name = json_get(rec, "name"), *hex = json_get(rec, "text_hex"),
                     *with_special = json_get(rec, "with_special"), *ids = json_get(rec, "ids"),
                     *detok = json_get(rec, "detok"), *detok_special_hex = json_get(rec, "detok_special_hex");
    if (!name || !hex || !with_special || !ids || !detok || !detok_special_hex || ids->type != JSON_ARRAY ||
        hex->type != JSON_STRING || detok->type != JSON_STRING || detok_special_hex->type != JSON_STRING) {
        printf("\n  record without the expected fields\n");
        return false;
    }
    char label[160];
    snprintf(label, sizeof label, "%s (with_special=%s)", name->str, with_special->boolean ? "true" : "false");
    size_t text_len = 0;
    char *text = json_hex_decode(hex->str, hex->len, &text_len);
    if (!text) {
        printf("\n  %s: bad text_hex\n", label);
        return false;
    }
    int32_t *want = malloc((ids->n ? ids->n : 1) * sizeof *want);
    for (size_t i = 0; i < ids->n; i++) want[i] = (int32_t)ids->items[i].number;

    int32_t *got = NULL;
    size_t n_got = 0;
    vt_error err = {0};
    c->records++;
    if (vt_tokenize(t, text, text_len, false, with_special->boolean, &got, &n_got, &err) != VT_OK) {
        printf("\n  %s: tokenize failed: %s\n", label, err.msg);
        c->id_mismatches++;
    } else if (n_got != ids->n || memcmp(got, want, n_got * sizeof *got) != 0) {
        printf("\n  %s: ids mismatch for '%.*s'\n", label, (int)text_len, text);
        print_ids("got ", got, n_got);
        print_ids("want", want, ids->n);
        c->id_mismatches++;
    }
    size_t special_len = 0;
    char *special_text = json_hex_decode(detok_special_hex->str, detok_special_hex->len, &special_len);
    if (!check_detok(t, want, ids->n, false, detok->str, detok->len, label) ||
        !special_text || !check_detok(t, want, ids->n, true, special_text, special_len, label))
        c->detok_mismatches++;
    free(special_text);
    free(got);
    free(want);
    free(text);
    return true;
}

bool golden_run_jsonl(const vt_tokenizer *t, const char *path, golden_counts *c) {
    size_t size = 0;
    char *data = vt_test_read_file(path, &size);
    if (!data) {
        printf("\n  cannot read %s\n", path);
        return false;
    }
    bool ok = true;
    for (char *line = data; ok && line < data + size;) {
        char *end = memchr(line, '\n', (size_t)(data + size - line));
        size_t len = end ? (size_t)(end - line) : (size_t)(data + size - line);
        if (len > 0) {
            json_value rec;
            char msg[200];
            if (!json_parse(line, len, &rec, msg, sizeof msg)) {
                printf("\n  %s: %s\n", path, msg);
                ok = false;
            } else {
                ok = run_record(t, &rec, c);
                json_free(&rec);
            }
        }
        line += len + 1;
    }
    free(data);
    return ok;
}

int golden_round_trips(const vt_tokenizer *t, const char *const *pieces, size_t n_pieces, int trials, uint64_t seed,
                       bool vary_special) {
    uint64_t x = seed;
    int failures = 0;
    for (int trial = 0; trial < trials; trial++) {
        char text[512];
        size_t len = 0;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int n = 1 + (int)(x % 30);
        bool special = vary_special && ((x >> 40) & 1);
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const char *p = pieces[x % n_pieces];
            memcpy(text + len, p, strlen(p));
            len += strlen(p);
        }
        int32_t *ids = NULL;
        size_t n_ids = 0;
        char *back = NULL;
        size_t back_len = 0;
        vt_error err = {0};
        if (vt_tokenize(t, text, len, false, special, &ids, &n_ids, &err) != VT_OK ||
            vt_detokenize(t, ids, n_ids, special, &back, &back_len, &err) != VT_OK) {
            if (failures++ < 3) printf("\n  '%.*s': %s\n", (int)len, text, err.msg);
        } else if (back_len != len || memcmp(back, text, len) != 0) {
            if (failures++ < 3) printf("\n  round trip of '%.*s' gave '%s'\n", (int)len, text, back);
        }
        free(ids);
        free(back);
    }
    return failures;
}
