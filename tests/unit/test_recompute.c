/* test_recompute.c - recomputing @checkpoint blocks changes memory, not
 * values: a training step with the pass and without gives bit-identical
 * losses and parameter updates on the CPU executor (dropout included), the
 * recomputed copies are there, and the planned peak memory is lower. The
 * same holds for what --memory-budget chooses by itself. */
#include "cuda_emit.h"
#include "driver.h"
#include "mem_budget.h"
#include "memplan.h"
#include "program.h"
#include "tensor_io.h"

#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *source =
    "model m(x: f32[256, 128]) -> (y: f32[256, 128])\n"
    "  config L = 3\n"
    "{\n"
    "  repeat L @checkpoint {\n"
    "    param w: f32[128, 128] = xavier\n"
    "    param b: f32[128] = zeros\n"
    "    h = dropout(gelu(x @ w + b), p: 0.2, seed: 9)\n"
    "    x = x + tanh(h) * 0.5\n"
    "  }\n"
    "  return x\n"
    "}\n"
    "train m(t: f32[256, 128]) {\n"
    "  loss = mean(square(y - t))\n"
    "  optimizer sgd(lr: 0.01, momentum: 0.9)\n"
    "}\n";

static ir_graph *compile_budget(bool recompute, int64_t budget)
{
    const char *off[] = {"recompute"};
    driver_opts o = {.verify = true, .train_step = true, .disabled_passes = off, .ndisabled = recompute ? 0 : 1,
                     .memory_budget = budget};
    return compile_text("ck.net", source, &o);
}

static ir_graph *compile(bool recompute) { return compile_budget(recompute, 0); }

static int64_t peak_bytes(const ir_graph *g)
{
    char err[512];
    return mem_budget_planned_peak(g, false, err, sizeof err);
}

/* What a GPU session holds beside the arena (no batches without fusion):
 * cuBLASLt's workspace and the landing buffers of staged inputs. A budget
 * counts them too. */
static int64_t side_bytes(const ir_graph *g)
{
    int64_t staged = 0;
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_INPUT) staged += ir_bytes(g, &g->nodes[v], NULL);
    return NRT_MATMUL_WORKSPACE_BYTES + NRT_STAGE_SLOTS * staged;
}

/* A budget of `percent` of the arena the step needs without recomputing. */
static int64_t arena_budget(const ir_graph *without, int percent)
{
    int64_t side = side_bytes(without);
    return side + (peak_bytes(without) - side) * percent / 100;
}

/* A value marked recompute computes a forward value again: the same op on
 * the same shape (and a fill the same number) is there before the loss. The
 * backward pass's own constants (the gradient's seed, fill 1 and its
 * broadcast; the momentum 0.9) were marked too, and have no such original. */
static int marked_without_original(const ir_graph *g)
{
    int bad = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        if (!(n->flags & IR_FLAG_RECOMPUTE)) continue;
        bool found = false;
        for (ir_value u = 0; u < g->train.loss && !found; u++) {
            const ir_node *o = &g->nodes[u];
            found = !(o->flags & IR_FLAG_RECOMPUTE) && o->op == n->op && o->dtype == n->dtype && o->rank == n->rank &&
                    memcmp(o->shape, n->shape, n->rank * sizeof *n->shape) == 0 &&
                    (n->op != OP_FILL || o->attr.f == n->attr.f);
        }
        if (!found && bad++ < 3)
            fprintf(stderr, "%%%u (%s) is marked recompute but computes no forward value\n", v, nc_ops[n->op].name);
    }
    return bad;
}

static bool step(const ir_graph *g, cpu_exec_result *res, cpu_tensor *params, cpu_tensor *inputs)
{
    char err[512];
    for (uint32_t i = 0; i < g->nparams; i++) param_init(g, i, 5, &params[i], err, sizeof err);
    alloc_inputs(g, inputs);
    for (uint32_t i = 0; i < g->ninputs; i++)
        for (int64_t j = 0; j < inputs[i].numel; j++)   /* the scalars: @lr 0.5, dropout's @step 4 */
            cpu_set(&inputs[i], j, g->inputs[i].rank ? nc_rng_uniform(3, i, (uint64_t)j) * 2 - 1
                                   : !strcmp(g->inputs[i].name, "@step") ? 4 : 0.5);
    return run_cpu("ck.net", g, inputs, params, res);
}

/* Compile with budget, check the plan fits and the step's updates equal
 * the unrecomputed step's (rb) bit for bit. Returns the number of values
 * the plan computes again, or -1 when the budget cannot be met. */
