/* api_options.c — see api_options.h. */
#include "api_options.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "host.h"

vt_status vt_api_report(const vt_error *e, char *err, size_t err_size) {
    if (err && err_size) snprintf(err, err_size, "%s", e->msg[0] ? e->msg : vt_status_name(e->code));
    return e->code;
}

/* "key=value" -> vt_options_set(key, value, "api"); "backend.NAME.key=value"
 * (the ini's [backend.NAME] key = value) -> a backend's own option. */
static vt_status apply_setting(vt_options *o, const char *kv, vt_error *e) {
    static const char backend_prefix[] = "backend.";
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return vt_fail(e, VT_ERR_INVALID, "setting '%s': expected key=value with an ini key", kv);
    char key[160];
    size_t len = (size_t)(eq - kv);
    if (len >= sizeof key) return vt_fail(e, VT_ERR_INVALID, "setting '%.40s...': key too long", kv);
    memcpy(key, kv, len);
    key[len] = '\0';
    if (strncmp(key, backend_prefix, sizeof backend_prefix - 1) == 0) {
        vt_status st = vt_options_set_backend_option_from(o, key + sizeof backend_prefix - 1, eq + 1, "api", e);
        if (st != VT_OK) vt_error_prefix(e, "setting '%s': ", kv);
        return st;
    }
    bool known = false;
    for (int i = 0; i < vt_options_key_count() && !known; i++) known = strcmp(vt_options_key(i), key) == 0;
    if (!known) {
        /* the keys a program on libvt may set: sampling is a request's
         * (vt_batch_request), so [sampling]'s keys are not among them */
        char keys[512];
        size_t used = 0;
        keys[0] = '\0';
        for (int i = 0; i < vt_options_key_count() && used < sizeof keys; i++)
            if (strncmp(vt_options_key(i), "sampling.", 9) != 0)
                used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", used ? ", " : "", vt_options_key(i));
        return vt_fail(e, VT_ERR_INVALID, "setting '%s': unknown option '%s'; a program on libvt sets %s", kv, key,
                       keys);
    }
    return vt_options_set(o, key, eq + 1, "api", e);
}

void vt_session_options_init(vt_session_options *o) {
    if (o) *o = (vt_session_options){sizeof *o, NULL, NULL, false};
}

vt_status vt_api_options(const vt_session_options *options, vt_options *opt, bool *all_logits, vt_error *e) {
    vt_session_options o = {sizeof o, NULL, NULL, false};
    if (options) { /* read only the fields the caller's struct has */
        /* one that ends before settings (0: never set) would lose the
         * config file and every setting without a word */
        const size_t least = offsetof(vt_session_options, settings) + sizeof o.settings;
        if (options->struct_size < least || options->struct_size > sizeof o)
            return vt_fail(e, VT_ERR_INVALID, "options.struct_size: %u (expected sizeof(vt_session_options), %zu)",
                           options->struct_size, sizeof o);
        memcpy(&o, options, options->struct_size);
    }
    if (all_logits) *all_logits = o.all_logits;
    vt_options_defaults(opt);
    /* "" is no file: a program that wants only its own settings is not at
     * the mercy of a VT_CONFIG its user set for vt */
    vt_status st = vt_options_load_from(opt, o.config_path, !o.config_path, e);
    /* a program on libvt samples per request (vt_batch_request's fields; a
     * session never samples): [sampling] in its own settings would be taken
     * and then have no effect, so it is refused; in a config file it shares
     * with vt run and vt serve it is theirs, and said to be left to them */
    for (int i = 0; st == VT_OK && i < vt_options_key_count(); i++) {
        const char *key = vt_options_key(i);
        const char *source = vt_options_source(opt, key);
        if (strncmp(key, "sampling.", 9) != 0 || !source || strcmp(source, "default") == 0) continue;
        char where[1100];
        vt_log(VT_LOG_WARN, "core", "%s (from %s) is left to vt run, vt chat and vt serve: a program on libvt chooses "
               "sampling per request (vt_batch_request's fields)", key, vt_options_where(opt, source, where, sizeof where));
    }
    for (const char *const *kv = o.settings; st == VT_OK && kv && *kv; kv++) {
        /* one key given twice says two things (an ini file may not either):
         * refused rather than the last taken without a word */
        const size_t key_len = strcspn(*kv, "=");
        for (const char *const *before = o.settings; st == VT_OK && before < kv; before++)
            if (strcspn(*before, "=") == key_len && strncmp(*before, *kv, key_len) == 0)
                st = vt_fail(e, VT_ERR_INVALID, "settings '%s' and '%s': the key is given twice", *before, *kv);
        if (st == VT_OK) st = apply_setting(opt, *kv, e);
    }
    for (int i = 0; st == VT_OK && i < vt_options_key_count(); i++) {
        const char *key = vt_options_key(i);
        const char *source = vt_options_source(opt, key);
        if (strncmp(key, "sampling.", 9) != 0 || !source || strcmp(source, "api") != 0) continue;
        st = vt_fail(e, VT_ERR_INVALID,
                     "%s (set by the settings): a program on libvt chooses sampling per request (vt_batch_request's "
                     "fields); [sampling] is read by vt run, vt chat and vt serve",
                     key);
    }
    return st;
}
