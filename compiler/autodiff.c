/* autodiff.c - reverse-mode differentiation of the IR.
 *
 * Requires: a graph whose train.loss is an f32 scalar. Produces: the same
 * graph with the backward computation appended (so the node array stays a
 * valid schedule) and the gradient of the loss for every trained parameter.
 * Each op's rule is named in ops.def's grad column and builds ordinary IR
 * nodes, so the optimizer passes see forward and backward as one graph.
 * Rules compute in the dtype of the value they differentiate; reductions and
 * normalisations go through f32, as the forward ops accumulate in f32. */
#include "autodiff.h"
#include "typecheck.h"
#include "program.h"   /* NRT_MAX_INTS: the sizes one kernel takes */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A slice's gradient waiting to be joined with its siblings': the slices of
 * one value along one axis that cover it end to end (q, k and v of a fused
 * projection) give one concat, not a zero-padded concat each and their sum. */
typedef struct ad_piece {
    uint32_t lo, hi;           /* dim ids of the slice's bounds */
    ir_value grad;
    int32_t next;              /* the value's next piece, -1 at the end */
} ad_piece;

typedef struct ad_ctx {
    ir_graph *g;
    ir_value *grad;            /* accumulated gradient of each original node */
    int32_t *pieces_of;        /* each node's first waiting slice gradient, -1 for none */
    uint8_t *pieces_axis;
    ad_piece *pieces;
    int32_t npieces;
    bool *needs;               /* the node depends on a trained parameter */
    bool *leaf;                /* autodiff_vjp: a value differentiated for; its rule is not applied */
    uint32_t nforward;
    nc_loc loc;                /* of the node being differentiated */
    bool failed;
    char *err;
    size_t errcap;
} ad_ctx;

typedef void ad_rule(ad_ctx *c, ir_value v, ir_value g);

/* ---- building nodes ------------------------------------------------- */

static ir_value build(ad_ctx *c, ir_node proto, const ir_value *args, int n)
{
    if (c->failed) return IR_NONE;
    for (int i = 0; i < n; i++)
        if (args[i] == IR_NONE) { c->failed = true; return IR_NONE; }
    proto.loc = c->loc;
    ir_value out;
    tc_error e;
    if (!ir_build(c->g, &proto, args, (uint16_t)n, &out, &e)) {
        snprintf(c->err, c->errcap, "autodiff: building %s: %s", nc_ops[proto.op].name, e.msg);
        tc_error_free(&e);
        c->failed = true;
        return IR_NONE;
    }
    return out;
}

static const ir_node *nd(ad_ctx *c, ir_value v) { return &c->g->nodes[v]; }
static ir_value argv_(ad_ctx *c, ir_value v, int i) { return ir_args(c->g, nd(c, v))[i]; }

static ir_value un(ad_ctx *c, nc_op op, ir_value a) { return build(c, (ir_node){.op = op}, &a, 1); }
static ir_value bin(ad_ctx *c, nc_op op, ir_value a, ir_value b)
{
    ir_value x[2] = {a, b};
    return build(c, (ir_node){.op = op}, x, 2);
}

static ir_value cast_to(ad_ctx *c, ir_value x, nc_dtype t)
{
    if (x == IR_NONE || nd(c, x)->dtype == t) return x;
    ir_node p = {.op = OP_CAST};
    p.attr.to = t;
    return build(c, p, &x, 1);
}

static ir_value broadcast_to(ad_ctx *c, ir_value x, uint8_t rank, const uint32_t *shape)
{
    if (x == IR_NONE) return x;
    const ir_node *n = nd(c, x);
    if (n->rank == rank && (rank == 0 || memcmp(n->shape, shape, rank * sizeof *shape) == 0)) return x;
    ir_node p = {.op = OP_BROADCAST, .rank = rank};
    if (rank) memcpy(p.shape, shape, rank * sizeof *shape);
    return build(c, p, &x, 1);
}

/* A constant with like's dtype and shape. */
static ir_value constant(ad_ctx *c, double v, ir_value like)
{
    ir_node p = {.op = OP_FILL, .dtype = nd(c, like)->dtype};
    p.attr.f = v;
    ir_value s = build(c, p, NULL, 0);
    const ir_node *l = nd(c, like);
    uint32_t shape[NC_MAX_RANK];
    memcpy(shape, l->shape, sizeof shape);
    return broadcast_to(c, s, l->rank, shape);
}

static ir_value scale(ad_ctx *c, ir_value x, double k) { return bin(c, OP_MUL, x, constant(c, k, x)); }

static ir_value reshape_to(ad_ctx *c, ir_value x, uint8_t rank, const uint32_t *shape);

/* Ops deep enough for a mean's gradient (a spread times 1/N) and a sum of
 * two such. */
enum { RESPREAD_DEPTH = 3 };