static int check_fitted(int64_t budget, const cpu_exec_result *rb, const ir_graph *without)
{
    ir_graph *fitted = compile_budget(false, budget);
    if (!fitted) return -1;
    cpu_tensor pc[32] = {{0}}, ic[8] = {{0}};
    cpu_exec_result rc;
    int64_t peak_fitted = peak_bytes(fitted);
    int recomputed = 0;
    for (ir_value v = 0; v < fitted->nnodes; v++) recomputed += (fitted->nodes[v].flags & IR_FLAG_RECOMPUTE) != 0;
    printf("memory budget %lld: planned peak %lld, %d values recomputed\n", (long long)budget, (long long)peak_fitted,
           recomputed);
    CHECK(peak_fitted <= budget);
    if (step(fitted, &rc, pc, ic)) {
        for (uint32_t k = 0; k < fitted->nupdates; k++) {
            const cpu_tensor *x = &rc.values[fitted->updates[k].value], *y = &rb->values[without->updates[k].value];
            CHECK(x->numel == y->numel && memcmp(x->f, y->f, (size_t)x->numel * sizeof *x->f) == 0);
        }
        cpu_exec_result_free(&rc);
    } else {
        failures++;
    }
    for (uint32_t i = 0; i < fitted->nparams; i++) cpu_tensor_free(&pc[i]);
    for (uint32_t i = 0; i < fitted->ninputs; i++) cpu_tensor_free(&ic[i]);
    ir_graph_free(fitted);
    return recomputed;
}

/* examples/gpt2.net's fused training step at B x T with `layers` layers
 * (NULL: its own 12), within budget bytes (0: none); NULL when it does not
 * compile. */
static ir_graph *gpt2_step_of(int64_t B, int64_t T, const char *layers, int64_t budget)
{
    const char *dn[] = {"B", "T"}, *sn[] = {"L"}, *sv[] = {layers};
    const int64_t dv[] = {B, T};
    driver_opts o = {.verify = true, .train_step = true, .fuse = true, .dim_names = dn, .dim_values = dv, .ndims = 2,
                     .memory_budget = budget, .set_names = sn, .set_values = sv, .nsets = layers ? 1 : 0};
    src_table src = {0};
    ir_graph *g = compile_file("examples/gpt2.net", &o, &src);
    src_free(&src);
    return g;
}

static ir_graph *gpt2_step(int64_t B, int64_t T, int64_t budget) { return gpt2_step_of(B, T, NULL, budget); }

/* Issue 6's goal for examples/gpt2.net's step at 16 x 1024 with
 * --memory-budget 4GiB: everything the session allocates within 4 GiB, the
 * roofline floor at most 10% over the step without a budget (as planned and
 * fused; the device measures the rest). */
static void check_gpt2_budget(void)
{
    const int64_t budget = (int64_t)4 << 30;
    char err[512];
    ir_graph *free_step = gpt2_step(16, 1024, 0), *fitted = gpt2_step(16, 1024, budget);
    CHECK(free_step && fitted);
    if (free_step && fitted) {
        double floor0 = mem_budget_planned_floor(free_step, true, err, sizeof err);
        double floor4 = mem_budget_planned_floor(fitted, true, err, sizeof err);
        int64_t peak4 = mem_budget_planned_peak(fitted, true, err, sizeof err);
        printf("gpt2 16x1024: floor %.2f ms without a budget, %.2f ms (%+.1f%%) within 4 GiB (session holds %.3f GiB)\n",
               floor0 * 1e3, floor4 * 1e3, (floor4 / floor0 - 1) * 100, peak4 / 1073741824.0);
        CHECK(floor0 > 0 && peak4 > 0 && peak4 <= budget && floor4 <= 1.10 * floor0);
    }
    ir_graph_free(free_step);
    ir_graph_free(fitted);
}

/* The CUDA source of g's fused program ("" when it does not emit); the caller frees it. */
static char *fused_source(const ir_graph *g)
{
    nrt_program p;
    char err[512];
    if (!cuda_emit_program_ex(g, true, &p, err, sizeof err)) return nc_xstrdup("");
    char *s = nc_xstrdup(p.source);
    nrt_program_free(&p);
    return s;
}

