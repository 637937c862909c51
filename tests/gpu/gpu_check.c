/* gpu_check.c - GPU against the CPU executor, with tolerances scaled by
 * dtype, NaN never passing where the reference has a number, and every
 * result buffer poisoned before the run. */
#include "gpu_check.h"
#include "cpu_exec.h"
#include "cuda_compile.h"
#include "cuda_emit.h"
#include "driver.h"
#include "gpu.h"
#include "tensor_io.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double tolerance(nc_dtype t, nc_op op)
{
    double base = t == NC_BF16 ? 2e-2 : t == NC_F16 ? 4e-3 : 2e-5;
    if (nc_ops[op].flags & OPF_ACCUM) base *= 10;       /* summation order differs */
    return base;
}

/* The coarsest float dtype a value was computed through. Fusion may skip
 * a rounding the executor does (a bf16 sum widened to f32 keeps its f32
 * accumulator, as a matmul's widening epilogue does), so an f32 output
 * computed from bf16 values agrees to bf16's precision, not f32's. */
static nc_dtype coarsest_upstream(const ir_graph *g, ir_value v)
{
    bool *on = nc_xcalloc(g->nnodes + 1, sizeof *on);
    nc_dtype t = g->nodes[v].dtype;
    on[v] = true;
    for (ir_value u = v + 1; u-- > 0;) {
        if (!on[u]) continue;
        const ir_node *n = &g->nodes[u];
        if (n->dtype == NC_BF16 || (n->dtype == NC_F16 && t != NC_BF16)) t = n->dtype;
        for (int i = 0; i < n->nargs; i++) on[ir_args(g, n)[i]] = true;
    }
    free(on);
    return dtype_is_float(g->nodes[v].dtype) ? t : g->nodes[v].dtype;
}

/* The training step's learning rate here (its @lr input). */
#define CHECK_LR 0.01f

/* How far an element that rounding decides may be from the executor's: up
 * to NOISE_ROOM times the largest such element on either run (a step of
 * Adam from a gradient of rounding noise goes either way, by up to lr);
 * where rounding decides the whole tensor, NOISE_ALL_ROOM times: the GPU
 * adds a sum's terms in another order, and its rounding of a sum that
 * cancels was up to 9 times the executor's in fashion_resnet_train, 62
 * times in its square (Adam's second moment), while a wrong kernel's error
 * is of the size of the terms: 3,500 and 12,000,000 times when one term of
 * a zero gradient counts twice (wrong_kernel_report). */
#define NOISE_ROOM 8
#define NOISE_ALL_ROOM 1000

/* Whether rounding decides an element: shaken at the rounding level, the
 * inputs and parameters move it by more than the tolerance, relatively
 * (by more than 80 times the shake: a sum that cancels to rounding noise, a
 * step of Adam taken from such a gradient, a tie between two maxima). */
static bool rounding_decides(double r, double s, double tol)
{
    return isfinite(r) && isfinite(s) && fabs(s - r) > tol * fabs(r);
}

/* The largest magnitude, on either run, of the elements rounding decides;
 * *all: whether it decides most of them, and so the tensor as a whole (a
 * gradient that is 0 in theory: an element of it that the shake happens to
 * move little is as much rounding as the others). */
static double rounding_noise(const cpu_tensor *ref, const cpu_tensor *shaken, double tol, bool *all)
{
    double noise = 0;
    int64_t decided = 0;
    for (int64_t j = 0; shaken && j < ref->numel; j++) {
        double r = cpu_get(ref, j), s = cpu_get(shaken, j);
        if (!rounding_decides(r, s, tol)) continue;
        decided++;
        noise = fmax(noise, fmax(fabs(r), fabs(s)));
    }
    *all = decided * 2 > ref->numel;
    if (*all)
        for (int64_t j = 0; j < ref->numel; j++) noise = fmax(noise, fmax(fabs(cpu_get(ref, j)), fabs(cpu_get(shaken, j))));
    return noise;
}

/* Compare one value (an output, a new parameter); prints the first mismatches.
 * shaken (NULL: none) is its value from the shaken inputs and parameters:
 * an element rounding decides (a gradient that is 0 in theory holds the
 * rounding of either side's sums, the GPU's larger than the executor's
 * where it adds in another order) stays out of the relative error, which
 * measures the others against their own norm, and may differ by up to
 * NOISE_ROOM times the largest such element (NOISE_ALL_ROOM where rounding
 * decides the tensor as a whole, and the tolerance's floor for elements of
 * size 1 is no floor there: a wrong element of a zero gradient stands out).
 * slack > 0 (a weight's update, update_slack): an element off by more than
 * the tolerance but by no more than slack is ill-conditioned, not wrong,
 * while there are few of them: Adam's first step moves an element by about
 * lr whatever its gradient's size, so a gradient that cancels to ~1e-8 on
 * one side and not on the other (summation order) moves it by lr there and
 * not here, and the shaken run can move it by lr the same way. Such
 * elements, at most one in 10000, stay out of the relative error; a wrong
 * kernel moves many more, and the optimizer's states, compared with no
 * slack, show a wrong element of the gradient. */
