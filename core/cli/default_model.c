/* default_model.c — see default_model.h. */
#include "default_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.h"
#include "synth.h"

/* The shape is part of the file name, so changing it here never reuses a
 * stale file. */
#define DEFAULT_FILE "compare-default-qwen3-e256-l4-h4-kv2-f768-v1024-q4_k_m-s1.gguf"

const char *vt_cli_default_model_shape(void) {
    return "random-weight qwen3, 256 wide, 4 layers, 4 heads (2 kv), ff 768, vocab 1024, q4_k_m";
}

static void fill_params(vt_synth_params *p) {
    memset(p, 0, sizeof *p);
    p->arch = "qwen3";
    p->n_embd = 256;
    p->n_layer = 4;
    p->n_head = 4;
    p->n_head_kv = 2;
    p->head_dim = 64;
    p->n_ff = 768;
    p->n_vocab = 1024;
    p->n_ctx = 4096;
    p->tied_output = true;
    p->type = "q4_k_m";
    p->seed = 1;
}

/* mkdir -p for the cache folder. */
static vt_status make_dirs(char *dir, vt_error *err) {
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        int rc = mkdir(dir, 0755);
        *s = '/';
        if (rc != 0 && errno != EEXIST)
            return vt_fail(err, VT_ERR_IO, "cannot create cache folder %s: %s", dir, strerror(errno));
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return vt_fail(err, VT_ERR_IO, "cannot create cache folder %s: %s", dir, strerror(errno));
    return VT_OK;
}

static void on_progress(void *user, int64_t done, int64_t total) {
    vt_progress *bar = user;
    bar->total = (double)total;
    vt_progress_set(bar, (double)done);
}

vt_status vt_cli_default_model(char *path, size_t size, bool rebuild, bool *created, vt_error *err) {
    *created = false;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[4096];
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(dir, sizeof dir, "%s/vt", xdg);
    else if (home && home[0]) n = snprintf(dir, sizeof dir, "%s/.cache/vt", home);
    else return vt_fail(err, VT_ERR_INVALID, "no -m and neither XDG_CACHE_HOME nor HOME is set to cache a model in");
    if (n < 0 || (size_t)n >= sizeof dir) return vt_fail(err, VT_ERR_INVALID, "cache folder path is too long");
    n = snprintf(path, size, "%s/%s", dir, DEFAULT_FILE);
    if (n < 0 || (size_t)n >= size) return vt_fail(err, VT_ERR_INVALID, "cache file path is too long");
    if (!rebuild && access(path, R_OK) == 0) return VT_OK;

    vt_status st = make_dirs(dir, err);
    if (st != VT_OK) return st;
    /* Written under a temporary name and renamed, so an interrupted run or a
     * concurrent one never leaves a half-written model under the real name. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    vt_synth_params p;
    fill_params(&p);
    vt_progress bar;
    vt_progress_begin(&bar, "synthesizing default model", 1);
    p.progress = on_progress;
    p.progress_user = &bar;
    st = vt_synth_write(&p, tmp, err);
    vt_progress_end(&bar);
    if (st != VT_OK) {
        unlink(tmp);
        vt_error_prefix(err, "synthesizing the default model: ");
        return st;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return vt_fail(err, VT_ERR_IO, "cannot move the synthesized model to %s: %s", path, strerror(e));
    }
    *created = true;
    return VT_OK;
}
