/* cuda_epilogue.c - matmul epilogues: the bias add, activation, residual add
 * or widening cast that follows a matmul is applied by cuBLASLt as it stores
 * the product (out = act(a b + residual + bias)), so the product is never
 * written to memory and read back by another kernel. GPT-2's MLP does its
 * first matmul, bias and GELU in one call, its second matmul, bias and the
 * residual add in another.
 *
 * Requires: the graph cuda_emit is emitting, with cg->escapes set (fusion
 * on). Produces: cg->absorbed (the matmul and the ops its step computes) and
 * cg->epilogues; cuda_fuse_plan leaves absorbed ops out of its groups, and
 * the step is emitted at the epilogue's last op, after everything it reads.
 *
 * What cuBLASLt can do decides what is taken: the bias is a vector over the
 * last axis in the result's dtype; the residual is added before the
 * activation, so a chain has one or the other after the product; GELU is
 * the tanh form; the value before GELU is kept (as the step's auxiliary
 * output) when the backward reads it, and read back by the backward's
 * matmul (DGELU: the product times GELU's derivative there); f16/bf16
 * products may be stored as f32; the sum of GELU's backward over its rows (a
 * bias's gradient) may be stored beside it (DGELU_BGRAD, in its dtype). The
 * product is rounded once, not after
 * each op as separate kernels would: results differ from the unfused ones
 * by the rounding of the intermediates (within the dtype's tolerance). */
#include "cuda_emit.h"

#include <stdlib.h>
#include <string.h>

typedef struct epi_ctx {
    const ir_graph *g;
    const bool *escapes;
    const bool *absorbed;  /* taken by an earlier epilogue */
    bool *operand;         /* a bias or residual of an earlier epilogue: must stay in memory */
    bool *written;         /* the result of an earlier epilogue (absorbed, but in memory) */
    uint32_t *nusers;
    ir_value *user;        /* the last reader of each value */
} epi_ctx;

static const ir_node *nd(const epi_ctx *c, ir_value v) { return &c->g->nodes[v]; }

static ir_value operand(const epi_ctx *c, ir_value v, int i) { return ir_args(c->g, nd(c, v))[i]; }

/* The one op reading v, if v has exactly one reader and is no output, and
 * that op is free to join an epilogue. */
static ir_value sole_user(const epi_ctx *c, ir_value v)
{
    if (c->nusers[v] != 1 || c->escapes[v]) return IR_NONE;
    ir_value u = c->user[v];
    return c->absorbed[u] || c->operand[u] ? IR_NONE : u;
}

static bool same_shape(const ir_node *a, const ir_node *b)
{
    return a->rank == b->rank && memcmp(a->shape, b->shape, a->rank * sizeof *a->shape) == 0;
}

/* An add of cur and something else, of cur's shape and dtype: the other
 * operand, or IR_NONE. */
static ir_value other_addend(const epi_ctx *c, ir_value add, ir_value cur)
{
    const ir_node *n = nd(c, add);
    if (n->op != OP_ADD || n->dtype != nd(c, cur)->dtype || !same_shape(n, nd(c, cur))) return IR_NONE;
    ir_value a = operand(c, add, 0), b = operand(c, add, 1);
    if (a == b) return IR_NONE;
    return a == cur ? b : a;
}

/* The [N] vector under a broadcast to [..., N] (N: v's last dim), or IR_NONE. */
static ir_value bias_source(const epi_ctx *c, ir_value b, ir_value v)
{
    if (nd(c, b)->op != OP_BROADCAST) return IR_NONE;
    while (nd(c, b)->op == OP_BROADCAST) b = operand(c, b, 0);
    const ir_node *src = nd(c, b), *n = nd(c, v);
    return src->rank == 1 && src->shape[0] == n->shape[n->rank - 1] && src->dtype == n->dtype ? b : IR_NONE;
}

/* A residual: a value of its own in memory (not a fill or broadcast that
 * fused kernels inline). */
static bool materialized(const epi_ctx *c, ir_value r)
{
    nc_op op = nd(c, r)->op;
    return op != OP_BROADCAST && op != OP_FILL && (!c->absorbed[r] || c->written[r]);
}

/* The GELU (tanh form) reading v, when every other reader of v comes after
 * it (they read the auxiliary output, written by the step at the GELU). */
