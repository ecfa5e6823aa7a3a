/* default_model.h — the model `vt compare` uses when given no -m: a small
 * random-weight qwen3 (256 wide, 4 layers, 1024-token vocabulary, Q4_K_M)
 * synthesized once into the user's cache ($XDG_CACHE_HOME/vt, else
 * ~/.cache/vt) and reused, so the first command on a fresh machine shows a
 * meaningful comparison in a few seconds without downloading anything. */
#ifndef VT_CLI_DEFAULT_MODEL_H
#define VT_CLI_DEFAULT_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* Path of the cached model into path; synthesizes it first if it is missing
 * or `rebuild` is set (e.g. the cached file failed to load). *created says
 * whether it was written now. */
vt_status vt_cli_default_model(char *path, size_t size, bool rebuild, bool *created, vt_error *err);

/* One line describing the default model's shape, for messages. */
const char *vt_cli_default_model_shape(void);

#endif
