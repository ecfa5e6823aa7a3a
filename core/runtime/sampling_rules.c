/* sampling_rules.c — the table of sampling settings (sampling_rules.h).
 *
 * Temperature is capped at 1e6: far past any use (at 1e3 every token is
 * already equally likely in f32), and small enough that 1/temperature stays
 * a normal float. The penalties follow OpenAI's range. top_k takes -1 as
 * off too: vLLM's and llama.cpp's spelling, which clients and scripts
 * ported from them send. */
#include "sampling_rules.h"

#include <math.h>
#include <stdint.h>

static const vt_sampling_rule rules[VT_KNOB_COUNT] = {
    [VT_KNOB_TEMPERATURE] = {"temp", "temperature", 0, 1e6, false, 0.8, 0,
                             "finite numbers in [0, 1e+06] (0 = greedy)"},
    [VT_KNOB_TOP_K] = {"top_k", "top_k", -1, INT32_MAX, true, 40, 0, "integers -1..2147483647 (0 or -1 = off)"},
    [VT_KNOB_TOP_P] = {"top_p", "top_p", 0, 1, false, 0.95, 1,
                       "numbers in [0, 1] (1 = off, 0 = the most likely token only)"},
    [VT_KNOB_MIN_P] = {"min_p", "min_p", 0, 1, false, 0.05, 0, "numbers in [0, 1] (0 = off)"},
    [VT_KNOB_PRESENCE_PENALTY] = {NULL, "presence_penalty", -2, 2, false, 0, 0, "numbers in [-2, 2] (0 = off)"},
    [VT_KNOB_FREQUENCY_PENALTY] = {NULL, "frequency_penalty", -2, 2, false, 0, 0,
                                   "numbers in [-2, 2] (0 = off)"},
};

const vt_sampling_rule *vt_sampling_rule_of(vt_sampling_knob k) {
    return k >= 0 && k < VT_KNOB_COUNT ? &rules[k] : NULL;
}

bool vt_sampling_accepts(vt_sampling_knob k, double value) {
    const vt_sampling_rule *r = vt_sampling_rule_of(k);
    if (!r || !isfinite(value)) return false;
    if (r->integer && value != floor(value)) return false;
    const double stored = r->integer ? value : (double)(float)value;
    return stored >= r->lo && stored <= r->hi;
}

vt_status vt_sampling_check(vt_sampling_knob k, double value, const char *name, vt_error *err) {
    if (vt_sampling_accepts(k, value)) return VT_OK;
    const vt_sampling_rule *r = vt_sampling_rule_of(k);
    return vt_fail(err, VT_ERR_INVALID, "%s: %g (accepted: %s)", name, value, r ? r->accepted : "nothing");
}
