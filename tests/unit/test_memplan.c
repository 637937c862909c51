/* test_memplan.c - the arena planner: no two live buffers overlap, dead ones
 * are reused, and the arena is near the live-set lower bound. */
#include "memplan.h"

#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static bool disjoint(const memplan_buf *a, const memplan_buf *b)
{
    bool time = a->last < b->first || b->last < a->first;
    bool space = a->offset + a->bytes <= b->offset || b->offset + b->bytes <= a->offset;
    return time || space || !a->bytes || !b->bytes;
}

int main(void)
{
    /* a chain: each buffer lives two steps; the plan needs two slots, not ten */
    memplan_buf chain[10];
    for (int i = 0; i < 10; i++) chain[i] = (memplan_buf){.bytes = 1000, .first = i, .last = i + 1};
    memplan_result r = memplan_place(chain, 10, 256);
    CHECK(r.lower_bound == 2 * 1024);
    CHECK(r.arena_bytes == 2 * 1024);

    /* random intervals: never overlapping, within 1.5x of the lower bound */
    uint64_t x = 12345;
    for (int trial = 0; trial < 200; trial++) {
        memplan_buf b[60];
        for (int i = 0; i < 60; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int first = (int)(x % 50), len = (int)(x >> 20 & 7);
            b[i] = (memplan_buf){.bytes = (int64_t)(x >> 32 & 0xfffff), .first = first, .last = first + len};
        }
        r = memplan_place(b, 60, 256);
        for (int i = 0; i < 60; i++)
            for (int j = i + 1; j < 60; j++) CHECK(disjoint(&b[i], &b[j]));
        CHECK(r.arena_bytes >= r.lower_bound);
        CHECK(r.arena_bytes <= r.lower_bound * 3 / 2);
        for (int i = 0; i < 60; i++) CHECK(b[i].offset % 256 == 0);
    }
    printf("test_memplan: %s\n", failures ? "FAILED" : "all checks passed");
    return failures != 0;
}
