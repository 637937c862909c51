/* optimizer.c - the training step's update, as IR: gradient clipping, loss
 * scaling with overflow detection, and SGD (momentum, Nesterov) or Adam/AdamW
 * with f32 master weights and f32 moments kept as state parameters.
 *
 * Requires: a graph with a train spec and a loss. Produces: the graph with
 * backward and update nodes, scalar inputs for the host-side schedule, and
 * one ir_update per parameter and moment. Also the step input random ops
 * draw from (train_step_input). */
#include "autodiff.h"
#include "passes.h"
#include "typecheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* s (a rank-0 tensor) broadcast to like's shape */
static ir_value spread(ir_builder *c, ir_value s, ir_value like)
{
    const ir_node *l = &c->g->nodes[like];
    ir_node p = {.op = OP_BROADCAST, .rank = l->rank};
    memcpy(p.shape, l->shape, sizeof p.shape);
    if (l->rank == 0) return s;
    return irb_node(c, p, &s, 1);
}

static ir_value num(ir_builder *c, double v, ir_value like)
{
    ir_node p = {.op = OP_FILL, .dtype = c->g->nodes[like].dtype};
    p.attr.f = v;
    return spread(c, irb_node(c, p, NULL, 0), like);
}

static ir_value scalar_input(ir_builder *c, const char *name)
{
    ir_tensor_decl d = {.name = (char *)name, .dtype = NC_F32, .rank = 0, .loc = c->loc};
    uint32_t idx = ir_input_add(c->g, &d);
    ir_node p = {.op = OP_INPUT, .dtype = NC_F32, .loc = c->loc};
    p.attr.index = idx;
    return ir_add(c->g, &p, NULL, 0);
}

ir_graph *train_step_input(const ir_graph *g)
{
    ir_value first = IR_NONE;
    for (ir_value v = 0; v < g->nnodes && first == IR_NONE; v++)
        if ((nc_ops[g->nodes[v].op].flags & OPF_RANDOM) && ir_step_slot(&g->nodes[v]) < 0) first = v;
    if (first == IR_NONE) return NULL;
    /* a copy with the input's node just before the first random op */
    ir_graph *out = ir_graph_shell(g);
    const ir_node *fn = &g->nodes[first];
    ir_tensor_decl d = {.name = TRAIN_INPUT_STEP, .dtype = NC_I32, .rank = 0, .loc = fn->loc};
    ir_node in = {.op = OP_INPUT, .dtype = NC_I32, .loc = fn->loc};
    in.attr.index = ir_input_add(out, &d);
    ir_value *map = nc_xmalloc((g->nnodes + 1) * sizeof *map), *args = nc_xmalloc((g->nargs + 2) * sizeof *args);
    ir_value step = IR_NONE;
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (v == first) step = ir_add(out, &in, NULL, 0);
        const ir_node *n = &g->nodes[v];
        bool draws = (nc_ops[n->op].flags & OPF_RANDOM) && ir_step_slot(n) < 0;
        for (int i = 0; i < n->nargs; i++) args[i] = map[ir_args(g, n)[i]];
        if (draws) args[n->nargs] = step;
        map[v] = ir_add(out, n, args, (uint16_t)(n->nargs + draws));
    }
    ir_graph_finish(out, g, map);
    free(args);
    free(map);
    return out;
}

/* A zero-initialised f32 state parameter (role: optimizer state or accumulator) shaped like param i. */
static ir_value state_param(ir_builder *c, uint32_t i, const char *suffix, ir_param_role role, uint32_t *index)
{
    ir_param p = c->g->params[i];
    char name[700];
    snprintf(name, sizeof name, "%s.%s", c->g->params[i].decl.name, suffix);
    p.decl.name = name;
    p.role = role;
    p.init = IR_INIT_ZEROS;
    p.init_a = p.init_b = 0;
    p.decl.dtype = NC_F32;
    *index = ir_param_add(c->g, &p);
    const ir_param *q = &c->g->params[*index];
    ir_node n = {.op = OP_PARAM, .dtype = NC_F32, .rank = q->decl.rank, .loc = c->loc};
    memcpy(n.shape, q->decl.shape, sizeof n.shape);
    n.attr.index = *index;
    return ir_add(c->g, &n, NULL, 0);
}