static int compare(const gpu_check_opts *o, const ir_graph *g, ir_value value, const char *what, const cpu_tensor *ref,
                   const cpu_tensor *shaken, const unsigned char *got, double slack)
{
    const ir_node *n = &g->nodes[value];
    double tol = tolerance(coarsest_upstream(g, value), n->op), num = 0, den = 0;
    if (!dtype_is_float(n->dtype) || (shaken && shaken->numel != ref->numel)) shaken = NULL;
    bool all_noise = false;
    double noise_size = rounding_noise(ref, shaken, tol, &all_noise);
    double room = (all_noise ? NOISE_ALL_ROOM : NOISE_ROOM) * noise_size;
    int bad = 0;
    int64_t loose = 0, most_loose = ref->numel / 10000 > 1 ? ref->numel / 10000 : 1;
    for (int64_t j = 0; j < ref->numel; j++) {
        double r = cpu_get(ref, j), v = cpu_native_get(n->dtype, got, j);
        bool nan_ok = isnan(r) && isnan(v);
        bool inf_ok = isinf(r) && r == v;
        if (nan_ok || inf_ok) continue;
        bool noise = shaken && (all_noise || rounding_decides(r, cpu_get(shaken, j), tol));
        bool elem_bad = isnan(v) || isinf(v) != isinf(r) ||
                        (dtype_is_float(n->dtype) ? fabs(v - r) > fmax(all_noise ? 0 : tol * (1.0 + fabs(r)) * 4, noise ? room : 0) : v != r);
        if (elem_bad && fabs(v - r) <= slack && loose < most_loose) {
            loose++;
            continue;
        }
        if (elem_bad && bad++ < 5) fprintf(stderr, "  %s %s[%lld]: gpu %.9g, cpu %.9g\n", o->name, what, (long long)j, v, r);
        if (!isnan(v) && !isinf(r) && !noise) num += (v - r) * (v - r), den += r * r;
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (dtype_is_float(n->dtype) && rel > tol) {
        fprintf(stderr, "  %s %s: relative error %.3g over tolerance %.3g\n", o->name, what, rel, tol);
        bad++;
    }
    return bad;
}

/* The executor's results, and its results again from the inputs and
 * parameters shaken at the rounding level (SHAKE): what moves between the
 * two, rounding decides (compare). */
typedef struct reference {
    cpu_exec_result exact, shaken;
    cpu_tensor *inputs, *params;   /* the shaken copies, which shaken's values may borrow */
} reference;

#define SHAKE 0x1p-22   /* relative: two f32 roundings */

/* copies[i]: t[i] with each float element moved by up to SHAKE, a random
 * amount; a training step's scalars (@lr...) stay as they are. */
static cpu_tensor *shaken_copies(const ir_graph *g, const cpu_tensor *t, uint32_t n, bool inputs)
{
    cpu_tensor *copies = nc_xcalloc(n + 1, sizeof *copies);
    for (uint32_t i = 0; i < n; i++) {
        bool keep = !dtype_is_float(t[i].dtype) || (inputs && g->inputs[i].name[0] == '@');
        NC_ASSERT(cpu_tensor_alloc(&copies[i], t[i].dtype, t[i].rank, t[i].shape, (int64_t)1 << 34));
        for (int64_t j = 0; j < t[i].numel; j++) {
            double u = keep ? 0 : 2.0 * nc_rng_uniform(0x5ca1e, 2000 + i + (inputs ? 0 : n), (uint64_t)j) - 1.0;
            cpu_set(&copies[i], j, cpu_get(&t[i], j) * (1.0 + SHAKE * u));
        }
    }
    return copies;
}

static void reference_free(const ir_graph *g, reference *r)
{
    if (r->exact.values) cpu_exec_result_free(&r->exact);
    if (r->shaken.values) cpu_exec_result_free(&r->shaken);
    for (uint32_t i = 0; r->inputs && i < g->ninputs; i++) cpu_tensor_free(&r->inputs[i]);
    for (uint32_t i = 0; r->params && i < g->nparams; i++) cpu_tensor_free(&r->params[i]);
    free(r->inputs);
    free(r->params);
    *r = (reference){0};
}

/* Both runs of the executor; -1 with err, r holding nothing, when one fails. */
static int reference_run(const ir_graph *g, const int64_t *syms, const cpu_tensor *inputs, const cpu_tensor *params,
                         bool keep_all, reference *r, char *err, size_t errcap)
{
    *r = (reference){.inputs = shaken_copies(g, inputs, g->ninputs, true), .params = shaken_copies(g, params, g->nparams, false)};
    cpu_exec_opts co = {.syms = syms, .inputs = inputs, .params = params, .keep_all = keep_all};
    cpu_exec_opts shaken = {.syms = syms, .inputs = r->inputs, .params = r->params, .keep_all = keep_all};
    if (cpu_exec_run(g, &co, &r->exact, err, errcap) != 0 || cpu_exec_run(g, &shaken, &r->shaken, err, errcap) != 0) {
        reference_free(g, r);
        return -1;
    }
    return 0;
}

static void random_tensor(cpu_tensor *t, uint64_t seed, uint64_t stream, int int_range)
{
    for (int64_t j = 0; j < t->numel; j++) {
        float u = nc_rng_uniform(seed, stream, (uint64_t)j);
        cpu_set(t, j, dtype_is_float(t->dtype) ? 4.0 * u - 2.0 : floor(u * int_range));
    }
}

/* 0xff bytes in every input's buffer: what the staged inputs must replace
 * when the run starts. */
static int poison_inputs(const ir_graph *g, gpu_session *gs, const cpu_tensor *inputs, char *err, size_t errcap)
{
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (g->nodes[v].op != OP_INPUT) continue;
        const cpu_tensor *t = &inputs[g->nodes[v].attr.index];
        size_t bytes = (size_t)t->numel * dtype_size(t->dtype);
        unsigned char *buf = nc_xmalloc(bytes + 1);
        memset(buf, 0xff, bytes);
        int rc = gpu_upload(gs, v, buf, bytes, err, errcap);
        free(buf);
        if (rc != 0) return rc;
    }
    return 0;
}

