/* serve_chat_input.c — a chat request's fields as a Jinja chat template
 * sees them (vt_serve_request.chat_input), in the shape transformers, vLLM
 * and llama-server hand to the template: messages with their role (developer
 * read as system), content as a string (text parts joined, null as ""), name,
 * tool_call_id, reasoning_content, and tool_calls whose function.arguments
 * (a JSON string from OpenAI clients) are parsed into an object (a string
 * that is not JSON stays the string); tools as
 * given; chat_template_kwargs' keys as extra variables. */
#include <jansson.h>
#include <stdio.h>
#include <ctype.h>
#include <string.h>

#include "jinja.h"
#include "serve_request.h"

#define INVALID "invalid_request_error"

static bool oom(vt_serve_error *err) { return vt_serve_fail(err, 500, "server_error", NULL, "out of memory"); }

/* Whether v holds arrays or objects nested more than limit deep. */
static bool nested_deeper(const json_t *v, int limit) {
    if (!json_is_array(v) && !json_is_object(v)) return false;
    if (limit <= 0) return true;
    size_t i;
    const char *key;
    json_t *item;
    if (json_is_array(v)) {
        json_array_foreach((json_t *)v, i, item) if (nested_deeper(item, limit - 1)) return true;
    } else {
        json_object_foreach((json_t *)v, key, item) if (nested_deeper(item, limit - 1)) return true;
    }
    return false;
}

/* A value the template gets is refused with a 400 naming its field when a
 * render could not write it (tojson stops at VT_JINJA_MAX_DEPTH levels):
 * the request's doing, not a server error. */
static bool fits_a_template(const json_t *v, const char *param, vt_serve_error *err) {
    if (!nested_deeper(v, VT_JINJA_MAX_DEPTH)) return true;
    return vt_serve_fail(err, 400, INVALID, param, "%s: nested deeper than %d levels, more than a chat template writes",
                         param, VT_JINJA_MAX_DEPTH);
}

static bool tool_calls(const json_t *calls, size_t i, json_t *out_msg, vt_serve_error *err) {
    char param[128];
    snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
    if (!json_is_array(calls)) return vt_serve_fail(err, 400, INVALID, param, "%s: expected an array", param);
    json_t *out = json_array();
    if (!out || json_object_set_new(out_msg, "tool_calls", out)) return oom(err);
    for (size_t j = 0; j < json_array_size(calls); j++) {
        json_t *c = json_array_get(calls, j);
        json_t *type = json_is_object(c) ? json_object_get(c, "type") : NULL;
        snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu].type", i, j);
        if (type && !(json_is_string(type) && strcmp(json_string_value(type), "function") == 0))
            return vt_serve_fail(err, 400, INVALID, param, "%s: only \"function\" calls are supported", param);
        json_t *fn = json_is_object(c) ? json_object_get(c, "function") : NULL;
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu].function.name", i, j);
        if (!json_is_string(name)) return vt_serve_fail(err, 400, INVALID, param, "%s: required, a string", param);
        json_t *args = json_object_get(fn, "arguments"), *parsed;
        snprintf(param, sizeof param, "messages[%zu].tool_calls[%zu].function.arguments", i, j);
        if (!args) parsed = json_object();
        else if (json_is_object(args)) parsed = json_deep_copy(args);
        else if (json_is_string(args)) {
            /* Arguments a model wrote that are not JSON (cut short, or
             * malformed) come back as it wrote them, as OpenAI takes them:
             * the template gets the string, which templates write as is. */
            json_error_t jerr;
            parsed = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, &jerr);
            if (!parsed) parsed = json_deep_copy(args);
            if (!parsed) return oom(err);
        } else return vt_serve_fail(err, 400, INVALID, param, "%s: expected a JSON string or an object", param);
        if (!fits_a_template(parsed, param, err)) {
            json_decref(parsed);
            return false;
        }
        json_t *id = json_object_get(c, "id");
        json_t *call = json_pack("{s:s, s:{s:O, s:o}}", "type", "function", "function", "name", name, "arguments", parsed);
        if (!call) return oom(err);
        if (json_is_string(id)) json_object_set(call, "id", id);
        if (json_array_append_new(out, call)) return oom(err);
    }
    return true;
}

