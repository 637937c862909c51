/* fuzz_compile.c - libFuzzer target: the input bytes are a .net source file,
 * taken as far as `netc build` takes it short of NVRTC: lowering, autodiff and
 * the optimizer's update for a train section, the passes with the IR verifier
 * after each, and CUDA generation (scheduling, fusion, the memory plan), fused
 * and unfused. fuzz_parse stops at the type checker; this one reaches the
 * stages that only a program that checks can reach.
 *
 * It is also a differential test. Every pass claims to be exact, so the CPU
 * executor must give the same bits with all of them and with none, on the
 * same random inputs and parameters, with each symbolic dim bound to 2. A
 * difference aborts, naming the output and the element. Programs too big to
 * run quickly are compiled but not run.
 *
 * Seeded with the .net files of examples/, stdlib/ and tests/ (scripts/test.sh),
 * so mutations start from programs that compile. README.md here says how to
 * run it by hand and reproduce a failure. */
#include "cpu_exec.h"
#include "cuda_emit.h"
#include "diag.h"
#include "dim.h"
#include "driver.h"
#include "ops.h"
#include "program.h"
#include "source.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum {
    SYM_BINDING = 2,                    /* every symbolic dim, when run */
    MAX_TENSOR_BYTES = 16 << 20,        /* any one value of a run */
};
/* Elementwise work (elements touched, products' multiply-adds) above which a
 * program is compiled but not run: the executor must stay well inside
 * libFuzzer's per-input timeout. */
static const double max_run_work = 1e7;
/* Graphs larger than this (GPT-2's forward at 12 layers has 654 nodes, its
 * training step about 3000) are checked but not generated for, and a
 * forward larger than max_train_nodes gets no training step: code
 * generation grows faster than linearly with depth, and libFuzzer's
 * per-input timeout is a few seconds under the sanitizers (a GPT-2 of 98
 * layers took 10). */
enum { max_generate_nodes = 4000, max_train_nodes = 1000 };

/* FUZZ_COMPILE_VERBOSE=1: say on stderr how far each input got. */
static void progress(const char *fmt, const char *name)
{
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("FUZZ_COMPILE_VERBOSE") != NULL;
    if (verbose) fprintf(stderr, fmt, name);
}

static FILE *null_out(void)
{
    static FILE *out;
    if (!out) {
        out = fopen("/dev/null", "w");
        if (!out) {
            perror("fuzz_compile: /dev/null");
            abort();
        }
    }
    return out;
}

static ir_graph *compile(const uint8_t *data, size_t size, bool passes, bool train_step)
{
    static const char *const all_passes[] = {"cast-hoist", "cse", "recompute", "dce"};
    src_table sources = {0};
    uint32_t id = src_add(&sources, "fuzz.net", (const char *)data, size);
    diag_ctx diag;
    diag_init(&diag, &sources, null_out());
    driver_opts opts = {
        .verify = true,
        .train_step = train_step,
        .fuse = true,
        .disabled_passes = all_passes,
        .ndisabled = passes ? 0 : (int)(sizeof all_passes / sizeof *all_passes),
    };
    ir_graph *g = driver_compile(&sources, id, &opts, &diag);
    if (g && diag_failed(&diag)) {
        ir_graph_free(g);
        g = NULL;
    }
    src_free(&sources);
    return g;
}

/* Code generation must end in a program or an error message, fused or not. */
static void generate(const ir_graph *g)
{
    for (int fuse = 0; fuse < 2; fuse++) {
        nrt_program program;
        char err[512];
        memset(&program, 0, sizeof program);
        if (cuda_emit_program_ex(g, fuse != 0, &program, err, sizeof err)) nrt_program_free(&program);
    }
}

static bool shape_at_binding(const ir_graph *g, uint8_t rank, const uint32_t *dims, int64_t *shape, double *numel)
{
    int64_t syms[NC_MAX_SYMS];
    for (int i = 0; i < NC_MAX_SYMS; i++) syms[i] = SYM_BINDING;
    *numel = 1;
    for (int k = 0; k < rank; k++) {
        if (!dim_eval(&g->dims[dims[k]], syms, &shape[k]) || shape[k] < 0) return false;
        *numel *= (double)shape[k];
    }
    return true;
}

/* The multiply-adds per result element of a product (the inner length of
 * its first operand) or of an attention (twice the keys), 1 otherwise. */
static double inner_work(const ir_graph *g, const ir_node *n)
{
    nc_op_category cat = nc_ops[n->op].category;
    if ((cat != CAT_CONTRACTION && cat != CAT_ATTENTION) || n->nargs < 2) return 1;
    const ir_node *arg = &g->nodes[g->args[n->args_at + (cat == CAT_ATTENTION)]];
    int64_t shape[NC_MAX_RANK];
    double numel;
    if (arg->rank < 2 || !shape_at_binding(g, arg->rank, arg->shape, shape, &numel)) return 1;
    return cat == CAT_ATTENTION ? 2.0 * (double)shape[arg->rank - 2] : (double)shape[arg->rank - 1];
}

/* Whether the CPU executor would finish quickly. */
static bool small_enough(const ir_graph *g)
{
    double work = 0;
    for (uint32_t v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        int64_t shape[NC_MAX_RANK];
        double numel;
        if (!shape_at_binding(g, n->rank, n->shape, shape, &numel)) return false;
        work += numel * inner_work(g, n);
        if (work > max_run_work) return false;
    }
    return true;
}

/* Seeded values: floats in [-2, 2) with a zero, an infinity or a NaN now and
 * then; integers (token ids, labels) in [0, 2), which most tables index. */
