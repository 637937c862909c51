/* memplan.c - best-fit placement of live intervals into one arena. */
#include "memplan.h"
#include "base.h"

#include <stdlib.h>
#include <string.h>

static int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) & ~(a - 1); }

/* What a buffer is sorted by, carried with its index: the comparators
 * read nothing else, so that sessions created at once on several threads
 * plan without sharing state (a global base pointer once raced there). */
typedef struct sort_key {
    bool kept;
    int64_t key;       /* its size */
    int32_t first;
    uint32_t index;
} sort_key;

static int by_size_desc(const void *x, const void *y)
{
    const sort_key *a = x, *b = y;
    if (a->kept != b->kept) return a->kept ? -1 : 1;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    if (a->first != b->first) return a->first - b->first;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The address ranges some placed buffers cover: sorted, disjoint, touching
 * ranges merged. A buffer goes where the union of those alive beside it
 * leaves the smallest hole that holds it, so unions are all a placement
 * needs, and placed buffers pack into few ranges. */
typedef struct span {
    int64_t lo, hi;
} span;

typedef struct span_set {
    span *s;
    uint32_t n, cap;
} span_set;

static void span_add(span_set *u, int64_t lo, int64_t hi)
{
    uint32_t a = 0, b = u->n;
    while (a < b) {   /* the first range that ends at or after lo */
        uint32_t m = a + (b - a) / 2;
        if (u->s[m].hi < lo) a = m + 1;
        else b = m;
    }
    uint32_t j = a;
    for (; j < u->n && u->s[j].lo <= hi; j++) {
        if (u->s[j].lo < lo) lo = u->s[j].lo;
        if (u->s[j].hi > hi) hi = u->s[j].hi;
    }
    /* mostly the range is there already or joins one: no moves */
    if (j == a + 1) {
        u->s[a] = (span){lo, hi};
        return;
    }
    if (j == a) {
        if (u->n == u->cap) u->cap = u->cap ? 2 * u->cap : 4, u->s = nc_xrealloc(u->s, u->cap * sizeof *u->s);
        memmove(u->s + a + 1, u->s + a, (u->n - a) * sizeof *u->s);
        u->n++;
    } else {
        memmove(u->s + a + 1, u->s + j, (u->n - j) * sizeof *u->s);
        u->n -= j - a - 1;
    }
    u->s[a] = (span){lo, hi};
}

/* A segment tree over the steps. A buffer's steps split into the tree's
 * canonical nodes; cover[v] unions the buffers with v among theirs, sub[v]
 * those with one at or below v. Whatever is alive at some step of [a, b]
 * is in sub[] of [a, b]'s canonical nodes or in cover[] of a node above
 * them, all of which lie on the paths from leaves a and b to the root. */
typedef struct run {
    const span *at, *end;
} run;

typedef struct step_tree {
    uint32_t leaves;        /* a power of two */
    span_set *cover, *sub;  /* by node, 1 the root, leaves + s step s */
    uint32_t *seen;         /* the last insertion or query that reached the node */
    uint32_t stamp;
    run *runs;              /* a query's sets, at most two per level */
    uint32_t nruns;
} step_tree;

static void tree_init(step_tree *t, int32_t steps)
{
    uint32_t levels = 1;
    t->leaves = 1;
    while ((int32_t)t->leaves < steps) t->leaves *= 2, levels++;
    t->cover = nc_xcalloc(2 * t->leaves, sizeof *t->cover);
    t->sub = nc_xcalloc(2 * t->leaves, sizeof *t->sub);
    t->seen = nc_xcalloc(2 * t->leaves, sizeof *t->seen);
    t->stamp = 0;
    t->runs = nc_xmalloc(4 * levels * sizeof *t->runs);
    t->nruns = 0;
}

static void tree_free(step_tree *t)
{
    for (uint32_t v = 1; v < 2 * t->leaves; v++) free(t->cover[v].s), free(t->sub[v].s);
    free(t->cover);
    free(t->sub);
    free(t->seen);
    free(t->runs);
}

/* v and the nodes above it, up to one this insertion reached already */
static void tree_add_sub(step_tree *t, uint32_t v, int64_t lo, int64_t hi)
{
    for (; v && t->seen[v] != t->stamp; v /= 2) {
        t->seen[v] = t->stamp;
        span_add(&t->sub[v], lo, hi);
    }
}

static void tree_insert(step_tree *t, int32_t first, int32_t last, int64_t lo, int64_t hi)
{
    t->stamp++;
    for (uint32_t l = (uint32_t)first + t->leaves, r = (uint32_t)last + t->leaves + 1; l < r; l /= 2, r /= 2) {
        if (l & 1) span_add(&t->cover[l], lo, hi), tree_add_sub(t, l, lo, hi), l++;
        if (r & 1) --r, span_add(&t->cover[r], lo, hi), tree_add_sub(t, r, lo, hi);
    }
}

static void tree_use(step_tree *t, const span_set *u)
{
    if (u->n) t->runs[t->nruns++] = (run){u->s, u->s + u->n};
}

/* The sets that together hold what is alive at some step of [first, last]. */
static void tree_query(step_tree *t, int32_t first, int32_t last)
{
    t->nruns = 0;
    t->stamp++;
    for (uint32_t l = (uint32_t)first + t->leaves, r = (uint32_t)last + t->leaves + 1; l < r; l /= 2, r /= 2) {
        if (l & 1) tree_use(t, &t->sub[l++]);
        if (r & 1) tree_use(t, &t->sub[--r]);
    }
    for (uint32_t v = ((uint32_t)first + t->leaves) / 2; v; v /= 2) t->seen[v] = t->stamp, tree_use(t, &t->cover[v]);
    for (uint32_t v = ((uint32_t)last + t->leaves) / 2; v && t->seen[v] != t->stamp; v /= 2) tree_use(t, &t->cover[v]);
}

/* The top of what the runs cover from cursor up without a hole: the runs
 * move past what lies below it, and runs done are dropped. */
static int64_t covered_to(run *runs, uint32_t *n, int64_t cursor)
{
    for (bool grew = true; grew;) {
        grew = false;
        for (uint32_t j = 0; j < *n; j++) {
            while (runs[j].at != runs[j].end && runs[j].at->hi <= cursor) runs[j].at++;
            if (runs[j].at == runs[j].end) runs[j--] = runs[--*n];
            else if (runs[j].at->lo <= cursor) cursor = runs[j].at->hi, grew = true;
        }
    }
    return cursor;
}

/* best fit: the smallest hole that holds size, the lowest of equal ones,
 * else the top of what is there. The holes are those of the union of the
 * runs' ranges (which overlap where several sets hold one buffer): from
 * the top of a covered stretch to the lowest start above it. */
static int64_t best_fit(run *runs, uint32_t n, int64_t size)
{
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (;;) {
        cursor = covered_to(runs, &n, cursor);
        if (!n) break;
        int64_t next = INT64_MAX;
        for (uint32_t j = 0; j < n; j++)
            if (runs[j].at->lo < next) next = runs[j].at->lo;
        if (next - cursor >= size && next - cursor < best_gap) best = cursor, best_gap = next - cursor;
        cursor = next;
    }
    return best >= 0 ? best : cursor;
}

/* The buffers that need memory in the order they are placed: kept first,
 * larger first, earlier first, then by index (a stable sort's order, which
 * glibc's qsort gave before the index was a key). Those that need none
 * lie at 0. */
static uint32_t place_order(memplan_buf *bufs, uint32_t n, int64_t align, sort_key *order, int32_t *steps)
{
    uint32_t m = 0;
    *steps = 1;
    for (uint32_t i = 0; i < n; i++) {
        bufs[i].offset = 0;
        if (round_up(bufs[i].bytes, align) == 0) continue;
        NC_ASSERT(bufs[i].bytes > 0 && 0 <= bufs[i].first && bufs[i].first <= bufs[i].last);
        order[m++] = (sort_key){bufs[i].kept, bufs[i].bytes, bufs[i].first, i};
        if (bufs[i].last >= *steps) *steps = bufs[i].last + 1;
    }
    qsort(order, m, sizeof *order, by_size_desc);
    return m;
}

/* the most bytes alive at one step: no plan needs less */
static int64_t live_peak(const memplan_buf *bufs, uint32_t n, int64_t align)
{
    int32_t last_step = 0;
    for (uint32_t i = 0; i < n; i++) if (bufs[i].last > last_step) last_step = bufs[i].last;
    int64_t *live = nc_xcalloc((size_t)last_step + 2, sizeof *live);
    for (uint32_t i = 0; i < n; i++) {
        if (!bufs[i].bytes) continue;
        live[bufs[i].first] += round_up(bufs[i].bytes, align);
        live[bufs[i].last + 1] -= round_up(bufs[i].bytes, align);
    }
    int64_t cur = 0, peak = 0;
    for (int32_t s = 0; s <= last_step; s++) {
        cur += live[s];
        if (cur > peak) peak = cur;
    }
    free(live);
    return peak;
}

memplan_result memplan_place(memplan_buf *bufs, uint32_t n, int64_t align)
{
    memplan_result r = {0};
    sort_key *order = nc_xmalloc((n + 1) * sizeof *order);
    int32_t steps;
    uint32_t m = place_order(bufs, n, align, order, &steps);
    step_tree t;
    tree_init(&t, steps);
    for (uint32_t k = 0; k < m; k++) {
        memplan_buf *b = &bufs[order[k].index];
        int64_t size = round_up(b->bytes, align);
        tree_query(&t, b->first, b->last);
        b->offset = best_fit(t.runs, t.nruns, size);
        if (b->offset + size > r.arena_bytes) r.arena_bytes = b->offset + size;
        if (b->kept && b->offset + size > r.kept_bytes) r.kept_bytes = b->offset + size;
        tree_insert(&t, b->first, b->last, b->offset, b->offset + size);
    }
    tree_free(&t);
    free(order);
    r.lower_bound = live_peak(bufs, n, align);
    return r;
}
