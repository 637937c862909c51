/* test_pass_semantics.c - every optimizer pass, and the compile-time
 * transforms outside the pass table, keep what a program computes.
 *
 * Random programs (random_program.h) are compiled with every pass on (the
 * reference) and then as variants: each pass of pass_pipeline off alone
 * (the table is walked, so a new pass is covered without touching this
 * file), all passes off, and for the training step the same program with
 * every statement @checkpoint (random_program_ex's RP_CHECKPOINT_ALL: the
 * recompute pass then copies every value the backward pass reads) and a
 * --memory-budget tight enough that the plan recomputes values (where one
 * can be met: small programs' arenas are mostly parameters). Programs whose last value feeds a
 * tied language-model head (random_program_ex's lm_head) are also compiled
 * with the loss in 2 and 3 slices (compiler/loss_chunk.c). The forward entry
 * and the training step of each run on the CPU executor on the same seeded
 * inputs and parameters, and every output, the loss and every updated
 * parameter are compared with the reference's. Every compilation runs the
 * IR verifier after each pass (driver_opts.verify) and once more on the
 * final graph.
 *
 * Exact (bit for bit; NaN matches any NaN):
 *   - cast-hoist: moves a float cast only across ops that commute with
 *     rounding to nearest (movement, negation, |x|, select, max/min, a
 *     product or scatter-add reading a narrow operand it widens exactly);
 *     the values the executor computes are the same bits.
 *   - cse: merges nodes with equal op, attributes and operands, which the
 *     executor (deterministic: double accumulation in a fixed order)
 *     computes to the same bits.
 *   - recompute and the memory budget: compute a forward value again from
 *     the same operands, dropout's mask included (a pure function of seed,
 *     @step and index).
 *   - dce: drops nodes nothing reads.
 * Within a tolerance: the sliced loss adds each slice's weighted mean in
 * another order and sums W's gradient slice by slice (loss_chunk.c); see
 * slice_tolerance.
 *
 * A failure prints one line per program and variant with the seed, then the
 * program, which `netc build` reproduces. NETC_PASS_PROGRAMS=N[:SEED] runs
 * N programs from SEED (default PROGRAMS from 1); NETC_PASS_VERBOSE shows
 * the compiler's diagnostics and the memory budget's choices. */
#include "cpu_exec.h"
#include "driver.h"
#include "ir.h"
#include "mem_budget.h"
#include "passes.h"
#include "program.h"
#include "random_program.h"
#include "tensor_io.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PROGRAMS = 128, MAX_OFF = 16 };

static FILE *diag_sink;   /* random programs' warnings (unused values): expected, not shown */

typedef struct variant {
    char name[64];
    const char *off[MAX_OFF];
    int noff;
    int loss_slices;       /* 1: the whole loss (the reference's) */
    int64_t budget;        /* --memory-budget, 0: none */
    const char *text;      /* another text of the same program (NULL: the program's) */
    bool exact;
} variant;

typedef struct program {
    unsigned long long seed;
    const char *text;
    const char *checkpointed;   /* the same program with every statement @checkpoint */
    bool lm;               /* ends in a tied head (the loss can be sliced) */
    int64_t batch;
    bool printed;          /* its text already shown after a failure */
} program;

static ir_graph *compile(const program *p, bool train, const variant *v)
{
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, diag_sink);
    const char *text = v->text ? v->text : p->text;
    uint32_t id = src_add(&src, "random.net", text, strlen(text));
    const char *dn[] = {"B"};
    driver_opts o = {.verify = true, .train_step = train, .dim_names = dn, .dim_values = &p->batch, .ndims = 1,
                     .loss_slices = v->loss_slices, .memory_budget = v->budget, .disabled_passes = v->off,
                     .ndisabled = v->noff};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    src_free(&src);
    return g;
}

static void fail_header(program *p, bool train, const char *variant_name)
{
    fprintf(stderr, "FAIL seed %llu (%s, B=%lld) %s: ", p->seed, train ? "training step" : "forward",
            (long long)p->batch, variant_name);
}

static void show_program(program *p)
{
    if (p->printed) return;
    p->printed = true;
    fprintf(stderr, "--- seed %llu (netc build random.net --dim B=%lld [--entry train]):\n%s---\n", p->seed,
            (long long)p->batch, p->text);
}

