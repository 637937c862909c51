/* test_kernels_host.c - the generated CUDA kernels, run on the CPU.
 *
 * Every kernel of a program is compiled as C++ for the host after
 * cuda_host_shim.hpp, which runs a launch's threads as fibers with working
 * barriers and warp shuffles (row-wise ops, reductions and attention
 * included). The program is followed over its buffers as the GPU would
 * (shared buffers shared), running each kernel with the runtime's launch
 * shape and taking matmuls' and copies' results from the CPU executor (a
 * matmul step is checked against its operands); every operand read and
 * every result written is compared with the executor's; a kernel whose
 * result the memory plan may put in an operand's memory runs again that
 * way and must agree too. This checks the code generator, fusion included,
 * on a machine without a GPU: the 32-bit index path of kernels at these
 * sizes, and (compiled with NC_WIDE_INDEX) the 64-bit one. Skipped (77)
 * when no C++ compiler is found. */
#include "cpu_exec.h"
#include "cuda_emit.h"
#include "driver.h"
#include "program.h"
#include "random_program.h"
#include "tensor_io.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
/* Where the front end's diagnostics go (random programs: nowhere, their
 * warnings about values they never use are expected). */
static FILE *diag_out;
/* Compile the kernels with NC_WIDE_INDEX: their 64-bit index path, which
 * otherwise only sizes of 2^31 elements and more take. */
static bool wide_index;
/* Compile the kernels with NC_HOST_WGMMA: attention's heads of 64 take the
 * path of sm_90a images (wgmma products, swizzled tiles), emulated by the shim. */
static bool host_wgmma;
/* Run the program a second time with the shim's launches reversed (blocks
 * last to first, each block's threads in the other order): every kernel's
 * results must be the same bits, as a training step's must be from one run
 * to the next on a GPU. */
static bool check_order;

typedef struct nc_args {
    void *buf[NRT_MAX_BUFS];
    long long n[NRT_MAX_INTS];
    unsigned long long step;
} nc_args;

/* The executor's value in the storage layout the kernels use. */
static void *to_storage(const cpu_tensor *t)
{
    void *p = calloc((size_t)t->numel + 1, dtype_size(t->dtype));
    cpu_tensor_to_native(t, p);
    return p;
}

/* Within the dtype's rounding of the value, or of floor x the tensor's
 * largest value for values much smaller than that. */
static bool close_enough(double got, double want, nc_dtype t, double scale, double floor)
{
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    double tol = t == NC_BF16 ? 1.6e-2 : t == NC_F16 ? 2e-3 : dtype_is_float(t) ? 2e-5 : 0;
    return fabs(got - want) <= tol * fmax(fabs(want), floor * scale) + 1e-30;
}

typedef void kernel_fn(nc_args);
typedef int launch_fn(void (*thunk)(void *), void *ctx, long long blocks, long long threads, char *err, size_t errcap);

/* What each fiber of a launch runs: the kernel with the step's arguments. */
typedef struct launch_ctx {
    kernel_fn *fn;
    nc_args args;
} launch_ctx;

static void run_kernel(void *p)
{
    launch_ctx *c = p;
    c->fn(c->args);
}

/* The IR value slot j of step k stands for (several values may share one
 * buffer: compiler/cuda_alias.c). */
static uint32_t slot_value(const nrt_program *p, uint32_t k, int j)
{
    return p->slot_values ? p->slot_values[k * NRT_MAX_BUFS + j] : p->steps[k].bufs[j];
}

/* Whether slot j of step k is one the step writes. */
static bool is_result(const ir_graph *g, const nrt_program *p, const cg_ctx *plan, uint32_t k, int j)
{
    const nrt_step *s = &p->steps[k];
    if (s->kind == NRT_STEP_COPY) return j == 1;
    if (s->kind == NRT_STEP_MATMUL) {
        nrt_matmul_slots m = nrt_matmul_slots_of(s);
        return j == m.out || j == m.aux || j == m.colsum;
    }
    (void)g;
    return cuda_kernel_writes(plan, s->node, slot_value(p, k, j));
}

/* The largest finite magnitude in t. */
static double largest(const cpu_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < t->numel; i++)
        if (isfinite(cpu_get(t, i))) m = fmax(m, fabs(cpu_get(t, i)));
    return m;
}

/* An f32 attention gradient sums, over S keys (or queries), P (dP - delta)
 * times a row of k (or q), with dP = dO . v over D: terms of about |q| |k|
 * |v| |dO| whose sum, of sqrt(S D) times that size for terms of random sign,
 * may cancel to nearly nothing (a causal first query's P is 1: its dS is
 * dP - dP). f16 and bf16 gradients keep their own dtype's tolerance. */
static double attention_grad_scale(const ir_graph *g, const cpu_exec_result *res, uint32_t r)
{
    const ir_value *a = ir_args(g, &g->nodes[r]);
    const cpu_tensor *q = &res->values[a[0]], *k = &res->values[a[1]];
    if (q->rank < 2 || k->rank < 2 || g->nodes[r].dtype != NC_F32) return 0;
    double terms = sqrt((double)k->shape[k->rank - 2] * (double)q->shape[q->rank - 1]);
    for (int i = 0; i < 4; i++) terms *= largest(&res->values[a[i]]);   /* q, k, v, dO */
    return terms;
}

/* Layernorm subtracts a row's mean before it divides by the row's spread:
 * x's rounding (the kernel's and the executor's) comes out amplified by
 * max|x| / sigma of the row, and the gradient's by that times 1 / sigma
 * again. The result's scale from that, for layernorm (x, w, b) and its
 * gradient (x, w, g); 0 for other ops. */
static double layernorm_scale(const ir_graph *g, const cpu_exec_result *res, uint32_t r)
{
    const ir_node *n = &g->nodes[r];
    if (n->op != OP_LAYERNORM && n->op != OP_LAYERNORM_GRAD) return 0;
    const ir_value *a = ir_args(g, n);
    const cpu_tensor *x = &res->values[a[0]];
    if (!x->rank || !x->numel || !x->shape[x->rank - 1]) return 0;
    int64_t len = x->shape[x->rank - 1];
    double amp = 0, rstd = 0;
    for (int64_t row = 0; row < x->numel / len; row++) {
        double sum = 0, sq = 0, top = 0;
        for (int64_t i = 0; i < len; i++) {
            double v = cpu_get(x, row * len + i);
            sum += v, sq += v * v, top = fmax(top, fabs(v));
        }
        double mean = sum / (double)len, r_std = 1.0 / sqrt(fmax(sq / (double)len - mean * mean, 0.0) + n->attr.f);
        amp = fmax(amp, top * r_std), rstd = fmax(rstd, r_std);
    }
    double w = largest(&res->values[a[1]]);
    return n->op == OP_LAYERNORM ? amp * w : amp * rstd * w * largest(&res->values[a[2]]);
}

/* A sum's rounding error grows with its terms, not its result: a sum that
 * cancels to nearly nothing (the gradient of a mean's subtraction, of a
 * softmax over equal gradients) is within rounding of n times its largest
 * term. That bound for a reduction (n: the elements summed into one) or a
 * row op (n: the row), with the product of the operands' largest
 * magnitudes for the largest term; 0 for other ops. */
static double sum_scale(const ir_graph *g, const cpu_exec_result *res, uint32_t r)
{
    const ir_node *n = &g->nodes[r];
    nc_op_category cat = nc_ops[n->op].category;
    if ((cat != CAT_REDUCTION && cat != CAT_ROWWISE) || n->nargs < 1) return 0;
    const cpu_tensor *first = &res->values[ir_args(g, n)[0]], *out = &res->values[r];
    if (!first->numel || !out->numel || !first->rank) return 0;
    /* softmax's sum is of positive terms, and the loss's gradient is
     * softmax less the target's one: each element within rounding of
     * itself (an element of the row taken for another shows). log_softmax,
     * x - lse, cancels x's magnitude at most. */
    if (n->op == OP_SOFTMAX || n->op == OP_CROSS_ENTROPY_GRAD) return 0;
    if (n->op == OP_LOG_SOFTMAX) return largest(first);
    double terms = cat == CAT_REDUCTION ? (double)(first->numel / out->numel) : (double)first->shape[first->rank - 1];
    for (int i = 0; i < n->nargs; i++) {
        const cpu_tensor *a = &res->values[ir_args(g, n)[i]];
        if (dtype_is_float(a->dtype)) terms *= largest(a);
    }
    return terms;
}