/* The search keeps each candidate's cost and meets many again: with the
 * cache (the default) and without it (NETC_BUDGET_CACHE=0), every budget
 * gives the same program. GPT-2's step with 2 layers at 8 x 512, budgets
 * from loose (segments keeping what is dear, the headroom filled) to tight
 * (the weights' copies made in each step) and one no plan meets. */
static void check_budget_cache_same_plans(void)
{
    /* the step needs 1.13 GiB under a budget (its loss in 8 slices), the
     * smallest plan 1.00 GiB */
    const double gib[] = {1.10, 1.08, 1.06, 1.05, 1.04, 1.02, 1.01, 0.9};
    int same = 0, fitted = 0;
    for (size_t i = 0; i < NC_COUNT(gib); i++) {
        int64_t budget = (int64_t)(gib[i] * 1073741824.0);
        ir_graph *cached = gpt2_step_of(8, 512, "2", budget);
        setenv("NETC_BUDGET_CACHE", "0", 1);
        ir_graph *compiled = gpt2_step_of(8, 512, "2", budget);
        unsetenv("NETC_BUDGET_CACHE");
        if (!cached || !compiled) {
            same += !cached && !compiled;
        } else {
            char *a = fused_source(cached), *b = fused_source(compiled);
            same += strcmp(a, b) == 0 && *a;
            fitted++;
            free(a);
            free(b);
        }
        ir_graph_free(cached);
        ir_graph_free(compiled);
    }
    printf("gpt2 L=2 8x512: %d of %zu budgets give the same program with the search's cache as without (%d fitted)\n", same,
           NC_COUNT(gib), fitted);
    CHECK(same == (int)NC_COUNT(gib) && fitted >= 5);
}

/* Whether two emissions of a graph are the same program to a memory plan
 * and a roofline floor: the same steps, kernels and their names, temps,
 * slots; the same arena. */
static bool same_program(const ir_graph *g, const nrt_program *a, const nrt_program *b)
{
    if (a->nsteps != b->nsteps || a->nkernels != b->nkernels || a->ntemps != b->ntemps) return false;
    if (memcmp(a->steps, b->steps, a->nsteps * sizeof *a->steps) != 0) return false;
    if (a->ntemps && memcmp(a->temps, b->temps, a->ntemps * sizeof *a->temps) != 0) return false;
    if (!a->slot_values != !b->slot_values ||
        (a->slot_values && memcmp(a->slot_values, b->slot_values, (size_t)a->nsteps * NRT_MAX_BUFS * sizeof *a->slot_values)))
        return false;
    for (uint32_t k = 0; k < a->nkernels; k++)
        if (strcmp(a->kernel_names[k], b->kernel_names[k]) != 0) return false;
    char err[512];
    memplan_result ra, rb;
    memplan_buf *ba = program_plan_memory(g, a, NULL, &ra, err, sizeof err), *bb = program_plan_memory(g, b, NULL, &rb, err, sizeof err);
    bool same = ba && bb && ra.arena_bytes == rb.arena_bytes;
    free(ba);
    free(bb);
    return same;
}

/* --memory-budget's search scores candidates by a program emitted without
 * its source (cuda_emit_program_cost): it is the program the module gets,
 * less the text. The checkpointed step, GPT-2 with 2 layers as it is and
 * as a budget cuts it into segments (the weights' copies carried, and made
 * each step), char_lm as a budget fits it. Each is emitted twice with one
 * memo of bodies across all of them, as the search's candidates are: the
 * second time every body's stores and grid-stride verdict come from it. */
static void check_cost_only_program(void)
{
    ir_graph *gs[5] = {compile(true), gpt2_step_of(8, 512, "2", 0), gpt2_step_of(8, 512, "2", (int64_t)(1.06 * 1073741824.0)),
                       gpt2_step_of(8, 512, "2", (int64_t)(1.01 * 1073741824.0)), NULL};
    size_t n;
    char *text = (char *)slurp("examples/char_lm.net", &n);
    const char *dn[] = {"B"};
    const int64_t dv[] = {256};
    driver_opts o = {.verify = true, .train_step = true, .fuse = true, .dim_names = dn, .dim_values = dv, .ndims = 1,
                     .memory_budget = 240 << 20};
    if (text) gs[4] = compile_text("char_lm.net", text, &o);
    free(text);
    int same = 0;
    cuda_body_memo *memo = cuda_body_memo_new();
    for (int i = 0; i < 5; i++) {
        CHECK(gs[i] != NULL);
        if (!gs[i]) continue;
        nrt_program full, cost, again;
        char err[512];
        bool ok = cuda_emit_program_ex(gs[i], true, &full, err, sizeof err);
        ok = cuda_emit_program_cost(gs[i], true, memo, &cost, err, sizeof err) && ok;
        ok = cuda_emit_program_cost(gs[i], true, memo, &again, err, sizeof err) && ok;
        CHECK(ok);
        if (ok) same += same_program(gs[i], &full, &cost) && same_program(gs[i], &full, &again) && full.source && !cost.source;
        if (ok) nrt_program_free(&full), nrt_program_free(&cost), nrt_program_free(&again);
        ir_graph_free(gs[i]);
    }
    cuda_body_memo_free(memo);
    printf("cost-only programs: %d of 5 the same as the module's, without the source, also from a memo of bodies\n", same);
    CHECK(same == 5);
}