/* Inputs by name (the variants' graphs may list them in another order),
 * seeded by position in the reference: floats in [-2, 2), integers (token
 * ids, labels, targets) below 10, @step far from 0, other scalars such as
 * @lr 0.5. */
static bool make_inputs(const ir_graph *ref, const ir_graph *g, cpu_tensor *in)
{
    for (uint32_t i = 0; i < g->ninputs; i++) {
        uint32_t r = 0;
        while (r < ref->ninputs && strcmp(ref->inputs[r].name, g->inputs[i].name)) r++;
        if (r == ref->ninputs) return false;
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) dim_eval(&g->dims[g->inputs[i].shape[k]], NULL, &shape[k]);
        cpu_tensor_alloc(&in[i], g->inputs[i].dtype, g->inputs[i].rank, shape, 0);
        const char *name = g->inputs[i].name;
        for (int64_t j = 0; j < in[i].numel; j++)
            cpu_set(&in[i], j, !strcmp(name, "@step")      ? 100007
                               : name[0] == '@'             ? 0.5
                               : dtype_is_float(in[i].dtype) ? nc_rng_uniform(1, r, (uint64_t)j) * 4 - 2
                                                             : (double)(nc_rng_hash(1, r, (uint64_t)j) % 10));
    }
    return true;
}

/* Parameters as initialised, with constant ones (gains of 1, biases of 0)
 * spread so that a variant mixing two of them up shows. */
static void make_params(const ir_graph *g, cpu_tensor *params)
{
    char err[256];
    for (uint32_t i = 0; i < g->nparams; i++) {
        param_init(g, i, 3, &params[i], err, sizeof err);
        bool constant = true;
        for (int64_t j = 1; j < params[i].numel; j++) constant &= cpu_get(&params[i], j) == cpu_get(&params[i], 0);
        for (int64_t j = 0; constant && j < params[i].numel; j++)
            cpu_set(&params[i], j, cpu_get(&params[i], j) + nc_rng_uniform(7, i, (uint64_t)j) * 0.4 - 0.2);
    }
}

typedef struct run_result {
    cpu_exec_result res;
    bool ok;
} run_result;

static run_result run(const ir_graph *ref, const ir_graph *g)
{
    run_result r = {0};
    cpu_tensor *in = calloc(g->ninputs + 1, sizeof *in), *params = calloc(g->nparams + 1, sizeof *params);
    char err[512];
    if (!make_inputs(ref, g, in)) {
        fprintf(stderr, "an input the reference does not have\n");
    } else {
        make_params(g, params);
        cpu_exec_opts o = {.inputs = in, .params = params};
        r.ok = cpu_exec_run(g, &o, &r.res, err, sizeof err) == 0;
        if (!r.ok) fprintf(stderr, "the executor fails: %s\n", err);
    }
    for (uint32_t i = 0; i < g->ninputs; i++) cpu_tensor_free(&in[i]);
    for (uint32_t i = 0; i < g->nparams; i++) cpu_tensor_free(&params[i]);
    free(in);
    free(params);
    return r;
}

/* The lowest float precision any node of g computes in: what a rounding
 * that the sliced loss moves by one unit can be seen at downstream. */
static nc_dtype narrowest(const ir_graph *g)
{
    nc_dtype t = NC_F32;
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].dtype == NC_BF16) t = NC_BF16;
        else if (g->nodes[v].dtype == NC_F16 && t == NC_F32) t = NC_F16;
    return t;
}

/* The sliced loss is the same sum in another order: the loss and W's
 * gradient differ from the whole head's by a few f32 units (each slice's
 * mean rounded once, the slices' gradients added in f32), within 1e-5 of
 * the tensor's scale as test_loss_chunk measures (these programs: under
 * 3e-7). Where the step goes on in bf16 or f16 (the head's gradient is
 * rounded to h's dtype), such a difference can flip the rounding of a
 * narrow value, one unit of that dtype (2^-8, 2^-11 relative), which later
 * ops carry to other gradients: 4 units of the narrowest dtype, of each
 * tensor's largest magnitude, leaves room for one flip doubled on its way.
 * A wrong weight for a slice (1/2 where it is 1/3) moves the loss by far
 * more. */
