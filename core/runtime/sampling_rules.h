/* sampling_rules.h — the sampling settings vt accepts, one rule and one
 * default each, wherever a setting arrives: conf/vt.ini and the command
 * line (options.c), the vt_batch API (batch_api.c), the scheduler's
 * requests (scheduler.c) and the server's JSON (serve_request.c). */
#ifndef VT_CORE_SAMPLING_RULES_H
#define VT_CORE_SAMPLING_RULES_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

typedef enum vt_sampling_knob {
    VT_KNOB_TEMPERATURE = 0,
    VT_KNOB_TOP_K,
    VT_KNOB_TOP_P,
    VT_KNOB_MIN_P,
    VT_KNOB_PRESENCE_PENALTY,
    VT_KNOB_FREQUENCY_PENALTY,
    VT_KNOB_COUNT
} vt_sampling_knob;

typedef struct vt_sampling_rule {
    const char *ini_key;  /* its key in [sampling] ("temp"); NULL: not an ini setting */
    const char *api_name; /* its field in requests ("temperature") */
    double lo, hi;        /* the accepted range, [lo, hi] */
    bool integer;
    double preset;        /* vt run's and vt serve's default (conf/vt.ini's commented value) */
    double off;           /* the value that leaves tokens untouched: an API request's default */
    const char *accepted; /* "finite numbers in [0, 1e+06] (0 = greedy)": what messages and --help say */
} vt_sampling_rule;

const vt_sampling_rule *vt_sampling_rule_of(vt_sampling_knob k);

/* Is value accepted, judged as what it is stored as (a float, or an int32
 * for top_k): -1e-300 is < 0 as a double but -0 (in range) as a float. */
bool vt_sampling_accepts(vt_sampling_knob k, double value);

/* VT_OK, or VT_ERR_INVALID naming the setting as the caller spells it
 * (`name`: "request.top_p", "sampling.temp") and what is accepted. */
vt_status vt_sampling_check(vt_sampling_knob k, double value, const char *name, vt_error *err);

#endif