/* Every input through gpu_stage_input. */
static int stage_all(const gpu_check_opts *o, const ir_graph *g, gpu_session *gs, const cpu_tensor *inputs)
{
    char err[512];
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (g->nodes[v].op != OP_INPUT) continue;
        const cpu_tensor *t = &inputs[g->nodes[v].attr.index];
        size_t bytes = (size_t)t->numel * dtype_size(t->dtype);
        unsigned char *buf = nc_xmalloc(bytes + 1);
        cpu_tensor_to_native(t, buf);
        int rc = gpu_stage_input(gs, v, buf, bytes, err, sizeof err);
        free(buf);
        if (rc != 0) {
            fprintf(stderr, "%s: staging input %u: %s\n", o->name, v, err);
            return -1;
        }
    }
    return 0;
}

/* Whether value v on the GPU (read from buffer `from`, where it lives)
 * differs from the executor's: a count of mismatches. */
static int value_differs(const gpu_check_opts *o, const ir_graph *g, gpu_session *gs, const reference *res, ir_value v,
                         uint32_t from, const char *what, double slack)
{
    char err[1024];
    const cpu_tensor *ref = &res->exact.values[v], *shaken = &res->shaken.values[v];
    size_t bytes = (size_t)ref->numel * dtype_size(ref->dtype);
    unsigned char *got = nc_xmalloc(bytes + 1);
    int fails = 0;
    if (gpu_download(gs, from, got, bytes, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", o->name, err);
        fails++;
    } else {
        fails += compare(o, g, v, what, ref, shaken->f || shaken->i ? shaken : NULL, got, slack);
    }
    free(got);
    return fails;
}

/* How many outputs the GPU has that differ from the executor's (or cannot be read). */
static int outputs_differ(const gpu_check_opts *o, const ir_graph *g, gpu_session *gs, const reference *res)
{
    int fails = 0;
    char what[300];
    for (uint32_t k = 0; k < g->noutputs; k++) {
        snprintf(what, sizeof what, "output %s", g->outputs[k].name);
        fails += value_differs(o, g, gs, res, g->outputs[k].value, g->outputs[k].value, what, 0);
    }
    return fails;
}

/* The slack of a parameter's update (compare): a weight's, not an optimizer
 * state's nor a buffer's. */
static double update_slack(const ir_graph *g, uint32_t param)
{
    return g->params[param].role == IR_ROLE_WEIGHT ? 2.0 * CHECK_LR : 0;
}

/* After a training step: each parameter's memory holds its update. */
static int updates_differ(const gpu_check_opts *o, const ir_graph *g, gpu_session *gs, const reference *res)
{
    int fails = 0;
    char what[300];
    for (uint32_t i = 0; i < g->nupdates; i++) {
        uint32_t param = g->updates[i].param;
        ir_value node = IR_NONE;
        for (ir_value v = 0; v < g->nnodes && node == IR_NONE; v++)
            if (g->nodes[v].op == OP_PARAM && g->nodes[v].attr.index == param) node = v;
        if (node == IR_NONE) continue;   /* no node reads it: nothing the step computed */
        snprintf(what, sizeof what, "new %s", g->params[param].decl.name);
        fails += value_differs(o, g, gs, res, g->updates[i].value, node, what, update_slack(g, param));
    }
    return fails;
}

/* o->skew_param: element 0 of a parameter's native bytes one larger. */
static void skew_first(const cpu_tensor *t, unsigned char *buf)
{
    if (t->numel == 0) return;
    cpu_tensor one = *t;
    float f = (float)cpu_get(t, 0) + 1.0f;
    int32_t i = (int32_t)cpu_get(t, 0) + 1;
    one.numel = 1, one.f = t->f ? &f : NULL, one.i = t->f ? NULL : &i;
    cpu_tensor_to_native(&one, buf);
}

/* Every input's and parameter's value into its device buffer. */
static int upload_values(const gpu_check_opts *o, const ir_graph *g, gpu_session *gs, const cpu_tensor *inputs,
                         const cpu_tensor *params)
{
    char err[1024];
    int fails = 0;
    bool skewed = false;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        const cpu_tensor *t = n->op == OP_INPUT ? &inputs[n->attr.index] : n->op == OP_PARAM ? &params[n->attr.index] : NULL;
        if (!t) continue;
        size_t bytes = (size_t)t->numel * dtype_size(t->dtype);
        unsigned char *buf = nc_xmalloc(bytes + 1);
        cpu_tensor_to_native(t, buf);
        if (o->skew_param && n->op == OP_PARAM && !skewed) skew_first(t, buf), skewed = true;
        if (gpu_upload(gs, v, buf, bytes, err, sizeof err) != 0) { fprintf(stderr, "%s: %s\n", o->name, err); fails++; }
        free(buf);
    }
    return fails;
}

