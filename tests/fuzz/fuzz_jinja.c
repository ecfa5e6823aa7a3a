/* fuzz_jinja.c — libFuzzer target for the Jinja interpreter
 * (core/server/jinja/): the input is a template's text, parsed and rendered
 * with a fixed chat context (messages of every role, a tool call, tools,
 * add_generation_prompt, bos/eos tokens, a dict, a list, numbers). Seeds:
 * the real chat templates of tests/data/chat_templates and a few
 * statements.
 *
 * What must hold, besides "no crash, no leak, no UB, no hang": a parse or
 * render error says where ("line N"); a render's output is as long as it
 * says and within VT_JINJA_MAX_OUTPUT. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "fuzz_jinja: %s failed at line %d\n", #c, __LINE__);                                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static jv message(const char *role, const char *content) {
    jv m = jv_dict_new();
    jv_dict_set_cstr(m, "role", jv_cstring(role));
    jv_dict_set_cstr(m, "content", jv_cstring(content));
    return m;
}

static jv context(void) {
    jv ctx = jv_dict_new(), msgs = jv_list_new(), tools = jv_list_new(), tool = jv_dict_new(), fn = jv_dict_new();
    jv_list_append(msgs, message("system", "You are terse."));
    jv_list_append(msgs, message("user", "Weather in <Paris>?"));
    jv call = jv_dict_new(), cf = jv_dict_new(), args = jv_dict_new(), calls = jv_list_new();
    jv_dict_set_cstr(args, "city", jv_cstring("Paris"));
    jv_dict_set_cstr(cf, "name", jv_cstring("get_weather"));
    jv_dict_set_cstr(cf, "arguments", args);
    jv_dict_set_cstr(call, "type", jv_cstring("function"));
    jv_dict_set_cstr(call, "function", cf);
    jv_list_append(calls, call);
    jv a = message("assistant", "");
    jv_dict_set_cstr(a, "tool_calls", calls);
    jv_list_append(msgs, a);
    jv t = message("tool", "{\"temp\": 21.5}");
    jv_dict_set_cstr(t, "tool_call_id", jv_cstring("call_1"));
    jv_list_append(msgs, t);
    jv_list_append(msgs, message("assistant", "<think>\nhm\n</think>\n\n21.5 \xc2\xb0" "C"));
    jv_list_append(msgs, message("user", "Thanks"));
    jv_dict_set_cstr(fn, "name", jv_cstring("get_weather"));
    jv_dict_set_cstr(fn, "description", jv_cstring("Weather"));
    jv_dict_set_cstr(fn, "parameters", jv_dict_new());
    jv_dict_set_cstr(tool, "type", jv_cstring("function"));
    jv_dict_set_cstr(tool, "function", fn);
    jv_list_append(tools, tool);
    jv_dict_set_cstr(ctx, "messages", msgs);
    jv_dict_set_cstr(ctx, "tools", tools);
    jv_dict_set_cstr(ctx, "add_generation_prompt", jv_bool(true));
    jv_dict_set_cstr(ctx, "bos_token", jv_cstring("<s>"));
    jv_dict_set_cstr(ctx, "eos_token", jv_cstring("</s>"));
    jv xs = jv_list_new();
    jv_list_append(xs, jv_int(3));
    jv_list_append(xs, jv_float(-0.5));
    jv_list_append(xs, jv_none());
    jv_dict_set_cstr(ctx, "xs", xs);
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "";
    vt_jinja_template *t = vt_jinja_parse((const char *)data, size, err, sizeof err);
    if (!t) {
        CHECK(strncmp(err, "line ", 5) == 0);
        return 0;
    }
    jv ctx = context();
    char *out = NULL;
    size_t len = 0;
    if (vt_jinja_render(t, ctx, &out, &len, err, sizeof err)) {
        CHECK(out && strlen(out) <= len && len <= VT_JINJA_MAX_OUTPUT);
        free(out);
    } else {
        CHECK(!out && (strncmp(err, "line ", 5) == 0 || strcmp(err, "out of memory") == 0));
    } /* the render released ctx */
    vt_jinja_free(t);
    return 0;
}
