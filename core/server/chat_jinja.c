/* chat_jinja.c — json_t -> template values, and the variables a chat
 * template is rendered with (see chat_jinja.h). */
#include "chat_jinja.h"

#include <stdio.h>
#include <string.h>

jv vt_jinja_from_json(const json_t *j) {
    switch (json_typeof(j)) {
    case JSON_NULL: return jv_none();
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_STRING: return jv_string(json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        jv l = jv_list_new();
        if (jv_is_oom(l)) return l;
        for (size_t i = 0; i < json_array_size(j); i++) {
            jv x = vt_jinja_from_json(json_array_get(j, i));
            if (jv_is_oom(x) || !jv_list_append(l, x)) {
                jv_decref(l);
                return jv_undefined("out of memory");
            }
        }
        return l;
    }
    case JSON_OBJECT: {
        jv d = jv_dict_new();
        if (jv_is_oom(d)) return d;
        const char *key;
        json_t *value;
        /* jansson keeps insertion order (2.8+), as Python's dicts do. */
        json_object_foreach((json_t *)j, key, value) {
            jv k = jv_cstring(key);
            jv x = vt_jinja_from_json(value);
            if (jv_is_oom(k) || jv_is_oom(x)) {
                jv_decref(k);
                jv_decref(x);
                jv_decref(d);
                return jv_undefined("out of memory");
            }
            if (!jv_dict_set(d, k, x)) {
                jv_decref(d);
                return jv_undefined("out of memory");
            }
        }
        return d;
    }
    }
    return jv_none();
}

static bool set_json(jv ctx, const char *name, const json_t *j) {
    jv v = vt_jinja_from_json(j);
    return !jv_is_oom(v) && jv_dict_set_cstr(ctx, name, v);
}

bool vt_chat_jinja_render(const vt_jinja_template *t, const vt_chat_jinja_input *in, char **out, size_t *len,
                          char *err, size_t err_size) {
    *out = NULL;
    jv ctx = jv_dict_new();
    bool ok = !jv_is_oom(ctx);
    /* The request's own keys first: the standard variables below win, as in
     * transformers (its kwargs cannot replace messages). */
    if (ok && in->kwargs) {
        const char *key;
        json_t *value;
        json_object_foreach((json_t *)in->kwargs, key, value) {
            if (!(ok = set_json(ctx, key, value))) break;
        }
    }
    ok = ok && set_json(ctx, "messages", in->messages);
    if (ok && in->tools) ok = set_json(ctx, "tools", in->tools);
    ok = ok && jv_dict_set_cstr(ctx, "add_generation_prompt", jv_bool(in->add_generation_prompt));
    ok = ok && jv_dict_set_cstr(ctx, "bos_token", jv_cstring(in->bos_token ? in->bos_token : ""));
    ok = ok && jv_dict_set_cstr(ctx, "eos_token", jv_cstring(in->eos_token ? in->eos_token : ""));
    if (!ok) {
        if (!jv_is_oom(ctx)) jv_decref(ctx);
        snprintf(err, err_size, "out of memory");
        return false;
    }
    size_t n = 0;
    ok = vt_jinja_render(t, ctx, out, &n, err, err_size); /* releases ctx */
    if (len) *len = n;
    return ok;
}