/* Partial sums of x's elements, as a vector: a reduction runs one warp per
 * result on the GPU, so a sum over millions of gradient elements (GPT-2's
 * embedding: 38.6M) sums the rows of a [G, N/G] view (G warps at once);
 * a small tensor sums the one row of a [1, N] view. Every part is then a
 * sum over the last axis, which the concat joining them computes in one
 * kernel (cuda_fuse.c). */
#define SUM_SPLIT_MIN 65536
#define SUM_SPLIT_GROUPS 1024

static ir_value partial_sums(ir_builder *c, ir_value x)
{
    int64_t n;
    if (x == IR_NONE || !ir_numel(c->g, &c->g->nodes[x], NULL, &n)) {   /* symbolic sizes: no view to take */
        ir_node view = {.op = OP_RESHAPE, .rank = 1};
        view.shape[0] = ir_dim_const(c->g, 1);
        ir_value total = irb_op1(c, OP_SUM, x);
        return irb_node(c, view, &total, 1);
    }
    int64_t groups = 1;
    if (n >= SUM_SPLIT_MIN)
        for (int64_t d = SUM_SPLIT_GROUPS; d >= 32 && groups == 1; d--)
            if (n % d == 0) groups = d;
    ir_node view = {.op = OP_RESHAPE, .rank = 2};
    view.shape[0] = ir_dim_const(c->g, groups);
    view.shape[1] = ir_dim_const(c->g, n / groups);
    ir_node rows = {.op = OP_SUM};
    rows.attr.naxes = 1, rows.attr.axes[0] = 1;
    ir_value v = irb_node(c, view, &x, 1);
    return irb_node(c, rows, &v, 1);
}

/* The sum of the vectors' elements: joined by concats of up to 16 (a
 * concat kernel's sizes), then one sum, rather than a chain of scalar adds
 * (one launch each). */
#define SUM_JOIN 16

static ir_value sum_of_parts(ir_builder *c, ir_value *parts, int n)
{
    while (n > 1 && !c->failed) {
        int m = 0;
        for (int i = 0; i < n; i += SUM_JOIN) {
            int k = n - i < SUM_JOIN ? n - i : SUM_JOIN;
            parts[m++] = k == 1 ? parts[i] : irb_node(c, (ir_node){.op = OP_CONCAT}, &parts[i], k);
        }
        n = m;
    }
    return n == 1 ? irb_op1(c, OP_SUM, parts[0]) : IR_NONE;
}

/* The step's loss as the output TRAIN_OUTPUT_LOSS, unless the model already
 * returns it under that name (GPT-2's): two outputs of one name would be
 * written to one file, the second over the first. A model output named so
 * that is another value cannot share the name. */
static bool add_loss_output(ir_graph *g, ir_value loss, char *err, size_t errcap)
{
    for (uint32_t i = 0; i < g->noutputs; i++) {
        if (strcmp(g->outputs[i].name, TRAIN_OUTPUT_LOSS) != 0) continue;
        if (g->outputs[i].value == loss) return true;
        snprintf(err, errcap, "the model has an output named '%s' that is not the train section's loss, which a training "
                 "step returns under that name: give the output another name", TRAIN_OUTPUT_LOSS);
        return false;
    }
    ir_output_add(g, TRAIN_OUTPUT_LOSS, loss);
    return true;
}

/* Adam / AdamW: m' = b1 m + (1-b1) g; v' = b2 v + (1-b2) g^2;
 * p' = p - lr (m'/bc1) / (sqrt(v'/bc2) + eps) [- lr wd p for AdamW]. */
