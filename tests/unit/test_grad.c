/* test_grad.c - every differentiable op's gradient rule against central
 * finite differences on the CPU executor. Each case is a tiny model whose
 * loss is a weighted sum of the op's result y, so every output element counts
 * with a different weight. The finite differences take the executor's f32 y
 * and sum it in double on the host: an f32 loss rounds away the differences
 * of a larger tensor, and a weight growing with the index magnifies them.
 * NETC_GRAD_CASE=name runs one case. */
#include "autodiff.h"
#include "cpu_exec.h"
#include "driver.h"
#include "tensor_io.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct grad_case {
    const char *name;
    const char *body;          /* statements computing y from parameters a (and b, c) */
    const char *params;        /* declarations */
} grad_case;

/* The step (relative to max(1, |x|)) and relative tolerance by default: a
 * step near the cube root of f32's epsilon balances the central difference's
 * truncation (h^2) against the rounding of y (eps / h); the tolerance catches
 * a rule off by 1%. The absolute part of the tolerance is that rounding,
 * estimated per element (fd_noise). */
#define FD_STEP 5e-3
#define FD_RTOL 3e-3
/* How many f32 ulps of each weighted output element the forward's rounding
 * may move it by (sums, subtractions of nearby values inside an op). */
#define FD_ULPS 4.0

/* Finite-difference step and tolerance where the defaults do not
 * fit: through bf16 the loss is piecewise constant at the scale of one ulp
 * (2^-8), so the step must span many ulps and the check is coarser. */
static const struct {
    const char *name;
    double step, tol;
} fd_overrides[] = {{"cast", 0.1, 0.06}};

