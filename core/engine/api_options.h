/* api_options.h — what the public objects of vt.h (vt_session, vt_batch)
 * share: their options resolved exactly as the command line's, and errors
 * handed back as (status, message). */
#ifndef VT_CORE_API_OPTIONS_H
#define VT_CORE_API_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "options.h"
#include "vt/vt.h"

/* Defaults, then the config file (options->config_path, else VT_CONFIG) and
 * the environment, then options->settings ("key=value" with ini keys, source
 * "api"). options may be NULL; only the fields its struct_size covers are
 * read. *all_logits (may be NULL) gets the caller's flag. */
vt_status vt_api_options(const vt_session_options *options, vt_options *opt, bool *all_logits, vt_error *e);

/* e's message (or its status's name) into err; returns e's status. */
vt_status vt_api_report(const vt_error *e, char *err, size_t err_size);

#endif
