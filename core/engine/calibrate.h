/* calibrate.h — timing one node of each shape class on each candidate
 * backend, for `--backend auto`.
 *
 * A class is timed on a node of a plan built for this model, run through the
 * backend's op as the executor runs it, in the form the class was keyed in
 * (vt_plan_node_keyed_at: the output dtype before negotiation, written to a
 * buffer of calibration's own when negotiation has changed it): the
 * model's real weights (so their memory behaviour is real), first offered
 * to the backend's prepare hook by the engine's own code (weight_prep.h) so
 * a backend that prepares is timed on its own copy, the plan's arena
 * and the engine's KV cache, at a calibration call of
 * min(batch, VT_AUTO_CALIBRATION_TOKENS) tokens for prefill and one token per
 * sequence at position 255 for decode. One warm-up run, then the median of at
 * least three (two, the faster kept, for nodes of 30 ms or more); a backend whose first timed run is already four times the best time
 * of the class is recorded at that time and not repeated (it cannot win).
 *
 * Close calls are timed again: when the two fastest candidates of a class
 * measured now are within VT_AUTO_CLOSE of each other, each is timed
 * VT_AUTO_RETIME_ROUNDS more times, alternately (round r starts with the
 * r-th), and keeps its fastest timing (a node of VT_AUTO_LONG_RUN or more:
 * one run per re-timing, no warm-up; the output matrix of a large
 * vocabulary is most of calibration's time otherwise). On a loaded machine one timing can be
 * 1.5x off; a decision that close would otherwise be taken by whichever
 * candidate ran during a quieter moment, and the cache would keep it. */
#ifndef VT_CORE_CALIBRATE_H
#define VT_CORE_CALIBRATE_H

#include "auto_costs.h"
#include "error.h"
#include "kv_cache.h"
#include "plan.h"

#define VT_AUTO_CLOSE 1.25
#define VT_AUTO_RETIME_ROUNDS 2
/* A node whose run takes this long (seconds) is timed by the faster of two
 * runs, and re-timed (close calls) by one run without a warm-up. */
#define VT_AUTO_LONG_RUN 0.030

/* Times candidate `which` (0 or 1) once more: *seconds, or its failure. */
typedef vt_status (*vt_auto_timer)(void *user, int which, double *seconds);

/* The close-call rule on two candidates' times: if the slower is within
 * VT_AUTO_CLOSE of the faster, VT_AUTO_RETIME_ROUNDS rounds of one timing
 * each (round r: candidate r % 2 first), each candidate keeping its fastest;
 * *retimed counts the timings made. A failing timing stops there: its
 * status is returned and *failed (0 or 1) names the candidate. */
vt_status vt_auto_settle_close(double seconds[2], vt_auto_timer time_again, void *user, int *retimed, int *failed);

/* Time every (class, candidate) pair of the plans' nodes that c does not
 * hold yet. A backend whose op fails is marked failed in c (its times
 * dropped) with a warning naming it; that is no error. Errors: bad plan
 * inputs (an internal bug) or out of memory. */
vt_status vt_auto_calibrate(vt_plan *const *plans, int n_plans, vt_kv_cache *kv, vt_auto_costs *c, vt_error *err);

#endif