/* A hash of the device's bits of every output and every parameter (after a
 * training step, the new values). */
static int device_digest(const gpu_check_opts *o, const ir_graph *g, const int64_t *syms, gpu_session *gs, uint64_t *digest)
{
    char err[1024];
    uint64_t h = 14695981039346656037ull;
    for (ir_value v = 0; v < g->nnodes; v++) {
        bool wanted = g->nodes[v].op == OP_PARAM;
        for (uint32_t k = 0; k < g->noutputs; k++) wanted |= g->outputs[k].value == v;
        if (!wanted) continue;
        size_t bytes = (size_t)ir_bytes(g, &g->nodes[v], syms);
        unsigned char *buf = nc_xmalloc(bytes + 1);
        int rc = gpu_download(gs, v, buf, bytes, err, sizeof err);
        for (size_t i = 0; rc == 0 && i < bytes; i++) h = (h ^ buf[i]) * 1099511628211ull;
        free(buf);
        if (rc != 0) { fprintf(stderr, "%s: %s\n", o->name, err); return 1; }
    }
    *digest = h;
    return 0;
}

/* The training step again from the same parameters and inputs: the same
 * bits, outputs and new parameters, as no kernel's result may depend on
 * which thread comes first (an embedding's gradient did, by f32 atomic
 * adds, and two runs of netc train drifted apart). */
static int same_bits_again(const gpu_check_opts *o, const ir_graph *g, const int64_t *syms, gpu_session *gs, const cpu_tensor *inputs,
                           const cpu_tensor *params)
{
    char err[1024];
    uint64_t first = 0, again = 0;
    if (device_digest(o, g, syms, gs, &first) != 0 || upload_values(o, g, gs, inputs, params) != 0) return 1;
    if (gpu_poison(gs, err, sizeof err) != 0 || gpu_launch(gs, err, sizeof err) != 0 || gpu_finish(gs, err, sizeof err) != 0) {
        fprintf(stderr, "%s: gpu, the step again: %s\n", o->name, err);
        return 1;
    }
    if (device_digest(o, g, syms, gs, &again) != 0) return 1;
    if (again == first) return 0;
    fprintf(stderr, "%s: the step run again from the same parameters and inputs gives other bits\n", o->name);
    return 1;
}

/* Whether step k of p writes the value in its slot j (the emitter's plan
 * says which values a fused kernel stores). */
static bool step_writes(const cg_ctx *plan, const nrt_program *p, uint32_t k, int j)
{
    const nrt_step *s = &p->steps[k];
    uint32_t v = p->slot_values ? p->slot_values[k * NRT_MAX_BUFS + j] : s->bufs[j];
    if (v >= plan->g->nnodes || s->kind == NRT_STEP_COPY) return false;
    if (s->kind == NRT_STEP_MATMUL) {
        nrt_matmul_slots m = nrt_matmul_slots_of(s);
        return j == m.out || j == m.aux || j == m.colsum;
    }
    return cuda_kernel_writes(plan, s->node, v);
}

/* Where each value lives on the device: its own buffer, but a parameter's
 * (or buffer's) update, stored in the parameter's memory, which it has none
 * of (updates_differ reads it there; read as its own, "expected 0 bytes"). */