/* The scale of the rounding noise a kernel's result may carry where the
 * value (or the fused group's producer) is a cancelling sum, a layernorm
 * of a narrow row, or an f32 attention gradient: the tolerance is taken
 * from that when it exceeds the result's own largest magnitude. */
static double cancellation_scale(const ir_graph *g, const cpu_exec_result *res, uint32_t v, uint32_t producer)
{
    double scale = 0;
    for (int i = 0; i < 2; i++) {
        uint32_t r = i ? producer : v;
        if (i && r == v) break;
        scale = fmax(scale, fmax(sum_scale(g, res, r), layernorm_scale(g, res, r)));
        if (g->nodes[r].op == OP_ATTENTION_GRAD) scale = fmax(scale, attention_grad_scale(g, res, r));
    }
    return scale;
}

static bool matches(const ir_graph *g, const cpu_exec_result *res, const char *name, uint32_t k, const char *what,
                    const void *got, const cpu_tensor *want, uint32_t v, uint32_t producer)
{
    /* tensor-core attention rounds probabilities and score gradients to the
     * operands' dtype before its second product (as flash attention does):
     * a gradient's small elements carry the rounding of large terms (also
     * where the kernel writes them into another value's columns): a key
     * gradient sums 70 such terms with cancellation, about 0.4 of an ulp of
     * the largest element in f16 (tests/unit attention f16, D=64). Random
     * programs over fewer positions reach 1.6 ulps in the forward and 2.6
     * (bf16) to 3.4 (f16) in a gradient; the same program's errors are 6 to
     * 8 times smaller in f16 than in bf16, as rounding's are (a wrong tile
     * or mask would not shrink). Floors: 0.3 (1.2 ulps of the largest
     * element) for the forward, 0.9 (3.7 ulps) for a gradient. */
    const ir_node *pn = &g->nodes[producer];
    double floor = pn->op == OP_ATTENTION_GRAD && pn->dtype != NC_F32 ? 0.9
                 : nc_ops[pn->op].category == CAT_ATTENTION          ? 0.3
                                                                      : 0.05;
    /* a narrow reduction that stores its f32 accumulator as the widened
     * value skips the executor's rounding to the narrow dtype: judged by it */
    nc_dtype tol = want->dtype;
    const ir_node *vn = &g->nodes[v];
    if (nc_ops[g->nodes[producer].op].category == CAT_REDUCTION && vn->op == OP_CAST && ir_args(g, vn)[0] == producer)
        tol = g->nodes[producer].dtype;
    double scale = fmax(largest(want), cancellation_scale(g, res, v, producer));
    for (int64_t i = 0; i < want->numel; i++) {
        double x = cpu_native_get(want->dtype, got, i), w = cpu_get(want, i);
        if (!close_enough(x, w, tol, scale, floor)) {
            fprintf(stderr, "%s: step %u (%s) %%%u[%lld] = %.9g, the executor has %.9g (scale %g, %s)\n", name, k, what, v, (long long)i, x, w, scale, dtype_name(want->dtype));
            return false;
        }
    }
    return true;
}

/* Whether a matmul step's result agrees with the executor's: the product in
 * f32, then the epilogue (residual, bias, activation) as cuBLASLt applies
 * it, rounded once. The executor rounds after each op, so the bound is set
 * by the magnitudes before the last rounding, not by the result's. */
static bool host_matmul_agrees(const char *name, uint32_t k, const nrt_step *s, const nc_args *a, const cpu_tensor *want_out,
                               const cpu_tensor *want_aux, const cpu_tensor *want_colsum)
{
    nrt_matmul_slots slot = nrt_matmul_slots_of(s);
    int br = s->mm_batch_rank;
    long long batch = 1;
    for (int i = 0; i < br; i++) batch *= a->n[i];
    long long M = a->n[br], N = a->n[br + 1], K = a->n[br + 2];
    double eps = s->mm_dtype == NC_F32 ? 1e-5 : s->mm_dtype == NC_F16 ? 2e-3 : 1.6e-2;
    double *colsum = calloc((size_t)N + 1, sizeof *colsum), *colsize = calloc((size_t)N + 1, sizeof *colsize);
    for (long long bi = 0; bi < batch; bi++)
        for (long long i = 0; i < M; i++)
            for (long long j = 0; j < N; j++) {
                double acc = 0, size = 0;
                for (long long q = 0; q < K; q++) {
                    long long ia = bi * M * K + (s->mm_ta ? q * M + i : i * K + q);
                    long long ib = (s->mm_b_shared ? 0 : bi * K * N) + (s->mm_tb ? j * K + q : q * N + j);
                    double t = cpu_native_get(s->mm_dtype, a->buf[0], ia) * cpu_native_get(s->mm_dtype, a->buf[1], ib);
                    acc += t, size += fabs(t);
                }
                long long o = (bi * M + i) * N + j;
                double extra[2] = {slot.residual >= 0 ? cpu_native_get(s->mm_out_dtype, a->buf[slot.residual], o) : 0,
                                   slot.bias >= 0 ? cpu_native_get(s->mm_out_dtype, a->buf[slot.bias], j) : 0};
                size = fmax(size, fabs(acc)) + fabs(extra[0]) + fabs(extra[1]);
                acc += extra[0] + extra[1];
                double pre = acc;
                if (s->mm_epilogue & NRT_EPI_DGELU) {   /* the product times gelu_tanh' at the auxiliary input */
                    double x = cpu_native_get(s->mm_out_dtype, a->buf[slot.aux_in], o), kk = 0.79788456080286536;
                    double t = tanh(kk * (x + 0.044715 * x * x * x));
                    double slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kk * (1 + 0.134145 * x * x);
                    size *= fmax(1.0, fabs(slope));
                    acc *= slope;
                }
                if (s->mm_epilogue & NRT_EPI_RELU) acc = acc > 0 ? acc : 0;
                if (s->mm_epilogue & NRT_EPI_GELU) acc = 0.5 * acc * (1 + tanh(0.79788456080286536 * (acc + 0.044715 * acc * acc * acc)));
                double got[2] = {cpu_get(want_out, o), want_aux ? cpu_get(want_aux, o) : pre}, wantv[2] = {acc, pre};
                colsum[j] += acc, colsize[j] += size;
                for (int w = 0; w < 2; w++)
                    if (!(fabs(got[w] - wantv[w]) <= 2 * eps * size + 1e-6)) {
                        fprintf(stderr, "%s: step %u (matmul, epilogue 0x%x) %s[%lld] = %.9g from the operands, the executor has %.9g\n",
                                name, k, s->mm_epilogue, w ? "aux" : "out", o, wantv[w], got[w]);
                        free(colsum), free(colsize);
                        return false;
                    }
            }
    bool ok = true;
    for (long long j = 0; want_colsum && j < N && ok; j++)   /* BGRAD: the sums of out's rows */
        if (!(fabs(cpu_get(want_colsum, j) - colsum[j]) <= 2 * eps * colsize[j] + 1e-6)) {
            fprintf(stderr, "%s: step %u (matmul, epilogue 0x%x) column sum [%lld] = %.9g from the operands, the executor has %.9g\n",
                    name, k, s->mm_epilogue, j, colsum[j], cpu_get(want_colsum, j));
            ok = false;
        }
    free(colsum), free(colsize);
    return ok;
}

