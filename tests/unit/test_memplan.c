/* test_memplan.c - the arena planner: no two live buffers overlap, dead ones
 * are reused, and the arena is near the live-set lower bound. Threads
 * planning at once (sessions created together) get the plans one thread
 * gets. */
#include "cuda_emit.h"
#include "driver.h"
#include "memplan.h"
#include "program.h"

#include "test_util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool disjoint(const memplan_buf *a, const memplan_buf *b)
{
    bool time = a->last < b->first || b->last < a->first;
    bool space = a->offset + a->bytes <= b->offset || b->offset + b->bytes <= a->offset;
    return time || space || !a->bytes || !b->bytes;
}

/* The plan of a real training step: buffers live at the same step never
 * share memory, except an elementwise step's output placed over an operand
 * that dies at that very step (in place). Liveness is recomputed here from
 * the steps, independently of the planner. */
static bool fused_kernel(const nrt_program *p, const nrt_step *s)
{
    const char *k = p->kernel_names[s->kernel];
    size_t n = strlen(k);
    return s->kind == NRT_STEP_KERNEL && n > 6 && strcmp(k + n - 6, "_fused") == 0;
}

/* The training step of source, its program and its memory plan; NULL (and a
 * failed check) when it does not compile. */
typedef struct planned {
    ir_graph *g;
    nrt_program p;
    memplan_result r;
    memplan_buf *b;
} planned;

static bool plan_step(const char *name, const char *source, bool fuse, planned *pl)
{
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    uint32_t id = src_add(&src, name, source, strlen(source));
    driver_opts o = {.verify = true, .train_step = true};
    pl->g = driver_compile(&src, id, &o, &d);
    src_free(&src);
    char err[512];
    bool emitted = pl->g && cuda_emit_program_ex(pl->g, fuse, &pl->p, err, sizeof err);
    CHECK(emitted);
    if (!emitted) {
        ir_graph_free(pl->g);
        return false;
    }
    pl->b = program_plan_memory(pl->g, &pl->p, NULL, &pl->r, err, sizeof err);
    CHECK(pl->b != NULL);
    return true;
}

static void planned_free(planned *pl)
{
    free(pl->b);
    nrt_program_free(&pl->p);
    ir_graph_free(pl->g);
}

static void check_program_plan(const char *name, const char *source, bool fuse)
{
    planned pl;
    if (!plan_step(name, source, fuse, &pl)) return;
    const ir_graph *g = pl.g;
    const nrt_program p = pl.p;
    const memplan_result r = pl.r;
    const memplan_buf *b = pl.b;
    uint32_t nbuf = g->nnodes + p.ntemps;
    int32_t *first = malloc(nbuf * sizeof *first), *last = malloc(nbuf * sizeof *last);
    for (uint32_t i = 0; i < nbuf; i++) first[i] = INT32_MAX, last[i] = -1;
    for (uint32_t k = 0; k < p.nsteps; k++)
        for (int j = 0; j < p.steps[k].nbufs; j++) {
            uint32_t x = p.steps[k].bufs[j];
            if ((int32_t)k < first[x]) first[x] = (int32_t)k;
            if ((int32_t)k > last[x]) last[x] = (int32_t)k;
        }
    for (uint32_t v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_INPUT || g->nodes[v].op == OP_PARAM) first[v] = 0, last[v] = (int32_t)p.nsteps;
    for (uint32_t i = 0; i < g->noutputs; i++) last[g->outputs[i].value] = (int32_t)p.nsteps;
    int in_place = 0, bad = 0;
    for (uint32_t i = 0; b && i < nbuf; i++)
        for (uint32_t j = i + 1; j < nbuf; j++) {
            if (last[i] < 0 || last[j] < 0 || !b[i].bytes || !b[j].bytes) continue;
            bool space = b[i].offset + b[i].bytes <= b[j].offset || b[j].offset + b[j].bytes <= b[i].offset;
            if (space || last[i] < first[j] || last[j] < first[i]) continue;
            /* overlapping in time and memory: allowed only as an in-place step */
            uint32_t dying = last[i] <= last[j] ? i : j, born = dying == i ? j : i;
            const nrt_step *s = &p.steps[last[dying]];
            bool born_here = false, dying_read = false;
            for (int q = 0; q < s->nbufs; q++) born_here |= s->bufs[q] == born, dying_read |= s->bufs[q] == dying;
            bool per_element = s->kind == NRT_STEP_KERNEL &&
                               (nc_ops[g->nodes[s->node].op].category == CAT_ELEMENTWISE || fused_kernel(&p, s));
            bool ok = first[born] == last[dying] && born_here && dying_read && per_element && b[i].bytes == b[j].bytes;
            if (ok) in_place++;
            else if (bad++ < 5) fprintf(stderr, "%s: buffers %u and %u overlap while both are live\n", name, i, j);
        }
    CHECK(bad == 0);
    CHECK(in_place > 0);
    /* what a run keeps for the next (inputs, parameters, outputs) lies below kept_bytes: another
       session may use the rest between runs */
    int kept_wrong = 0;
    for (uint32_t i = 0; b && i < nbuf; i++)
        if (b[i].bytes && last[i] == (int32_t)p.nsteps && b[i].offset + b[i].bytes > r.kept_bytes) kept_wrong++;
    CHECK(kept_wrong == 0);
    CHECK(r.kept_bytes > 0 && r.kept_bytes < r.arena_bytes);
    printf("%s: arena %lld bytes (lower bound %lld), %d in-place steps\n", name, (long long)r.arena_bytes,
           (long long)r.lower_bound, in_place);
    free(first);
    free(last);
    planned_free(&pl);
}

