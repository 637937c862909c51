/* pass_recompute.c - recomputation of @checkpoint blocks.
 *
 * Requires: a training-step graph (forward up to the loss, then backward and
 * update; node order is the schedule). Produces: the same values, where every
 * backward use of a value computed inside a checkpoint region reads a copy
 * recomputed from the region's inputs, emitted just before its first
 * backward use and marked `recompute`. The originals then die inside the
 * forward pass: a block keeps only its inputs alive across the step, and the
 * memory plan (which follows node order) reuses the rest.
 *
 * Exact: the copies are the same ops on the same operands; dropout draws
 * from a counter-based RNG keyed by its seed, so a copy draws the same mask.
 * Sources (inputs, parameters) are never copied. Graphs without a loss, or
 * without regions, pass through unchanged. */
#include "passes.h"

#include <stdlib.h>

typedef struct recompute_ctx {
    const ir_graph *g;
    ir_graph *out;
    ir_value boundary;         /* the loss: nodes after it are backward / update */
    ir_value *map;             /* old -> new */
    ir_value *copy;            /* old -> recomputed new value, IR_NONE until needed */
} recompute_ctx;

static bool in_region(const recompute_ctx *c, ir_value v)
{
    const ir_node *n = &c->g->nodes[v];
    return v <= c->boundary && n->region != 0 && nc_ops[n->op].category != CAT_SOURCE;
}

static ir_value emit_args(recompute_ctx *c, const ir_node *n, bool backward, uint8_t extra_flags);

/* The recomputed copy of v: operands inside the same region are copied too,
 * anything else (the region's inputs) is read as it was kept. */
static ir_value recomputed(recompute_ctx *c, ir_value v)
{
    if (c->copy[v] == IR_NONE) c->copy[v] = emit_args(c, &c->g->nodes[v], true, IR_FLAG_RECOMPUTE);
    return c->copy[v];
}

static ir_value operand(recompute_ctx *c, const ir_node *user, ir_value a, bool backward, bool copying)
{
    if (copying) return in_region(c, a) && c->g->nodes[a].region == user->region ? recomputed(c, a) : c->map[a];
    return backward && in_region(c, a) ? recomputed(c, a) : c->map[a];
}

static ir_value emit_args(recompute_ctx *c, const ir_node *n, bool backward, uint8_t extra_flags)
{
    ir_value small[16];
    ir_value *args = n->nargs <= 16 ? small : nc_xmalloc(n->nargs * sizeof *args);
    for (int i = 0; i < n->nargs; i++) args[i] = operand(c, n, ir_args(c->g, n)[i], backward, extra_flags != 0);
    ir_node p = *n;
    p.flags |= extra_flags;
    ir_value r = ir_add(c->out, &p, args, n->nargs);
    if (args != small) free(args);
    return r;
}

bool pass_recompute(ir_graph **gp, FILE *err)
{
    const ir_graph *g = *gp;
    bool any = false;
    for (ir_value v = 0; v < g->nnodes && !any; v++) any = g->nodes[v].region != 0;
    if (!g->train.present || g->train.loss == IR_NONE || !g->nupdates || !any) return true;
    recompute_ctx c = {.g = g, .out = ir_graph_shell(g), .boundary = g->train.loss};
    c.map = nc_xmalloc((g->nnodes + 1) * sizeof *c.map);
    c.copy = nc_xmalloc((g->nnodes + 1) * sizeof *c.copy);
    for (ir_value v = 0; v < g->nnodes; v++) c.copy[v] = IR_NONE;
    for (ir_value v = 0; v < g->nnodes; v++) c.map[v] = emit_args(&c, &g->nodes[v], v > c.boundary, 0);
    ir_graph_finish(c.out, g, c.map);
    free(c.map);
    free(c.copy);
    ir_graph_free(*gp);
    *gp = c.out;
    return pass_dce(gp, err);
}
