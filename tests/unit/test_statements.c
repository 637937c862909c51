/* test_statements.c - if/else and a repeat's index, by value on the CPU
 * executor: only the taken branch is expanded (a fn's optional bias is a
 * parameter in one call and absent in the other), an else-if chain picks
 * the first branch that holds, and the index i is the number 0..N-1 in
 * arithmetic, in conditions, as a fn argument and in a width that grows
 * with it. A train section's ifs pick its loss and directives; a chain
 * of 5000 else-ifs builds. */
#include "cpu_exec.h"
#include "driver.h"

#include "test_util.h"

static const char *source =
    "fn dense(x: [..., In], out: int, bias: bool = true) {\n"
    "  param weight: f32[In, out]\n"
    "  if bias {\n"
    "    param bias: f32[out]\n"
    "    return x @ weight + bias\n"
    "  }\n"
    "  return x @ weight\n"
    "}\n"
    "fn step(x, i: int) {\n"
    "  if i == 0 and x.dtype == f32 { return x * 2.0 }\n"
    "  else if i < 3 or false { return x + (i + 1) }\n"
    "  else { return x * i + 1.0 }\n"
    "}\n"
    "model m(x: f32[2, 3]) -> (y: f32[2, 3], z: f32[2, 6], a: f32[2, 2], b: f32[2, 2]) {\n"
    "  y = x\n"
    "  repeat 4 as steps, i {\n"
    "    y = step(y, i)\n"
    "  }\n"
    "  z = x\n"
    "  repeat 3 as widen, i {\n"
    "    z = concat([z, slice(x, axis: 1, start: 0, end: 1) * i], axis: 1)\n"
    "  }\n"
    "  a = dense(x, 2)\n"
    "  b = dense(x, 2, bias: not true)\n"
    "  return y, z, a, b\n"
    "}\n";

static void test_branches(void)
{
    src_table src = {0};
    uint32_t id = src_add(&src, "statements.net", source, strlen(source));
    diag_ctx d;
    diag_init(&d, &src, stderr);
    driver_opts opts = {.verify = true};
    ir_graph *g = driver_compile(&src, id, &opts, &d);
    CHECK(g != NULL);
    if (!g) { src_free(&src); return; }
    /* dense's bias: a parameter of the call that takes the branch only */
    const char *names[] = {"a.weight", "a.bias", "b.weight"};
    CHECK(g->nparams == 3);
    for (uint32_t i = 0; i < g->nparams && i < 3; i++) CHECK(strcmp(g->params[i].decl.name, names[i]) == 0);

    const float x[6] = {1, -2, 0.5f, 3, 0.25f, -1};
    int64_t xs[2] = {2, 3}, ws[2] = {3, 2}, bs[1] = {2};
    cpu_tensor in = {0}, params[3] = {{0}};
    cpu_tensor_alloc(&in, NC_F32, 2, xs, 0);
    memcpy(in.f, x, sizeof x);
    cpu_tensor_alloc(&params[0], NC_F32, 2, ws, 0);
    cpu_tensor_alloc(&params[1], NC_F32, 1, bs, 0);
    cpu_tensor_alloc(&params[2], NC_F32, 2, ws, 0);
    for (int i = 0; i < 6; i++) params[0].f[i] = 0.5f * (float)i - 1.0f, params[2].f[i] = (float)(i % 3) + 0.25f;
    params[1].f[0] = 10, params[1].f[1] = -20;
    cpu_exec_opts o = {.inputs = &in, .params = params};
    cpu_exec_result res;
    char err[512];
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "statements: %s\n", err);
        failures++;
    } else {
        const cpu_tensor *y = &res.values[g->outputs[0].value], *z = &res.values[g->outputs[1].value];
        const cpu_tensor *a = &res.values[g->outputs[2].value], *b = &res.values[g->outputs[3].value];
        for (int k = 0; k < 6; k++) {
            /* i = 0: * 2; i = 1, 2: + (i + 1); i = 3: * 3 + 1 */
            float want = ((x[k] * 2.0f + 2.0f) + 3.0f) * 3.0f + 1.0f;
            if (!same_bits(y->f[k], want)) fprintf(stderr, "y[%d] = %g, want %g\n", k, y->f[k], want), failures++;
        }
        CHECK(z->rank == 2 && z->shape[1] == 6);
        for (int r = 0; r < 2; r++) {
            const float want[6] = {x[3 * r], x[3 * r + 1], x[3 * r + 2], 0.0f * x[3 * r], x[3 * r], 2.0f * x[3 * r]};
            for (int j = 0; j < 6; j++)
                if (!same_bits(z->f[6 * r + j], want[j])) fprintf(stderr, "z[%d, %d] = %g, want %g\n", r, j, z->f[6 * r + j], want[j]), failures++;
        }
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < 2; j++) {
                double wa = params[1].f[j], wb = 0;
                for (int k = 0; k < 3; k++) {
                    wa += (double)x[3 * r + k] * params[0].f[2 * k + j];
                    wb += (double)x[3 * r + k] * params[2].f[2 * k + j];
                }
                if (fabs(a->f[2 * r + j] - wa) > 1e-5) fprintf(stderr, "a[%d, %d] = %g, want %g\n", r, j, a->f[2 * r + j], wa), failures++;
                if (fabs(b->f[2 * r + j] - wb) > 1e-5) fprintf(stderr, "b[%d, %d] = %g, want %g\n", r, j, b->f[2 * r + j], wb), failures++;
            }
        cpu_exec_result_free(&res);
    }
    cpu_tensor_free(&in);
    for (int i = 0; i < 3; i++) cpu_tensor_free(&params[i]);
    ir_graph_free(g);
    src_free(&src);
}