/* Shapes stay tiny: finite differences cost two forward runs per element. */
static const grad_case cases[] = {
    {"add", "y = a + b", "param a: f32[3, 4] = normal(1)\n param b: f32[4] = normal(1)"},
    {"sub", "y = a - b", "param a: f32[3, 4] = normal(1)\n param b: f32[3, 1] = normal(1)"},
    {"mul", "y = a * b", "param a: f32[3, 4] = normal(1)\n param b: f32[3, 4] = normal(1)"},
    {"div", "y = a / (abs(b) + 1.0)", "param a: f32[3, 4] = normal(1)\n param b: f32[3, 4] = normal(1)"},
    {"neg_abs", "y = -abs(a)", "param a: f32[3, 4] = normal(1)"},
    {"exp_log", "y = exp(a) + log(abs(a) + 0.5)", "param a: f32[3, 4] = normal(1)"},
    {"sqrt_rsqrt", "y = sqrt(abs(a) + 0.5) + rsqrt(abs(a) + 0.5)", "param a: f32[3, 4] = normal(1)"},
    {"square_tanh", "y = square(a) + tanh(a)", "param a: f32[3, 4] = normal(1)"},
    {"sigmoid_erf", "y = sigmoid(a) + erf(a)", "param a: f32[3, 4] = normal(1)"},
    {"relu", "y = relu(a)", "param a: f32[3, 4] = normal(1)"},
    {"gelu", "y = gelu(a) + gelu_tanh(a * 2.0)", "param a: f32[3, 4] = normal(1)"},
    {"silu", "y = silu(a)", "param a: f32[3, 4] = normal(1)"},
    {"pow", "y = pow(abs(a) + 0.5, b)", "param a: f32[3, 4] = normal(1)\n param b: f32[3, 4] = normal(0.5)"},
    /* the operator: a number exponent (a fill) and a tensor one; -a ** 2 is -(a ** 2) */
    {"pow_operator", "y = -a ** 2 + (abs(b) + 0.5) ** b + 2.0 ** a * a ** -1",
     "param a: f32[3, 4] = normal(1)\n param b: f32[3, 4] = normal(0.5)"},
    {"maximum", "y = maximum(a, b) + minimum(a, b * 2.0)", "param a: f32[3, 4] = normal(1)\n param b: f32[3, 4] = normal(1)"},
    {"where", "y = where(a > b, a * 3.0, b)", "param a: f32[3, 4] = normal(1)\n param b: f32[3, 4] = normal(1)"},
    {"cast", "y = f32(bf16(a) * bf16(b))", "param a: f32[3, 4] = normal(1)\n param b: f32[3, 4] = normal(1)"},
    /* linear at a fixed @step: the backward applies the forward's mask */
    {"dropout", "y = dropout(a, p: 0.3, seed: 4) + dropout(a * b, p: 0.5, seed: 9)",
     "param a: f32[4, 6] = normal(1)\n param b: f32[4, 6] = normal(1)"},
    {"sum_mean", "y = sum(a, axis: 1, keepdim: true) + mean(a, axis: 0)", "param a: f32[3, 4] = normal(1)"},
    {"max", "y = max(a, axis: -1)", "param a: f32[3, 4] = normal(1)"},
    {"softmax", "y = softmax(a) + log_softmax(a * 2.0)", "param a: f32[3, 5] = normal(1)"},
    /* 60 elements: the rounding of a larger sum must not fail a right gradient */
    {"softmax_large", "y = softmax(a) + softmax(a * 2.0)", "param a: f32[3, 4, 5] = normal(1)"},
    /* over another axis: transposes around the row-wise op */
    {"softmax_axis", "y = softmax(a, axis: 0) + log_softmax(a * 2.0, axis: -2) + softmax(a, axis: 2)",
     "param a: f32[2, 3, 4] = normal(1)"},
    {"layernorm", "y = layernorm(a, w, b)", "param a: f32[3, 6] = normal(1)\n param w: f32[6] = normal(1)\n param b: f32[6] = normal(1)"},
    {"rmsnorm", "y = rmsnorm(a, w)", "param a: f32[3, 6] = normal(1)\n param w: f32[6] = normal(1)"},
    {"cross_entropy", "y = cross_entropy(a, iota([3], dtype: i32)) + cross_entropy(a * 2.0, iota([3], dtype: i32), smoothing: 0.2)",
     "param a: f32[3, 5] = normal(1)"},
    {"attention", "y = attention(a, b, c, causal: true) + attention(a * 2.0, b, c, scale: 0.3)",
     "param a: f32[2, 3, 4] = normal(1)\n param b: f32[2, 3, 4] = normal(1)\n param c: f32[2, 3, 5] = normal(1)"},
    /* key lengths -1 (as 0: zeros, no gradient), 2 of 4 and 5 (clamped to 4), causal or not, over
       [B] and [B, H] */
    {"attention_lengths",
     "n = iota([3]) * 3 - 1\n  h = iota([3, 2], axis: 0) * 2 + iota([3, 2], axis: 1) * 3 - 1\n"
     "  y1 = attention(a, b, c, lengths: n) + reshape(attention(reshape(a, [3, 1, 4, 4]) * 2.0, reshape(b, [3, 1, 4, 4]),\n"
     "      reshape(c, [3, 1, 4, 2]), causal: true, lengths: n), [3, 4, 2])\n"
     "  y = concat([y1, reshape(attention(reshape(a, [3, 2, 2, 4]), reshape(a, [3, 2, 2, 4]) * 0.5, reshape(b, [3, 2, 2, 4]), lengths: h), [3, 4, 4])], axis: 2)",
     "param a: f32[3, 4, 4] = normal(1)\n param b: f32[3, 4, 4] = normal(1)\n param c: f32[3, 4, 2] = normal(1)"},
    {"attention_cross", "y = attention(a, b, c)", "param a: f32[2, 4] = normal(1)\n param b: f32[3, 4] = normal(1)\n param c: f32[3, 2] = normal(1)"},
    {"matmul", "y = a @ b + matmul(a, c, transpose_b: true)", "param a: f32[3, 4] = normal(1)\n param b: f32[4, 5] = normal(1)\n param c: f32[5, 4] = normal(1)"},
    {"matmul_t", "y = matmul(a, b, transpose_a: true)", "param a: f32[4, 3] = normal(1)\n param b: f32[4, 2] = normal(1)"},
    {"matmul_batch", "y = a @ b + a @ c", "param a: f32[2, 3, 4] = normal(1)\n param b: f32[2, 4, 2] = normal(1)\n param c: f32[4, 2] = normal(1)"},
    {"transpose", "y = transpose(a, [2, 0, 1]) * 1.5", "param a: f32[2, 3, 4] = normal(1)"},
    {"reshape", "y = reshape(a, [4, 3]) * 1.5", "param a: f32[3, 4] = normal(1)"},
    {"slice", "y = slice(a, axis: 1, start: 1, end: 3)", "param a: f32[3, 4] = normal(1)"},
    /* indexing: slices along several axes and reshapes dropping the indexed ones */
    {"index", "p = a[:, 1:, 1:3]\n  q = a[..., -1]\n  r = a[1, 0]\n  y = concat([reshape(p, [8]), reshape(q, [6]) * 2.0, r * 3.0], axis: 0)",
     "param a: f32[2, 3, 4] = normal(1)"},
    /* slices covering the axis end to end: their gradients joined by one concat */
    {"slices_cover", "p = slice(a, axis: 1, start: 0, end: 1)\n  q = slice(a, axis: 1, start: 1, end: 4)\n  y = concat([q * q, p], axis: 1)",
     "param a: f32[3, 4] = normal(1)"},
    /* slices with a gap, and the same slice twice: zero-padded as before */
    {"slices_gap", "p = slice(a, axis: 1, start: 0, end: 1)\n  q = slice(a, axis: 1, start: 2, end: 4)\n  y = concat([q, p, p * 2.0], axis: 1)",
     "param a: f32[3, 4] = normal(1)"},
    /* 16 slices of a rank-4 tensor: more parts than one concat kernel takes,
       joined in groups; each a different weight, so the order is checked */
    {"slices_many", "y = "
     "slice(a, axis: 3, start: 0, end: 1) * 1.0 + slice(a, axis: 3, start: 1, end: 2) * 2.0 + "
     "slice(a, axis: 3, start: 2, end: 3) * 3.0 + slice(a, axis: 3, start: 3, end: 4) * 4.0 + "
     "slice(a, axis: 3, start: 4, end: 5) * 5.0 + slice(a, axis: 3, start: 5, end: 6) * 6.0 + "
     "slice(a, axis: 3, start: 6, end: 7) * 7.0 + slice(a, axis: 3, start: 7, end: 8) * 8.0 + "
     "slice(a, axis: 3, start: 8, end: 9) * 9.0 + slice(a, axis: 3, start: 9, end: 10) * 10.0 + "
     "slice(a, axis: 3, start: 10, end: 11) * 11.0 + slice(a, axis: 3, start: 11, end: 12) * 12.0 + "
     "slice(a, axis: 3, start: 12, end: 13) * 13.0 + slice(a, axis: 3, start: 13, end: 14) * 14.0 + "
     "slice(a, axis: 3, start: 14, end: 15) * 15.0 + slice(a, axis: 3, start: 15, end: 16) * 16.0",
     "param a: f32[1, 2, 1, 16] = normal(1)"},
    {"concat", "y = concat([a, b, a], axis: 1)", "param a: f32[3, 2] = normal(1)\n param b: f32[3, 1] = normal(1)"},
    {"broadcast", "y = a + b * 2.0", "param a: f32[2, 3, 4] = normal(1)\n param b: f32[3, 1] = normal(1)"},
    {"gather", "y = gather(a, reshape(iota([4], dtype: i32), [2, 2]) / 2)", "param a: f32[3, 4] = normal(1)"},
    {"scatter_add", "y = scatter_add(reshape(iota([4], dtype: i32), [4]) / 2, a, rows: 3)", "param a: f32[4, 3] = normal(1)"},
    /* the standard library's convolutions (gather of pixel rows, scatter_add
       back): odd and unequal H and W, so that a swapped axis or a window
       reading past the edge shows; stride 2 reads the padding at both ends */
    {"nn_conv2d", "y = nn.conv2d(a, 2, 3, stride: 2, padding: 1)", "param a: f32[2, 5, 3, 2] = normal(1)"},
    {"nn_depthwise_conv2d", "y = nn.depthwise_conv2d(a, 3, stride: 2, padding: 1)", "param a: f32[2, 5, 3, 2] = normal(1)"},
    {"nn_flatten", "y = nn.flatten(a) * 1.5", "param a: f32[2, 3, 2, 2] = normal(1)"},
    /* the odd last row and column are in no window: their gradient is 0 */
    {"nn_max_pool2d", "y = nn.max_pool2d(a)", "param a: f32[2, 5, 3, 2] = normal(1)"},
    {"nn_avg_pool2d", "p = nn.avg_pool2d(a, kernel: 3)\n  q = nn.avg_pool2d(a * 2.0)\n  y = concat([reshape(p, [8]), reshape(q, [18])], axis: 0)",
     "param a: f32[1, 7, 6, 2] = normal(1)"},
    /* padded pools, as PyTorch's: max_pool2d's padding reads -inf, which must
       never win nor make its gradient NaN (the values are mostly negative, so
       a padding of zeros would win); avg_pool2d's reads zeros, counted */
    {"nn_max_pool2d_padded", "y = nn.max_pool2d(a, 3, stride: 2, padding: 1)", "param a: f32[2, 5, 4, 2] = normal(1, mean: -3)"},
    /* a training build: the batch's statistics, differentiated through */
    {"nn_batch_norm", "y = nn.batch_norm(a * 3.0 + 1.0)", "param a: f32[4, 2, 3] = normal(1)"},
    {"nn_batch_norm_rows", "y = nn.batch_norm(a, eps: 0.5)", "param a: f32[5, 2] = normal(1)"},
    {"nn_avg_pool2d_padded", "y = nn.avg_pool2d(a, 3, stride: 1, padding: 1)", "param a: f32[1, 4, 5, 2] = normal(1)"},
    /* LLaMA's layers: rotary's turn (x's gradient turns back) and SwiGLU's three products */
    {"nn_rotary", "y = nn.rotary(a * 2.0, base: 10.0)", "param a: f32[2, 5, 4] = normal(1)"},
    {"nn_swiglu", "y = nn.swiglu(a, 5)", "param a: f32[3, 4] = normal(1)"},
    {"sin_cos", "y = sin(a * 3.0) * cos(a) + cos(b)", "param a: f32[3, 4] = normal(1)\n param b: f32[4] = normal(2)"},
    /* each pixel's gradient is its scale x scale block's sum: unequal H and W, so a swapped axis shows */
    {"nn_upsample2d", "y = nn.upsample2d(a, 3) * 1.5", "param a: f32[2, 3, 2, 2] = normal(1)"},
    /* the recurrence through 4 steps: every state and the last, and the GRU's own weights
       (x's gradient flows back through the steps' gates) */
    {"nn_gru", "out, last = nn.gru(a * 2.0, 3)\n  y = concat([reshape(out, [2, 12]), last], axis: 1)", "param a: f32[2, 4, 2] = normal(1)"},
};