static void adam(ir_builder *c, uint32_t i, ir_value p, ir_value grad, ir_value lr, ir_value bc1, ir_value bc2, ir_value *newp)
{
    const ir_train_spec *t = &c->g->train;
    uint32_t mi, vi;
    ir_value m = state_param(c, i, "adam_m", IR_ROLE_STATE, &mi), v = state_param(c, i, "adam_v", IR_ROLE_STATE, &vi);
    if (t->optimizer == IR_OPT_ADAM && t->weight_decay > 0)       /* L2: into the gradient */
        grad = irb_op2(c, OP_ADD, grad, irb_op2(c, OP_MUL, num(c, t->weight_decay, p), p));
    ir_value m2 = irb_op2(c, OP_ADD, irb_op2(c, OP_MUL, num(c, t->beta1, m), m), irb_op2(c, OP_MUL, num(c, 1 - t->beta1, grad), grad));
    /* ((1-b2) g) g, as PyTorch's fused Adam rounds it, and not g g: that
     * square would be the gradient norm's too, and the two kernels would
     * share it through memory instead of each squaring g as it loads */
    ir_value g2 = irb_op2(c, OP_MUL, irb_op2(c, OP_MUL, num(c, 1 - t->beta2, grad), grad), grad);
    ir_value v2 = irb_op2(c, OP_ADD, irb_op2(c, OP_MUL, num(c, t->beta2, v), v), g2);
    ir_value mhat = irb_op2(c, OP_DIV, m2, spread(c, bc1, m2)), vhat = irb_op2(c, OP_DIV, v2, spread(c, bc2, v2));
    ir_value step = irb_op2(c, OP_DIV, mhat, irb_op2(c, OP_ADD, irb_op1(c, OP_SQRT, vhat), num(c, t->eps, vhat)));
    if (t->optimizer == IR_OPT_ADAMW && t->weight_decay > 0)      /* decoupled */
        step = irb_op2(c, OP_ADD, step, irb_op2(c, OP_MUL, num(c, t->weight_decay, p), p));
    *newp = irb_op2(c, OP_SUB, p, irb_op2(c, OP_MUL, spread(c, lr, step), step));
    ir_update_add(c->g, mi, m2);
    ir_update_add(c->g, vi, v2);
}

/* SGD: b' = mu b + g; d = nesterov ? g + mu b' : b'; p' = p - lr d. */
static void sgd(ir_builder *c, uint32_t i, ir_value p, ir_value grad, ir_value lr, ir_value *newp)
{
    const ir_train_spec *t = &c->g->train;
    if (t->weight_decay > 0) grad = irb_op2(c, OP_ADD, grad, irb_op2(c, OP_MUL, num(c, t->weight_decay, p), p));
    ir_value d = grad;
    if (t->momentum > 0) {
        uint32_t bi;
        ir_value b = state_param(c, i, "momentum", IR_ROLE_STATE, &bi);
        ir_value b2 = irb_op2(c, OP_ADD, irb_op2(c, OP_MUL, num(c, t->momentum, b), b), grad);
        ir_update_add(c->g, bi, b2);
        d = t->nesterov ? irb_op2(c, OP_ADD, grad, irb_op2(c, OP_MUL, num(c, t->momentum, b2), b2)) : b2;
    }
    *newp = irb_op2(c, OP_SUB, p, irb_op2(c, OP_MUL, spread(c, lr, d), d));
}

/* Accumulation: total = acc + grad; the step uses total / K. Returns the
 * gradient to use; appends acc's own update to *acc_updates for later (it
 * must not be undone by the overflow guard, or an inf would stick). */
static ir_value accumulate_grad(ir_builder *c, uint32_t i, ir_value grad, int k, ir_value apply, ir_update *acc_update)
{
    uint32_t ai;
    ir_value acc = state_param(c, i, "grad_acc", IR_ROLE_ACCUMULATOR, &ai);
    ir_value total = irb_op2(c, OP_ADD, acc, grad);
    ir_value x[3] = {spread(c, apply, total), num(c, 0.0, total), total};
    *acc_update = (ir_update){.param = ai, .value = irb_node(c, (ir_node){.op = OP_WHERE}, x, 3)};
    return irb_op2(c, OP_MUL, total, num(c, 1.0 / k, total));
}

/* Keep the old value of every assignment from `from` on where keep_new is false. */
static void guard_updates(ir_builder *c, uint32_t from, ir_value keep_new)
{
    ir_graph *g = c->g;
    for (uint32_t k = from; k < g->nupdates && !c->failed; k++) {
        ir_update *u = &g->updates[k];
        ir_value old = IR_NONE;
        for (ir_value v = 0; v < g->nnodes; v++)
            if (g->nodes[v].op == OP_PARAM && g->nodes[v].attr.index == u->param) old = v;
        ir_value value = u->value;
        ir_value x[3] = {spread(c, keep_new, value), value, old};
        g->updates[k].value = irb_node(c, (ir_node){.op = OP_WHERE}, x, 3);
    }
}

