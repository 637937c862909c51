/* cpu_crew.c - worker threads sharing a job's tiles (cpu_crew.h). */
#include "cpu_crew.h"

#include "base.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct crew_worker {
    struct cpu_crew *crew;
    int id;
    pthread_t th;
} crew_worker;

struct cpu_crew {
    pthread_mutex_t mu;
    pthread_cond_t go, idle;
    int nworkers;
    crew_worker workers[CPU_CREW_MAX - 1];
    uint64_t gen;                  /* jobs posted; a worker joins each one once */
    bool open, quit;               /* open: the current job still takes workers */
    int active;                    /* workers inside the current job */
    /* the current job */
    cpu_crew_fn *fn;
    void *ctx;
    int64_t ntiles;
    atomic_int_fast64_t next;      /* the next tile to claim */
    atomic_int_fast64_t bad;       /* the lowest tile that failed (ntiles: none) */
    int bad_thread;                /* who ran it (under mu) */
};

int cpu_crew_threads(char *err, size_t errcap)
{
    const char *s = getenv("NETC_CPU_THREADS");
    if (s && *s) {
        char *end;
        errno = 0;
        long n = strtol(s, &end, 10);
        if (errno || *end || n < 1 || n > CPU_CREW_MAX) {
            snprintf(err, errcap, "NETC_CPU_THREADS=%s: expected a whole number from 1 to %d", s, CPU_CREW_MAX);
            return -1;
        }
        return (int)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > CPU_CREW_MAX ? CPU_CREW_MAX : (int)n;
}

/* Claims tiles until none is left or one below the claim has failed. */
static void do_tiles(cpu_crew *c, int thread)
{
    for (;;) {
        int64_t t = atomic_fetch_add(&c->next, 1);
        if (t >= c->ntiles || t > atomic_load(&c->bad)) return;
        if (c->fn(c->ctx, t, thread) == 0) continue;
        pthread_mutex_lock(&c->mu);
        if (t < atomic_load(&c->bad)) {
            atomic_store(&c->bad, t);
            c->bad_thread = thread;
        }
        pthread_mutex_unlock(&c->mu);
    }
}

static void *worker_main(void *arg)
{
    crew_worker *w = arg;
    cpu_crew *c = w->crew;
    uint64_t seen = 0;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->quit && !(c->open && c->gen != seen)) pthread_cond_wait(&c->go, &c->mu);
        if (c->quit) break;
        seen = c->gen;
        c->active++;
        pthread_mutex_unlock(&c->mu);
        do_tiles(c, w->id);
        pthread_mutex_lock(&c->mu);
        if (--c->active == 0) pthread_cond_signal(&c->idle);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

cpu_crew *cpu_crew_new(int threads)
{
    if (threads < 2) return NULL;
    if (threads > CPU_CREW_MAX) threads = CPU_CREW_MAX;
    cpu_crew *c = nc_xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->go, NULL);
    pthread_cond_init(&c->idle, NULL);
    /* workers take no signals: a Ctrl-C goes to a thread that acts on it */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int k = 0; k < threads - 1; k++) {
        crew_worker *w = &c->workers[c->nworkers];
        w->crew = c;
        w->id = c->nworkers + 1;
        if (pthread_create(&w->th, NULL, worker_main, w) != 0) break;
        c->nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (c->nworkers == 0) {
        cpu_crew_free(c);
        return NULL;
    }
    return c;
}

void cpu_crew_free(cpu_crew *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->quit = true;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    for (int k = 0; k < c->nworkers; k++) pthread_join(c->workers[k].th, NULL);
    pthread_cond_destroy(&c->idle);
    pthread_cond_destroy(&c->go);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int cpu_crew_size(const cpu_crew *c) { return c ? c->nworkers + 1 : 1; }

int64_t cpu_crew_run(cpu_crew *c, int64_t ntiles, cpu_crew_fn *fn, void *ctx, int *failed_thread)
{
    *failed_thread = 0;
    if (!c) {
        for (int64_t t = 0; t < ntiles; t++)
            if (fn(ctx, t, 0)) return t;
        return ntiles;
    }
    pthread_mutex_lock(&c->mu);
    c->fn = fn;
    c->ctx = ctx;
    c->ntiles = ntiles;
    atomic_store(&c->next, 0);
    atomic_store(&c->bad, ntiles);
    c->bad_thread = 0;
    c->gen++;
    c->open = true;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    do_tiles(c, 0);
    pthread_mutex_lock(&c->mu);
    c->open = false;
    while (c->active) pthread_cond_wait(&c->idle, &c->mu);
    int64_t bad = atomic_load(&c->bad);
    *failed_thread = c->bad_thread;
    pthread_mutex_unlock(&c->mu);
    return bad;
}