static bool one_message(const json_t *m, const vt_serve_message *parsed, size_t i, json_t *out, vt_serve_error *err) {
    json_t *msg = json_object();
    if (!msg || json_array_append_new(out, msg)) return oom(err);
    if (json_object_set_new(msg, "role", json_string(parsed->role))) return oom(err);
    /* Content is always a string: an assistant turn that only called tools
     * (content null or absent) has "", as templates that test
     * '</think>' in message.content (Qwen3's) need; text parts are joined. */
    (void)m;
    json_t *c = json_stringn(parsed->content, strlen(parsed->content));
    if (!c || json_object_set_new(msg, "content", c)) return oom(err);
    static const char *const strings[] = {"name", "tool_call_id", "reasoning_content"};
    char param[96];
    for (size_t k = 0; k < sizeof strings / sizeof *strings; k++) {
        json_t *v = json_object_get(m, strings[k]);
        if (!v || json_is_null(v)) continue;
        snprintf(param, sizeof param, "messages[%zu].%s", i, strings[k]);
        if (!json_is_string(v)) return vt_serve_fail(err, 400, INVALID, param, "%s: expected a string", param);
        if (json_object_set(msg, strings[k], v)) return oom(err);
    }
    if (strcmp(parsed->role, "tool") == 0 && !json_is_string(json_object_get(m, "tool_call_id"))) {
        snprintf(param, sizeof param, "messages[%zu].tool_call_id", i);
        return vt_serve_fail(err, 400, INVALID, param, "%s: required for a tool message", param);
    }
    json_t *calls = json_object_get(m, "tool_calls");
    if (calls && !json_is_null(calls)) {
        if (strcmp(parsed->role, "assistant") != 0) {
            snprintf(param, sizeof param, "messages[%zu].tool_calls", i);
            return vt_serve_fail(err, 400, INVALID, param, "%s: only an assistant message calls tools", param);
        }
        if (!tool_calls(calls, i, msg, err)) return false;
    }
    return true;
}

bool vt_serve_name_ok(const char *name) {
    size_t n = 0;
    for (; name[n]; n++)
        if (!isalnum((unsigned char)name[n]) || (unsigned char)name[n] >= 0x80) {
            if (name[n] != '_' && name[n] != '-') return false;
        }
    return n >= 1 && n <= 64;
}

static bool check_tools(const json_t *tools, vt_serve_error *err) {
    if (!json_is_array(tools)) return vt_serve_fail(err, 400, INVALID, "tools", "tools: expected an array");
    for (size_t j = 0; j < json_array_size(tools); j++) {
        json_t *t = json_array_get(tools, j);
        char param[64];
        snprintf(param, sizeof param, "tools[%zu]", j);
        if (!json_is_object(t)) return vt_serve_fail(err, 400, INVALID, param, "%s: expected an object", param);
        json_t *fn = json_object_get(t, "function");
        /* the type first: a tool of another type has no function to name */
        json_t *type = json_object_get(t, "type");
        snprintf(param, sizeof param, "tools[%zu].type", j);
        if (type && !(json_is_string(type) && strcmp(json_string_value(type), "function") == 0))
            return vt_serve_fail(err, 400, INVALID, param, "%s: only \"function\" tools are supported", param);
        snprintf(param, sizeof param, "tools[%zu].function.name", j);
        const json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(name)) return vt_serve_fail(err, 400, INVALID, param, "%s: required, a string", param);
        if (!vt_serve_name_ok(json_string_value(name)))
            return vt_serve_fail(err, 400, INVALID, param, "%s: 1 to 64 of a-z, A-Z, 0-9, _ and - (as OpenAI's)", param);
        /* a call names its tool: two tools of one name could not be told apart */
        for (size_t k = 0; k < j; k++)
            if (json_equal(json_object_get(json_object_get(json_array_get(tools, k), "function"), "name"), name))
                return vt_serve_fail(err, 400, INVALID, param, "%s: '%s' names tools[%zu] as well", param,
                                     json_string_value(name), k);
        const json_t *description = json_object_get(fn, "description");
        snprintf(param, sizeof param, "tools[%zu].function.description", j);
        if (description && !json_is_null(description) && !json_is_string(description))
            return vt_serve_fail(err, 400, INVALID, param, "%s: expected a string", param);
        /* the arguments a call writes are a JSON object: its schema is one,
         * of type "object" when it says a type ({} or none: any object) */
        const json_t *params = json_object_get(fn, "parameters");
        const json_t *ptype = json_is_object(params) ? json_object_get(params, "type") : NULL;
        snprintf(param, sizeof param, "tools[%zu].function.parameters", j);
        if (params && !json_is_null(params) &&
            (!json_is_object(params) || (ptype && !(json_is_string(ptype) && strcmp(json_string_value(ptype), "object") == 0))))
            return vt_serve_fail(err, 400, INVALID, param,
                                 "%s: a JSON Schema of type \"object\" (a call's arguments are an object)", param);
    }
    return true;
}

/* The tools as templates write them: a copy in which a function without
 * "description" or "parameters" has "" and the empty parameter list
 * (OpenAI's meaning of no parameters: an object with no properties, and no
 * others), since templates read both fields of every tool ("// " +
 * tool.description, tool.parameters.properties) and would fail without
 * them. NULL when out of memory. */
static json_t *tools_as_written(const json_t *tools) {
    json_t *copy = json_deep_copy(tools);
    size_t i;
    json_t *t;
    json_array_foreach(copy, i, t) {
        json_t *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) continue;
        const json_t *d = json_object_get(fn, "description"), *p = json_object_get(fn, "parameters");
        if ((!d || json_is_null(d)) && json_object_set_new(fn, "description", json_string(""))) goto fail;
        if ((!p || json_is_null(p)) &&
            json_object_set_new(fn, "parameters", json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
                                                            "additionalProperties", 0)))
            goto fail;
    }
    return copy;
fail:
    json_decref(copy);
    return NULL;
}