static int failures;

/* The weight of y's element j: within [0.5, 1.5) and all different (the
 * golden ratio's multiples modulo 1), so that a gradient routed to the wrong
 * element shows, without magnifying the rounding of a large tensor. */
static float weight_of(int64_t j) { return (float)(0.5 + fmod(0.6180339887498949 * (double)j, 1.0)); }

typedef struct fd_loss {
    double loss;   /* sum of weight * y, in double */
    double mag;    /* sum of |weight * y|: the scale of its rounding */
} fd_loss;

static fd_loss loss_of(const ir_graph *g, const cpu_tensor *inputs, cpu_tensor *params, ir_value y, const cpu_tensor *wt)
{
    cpu_exec_opts o = {.inputs = inputs, .params = params};
    cpu_exec_result res;
    char err[512];
    fd_loss l = {NAN, 0};
    if (cpu_exec_run(g, &o, &res, err, sizeof err)) {
        fprintf(stderr, "run: %s\n", err);
        return l;
    }
    l.loss = 0;
    for (int64_t j = 0; j < wt->numel; j++) {
        double v = (double)wt->f[j] * (double)res.values[y].f[j];
        l.loss += v;
        l.mag += fabs(v);
    }
    cpu_exec_result_free(&res);
    return l;
}

/* A central difference and the most the rounding of y can move it by. */
typedef struct fd_result {
    double d, noise;
} fd_result;