/* A train section's ifs choose the loss and the directives when the model
 * is built, as a body's do: each branch's choices, and only the taken
 * branch's, reach the training spec, for both values of the config. */
static const char *train_source =
    "model m(x: f32[B, 4]) -> (logits: f32[B, 4])\n"
    "  config USE_SGD = true\n"
    "{\n"
    "  return x\n"
    "}\n"
    "train m {\n"
    "  if USE_SGD {\n"
    "    optimizer sgd(lr: 0.1, momentum: 0.9)\n"
    "    loss = sum(logits)\n"
    "  } else {\n"
    "    optimizer adamw(lr: 1e-3)\n"
    "    clip_grad_norm 2.0\n"
    "    loss = mean(logits)\n"
    "  }\n"
    "  schedule cosine(warmup: 10)\n"
    "}\n";

static void check_train_choice(const char *use_sgd)
{
    src_table src = {0};
    uint32_t id = src_add(&src, "train_if.net", train_source, strlen(train_source));
    diag_ctx d;
    diag_init(&d, &src, stderr);
    const char *names[] = {"USE_SGD"}, *values[] = {use_sgd};
    driver_opts opts = {.verify = true, .keep_loss = true, .set_names = names, .set_values = values, .nsets = 1};
    ir_graph *g = driver_compile(&src, id, &opts, &d);
    CHECK(g != NULL && d.errors == 0);
    if (!g) { src_free(&src); return; }
    const ir_train_spec *t = &g->train;
    bool sgd = strcmp(use_sgd, "true") == 0;
    CHECK(t->present);
    CHECK(t->optimizer == (sgd ? IR_OPT_SGD : IR_OPT_ADAMW));
    CHECK(t->lr == (sgd ? 0.1 : 1e-3));
    CHECK(t->momentum == (sgd ? 0.9 : 0.0));
    CHECK(t->weight_decay == (sgd ? 0.0 : 0.01));   /* adamw's default decay: the directive is the taken branch's */
    CHECK(t->clip_grad_norm == (sgd ? 0.0 : 2.0));
    CHECK(t->schedule == IR_SCHED_COSINE && t->warmup_steps == 10);
    CHECK(t->loss < g->nnodes && g->nodes[t->loss].op == (sgd ? OP_SUM : OP_MEAN));
    ir_graph_free(g);
    src_free(&src);
}

/* An else-if chain of 5000 links: the parser gathers it without nesting
 * (a nested chain ran bison out of stack near 2500), sema walks it in a
 * loop, and the link N picks is the one built. */
static void test_long_chain(void)
{
    enum { LINKS = 5000, PICK = 4321 };
    size_t cap = (size_t)LINKS * 64 + 256, n = 0;
    char *text = malloc(cap);
    n += (size_t)snprintf(text + n, cap - n, "model m(x: f32[2, 3])\n  config N = %d\n{\n  if N == 0 {\n    y = x\n  }", PICK);
    for (int i = 1; i < LINKS; i++) n += (size_t)snprintf(text + n, cap - n, " else if N == %d {\n    y = x + %d.0\n  }", i, i);
    snprintf(text + n, cap - n, " else {\n    y = x * 0.0\n  }\n  return y\n}\n");
    src_table src = {0};
    uint32_t id = src_add(&src, "chain.net", text, strlen(text));
    free(text);
    diag_ctx d;
    diag_init(&d, &src, stderr);
    driver_opts opts = {.verify = true};
    ir_graph *g = driver_compile(&src, id, &opts, &d);
    CHECK(g != NULL && d.errors == 0);
    if (!g) { src_free(&src); return; }
    int64_t xs[2] = {2, 3};
    cpu_tensor in = {0};
    cpu_tensor_alloc(&in, NC_F32, 2, xs, 0);
    for (int i = 0; i < 6; i++) in.f[i] = (float)i - 2.5f;
    cpu_exec_opts o = {.inputs = &in};
    cpu_exec_result res;
    char err[512];
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "long chain: %s\n", err);
        failures++;
    } else {
        const cpu_tensor *y = &res.values[g->outputs[0].value];
        for (int i = 0; i < 6; i++) CHECK(same_bits(y->f[i], in.f[i] + (float)PICK));
        cpu_exec_result_free(&res);
    }
    cpu_tensor_free(&in);
    ir_graph_free(g);
    src_free(&src);
}

int main(void)
{
    test_branches();
    test_long_chain();
    check_train_choice("true");
    check_train_choice("false");
    if (failures) fprintf(stderr, "test_statements: %d failures\n", failures);
    return failures != 0;
}