/* reshape(x, shape) built from x's broadcasts again, at the new shape, when
 * x is an elementwise expression of broadcasts whose sources vary only along
 * trailing axes the reshape keeps (a mean's gradient over a channels-last
 * batch norm's [N, C] view: reshape(g[1, C] / N spread to [N, C]) to
 * [B, H, W, C] is g / N spread to [B, H, W, C]). The same elements, with no
 * reshape between the spread and its readers: the fuser loads the source
 * in the readers' kernel instead of writing the spread tensor (two kernels
 * and a tensor's writes and reads per batch norm). IR_NONE where x is not
 * such an expression; with build_it false, x where it is, and nothing built. */
static ir_value respread(ad_ctx *c, ir_value x, uint8_t rank, const uint32_t *shape, int depth, bool build_it)
{
    const ir_node *n = nd(c, x);
    uint32_t one = ir_dim_const(c->g, 1);
    if (n->op == OP_BROADCAST) {
        ir_value s = ir_args(c->g, n)[0];
        const ir_node *sn = nd(c, s);
        int f = 0;   /* the source's leading 1s */
        while (f < sn->rank && sn->shape[f] == one) f++;
        int L = sn->rank - f;
        if (L > rank || L > n->rank) return IR_NONE;
        for (int j = 0; j < L; j++)
            if (n->shape[n->rank - L + j] != shape[rank - L + j]) return IR_NONE;
        if (!build_it) return x;
        if (sn->rank > rank) {   /* its leading 1s would not fit the new rank */
            uint32_t kept[NC_MAX_RANK];
            memcpy(kept, sn->shape + f, L * sizeof *kept);
            s = reshape_to(c, s, (uint8_t)L, kept);
        }
        return broadcast_to(c, s, rank, shape);
    }
    if (depth == 0 || nc_ops[n->op].category != CAT_ELEMENTWISE || ir_step_slot(n) >= 0 || n->nargs > 3 || n->nargs < 1) return IR_NONE;
    ir_value args[3];
    int nargs = n->nargs;
    ir_node proto = {.op = n->op, .attr = n->attr};
    for (int i = 0; i < nargs; i++) {
        args[i] = respread(c, ir_args(c->g, nd(c, x))[i], rank, shape, depth - 1, build_it);
        if (args[i] == IR_NONE) return IR_NONE;
    }
    return build_it ? build(c, proto, args, nargs) : x;
}

static ir_value reshape_to(ad_ctx *c, ir_value x, uint8_t rank, const uint32_t *shape)
{
    if (x == IR_NONE) return x;
    const ir_node *n = nd(c, x);
    if (n->rank == rank && (rank == 0 || memcmp(n->shape, shape, rank * sizeof *shape) == 0)) return x;
    if (respread(c, x, rank, shape, RESPREAD_DEPTH, false) != IR_NONE) return respread(c, x, rank, shape, RESPREAD_DEPTH, true);
    ir_node p = {.op = OP_RESHAPE, .rank = rank};
    if (rank) memcpy(p.shape, shape, rank * sizeof *shape);
    return build(c, p, &x, 1);
}

static ir_value reduce(ad_ctx *c, nc_op op, ir_value x, const int8_t *axes, int naxes, bool keepdim)
{
    ir_node p = {.op = op};
    p.attr.naxes = (uint8_t)naxes;
    if (naxes) memcpy(p.attr.axes, axes, (size_t)naxes);
    p.attr.keepdim = keepdim;
    return build(c, p, &x, 1);
}

/* Sum over the last axis, keeping it (for row-wise rules). */
static ir_value row_sum(ad_ctx *c, ir_value x)
{
    int8_t ax = (int8_t)(nd(c, x)->rank - 1);
    return reduce(c, OP_SUM, x, &ax, 1, true);
}

static ir_value matmul(ad_ctx *c, ir_value a, ir_value b, bool ta, bool tb)
{
    ir_node p = {.op = OP_MATMUL};
    p.attr.ta = ta, p.attr.tb = tb;
    ir_value x[2] = {a, b};
    return build(c, p, x, 2);
}

static ir_value where(ad_ctx *c, ir_value cond, ir_value a, ir_value b)
{
    ir_value x[3] = {cond, a, b};
    return build(c, (ir_node){.op = OP_WHERE}, x, 3);
}

static ir_value zeros_like(ad_ctx *c, ir_value x) { return constant(c, 0.0, x); }

/* Reduce a gradient of a broadcast result down to the operand's shape. */
static ir_value sum_to(ad_ctx *c, ir_value g, uint8_t rank, const uint32_t *shape)
{
    if (g == IR_NONE) return g;
    const ir_node *n = nd(c, g);
    uint8_t grank = n->rank;
    uint32_t one = ir_dim_const(c->g, 1);
    int8_t axes[NC_MAX_RANK];
    int na = 0;
    for (int k = 0; k < grank; k++) {
        int j = k - (grank - rank);
        uint32_t gd = nd(c, g)->shape[k];
        if (j < 0 || (shape[j] == one && gd != one)) axes[na++] = (int8_t)k;
    }
    ir_value r = na ? reduce(c, OP_SUM, g, axes, na, false) : g;
    return reshape_to(c, r, rank, shape);
}