static void eval_ints(const ir_graph *g, const nrt_step *s, nc_args *a)
{
    for (int j = 0; j < s->nints; j++) {
        int64_t v;
        a->n[j] = dim_eval(&g->dims[s->ints[j]], NULL, &v) ? v : 0;
    }
}

/* A temporary's host memory, made on first use (NaN bits: a read before any
 * kernel writes it shows). */
static void *temp_memory(const ir_graph *g, const nrt_program *p, void **mem, uint32_t b)
{
    if (!mem[b]) {
        const nrt_temp *t = &p->temps[b - g->nnodes];
        int64_t n = 0;
        if (!dim_eval(&g->dims[t->numel], NULL, &n)) n = 0;
        mem[b] = malloc((size_t)n * dtype_size(t->dtype) + 16);
        memset(mem[b], 0xff, (size_t)n * dtype_size(t->dtype) + 16);
    }
    return mem[b];
}

/* What run_steps follows the program with. */
typedef struct host_run {
    const char *name;
    const ir_graph *g;
    const nrt_program *p;
    void *lib;
    const cpu_exec_result *res;
    cg_ctx *plan;
    launch_fn *launch;
    void **mem;
    const uint32_t *first_write, *last_write;
    uint64_t *digest;   /* per step, a hash of the bits its kernel wrote as results */
    int bad, matmuls, batches, batched_steps, carried, in_place;
} host_run;

static const char *step_what(const nrt_program *p, const nrt_step *s)
{
    return s->kind == NRT_STEP_KERNEL ? p->kernel_names[s->kernel] : s->kind == NRT_STEP_COPY ? "copy" : "matmul";
}

/* Step k's arguments over the host buffers. */
static void step_args(const host_run *u, uint32_t k, nc_args *a)
{
    const nrt_step *s = &u->p->steps[k];
    *a = (nc_args){.step = 0};
    eval_ints(u->g, s, a);
    for (int j = 0; j < s->nbufs; j++) a->buf[j] = u->mem[s->bufs[j]];
}

/* Before step k: its operands must hold the executor's values; its results
 * get the executor's values, or NaN bits where the kernel computes them; a
 * matmul is checked against its operands. Returns the kernel to run, or
 * NULL when the step runs no kernel here. */
static kernel_fn *prepare_step(host_run *u, uint32_t k)
{
    const ir_graph *g = u->g;
    const nrt_program *p = u->p;
    const nrt_step *s = &p->steps[k];
    const char *what = step_what(p, s);
    bool known = true;   /* the executor has every IR value the step touches */
    for (int j = 0; j < s->nbufs; j++) known &= s->bufs[j] >= g->nnodes || u->res->values[slot_value(p, k, j)].numel > 0;
    for (int j = 0; j < s->nbufs; j++) {
        uint32_t b = s->bufs[j], v = slot_value(p, k, j);
        if (b >= g->nnodes) { temp_memory(g, p, u->mem, b); continue; }
        if (is_result(g, p, u->plan, k, j)) continue;
        if (!u->mem[b]) { fprintf(stderr, "%s: step %u (%s) reads buffer %%%u before it is written\n", u->name, k, what, b); u->bad++; }
        else if (u->res->values[v].numel > 0 && !matches(g, u->res, u->name, k, what, u->mem[b], &u->res->values[v], v, v)) u->bad++;
    }
    bool run = known && s->kind == NRT_STEP_KERNEL;
    kernel_fn *fn = run ? (kernel_fn *)(uintptr_t)dlsym(u->lib, p->kernel_names[s->kernel]) : NULL;
    if (run && !fn) { fprintf(stderr, "%s: no symbol %s\n", u->name, p->kernel_names[s->kernel]); u->bad++; run = false; }
    for (int j = 0; j < s->nbufs; j++) {   /* results: computed here, or the executor's */
        uint32_t b = s->bufs[j], v = slot_value(p, k, j);
        if (!is_result(g, p, u->plan, k, j) || b >= g->nnodes || (run && u->first_write[v] != k)) continue;
        const cpu_tensor *want = &u->res->values[s->kind == NRT_STEP_COPY ? slot_value(p, k, 0) : v];
        bool shared = false;   /* in place: the result's buffer is also an operand's */
        for (int i = 0; i < s->nbufs; i++) shared |= i != j && s->bufs[i] == b && !is_result(g, p, u->plan, k, i);
        if (!u->mem[b]) u->mem[b] = calloc((size_t)want->numel + 1, dtype_size(want->dtype));
        void *fresh = to_storage(want);
        if (run && !shared)   /* outputs start as NaN bits, so an element the kernel misses shows */
            memset(fresh, 0xff, (size_t)want->numel * dtype_size(want->dtype));
        if (!run || !shared) memcpy(u->mem[b], fresh, (size_t)want->numel * dtype_size(want->dtype));
        free(fresh);
    }
    if (known && s->kind == NRT_STEP_MATMUL) {   /* the executor's results are in place; do the operands give them? */
        nc_args a;
        step_args(u, k, &a);
        nrt_matmul_slots m = nrt_matmul_slots_of(s);
        u->bad += !host_matmul_agrees(u->name, k, s, &a, &u->res->values[slot_value(p, k, m.out)],
                                      m.aux >= 0 ? &u->res->values[slot_value(p, k, m.aux)] : NULL,
                                      m.colsum >= 0 ? &u->res->values[slot_value(p, k, m.colsum)] : NULL);
        u->matmuls++;
    }
    return run ? fn : NULL;
}

/* element grids: two blocks, so the grid-stride loops take several turns */
static int launch_args(host_run *u, uint32_t k, launch_ctx *c)
{
    const nrt_step *s = &u->p->steps[k];
    int64_t blocks, threads, n[NRT_MAX_INTS];
    char err[256] = "too many blocks";
    for (int j = 0; j < NRT_MAX_INTS; j++) n[j] = c->args.n[j];
    if (!nrt_step_launch(s, n, 2, &blocks, &threads) || u->launch(run_kernel, c, blocks, threads, err, sizeof err) != 0) {
        fprintf(stderr, "%s: step %u (%s) does not run: %s\n", u->name, k, step_what(u->p, s), err);
        return -1;
    }
    return 0;
}

/* Whether the memory plan may give the result in slot out the memory of
 * the operand in slot j, should it die at this step (runtime/program.c,
 * plan_in_place): a row op's row operand, or a per-element kernel's operand
 * of the result's size that it reads at the element's own index. */
static bool may_run_in_place(const host_run *u, uint32_t k, int j, int out)
{
    const nrt_step *s = &u->p->steps[k];
    uint32_t a = s->bufs[j], r = s->bufs[out];
    for (int m = 0; m < s->nbufs; m++)   /* an update in its parameter's buffer: the first run was in place, and its operand is gone */
        if (m != out && s->bufs[m] == r) return false;
    if (nrt_step_rowwise_in_place(u->g, s, j)) return true;
    if (!nrt_step_per_element(u->g, u->p, s) || !nrt_step_may_share(s, out, j) || a >= u->g->nnodes || r >= u->g->nnodes)
        return false;
    const cpu_tensor *x = &u->res->values[a], *y = &u->res->values[r];
    return x->numel * (int64_t)dtype_size(x->dtype) == y->numel * (int64_t)dtype_size(y->dtype);
}

/* A kernel whose result may take the memory of an operand that dies
 * there runs again that way, on a copy of the operand: the result must be
 * the same, whichever warp gets ahead (a row op), and whatever other
 * elements the kernel reads (one reading through a transpose must never
 * be). Its other results (a row's loss) go where the first run's went, so
 * the steps that read them check them too. */
