/* batch_open.h — vt_batch_open for a caller that resolved the options
 * itself. vt serve resolves its flags, the ini and the environment with the
 * command line's machinery, each knob with its source; handing them over as
 * vt_session_options settings would relabel every one "api" in --explain.
 * Not part of the public API (include/vt/vt.h): libvt's users pass settings. */
#ifndef VT_CORE_BATCH_OPEN_H
#define VT_CORE_BATCH_OPEN_H

#include <stddef.h>

#include "options.h"
#include "vt/vt.h"

/* vt_batch_open with `options` used as given (copied; sources included):
 * nothing is read from a config file or the environment here. */
vt_status vt_batch_open_resolved(const char *model_path, const vt_options *options, vt_batch **out, char *err,
                                 size_t err_size);

#endif
