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
    return a->first - b->first;
}

static bool overlaps(const memplan_buf *a, const memplan_buf *b) { return a->first <= b->last && b->first <= a->last; }

memplan_result memplan_place(memplan_buf *bufs, uint32_t n, int64_t align)
{
    memplan_result r = {0};
    sort_key *order = nc_xmalloc((n + 1) * sizeof *order);
    uint32_t *placed = nc_xmalloc((n + 1) * sizeof *placed);
    uint32_t nplaced = 0;
    for (uint32_t i = 0; i < n; i++) order[i] = (sort_key){bufs[i].kept, bufs[i].bytes, bufs[i].first, i};
    qsort(order, n, sizeof *order, by_size_desc);
    for (uint32_t k = 0; k < n; k++) {
        memplan_buf *b = &bufs[order[k].index];
        int64_t size = round_up(b->bytes, align);
        b->offset = 0;
        if (size == 0) continue;
        /* the placed buffers alive at the same time, by offset: `placed` is
         * kept in offset order, so no sort per buffer (the search of
         * --memory-budget plans hundreds of steps of thousands of buffers) */
        int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
        for (uint32_t j = 0; j < nplaced; j++) {
            const memplan_buf *c = &bufs[placed[j]];
            if (!overlaps(b, c)) continue;
            /* best fit: the smallest gap that holds it, else the end */
            int64_t gap = c->offset - cursor;
            if (gap >= size && gap < best_gap) best = cursor, best_gap = gap;
            int64_t end = c->offset + round_up(c->bytes, align);
            if (end > cursor) cursor = end;
        }
        b->offset = best >= 0 ? best : cursor;
        if (b->offset + size > r.arena_bytes) r.arena_bytes = b->offset + size;
        if (b->kept && b->offset + size > r.kept_bytes) r.kept_bytes = b->offset + size;
        uint32_t at = nplaced;
        while (at > 0 && bufs[placed[at - 1]].offset > b->offset) at--;
        memmove(placed + at + 1, placed + at, (nplaced - at) * sizeof *placed);
        placed[at] = order[k].index;
        nplaced++;
    }
    /* lower bound: the most bytes alive at one step */
    int32_t last_step = 0;
    for (uint32_t i = 0; i < n; i++) if (bufs[i].last > last_step) last_step = bufs[i].last;
    int64_t *live = nc_xcalloc((size_t)last_step + 2, sizeof *live);
    for (uint32_t i = 0; i < n; i++) {
        if (!bufs[i].bytes) continue;
        live[bufs[i].first] += round_up(bufs[i].bytes, align);
        live[bufs[i].last + 1] -= round_up(bufs[i].bytes, align);
    }
    int64_t cur = 0;
    for (int32_t s = 0; s <= last_step; s++) {
        cur += live[s];
        if (cur > r.lower_bound) r.lower_bound = cur;
    }
    free(live);
    free(order);
    free(placed);
    return r;
}
