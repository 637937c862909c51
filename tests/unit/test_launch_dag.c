/* test_launch_dag.c - launches spread over streams keep every dependency.
 *
 * For real programs (GPT-2's training step made small, fashion_mlp's, their
 * inference forms) at their memory plan, the stream plan is checked against
 * a definition of "must stay in order" written here apart from launch_dag.c
 * (bytes compared one buffer pair at a time, stores taken from the steps):
 * every such pair must be ordered by the plan's streams and waits. Small
 * hand-made programs check the definition itself, and that independent
 * launches do land on different streams. From the repository root. */
#include "cuda_emit.h"
#include "driver.h"
#include "launch_dag.h"
#include "memplan.h"
#include "program.h"

#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* happens-before from the plan alone: hb[j * n + i] when launch i is
 * ordered before launch j (by its stream's order or by waits) */
static void order_after(uint8_t *hb, uint32_t n, uint32_t j, uint32_t i)
{
    for (uint32_t x = 0; x < n; x++) hb[(size_t)j * n + x] |= hb[(size_t)i * n + x];
    hb[(size_t)j * n + i] = 1;
}

static uint8_t *plan_order(const dag_plan *d)
{
    uint32_t n = d->nlaunches;
    uint8_t *hb = calloc((size_t)n * n + 1, 1);
    int64_t last[DAG_MAX_STREAMS];
    for (int k = 0; k < DAG_MAX_STREAMS; k++) last[k] = -1;
    for (uint32_t j = 0; j < n; j++) {
        if (last[d->stream[j]] >= 0) order_after(hb, n, j, (uint32_t)last[d->stream[j]]);
        for (uint32_t q = d->wait_start[j]; q < d->wait_start[j + 1]; q++) {
            uint32_t i = d->waits[q];
            CHECK(i < j && d->signals[i] && d->stream[i] != d->stream[j]);
            order_after(hb, n, j, i);
        }
        last[d->stream[j]] = j;
    }
    return hb;
}

static bool bytes_meet(const int64_t *off, const int64_t *bytes, uint32_t a, uint32_t b)
{
    return bytes[a] > 0 && bytes[b] > 0 && off[a] < off[b] + bytes[b] && off[b] < off[a] + bytes[a];
}

/* The reference: two launches must keep their order when both are products
 * (one workspace) or some buffer one stores to meets a buffer the other
 * touches. */
static bool must_order(const nrt_program *p, const dag_memory *mem, uint32_t a, uint32_t b)
{
    const int64_t *off = mem->offset, *bytes = mem->bytes;
    const nrt_step *x0 = &p->steps[a], *y0 = &p->steps[b];
    if (mem->one_workspace && x0->kind == NRT_STEP_MATMUL && y0->kind == NRT_STEP_MATMUL) return true;
    for (uint32_t i = a; i < a + nrt_step_launch_len(x0); i++)
        for (uint32_t j = b; j < b + nrt_step_launch_len(y0); j++) {
            const nrt_step *x = &p->steps[i], *y = &p->steps[j];
            uint64_t wx = nrt_step_writes(x), wy = nrt_step_writes(y);
            for (int s = 0; s < x->nbufs; s++)
                for (int t = 0; t < y->nbufs; t++)
                    if (((wx >> s & 1) || (wy >> t & 1)) && bytes_meet(off, bytes, x->bufs[s], y->bufs[t])) return true;
        }
    return false;
}

/* Checks the plans of p at 1, 2, 4 and 8 streams, with one workspace and
 * with one a stream; returns how many launch pairs the 4-stream plan with
 * workspaces of their own (the runtime's) leaves free to overlap. */
static long check_plans(const char *name, const nrt_program *p, const int64_t *off, const int64_t *bytes, uint32_t nbuf)
{
    long free_pairs = 0;
    const uint32_t streams[] = {1, 2, 4, 8};
    for (int c = 0; c < 8; c++) {
        int v = c % 4;
        bool one_workspace = c < 4;
        dag_memory mem = {off, bytes, nbuf, one_workspace};
        dag_plan d;
        char err[256];
        CHECK(dag_plan_build(p, &mem, false, streams[v], &d, err, sizeof err) == 0);
        CHECK(d.nstreams >= 1 && d.nstreams <= streams[v]);
        if (streams[v] == 1) CHECK(d.nwaits == 0);
        uint8_t *hb = plan_order(&d);
        uint32_t n = d.nlaunches, missed = 0;
        long unordered = 0;
        for (uint32_t j = 0; j < n; j++)
            for (uint32_t i = 0; i < j; i++) {
                if (hb[(size_t)j * n + i]) continue;
                unordered++;
                if (must_order(p, &mem, d.first_step[i], d.first_step[j]) && missed++ < 3)
                    fprintf(stderr, "%s, %u streams%s: launches %u and %u (steps %u, %u) conflict but are not ordered\n", name,
                            streams[v], one_workspace ? "" : " and workspaces", i, j, d.first_step[i], d.first_step[j]);
            }
        CHECK(missed == 0);
        if (streams[v] == 4) {
            free_pairs = unordered;
            printf("%s: %u launches; 4 streams%s: %u used, %u waits, %ld pairs free to overlap\n", name, n,
                   one_workspace ? "" : " and workspaces", d.nstreams, d.nwaits, unordered);
        }
        free(hb);
        dag_plan_free(&d);
    }
    return free_pairs;
}

/* A buffer a step touches first (nothing before it in the run does) must be
 * one it stores to, unless the run starts with it (an input, a parameter,
 * what a prepare step keeps): a kernel's store mask that misses a result
 * shows here. */
static void check_first_touch_writes(const char *name, const ir_graph *g, const nrt_program *p)
{
    uint32_t nbuf = g->nnodes + p->ntemps, bad = 0;
    bool *seen = calloc(nbuf + 1, 1);
    for (uint32_t v = 0; v < g->nnodes; v++) seen[v] = g->nodes[v].op == OP_INPUT || g->nodes[v].op == OP_PARAM;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        const nrt_step *s = &p->steps[k];
        uint64_t w = nrt_step_writes(s);
        for (int j = 0; j < s->nbufs; j++) {
            uint32_t b = s->bufs[j];
            if (!seen[b] && !(w >> j & 1) && bad++ < 3)
                fprintf(stderr, "%s: step %u (%s) reads buffer %u before anything stores to it\n", name, k,
                        s->kind == NRT_STEP_KERNEL ? p->kernel_names[s->kernel] : "a product", b);
        }
        for (int j = 0; j < s->nbufs; j++) seen[s->bufs[j]] = true;
    }
    CHECK(bad == 0);
    free(seen);
}

