/* memplan.h - static memory planning: every buffer gets an offset in one
 * arena such that buffers alive at the same time never overlap.
 *
 * Liveness is measured in steps of the schedule: a buffer is alive from the
 * step that writes it first to the step that reads it last (pinned buffers
 * the whole run). Placement is best-fit by decreasing size (ties: earlier
 * first step, then lower index), which is close to the lower bound (the
 * largest set of simultaneously live bytes) in practice; memplan reports
 * both. What is alive beside a buffer is read off a tree over the steps
 * that holds unions of placed address ranges (short: placed buffers pack),
 * not off every placed buffer: a --memory-budget search plans hundreds of
 * times. Kept buffers go first, at the bottom, so what lies above them is
 * scratch between runs (another session may borrow it:
 * gpu_session_create_in). */
#ifndef NRT_MEMPLAN_H
#define NRT_MEMPLAN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct memplan_buf {
    int64_t bytes;        /* 0 = needs no memory */
    int32_t first, last;  /* live steps, inclusive: 0 <= first <= last where bytes > 0 */
    bool kept;            /* a run leaves it for the next run or the host: placed first, at the bottom */
    int64_t offset;       /* out */
} memplan_buf;

typedef struct memplan_result {
    int64_t arena_bytes;  /* what to allocate */
    int64_t kept_bytes;   /* the kept buffers lie below this; the rest of the arena is free
                             between runs */
    int64_t lower_bound;  /* the most bytes alive at any one step */
    uint32_t in_place;    /* buffers placed over an operand dying at their step (program_plan_memory) */
} memplan_result;

/* Offsets are multiples of align (a power of two). */
memplan_result memplan_place(memplan_buf *bufs, uint32_t n, int64_t align);

#endif