static int check_in_place(host_run *u, uint32_t k, kernel_fn *fn)
{
    const nrt_step *s = &u->p->steps[k];
    int out = s->nbufs - 1;
    uint32_t v = out >= 0 ? slot_value(u->p, k, out) : IR_NONE;
    if (out < 0 || v >= u->g->nnodes || u->first_write[v] != k || u->res->values[v].numel == 0) return 0;
    for (int j = 0; j < out; j++) {
        if (!may_run_in_place(u, k, j, out) || !u->mem[s->bufs[j]]) continue;
        const cpu_tensor *want = &u->res->values[v];
        size_t bytes = (size_t)want->numel * dtype_size(want->dtype);
        void *shared = malloc(bytes + 1);
        memcpy(shared, u->mem[s->bufs[j]], bytes);
        launch_ctx c = {.fn = fn};
        step_args(u, k, &c.args);
        c.args.buf[j] = c.args.buf[out] = shared;
        int bad = launch_args(u, k, &c) != 0 || !matches(u->g, u->res, u->name, k, "in place", shared, want, v, v);
        free(shared);
        u->in_place++;
        return bad;
    }
    return 0;
}

static int launch_step(host_run *u, uint32_t k, kernel_fn *fn)
{
    launch_ctx c = {.fn = fn};
    step_args(u, k, &c.args);
    if (launch_args(u, k, &c) != 0) return -1;
    return check_in_place(u, k, fn);
}

/* A batch's kernel, with the table of its steps' arguments, over the
 * largest of their grids (as runtime/gpu.c launches it). */
static int launch_batch(host_run *u, uint32_t first, uint32_t n, kernel_fn *fn)
{
    nc_args *table = calloc(n, sizeof *table);
    int64_t blocks = 0, threads = 0;
    bool ok = true;
    for (uint32_t k = first; k < first + n; k++) {
        step_args(u, k, &table[k - first]);
        int64_t b, t, sizes[NRT_MAX_INTS];
        for (int j = 0; j < NRT_MAX_INTS; j++) sizes[j] = table[k - first].n[j];
        ok &= nrt_step_launch(&u->p->steps[k], sizes, 2, &b, &t);
        if (b > blocks) blocks = b;
        if (t > threads) threads = t;
    }
    launch_ctx c = {.fn = fn, .args = {.step = 0}};
    c.args.buf[0] = table;
    char err[256] = "too many blocks";
    if (!ok || u->launch(run_kernel, &c, blocks, threads, err, sizeof err) != 0) {
        fprintf(stderr, "%s: the batch at step %u does not run: %s\n", u->name, first, err);
        ok = false;
    }
    free(table);
    return ok ? 0 : -1;
}

/* For a parameter's low-precision copy v that an update's kernel stores
 * again (compiler/cuda_fuse.c, carry_into): the new value it is rounded
 * from, when step s is that kernel; IR_NONE otherwise. The copy's own
 * kernel made this run's copy, the update's is the next run's. */
static ir_value carried_from(const cg_ctx *plan, const nrt_step *s, uint32_t v)
{
    if (!plan->carry_from || v >= plan->g->nnodes || plan->carry_from[v] == IR_NONE || s->kind != NRT_STEP_KERNEL ||
        s->node >= plan->g->nnodes || !cuda_fuse_same_kernel(plan, plan->carry_from[v], s->node))
        return IR_NONE;
    return plan->carry_from[v];
}

/* The next run's copy v of a parameter, against the executor's new value
 * rounded to v's dtype. */
static bool carried_copy_matches(host_run *u, uint32_t k, uint32_t b, ir_value v, ir_value from)
{
    const cpu_tensor *nv = &u->res->values[from];
    cpu_tensor want;
    if (!cpu_tensor_alloc(&want, u->g->nodes[v].dtype, nv->rank, nv->shape, 0)) return false;
    for (int64_t i = 0; i < nv->numel; i++) cpu_set(&want, i, cpu_get(nv, i));
    bool ok = matches(u->g, u->res, u->name, k, "a parameter's copy for the next run", u->mem[b], &want, v, v);
    cpu_tensor_free(&want);
    return ok;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

/* each result is checked, then replaced by the executor's, so the next
 * kernel starts from exact operands: a sum that cancels to nearly nothing
 * may differ from the executor's by its summation order, and an exact cast
 * of it must not be blamed for that */
static void check_results(host_run *u, uint32_t k)
{
    const ir_graph *g = u->g;
    const nrt_step *s = &u->p->steps[k];
    for (int j = 0; j < s->nbufs; j++) {
        uint32_t v = slot_value(u->p, k, j), b = s->bufs[j];
        ir_value from = carried_from(u->plan, s, v);
        if (from != IR_NONE && b < g->nnodes) {   /* no later step reads it in this run */
            u->bad += !carried_copy_matches(u, k, b, v, from);
            u->carried++;
            continue;
        }
        if (b >= g->nnodes || !is_result(g, u->p, u->plan, k, j) || u->last_write[v] != k) continue;
        const cpu_tensor *want = &u->res->values[v];
        u->digest[k] = fnv1a(u->digest[k], u->mem[b], (size_t)want->numel * dtype_size(want->dtype));
        if (!matches(g, u->res, u->name, k, step_what(u->p, s), u->mem[b], &u->res->values[v], v, s->node < g->nnodes ? s->node : v))
            u->bad++;
        cpu_tensor_to_native(&u->res->values[v], u->mem[b]);
    }
}

/* Follows the program over buffers as the GPU would, one host allocation per
 * buffer (values that share a buffer share it here too): kernels run; the
 * other steps' results are taken from the executor. Before every step, each
 * operand's buffer must still hold the value the step reads (so views and
 * in-place updates are checked); after a kernel runs, its results must match
 * the executor's. */
static int run_steps(const char *name, const ir_graph *g, const nrt_program *p, void *lib, const cpu_exec_result *res,
                     bool fuse, uint64_t *digest)
{
    int checked = 0, bad = 0, matmuls = 0;
    cg_ctx plan = {.g = g};   /* which values a fused step writes: its group's members */
    if (fuse) cuda_fuse_plan(&plan);
    launch_fn *launch = (launch_fn *)(uintptr_t)dlsym(lib, "nc_host_launch");
    void **mem = calloc(g->nnodes + p->ntemps + 1, sizeof *mem);
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_INPUT || g->nodes[v].op == OP_PARAM) mem[v] = to_storage(&res->values[v]);
    /* a value several steps write (a scatter-add: zero, then add) is whole
     * only after the last: set up at the first, checked at the last */
    uint32_t *first_write = malloc((g->nnodes + 1) * sizeof *first_write), *last_write = calloc(g->nnodes + 1, sizeof *last_write);
    for (ir_value v = 0; v < g->nnodes; v++) first_write[v] = UINT32_MAX;
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; j < p->steps[k].nbufs; j++) {
            uint32_t v = slot_value(p, k, j);
            if (v >= g->nnodes || !is_result(g, p, &plan, k, j) || carried_from(&plan, &p->steps[k], v) != IR_NONE) continue;
            if (first_write[v] == UINT32_MAX) first_write[v] = k;
            last_write[v] = k;
        }
    host_run u = {.name = name, .g = g, .p = p, .lib = lib, .res = res, .plan = &plan, .launch = launch, .mem = mem,
                  .first_write = first_write, .last_write = last_write, .digest = digest};
    for (uint32_t k = 0; k < p->nsteps; k++) digest[k] = 14695981039346656037ull;
    for (uint32_t k = 0; k < p->nsteps && bad + u.bad < 5 && launch; k++) {
        /* a batch (compiler/cuda_batch.c) runs as its own kernel does: one
         * launch calling each step's body with the step's arguments */
        uint32_t n = p->steps[k].batch >= 2 ? p->steps[k].batch : 1;
        kernel_fn *fns[NRT_MAX_BATCH];
        bool all_run = true;
        for (uint32_t j = k; j < k + n; j++) {
            fns[j - k] = prepare_step(&u, j);
            all_run &= fns[j - k] != NULL;
        }
        if (n > 1 && all_run) {
            kernel_fn *batch_fn = (kernel_fn *)(uintptr_t)dlsym(lib, p->kernel_names[p->steps[k].batch_kernel]);
            if (!batch_fn) { fprintf(stderr, "%s: no symbol %s\n", name, p->kernel_names[p->steps[k].batch_kernel]); bad++; }
            else bad += launch_batch(&u, k, n, batch_fn) != 0, u.batches++, u.batched_steps += (int)n;
        } else {
            for (uint32_t j = k; j < k + n; j++)
                if (fns[j - k]) bad += launch_step(&u, j, fns[j - k]) != 0;
        }
        for (uint32_t j = k; j < k + n; j++)
            if (fns[j - k]) check_results(&u, j), checked++;
        k += n - 1;
    }
    bad += u.bad;
    matmuls = u.matmuls;
    if (!launch) fprintf(stderr, "%s: the shim has no nc_host_launch\n", name), bad++;
    printf("%s: %d kernels (%d of them in %d batched launches, %d also in place) and %d matmuls run on the host and checked, "
           "%d parameter copies stored for the next run%s\n", name, checked, u.batched_steps, u.batches, u.in_place, matmuls, u.carried,
           bad ? ", some differ" : "");
    for (uint32_t b = 0; b < g->nnodes + p->ntemps; b++) free(mem[b]);
    free(mem);
    free(first_write);
    free(last_write);
    cuda_fuse_free(&plan);
    return bad ? -1 : checked;
}

