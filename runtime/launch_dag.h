/* launch_dag.h - which of a program's launches may run side by side on a
 * GPU, and an assignment of them to streams that keeps every dependency.
 *
 * A program is a list of launches in an order that is always correct. Two
 * launches must stay in that order when they touch overlapping arena bytes
 * and one of them stores there (a read after a write, a write after a read
 * the static memory plan creates by reusing memory, a write after a write),
 * or when both are cuBLASLt products sharing one workspace. Every other
 * pair may overlap. The plan puts launches on up to max_streams streams and
 * lists the cross-stream waits (an event recorded after launch i, waited on
 * before launch j) that, with each stream's own order, order every such
 * pair. With one stream it is the program's order and no waits. */
#ifndef NRT_LAUNCH_DAG_H
#define NRT_LAUNCH_DAG_H

#include "program.h"

#include <stdbool.h>
#include <stdint.h>

#define DAG_MAX_STREAMS 8

typedef struct dag_plan {
    uint32_t nlaunches;       /* the launches planned (the program's, prepare or not as asked) */
    uint32_t *first_step;     /* launch i starts at this step */
    uint8_t *stream;          /* and runs on this stream (0: the session's own) */
    uint32_t *wait_start;     /* launch i first waits for launches waits[wait_start[i] .. wait_start[i + 1]) */
    uint32_t *waits;
    bool *signals;            /* an event is recorded after launch i (some launch waits for it) */
    uint32_t nstreams;        /* streams used, at most max_streams */
    uint32_t nwaits;
} dag_plan;

/* Where each buffer lives (the memory plan): bytes at offset in the arena;
 * with one_workspace, every cuBLASLt product uses the same workspace (else
 * each stream has its own, and products conflict only through buffers). */
typedef struct dag_memory {
    const int64_t *offset, *bytes;
    uint32_t nbuf;
    bool one_workspace;
} dag_memory;

/* Plans the launches of p whose steps are prepare steps (prepare) or not.
 * Returns 0, or -1 with err set when p names a buffer mem does not have. */
int dag_plan_build(const nrt_program *p, const dag_memory *mem, bool prepare, uint32_t max_streams, dag_plan *out,
                   char *err, size_t errcap);
void dag_plan_free(dag_plan *d);
/* How long the plan takes when launch i takes cost[i] and nothing else
 * limits what runs at once: the longest chain of stream order and waits. */
double dag_plan_span(const dag_plan *d, const double *cost);

/* Whether launches starting at steps a and b of p must keep their order
 * (they conflict in memory or share cuBLASLt's workspace). */
bool dag_launches_conflict(const nrt_program *p, const dag_memory *mem, uint32_t a, uint32_t b);

#endif