/* An output that is an input or a parameter is a copy of it (passes.c): a
 * step of its own that reads the tensor before any step writes it (the
 * training step's update, in place or copied back), into a buffer the
 * tensor does not share. It stood for the tensor's memory, which the GPU
 * read after the step had updated it. */
static void check_output_copies(const char *name, const char *source)
{
    planned pl;
    if (!plan_step(name, source, true, &pl)) return;
    const ir_graph *g = pl.g;
    const nrt_program p = pl.p;
    const memplan_result r = pl.r;
    const memplan_buf *b = pl.b;
    int copies = 0;
    for (uint32_t i = 0; b && i < g->noutputs; i++) {
        ir_value v = g->outputs[i].value;
        CHECK(g->nodes[v].op != OP_INPUT && g->nodes[v].op != OP_PARAM);
        if (g->nodes[v].op != OP_COPY) continue;
        ir_value src_v = ir_args(g, &g->nodes[v])[0];
        int32_t read = -1, written = INT32_MAX;
        for (uint32_t k = 0; k < p.nsteps; k++) {
            const nrt_step *s = &p.steps[k];
            uint64_t w = nrt_step_writes(s);
            for (int j = 0; j < s->nbufs; j++) {
                if (s->bufs[j] == src_v && (w >> j & 1) && (int32_t)k < written) written = (int32_t)k;
                if (s->bufs[j] == v && s->kind == NRT_STEP_COPY && s->bufs[0] == src_v) read = (int32_t)k;
            }
        }
        copies++;
        CHECK(read >= 0 && read < written);
        bool apart = b[v].offset + b[v].bytes <= b[src_v].offset || b[src_v].offset + b[src_v].bytes <= b[v].offset;
        CHECK(b[v].bytes > 0 && apart && b[v].offset + b[v].bytes <= r.kept_bytes);
    }
    CHECK(copies == 2);
    planned_free(&pl);
}

enum { PLANNERS = 4, PLAN_BUFS = 2000, PLAN_ROUNDS = 6 };

typedef struct planner {
    memplan_buf *bufs;         /* a random set of its own */
    int64_t offsets[PLAN_BUFS];   /* its plan on one thread */
    int64_t arena;
    int wrong;                 /* rounds whose plan differed */
} planner;

