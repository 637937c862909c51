/* test_batch_norm.c - buffers, `update` and `training`, through
 * stdlib/nn.net's batch_norm against PyTorch's definition computed here:
 * the forward pass normalises by the running statistics and assigns
 * nothing; a training step normalises by the batch's (biased variance) and
 * moves the running ones by momentum towards the batch's (unbiased
 * variance), step after step; the result has x's dtype. Also with B
 * symbolic when built, bound when run. */
#include "cpu_exec.h"
#include "driver.h"
#include "tensor_io.h"
#include "typecheck.h"

#include "test_util.h"

enum { BATCH = 5, H = 3, W = 2, C = 4, ROWS = BATCH * H * W };
#define MOMENTUM 0.2
#define EPS 1e-3

static const char *model_text(const char *dtype)
{
    static char text[1024];
    snprintf(text, sizeof text,
             "import nn\n"
             "model m(x: %s[B, %d, %d, %d]) {\n"
             "  bn = nn.batch_norm(x, momentum: %g, eps: %g)\n"
             "  return bn\n"
             "}\n"
             "train m(t: %s[B, %d, %d, %d]) {\n"
             "  loss = nn.mse(output, t)\n"
             "  optimizer sgd(lr: 0.5)\n"
             "}\n",
             dtype, H, W, C, MOMENTUM, EPS, dtype, H, W, C);
    return text;
}

/* A module built with B symbolic (netc build without --dim) is run at
 * B = BATCH: f32(N) / f32(N - 1) and mean's gradient read the size then. */
static bool symbolic;
static float lr;   /* SGD's @lr: 0 keeps the weights, so a second step sees the same ones */

static ir_graph *compile_model(const char *dtype, bool train_step)
{
    const char *b[] = {"B"};
    const int64_t batch[] = {BATCH};
    driver_opts o = {.verify = true, .train_step = train_step, .dim_names = b, .dim_values = batch, .ndims = symbolic ? 0 : 1};
    return compile_text("bn.net", model_text(dtype), &o);
}

static float uniform(uint32_t *seed, float lo, float hi)
{
    *seed = *seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)((*seed >> 8) / 16777216.0);
}

static uint32_t param_named(const ir_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->nparams; i++)
        if (!strcmp(g->params[i].decl.name, name)) return i;
    fprintf(stderr, "no parameter %s\n", name);
    failures++;
    return UINT32_MAX;
}

/* The model's tensors and what a step left in them. */
typedef struct bn_state {
    cpu_tensor *params;
    float x[ROWS * C];
    float weight[C], bias[C], mean[C], var[C];   /* the parameters and running statistics before the run */
} bn_state;

/* x in [-2, 3); weight, bias, the running mean in [-1, 1); the running variance in [0.5, 2). */
static void bn_init(const ir_graph *g, bn_state *s, uint32_t seed)
{
    s->params = nc_xcalloc(g->nparams + 1, sizeof *s->params);
    char err[256];
    for (uint32_t i = 0; i < g->nparams; i++) CHECK(param_init(g, i, 1, &s->params[i], err, sizeof err) == 0);
    for (int i = 0; i < ROWS * C; i++) s->x[i] = uniform(&seed, -2.0f, 3.0f);
    float *dst[4] = {s->weight, s->bias, s->mean, s->var};
    const char *names[4] = {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"};
    for (int k = 0; k < 4; k++) {
        uint32_t p = param_named(g, names[k]);
        for (int ch = 0; ch < C; ch++) {
            dst[k][ch] = k == 3 ? uniform(&seed, 0.5f, 2.0f) : uniform(&seed, -1.0f, 1.0f);
            if (p != UINT32_MAX) s->params[p].f[ch] = dst[k][ch];
        }
    }
}

static void bn_free(const ir_graph *g, bn_state *s)
{
    for (uint32_t i = 0; i < g->nparams; i++) cpu_tensor_free(&s->params[i]);
    free(s->params);
}

/* The model's output for the state's x, in float (NaN-filled on failure),
 * the step's updates applied. Its inputs: x (in its dtype), t (zeros),
 * SGD's @lr (0: the weights stay, so a second step sees the same ones). */
static void run(const ir_graph *g, bn_state *s, float *y)
{
    cpu_tensor *in = nc_xcalloc(g->ninputs + 1, sizeof *in);
    int64_t syms[NC_MAX_SYMS] = {BATCH};
    for (uint32_t i = 0; i < g->ninputs; i++) {
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) CHECK(dim_eval(&g->dims[g->inputs[i].shape[k]], syms, &shape[k]));
        cpu_tensor_alloc(&in[i], g->inputs[i].dtype, g->inputs[i].rank, shape, 0);
    }
    for (uint32_t i = 0; i < g->ninputs; i++) {
        for (int64_t j = 0; !strcmp(g->inputs[i].name, "x") && j < in[i].numel; j++) in[i].f[j] = nc_round_to(in[i].dtype, s->x[j]);
        if (!strcmp(g->inputs[i].name, "@lr")) in[i].f[0] = lr;
    }
    cpu_exec_result res;
    for (int i = 0; i < ROWS * C; i++) y[i] = NAN;
    char err[512];
    cpu_exec_opts o = {.inputs = in, .params = s->params, .syms = syms};
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "batch norm%s: %s\n", symbolic ? " (symbolic B)" : "", err);
        failures++;
    } else {
        const cpu_tensor *out = &res.values[g->outputs[0].value];
        CHECK(out->numel == ROWS * C && out->dtype == g->inputs[0].dtype);
        for (int64_t i = 0; i < out->numel && i < ROWS * C; i++) y[i] = out->f[i];
        cpu_exec_apply_updates(g, &res, s->params);
        cpu_exec_result_free(&res);
    }
    for (uint32_t i = 0; i < g->ninputs; i++) cpu_tensor_free(&in[i]);
    free(in);
}

