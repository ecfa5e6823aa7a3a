/* vt_backend_options.h — a backend's walk over config->options, the
 * "key=value,key=value" string the host gives its init. Header-only (static
 * inline, nothing exported): it adds nothing to the backend ABI, and a
 * backend that parses its options otherwise keeps working. */
#ifndef VT_BACKEND_OPTIONS_H
#define VT_BACKEND_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* One option, key and value without spaces around the key; false with err
 * filled refuses it (and with it the backend's init). */
typedef bool (*vt_backend_option_fn)(void *ctx, const char *key, const char *value, char *err, size_t err_size);

/* Call set(ctx, key, value, ...) for each item of options in order (NULL or
 * "": none; empty items are skipped). Refused here, err starting with
 * prefix (e.g. "simd: "): options of 512 bytes or more, an item without
 * '='. Stops at the first refusal. */
static inline bool vt_backend_options_each(const char *options, const char *prefix, vt_backend_option_fn set,
                                           void *ctx, char *err, size_t err_size) {
    if (!options || !*options) return true;
    char buf[512];
    const size_t len = strlen(options);
    if (len >= sizeof buf) {
        snprintf(err, err_size, "%soptions too long", prefix);
        return false;
    }
    memcpy(buf, options, len + 1);
    for (char *item = buf; item;) {
        char *comma = strchr(item, ',');
        if (comma) *comma = '\0';
        while (*item == ' ') item++;
        if (*item) {
            char *eq = strchr(item, '=');
            if (!eq) {
                snprintf(err, err_size, "%soption '%.64s' is not key=value", prefix, item);
                return false;
            }
            *eq = '\0';
            if (!set(ctx, item, eq + 1, err, err_size)) return false;
        }
        item = comma ? comma + 1 : NULL;
    }
    return true;
}

#endif