static double slice_tolerance(const ir_graph *g)
{
    nc_dtype t = narrowest(g);
    return t == NC_BF16 ? 4 * 0x1p-8 : t == NC_F16 ? 4 * 0x1p-11 : 1e-5;
}

/* The largest difference a tolerance let through, as a fraction of it, by
 * the program's narrowest dtype (f32, f16, bf16): how close the sliced
 * losses come to failing. */
static double worst_of_tolerance[3];
static int tolerance_kind;

/* got against want, bit for bit or (tol > 0) within tol of want's largest
 * finite magnitude; a mismatch is described in why. */
static bool same_tensor(const cpu_tensor *got, const cpu_tensor *want, double tol, char *why, size_t cap)
{
    if (got->numel != want->numel || got->dtype != want->dtype) {
        snprintf(why, cap, "%lld elements of %s, want %lld of %s", (long long)got->numel, dtype_name(got->dtype),
                 (long long)want->numel, dtype_name(want->dtype));
        return false;
    }
    double scale = 0;
    for (int64_t j = 0; tol > 0 && j < want->numel; j++)
        if (isfinite(cpu_get(want, j))) scale = fmax(scale, fabs(cpu_get(want, j)));
    for (int64_t j = 0; j < want->numel; j++) {
        double a = cpu_get(got, j), b = cpu_get(want, j);
        bool ok = !want->f ? got->i[j] == want->i[j]
                : tol > 0 && isfinite(a) && isfinite(b) ? fabs(a - b) <= tol * scale
                                                       : same_bits(got->f[j], want->f[j]);
        if (ok && tol > 0 && isfinite(a) && isfinite(b) && scale > 0)
            worst_of_tolerance[tolerance_kind] = fmax(worst_of_tolerance[tolerance_kind], fabs(a - b) / (tol * scale));
        if (!ok) {
            if (tol > 0) snprintf(why, cap, "element %lld is %.9g, want %.9g (beyond %.3g of the largest, %.3g)", (long long)j, a, b, tol, scale);
            else snprintf(why, cap, "element %lld is %.9g, want %.9g (bit for bit)", (long long)j, a, b);
            return false;
        }
    }
    return true;
}

/* Every output by name, the loss, every update by parameter: false, with
 * one line saying which differs first, if any does. */
static bool compare(program *p, bool train, const variant *v, const ir_graph *ref, const cpu_exec_result *rr,
                    const ir_graph *g, const cpu_exec_result *gr, double tol)
{
    char why[256];
    for (uint32_t k = 0; k < ref->noutputs; k++) {
        uint32_t i = 0;
        while (i < g->noutputs && strcmp(g->outputs[i].name, ref->outputs[k].name)) i++;
        bool ok = i < g->noutputs;
        if (!ok) snprintf(why, sizeof why, "missing");
        else ok = same_tensor(&gr->values[g->outputs[i].value], &rr->values[ref->outputs[k].value], tol, why, sizeof why);
        if (!ok) {
            fail_header(p, train, v->name);
            fprintf(stderr, "output %s: %s\n", ref->outputs[k].name, why);
            return false;
        }
    }
    if (train && ref->train.loss != IR_NONE &&
        (g->train.loss == IR_NONE ||
         !same_tensor(&gr->values[g->train.loss], &rr->values[ref->train.loss], tol, why, sizeof why))) {
        fail_header(p, train, v->name);
        fprintf(stderr, "the loss: %s\n", g->train.loss == IR_NONE ? "missing" : why);
        return false;
    }
    if (g->nupdates != ref->nupdates) {
        fail_header(p, train, v->name);
        fprintf(stderr, "%u updates, want %u\n", g->nupdates, ref->nupdates);
        return false;
    }
    for (uint32_t k = 0; k < ref->nupdates; k++) {
        uint32_t i = 0;
        while (i < g->nupdates && g->updates[i].param != ref->updates[k].param) i++;
        bool ok = i < g->nupdates;
        if (!ok) snprintf(why, sizeof why, "missing");
        else ok = same_tensor(&gr->values[g->updates[i].value], &rr->values[ref->updates[k].value], tol, why, sizeof why);
        if (!ok) {
            fail_header(p, train, v->name);
            fprintf(stderr, "update of %s: %s\n", ref->params[ref->updates[k].param].decl.name, why);
            return false;
        }
    }
    return true;
}