/* Whether y is x normalised by mean and var, scaled and shifted, within tol. */
static int count_off(const bn_state *s, const float *y, const double *mean, const double *var, double tol)
{
    int off = 0;
    for (int r = 0; r < ROWS; r++)
        for (int ch = 0; ch < C; ch++) {
            double want = (s->x[r * C + ch] - mean[ch]) / sqrt(var[ch] + EPS) * s->weight[ch] + s->bias[ch];
            double got = y[r * C + ch];
            if (!(fabs(got - want) <= tol * (1.0 + fabs(want))) && off++ < 3)
                fprintf(stderr, "y[%d, %d] = %.7g, want %.7g\n", r, ch, got, want);
        }
    return off;
}

/* The forward pass: the running statistics, and nothing assigned. */
static void test_forward(const char *dtype, double tol)
{
    ir_graph *g = compile_model(dtype, false);
    CHECK(g != NULL);
    if (!g) return;
    CHECK(g->nupdates == 0);
    bn_state s;
    bn_init(g, &s, 11);
    float y[ROWS * C];
    double mean[C], var[C];
    for (int ch = 0; ch < C; ch++) mean[ch] = s.mean[ch], var[ch] = s.var[ch];
    if (strcmp(dtype, "f32") != 0)   /* the model reads x in its dtype */
        for (int i = 0; i < ROWS * C; i++) s.x[i] = nc_round_to(NC_BF16, s.x[i]);
    run(g, &s, y);
    int off = count_off(&s, y, mean, var, tol);
    if (off) fprintf(stderr, "forward %s: %d values off\n", dtype, off);
    CHECK(off == 0);
    uint32_t rm = param_named(g, "bn.running_mean");
    for (int ch = 0; rm != UINT32_MAX && ch < C; ch++) CHECK(same_bits(s.params[rm].f[ch], s.mean[ch]));
    bn_free(g, &s);
    ir_graph_free(g);
}

/* Two training steps on one batch: the batch's statistics normalise, and
 * the running ones move towards them each step. */