static void *plan_rounds(void *p)
{
    planner *t = p;
    for (int r = 0; r < PLAN_ROUNDS; r++) {
        memplan_result res = memplan_place(t->bufs, PLAN_BUFS, 256);
        bool same = res.arena_bytes == t->arena;
        for (int i = 0; i < PLAN_BUFS; i++) same &= t->bufs[i].offset == t->offsets[i];
        t->wrong += !same;
    }
    return NULL;
}

/* The planner's comparators read the buffers through a global: threads
 * planning at once sorted by each other's buffers (plans with live buffers
 * over each other, reads of freed memory under ASan). */
static void check_plans_on_threads(void)
{
    static planner t[PLANNERS];
    uint64_t x = 88172645463325252ull;
    for (int k = 0; k < PLANNERS; k++) {
        t[k].bufs = calloc(PLAN_BUFS, sizeof *t[k].bufs);
        for (int i = 0; i < PLAN_BUFS; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int32_t first = (int32_t)(x % 500);
            t[k].bufs[i] = (memplan_buf){.bytes = (int64_t)(x >> 20) % 100000 + 1, .first = first,
                                         .last = first + (int32_t)((x >> 40) % 50), .kept = (x >> 60) == 0};
        }
        t[k].arena = memplan_place(t[k].bufs, PLAN_BUFS, 256).arena_bytes;
        for (int i = 0; i < PLAN_BUFS; i++) t[k].offsets[i] = t[k].bufs[i].offset;
    }
    pthread_t th[PLANNERS];
    for (int k = 0; k < PLANNERS; k++) CHECK(pthread_create(&th[k], NULL, plan_rounds, &t[k]) == 0);
    for (int k = 0; k < PLANNERS; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < PLANNERS; k++) {
        if (t[k].wrong) fprintf(stderr, "planner %d: %d of %d plans made beside other threads differ from its own\n", k, t[k].wrong, PLAN_ROUNDS);
        CHECK(t[k].wrong == 0);
        free(t[k].bufs);
    }
}

/* The best fit as memplan_place made it before it kept unions of placed
 * ranges in a tree over the steps: every placed buffer alive beside the
 * next is a conflict, the conflicts sorted by offset, the smallest gap
 * between them that holds the buffer (the lowest of equal ones), else the
 * top of them. Same order of placement: kept first, larger first, earlier
 * first, then by index. */
static int ref_by_size(const void *x, const void *y)
{
    const memplan_buf *a = *(const memplan_buf *const *)x, *b = *(const memplan_buf *const *)y;
    if (a->kept != b->kept) return a->kept ? -1 : 1;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    if (a->first != b->first) return a->first - b->first;
    return a < b ? -1 : a > b;
}

static int ref_by_offset(const void *x, const void *y)
{
    int64_t a = (*(const memplan_buf *const *)x)->offset, b = (*(const memplan_buf *const *)y)->offset;
    return a < b ? -1 : a > b;
}

static int64_t ref_size(const memplan_buf *x, int64_t align) { return (x->bytes + align - 1) / align * align; }

