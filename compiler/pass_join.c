/* pass_join.c - joins chains of data movement that a loop builds one step at
 * a time, whose cost grows with the square of the loop's length:
 *  - a concat of concats along the same axis, each inner one read only by
 *    the outer one, becomes one concat of all their pieces (a repeat's
 *    `states = concat([states, h])`: T concats copying 1, 2, ..., T steps
 *    become one copying T), regrouped into concats of at most a kernel's
 *    number of operands (NRT_MAX_INTS - 1 - rank, as sema's
 *    concat_in_groups) when there are more pieces;
 *  - a slice of a slice along the same axis becomes one slice of the first
 *    operand (that concat's gradient: each step slices the previous step's
 *    slice, T slices of 1, 2, ..., T steps, become T slices of the gradient
 *    itself, and the ones between die in DCE).
 * Requires: any graph. Produces: no tree of single-use concats of the
 * same axis, region and flags more than two deep (two deep: groups, left as
 * they are), and no slice of a slice along the same axis. Exact: only which copies are made changes, not a value. */
#include "passes.h"
#include "program.h"

#include <stdlib.h>
#include <string.h>

typedef struct join_ctx {
    const ir_graph *g;
    ir_graph *out;
    ir_value *map;        /* old value -> new */
    bool *absorbed;       /* a concat that its one reader, a concat, takes apart */
    ir_value *pieces;     /* the concat being built's operands, new values */
    int npieces, cap;
    int concats, slices;  /* what was joined, for the report */
} join_ctx;

/* Whether concat operand a of concat n can be taken apart into n. */
static bool joinable(const ir_graph *g, const ir_node *n, ir_value a, const uint32_t *uses)
{
    const ir_node *in = &g->nodes[a];
    return in->op == OP_CONCAT && uses[a] == 1 && in->attr.axis == n->attr.axis && in->region == n->region &&
           in->flags == n->flags && in->dtype == n->dtype;
}

static void add_piece(join_ctx *c, ir_value v)
{
    if (c->npieces == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->pieces = nc_xrealloc(c->pieces, (size_t)c->cap * sizeof *c->pieces);
    }
    c->pieces[c->npieces++] = v;
}

/* The operands of old concat v in order, absorbed concats opened. Iterative
 * (an explicit stack): a loop's chain is as deep as the loop is long. */
static void collect_pieces(join_ctx *c, ir_value v)
{
    ir_value *stack = nc_xmalloc(sizeof *stack), top = 0;
    uint32_t cap = 1;
    stack[top++] = v;
    while (top) {
        ir_value u = stack[--top];
        if (!(u == v || c->absorbed[u])) {
            add_piece(c, c->map[u]);
            continue;
        }
        const ir_node *n = &c->g->nodes[u];
        if (u != v) c->concats++;
        for (int i = n->nargs; i-- > 0;) {   /* pushed last first: popped in order */
            if (top == cap) stack = nc_xrealloc(stack, (cap *= 2) * sizeof *stack);
            stack[top++] = ir_args(c->g, n)[i];
        }
    }
    free(stack);
}

/* proto's axis the sum of the pieces' sizes along it: a group's shape.
 * False when the sum cannot be held (the pieces' whole is, so never). */
static bool group_shape(join_ctx *c, ir_node *proto, const ir_value *pieces, int k)
{
    int ax = proto->attr.axis;
    dim_expr sum = dim_const(0);
    for (int j = 0; j < k; j++) {
        dim_expr next;
        if (dim_add(&sum, &c->out->dims[c->out->nodes[pieces[j]].shape[ax]], &next) != DIM_OK) return false;
        sum = next;
    }
    proto->shape[ax] = ir_dim_intern(c->out, &sum);
    return true;
}

/* One concat of pieces[0..n) like proto, along proto's axis; more pieces
 * than a kernel takes are joined in even groups first (as sema's
 * concat_in_groups), and those groups again while there are too many. */
static ir_value emit_concat(join_ctx *c, const ir_node *proto, ir_value *pieces, int n)
{
    int most = NRT_MAX_INTS - 1 - proto->rank;
    while (n > most) {
        int ngroups = (n + most - 1) / most, m = 0;
        for (int i = 0; m < ngroups; m++) {
            int left = ngroups - m, k = (n - i + left - 1) / left;
            ir_node p = *proto;
            if (k > 1 && !group_shape(c, &p, pieces + i, k)) return IR_NONE;
            pieces[m] = k == 1 ? pieces[i] : ir_add(c->out, &p, pieces + i, (uint16_t)k);
            i += k;
        }
        n = m;
    }
    return ir_add(c->out, proto, pieces, (uint16_t)n);
}

/* Slice n of new value x: when x is itself a slice along the same axis, one
 * slice of x's operand, its bounds shifted by x's start. */
