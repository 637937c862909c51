/* cpu_crew.h - worker threads for one run of the CPU executor, sharing the
 * tiles of a job (a chain of elementwise kernels) with the thread that runs
 * the graph.
 *
 * Which thread does a tile never changes what the tile computes (the chained
 * kernels are position independent, and the tiles are the same on any
 * count), so a result's bits do not depend on the thread count. Tiles are
 * claimed in order, one at a time: a worker that wakes late (a busy machine)
 * finds fewer or none left, and the caller waits only for tiles a worker is
 * inside, never for a worker to wake. */
#ifndef NRT_CPU_CREW_H
#define NRT_CPU_CREW_H

#include <stddef.h>
#include <stdint.h>

#define CPU_CREW_MAX 16            /* threads, the caller included */

/* One tile: 0, or nonzero when it failed (the job's own state says why). */
typedef int cpu_crew_fn(void *ctx, int64_t tile, int thread);

typedef struct cpu_crew cpu_crew;

/* Threads a run may use: NETC_CPU_THREADS when set (1 to CPU_CREW_MAX),
 * else the online cores, at most CPU_CREW_MAX. A malformed value: -1 and
 * why in err. */
int cpu_crew_threads(char *err, size_t errcap);

/* A crew of threads - 1 workers, waiting for jobs; NULL when none could
 * start (the caller then works alone). */
cpu_crew *cpu_crew_new(int threads);
void cpu_crew_free(cpu_crew *c);
/* Threads a job may use, the caller included (1 for a NULL crew). */
int cpu_crew_size(const cpu_crew *c);

/* fn over tiles [0, ntiles): the caller is thread 0, workers 1.. as they
 * wake. Returns ntiles when every tile succeeded, else the lowest tile that
 * failed (every tile below it ran and succeeded, as in order) and, in
 * *failed_thread, the thread that ran it. A NULL crew runs them all here. */
int64_t cpu_crew_run(cpu_crew *c, int64_t ntiles, cpu_crew_fn *fn, void *ctx, int *failed_thread);

#endif