/* The model in the file at path, or (text not NULL) the source text, named path. */
/* A fused kernel reading through a transpose of a value of its own size
 * that dies there, launched alone: its result must not take that value's
 * memory (other threads still read the elements it would overwrite). */
static const char *transpose_dies_source =
    "model dies(x: f32[B, 16, 16]) -> (y: f32[B, 16, 16]) {\n"
    "  param w: f32[16, 16] = xavier\n"
    "  u = exp((x @ w) * 0.1)\n"
    "  return (transpose(u, [0, 2, 1]) + 1.0) @ w\n"
    "}\n";

/* A scalar group reading through a slice: its one element is at the
 * slice's start, not at offset 0. */
static const char *scalar_slice_source =
    "model scal(x: f32[B]) -> (y: f32) {\n"
    "  return relu(reshape(slice(x, axis: 0, start: 3, end: 4), [])) * 2.0\n"
    "}\n";

/* Literals in bf16 and f16 arithmetic are fills of that dtype: a fused
 * kernel must use the value rounded to it (0.333984375 in bf16), as the
 * executor and a stored fill do, not the literal as written (which rounds
 * some products the other way). */
static const char *narrow_constant_source =
    "model narrow(x: bf16[B, 64], h: f16[B, 64]) -> (y: f32[B, 64], z: f32[B, 64]) {\n"
    "  return f32(x * 0.333333333) * 3.0, f32(h * 0.1) * 10.0   # judged in f32: the products' rounding shows\n"
    "}\n";

/* GELU and its tanh form far below 0 (x in [-7, -4]), and their backward:
 * the kernels keep the digits that 1 + erf and 1 + tanh would cancel, as
 * the executor does (judged against the largest value there, about 1e-4). */
static const char *gelu_tails_source =
    "model tails(x: f32[B, 64]) -> (g: f32[B, 64], t: f32[B, 64]) {\n"
    "  param w: f32[64] = ones\n"
    "  z = x * w * 0.75 - 5.5\n"
    "  return gelu(z), gelu_tanh(z)\n"
    "}\n"
    "train tails {\n"
    "  loss = sum(g) + sum(t)\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

/* sin and cos over angles to about 60 radians, forward and backward: the
 * kernels' sinf and cosf reduce large angles as the executor's libm does. */
static const char *sin_cos_source =
    "model waves(x: f32[B, 64]) -> (s: f32[B, 64], c: bf16[B, 64]) {\n"
    "  param w: f32[64] = ones\n"
    "  z = x * w * 20.0\n"
    "  return sin(z), bf16(cos(z * 0.5) + sin(x))\n"
    "}\n"
    "train waves {\n"
    "  loss = sum(s) + sum(f32(c))\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

/* A chain longer than one fused group takes (CUDA_FUSE_MAX_OPS): 160 bf16
 * ops cut into kernels of 64, 64 and 32, each value at a cut rounded,
 * stored and loaded again by the next kernel, as the executor rounds it. */
static const char *long_chain_source =
    "model chain(x: bf16[B, 20]) -> (y: bf16[B, 20]) {\n"
    "  repeat 80 { x = x * 0.75 + 0.5 }\n"
    "  return x\n"
    "}\n";

/* Compiles source (after the shim) and extra into a library in dir and
 * loads it; NULL, counted as a failure, if it does not compile or load. */
static void *compile_for_host(const char *name, const char *dir, const char *source, const char *extra)
{
    char cpp[256], so[256], cmd[2048];
    snprintf(cpp, sizeof cpp, "%s/k.cpp", dir);
    snprintf(so, sizeof so, "%s/k.so", dir);
    FILE *f = fopen(cpp, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s\n", name, cpp);
        failures++;
        return NULL;
    }
    fputs("#include \"cuda_host_shim.hpp\"\n", f);
    fputs(source, f);
    fputs(extra, f);
    fclose(f);
    const char *cxx = getenv("CXX") ? getenv("CXX") : "c++";
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
    snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -fno-strict-aliasing -fPIC -shared -w%s%s -I%s/tests/unit -o %s %s 2>%s/cc.log", cxx,
             wide_index ? " -DNC_WIDE_INDEX" : "", host_wgmma ? " -DNC_HOST_WGMMA" : "", cwd, so, cpp, dir);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "cat %s/cc.log | head -20", dir);
        if (system(cmd) != 0) {}
        fprintf(stderr, "%s: the kernels do not compile for the host\n", name);
        failures++;
        return NULL;
    }
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s: %s\n", name, dlerror());
        failures++;
    }
    return lib;
}

static void remove_dir(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) {}
}

/* The prelude's division by run-time sizes (nc_divisor_of, nc_divmod)
 * against exact division: divisors around powers of two and the sizes
 * models have, dividends at and around multiples of them, at the 2^32
 * border of the multiply-and-shift path and past it (the 64-bit divide),
 * and pseudo-random ones of every magnitude; below 2^31, the 32-bit
 * overload too. A size of 0 divides as 1. */
static const char divisor_check[] =
    "extern \"C\" long long nc_check_divisors(char *why, int cap) {\n"
    "  static const long long ds[] = {0, 1, 2, 3, 5, 6, 7, 8, 12, 25, 64, 100, 255, 256, 641, 768, 1000, 2304, 3072, 50257,\n"
    "    50304, 65535, 65536, 65537, 1000003, 16777215, 16777217, 2147483647ll, 2147483648ll, 2147483649ll, 3221225473ll,\n"
    "    4294967295ll, 4294967296ll, 4294967297ll, 1099511627776ll, 1099511627789ll};\n"
    "  long long bad = 0, tried = 0; unsigned long long x = 88172645463325252ull;\n"
    "  for (unsigned k = 0; k < sizeof ds / sizeof *ds + 4000; k++) {\n"
    "    long long d = k < sizeof ds / sizeof *ds ? ds[k] : 1 + (long long)(k * 2654435761u % 9973u) * (k % 7 + 1);\n"
    "    const long long dd = d > 0 ? d : 1; const nc_divisor D = nc_divisor_of(d);\n"
    "    long long ns[64] = {0, 1, 2, dd - 1, dd, dd + 1, 2147483647ll, 2147483648ll, 4294967295ll, 4294967296ll, 4294967297ll,\n"
    "      (4294967295ll / dd) * dd, (4294967295ll / dd) * dd - 1, (4294967296ll / dd) * dd, 9223372036854775807ll};\n"
    "    for (int j = 15; j < 64; j++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; ns[j] = (long long)((x >> 1) >> (x % 40)); }\n"
    "    for (int j = 0; j < 64; j++) {\n"
    "      const long long n = ns[j] < 0 ? 0 : ns[j]; long long r = -1; const long long q = nc_divmod(n, D, &r); tried++;\n"
    "      if ((q != n / dd || r != n % dd || nc_quot(n, D) != q) && bad++ == 0)\n"
    "        snprintf(why, cap, \"%lld / %lld gave %lld rem %lld\", n, d, q, r);\n"
    "      if (n >= (1ll << 31) || dd >= (1ll << 31)) continue;   // the 32-bit path's domain (nc_ix unsigned)\n"
    "      unsigned r32 = 0; const unsigned q32 = nc_divmod((unsigned)n, D, &r32); tried++;\n"
    "      if ((q32 != n / dd || r32 != n % dd || nc_quot((unsigned)n, D) != q32) && bad++ == 0)\n"
    "        snprintf(why, cap, \"%lld / %lld gave %u rem %u in 32 bits\", n, d, q32, r32); } }\n"
    "  return bad ? -bad : tried; }\n";