static long check_model(const char *name, const char *path, bool train, const char *const *dn, const int64_t *dv, int nd,
                        const char *const *sn, const char *const *sv, int nsets)
{
    src_table src = {0};
    char err[1024];
    uint32_t id = src_load(&src, path, err, sizeof err);
    if (!id) { fprintf(stderr, "%s\n", err); failures++; return 0; }
    diag_ctx dg;
    diag_init(&dg, &src, stderr);
    driver_opts o = {.verify = true, .train_step = train, .fuse = true, .dim_names = dn, .dim_values = dv, .ndims = nd,
                     .set_names = sn, .set_values = sv, .nsets = nsets};
    ir_graph *g = driver_compile(&src, id, &o, &dg);
    src_free(&src);
    if (!g) { failures++; return 0; }
    nrt_program p;
    long free_pairs = 0;
    CHECK(cuda_emit_program_ex(g, true, &p, err, sizeof err));
    memplan_result r;
    memplan_buf *b = program_plan_memory(g, &p, NULL, &r, err, sizeof err);
    CHECK(b != NULL);
    if (b) {
        uint32_t nbuf = g->nnodes + p.ntemps;
        int64_t *off = calloc(nbuf + 1, sizeof *off), *bytes = calloc(nbuf + 1, sizeof *bytes);
        for (uint32_t i = 0; i < nbuf; i++) off[i] = b[i].offset, bytes[i] = b[i].bytes;
        check_first_touch_writes(name, g, &p);
        free_pairs = check_plans(name, &p, off, bytes, nbuf);
        free(off);
        free(bytes);
    }
    free(b);
    nrt_program_free(&p);
    ir_graph_free(g);
    return free_pairs;
}

/* ---- hand-made programs ---------------------------------------------------- */