/* ---- accumulation ----------------------------------------------------- */

static void add_grad(ad_ctx *c, ir_value x, ir_value g)
{
    if (g == IR_NONE || c->failed || x >= c->nforward || !c->needs[x]) return;
    if (!dtype_is_float(nd(c, x)->dtype)) return;
    g = cast_to(c, g, nd(c, x)->dtype);
    c->grad[x] = c->grad[x] == IR_NONE ? g : bin(c, OP_ADD, c->grad[x], g);
}

/* Slice [lo, hi) of x along axis ax, zeros elsewhere: x's shape. */
static ir_value pad_slice(ad_ctx *c, ir_value x, int ax, uint32_t lo, uint32_t hi, ir_value g)
{
    const ir_node *xn = nd(c, x);
    uint32_t size = xn->shape[ax], shape[NC_MAX_RANK];
    memcpy(shape, xn->shape, sizeof shape);
    uint8_t rank = xn->rank;
    nc_dtype dt = nd(c, g)->dtype;
    ir_value parts[3];
    int np = 0;
    int64_t k;
    if (!(dim_is_const(&c->g->dims[lo], &k) && k == 0)) {
        shape[ax] = lo;
        parts[np++] = broadcast_to(c, build(c, (ir_node){.op = OP_FILL, .dtype = dt}, NULL, 0), rank, shape);
    }
    parts[np++] = g;
    if (hi != size) {
        dim_expr rest;
        if (dim_sub(&c->g->dims[size], &c->g->dims[hi], &rest) != DIM_OK) { c->failed = true; return IR_NONE; }
        shape[ax] = ir_dim_intern(c->g, &rest);
        parts[np++] = broadcast_to(c, build(c, (ir_node){.op = OP_FILL, .dtype = dt}, NULL, 0), rank, shape);
    }
    if (np == 1) return g;
    ir_node p = {.op = OP_CONCAT};
    p.attr.axis = ax;
    return build(c, p, parts, np);
}

/* Slice gradients of one tensor joined by concats; with more, each is
 * zero-padded. As many as a repeat has iterations: a loop's x[:, t] of
 * every step, padded each to x's size, would cost steps times x. */
enum { SETTLE_MAX_PARTS = 4096 };

/* A concat's kernel takes rank + parts + 1 sizes of NRT_MAX_INTS, as sema's
 * concat_in_groups says: 16 slices of a rank-4 tensor are one too many, so
 * more parts than fit are joined in groups first, and the groups again
 * (exact). parts is overwritten. */
static ir_value concat_parts(ad_ctx *c, int ax, ir_value *parts, int np)
{
    ir_node p = {.op = OP_CONCAT};
    p.attr.axis = ax;
    int most = NRT_MAX_INTS - 1 - nd(c, parts[0])->rank;
    while (np > most) {
        int m = 0;
        for (int i = 0; i < np; i += most) {
            int k = np - i < most ? np - i : most;
            parts[m++] = k == 1 ? parts[i] : build(c, p, parts + i, k);
        }
        np = m;
    }
    return build(c, p, parts, np);
}

/* x's waiting slice gradients into its gradient: one concat when they cover
 * the axis end to end, else each zero-padded. */
static void settle(ad_ctx *c, ir_value x)
{
    if (x >= c->nforward || c->pieces_of[x] < 0) return;
    int ax = c->pieces_axis[x];
    uint32_t at = ir_dim_const(c->g, 0), size = nd(c, x)->shape[ax];
    ir_value parts[SETTLE_MAX_PARTS];
    int np = 0, total = 0;
    for (int32_t i = c->pieces_of[x]; i >= 0; i = c->pieces[i].next) total++;
    while (at != size && np < total && np < SETTLE_MAX_PARTS) {   /* follow lo == the last hi from 0 */
        int32_t found = -1;
        for (int32_t i = c->pieces_of[x]; i >= 0 && found < 0; i = c->pieces[i].next)
            if (c->pieces[i].lo == at) found = i;
        if (found < 0) break;
        parts[np++] = c->pieces[found].grad;
        at = c->pieces[found].hi;
    }
    int32_t first = c->pieces_of[x];
    c->pieces_of[x] = -1;
    if (at == size && np == total) {
        add_grad(c, x, np == 1 ? parts[0] : concat_parts(c, ax, parts, np));
        return;
    }
    for (int32_t i = first; i >= 0; i = c->pieces[i].next)
        add_grad(c, x, pad_slice(c, x, ax, c->pieces[i].lo, c->pieces[i].hi, c->pieces[i].grad));
}

/* ---- rules (named in ops.def) ------------------------------------------ */

static void grad_none(ad_ctx *c, ir_value v, ir_value g) { (void)c, (void)v, (void)g; }

#define A0 argv_(c, v, 0)
#define A1 argv_(c, v, 1)
#define A2 argv_(c, v, 2)