/* Whether the backward pass of g reads forward value v (through its views). */
static bool read_by_backward(const ir_graph *g, ir_value v)
{
    for (ir_value u = g->train.loss + 1; u < g->nnodes; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[u])[i];
            while (a > g->train.loss && g->nodes[a].op == OP_RESHAPE) a = ir_args(g, &g->nodes[a])[0];
            if (a == v) return true;
        }
    return false;
}

/* The segment plans that keep "every matmul and attention result" keep
 * what the backward pass reads: never a matmul's raw product that only a
 * bias add or GELU (its cuBLASLt epilogue) reads - keeping it stored the
 * product unfused, then redid the add and GELU - but the value after them. */
static void check_dear_results_skip_epilogue_products(void)
{
    ir_graph *g = gpt2_step(2, 64, 0);
    CHECK(g != NULL);
    if (!g) return;
    bool *keep = mem_budget_dear_results(g);
    int raw_kept = 0, after_epilogue_kept = 0;
    for (ir_value v = 0; v <= g->train.loss; v++) {
        const ir_node *n = &g->nodes[v];
        if (n->op == OP_MATMUL && keep[v] && !read_by_backward(g, v)) raw_kept++;
        bool on_product = false;
        for (int i = 0; i < n->nargs; i++) on_product |= g->nodes[ir_args(g, n)[i]].op == OP_MATMUL;
        if (keep[v] && on_product && (n->op == OP_ADD || n->op == OP_GELU_TANH)) after_epilogue_kept++;
    }
    printf("gpt2 2x64: %d raw matmul products kept that the backward pass does not read, %d values after an epilogue "
           "kept\n", raw_kept, after_epilogue_kept);
    CHECK(raw_kept == 0 && after_epilogue_kept > 0);
    free(keep);
    ir_graph_free(g);
}

/* A budget that @checkpoint on every block meets: the search finds a plan
 * within it at least as fast by the roofline floor. examples/char_lm.net at
 * batch 256, its blocks marked by hand, against the same file under a budget
 * of what the hand plan needs. (The search had found nothing under 246 MiB
 * here while the hand plan needs 231 MiB: its cuts went by the narrowest
 * point anywhere, the tokens' 16 KiB slice before the first layer.) */
static void check_budget_matches_hand_plan(void)
{
    size_t n;
    char *text = (char *)slurp("examples/char_lm.net", &n), *at = text ? strstr(text, "  repeat L as h {") : NULL;
    CHECK(at != NULL);
    if (!at) {
        free(text);
        return;
    }
    char *hand_text = nc_xmalloc(n + 16);
    snprintf(hand_text, n + 16, "%.*s  @checkpoint%s", (int)(at - text), text, at + 1);
    const char *dn[] = {"B"};
    const int64_t dv[] = {256};
    driver_opts o = {.verify = true, .train_step = true, .fuse = true, .dim_names = dn, .dim_values = dv, .ndims = 1};
    char err[512];
    ir_graph *hand = compile_text("char_lm_checkpointed.net", hand_text, &o);
    CHECK(hand != NULL);
    if (hand) {
        int64_t peak_hand = mem_budget_planned_peak(hand, true, err, sizeof err);
        double floor_hand = mem_budget_planned_floor(hand, true, err, sizeof err);
        o.memory_budget = peak_hand;
        ir_graph *searched = compile_text("char_lm.net", text, &o);
        CHECK(searched != NULL);
        if (searched) {
            int64_t peak = mem_budget_planned_peak(searched, true, err, sizeof err);
            double floor_s = mem_budget_planned_floor(searched, true, err, sizeof err);
            printf("char_lm 256x64: @checkpoint per block %.2f MiB, floor %.3f ms; --memory-budget of that: %.2f MiB, "
                   "floor %.3f ms\n", peak_hand / 1048576.0, floor_hand * 1e3, peak / 1048576.0, floor_s * 1e3);
            CHECK(peak > 0 && peak <= peak_hand && floor_s <= floor_hand);
        }
        ir_graph_free(searched);
    }
    ir_graph_free(hand);
    free(hand_text);
    free(text);
}