static nrt_step kernel_step(uint32_t nbufs, const uint32_t *bufs, uint64_t writes)
{
    nrt_step s = {.kind = NRT_STEP_KERNEL, .grid = NRT_GRID_ELEMENTS, .nbufs = (uint8_t)nbufs, .nints = 1, .writes = writes};
    memcpy(s.bufs, bufs, nbufs * sizeof *bufs);
    return s;
}

static void check_small_programs(void)
{
    /* buffers 0..5, 100 bytes each; 4 shares buffer 1's memory (reused after it dies) */
    const int64_t off[] = {0, 100, 200, 300, 100, 500}, bytes[] = {100, 100, 100, 100, 100, 100};
    dag_memory mem = {off, bytes, 6, true};
    nrt_step steps[5];
    steps[0] = kernel_step(2, (uint32_t[]){0, 1}, 2);   /* 1 = f(0) */
    steps[1] = kernel_step(2, (uint32_t[]){0, 2}, 2);   /* 2 = g(0): independent of step 0 */
    steps[2] = kernel_step(2, (uint32_t[]){1, 3}, 2);   /* 3 = h(1): after step 0 */
    steps[3] = kernel_step(2, (uint32_t[]){2, 4}, 2);   /* 4 = k(2), over 1's memory: after steps 1 and 2 */
    steps[4] = kernel_step(2, (uint32_t[]){0, 5}, 2);   /* 5 = m(0): independent */
    nrt_program p = {.steps = steps, .nsteps = 5};
    CHECK(!dag_launches_conflict(&p, &mem, 0, 1));
    CHECK(dag_launches_conflict(&p, &mem, 0, 2));   /* read after write */
    CHECK(dag_launches_conflict(&p, &mem, 2, 3));   /* write after read, through the memory plan */
    CHECK(dag_launches_conflict(&p, &mem, 0, 3));   /* write after write */
    CHECK(!dag_launches_conflict(&p, &mem, 1, 4));  /* two reads of 0 */
    dag_plan d;
    char err[128];
    CHECK(dag_plan_build(&p, &mem, false, 4, &d, err, sizeof err) == 0);
    CHECK(d.nstreams >= 2);
    CHECK(d.stream[1] != d.stream[0]);   /* independent: side by side */
    uint8_t *hb = plan_order(&d);
    CHECK(hb[2 * 5 + 0] && hb[3 * 5 + 1] && hb[3 * 5 + 2]);
    CHECK(!hb[1 * 5 + 0]);
    free(hb);
    dag_plan_free(&d);
    /* two products never overlap: they share cuBLASLt's workspace */
    nrt_step mm[2] = {{.kind = NRT_STEP_MATMUL, .nbufs = 3, .bufs = {0, 1, 2}, .nints = 3},
                      {.kind = NRT_STEP_MATMUL, .nbufs = 3, .bufs = {0, 1, 3}, .nints = 3}};
    nrt_program q = {.steps = mm, .nsteps = 2};
    CHECK(dag_launches_conflict(&q, &mem, 0, 1));
    /* a buffer the program does not have is an error, not a guess */
    steps[4].bufs[1] = 9;
    CHECK(dag_plan_build(&p, &mem, false, 2, &d, err, sizeof err) != 0 && strstr(err, "buffer 9"));
}

int main(void)
{
    check_small_programs();
    const char *bt[] = {"B", "T"}, *b[] = {"B"};
    const int64_t vbt[] = {2, 64}, v16[] = {16};
    const char *sn[] = {"L", "V", "C", "H", "MAXT"}, *sv[] = {"2", "512", "128", "2", "64"};
    long gpt2 = check_model("gpt2 train (2 layers, D=64)", "examples/gpt2.net", true, bt, vbt, 2, sn, sv, 5);
    CHECK(gpt2 > 0);
    check_model("gpt2 forward (2 layers, D=64)", "examples/gpt2.net", false, bt, vbt, 2, sn, sv, 5);
    check_model("fashion_mlp train", "examples/fashion_mlp.net", true, b, v16, 1, NULL, NULL, 0);
    const char *csn[] = {"T", "C"}, *csv[] = {"32", "64"};
    check_model("char_lm train", "examples/char_lm.net", true, b, (const int64_t[]){4}, 1, csn, csv, 2);
    printf("test_launch_dag: %s\n", failures ? "FAILED" : "all checks passed");
    return failures != 0;
}
