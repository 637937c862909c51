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
 * from a counter-based RNG keyed by its seed and its step operand (the
 * @step input, which a copy reads too), so a copy draws the same mask.
 * Sources (inputs, parameters) are never copied. Graphs without a loss, or
 * without regions, pass through unchanged. */
#include "passes.h"

#include <stdlib.h>

typedef struct recompute_ctx {
    const ir_graph *g;
    ir_graph *out;
    ir_value boundary;         /* the loss: nodes after it are backward / update */
    const bool *chosen;        /* NULL: the @checkpoint regions; else the values to recompute */
    ir_value *map;             /* old -> new */
    ir_value *copy;            /* old -> recomputed new value, IR_NONE until needed */
    bool *constant;            /* computed from fills and iotas alone */
    uint32_t *const_key;       /* the region (UINT32_MAX: backward) const_copy[v] serves */
    ir_value *const_copy;
} recompute_ctx;

/* v is recomputed for the backward pass (rather than kept). */
static bool in_region(const recompute_ctx *c, ir_value v)
{
    const ir_node *n = &c->g->nodes[v];
    if (v > c->boundary || nc_ops[n->op].category == CAT_SOURCE) return false;
    return c->chosen ? c->chosen[v] : n->region != 0;
}

static ir_value emit_args(recompute_ctx *c, const ir_node *n, bool backward, uint8_t extra_flags);

/* The recomputed copy of v: operands inside the same region are copied too,
 * anything else (the region's inputs) is read as it was kept. */
static ir_value recomputed(recompute_ctx *c, ir_value v)
{
    if (c->copy[v] == IR_NONE) c->copy[v] = emit_args(c, &c->g->nodes[v], true, IR_FLAG_RECOMPUTE);
    return c->copy[v];
}

/* Constants (a causal mask, a broadcast fill) are computed again in each
 * region and once for the backward pass: CSE merged the copies of every
 * layer into one value, which would otherwise stay alive across every cut.
 * Only a forward value made again is marked `recompute`: the backward
 * pass's own constants (the gradient's seed, a fill of 1 and its broadcast)
 * are computed once either way, at their first use. */
static ir_value constant_in(recompute_ctx *c, ir_value a, uint32_t key)
{
    if (c->const_key[a] == key) return c->const_copy[a];
    const ir_node *n = &c->g->nodes[a];
    ir_value small[16] = {0};
    ir_value *args = n->nargs <= 16 ? small : nc_xmalloc(n->nargs * sizeof *args);
    for (int i = 0; i < n->nargs; i++) args[i] = constant_in(c, ir_args(c->g, n)[i], key);
    ir_node p = *n;
    if (a <= c->boundary) p.flags |= IR_FLAG_RECOMPUTE;
    c->const_copy[a] = ir_add(c->out, &p, args, n->nargs);
    c->const_key[a] = key;
    if (args != small) free(args);
    return c->const_copy[a];
}

static ir_value operand(recompute_ctx *c, const ir_node *user, ir_value a, bool backward, bool copying)
{
    if (c->constant[a] && (backward || copying || (user->region && user->region != c->g->nodes[a].region)))
        return constant_in(c, a, backward || copying ? UINT32_MAX : user->region);
    /* a copy's operand is copied too when it is recomputed as well (within
     * the same @checkpoint region: a region keeps its inputs) */
    if (copying) return in_region(c, a) && (c->chosen || c->g->nodes[a].region == user->region) ? recomputed(c, a) : c->map[a];
    return backward && in_region(c, a) ? recomputed(c, a) : c->map[a];
}

static ir_value emit_args(recompute_ctx *c, const ir_node *n, bool backward, uint8_t extra_flags)
{
    ir_value small[16] = {0};
    ir_value *args = n->nargs <= 16 ? small : nc_xmalloc(n->nargs * sizeof *args);
    for (int i = 0; i < n->nargs; i++) args[i] = operand(c, n, ir_args(c->g, n)[i], backward, extra_flags != 0);
    ir_node p = *n;
    p.flags |= extra_flags;
    ir_value r = ir_add(c->out, &p, args, n->nargs);
    if (args != small) free(args);
    return r;
}

