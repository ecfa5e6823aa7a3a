/* serve_choice_options.c — see serve_choice_options.h. */
#include "serve_choice_options.h"

#define INVALID "invalid_request_error"

/* The member, or NULL when absent or null. */
static json_t *given(const json_t *obj, const char *name) {
    json_t *v = json_object_get(obj, name);
    return v && !json_is_null(v) ? v : NULL;
}

/* An integer field in [lo, hi] into *out when given. */
static bool int_in(const json_t *root, const char *name, int lo, int hi, int32_t *out, vt_serve_error *err) {
    json_t *v = given(root, name);
    if (!v) return true;
    if (!json_is_integer(v))
        return vt_serve_fail(err, 400, INVALID, name, "%s: expected an integer in %d..%d", name, lo, hi);
    if (json_integer_value(v) < lo || json_integer_value(v) > hi)
        return vt_serve_fail(err, 400, INVALID, name, "%s: expected an integer in %d..%d (got %lld)", name, lo, hi,
                             (long long)json_integer_value(v));
    *out = (int32_t)json_integer_value(v);
    return true;
}

bool vt_serve_parse_choice_options(const json_t *root, vt_serve_kind kind, vt_serve_request *r, vt_serve_error *err) {
    r->n = 1;
    if (!int_in(root, "n", 1, VT_SERVE_MAX_CHOICES, &r->n, err)) return false;
    json_t *lp = given(root, "logprobs");
    if (kind == VT_SERVE_CHAT) {
        if (lp && !json_is_boolean(lp))
            return vt_serve_fail(err, 400, INVALID, "logprobs",
                                 "logprobs: expected true or false (the number of alternatives is top_logprobs)");
        r->logprobs = lp && json_is_true(lp);
        if (given(root, "top_logprobs") && !r->logprobs)
            return vt_serve_fail(err, 400, INVALID, "top_logprobs", "top_logprobs: needs \"logprobs\": true");
        return int_in(root, "top_logprobs", 0, VT_SERVE_MAX_TOP_LOGPROBS, &r->top_logprobs, err);
    }
    if (given(root, "top_logprobs"))
        return vt_serve_fail(err, 400, INVALID, "top_logprobs",
                             "top_logprobs: not a field of /v1/completions; \"logprobs\": N asks for N alternatives");
    if (lp && !json_is_integer(lp))
        return vt_serve_fail(err, 400, INVALID, "logprobs",
                             "logprobs: expected an integer in 0..%d (alternatives per token), or null",
                             VT_SERVE_MAX_COMPLETION_LOGPROBS);
    if (!int_in(root, "logprobs", 0, VT_SERVE_MAX_COMPLETION_LOGPROBS, &r->top_logprobs, err)) return false;
    r->logprobs = lp != NULL;
    return true;
}