static uint32_t *home_buffers(const ir_graph *g)
{
    uint32_t *home = nc_xmalloc((g->nnodes + 1) * sizeof *home);
    for (ir_value v = 0; v < g->nnodes; v++) home[v] = v;
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (g->nodes[v].op != OP_PARAM) continue;
        for (uint32_t i = 0; i < g->nupdates; i++)
            if (g->updates[i].param == g->nodes[v].attr.index && g->updates[i].value < g->nnodes) home[g->updates[i].value] = v;
    }
    return home;
}

/* After a mismatch: the program again from the same parameters and inputs,
 * one launch at a time, each value against the executor's when the last
 * step that writes it has run: the first launch that differs names the
 * kernel to look at (a GPU's first run of a new kernel, where the mock GPU
 * cannot tell). */
static void locate_mismatch(const gpu_check_opts *o, const ir_graph *g, const int64_t *syms, const nrt_program *p,
                            gpu_session *gs, cpu_tensor *inputs, cpu_tensor *params)
{
    char err[1024];
    if (o->stage_inputs || upload_values(o, g, gs, inputs, params) != 0 || gpu_poison(gs, err, sizeof err) != 0) return;
    reference every;   /* each value the step computes, kept */
    if (reference_run(g, syms, inputs, params, true, &every, err, sizeof err) != 0) return;
    const reference *res = &every;
    cg_ctx plan = {.g = g};
    if (o->fuse) cuda_fuse_plan(&plan);
    uint32_t *last_write = nc_xcalloc(g->nnodes + 1, sizeof *last_write), *home = home_buffers(g);
    for (uint32_t k = 0; k < p->nsteps; k++)
        for (int j = 0; j < p->steps[k].nbufs; j++)
            if (step_writes(&plan, p, k, j)) last_write[p->slot_values ? p->slot_values[k * NRT_MAX_BUFS + j] : p->steps[k].bufs[j]] = k;
    bool found = false;
    for (uint32_t k = 0; k < p->nsteps && !found;) {
        uint32_t first = k;
        if (gpu_run_launch(gs, &k, err, sizeof err) != 0) {
            fprintf(stderr, "%s: step by step: launch at step %u: %s\n", o->name, first, err);
            break;
        }
        for (uint32_t l = first; l < k && !found; l++)
            for (int j = 0; j < p->steps[l].nbufs && !found; j++) {
                uint32_t v = p->slot_values ? p->slot_values[l * NRT_MAX_BUFS + j] : p->steps[l].bufs[j];
                const cpu_tensor *want = &res->exact.values[v];   /* the executor keeps outputs, and values still read */
                if (!step_writes(&plan, p, l, j) || last_write[v] != l || want->numel == 0 || (!want->f && !want->i)) continue;
                char what[160];
                const nc_loc *at = &g->nodes[v].loc;
                snprintf(what, sizeof what, "%%%u %s (%s:%u)", v, nc_ops[g->nodes[v].op].name,
                         at->file >= 1 && at->file - 1 < g->nfiles ? g->files[at->file - 1] : "?", at->line);
                double slack = home[v] != v ? update_slack(g, g->nodes[home[v]].attr.index) : 0;
                if (value_differs(o, g, gs, res, v, home[v], what, slack) == 0) continue;
                const nrt_step *s = &p->steps[l];
                fprintf(stderr, "%s: step by step, the first launch that differs: step %u, %s, computing %%%u %s\n", o->name, l,
                        s->kind == NRT_STEP_KERNEL ? p->kernel_names[s->kernel] : s->kind == NRT_STEP_MATMUL ? "a cuBLASLt matmul" : "a copy",
                        s->node, nc_ops[g->nodes[s->node].op].name);
                found = true;
            }
    }
    if (!found) fprintf(stderr, "%s: step by step, every launch agrees: look at the CUDA graph or the order of launches\n", o->name);
    free(last_write);
    free(home);
    cuda_fuse_free(&plan);
    reference_free(g, &every);
}

/* A training step's second run starts from the first's new parameters and
 * what its kernels stored for the next run (the parameters' low-precision
 * copies, compiler/cuda_fuse.c carry_into): the executor takes the same step
 * from the GPU's new parameters (its own would differ where Adam's first
 * step turns a gradient's rounding into a sign). */