static void check_divisors(void)
{
    char dir[] = "/tmp/netc_host_XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "divisors: no temporary directory\n");
        failures++;
        return;
    }
    void *lib = compile_for_host("divisors", dir, cuda_prelude(), divisor_check);
    if (lib) {
        long long (*check)(char *, int) = (long long (*)(char *, int))(uintptr_t)dlsym(lib, "nc_check_divisors");
        char why[256] = "";
        long long got = check ? check(why, sizeof why) : 0;
        if (got <= 0) {
            fprintf(stderr, "divisors: %lld wrong quotients or remainders; first: %s\n", -got, why);
            failures++;
        } else {
            printf("divisors: %lld quotients and remainders exact\n", got);
        }
        dlclose(lib);
    }
    remove_dir(dir);
}

/* The program again with the shim's launches reversed: true when every
 * step's results are the bits of the first run (digest). */
static bool same_bits_reversed(const char *name, const ir_graph *g, const nrt_program *p, void *lib, const cpu_exec_result *res,
                               bool fuse, const uint64_t *digest)
{
    int *reverse = (int *)dlsym(lib, "nc_host_reverse");
    uint64_t *again = calloc(p->nsteps + 1, sizeof *again);
    bool same = reverse != NULL;
    if (reverse) {
        char reversed[160];
        snprintf(reversed, sizeof reversed, "%s, threads in the other order", name);
        *reverse = 1;
        same = run_steps(reversed, g, p, lib, res, fuse, again) > 0;
        *reverse = 0;
    }
    for (uint32_t k = 0; same && k < p->nsteps; k++)
        if (again[k] != digest[k]) {
            fprintf(stderr, "%s: step %u (%s) gives other bits when its threads run in the other order\n", name, k,
                    step_what(p, &p->steps[k]));
            same = false;
        }
    if (!reverse) fprintf(stderr, "%s: the shim has no nc_host_reverse\n", name);
    free(again);
    return same;
}

static void check_model_text(const char *name, const char *path, const char *text, bool fuse, const char *const *dn,
                             const int64_t *dv, int nd, const char *const *sn, const char *const *sv, int nsets, bool train_step)
{
    src_table src = {0};
    char err[1024];
    uint32_t id = text ? src_add(&src, path, text, strlen(text)) : src_load(&src, path, err, sizeof err);
    if (!id) { fprintf(stderr, "%s\n", err); failures++; return; }
    diag_ctx d;
    diag_init(&d, &src, diag_out ? diag_out : stderr);
    driver_opts o = {.verify = true, .train_step = train_step, .fuse = fuse, .dim_names = dn, .dim_values = dv, .ndims = nd,
                     .set_names = sn, .set_values = sv, .nsets = nsets};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    src_free(&src);
    if (!g) { failures++; return; }
    nrt_program p;
    if (!cuda_emit_program_ex(g, fuse, &p, err, sizeof err)) { fprintf(stderr, "%s\n", err); failures++; ir_graph_free(g); return; }
    /* the executor's values of every node, on seeded inputs and parameters */
    cpu_tensor *in = calloc(g->ninputs + 1, sizeof *in), *params = calloc(g->nparams + 1, sizeof *params);
    for (uint32_t i = 0; i < g->ninputs; i++) {
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) dim_eval(&g->dims[g->inputs[i].shape[k]], NULL, &shape[k]);
        cpu_tensor_alloc(&in[i], g->inputs[i].dtype, g->inputs[i].rank, shape, 0);
        for (int64_t j = 0; j < in[i].numel; j++)   /* dropout's @step far from 0 and past 2^24: the kernels read it, as an integer */
            cpu_set(&in[i], j, !strcmp(g->inputs[i].name, "@step") ? 100000007
                               : g->inputs[i].name[0] == '@'      ? 0.5
                               : dtype_is_float(in[i].dtype)      ? nc_rng_uniform(1, i, (uint64_t)j) * 4 - 2
                                                                  : (double)(nc_rng_hash(1, i, (uint64_t)j) % 10));
    }
    for (uint32_t i = 0; i < g->nparams; i++) {
        param_init(g, i, 3, &params[i], err, sizeof err);
        bool constant = true;   /* biases start at 0, gains at 1: spread them so a step mixing them up shows */
        for (int64_t j = 1; j < params[i].numel; j++) constant &= cpu_get(&params[i], j) == cpu_get(&params[i], 0);
        for (int64_t j = 0; constant && j < params[i].numel; j++)
            cpu_set(&params[i], j, cpu_get(&params[i], j) + nc_rng_uniform(7, i, (uint64_t)j) * 0.4 - 0.2);
    }
    cpu_exec_opts eo = {.inputs = in, .params = params, .keep_all = true};
    cpu_exec_result res;
    char dir[] = "/tmp/netc_host_XXXXXX";
    if (cpu_exec_run(g, &eo, &res, err, sizeof err) != 0 || !mkdtemp(dir)) {
        fprintf(stderr, "%s: %s\n", name, err);
        failures++;
        goto out;
    }
    void *lib = compile_for_host(name, dir, p.source, "");
    if (lib) {
        uint64_t *digest = calloc(p.nsteps + 1, sizeof *digest);
        if (run_steps(name, g, &p, lib, &res, fuse, digest) <= 0) failures++;
        if (check_order) failures += !same_bits_reversed(name, g, &p, lib, &res, fuse, digest);
        free(digest);
        void (*release)(void) = (void (*)(void))(uintptr_t)dlsym(lib, "nc_host_release");
        if (release) release();
        dlclose(lib);
    }
    remove_dir(dir);
    cpu_exec_result_free(&res);
out:
    for (uint32_t i = 0; i < g->ninputs; i++) cpu_tensor_free(&in[i]);
    for (uint32_t i = 0; i < g->nparams; i++) cpu_tensor_free(&params[i]);
    free(in);
    free(params);
    nrt_program_free(&p);
    ir_graph_free(g);
}

static void check_model(const char *name, const char *path, bool fuse, const char *const *dn, const int64_t *dv, int nd,
                        const char *const *sn, const char *const *sv, int nsets, bool train_step)
{
    check_model_text(name, path, NULL, fuse, dn, dv, nd, sn, sv, nsets, train_step);
}

/* Dropout in a training step, in f32 and bf16, forward and backward (the
 * same mask), with a recomputed @checkpoint block: every kernel reads the
 * mask's step from the @step input (set far from 0 above), as the executor
 * does; 1027 columns leave a tail after the eight-element vector loops. */