/* What the step's update is built from: the step's scalar inputs and the
 * values the gradients' pass leaves for the updates. */
typedef struct step_parts {
    uint32_t nweights;                  /* the parameters before the step's own (optimizer state, accumulators) */
    ir_value *grads;                    /* a parameter's gradient, unscaled (and accumulated); IR_NONE: none */
    ir_value *pnode;                    /* a parameter's node */
    ir_value lr, bc1, bc2;              /* bc1, bc2: Adam's bias corrections */
    ir_value scale;                     /* the loss scale; IR_NONE: none */
    ir_value apply;                     /* with --accumulate: 1 on the last micro-batch; IR_NONE: every step */
    ir_value clip_coef, finite;         /* IR_NONE: no clipping, no overflow check */
    ir_update *acc_updates;             /* the accumulators' assignments, added after the parameters' */
    uint32_t nacc;
} step_parts;

static ir_value f32_of(ir_builder *c, ir_value v)
{
    if (c->g->nodes[v].dtype == NC_F32) return v;
    ir_node cp = {.op = OP_CAST};
    cp.attr.to = NC_F32;
    return irb_node(c, cp, &v, 1);
}

/* Unscales the gradients (and adds up micro-batches); returns the sum of
 * their squares (IR_NONE without gradients). */
static ir_value unscaled_sum_of_squares(ir_builder *c, step_parts *s, int accumulate)
{
    ir_graph *g = c->g;
    ir_value *sq_parts = nc_xcalloc(s->nweights + 1, sizeof *sq_parts);
    int nsq = 0;
    for (uint32_t i = 0; i < s->nweights; i++) {   /* accumulate_grad adds parameters */
        ir_value *grad = &s->grads[i];
        if (*grad == IR_NONE) continue;
        if (s->scale != IR_NONE) *grad = irb_op2(c, OP_DIV, *grad, spread(c, s->scale, *grad));
        if (s->apply != IR_NONE && g->params[i].role == IR_ROLE_WEIGHT && s->pnode[i] != IR_NONE)
            *grad = accumulate_grad(c, i, f32_of(c, *grad), accumulate, s->apply, &s->acc_updates[s->nacc++]);
        sq_parts[nsq++] = partial_sums(c, irb_op2(c, OP_MUL, *grad, *grad));
    }
    ir_value sumsq = nsq > 0 ? sum_of_parts(c, sq_parts, nsq) : IR_NONE;
    free(sq_parts);
    return sumsq;
}

/* The global norm (an output), the clipping coefficient and, with dynamic
 * loss scaling, whether every gradient is finite (an output). */
static void norm_and_overflow(ir_builder *c, step_parts *s, ir_value sumsq)
{
    const ir_train_spec *t = &c->g->train;
    ir_value norm = irb_op1(c, OP_SQRT, sumsq);
    ir_output_add(c->g, TRAIN_OUTPUT_NORM, norm);
    if (t->clip_grad_norm > 0)   /* coef = min(1, max_norm / (norm + 1e-6)) */
        s->clip_coef = irb_op2(c, OP_MINIMUM, num(c, 1.0, norm),
                           irb_op2(c, OP_DIV, num(c, t->clip_grad_norm, norm), irb_op2(c, OP_ADD, norm, num(c, 1e-6, norm))));
    if (t->loss_scale == IR_SCALE_DYNAMIC) {   /* sum of squares is finite iff every gradient is */
        ir_value is_num = irb_op2(c, OP_EQ, sumsq, sumsq), below_inf = irb_op2(c, OP_LT, sumsq, num(c, INFINITY, sumsq));
        ir_value x[3] = {is_num, below_inf, is_num};
        s->finite = irb_node(c, (ir_node){.op = OP_WHERE}, x, 3);
        ir_output_add(c->g, TRAIN_OUTPUT_FINITE, s->finite);
    }
}

