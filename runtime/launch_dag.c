/* launch_dag.c - the launches of a program as a graph of dependencies, and
 * streams that run it (launch_dag.h). */
#include "launch_dag.h"

#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Disjoint, sorted byte ranges [lo, hi) of the arena. */
typedef struct dag_range { int64_t lo, hi; } dag_range;
typedef struct dag_ranges { dag_range *r; uint32_t n, cap; } dag_ranges;

typedef struct dag_touch {
    dag_ranges reads, writes;
    bool workspace;   /* a cuBLASLt product */
} dag_touch;

static void ranges_add(dag_ranges *x, int64_t lo, int64_t hi)
{
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 8;
        x->r = nc_xrealloc(x->r, x->cap * sizeof *x->r);
    }
    x->r[x->n++] = (dag_range){lo, hi};
}

static int by_lo(const void *a, const void *b)
{
    int64_t x = ((const dag_range *)a)->lo, y = ((const dag_range *)b)->lo;
    return x < y ? -1 : x > y;
}

/* Sorts and merges touching ranges. */
static void ranges_normalize(dag_ranges *x)
{
    if (x->n < 2) return;
    qsort(x->r, x->n, sizeof *x->r, by_lo);
    uint32_t kept = 0;
    for (uint32_t i = 1; i < x->n; i++) {
        if (x->r[i].lo <= x->r[kept].hi) {
            if (x->r[i].hi > x->r[kept].hi) x->r[kept].hi = x->r[i].hi;
        } else {
            x->r[++kept] = x->r[i];
        }
    }
    x->n = kept + 1;
}

static bool ranges_overlap(const dag_ranges *x, const dag_ranges *y)
{
    uint32_t i = 0, j = 0;
    while (i < x->n && j < y->n) {
        if (x->r[i].hi <= y->r[j].lo) i++;
        else if (y->r[j].hi <= x->r[i].lo) j++;
        else return true;
    }
    return false;
}

/* What the launch starting at step first reads and stores. */
static int touch_of(const nrt_program *p, const dag_memory *mem, uint32_t first, dag_touch *t, char *err, size_t errcap)
{
    const nrt_step *head = &p->steps[first];
    t->workspace = mem->one_workspace && head->kind == NRT_STEP_MATMUL;
    for (uint32_t k = first; k < first + nrt_step_launch_len(head) && k < p->nsteps; k++) {
        const nrt_step *s = &p->steps[k];
        uint64_t writes = nrt_step_writes(s);
        for (int j = 0; j < s->nbufs; j++) {
            uint32_t b = s->bufs[j];
            if (b >= mem->nbuf) {
                if (err) snprintf(err, errcap, "step %u names buffer %u of %u", k, b, mem->nbuf);
                return -1;
            }
            if (mem->bytes[b] <= 0) continue;
            ranges_add(writes >> j & 1 ? &t->writes : &t->reads, mem->offset[b], mem->offset[b] + mem->bytes[b]);
        }
    }
    ranges_normalize(&t->reads);
    ranges_normalize(&t->writes);
    return 0;
}

static void touch_free(dag_touch *t)
{
    free(t->reads.r);
    free(t->writes.r);
}

static bool touches_conflict(const dag_touch *a, const dag_touch *b)
{
    return (a->workspace && b->workspace) || ranges_overlap(&a->writes, &b->writes) || ranges_overlap(&a->writes, &b->reads) ||
           ranges_overlap(&a->reads, &b->writes);
}

bool dag_launches_conflict(const nrt_program *p, const dag_memory *mem, uint32_t a, uint32_t b)
{
    dag_touch x = {0}, y = {0};
    bool conflict = true;   /* what cannot be read is kept in order */
    if (touch_of(p, mem, a, &x, NULL, 0) == 0 && touch_of(p, mem, b, &y, NULL, 0) == 0) conflict = touches_conflict(&x, &y);
    touch_free(&x);
    touch_free(&y);
    return conflict;
}

/* ---- the plan ------------------------------------------------------------ */

typedef struct dag_bits { uint64_t *w; uint32_t words; } dag_bits;

static bool bit_get(const dag_bits *b, uint32_t row, uint32_t i) { return b->w[(size_t)row * b->words + i / 64] >> (i % 64) & 1; }
static void bit_set(dag_bits *b, uint32_t row, uint32_t i) { b->w[(size_t)row * b->words + i / 64] |= 1ull << (i % 64); }
static void bits_or(dag_bits *b, uint32_t row, uint32_t from)
{
    for (uint32_t k = 0; k < b->words; k++) b->w[(size_t)row * b->words + k] |= b->w[(size_t)from * b->words + k];
}

/* The stream for launch j: one whose last launch j depends on directly (no
 * new ordering), else one whose last launch is j's ancestor or that is
 * empty, else the one idle longest (an order that costs least). */
static uint32_t pick_stream(const dag_plan *d, const int64_t *tail, uint32_t nstreams, const dag_bits *anc, uint32_t j,
                            const uint32_t *deps, uint32_t ndeps)
{
    for (uint32_t q = 0; q < ndeps; q++)   /* deps are in decreasing order: the latest first */
        if (tail[d->stream[deps[q]]] == (int64_t)deps[q]) return d->stream[deps[q]];
    for (uint32_t k = 0; k < nstreams; k++)
        if (tail[k] < 0 || bit_get(anc, j, (uint32_t)tail[k])) return k;
    uint32_t best = 0;
    for (uint32_t k = 1; k < nstreams; k++)
        if (tail[k] < tail[best]) best = k;
    return best;
}

static uint32_t count_launches(const nrt_program *p, bool prepare)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < p->nsteps; k += nrt_step_launch_len(&p->steps[k])) n += p->steps[k].prepare == prepare;
    return n;
}