static const char *dropout_source =
    "model drop(x: f32[B, 1027]) -> (y: f32[B, 8])\n"
    "{\n"
    "  param w: f32[1027, 8] = xavier\n"
    "  param v: f32[8, 8] = xavier\n"
    "  h = dropout(gelu(x), p: 0.3, seed: 11)\n"
    "  @checkpoint z = f32(dropout(bf16(tanh(h @ w)), p: 0.5, seed: 12))\n"
    "  return dropout(z @ v, p: 0.25, seed: 13) + z\n"
    "}\n"
    "train drop(t: f32[B, 8]) {\n"
    "  loss = mean(square(y - t))\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

/* rmsnorm over rows of 72, a warp a row, whose gradient's kernel also sums
 * the weight's gradient terms (one set, no bias); 2200 rows: more than the
 * kernel's 2112 warps, so some warps add up two rows. */
static const char *rmsnorm_rows_source =
    "model rms(x: f32[B, 72]) -> (logits: f32[B, 10]) {\n"
    "  param g: f32[72] = ones\n"
    "  param u: f32[72, 72] = xavier\n"
    "  param w: f32[72, 10] = xavier\n"
    "  z = x @ u\n"
    "  return (rmsnorm(z, g) + z) @ w\n"
    "}\n"
    "train rms(labels: i32[B]) {\n"
    "  loss = cross_entropy(logits, labels)\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

/* Tensor-core attention without a causal mask, in f16, heads of D over 70
 * positions in their own [B, H, T, D] layout: the forward kernel and the
 * three gradients (for D = 64 the key and value gradients share a kernel,
 * for 128 they do not, and the tiles no longer all fit shared memory twice). */
static const char *attention_source =
    "model attn(x: f16[B, 2, T, D]) -> (y: f32[B, 2, T, D])\n"
    "  config D = 64\n"
    "{\n"
    "  param wq: f32[D, D] = xavier\n"
    "  param wk: f32[D, D] = xavier\n"
    "  param wv: f32[D, D] = xavier\n"
    "  return f32(attention(x @ f16(wq), x @ f16(wk), x @ f16(wv)))\n"
    "}\n"
    "train attn(t: f32[B, 2, T, D]) {\n"
    "  loss = sum(square(y - t))   # not a mean: gradients of f16 normals\n"
    "  optimizer sgd(lr: 0.1)\n"
    "  loss_scale dynamic\n"
    "}\n";

/* Rows wider than a warp takes (a block a row) whose length is a multiple
 * of 8: softmax, log_softmax and the cross entropy's gradient load and store
 * eight elements a thread, in bf16. */
static const char *wide_rows_source =
    "model wide(x: bf16[B, 16]) -> (logits: bf16[B, 4104]) {\n"
    "  param w: f32[16, 4104] = xavier\n"
    "  return log_softmax(softmax(x @ bf16(w)) * 4.0)\n"
    "}\n"
    "train wide(labels: i32[B]) {\n"
    "  loss = cross_entropy(logits, labels, smoothing: 0.1)\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

/* Wide rows with -inf (the log of 0: about half of each row), and in some
 * rows NaN (the root of a negative) or +inf (e^200): the rows' statistics
 * give what the executor gives, NaN rows included (about half the rows have
 * a NaN, half a +inf). Long enough that a thread reads several chunks of 8,
 * some of them all -inf. */
static const char *special_rows_source =
    "model special(x: f32[B, 16392]) -> (p: f32[B, 16392], lp: f32[B, 16392]) {\n"
    "  z = where(x > 1.99985, sqrt(-x), where(x < -1.99985, exp(x * -100.0), log(relu(x))))\n"
    "  return softmax(z), log_softmax(z)\n"
    "}\n";

/* Scatter-adds whose rows are picked up to a few hundred times at B = 2:
 * ranges longer than a chunk (64 positions) are added a chunk at a time and
 * the chunks' sums then in order, shorter ones directly, some rows never
 * (zeros); in f32 and bf16. */
static const char *scatter_chunks_source =
    "model scat(i: i32[B, 300], s: f32[B, 300, 24]) -> (y: f32[12, 24], z: bf16[12, 24]) {\n"
    "  j = where(i > 4, i, 0 * i)   # row 0 picked about 300 times, rows 5-9 about 60\n"
    "  return scatter_add(j, s, rows: 12), scatter_add(i, bf16(s), rows: 12)\n"
    "}\n";

/* Random programs' training steps (random_program.h), at B = 3, 1, 5 or 2,
 * three in four fused:
 * NETC_RANDOM_PROGRAMS=N[:SEED] runs N programs from SEED on, and nothing
 * else (default: 10 from 1 after the fixed cases). A program that fails is
 * printed and written to /tmp for netc; NETC_HOST_PROGRAM=FILE [NETC_HOST_B=N]
 * runs that file's training step alone, fused, at B = N (3). */
static void check_random_programs(void)
{
    unsigned long long count = 10, seed = 1;
    const char *env = getenv("NETC_RANDOM_PROGRAMS");
    if (env && sscanf(env, "%llu:%llu", &count, &seed) < 1) {
        fprintf(stderr, "NETC_RANDOM_PROGRAMS=%s: expected N or N:SEED\n", env);
        failures++;
        return;
    }
    static char text[RP_TEXT + 4096];
    const char *b[] = {"B"};
    diag_out = fopen("/dev/null", "w");
    for (unsigned long long s = seed; s < seed + count; s++) {
        if (!random_program(s, text, sizeof text)) continue;
        char name[64], path[64];
        bool fuse = s % 4 != 0;   /* a quarter unfused: each op's own kernel */
        const int64_t batch[] = {(int64_t[]){3, 1, 5, 2}[s / 4 % 4]};
        snprintf(name, sizeof name, "random program %llu (B=%lld)%s", s, (long long)batch[0], fuse ? " --fuse" : "");
        snprintf(path, sizeof path, "random_%llu.net", s);
        int before = failures;
        check_model_text(name, path, text, fuse, b, batch, 1, NULL, NULL, 0, true);
        if (failures == before) continue;
        char keep[96];
        snprintf(keep, sizeof keep, "/tmp/netc_%s", path);
        FILE *f = fopen(keep, "w");
        if (f) fputs(text, f), fclose(f);
        fprintf(stderr, "%s failed (written to %s; netc build %s --dim B=%lld --entry train%s):\n%s", name, keep, keep,
                (long long)batch[0], fuse ? "" : " --no-fuse", text);
    }
    if (diag_out) fclose(diag_out);
    diag_out = NULL;
}