static void grad_neg(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, un(c, OP_NEG, g)); }
static void grad_abs(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value x = A0, z = zeros_like(c, x);
    add_grad(c, x, where(c, bin(c, OP_GT, x, z), g, where(c, bin(c, OP_LT, x, z), un(c, OP_NEG, g), zeros_like(c, g))));
}
static void grad_exp(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, bin(c, OP_MUL, g, v)); }
static void grad_log(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, bin(c, OP_DIV, g, A0)); }
static void grad_sqrt(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, bin(c, OP_DIV, scale(c, g, 0.5), v)); }
static void grad_rsqrt(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value y3 = bin(c, OP_MUL, bin(c, OP_MUL, v, v), v);
    add_grad(c, A0, scale(c, bin(c, OP_MUL, g, y3), -0.5));
}
static void grad_square(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, scale(c, bin(c, OP_MUL, g, A0), 2.0)); }
static void grad_tanh(ad_ctx *c, ir_value v, ir_value g)
{
    add_grad(c, A0, bin(c, OP_MUL, g, bin(c, OP_SUB, constant(c, 1.0, v), bin(c, OP_MUL, v, v))));
}
static void grad_sin(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, bin(c, OP_MUL, g, un(c, OP_COS, A0))); }
static void grad_cos(ad_ctx *c, ir_value v, ir_value g)
{
    add_grad(c, A0, un(c, OP_NEG, bin(c, OP_MUL, g, un(c, OP_SIN, A0))));
}
static void grad_erf(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value x = A0;   /* 2/sqrt(pi) e^(-x^2) */
    add_grad(c, x, bin(c, OP_MUL, g, scale(c, un(c, OP_EXP, un(c, OP_NEG, bin(c, OP_MUL, x, x))), 1.1283791670955126)));
}
static void grad_sigmoid(ad_ctx *c, ir_value v, ir_value g)
{
    add_grad(c, A0, bin(c, OP_MUL, g, bin(c, OP_MUL, v, bin(c, OP_SUB, constant(c, 1.0, v), v))));
}
/* From the output (y > 0 exactly where x > 0, NaN included), so the input
 * can die at the relu and the relu can be a matmul's epilogue. */
static void grad_relu(ad_ctx *c, ir_value v, ir_value g)
{
    add_grad(c, A0, where(c, bin(c, OP_GT, v, zeros_like(c, v)), g, zeros_like(c, g)));
}
/* d/dx x*Phi(x) = Phi(x) + x*phi(x), computed in f32. */
/* y = x Phi(x): dy/dx = Phi(x) + x phi(x). One op, f32 inside: composed of
 * f32 ops, Phi = (1 + erf) / 2 would cancel to nothing below x = -5. */
static void grad_gelu(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value xg[2] = {A0, cast_to(c, g, nd(c, A0)->dtype)};
    add_grad(c, A0, build(c, (ir_node){.op = OP_GELU_GRAD}, xg, 2));
}
/* y = 0.5x(1+t), t = tanh(k(x + 0.044715x^3)): dy/dx = 0.5(1+t) + 0.5x(1-t^2)k(1 + 0.134145x^2). */
/* One op (f32 inside): a matmul producing g can apply it as its DGELU epilogue. */
static void grad_gelu_tanh(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value xg[2] = {A0, cast_to(c, g, nd(c, A0)->dtype)};
    add_grad(c, A0, build(c, (ir_node){.op = OP_GELU_TANH_GRAD}, xg, 2));
}
static void grad_silu(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value x = A0, s = un(c, OP_SIGMOID, x), one = constant(c, 1.0, x);
    add_grad(c, x, bin(c, OP_MUL, g, bin(c, OP_MUL, s, bin(c, OP_ADD, one, bin(c, OP_MUL, x, bin(c, OP_SUB, one, s))))));
}
static void grad_cast(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, g); }
/* dropout is linear: the same mask (same seed, same step operand) applies to g */
static void grad_dropout(ad_ctx *c, ir_value v, ir_value g)
{
    ir_node p = {.op = OP_DROPOUT, .attr = nd(c, v)->attr};
    int step = ir_step_slot(nd(c, v));
    ir_value args[2] = {g, step >= 0 ? argv_(c, v, step) : IR_NONE};
    add_grad(c, A0, build(c, p, args, step >= 0 ? 2 : 1));
}
static void grad_add(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, g); add_grad(c, A1, g); }
static void grad_sub(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, g); add_grad(c, A1, un(c, OP_NEG, g)); }
static void grad_mul(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value a = A0, b = A1;
    add_grad(c, a, bin(c, OP_MUL, g, b));
    add_grad(c, b, bin(c, OP_MUL, g, a));
}
static void grad_div(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value a = A0, b = A1;
    add_grad(c, a, bin(c, OP_DIV, g, b));
    add_grad(c, b, un(c, OP_NEG, bin(c, OP_DIV, bin(c, OP_MUL, g, v), b)));
}
static void grad_pow(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value a = A0, b = A1;
    add_grad(c, a, bin(c, OP_MUL, g, bin(c, OP_MUL, b, bin(c, OP_POW, a, bin(c, OP_SUB, b, constant(c, 1.0, b))))));
    add_grad(c, b, bin(c, OP_MUL, g, bin(c, OP_MUL, v, un(c, OP_LOG, a))));
}
/* ties go to the first operand */
static void grad_maximum(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value pick = bin(c, OP_GE, A0, A1), z = zeros_like(c, g);
    add_grad(c, A0, where(c, pick, g, z));
    add_grad(c, A1, where(c, pick, z, g));
}
static void grad_minimum(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value pick = bin(c, OP_LE, A0, A1), z = zeros_like(c, g);
    add_grad(c, A0, where(c, pick, g, z));
    add_grad(c, A1, where(c, pick, z, g));
}
static void grad_where(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value z = zeros_like(c, g);
    add_grad(c, A1, where(c, A0, g, z));
    add_grad(c, A2, where(c, A0, z, g));
}

