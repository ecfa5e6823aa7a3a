/* progress.c — see progress.h. */
#include "progress.h"

#include "clock.h"
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BAR_WIDTH 30

void vt_progress_begin(vt_progress *p, const char *label, double total) {
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total > 0 ? total : 1;
    p->t_start = vt_now_seconds();
    p->enabled = isatty(STDERR_FILENO) == 1;
}

static void draw(vt_progress *p) {
    double t = vt_now_seconds();
    if (!p->enabled || t - p->t_start < 1.0 || t - p->t_drawn < 0.1) return;
    p->t_drawn = t;
    double frac = p->done / p->total;
    if (frac < 0) frac = 0;
    if (frac > 1) frac = 1;
    char bar[BAR_WIDTH + 1];
    int filled = (int)(frac * BAR_WIDTH);
    for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    /* \r and clear-to-end-of-line: the bar overwrites itself */
    fprintf(stderr, "\r\033[K%s [%s] %3.0f%% %.0fs", p->label, bar, 100.0 * frac, t - p->t_start);
    fflush(stderr);
    p->shown = true;
}

void vt_progress_label(vt_progress *p, const char *label) {
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->t_drawn = 0; /* show the new label now */
    draw(p);
}

void vt_progress_set(vt_progress *p, double done) {
    p->done = done;
    draw(p);
}

void vt_progress_add(vt_progress *p, double amount) { vt_progress_set(p, p->done + amount); }

void vt_progress_end(vt_progress *p) {
    if (p->shown) {
        fprintf(stderr, "\r\033[K");
        fflush(stderr);
    }
    p->shown = false;
}