static ir_graph *apply(const ir_graph *g, const bool *chosen)
{
    recompute_ctx c = {.g = g, .out = ir_graph_shell(g), .boundary = g->train.loss, .chosen = chosen};
    size_t n = g->nnodes + 1;
    c.map = nc_xmalloc(n * sizeof *c.map);
    c.copy = nc_xmalloc(n * sizeof *c.copy);
    c.constant = ir_constant_values(g);
    c.const_key = nc_xmalloc(n * sizeof *c.const_key);
    c.const_copy = nc_xmalloc(n * sizeof *c.const_copy);
    for (ir_value v = 0; v < g->nnodes; v++) {
        c.copy[v] = IR_NONE;
        c.const_key[v] = 0;   /* no region has key 0: forward uses outside regions read the original */
    }
    for (ir_value v = 0; v < g->nnodes; v++) c.map[v] = emit_args(&c, &g->nodes[v], v > c.boundary, 0);
    ir_graph_finish(c.out, g, c.map);
    free(c.map);
    free(c.copy);
    free(c.constant);
    free(c.const_key);
    free(c.const_copy);
    return c.out;
}

static bool is_training_step(const ir_graph *g)
{
    return g->train.present && g->train.loss != IR_NONE && g->nupdates;
}

ir_graph *recompute_values(const ir_graph *g, const bool *chosen, const pass_ctx *cx)
{
    ir_graph *out = is_training_step(g) ? apply(g, chosen) : NULL;
    pass_ctx quiet = {.err = cx->err};
    if (out && !pass_dce(&out, &quiet)) {
        ir_graph_free(out);
        out = NULL;
    }
    return out;
}

/* One line per region: how many of its values the backward pass recomputes. */
static void report_regions(const ir_graph *out, FILE *report)
{
    uint32_t nregions = 0;
    for (ir_value v = 0; v < out->nnodes; v++)
        if (out->nodes[v].region > nregions) nregions = out->nodes[v].region;
    uint32_t *count = nc_xcalloc(nregions + 1, sizeof *count);
    ir_value *first = nc_xmalloc((nregions + 1) * sizeof *first);
    for (uint32_t r = 0; r <= nregions; r++) first[r] = IR_NONE;
    for (ir_value v = 0; v < out->nnodes; v++) {
        uint32_t r = out->nodes[v].region;
        if (!(out->nodes[v].flags & IR_FLAG_RECOMPUTE)) continue;
        count[r]++;
        if (first[r] == IR_NONE) first[r] = v;
    }
    for (uint32_t r = 0; r <= nregions; r++)
        if (count[r] && r == 0) {
            fprintf(report, "recompute: %u constant values (fills, iotas, masks) made again where used instead of kept\n",
                    count[r]);
        } else if (count[r]) {
            char w[128];
            fprintf(report, "recompute: @checkpoint region %u (%s): %u values computed again for the backward pass\n", r,
                    pass_where(out, &out->nodes[first[r]], w, sizeof w), count[r]);
        }
    free(count);
    free(first);
}

bool pass_recompute(ir_graph **gp, const pass_ctx *cx)
{
    const ir_graph *g = *gp;
    bool any = false;
    for (ir_value v = 0; v < g->nnodes && !any; v++) any = g->nodes[v].region != 0;
    if (!is_training_step(g) || !any) return true;
    ir_graph *out = apply(g, NULL);
    ir_graph_free(*gp);
    *gp = out;
    pass_ctx quiet = {.err = cx->err};
    if (!pass_dce(gp, &quiet)) return false;
    if (cx->report) report_regions(*gp, cx->report);
    return true;
}
