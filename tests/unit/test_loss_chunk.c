/* test_loss_chunk.c - a tied output projection and its cross entropy computed
 * in slices (compiler/loss_chunk.c) train the same as in one piece: on the
 * CPU executor the loss and every parameter update agree with the unsliced
 * step to f32 rounding (the sums run in another order), each slice has its
 * own backward, and the planned peak memory is lower. The forward build's
 * loss, sliced too where its rows are many, agrees with the unsliced one
 * and plans less memory. */
#include "autodiff.h"
#include "cuda_emit.h"
#include "driver.h"
#include "mem_budget.h"
#include "memplan.h"
#include "program.h"
#include "tensor_io.h"

#include "test_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB 4096

static const char *source =
    "model lm(tokens: i32[16, 8], targets: i32[16, 8]) -> (loss: f32) {\n"
    "  param wte: f32[4096, 16] = normal(0.5)\n"
    "  param w: f32[16, 16] = xavier\n"
    "  h = tanh(gather(wte, tokens) @ w)\n"
    "  logits = matmul(h, wte, transpose_b: true)\n"
    "  return cross_entropy(logits, targets, smoothing: 0.1)\n"
    "}\n"
    "train lm { optimizer sgd(lr: 0.5, momentum: 0.9) }\n";

/* The forward build slices only rows enough that each slice's product is
 * bound by its FLOPs, not by reading the weight again: 256 a slice. */
static const char *forward_source =
    "model lm(tokens: i32[16, 128], targets: i32[16, 128]) -> (loss: f32) {\n"
    "  param wte: f32[4096, 16] = normal(0.5)\n"
    "  param w: f32[16, 16] = xavier\n"
    "  h = tanh(gather(wte, tokens) @ w)\n"
    "  return cross_entropy(matmul(h, wte, transpose_b: true), targets, smoothing: 0.1)\n"
    "}\n";

/* How the loss is sliced, as netc's options ask: --loss-slices N (0: netc
 * chooses), with or without a memory budget (a generous one here: nothing
 * is recomputed). */
typedef struct slicing {
    int slices;
    bool budget;
} slicing;

enum { CHOSEN = 0, WHOLE = 1 };

static ir_graph *compile_sliced(const char *text, slicing how, bool train)
{
    driver_opts o = {.verify = true, .train_step = train, .loss_slices = how.slices,
                     .memory_budget = how.budget ? (int64_t)4 << 30 : 0};
    return compile_text("lm.net", text, &o);
}

static ir_graph *compile(slicing how, bool train) { return compile_sliced(source, how, train); }

static int64_t peak_bytes(const ir_graph *g)
{
    char err[512];
    return mem_budget_planned_peak(g, true, err, sizeof err);
}

static bool step(const ir_graph *g, cpu_exec_result *res, cpu_tensor *params, cpu_tensor *inputs)
{
    char err[512];
    for (uint32_t i = 0; i < g->nparams; i++) param_init(g, i, 7, &params[i], err, sizeof err);
    alloc_inputs(g, inputs);
    for (uint32_t i = 0; i < g->ninputs; i++)
        for (int64_t j = 0; j < inputs[i].numel; j++)   /* tokens and targets: classes; @lr and the like: 0.5 */
            cpu_set(&inputs[i], j, g->inputs[i].rank ? (double)(nc_rng_hash(11, i, (uint64_t)j) % VOCAB) : 0.5);
    return run_cpu("lm.net", g, inputs, params, res);
}

static int count_op(const ir_graph *g, nc_op op)
{
    int n = 0;
    for (ir_value v = 0; v < g->nnodes; v++) n += g->nodes[v].op == op;
    return n;
}

/* The forward build: its loss output in 8 slices, the same value, less memory. */
static void check_forward(void)
{
    ir_graph *sliced = compile_sliced(forward_source, (slicing){CHOSEN, false}, false);
    ir_graph *whole = compile_sliced(forward_source, (slicing){WHOLE, false}, false);
    ir_graph *few = compile((slicing){CHOSEN, false}, false);   /* 128 rows: the weight once */
    if (!sliced || !whole || !few) { failures++; return; }
    CHECK(count_op(sliced, OP_CROSS_ENTROPY) == 8 && count_op(whole, OP_CROSS_ENTROPY) == 1);
    CHECK(count_op(few, OP_CROSS_ENTROPY) == 1);
    ir_graph_free(few);
    cpu_tensor pa[8] = {{0}}, pb[8] = {{0}}, ia[8] = {{0}}, ib[8] = {{0}};
    cpu_exec_result ra, rb;
    if (step(sliced, &ra, pa, ia) && step(whole, &rb, pb, ib)) {
        float la = ra.values[sliced->outputs[0].value].f[0], lb = rb.values[whole->outputs[0].value].f[0];
        CHECK(fabsf(la - lb) <= 1e-5f * fabsf(lb));
        int64_t peak_sliced = peak_bytes(sliced), peak_whole = peak_bytes(whole);
        printf("chunked forward loss: %.7f vs %.7f; planned peak %lld -> %lld bytes\n", lb, la, (long long)peak_whole,
               (long long)peak_sliced);
        CHECK(peak_sliced > 0 && peak_sliced < peak_whole);
        cpu_exec_result_free(&ra);
        cpu_exec_result_free(&rb);
    } else {
        failures++;
    }
    for (uint32_t i = 0; i < sliced->nparams; i++) cpu_tensor_free(&pa[i]), cpu_tensor_free(&pb[i]);
    for (uint32_t i = 0; i < sliced->ninputs; i++) cpu_tensor_free(&ia[i]), cpu_tensor_free(&ib[i]);
    ir_graph_free(sliced);
    ir_graph_free(whole);
}