int main(void)
{
    ir_graph *with = compile(true), *without = compile(false);
    if (!with || !without) return 1;
    int copies = 0;
    for (ir_value v = 0; v < with->nnodes; v++) copies += (with->nodes[v].flags & IR_FLAG_RECOMPUTE) != 0;
    CHECK(copies > 0);
    CHECK(marked_without_original(with) == 0);
    CHECK(with->nupdates == without->nupdates && with->ninputs == without->ninputs);
    cpu_tensor pa[32] = {{0}}, pb[32] = {{0}}, ia[8] = {{0}}, ib[8] = {{0}};
    cpu_exec_result ra, rb;
    CHECK(with->nparams <= 32 && with->ninputs <= 8);
    if (failures || !step(with, &ra, pa, ia) || !step(without, &rb, pb, ib)) return 1;
    int differ = 0;
    for (uint32_t k = 0; k < with->nupdates; k++) {
        const cpu_tensor *x = &ra.values[with->updates[k].value], *y = &rb.values[without->updates[k].value];
        CHECK(with->updates[k].param == without->updates[k].param && x->numel == y->numel);
        if (x->numel == y->numel && memcmp(x->f, y->f, (size_t)x->numel * sizeof *x->f) != 0) differ++;
    }
    CHECK(differ == 0);
    float la = ra.values[with->train.loss].f[0], lb = rb.values[without->train.loss].f[0];
    CHECK(memcmp(&la, &lb, sizeof la) == 0);
    int64_t peak_with = peak_bytes(with), peak_without = peak_bytes(without);
    printf("recompute: %d copies; loss %.6f both ways; planned peak %lld -> %lld bytes\n", copies, la,
           (long long)peak_without, (long long)peak_with);
    CHECK(peak_with > 0 && peak_with < peak_without);
    /* --memory-budget without @checkpoint marks: the search picks what to
     * recompute, the plan fits, the values are the same; an impossible
     * budget is an error naming the smallest plan */
    /* a budget @checkpoint on every layer meets with room: the search keeps
     * part of what those blocks would compute again */
    CHECK(peak_without > side_bytes(without));
    int searched = check_fitted(arena_budget(without, 85), &rb, without);
    CHECK(searched > 0 && searched < copies);
    /* tighter budgets: each plan fits and computes the same values, until
     * the budget cannot be met (an error, not a plan over it) */
    for (int percent = 80; percent >= 50; percent -= 5)
        if (check_fitted(arena_budget(without, percent), &rb, without) < 0) break;
    CHECK(compile_budget(false, 4096) == NULL);
    int64_t parsed;
    CHECK(mem_budget_parse("4GiB", &parsed) && parsed == (int64_t)4 << 30);
    CHECK(mem_budget_parse("1.5MB", &parsed) && parsed == 1500000);
    CHECK(!mem_budget_parse("4 apples", &parsed) && !mem_budget_parse("-1G", &parsed));
    /* 0.5 would be 0 bytes, that is no budget: refused, as hex and spaces */
    CHECK(!mem_budget_parse("0.5", &parsed) && !mem_budget_parse("1e-4KiB", &parsed));
    CHECK(!mem_budget_parse("0x10GiB", &parsed) && !mem_budget_parse(" 4GiB", &parsed));
    CHECK(mem_budget_parse("0.5KiB", &parsed) && parsed == 512);
    check_dear_results_skip_epilogue_products();
    check_budget_matches_hand_plan();
    check_gpt2_budget();
    check_budget_cache_same_plans();
    check_cost_only_program();
    cpu_exec_result_free(&ra);
    cpu_exec_result_free(&rb);
    for (uint32_t i = 0; i < with->nparams; i++) cpu_tensor_free(&pa[i]), cpu_tensor_free(&pb[i]);
    for (uint32_t i = 0; i < with->ninputs; i++) cpu_tensor_free(&ia[i]), cpu_tensor_free(&ib[i]);
    ir_graph_free(with);
    ir_graph_free(without);
    if (!failures) printf("test_recompute: all checks passed\n");
    return failures != 0;
}