static int second_train_step(const gpu_check_opts *o, const ir_graph *g, const int64_t *syms, const nrt_program *p,
                             gpu_session *gs, cpu_tensor *inputs, cpu_tensor *params, reference *res)
{
    char err[1024];
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (g->nodes[v].op != OP_PARAM) continue;
        cpu_tensor *param = &params[g->nodes[v].attr.index];
        size_t bytes = (size_t)param->numel * dtype_size(param->dtype);
        unsigned char *buf = nc_xmalloc(bytes + 1);
        int rc = gpu_download(gs, v, buf, bytes, err, sizeof err);
        if (rc == 0) cpu_tensor_from_native(buf, param);
        free(buf);
        if (rc != 0) { fprintf(stderr, "%s: %s\n", o->name, err); return 1; }
    }
    reference_free(g, res);
    if (reference_run(g, syms, inputs, params, false, res, err, sizeof err) != 0) {
        fprintf(stderr, "%s: cpu, second step: %s\n", o->name, err);
        return 1;
    }
    if (gpu_poison(gs, err, sizeof err) != 0 || gpu_launch(gs, err, sizeof err) != 0 || gpu_finish(gs, err, sizeof err) != 0) {
        fprintf(stderr, "%s: gpu, second step: %s\n", o->name, err);
        return 1;
    }
    int fails = outputs_differ(o, g, gs, res);
    if (o->check_updates) fails += updates_differ(o, g, gs, res);
    if (fails) {
        fprintf(stderr, "%s: the second training step differs\n", o->name);
        locate_mismatch(o, g, syms, p, gs, inputs, params);
    }
    return fails;
}

/* New parameters after runs with the old: what the prepare steps made from
 * the old ones (bf16 weight copies) is stale, so the next run makes it
 * again; the outputs follow the new parameters. */
static int check_new_params(const gpu_check_opts *o, const ir_graph *g, const int64_t *syms, gpu_session *gs, cpu_tensor *inputs,
                            cpu_tensor *params)
{
    char err[1024];
    int fails = 0;
    for (uint32_t i = 0; i < g->nparams; i++) {
        cpu_tensor_free(&params[i]);
        if (param_init(g, i, o->seed + 1, &params[i], err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    }
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        if (n->op != OP_PARAM) continue;
        const cpu_tensor *t = &params[n->attr.index];
        size_t bytes = (size_t)t->numel * dtype_size(t->dtype);
        unsigned char *buf = nc_xmalloc(bytes + 1);
        cpu_tensor_to_native(t, buf);
        if (gpu_upload(gs, v, buf, bytes, err, sizeof err) != 0) { fprintf(stderr, "%s: %s\n", o->name, err); fails++; }
        free(buf);
    }
    reference res = {0};
    if (!fails && reference_run(g, syms, inputs, params, false, &res, err, sizeof err) != 0) {
        fprintf(stderr, "%s: cpu: %s\n", o->name, err);
        fails++;
    }
    if (!fails && (gpu_poison(gs, err, sizeof err) != 0 || gpu_run(gs, err, sizeof err) != 0)) {
        fprintf(stderr, "%s: gpu, new parameters: %s\n", o->name, err);
        fails++;
    }
    if (!fails) fails += outputs_differ(o, g, gs, &res);
    reference_free(g, &res);
    return fails;
}

/* gpu_profile times every launch: each launch's first step gets a time,
 * the other steps of a batch none; the launches one by one compute what
 * the graph did (a forward pass's outputs, checked again). */
static int check_profile(const gpu_check_opts *o, const ir_graph *g, const nrt_program *p, gpu_session *gs, const reference *res)
{
    char err[1024];
    double *t = nc_xcalloc(p->nsteps + 1, sizeof *t), total = 0;
    int fails = 0;
    if (gpu_profile(gs, 3, t, err, sizeof err) != 0) {
        fprintf(stderr, "%s: profile: %s\n", o->name, err);
        free(t);
        return 1;
    }
    uint32_t *launch_of = nrt_program_launches(p);
    for (uint32_t k = 0; k < p->nsteps; k++) {
        bool head = launch_of[k] == k, empty = p->steps[k].kind == NRT_STEP_COPY;
        if (head ? !(t[k] > 0 || empty) : t[k] != 0) {
            fprintf(stderr, "%s: profile: step %u (%s) timed %g s\n", o->name, k, head ? "a launch" : "inside a batch", t[k]);
            fails++;
        }
        total += t[k];
    }
    printf("%s: profiled, %.1f us a run over %u steps\n", o->name, total * 1e6, p->nsteps);
    if (!o->train_step) fails += outputs_differ(o, g, gs, res);
    free(launch_of);
    free(t);
    return fails;
}

/* Under the mock driver (tests/mockgpu, a libcuda.so.1 of our own) the
 * kernels run from their source compiled for the host; a real driver has no
 * mock_cuda_use_source. */
static int give_mock_source(const char *source, char *err, size_t errcap)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return 0;
    int (*use)(const char *, char *, size_t) = (int (*)(const char *, char *, size_t))(uintptr_t)dlsym(h, "mock_cuda_use_source");
    int rc = use ? use(source, err, errcap) : 0;
    dlclose(h);
    return rc;
}

/* The image the mock driver last loaded, NULL on a real one. */
static const void *mock_last_image(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return NULL;
    const void *(*last)(void) = (const void *(*)(void))(uintptr_t)dlsym(h, "mock_cuda_last_image");
    const void *image = last ? last() : NULL;
    dlclose(h);
    return image;
}