static ir_value gelu_reader(const epi_ctx *c, ir_value v)
{
    if (c->nusers[v] < 2) return IR_NONE;
    ir_value gelu = IR_NONE;
    for (ir_value u = v + 1; u < c->g->nnodes && gelu == IR_NONE; u++) {
        const ir_node *n = nd(c, u);
        for (int i = 0; i < n->nargs; i++)
            if (ir_args(c->g, n)[i] == v) {
                if (n->op != OP_GELU_TANH || n->dtype != nd(c, v)->dtype || c->absorbed[u] || c->operand[u]) return IR_NONE;
                gelu = u;
                break;
            }
    }
    return gelu;
}

/* Whether an elementwise op reads v: it would load v in a fused kernel, so
 * widening v in the epilogue would double the bytes of the product written
 * and read instead of saving a kernel (a gradient cast to f32 on its way
 * into the optimizer's update). */
static bool read_elementwise(const epi_ctx *c, ir_value v)
{
    for (ir_value u = v + 1; u < c->g->nnodes; u++) {
        const ir_node *n = nd(c, u);
        for (int i = 0; i < n->nargs; i++)
            if (ir_args(c->g, n)[i] == v && cuda_emit_is_elementwise(n->op)) return true;
    }
    return false;
}

/* cuBLASLt wants the auxiliary output's leading dimension a multiple of 8. */
static bool aux_fits(const ir_graph *g, const ir_node *n)
{
    int64_t cols;
    return dim_is_const(&g->dims[n->shape[n->rank - 1]], &cols) && cols % 8 == 0;
}

/* Each take_* extends the chain e ends at (its last link, cur) by what it
 * recognises, or leaves it. */
static void link(cuda_epilogue *e, ir_value *cur, ir_value v) { e->chain[e->nchain++] = *cur = v; }

/* A sum of v over every axis but the last, in v's dtype: a bias's
 * gradient, which cuBLASLt's DGELU_BGRAD stores in the product's dtype. */
static ir_value column_sum(const epi_ctx *c, ir_value v)
{
    const ir_node *n = nd(c, v);
    for (ir_value s = v + 1; n->rank >= 2 && s < c->g->nnodes; s++) {
        const ir_node *sn = nd(c, s);
        if (sn->op != OP_SUM || sn->nargs != 1 || operand(c, s, 0) != v) continue;
        bool leading = sn->rank == 1 && sn->attr.naxes == n->rank - 1 && sn->shape[0] == n->shape[n->rank - 1] &&
                       sn->dtype == n->dtype && !c->absorbed[s] && !c->operand[s];
        for (int k = 0; k < sn->attr.naxes && leading; k++) leading = sn->attr.axes[k] == k;
        if (leading) return s;
    }
    return IR_NONE;
}

/* GELU's backward on the product: the value before the GELU is read as the
 * auxiliary input (DGELU), and a sum of the result's rows is stored with it
 * (BGRAD); nothing else can follow. */
static bool take_dgelu(const epi_ctx *c, cuda_epilogue *e, ir_value *cur)
{
    ir_value m = *cur, u = sole_user(c, m);
    if (u == IR_NONE || nd(c, u)->op != OP_GELU_TANH_GRAD || operand(c, u, 1) != m || operand(c, u, 0) == m ||
        nd(c, u)->dtype != nd(c, m)->dtype || !materialized(c, operand(c, u, 0)) || !aux_fits(c->g, nd(c, m)))
        return false;
    e->flags = NRT_EPI_DGELU | NRT_EPI_AUX;
    e->aux = operand(c, u, 0);
    link(e, cur, u);
    if ((e->colsum = column_sum(c, u)) != IR_NONE) e->flags |= NRT_EPI_BGRAD;
    return true;
}

static void take_bias(const epi_ctx *c, cuda_epilogue *e, ir_value *cur)
{
    ir_value u = sole_user(c, *cur), other;
    if (u != IR_NONE && (other = other_addend(c, u, *cur)) != IR_NONE && (e->bias = bias_source(c, other, *cur)) != IR_NONE) {
        e->flags |= NRT_EPI_BIAS;
        link(e, cur, u);
    }
}

/* ReLU or GELU; GELU also when the backward reads the value before it
 * (kept as the auxiliary output). */
static void take_activation(const epi_ctx *c, cuda_epilogue *e, ir_value *cur, nc_dtype t)
{
    ir_value u = sole_user(c, *cur);
    if (u != IR_NONE && (nd(c, u)->op == OP_RELU || nd(c, u)->op == OP_GELU_TANH) && nd(c, u)->dtype == t) {
        e->flags |= nd(c, u)->op == OP_RELU ? NRT_EPI_RELU : NRT_EPI_GELU;
        link(e, cur, u);
    } else if (u == IR_NONE && (u = gelu_reader(c, *cur)) != IR_NONE && aux_fits(c->g, nd(c, e->matmul))) {
        e->flags |= NRT_EPI_GELU | NRT_EPI_AUX;
        e->aux = *cur;
        link(e, cur, u);
    }
}