int main(void)
{
    if (system("c++ --version >/dev/null 2>&1") != 0 && !getenv("CXX")) {
        printf("no C++ compiler: skipped\n");
        return 77;
    }
    if (getenv("NETC_RANDOM_PROGRAMS")) {
        check_random_programs();
        return failures != 0;
    }
    if (getenv("NETC_HOST_PROGRAM")) {   /* one file's training step, fused, at B = NETC_HOST_B (3): a failure's rerun */
        host_wgmma = getenv("NETC_HOST_WGMMA") != NULL;
        const char *bn[] = {"B"};
        const int64_t bv[] = {getenv("NETC_HOST_B") ? atoll(getenv("NETC_HOST_B")) : 3};
        check_model(getenv("NETC_HOST_PROGRAM"), getenv("NETC_HOST_PROGRAM"), true, bn, bv, 1, NULL, NULL, 0, true);
        return failures != 0;
    }
    check_divisors();
    const char *b[] = {"B"}, *bt[] = {"B", "T"};
    const int64_t v8[] = {8}, v16[] = {16}, v200[] = {200}, v2200[] = {2200}, v5[] = {5}, vbt[] = {2, 16}, vb2[] = {2};
    const char *csn[] = {"T", "C", "L"}, *csv[] = {"16", "32", "1"};   /* char_lm made small (f32) */
    /* GPT-2's blocks in bf16, made small: one layer, a 512-token vocabulary, width 64 */
    const char *sn[] = {"L", "V", "C", "H", "MAXT"}, *sv[] = {"1", "512", "64", "2", "32"};
    const char *sv64[] = {"1", "256", "128", "2", "80"}, *sv128[] = {"1", "256", "128", "1", "80"};
    const int64_t vbt80[] = {1, 80};
    for (int fuse = 0; fuse < 2; fuse++) {
        char name[64];
        wide_index = !fuse;   /* unfused: each movement, gather and reduction kernel with 64-bit indices */
        snprintf(name, sizeof name, "fashion_mlp%s", fuse ? " --fuse" : "");
        check_model(name, "examples/fashion_mlp.net", fuse, b, v8, 1, NULL, NULL, 0, true);
        snprintf(name, sizeof name, "gpt2 (1 layer, bf16)%s", fuse ? " --fuse" : "");
        check_order = true;   /* the embeddings' gradients: 32 tokens of 10 values, each row picked several times */
        check_model(name, "examples/gpt2.net", fuse, bt, vbt, 2, sn, sv, 5, true);
        check_order = false;
        /* heads of 64 and 128 over 80 positions (a whole tile and a part): the
         * tensor-core attention kernels (the same with and without fusion) */
        if (fuse) {
            check_model("gpt2 (D=64, T=80) --fuse", "examples/gpt2.net", fuse, bt, vbt80, 2, sn, sv64, 5, true);
            check_model("gpt2 (D=128, T=80) --fuse", "examples/gpt2.net", fuse, bt, vbt80, 2, sn, sv128, 5, true);
            const char *dn[] = {"D"}, *d64[] = {"64"}, *d128[] = {"128"};
            const int64_t vt70[] = {1, 70};
            check_model_text("attention (f16, D=64, T=70) --fuse", "attn.net", attention_source, fuse, bt, vt70, 2, dn, d64, 1, true);
            check_model_text("attention (f16, D=128, T=70) --fuse", "attn.net", attention_source, fuse, bt, vt70, 2, dn, d128, 1, true);
            check_model("attention, keys jumping at the second tile (f16, T=70) --fuse", "tests/gpu/attention_jump.net", fuse, bt,
                        vt70, 2, NULL, NULL, 0, false);
            /* key lengths: none, part of a tile, all, past T; tensor cores and one thread a row */
            const int64_t vb4[] = {4};
            check_model("attention with key lengths (f16 D=64 and 128, f32; T=70) --fuse", "tests/gpu/attention_lengths.net", fuse, b,
                        vb4, 1, NULL, NULL, 0, true);
            /* the same heads of 64 and 128 through wgmma, as sm_90a images run them */
            host_wgmma = true;
            check_model("gpt2 (D=64, T=80, wgmma) --fuse", "examples/gpt2.net", fuse, bt, vbt80, 2, sn, sv64, 5, true);
            check_model("gpt2 (D=128, T=80, wgmma) --fuse", "examples/gpt2.net", fuse, bt, vbt80, 2, sn, sv128, 5, true);
            check_model_text("attention (f16, D=128, T=70, wgmma) --fuse", "attn.net", attention_source, fuse, bt, vt70, 2, dn, d128, 1, true);
            check_model_text("attention (f16, D=64, T=70, wgmma) --fuse", "attn.net", attention_source, fuse, bt, vt70, 2, dn, d64, 1, true);
            check_model("attention, keys jumping at the second tile (f16, T=70, wgmma) --fuse", "tests/gpu/attention_jump.net", fuse,
                        bt, vt70, 2, NULL, NULL, 0, false);
            check_model("attention with key lengths (f16 D=64 and 128, f32; T=70, wgmma) --fuse", "tests/gpu/attention_lengths.net", fuse,
                        b, vb4, 1, NULL, NULL, 0, true);
            host_wgmma = false;
        }
        snprintf(name, sizeof name, "rowwise%s", fuse ? " --fuse" : "");   /* softmax, log_softmax, rmsnorm backward */
        check_model(name, "tests/gpu/rowwise.net", fuse, b, v8, 1, NULL, NULL, 0, true);
        if (fuse) check_model_text("rmsnorm rows of 72 (B=2200) --fuse", "rms.net", rmsnorm_rows_source, fuse, b, v2200, 1, NULL, NULL, 0, true);
        snprintf(name, sizeof name, "wide rows (bf16, 4104)%s", fuse ? " --fuse" : "");
        check_model_text(name, "wide.net", wide_rows_source, fuse, b, v5, 1, NULL, NULL, 0, true);
        snprintf(name, sizeof name, "special values in wide rows (f32, 16392)%s", fuse ? " --fuse" : "");
        check_model_text(name, "special.net", special_rows_source, fuse, b, v16, 1, NULL, NULL, 0, false);
        /* reductions in each form: 200 rows take two kernels, 5 one */
        snprintf(name, sizeof name, "reduce (B=200)%s", fuse ? " --fuse" : "");
        check_model(name, "tests/gpu/reduce.net", fuse, b, v200, 1, NULL, NULL, 0, false);
        snprintf(name, sizeof name, "reduce (B=5)%s", fuse ? " --fuse" : "");
        check_model(name, "tests/gpu/reduce.net", fuse, b, v5, 1, NULL, NULL, 0, false);
        snprintf(name, sizeof name, "char_lm%s", fuse ? " --fuse" : "");
        check_order = true;
        check_model(name, "examples/char_lm.net", fuse, b, vb2, 1, csn, csv, 3, true);
        check_order = false;
        /* fused kernels reading through transposes and slices (same-size operands dying there: not in place) */
        snprintf(name, sizeof name, "movement%s", fuse ? " --fuse" : "");
        check_model(name, "tests/gpu/movement.net", fuse, b, vb2, 1, NULL, NULL, 0, true);
        snprintf(name, sizeof name, "a transpose's operand dying where it is read%s", fuse ? " --fuse" : "");
        check_model_text(name, "dies.net", transpose_dies_source, fuse, b, vb2, 1, NULL, NULL, 0, false);
        snprintf(name, sizeof name, "a scalar read through a slice%s", fuse ? " --fuse" : "");
        check_model_text(name, "scal.net", scalar_slice_source, fuse, b, v5, 1, NULL, NULL, 0, false);
        snprintf(name, sizeof name, "GELU's tails (training)%s", fuse ? " --fuse" : "");
        check_model_text(name, "tails.net", gelu_tails_source, fuse, b, v5, 1, NULL, NULL, 0, true);
        snprintf(name, sizeof name, "sin and cos (training)%s", fuse ? " --fuse" : "");
        check_model_text(name, "waves.net", sin_cos_source, fuse, b, v5, 1, NULL, NULL, 0, true);
        if (fuse) check_model_text("a chain of 160 ops cut into 3 kernels (bf16) --fuse", "chain.net", long_chain_source, fuse, b, v5, 1,
                                   NULL, NULL, 0, false);
        snprintf(name, sizeof name, "narrow constants%s", fuse ? " --fuse" : "");
        check_model_text(name, "narrow.net", narrow_constant_source, fuse, b, v5, 1, NULL, NULL, 0, false);
        snprintf(name, sizeof name, "scatter-adds in chunks%s", fuse ? " --fuse" : "");
        check_order = true;
        check_model_text(name, "scat.net", scatter_chunks_source, fuse, b, vb2, 1, NULL, NULL, 0, false);
        check_order = false;
        snprintf(name, sizeof name, "dropout (training)%s", fuse ? " --fuse" : "");
        check_model_text(name, "drop.net", dropout_source, fuse, b, v5, 1, NULL, NULL, 0, true);
    }
    wide_index = true;   /* fused read-through and spread loads with 64-bit indices */
    check_model("movement --fuse (64-bit indices)", "tests/gpu/movement.net", true, b, vb2, 1, NULL, NULL, 0, true);
    wide_index = false;
    check_random_programs();
    if (!failures) printf("test_kernels_host: all checks passed\n");
    return failures != 0;
}
