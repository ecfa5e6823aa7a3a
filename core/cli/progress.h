/* progress.h — a one-line progress bar on stderr for the long-running
 * commands (compare, bench, synth).
 *
 * Drawn only when stderr is a terminal and the work has already taken more
 * than a second, so pipes, logs and quick runs see nothing; redrawn at most
 * ten times a second; erased when done so the results print on a clean line. */
#ifndef VT_CLI_PROGRESS_H
#define VT_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct vt_progress {
    char label[64];
    double total, done;
    double t_start, t_drawn;
    bool enabled; /* stderr is a terminal */
    bool shown;   /* something was drawn and must be erased */
} vt_progress;

void vt_progress_begin(vt_progress *p, const char *label, double total);
/* Set the label of the current step (e.g. the backend being measured). */
void vt_progress_label(vt_progress *p, const char *label);
void vt_progress_set(vt_progress *p, double done);
void vt_progress_add(vt_progress *p, double amount);
void vt_progress_end(vt_progress *p);

#endif