/* The gradient of a reduction, spread back over the reduced axes. */
static ir_value unreduce(ad_ctx *c, ir_value v, ir_value g)
{
    const ir_node *n = nd(c, v), *x = nd(c, A0);
    uint32_t kshape[NC_MAX_RANK], one = ir_dim_const(c->g, 1);
    uint8_t xr = x->rank;
    uint32_t xshape[NC_MAX_RANK];
    memcpy(xshape, x->shape, sizeof xshape);
    bool red[NC_MAX_RANK] = {0};
    for (int k = 0; k < n->attr.naxes; k++) red[n->attr.axes[k]] = true;
    for (int k = 0; k < xr; k++) kshape[k] = red[k] ? one : xshape[k];
    return broadcast_to(c, reshape_to(c, g, xr, kshape), xr, xshape);
}

static void grad_sum(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, unreduce(c, v, g)); }
/* mean's count, the elements each output averages, over x's shape, for dims
 * bound only at run time (a module built without --dim B=...): the size's
 * value read from the bound symbols (dim_value: f32, exact up to 2^24,
 * rounded as the constant would be past it), not a sum of ones every run.
 * A count past what a size expression holds is still summed. */
static ir_value mean_count(ad_ctx *c, ir_value v, const dim_expr *count, dim_status s)
{
    const ir_node *x = nd(c, A0), *n = nd(c, v);
    uint32_t xshape[NC_MAX_RANK];   /* copied: building nodes may move x and n */
    memcpy(xshape, x->shape, sizeof xshape);
    uint8_t xrank = x->rank;
    if (s == DIM_OK) {
        ir_node p = {.op = OP_DIM_VALUE, .dtype = NC_F32};
        p.attr.lo = ir_dim_intern(c->g, count);
        return broadcast_to(c, build(c, p, NULL, 0), xrank, xshape);
    }
    int8_t axes[NC_MAX_RANK];
    memcpy(axes, n->attr.axes, sizeof axes);
    int naxes = n->attr.naxes;
    bool keepdim = n->attr.keepdim;
    ir_node one = {.op = OP_FILL, .dtype = NC_F32};
    one.attr.f = 1.0;
    ir_value ones = broadcast_to(c, build(c, one, NULL, 0), xrank, xshape);
    return unreduce(c, v, reduce(c, OP_SUM, ones, axes, naxes, keepdim));
}

static void grad_mean(ad_ctx *c, ir_value v, ir_value g)
{
    int64_t in = 1;   /* the count is a ratio of element counts, known when dims are */
    const ir_node *x = nd(c, A0), *n = nd(c, v);
    dim_expr pi = dim_const(1), po = dim_const(1), q = dim_const(1);
    dim_status s = DIM_OK;
    for (int k = 0; k < x->rank && s == DIM_OK; k++) s = dim_mul(&pi, &c->g->dims[x->shape[k]], &pi);
    for (int k = 0; k < n->rank && s == DIM_OK; k++) s = dim_mul(&po, &c->g->dims[n->shape[k]], &po);
    if (s == DIM_OK) s = dim_div(&pi, &po, &q);
    if (s == DIM_OK && dim_is_const(&q, &in)) {
        add_grad(c, A0, scale(c, unreduce(c, v, g), 1.0 / (double)in));
        return;
    }
    nc_dtype t = nd(c, g)->dtype;
    ir_value count = mean_count(c, v, &q, s);
    ir_value share = bin(c, OP_DIV, unreduce(c, v, cast_to(c, g, NC_F32)), count);
    add_grad(c, A0, cast_to(c, share, t));
}
/* Ties share the gradient: a maximum reached k times passes g/k to each,
 * so that a reduced group's gradients add up to g, as max's derivative along
 * any direction needs (each tie taking all of g counted it k times). The
 * count is of f32 ones, exact up to 2^24 ties. */