static bool make_tensor(const ir_graph *g, const ir_tensor_decl *decl, uint64_t stream, cpu_tensor *t)
{
    int64_t shape[NC_MAX_RANK];
    double numel;
    if (!shape_at_binding(g, decl->rank, decl->shape, shape, &numel)) return false;
    if (!cpu_tensor_alloc(t, decl->dtype, decl->rank, shape, MAX_TENSOR_BYTES)) return false;
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.00390625f, 65520.0f};
    for (int64_t j = 0; j < t->numel; j++) {
        uint64_t h = nc_rng_hash(7, stream, (uint64_t)j);
        if (t->i) t->i[j] = (int32_t)(h % 2);
        else cpu_set(t, j, h % 53 == 0 ? specials[(h >> 8) % 7] : 4.0 * nc_rng_uniform(7, stream, (uint64_t)j) - 2.0);
    }
    return true;
}

static void free_tensors(cpu_tensor *t, uint32_t n)
{
    for (uint32_t i = 0; t && i < n; i++) cpu_tensor_free(&t[i]);
    free(t);
}

/* Run g on the seeded inputs and parameters; false when it cannot run at
 * the binding (an index out of range, a dim that does not fit). */
static bool run(const ir_graph *g, cpu_exec_result *res)
{
    int64_t syms[NC_MAX_SYMS];
    for (int i = 0; i < NC_MAX_SYMS; i++) syms[i] = SYM_BINDING;
    cpu_tensor *in = calloc(g->ninputs + 1, sizeof *in), *params = calloc(g->nparams + 1, sizeof *params);
    bool ok = in && params;
    for (uint32_t i = 0; ok && i < g->ninputs; i++) ok = make_tensor(g, &g->inputs[i], 100 + i, &in[i]);
    for (uint32_t i = 0; ok && i < g->nparams; i++) ok = make_tensor(g, &g->params[i].decl, 1000 + i, &params[i]);
    char err[256];
    cpu_exec_opts o = {.syms = syms, .inputs = in, .params = params, .max_bytes = MAX_TENSOR_BYTES};
    ok = ok && cpu_exec_run(g, &o, res, err, sizeof err) == 0;
    free_tensors(in, g->ninputs);
    free_tensors(params, g->nparams);
    return ok;
}

static bool same_bits(float a, float b)
{
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    return memcmp(&a, &b, sizeof a) == 0;
}

static void differ(const char *what, const char *name, const char *detail)
{
    fprintf(stderr, "fuzz_compile: %s %s: %s with the passes and without\n", what, name, detail);
    abort();
}

static void compare_values(const char *what, const char *name, const cpu_tensor *x, const cpu_tensor *y)
{
    if (x->dtype != y->dtype || x->rank != y->rank || x->numel != y->numel) differ(what, name, "dtype or shape differs");
    for (int64_t j = 0; j < x->numel; j++) {
        if (x->f ? same_bits(x->f[j], y->f[j]) : x->i[j] == y->i[j]) continue;
        char detail[160];
        snprintf(detail, sizeof detail, "element %lld is %.9g and %.9g", (long long)j, x->f ? x->f[j] : x->i[j],
                 y->f ? y->f[j] : y->i[j]);
        differ(what, name, detail);
    }
}

/* The passes may rewrite the graph but not its interface. */
static void compare_interfaces(const ir_graph *a, const ir_graph *b)
{
    if (a->ninputs != b->ninputs || a->nparams != b->nparams || a->noutputs != b->noutputs || a->nupdates != b->nupdates)
        differ("graph", a->name, "inputs, parameters, outputs or updates differ in number");
    for (uint32_t i = 0; i < a->noutputs; i++)
        if (strcmp(a->outputs[i].name, b->outputs[i].name) != 0) differ("output", a->outputs[i].name, "names differ");
    for (uint32_t i = 0; i < a->nupdates; i++)
        if (a->updates[i].param != b->updates[i].param) differ("update", a->name, "updates a different parameter");
}

static void check_exact(const ir_graph *with, const ir_graph *without)
{
    compare_interfaces(with, without);
    if (!small_enough(without)) {
        progress("fuzz_compile: %s: too big to run\n", with->name);
        return;
    }
    cpu_exec_result a, b;
    if (!run(with, &a)) {
        progress("fuzz_compile: %s: does not run at the binding\n", with->name);
        return;
    }
    if (run(without, &b)) {
        progress("fuzz_compile: %s: same results with the passes and without\n", with->name);
        for (uint32_t i = 0; i < with->noutputs; i++)
            compare_values("output", with->outputs[i].name, &a.values[with->outputs[i].value],
                           &b.values[without->outputs[i].value]);
        for (uint32_t i = 0; i < with->nupdates; i++)
            compare_values("updated parameter", with->params[with->updates[i].param].decl.name,
                           &a.values[with->updates[i].value], &b.values[without->updates[i].value]);
        cpu_exec_result_free(&b);
    }
    cpu_exec_result_free(&a);
}

static void build_entry(const uint8_t *data, size_t size, bool train_step, bool *has_train)
{
    ir_graph *with = compile(data, size, true, train_step);
    if (!with) return;
    progress(train_step ? "fuzz_compile: %s: training step built\n" : "fuzz_compile: %s: built\n", with->name);
    *has_train = with->train.present && (train_step || with->nnodes <= max_train_nodes);
    if (with->nnodes <= max_generate_nodes) generate(with);
    ir_graph *without = compile(data, size, false, train_step);
    if (!without) differ("graph", with->name, "builds only with the passes");
    check_exact(with, without);
    ir_graph_free(with);
    ir_graph_free(without);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > SRC_MAX_BYTES) return 0; /* the loader refuses these before the lexer sees them */
    bool has_train = false;
    build_entry(data, size, false, &has_train);
    if (has_train) build_entry(data, size, true, &has_train);
    return 0;
}