static fd_result central_difference(const ir_graph *g, const cpu_tensor *inputs, cpu_tensor *params, ir_value y,
                                    const cpu_tensor *wt, float *x, double h)
{
    float saved = *x, up = (float)(saved + h), down = (float)(saved - h);
    double span = (double)up - (double)down;   /* the step f32 could take */
    *x = up;
    fd_loss lp = loss_of(g, inputs, params, y, wt);
    *x = down;
    fd_loss lm = loss_of(g, inputs, params, y, wt);
    *x = saved;
    return (fd_result){(lp.loss - lm.loss) / span, FD_ULPS * FLT_EPSILON * (lp.mag + lm.mag) / span};
}

/* The model: the case's y returned along with the loss sum(y * wt), wt an
 * input the host fills (weight_of). w needs y's shape: compile y once to
 * learn it. Returns the training graph with the loss kept, or NULL. */
static ir_graph *compile_case(const grad_case *c, src_table *src, diag_ctx *d, int64_t *numel)
{
    char probe[2048];
    const char *imports = strstr(c->body, "nn.") ? "import nn\n" : "";
    snprintf(probe, sizeof probe, "%smodel m() {\n %s\n %s\n return y\n}\n", imports, c->params, c->body);
    uint32_t id = src_add(src, c->name, probe, strlen(probe));
    driver_opts po = {.verify = true};
    ir_graph *pg = driver_compile(src, id, &po, d);
    if (!pg) return NULL;
    const ir_node *yn = &pg->nodes[pg->outputs[0].value];
    char shape[256] = "[";
    *numel = 1;
    for (int k = 0; k < yn->rank; k++) {
        int64_t v;
        dim_is_const(&pg->dims[yn->shape[k]], &v);
        *numel *= v;
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", k ? ", " : "", (long long)v);
    }
    strcat(shape, "]");
    ir_graph_free(pg);
    char source[4096];
    snprintf(source, sizeof source,
             "%smodel m(wt: f32%s) -> (l: f32, yo: f32%s) {\n %s\n %s\n return sum(y * wt), y\n}\n"
             "train m {\n loss = l\n optimizer sgd(lr: 1.0)\n}\n",
             imports, shape, shape, c->params, c->body);
    id = src_add(src, c->name, source, strlen(source));
    driver_opts o = {.verify = true, .keep_loss = true};
    return driver_compile(src, id, &o, d);
}