/* Each launch's direct dependencies (none an ancestor of another), latest
 * first, into deps[dep_start[j] ..); anc gets every launch's ancestors. */
static uint32_t *find_dependencies(const dag_touch *t, uint32_t n, dag_bits *anc, uint32_t *dep_start)
{
    uint32_t cap = 64, used = 0;
    uint32_t *deps = nc_xmalloc(cap * sizeof *deps);
    for (uint32_t j = 0; j < n; j++) {
        dep_start[j] = used;
        for (uint32_t i = j; i-- > 0;) {
            if (bit_get(anc, j, i) || !touches_conflict(&t[i], &t[j])) continue;
            if (used == cap) deps = nc_xrealloc(deps, (cap *= 2) * sizeof *deps);
            deps[used++] = i;
            bits_or(anc, j, i);
            bit_set(anc, j, i);
        }
    }
    dep_start[n] = used;
    return deps;
}

/* Streams and waits: clock[k * S + m] is the latest launch of stream m known
 * to finish before stream k's next one starts. */
static void assign_streams(dag_plan *d, const uint32_t *deps, const uint32_t *dep_start, const dag_bits *anc, uint32_t S)
{
    uint32_t n = d->nlaunches;
    int64_t tail[DAG_MAX_STREAMS], *clock = nc_xmalloc((size_t)S * S * sizeof *clock);
    int64_t *clock_at = nc_xmalloc(((size_t)n * S + 1) * sizeof *clock_at);   /* after launch j: its stream's clock */
    for (uint32_t k = 0; k < S; k++) tail[k] = -1;
    for (size_t k = 0; k < (size_t)S * S; k++) clock[k] = -1;
    d->wait_start = nc_xmalloc((n + 1) * sizeof *d->wait_start);
    d->waits = nc_xmalloc((dep_start[n] + 1) * sizeof *d->waits);
    d->nwaits = 0;
    for (uint32_t j = 0; j < n; j++) {
        const uint32_t *dj = &deps[dep_start[j]];
        uint32_t nd = dep_start[j + 1] - dep_start[j];
        uint32_t k = pick_stream(d, tail, S, anc, j, dj, nd);
        int64_t *ck = &clock[(size_t)k * S];
        d->stream[j] = (uint8_t)k;
        d->wait_start[j] = d->nwaits;
        for (uint32_t q = 0; q < nd; q++) {
            uint32_t i = dj[q], m = d->stream[i];
            if (m == k || ck[m] >= (int64_t)i) continue;
            d->waits[d->nwaits++] = i;
            d->signals[i] = true;
            for (uint32_t x = 0; x < S; x++)
                if (clock_at[(size_t)i * S + x] > ck[x]) ck[x] = clock_at[(size_t)i * S + x];
        }
        ck[k] = j;
        tail[k] = j;
        memcpy(&clock_at[(size_t)j * S], ck, S * sizeof *ck);
        if (k + 1 > d->nstreams) d->nstreams = k + 1;
    }
    d->wait_start[n] = d->nwaits;
    free(clock);
    free(clock_at);
}

int dag_plan_build(const nrt_program *p, const dag_memory *mem, bool prepare, uint32_t max_streams, dag_plan *out,
                   char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    uint32_t S = max_streams < 1 ? 1 : max_streams > DAG_MAX_STREAMS ? DAG_MAX_STREAMS : max_streams;
    uint32_t n = count_launches(p, prepare);
    out->nlaunches = n;
    out->nstreams = 1;
    out->first_step = nc_xmalloc((n + 1) * sizeof *out->first_step);
    out->stream = nc_xcalloc(n + 1, sizeof *out->stream);
    out->signals = nc_xcalloc(n + 1, sizeof *out->signals);
    dag_touch *t = nc_xcalloc(n + 1, sizeof *t);
    uint32_t j = 0;
    int rc = 0;
    for (uint32_t k = 0; k < p->nsteps; k += nrt_step_launch_len(&p->steps[k]))
        if (p->steps[k].prepare == prepare) {
            out->first_step[j] = k;
            if (rc == 0) rc = touch_of(p, mem, k, &t[j], err, errcap);
            j++;
        }
    if (rc == 0) {
        dag_bits anc = {.words = (n + 63) / 64};
        anc.w = nc_xcalloc((size_t)n * anc.words + 1, sizeof *anc.w);
        uint32_t *dep_start = nc_xmalloc((n + 1) * sizeof *dep_start);
        uint32_t *deps = find_dependencies(t, n, &anc, dep_start);
        assign_streams(out, deps, dep_start, &anc, S);
        free(deps);
        free(dep_start);
        free(anc.w);
    }
    for (uint32_t i = 0; i < n; i++) touch_free(&t[i]);
    free(t);
    if (rc != 0) dag_plan_free(out);
    return rc;
}

double dag_plan_span(const dag_plan *d, const double *cost)
{
    double end[DAG_MAX_STREAMS] = {0}, span = 0;
    double *finish = nc_xcalloc(d->nlaunches + 1, sizeof *finish);
    for (uint32_t j = 0; j < d->nlaunches; j++) {
        double start = end[d->stream[j]];
        for (uint32_t q = d->wait_start[j]; q < d->wait_start[j + 1]; q++)
            if (finish[d->waits[q]] > start) start = finish[d->waits[q]];
        finish[j] = end[d->stream[j]] = start + cost[j];
        if (finish[j] > span) span = finish[j];
    }
    free(finish);
    return span;
}

void dag_plan_free(dag_plan *d)
{
    free(d->first_step);
    free(d->stream);
    free(d->wait_start);
    free(d->waits);
    free(d->signals);
    memset(d, 0, sizeof *d);
}