static int count_flag(const ir_graph *g, uint32_t flag)
{
    int n = 0;
    for (ir_value v = 0; v < g->nnodes; v++) n += (g->nodes[v].flags & flag) != 0;
    return n;
}

static int count_op(const ir_graph *g, nc_op op)
{
    int n = 0;
    for (ir_value v = 0; v < g->nnodes; v++) n += g->nodes[v].op == op;
    return n;
}

static int variants_run, budgets_recomputing, slices_applied, copies;

/* Compile variant v of p, run it, compare with the reference; false on a
 * failure (reported). */
static bool check_variant(program *p, bool train, const variant *v, const ir_graph *ref, const cpu_exec_result *rr)
{
    ir_graph *g = compile(p, train, v);
    if (!g) {
        fail_header(p, train, v->name);
        fprintf(stderr, "does not compile (or the IR verifier objects)\n");
        return false;
    }
    bool ok = ir_verify(g, stderr) == 0;
    if (!ok) {
        fail_header(p, train, v->name);
        fprintf(stderr, "the final IR does not verify\n");
    }
    if (ok && v->loss_slices > 1) {   /* the head is sliced, or this variant tests nothing */
        int parts = count_op(g, train ? OP_CROSS_ENTROPY_GRAD : OP_CROSS_ENTROPY);
        ok = parts >= 2;
        slices_applied += ok;
        if (!ok) {
            fail_header(p, train, v->name);
            fprintf(stderr, "the loss is not sliced (%d cross entropies)\n", parts);
        }
    }
    if (v->text) copies += count_flag(g, IR_FLAG_RECOMPUTE);
    run_result r = ok ? run(ref, g) : (run_result){0};
    if (ok && !r.ok) {
        fail_header(p, train, v->name);
        fprintf(stderr, "does not run\n");
        ok = false;
    }
    nc_dtype t = narrowest(ref);
    tolerance_kind = t == NC_BF16 ? 2 : t == NC_F16 ? 1 : 0;
    if (ok) ok = compare(p, train, v, ref, rr, g, &r.res, v->exact ? 0 : slice_tolerance(ref));
    if (r.ok) cpu_exec_result_free(&r.res);
    ir_graph_free(g);
    variants_run++;
    return ok;
}

/* A budget the step without one does not meet, so the plan must recompute:
 * the tightest of a few fractions of the arena it needs that can be met
 * (fractions too tight are an error, not a plan), or 0 when none can. */
static int64_t forcing_budget(program *p, const ir_graph *ref)
{
    char err[256];
    int64_t peak = mem_budget_planned_peak(ref, false, err, sizeof err);
    /* what a session holds beside the arena (unfused: no batches' tables), which no plan changes */
    int64_t side = NRT_MATMUL_WORKSPACE_BYTES + NRT_STAGE_SLOTS * nrt_program_staged_bytes(ref, NULL);
    if (peak <= side) return 0;
    for (int percent = 40; percent <= 95; percent += 5) {
        variant v = {.loss_slices = 1, .budget = side + (peak - side) * percent / 100};
        ir_graph *g = compile(p, true, &v);
        int recomputed = g ? count_flag(g, IR_FLAG_RECOMPUTE) : 0;
        ir_graph_free(g);
        if (recomputed > 0) return v.budget;
    }
    return 0;
}

