/* profiler.h — per-op time and call counts for every backend, with no code
 * per op or per backend.
 *
 * Attaching to a registry replaces each loaded backend's table with a copy
 * whose every non-NULL op pointer is a libffi closure: the closure reads the
 * clock, forwards the call unchanged to the original pointer with ffi_call,
 * and adds the elapsed time to (section, backend, op). A new op in the ABI or
 * a new backend is profiled as soon as it exists. Cost: two clock reads and
 * an ffi_call per op call, fine per op, never per row.
 *
 * A section groups the calls of one phase of a tool's work (vt compare and
 * vt bench use the engine's preferred backend, so the reference nodes a simd
 * engine falls back to are reported under "simd"). Ops are called from one
 * thread at a time (vt_backend.h), so counting needs no locks.
 *
 * The profiler must outlive every registry it is attached to: their tables
 * point into it. */
#ifndef VT_CORE_PROFILER_H
#define VT_CORE_PROFILER_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "registry.h"

#define VT_PROFILER_MAX_SECTIONS 64

typedef struct vt_profiler vt_profiler;

vt_status vt_profiler_create(vt_profiler **out, vt_error *err);
/* Frees the closures: call after every registry it was attached to is gone. */
void vt_profiler_free(vt_profiler *p);

/* Wrap every loaded backend of r. A backend table seen before (another
 * registry of the same process) reuses its wrapped copy. */
vt_status vt_profiler_attach(vt_profiler *p, vt_registry *r, vt_error *err);

/* Count calls from now on under `section` (created on first use; at most
 * VT_PROFILER_MAX_SECTIONS). Before any call to this, calls go to "all". */
vt_status vt_profiler_section(vt_profiler *p, const char *section, vt_error *err);

/* Totals of one (section, backend, op); zeros if never called. */
typedef struct vt_profile_stat {
    uint64_t calls;
    uint64_t ns;
} vt_profile_stat;
vt_profile_stat vt_profiler_get(const vt_profiler *p, const char *section, const char *backend, int op);

/* One table per section: backend, op, calls, total ms, us per call and share
 * of the section's op time, largest first. */
void vt_profiler_print(const vt_profiler *p, FILE *f);

#endif