static void test_training_step(void)
{
    ir_graph *g = compile_model("f32", true);
    CHECK(g != NULL);
    if (!g) return;
    bn_state s;
    bn_init(g, &s, 29);
    double mean[C], var[C], unbiased[C], run_mean[C], run_var[C];
    for (int ch = 0; ch < C; ch++) {
        double sum = 0, sq = 0;
        for (int r = 0; r < ROWS; r++) sum += s.x[r * C + ch];
        mean[ch] = sum / ROWS;
        for (int r = 0; r < ROWS; r++) sq += (s.x[r * C + ch] - mean[ch]) * (s.x[r * C + ch] - mean[ch]);
        var[ch] = sq / ROWS;
        unbiased[ch] = sq / (ROWS - 1);
        run_mean[ch] = s.mean[ch];
        run_var[ch] = s.var[ch];
    }
    uint32_t rm = param_named(g, "bn.running_mean"), rv = param_named(g, "bn.running_var");
    for (int step = 0; step < 2 && rm != UINT32_MAX && rv != UINT32_MAX; step++) {
        float y[ROWS * C];
        run(g, &s, y);
        int off = count_off(&s, y, mean, var, 1e-5);
        if (off) fprintf(stderr, "training step %d: %d values off\n", step, off);
        CHECK(off == 0);
        for (int ch = 0; ch < C; ch++) {
            run_mean[ch] = (1 - MOMENTUM) * run_mean[ch] + MOMENTUM * mean[ch];
            run_var[ch] = (1 - MOMENTUM) * run_var[ch] + MOMENTUM * unbiased[ch];
            if (!(fabs(s.params[rm].f[ch] - run_mean[ch]) <= 1e-5 && fabs(s.params[rv].f[ch] - run_var[ch]) <= 1e-5)) {
                fprintf(stderr, "step %d, channel %d: running mean %.7g (want %.7g), var %.7g (want %.7g)\n", step, ch,
                        s.params[rm].f[ch], run_mean[ch], s.params[rv].f[ch], run_var[ch]);
                failures++;
            }
        }
    }
    bn_free(g, &s);
    ir_graph_free(g);
}

/* One step at lr 0.5 of the module built with B bound and of the one
 * built with B symbolic: the same weights after it (mean's gradient divides
 * by the count read at run time where the bound module multiplies by its
 * reciprocal: a rounding apart). */
static void test_symbolic_gradients(void)
{
    bn_state st[2];
    float y[ROWS * C];
    ir_graph *g[2];
    lr = 0.5f;
    for (int k = 0; k < 2; k++) {
        symbolic = k == 1;
        g[k] = compile_model("f32", true);
        CHECK(g[k] != NULL && g[k]->nsyms == (uint32_t)k);
        if (!g[k]) return;
        bn_init(g[k], &st[k], 29);
        run(g[k], &st[k], y);
    }
    for (uint32_t i = 0; i < g[0]->nparams; i++)
        for (int64_t j = 0; j < st[0].params[i].numel; j++) {
            float a = st[0].params[i].f[j], b = st[1].params[i].f[j];
            if (!(fabsf(a - b) <= 1e-6f * (1.0f + fabsf(a)))) {
                fprintf(stderr, "%s[%lld] after a step: %.9g bound, %.9g symbolic\n", g[0]->params[i].decl.name, (long long)j, a, b);
                failures++;
            }
        }
    for (int k = 0; k < 2; k++) bn_free(g[k], &st[k]), ir_graph_free(g[k]);
    symbolic = false, lr = 0;
}

/* PyTorch refuses to train on one value per channel (the unbiased running
 * variance divides by N - 1 = 0): batch_norm's assert N > 1 is an error
 * where the batch is known, folds where the other axes make N > 1 at any
 * batch, and is left to the session binding a symbolic B; the forward pass,
 * which reads the running statistics, takes a batch of 1. */