/* The variants of one entry: each pass off, all off, and what applies. */
static int variants_of(program *p, bool train, const ir_graph *ref, variant *out)
{
    int n = 0;
    for (int i = 0; i < pass_count; i++) {
        variant *v = &out[n++];
        *v = (variant){.loss_slices = 1, .exact = true, .noff = 1};
        v->off[0] = pass_pipeline[i].name;
        snprintf(v->name, sizeof v->name, "--no-%s", pass_pipeline[i].name);
    }
    variant *all = &out[n++];
    *all = (variant){.loss_slices = 1, .exact = true};
    snprintf(all->name, sizeof all->name, "no passes");
    for (int i = 0; i < pass_count && i < MAX_OFF; i++) all->off[all->noff++] = pass_pipeline[i].name;
    if (train) {   /* every value recomputed that the backward pass reads, each statement a region */
        out[n] = (variant){.loss_slices = 1, .exact = true, .text = p->checkpointed};
        snprintf(out[n++].name, sizeof out[0].name, "every statement @checkpoint");
    }
    if (p->lm)
        for (int k = 2; k <= 3; k++) {
            out[n] = (variant){.loss_slices = k};
            snprintf(out[n++].name, sizeof out[0].name, "--loss-slices %d", k);
        }
    if (train) {
        int64_t budget = forcing_budget(p, ref);
        if (budget > 0) {
            budgets_recomputing++;
            out[n] = (variant){.loss_slices = 1, .budget = budget, .exact = true};
            snprintf(out[n++].name, sizeof out[0].name, "--memory-budget %lld", (long long)budget);
        }
    }
    return n;
}

static void check_entry(program *p, bool train)
{
    variant refv = {.loss_slices = 1, .exact = true};
    snprintf(refv.name, sizeof refv.name, "every pass");
    ir_graph *ref = compile(p, train, &refv);
    if (!ref || ir_verify(ref, stderr) != 0) {
        fail_header(p, train, refv.name);
        fprintf(stderr, "does not compile (or the IR verifier objects)\n");
        show_program(p);
        failures++;
        ir_graph_free(ref);
        return;
    }
    run_result rr = run(ref, ref);
    if (!rr.ok) {
        fail_header(p, train, refv.name);
        fprintf(stderr, "does not run\n");
        show_program(p);
        failures++;
        ir_graph_free(ref);
        return;
    }
    variant vs[MAX_OFF + 8];
    int n = variants_of(p, train, ref, vs);
    for (int i = 0; i < n; i++)
        if (!check_variant(p, train, &vs[i], ref, &rr.res)) {
            show_program(p);
            if (vs[i].text) fprintf(stderr, "--- its text for %s:\n%s---\n", vs[i].name, vs[i].text);
            failures++;
        }
    cpu_exec_result_free(&rr.res);
    ir_graph_free(ref);
}

int main(void)
{
    unsigned long long count = PROGRAMS, first = 1;
    const char *env = getenv("NETC_PASS_PROGRAMS");
    if (env && sscanf(env, "%llu:%llu", &count, &first) < 1) {
        fprintf(stderr, "NETC_PASS_PROGRAMS=%s: expected N or N:SEED\n", env);
        return 2;
    }
    diag_sink = getenv("NETC_PASS_VERBOSE") ? stderr : fopen("/dev/null", "w");
    static char text[RP_TEXT + 4096], checkpointed[RP_TEXT + 4096];
    int programs = 0, heads = 0;
    for (unsigned long long s = first; s < first + count; s++) {
        /* every third seed through a tied head where its last value fits one */
        bool lm = s % 3 == 0 && random_program_ex(s, text, sizeof text, RP_LM_HEAD);
        if (!lm && !random_program(s, text, sizeof text)) continue;
        if (!random_program_ex(s, checkpointed, sizeof checkpointed, (lm ? RP_LM_HEAD : 0) | RP_CHECKPOINT_ALL)) continue;
        program p = {.seed = s, .text = text, .checkpointed = checkpointed, .lm = lm, .batch = s % 2 ? 3 : 2};
        check_entry(&p, false);
        check_entry(&p, true);
        programs++;
        heads += lm;
    }
    if (diag_sink && diag_sink != stderr) fclose(diag_sink);
    printf("%d programs (%d with a tied head), %d variants: %d values recomputed with every statement @checkpoint, "
           "%d training steps under a budget that recomputes, "
           "%d sliced losses (largest difference of the tolerance in f32 %.2g, f16 %.2g, bf16 %.2g); %d failed\n", programs, heads,
           variants_run, copies, budgets_recomputing, slices_applied, worst_of_tolerance[0], worst_of_tolerance[1], worst_of_tolerance[2],
           failures);
    return failures != 0;
}