/* Widened to f32 and added to an f32 sum (a gradient accumulated over uses,
 * as the tied embedding's over the loss's slices): cuBLASLt adds the sum as
 * C and stores f32. */
static void take_widened_sum(const epi_ctx *c, cuda_epilogue *e, ir_value *cur, nc_dtype t)
{
    ir_value u = sole_user(c, *cur), add = u != IR_NONE ? sole_user(c, u) : IR_NONE, other;
    /* the sum so far must exist before this product: taking a later one
     * would hold the product back (and its operands alive) until then */
    if (e->flags || t == NC_F32 || u == IR_NONE || nd(c, u)->op != OP_CAST || nd(c, u)->dtype != NC_F32 || add == IR_NONE ||
        (other = other_addend(c, add, u)) == IR_NONE || other > e->matmul || !materialized(c, other))
        return;
    e->out_dtype = NC_F32;
    link(e, cur, u);
    e->flags |= NRT_EPI_RESIDUAL, e->residual = other;
    link(e, cur, add);
}

/* A residual add: cuBLASLt adds C before the activation, so not after one. */
static void take_residual(const epi_ctx *c, cuda_epilogue *e, ir_value *cur)
{
    ir_value u, other;
    if (e->flags & (NRT_EPI_RELU | NRT_EPI_GELU | NRT_EPI_RESIDUAL)) return;
    if ((u = sole_user(c, *cur)) != IR_NONE && (other = other_addend(c, u, *cur)) != IR_NONE && materialized(c, other)) {
        e->flags |= NRT_EPI_RESIDUAL, e->residual = other;
        link(e, cur, u);
    }
}

/* u, a widened product, is the first term of a sum whose next term a later
 * product's epilogue will add (take_widened_sum): u is read as its C. */
static bool first_of_widened_sum(const epi_ctx *c, ir_value u)
{
    ir_value add = sole_user(c, u), other, m;
    if (add == IR_NONE || (other = other_addend(c, add, u)) == IR_NONE || other < u) return false;
    const ir_node *o = nd(c, other);
    if (o->op != OP_CAST || o->dtype != NC_F32 || sole_user(c, other) != add) return false;
    m = operand(c, other, 0);
    return nd(c, m)->op == OP_MATMUL && sole_user(c, m) == other && nd(c, m)->dtype != NC_F32;
}

/* A bare product widened to f32, unless the one op reading the widened
 * value is elementwise (its kernel would load the narrow product and widen
 * it in registers). A widened gradient read by several kernels (the norm,
 * the update) is written wide once instead. */
static void take_widening(const epi_ctx *c, cuda_epilogue *e, ir_value *cur, nc_dtype t)
{
    ir_value u = sole_user(c, *cur);
    if (!e->flags && t != NC_F32 && u != IR_NONE && nd(c, u)->op == OP_CAST && nd(c, u)->dtype == NC_F32 &&
        (c->nusers[u] > 1 || !read_elementwise(c, u) || first_of_widened_sum(c, u))) {
        e->out_dtype = NC_F32;
        link(e, cur, u);
    }
}

/* One matmul's epilogue, as far as cuBLASLt can take it. A DGELU reads
 * the value before the GELU, which a recomputed forward matmul numbered after
 * the backward's matmul may write as its auxiliary output: DGELU epilogues
 * are planned in a second round (dgelu_round), once those are. */
static bool find_epilogue(const epi_ctx *c, ir_value m, bool dgelu_round, cuda_epilogue *e)
{
    const ir_node *mm = nd(c, m);
    *e = (cuda_epilogue){.matmul = m, .bias = IR_NONE, .residual = IR_NONE, .aux = IR_NONE, .out = m,
                         .colsum = IR_NONE, .out_dtype = mm->dtype};
    bool batch_of_products = mm->rank > 2 && (nd(c, operand(c, m, 1))->rank != 2 || mm->attr.ta);
    /* a wide product (f16/bf16 operands, f32 result) takes no epilogue: what
     * cuBLASLt accepts for its bias and auxiliary dtypes there is untested */
    if (batch_of_products || mm->attr.f32_result || !(mm->dtype == NC_F32 || mm->dtype == NC_F16 || mm->dtype == NC_BF16))
        return false;
    ir_value cur = m;
    e->chain[e->nchain++] = m;
    if (take_dgelu(c, e, &cur) != dgelu_round) return false;
    if (!dgelu_round) {
        take_bias(c, e, &cur);
        take_activation(c, e, &cur, mm->dtype);
        take_widened_sum(c, e, &cur, mm->dtype);
        take_residual(c, e, &cur);
        take_widening(c, e, &cur, mm->dtype);
    }
    e->out = cur;
    return cur != m;
}