/* tool_choice and parallel_tool_calls, against the tools given (NULL:
 * none). Without tools only "none" and "auto" mean anything (plain text);
 * asking for a call of no tool is refused. */
static bool parse_tool_choice(const json_t *root, const json_t *tools, vt_serve_request *r, vt_serve_error *err) {
    const json_t *ptc = json_object_get(root, "parallel_tool_calls");
    r->parallel_tool_calls = !json_is_false(ptc); /* its type is checked with the other habit fields */
    const json_t *tc = json_object_get(root, "tool_choice");
    r->tool_choice = tools ? VT_TOOL_CHOICE_AUTO : VT_TOOL_CHOICE_NONE;
    if (!tc || json_is_null(tc)) return true;
    if (json_is_string(tc)) {
        const char *v = json_string_value(tc);
        if (strcmp(v, "none") == 0) {
            r->tool_choice = VT_TOOL_CHOICE_NONE;
            return true;
        }
        if (strcmp(v, "auto") == 0) return true;
        if (strcmp(v, "required") != 0)
            return vt_serve_fail(err, 400, INVALID, "tool_choice",
                                 "tool_choice: '%.40s' is not one of \"none\", \"auto\", \"required\" or "
                                 "{\"type\": \"function\", \"function\": {\"name\"}}",
                                 v);
        if (!tools) return vt_serve_fail(err, 400, INVALID, "tool_choice", "tool_choice: \"required\" needs tools");
        r->tool_choice = VT_TOOL_CHOICE_REQUIRED;
        return true;
    }
    const json_t *type = json_object_get(tc, "type");
    const json_t *name = json_object_get(json_object_get(tc, "function"), "name");
    if (!json_is_object(tc) || !json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
        return vt_serve_fail(err, 400, INVALID, "tool_choice",
                             "tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                             "\"function\": {\"name\"}}");
    if (!json_is_string(name))
        return vt_serve_fail(err, 400, INVALID, "tool_choice.function.name",
                             "tool_choice.function.name: required, a string");
    const char *want = json_string_value(name);
    bool found = false;
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *n = json_object_get(json_object_get(t, "function"), "name");
        found |= strcmp(json_string_value(n), want) == 0;
    }
    if (!found)
        return vt_serve_fail(err, 400, INVALID, "tool_choice.function.name",
                             "tool_choice.function.name: '%.60s' is not one of the tools", want);
    r->tool_choice_name = strdup(want);
    if (!r->tool_choice_name) return oom(err);
    r->tool_choice = VT_TOOL_CHOICE_NAMED;
    return true;
}

bool vt_serve_parse_chat_input(const json_t *root, vt_serve_request *r, vt_serve_error *err) {
    json_t *in = json_object(), *msgs = json_array();
    if (!in || !msgs || json_object_set_new(in, "messages", msgs)) {
        json_decref(in);
        return oom(err);
    }
    r->chat_input = in;
    json_t *src = json_object_get(root, "messages");
    for (size_t i = 0; i < r->n_messages; i++)
        if (!one_message(json_array_get(src, i), &r->messages[i], i, msgs, err)) return false;
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools)) {
        if (!check_tools(tools, err) || !fits_a_template(tools, "tools", err)) return false;
        /* An empty list is no tools (transformers passes tools=None then). */
        if (json_array_size(tools) > 0 && json_object_set_new(in, "tools", tools_as_written(tools)))
            return oom(err);
    }
    if (!parse_tool_choice(root, json_object_get(in, "tools"), r, err)) return false;
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw))
            return vt_serve_fail(err, 400, INVALID, "chat_template_kwargs", "chat_template_kwargs: expected an object");
        /* the variables the request's own fields set: a second way to set
         * them would be unchecked (tools) or ignored (the rest) */
        static const char *const own[] = {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"};
        for (size_t k = 0; k < sizeof own / sizeof *own; k++)
            if (json_object_get(kw, own[k])) {
                char param[64];
                snprintf(param, sizeof param, "chat_template_kwargs.%s", own[k]);
                return vt_serve_fail(err, 400, INVALID, param, "%s: set by the request itself%s", param,
                                     k < 3 ? " (its own field)" : " (the model's)");
            }
        const char *key;
        json_t *value;
        json_object_foreach(kw, key, value) {
            char param[96];
            snprintf(param, sizeof param, "chat_template_kwargs.%.60s", key);
            if (vt_jinja_is_builtin(key))
                return vt_serve_fail(err, 400, INVALID, param,
                                     "%s: the name of a function templates call (range, namespace, dict, "
                                     "raise_exception, strftime_now): a value would replace it", param);
            if (!fits_a_template(value, param, err)) return false;
        }
        if (json_object_set(in, "kwargs", kw)) return oom(err);
    }
    json_t *agp = json_object_get(root, "add_generation_prompt");
    if (agp && !json_is_boolean(agp))
        return vt_serve_fail(err, 400, INVALID, "add_generation_prompt", "add_generation_prompt: expected true or false");
    if (json_object_set_new(in, "add_generation_prompt", json_boolean(!agp || json_is_true(agp)))) return oom(err);
    return true;
}
