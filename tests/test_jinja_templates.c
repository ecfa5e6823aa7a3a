/* test_jinja_templates.c — vt's Jinja interpreter renders real chat
 * templates (the .jinja files of tests/data/chat_templates, the model authors' own)
 * exactly as Python's jinja2 does with transformers' settings, on every chat
 * of tests/data/chat_templates/contexts.json (system, multi-turn, no
 * generation prompt, tools, tool calls with their results, thinking off):
 * the same text byte for byte, or an error where jinja2 raises one.
 *
 * The expected texts come from jinja2 live (tests/jinja_reference.py), so
 * this runner needs python3 with python3-jinja2 (bash .ci/install-deps
 * installs it); without it the runner fails and says so. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_jinja.h"
#include "jinja.h"
#include "util.h"

#define TEMPLATE_DIR VT_TEST_DATA_DIR "/chat_templates"

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static size_t list_templates(char ***out) {
    DIR *d = opendir(TEMPLATE_DIR);
    size_t n = 0;
    char **names = NULL;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".jinja") != 0) continue;
        names = realloc(names, (n + 1) * sizeof *names);
        names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    *out = names;
    return n;
}

static char *read_file(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void report_difference(const char *tmpl, const char *ctx, const char *got, const char *want) {
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    size_t from = i > 60 ? i - 60 : 0;
    printf("\n  %s / %s differs at byte %zu:\n    vt:     \"%.120s\"\n    jinja2: \"%.120s\"\n", tmpl, ctx, i,
           got + from, want + from);
}

static void test_real_templates_render_as_jinja2_does(void) {
    /* The reference must run: a missing jinja2 is a failure, not a skip. */
    int have = system("python3 -c 'import jinja2' >/dev/null 2>&1");
    if (have != 0) {
        printf("\n  test_jinja_templates needs python3 and python3-jinja2 (bash .ci/install-deps)\n");
        CU_FAIL_FATAL("python3-jinja2 is not installed");
    }
    json_error_t jerr;
    json_t *contexts = json_load_file(TEMPLATE_DIR "/contexts.json", 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(contexts);
    char **names;
    size_t n_templates = list_templates(&names);
    CU_ASSERT_TRUE_FATAL(n_templates >= 20);

    json_t *cases = json_array();
    for (size_t t = 0; t < n_templates; t++)
        for (size_t c = 0; c < json_array_size(contexts); c++) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s", TEMPLATE_DIR, names[t]);
            json_array_append_new(cases, json_pack("{s:s, s:O}", "template", path, "context",
                                                   json_object_get(json_array_get(contexts, c), "context")));
        }
    char dir[] = "/tmp/vt_jinja_ref_XXXXXX";
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    char cases_path[256], results_path[256], cmd[1024];
    snprintf(cases_path, sizeof cases_path, "%s/cases.json", dir);
    snprintf(results_path, sizeof results_path, "%s/results.json", dir);
    CU_ASSERT_EQUAL_FATAL(json_dump_file(cases, cases_path, JSON_ENSURE_ASCII), 0);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/jinja_reference.py %s %s", VT_SOURCE_DIR, cases_path, results_path);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    json_t *results = json_load_file(results_path, 0, &jerr);
    unlink(cases_path);
    unlink(results_path);
    rmdir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(results);
    CU_ASSERT_EQUAL_FATAL(json_array_size(results), json_array_size(cases));

    size_t k = 0, same_text = 0, both_fail = 0, mismatches = 0, templates_rendered = 0;
    for (size_t t = 0; t < n_templates; t++) {
        char path[512], err[512];
        snprintf(path, sizeof path, "%s/%s", TEMPLATE_DIR, names[t]);
        size_t len = 0;
        char *src = read_file(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(src);
        vt_jinja_template *tmpl = vt_jinja_parse(src, len, err, sizeof err);
        free(src);
        if (!tmpl) printf("\n  %s: vt cannot parse it: %s\n", names[t], err);
        CU_ASSERT_PTR_NOT_NULL(tmpl);
        size_t rendered_here = 0;
        for (size_t c = 0; c < json_array_size(contexts); c++, k++) {
            const char *ctx_name = json_string_value(json_object_get(json_array_get(contexts, c), "name"));
            json_t *want = json_array_get(results, k);
            bool want_ok = json_is_true(json_object_get(want, "ok"));
            char *got = NULL;
            size_t got_len = 0;
            bool ok = false;
            if (tmpl) {
                jv ctx = vt_jinja_from_json(json_object_get(json_array_get(contexts, c), "context"));
                ok = vt_jinja_render(tmpl, ctx, &got, &got_len, err, sizeof err); /* releases ctx */
            }
            if (ok && want_ok) {
                const char *text = json_string_value(json_object_get(want, "text"));
                if (got_len == strlen(text) && memcmp(got, text, got_len) == 0) {
                    same_text++;
                    rendered_here++;
                } else {
                    mismatches++;
                    report_difference(names[t], ctx_name, got, text);
                }
            } else if (!ok && !want_ok) {
                both_fail++;
            } else {
                mismatches++;
                printf("\n  %s / %s: vt %s, jinja2 %s\n", names[t], ctx_name, ok ? "rendered" : err,
                       want_ok ? "rendered" : json_string_value(json_object_get(want, "error")));
            }
            free(got);
        }
        templates_rendered += rendered_here > 0;
        vt_jinja_free(tmpl);
    }
    printf("\n  %zu templates x %zu chats: %zu rendered identically, %zu refused by both, %zu differ\n", n_templates,
           json_array_size(contexts), same_text, both_fail, mismatches);
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT_TRUE(templates_rendered >= 20);
    for (size_t t = 0; t < n_templates; t++) free(names[t]);
    free(names);
    json_decref(cases);
    json_decref(results);
    json_decref(contexts);
}

int main(void) {
    static CU_TestInfo tests[] = {
        {"real templates render as jinja2 does", test_real_templates_render_as_jinja2_does},
        CU_TEST_INFO_NULL,
    };
    vt_test_add_suite("jinja templates", NULL, NULL, tests);
    return vt_test_run();
}