static void grad_max(ad_ctx *c, ir_value v, ir_value g)
{
    const ir_node *n = nd(c, v);
    int8_t axes[NC_MAX_RANK];   /* copied: building nodes may move n */
    memcpy(axes, n->attr.axes, sizeof axes);
    int naxes = n->attr.naxes;
    bool keepdim = n->attr.keepdim;
    nc_dtype t = nd(c, g)->dtype;
    ir_value x = A0, hit = bin(c, OP_EQ, x, unreduce(c, v, v));
    ir_value count = reduce(c, OP_SUM, cast_to(c, hit, NC_F32), axes, naxes, keepdim);
    ir_value share = cast_to(c, bin(c, OP_DIV, cast_to(c, g, NC_F32), count), t);
    add_grad(c, x, where(c, hit, unreduce(c, v, share), zeros_like(c, x)));
}

/* One row-wise op from the output and its gradient (computed in f32 inside,
 * in the output's dtype): no f32 copies of a [B, H, T, T] attention matrix. */
static void grad_softmax_like(ad_ctx *c, ir_value v, ir_value g, nc_op grad_op)
{
    ir_value args[2] = {v, cast_to(c, g, nd(c, v)->dtype)};
    add_grad(c, A0, build(c, (ir_node){.op = grad_op}, args, 2));
}
static void grad_softmax(ad_ctx *c, ir_value v, ir_value g) { grad_softmax_like(c, v, g, OP_SOFTMAX_GRAD); }
static void grad_log_softmax(ad_ctx *c, ir_value v, ir_value g) { grad_softmax_like(c, v, g, OP_LOG_SOFTMAX_GRAD); }

/* Flash-style backward: each query's log-sum-exp and delta = sum(g * out),
 * then one op per operand's gradient, each rebuilding the scores it needs:
 * no [.., T, S] matrix is stored in either direction. */
static void grad_attention(ad_ctx *c, ir_value v, ir_value g)
{
    const ir_node *n = nd(c, v);
    nc_dtype dt = n->dtype;   /* copied: building nodes may move n */
    int slot = ir_keyword_operand_slot(n);
    ir_value lens = slot >= 0 ? argv_(c, v, slot) : IR_NONE;   /* the key lengths, passed on to both */
    ir_node lp = {.op = OP_ATTENTION_LSE};
    lp.attr.causal = n->attr.causal, lp.attr.f = n->attr.f;
    ir_value qk[3] = {A0, A1, lens};
    ir_value lse = build(c, lp, qk, lens != IR_NONE ? 3 : 2), gn = cast_to(c, g, dt);
    ir_value delta = row_sum(c, bin(c, OP_MUL, cast_to(c, gn, NC_F32), cast_to(c, v, NC_F32)));
    ir_value args[7] = {A0, A1, A2, gn, lse, delta, lens};
    for (int wrt = 0; wrt < 3; wrt++) {
        if (!c->needs[argv_(c, v, wrt)]) continue;
        ir_node gp = lp;
        gp.op = OP_ATTENTION_GRAD;
        gp.attr.axis = wrt;
        add_grad(c, argv_(c, v, wrt), build(c, gp, args, lens != IR_NONE ? 7 : 6));
    }
}

/* layernorm / rmsnorm backward: xhat = (x - mu) * rstd, dxhat = g * w;
 * dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) as one row op,
 * dw = sum over rows of g * xhat, db = sum of g (f32). */
static void grad_norm(ad_ctx *c, ir_value v, ir_value g, bool ln)
{
    nc_dtype xdt = nd(c, A0)->dtype;   /* copied: building nodes may move the node array */
    /* dx: one row-wise op, in x's dtype */
    ir_node gp = {.op = ln ? OP_LAYERNORM_GRAD : OP_RMSNORM_GRAD};
    gp.attr.f = nd(c, v)->attr.f;
    ir_value gx = cast_to(c, g, xdt);
    ir_value xwg[3] = {A0, cast_to(c, A1, xdt), gx};
    add_grad(c, A0, build(c, gp, xwg, 3));
    /* dw (and db): sums over the rows of g xhat (and g), xhat rebuilt per
     * row: f32 [C] from x and g as they are, no [rows, C] in f32 */
    ir_node pp = {.op = OP_NORM_PARAM_GRAD};
    pp.attr.f = nd(c, v)->attr.f;
    pp.attr.axis = ln ? 1 : 2;
    ir_value xg[2] = {A0, gx};
    add_grad(c, A1, build(c, pp, xg, 2));
    if (ln) {
        pp.attr.axis = 0;
        add_grad(c, A2, build(c, pp, xg, 2));
    }
}
static void grad_layernorm(ad_ctx *c, ir_value v, ir_value g) { grad_norm(c, v, g, true); }
static void grad_rmsnorm(ad_ctx *c, ir_value v, ir_value g) { grad_norm(c, v, g, false); }

/* d loss / d logits = (softmax(logits) - ((1-s) onehot + s/C)) * g / rows,
 * one fused op: the [rows, C] softmax, one-hot and difference never exist
 * as separate tensors, and the op divides by the row count it sees, so a
 * symbolic batch needs no kernels to count it. */