/* The training graph's inputs: the weights, and dropout's @step. */
static bool set_inputs(const grad_case *c, const ir_graph *g, cpu_tensor *inputs, cpu_tensor **wt)
{
    for (uint32_t i = 0; i < g->ninputs; i++) {
        const ir_tensor_decl *in = &g->inputs[i];
        if (!strcmp(in->name, "wt")) {
            int64_t shape[8];
            for (int k = 0; k < in->rank; k++) dim_is_const(&g->dims[in->shape[k]], &shape[k]);
            cpu_tensor_alloc(&inputs[i], NC_F32, in->rank, shape, 0);
            for (int64_t j = 0; j < inputs[i].numel; j++) inputs[i].f[j] = weight_of(j);
            *wt = &inputs[i];
        } else if (!strcmp(in->name, TRAIN_INPUT_STEP) && in->rank == 0) {
            cpu_tensor_alloc(&inputs[i], NC_I32, 0, NULL, 0);
            inputs[i].i[0] = 5;
        } else {
            fprintf(stderr, "%s: unexpected input %s\n", c->name, in->name);
            return false;
        }
    }
    if (!*wt) fprintf(stderr, "%s: no input wt\n", c->name);
    return *wt != NULL;
}

static ir_value output_named(const ir_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (!strcmp(g->outputs[i].name, name)) return g->outputs[i].value;
    return IR_NONE;
}

typedef struct fd_tally {
    int bad, kinks, checked;
} fd_tally;

/* Every element of parameter i: autodiff's gradient an against central
 * differences at steps h and 2h; where those disagree beyond their rounding
 * a kink (relu, abs, max) lies within a step: no derivative to check. */