/* The update of parameter i by its optimizer, skipped on overflow. */
static void add_update(ir_builder *c, const step_parts *s, uint32_t i)
{
    ir_graph *g = c->g;
    c->loc = g->params[i].decl.loc;
    ir_value grad = f32_of(c, s->grads[i]), newp;
    /* clipped here, next to the update: the same kernel scales the
     * gradient as it loads it, and the clipped copy is never stored */
    if (s->clip_coef != IR_NONE) grad = irb_op2(c, OP_MUL, grad, spread(c, s->clip_coef, grad));
    if (g->params[i].decl.dtype != NC_F32) {
        snprintf(c->err, c->errcap, "parameter %s is %s: training keeps f32 master weights; declare it f32", g->params[i].decl.name,
                 dtype_name(g->params[i].decl.dtype));
        c->failed = true;
        return;
    }
    uint32_t first = g->nupdates;
    if (g->train.optimizer != IR_OPT_SGD) adam(c, i, s->pnode[i], grad, s->lr, s->bc1, s->bc2, &newp);
    else sgd(c, i, s->pnode[i], grad, s->lr, &newp);
    ir_update_add(g, i, newp);
    /* guarded here, next to the update, so one kernel computes and guards it */
    if (s->finite != IR_NONE) guard_updates(c, first, s->finite);   /* on overflow every assignment keeps its old value */
    if (s->apply != IR_NONE) guard_updates(c, first, s->apply);     /* between micro-batches nothing moves */
}

bool train_step_build(ir_graph *g, int accumulate, int loss_slices, FILE *report, char *err, size_t errcap)
{
    ir_train_spec *t = &g->train;
    ir_builder c = {.g = g, .who = "optimizer", .loc = t->loc, .err = err, .errcap = errcap};
    uint32_t nweights = g->nparams;
    step_parts s = {.nweights = nweights,
                    .grads = nc_xmalloc((nweights + 1) * sizeof *s.grads),
                    .pnode = nc_xmalloc((nweights + 1) * sizeof *s.pnode),
                    .clip_coef = IR_NONE,
                    .finite = IR_NONE,
                    .apply = IR_NONE,
                    .acc_updates = nc_xcalloc(nweights + 1, sizeof *s.acc_updates)};
    for (uint32_t i = 0; i < nweights; i++) s.pnode[i] = IR_NONE;
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_PARAM) s.pnode[g->nodes[v].attr.index] = v;
    s.lr = scalar_input(&c, TRAIN_INPUT_LR);
    bool is_adam = t->optimizer != IR_OPT_SGD;
    s.bc1 = is_adam ? scalar_input(&c, TRAIN_INPUT_BC1) : IR_NONE;
    s.bc2 = is_adam ? scalar_input(&c, TRAIN_INPUT_BC2) : IR_NONE;
    s.scale = t->loss_scale != IR_SCALE_NONE ? scalar_input(&c, TRAIN_INPUT_SCALE) : IR_NONE;
    if (accumulate > 1) s.apply = irb_op2(&c, OP_GT, scalar_input(&c, TRAIN_INPUT_APPLY), num(&c, 0.5, s.lr));
    ad_contribution pre[2];
    int npre = loss_slices != 1 ? loss_chunk_build(g, s.scale, loss_slices, pre, report, err, errcap) : 0;
    bool ok = npre >= 0 && autodiff_run_with(g, s.scale, pre, npre, s.grads, err, errcap);
    if (ok && !add_loss_output(g, t->loss, err, errcap)) ok = false;
    if (ok) {
        ir_value sumsq = unscaled_sum_of_squares(&c, &s, accumulate);
        if (sumsq != IR_NONE) norm_and_overflow(&c, &s, sumsq);
    }
    for (uint32_t i = 0; ok && !c.failed && i < nweights; i++)
        if (s.grads[i] != IR_NONE && s.pnode[i] != IR_NONE && g->params[i].role == IR_ROLE_WEIGHT) add_update(&c, &s, i);
    for (uint32_t k = 0; k < s.nacc && !c.failed; k++) ir_update_add(g, s.acc_updates[k].param, s.acc_updates[k].value);
    free(s.acc_updates);
    free(s.grads);
    free(s.pnode);
    return ok && !c.failed;
}
