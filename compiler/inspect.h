/* inspect.h - the `netc inspect` report. */
#ifndef NC_INSPECT_H
#define NC_INSPECT_H

#include "base.h"
#include "program.h"
#include <stdio.h>

/* Device times measured by nrt_session_profile, one per program step (the
 * launch's time at its first step, 0 at the others). */
typedef struct inspect_profile {
    const double *step_seconds;
    const char *device;
    int runs;
} inspect_profile;

/* Print the report of entry point `entry` (NULL: forward) of the module at
 * path (JSON with as_json), with measured times beside the floors when
 * profile is not NULL. Returns the process exit code. */
int inspect_module(const char *path, const char *entry, const char *const *dim_names, const int64_t *dim_values,
                   int ndims, bool as_json, const inspect_profile *profile, FILE *out);

/* The roofline floor of a run of program p on an H100 (seconds; prepare
 * steps, which run when parameters are set, apart): each step at the slower
 * of its bytes over copy bandwidth and its FLOPs over the peak rate of the
 * units it runs on. bufs: p's memory plan; syms: the bound dims. */
double inspect_floor_seconds(const ir_graph *g, const nrt_program *p, const memplan_buf *bufs, const int64_t *syms);

#endif