static void check_param(const grad_case *c, const ir_graph *g, const cpu_tensor *inputs, cpu_tensor *params, uint32_t i,
                        ir_value y, const cpu_tensor *wt, const cpu_tensor *an, double step, double tol, fd_tally *t)
{
    cpu_tensor *p = &params[i];
    for (int64_t j = 0; j < p->numel; j++) {
        double h = step * fmax(1.0, fabs(p->f[j]));
        fd_result f1 = central_difference(g, inputs, params, y, wt, &p->f[j], h);
        fd_result f2 = central_difference(g, inputs, params, y, wt, &p->f[j], 2 * h);
        if (fabs(f1.d - f2.d) > tol * fmax(fabs(f1.d), fabs(f2.d)) + f1.noise + f2.noise) { t->kinks++; continue; }
        double a = an->f[j];
        if (!(fabs(a - f1.d) <= tol * fmax(fabs(a), fabs(f1.d)) + f1.noise) && t->bad++ < 4)
            fprintf(stderr, "%s: d loss / d %s[%lld]: autodiff %.7g, finite difference %.7g (within %.2g)\n", c->name,
                    g->params[i].decl.name, (long long)j, a, f1.d, tol * fmax(fabs(a), fabs(f1.d)) + f1.noise);
        t->checked++;
    }
}

static void run_case(const grad_case *c)
{
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    int64_t numel = 0;
    ir_graph *g = compile_case(c, &src, &d, &numel);
    if (!g) { failures++; src_free(&src); return; }
    ir_value *grads = nc_xmalloc((g->nparams + 1) * sizeof *grads);
    cpu_tensor *params = nc_xcalloc(g->nparams + 1, sizeof *params), *inputs = nc_xcalloc(g->ninputs + 1, sizeof *inputs);
    char err[1024];
    fd_tally t = {0};
    ir_value y = output_named(g, "yo");
    cpu_tensor *wt = NULL;
    if (!autodiff_run(g, IR_NONE, grads, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", c->name, err);
        t.bad++;
        goto done;
    }
    for (uint32_t i = 0; i < g->nparams; i++)   /* outputs are kept; other values die at their last use */
        if (grads[i] != IR_NONE) ir_output_add(g, g->params[i].decl.name, grads[i]);
    if (y == IR_NONE) fprintf(stderr, "%s: no output yo\n", c->name);
    if (y == IR_NONE || ir_verify(g, stderr) || !set_inputs(c, g, inputs, &wt)) { t.bad++; goto done; }
    for (uint32_t i = 0; i < g->nparams; i++) param_init(g, i, 7, &params[i], err, sizeof err);
    cpu_exec_opts eo = {.inputs = inputs, .params = params, .keep_all = false};
    cpu_exec_result res;
    if (cpu_exec_run(g, &eo, &res, err, sizeof err)) { fprintf(stderr, "%s: %s\n", c->name, err); t.bad++; goto done; }
    double step = FD_STEP, tol = FD_RTOL;
    for (size_t k = 0; k < NC_COUNT(fd_overrides); k++)
        if (!strcmp(fd_overrides[k].name, c->name)) step = fd_overrides[k].step, tol = fd_overrides[k].tol;
    for (uint32_t i = 0; i < g->nparams; i++) {
        if (g->params[i].role == IR_ROLE_BUFFER) continue;   /* not trained: batch norm's running statistics */
        if (grads[i] == IR_NONE) { fprintf(stderr, "%s: no gradient for %s\n", c->name, g->params[i].decl.name); t.bad++; continue; }
        check_param(c, g, inputs, params, i, y, wt, &res.values[grads[i]], step, tol, &t);
    }
    cpu_exec_result_free(&res);
    if (t.checked < t.kinks * 4) {   /* most elements skipped: the case checks too little */
        fprintf(stderr, "%s: %d elements near a kink, only %d checked\n", c->name, t.kinks, t.checked);
        t.bad++;
    }
done:
    if (t.bad) {
        failures++;
        fprintf(stderr, "FAIL %s (rerun: NETC_GRAD_CASE=%s)\n", c->name, c->name);
    } else {
        printf("ok %s\n", c->name);
    }
    for (uint32_t i = 0; i < g->nparams; i++) cpu_tensor_free(&params[i]);
    for (uint32_t i = 0; i < g->ninputs; i++) cpu_tensor_free(&inputs[i]);
    free(params);
    free(inputs);
    free(grads);
    ir_graph_free(g);
    src_free(&src);
}

int main(void)
{
    const char *only = getenv("NETC_GRAD_CASE");
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (only && strcmp(only, cases[i].name) != 0) continue;
        run_case(&cases[i]);
        ran++;
    }
    printf("%d passed, %d failed\n", ran - failures, failures);
    return failures != 0;
}