static void grad_cross_entropy(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value logits = A0, targets = A1;
    ir_value gs = cast_to(c, reshape_to(c, g, 0, NULL), NC_F32);
    ir_node p = {.op = OP_CROSS_ENTROPY_GRAD};
    p.attr.f = nd(c, v)->attr.f;
    ir_value args[3] = {logits, targets, gs};
    add_grad(c, A0, build(c, p, args, 3));
}

static void grad_matmul(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value a = A0, b = A1;
    bool ta = nd(c, v)->attr.ta, tb = nd(c, v)->attr.tb;
    const ir_node *an = nd(c, a), *bn = nd(c, b);
    bool shared = bn->rank == 2 && an->rank > 2;
    /* gradients of the stored operands, for each transpose combination */
    ir_value ga = !ta ? matmul(c, g, b, false, !tb) : matmul(c, b, g, tb, true);
    add_grad(c, a, ga);
    if (!c->needs[b]) return;
    if (!shared) {
        add_grad(c, b, !tb ? matmul(c, a, g, !ta, false) : matmul(c, g, a, true, ta));
        return;
    }
    if (ta) {
        snprintf(c->err, c->errcap, "autodiff: matmul with transpose_a and a shared right operand");
        c->failed = true;
        return;
    }
    /* flatten the batch: [..., M, K] -> [(..)M, K]; the products above grew
     * the node array, so a's node is looked up again */
    an = nd(c, a);
    dim_expr rows = dim_const(1);
    uint32_t a2[2], g2[2];
    for (int k = 0; k < an->rank - 1; k++) dim_mul(&rows, &c->g->dims[an->shape[k]], &rows);
    uint32_t rid = ir_dim_intern(c->g, &rows);
    a2[0] = rid, a2[1] = an->shape[an->rank - 1];
    const ir_node *gn = nd(c, g);
    g2[0] = rid, g2[1] = gn->shape[gn->rank - 1];
    ir_value af = reshape_to(c, a, 2, a2), gf = reshape_to(c, g, 2, g2);
    add_grad(c, b, !tb ? matmul(c, af, gf, true, false) : matmul(c, gf, af, true, false));
}