static void test_one_value_per_channel(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[B, 4]) {\n"
                       "  return nn.batch_norm(x)\n"
                       "}\n"
                       "train m(t: f32[B, 4]) {\n"
                       "  loss = nn.mse(output, t)\n"
                       "  optimizer sgd(lr: 0.5)\n"
                       "}\n";
    const char *b[] = {"B"};
    const int64_t one[] = {1};
    driver_opts bound = {.verify = true, .train_step = true, .dim_names = b, .dim_values = one, .ndims = 1};
    fprintf(stderr, "(an error is expected next: batch_norm at B = 1)\n");
    ir_graph *g = compile_text("one.net", text, &bound);
    CHECK(g == NULL);
    ir_graph_free(g);
    bound.train_step = false;
    g = compile_text("one.net", text, &bound);
    CHECK(g != NULL && g->nrequires == 0);
    ir_graph_free(g);

    driver_opts sym = {.verify = true, .train_step = true};
    g = compile_text("one.net", text, &sym);
    CHECK(g != NULL && g->nrequires == 1);
    if (g && g->nrequires == 1) {
        tc_error e;
        CHECK(tc_check_requires(g, (const int64_t[]){2}, &e));
        CHECK(!tc_check_requires(g, one, &e));
        CHECK(strstr(e.msg, "(in the call at one.net:3) fails at B = 1, where B > 1 is false: "
                            "batch_norm: training needs more than one value per channel, x is f32[B, 4] = f32[1, 4]") != NULL);
        /* the require's hint travels with it (it was said only where B was known at the build) */
        CHECK(strstr(e.hint, "the running variance is unbiased, over N - 1: train with a batch of 2 or more") != NULL);
        tc_error_free(&e);
    }
    ir_graph_free(g);
    sym.train_step = false;
    g = compile_text("one.net", text, &sym);
    CHECK(g != NULL && g->nrequires == 0);
    ir_graph_free(g);
    symbolic = true;
    g = compile_model("f32", true);   /* [B, 3, 2, 4]: N = 6 * B > 1 whatever B */
    CHECK(g != NULL && g->nrequires == 0);
    ir_graph_free(g);
    symbolic = false;
}

/* update NAME = number: a number is weakly typed, so it takes the buffer's
 * dtype and shape (it was refused: "expected a float tensor, got a number"). */
static void test_update_number(void)
{
    const char *text = "model m(x: f32[B, 3]) {\n"
                       "  buffer seen: f32[2, 3]\n"
                       "  buffer half: bf16[3]\n"
                       "  update seen = 1\n"
                       "  update half = 0.5\n"
                       "  param w: f32[3] = ones\n"
                       "  return x * w\n"
                       "}\n"
                       "train m(t: f32[B, 3]) {\n"
                       "  loss = mean(square(output - t))\n"
                       "  optimizer sgd(lr: 0.1)\n"
                       "}\n";
    driver_opts o = {.verify = true, .train_step = true};
    ir_graph *g = compile_text("number.net", text, &o);
    CHECK(g != NULL);
    if (!g) return;
    cpu_tensor *params = nc_xcalloc(g->nparams + 1, sizeof *params), *in = nc_xcalloc(g->ninputs + 1, sizeof *in);
    char err[512];
    for (uint32_t i = 0; i < g->nparams; i++) CHECK(param_init(g, i, 1, &params[i], err, sizeof err) == 0);
    int64_t syms[NC_MAX_SYMS] = {2};
    for (uint32_t i = 0; i < g->ninputs; i++) {
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < g->inputs[i].rank; k++) CHECK(dim_eval(&g->dims[g->inputs[i].shape[k]], syms, &shape[k]));
        cpu_tensor_alloc(&in[i], g->inputs[i].dtype, g->inputs[i].rank, shape, 0);
    }
    cpu_exec_result res;
    cpu_exec_opts eo = {.inputs = in, .params = params, .syms = syms};
    CHECK(cpu_exec_run(g, &eo, &res, err, sizeof err) == 0);
    if (res.values) {
        cpu_exec_apply_updates(g, &res, params);
        cpu_exec_result_free(&res);
        uint32_t seen = param_named(g, "seen"), half = param_named(g, "half");
        for (int64_t j = 0; seen != UINT32_MAX && j < params[seen].numel; j++) CHECK(params[seen].f[j] == 1.0f);
        CHECK(seen != UINT32_MAX && params[seen].numel == 6);
        for (int64_t j = 0; half != UINT32_MAX && j < params[half].numel; j++) CHECK(params[half].f[j] == 0.5f);
        CHECK(half != UINT32_MAX && params[half].numel == 3 && params[half].dtype == NC_BF16);
    }
    for (uint32_t i = 0; i < g->nparams; i++) cpu_tensor_free(&params[i]);
    for (uint32_t i = 0; i < g->ninputs; i++) cpu_tensor_free(&in[i]);
    free(params);
    free(in);
    ir_graph_free(g);
}

int main(void)
{
    test_update_number();
    test_one_value_per_channel();
    test_forward("f32", 1e-5);
    test_forward("bf16", 1e-2);
    test_training_step();
    symbolic = true;   /* the same, with B bound when the step runs */
    test_forward("f32", 1e-5);
    test_training_step();
    symbolic = false;
    test_symbolic_gradients();
    if (failures) fprintf(stderr, "%d failures\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