/* How many slices a training step's head takes: netc's choice, as few as
 * keep a slice's logits within 512 MiB (GPT-2's at 16 x 1024, 1.5 GiB of
 * bf16: 4; at 4 x 1024: whole), and under a memory budget the most, 8; or
 * as many as asked. Counted on the graph; nothing runs. */
static int train_slices(int64_t batch, slicing how)
{
    char text[512];
    snprintf(text, sizeof text,
             "model lm(tokens: i32[%lld, 1024], targets: i32[%lld, 1024]) -> (loss: f32)\n"
             "  precision bf16\n{\n"
             "  param wte: f32[50304, 16] = normal(0.02)\n"
             "  return cross_entropy(matmul(gather(wte, tokens), wte, transpose_b: true), targets)\n"
             "}\n"
             "train lm { optimizer sgd(lr: 0.1) }\n",
             (long long)batch, (long long)batch);
    ir_graph *g = compile_sliced(text, how, true);
    int n = g ? count_op(g, OP_CROSS_ENTROPY_GRAD) : -1;
    ir_graph_free(g);
    return n;
}

static void check_slice_counts(void)
{
    int by_size = train_slices(16, (slicing){CHOSEN, false}), most = train_slices(16, (slicing){CHOSEN, true});
    int small = train_slices(4, (slicing){CHOSEN, false}), asked = train_slices(4, (slicing){3, true});
    printf("training slices of a 50304-class head: 16 x 1024 %d (under a budget %d), 4 x 1024 %d (3 asked for: %d)\n", by_size,
           most, small, asked);
    CHECK(by_size == 4 && most == 8 && small == 1 && asked == 3);
}

int main(void)
{
    check_forward();
    check_slice_counts();
    /* this head's logits are small: in one piece unless a budget asks for the least memory */
    ir_graph *by_size = compile((slicing){CHOSEN, false}, true);
    CHECK(by_size && count_op(by_size, OP_CROSS_ENTROPY_GRAD) == 1);
    ir_graph_free(by_size);
    ir_graph *sliced = compile((slicing){CHOSEN, true}, true), *whole = compile((slicing){WHOLE, false}, true);
    if (!sliced || !whole) return 1;
    /* 8 slices of the T axis, each with its own gradient of the logits */
    CHECK(count_op(sliced, OP_CROSS_ENTROPY_GRAD) == 8 && count_op(whole, OP_CROSS_ENTROPY_GRAD) == 1);
    CHECK(sliced->nupdates == whole->nupdates && sliced->ninputs == whole->ninputs);
    cpu_tensor pa[8] = {{0}}, pb[8] = {{0}}, ia[8] = {{0}}, ib[8] = {{0}};
    cpu_exec_result ra, rb;
    CHECK(sliced->nparams <= 8 && sliced->ninputs <= 8);
    if (failures || !step(sliced, &ra, pa, ia) || !step(whole, &rb, pb, ib)) return 1;
    float la = ra.values[sliced->train.loss].f[0], lb = rb.values[whole->train.loss].f[0];
    CHECK(fabsf(la - lb) <= 1e-5f * fabsf(lb));
    double worst = 0;
    for (uint32_t k = 0; k < sliced->nupdates; k++) {
        const cpu_tensor *x = &ra.values[sliced->updates[k].value], *y = &rb.values[whole->updates[k].value];
        CHECK(sliced->updates[k].param == whole->updates[k].param && x->numel == y->numel);
        double scale = 0;
        for (int64_t i = 0; i < y->numel; i++) scale = fmax(scale, fabs(y->f[i]));
        for (int64_t i = 0; i < y->numel && x->numel == y->numel; i++)
            worst = fmax(worst, fabs(x->f[i] - y->f[i]) / fmax(scale, 1e-30));
    }
    CHECK(worst < 1e-5);
    int64_t peak_sliced = peak_bytes(sliced), peak_whole = peak_bytes(whole);
    printf("chunked loss: loss %.7f vs %.7f, largest update difference %.2g of the tensor's scale; "
           "planned peak %lld -> %lld bytes\n", lb, la, worst, (long long)peak_whole, (long long)peak_sliced);
    CHECK(peak_sliced > 0 && peak_sliced < peak_whole);
    cpu_exec_result_free(&ra);
    cpu_exec_result_free(&rb);
    for (uint32_t i = 0; i < sliced->nparams; i++) cpu_tensor_free(&pa[i]), cpu_tensor_free(&pb[i]);
    for (uint32_t i = 0; i < sliced->ninputs; i++) cpu_tensor_free(&ia[i]), cpu_tensor_free(&ib[i]);
    ir_graph_free(sliced);
    ir_graph_free(whole);
    if (!failures) printf("test_loss_chunk: all checks passed\n");
    return failures != 0;
}