static ir_value emit_slice(join_ctx *c, const ir_node *n, ir_value x)
{
    const ir_node *in = &c->out->nodes[x];
    ir_node p = *n;
    if (in->op == OP_SLICE && in->attr.axis == n->attr.axis && in->flags == n->flags && in->region == n->region) {
        const dim_expr *at = &c->out->dims[in->attr.lo];
        dim_expr lo, hi;
        if (dim_add(at, &c->g->dims[n->attr.lo], &lo) == DIM_OK && dim_add(at, &c->g->dims[n->attr.hi], &hi) == DIM_OK) {
            p.attr.lo = ir_dim_intern(c->out, &lo);
            p.attr.hi = ir_dim_intern(c->out, &hi);
            c->slices++;
            ir_value src = ir_args(c->out, in)[0];
            return ir_add(c->out, &p, &src, 1);
        }
    }
    return ir_add(c->out, &p, &x, 1);
}

/* Marks the concats under root v (opened into it) as absorbed. */
static void absorb_tree(const ir_graph *g, ir_value v, const bool *inner, bool *absorbed)
{
    ir_value *stack = nc_xmalloc(sizeof *stack), top = 0;
    uint32_t cap = 1;
    stack[top++] = v;
    while (top) {
        const ir_node *n = &g->nodes[stack[--top]];
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i];
            if (!inner[a]) continue;
            absorbed[a] = true;
            if (top == cap) stack = nc_xrealloc(stack, (cap *= 2) * sizeof *stack);
            stack[top++] = a;
        }
    }
    free(stack);
}

/* Which concats to open into their readers, and whether any concat or slice
 * can be joined: a graph with none is kept as it is (the same node numbers
 * in every dump). A tree of concats two deep is left as it is: it is how
 * sema and the optimizer join more pieces than a kernel takes (a concat of
 * groups), which the GPU backend plans for (its concats of sums); only a
 * deeper one, a chain, copies its first pieces again at every level. */
static bool any_joinable(const ir_graph *g, const uint32_t *uses, bool *absorbed)
{
    bool any = false;
    bool *inner = nc_xcalloc(g->nnodes + 1, sizeof *inner);
    uint32_t *depth = nc_xcalloc(g->nnodes + 1, sizeof *depth);
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        if (n->op == OP_SLICE) {
            const ir_node *in = &g->nodes[ir_args(g, n)[0]];
            any |= in->op == OP_SLICE && in->attr.axis == n->attr.axis && in->flags == n->flags && in->region == n->region;
        }
        if (n->op != OP_CONCAT) continue;
        depth[v] = 1;
        for (int i = 0; i < n->nargs; i++) {
            ir_value a = ir_args(g, n)[i];
            if (!joinable(g, n, a, uses)) continue;
            inner[a] = true;
            if (depth[a] + 1 > depth[v]) depth[v] = depth[a] + 1;
        }
    }
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_CONCAT && !inner[v] && depth[v] > 2) {
            absorb_tree(g, v, inner, absorbed);
            any = true;
        }
    free(depth);
    free(inner);
    return any;
}

bool pass_join(ir_graph **gp, const pass_ctx *cx)
{
    const ir_graph *g = *gp;
    uint32_t *uses = ir_count_uses(g);
    join_ctx c = {.g = g, .absorbed = nc_xcalloc(g->nnodes + 1, sizeof *c.absorbed)};
    if (!any_joinable(g, uses, c.absorbed)) {
        free(uses);
        free(c.absorbed);
        return true;
    }
    c.out = ir_graph_shell(g);
    c.map = nc_xmalloc((g->nnodes + 1) * sizeof *c.map);
    ir_value *args = nc_xmalloc((g->nargs + 1) * sizeof *args);
    bool ok = true;
    for (ir_value v = 0; v < g->nnodes && ok; v++) {
        const ir_node *n = &g->nodes[v];
        c.map[v] = IR_NONE;
        if (c.absorbed[v]) continue;   /* built into its reader */
        if (n->op == OP_SLICE) {
            c.map[v] = emit_slice(&c, n, c.map[ir_args(g, n)[0]]);
            continue;
        }
        if (n->op == OP_CONCAT) {
            c.npieces = 0;
            collect_pieces(&c, v);
            c.map[v] = emit_concat(&c, n, c.pieces, c.npieces);
            ok = c.map[v] != IR_NONE;
            continue;
        }
        for (int i = 0; i < n->nargs; i++) args[i] = c.map[ir_args(g, n)[i]];
        c.map[v] = ir_add(c.out, n, args, n->nargs);
    }
    if (!ok) {   /* a size past what a dim holds: leave the graph as it was */
        ir_graph_free(c.out);
    } else {
        ir_graph_finish(c.out, g, c.map);
        if (cx->report && (c.concats || c.slices))
            fprintf(cx->report, "join: %d concats opened into their readers, %d slices of slices made one\n", c.concats,
                    c.slices);
        ir_graph_free(*gp);
        *gp = c.out;
    }
    free(args);
    free(c.pieces);
    free(c.map);
    free(c.absorbed);
    free(uses);
    return true;
}