void cuda_epilogue_plan(cg_ctx *cg)
{
    const ir_graph *g = cg->g;
    cg->absorbed = nc_xcalloc(g->nnodes + 1, sizeof *cg->absorbed);
    epi_ctx c = {.g = g, .escapes = cg->escapes, .absorbed = cg->absorbed};
    c.operand = nc_xcalloc(g->nnodes + 1, sizeof *c.operand);
    c.written = nc_xcalloc(g->nnodes + 1, sizeof *c.written);
    c.nusers = nc_xcalloc(g->nnodes + 1, sizeof *c.nusers);
    c.user = nc_xcalloc(g->nnodes + 1, sizeof *c.user);
    for (ir_value u = 0; u < g->nnodes; u++)
        for (int i = 0; i < g->nodes[u].nargs; i++) {
            ir_value a = ir_args(g, &g->nodes[u])[i];
            c.nusers[a]++;
            c.user[a] = u;
        }
    for (int dgelu_round = 0; dgelu_round < 2; dgelu_round++)
    for (ir_value m = 0; m < g->nnodes; m++) {
        cuda_epilogue e;
        if (g->nodes[m].op != OP_MATMUL || c.operand[m] || cg->absorbed[m] || !find_epilogue(&c, m, dgelu_round, &e)) continue;
        cg->epilogues = nc_xrealloc(cg->epilogues, (cg->nepilogues + 1) * sizeof *cg->epilogues);
        cg->epilogues[cg->nepilogues++] = e;
        for (int k = 0; k < e.nchain; k++) cg->absorbed[e.chain[k]] = true;
        c.written[e.out] = true;
        if (e.colsum != IR_NONE) cg->absorbed[e.colsum] = c.written[e.colsum] = true;
        if (e.aux != IR_NONE && (e.flags & NRT_EPI_DGELU)) c.operand[e.aux] = true;
        else if (e.aux != IR_NONE) c.written[e.aux] = true;
        if (e.residual != IR_NONE) c.operand[e.residual] = true;
        if (e.bias != IR_NONE) c.operand[e.bias] = true;
    }
    free(c.nusers);
    free(c.user);
    free(c.operand);
    free(c.written);
}

/* The product of v's dims but the last, interned. */
static uint32_t rows_dim(cg_ctx *cg, ir_value v)
{
    ir_graph *g = (ir_graph *)cg->g;
    const ir_node *n = &g->nodes[v];
    dim_expr rows = dim_const(1), next;
    for (int k = 0; k + 1 < n->rank; k++) {
        dim_status st = dim_mul(&rows, &g->dims[n->shape[k]], &next);
        NC_ASSERT(st == DIM_OK);   /* a factor of the value's own size */
        rows = next;
    }
    return ir_dim_intern(g, &rows);
}

void cuda_epilogue_emit(cg_ctx *cg, ir_value v)
{
    const cuda_epilogue *e = NULL;
    for (uint32_t k = 0; k < cg->nepilogues && !e; k++)
        if (cg->epilogues[k].out == v) e = &cg->epilogues[k];
    if (!e) return;
    nrt_step *s = cuda_matmul_begin(cg, e->matmul);
    s->mm_epilogue = e->flags;
    s->mm_out_dtype = e->out_dtype;
    if (e->flags & NRT_EPI_BIAS) cuda_add_buf(s, e->bias);
    if (e->flags & NRT_EPI_RESIDUAL) cuda_add_buf(s, e->residual);
    if (e->flags & NRT_EPI_DGELU) cuda_add_buf(s, e->aux);
    cuda_add_buf(s, e->out);
    if ((e->flags & NRT_EPI_AUX) && !(e->flags & NRT_EPI_DGELU)) cuda_add_buf(s, e->aux);
    if (e->flags & NRT_EPI_BGRAD) {
        cuda_add_buf(s, e->colsum);
        cuda_add_buf(s, cuda_new_temp(cg, rows_dim(cg, e->out), e->out_dtype));
    }
    NC_ASSERT(!nrt_matmul_check(s));
}

void cuda_epilogue_free(cg_ctx *cg)
{
    free(cg->absorbed);
    free(cg->epilogues);
    cg->absorbed = NULL, cg->epilogues = NULL, cg->nepilogues = 0;
}