static void grad_transpose(ad_ctx *c, ir_value v, ir_value g)
{
    const ir_node *n = nd(c, v);
    ir_node p = {.op = OP_TRANSPOSE};
    p.attr.naxes = n->attr.naxes;
    for (int k = 0; k < n->attr.naxes; k++) p.attr.axes[n->attr.axes[k]] = (int8_t)k;
    add_grad(c, A0, build(c, p, &g, 1));
}
static void grad_reshape(ad_ctx *c, ir_value v, ir_value g)
{
    const ir_node *x = nd(c, A0);
    uint32_t shape[NC_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    add_grad(c, A0, reshape_to(c, g, x->rank, shape));
}
static void grad_copy(ad_ctx *c, ir_value v, ir_value g) { add_grad(c, A0, g); }
static void grad_broadcast(ad_ctx *c, ir_value v, ir_value g)
{
    const ir_node *x = nd(c, A0);
    uint32_t shape[NC_MAX_RANK];
    memcpy(shape, x->shape, sizeof shape);
    add_grad(c, A0, sum_to(c, g, x->rank, shape));
}
/* slice backward: zeros around g along the axis */
static void grad_slice(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value x = A0;
    if (g == IR_NONE || c->failed || x >= c->nforward || !c->needs[x] || !dtype_is_float(nd(c, x)->dtype)) return;
    int ax = nd(c, v)->attr.axis;
    if (c->pieces_of[x] >= 0 && c->pieces_axis[x] != ax) settle(c, x);   /* slices along another axis too */
    c->pieces = nc_xrealloc(c->pieces, (size_t)(c->npieces + 1) * sizeof *c->pieces);
    c->pieces[c->npieces] = (ad_piece){.lo = nd(c, v)->attr.lo, .hi = nd(c, v)->attr.hi, .grad = g, .next = c->pieces_of[x]};
    c->pieces_of[x] = c->npieces++;
    c->pieces_axis[x] = (uint8_t)ax;
}
static void grad_concat(ad_ctx *c, ir_value v, ir_value g)
{
    int ax = nd(c, v)->attr.axis, na = nd(c, v)->nargs;
    dim_expr start = dim_const(0);
    for (int i = 0; i < na; i++) {
        ir_value xi = argv_(c, v, i);
        const ir_node *x = nd(c, xi);
        dim_expr end;
        dim_add(&start, &c->g->dims[x->shape[ax]], &end);
        ir_node p = {.op = OP_SLICE};
        p.attr.axis = ax;
        p.attr.lo = ir_dim_intern(c->g, &start);
        p.attr.hi = ir_dim_intern(c->g, &end);
        add_grad(c, xi, build(c, p, &g, 1));
        start = end;
    }
}
static void grad_gather(ad_ctx *c, ir_value v, ir_value g)
{
    ir_node p = {.op = OP_SCATTER_ADD};
    p.attr.lo = nd(c, A0)->shape[0];
    ir_value x[2] = {A1, g};
    add_grad(c, A0, build(c, p, x, 2));
}
static void grad_scatter_add(ad_ctx *c, ir_value v, ir_value g)
{
    ir_value x[2] = {g, A0};
    add_grad(c, A1, build(c, (ir_node){.op = OP_GATHER}, x, 2));
}

static ad_rule *const rules[OP_COUNT] = {
#define X(e, name, nargs, cat, dt, flags, shape, cpu, cuda, cexpr, grad, kw, meaning) [e] = grad,
#include "ops.def"
#undef X
};

/* ---- the pass ------------------------------------------------------------ */

/* The reverse sweep from node `from` down: every node with a gradient that
 * depends on what is differentiated passes it to its operands. */
static void sweep(ad_ctx *c, ir_value from)
{
    for (ir_value v = from + 1; v-- > 0 && !c->failed;) {
        settle(c, v);
        if (c->grad[v] == IR_NONE || !c->needs[v] || (c->leaf && c->leaf[v])) continue;
        c->loc = c->g->nodes[v].loc;
        if (c->g->nodes[v].attr.f32_result) {   /* made by cast hoisting, which runs after autodiff */
            snprintf(c->err, c->errcap, "autodiff: %s with a widened result", nc_ops[c->g->nodes[v].op].name);
            c->failed = true;
            return;
        }
        rules[c->g->nodes[v].op](c, v, c->grad[v]);
    }
}

static void ad_init(ad_ctx *c, ir_graph *g, char *err, size_t errcap)
{
    *c = (ad_ctx){.g = g, .nforward = g->nnodes, .err = err, .errcap = errcap};
    c->grad = nc_xmalloc((g->nnodes + 1) * sizeof *c->grad);
    c->needs = nc_xcalloc(g->nnodes + 1, sizeof *c->needs);
    c->pieces_of = nc_xmalloc((g->nnodes + 1) * sizeof *c->pieces_of);
    c->pieces_axis = nc_xcalloc(g->nnodes + 1, sizeof *c->pieces_axis);
    for (ir_value v = 0; v < g->nnodes; v++) c->grad[v] = IR_NONE, c->pieces_of[v] = -1;
}

static void ad_free(ad_ctx *c)
{
    free(c->grad);
    free(c->needs);
    free(c->leaf);
    free(c->pieces_of);
    free(c->pieces_axis);
    free(c->pieces);
}

bool autodiff_vjp(ir_graph *g, ir_value out, ir_value gout, const ir_value *wrt, int nwrt, ir_value *gwrt, char *err,
                  size_t errcap)
{
    ad_ctx c;
    ad_init(&c, g, err, errcap);
    c.leaf = nc_xcalloc(g->nnodes + 1, sizeof *c.leaf);   /* gradients stop at the values asked for */
    for (int i = 0; i < nwrt; i++) c.needs[wrt[i]] = c.leaf[wrt[i]] = true;
    for (ir_value v = 0; v < g->nnodes; v++)
        for (int i = 0; i < g->nodes[v].nargs && !c.needs[v]; i++) c.needs[v] = c.needs[ir_args(g, &g->nodes[v])[i]];
    c.grad[out] = gout;
    sweep(&c, out);
    for (int i = 0; i < nwrt; i++) settle(&c, wrt[i]), gwrt[i] = c.grad[wrt[i]];
    ad_free(&c);
    return !c.failed;
}

bool autodiff_run_with(ir_graph *g, ir_value seed_scale, const ad_contribution *pre, int npre, ir_value *param_grads,
                       char *err, size_t errcap)
{
    if (!g->train.present || g->train.loss == IR_NONE) {
        snprintf(err, errcap, "autodiff: the graph has no loss");
        return false;
    }
    ad_ctx c;
    ad_init(&c, g, err, errcap);
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        c.needs[v] = n->op == OP_PARAM && g->params[n->attr.index].role == IR_ROLE_WEIGHT;
        for (int i = 0; i < n->nargs && !c.needs[v]; i++) c.needs[v] = c.needs[ir_args(g, n)[i]];
    }
    ir_value loss = g->train.loss;
    c.loc = g->nodes[loss].loc;
    if (npre > 0) {   /* the loss's own backward is already in the graph: start below it */
        for (int i = 0; i < npre; i++) add_grad(&c, pre[i].value, pre[i].grad);
        sweep(&c, loss);
    } else {
        c.grad[loss] = seed_scale != IR_NONE ? seed_scale : constant(&c, 1.0, loss);
        sweep(&c, loss);
    }
    for (uint32_t i = 0; i < g->nparams; i++) param_grads[i] = IR_NONE;
    for (ir_value v = 0; v < c.nforward && !c.failed; v++)
        if (g->nodes[v].op == OP_PARAM) settle(&c, v), param_grads[g->nodes[v].attr.index] = c.grad[v];
    ad_free(&c);
    return !c.failed;
}

bool autodiff_run(ir_graph *g, ir_value seed_scale, ir_value *param_grads, char *err, size_t errcap)
{
    return autodiff_run_with(g, seed_scale, NULL, 0, param_grads, err, errcap);
}