static int64_t ref_place(memplan_buf *b, uint32_t n, int64_t align)
{
    memplan_buf **order = malloc(n * sizeof *order), **placed = malloc(n * sizeof *placed);
    memplan_buf **conflict = malloc(n * sizeof *conflict);
    uint32_t nplaced = 0;
    int64_t arena = 0;
    for (uint32_t i = 0; i < n; i++) order[i] = &b[i];
    qsort(order, n, sizeof *order, ref_by_size);
    for (uint32_t k = 0; k < n; k++) {
        memplan_buf *x = order[k];
        int64_t size = ref_size(x, align);
        x->offset = 0;
        if (!size) continue;
        uint32_t nc = 0;
        for (uint32_t j = 0; j < nplaced; j++)
            if (x->first <= placed[j]->last && placed[j]->first <= x->last) conflict[nc++] = placed[j];
        qsort(conflict, nc, sizeof *conflict, ref_by_offset);
        int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
        for (uint32_t j = 0; j < nc; j++) {
            int64_t gap = conflict[j]->offset - cursor, end = conflict[j]->offset + ref_size(conflict[j], align);
            if (gap >= size && gap < best_gap) best = cursor, best_gap = gap;
            if (end > cursor) cursor = end;
        }
        x->offset = best >= 0 ? best : cursor;
        if (x->offset + size > arena) arena = x->offset + size;
        placed[nplaced++] = x;
    }
    free(order);
    free(placed);
    free(conflict);
    return arena;
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* A random set of one of several shapes. Few distinct sizes (zero among
 * them, and sizes off the alignment) and few distinct first steps: many
 * buffers tie on every key but their index, many gaps tie. Some live the
 * whole run, as parameters do; some are short, as a step's temporaries. */
static uint32_t random_set(memplan_buf *b, uint32_t cap, uint64_t *x, int64_t align)
{
    uint32_t n = (uint32_t)(xorshift(x) % cap) + 1;
    int32_t steps = (int32_t)(xorshift(x) % 300) + 1;
    int sizes = (int)(xorshift(x) % 8) + 1, firsts = (int)(xorshift(x) % 40) + 1;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t r = xorshift(x);
        int32_t first = (int32_t)((r & 63) % (uint64_t)firsts * (uint64_t)steps / (uint64_t)firsts);
        int32_t len = (r >> 8 & 3) == 0 ? steps : (int32_t)((r >> 10) % (uint64_t)(1 + (r >> 20 & 1 ? steps : 8)));
        int64_t bytes = (int64_t)((r >> 30) % (uint64_t)sizes) * (align * 3 + 1) / 2;   /* 0, and off the alignment */
        b[i] = (memplan_buf){.bytes = bytes, .first = first, .last = len >= steps - first ? steps - 1 : first + len,
                             .kept = (r >> 40 & 7) == 0};
        if (b[i].last < b[i].first) b[i].last = b[i].first;
    }
    return n;
}

static void check_same_as_reference(void)
{
    enum { CAP = 400 };
    static const int64_t aligns[] = {1, 8, 256, 4096};
    memplan_buf b[CAP], ref[CAP];
    uint64_t x = 987654321;
    int differ = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int64_t align = aligns[trial % 4];
        uint32_t n = random_set(b, CAP, &x, align);
        memcpy(ref, b, n * sizeof *b);
        memplan_result r = memplan_place(b, n, align);
        bool same = r.arena_bytes == ref_place(ref, n, align);
        for (uint32_t i = 0; i < n; i++) same &= b[i].offset == ref[i].offset && b[i].offset % align == 0;
        if (!same && differ++ < 3) fprintf(stderr, "trial %d (%u buffers, align %lld): the plan is not the reference's\n", trial, n, (long long)align);
    }
    CHECK(differ == 0);
}

int main(void)
{
    check_same_as_reference();
    check_plans_on_threads();
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
    for (int fuse = 0; fuse < 2; fuse++)
        check_program_plan(fuse ? "mlp.net (fused)" : "mlp.net",
                           "model m(x: f32[64, 32], t: f32[64, 8]) -> f32 {\n"
                           "  param w1: f32[32, 64] = xavier\n  param w2: f32[64, 8] = xavier\n"
                           "  h = gelu(x @ w1) * 2.0 + 1.0\n  return mean(square(tanh(h) @ w2 - t))\n}\n"
                           "train m { optimizer adamw(lr: 0.01, weight_decay: 0.1) }\n", fuse);
    check_output_copies("returns.net", "model m(x: f32[64, 32], t: f32[64, 8]) -> (l: f32, w: f32[32, 8], xin: f32[64, 32]) {\n"
                                       "  param w2: f32[32, 8] = xavier\n"
                                       "  return mean(square(tanh(x @ w2) - t)), w2, x\n}\n"
                                       "train m { loss = l\n  optimizer sgd(lr: 0.1) }\n");
    printf("test_memplan: %s\n", failures ? "FAILED" : "all checks passed");
    return failures != 0;
}