/* o->wrong_from: the kernel made wrong, in *source (which it replaces);
 * false where the text is not there. */
static bool make_wrong(const gpu_check_opts *o, char **source)
{
    const char *after = o->wrong_after ? strstr(*source, o->wrong_after) : *source;
    const char *at = after ? strstr(after, o->wrong_from) : NULL;
    if (!at) {
        fprintf(stderr, "%s: the CUDA source has no '%s' after '%s' to make wrong\n", o->name, o->wrong_from,
                o->wrong_after ? o->wrong_after : "its start");
        return false;
    }
    size_t head = (size_t)(at - *source), from = strlen(o->wrong_from), to = strlen(o->wrong_to), all = strlen(*source);
    char *wrong = nc_xmalloc(all - from + to + 1);
    memcpy(wrong, *source, head);
    memcpy(wrong + head, o->wrong_to, to);
    memcpy(wrong + head + to, at + from, all - head - from + 1);
    free(*source);
    *source = wrong;
    return true;
}

int gpu_check(const gpu_check_opts *o)
{
    char why[256], err[2048];
    if (!gpu_probe(why, sizeof why)) return 77;
    src_table src = {0};
    uint32_t id = o->source ? src_add(&src, o->name, o->source, strlen(o->source)) : src_load(&src, o->path, err, sizeof err);
    if (!id) { fprintf(stderr, "%s: %s\n", o->name, err); return 1; }
    diag_ctx d;
    diag_init(&d, &src, stderr);
    driver_opts dopts = {.dim_names = o->dim_names, .dim_values = o->dim_values, .ndims = o->ndims,
                         .set_names = o->set_names, .set_values = o->set_values, .nsets = o->nsets, .verify = true,
                         .train_step = o->train_step, .fuse = o->fuse, .memory_budget = o->memory_budget};
    ir_graph *g = driver_compile(&src, id, &dopts, &d);
    if (!g) { src_free(&src); return 1; }
    int fails = 0;
    nrt_module_data m = {.graph = g};
    nvrtc_image img;
    char *log = NULL;
    gpu_session *gs = NULL;
    cpu_tensor *inputs = nc_xcalloc(g->ninputs + 1, sizeof *inputs), *params = nc_xcalloc(g->nparams + 1, sizeof *params);
    reference res = {0};
    int64_t syms[NC_MAX_SYMS] = {0};
    if (!cuda_emit_program_ex(g, o->fuse, &m.program, err, sizeof err)) { fprintf(stderr, "%s: %s\n", o->name, err); fails++; goto out; }
    /* NETC_GPU_ARCH: the image of the cases that name none (compute_90: NETC_PDL launches early only into sm_90 images) */
    if (o->wrong_from && !make_wrong(o, &m.program.source)) { fails++; goto out; }
    const char *arch_env = getenv("NETC_GPU_ARCH"), *arch = o->arch ? o->arch : arch_env && *arch_env ? arch_env : "compute_80";
    if (!nvrtc_compile(m.program.source, arch, &img, &log)) { fprintf(stderr, "%s: %s\n", o->name, log); fails++; goto out; }
    nrt_image mi = {.is_ptx = img.is_ptx, .data = img.data, .size = img.size};
    snprintf(mi.arch, sizeof mi.arch, "%s", arch);
    m.images = &mi;
    m.nimages = 1;
    char desc[256];
    bool wgmma = o->arch && strcmp(o->arch, "sm_90a") == 0;
    if (wgmma) setenv("NETC_MOCK_WGMMA", "1", 1);
    int mock_rc = give_mock_source(m.program.source, err, sizeof err);
    if (wgmma) unsetenv("NETC_MOCK_WGMMA");
    if (mock_rc != 0) { fprintf(stderr, "%s: %s\n", o->name, err); fails++; goto img_out; }
    if (o->mock_refuse) setenv("NETC_MOCK_CUBLASLT_REFUSE", o->mock_refuse, 1);   /* read as the matmuls are planned */
    if (o->bgrad_epilogue) setenv("NETC_DGELU_BGRAD", "1", 1);
    int created = gpu_session_create(&m, syms, 0, o->use_graph, &gs, desc, sizeof desc, err, sizeof err);
    if (o->mock_refuse) unsetenv("NETC_MOCK_CUBLASLT_REFUSE");
    if (o->bgrad_epilogue) unsetenv("NETC_DGELU_BGRAD");
    if (created != 0) {
        fprintf(stderr, "%s: %s\n", o->name, err);
        fails++;
        goto img_out;
    }
    printf("%s: %s\n", o->name, desc);
    /* the mock GPU is an sm_90 device: a module with an sm_90a image runs that one */
    const void *loaded = mock_last_image();
    if (o->arch && loaded && loaded != mi.data) {
        fprintf(stderr, "%s: the runtime did not load the module's %s image\n", o->name, o->arch);
        fails++;
    }
    /* what a memory budget counts beside the arena is what the session
     * allocates (and a workspace for each stream past the first) */
    int64_t side = nrt_program_side_bytes(&m.program, 0) + (int64_t)(gpu_streams(gs) - 1) * NRT_MATMUL_WORKSPACE_BYTES;
    if (gpu_device_bytes(gs) != gpu_arena_bytes(gs) + side) {
        fprintf(stderr, "%s: the session holds %lld bytes, the arena and side bytes are %lld\n", o->name,
                (long long)gpu_device_bytes(gs), (long long)(gpu_arena_bytes(gs) + side));
        fails++;
    }
    if (o->memory_budget && gpu_device_bytes(gs) > o->memory_budget) {
        fprintf(stderr, "%s: the session holds %lld bytes, over the budget of %lld\n", o->name, (long long)gpu_device_bytes(gs),
                (long long)o->memory_budget);
        fails++;
    }
    /* inputs and parameters: random, the same on both sides */
    for (uint32_t i = 0; i < g->ninputs; i++) {
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) dim_eval(&g->dims[g->inputs[i].shape[k]], syms, &shape[k]);
        cpu_tensor_alloc(&inputs[i], g->inputs[i].dtype, g->inputs[i].rank, shape, (int64_t)1 << 34);
        random_tensor(&inputs[i], o->seed, 1000 + i, o->int_range);
        if (g->inputs[i].name[0] == '@') {   /* a training step's scalars: lr, bias corrections, scale, apply */
            static const struct { const char *name; float v; } fixed[] = {
                {"@lr", CHECK_LR}, {"@bias1", 0.1f}, {"@bias2", 0.001f}, {"@scale", 1.0f}, {"@apply", 1.0f}};
            for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++)
                if (strcmp(fixed[k].name, g->inputs[i].name) == 0) inputs[i].f[0] = fixed[k].v;
        }
    }
    for (uint32_t i = 0; i < g->nparams; i++)
        if (param_init(g, i, o->seed, &params[i], err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); fails++; goto sess_out; }
    fails += upload_values(o, g, gs, inputs, params);
    if (o->stage_inputs && stage_all(o, g, gs, inputs) != 0) fails++;
    if (reference_run(g, syms, inputs, params, false, &res, err, sizeof err) != 0) {
        fprintf(stderr, "%s: cpu: %s\n", o->name, err);
        fails++;
        goto sess_out;
    }
    int runs = o->use_graph && !o->train_step ? 3 : 1;
    for (int run = 0; run < runs && !fails; run++) {
        if ((o->stage_inputs && poison_inputs(g, gs, inputs, err, sizeof err) != 0) || gpu_poison(gs, err, sizeof err) != 0 ||
            gpu_launch(gs, err, sizeof err) != 0) {
            fprintf(stderr, "%s: gpu: %s\n", o->name, err);
            fails++;
            break;
        }
        if (o->stage_inputs && run + 1 < runs && stage_all(o, g, gs, inputs) != 0) fails++;   /* travels during the run */
        if (gpu_finish(gs, err, sizeof err) != 0) {
            fprintf(stderr, "%s: gpu: %s\n", o->name, err);
            fails++;
            break;
        }
        fails += outputs_differ(o, g, gs, &res);
        if (o->check_updates) fails += updates_differ(o, g, gs, &res);
        if (fails && run == 0) locate_mismatch(o, g, syms, &m.program, gs, inputs, params);
    }
    if (!fails && o->same_bits) fails += same_bits_again(o, g, syms, gs, inputs, params);
    /* fused: where the update stores the weights' copies for the next step */
    if (!fails && o->train_step && o->fuse) fails += second_train_step(o, g, syms, &m.program, gs, inputs, params, &res);
    if (o->profile && !fails) fails += check_profile(o, g, &m.program, gs, &res);
    if (!fails && !o->train_step) fails += check_new_params(o, g, syms, gs, inputs, params);   /* last: res is stale after it */
sess_out:
    gpu_session_free(gs);
img_out:
    nvrtc_image_free(&img);
out:
    free(log);
    reference_free(g, &res);
    for (uint32_t i = 0; i < g->ninputs; i++) cpu_tensor_free(&inputs[i]);
    for (uint32_t i = 0; i < g->nparams; i++) cpu_tensor_free(&params[i]);
    free(inputs);
    free(params);
    m.images = NULL;
    nrt_program_free(&m.program);
    ir_graph_free(g);
    src_free(&src);
    if (fails) fprintf(stderr, "FAIL %s (rerun: the same test with NETC_GPU_CASE=%s NETC_GPU_SEED=%llu)\n", o->name, o->name,
                       (unsigned long long)o->seed);
    return fails ? 1 : 0;
}
