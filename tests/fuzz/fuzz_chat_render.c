/* fuzz_chat_render.c — libFuzzer target for a client's chat request as
 * vt serve renders it with a model's own template: the body parsed
 * (vt_serve_parse_request), its messages, tools and chat_template_kwargs
 * rendered by one of the real templates of tests/data/chat_templates
 * (vt_chat_jinja_render, the path cmd_serve.c's render_jinja takes), and,
 * for tool_choice "required" or a named tool, the forced-call grammar of
 * every tool-call format built and compiled.
 *
 * Input: byte 0 picks the template (its low 7 bits, modulo their count) and
 * asks for the forced-call grammar (bit 7); the rest is the JSON body.
 * fuzz_jinja fuzzes the templates' text with a fixed chat; this one fixes
 * the templates and fuzzes the chat, where a hostile client's strings, roles
 * and tool definitions meet the interpreter.
 *
 * What must hold, besides "no crash, no leak, no UB, no hang": a render's
 * output is as long as it says; a failed render names the template's line
 * (or memory); a refused forced-call grammar says why. */
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_jinja.h"
#include "serve_request.h"
#include "tool_calls.h"
#include "vt/vt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_chat_render: %s failed at line %d\n", #c, __LINE__);                                 \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

enum { MAX_TEMPLATES = 64 };
static vt_jinja_template *templates[MAX_TEMPLATES];
static int n_templates;

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every .jinja file of the test data's chat templates, parsed once, in name
 * order (so byte 0 means the same template on every machine). */
static void load_templates(void) {
    const char *dir = VT_TEST_DATA_DIR "/chat_templates";
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    char *names[MAX_TEMPLATES];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_TEMPLATES;) {
        const size_t len = strlen(e->d_name);
        if (len > 6 && strcmp(e->d_name + len - 6, ".jinja") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL);
        static char text[1 << 20];
        const size_t len = fread(text, 1, sizeof text, f);
        fclose(f);
        char err[256];
        templates[n_templates] = vt_jinja_parse(text, len, err, sizeof err);
        if (!templates[n_templates]) fprintf(stderr, "fuzz_chat_render: %s: %s\n", path, err);
        CHECK(templates[n_templates] != NULL);
        n_templates++;
        free(names[i]);
    }
    CHECK(n_templates > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!n_templates) load_templates();
    if (size < 1) return 0;
    const vt_serve_defaults defaults = {0.8f, 0.95f, 0.05f, 40};
    vt_serve_request r;
    vt_serve_error err;
    memset(&err, 0, sizeof err);
    if (!vt_serve_parse_request(VT_SERVE_CHAT, (const char *)data + 1, size - 1, &defaults, &r, &err)) return 0;
    const json_t *in = r.chat_input;
    const vt_chat_jinja_input chat = {.messages = json_object_get(in, "messages"),
                                      .tools = json_object_get(in, "tools"),
                                      .kwargs = json_object_get(in, "kwargs"),
                                      .add_generation_prompt = json_is_true(json_object_get(in, "add_generation_prompt")),
                                      .bos_token = "<s>",
                                      .eos_token = "</s>"};
    char *text = NULL, why[400] = "";
    size_t len = 0;
    if (vt_chat_jinja_render(templates[(data[0] & 0x7f) % n_templates], &chat, &text, &len, why, sizeof why)) {
        CHECK(text != NULL && strlen(text) <= len);
        free(text);
    } else {
        CHECK(strncmp(why, "line ", 5) == 0 || strcmp(why, "out of memory") == 0);
    }
    const bool forced = r.tool_choice == VT_TOOL_CHOICE_REQUIRED || r.tool_choice == VT_TOOL_CHOICE_NAMED;
    if ((data[0] & 0x80) && forced)
        for (int f = VT_TOOL_FORMAT_HERMES; f <= VT_TOOL_FORMAT_MISTRAL; f++) {
            char gwhy[400] = "";
            char *g = vt_tool_call_gbnf((vt_tool_format)f, json_object_get(in, "tools"), r.tool_choice_name,
                                        r.parallel_tool_calls && r.tool_choice == VT_TOOL_CHOICE_REQUIRED, gwhy,
                                        sizeof gwhy);
            CHECK(g != NULL || gwhy[0]);
            if (g) {
                char cwhy[512] = "";
                (void)vt_grammar_check(g, cwhy, sizeof cwhy);
            }
            free(g);
        }
    vt_serve_request_free(&r);
    return 0;
}
